#!/usr/bin/env bash
# Throughput and peak memory of sglang-log-exporter --once beside wc -l, grep -c batch, mtail
# --one_shot (bench/sglang.mtail) and a Python re + prometheus_client script (bench/baseline.py),
# on one generated mixed log, runs alternating, medians reported.
#
# Usage: bench/compare.sh [--size 100M] [--reps 5] [--slow-reps N] [--seed 42] [--access F]
#                         [--dir /tmp/sglang-bench] [--bin PATH] [--cpu N|none]
#                         [--only "wc grep ours ours-mt mtail python"]
# --slow-reps (default: --reps) caps the runs of mtail and python, which take minutes on 1 GiB.
# `ours` runs pinned to one CPU (so it parses on one thread); `ours-mt` is the same command
# unpinned, parsing on every core (`--threads 0`): compare their wall times.
# --access F: the generated log's share of access lines (default genlog.py's 0.60; 0.9 is a
# busy server's log). The log is generated once per size, seed and share under --dir and
# reused. Every tool runs pinned to one CPU (--cpu, default 0) with taskset. Exits non-zero only
# if our exporter fails or prints no exposition: the timings are reported, never judged (the
# machines are noisy).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"

size=100M reps=5 slow_reps="" seed=42 access="" dir=/tmp/sglang-bench bin="" cpu=0 only="wc grep ours ours-mt mtail python"
while (($#)); do
  case "$1" in
    --size) size="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --slow-reps) slow_reps="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --access) access="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --bin) bin="$2"; shift 2 ;;
    --cpu) cpu="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [[ -z "$bin" ]]; then
  (cd "$root" && cargo build --release --quiet)
  bin="$root/target/release/sglang-log-exporter"
fi
bin="$(realpath "$bin")" # the tools run in the output folder
[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time (Debian package time)" >&2; exit 2; }

mkdir -p "$dir"
log="$dir/mixed-$size-seed$seed${access:+-access$access}.log"
if [[ ! -s "$log" ]]; then
  python3 "$here/genlog.py" --size "$size" --seed "$seed" ${access:+--access "$access"} --out "$log.tmp"
  mv "$log.tmp" "$log"
fi
bytes=$(stat -c %s "$log")
lines=$(wc -l < "$log")
cat "$log" > /dev/null # into the page cache: we measure parsing, not the disk

pin=()
if [[ "$cpu" != none ]] && command -v taskset >/dev/null; then pin=(taskset -c "$cpu"); fi

tools=()
for t in $only; do
  case "$t" in
    mtail) command -v mtail >/dev/null || { echo "note: mtail not installed; skipped" >&2; continue; } ;;
    python) python3 -c 'import prometheus_client' 2>/dev/null ||
      { echo "note: python3 prometheus_client missing (pip install prometheus_client); skipped" >&2; continue; } ;;
  esac
  tools+=("$t")
done

cmd_of() {
  case "$1" in
    wc) echo "wc -l $log" ;;
    grep) echo "grep -c batch $log" ;;
    ours) echo "$bin --once $log" ;;
    ours-mt) echo "$bin --once --threads 0 $log" ;;
    mtail) echo "mtail --one_shot --one_shot_format prometheus --logtostderr --progs $here/sglang.mtail --logs $log" ;;
    python) echo "python3 $here/baseline.py $log" ;;
  esac
}

out="$dir/compare-out"
mkdir -p "$out"
results="$out/results.tsv"
: > "$results"
for ((r = 1; r <= reps; r++)); do
  for t in "${tools[@]}"; do
    if [[ ("$t" == mtail || "$t" == python) && $r -gt ${slow_reps:-$reps} ]]; then continue; fi
    # shellcheck disable=SC2046
    p=("${pin[@]}")
    [[ "$t" != ours-mt ]] || p=()
    if ! (cd "$out" && "${p[@]}" /usr/bin/time -f '%e %U %S %M' -o "$out/$t.time" $(cmd_of "$t") > "$out/$t.out" 2> "$out/$t.err"); then
      # grep -c exits 1 when it counts 0; anything else failing is reported below.
      [[ "$t" == grep ]] || { echo "$t failed:" >&2; tail -5 "$out/$t.err" >&2; [[ "$t" != ours* ]] || exit 1; continue; }
    fi
    echo "$t $(tail -1 "$out/$t.time")" >> "$results"
  done
done

if ! grep -q '^sglang:num_running_reqs{' "$out/ours.out"; then
  echo "our exposition lacks sglang:num_running_reqs (see $out/ours.out)" >&2
  exit 1
fi

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), nproc $(nproc), $(uname -m), file $log: $bytes bytes, $lines lines, $reps runs each (mtail, python: ${slow_reps:-$reps}), alternating, pinned: ${pin[*]:-no}"
python3 - "$results" "$bytes" "$lines" <<'EOF'
import statistics, sys
path, nbytes, nlines = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
runs = {}
for row in open(path):
    t, wall, user, sys_, kb = row.split()
    runs.setdefault(t, []).append((float(wall), float(user) + float(sys_), int(kb)))
wall = {t: max(statistics.median(r[0] for r in v), 0.005) for t, v in runs.items()}
cpu = {t: max(statistics.median(r[1] for r in v), 0.005) for t, v in runs.items()}
# Wall time on a shared machine includes waiting for the CPU; CPU time (user + sys) does not, so
# the rates and the ratio use it. Times under 10 ms are below /usr/bin/time's resolution.
print(f"{'tool':<7} {'wall s':>8} {'CPU s':>8} {'MB/s':>8} {'lines/s':>12} {'peak RSS MiB':>12} {'CPU/ours':>9}")
for t, v in runs.items():
    rss = max(r[2] for r in v) / 1024
    ratio = f"{cpu[t] / cpu['ours']:.2f}" if "ours" in cpu else "-"
    print(f"{t:<7} {wall[t]:>8.3f} {cpu[t]:>8.3f} {nbytes / cpu[t] / 1e6:>8.0f} {nlines / cpu[t]:>12,.0f} {rss:>12.1f} {ratio:>9}")
print("MB/s and lines/s are per CPU second (median); CPU/ours: that tool's CPU time over ours (above 1: we are that many times faster).")
EOF
