// Validates PodMonitor objects against prometheus-operator's CRD schema, offline.
//
// Usage: node check-podmonitor.mjs OBJECTS.json   (a JSON array of manifests; others are skipped)
//
// 1. The schema: @kubernetes-models/prometheus-operator compiles the CRD's OpenAPI schema into
//    validators (types, required fields, enums, patterns such as the duration format).
// 2. Unknown fields: the CRD schema allows any (the API server prunes them silently), so a typo
//    (`podMetricEndpoints`) would pass. Every key is therefore looked up in the package's type
//    declarations (.d.ts), generated from the same Go types, down to the leaves.
import { readFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";

const require = createRequire(import.meta.url);
const pkgDir = path.dirname(require.resolve("@kubernetes-models/prometheus-operator/package.json"));
const modules = path.resolve(pkgDir, "..", "..");

// The declared properties of the class in a .d.ts file: name -> declaration file of its type
// (null for strings, numbers, maps and other leaves).
const cache = new Map();
function declared(file) {
  if (cache.has(file)) return cache.get(file);
  const text = readFileSync(file, "utf8");
  const imports = new Map();
  for (const m of text.matchAll(/^import \{ (\w+) \} from "([^"]+)";$/gm)) {
    const spec = m[2].replace(/\.js$/, "");
    const target = spec.startsWith(".")
      ? path.resolve(path.dirname(file), spec + ".d.ts")
      : path.join(modules, spec + ".d.ts");
    imports.set(m[1], target);
  }
  const body = text.slice(text.indexOf("export declare class "));
  const props = new Map();
  for (const m of body.matchAll(/^ {4}"([^"]+)"\??: (.*)$/gm)) {
    const ident = (m[2].match(/\b(I\w+)\b/) || [])[1];
    props.set(m[1], ident && imports.has(ident) ? imports.get(ident) : null);
  }
  const result = { props };
  cache.set(file, result);
  return result;
}

function unknownKeys(value, file, where, out) {
  if (Array.isArray(value)) {
    value.forEach((v, i) => unknownKeys(v, file, `${where}[${i}]`, out));
    return;
  }
  if (value === null || typeof value !== "object" || !existsSync(file)) return;
  const { props } = declared(file);
  for (const [k, v] of Object.entries(value)) {
    if (!props.has(k)) out.push(`${where}.${k}: unknown field`);
    else if (props.get(k)) unknownKeys(v, props.get(k), `${where}.${k}`, out);
  }
}

const root = path.join(pkgDir, "monitoring.coreos.com/v1/PodMonitor.d.ts");
const objects = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = 0;
let checked = 0;
for (const { file, object } of objects) {
  if (object?.kind !== "PodMonitor") continue;
  checked++;
  const name = `${file}: PodMonitor/${object.metadata?.name}`;
  const problems = [];
  try {
    new PodMonitor(object).validate();
  } catch (e) {
    problems.push(e.message);
  }
  unknownKeys(object, root, "", problems);
  if (problems.length) {
    failed++;
    console.error(`${name}: INVALID\n  ${problems.join("\n  ")}`);
  } else {
    console.log(`${name}: valid (prometheus-operator CRD schema, no unknown fields)`);
  }
}
if (checked === 0) {
  console.error("no PodMonitor found");
  process.exit(1);
}
process.exit(failed ? 1 : 0);
