#!/usr/bin/env python3
"""CPU cost of `sglang-log-exporter top` refreshing every second while following a busy log.

Usage: top-cpu.py --bin target/release/sglang-log-exporter [--seconds 60] [--rate 1000]
                  [--interval 1s] [--phases top,exporter,url] [--dir /tmp/sglang-bench]

A writer appends --rate lines/s to a log (the compare mix: decode stats lines of DP0-7, prefill
lines, uvicorn access lines, start-up noise), in batches every 50 ms. Each phase runs its
process for 3 s of warm-up, then reads utime + stime from /proc/PID/stat over --seconds:

* top: `top LOG` in a real terminal (tmux, 100x30), refreshing every --interval;
* exporter: the main mode following the same log without an HTTP server (`--web.listen-address
  ''`): the part of top's cost that is reading and parsing the log;
* url: `top --url` scraping an exporter that follows the log (top's own cost, no parsing).

Prints CPU seconds and the share of one core per phase. Needs tmux and python3.
"""

import argparse
import os
import socket
import subprocess
import sys
import threading
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def lines_for(i):
    """The i-th line of the mix (10 % decode, 2 % prefill, 60 % access, the rest noise)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    r, dp = i % 100, i % 8
    if r < 10:
        return (
            f"[{stamp} DP{dp} TP{dp}] Decode batch, #running-req: {20 + i % 13}, #token: {9000 + i % 5000}, "
            f"token usage: 0.{10 + i % 80:02d}, cuda graph: True, gen throughput (token/s): {1500 + i % 300}.25, "
            f"#queue-req: {i % 4}\n"
        )
    if r < 12:
        return (
            f"[{stamp} DP{dp} TP{dp}] Prefill batch, #new-seq: 1, #new-token: 2048, #cached-token: 512, "
            f"token usage: 0.20, #running-req: 20, #queue-req: 1, input throughput (token/s): 8123.50\n"
        )
    if r < 72:
        return f'[{stamp}] INFO:     127.0.0.1:{40000 + i % 20000} - "POST /generate HTTP/1.1" 200 OK\n'
    return f"[{stamp} DP{dp} TP{dp}] Cache flushed successfully! elapsed=0.01 s\n"


class Writer(threading.Thread):
    """Appends `rate` lines/s to `path` until stopped; counts what it wrote."""

    def __init__(self, path, rate):
        super().__init__(daemon=True)
        self.path, self.rate, self.written = path, rate, 0
        self.stop = threading.Event()

    def run(self):
        start = time.monotonic()
        with open(self.path, "a", buffering=1 << 16) as f:
            while not self.stop.is_set():
                due = int((time.monotonic() - start) * self.rate)
                f.write("".join(lines_for(i) for i in range(self.written, due)))
                f.flush()
                self.written = due
                time.sleep(0.05)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def measure(pid, seconds):
    time.sleep(3)
    a = cpu_seconds(pid)
    time.sleep(seconds)
    return cpu_seconds(pid) - a


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_tmux(args, name):
    """Runs args in a detached 100x30 tmux session of its own; returns (socket, pid)."""
    sock = f"sglang-top-bench-{os.getpid()}-{name}"
    cmd = "exec env TZ=UTC " + " ".join(f"'{a}'" for a in args)
    subprocess.run(["tmux", "-L", sock, "-f", "/dev/null", "new-session", "-d", "-s", "b",
                    "-x", "100", "-y", "30", cmd], check=True)
    out = subprocess.run(["tmux", "-L", sock, "list-panes", "-t", "b", "-F", "#{pane_pid}"],
                         check=True, capture_output=True, text=True)
    return sock, int(out.stdout.split()[0])


def screen(sock):
    return subprocess.run(["tmux", "-L", sock, "capture-pane", "-p", "-t", "b"],
                          capture_output=True, text=True).stdout


def phase_top(a, log):
    sock, pid = in_tmux([a.bin, "top", "--gpu.disable", "--interval", a.interval, log], "top")
    try:
        cpu = measure(pid, a.seconds)
        shown = "DP7 TP7" in screen(sock)
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"])
    return cpu, shown


def phase_exporter(a, log):
    p = subprocess.Popen([a.bin, "--web.listen-address", "", "--gpu.disable", "--log.level", "warn", log])
    try:
        return measure(p.pid, a.seconds), True
    finally:
        p.terminate()
        p.wait()


def phase_url(a, log):
    port = free_port()
    e = subprocess.Popen([a.bin, "--web.listen-address", f"127.0.0.1:{port}", "--gpu.disable",
                          "--log.level", "warn", log])
    try:
        time.sleep(1)
        url = f"http://127.0.0.1:{port}/metrics"
        sock, pid = in_tmux([a.bin, "top", "--interval", a.interval, "--url", url], "url")
        try:
            cpu = measure(pid, a.seconds)
            shown = "DP7 TP7" in screen(sock)
        finally:
            subprocess.run(["tmux", "-L", sock, "kill-server"])
        return cpu, shown
    finally:
        e.terminate()
        e.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default="target/release/sglang-log-exporter")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--rate", type=int, default=1000, help="lines per second written")
    p.add_argument("--interval", default="1s")
    p.add_argument("--phases", default="top,exporter,url")
    p.add_argument("--dir", default=os.environ.get("SGLANG_BENCH_DIR", "/tmp/sglang-bench"))
    a = p.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    phases = {"top": phase_top, "exporter": phase_exporter, "url": phase_url}
    print(f"{a.rate} lines/s appended, refresh every {a.interval}, {a.seconds:.0f} s measured per phase")
    print(f"{'phase':<10} {'CPU s':>7} {'% of a core':>12}  screen")
    for name in a.phases.split(","):
        log = os.path.join(a.dir, f"top-busy-{name}.log")
        open(log, "w").close()
        w = Writer(log, a.rate)
        w.start()
        try:
            cpu, shown = phases[name](a, log)
        finally:
            w.stop.set()
            w.join()
        pct = 100 * cpu / a.seconds
        note = "" if name == "exporter" else ("ranks shown" if shown else "NO RANKS ON SCREEN")
        print(f"{name:<10} {cpu:>7.2f} {pct:>11.2f}%  {note}")
        os.remove(log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
