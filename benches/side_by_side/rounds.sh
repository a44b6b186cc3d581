#!/bin/bash
# Two or more server builds side by side: ROUNDS rounds, in each the builds one after the
# other through the stdio bench, pinned to one CPU; the bench's table rows go to OUT, for
# rounds.py.
#
#   benches/side_by_side/rounds.sh OUT ROUNDS NAME=BINARY NAME=BINARY...
# BENCH is the stdio_roundtrip bench binary (default: the newest in target/release/deps).
set -euo pipefail
out=$1 rounds=$2
shift 2
bench=${BENCH:-$(ls -t target/release/deps/stdio_roundtrip-* | grep -v '\.d$' | head -1)}
: >"$out"
for round in $(seq "$rounds"); do
    for pair in "$@"; do
        echo "### $round ${pair%%=*}" >>"$out"
        BENCH_SERVER=${pair#*=} BENCH_ONLY=add_task,legacy,extension BENCH_N=3000 \
            BENCH_RUNS=500 taskset -c 0 "$bench" --bench 2>&1 | grep '^|' >>"$out"
    done
done
