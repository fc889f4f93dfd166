//! The running binary following real files: appends, partial writes, CRLF, invalid UTF-8,
//! oversized lines, rotation (rename, copytruncate, delete and re-create), a file that appears
//! later, the idle policy on the wall clock, stdin, the HTTP endpoint, promtool's verdict and
//! SIGTERM.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::{append, bin, free_port, run_with_input, sample, value, wait_log, Exporter};

/// A decode line of rank `TPn` with `#queue-req: q` and `#running-req: r`, stamped now (UTC, as
/// the exporter runs with `--timezone UTC`): lines already in a file when the exporter starts are
/// judged by their own time.
pub(crate) fn decode(tp: u32, r: u32, q: u32) -> String {
    let now = jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S");
    format!("[{now} TP{tp}] Decode batch, #running-req: {r}, #token: {}, token usage: 0.05, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: {q}\n", r * 100)
}

pub(crate) fn rank(server: &str, tp: u32) -> String {
    format!("{{server=\"{server}\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\"}}")
}

pub(crate) fn has(expo: &str, series: &str, want: f64) -> bool {
    value(expo, series) == Some(want)
}

pub(crate) fn running(server: &str, tp: u32) -> String {
    format!("sglang:num_running_reqs{}", rank(server, tp))
}

pub(crate) fn lines_read(path: &std::path::Path) -> String {
    format!(
        "sglang_log_exporter_lines_read_total{{source=\"{}\"}}",
        path.display()
    )
}

/// Starts the exporter following `path` with a long idle window (values stay put).
fn follow(path: &std::path::Path) -> Exporter {
    Exporter::start(&["--idle-after", "1h", path.to_str().unwrap()])
}

#[test]
fn appended_line_shows_up_and_partial_writes_are_joined() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("srv.log");
    append(&p, decode(0, 1, 0).as_bytes());
    let e = follow(&p);
    let s = e.scrape_until(10, |s| has(s, &running("srv", 0), 1.0));
    assert!(has(&s, &running("srv", 0), 1.0), "{s}");
    // One line in two writes, cut inside a number: it must be read once, whole.
    let line = decode(0, 2, 77);
    let cut = line.find("#queue-req: 7").unwrap() + "#queue-req: 7".len();
    append(&p, &line.as_bytes()[..cut]);
    // The first part is read (its bytes counted) before the rest is written.
    let bytes = format!(
        "sglang_log_exporter_bytes_read_total{{source=\"{}\"}}",
        p.display()
    );
    let first = (decode(0, 1, 0).len() + cut) as f64;
    e.scrape_until(10, |s| has(s, &bytes, first));
    append(&p, &line.as_bytes()[cut..]);
    append(&p, decode(1, 9, 0).as_bytes());
    // Counters are handed over after each read burst, after the values: wait for them.
    let s = e.scrape_until(10, |s| has(s, &lines_read(&p), 3.0));
    assert!(
        has(
            &s,
            &format!("sglang:num_queue_reqs{}", rank("srv", 0)),
            77.0
        ),
        "{s}"
    );
    assert!(has(&s, &lines_read(&p), 3.0), "{s}");
}

#[test]
fn crlf_invalid_utf8_and_oversized_lines_are_survived_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.log");
    append(&p, b"");
    let e = follow(&p);
    append(&p, decode(0, 3, 5).replace('\n', "\r\n").as_bytes());
    // Stamped now: under load the follower may first see these lines in its initial read, where
    // a line's own time decides whether its rank is idle.
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M:%S")
        .to_string();
    let mut bad = format!("[{now} TP1] Decode batch, #running-req: 4, ").into_bytes();
    bad.extend_from_slice(b"\xff\xfe: 1, #queue-req: 6\n");
    append(&p, &bad);
    let mut huge = vec![b'x'; 2 << 20];
    huge.push(b'\n');
    append(&p, &huge);
    append(&p, decode(2, 8, 0).as_bytes());
    let s = e.scrape_until(10, |s| has(s, &lines_read(&p), 4.0));
    assert!(
        has(&s, &format!("sglang:num_queue_reqs{}", rank("bad", 0)), 5.0),
        "{s}"
    );
    assert!(has(&s, &running("bad", 1), 4.0), "{s}");
    assert!(
        has(&s, &format!("sglang:num_queue_reqs{}", rank("bad", 1)), 6.0),
        "{s}"
    );
    let src = format!("{{source=\"{}\"}}", p.display());
    assert!(
        has(
            &s,
            &format!("sglang_log_exporter_lines_invalid_utf8_total{src}"),
            1.0
        ),
        "{s}"
    );
    assert!(
        has(
            &s,
            &format!("sglang_log_exporter_lines_oversized_total{src}"),
            1.0
        ),
        "{s}"
    );
    assert!(
        has(
            &s,
            &format!("sglang_log_exporter_field_value_errors_total{src}"),
            0.0
        ),
        "{s}"
    );
    assert!(has(&s, &lines_read(&p), 4.0), "{s}");
}

