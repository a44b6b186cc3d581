#!/bin/bash
# Instructions a call costs a server, under callgrind, start-up subtracted: the totals
# after N1 and after N2 calls (drive.py), their difference divided by N2 - N1.
#
#   benches/side_by_side/instructions.sh BINARY KIND N1 N2    # KIND: add_task, get, task
set -euo pipefail
binary=$1 kind=$2 n1=$3 n2=$4
here=$(dirname "$0")
total() {
    local out
    out=$(mktemp)
    python3 "$here/drive.py" "$kind" "$1" -- \
        valgrind --tool=callgrind --callgrind-out-file="$out" "$binary" >/dev/null 2>&1
    grep '^summary:' "$out" | awk '{print $2}'
    rm -f "$out"
}
a=$(total "$n1")
b=$(total "$n2")
echo "$kind $binary: $(((b - a) / (n2 - n1))) instructions a call"
