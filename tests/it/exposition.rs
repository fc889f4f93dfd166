//! Issue 32: never an invalid exposition. No two samples of one series and each family's HELP
//! and TYPE once, on every path: `--once`, the live `/metrics`, the Pushgateway body and
//! `backfill`'s OpenMetrics, over every shipped sample and every public case, and a real
//! Prometheus scraping an exporter fed by several engines answering each series once with its
//! value. [`sglang_log_exporter::export::valid::check_text`] is the check.

use std::path::PathBuf;
use std::process::Command;

use sglang_log_exporter::export::valid::check_text;

use crate::common::{bin, once, root, value, Exporter};
use crate::promtools::{self, poll, prometheus, query};

/// Every shipped sample log and every public case log.
fn logs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["samples", "tests/data/cases"] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        v.sort();
        out.extend(v);
    }
    assert!(out.len() >= 17, "the logs are missing: {out:?}");
    out
}

/// The exposition is valid, and the exporter withheld nothing to make it so.
fn assert_valid(what: &str, text: &str) {
    if let Err(e) = check_text(text) {
        panic!("{what}: {} faults:\n{}", e.len(), e.join("\n"));
    }
    // Where the exporter says (`backfill` writes no self metrics, the Pushgateway a group per
    // push).
    let withheld = "sglang_log_exporter_exposition_samples_withheld_total";
    if !what.starts_with("backfill") && !what.starts_with("the Pushgateway") {
        assert_eq!(value(text, withheld), Some(0.0), "{what}: samples withheld");
    }
}

#[test]
fn every_sample_and_case_renders_each_series_once_in_once_push_and_backfill() {
    let dir = tempfile::tempdir().unwrap();
    let pg = promtools::pushgateway();
    let url = format!("http://127.0.0.1:{}/", pg.port);
    for (i, log) in logs().iter().enumerate() {
        let path = log.to_str().unwrap();
        let what = log.file_name().unwrap().to_string_lossy().to_string();
        let text = once(&["--gpu.disable", "--idle-after", "100000h", path]);
        assert_valid(&format!("--once {what}"), &text);
        // The Pushgateway refuses a body with a series twice (400).
        let out = Command::new(bin())
            .args(["--once", "--gpu.disable", "--timezone", "UTC"])
            .args(["--push.url", &url, "--push.instance", &format!("i{i}")])
            .arg(path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "push {what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let om = dir.path().join(format!("{i}.om"));
        let out = Command::new(bin())
            .args(["backfill", "--timezone", "UTC", "--date", "2025-01-01"])
            .args(["--output", om.to_str().unwrap(), path])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "backfill {what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let om = std::fs::read_to_string(&om).unwrap();
        assert!(om.ends_with("# EOF\n"), "backfill {what}");
        assert_valid(&format!("backfill {what}"), &om);
    }
    let (code, body) = promtools::get(&format!("http://127.0.0.1:{}/metrics", pg.port));
    assert_eq!(code, 200);
    assert_valid("the Pushgateway's /metrics", &body);
}

/// The live `/metrics` of one exporter reading every sample and case (history, then followed):
/// valid, nothing withheld (the live page of the variants sample printed 68 series twice).
#[test]
fn live_metrics_over_every_sample_and_case_is_valid() {
    let logs: Vec<String> = logs()
        .iter()
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    let mut args = vec!["--gpu.disable", "--idle-after", "100000h"];
    args.extend(logs.iter().map(String::as_str));
    let ex = Exporter::start(&args);
    poll(60, "the exporter to read every input", || {
        (ex.get("/-/ready").0 == 200).then_some(())
    });
    let text = ex.scrape();
    assert_valid("live /metrics", &text);
    let sources = text
        .lines()
        .filter(|l| l.starts_with("sglang_log_exporter_lines_read_total{"))
        .count();
    assert_eq!(sources, logs.len());
}

/// The shipped sample of every prefix form printed 67 series twice: its `TP0` lines (v0.3.4 to
/// v0.4.6.post1 tag a single GPU) and its untagged ones (v0.4.6.post2+) were two ranks that
/// both render `tp_rank="0"`. They are one rank: its last line's values, each series once.
#[test]
fn the_variants_sample_has_one_rank_zero() {
    let text = once(&[
        "--gpu.disable",
        "--idle-after",
        "100000h",
        root().join("samples/sglang-variants.log").to_str().unwrap(),
    ]);
    assert_valid("sglang-variants", &text);
    let l = "{server=\"sglang-variants\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\",engine_type=\"decode\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"}";
    assert_eq!(
        value(&text, &format!("sglang:num_running_reqs{l}")),
        Some(11.0)
    );
    assert_eq!(
        value(&text, &format!("sglang:num_queue_reqs{l}")),
        Some(0.0)
    );
    // The counts of both forms' lines (4 + 29 prefill batches and 4 + 25 decode lines, the two
    // ranks the duplicate series were).
    let count = |n: &str| value(&text, &format!("{n}{l}"));
    assert_eq!(count("sglang_prefill_batches_total"), Some(33.0));
    assert_eq!(count("sglang_decode_stats_lines_total"), Some(29.0));
    let idle: Vec<&str> = text
        .lines()
        .filter(|x| x.starts_with("sglang_idle{"))
        .collect();
    assert_eq!(idle.len(), 6, "{idle:#?}");
}

