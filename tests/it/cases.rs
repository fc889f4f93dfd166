//! Every public case (`tests/data/cases/`, copied from `../shared/cases/`): small logs in the
//! shapes people have posted, each with the values a correct exporter shows after
//! `--once --gpu.disable --timezone UTC NAME.log` (`NAME.expected`, format in the cases'
//! README). One test runs them all, so a new case file is a new test.
//!
//! Label rule: an empty expected value (`tp_rank=`) means the label is absent or empty. For the
//! rank labels SGLang's own metrics set whatever the prefix prints (`tp_rank`, `pp_rank`,
//! `moe_ep_rank`), the exporter follows upstream and shows `"0"` for a line without a rank tag
//! (DESIGN.md, docs/metrics-contract.md), so `"0"` also satisfies an empty expected value there.

use std::path::{Path, PathBuf};

use crate::common::{once, parse_exposition, root, Sample};

/// Labels upstream always sets, `"0"` where the prefix names no rank.
const UPSTREAM_DEFAULT_ZERO: [&str; 3] = ["tp_rank", "pp_rank", "moe_ep_rank"];

/// Equal up to the rounding of a unit conversion: the cases give byte counts from `X GB` both
/// exactly (`48.88 GB` × 2^30 = 52484500357.12) and rounded to whole bytes (42595338158), so
/// 1e-8 relative (a byte in 10^8, far below the two printed decimals of a GB value or a ratio).
fn close(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-8 * want.abs().max(1e-3)
}

fn label_matches(s: &Sample, k: &str, want: &str) -> bool {
    match s.label(k) {
        None => want.is_empty(),
        Some(v) => v == want || (want.is_empty() && UPSTREAM_DEFAULT_ZERO.contains(&k) && v == "0"),
    }
}

/// Checks one case; returns the rows that do not hold.
fn check_case(log: &Path) -> Vec<String> {
    let expected = std::fs::read_to_string(log.with_extension("expected")).unwrap();
    let expo = once(&["--gpu.disable", log.to_str().unwrap()]);
    let samples = parse_exposition(&expo);
    let mut bad = Vec::new();
    for row in expected
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let cols: Vec<&str> = row.split('\t').collect();
        let (metric, labels, value) = (cols[0], cols[1], cols[2]);
        let want: Vec<(&str, &str)> = labels
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap())
            .collect();
        let matching = samples
            .iter()
            .filter(|s| s.name == metric && want.iter().all(|(k, v)| label_matches(s, k, v)));
        let ok = match value {
            "ABSENT" => matching.count() == 0,
            v => {
                let v: f64 = v.parse().unwrap();
                matching.into_iter().any(|s| close(s.value, v))
            }
        };
        if !ok {
            let seen: Vec<String> = samples
                .iter()
                .filter(|s| s.name == metric)
                .map(|s| format!("{:?} {}", s.labels, s.value))
                .collect();
            bad.push(format!("{row}\n      seen: {seen:#?}"));
        }
    }
    bad
}

fn case_logs() -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(root().join("tests/data/cases"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

#[test]
fn every_public_case_shows_its_expected_values() {
    let logs = case_logs();
    assert!(logs.len() >= 12, "the cases are missing: {logs:?}");
    let mut failures = Vec::new();
    for log in &logs {
        let bad = check_case(log);
        if !bad.is_empty() {
            failures.push(format!("{}:\n  {}", log.display(), bad.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_label_rule_is_strict_where_the_log_names_the_rank() {
    // `tp_rank=0` in a case must not be satisfied by an absent or other label.
    let s = Sample {
        name: "m".into(),
        labels: vec![
            ("tp_rank".into(), "1".into()),
            ("dp_rank".into(), "0".into()),
        ],
        value: 1.0,
    };
    assert!(!label_matches(&s, "tp_rank", "0"));
    assert!(!label_matches(&s, "tp_rank", ""));
    assert!(!label_matches(&s, "dp_rank", ""));
    assert!(label_matches(&s, "moe_ep_rank", ""));
    assert!(close(52484500357.0, 52484500357.12));
    assert!(!close(52484500357.12 + 600.0, 52484500357.12));
    assert!(!close(0.15, 0.3));
    assert!(!close(6055903988.0, 6055903887.0));
    assert!(!close(0.0001, 0.0));
}

/// Our copies are the shared cases (`../shared/cases/`, beside the checkout as CI lays it) with
/// the families issue 36 renamed under their new names (`catalog::RENAMED`), and none is
/// missing: a case added there and not here fails.
#[test]
fn our_copies_are_the_shared_cases_with_the_renamed_names() {
    let shared = root().join("../shared/cases");
    let Ok(entries) = std::fs::read_dir(&shared) else {
        eprintln!(
            "note: {} is not beside this checkout; not compared",
            shared.display()
        );
        return;
    };
    let mut compared = 0;
    for e in entries {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if !(name.ends_with(".log") || name.ends_with(".expected")) {
            continue;
        }
        let mut want = std::fs::read_to_string(&path).unwrap();
        for (new, old) in sglang_log_exporter::catalog::RENAMED {
            want = want.replace(&format!("{old}\t"), &format!("{new}\t"));
        }
        let ours = std::fs::read_to_string(root().join("tests/data/cases").join(&name))
            .unwrap_or_else(|e| panic!("tests/data/cases/{name}: {e} (copy it from {shared:?})"));
        assert_eq!(ours, want, "tests/data/cases/{name}");
        compared += 1;
    }
    assert!(compared >= 26, "{compared} files compared");
}
