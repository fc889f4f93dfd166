//! The shipped alert rules and Grafana dashboard: promtool checks and unit-tests the rules (every
//! alert is tested, two hosts included), and a real Prometheus scraping two exporters (two
//! "hosts" that run servers of the same name) answers every dashboard query with data, one
//! result per host, and no matching error. SGLang's own dashboard answers every panel from a log
//! with stats lines and `--log-requests` records.

use std::collections::BTreeSet;
use std::process::Command;

use crate::common::{parse_exposition, root, sample, Exporter};
use crate::promtools::{poll, prometheus, query};

#[test]
fn alert_rules_pass_promtool_check_and_unit_tests_that_cover_every_alert() {
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
    // 10 alerts and the recording rule that tells the exporter's targets from the others.
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUCCESS: 11 rules found"));
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
    // Every alert has a test that expects it to fire, with its `instance`.
    let rules = std::fs::read_to_string(dir.join("alerts.yml")).unwrap();
    let tests = std::fs::read_to_string(dir.join("alerts_test.yml")).unwrap();
    let alerts: BTreeSet<&str> = rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert_eq!(alerts.len(), 10);
    for a in alerts {
        let firing = tests.split("alertname: ").skip(1).any(|t| {
            t.starts_with(a) && t.lines().nth(1).is_some_and(|l| l.trim() == "exp_alerts:")
        });
        assert!(firing, "no test expects {a} to fire");
    }
    assert!(tests.matches("instance: \"").count() >= 8);
    // Usable as shipped: no job name assumed (the tests name theirs `gpu-exporters`), no
    // file:// link, and the shipped Prometheus configuration sets the runbook base URL.
    assert!(!rules.contains("job="), "a rule assumes the job's name");
    assert!(!rules.contains("file://"));
    assert!(tests.contains("job: gpu-exporters"));
    let config = std::fs::read_to_string(dir.join("prometheus.yml")).unwrap();
    assert!(config.contains("    sglang_runbook_base_url: https://"));
    let out = Command::new("promtool")
        .args(["check", "config", "prometheus.yml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every alert links its runbook: a section of monitoring/README.md (the anchor is the
/// heading's GitHub slug, the alert name in lower case) under the base URL of the external
/// label `sglang_runbook_base_url`, else the shipped file's name; the texts read `TP0` where a
/// server has no DP ranks (promtool checked the rendering above; here no template prints a
/// bare `DP`).
#[test]
fn every_alert_has_a_runbook_section() {
    let dir = root().join("monitoring");
    let rules = std::fs::read_to_string(dir.join("alerts.yml")).unwrap();
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let slugs: BTreeSet<String> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("### "))
        .map(|h| h.trim().to_lowercase())
        .collect();
    let prefix = "runbook_url: \"{{ with $externalLabels.sglang_runbook_base_url }}{{ . }}{{ else }}monitoring/README.md{{ end }}#";
    let mut seen = Vec::new();
    for block in rules.split("- alert: ").skip(1) {
        let name = block.lines().next().unwrap().trim();
        let url = block
            .lines()
            .find_map(|l| l.trim().strip_prefix(prefix))
            .unwrap_or_else(|| panic!("{name} has no runbook_url"));
        let anchor = url.trim_end_matches('"');
        assert_eq!(anchor, name.to_lowercase(), "{name}");
        assert!(
            slugs.contains(anchor),
            "no section `### {name}` in monitoring/README.md"
        );
        seen.push(name);
    }
    assert_eq!(seen.len(), 10);
    assert!(
        !rules.contains(" DP{{ $labels.dp_rank }}"),
        "a bare DP prefix"
    );
    let tests = std::fs::read_to_string(dir.join("alerts_test.yml")).unwrap();
    assert!(tests.contains("summary: \"KV cache of chat TP0 on a:8771 is 97% full\""));
}

/// Every `expr` of the dashboard, with the template variables for all hosts and servers.
pub(crate) fn dashboard_queries() -> Vec<(String, String)> {
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("monitoring/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let e = t["expr"].as_str().unwrap();
            out.push((
                panel["title"].as_str().unwrap().to_string(),
                e.replace("$instance", ".*").replace("$server", ".*"),
            ));
        }
    }
    out
}

#[test]
fn every_dashboard_query_answers_per_host_from_two_exporters() {
    let dir = tempfile::tempdir().unwrap();
    let lib = crate::gpu::fake_nvml(dir.path());
    let nvml = dir.path().join("nvml.script");
    std::fs::write(
        &nvml,
        "gpu 0 GPU-0a0a0a0a-0000-0000-0000-000000000000 00000000:18:00.0 85899345920 536870912 10200547328 75161927680 NVIDIA H100 80GB HBM3\n",
    )
    .unwrap();
    // Two hosts with servers of the same names (`decode`, `prefill`).
    let decode = format!("decode={}", sample("pd-decode-session.log").display());
    let prefill = format!("prefill={}", sample("prefill-session.log").display());
    let lib_arg = lib.to_str().unwrap().to_string();
    let start = || {
        Exporter::start_env(
            &[
                "--idle-after",
                "100000h",
                "--gpu.nvml-library",
                &lib_arg,
                &decode,
                &prefill,
            ],
            &[("FAKE_NVML_SCRIPT", nvml.as_os_str())],
        )
    };
    let (a, b) = (start(), start());
    let prom = prometheus(
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sglang\n    static_configs:\n      - targets: ['127.0.0.1:{}', '127.0.0.1:{}']\n",
            a.port, b.port
        ),
        dir.path(),
    );
    // Both hosts scraped twice at least (rates need two points): 5 ranks each.
    poll(90, "Prometheus to scrape both exporters", || {
        let ok = query(&prom, "count_over_time(sglang:token_usage[1m]) >= 2", None).len() == 10;
        ok.then_some(())
    });
    let hosts = [
        format!("127.0.0.1:{}", a.port),
        format!("127.0.0.1:{}", b.port),
    ];
    let queries = dashboard_queries();
    assert_eq!(queries.len(), 24);
    // The router panels need a router (`--router.url`, or the router scraped itself):
    // tests/it/router.rs answers them from the real one.
    for (panel, q) in queries.iter().filter(|(p, _)| !p.starts_with("Router: ")) {
        // `query` asserts Prometheus accepted it: a many-to-many match is answered 422.
        let r = query(&prom, q, None);
        assert!(!r.is_empty(), "{panel}: no data for {q}");
        let seen: BTreeSet<&str> = r
            .iter()
            .filter_map(|(l, _)| l.get("instance").map(String::as_str))
            .collect();
        assert_eq!(
            seen,
            hosts.iter().map(String::as_str).collect(),
            "{panel}: {q} does not answer per host: {r:?}"
        );
    }
    // The KV-bytes panel does not add the hosts together: 4 ranks of 51.47 GiB pools per host.
    let pool = query(
        &prom,
        "sum by (instance, job, server) (sglang_kv_pool_size_bytes{server=\"decode\"})",
        None,
    );
    assert_eq!(pool.len(), 2);
    for (_, v) in pool {
        assert!((v - 4.0 * 55265491681.28).abs() < 1.0, "{v}");
    }
    // Issue 38.6: the KV-usage panel is each rank's used / capacity tokens, exact, as the page
    // and `top` show it (SGLang's 2-decimal token usage reads 0 below 0.5 %).
    let (_, kv) = queries
        .iter()
        .find(|(p, _)| p == "KV cache usage per rank")
        .unwrap();
    let m = parse_exposition(&a.scrape());
    let of = |name: &str, tp: &str| {
        m.iter()
            .find(|x| {
                x.name == name
                    && x.label("server") == Some("decode")
                    && x.label("tp_rank") == Some(tp)
            })
            .map(|x| x.value)
    };
    let got = query(&prom, kv, None);
    let mut checked = 0;
    for (l, v) in &got {
        if l.get("instance") != Some(&hosts[0])
            || l.get("server").map(String::as_str) != Some("decode")
        {
            continue;
        }
        let tp = l["tp_rank"].as_str();
        let want = of("sglang:num_used_tokens", tp).unwrap()
            / of("sglang:max_total_num_tokens", tp).unwrap();
        assert_eq!(*v, want, "tp_rank {tp}");
        checked += 1;
    }
    assert_eq!(checked, 4, "{got:?}");
}

