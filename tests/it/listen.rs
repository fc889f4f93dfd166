//! `--web.listen-address`: `:PORT` is dual-stack (IPv6 and IPv4 clients), the flag repeats.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{bin, free_port, wait_log, Exporter};

/// GET `/-/healthy` at `host:port` (an IPv6 host in brackets); the status, or the error.
fn healthy(host: &str, port: u16) -> Result<u16, String> {
    let url = format!("http://{host}:{port}/-/healthy");
    match ureq::get(&url).timeout(Duration::from_secs(5)).call() {
        Ok(r) => Ok(r.status()),
        Err(e) => Err(e.to_string()),
    }
}

fn start(args: &[&str], port: u16) -> Exporter {
    let child = Command::new(bin())
        .args(["--gpu.disable", "--timezone", "UTC"])
        .args(args)
        .arg(crate::common::sample("pd-decode-session.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let e = Exporter::tapped(child, port);
    e.wait_ready();
    e
}

/// Whether this host has an IPv6 loopback to test with.
fn has_ipv6_loopback() -> bool {
    std::net::TcpListener::bind("[::1]:0").is_ok()
}

#[test]
fn any_address_port_serves_ipv4_and_ipv6() {
    let port = free_port();
    let listen = format!(":{port}");
    let mut e = start(&["--web.listen-address", &listen], port);
    wait_log(&e.log_lines(), "serving metrics", 20);
    assert_eq!(healthy("127.0.0.1", port), Ok(200));
    if has_ipv6_loopback() {
        assert_eq!(healthy("[::1]", port), Ok(200));
    } else {
        eprintln!("SKIPPED the ::1 part: this host has no IPv6 loopback");
    }
    let _ = e.child.kill();
    let _ = e.child.wait();
    let log = e.stderr_to_end();
    let want = if has_ipv6_loopback() {
        format!("serving metrics address=[::]:{port} path=/metrics")
    } else {
        format!("serving metrics address=0.0.0.0:{port} path=/metrics")
    };
    assert!(log.contains(&want), "{log}");
}

#[test]
fn listen_address_repeats() {
    let (p1, p2) = (free_port(), free_port());
    let (a1, a2) = (format!("127.0.0.1:{p1}"), format!("127.0.0.1:{p2}"));
    let e = start(
        &["--web.listen-address", &a1, "--web.listen-address", &a2],
        p1,
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while healthy("127.0.0.1", p2).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(healthy("127.0.0.1", p1), Ok(200));
    assert_eq!(healthy("127.0.0.1", p2), Ok(200));
    drop(e);
}

#[test]
fn a_taken_port_is_an_error_naming_it() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let out = Command::new(bin())
        .args(["--gpu.disable", "--web.listen-address"])
        .arg(format!("127.0.0.1:{port}"))
        .arg(crate::common::sample("pd-decode-session.log"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "error: cannot listen on 127.0.0.1:{port}: Address already in use"
        )),
        "{err}"
    );
}
