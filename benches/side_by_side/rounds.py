"""The rows of rounds.sh's OUT, build A beside build B: the medians of each build's p50 and
server time, and the median of the per-round ratios A / B with their interquartile range.

    python3 benches/side_by_side/rounds.py OUT A B
"""
import collections
import re
import statistics
import sys

out, a, b = sys.argv[1:4]
rows = collections.defaultdict(dict)  # (round, build) -> row -> (p50, server time)
at = None
for line in open(out):
    if line.startswith("###"):
        _, number, build = line.split()
        at = (int(number), build)
        continue
    cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
    if len(cells) >= 7 and re.fullmatch(r"[\d.]+", cells[1]):
        rows[at][cells[0]] = (float(cells[1]), float(cells[6]))
rounds = sorted({number for number, _ in rows})


def quartiles(values):
    values = sorted(values)
    return values[len(values) // 4], statistics.median(values), values[3 * len(values) // 4]


print(f"{len(rounds)} rounds\n")
print(f"| row | {a} p50 µs | {b} p50 µs | p50 {a}/{b} [IQR] | server time {a} µs "
      f"| server time {b} µs | server time {a}/{b} [IQR] |")
print("|---|---:|---:|---:|---:|---:|---:|")
for row in rows[(rounds[0], a)]:
    series = {(build, i): [rows[(r, build)][row][i] for r in rounds] for build in (a, b)
              for i in (0, 1)}
    p50 = quartiles([x / y for x, y in zip(series[(a, 0)], series[(b, 0)])])
    server = quartiles([x / y for x, y in zip(series[(a, 1)], series[(b, 1)])])
    print(f"| {row} | {statistics.median(series[(a, 0)]):.1f} "
          f"| {statistics.median(series[(b, 0)]):.1f} "
          f"| {p50[1]:.3f} [{p50[0]:.3f}–{p50[2]:.3f}] "
          f"| {statistics.median(series[(a, 1)]):.1f} | {statistics.median(series[(b, 1)]):.1f} "
          f"| {server[1]:.3f} [{server[0]:.3f}–{server[2]:.3f}] |")
