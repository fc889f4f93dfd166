//! Request metrics from `--log-requests` records: every sample log of
//! `tests/data/request-logs/` gives exactly its `.expected` values through `--once`; backfill
//! writes histograms that promtool accepts and a real Prometheus answers `histogram_quantile`
//! over; a Finish line of megabytes is read with `--max-line-bytes` raised and skipped and
//! counted without.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{bin, once, parse_exposition, root, run_with_input, Sample};
use crate::promtools;

/// The request families (histograms by their base name).
const FAMILIES: [&str; 13] = [
    "sglang:num_requests_total",
    "sglang:prompt_tokens_total",
    "sglang:generation_tokens_total",
    "sglang:cached_tokens_total",
    "sglang:num_so_requests_total",
    "sglang:spec_verify_calls_total",
    "sglang:e2e_request_latency_seconds",
    "sglang:time_to_first_token_seconds",
    "sglang:request_time_per_output_token_seconds",
    "sglang:queue_time_seconds",
    "sglang:prompt_tokens_histogram",
    "sglang:uncached_prompt_tokens_histogram",
    "sglang:generation_tokens_histogram",
];

/// Labels every series of ours has that `.expected` leaves out (the server's).
const SERVER_LABELS: [&str; 3] = ["server", "model_name", "engine_type"];

fn is_request_sample(name: &str) -> bool {
    let base = ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name);
    FAMILIES.contains(&base) || FAMILIES.contains(&name)
}

fn logs() -> Vec<PathBuf> {
    let dir = root().join("tests/data/request-logs");
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    assert_eq!(logs.len(), 5, "{logs:?}");
    logs
}

