#!/usr/bin/env python3
"""The baseline users write today: read the log with `re`, keep the same gauges and counters as
bench/sglang.mtail in prometheus_client, print the exposition at the end.

Usage: baseline.py LOGFILE
"""

import re
import sys

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

PREFIX = r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: DP(?P<dp>\d+))?(?: TP(?P<tp>\d+))?\] "
DECODE = re.compile(
    PREFIX + r"Decode batch[.,] #running-req: (?P<running>\d+), #token: (?P<token>\d+), "
    r"token usage: (?P<usage>[\d.]+), .*gen throughput \(token/s\): (?P<gen>[\d.]+), #queue-req: (?P<queue>\d+)"
)
PREFILL = re.compile(
    PREFIX + r"Prefill batch[.,] #new-seq: \d+, #new-token: (?P<new>\d+), #cached-token: (?P<cached>\d+), "
    r"token usage: (?P<usage>[\d.]+), #running-req: (?P<running>\d+), #queue-req: (?P<queue>\d+)"
)
ACCESS = re.compile(
    PREFIX + r'INFO: +[\d.:a-f\[\]]+ - "(?P<method>[A-Z]+) (?P<path>[^ ?"]*)[^"]* HTTP/[\d.]+" (?P<status>\d{3})'
)


def main():
    reg = CollectorRegistry()
    ranks = ["dp_rank", "tp_rank"]
    running = Gauge("sglang_num_running_reqs", "running requests", ranks, registry=reg)
    used = Gauge("sglang_num_used_tokens", "used tokens", ranks, registry=reg)
    usage = Gauge("sglang_token_usage", "token usage", ranks, registry=reg)
    gen = Gauge("sglang_gen_throughput", "tokens/s", ranks, registry=reg)
    queue = Gauge("sglang_num_queue_reqs", "queued requests", ranks, registry=reg)
    pqueue = Gauge("sglang_num_prefill_queue_reqs", "queued prefill requests", ranks, registry=reg)
    new_tok = Counter("sglang_prefill_new_tokens", "new tokens", ranks, registry=reg)
    cached_tok = Counter("sglang_prefill_cached_tokens", "cached tokens", ranks, registry=reg)
    http = Counter("sglang_http_requests", "HTTP requests", ["method", "path", "status"], registry=reg)

    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        for line in f:
            m = DECODE.match(line)
            if m:
                r = (m["dp"] or "", m["tp"] or "")
                running.labels(*r).set(float(m["running"]))
                used.labels(*r).set(float(m["token"]))
                usage.labels(*r).set(float(m["usage"]))
                gen.labels(*r).set(float(m["gen"]))
                queue.labels(*r).set(float(m["queue"]))
                continue
            m = PREFILL.match(line)
            if m:
                r = (m["dp"] or "", m["tp"] or "")
                new_tok.labels(*r).inc(float(m["new"]))
                cached_tok.labels(*r).inc(float(m["cached"]))
                usage.labels(*r).set(float(m["usage"]))
                running.labels(*r).set(float(m["running"]))
                pqueue.labels(*r).set(float(m["queue"]))
                continue
            m = ACCESS.match(line)
            if m:
                http.labels(m["method"], m["path"], m["status"]).inc()
    sys.stdout.write(generate_latest(reg).decode())


if __name__ == "__main__":
    main()
