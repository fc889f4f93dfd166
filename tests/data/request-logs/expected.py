#!/usr/bin/env python3
"""Computes the request metrics a correct exporter derives from the sample request logs here.

Usage:
    python3 tests/data/request-logs/expected.py          # rewrite every <name>.expected
    python3 tests/data/request-logs/expected.py --check  # exit 1 if any .expected is stale

Each `<name>.log` holds SGLang `--log-requests` output of one release (the name says which) mixed
with uvicorn access lines and `Receive` lines. Only finished-request records count:

* text form: `Finish: obj=GenerateReqInput(...)[, headers={...}], out={...}` after the logging
  prefix (`[YYYY-MM-DD HH:MM:SS] `, or none at all for v0.5.8-v0.5.11);
* JSON form: a JSON object whose "event" is "request.finished" (same prefix rules).

The rules follow SGLang v0.5.23 (the metrics contract, docs/metrics-contract.md) and are spelled
out in docs/request-log-formats.md:

* a record whose obj has `log_metrics=False` (health checks) is not counted at all;
* a record whose meta_info has no prompt_tokens is not counted at all: it comes from the
  tokenizer's abort path for requests dropped from the waiting queue (v0.5.x), which never
  reaches upstream's request metrics;
* `is_streaming` is "true"/"false" from obj.stream;
* counters: num_requests_total, prompt_tokens_total, generation_tokens_total (by is_streaming),
  cached_tokens_total (by cache_source: device/host/storage from meta_info.cached_tokens_details
  when it is a dict, else "total"; only sources with a positive count), num_so_requests_total
  (sampling_params carries a truthy json_schema, regex, ebnf or structural_tag),
  spec_verify_calls_total (meta_info.spec_verify_ct when positive; speculative decoding only);
* e2e_request_latency_seconds observes meta_info.e2e_latency;
* time_to_first_token_seconds observes meta_info.first_token_latency, except for an abort that
  was the request's first output (upstream observes TTFT at the first output and skips aborts):
  an abort counts when the request streamed and had completion tokens, or did not stream and had
  at least 50 (SGLANG_FORCE_STREAM_INTERVAL's default, the interval at which non-streaming
  requests send intermediate outputs);
* request_time_per_output_token_seconds observes (e2e_latency - first_token_latency) /
  (completion_tokens - 1) for stop/length finishes with completion_tokens > 1;
* queue_time_seconds observes meta_info.queue_time when meta_info.forward_entry_time is present
  (the request reached a forward pass; upstream observes the wait at that moment);
* prompt_tokens_histogram, uncached_prompt_tokens_histogram (prompt - cached) and
  generation_tokens_histogram observe the token counts.

Output lines look like Prometheus text exposition. Only the labels a Finish record determines are
written (is_streaming, cache_source, le); model_name, engine_type and the like come from the server
and are left out. `le` is written the way prometheus_client writes it; compare it numerically.
Sums are Python reprs of the running float sum in file order; compare with a relative tolerance of
1e-9.

The parser below is written for this purpose: it reads Python-repr text (strings with escapes,
numbers, None/True/False, lists, tuples, dicts, `Name(key=value, ...)`) and understands SGLang's
truncation marker, where an over-long string or list is printed as its two halves joined by
` ... `.
"""

import json
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

# Default bucket boundaries of sglang v0.5.23 (sglang/srt/observability/metrics_collector.py).
TTFT_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
E2E_BUCKETS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600,
               1200, 1800, 2400]
ITL_BUCKETS = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
               0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000,
               8.000]
QUEUE_BUCKETS = [0.000, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1, 2, 3, 4, 5, 10, 15,
                 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500, 600, 700, 800, 900,
                 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000]
TOKEN_BUCKETS = [100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000,
                 10000, 12500, 15000, 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000,
                 60000, 80000, 100000, 200000, 300000, 400000, 600000, 800000, 1000000, 1100000]

PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z_]+\d+)*\] ")


# ---------------------------------------------------------------------------------------------
# A reader for SGLang's Python-repr request dumps.