/// Every PromQL target of SGLang's own dashboard, from `tests/data/upstream-dashboard-queries.tsv`
/// (panel title, expression; the file names the upstream commit).
fn upstream_dashboard_queries() -> Vec<(String, String)> {
    std::fs::read_to_string(root().join("tests/data/upstream-dashboard-queries.tsv"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (panel, expr) = l.split_once('\t').expect("panel<TAB>expr");
            (panel.to_string(), expr.to_string())
        })
        .collect()
}

/// The session log `upstream_dashboard_answers_every_panel` writes: stats lines and the
/// `--log-requests` records of `v0.5.23-text.log` (`half` 0: its first half, 1: the rest), every
/// prefix at the current time so nothing reads as idle.
fn session_part(half: usize, running: u32) -> String {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M:%S")
        .to_string();
    let requests =
        std::fs::read_to_string(root().join("tests/data/request-logs/v0.5.23-text.log")).unwrap();
    let requests: Vec<&str> = requests.lines().collect();
    let mid = requests.len() / 2;
    let part = if half == 0 {
        &requests[..mid]
    } else {
        &requests[mid..]
    };
    let mut out = format!(
        "[{now}] Prefill batch, #new-seq: 1, #new-token: 600, #cached-token: 200, token usage: 0.02, #running-req: {running}, #queue-req: 2\n\
         [{now}] Decode batch, #running-req: {running}, #token: 4000, token usage: 0.03, cuda graph: True, gen throughput (token/s): 123.45, #queue-req: 2\n"
    );
    for l in part {
        // `[2026-11-05 14:00:05] Finish: ...`: the same record, stamped now.
        let body = l.split_once("] ").map_or(*l, |(_, b)| b);
        out.push_str(&format!("[{now}] {body}\n"));
    }
    out
}

