//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_sglang-log-exporter"))
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A shipped sample log.
pub fn sample(name: &str) -> PathBuf {
    root().join("samples").join(name)
}

/// Runs the binary with `args` to completion.
pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .env("TZ", "UTC")
        .stdin(Stdio::null())
        .output()
        .expect("run the binary")
}

/// Runs `--once` with `args` and returns stdout; panics on a non-zero exit.
pub fn once(args: &[&str]) -> String {
    let mut a = vec!["--once", "--timezone", "UTC"];
    a.extend_from_slice(args);
    let out = run(&a);
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 exposition")
}

/// The value of the series whose line starts with `series` (name and labels exactly as
/// printed, e.g. `sglang:token_usage{server="x",...}`), if present.
pub fn value(exposition: &str, series: &str) -> Option<f64> {
    exposition.lines().find_map(|l| {
        let rest = l.strip_prefix(series)?;
        let v = rest.strip_prefix(' ')?;
        v.trim().parse().ok()
    })
}

/// Every sample line of metric `name` (with any labels).
pub fn samples<'a>(exposition: &'a str, name: &str) -> Vec<&'a str> {
    exposition
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .collect()
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// A running exporter, killed on drop.
pub struct Exporter {
    pub child: Child,
    pub port: u16,
}

impl Exporter {
    /// Starts the binary serving on a free loopback port with `args`.
    pub fn start(args: &[&str]) -> Exporter {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let child = Command::new(bin())
            .args(["--web.listen-address", &listen, "--timezone", "UTC"])
            .args(args)
            .env("TZ", "UTC")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the exporter");
        let e = Exporter { child, port };
        e.wait_ready();
        e
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("exporter did not listen on {}", self.port);
    }

    /// GETs `path` and returns (status, content type, body).
    pub fn get(&self, path: &str) -> (u16, String, String) {
        let url = format!("http://127.0.0.1:{}{}", self.port, path);
        match ureq::get(&url).timeout(Duration::from_secs(10)).call() {
            Ok(r) => {
                let ct = r.header("content-type").unwrap_or("").to_string();
                (r.status(), ct, r.into_string().unwrap_or_default())
            }
            Err(ureq::Error::Status(code, r)) => (code, String::new(), r.into_string().unwrap_or_default()),
            Err(e) => panic!("GET {url}: {e}"),
        }
    }

    /// Scrapes `/metrics`.
    pub fn scrape(&self) -> String {
        self.get("/metrics").2
    }

    /// Polls `/metrics` until `pred` holds (up to `secs` seconds); returns the last scrape.
    pub fn scrape_until(&self, secs: u64, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.scrape();
            if pred(&s) || Instant::now() > deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Appends `data` to `path` (creating it).
pub fn append(path: &Path, data: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open for append");
    f.write_all(data).expect("append");
    f.flush().expect("flush");
}
