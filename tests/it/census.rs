//! Every format SGLang has printed, from the released code (`tools/format-census` read all 160
//! releases on PyPI, v0.1.3-v0.5.23, and wrote `docs/formats-by-version.md` and one golden line
//! per format variant in `tests/data/census-lines.tsv`): each golden line parses as its kind, and
//! every number it prints is read into the metric the pattern file maps its key to, with the
//! printed value (scaled to base units). A key or line the exporter does not export must be in
//! the list below, with the reason.

use std::collections::BTreeMap;
use std::sync::Arc;

use sglang_log_exporter::parse::fields::{compound_key, parse_value};
use sglang_log_exporter::parse::patterns::{FieldTarget, MetricId, Patterns};
use sglang_log_exporter::parse::Parser;

use crate::common::root;

/// Printed keys not exported, and why.
const NOT_EXPORTED: &[(&str, &str)] = &[
    ("VA upper bound", "reserved address space, not memory"),
    ("target_layers", "layer counts of a packed MTP host pool"),
    ("draft_layers", "layer counts of a packed MTP host pool"),
    ("total_layers", "layer counts of a packed MTP host pool"),
    (
        "Committed real weights after CUDA graph capture in",
        "a duration of the deferred weight commit, no memory figure",
    ),
    (
        "capture overlap window",
        "a duration of the deferred weight commit",
    ),
    (
        "startup overlap total",
        "a duration of the deferred weight commit",
    ),
];

/// Lines not matched on purpose: reserved address space is not memory in use
/// (`SWAKVPool VA upper bound:`; a pool's `KV Cache VA upper bound.` is matched, see
/// [`RESERVED`]).
const NOT_MATCHED: &[&str] = &["VA upper bound"];

/// A pool's reserved address space (`KV Cache VA upper bound.`, v0.5.18+): matched (the state
/// notes that its runner built its pool, `src/state/draft.rs`) with no figure read; not the
/// MiniMax indexer's side cache (`... index KV Cache VA upper bound.`, no KV pool: unmatched).
const RESERVED: &str = "KV Cache VA upper bound. ";

/// The census names a value printed without a key by the words around it; these are the regex
/// groups of the pattern file that read them (the second for the SWA host pool line).
fn descriptive(key: &str, swa: bool) -> Option<&'static str> {
    Some(match (key, swa) {
        ("GB host memory for hierarchical KV cache", _) => "hicache_host_gb",
        ("hierarchical KV host pool", false) => "hicache_host_tokens",
        ("hierarchical KV host pool", true) => "hicache_swa_host_tokens",
        ("GB host memory", false) => "hicache_host_gb",
        ("GB host memory", true) => "hicache_swa_host_gb",
        _ => return None,
    })
}

struct Row {
    id: String,
    versions: String,
    line: String,
    expected: Vec<(String, String)>,
}

fn rows() -> Vec<Row> {
    let text = std::fs::read_to_string(root().join("tests/data/census-lines.tsv")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            let expected = c[3]
                .split(',')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.rsplit_once('=').unwrap();
                    (k.to_string(), v.to_string())
                })
                .collect();
            Row {
                id: c[0].into(),
                versions: c[1].into(),
                line: c[2].into(),
                expected,
            }
        })
        .collect()
}

/// What the pattern file makes of `key` on a line of kind `kind`: a metric and its scale, or
/// `None` for a key it ignores on purpose. `Err` for a key it does not know.
fn target(
    pat: &Patterns,
    kind: usize,
    key: &str,
    swa: bool,
) -> Result<Option<(MetricId, f64, bool)>, String> {
    let lk = &pat.lines[kind];
    // `#token: full` (v0.4.9 compound values) is the key `#full token`.
    let key = match key.split_once(": ") {
        Some((k, sub)) => compound_key(k, sub, &mut String::new()).to_string(),
        None => key.to_string(),
    };
    let t = pat.field(lk, &key).or_else(|| {
        let group = descriptive(&key, swa)?;
        let gi = lk.regex.capture_names().position(|n| n == Some(group))?;
        lk.group_fields
            .iter()
            .find(|(g, _)| *g == gi)
            .map(|(_, t)| *t)
    });
    match t {
        Some(FieldTarget::Metric { id, scale, sum, .. }) => Ok(Some((id, scale, sum))),
        Some(FieldTarget::Ignore) => Ok(None),
        None if NOT_EXPORTED.iter().any(|(k, _)| *k == key) => Ok(None),
        None => Err(format!("unknown key {key:?}")),
    }
}

