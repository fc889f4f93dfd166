//! Pushgateway push against a real `prometheus-pushgateway`, push failures against a down, slow
//! or refusing gateway, and a real Prometheus scraping the exporter.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{bin, free_port, once, sample, samples, value, Exporter};
use crate::promtools::{self, get, of, parse, poll, Sample};

const LOG: &str = "pd-decode-session.log";
/// Lines of the sample kept: the KV cache is 92-99 % full there (the whole log ends idle at 0).
const HEAD: usize = 1000;
/// Far beyond the sample's age, so live activity gauges keep the log's values.
const NO_IDLE: &str = "100000000";

fn sorted(mut v: Vec<(BTreeMap<String, String>, f64)>) -> Vec<(BTreeMap<String, String>, f64)> {
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// A temp dir with the first [`HEAD`] lines of the sample, under the sample's name.
fn busy_log() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(sample(LOG)).expect("sample");
    let head: String = text.lines().take(HEAD).map(|l| format!("{l}\n")).collect();
    let path = dir.path().join(LOG);
    std::fs::write(&path, head).expect("write");
    (dir, path.to_str().unwrap().to_string())
}

/// The `--once` samples of `name`, with `extra` labels added (as the Pushgateway shows them).
fn expected(name: &str, extra: &[(&str, &str)]) -> Vec<(BTreeMap<String, String>, f64)> {
    let (_dir, log) = busy_log();
    let s = parse(&once(&[&log]));
    let v = of(&s, name)
        .into_iter()
        .map(|(_, mut l, v)| {
            l.extend(promtools::labels(extra));
            (l, v)
        })
        .collect::<Vec<_>>();
    assert_eq!(v.len(), 4, "four DP ranks in {LOG}");
    assert!(v
        .iter()
        .all(|(_, x)| *x != 0.0 || name != "sglang:token_usage"));
    sorted(v)
}

fn group_samples(
    pg: &promtools::Proc,
    name: &str,
    instance: &str,
) -> Vec<(BTreeMap<String, String>, f64)> {
    let (code, body) = get(&format!("http://127.0.0.1:{}/metrics", pg.port));
    assert_eq!(code, 200);
    let all: Vec<Sample> = parse(&body);
    sorted(
        of(&all, name)
            .into_iter()
            .filter(|s| s.1.get("instance").map(String::as_str) == Some(instance))
            .map(|(_, l, v)| (l, v))
            .collect(),
    )
}

/// Sends signal `sig` (a name as `kill -SIG` takes it) to process `pid`.
fn send_signal(pid: u32, sig: &str) {
    let st = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success(), "kill -{sig}");
}

fn terminate(child: &mut std::process::Child) -> std::process::ExitStatus {
    send_signal(child.id(), "TERM");
    child.wait().expect("wait")
}

