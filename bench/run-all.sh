#!/usr/bin/env bash
# Every benchmark in one command: the divan hot-path bench, compare.sh on 100 MiB and 1 GiB, and
# live.py (latency, idle CPU, memory after 1 GiB, a rotation run), journal.py (journald start-up)
# and threads.sh (--threads 0 against 1).
#
# Usage: bench/run-all.sh [--quick]
#   --quick: 100 MiB only, 3 runs, 50 latency samples, 10 s idle, 30 s rotation (a few minutes).
# Generated logs go to /tmp/sglang-bench (override with SGLANG_BENCH_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${SGLANG_BENCH_DIR:-/tmp/sglang-bench}"
quick=0
[[ "${1:-}" == --quick ]] && quick=1

cargo build --release --quiet
bin=target/release/sglang-log-exporter

echo "== hot path (divan)"
cargo bench --quiet --bench hot_path

if ((quick)); then
  echo "== compare, 100 MiB"
  bench/compare.sh --size 100M --reps 3 --dir "$dir" --bin "$bin"
  echo "== live"
  python3 bench/live.py --bin "$bin" --dir "$dir" --phases latency,idle,rotation \
    --samples 50 --idle-seconds 10 --rotation-seconds 30
  echo "== journald start-up, 200,000 entries"
  python3 bench/journal.py --bin "$bin" --dir "$dir" --entries 200000 --reps 1
  echo "== --threads 0 against 1, 100 MiB"
  bench/threads.sh --size 100M --reps 3 --dir "$dir" --bin "$bin"
else
  echo "== compare, 100 MiB"
  bench/compare.sh --size 100M --reps 5 --dir "$dir" --bin "$bin"
  echo "== compare, 1 GiB (mtail and python once: minutes each)"
  bench/compare.sh --size 1G --reps 3 --slow-reps 1 --dir "$dir" --bin "$bin"
  echo "== live"
  python3 bench/live.py --bin "$bin" --dir "$dir" --big "$dir/mixed-1G-seed42.log"
  echo "== journald start-up, 1,000,000 entries"
  python3 bench/journal.py --bin "$bin" --dir "$dir" --reps 3
  echo "== --threads 0 against 1, 100 MiB and 1 GiB"
  bench/threads.sh --size 100M --reps 7 --dir "$dir" --bin "$bin"
  bench/threads.sh --size 1G --reps 3 --dir "$dir" --bin "$bin"
fi
