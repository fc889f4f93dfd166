#!/usr/bin/env python3
"""Writes the lines of a log as journal export entries of one systemd unit, for
systemd-journal-remote to turn into a journal file (see bench/journal.sh).

Usage: genjournal.py --log FILE --entries N [--unit sglang-bench.service] > export.txt

Each entry carries what journald gives a service's stdout line (boot, host, transport, priority,
identifier, PID, unit, invocation) and the line as MESSAGE; times start at 2026-06-03 10:00 UTC
and step 100 µs. Same log and count, same bytes.
"""

import argparse
import sys

BOOT = "6f1c2a9e4b7d4e0fa3c85d1e2b9f7a64"
INVOCATION = "5b1e0c2d3f4a4b6c8d9e0f1a2b3c4d5e"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--entries", type=int, required=True)
    ap.add_argument("--unit", default="sglang-bench.service")
    a = ap.parse_args()
    out = sys.stdout.buffer
    t0 = 1_780_480_800_000_000
    n = 0
    with open(a.log, "rb") as f:
        for line in f:
            if n == a.entries:
                break
            msg = line.rstrip(b"\n")
            t = t0 + n * 100
            out.write(
                b"__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=%s\n"
                b"_HOSTNAME=gpu-node-1\n_TRANSPORT=stdout\nPRIORITY=6\n"
                b"SYSLOG_IDENTIFIER=python3\n_PID=48213\n_SYSTEMD_UNIT=%s\n"
                b"_SYSTEMD_INVOCATION_ID=%s\nMESSAGE=%s\n\n"
                % (t, t - 1_770_000_000_000_000, BOOT.encode(), a.unit.encode(),
                   INVOCATION.encode(), msg)
            )
            n += 1
    if n < a.entries:
        sys.exit(f"the log has only {n} lines")


if __name__ == "__main__":
    main()