class Truncated:
    """An over-long string or list printed as `head ... tail`; the middle is lost."""

    def __init__(self, head, tail):
        self.head, self.tail = head, tail


class Call:
    """`Name(key=value, ...)`: a dataclass printed by SGLang's request logger."""

    def __init__(self, name, kwargs):
        self.name, self.kwargs = name, kwargs


class Raw:
    """Text printed with str() that is no Python literal (an enum member, an object)."""

    def __init__(self, text):
        self.text = text


class Reader:
    def __init__(self, s, pos=0):
        self.s, self.i = s, pos

    def peek(self, text):
        return self.s.startswith(text, self.i)

    def eat(self, text):
        if not self.peek(text):
            raise ValueError(f"expected {text!r} at {self.i}: {self.s[self.i:self.i + 40]!r}")
        self.i += len(text)

    def ws(self):
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def value(self):
        v = self.single()
        # `'head' ... 'tail'` / `[..] ... [..]`: the truncation marker.
        if self.peek(" ... ") and isinstance(v, (str, list)):
            save = self.i
            self.i += 5
            try:
                tail = self.single()
            except ValueError:
                self.i = save
                return v
            return Truncated(v, tail)
        return v

    def single(self):
        c = self.s[self.i]
        if c in "'\"":
            return self.string()
        if c == "[":
            return self.seq("[", "]")
        if c == "(":
            return tuple(self.seq("(", ")"))
        if c == "{":
            return self.mapping()
        m = re.compile(r"-?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)").match(self.s, self.i)
        if m and (m.end() == len(self.s) or self.s[m.end()] in ",)]} "):
            self.i = m.end()
            t = m.group(0)
            return float(t) if any(ch in t for ch in ".eEn") else int(t)
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*").match(self.s, self.i)
        if m:
            word = m.group(0)
            self.i = m.end()
            if self.peek("("):
                return self.call(word)
            return {"None": None, "True": True, "False": False}.get(word, Raw(word))
        return self.raw()

    def raw(self):
        # Anything else (e.g. `<Enum.X: 1>`): up to the next separator at this nesting depth.
        start, depth = self.i, 0
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch in "([{<":
                depth += 1
            elif ch in ")]}>":
                if depth == 0:
                    break
                depth -= 1
            elif ch == "," and depth == 0:
                break
            self.i += 1
        return Raw(self.s[start:self.i])

    def string(self):
        q = self.s[self.i]
        j = self.i + 1
        out = []
        while True:
            ch = self.s[j]
            if ch == "\\":
                out.append(self.s[j:j + 2])
                j += 2
                continue
            if ch == q:
                break
            out.append(ch)
            j += 1
        self.i = j + 1
        return unescape("".join(out))

    def seq(self, open_, close):
        self.eat(open_)
        items = []
        self.ws()
        while not self.peek(close):
            items.append(self.value())
            self.ws()
            if self.peek(","):
                self.i += 1
                self.ws()
        self.eat(close)
        return items

    def mapping(self):
        self.eat("{")
        d = {}
        self.ws()
        while not self.peek("}"):
            k = self.value()
            self.ws()
            self.eat(":")
            self.ws()
            d[k] = self.value()
            self.ws()
            if self.peek(","):
                self.i += 1
                self.ws()
        self.eat("}")
        return d

    def call(self, name):
        self.eat("(")
        kwargs = {}
        self.ws()
        while not self.peek(")"):
            m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=").match(self.s, self.i)
            if not m:
                raise ValueError(f"expected key= at {self.i}")
            key = m.group(0)[:-1]
            self.i = m.end()
            kwargs[key] = self.value()
            if self.peek(", "):
                self.i += 2
        self.eat(")")
        return Call(name, kwargs)


ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "0": "\0",
           "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def unescape(body):
    """Undo the escapes Python's repr() writes (\\n, \\', \\xNN, \\uNNNN, ...), without eval."""
    out, j = [], 0
    while j < len(body):
        ch = body[j]
        if ch != "\\" or j + 1 == len(body):
            out.append(ch)
            j += 1
            continue
        e = body[j + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width:
            out.append(chr(int(body[j + 2:j + 2 + width], 16)))
            j += 2 + width
        else:
            out.append(ESCAPES.get(e, "\\" + e))
            j += 2
    return "".join(out)


def message(line):
    """The log message: the text after the SGLang prefix (absent for v0.5.8-v0.5.11 request
    logs, whose handler prints the bare message)."""
    m = PREFIX.match(line)
    return line[m.end():] if m else line


def finished_record(line):
    """(obj, out) of a finished-request record, as dicts, or None for any other line."""
    msg = message(line.rstrip("\r\n"))
    if msg.startswith("Finish: obj="):
        r = Reader(msg, len("Finish: obj="))
        obj = r.value()
        if not isinstance(obj, Call):
            raise ValueError("obj is not a dataclass dump")
        if r.peek(", headers="):
            r.i += len(", headers=")
            r.value()
        if not r.peek(", out="):
            return (obj.kwargs, None)  # multimodal-generation servers print no out
        r.i += len(", out=")
        out = r.value()
        if r.i != len(msg):
            raise ValueError(f"trailing text after out at {r.i}")
        return (obj.kwargs, out)
    if msg.startswith("{"):
        try:
            rec = json.loads(msg)
        except ValueError:
            return None
        if isinstance(rec, dict) and rec.get("event") == "request.finished":
            return (rec.get("obj") or {}, rec.get("out"))
    return None


# ---------------------------------------------------------------------------------------------
# Metrics.

def go_float(v):
    """How prometheus_client writes a float label value (floatToGoString)."""
    v = float(v)
    if v == math.inf:
        return "+Inf"
    s = repr(v)
    dot = s.find(".")
    if v > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


def num(v):
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else repr(float(v))


class Hist:
    def __init__(self, buckets):
        self.bounds = [float(b) for b in buckets] + [math.inf]
        self.counts = [0] * len(self.bounds)
        self.sum = 0.0
        self.count = 0

    def observe(self, v):
        v = float(v)
        for i, b in enumerate(self.bounds):
            if v <= b:
                self.counts[i] += 1
        self.sum += v
        self.count += 1


def labels(d):
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(d.items())) + "}" if d else ""