#[test]
fn upstream_dashboard_answers_every_panel() {
    let queries = upstream_dashboard_queries();
    assert_eq!(queries.len(), 14, "upstream's 8 panels have 14 targets");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("sglang.log");
    std::fs::write(&log, session_part(0, 3)).unwrap();
    let e = Exporter::start(&["--gpu.disable", "--idle-after", "1h", log.to_str().unwrap()]);
    let prom = prometheus(
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sglang\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
            e.port
        ),
        dir.path(),
    );
    // The first half scraped twice, then the rest appended: rates over [1m] see requests.
    poll(60, "two scrapes of the first half", || {
        let n = query(
            &prom,
            "count_over_time(sglang:num_requests_total[1m])",
            None,
        );
        n.iter().any(|(_, v)| *v >= 2.0).then_some(())
    });
    crate::common::append(&log, session_part(1, 5).as_bytes());
    poll(60, "the second half in Prometheus", || {
        let r = query(&prom, "sglang:num_running_reqs", None);
        r.iter().any(|(_, v)| *v == 5.0).then_some(())
    });
    // Every target has data once the second half has been scraped again (a rate needs two
    // samples that moved): waited for, failing after 60 s.
    for (panel, q) in &queries {
        let r = poll(60, &format!("{panel}: data for {q}"), || {
            let r = query(&prom, q, None);
            (!r.is_empty()).then_some(r)
        });
        for (labels, v) in &r {
            assert!(v.is_finite(), "{panel}: {q} gives {v} for {labels:?}");
        }
    }
    // The gauges are the last stats lines' values.
    let one = |q: &str| {
        let r = query(&prom, q, None);
        assert_eq!(r.len(), 1, "{q}: {r:?}");
        r[0].1
    };
    assert_eq!(one("sglang:num_running_reqs"), 5.0);
    assert_eq!(one("sglang:num_queue_reqs"), 2.0);
    assert_eq!(one("sglang:gen_throughput"), 123.45);
    assert_eq!(one("sglang:cache_hit_rate"), 0.25);
    // Every request of the log is in the histograms: the .expected file's count.
    let expected =
        std::fs::read_to_string(root().join("tests/data/request-logs/v0.5.23-text.expected"))
            .unwrap();
    let count: f64 = expected
        .lines()
        .filter(|l| l.starts_with("sglang:e2e_request_latency_seconds_count"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(one("sum(sglang:e2e_request_latency_seconds_count)"), count);
}

/// Every vector matching the project ships (`on (…)` in the README's PromQL, the monitoring
/// README, the rules and the dashboard) names `instance` and `job`: a join on the server and
/// rank labels alone is a "many-to-many matching" error once two hosts run a server of one
/// name (the README's GPU joins were, issue 38). `ignoring (…)` keeps every other label, so it
/// never drops them; none may ignore `instance` or `job`.
#[test]
fn every_shipped_join_matches_on_instance_and_job() {
    let mut joins = 0;
    for file in [
        "README.md",
        "monitoring/README.md",
        "monitoring/alerts.yml",
        "monitoring/grafana-dashboard.json",
    ] {
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        for (kw, must) in [
            ("on (", true),
            ("on(", true),
            ("ignoring (", false),
            ("ignoring(", false),
        ] {
            for (i, _) in text.match_indices(kw) {
                // A word of prose that ends in "on (" is no PromQL: only after an operator,
                // `and`, `or`, `unless` or a line's indentation.
                let before = text[..i].trim_end_matches(' ');
                let op = [
                    "*", "/", "+", "-", "and", "or", "unless", "==", ">", "<", "\n",
                ];
                if kw.starts_with("on") && !op.iter().any(|o| before.ends_with(o)) {
                    continue;
                }
                let args = &text[i + kw.len()..];
                let args = &args[..args.find(')').unwrap()];
                let labels: Vec<&str> = args.split(',').map(str::trim).collect();
                // The router's own series carry the router's `instance` and `job`: they join
                // the exporter's `sglang_server_info` by the worker's URL alone.
                let named =
                    labels.contains(&"instance") && labels.contains(&"job") || labels == ["url"];
                if must {
                    assert!(
                        named,
                        "{file}: `{kw}{args})` does not match on instance and job"
                    );
                    joins += 1;
                } else {
                    assert!(
                        !labels.contains(&"instance") && !labels.contains(&"job"),
                        "{file}: `{kw}{args})` ignores instance or job"
                    );
                }
            }
        }
    }
    // The README's three GPU joins and its across-hosts join; the rules' three; the router's:
    // the rule's two, the dashboard's two (one by URL) and monitoring/README.md's by URL.
    assert_eq!(joins, 12);
}