#[test]
fn rename_rotation_finishes_the_old_file_then_reads_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("rot.log");
    append(&p, decode(0, 1, 0).as_bytes());
    let e = follow(&p);
    e.scrape_until(10, |s| has(s, &running("rot", 0), 1.0));
    let old = dir.path().join("rot.log.1");
    std::fs::rename(&p, &old).unwrap();
    // SGLang still writes to the renamed file until it reopens.
    append(&old, decode(1, 2, 0).as_bytes());
    append(&p, decode(2, 3, 0).as_bytes());
    let s = e.scrape_until(10, |s| has(s, &lines_read(&p), 3.0));
    assert!(has(&s, &running("rot", 2), 3.0), "{s}");
    assert!(has(&s, &running("rot", 1), 2.0), "{s}");
    assert!(has(&s, &lines_read(&p), 3.0), "{s}");
    // And the new file keeps being followed.
    append(&p, decode(2, 4, 0).as_bytes());
    let s = e.scrape_until(10, |s| has(s, &lines_read(&p), 4.0));
    assert!(has(&s, &lines_read(&p), 4.0), "{s}");
}

#[test]
fn copytruncate_and_delete_recreate_are_followed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ct.log");
    append(&p, decode(0, 1, 0).as_bytes());
    append(&p, decode(0, 2, 0).as_bytes());
    let mut e = follow(&p);
    let log = e.log_lines();
    e.scrape_until(10, |s| has(s, &running("ct", 0), 2.0));
    // copytruncate: copy away, truncate in place, the writer goes on at offset 0.
    std::fs::copy(&p, dir.path().join("ct.log.1")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&p)
        .unwrap();
    append(&p, decode(0, 5, 0).as_bytes());
    let s = e.scrape_until(10, |s| has(s, &lines_read(&p), 3.0));
    assert!(has(&s, &running("ct", 0), 5.0), "{s}");
    assert!(has(&s, &lines_read(&p), 3.0), "{s}");
    // Delete, then re-create.
    std::fs::remove_file(&p).unwrap();
    // Re-created only after the follower has seen the path empty.
    wait_log(&log, "the file was deleted; still reading it", 10);
    append(&p, decode(0, 6, 0).as_bytes());
    let s = e.scrape_until(10, |s| has(s, &lines_read(&p), 4.0));
    assert!(has(&s, &running("ct", 0), 6.0), "{s}");
    assert!(has(&s, &lines_read(&p), 4.0), "{s}");
}

#[test]
fn a_file_that_appears_later_is_picked_up() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("later.log");
    let e = follow(&p);
    let src = format!("{{source=\"{}\"}}", p.display());
    let s = e.scrape_until(10, |s| {
        has(s, &format!("sglang_log_exporter_source_up{src}"), 0.0)
    });
    assert!(
        has(&s, &format!("sglang_log_exporter_source_up{src}"), 0.0),
        "{s}"
    );
    assert!(
        has(
            &s,
            &format!("sglang_log_exporter_read_errors_total{src}"),
            1.0
        ),
        "{s}"
    );
    append(&p, decode(0, 4, 0).as_bytes());
    let s = e.scrape_until(10, |s| has(s, &running("later", 0), 4.0));
    assert!(has(&s, &running("later", 0), 4.0), "{s}");
    assert!(
        has(&s, &format!("sglang_log_exporter_source_up{src}"), 1.0),
        "{s}"
    );
}

