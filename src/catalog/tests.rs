//! The registry's own rules: names unique (also once colons are underscores), every one valid,
//! counters named `_total`, and the whole list with the embedded pattern file.

use super::*;
use crate::parse::patterns::Patterns;

/// Pairs of our own families that meet once colons are underscores: none since issue 36
/// renamed `sglang_swa_used_tokens` and `sglang_http_requests_total` ([`RENAMED`]). A new pair fails the test.
const KNOWN_OWN_COLLISIONS: &[(&str, &str)] = &[];

fn whole() -> Vec<Entry> {
    every_family(Patterns::embedded().unwrap().family_entries())
}

#[test]
fn every_registry_name_is_declared_once_and_valid() {
    let defs: Vec<&FamilyDef> = registry().collect();
    assert_eq!(defs.len(), 7 + 8 + 13 + 5 + 3 + 43 + 11);
    let mut names: Vec<&str> = defs.iter().map(|d| d.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), defs.len());
    for d in defs {
        assert!(
            crate::parse::patterns::valid_metric_name(d.name),
            "{}",
            d.name
        );
        assert_eq!(
            d.kind == Kind::Counter,
            d.name.ends_with("_total"),
            "{}",
            d.name
        );
        assert!(!d.help.is_empty() && !d.reads.is_empty(), "{}", d.name);
        // `branch` and `rustc` (of `build_info`) are not in `is_exported_label`'s list: a
        // `--push.label branch=…` is not refused today (left for its own change).
        assert!(
            d.label_keys()
                .all(|l| crate::family::is_exported_label(l) || ["branch", "rustc"].contains(&l)),
            "{}: {:?}",
            d.name,
            d.labels
        );
        assert!(taken_by(d.name, d.kind).is_some_and(|t| t.starts_with(d.name)));
    }
}

#[test]
fn the_whole_list_has_every_family_once() {
    let all = whole();
    let pat = Patterns::embedded().unwrap();
    assert_eq!(all.len(), pat.metrics.len() + registry().count());
    let mut names: Vec<&str> = all.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len());
    // /metrics order: the process families, the pattern file's, then the rank extras.
    assert_eq!(all[0].name, process::CPU_SECONDS.name);
    assert_eq!(all[7].name, pat.metrics[0].name);
    assert_eq!(all[7 + pat.metrics.len()].name, rank::IDLE.name);
    assert_eq!(all.last().unwrap().name, gpu::RANK_MEMORY_TOTAL.name);
}

/// No two of our families meet once colons are underscores (prometheus_client's OpenMetrics
/// escaping, many relabel rules), but the known pairs (issue 36).
#[test]
fn no_two_of_our_families_meet_once_colons_are_underscores() {
    let all = whole();
    let mut found = Vec::new();
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            if underscored(&a.name) == underscored(&b.name) {
                found.push((a.name.as_str(), b.name.as_str()));
            }
        }
    }
    assert_eq!(found, KNOWN_OWN_COLLISIONS);
    // Nor in any name a family writes: a histogram's samples, a counter's OpenMetrics name.
    for (i, a) in all.iter().enumerate() {
        let mine = forms(&a.name, a.kind);
        for b in &all[i + 1..] {
            let theirs = forms(&b.name, b.kind);
            assert!(
                !theirs.iter().any(|f| mine.contains(f)),
                "{} and {} write one name",
                a.name,
                b.name
            );
        }
    }
    let pairs = collisions(&all);
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(pairs, KNOWN_OWN_COLLISIONS);
}

#[test]
fn units_are_read_from_names() {
    assert_eq!(
        unit_of_name("sglang:e2e_request_latency_seconds"),
        "seconds"
    );
    assert_eq!(unit_of_name("sglang_kv_pool_size_bytes"), "bytes");
    assert_eq!(unit_of_name("sglang:num_running_reqs"), "requests");
    assert_eq!(
        unit_of_name("sglang:num_retracted_requests_total"),
        "requests"
    );
    assert_eq!(unit_of_name("sglang:is_cuda_graph"), "");
}
