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

/// Lines not matched on purpose: reserved address space is not memory in use.
const NOT_MATCHED: &[&str] = &["VA upper bound"];

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

/// A KV-pool or graph-capture line that names the draft model (`draft KV Cache is allocated`,
/// `Capture draft extend cuda graph end`, `Capture Frozen-KV MTP draft ...`) in any release is
/// read as the draft's (a `*_draft` kind, whose figures go to the `draft_*` metrics); one that
/// does not name it is the target's.
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
