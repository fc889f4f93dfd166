#!/usr/bin/env bash
# `--threads 0` (the default) against `--threads 1`, both unpinned, runs alternating: wall and CPU
# (user + system) medians of `sglang-log-exporter --once` on the generated mixed log of --size.
#
# Usage: bench/threads.sh [--size 100M] [--reps 7] [--dir /tmp/sglang-bench] [--bin PATH]
# The goal (issue 27): the default at most 1.1x the wall time of one thread, on any size.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
size=100M reps=7 dir="${SGLANG_BENCH_DIR:-/tmp/sglang-bench}" bin=""
while (($#)); do
  case "$1" in
    --size) size="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ -z "$bin" ]]; then
  (cd "$root" && cargo build --release --quiet)
  bin="$root/target/release/sglang-log-exporter"
fi
[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 2; }
mkdir -p "$dir"
log="$dir/mixed-$size-seed42.log"
if [[ ! -s "$log" ]]; then
  python3 "$here/genlog.py" --size "$size" --out "$log.tmp"
  mv "$log.tmp" "$log"
fi
cat "$log" > /dev/null
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for ((i = 0; i < reps; i++)); do
  for t in 1 0; do
    /usr/bin/time -f "$t %e %U %S" -a -o "$out" "$bin" --once --gpu.disable --log.level warn \
      --threads "$t" "$log" > /dev/null
  done
done
python3 - "$out" "$size" "$reps" <<'PY'
import statistics, sys
runs = {"1": [], "0": []}
for line in open(sys.argv[1]):
    t, wall, user, sys_ = line.split()
    runs[t].append((float(wall), float(user) + float(sys_)))
print(f"{sys.argv[2]}, {sys.argv[3]} runs each, alternating, medians")
print("| --threads | wall s | CPU s | wall / --threads 1 |")
print("|---|---:|---:|---:|")
one = statistics.median(w for w, _ in runs["1"])
for t in ("1", "0"):
    w = statistics.median(x for x, _ in runs[t])
    c = statistics.median(x for _, x in runs[t])
    each = ", ".join(f"{x:.2f}" for x, _ in runs[t])
    print(f"| {t} | {w:.2f} | {c:.2f} | {w / one:.2f} | (wall: {each})")
PY
