//! Regression tests from a hostile-input session: each input once showed a hang, a wrong value,
//! a silent merge or a bad message.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{
    append, bin, fd_targets, once, run, run_with_input, sample, samples, value, wait_log, Exporter,
};
use crate::follow::{decode, has, lines_read, rank, running};

fn get(expo: &str, series: &str) -> f64 {
    value(expo, series).unwrap_or_else(|| panic!("no series {series} in:\n{expo}"))
}

#[test]
fn once_reads_a_fifo_to_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read(sample("single-gpu-2025.log")).unwrap();
    let (fifo, writer) = crate::common::fifo_fed(dir.path(), "pipe.log", text);
    let expo = once(&["--gpu.disable", fifo.to_str().unwrap()]);
    writer.join().unwrap();
    let src = format!("{{source=\"{}\"}}", fifo.display());
    assert_eq!(
        get(&expo, &format!("sglang_log_exporter_lines_read_total{src}")),
        517.0
    );
    assert_eq!(
        get(
            &expo,
            &format!("sglang_log_exporter_read_errors_total{src}")
        ),
        0.0
    );
}

#[test]
fn two_files_with_one_stem_are_refused_not_merged() {
    let dir = tempfile::tempdir().unwrap();
    for d in ["a", "b"] {
        std::fs::create_dir(dir.path().join(d)).unwrap();
        std::fs::write(dir.path().join(d).join("sglang.log"), "").unwrap();
    }
    let a = dir.path().join("a/sglang.log");
    let b = dir.path().join("b/sglang.log");
    let out = run(&["--once", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("would be server \"sglang\"") && err.contains("NAME=PATH"),
        "{err}"
    );
    // backfill the same (it would write one merged series with a fake counter reset).
    let om = dir.path().join("out.om");
    let out = run(&[
        "backfill",
        "-o",
        om.to_str().unwrap(),
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("NAME=PATH"));
    // Named apart, both are served.
    let expo = once(&[&format!("a={}", a.display()), &format!("b={}", b.display())]);
    assert_eq!(
        samples(&expo, "sglang_log_exporter_lines_read_total").len(),
        2
    );
}

#[test]
fn values_that_are_not_sglang_numbers_are_counted_not_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("nums.log");
    std::fs::write(
        &p,
        b"[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 1e309, #token: 0x10, token usage: 35abc, gen throughput (token/s): 3\x006, #queue-req: nan, cuda graph: True\n\
          [2026-06-03 10:00:00 TP4294967296] Decode batch, #running-req: 9, #queue-req: 9\n\
          [2026-06-03 10:00:00 DP18446744073709551616 TP1] Decode batch, #running-req: 9, #queue-req: 9\n",
    )
    .unwrap();
    let expo = once(&[
        "--gpu.disable",
        "--idle-after",
        "100000h",
        p.to_str().unwrap(),
    ]);
    let src = format!("{{source=\"{}\"}}", p.display());
    assert_eq!(
        get(
            &expo,
            &format!("sglang_log_exporter_field_value_errors_total{src}")
        ),
        4.0
    );
    // Only the flag was a valid value on the first line; `#queue-req: nan` is SGLang's "no
    // value": withdrawn too, but not counted as an error.
    for m in [
        "sglang:num_running_reqs",
        "sglang:num_used_tokens",
        "sglang:token_usage",
        "sglang:gen_throughput",
        "sglang:num_queue_reqs",
    ] {
        assert!(samples(&expo, m).is_empty(), "{m}: {expo}");
    }
    assert_eq!(samples(&expo, "sglang:is_cuda_graph").len(), 1);
    // Rank numbers that do not fit are not merged into a rank without that tag.
    assert_eq!(
        get(
            &expo,
            &format!("sglang_log_exporter_lines_unmatched_total{src}")
        ),
        2.0
    );
}

#[test]
fn an_implausible_journal_timestamp_does_not_make_every_rank_idle() {
    let line = |tp: u32, ts: &str| {
        format!("{{\"MESSAGE\":\"[2026-06-03 10:00:00 TP{tp}] Decode batch, #running-req: 5, #queue-req: 0\",\"_SYSTEMD_UNIT\":\"u.service\",\"__REALTIME_TIMESTAMP\":\"{ts}\"}}\n")
    };
    let input = format!(
        "{}{}{}",
        line(0, "1780480800000000"),
        line(1, "100000000000000000000000"),
        line(2, "-5")
    );
    let out = run_with_input(
        Command::new(bin()).args(["--once", "--gpu.disable", "--timezone", "UTC", "-"]),
        input.as_bytes(),
        "the exporter",
    );
    let expo = String::from_utf8(out.stdout).unwrap();
    let l = |tp: u32| {
        format!("{{server=\"u\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\"}}")
    };
    // The bogus times fall back to the prefix time: every rank at 10:00:00, none idle.
    for tp in 0..3 {
        assert_eq!(
            get(&expo, &format!("sglang:num_running_reqs{}", l(tp))),
            5.0,
            "TP{tp}"
        );
        assert_eq!(
            get(
                &expo,
                &format!("sglang_last_stats_timestamp_seconds{}", l(tp))
            ),
            1780480800.0
        );
    }
}

#[test]
fn bad_option_values_are_refused() {
    let log = sample("single-gpu-2025.log");
    let log = log.to_str().unwrap();
    let out = run(&["--once", "--log.level", "loud", log]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid value 'loud'"));
    let out = run(&["--once", "--poll-interval", "0s", log]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--poll-interval must be at least 10ms"));
    // A host name is a host: it resolves.
    let port = crate::common::free_port();
    let child = Command::new(bin())
        .args([
            "--web.listen-address",
            &format!("localhost:{port}"),
            "--gpu.disable",
            log,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _guard = Exporter::tapped(child, port);
    let url = format!("http://localhost:{port}/");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match ureq::get(&url).timeout(Duration::from_secs(5)).call() {
            Ok(r) => {
                assert_eq!(r.status(), 200);
                break;
            }
            Err(e) => assert!(Instant::now() < deadline, "{url}: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn check_into_a_closed_pipe_exits_quietly() {
    let mut child = Command::new(bin())
        .args([
            "check",
            sample("sglang-variants.log").to_str().unwrap(),
            sample("pd-decode-session.log").to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bytes_read_include_skipped_oversized_lines_and_stdin_reports_up() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.log");
    let mut data = vec![b'x'; 3 << 20];
    data.push(b'\n');
    data.extend_from_slice(b"ok\n");
    std::fs::write(&p, &data).unwrap();
    let expo = once(&["--gpu.disable", p.to_str().unwrap()]);
    let src = format!("{{source=\"{}\"}}", p.display());
    assert_eq!(
        get(&expo, &format!("sglang_log_exporter_bytes_read_total{src}")),
        data.len() as f64
    );
    assert_eq!(
        get(
            &expo,
            &format!("sglang_log_exporter_lines_oversized_total{src}")
        ),
        1.0
    );
    // stdin: up while read, down after its end (a dead `journalctl -f` pipe).
    let out = run_with_input(
        Command::new(bin()).args(["--once", "--gpu.disable", "-"]),
        b"a\nb\n",
        "the exporter",
    );
    let expo = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        get(&expo, "sglang_log_exporter_source_up{source=\"-\"}"),
        0.0
    );
    assert_eq!(
        get(&expo, "sglang_log_exporter_bytes_read_total{source=\"-\"}"),
        4.0
    );
}

/// The writer's own descriptor on a log that is deleted or renamed away under it: what it
/// writes during `--deleted-file-grace` is still read; after the grace the exporter has closed
/// the file (no descriptor of it left in `/proc/<pid>/fd`) and what is written then is lost.
fn writer(p: &std::path::Path) -> std::fs::File {
    std::fs::OpenOptions::new().append(true).open(p).unwrap()
}

/// Whether the process holds a descriptor whose target names `path` (deleted or not).
fn holds(pid: u32, path: &std::path::Path) -> bool {
    let p = path.display().to_string();
    fd_targets(pid)
        .iter()
        .any(|t| t == &p || *t == format!("{p} (deleted)"))
}

/// A file `name` holding one decode line of DP0, followed with a 3 s deleted-file grace; the
/// exporter's log lines as they come.
fn followed_with_grace(
    name: &str,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    Exporter,
    std::sync::mpsc::Receiver<String>,
) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    append(&p, decode(0, 1, 0).as_bytes());
    let mut e = Exporter::start(&[
        "--gpu.disable",
        "--idle-after",
        "1h",
        "--deleted-file-grace",
        "3s",
        p.to_str().unwrap(),
    ]);
    let log = e.log_lines();
    (dir, p, e, log)
}

#[test]
fn a_deleted_file_is_read_during_the_grace_period_then_closed() {
    use std::io::Write;
    let (_dir, p, e, log) = followed_with_grace("gone.log");
    let pid = e.child.id();
    let lr = lines_read(&p);
    let up = format!(
        "sglang_log_exporter_source_up{{source=\"{}\"}}",
        p.display()
    );
    e.scrape_until(10, |s| has(s, &lr, 1.0));
    let mut w = writer(&p);
    std::fs::remove_file(&p).unwrap();
    wait_log(&log, "the file was deleted; still reading it", 10);
    // Written to the deleted file after the exporter saw it gone: still read, whole.
    w.write_all(decode(0, 7, 3).as_bytes()).unwrap();
    let s = e.scrape_until(10, |s| has(s, &lr, 2.0));
    assert_eq!(get(&s, &running("gone", 0)), 7.0);
    assert_eq!(
        get(&s, &format!("sglang:num_queue_reqs{}", rank("gone", 0))),
        3.0
    );
    assert_eq!(get(&s, &up), 1.0);
    wait_log(
        &log,
        "the file was deleted and no new one appeared; closed it",
        10,
    );
    assert!(!holds(pid, &p), "still open: {:?}", fd_targets(pid));
    let s = e.scrape_until(10, |s| has(s, &up, 0.0));
    assert_eq!(get(&s, &lr), 2.0);
    // Written after the grace: lost with the file. A new file at the path is read from its start.
    w.write_all(decode(0, 8, 0).as_bytes()).unwrap();
    drop(w);
    append(&p, decode(0, 9, 0).as_bytes());
    let s = e.scrape_until(10, |s| has(s, &running("gone", 0), 9.0));
    assert_eq!(get(&s, &lr), 3.0);
    assert_eq!(get(&s, &up), 1.0);
}

#[test]
fn a_renamed_away_file_is_read_during_the_grace_period_then_closed() {
    use std::io::Write;
    let (dir, p, e, log) = followed_with_grace("rot.log");
    let old = dir.path().join("rot.log.1");
    let pid = e.child.id();
    let lr = lines_read(&p);
    e.scrape_until(10, |s| has(s, &lr, 1.0));
    let mut w = writer(&p);
    std::fs::rename(&p, &old).unwrap();
    append(&p, decode(1, 2, 0).as_bytes());
    // The new file is read: the follower has switched to it and set the old one aside.
    e.scrape_until(10, |s| has(s, &running("rot", 1), 2.0));
    w.write_all(decode(0, 5, 0).as_bytes()).unwrap();
    let s = e.scrape_until(10, |s| has(s, &running("rot", 0), 5.0));
    assert_eq!(get(&s, &lr), 3.0);
    assert!(holds(pid, &old), "not open: {:?}", fd_targets(pid));
    wait_log(
        &log,
        "closed a file rotated away from this path: its grace period is over",
        10,
    );
    assert!(!holds(pid, &old), "still open: {:?}", fd_targets(pid));
    assert!(
        holds(pid, &p),
        "the new file is not open: {:?}",
        fd_targets(pid)
    );
    // Written to the old file after the grace: not read. The line after it in the new file is.
    w.write_all(decode(0, 6, 0).as_bytes()).unwrap();
    append(&p, decode(1, 3, 0).as_bytes());
    let s = e.scrape_until(10, |s| has(s, &running("rot", 1), 3.0));
    assert_eq!(get(&s, &lr), 4.0);
    assert_eq!(get(&s, &running("rot", 0)), 5.0);
}
