#!/usr/bin/env python3
"""What one exporter costs a fleet: series, scrape size and scrape time per node.

Usage: fleet.py --bin target/release/sglang-log-exporter [--dir /tmp/sglang-fleet]
                [--scrapes 200] [--nodes 1000] [--interval 15]

1. A PD node: a prefill server and a decode server, each DP8 with DP attention (TP8, EP8, 16
   ranks in all), with the start-up lines, stats lines of every rank, retractions and uvicorn
   access lines, and 8 GPUs served by the stand-in NVML (tests/it/fake_nvml.c, compiled here).
   The exporter follows both logs live; we count the series and time scrapes, plain and gzip.
2. A crowded node: 64 pod logs in a /var/log/pods layout (CRI records), 4 ranks each (256
   ranks), found by --input.glob, while a writer appends a stats line per rank and second (256
   lines/s, so nearly every scrape encodes anew). RSS, CPU, series, and scrape latency p50/p99
   over --scrapes scrapes with 1 and with 20 concurrent scrapers (keep-alive connections).

Prints a report (markdown) with the totals for --nodes nodes scraped every --interval seconds.
Needs python3 and a C compiler (cc) for the stand-in NVML.
"""

import argparse
import gzip
import http.client
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 1 << 30
T0 = 1780480800  # 2026-06-03 10:00:00 UTC


def stamp(t):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))


def server_args(mode, dp, port):
    return (
        f"server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3', "
        f"served_model_name='deepseek-ai/DeepSeek-V3', port={port}, tp_size=8, pp_size=1, "
        f"dp_size={dp}, nnodes=1, node_rank=0, base_gpu_id=0, gpu_id_step=1, "
        f"enable_dp_attention=True, disaggregation_mode='{mode}')"
    )


def startup(r):
    return [
        f"[{r}] Load weight end. elapsed=88.33 s, type=DeepseekV3ForCausalLM, quant=fp8, avail mem=98.92 GB, mem usage=165.36 GB.",
        f"[{r}] KV Cache is allocated. #tokens: 786432, KV size: 51.47 GB",
        f"[{r}] Memory pool end. avail mem=47.06 GB",
        f"[{r}] max_total_num_tokens=786432, chunked_prefill_size=16384, max_prefill_tokens=16384, max_running_requests=256, context_len=163840, available_gpu_mem=46.91 GB",
    ]


def decode_line(rnd, r):
    tokens = rnd.randrange(0, 786432)
    return (
        f"[{r}] Decode batch, #running-req: {rnd.randrange(0, 256)}, #token: {tokens}, "
        f"token usage: {tokens / 786432:.2f}, pre-allocated usage: 0.00, #prealloc-req: {rnd.randrange(0, 4)}, "
        f"#transfer-req: {rnd.randrange(0, 8)}, #retracted-req: 0, cuda graph: True, "
        f"gen throughput (token/s): {rnd.random() * 5000:.2f}, #queue-req: {rnd.randrange(0, 64)}"
    )


def prefill_line(rnd, r):
    new = rnd.randrange(1, 16384)
    return (
        f"[{r}] Prefill batch, #new-seq: {rnd.randrange(1, 8)}, #new-token: {new}, "
        f"#cached-token: {rnd.randrange(0, new)}, token usage: {rnd.random():.2f}, #running-req: {rnd.randrange(0, 8)}, "
        f"#queue-req: {rnd.randrange(0, 32)}, #pending-token: 0, #bootstrap-req: 0, #inflight-req: {rnd.randrange(0, 4)}, "
        f"cuda graph: False, input throughput (token/s): {rnd.random() * 20000:.2f}"
    )


ACCESS = [
    ("POST", "/generate", "200 OK"),
    ("POST", "/v1/chat/completions", "200 OK"),
    ("POST", "/v1/chat/completions", "503 Service Unavailable"),
    ("POST", "/v1/completions", "200 OK"),
    ("GET", "/health", "200 OK"),
    ("GET", "/get_model_info", "200 OK"),
]


def server_log(path, mode, dp, port, minutes=10, seed=1):
    """A PD server's log: start-up, then a stats line per rank every second for `minutes`,
    access lines, and a retraction per rank (decode)."""
    rnd = random.Random(seed)
    out = [f"[{stamp(T0)}] " + server_args(mode, dp, port)]
    ranks = [f"DP{d} TP{d} EP{d}" for d in range(dp)]
    for rk in ranks:
        out += startup(f"{stamp(T0)} {rk}")
    for s in range(minutes * 60):
        t = T0 + 60 + s
        for rk in ranks:
            r = f"{stamp(t)} {rk}"
            out.append(decode_line(rnd, r) if mode == "decode" else prefill_line(rnd, r))
        for m, p, st in ACCESS:
            out.append(f'[{stamp(t)}] INFO:     10.0.0.{rnd.randrange(2, 250)}:{rnd.randrange(30000, 65000)} - "{m} {p} HTTP/1.1" {st}')
    if mode == "decode":
        for rk in ranks:
            out.append(f"[{stamp(T0 + 600)} {rk}] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.5123 -> 0.7000")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def cri(text, t):
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(t))}.{int((t % 1) * 1e9):09d}Z stdout F {text}\n"


