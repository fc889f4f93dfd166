#!/usr/bin/env python3
"""Live costs of sglang-log-exporter following files: append-to-visible latency, idle CPU, and
resident memory after reading a big file and over a rotation run.

Usage: live.py --bin target/release/sglang-log-exporter [--phases latency,idle,memory,rotation]
               [--samples 200] [--idle-seconds 60] [--big FILE] [--rotation-seconds 120]
               [--rotate-every 10] [--rate 2000] [--dir /tmp/sglang-bench]

* latency: appends a decode stats line with a new `#running-req` value to a followed file and
  polls /metrics until the new value shows; --samples times; prints p50/p90/p99/max in ms.
* idle: CPU seconds (utime + stime of /proc/PID/stat) the exporter uses following an idle file
  for --idle-seconds (no scrapes meanwhile), scaled to per minute.
* memory: follows --big (bench/compare.sh makes one), waits until every line is read, prints
  VmRSS and VmHWM.
* rotation: a writer appends --rate lines/s (the compare mix) and renames the file away every
  --rotate-every seconds for --rotation-seconds (the issue asks for 10 minutes; default 2);
  prints VmRSS every rotation and checks that every written line was read.
Each exporter is started on 127.0.0.1 with a free port and stopped at the end of its phase.
"""

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

CLK_TCK = os.sysconf("SC_CLK_TCK")
DECODE = (
    "[2026-06-03 10:01:50 DP0 TP0] Decode batch, #running-req: {n}, #token: 8156, token usage: 0.01, "
    "pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, "
    "gen throughput (token/s): 42.27, #queue-req: 0\n"
)
ACCESS = '[2026-06-03 10:00:26] INFO:     127.0.0.1:44941 - "POST /generate HTTP/1.1" 200 OK\n'
NOISE = "[2026-06-03 09:57:58 DP1 TP1] Init torch distributed ends. elapsed=4.58 s, mem usage=1.19 GB\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Exporter:
    """The exporter following `path` on a free port."""

    def __init__(self, binary, path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self.proc = subprocess.Popen(
            [binary, "--web.listen-address", f"127.0.0.1:{self.port}", "--log.level", "warn", path],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                self.scrape()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the exporter did not start serving /metrics")
                time.sleep(0.05)

    def scrape(self):
        with urllib.request.urlopen(self.url, timeout=5) as r:
            return r.read().decode()

    def counter(self, name):
        """Sum of all series of `name` in one scrape."""
        total = 0.0
        for line in self.scrape().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime

    def status_kib(self, key):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def wait_for(pred, seconds, what):
    deadline = time.monotonic() + seconds
    while not pred():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def latency(a, work):
    path = os.path.join(work, "latency.log")
    with open(path, "w") as f:
        f.write(NOISE)
    ex = Exporter(a.bin, path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    want = re.compile(r'^sglang:num_running_reqs\{[^}]*dp_rank="0"[^}]*\} (\d+)$', re.M)
    times = []
    try:
        for i in range(a.samples):
            n = 1000 + i
            os.write(fd, DECODE.format(n=n).encode())
            t0 = time.perf_counter()
            deadline = t0 + 10
            while True:
                m = want.search(ex.scrape())
                if m and int(m.group(1)) == n:
                    break
                if time.perf_counter() > deadline:
                    raise SystemExit(f"line {i} not visible after 10 s")
            times.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        ex.stop()
    print(
        f"latency  append-to-visible over {len(times)} appends: p50 {pct(times, 50):.2f} ms, "
        f"p90 {pct(times, 90):.2f} ms, p99 {pct(times, 99):.2f} ms, max {max(times):.2f} ms"
    )


def idle(a, work):
    path = os.path.join(work, "idle.log")
    with open(path, "w") as f:
        f.write(DECODE.format(n=1) + ACCESS + NOISE)
    ex = Exporter(a.bin, path)
    try:
        time.sleep(2)  # let start-up settle
        c0, t0 = ex.cpu_seconds(), time.monotonic()
        time.sleep(a.idle_seconds)
        c1, t1 = ex.cpu_seconds(), time.monotonic()
    finally:
        ex.stop()
    per_min = (c1 - c0) / (t1 - t0) * 60
    print(
        f"idle     CPU following an idle file for {t1 - t0:.0f} s: {c1 - c0:.2f} s "
        f"({per_min:.3f} s per minute; clock tick {1 / CLK_TCK:.2f} s)"
    )


def memory(a, work):
    if not a.big or not os.path.exists(a.big):
        print("memory   skipped: no --big file (bench/compare.sh --size 1G makes one)")
        return
    lines = int(subprocess.check_output(["wc", "-l", a.big]).split()[0])
    t0 = time.monotonic()
    ex = Exporter(a.bin, a.big)
    try:
        wait_for(lambda: ex.counter("sglang_log_exporter_lines_read_total") >= lines, 1800, "the big file")
        secs = time.monotonic() - t0
        rss, hwm = ex.status_kib("VmRSS"), ex.status_kib("VmHWM")
    finally:
        ex.stop()
    size = os.path.getsize(a.big)
    print(
        f"memory   following {size / 2**20:.0f} MiB ({lines} lines, read in {secs:.1f} s): "
        f"VmRSS {rss / 1024:.1f} MiB, peak VmHWM {hwm / 1024:.1f} MiB"
    )


def rotation(a, work):
    path = os.path.join(work, "rotating.log")
    open(path, "w").close()
    ex = Exporter(a.bin, path)
    stop = threading.Event()
    written = [0]

    def writer():
        mix = [DECODE.format(n=7)] + [ACCESS] * 6 + [NOISE] * 3
        f = open(path, "a")
        next_rotate = time.monotonic() + a.rotate_every
        per_tick = max(1, a.rate // 100)
        while not stop.is_set():
            for _ in range(per_tick):
                f.write(mix[written[0] % len(mix)])
                written[0] += 1
            f.flush()
            if time.monotonic() >= next_rotate:
                f.close()
                os.replace(path, path + ".1")
                f = open(path, "a")
                next_rotate += a.rotate_every
            time.sleep(0.01)
        f.close()

    w = threading.Thread(target=writer)
    samples = []
    try:
        w.start()
        end = time.monotonic() + a.rotation_seconds
        while time.monotonic() < end:
            time.sleep(min(a.rotate_every, max(0, end - time.monotonic())))
            samples.append(ex.status_kib("VmRSS") / 1024)
        stop.set()
        w.join()
        try:
            wait_for(lambda: ex.counter("sglang_log_exporter_lines_read_total") >= written[0], 30, "the last lines")
        except SystemExit:
            pass
        read = ex.counter("sglang_log_exporter_lines_read_total")
    finally:
        stop.set()
        ex.stop()
    print(
        f"rotation {a.rotation_seconds:.0f} s, rename every {a.rotate_every:.0f} s, ~{a.rate} lines/s: "
        f"VmRSS MiB every {a.rotate_every:.0f} s: {' '.join(f'{x:.1f}' for x in samples)}; "
        f"first {samples[0]:.1f}, last {samples[-1]:.1f}, max {max(samples):.1f}; "
        f"lines written {written[0]}, read {read:.0f}"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--phases", default="latency,idle,memory,rotation")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--idle-seconds", type=float, default=60)
    ap.add_argument("--big")
    ap.add_argument("--rotation-seconds", type=float, default=120)
    ap.add_argument("--rotate-every", type=float, default=10)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--dir", default="/tmp/sglang-bench")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    phases = {"latency": latency, "idle": idle, "memory": memory, "rotation": rotation}
    with tempfile.TemporaryDirectory(dir=a.dir) as work:
        for p in a.phases.split(","):
            if p not in phases:
                sys.exit(f"unknown phase {p!r}")
            phases[p](a, work)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