/// Two replicas in one `kubectl logs --prefix` stream: each has its own series in every family,
/// SGLang's HTTP families too (they had only `server`, so both pods' requests were one series
/// twice), and pod a's `TP0` and untagged lines are one rank.
const TWO_PODS: &str = "\
[pod/sglang-a/sglang] [2026-09-26 10:00:05 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, #queue-req: 0
[pod/sglang-b/sglang] [2026-09-26 10:00:05] Decode batch, #running-req: 7, #token: 300, token usage: 0.03, #queue-req: 1
[pod/sglang-a/sglang] [2026-09-26 10:00:06] Decode batch, #running-req: 6, #token: 200, token usage: 0.02, #queue-req: 2
[pod/sglang-a/sglang] [2026-09-26 10:00:06] INFO:     127.0.0.1:40797 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK
[pod/sglang-b/sglang] [2026-09-26 10:00:06] INFO:     127.0.0.1:40798 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK
[pod/sglang-b/sglang] [2026-09-26 10:00:07] INFO:     127.0.0.1:40799 - \"POST /v1/chat/completions HTTP/1.1\" 429 Too Many Requests
";

fn pod(p: &str) -> String {
    format!("server=\"two\",engine=\"pod/sglang-{p}/sglang\"")
}

#[test]
fn two_pods_of_one_stream_keep_their_http_series_apart() {
    let text = crate::common::once_on("two", TWO_PODS);
    assert_valid("two pods", &text);
    let rank = |p: &str| {
        format!("{{{},model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"}}", pod(p))
    };
    assert_eq!(
        value(&text, &format!("sglang:num_running_reqs{}", rank("a"))),
        Some(6.0)
    );
    assert_eq!(
        value(&text, &format!("sglang:num_running_reqs{}", rank("b"))),
        Some(7.0)
    );
    assert_eq!(
        value(
            &text,
            &format!("sglang_decode_stats_lines_total{}", rank("a"))
        ),
        Some(2.0)
    );
    let req = |p: &str| {
        format!(
            "sglang:http_requests_total{{{},endpoint=\"/v1/chat/completions\",method=\"POST\"}}",
            pod(p)
        )
    };
    assert_eq!(value(&text, &req("a")), Some(1.0));
    assert_eq!(value(&text, &req("b")), Some(2.0));
    let resp = |p: &str, code: &str| {
        format!("sglang:http_responses_total{{{},endpoint=\"/v1/chat/completions\",method=\"POST\",status_code=\"{code}\"}}", pod(p))
    };
    assert_eq!(value(&text, &resp("a", "200")), Some(1.0));
    assert_eq!(value(&text, &resp("b", "200")), Some(1.0));
    assert_eq!(value(&text, &resp("b", "429")), Some(1.0));
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("sglang:http_requests_total{"))
            .count(),
        2
    );
}

/// A real Prometheus scraping a live exporter fed by two pods: each series once (Prometheus
/// counts a second sample of a series in a scrape as a duplicate and keeps one), with its value.
#[test]
fn prometheus_answers_each_series_of_several_engines_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("two.log");
    std::fs::write(&log, "").unwrap();
    let ex = Exporter::start(&[
        "--gpu.disable",
        "--idle-after",
        "100000h",
        log.to_str().unwrap(),
    ]);
    // Followed live from here: the lines written now arrive now (read as history, the
    // engines of these old lines would have expired an hour after them).
    ex.scrape_until(30, |t| t.contains("sglang_log_exporter_lines_read_total{"));
    crate::common::append(&log, TWO_PODS.as_bytes());
    let scraped = ex.scrape_until(30, |t| t.contains("sglang:http_requests_total{"));
    assert_valid("live /metrics", &scraped);
    let prom = prometheus(
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sglang\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
            ex.port
        ),
        dir.path(),
    );
    poll(60, "Prometheus to scrape the exporter twice", || {
        let r = query(
            &prom,
            "count_over_time(sglang:num_running_reqs[1m]) >= 2",
            None,
        );
        (r.len() == 2).then_some(())
    });
    let by_engine = |q: &str| -> Vec<(String, f64)> {
        let mut v: Vec<(String, f64)> = query(&prom, q, None)
            .into_iter()
            .map(|(l, v)| (l.get("engine").cloned().unwrap_or_default(), v))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let pods = |a: f64, b: f64| {
        vec![
            ("pod/sglang-a/sglang".to_string(), a),
            ("pod/sglang-b/sglang".to_string(), b),
        ]
    };
    assert_eq!(by_engine("sglang:num_running_reqs"), pods(6.0, 7.0));
    assert_eq!(by_engine("sglang:num_queue_reqs"), pods(2.0, 1.0));
    assert_eq!(by_engine("sglang:http_requests_total"), pods(1.0, 2.0));
    assert_eq!(
        by_engine("sum by (engine) (sglang:http_responses_total)"),
        pods(1.0, 2.0)
    );
    // Every sample of the last scrape is its own series: a series given twice would be one
    // series of two samples (Prometheus keeps one).
    let series = query(
        &prom,
        "count({job=\"sglang\",__name__!~\"up|scrape_.+\"})",
        None,
    );
    let scraped = query(&prom, "scrape_samples_scraped{job=\"sglang\"}", None);
    assert_eq!(series.len(), 1);
    assert_eq!(scraped.len(), 1);
    assert!(scraped[0].1 > 50.0, "{scraped:?}");
    assert_eq!(series[0].1, scraped[0].1);
}