/// The labels a record determines (`is_streaming`, `cache_source`, `le`), `le` as a number.
fn record_labels(s: &Sample) -> BTreeMap<String, String> {
    s.labels
        .iter()
        .filter(|(k, _)| !SERVER_LABELS.contains(&k.as_str()))
        .map(|(k, v)| {
            let v = if k == "le" {
                let le: f64 = v.replace("+Inf", "inf").parse().expect("le is a number");
                format!("{le:e}")
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

/// Rows of `want` missing from `got` or with another value (sums within 1e-9 relative, the
/// rest exactly), and request samples of `got` that `want` does not have.
fn differences(got: &[Sample], want: &[Sample]) -> Vec<String> {
    let key = |s: &Sample| (s.name.clone(), record_labels(s));
    let got: BTreeMap<_, f64> = got
        .iter()
        .filter(|s| is_request_sample(&s.name))
        .map(|s| (key(s), s.value))
        .collect();
    let want: BTreeMap<_, f64> = want.iter().map(|s| (key(s), s.value)).collect();
    let mut bad = Vec::new();
    for (k, w) in &want {
        let ok = match got.get(k) {
            Some(g) if k.0.ends_with("_sum") => (g - w).abs() <= 1e-9 * w.abs(),
            Some(g) => g == w,
            None => false,
        };
        if !ok {
            bad.push(format!("{k:?}: want {w}, got {:?}", got.get(k)));
        }
    }
    bad.extend(
        got.keys()
            .filter(|k| !want.contains_key(*k))
            .map(|k| format!("{k:?}: not expected")),
    );
    bad
}

#[test]
fn every_sample_log_gives_its_expected_values() {
    for log in logs() {
        let expo = once(&["--gpu.disable", log.to_str().unwrap()]);
        let want =
            parse_exposition(&std::fs::read_to_string(log.with_extension("expected")).unwrap());
        assert!(want.len() > 100, "{log:?}");
        let got = parse_exposition(&expo);
        let bad = differences(&got, &want);
        assert!(bad.is_empty(), "{log:?}:\n{}", bad.join("\n"));
        // Each series carries the server's labels; a histogram is typed as one.
        let e2e = got
            .iter()
            .find(|s| s.name == "sglang:e2e_request_latency_seconds_count")
            .unwrap();
        let stem = log.file_stem().unwrap().to_str().unwrap();
        assert_eq!(e2e.label("server"), Some(stem));
        assert_eq!(e2e.label("engine_type"), Some("unified"));
        assert!(expo.contains("# TYPE sglang:e2e_request_latency_seconds histogram\n"));
        // Nothing of a request's content is a label.
        assert!(!expo.contains("HEALTH_CHECK") && !expo.contains("tenant-a"));
    }
}

#[test]
fn promtool_checks_the_histograms() {
    let log = root().join("tests/data/request-logs/v0.5.23-text.log");
    let expo = once(&["--gpu.disable", log.to_str().unwrap()]);
    let out = run_with_input(
        Command::new("promtool").args(["check", "metrics"]),
        expo.as_bytes(),
        "promtool (Debian package prometheus)",
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // Only lints on SGLang's own names (kept for its dashboards): `:` in every name, and
    // the type in its token histograms' names.
    let mut lints = 0;
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        lints += 1;
        let upstream_name = l.ends_with("metric names should not contain ':'")
            || (l.contains("_tokens_histogram metric name")
                && l.ends_with("should not include type 'histogram'"));
        assert!(upstream_name, "{l}");
    }
    assert!(lints >= 13, "{text}");
}

/// Prometheus' `histogram_quantile` over cumulative `(le, count)` buckets (`+Inf` last).
fn quantile(q: f64, buckets: &[(f64, f64)]) -> f64 {
    let total = buckets.last().unwrap().1;
    let rank = q * total;
    let i = buckets.iter().position(|(_, c)| *c >= rank).unwrap();
    let (upper, count) = buckets[i];
    let (lower, below) = if i == 0 { (0.0, 0.0) } else { buckets[i - 1] };
    lower + (upper - lower) * (rank - below) / (count - below)
}

/// Runs `backfill` of `log` (UTC prefix times) to `out`.
fn backfill(log: &Path, out: &Path) {
    let o = Command::new(bin())
        .args(["backfill", "--timezone", "UTC", "-o"])
        .arg(out)
        .arg(log)
        .output()
        .expect("run backfill");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn backfilled_histograms_answer_histogram_quantile() {
    let log = root().join("tests/data/request-logs/v0.5.23-text.log");
    let dir = tempfile::tempdir().expect("tempdir");
    let om_path = dir.path().join("requests.om");
    backfill(&log, &om_path);
    let om = std::fs::read_to_string(&om_path).unwrap();
    assert!(om.contains("# TYPE sglang:e2e_request_latency_seconds histogram\n"));
    // The last point of every request series is what `--once` shows.
    let last: BTreeMap<String, f64> = om
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let mut p = l.rsplitn(3, ' ');
            let (_, v) = (p.next(), p.next().unwrap().parse().unwrap());
            (p.next().unwrap().to_string(), v)
        })
        .collect();
    let now = once(&["--gpu.disable", log.to_str().unwrap()]);
    for (series, v) in &last {
        assert_eq!(crate::common::value(&now, series), Some(*v), "{series}");
    }
    assert_eq!(
        last.keys().filter(|k| k.contains("_bucket{")).count(),
        2 * 23 + 2 * 19 + 2 * 24 + 41 + 3 * 36
    );

    let data = dir.path().join("data");
    promtools::create_blocks(&om_path, &data);
    let prom = promtools::prometheus("scrape_configs: []\n", dir.path());
    // The last Finish record: 2026-11-05 14:02:23 UTC.
    let at = 1793887343.0 + 1.0;
    let want = parse_exposition(&std::fs::read_to_string(log.with_extension("expected")).unwrap());
    for (family, stream) in [
        ("sglang:e2e_request_latency_seconds", "false"),
        ("sglang:e2e_request_latency_seconds", "true"),
        ("sglang:time_to_first_token_seconds", "false"),
        ("sglang:request_time_per_output_token_seconds", "true"),
    ] {
        let buckets: Vec<(f64, f64)> = want
            .iter()
            .filter(|s| {
                s.name == format!("{family}_bucket") && s.label("is_streaming") == Some(stream)
            })
            .map(|s| {
                (
                    s.label("le")
                        .unwrap()
                        .replace("+Inf", "inf")
                        .parse()
                        .unwrap(),
                    s.value,
                )
            })
            .collect();
        for q in [0.5, 0.9] {
            let query =
                format!("histogram_quantile({q}, {family}_bucket{{is_streaming=\"{stream}\"}})");
            let r = promtools::query(&prom, &query, Some(at));
            assert_eq!(r.len(), 1, "{query}: {r:?}");
            let expected = quantile(q, &buckets);
            assert!(
                (r[0].1 - expected).abs() <= 1e-9 * expected,
                "{query}: {} vs {expected}",
                r[0].1
            );
        }
    }
    let r = promtools::query(&prom, "sum(sglang:num_requests_total)", Some(at));
    assert_eq!(r[0].1, 8.0);
    // Before the first Finish record (14:00:00) there is no series yet.
    let r = promtools::query(&prom, "sglang:num_requests_total", Some(1793887199.0));
    assert!(r.is_empty(), "{r:?}");
}

/// A level-3 Finish line of about `mib` MiB: untruncated prompt and output ids.
fn huge_finish_line(mib: usize) -> String {
    let text = "It\\'s {a} [b] (c), \"q\" ".repeat(mib * 21_000);
    let ids = (0..mib * 50_000)
        .map(|i| (i % 150_000).to_string())
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "[2026-11-05 14:00:00] Finish: obj=GenerateReqInput(text='{text}', stream=False), out={{'text': '{text}', 'output_ids': [{ids}], 'meta_info': {{'prompt_tokens': 8, 'completion_tokens': 3, 'e2e_latency': 0.5}}}}\n"
    )
}

#[test]
fn a_finish_line_of_8_mib_needs_a_higher_line_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("huge.log");
    let line = huge_finish_line(8);
    assert!(line.len() > 8 << 20, "{}", line.len());
    std::fs::write(&log, &line).unwrap();
    let path = log.to_str().unwrap();
    let source = format!("{{source=\"{path}\"}}");
    let value = |expo: &str, name: &str| crate::common::value(expo, &format!("{name}{source}"));
    // Over the default 1 MiB: skipped and counted, never read in part.
    let expo = once(&["--gpu.disable", path]);
    assert_eq!(
        value(&expo, "sglang_log_exporter_lines_oversized_total"),
        Some(1.0)
    );
    assert!(!expo.contains("sglang:num_requests_total"));
    let expo = once(&["--gpu.disable", "--max-line-bytes", "16777216", path]);
    assert_eq!(
        value(&expo, "sglang_log_exporter_lines_oversized_total"),
        Some(0.0)
    );
    assert_eq!(
        value(&expo, "sglang_log_exporter_field_value_errors_total"),
        Some(0.0)
    );
    let req = "sglang:num_requests_total{server=\"huge\",model_name=\"\",engine_type=\"unified\",is_streaming=\"false\"}";
    assert_eq!(crate::common::value(&expo, req), Some(1.0));
}

/// `top --snapshot` and `--once`'s summary of a log show the same whether or not request
/// records (and so histograms) are mixed into it; `top --url` reads an exposition with
/// histograms as the local frame.
#[test]
fn top_and_the_summary_ignore_request_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stats = root().join("samples/single-gpu-2025.log");
    let mixed = dir.path().join("mixed.log");
    let mut text = std::fs::read_to_string(&stats).unwrap();
    // The records moved onto the stats log's day, before its end: timed lines move the log's
    // clock, and here they must not (the summary is compared).
    text.push_str(
        &std::fs::read_to_string(root().join("tests/data/request-logs/v0.5.23-text.log"))
            .unwrap()
            .replace("[2026-11-05 ", "[2025-06-13 "),
    );
    std::fs::write(&mixed, &text).unwrap();
    let run = |args: &[&str]| {
        let o = crate::common::run(args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (
            String::from_utf8(o.stdout).unwrap(),
            String::from_utf8(o.stderr).unwrap(),
        )
    };
    let now = "1749823671";
    let frame = |input: &str| {
        run(&[
            "top",
            "--snapshot",
            "--gpu.disable",
            "--timezone",
            "UTC",
            "--width",
            "100",
            "--now",
            now,
            input,
        ])
        .0
    };
    let plain = frame(&format!("s={}", stats.display()));
    assert_eq!(frame(&format!("s={}", mixed.display())), plain);
    let summary = |input: &str| run(&["--once", "--gpu.disable", "--timezone", "UTC", input]).1;
    let (a, b) = (
        summary(&format!("s={}", stats.display())),
        summary(&format!("s={}", mixed.display())),
    );
    assert_eq!(a, b);
    assert!(a.contains("KV cache at the end of the input"), "{a}");

    let e = crate::common::Exporter::start(&[
        "--idle-after",
        "100000000",
        "--gpu.disable",
        &format!("s={}", mixed.display()),
    ]);
    let lines = text.lines().count() as f64;
    let source = format!(
        "sglang_log_exporter_lines_read_total{{source=\"{}\"}}",
        mixed.display()
    );
    let expo = e.scrape_until(30, |s| crate::common::value(s, &source) == Some(lines));
    assert!(expo.contains("# TYPE sglang:e2e_request_latency_seconds histogram"));
    let url = format!("http://127.0.0.1:{}/metrics", e.port);
    let got = run(&[
        "top",
        "--snapshot",
        "--timezone",
        "UTC",
        "--width",
        "100",
        "--now",
        now,
        "--url",
        &url,
    ])
    .0;
    let instance = format!(" · @ 127.0.0.1:{}", e.port);
    let want: String = plain
        .lines()
        .map(|l| match l.split_once(" · log since") {
            // The exporter it came from, after the model and before where values come from.
            Some((head, from)) if l.starts_with("s ") => {
                format!("{head}{instance} · log since{from}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    assert_eq!(got, want);
}
