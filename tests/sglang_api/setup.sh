#!/usr/bin/env bash
# Sets up what tests/it/api.rs needs to run SGLang's own HTTP endpoint code (see serve.py): a
# Python venv with the packages that code imports (fastapi, uvicorn, msgspec, orjson, from
# PyPI; and prometheus_client, whose ASGI app SGLang serves `/metrics` with, for
# tests/it/names.rs and metrics_app.py) and the source files of two SGLang releases, taken from their wheels
# (`pip download --no-deps`): v0.5.23 (`/v1/loads`: entrypoints/v1_loads.py,
# managers/load_snapshot.py; utils/auth.py for --api-key), v0.5.6 (`/get_load`:
# managers/io_struct.py) and v0.4.1 (no load endpoint; `/get_server_info`: srt/server.py's
# handler over srt/server_args.py's ServerArgs; v0.5.23's entrypoints/http_server.py for its
# /health and /generate handlers, with what /generate runs: entrypoints/api_contract.py over
# api/v1/api_types.py, entrypoints/request_headers.py, utils/json_response.py, and
# managers/io_struct.py's GenerateReqInput with the files its field types come from), and SGLang's router, sgl-model-gateway `smg` 1.13.0 from PyPI (its real
# binary, a Rust extension the `smg` command runs: tests/it/router.rs puts it in front of
# serve.py's servers). Idempotent; `.ci/run` runs it. Usage: setup.sh [DIR] (default
# target/sglang-api).
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-target/sglang-api}
mkdir -p "$dir/wheels"
venv=$dir/venv
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c 'import fastapi, uvicorn, msgspec, orjson, prometheus_client' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check \
    'fastapi==0.165.0' 'uvicorn==0.54.0' 'msgspec==0.23.0' 'orjson==3.13.0' \
    'prometheus_client==0.26.0'
fi
if ! "$venv/bin/smg" --version 2>/dev/null | grep -qx 'smg 1.13.0'; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'smg==1.13.0'
fi
for v in 0.5.23 0.5.6 0.4.1; do
  out=$dir/sglang-$v
  [[ -f $out/.done && ($v != 0.5.23 || -f $out/sglang/srt/utils/common.py) ]] && continue
  ls "$dir"/wheels/sglang-$v-*.whl >/dev/null 2>&1 ||
    "$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps "sglang==$v" -d "$dir/wheels"
  rm -rf "$out"
  "$venv/bin/python" - "$dir"/wheels/sglang-$v-*.whl "$out" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
want = ("sglang/srt/entrypoints/v1_loads.py", "sglang/srt/managers/load_snapshot.py",
        "sglang/srt/managers/io_struct.py", "sglang/srt/utils/auth.py", "sglang/version.py",
        "sglang/srt/server.py", "sglang/srt/server_args.py", "sglang/srt/entrypoints/http_server.py",
        "sglang/srt/entrypoints/api_contract.py", "sglang/api/v1/api_types.py",
        "sglang/srt/entrypoints/request_headers.py", "sglang/srt/utils/json_response.py",
        "sglang/srt/utils/msgspec_utils.py", "sglang/srt/utils/field_validators.py",
        "sglang/srt/utils/weight_versions.py", "sglang/srt/managers/kv_hints.py",
        "sglang/srt/beam_search/types.py", "sglang/srt/multimodal/modality.py",
        "sglang/srt/managers/schedule_batch.py", "sglang/srt/lora/lora_registry.py",
        "sglang/srt/utils/common.py")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name in want:
            z.extract(name, out)
PY
  touch "$out/.done"
done
echo "SGLang API stand-in ready in $dir"