#[test]
fn live_gauges_read_zero_after_idle_after() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("idle.log");
    append(&p, b"");
    // 3 s: a scrape shows the state of up to 0.25 s ago (the exposition is re-encoded at most
    // four times a second), and a loaded CI machine adds its delays; the busy value must be
    // seen before the rank turns idle.
    let e = Exporter::start(&["--idle-after", "3s", p.to_str().unwrap()]);
    append(&p, decode(0, 5, 2).as_bytes());
    let idle = format!("sglang_idle{}", rank("idle", 0));
    let s = e.scrape_until(10, |s| has(s, &running("idle", 0), 5.0));
    assert!(has(&s, &idle, 0.0), "{s}");
    let s = e.scrape_until(10, |s| has(s, &idle, 1.0));
    assert!(has(&s, &idle, 1.0), "{s}");
    assert!(has(&s, &running("idle", 0), 0.0), "{s}");
    assert!(
        has(
            &s,
            &format!("sglang:num_queue_reqs{}", rank("idle", 0)),
            0.0
        ),
        "{s}"
    );
    // The graph flag is a property of the last batch, not activity: kept.
    assert!(
        has(&s, &format!("sglang:is_cuda_graph{}", rank("idle", 0)), 1.0),
        "{s}"
    );
}

#[test]
fn http_endpoint_content_type_landing_page_and_404() {
    let e = Exporter::start(&[sample("single-gpu-2025.log").to_str().unwrap()]);
    e.scrape_until(10, |s| s.contains("sglang:num_running_reqs{"));
    let (code, ct, body) = e.get("/metrics");
    assert_eq!(code, 200);
    assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
    assert!(
        body.contains("# TYPE sglang:num_running_reqs gauge"),
        "{body}"
    );
    // `/` is the live page (tests/it/livepage.rs renders it): its links are relative.
    let (code, ct, body) = e.get("/");
    assert_eq!((code, ct.as_str()), (200, "text/html; charset=utf-8"));
    assert!(
        body.contains("<a id=\"metrics-link\" href=\"metrics\">Metrics</a>"),
        "{body}"
    );
    assert_eq!(e.get("/nope").0, 404);
}

#[test]
fn promtool_accepts_the_exposition_except_the_colon_names() {
    let args: Vec<String> = [
        "pd-decode-session.log",
        "prefill-session.log",
        "single-gpu-2025.log",
        "sglang-variants.log",
    ]
    .iter()
    .map(|f| sample(f).display().to_string())
    .collect();
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let e = Exporter::start(&refs);
    // Every file read to its end.
    let body = e.scrape_until(30, |s| {
        args.iter().all(|a| {
            let n = std::fs::read_to_string(a).unwrap().lines().count() as f64;
            crate::common::value(
                s,
                &format!("sglang_log_exporter_lines_read_total{{source=\"{a}\"}}"),
            ) == Some(n)
        })
    });
    let out = run_with_input(
        Command::new("promtool").args(["check", "metrics"]),
        body.as_bytes(),
        "promtool (Debian package prometheus)",
    );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The lint messages expected, exactly: SGLang's own names (`sglang:*`, kept for its
    // dashboards) contain `:`, and its GB gauges abbreviate the unit. Nothing else.
    let mut want: Vec<String> = Vec::new();
    let names: std::collections::BTreeSet<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split(' ').next())
        .filter(|n| n.starts_with("sglang:"))
        .collect();
    for n in &names {
        want.push(format!("{n} metric names should not contain ':'"));
        if n.ends_with("_gb") {
            want.push(format!(
                "{n} metric names should not contain abbreviated units"
            ));
        }
    }
    let mut got: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    got.sort();
    want.sort();
    // The same families as `--once` of the same files.
    let mut once_args = vec!["--gpu.disable"];
    once_args.extend(refs.iter().copied());
    let once = crate::common::once(&once_args);
    let once_names: std::collections::BTreeSet<&str> = once
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE sglang:"))
        .filter_map(|l| l.split(' ').next())
        .collect();
    assert_eq!(names.len(), once_names.len(), "{body}");
    assert_eq!(got, want);
}

