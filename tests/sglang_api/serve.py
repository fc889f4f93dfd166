"""SGLang's own load, health and generate endpoints, served with the test's numbers behind them.

The stand-in NVML library's idea for SGLang's HTTP API: the endpoint code is SGLang's released
code, loaded from a wheel's files (setup.sh puts them under ROOT); only what stands behind it —
the tokenizer manager, which in SGLang reads the schedulers' snapshots — is ours, and it hands the
real code the values in the test's data file (re-read at every request, so a test changes what the
server says by rewriting it).

  --release 0.5.23  GET /v1/loads: v1_loads.py's router over load_snapshot.py's LoadSnapshot,
                    written and read through its own shared-memory writer and reader, as the
                    scheduler and the tokenizer manager do. GET /server_info: the handler's shape
                    (build_server_info's resolved args + scheduler info, internal_states, version).
                    GET /health: http_server.py's own health_generate handler. POST/PUT
                    /generate (for a router in front): http_server.py's own generate_request and
                    serve_generate_request (api_contract.py's schema check, json_response.py's
                    ORJSON answer, streamed or not), the body built by FastAPI into io_struct.py's
                    own GenerateReqInput, over our tokenizer-manager stand-in, whose
                    generate_request normalises the request (GenerateReqInput's own
                    normalize_batch_and_arguments), waits while the data says `"hold": true`
                    and yields one finished output: text "ok" and meta_info (id = the rid,
                    finish_reason length, prompt/completion tokens 1, cached 0).
  --release 0.5.6   GET /get_load: io_struct.py's GetLoadReqOutput, serialised by FastAPI as the
                    handler returns it; GET /server_info: that release's handler shape (server
                    args, scheduler info, internal_states, version). No /v1/loads (404).
  --release 0.4.1   no load endpoint (404, as before v0.4.7); GET /get_server_info: the handler
                    of that release's srt/server.py itself (its source, run over our app),
                    answering dataclasses.asdict of srt/server_args.py's own ServerArgs built
                    from the data's server_info, plus its scheduler_info. No /server_info.
  --api-key KEY     v0.5.23's own add_api_key_middleware (utils/auth.py).

The data file: {"loads": [per-rank fields], "server_info": {...}, "scheduler_info": {...},
"internal_states": [...], "hold": false, "delay_s": 0, "garbage": false, "status": 200,
"redirect": URL, "delays": {PATH: s}, "statuses": {PATH: code}}. `hold` keeps each /generate
running until the test sets it false again. `delay_s` delays every answer (a slow server),
`garbage` answers a body that is no JSON, `status` answers that status with SGLang's error body,
`redirect` a 302 whose body looks like loads; `delays` and `statuses` do so for one path.

A `loads` entry holds the fields of that release's per-rank object: for 0.5.23 a LoadSnapshot's
(dp_rank, num_running_reqs, num_waiting_reqs, num_used_tokens, max_total_num_tokens, token_usage,
gen_throughput, cache_hit_rate, ... and the sections memory, disaggregation, queues as objects;
missing fields take LoadSnapshot's defaults); for 0.5.6 a GetLoadReqOutput's (dp_rank, num_reqs,
num_waiting_reqs, num_tokens). tests/it/api.rs (`decode_v0523`) has a whole example.

"own_dp_rank": N (0.5.23) answers as one DP rank's Rust server does under SGLANG_RUST_SERVER=1
(srt/rust_server/config.py: "`/v1/loads` reads this rank's slot"): the load of that slot alone,
of as many slots as the highest `dp_rank` of `loads` needs.

usage: serve.py --release R --root ROOT --port N --data FILE [--api-key KEY]
                [--ssl-certfile PEM --ssl-keyfile KEY]
  ROOT is setup.sh's directory (target/sglang-api); the venv to run it with is ROOT/venv.
"""

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import tempfile
import types


