#!/usr/bin/env bash
# Validates every manifest of deploy/kubernetes/ offline, as .ci/run does:
#   - built-in kinds (DaemonSet, Service, ServiceAccount, Deployment) against Kubernetes' own
#     OpenAPI schemas with kubernetes-validate (PyPI; it bundles the schemas of Kubernetes
#     1.25-1.37), in strict mode (unknown fields are errors), for the oldest and newest versions
#     checked here;
#   - the PodMonitor (a prometheus-operator CRD, which kubernetes-validate does not know) against
#     the CRD's schema as compiled into @kubernetes-models/prometheus-operator (npm), plus a check
#     that every field exists (crd-check/check-podmonitor.mjs).
# Tools are installed once into target/ (a Python venv and an npm folder), from PyPI and npm.
# Needs python3 (with venv), node and npm.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${VENV:-$root/target/ci-venv}
nodedir=$root/target/ci-node
versions=(1.29.0 1.37.0)
kv_version=1.37.0

if [[ ! -x $venv/bin/kubernetes-validate ]] ||
  [[ $("$venv/bin/pip" show kubernetes-validate 2>/dev/null | sed -n 's/^Version: //p') != "$kv_version" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$kv_version"
fi

manifests=("$here"/*.yaml)
echo "validate: ${#manifests[@]} manifests: ${manifests[*]##*/}"

# Built-in kinds: every document but the PodMonitor, each Kubernetes version.
builtin=$(mktemp -d)
trap 'rm -rf "$builtin"' EXIT
"$venv/bin/python" - "$builtin" "${manifests[@]}" <<'EOF'
import json, sys, yaml
out, files = sys.argv[1], sys.argv[2:]
objects, n = [], 0
for f in files:
    for doc in yaml.safe_load_all(open(f)):
        if doc is None:
            continue
        objects.append({"file": f.rsplit("/", 1)[-1], "object": doc})
        if doc.get("apiVersion", "").startswith("monitoring.coreos.com/"):
            continue
        n += 1
        base = f.rsplit("/", 1)[-1].removesuffix(".yaml")
        with open(f"{out}/{base}.{n}.{doc['kind']}.{doc['metadata']['name']}.yaml", "w") as o:
            yaml.safe_dump(doc, o)
json.dump(objects, open(f"{out}/all.json", "w"))
EOF
failed=0
for v in "${versions[@]}"; do
  "$venv/bin/kubernetes-validate" --strict --kubernetes-version "$v" "$builtin"/*.yaml || failed=1
done

# The PodMonitor against the CRD schema.
if [[ ! -d $nodedir/node_modules ]] || ! cmp -s "$here/crd-check/package-lock.json" "$nodedir/package-lock.json"; then
  mkdir -p "$nodedir"
  cp "$here/crd-check/package.json" "$here/crd-check/package-lock.json" "$nodedir/"
  (cd "$nodedir" && npm ci --silent --no-audit --no-fund --loglevel=error)
fi
cp "$here/crd-check/check-podmonitor.mjs" "$nodedir/"
node "$nodedir/check-podmonitor.mjs" "$builtin/all.json" || failed=1
if ((failed)); then
  echo "validate: FAILED" >&2
  exit 1
fi
echo "validate: OK"
