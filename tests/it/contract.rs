//! The exposition holds to `docs/metrics-contract.md`, the table of SGLang v0.5.23's own metrics
//! (read from the released wheel): every row the table marks `yes` appears in the exposition of
//! a log that prints its source lines, with upstream's name, type and every label upstream always
//! sets; and no `sglang:*` series of ours is outside the table. The table is data; this test
//! reads it.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::{once, parse_exposition, registry_mismatches, root, run, sample};

/// Labels of ours that upstream does not have (see the table's grammar).
const OURS: &[&str] = &[
    "server",
    "engine",
    "namespace",
    "pod",
    "container",
    "attn_cp_rank",
    "moe_dp_rank",
];

struct Row {
    name: String,
    kind: String,
    /// (label, always set).
    labels: Vec<(String, bool)>,
    exporter: String,
}

fn contract() -> Vec<Row> {
    let text = std::fs::read_to_string(root().join("docs/metrics-contract.md")).unwrap();
    let table = text
        .split("<!-- contract-table -->")
        .nth(1)
        .expect("the contract-table marker");
    table
        .lines()
        .skip_while(|l| !l.starts_with("| upstream name"))
        .skip(2)
        .take_while(|l| l.starts_with("| "))
        .map(|l| {
            let c: Vec<&str> = l.split(" | ").map(str::trim).collect();
            let name = c[0].trim_start_matches("| ").to_string();
            let labels = if c[2] == "-" {
                Vec::new()
            } else {
                c[2].split(", ")
                    .map(|l| match l.strip_suffix('?') {
                        Some(l) => (l.to_string(), false),
                        None => (l.to_string(), true),
                    })
                    .collect()
            };
            Row {
                name,
                kind: c[1].to_string(),
                labels,
                exporter: c[6].trim_end_matches(" |").to_string(),
            }
        })
        .collect()
}

/// A log that prints every source line the table names: the census's golden line of every
/// format (one file per release era would change nothing: the state keeps the last value),
/// the session samples, and the request logs when the exporter reads them.
fn corpus(dir: &std::path::Path) -> Vec<String> {
    let census = std::fs::read_to_string(root().join("tests/data/census-lines.tsv")).unwrap();
    let lines: Vec<&str> = census
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split('\t').nth(2))
        .collect();
    let p = dir.join("census.log");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let mut files = vec![p.display().to_string()];
    for s in [
        "pd-decode-session.log",
        "prefill-session.log",
        "single-gpu-2025.log",
    ] {
        files.push(sample(s).display().to_string());
    }
    let requests = root().join("tests/data/request-logs");
    for f in std::fs::read_dir(&requests).unwrap() {
        let f = f.unwrap().path();
        if f.extension().is_some_and(|e| e == "log") {
            files.push(format!(
                "{}={}",
                f.file_stem().unwrap().to_string_lossy(),
                f.display()
            ));
        }
    }
    files
}

#[test]
fn the_exposition_holds_to_the_upstream_contract() {
    let rows = contract();
    assert_eq!(
        rows.len(),
        173,
        "the table lists every upstream metric of v0.5.23"
    );
    let dir = tempfile::tempdir().unwrap();
    let files = corpus(dir.path());
    let mut args = vec!["--gpu.disable", "--idle-after", "1000000h"];
    args.extend(files.iter().map(String::as_str));
    let expo = once(&args);
    let samples = parse_exposition(&expo);
    let types: BTreeMap<&str, &str> = expo
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    let mut failures = Vec::new();
    let mut published = 0;
    for row in rows.iter().filter(|r| r.exporter.starts_with("yes")) {
        published += 1;
        let Some(kind) = types.get(row.name.as_str()) else {
            failures.push(format!("{}: not in the exposition", row.name));
            continue;
        };
        if *kind != row.kind {
            failures.push(format!("{}: type {kind}, upstream {}", row.name, row.kind));
        }
        let base = |n: &str| {
            ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| n.strip_suffix(s))
                .unwrap_or(n)
                .to_string()
        };
        for s in samples
            .iter()
            .filter(|s| base(&s.name) == row.name || s.name == row.name)
        {
            let have: BTreeSet<&str> = s.labels.iter().map(|(k, _)| k.as_str()).collect();
            for (l, always) in &row.labels {
                if *always && !have.contains(l.as_str()) {
                    failures.push(format!("{}: no label {l} on {:?}", row.name, s.labels));
                }
            }
            for l in &have {
                let known =
                    row.labels.iter().any(|(u, _)| u == l) || OURS.contains(l) || *l == "le";
                if !known {
                    failures.push(format!("{}: label {l} is not upstream's", row.name));
                }
            }
        }
    }
    // Nothing of ours under an upstream-style name that the contract does not list.
    let names: BTreeSet<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    for n in types.keys().filter(|n| n.starts_with("sglang:")) {
        if !names.contains(n) {
            failures.push(format!(
                "{n}: an sglang:* family the contract does not list"
            ));
        }
    }
    failures.sort();
    failures.dedup();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(published >= 34, "{published}");
}

