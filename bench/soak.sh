#!/usr/bin/env bash
# Soak run: the release exporter for an hour (by default) following a rotated file, a journald
# unit whose journalctl child is killed every 10 minutes, pushing to a Pushgateway that is down
# 20 s every 3 minutes, scraped every second. Figures every minute in $dir/soak.csv, a start/end
# table at the end; exit 1 on a lost or doubled line, a crash or a bad exit. Not part of CI.
#
# Usage: bench/soak.sh [--duration 1h] [--dir /tmp/sglang-soak] [--bin PATH]
#                      [--rotate-every 60s] [--kill-every 10m] [--flap-every 3m] [--flap-down 20s]
# Needs the Debian packages systemd-journal-remote, systemd (journalctl), prometheus-pushgateway,
# procps (pgrep) and python3. Run it in the background, e.g.
#   nohup nice -n 10 bench/soak.sh > /tmp/soak.out 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/sglang-log-exporter
for ((i = 1; i <= $#; i++)); do
  [[ ${!i} == --bin ]] && { j=$((i + 1)); bin=${!j}; }
done
if [[ $bin == target/release/sglang-log-exporter ]]; then
  cargo build --release --quiet
  set -- --bin "$bin" "$@"
fi
exec python3 bench/soak.py "$@"