def module(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def package(name, path):
    """A package whose __init__ is not run (SGLang's imports torch), its files found under path."""
    return module(name, __path__=[path])


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--release", required=True, choices=["0.5.23", "0.5.6", "0.4.1"])
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--api-key")
    ap.add_argument("--ssl-certfile")
    ap.add_argument("--ssl-keyfile")
    a = ap.parse_args()
    src = os.path.join(a.root, f"sglang-{a.release}", "sglang")

    def data():
        with open(a.data) as f:
            return json.load(f)

    # The packages of the files we load, without their heavy __init__s.
    package("sglang", src)
    package("sglang.srt", os.path.join(src, "srt"))
    package("sglang.srt.managers", os.path.join(src, "srt", "managers"))
    package("sglang.srt.entrypoints", os.path.join(src, "srt", "entrypoints"))
    utils = package("sglang.srt.utils", os.path.join(src, "srt", "utils"))
    version = load("sglang.version", os.path.join(src, "version.py"))

    from fastapi import FastAPI
    from fastapi.responses import Response

    app = FastAPI()

    if a.release == "0.5.23":
        # What load_snapshot.py and v1_loads.py import from the rest of SGLang: the parallel
        # layout (one node, no DP attention unless the data says so) and the device name.
        class Parallel:
            def __init__(self, d):
                self.tp_size = d.get("tp_size", 1)
                self.pp_size = d.get("pp_size", 1)
                self.num_dp_ranks = max(1, len(d.get("loads", [])))
                self.attn_dp_enabled = d.get("enable_dp_attention", False)
                self.nnodes = 1
                self.node_rank = 0
                self.dp_rank = None
                self.load_balance_method = "round_robin"

        # (and io_struct.py: its IPC settings, at SGLang's defaults).
        env_flag = types.SimpleNamespace(get=lambda: False)
        module("sglang.srt.environ", envs=types.SimpleNamespace(
            SGLANG_LOAD_SNAPSHOT_USE_ZMQ=env_flag,
            SGLANG_USE_PICKLE_IPC=types.SimpleNamespace(get=lambda: True),
            SGLANG_LOG_PICKLE_IPC_OBJECTS=env_flag,
        ))
        module(
            "sglang.srt.runtime_context",
            get_parallel=lambda: Parallel(data().get("server_info", {})),
            get_serving=lambda: types.SimpleNamespace(tokenizer_worker_num=1),
        )
        module("sglang.srt.utils.network", is_zmq_endpoint_ipv6=None, restrict_zmq_peers=None, zmq_connect=None)
        utils.get_device_name = lambda: "NVIDIA H200"
        snap = load("sglang.srt.managers.load_snapshot", os.path.join(src, "srt", "managers", "load_snapshot.py"))

        import enum

        from starlette.background import BackgroundTask

        status = enum.Enum("ServerStatus", "Up Starting UnHealthy")

        class TokenizerManager:
            """Ours: what stands behind the handlers. Its get_loads writes the data file's
            snapshots through SGLang's shared-memory writer (as each scheduler does) and reads
            them back through its reader (as the tokenizer manager's get_loads does). It is up
            and not exiting (for /health). Its generate_request normalises the request as
            SGLang's does, holds it while the data says `"hold": true` (a request the engine is
            still running), then yields the one output a finished request has: text and
            meta_info."""

            shm = os.path.join(tempfile.mkdtemp(), "loads.shm")
            gracefully_exit = False
            server_status = status.Up

            async def generate_request(self, obj, request=None):
                obj.normalize_batch_and_arguments()
                while data().get("hold"):
                    await asyncio.sleep(0.02)
                yield {
                    "text": "ok",
                    "meta_info": {
                        "id": obj.rid,
                        "finish_reason": {"type": "length", "length": 1},
                        "prompt_tokens": 1,
                        "completion_tokens": 1,
                        "cached_tokens": 0,
                    },
                }

            def create_abort_task(self, obj):
                return BackgroundTask(lambda: None)

            async def get_loads(self, include=None, dp_rank=None):
                loads = data().get("loads", [])
                sections = {
                    "memory": snap.MemoryMetrics,
                    "speculative": snap.SpeculativeMetrics,
                    "lora": snap.LoRAMetrics,
                    "disaggregation": snap.DisaggregationMetrics,
                    "queues": snap.QueueMetrics,
                }
                own = data().get("own_dp_rank")
                slots = max([len(loads)] + [l.get("dp_rank", 0) + 1 for l in loads])
                for i, l in enumerate(loads):
                    fields = {k: (sections[k](**v) if k in sections else v) for k, v in l.items()}
                    fields.setdefault("dp_rank", i)
                    w = snap.ShmLoadSnapshotWriter(self.shm, slots, fields["dp_rank"])
                    w.write(snap.LoadSnapshot(**fields))
                    w.close()
                reader = snap.ShmLoadSnapshotReader(self.shm, slots)
                try:
                    if own is not None:
                        return [reader.read(own)]
                    return [reader.read(dp_rank)] if dp_rank is not None else reader.read_all()
                finally:
                    reader.close()

        tm = TokenizerManager()
        module("sglang.srt.entrypoints.http_server", get_global_state=lambda: types.SimpleNamespace(tokenizer_manager=tm))
        v1 = load("sglang.srt.entrypoints.v1_loads", os.path.join(src, "srt", "entrypoints", "v1_loads.py"))
        app.include_router(v1.router)

        # `/generate`'s request object: io_struct.py's own GenerateReqInput (FastAPI builds the
        # request body into it, as in SGLang). io_struct.py imports torch, numpy and zmq (which
        # it names only in annotations and IPC helpers: empty modules here) and the rest of
        # SGLang; what no part of GenerateReqInput names is an empty class (PositionalEmbeds,
        # MultimodalProcessorOutput, SamplingMaskChunk, SamplingParams) or None (helpers it
        # never calls here, msgpack hooks: this server decodes no IPC). What its fields and its
        # import-time msgspec IPC decoder name is SGLang's: kv_hints.py, modality.py,
        # field_validators.py, msgspec_utils.py, weight_versions.py, beam_search/types.py
        # (imported from the wheel's files), and schedule_batch.py's mode aliases, common.py's
        # ImageData/VideoData and lora_registry.py's LoRARef (their source, run alone).
        import ast
        import dataclasses
        import logging
        import uuid
        from http import HTTPStatus
        from typing import AsyncIterator, Dict, Literal, Optional, Union

        import msgspec

        from fastapi import Request
        from fastapi.responses import ORJSONResponse, StreamingResponse

        def source(path, *names):
            """The top-level definitions (functions, classes, assignments) `names` of one of
            the wheel's files, as AST nodes for `run`."""
            with open(os.path.join(src, *path.split("/"))) as f:
                tree = ast.parse(f.read())
            body = [
                n for n in tree.body
                if (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name in names)
                or (isinstance(n, ast.Assign) and any(getattr(t, "id", None) in names for t in n.targets))
            ]
            assert len(body) == len(names), (path, names)
            return body

        def run(path, body, ns):
            exec(compile(ast.Module(body=body, type_ignores=[]), os.path.basename(path), "exec"), ns)
            return ns

        def stub(*names):
            return {n: type(n, (), {}) for n in names}

        module("torch", Tensor=type("Tensor", (), {}), cuda=types.SimpleNamespace(is_available=lambda: False))
        module("numpy", ndarray=type("ndarray", (), {}), float32="float32", int32="int32")
        module("zmq", Socket=type("Socket", (), {}))
        module("zmq.asyncio", Socket=type("Socket", (), {}))
        for name in ["sglang.srt.beam_search", "sglang.srt.multimodal", "sglang.srt.lora", "sglang.srt.sampling", "sglang.api"]:
            package(name, os.path.join(src, *name.split(".")[1:]))
        package("sglang.api.v1", os.path.join(src, "api", "v1"))
        typing_ns = {"Union": Union, "Literal": Literal, "Optional": Optional, "Dict": Dict,
                     "dataclass": dataclasses.dataclass}
        modes = run("srt/managers/schedule_batch.py",
                    source("srt/managers/schedule_batch.py", "ReturnHiddenStatesMode", "SamplingLogprobsMode"), dict(typing_ns))
        from sglang.srt.multimodal.modality import Modality

        module("sglang.srt.managers.schedule_batch", Modality=Modality, **stub("MultimodalProcessorOutput"),
               ReturnHiddenStatesMode=modes["ReturnHiddenStatesMode"], SamplingLogprobsMode=modes["SamplingLogprobsMode"],
               get_return_hidden_states_mode=None)
        media = run("srt/utils/common.py", source("srt/utils/common.py", "ImageData", "VideoData"), dict(typing_ns))
        utils.ImageData, utils.VideoData = media["ImageData"], media["VideoData"]
        lora = run("srt/lora/lora_registry.py", source("srt/lora/lora_registry.py", "LoRARef"),
                   {**typing_ns, "msgspec": msgspec, "uuid4": uuid.uuid4, "uuid5": uuid.uuid5,
                    "NAMESPACE_URL": uuid.NAMESPACE_URL, "fields": msgspec.structs.fields})
        module("sglang.srt.lora.lora_registry", LoRARef=lora["LoRARef"])
        module("sglang.srt.managers.embed_types", **stub("PositionalEmbeds"))
        module("sglang.srt.multimodal.mm_utils", has_valid_data=None)
        module("sglang.srt.sampling.sampling_mask", **stub("SamplingMaskChunk"))
        module("sglang.srt.sampling.sampling_params", **stub("SamplingParams"))
        module("sglang.srt.utils.msgpack_utils", dec_hook=None, enc_hook=None, ext_hook=None)
        io = load("sglang.srt.managers.io_struct", os.path.join(src, "srt", "managers", "io_struct.py"))
        from sglang.srt.entrypoints.api_contract import generate_contract_error
        from sglang.srt.entrypoints.request_headers import apply_header_overrides
        from sglang.srt.utils import json_response

        # `/health` (and `/health_generate`) and `/generate`: the handlers of that release's
        # http_server.py itself (their source, run over our app and our tokenizer manager).
        # Without SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION `/health` answers 200 without
        # generating, as SGLang does by default. A test fails them with `statuses`.
        http = "srt/entrypoints/http_server.py"
        flag = types.SimpleNamespace(get=lambda: False)
        ns = {
            "app": app,
            "AsyncIterator": AsyncIterator,
            "GenerateReqInput": io.GenerateReqInput,
            "HTTPStatus": HTTPStatus,
            "ORJSONResponse": ORJSONResponse,
            "Request": Request,
            "Response": Response,
            "ServerStatus": status,
            "StreamingResponse": StreamingResponse,
            "SGLangORJSONResponse": json_response.SGLangORJSONResponse,
            "apply_header_overrides": apply_header_overrides,
            "dumps_json": json_response.dumps_json,
            "envs": types.SimpleNamespace(
                SGLANG_DIAG_BYPASS_HEALTH_GENERATE=flag,
                SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=flag,
                SGLANG_ENABLE_REQUEST_HEADER_OVERRIDES=flag,
            ),
            "generate_contract_error": generate_contract_error,
            "logger": logging.getLogger("sglang.srt.entrypoints.http_server"),
            "orjson_response": json_response.orjson_response,
            "_global_state": types.SimpleNamespace(tokenizer_manager=tm),
        }
        run(http, source(http, "health_generate", "generate_request", "serve_generate_request", "_create_error_response"), ns)

        @app.get("/server_info")
        async def server_info():
            d = data()
            return {
                **d.get("server_info", {}),
                "launch_command": "python -m sglang.launch_server",
                **d.get("scheduler_info", {}),
                "kv_events": None,
                "startup_time": 1780000000.0,
                "internal_states": d.get("internal_states", []),
                "version": version.__version__,
                "frontend": "python",
            }

    elif a.release == "0.4.1":
        # What server_args.py imports: torch (asked only whether CUDA is there: no GPU here)
        # and helpers of its __post_init__ (no GPU, no flashinfer, no GGUF file).
        module("torch", cuda=types.SimpleNamespace(is_available=lambda: False))
        module("sglang.srt.hf_transformers_utils", check_gguf_file=lambda path: False)
        utils.__dict__.update(
            get_amdgpu_memory_capacity=lambda: None,
            get_hpu_memory_capacity=lambda: None,
            get_nvgpu_memory_capacity=lambda: None,
            is_flashinfer_available=lambda: False,
            is_hip=lambda: False,
            is_ipv6=lambda addr: False,
            is_port_available=lambda port: True,
        )
        sa = load("sglang.srt.server_args", os.path.join(src, "srt", "server_args.py"))
        # server.py's own get_server_info handler (its decorator registers it on our app); the
        # globals it reads are refreshed from the data file before each request.
        import ast
        import dataclasses

        with open(os.path.join(src, "srt", "server.py")) as f:
            tree = ast.parse(f.read())
        handler = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef) and n.name == "get_server_info"]
        ns = {"app": app, "dataclasses": dataclasses, "__version__": version.__version__}
        exec(compile(ast.Module(body=handler, type_ignores=[]), "server.py", "exec"), ns)

        @app.middleware("http")
        async def state(request, call_next):
            d = data()
            ns["tokenizer_manager"] = types.SimpleNamespace(server_args=sa.ServerArgs(**d.get("server_info", {})))
            ns["scheduler_info"] = d.get("scheduler_info", {})
            return await call_next(request)

    else:
        # io_struct.py's imports, which its load classes do not use.
        for name, attr in [
            ("sglang.srt.lora.lora_registry", "LoRARef"),
            ("sglang.srt.managers.schedule_batch", "BaseFinishReason"),
            ("sglang.srt.multimodal.mm_utils", "has_valid_data"),
            ("sglang.srt.sampling.sampling_params", "SamplingParams"),
        ]:
            module(name, **{attr: type(attr, (), {})})
        for name in ["sglang.srt.lora", "sglang.srt.multimodal", "sglang.srt.sampling"]:
            sys.modules.setdefault(name, types.ModuleType(name))
        utils.ImageData = type("ImageData", (), {})
        io = load("sglang.srt.managers.io_struct", os.path.join(src, "srt", "managers", "io_struct.py"))

        @app.get("/get_load")
        async def get_load():
            return [io.GetLoadReqOutput(**l) for l in data().get("loads", [])]

        @app.get("/server_info")
        async def server_info():
            d = data()
            return {
                **d.get("server_info", {}),
                **d.get("scheduler_info", {}),
                "internal_states": d.get("internal_states", []),
                "version": version.__version__,
            }

    @app.middleware("http")
    async def faults(request, call_next):
        """The test's faults: a slow server, garbage, an error status, a redirect; `delays` and
        `statuses` ({path: value}) for one endpoint only."""
        d = data()
        path = request.url.path
        delay = d.get("delays", {}).get(path, d.get("delay_s", 0))
        if delay:
            await asyncio.sleep(delay)
        if d.get("garbage"):
            return Response(content=b"<html>\x00not json", media_type="application/json")
        if d.get("redirect"):
            # A body that reads as loads: a redirect must never be taken for the answer.
            body = json.dumps({"loads": [{"dp_rank": 0, "num_running_reqs": 99}]}).encode()
            return Response(content=body, status_code=302, headers={"Location": d["redirect"]})
        status = d.get("statuses", {}).get(path, d.get("status", 200))
        if status != 200:
            return Response(content=b'{"error": "Internal Server Error"}', status_code=status)
        return await call_next(request)

    if a.api_key:
        auth = load("sglang.srt.utils.auth", os.path.join(a.root, "sglang-0.5.23", "sglang", "srt", "utils", "auth.py"))
        auth.add_api_key_middleware(app, api_key=a.api_key, admin_api_key=None)

    import uvicorn

    # HTTPS as `sglang serve --ssl-certfile/--ssl-keyfile` serves it: uvicorn's own TLS.
    uvicorn.run(app, host="127.0.0.1", port=a.port, log_level="warning",
                ssl_certfile=a.ssl_certfile, ssl_keyfile=a.ssl_keyfile)


if __name__ == "__main__":
    main()
