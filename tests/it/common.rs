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

/// A FIFO at `dir/name` and a thread that writes `text` into it once a reader opens it.
pub fn fifo_fed(dir: &Path, name: &str, text: Vec<u8>) -> (PathBuf, std::thread::JoinHandle<()>) {
    let fifo = dir.join(name);
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo")
        .success());
    let path = fifo.clone();
    let writer = std::thread::spawn(move || std::fs::write(path, text).expect("write the FIFO"));
    (fifo, writer)
}

/// `--once` on `text` written to a file named `name` (its server), every rank kept busy;
/// the exposition.
pub fn once_on(name: &str, text: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write");
    once(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        "--log.level",
        "error",
        p.to_str().expect("utf-8 path"),
    ])
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
    /// Its stderr, drained from the start by a thread (a chatty exporter must never block on
    /// a full pipe), kept for [`Exporter::log_lines`] and [`Exporter::stderr_to_end`].
    tap: std::sync::Arc<std::sync::Mutex<StderrTap>>,
    drain: Option<std::thread::JoinHandle<()>>,
}

/// What the exporter wrote to stderr so far, and where new lines go.
#[derive(Default)]
struct StderrTap {
    lines: Vec<String>,
    tx: Option<std::sync::mpsc::Sender<String>>,
}

impl Exporter {
    /// Starts the binary serving on a free loopback port with `args`.
    pub fn start(args: &[&str]) -> Exporter {
        Exporter::start_env(args, &[])
    }

    /// Like [`Exporter::start`], with extra environment variables for the child.
    pub fn start_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Exporter {
        let port = free_port();
        let listen = format!("127.0.0.1:{port}");
        let child = Command::new(bin())
            .args(["--web.listen-address", &listen, "--timezone", "UTC"])
            .args(args)
            .env("TZ", "UTC")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the exporter");
        let e = Exporter::tapped(child, port);
        e.wait_ready();
        e
    }

    /// Wraps a started child, draining its stderr.
    pub fn tapped(mut child: Child, port: u16) -> Exporter {
        use std::io::BufRead;
        let tap = std::sync::Arc::new(std::sync::Mutex::new(StderrTap::default()));
        let drain = child.stderr.take().map(|err| {
            let tap = tap.clone();
            std::thread::spawn(move || {
                for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                    let mut t = tap.lock().unwrap();
                    if let Some(tx) = &t.tx {
                        if tx.send(l.clone()).is_err() {
                            t.tx = None;
                        }
                    }
                    t.lines.push(l);
                }
                // The log ended: receivers see it.
                tap.lock().unwrap().tx = None;
            })
        });
        Exporter {
            child,
            port,
            tap,
            drain,
        }
    }

    /// Everything the exporter wrote to stderr, once it has ended (call after killing it;
    /// waits up to 10 s for the pipe to close, then returns what came).
    pub fn stderr_to_end(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.drain.as_ref().is_some_and(|d| !d.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut text = self.tap.lock().unwrap().lines.join("\n");
        text.push('\n');
        text
    }

    /// Waits until the exporter accepts connections.
    pub fn wait_ready(&self) {
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
            Err(ureq::Error::Status(code, r)) => {
                (code, String::new(), r.into_string().unwrap_or_default())
            }
            Err(e) => panic!("GET {url}: {e}"),
        }
    }

    /// Scrapes `/metrics`.
    pub fn scrape(&self) -> String {
        self.get("/metrics").2
    }

    /// Polls `/metrics` until `pred` holds and returns that scrape; panics with the last
    /// scrape when it does not hold within `secs` seconds.
    pub fn scrape_until(&self, secs: u64, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.scrape();
            if pred(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("the condition did not hold within {secs} s; last scrape:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

impl Exporter {
    /// The exporter's log lines (stderr), those written so far first, then as they come.
    pub fn log_lines(&mut self) -> std::sync::mpsc::Receiver<String> {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut t = self.tap.lock().unwrap();
        for l in &t.lines {
            let _ = tx.send(l.clone());
        }
        if self.drain.as_ref().is_some_and(|d| !d.is_finished()) {
            t.tx = Some(tx);
        }
        rx
    }
}

/// Waits for a log line containing `needle`; panics after `secs` s or when the log ends.
pub fn wait_log(rx: &std::sync::mpsc::Receiver<String>, needle: &str, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(needle) => return l,
            Ok(_) => {}
            Err(e) => panic!("no log line with {needle:?} within {secs} s: {e}"),
        }
    }
}

/// The targets of `pid`'s open file descriptors (`/proc/<pid>/fd`), e.g. `/x/a.log (deleted)`.
pub fn fd_targets(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read /proc/<pid>/fd")
        .flatten()
        .filter_map(|f| std::fs::read_link(f.path()).ok())
        .map(|t| t.to_string_lossy().into_owned())
        .collect()
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `systemd-analyze security --offline=true` on the unit file `path`: its overall exposure
/// score (`None` when the report has none) and the report (stdout, then stderr).
pub fn unit_exposure(path: &Path) -> (Option<f64>, String) {
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=true", "--no-pager"])
        .arg(path)
        .output()
        .expect("systemd-analyze");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let score = text
        .lines()
        .find_map(|l| l.split("Overall exposure level for ").nth(1))
        .and_then(|r| r.split(": ").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|s| s.parse().ok());
    (score, text)
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

/// Runs `cmd` with `input` on its standard input and returns its output (stdout and stderr
/// captured). Panics naming `what` when it cannot be started.
pub fn run_with_input(cmd: &mut Command, input: &[u8], what: &str) -> Output {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    // A child that exits early closes its stdin; its output says why.
    let _ = child.stdin.take().expect("stdin").write_all(input);
    child.wait_with_output().expect("wait for the child")
}

/// One sample of an exposition: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name.
    pub name: String,
    /// Label pairs in printed order.
    pub labels: Vec<(String, String)>,
    /// Value.
    pub value: f64,
}

impl Sample {
    /// The value of label `k`, if present.
    pub fn label(&self, k: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    }
}

/// Every sample of a text exposition (comments skipped). Label values are unescaped.
pub fn parse_exposition(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| parse_sample(l).unwrap_or_else(|| panic!("not a sample line: {l}")))
        .collect()
}

fn parse_sample(line: &str) -> Option<Sample> {
    let (head, value) = line.rsplit_once(' ')?;
    // OpenMetrics lines may carry a timestamp after the value.
    let (head, value) = match head.rsplit_once(' ') {
        Some((h, v)) if !head.ends_with('}') && v.parse::<f64>().is_ok() => (h, v),
        _ => (head, value),
    };
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    let Some(open) = head.find('{') else {
        return Some(Sample {
            name: head.to_string(),
            labels: Vec::new(),
            value,
        });
    };
    let name = head[..open].to_string();
    let body = head[open + 1..].strip_suffix('}')?;
    let mut labels = Vec::new();
    let mut chars = body.chars().peekable();
    while chars.peek().is_some() {
        let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
        if chars.next() != Some('"') {
            return None;
        }
        let mut v = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => v.push('\n'),
                    c => v.push(c),
                },
                '"' => break,
                c => v.push(c),
            }
        }
        labels.push((key.trim_start_matches(',').to_string(), v));
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
    Some(Sample {
        name,
        labels,
        value,
    })
}

