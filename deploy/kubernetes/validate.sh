#!/usr/bin/env bash
# Validates every manifest of deploy/kubernetes/ offline, as .ci/run does:
#   - built-in kinds (DaemonSet, Service, ServiceAccount, Deployment) against Kubernetes' own
#     OpenAPI schemas with kubernetes-validate (PyPI; it bundles the schemas of Kubernetes
#     1.25-1.37), in strict mode (unknown fields are errors), for the oldest and newest versions
#     checked here;
#   - the PodMonitor (a prometheus-operator CRD, which kubernetes-validate does not know) against
#     the CRD's schema as compiled into @kubernetes-models/prometheus-operator (npm), plus a check
#     that every field exists (crd-check/check-podmonitor.mjs);
#   - kustomization.yaml rendered as `kubectl apply -k` renders it (its namespace set on every
#     object, its `images:` replacing the container image), the result validated as above, and
#     checked to start on a stock cluster: every resource listed exists, the Namespace comes with
#     Pod Security level `privileged` (hostPath), the image is the one `images:` names (with a
#     registry), no pod asks for a system-* priority class outside kube-system (refused where a
#     ResourceQuota limits them), and nothing needs a CRD (the PodMonitor is applied apart).
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

manifests=()
for f in "$here"/*.yaml; do
  [[ ${f##*/} == kustomization.yaml ]] || manifests+=("$f")
done
echo "validate: ${#manifests[@]} manifests and kustomization.yaml: ${manifests[*]##*/}"

# Built-in kinds: every document but the PodMonitor, each Kubernetes version.
builtin=$(mktemp -d)
trap 'rm -rf "$builtin"' EXIT
"$venv/bin/python" - "$builtin" "$here/kustomization.yaml" "${manifests[@]}" <<'EOF'
import copy, json, os, sys, yaml
out, kfile, files = sys.argv[1], sys.argv[2], sys.argv[3:]
objects, n, errors = [], 0, []
def write(name, doc):
    global n
    n += 1
    with open(f"{out}/{name}.{n}.{doc['kind']}.{doc['metadata']['name']}.yaml", "w") as o:
        yaml.safe_dump(doc, o)
for f in files:
    for doc in yaml.safe_load_all(open(f)):
        if doc is None:
            continue
        objects.append({"file": f.rsplit("/", 1)[-1], "object": doc})
        if doc.get("apiVersion", "").startswith("monitoring.coreos.com/"):
            continue
        write(f.rsplit("/", 1)[-1].removesuffix(".yaml"), doc)
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        for c in spec.get("containers", []):
            # The exporter's image: kustomization.yaml's to replace, or one with a registry.
            img = c["image"].split(":")[0]
            if c["name"] == "sglang-log-exporter" and img != "sglang-log-exporter" and "." not in img.split("/")[0]:
                errors.append(f"{f.rsplit('/', 1)[-1]}: image {c['image']} names no registry")
json.dump(objects, open(f"{out}/all.json", "w"))

# kustomization.yaml, rendered as kubectl's kustomize does for the fields it uses.
k = yaml.safe_load(open(kfile))
known = {"apiVersion", "kind", "namespace", "resources", "images"}
if set(k) - known:
    errors.append(f"kustomization.yaml: fields this check does not render: {sorted(set(k) - known)}")
images = {i["name"]: i for i in k.get("images", [])}
ns = k["namespace"]
pods = []
rendered = []
for r in k["resources"]:
    path = os.path.join(os.path.dirname(kfile), r)
    if not os.path.isfile(path):
        errors.append(f"kustomization.yaml: resource {r} does not exist")
        continue
    for doc in yaml.safe_load_all(open(path)):
        if doc is None:
            continue
        doc = copy.deepcopy(doc)
        if doc["apiVersion"].split("/")[0].endswith(".coreos.com"):
            errors.append(f"{r}: {doc['kind']} needs a CRD a stock cluster lacks")
        if doc["kind"] != "Namespace":
            doc["metadata"]["namespace"] = ns
        spec = doc.get("spec", {}).get("template", {}).get("spec")
        if spec is not None:
            pods.append((r, doc, spec))
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                name, _, tag = c["image"].partition(":")
                if name in images:
                    i = images[name]
                    c["image"] = f"{i.get('newName', name)}:{i.get('newTag', tag)}"
        rendered.append(doc)
        write("kustomize", doc)
namespaces = [d for d in rendered if d["kind"] == "Namespace"]
if [d["metadata"]["name"] for d in namespaces] != [ns]:
    errors.append(f"kustomization.yaml: the Namespace {ns} is not among its resources")
for r, doc, spec in pods:
    where = f"{r}: {doc['kind']} {doc['metadata']['name']}"
    pc = spec.get("priorityClassName", "")
    if pc.startswith("system-") and ns != "kube-system":
        errors.append(f"{where}: priorityClassName {pc} outside kube-system")
    if any("hostPath" in v for v in spec.get("volumes", [])):
        labels = namespaces[0]["metadata"].get("labels", {}) if namespaces else {}
        if labels.get("pod-security.kubernetes.io/enforce") != "privileged":
            errors.append(f"{where}: hostPath volumes, but namespace {ns} is not Pod Security level privileged")
    for c in spec["containers"]:
        img = c["image"]
        if "/" not in img.split(":")[0] or "." not in img.split("/")[0]:
            errors.append(f"{where}: image {img} names no registry (kustomization.yaml's images:)")
        elif c["name"] == "sglang-log-exporter" and not img.endswith("/sglang-log-exporter:0.1.0"):
            errors.append(f"{where}: image {img} is not sglang-log-exporter:0.1.0")
        else:
            print(f"validate: {where}: image {img}")
for e in errors:
    print(f"validate: {e}", file=sys.stderr)
if errors:
    sys.exit(1)
print(f"validate: kustomization.yaml renders {len(rendered)} objects into namespace {ns}")
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