def pod_tree(root, pods, ranks):
    """`pods` CRI pod logs with `ranks` ranks each; returns their paths."""
    paths = []
    now = time.time()
    for i in range(pods):
        d = os.path.join(root, f"llm_sglang-decode-{i}_0000{i:04d}-aaaa-bbbb-cccc-dddddddddddd", "sglang")
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "0.log")
        rnd = random.Random(i)
        lines = [server_args("decode", ranks, 30000 + i)]
        lines = [f"[{stamp(now)}] {lines[0]}"]
        for r in range(ranks):
            lines += startup(f"{stamp(now)} DP{r} TP{r}")
        for r in range(ranks):
            lines.append(decode_line(rnd, f"{stamp(now)} DP{r} TP{r}"))
        with open(p, "w") as f:
            f.write("".join(cri(l, now) for l in lines))
        paths.append(p)
    return paths


def fake_nvml(d):
    lib = os.path.join(d, "libnvidia-ml.so.1")
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-O1", "-o", lib,
                    os.path.join(ROOT, "tests/it/fake_nvml.c")], check=True)
    script = os.path.join(d, "nvml-script.txt")
    with open(script, "w") as f:
        f.write("driver 560.35.03\n")
        for i in range(8):
            f.write(f"gpu {i} GPU-{i:08x}-0000-0000-0000-000000000000 00000000:{0x10 + i:02X}:00.0 "
                    f"{80 * GIB} {512 << 20} {6 * GIB} {74 * GIB} NVIDIA H100 80GB HBM3\n")
    return lib, script


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Exporter:
    # The exporter's log goes to $EXPORTER_STDERR when set (to see its warnings), else nowhere.
    def __init__(self, binary, args, env=None):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [binary, "--web.listen-address", f"127.0.0.1:{self.port}", "--timezone", "UTC"] + args,
            stdout=subprocess.DEVNULL, stderr=open(os.environ.get("EXPORTER_STDERR", os.devnull), "ab"), env={**os.environ, **(env or {})})

    def get(self, gz=False, conn=None):
        c = conn or http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        c.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"} if gz else {})
        r = c.getresponse()
        body = r.read()
        if conn is None:
            c.close()
        return r.status, body

    def wait(self, pred, secs=120):
        deadline = time.time() + secs
        while time.time() < deadline:
            try:
                st, body = self.get()
                if st == 200 and pred(body.decode()):
                    return body.decode()
            except OSError:
                pass
            time.sleep(0.2)
        sys.exit("the exporter did not reach the expected state")

    def status(self):
        out = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for l in f:
                k, _, v = l.partition(":")
                out[k] = v.strip()
        return out

    def cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def series(text):
    return sum(1 for l in text.splitlines() if l and not l.startswith("#"))


def lines_read(text):
    return sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
               if l.startswith("sglang_log_exporter_lines_read_total{"))


def timed_scrapes(exp, total, concurrency, gz=False):
    """`total` scrapes by `concurrency` threads on keep-alive connections; latencies in ms."""
    lat = []
    lock = threading.Lock()
    per = total // concurrency

    def worker():
        c = http.client.HTTPConnection("127.0.0.1", exp.port, timeout=30)
        mine = []
        for _ in range(per):
            t = time.perf_counter()
            st, _ = exp.get(gz, c)
            mine.append((time.perf_counter() - t) * 1000)
            assert st == 200
        c.close()
        with lock:
            lat.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lat.sort()
    return lat


def pct(lat, p):
    return lat[min(len(lat) - 1, int(round(p / 100 * (len(lat) - 1))))]


def pd_node(a, d):
    logs = os.path.join(d, "pd")
    os.makedirs(logs, exist_ok=True)
    server_log(os.path.join(logs, "sglang-prefill.log"), "prefill", 8, 30001)
    server_log(os.path.join(logs, "sglang-decode.log"), "decode", 8, 30002, seed=2)
    lib, script = fake_nvml(d)
    want = sum(sum(1 for _ in open(os.path.join(logs, f))) for f in os.listdir(logs))
    exp = Exporter(a.bin, ["--gpu.nvml-library", lib, "--gpu.interval", "1s",
                           os.path.join(logs, "sglang-prefill.log"), os.path.join(logs, "sglang-decode.log")],
                   {"FAKE_NVML_SCRIPT": script})
    try:
        # Read to the end, and a GPU sample taken since (both servers' 16 ranks mapped).
        text = exp.wait(lambda t: "sglang_retractions_total" in t and lines_read(t) >= want
                        and t.count("sglang_rank_gpu_info{") == 16)
        text = exp.get()[1].decode()
        plain = len(text)
        gz = len(exp.get(True)[1])
        assert gzip.decompress(exp.get(True)[1])
        lat = timed_scrapes(exp, a.scrapes, 1)
        latz = timed_scrapes(exp, a.scrapes, 1, True)
        text = exp.get()[1].decode()
        fams = {}
        for l in text.splitlines():
            if l and not l.startswith("#"):
                name = l.split("{", 1)[0].split(" ", 1)[0]
                kind = ("exporter's own" if name.startswith("sglang_log_exporter") else
                        "GPU" if "gpu" in name else "HTTP" if "http_requests" in name else
                        "server info" if name == "sglang_server_info" else "per rank")
                fams[kind] = fams.get(kind, 0) + 1
        return {"series": series(text), "plain": plain, "gzip": gz, "lat": lat, "latz": latz,
                "rss": exp.status()["VmRSS"], "fams": fams}
    finally:
        exp.stop()


