#!/usr/bin/env python3
"""Journald start-up benchmark: a unit of --entries entries (default 1,000,000) written into real
journal files by systemd-journal-remote, then, runs alternating, medians reported:

* `journalctl -o export` and `-o json` alone (the arguments the exporter gives its child: the
  unit, the directory, --output-fields), stdout to /dev/null;
* `sglang-log-exporter --once --journal-unit U --journal-directory D` (its journalctl included:
  the CPU times are the process and the children it waited for);
* the time to a full /metrics after a restart, following: the exporter started, timed until it
  logs "caught up with the journal's entries at start" and /metrics counts every entry; once
  without a state file (the whole invocation read) and once with --state.dir after a run that
  read everything (resumed after the saved cursor).

Usage: bench/journal.py [--entries 1000000] [--reps 3] [--dir /tmp/sglang-bench] [--bin PATH]
Needs python3, systemd-journal-remote (Debian package) and journalctl. CPU times are user +
system from getrusage of the waited-for children: on a shared machine wall time also counts
waiting for a CPU.
"""

import argparse
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
UNIT = "sglang-bench.service"
REMOTE = "/lib/systemd/systemd-journal-remote"
FIELDS = "--output-fields=MESSAGE,_SYSTEMD_UNIT,_SYSTEMD_INVOCATION_ID"


def journal(dirpath, entries):
    """The journal directory of `entries` entries (generated once)."""
    jdir = os.path.join(dirpath, f"journal-{entries}")
    done = os.path.join(jdir, ".done")
    if os.path.exists(done):
        return jdir
    shutil.rmtree(jdir, ignore_errors=True)
    os.makedirs(jdir)
    log = os.path.join(dirpath, "mixed-100M-seed42.log")
    if not os.path.exists(log):
        subprocess.run([sys.executable, os.path.join(HERE, "genlog.py"), "--size", "100M",
                        "--out", log + ".tmp"], check=True)
        os.rename(log + ".tmp", log)
    gen = subprocess.Popen([sys.executable, os.path.join(HERE, "genjournal.py"), "--log", log,
                            "--entries", str(entries), "--unit", UNIT], stdout=subprocess.PIPE)
    subprocess.run([REMOTE, f"--output={jdir}/bench.journal", "-"], stdin=gen.stdout,
                   check=True, stderr=subprocess.DEVNULL)
    if gen.wait() != 0:
        sys.exit("genjournal.py failed")
    open(done, "w").close()
    return jdir


def timed(cmd):
    """Runs `cmd` (stdout discarded): (wall s, CPU s of it and its waited-for children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    out = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        sys.exit(f"{cmd[0]} failed: {out.stderr.decode(errors='replace')[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def entries_read(port):
    """sglang_log_exporter_lines_read_total of the unit's source, or None."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return None
    m = re.search(r'^sglang_log_exporter_lines_read_total\{source="journald:%s"\} (\S+)$'
                  % re.escape(UNIT), text, re.M)
    return float(m.group(1)) if m else None


def follow(binary, jdir, state, want):
    """Starts the exporter following the unit; returns (s to the "caught up" log line, s to a
    /metrics that counts `want` lines) and stops it with SIGTERM (the state file written)."""
    port = free_port()
    args = [binary, "--gpu.disable", "--journal-unit", UNIT, "--journal-directory", jdir,
            "--web.listen-address", f"127.0.0.1:{port}", "--log.level", "info"]
    if state:
        args += ["--state.dir", state]
    err = tempfile.TemporaryFile()
    t = time.monotonic()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
    caught = full = None
    try:
        while time.monotonic() - t < 600:
            if caught is None:
                err.seek(0)
                if b"caught up with the journal's entries at start" in err.read():
                    caught = time.monotonic() - t
            if full is None and entries_read(port) == want:
                full = time.monotonic() - t
            if caught is not None and full is not None:
                break
            time.sleep(0.05)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait()
    err.seek(0)
    log = err.read().decode(errors="replace")
    if caught is None or full is None:
        sys.exit(f"the exporter did not catch up: {log[-1000:]}")
    return caught, full, log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=os.environ.get("SGLANG_BENCH_DIR", "/tmp/sglang-bench"))
    ap.add_argument("--bin", default="")
    a = ap.parse_args()
    binary = a.bin
    if not binary:
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
        binary = os.path.join(ROOT, "target/release/sglang-log-exporter")
    os.makedirs(a.dir, exist_ok=True)
    jdir = journal(a.dir, a.entries)
    common = ["--all", "--no-pager", "--quiet", FIELDS, f"--directory={jdir}", f"--unit={UNIT}"]
    tools = {
        "journalctl -o export": ["journalctl", "--output=export"] + common,
        "journalctl -o json": ["journalctl", "--output=json"] + common,
        "ours --once": [binary, "--once", "--gpu.disable", "--log.level", "warn",
                        "--journal-unit", UNIT, "--journal-directory", jdir],
    }
    got = {k: [] for k in tools}
    for _ in range(a.reps):
        for k, cmd in tools.items():
            got[k].append(timed(cmd))
    print(f"{a.entries} entries of {UNIT} in {jdir}; {a.reps} runs each, alternating, medians")
    print("| run | wall s | CPU s (user+sys) | CPU / journalctl -o export |")
    print("|---|---:|---:|---:|")
    base = statistics.median(c for _, c in got["journalctl -o export"])
    for k, runs in got.items():
        w = statistics.median(x for x, _ in runs)
        c = statistics.median(x for _, x in runs)
        print(f"| {k} | {w:.2f} | {c:.2f} | {c / base:.2f} |")
        print(f"|   (each: {', '.join(f'{x:.2f}/{y:.2f}' for x, y in runs)} wall/CPU) | | | |")
    with tempfile.TemporaryDirectory() as state:
        cold = follow(binary, jdir, None, a.entries)
        first = follow(binary, jdir, state, a.entries)
        resumed = follow(binary, jdir, state, 0)
        # A resumed start reads nothing new here: its lines counter is 0 (see the README).
        print("| following, to the start-up catch-up | to 'caught up' s | to full /metrics s |")
        print("|---|---:|---:|")
        print(f"| no state file (whole invocation) | {cold[0]:.2f} | {cold[1]:.2f} |")
        print(f"| --state.dir, first start | {first[0]:.2f} | {first[1]:.2f} |")
        print(f"| --state.dir, restart (resumed) | {resumed[0]:.2f} | {resumed[1]:.2f} |")
        if "resuming after the last entry read" not in resumed[2]:
            sys.exit("the restart did not resume: " + resumed[2][-1000:])


if __name__ == "__main__":
    main()
