//! The shipped alert rules and Grafana dashboard: promtool checks and unit-tests the rules, and a
//! real Prometheus scraping the running exporter answers every dashboard query.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, root, sample, Exporter};

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

struct Prom(Child);

impl Drop for Prom {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn query(port: u16, expr: &str) -> serde_json::Value {
    let url = format!("http://127.0.0.1:{port}/api/v1/query");
    let r = ureq::get(&url)
        .query("query", expr)
        .timeout(Duration::from_secs(10))
        .call();
    let body = match r {
        Ok(r) => r.into_string().unwrap(),
        Err(ureq::Error::Status(_, r)) => r.into_string().unwrap(),
        Err(e) => panic!("query {expr}: {e}"),
    };
    serde_json::from_str(&body).unwrap()
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
    let port = free_port();
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sglang\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n", exp.port),
    )
    .unwrap();
    let _prom = Prom(
        Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus (Debian package prometheus) must be installed"),
    );
    // Wait until Prometheus has scraped the exporter.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ok = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            && query(port, "sglang:token_usage")["data"]["result"]
                .as_array()
                .is_some_and(|a| a.len() == 5);
        if ok {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus did not scrape the exporter"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("monitoring/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut n = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap().replace("$server", ".*");
            let v = query(port, &expr);
            assert_eq!(v["status"], "success", "{expr}: {v}");
            n += 1;
        }
    }
    assert_eq!(n, 19);
    // The KV-bytes join finds every decode rank: 4 ranks of 51.47 GiB pools, all at 0 usage at the
    // end of the sample (idle), so in-use bytes are 0 and the pool sum is exact.
    let pool = query(
        port,
        "sum by (server) (sglang_kv_pool_size_bytes{server=\"pd-decode-session\"})",
    );
    assert_eq!(pool["data"]["result"][0]["value"][1], "221061966724");
}
