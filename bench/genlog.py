#!/usr/bin/env python3
"""Writes a reproducible mixed SGLang log for the benchmarks.

Usage: genlog.py --size 1G [--seed 42] [--access 0.9] --out FILE

The mix (by line count): about 10 % scheduler stats lines (decode batch on DP0-3/TP0-3 in the
v0.5 PD spelling, prefill batch on TP0-3), about 60 % uvicorn access lines, the rest startup and
runtime noise that no pattern reads; a startup block (server_args, KV cache, memory pool lines)
every 500,000 lines, as after a restart. Same seed and size, same bytes.
--access F: a share F of access lines instead (a busy server's log: 0.9), the other kinds
keeping their proportions to each other.
"""

import argparse
import random
import re
import sys

NOISE = [
    "Init torch distributed begin.",
    "Init torch distributed ends. elapsed=4.33 s, mem usage=1.32 GB",
    "Load weight begin. avail mem=264.30 GB",
    "Using model weights format ['*.safetensors']",
    "Capture cuda graph begin. This can take up to several minutes. avail mem=46.94 GB",
    "Cache flushed successfully!",
    "Receive: obj=GenerateReqInput(rid='5f0c2f4e9b1d4c2aa0d4d1b0c8e6f1a2', stream=False)",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
    "The server is fired up and ready to roll!",
    "Scheduler hit an idle state; releasing cached graphs is not needed.",
    "Overlap scheduler is enabled; recording events for request 93817.",
    "WARNING:  Invalid HTTP request received.",
    "Finish: obj=GenerateReqInput(rid='a31c9e07', text='Hello'), out={'meta_info': {'id': 'a31c9e07', 'finish_reason': {'type': 'length', 'length': 128}, 'prompt_tokens': 12, 'completion_tokens': 128}}",
    "Setting up model loader with mooncake transfer engine; ib device mlx5_0 port 8998.",
]

STARTUP = [
    "server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3', tokenizer_path='deepseek-ai/DeepSeek-V3', "
    "served_model_name='deepseek-ai/DeepSeek-V3', host='0.0.0.0', port=30001, mem_fraction_static=0.85, "
    "max_running_requests=256, chunked_prefill_size=16384, page_size=64, tp_size=4, pp_size=1, dp_size=4, "
    "enable_dp_attention=True, disaggregation_mode='null')",
    "[{r}] Load weight end. elapsed=88.33 s, type=DeepseekV3ForCausalLM, quant=fp8, fmt=e4m3, avail mem=98.92 GB, mem usage=165.36 GB.",
    "[{r}] KV Cache is allocated. #tokens: 786432, KV size: 51.47 GB",
    "[{r}] Memory pool end. avail mem=47.06 GB",
    "[{r}] max_total_num_tokens=786432, chunked_prefill_size=16384, max_prefill_tokens=16384, max_running_requests=256, context_len=163840, available_gpu_mem=46.91 GB",
]

PATHS = ["/generate", "/v1/chat/completions", "/v1/completions", "/health", "/get_model_info", "/metrics"]


def parse_size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)i?B?", s.upper())
    if not m:
        sys.exit(f"bad size {s!r}: use e.g. 10M, 100M, 1G")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="100M")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", required=True)
    ap.add_argument("--access", type=float, default=None, help="share of access lines (default 0.60)")
    a = ap.parse_args()
    # Thresholds on one uniform draw: decode, prefill, access, the rest noise. The default mix
    # keeps its literal figures, so its bytes stay those of earlier measurements.
    decode_to, prefill_to, access_to = 0.08, 0.10, 0.70
    if a.access is not None:
        if not 0.0 <= a.access <= 1.0:
            sys.exit(f"bad --access {a.access}: a share from 0 to 1")
        rest = (1.0 - a.access) / 0.40
        decode_to, prefill_to = 0.08 * rest, 0.10 * rest
        access_to = prefill_to + a.access
    want = parse_size(a.size)
    rnd = random.Random(a.seed)
    rint, rnd01 = rnd.randrange, rnd.random
    t = 1780480800  # 2026-06-03 10:00:00 UTC
    ms = 0
    written = 0
    n = 0
    import time as _t

    with open(a.out, "w", buffering=1 << 20) as f:
        out = []
        stamp_sec = None
        stamp = ""
        while written < want:
            ms += rint(1, 4)
            sec = t + ms // 1000
            if sec != stamp_sec:
                stamp_sec = sec
                stamp = _t.strftime("%Y-%m-%d %H:%M:%S", _t.gmtime(sec))
            if n % 500_000 == 0:
                for line in STARTUP:
                    for d in range(4) if "{r}" in line else [None]:
                        r = f"{stamp} DP{d} TP{d}"
                        out.append(line.format(r=r) if d is not None else f"[{stamp}] {line}")
            x = rnd01()
            if x < decode_to:
                d = rint(0, 4)
                running = rint(0, 256)
                tokens = rint(0, 786432)
                out.append(
                    f"[{stamp} DP{d} TP{d}] Decode batch, #running-req: {running}, #token: {tokens}, "
                    f"token usage: {tokens / 786432:.2f}, pre-allocated usage: 0.00, #prealloc-req: {rint(0, 4)}, "
                    f"#transfer-req: {rint(0, 8)}, #retracted-req: 0, cuda graph: True, "
                    f"gen throughput (token/s): {rnd01() * 5000:.2f}, #queue-req: {rint(0, 64)}"
                )
            elif x < prefill_to:
                tp = rint(0, 4)
                new = rint(1, 16384)
                out.append(
                    f"[{stamp} TP{tp}] Prefill batch, #new-seq: {rint(1, 8)}, #new-token: {new}, "
                    f"#cached-token: {rint(0, new)}, token usage: {rnd01():.2f}, #running-req: {rint(0, 8)}, "
                    f"#queue-req: {rint(0, 32)}, #pending-token: 0, #bootstrap-req: 0, #inflight-req: {rint(0, 4)}, "
                    f"cuda graph: False, input throughput (token/s): {rnd01() * 20000:.2f}"
                )
            elif x < access_to:
                p = PATHS[rint(0, len(PATHS))]
                meth = "GET" if p in ("/health", "/get_model_info", "/metrics") else "POST"
                st = "200 OK" if rnd01() < 0.98 else "503 Service Unavailable"
                out.append(
                    f'[{stamp}] INFO:     127.0.0.1:{rint(30000, 65000)} - "{meth} {p} HTTP/1.1" {st}'
                )
            else:
                d = rint(0, 4)
                out.append(f"[{stamp} DP{d} TP{d}] {NOISE[rint(0, len(NOISE))]}")
            n += 1
            if len(out) >= 4096:
                s = "\n".join(out) + "\n"
                f.write(s)
                written += len(s)
                out.clear()
        if out:
            s = "\n".join(out) + "\n"
            f.write(s)
            written += len(s)
    print(f"wrote {a.out}: {written} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