/// How the exposition `expo` departs from the whole list of families (the registry and the
/// embedded pattern file): a family not in it, or with another HELP or type; a series without
/// a declared unconditional label, with an undeclared one, or in another order.
pub fn registry_mismatches(expo: &str) -> Vec<String> {
    let pat = sglang_log_exporter::parse::patterns::Patterns::embedded().unwrap();
    let all = sglang_log_exporter::catalog::every_family(pat.family_entries());
    let mut failures = Vec::new();
    let meta = |prefix: &str| -> std::collections::BTreeMap<String, String> {
        expo.lines()
            .filter_map(|l| l.strip_prefix(prefix))
            .filter_map(|l| l.split_once(' '))
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    };
    let (helps, types) = (meta("# HELP "), meta("# TYPE "));
    for (name, kind) in &types {
        let Some(e) = all.iter().find(|e| &e.name == name) else {
            failures.push(format!("{name}: not in the whole list"));
            continue;
        };
        let want = format!("{:?}", e.kind).to_lowercase();
        if *kind != want {
            failures.push(format!("{name}: type {kind}, declared {want}"));
        }
        if helps.get(name) != Some(&e.help) {
            failures.push(format!(
                "{name}: HELP {:?}, declared {:?}",
                helps.get(name),
                e.help
            ));
        }
    }
    for s in parse_exposition(expo) {
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|x| s.name.strip_suffix(x))
            .filter(|b| types.get(*b).is_some_and(|k| k == "histogram"))
            .unwrap_or(&s.name);
        let Some(e) = all.iter().find(|e| e.name == base) else {
            continue;
        };
        // The declared keys this series must show, in order: each unconditional one, and each
        // conditional one it has.
        let have: Vec<&str> = s
            .labels
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| *k != "le")
            .collect();
        let expected: Vec<&str> = e
            .labels
            .iter()
            .filter_map(|l| match l.strip_suffix('?') {
                Some(c) => have.contains(&c).then_some(c),
                None => Some(*l),
            })
            .collect();
        if have != expected {
            failures.push(format!("{base}: labels {have:?}, declared {:?}", e.labels));
        }
    }
    failures.sort();
    failures.dedup();
    failures
}