#[test]
fn every_census_format_is_read_with_its_printed_values() {
    let pat = Arc::new(Patterns::embedded().unwrap());
    let mut parser = Parser::new(pat.clone());
    let rows = rows();
    assert!(rows.len() >= 250, "the census lines are missing");
    let mut failures = Vec::new();
    let mut checked = 0;
    for row in &rows {
        let fail = |why: String| format!("{} ({}): {why}\n    {}", row.id, row.versions, row.line);
        let Some(rec) = parser.parse(&row.line) else {
            if !NOT_MATCHED.iter().any(|m| row.line.contains(m)) {
                failures.push(fail("not matched".into()));
            }
            continue;
        };
        if rec.bad_values > 0 {
            failures.push(fail(format!("{} unreadable values", rec.bad_values)));
        }
        if row.line.contains(RESERVED) && !row.line.contains(" index ") {
            if !rec.values.is_empty() || pat.lines[rec.kind].name != "kv_cache_reserved" {
                failures.push(fail(format!("reserved, read as {:?}", rec.values)));
            }
            continue;
        }
        let unknown: Vec<&str> = rec.unknown_keys().collect();
        if !unknown.is_empty() {
            failures.push(fail(format!("unknown keys {unknown:?}")));
        }
        let swa = row.line.contains("Allocating swa ");
        let mut want: BTreeMap<MetricId, f64> = BTreeMap::new();
        for (key, raw) in &row.expected {
            match target(&pat, rec.kind, key, swa) {
                Err(e) => failures.push(fail(e)),
                Ok(None) => {}
                Ok(Some((id, scale, sum))) => {
                    let v = parse_value(raw).unwrap_or_else(|e| panic!("{}: {raw}: {e:?}", row.id))
                        * scale;
                    let slot = want.entry(id).or_insert(0.0);
                    *slot = if sum { *slot + v } else { v };
                }
            }
        }
        for (id, v) in want {
            let name = &pat.metrics[id as usize].id;
            match rec.get(id) {
                Some(got) if (got - v).abs() <= 1e-9 * v.abs().max(1.0) => checked += 1,
                got => failures.push(fail(format!("{name}: got {got:?}, printed {v}"))),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} census lines are not read as printed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
    assert!(checked > 1500, "only {checked} values checked");
}

/// A KV-pool or graph-capture line that names the draft model (`Post-capture KV sizing: draft
/// KV cache allocated`, `Capture draft extend cuda graph end`, `Capture Frozen-KV MTP draft ...`)
/// in any release is read as the draft's (a `*_draft` kind, whose figures go to the `draft_*`
/// metrics); one that does not name it is the target's.
#[test]
fn census_lines_that_name_the_draft_are_the_drafts() {
    let pat = Arc::new(Patterns::embedded().unwrap());
    let mut parser = Parser::new(pat.clone());
    let mut seen = [0, 0];
    for row in rows() {
        let census_kind = row.id.split('-').next().unwrap_or("");
        if !matches!(census_kind, "kv_pool" | "graph_end") || row.line.contains("VA upper bound") {
            continue;
        }
        let rec = parser.parse(&row.line).expect(&row.id);
        let kind = &pat.lines[rec.kind].name;
        let draft = row.line.contains("draft ");
        assert_eq!(
            kind.ends_with("_draft"),
            draft,
            "{} read as {kind}: {}",
            row.id,
            row.line
        );
        seen[usize::from(draft)] += 1;
        for &(id, _) in rec.values {
            let metric = &pat.metrics[id as usize].id;
            assert_eq!(metric.starts_with("draft_"), draft, "{}: {metric}", row.id);
        }
    }
    assert!(seen[0] >= 30 && seen[1] >= 15, "{seen:?}");
}

/// The start-up dump of the server arguments in every release that prints one
/// (`tools/server-args-census` read all 160 releases into `tests/data/census-server-args.tsv`
/// and `docs/server-args-by-version.md`): the dataclass repr `server_args=ServerArgs(...)` to
/// v0.5.18 and the dict repr `server_args={...}` from v0.5.19, each rendered with every field of
/// its release, is read as a `server_args` line with every value the reader uses.
#[test]
fn every_census_server_args_shape_is_read_with_its_values() {
    use sglang_log_exporter::parse::patterns::Class;
    let text = std::fs::read_to_string(root().join("tests/data/census-server-args.tsv")).unwrap();
    let pat = Arc::new(Patterns::embedded().unwrap());
    let mut parser = Parser::new(pat.clone());
    let mut rows = 0;
    for l in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let c: Vec<&str> = l.split('\t').collect();
        let (id, line) = (c[0], c[2]);
        let want: BTreeMap<&str, &str> = c[3]
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let rec = parser
            .parse(line)
            .unwrap_or_else(|| panic!("{id}: not matched"));
        assert_eq!(rec.class, Class::ServerArgs, "{id}");
        let a = rec.server_args.as_deref().expect("server args");
        let num = |k: &str| want.get(k).map(|v| v.parse::<u32>().unwrap());
        assert_eq!(
            a.model_name.as_deref(),
            want.get("model_name").copied(),
            "{id}"
        );
        assert_eq!(a.tp_size, num("tp_size"), "{id}");
        // v0.5.22+ print DP attention as `attn_dp_size` beside `dp_size: 1`: the reader takes
        // the width the ranks show.
        let dp = match (num("dp_size"), num("attn_dp_size")) {
            (Some(d), Some(a)) => Some(d.max(a)),
            (d, _) => d,
        };
        assert_eq!(a.dp_size, dp, "{id}");
        assert_eq!(a.pp_size, num("pp_size"), "{id}");
        assert_eq!(a.nnodes, num("nnodes"), "{id}");
        assert_eq!(a.node_rank, num("node_rank"), "{id}");
        assert_eq!(a.base_gpu_id, num("base_gpu_id"), "{id}");
        assert_eq!(a.gpu_id_step, num("gpu_id_step"), "{id}");
        assert_eq!(
            a.disaggregation_mode.as_deref(),
            want.get("disaggregation_mode").copied(),
            "{id}"
        );
        assert_eq!(
            a.enable_dp_attention,
            want.get("enable_dp_attention").map(|v| *v == "true"),
            "{id}"
        );
        assert_eq!(
            a.speculative_algorithm.as_deref(),
            want.get("speculative_algorithm").copied(),
            "{id}"
        );
        rows += 1;
    }
    assert_eq!(rows, 11, "the census rows are missing");
}

/// Lines that look like the dump but are not the main process's (the scheduler's `Global server
/// args updated! get_global_server_args()=ServerArgs(...)`, v0.5.3.post2-v0.5.16; v0.4.9's
/// `global_server_args_dict={...}`; v0.1.15-v0.1.22's `server_args: disable_flashinfer=...`)
/// are never read as one: a server_args line restarts its server.
#[test]
fn look_alike_server_args_lines_are_not_the_dump() {
    use sglang_log_exporter::parse::patterns::Class;
    let pat = Arc::new(Patterns::embedded().unwrap());
    let mut parser = Parser::new(pat);
    for line in [
        "[2026-01-02 03:04:05 TP0] Global server args updated! get_global_server_args()=ServerArgs(model_path='/m', tp_size=4)",
        "[2025-07-01 03:04:05 TP0] Global server args updated! global_server_args_dict={'attention_backend': 'fa3', 'tp_size': 4}",
        "[gpu_id=0] server_args: disable_flashinfer=False, disable_radix_cache=False",
    ] {
        let class = parser.parse(line).map(|r| r.class);
        assert_ne!(class, Some(Class::ServerArgs), "{line}");
    }
}

/// The pool each `allocation_label` names (v0.5.17+ `mem_cache/memory_pool.py` prints
/// `{label} KV Cache is allocated. ...`; the census renders every value its release's callers
/// pass): the line kind that must read it, and the metrics its figures go to.
const POOL_LABELS: &[(Option<&str>, &str, &[&str])] = &[
    // No label: every pool before v0.5.17, and any pool built without one since.
    (
        None,
        "kv_cache",
        &["kv_pool_capacity_tokens", "kv_pool_size_bytes"],
    ),
    // v0.5.17+ `mem_cache/swa_memory_pool.py`: a hybrid SWA model's full-attention pool.
    (
        Some("Full"),
        "kv_cache",
        &["kv_pool_capacity_tokens", "kv_pool_size_bytes"],
    ),
    // v0.5.17+ `mem_cache/swa_memory_pool.py`: its sliding-window pool.
    (
        Some("SWA"),
        "kv_cache_swa",
        &["swa_pool_capacity_tokens", "swa_layer_pool_size_bytes"],
    ),
    // v0.5.23 `mem_cache/minimax_m3_nvfp4_pool.py`: a MiniMax sparse model's main pool.
    (
        Some("MiniMax MSA-v1 main NVFP4"),
        "kv_cache",
        &["kv_pool_capacity_tokens", "kv_pool_size_bytes"],
    ),
    // v0.5.23 `mem_cache/minimax_m3_nvfp4_pool.py`: its indexer's K-only side cache, no KV pool.
    (Some("MiniMax MSA-v1 index"), "kv_cache_index", &[]),
];

/// Every `[label ]KV Cache is allocated.` line of the census is read as the pool its label names
/// (a sliding-window pool or an index cache is never the rank's KV pool), with every figure in
/// that pool's metrics; a label no entry places fails (a new release built a pool the pattern
/// file does not know).
#[test]
fn census_kv_pool_lines_are_read_as_the_pool_their_label_names() {
    let pat = Arc::new(Patterns::embedded().unwrap());
    let mut parser = Parser::new(pat.clone());
    let mut seen = vec![0; POOL_LABELS.len()];
    for row in rows().iter().filter(|r| r.id.starts_with("kv_pool-")) {
        let msg = row
            .line
            .split_once("] ")
            .map_or(row.line.as_str(), |(_, m)| m);
        let Some((label, _)) = msg.split_once("KV Cache is allocated. ") else {
            continue;
        };
        let label = label.strip_suffix(' ');
        let Some(i) = POOL_LABELS.iter().position(|(l, _, _)| *l == label) else {
            panic!("{}: pool label {label:?} is placed by no line kind", row.id);
        };
        let (_, kind, metrics) = POOL_LABELS[i];
        seen[i] += 1;
        let rec = parser.parse(&row.line).expect(&row.id);
        assert_eq!(pat.lines[rec.kind].name, kind, "{}: {}", row.id, row.line);
        let got: Vec<&str> = rec
            .values
            .iter()
            .map(|&(id, _)| pat.metrics[id as usize].id.as_str())
            .collect();
        // Every figure goes to that pool's metrics (lines before v0.4.3.post3 print no
        // `#tokens`); a side cache's to none.
        assert!(
            got.iter().all(|m| metrics.contains(m)) && got.is_empty() == metrics.is_empty(),
            "{}: {got:?}, not in {metrics:?}: {}",
            row.id,
            row.line
        );
    }
    // Every label of every release is in the census (v0.5.17-v0.5.23).
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
}
