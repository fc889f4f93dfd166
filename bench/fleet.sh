#!/usr/bin/env bash
# What one exporter costs a fleet: series, scrape size (plain and gzip) and scrape time for an
# 8-GPU PD node, and RSS, CPU and scrape latency (1 and 20 concurrent scrapers) with 64 followed
# pod logs and 256 ranks; totals for 1,000 nodes. See bench/README.md ("Fleet scale").
#
#   bench/fleet.sh                  # release build, 200 scrapes per measure
#   bench/fleet.sh --scrapes 50     # quicker
#
# Generated logs go to $SGLANG_BENCH_DIR (default /tmp/sglang-fleet), never into the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
exec python3 bench/fleet.py --bin target/release/sglang-log-exporter "$@"
