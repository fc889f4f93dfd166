//! `/metrics` negotiates as SGLang's own `/metrics` does (`src/export/format.rs`): for each
//! `Accept` header a Prometheus 2.x, a Prometheus 3.x or another scraper sends, the exporter's
//! content type and the names it writes (samples, `# HELP`/`# TYPE`) equal those of SGLang's real
//! server code — prometheus_client 0.26's ASGI app, which SGLang mounts at `/metrics`
//! (tests/sglang_api/metrics_app.py) — serving the exporter's own families.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, sample, Exporter};

/// prometheus_client's `/metrics` over the exposition in `data`, killed on drop.
struct UpstreamApp(Child, u16);

impl UpstreamApp {
    fn start(data: &std::path::Path) -> UpstreamApp {
        let root = crate::common::root().join("target/sglang-api");
        let python = root.join("venv/bin/python");
        let ok = Command::new(&python)
            .args(["-c", "import prometheus_client, uvicorn"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "prometheus_client is not set up: run tests/sglang_api/setup.sh (.ci/run does)"
        );
        let port = free_port();
        let child = Command::new(python)
            .args(["-W", "ignore"])
            .arg(crate::common::root().join("tests/sglang_api/metrics_app.py"))
            .args(["--port", &port.to_string(), "--data"])
            .arg(data)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start metrics_app.py");
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "metrics_app.py did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        UpstreamApp(child, port)
    }
}

impl Drop for UpstreamApp {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GET `http://127.0.0.1:PORT/metrics` with `Accept: accept` (none when empty): content type
/// and body.
fn get(port: u16, accept: &str) -> (String, String) {
    let mut req =
        ureq::get(&format!("http://127.0.0.1:{port}/metrics")).timeout(Duration::from_secs(10));
    if !accept.is_empty() {
        req = req.set("Accept", accept);
    }
    let r = req.call().expect("scrape");
    let ct = r.header("content-type").unwrap_or("").to_string();
    (ct, r.into_string().unwrap())
}

/// The names a body writes: each sample's name, and each `# HELP`/`# TYPE` line's name.
fn names(body: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut samples = BTreeSet::new();
    let mut families = BTreeSet::new();
    for l in body.lines() {
        if let Some(rest) = l
            .strip_prefix("# HELP ")
            .or_else(|| l.strip_prefix("# TYPE "))
        {
            families.insert(rest.split(' ').next().unwrap().to_string());
        } else if !l.starts_with('#') && !l.is_empty() {
            let end = l.find(['{', ' ']).unwrap_or(l.len());
            samples.insert(l[..end].to_string());
        }
    }
    (samples, families)
}

/// The `Accept` headers: Prometheus 2.x's (2.42 to 2.55: OpenMetrics 1.0.0 first, no
/// escaping), Prometheus 3.x's (UTF-8 names allowed), a text-only scraper's, curl's, and the
/// explicit escapings.
const ACCEPTS: &[(&str, &str)] = &[
    ("Prometheus 2.x", "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
    ("Prometheus 3.x", "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"),
    ("Prometheus 3.x, text only", "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"),
    ("Prometheus 3.x, underscores", "application/openmetrics-text;version=1.0.0;escaping=underscores;q=0.5,text/plain;version=0.0.4;q=0.2"),
    ("text 0.0.4", "text/plain;version=0.0.4"),
    ("curl", "*/*"),
    ("no Accept", ""),
    ("OpenMetrics without a version", "application/openmetrics-text"),
    ("dots", "application/openmetrics-text;version=1.0.0;escaping=dots"),
    ("values", "application/openmetrics-text;version=1.0.0;escaping=values"),
    ("text 1.0.0, dots", "text/plain;version=1.0.0;escaping=dots"),
];

#[test]
fn each_accept_header_gets_what_sglangs_own_metrics_app_gives_it() {
    // Every kind of family: per-rank gauges and counters with colons, ours, histograms (the
    // request log), self metrics.
    let requests = crate::common::root().join("tests/data/request-logs/v0.5.23-text.log");
    let e = Exporter::start(&[
        "--gpu.disable",
        "--web.names",
        "upstream",
        sample("pd-decode-session.log").to_str().unwrap(),
        requests.to_str().unwrap(),
    ]);
    // Both inputs read to their end: from then on the names stay (the values of an idle
    // rank change, not its series).
    let size: u64 = [sample("pd-decode-session.log"), requests.clone()]
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    let text = e.scrape_until(30, |s| {
        let read: f64 = crate::common::samples(s, "sglang_log_exporter_bytes_read_total")
            .iter()
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        read == size as f64
    });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("exposition.txt");
    std::fs::write(&data, &text).unwrap();
    let upstream = UpstreamApp::start(&data);
    for (who, accept) in ACCEPTS {
        let (ct, ours) = get(e.port, accept);
        let (up_ct, theirs) = get(upstream.1, accept);
        assert_eq!(ct, up_ct, "{who}: content type");
        let (ours_s, ours_f) = names(&ours);
        let (theirs_s, theirs_f) = names(&theirs);
        // Per-scrape families aside (the process's own, read at each scrape, are the same
        // names in both), every name is the same.
        assert_eq!(
            ours_s, theirs_s,
            "{who}: sample names\n{ours}\n----\n{theirs}"
        );
        assert_eq!(ours_f, theirs_f, "{who}: family names");
        assert_eq!(
            ours.ends_with("# EOF\n"),
            theirs.ends_with("# EOF\n"),
            "{who}: # EOF"
        );
    }
    // What the two Prometheus majors store of one SGLang family.
    let p2 = names(&get(e.port, ACCEPTS[0].1).1).0;
    assert!(p2.contains("sglang_token_usage") && !p2.contains("sglang:token_usage"));
    let p3 = names(&get(e.port, ACCEPTS[1].1).1).0;
    assert!(p3.contains("sglang:token_usage") && !p3.contains("sglang_token_usage"));
}

/// `colons` (the default, as before `--web.names`) and `underscores`: the text format 0.0.4
/// with that style, whatever the scraper asks.
#[test]
fn a_fixed_style_is_written_whatever_is_asked() {
    let log = sample("pd-decode-session.log");
    for (style, want, not) in [
        (None, "sglang:token_usage", "sglang_token_usage"),
        (
            Some("underscores"),
            "sglang_token_usage",
            "sglang:token_usage",
        ),
    ] {
        let mut args = vec!["--gpu.disable", log.to_str().unwrap()];
        if let Some(s) = style {
            args.extend(["--web.names", s]);
        }
        let e = Exporter::start(&args);
        e.scrape_until(30, |s| s.contains("num_running_reqs{"));
        for (who, accept) in ACCEPTS {
            let (ct, body) = get(e.port, accept);
            assert_eq!(
                ct, "text/plain; version=0.0.4; charset=utf-8",
                "{style:?}, {who}"
            );
            let (s, f) = names(&body);
            assert!(
                s.contains(want) && !s.contains(not),
                "{style:?}, {who} ({ct}): {s:?}"
            );
            assert!(
                f.contains(want) && !f.contains(not),
                "{style:?}, {who}: {f:?}"
            );
        }
    }
}

/// Debian's Prometheus (a 2.x: it asks for OpenMetrics 1.0.0 first) scraping the exporter under
/// `--web.names upstream` and SGLang's own `/metrics` app over the same families stores the
/// same names from both, and reads the exporter's OpenMetrics without a scrape error.
#[test]
fn a_real_prometheus_stores_the_same_names_from_both() {
    use crate::promtools::{poll, prometheus, query};
    let e = Exporter::start(&[
        "--gpu.disable",
        "--web.names",
        "upstream",
        sample("pd-decode-session.log").to_str().unwrap(),
    ]);
    let size = std::fs::metadata(sample("pd-decode-session.log"))
        .unwrap()
        .len();
    let text = e.scrape_until(30, |s| {
        crate::common::value(
            s,
            &format!(
                "sglang_log_exporter_bytes_read_total{{source=\"{}\"}}",
                sample("pd-decode-session.log").display()
            ),
        ) == Some(size as f64)
    });
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("exposition.txt");
    std::fs::write(&data, &text).unwrap();
    let upstream = UpstreamApp::start(&data);
    let prom = prometheus(
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: exporter\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n  - job_name: upstream\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
            e.port, upstream.1
        ),
        dir.path(),
    );
    poll(60, "Prometheus to scrape both", || {
        let up = query(&prom, "up", None);
        (up.len() == 2 && up.iter().all(|(_, v)| *v == 1.0)).then_some(())
    });
    let stored = |job: &str| -> BTreeSet<String> {
        query(
            &prom,
            &format!("group by (__name__) ({{job=\"{job}\"}})"),
            None,
        )
        .into_iter()
        .filter_map(|(l, _)| l.get("__name__").cloned())
        // Prometheus's own series of a scrape (up, scrape_duration_seconds, …).
        .filter(|n| !n.starts_with("scrape_") && n != "up")
        .collect()
    };
    let ours = poll(30, "the exporter's series to be stored", || {
        let s = stored("exporter");
        s.contains("sglang_token_usage").then_some(s)
    });
    let theirs = poll(30, "the upstream app's series to be stored", || {
        let s = stored("upstream");
        s.contains("sglang_token_usage").then_some(s)
    });
    assert!(!ours.contains("sglang:token_usage"), "{ours:?}");
    assert_eq!(ours, theirs);
}

/// The renamed families (`RENAMED` in src/catalog/mod.rs): under underscores no family of
/// ours meets another (`sglang_swa_used_tokens` was `sglang:swa_used_tokens`'s series twice);
/// `--web.old-names` serves the old names beside the new, with the same values.
#[test]
fn renamed_families_meet_nothing_and_old_names_are_served_on_request() {
    // An exporter over a hybrid SWA log (the renamed families all have values there) with
    // `flags`, once `until` holds of its scrape.
    let start = |flags: &[&str], until: &str| {
        let log = crate::common::root().join("tests/data/startup/swa-both-pools-busy.log");
        let mut args = vec!["--gpu.disable", "--idle-after", "1000d"];
        args.extend_from_slice(flags);
        args.push(log.to_str().unwrap());
        let e = Exporter::start(&args);
        let s = e.scrape_until(30, |s| s.contains(until));
        (e, s)
    };
    let labels = r#"{server="swa-both-pools-busy",model_name="",engine_type="unified",pp_rank="0",tp_rank="0",moe_ep_rank="0"}"#;
    let (e, s) = start(
        &["--web.names", "underscores"],
        "sglang_running_requests_limit{",
    );
    // Each series once: the upstream family underscored, and ours under its new name.
    let swa = crate::common::samples(&s, "sglang_swa_used_tokens");
    assert_eq!(
        swa,
        [format!("sglang_swa_used_tokens{labels} 380000")],
        "{s}"
    );
    let ours = crate::common::samples(&s, "sglang_swa_pool_used_tokens");
    assert_eq!(
        ours,
        [format!("sglang_swa_pool_used_tokens{labels} 380000")]
    );
    assert_eq!(
        crate::common::value(&s, &format!("sglang_running_requests_limit{labels}")),
        Some(64.0)
    );
    assert!(crate::common::samples(&s, "sglang_max_running_requests").is_empty());
    drop(e);

    let (e, s) = start(&["--web.old-names"], "sglang_max_running_requests{");
    for (new, old, v) in [
        (
            "sglang_swa_pool_used_tokens",
            "sglang_swa_used_tokens",
            380000.0,
        ),
        (
            "sglang_running_requests_limit",
            "sglang_max_running_requests",
            64.0,
        ),
    ] {
        assert_eq!(crate::common::value(&s, &format!("{new}{labels}")), Some(v));
        assert_eq!(
            crate::common::value(&s, &format!("{old}{labels}")),
            Some(v),
            "{s}"
        );
        assert!(s.contains(&format!("# HELP {old} ")), "{s}");
    }
    // The upstream name stays apart from the old one under colons.
    assert_eq!(
        crate::common::value(&s, &format!("sglang:swa_used_tokens{labels}")),
        Some(380000.0)
    );
    drop(e);

    // Old names under underscores (the trial of this step: `sglang_swa_used_tokens` came twice,
    // HELP and series): an old name that a family of SGLang's is written as already is not
    // added; every name once, in every body.
    let (e, s) = start(
        &["--web.names", "underscores", "--web.old-names"],
        "sglang_max_running_requests{",
    );
    assert_eq!(
        s.matches("# HELP sglang_swa_used_tokens ").count(),
        1,
        "{s}"
    );
    assert_eq!(
        crate::common::samples(&s, "sglang_swa_used_tokens"),
        [format!("sglang_swa_used_tokens{labels} 380000")]
    );
    assert_eq!(
        crate::common::value(&s, "sglang_log_exporter_exposition_samples_withheld_total"),
        Some(0.0)
    );
    drop(e);
    let (e, _) = start(
        &["--web.names", "upstream", "--web.old-names"],
        "sglang_max_running_requests{",
    );
    for (who, accept) in ACCEPTS {
        let body = get(e.port, accept).1;
        let mut seen = BTreeSet::new();
        for l in body.lines().filter(|l| !l.starts_with('#')) {
            let series = l.rsplit_once(' ').map_or(l, |(s, _)| s);
            assert!(seen.insert(series.to_string()), "{who}: {series} twice");
        }
        let mut help = BTreeSet::new();
        for l in body.lines().filter(|l| l.starts_with("# HELP ")) {
            assert!(
                help.insert(l.split(' ').nth(2).unwrap().to_string()),
                "{who}: {l}"
            );
        }
    }
}