/// The section "Every family this exporter exposes" is what the generator writes from the
/// families registry and the embedded pattern file.
#[test]
fn the_generated_family_table_is_up_to_date() {
    let committed = std::fs::read_to_string(root().join("docs/metrics-contract.md")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("metrics-contract.md");
    std::fs::write(&copy, &committed).unwrap();
    let out = run(&["generate", "metrics-contract", copy.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let generated = std::fs::read_to_string(&copy).unwrap();
    assert!(
        generated == committed,
        "docs/metrics-contract.md's generated section is out of date: run \
         `cargo run -- generate metrics-contract docs/metrics-contract.md` and commit the result"
    );
}

/// `name` with each `:` turned into `_` (prometheus_client's OpenMetrics escaping, many relabel
/// rules).
fn underscored(name: &str) -> String {
    name.replace(':', "_")
}

/// The names `GET /v1/loads?format=prometheus` serves (SGLang v0.5.23,
/// `sglang/srt/entrypoints/v1_loads.py` `_format_loads_prometheus` over
/// `sglang/srt/managers/load_snapshot.py`'s `LoadSnapshot`): `sglang_<core key>` and
/// `sglang_<section prefix>_<key>` (`spec` for `speculative`, `disagg` for `disaggregation`),
/// numbers only, each with `dp_rank`.
const V1_LOADS_NAMES: &[&str] = &[
    "sglang_timestamp",
    "sglang_num_running_reqs",
    "sglang_num_waiting_reqs",
    "sglang_num_waiting_uncached_tokens",
    "sglang_num_used_tokens",
    "sglang_num_total_tokens",
    "sglang_num_active_tokens",
    "sglang_num_prealloc_ready_tokens",
    "sglang_max_total_num_tokens",
    "sglang_max_running_requests",
    "sglang_token_usage",
    "sglang_gen_throughput",
    "sglang_cache_hit_rate",
    "sglang_utilization",
    "sglang_total_prefill_uncached_tokens",
    "sglang_total_prefill_busy_us",
    "sglang_memory_weight_gb",
    "sglang_memory_kv_cache_gb",
    "sglang_memory_graph_gb",
    "sglang_memory_token_capacity",
    "sglang_spec_accept_length",
    "sglang_spec_accept_rate",
    "sglang_lora_slots_used",
    "sglang_lora_slots_total",
    "sglang_lora_utilization",
    "sglang_disagg_prefill_bootstrap_queue_reqs",
    "sglang_disagg_prefill_inflight_queue_reqs",
    "sglang_disagg_decode_prealloc_queue_reqs",
    "sglang_disagg_decode_transfer_queue_reqs",
    "sglang_disagg_decode_retracted_queue_reqs",
    "sglang_disagg_kv_transfer_speed_gb_s",
    "sglang_disagg_kv_transfer_latency_ms",
    "sglang_queues_waiting",
    "sglang_queues_grammar",
    "sglang_queues_paused",
    "sglang_queues_retracted",
    "sglang_queues_prealloc_ready",
];

/// No family of ours is named as one of upstream's is in any style — colons as they are (UTF-8
/// names), or each colon an underscore (prometheus_client's OpenMetrics escaping, relabel
/// rules) — unless it is that very family (ours `sglang_X` beside upstream's `sglang:X` would be
/// one family there), and none is named as a series of `/v1/loads?format=prometheus`.
#[test]
fn no_family_of_ours_meets_an_upstream_name_in_any_style() {
    let contract = contract();
    let mut upstream: BTreeMap<String, String> = contract
        .iter()
        .map(|r| (underscored(&r.name), r.name.clone()))
        .collect();
    for n in V1_LOADS_NAMES {
        upstream.insert(n.to_string(), format!("/v1/loads?format=prometheus's {n}"));
    }
    let pat = sglang_log_exporter::parse::patterns::Patterns::embedded().unwrap();
    let ours = sglang_log_exporter::catalog::every_family(pat.family_entries());
    // SGLang's own names that we serve meet each other as SGLang's do (`sglang:token_usage`
    // and `/v1/loads`' `sglang_token_usage`): only names of our own are ours to keep apart.
    let met: Vec<String> = ours
        .iter()
        .filter(|e| !contract.iter().any(|r| r.name == e.name))
        .filter_map(|e| {
            let up = upstream.get(&underscored(&e.name))?;
            Some(format!("ours {} meets upstream {up}", e.name))
        })
        .collect();
    assert!(met.is_empty(), "{}", met.join("\n"));
    // The check finds what it is for: the names renamed by issue 36 met upstream's.
    for old in [
        "sglang_swa_used_tokens",
        "sglang_http_requests_total",
        "sglang_max_running_requests",
    ] {
        assert!(upstream.contains_key(old), "{old}");
    }
}

/// Every family of the contract corpus's exposition is in the whole list of families with its
/// HELP and type, and its series carry the list's labels: every unconditional one, nothing else,
/// in the list's order.
#[test]
fn the_exposition_shows_the_families_as_the_registry_declares_them() {
    let dir = tempfile::tempdir().unwrap();
    let files = corpus(dir.path());
    let mut args = vec!["--gpu.disable", "--idle-after", "1000000h"];
    args.extend(files.iter().map(String::as_str));
    let expo = once(&args);
    assert!(expo.matches("# TYPE ").count() > 40);
    let failures = registry_mismatches(&expo);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