#[test]
fn pushes_alone_and_deletes_the_group_on_sigterm() {
    let (_dir, log) = busy_log();
    let pg = promtools::pushgateway();
    let url = format!("http://127.0.0.1:{}", pg.port);
    let mut child = Command::new(bin())
        .arg(&log)
        .args([
            "--web.listen-address=",
            "--timezone",
            "UTC",
            "--idle-after",
            NO_IDLE,
        ])
        .args([
            "--push.url",
            &url,
            "--push.interval",
            "200ms",
            "--push.instance",
            "host-a",
        ])
        .args(["--push.label", "cluster=/a/b", "--push.label", "env=test"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    let extra = [
        ("job", "sglang"),
        ("instance", "host-a"),
        ("cluster", "/a/b"),
        ("env", "test"),
    ];
    let want = expected("sglang:token_usage", &extra);
    let got = poll(30, "the pushed group", || {
        let g = group_samples(&pg, "sglang:token_usage", "host-a");
        (g == want).then_some(g)
    });
    assert_eq!(got, want);
    assert_eq!(
        group_samples(&pg, "sglang:num_used_tokens", "host-a"),
        expected("sglang:num_used_tokens", &extra)
    );
    assert!(terminate(&mut child).success());
    // Deleted: neither the metrics nor the group's push_time_seconds remain.
    assert_eq!(group_samples(&pg, "sglang:token_usage", "host-a"), vec![]);
    assert_eq!(group_samples(&pg, "push_time_seconds", "host-a"), vec![]);
}

#[test]
fn keep_on_exit_leaves_the_group() {
    let (_dir, log) = busy_log();
    let pg = promtools::pushgateway();
    let url = format!("http://127.0.0.1:{}", pg.port);
    let mut e = Exporter::start(&[
        &log,
        "--idle-after",
        NO_IDLE,
        "--push.url",
        &url,
        "--push.instance",
        "host-k",
        "--push.keep-on-exit",
    ]);
    let want = expected(
        "sglang:token_usage",
        &[("job", "sglang"), ("instance", "host-k")],
    );
    poll(30, "the pushed group", || {
        (group_samples(&pg, "sglang:token_usage", "host-k") == want).then_some(())
    });
    assert!(terminate(&mut e.child).success());
    assert_eq!(group_samples(&pg, "sglang:token_usage", "host-k"), want);
}

#[test]
fn once_pushes_once_and_exits() {
    let (_dir, log) = busy_log();
    let pg = promtools::pushgateway();
    let url = format!("http://user:pw@127.0.0.1:{}/", pg.port);
    let out = Command::new(bin())
        .args(["--once", "--timezone", "UTC", "--push.job", "cron"])
        .args(["--push.url", &url, "--push.instance", "host-o"])
        .arg(&log)
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"", "pushing replaces printing");
    assert_eq!(
        group_samples(&pg, "sglang:token_usage", "host-o"),
        expected(
            "sglang:token_usage",
            &[("job", "cron"), ("instance", "host-o")]
        )
    );
    // Nothing listens: the push fails after its retries and the exit status says so.
    let down = format!("http://127.0.0.1:{}", free_port());
    let out = Command::new(bin())
        .args(["--once", "--push.url", &down])
        .arg(&log)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn bad_push_options_are_refused() {
    let (_dir, log) = busy_log();
    const METRIC_LABEL: &str =
        "is a label of the exported metrics; the Pushgateway refuses a grouping label that a metric also has";
    for (args, want) in [
        (
            vec!["--push.url", "ftp://x"],
            "error: --push.url \"ftp://x\" must be an http:// or https:// URL".to_string(),
        ),
        (
            vec!["--push.url", "http://127.0.0.1:1", "--push.label", "job=x"],
            "error: --push.label \"job=x\": \"job\" is not a usable label name (job and instance are set already)".to_string(),
        ),
        (
            vec!["--push.url", "http://127.0.0.1:1", "--push.label", "novalue"],
            "error: --push.label \"novalue\" is not NAME=VALUE".to_string(),
        ),
        // Labels of the GPU metrics too: the group label would overwrite theirs.
        (
            vec!["--push.url", "http://127.0.0.1:1", "--push.label", "call=x"],
            format!("error: --push.label \"call=x\": \"call\" {METRIC_LABEL}"),
        ),
        (
            vec!["--push.url", "http://127.0.0.1:1", "--push.label", "pci_bus_id=x"],
            format!("error: --push.label \"pci_bus_id=x\": \"pci_bus_id\" {METRIC_LABEL}"),
        ),
    ] {
        let out = crate::common::run(&[&["--once", &log], &args[..]].concat());
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim_end(), want, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[derive(Clone, Copy)]
enum Fake {
    /// Answers every request with 400.
    Refuse,
    /// Reads the request and never answers.
    Hang,
    /// Answers the first n requests with 503, then 200.
    FailFirst(usize),
}

/// A tiny HTTP server on a free port (a thread per connection); returns its port, the number
/// of connections and the method of each request read.
fn fake_gateway(mode: Fake) -> (u16, Arc<AtomicUsize>, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().unwrap().port();
    let n = Arc::new(AtomicUsize::new(0));
    let methods = Arc::new(Mutex::new(Vec::new()));
    let (count, seen) = (n.clone(), methods.clone());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let nth = count.fetch_add(1, Ordering::SeqCst);
            let seen = seen.clone();
            std::thread::spawn(move || {
                let method = read_request(&mut s);
                seen.lock().unwrap().push(method);
                let answer: &[u8] = match mode {
                    Fake::Hang => {
                        // Hold the connection until the client gives up.
                        let mut buf = [0; 4096];
                        while s.read(&mut buf).is_ok_and(|k| k > 0) {}
                        return;
                    }
                    Fake::Refuse => b"HTTP/1.1 400 Bad Request\r\nContent-Length: 12\r\nConnection: close\r\n\r\nbad metrics\n",
                    Fake::FailFirst(k) if nth < k => b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nConnection: close\r\n\r\nbusy\n",
                    Fake::FailFirst(_) => b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                };
                let _ = s.write_all(answer);
            });
        }
    });
    (port, n, methods)
}

/// Reads one request (head, then the body by Content-Length); returns its method.
fn read_request(s: &mut std::net::TcpStream) -> String {
    let mut buf = vec![0; 1 << 20];
    let mut got = Vec::new();
    while let Ok(k) = s.read(&mut buf) {
        if k == 0 {
            break;
        }
        got.extend_from_slice(&buf[..k]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(h) = text.find("\r\n\r\n") {
            let len = text[..h]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if got.len() >= h + 4 + len {
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&got);
    text.split(' ').next().unwrap_or("").to_string()
}

fn push_health(e: &Exporter, failures: f64) -> String {
    let s = e.scrape_until(30, |s| {
        value(s, "sglang_log_exporter_push_failures_total") == Some(failures)
    });
    assert_eq!(
        value(&s, "sglang_log_exporter_push_failures_total"),
        Some(failures),
        "{s}"
    );
    assert_eq!(value(&s, "sglang_log_exporter_pushes_total"), Some(0.0));
    assert_eq!(
        value(
            &s,
            "sglang_log_exporter_push_last_success_timestamp_seconds"
        ),
        None
    );
    s
}

fn exporter_pushing_to(log: &str, url: &str) -> Exporter {
    Exporter::start(&[
        log,
        "--idle-after",
        NO_IDLE,
        "--push.url",
        url,
        "--push.interval",
        "1h",
        "--push.timeout",
        "1s",
    ])
}

#[test]
fn a_refusing_gateway_is_counted_without_retry() {
    let (_dir, log) = busy_log();
    let (port, requests, _) = fake_gateway(Fake::Refuse);
    let e = exporter_pushing_to(&log, &format!("http://127.0.0.1:{port}"));
    let s = push_health(&e, 1.0);
    assert_eq!(
        value(&s, "sglang_log_exporter_push_last_status"),
        Some(400.0)
    );
    assert_eq!(requests.load(Ordering::SeqCst), 1);
    // Parsing went on: the state is complete.
    let want = expected("sglang:token_usage", &[]);
    let usage = |s: &str| {
        sorted(
            of(&parse(s), "sglang:token_usage")
                .into_iter()
                .map(|(_, l, v)| (l, v))
                .collect(),
        )
    };
    let s = e.scrape_until(30, |s| usage(s) == want);
    assert_eq!(usage(&s), want);
}

#[test]
fn a_hanging_gateway_times_out_and_never_blocks_scrapes() {
    let (_dir, log) = busy_log();
    let (port, requests, _) = fake_gateway(Fake::Hang);
    let e = exporter_pushing_to(&log, &format!("http://127.0.0.1:{port}"));
    // The first attempt is hanging now; a scrape still answers.
    poll(10, "a hanging push", || {
        (requests.load(Ordering::SeqCst) >= 1).then_some(())
    });
    let (code, _, body) = e.get("/metrics");
    assert_eq!(code, 200);
    assert_eq!(
        samples(&body, "sglang_log_exporter_build_info").len(),
        1,
        "{body}"
    );
    assert!(
        samples(&body, "sglang_log_exporter_build_info")[0].ends_with("} 1"),
        "{body}"
    );
    let s = push_health(&e, 3.0);
    assert_eq!(value(&s, "sglang_log_exporter_push_last_status"), Some(0.0));
    assert_eq!(
        requests.load(Ordering::SeqCst),
        3,
        "one try and two retries"
    );
}

#[test]
fn a_down_gateway_is_retried_and_counted() {
    let (_dir, log) = busy_log();
    let e = exporter_pushing_to(&log, &format!("http://127.0.0.1:{}", free_port()));
    let s = push_health(&e, 3.0);
    assert_eq!(value(&s, "sglang_log_exporter_push_last_status"), Some(0.0));
}

#[test]
fn prometheus_scrapes_the_exporter() {
    let (_dir, log) = busy_log();
    let e = Exporter::start(&[&log, "--idle-after", NO_IDLE]);
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sglang\n    honor_labels: true\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
        e.port
    );
    let prom = promtools::prometheus(&cfg, dir.path());
    let want = expected(
        "sglang:token_usage",
        &[
            ("job", "sglang"),
            ("instance", &format!("127.0.0.1:{}", e.port)),
        ],
    );
    let got = poll(60, "Prometheus to scrape the exporter", || {
        let r: Vec<_> = promtools::query(&prom, "sglang:token_usage", None)
            .into_iter()
            .map(|(mut l, v)| {
                l.remove("__name__");
                (l, v)
            })
            .collect();
        let r = sorted(r);
        (r == want).then_some(r)
    });
    assert_eq!(got, want);
}

#[test]
fn pushes_over_https_with_basic_auth() {
    use crate::webconfig::{client, get as tls_get, hash, self_signed};
    let (_log_dir, log) = busy_log();
    let dir = tempfile::tempdir().expect("tempdir");
    let cert = self_signed(dir.path(), "gw");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: {d}/gw.pem\n  key_file: {d}/gw.key\nbasic_auth_users:\n  pusher: {h}\n",
            d = dir.path().display(),
            h = hash("pushpw")
        ),
    )
    .unwrap();
    let pw = dir.path().join("pw");
    std::fs::write(&pw, "pushpw\n").unwrap();
    let pg = promtools::pushgateway_with_web_config(&web);
    let url = format!("https://127.0.0.1:{}", pg.port);
    let run = |user: &str| {
        Command::new(bin())
            .args(["--once", "--timezone", "UTC", "--push.instance", "host-s"])
            .args(["--push.url", &url, "--push.ca-file", cert.to_str().unwrap()])
            .args([
                "--push.basic-auth-user",
                user,
                "--push.basic-auth-password-file",
            ])
            .arg(&pw)
            .arg(&log)
            .output()
            .expect("run")
    };
    let out = run("intruder");
    assert_eq!(out.status.code(), Some(1), "a refused push fails the run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
    let out = run("pusher");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, _, body) = tls_get(
        &client(&cert, None),
        &format!("{url}/metrics"),
        Some(("pusher", "pushpw")),
    );
    assert_eq!(code, 200);
    let got: Vec<_> = of(&parse(&body), "sglang:token_usage")
        .into_iter()
        .map(|(_, l, v)| (l, v))
        .collect();
    assert_eq!(
        sorted(got),
        expected(
            "sglang:token_usage",
            &[("job", "sglang"), ("instance", "host-s")]
        )
    );
}

/// Waits (polling, up to `secs`) for `child` to exit; `None` if it is still running.
fn wait_exit(child: &mut std::process::Child, secs: u64) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return Some(st);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The child's whole stderr (after it exited).

#[test]
fn sigterm_during_a_hanging_push_exits_and_still_tries_the_delete() {
    let (_dir, log) = busy_log();
    let (port, requests, methods) = fake_gateway(Fake::Hang);
    let mut e = Exporter::start(&[
        &log,
        "--gpu.disable",
        "--push.url",
        &format!("http://127.0.0.1:{port}"),
        "--push.interval",
        "1s",
        "--push.timeout",
        "5s",
    ]);
    // The first push hangs now: the stop request arrives while a request is in flight (it used
    // to be swallowed by the retry wait, and the loop went on pushing forever).
    poll(10, "a hanging push", || {
        (requests.load(Ordering::SeqCst) >= 1).then_some(())
    });
    let st = Command::new("kill")
        .args(["-TERM", &e.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    // The PUT ends within --push.timeout (5 s), the DELETE within 1 s; 30 s is ample.
    let status = wait_exit(&mut e.child, 30).expect("the exporter exits after SIGTERM");
    assert!(status.success(), "{status}");
    let err = e.stderr_to_end();
    assert!(err.contains("shut down"), "{err}");
    // No retry after the stop request; the DELETE is still tried (and times out).
    let got = poll(10, "the DELETE to arrive", || {
        let m = methods.lock().unwrap().clone();
        (m.len() >= 2).then_some(m)
    });
    assert_eq!(got, ["PUT", "DELETE"]);
    assert!(err.contains("deleting the pushed group failed"), "{err}");
}

#[test]
fn a_failure_streak_warns_once_and_recovery_is_logged() {
    let (_dir, log) = busy_log();
    // The first push fails on all three attempts (503 is retried), the later ones succeed.
    let (port, _, methods) = fake_gateway(Fake::FailFirst(3));
    let mut e = Exporter::start(&[
        &log,
        "--gpu.disable",
        "--push.url",
        &format!("http://127.0.0.1:{port}"),
        "--push.interval",
        "100ms",
        "--push.timeout",
        "5s",
    ]);
    let s = e.scrape_until(30, |s| {
        value(s, "sglang_log_exporter_pushes_total").is_some_and(|n| n >= 2.0)
    });
    // Every failed attempt is counted.
    assert_eq!(
        value(&s, "sglang_log_exporter_push_failures_total"),
        Some(3.0),
        "{s}"
    );
    assert_eq!(
        value(&s, "sglang_log_exporter_push_last_status"),
        Some(200.0)
    );
    assert!(terminate(&mut e.child).success());
    let err = e.stderr_to_end();
    let lines = |what: &str, level: &str| {
        err.lines()
            .filter(|l| l.contains(what) && l.contains(level))
            .count()
    };
    assert_eq!(lines("push failed", "WARN"), 1, "{err}");
    assert!(err.contains("503"), "the warning names the reason: {err}");
    assert_eq!(
        lines("pushing works again after 3 failed attempts", "INFO"),
        1,
        "{err}"
    );
    assert_eq!(
        methods.lock().unwrap().last().map(String::as_str),
        Some("DELETE")
    );
}

/// Repro 35: every signal whose default would end the exporter (and leave its pushed group
/// serving the last values as current) is ignored, logged, or ends it as SIGTERM does: the
/// group deleted. Ignored: SIGUSR1 (rotation's "reopen your logs"), SIGUSR2, SIGALRM, SIGVTALRM,
/// SIGPROF, SIGIO, SIGXFSZ, a real-time signal; stopping: SIGQUIT, SIGXCPU, SIGPWR.
#[test]
fn stray_signals_are_ignored_and_stop_signals_delete_the_group() {
    let (_dir, log) = busy_log();
    for stop in ["QUIT", "XCPU", "PWR"] {
        let (port, _, methods) = fake_gateway(Fake::FailFirst(0));
        let url = format!("http://127.0.0.1:{port}");
        let mut e = Exporter::start(&[
            &log,
            "--idle-after",
            NO_IDLE,
            "--push.url",
            &url,
            "--push.interval",
            "200ms",
        ]);
        let logs = e.log_lines();
        poll(30, "a push", || {
            methods
                .lock()
                .unwrap()
                .iter()
                .any(|m| m != "DELETE")
                .then_some(())
        });
        for sig in [
            "USR1", "USR2", "ALRM", "VTALRM", "PROF", "IO", "XFSZ", "RTMIN+3",
        ] {
            send_signal(e.child.id(), sig);
            let name = match sig {
                "RTMIN+3" => "SIGRTMIN+3".to_string(),
                s => format!("SIG{s}"),
            };
            crate::common::wait_log(&logs, &format!("{name} ignored"), 30);
            assert!(e.child.try_wait().unwrap().is_none(), "{sig} ended it");
        }
        // Still serving.
        let s = e.scrape();
        assert!(s.contains("sglang_log_exporter_build_info"), "{s}");
        send_signal(e.child.id(), stop);
        let status = wait_exit(&mut e.child, 30).expect("the exporter exits");
        assert!(status.success(), "SIG{stop}: {status:?}");
        assert_eq!(
            methods.lock().unwrap().last().map(String::as_str),
            Some("DELETE"),
            "SIG{stop}: the group deleted"
        );
    }
}
