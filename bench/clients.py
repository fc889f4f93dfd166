#!/usr/bin/env python3
"""HTTP clients against one exporter, measured: memory must stay flat with scrapers, and every
probe scrape must be answered whatever the other clients do.

Two runs, each printing one JSON line (numbers printed, never judged):

* scrapers: --scrapers keep-alive clients (200) scrape /metrics as fast as they can for
  --seconds while lines arrive (--rate lines/s, 50) on a state of about --series series
  (17,000: ranks x ~27 series); RSS at start, peak and end, scrapes/s, failed scrapes.
* quiet: --quiet clients (600, more than --web.max-connections 512) each make one complete
  request on keep-alive and go quiet; a fresh probe scrape every second for --seconds: probes
  answered, RSS peak.

usage: python3 bench/clients.py --bin target/release/sglang-log-exporter
"""

import argparse
import http.client
import json
import os
import socket
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet import Exporter  # noqa: E402  (the fleet benchmark's exporter process)


def rss_kb(exp):
    return int(exp.status()["VmRSS"].split()[0])


def stats_line(rank, running):
    t = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    return ("[%s DP%d TP%d] Decode batch, #running-req: %d, #token: 10, token usage: 0.01, "
            "cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0\n" % (t, rank, rank, running))


def start(binary, logs):
    exp = Exporter(binary, ["--gpu.disable", "--idle-after", "100000h"] + logs)
    exp.wait(lambda m: "\nsglang:num_running_reqs{" in m, secs=20)
    return exp


def run_scrapers(a, work):
    ranks = max(1, a.series // 27)
    per_server = min(ranks, 1024)
    logs = []
    for s in range(0, ranks, per_server):
        path = os.path.join(work, "s%d.log" % s)
        with open(path, "w") as f:
            for r in range(min(per_server, ranks - s)):
                f.write(stats_line(r, 1))
        logs.append("s%d=%s" % (s, path))
    p = start(a.bin, logs)
    port = p.port
    time.sleep(1)
    rss0, peak = rss_kb(p), 0
    stop = time.time() + a.seconds
    counts = {"ok": 0, "failed": 0}
    lock = threading.Lock()

    def scraper():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while time.time() < stop:
            try:
                c.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
                r = c.getresponse()
                r.read()
                ok = r.status == 200
            except OSError:
                ok = False
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            with lock:
                counts["ok" if ok else "failed"] += 1
        c.close()

    def writer():
        path = logs[0].split("=", 1)[1]
        i = 0
        with open(path, "a", buffering=1) as f:
            while time.time() < stop:
                f.write(stats_line(i % per_server, 2 + i % 5))
                i += 1
                time.sleep(1.0 / a.rate)

    threads = [threading.Thread(target=scraper) for _ in range(a.scrapers)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    while time.time() < stop:
        peak = max(peak, rss_kb(p))
        time.sleep(0.2)
    for t in threads:
        t.join()
    end = rss_kb(p)
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    body = c.getresponse().read()
    series = sum(1 for l in body.split(b"\n") if l and not l.startswith(b"#"))
    p.stop()
    print(json.dumps({"run": "scrapers", "scrapers": a.scrapers, "series": series,
                      "lines_per_s": a.rate, "seconds": a.seconds,
                      "scrapes_per_s": round(counts["ok"] / a.seconds, 1),
                      "scrapes_failed": counts["failed"], "rss_start_kb": rss0,
                      "rss_peak_kb": peak, "rss_end_kb": end}))


def run_quiet(a, work):
    path = os.path.join(work, "q.log")
    with open(path, "w") as f:
        f.write(stats_line(0, 1))
    p = start(a.bin, ["q=" + path])
    port = p.port
    conns = []
    for _ in range(a.quiet):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            s.recv(1 << 20)
        except OSError:
            pass
        conns.append(s)
    peak, answered, probes = 0, 0, 0
    stop = time.time() + a.seconds
    while time.time() < stop:
        t = time.time()
        probes += 1
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
            c.request("GET", "/metrics")
            r = c.getresponse()
            r.read()
            c.close()
            answered += r.status == 200
        except OSError:
            pass
        peak = max(peak, rss_kb(p))
        time.sleep(max(0, 1 - (time.time() - t)))
    for s in conns:
        s.close()
    p.stop()
    print(json.dumps({"run": "quiet", "quiet_clients": a.quiet, "probes": probes,
                      "probes_answered": answered, "rss_peak_kb": peak}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="target/release/sglang-log-exporter")
    ap.add_argument("--scrapers", type=int, default=200)
    ap.add_argument("--series", type=int, default=17000)
    ap.add_argument("--rate", type=float, default=50.0)
    ap.add_argument("--quiet", type=int, default=600)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--only", choices=["scrapers", "quiet"])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as work:
        if a.only in (None, "scrapers"):
            run_scrapers(a, work)
        if a.only in (None, "quiet"):
            run_quiet(a, work)


if __name__ == "__main__":
    main()