def crowded_node(a, d):
    root = os.path.join(d, "pods")
    shutil.rmtree(root, ignore_errors=True)
    paths = pod_tree(root, 64, 4)
    exp = Exporter(a.bin, ["--gpu.disable", "--input.glob", f"{root}/*/*/*.log",
                           "--input.kubernetes-container", "sglang"])
    stop = threading.Event()

    def writer():
        rnd = random.Random(7)
        files = [open(p, "a", buffering=1) for p in paths]
        while not stop.is_set():
            t = time.time()
            for f in files:
                f.write("".join(cri(decode_line(rnd, f"{stamp(t)} DP{r} TP{r}"), t) for r in range(4)))
            stop.wait(max(0.0, 1.0 - (time.time() - t)))
        for f in files:
            f.close()

    try:
        text = exp.wait(lambda t: t.count("sglang:num_running_reqs{") == 256)
        rss_read = exp.status()["VmRSS"]
        w = threading.Thread(target=writer)
        w.start()
        time.sleep(3)
        # Reading and parsing alone: written, not scraped.
        cpu0, t0 = exp.cpu(), time.time()
        time.sleep(10)
        res = {"series": series(text), "files": 64, "ranks": 256, "rss_read": rss_read}
        res["cpu_read"] = (exp.cpu() - cpu0) / (time.time() - t0)
        cpu0, t0 = exp.cpu(), time.time()
        res["lat1"] = timed_scrapes(exp, a.scrapes, 1)
        res["lat20"] = timed_scrapes(exp, a.scrapes, 20)
        res["lat1z"] = timed_scrapes(exp, a.scrapes, 1, True)
        res["cpu"] = (exp.cpu() - cpu0) / (time.time() - t0)
        text = exp.get()[1].decode()
        res["series"] = series(text)
        res["plain"] = len(text)
        res["gzip"] = len(exp.get(True)[1])
        st = exp.status()
        res["rss"], res["hwm"], res["threads"] = st["VmRSS"], st["VmHWM"], st["Threads"]
        # Idle: the writer stopped, scrapes served from the cached encoding.
        stop.set()
        w.join()
        time.sleep(1)
        res["lat1_idle"] = timed_scrapes(exp, a.scrapes, 1)
        return res
    finally:
        stop.set()
        exp.stop()


def ms(lat):
    return f"{statistics.median(lat):.2f} / {pct(lat, 99):.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target/release/sglang-log-exporter"))
    ap.add_argument("--dir", default=os.environ.get("SGLANG_BENCH_DIR", "/tmp/sglang-fleet"))
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--interval", type=float, default=15.0)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    pd = pd_node(a, a.dir)
    cr = crowded_node(a, a.dir)
    n, iv = a.nodes, a.interval
    print("## PD node (prefill DP8 + decode DP8, 16 ranks, 8 GPUs)\n")
    print(f"- series: {pd['series']}; exposition {pd['plain']:,} bytes plain, {pd['gzip']:,} gzip; RSS {pd['rss']}")
    print(f"- scrape p50 / p99 ms over {a.scrapes}: plain {ms(pd['lat'])}, gzip {ms(pd['latz'])}")
    print("- by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(pd["fams"].items(), key=lambda kv: -kv[1])))
    print(f"- {n:,} such nodes, scraped every {iv:g} s: {pd['series'] * n:,} series, "
          f"{pd['series'] * n / iv:,.0f} samples/s, {pd['plain'] * n / iv / 1e6:.1f} MB/s plain, "
          f"{pd['gzip'] * n / iv / 1e6:.2f} MB/s gzip\n")
    print("## 64 followed files, 256 ranks, 256 lines/s appended\n")
    print(f"- series: {cr['series']}; exposition {cr['plain']:,} bytes plain, {cr['gzip']:,} gzip")
    print(f"- RSS {cr['rss_read']} after reading, {cr['rss']} after the scrapes (peak {cr['hwm']}), {cr['threads']} threads; CPU {cr['cpu_read'] * 100:.1f} % of a core "
          f"reading the writes alone, {cr['cpu'] * 100:.1f} % while also scraped back to back")
    print(f"- scrape p50 / p99 ms over {a.scrapes}: 1 scraper {ms(cr['lat1'])}, 20 concurrent {ms(cr['lat20'])}, "
          f"1 scraper gzip {ms(cr['lat1z'])}, 1 scraper without writes (cached) {ms(cr['lat1_idle'])}")


if __name__ == "__main__":
    main()
