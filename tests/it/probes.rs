//! `/-/healthy` and `/-/ready` (without credentials under basic auth: tests/it/webconfig.rs),
//! and systemd's
//! `Type=notify` protocol through a datagram socket the test binds.
//!
//! A FIFO input holds readiness: its tailer blocks opening it until the test writes, so "not
//! ready yet" is a state the test controls, not a race.

use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use crate::common::Exporter;

const LINE: &str = "[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 1, #token: 10, token usage: 0.00, gen throughput (token/s): 1.00, #queue-req: 0\n";

fn mkfifo(path: &std::path::Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo")
        .success();
    assert!(ok);
}

/// Writes `text` into the FIFO on a thread (the open blocks until the exporter reads).
fn feed(path: &std::path::Path, text: &str) -> std::thread::JoinHandle<()> {
    let (p, t) = (path.to_path_buf(), text.to_string());
    std::thread::spawn(move || std::fs::write(p, t).expect("write the FIFO"))
}

/// Polls `path` until it answers `status`; the last answer.
fn get_until(e: &Exporter, path: &str, status: u16) -> (u16, String, String) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = e.get(path);
        if r.0 == status || Instant::now() > deadline {
            return r;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn healthy_at_once_ready_after_the_inputs_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("slow.log");
    mkfifo(&fifo);
    let e = Exporter::start(&["--gpu.disable", fifo.to_str().unwrap()]);
    assert_eq!(
        e.get("/-/healthy"),
        (200, "text/plain; charset=utf-8".into(), "Healthy.\n".into())
    );
    let want = format!("Not ready: still reading {}.\n", fifo.display());
    let (code, _, body) = e.get("/-/ready");
    assert_eq!((code, body), (503, want));
    let w = feed(&fifo, LINE);
    assert_eq!(
        get_until(&e, "/-/ready", 200),
        (200, "text/plain; charset=utf-8".into(), "Ready.\n".into())
    );
    // Ready means read: the line is in the state.
    let m = e.scrape();
    assert_eq!(
        crate::common::value(
            &m,
            &format!(
                "sglang_log_exporter_lines_read_total{{source=\"{}\"}}",
                fifo.display()
            )
        ),
        Some(1.0),
        "{m}"
    );
    w.join().unwrap();
    // A missing file has nothing to catch up with, but no input is read: not ready, saying
    // which and why (issue 38.5), until it appears.
    let missing = dir.path().join("missing.log");
    let e2 = Exporter::start(&["--gpu.disable", missing.to_str().unwrap()]);
    let why = format!(
        "Not ready: cannot read {} (No such file or directory (os error 2)).\n",
        missing.display()
    );
    // Said once the follower has tried it (before, it is still to be read).
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut got = e2.get("/-/ready");
    while got.2 != why && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        got = e2.get("/-/ready");
    }
    assert_eq!((got.0, got.2), (503, why));
    std::fs::write(&missing, LINE).unwrap();
    assert_eq!(get_until(&e2, "/-/ready", 200).2, "Ready.\n");
}

#[test]
fn ready_once_the_journal_unit_is_caught_up() {
    let j = crate::journald::Journal::new();
    let e = crate::journald::start(&j);
    assert_eq!(get_until(&e, "/-/ready", 200).2, "Ready.\n");
    // Every entry that existed at start is read by then (138 lines of the unit).
    assert_eq!(crate::journald::lines_read(&e.scrape()), Some(138.0));
}

/// Receives the next datagram within 20 s.
fn recv(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).expect("a notification within 20 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn systemd_notify_status_ready_watchdog_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let sock_path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let fifo = dir.path().join("slow.log");
    mkfifo(&fifo);
    // WatchdogSec=0.4s: a ping every 200 ms.
    let mut e = Exporter::start_env(
        &["--gpu.disable", fifo.to_str().unwrap()],
        &[
            ("NOTIFY_SOCKET", sock_path.as_os_str()),
            ("WATCHDOG_USEC", std::ffi::OsStr::new("400000")),
        ],
    );
    let status = format!("following 1 file; serving 127.0.0.1:{}", e.port);
    assert_eq!(recv(&sock), format!("STATUS=catching up: {status}\n"));
    // Pinged while catching up too (a long history must not get it killed).
    assert_eq!(recv(&sock), "WATCHDOG=1\n");
    let w = feed(&fifo, LINE);
    let mut m = recv(&sock);
    while m == "WATCHDOG=1\n" {
        m = recv(&sock);
    }
    assert_eq!(m, format!("READY=1\nSTATUS={status}\n"));
    w.join().unwrap();
    assert_eq!(recv(&sock), "WATCHDOG=1\n");
    assert_eq!(recv(&sock), "WATCHDOG=1\n");
    // SIGTERM: STOPPING=1 before it exits.
    let pid = e.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let mut m = recv(&sock);
    while m == "WATCHDOG=1\n" {
        m = recv(&sock);
    }
    assert_eq!(m, "STOPPING=1\n");
    assert!(e.child.wait().unwrap().success());
}

/// `--web.telemetry-path /` serves the exposition at `/` (instead of the page, as before the
/// page); our own endpoints and paths the router would read as patterns are refused at start.
#[test]
fn telemetry_path_at_the_root_and_refused_paths() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    std::fs::write(&log, LINE).unwrap();
    let e = Exporter::start(&[
        "--gpu.disable",
        "--web.telemetry-path",
        "/",
        log.to_str().unwrap(),
    ]);
    let (code, ct, _) = e.get("/");
    assert_eq!(
        (code, ct.as_str()),
        (200, "text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(get_until(&e, "/-/ready", 200).2, "Ready.\n");
    for (path, msg) in [
        (
            "/-/ready",
            "error: --web.telemetry-path /-/ready is one of the exporter's own endpoints\n",
        ),
        (
            "/{x}",
            "error: --web.telemetry-path \"/{x}\" may hold only letters, digits and /-._~\n",
        ),
    ] {
        let out = crate::common::run(&["--web.telemetry-path", path, log.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{path}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), msg);
    }
}