def compute(path):
    counters = {}   # (name, labels tuple) -> value
    hists = {}      # (name, labels tuple) -> Hist
    bucket_sets = {
        "sglang:e2e_request_latency_seconds": E2E_BUCKETS,
        "sglang:time_to_first_token_seconds": TTFT_BUCKETS,
        "sglang:request_time_per_output_token_seconds": ITL_BUCKETS,
        "sglang:queue_time_seconds": QUEUE_BUCKETS,
        "sglang:prompt_tokens_histogram": TOKEN_BUCKETS,
        "sglang:uncached_prompt_tokens_histogram": TOKEN_BUCKETS,
        "sglang:generation_tokens_histogram": TOKEN_BUCKETS,
    }

    def inc(name, lab, v):
        key = (name, tuple(sorted(lab.items())))
        counters[key] = counters.get(key, 0) + v

    def observe(name, lab, v):
        key = (name, tuple(sorted(lab.items())))
        if key not in hists:
            hists[key] = Hist(bucket_sets[name])
        hists[key].observe(v)

    records = skipped = skipped_abort = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            rec = finished_record(line)
            if rec is None:
                continue
            obj, out = rec
            if obj.get("log_metrics") is False:
                skipped += 1
                continue
            if not isinstance(out, dict) or not isinstance(out.get("meta_info"), dict):
                continue
            if "prompt_tokens" not in out["meta_info"]:
                skipped_abort += 1
                continue
            records += 1
            meta = out["meta_info"]
            stream = {"is_streaming": "true" if obj.get("stream") else "false"}
            prompt = int(meta["prompt_tokens"])
            completion = int(meta.get("completion_tokens", 0))
            cached = int(meta.get("cached_tokens", 0) or 0)
            finish = meta.get("finish_reason") or {}
            finish_type = finish.get("type") if isinstance(finish, dict) else None

            inc("sglang:num_requests_total", stream, 1)
            inc("sglang:prompt_tokens_total", stream, prompt)
            inc("sglang:generation_tokens_total", stream, completion)
            if cached > 0:
                details = meta.get("cached_tokens_details")
                if isinstance(details, dict) and details:
                    for source in ("device", "host", "storage"):
                        v = details.get(source) or 0
                        if v > 0:
                            inc("sglang:cached_tokens_total", {"cache_source": source}, v)
                else:
                    inc("sglang:cached_tokens_total", {"cache_source": "total"}, cached)
            sp = obj.get("sampling_params")
            if isinstance(sp, dict) and any(sp.get(k) for k in
                                            ("json_schema", "regex", "ebnf", "structural_tag")):
                inc("sglang:num_so_requests_total", {}, 1)
            spec = meta.get("spec_verify_ct") or 0
            if spec > 0:
                inc("sglang:spec_verify_calls_total", {}, spec)

            e2e = meta.get("e2e_latency")
            if e2e is not None:
                observe("sglang:e2e_request_latency_seconds", stream, e2e)
            ttft = meta.get("first_token_latency")
            earlier_output = completion > 0 if obj.get("stream") else completion >= 50
            if ttft is not None and (finish_type != "abort" or earlier_output):
                observe("sglang:time_to_first_token_seconds", stream, ttft)
            if (ttft is not None and e2e is not None and finish_type in ("stop", "length")
                    and completion > 1 and e2e - ttft > 0):
                observe("sglang:request_time_per_output_token_seconds", stream,
                        (e2e - ttft) / (completion - 1))
            if meta.get("queue_time") is not None and meta.get("forward_entry_time") is not None:
                observe("sglang:queue_time_seconds", {}, meta["queue_time"])
            observe("sglang:prompt_tokens_histogram", {}, prompt)
            observe("sglang:uncached_prompt_tokens_histogram", {}, prompt - cached)
            observe("sglang:generation_tokens_histogram", {}, completion)

    lines = [
        f"# Expected request metrics for {os.path.basename(path)}; generated by expected.py, do not edit.",
        f"# {records} finished requests counted; skipped: {skipped} with log_metrics=False, "
        f"{skipped_abort} waiting-queue aborts without prompt_tokens.",
        "# Only labels a Finish record determines are written; compare le and values numerically,",
        "# sums with a relative tolerance of 1e-9.",
    ]
    for name in ("sglang:num_requests_total", "sglang:prompt_tokens_total",
                 "sglang:generation_tokens_total", "sglang:cached_tokens_total",
                 "sglang:num_so_requests_total", "sglang:spec_verify_calls_total"):
        for (n, lab), v in sorted(counters.items()):
            if n == name:
                lines.append(f"{n}{labels(dict(lab))} {num(v)}")
    for name in bucket_sets:
        for (n, lab), h in sorted(hists.items(), key=lambda kv: kv[0]):
            if n != name:
                continue
            lab = dict(lab)
            for b, c in zip(h.bounds, h.counts):
                lines.append(f"{n}_bucket{labels({**lab, 'le': go_float(b)})} {c}")
            lines.append(f"{n}_sum{labels(lab)} {num(h.sum)}")
            lines.append(f"{n}_count{labels(lab)} {h.count}")
    return "\n".join(lines) + "\n"


def main():
    check = "--check" in sys.argv[1:]
    stale = False
    for name in sorted(os.listdir(HERE)):
        if not name.endswith(".log"):
            continue
        text = compute(os.path.join(HERE, name))
        target = os.path.join(HERE, name[:-4] + ".expected")
        if check:
            try:
                with open(target, encoding="utf-8") as f:
                    current = f.read()
            except FileNotFoundError:
                current = None
            if current != text:
                print(f"stale: {target}")
                stale = True
        else:
            with open(target, "w", encoding="utf-8") as f:
                f.write(text)
    sys.exit(1 if stale else 0)


if __name__ == "__main__":
    main()