#[test]
fn stdin_json_journal_lines_and_serving_after_eof() {
    let port = free_port();
    let mut child = Command::new(bin())
        .args([
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
            "--idle-after",
            "1h",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The journal's own timestamp (µs) is the sample time.
    let now_us = jiff::Timestamp::now().as_microsecond() as u64 / 1_000_000 * 1_000_000;
    {
        let mut stdin = child.stdin.take().unwrap();
        let msg = decode(3, 11, 1);
        let json = serde_json_line(msg.trim_end(), "sglang-decode.service", now_us);
        stdin.write_all(json.as_bytes()).unwrap();
        // Plain lines on stdin work too, under the server name `stdin`.
        stdin.write_all(decode(0, 2, 0).as_bytes()).unwrap();
    } // EOF
    let e = Exporter::tapped(child, port);
    e.wait_ready();
    let s = e.scrape_until(10, |s| has(s, &running("stdin", 0), 2.0));
    // The unit's name suggests decode, but its decode line has none of a PD decode server's
    // fields: a unified server's.
    let l = "{server=\"sglang-decode\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"3\",moe_ep_rank=\"0\"}";
    assert!(has(&s, &format!("sglang:num_running_reqs{l}"), 11.0), "{s}");
    assert!(
        has(
            &s,
            &format!("sglang_last_stats_timestamp_seconds{l}"),
            (now_us / 1_000_000) as f64
        ),
        "{s}"
    );
    assert!(has(&s, &running("stdin", 0), 2.0), "{s}");
}

fn serde_json_line(msg: &str, unit: &str, realtime_us: u64) -> String {
    let esc = msg.replace('\\', "\\\\").replace('"', "\\\"");
    format!("{{\"MESSAGE\":\"{esc}\",\"_SYSTEMD_UNIT\":\"{unit}\",\"__REALTIME_TIMESTAMP\":\"{realtime_us}\"}}\n")
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let mut e = Exporter::start(&[sample("single-gpu-2025.log").to_str().unwrap()]);
    let pid = e.child.id();
    let st = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if let Some(status) = e.child.try_wait().unwrap() {
            assert_eq!(status.code(), Some(0));
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no exit after SIGTERM"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A seeded random sequence of appends, rename rotations, copytruncates and delete/re-creates
/// against the running binary; after every step the exporter must have read exactly the lines
/// written so far, and the last one's value must show.
#[test]
fn random_rotation_model() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("model.log");
    append(&p, b"");
    let e = follow(&p);
    let mut seed: u64 = 0x5eed_1234;
    let mut rnd = |n: u64| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) % n
    };
    let mut written = 0u32;
    let mut rotations = 0;
    // The last value written to a rotated-away file (as rank TP1, so the order in which the
    // two files are read cannot hide it behind TP0's newer line).
    let mut in_rotated = None;
    for step in 0..40 {
        match rnd(6) {
            0 => {
                rotations += 1;
                let old = dir.path().join(format!("model.log.{rotations}"));
                std::fs::rename(&p, &old).unwrap();
                // The writer has not reopened yet: its next line goes to the renamed file,
                // which is read until its grace period ends.
                written += 1;
                append(&old, decode(1, written, step).as_bytes());
                in_rotated = Some(written);
                append(&p, b"");
            }
            1 => {
                std::fs::OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(&p)
                    .unwrap();
            }
            2 => {
                std::fs::remove_file(&p).unwrap();
                append(&p, b"");
            }
            _ => {}
        }
        let burst = 1 + rnd(3) as u32;
        for _ in 0..burst {
            written += 1;
            append(&p, decode(0, written, step).as_bytes());
        }
        let s = e.scrape_until(10, |s| has(s, &lines_read(&p), written as f64));
        assert!(has(&s, &lines_read(&p), written as f64), "step {step}: {s}");
        assert!(
            has(&s, &running("model", 0), written as f64),
            "step {step}: {s}"
        );
        if let Some(v) = in_rotated {
            assert!(
                has(&s, &running("model", 1), f64::from(v)),
                "step {step}: {s}"
            );
        }
    }
}

/// logrotate's `create` without a signal: the writer keeps writing to the renamed file until it
/// reopens its log. Those lines are read for the grace period, after the switch to the new file.
#[test]
fn lines_written_to_the_renamed_file_after_the_switch_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("late.log");
    append(&p, decode(0, 1, 0).as_bytes());
    let e = follow(&p);
    e.scrape_until(10, |s| has(s, &lines_read(&p), 1.0));
    let old = dir.path().join("late.log.1");
    std::fs::rename(&p, &old).unwrap();
    append(&p, decode(1, 2, 0).as_bytes());
    // The follower has switched to the new file...
    let s = e.scrape_until(10, |s| has(s, &lines_read(&p), 2.0));
    assert!(has(&s, &running("late", 1), 2.0), "{s}");
    // ...and still reads what the writer adds to the old one.
    for n in 3..6 {
        append(&old, decode(0, n, 0).as_bytes());
        e.scrape_until(10, |s| {
            has(s, &lines_read(&p), f64::from(n)) && has(s, &running("late", 0), f64::from(n))
        });
    }
    let s = e.scrape_until(10, |s| has(s, &lines_read(&p), 5.0));
    assert!(has(&s, &running("late", 0), 5.0), "{s}");
    assert!(has(&s, &lines_read(&p), 5.0), "{s}");
}

