//! The shipped alert rules and Grafana dashboard: promtool checks and unit-tests the rules, and a
//! real Prometheus scraping the running exporter answers every dashboard query.

use std::process::Command;

use crate::common::{root, sample, Exporter};
use crate::promtools::{poll, prometheus, query};

#[test]
fn alert_rules_pass_promtool_check_and_unit_tests() {
    let dir = root().join("monitoring");
    let out = Command::new("promtool")
        .args(["check", "rules", "alerts.yml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUCCESS: 7 rules found"));
    let out = Command::new("promtool")
        .args(["test", "rules", "alerts_test.yml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
}

#[test]
fn every_dashboard_query_runs_against_a_real_prometheus() {
    let exp = Exporter::start(&[
        "--idle-after",
        "100000h",
        sample("pd-decode-session.log").to_str().unwrap(),
        sample("prefill-session.log").to_str().unwrap(),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let prom = prometheus(
        &format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sglang\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n", exp.port),
        dir.path(),
    );
    // Wait until Prometheus has scraped the exporter: 4 decode ranks and the prefill TP0.
    poll(60, "Prometheus to scrape the exporter", || {
        (query(&prom, "sglang:token_usage", None).len() == 5).then_some(())
    });
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("monitoring/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut n = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            // `query` asserts Prometheus accepted it (a bad expression is answered 400).
            query(
                &prom,
                &t["expr"].as_str().unwrap().replace("$server", ".*"),
                None,
            );
            n += 1;
        }
    }
    assert_eq!(n, 19);
    // The KV-bytes join finds every decode rank: 4 ranks of 51.47 GiB pools.
    let pool = query(
        &prom,
        "sum by (server) (sglang_kv_pool_size_bytes{server=\"pd-decode-session\"})",
        None,
    );
    assert_eq!(pool.len(), 1);
    assert_eq!(pool[0].1, 4.0 * 55265491681.28);
}
