//! Real Prometheus parts for the tests: a Pushgateway and a Prometheus server started on free
//! loopback ports, a parser for the text exposition, and Prometheus' query API.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::free_port;

/// A child process killed on drop.
pub struct Proc {
    pub child: Child,
    pub port: u16,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// GETs `url`; returns (status, body), status 0 when no answer came.
pub fn get(url: &str) -> (u16, String) {
    match ureq::get(url).timeout(Duration::from_secs(10)).call() {
        Ok(r) => (r.status(), r.into_string().unwrap_or_default()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap_or_default()),
        Err(_) => (0, String::new()),
    }
}

/// Waits until `p` answers `/-/ready` (up to 60 s); panics when it exits first.
pub fn wait_ready(p: &mut Proc, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let url = format!("http://127.0.0.1:{}/-/ready", p.port);
    while Instant::now() < deadline {
        if get(&url).0 == 200 {
            return;
        }
        if let Ok(Some(st)) = p.child.try_wait() {
            panic!("{what} exited early: {st}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not become ready on {}", p.port);
}

/// Starts `prometheus-pushgateway` (in memory only) on a free port.
pub fn pushgateway() -> Proc {
    let port = free_port();
    let child = Command::new("prometheus-pushgateway")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--persistence.file=")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus-pushgateway (Debian package prometheus-pushgateway)");
    let mut p = Proc { child, port };
    wait_ready(&mut p, "the Pushgateway");
    p
}

/// Starts `prometheus-pushgateway` with `--web.config.file=web_config` (TLS, basic auth);
/// ready once it accepts connections.
pub fn pushgateway_with_web_config(web_config: &Path) -> Proc {
    let port = free_port();
    let child = Command::new("prometheus-pushgateway")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--persistence.file=")
        .arg(format!("--web.config.file={}", web_config.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus-pushgateway");
    let mut p = Proc { child, port };
    poll(60, "the Pushgateway to listen", || {
        if let Ok(Some(st)) = p.child.try_wait() {
            panic!("the Pushgateway exited early: {st}");
        }
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    });
    p
}

/// `promtool tsdb create-blocks-from openmetrics OM DATA`, which must succeed.
pub fn create_blocks(om: &Path, data: &Path) {
    let out = std::process::Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(om)
        .arg(data)
        .output()
        .expect("run promtool (Debian package prometheus)");
    assert!(
        out.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts `prometheus` with `config` (YAML) and its TSDB in `dir`, old data kept for 10 years.
pub fn prometheus(config: &str, dir: &Path) -> Proc {
    prometheus_on(config, dir, free_port(), &[])
}

/// Like [`prometheus`], on `port` and with the `extra` flags; started again on the same port
/// and `dir`, it keeps its data.
pub fn prometheus_on(config: &str, dir: &Path, port: u16, extra: &[&str]) -> Proc {
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, config).expect("write prometheus.yml");
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg("--storage.tsdb.retention.time=10y")
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus (Debian package prometheus)");
    let mut p = Proc { child, port };
    wait_ready(&mut p, "Prometheus");
    p
}

/// One sample of an exposition: name, labels (empty values dropped, as Prometheus does) and
/// value.
pub type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the sample lines of a text exposition.
pub fn parse(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("NAME VALUE");
            let (name, labels) = match series.split_once('{') {
                None => (series.to_string(), BTreeMap::new()),
                Some((n, rest)) => (n.to_string(), parse_labels(rest.trim_end_matches('}'))),
            };
            (name, labels, value.parse().expect("a number"))
        })
        .collect()
}

fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while let Some((k, after)) = rest.split_once("=\"") {
        let mut v = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => v.push('\n'),
                    Some((_, c)) => v.push(c),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                c => v.push(c),
            }
        }
        if !v.is_empty() {
            out.insert(k.trim_start_matches(',').to_string(), v);
        }
        rest = &after[end..];
    }
    out
}

/// The samples of metric `name`.
pub fn of(samples: &[Sample], name: &str) -> Vec<Sample> {
    samples.iter().filter(|s| s.0 == name).cloned().collect()
}

/// Labels from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// An instant query; returns each series' labels (with `__name__`) and value.
pub fn query(prom: &Proc, q: &str, time: Option<f64>) -> Vec<(BTreeMap<String, String>, f64)> {
    let mut url = format!(
        "http://127.0.0.1:{}/api/v1/query?query={}",
        prom.port,
        enc(q)
    );
    if let Some(t) = time {
        url.push_str(&format!("&time={t}"));
    }
    api_results(&url)
        .iter()
        .map(|r| {
            let labels = serde_json::from_value(r["metric"].clone()).expect("labels");
            let val = r["value"][1].as_str().expect("value").parse().expect("num");
            (labels, val)
        })
        .collect()
}

/// The `data.result` array of a Prometheus HTTP API answer (status 200 required).
fn api_results(url: &str) -> Vec<serde_json::Value> {
    let (code, body) = get(url);
    assert_eq!(code, 200, "{url}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    v["data"]["result"].as_array().expect("result").clone()
}

/// One series of a range query: labels and (time, value) points.
pub type RangeSeries = (BTreeMap<String, String>, Vec<(f64, f64)>);

/// A range query; returns each series' labels and (time, value) points.
pub fn query_range(prom: &Proc, q: &str, start: f64, end: f64, step: f64) -> Vec<RangeSeries> {
    let url = format!(
        "http://127.0.0.1:{}/api/v1/query_range?query={}&start={start}&end={end}&step={step}",
        prom.port,
        enc(q)
    );
    api_results(&url)
        .iter()
        .map(|r| {
            let labels = serde_json::from_value(r["metric"].clone()).expect("labels");
            let pts = r["values"]
                .as_array()
                .expect("values")
                .iter()
                .map(|p| {
                    (
                        p[0].as_f64().expect("time"),
                        p[1].as_str().expect("v").parse().expect("num"),
                    )
                })
                .collect();
            (labels, pts)
        })
        .collect()
}

/// Polls `f` until it returns `Some` (up to `secs` seconds).
pub fn poll<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `promtool test rules` on the unit-test file `y` written as `dir/name`; fails the test
/// with promtool's output and the file when a case fails.
pub fn test_rules(dir: &Path, name: &str, y: &str) {
    let file = dir.join(name);
    std::fs::write(&file, y).unwrap();
    let res = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .expect("run promtool (Debian package prometheus)");
    assert!(
        res.status.success(),
        "{}\n{}\n{y}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
}