/// A client that connects and sends nothing (or half a request head) is cut off after the
/// head-read deadline (30 s), so such clients cannot pile up and exhaust file descriptors.
#[test]
fn idle_connections_are_closed() {
    use std::io::Read;
    let e = Exporter::start(&[
        "--gpu.disable",
        sample("single-gpu-2025.log").to_str().unwrap(),
    ]);
    let mut idle = std::net::TcpStream::connect(("127.0.0.1", e.port)).unwrap();
    let mut half = std::net::TcpStream::connect(("127.0.0.1", e.port)).unwrap();
    half.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    for s in [&mut idle, &mut half] {
        s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        let started = std::time::Instant::now();
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "{:?}", String::from_utf8_lossy(&buf[..n]));
        assert!(started.elapsed() < std::time::Duration::from_secs(45));
    }
    // Scrapes still work.
    assert_eq!(e.get("/metrics").0, 200);
}

/// A rotated-away file renamed back onto the path is taken up where it was: never read again
/// from its start, never read twice.
#[test]
fn a_file_renamed_back_is_not_read_twice() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("back.log");
    for n in 1..=3 {
        append(&p, decode(0, n, 0).as_bytes());
    }
    let mut e = Exporter::start(&["--deleted-file-grace", "30s", p.to_str().unwrap()]);
    let log = e.log_lines();
    e.scrape_until(10, |s| has(s, &lines_read(&p), 3.0));
    let away = dir.path().join("back.log.x");
    std::fs::rename(&p, &away).unwrap();
    append(&p, decode(1, 1, 0).as_bytes());
    e.scrape_until(10, |s| has(s, &lines_read(&p), 4.0));
    wait_log(&log, "the file was rotated; following the new one", 10);
    // Back over the new file; appended to once the follower has switched to it.
    std::fs::rename(&away, &p).unwrap();
    wait_log(&log, "the file was rotated; following the new one", 10);
    append(&p, decode(0, 9, 0).as_bytes());
    // The source's counters are handed over after the burst the line came in: wait for both.
    let s = e.scrape_until(10, |s| {
        has(s, &running("back", 0), 9.0) && has(s, &lines_read(&p), 5.0)
    });
    let dp0_lines = format!("sglang_decode_stats_lines_total{}", rank("back", 0));
    assert!(has(&s, &dp0_lines, 4.0), "{s}");
    // Nothing more is read later: the next line appended is the only one after it.
    append(&p, decode(1, 2, 0).as_bytes());
    let s = e.scrape_until(10, |s| {
        has(s, &running("back", 1), 2.0) && has(s, &lines_read(&p), 6.0)
    });
    assert!(has(&s, &dp0_lines, 4.0), "{s}");
    assert!(has(&s, &running("back", 0), 9.0), "{s}");
}
