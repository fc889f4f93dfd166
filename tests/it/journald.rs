//! `--journal-unit`: real journal files written by `systemd-journal-remote`, read by the real
//! journalctl the exporter supervises; and the shipped systemd units checked by
//! `systemd-analyze`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{once, run_with_input, samples, value, Exporter};

const JOURNAL_REMOTE: &str = "/lib/systemd/systemd-journal-remote";
pub const BOOT: &str = "6f1c2a9e4b7d4e0fa3c85d1e2b9f7a64";
/// The decode unit's invocation in the sample export.
pub const INVOCATION: &str = "0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f";
/// An earlier invocation of the same unit, which start-up must skip.
const OLD_INVOCATION: &str = "00000000000000000000000000000bad";
/// The decode unit's requests answered 200 (15 in the sample's current invocation).
pub const REQUESTS: &str = r#"sglang_access_log_requests_total{server="sglang-decode",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",method="POST",path="/v1/chat/completions",status="200"}"#;
pub const SOURCE: &str = r#"{source="journald:sglang-decode.service"}"#;

/// One entry in journal export format. A `MESSAGE` that is not printable UTF-8 is written in
/// the binary form (name, little-endian 64-bit length, bytes, newline).
pub fn entry(unit: &str, invocation: &str, realtime_us: u64, message: &[u8]) -> Vec<u8> {
    let mut e = format!(
        "__REALTIME_TIMESTAMP={realtime_us}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID={BOOT}\n\
         _HOSTNAME=gpu-node-1\n_TRANSPORT=stdout\nPRIORITY=6\nSYSLOG_IDENTIFIER=python3\n\
         _PID=48213\n_SYSTEMD_UNIT={unit}\n_SYSTEMD_INVOCATION_ID={invocation}\n",
        realtime_us - 1_770_000_000_000_000
    )
    .into_bytes();
    let printable = std::str::from_utf8(message).is_ok_and(|s| !s.chars().any(|c| c.is_control()));
    if printable {
        e.extend_from_slice(b"MESSAGE=");
        e.extend_from_slice(message);
    } else {
        e.extend_from_slice(b"MESSAGE\n");
        e.extend_from_slice(&(message.len() as u64).to_le_bytes());
        e.extend_from_slice(message);
    }
    e.extend_from_slice(b"\n\n");
    e
}

/// Appends export-format entries to the journal file `path` (created when missing).
pub fn write_journal(path: &Path, export: &[u8]) {
    let out = run_with_input(
        Command::new(JOURNAL_REMOTE)
            .arg(format!("--output={}", path.display()))
            .arg("-"),
        export,
        "systemd-journal-remote (Debian package systemd-journal-remote)",
    );
    assert!(
        out.status.success(),
        "systemd-journal-remote: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn decode_line(time: &str, dp: u32, running: u32) -> String {
    format!(
        "[2026-06-03 {time} DP{dp} TP{dp}] Decode batch, #running-req: {running}, #token: 700000, \
         token usage: 0.89, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, \
         #retracted-req: 0, cuda graph: True, gen throughput (token/s): 1000.00, #queue-req: 0"
    )
}

/// A journal holding an older invocation of the decode unit (3 requests, a stats line), then
/// the sample export (both units' current invocations).
pub struct Journal {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Journal {
    pub fn new() -> Journal {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("test.journal");
        let mut old = Vec::new();
        for i in 0..3 {
            let msg = format!(
                "[2026-06-03 07:00:0{i}] INFO:     127.0.0.1:5000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK"
            );
            old.extend(entry(
                "sglang-decode.service",
                OLD_INVOCATION,
                1_780_470_000_000_000 + i,
                msg.as_bytes(),
            ));
        }
        old.extend(entry(
            "sglang-decode.service",
            OLD_INVOCATION,
            1_780_470_010_000_000,
            decode_line("07:00:10", 1, 99).as_bytes(),
        ));
        write_journal(&path, &old);
        let sample = std::fs::read(crate::common::sample("journal-export.txt")).expect("sample");
        write_journal(&path, &sample);
        Journal { _dir: dir, path }
    }

    pub fn append(&self, export: &[u8]) {
        write_journal(&self.path, export);
    }
}

pub fn rank(dp: u32) -> String {
    format!(
        r#"{{server="sglang-decode",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",dp_rank="{dp}",pp_rank="0",tp_rank="{dp}",moe_ep_rank="0"}}"#
    )
}

fn get(text: &str, series: &str) -> Option<f64> {
    value(text, series)
}

/// The state after reading the decode unit's current invocation of the sample.
fn assert_sample_state(m: &str, lines: f64) {
    for (dp, running) in [(0, 55.0), (1, 56.0), (2, 57.0), (3, 54.0)] {
        assert_eq!(
            get(m, &format!("sglang:num_running_reqs{}", rank(dp))),
            Some(running),
            "{m}"
        );
        assert_eq!(
            get(m, &format!("sglang:max_total_num_tokens{}", rank(dp))),
            Some(786432.0)
        );
    }
    assert_eq!(
        get(m, &format!("sglang:token_usage{}", rank(0))),
        Some(0.97)
    );
    // The time is the entry's __REALTIME_TIMESTAMP (µs), not the SGLang prefix (whole seconds).
    assert_eq!(
        get(
            m,
            &format!("sglang_last_stats_timestamp_seconds{}", rank(0))
        ),
        Some(1780481270.372041)
    );
    assert_eq!(
        get(m, &format!("sglang_retractions_total{}", rank(3))),
        Some(1.0)
    );
    assert_eq!(
        get(
            m,
            r#"sglang_server_info{server="sglang-decode",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",tp_size="4",dp_size="4",pp_size="1",url="http://gpu-node-1:30001"}"#
        ),
        Some(1.0)
    );
    // 15 requests of the current invocation; the older invocation's 3 are not read.
    assert_eq!(get(m, REQUESTS), Some(15.0));
    assert_eq!(
        get(m, &format!("sglang_log_exporter_lines_read_total{SOURCE}")),
        Some(lines)
    );
    assert!(
        !m.contains("sglang-prefill"),
        "another unit's entries leaked:\n{m}"
    );
    assert!(!m.contains(r#"server="init.scope""#));
}

#[test]
fn once_reads_the_current_invocation() {
    let j = Journal::new();
    let path = j.path.display().to_string();
    let m = once(&["--journal-unit", "sglang-decode", "--journal-file", &path]);
    assert_sample_state(&m, 138.0);
    assert_eq!(
        samples(&m, "sglang_log_exporter_journalctl_restarts_total"),
        Vec::<&str>::new()
    );
}

#[test]
fn once_with_a_unit_the_journal_does_not_have_says_so() {
    let j = Journal::new();
    let path = j.path.display().to_string();
    let out = crate::common::run(&[
        "--once",
        "--journal-unit",
        "nosuch",
        "--journal-file",
        &path,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: nosuch.service: the journal has no entries of this unit"),
        "{err}"
    );
}

#[test]
fn bad_journals_and_arguments_fail_clearly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.journal");
    std::fs::write(&bad, b"not a journal").expect("write");
    let bad = bad.display().to_string();
    let out = crate::common::run(&[
        "--once",
        "--journal-unit",
        "sglang-decode",
        "--journal-file",
        &bad,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error: sglang-decode.service: ") && err.contains("Failed to open files"),
        "{err}"
    );
    let out = crate::common::run(&[
        "--once",
        "--journal-unit",
        "x",
        "--journalctl",
        "/nonexistent/journalctl",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--journalctl /nonexistent/journalctl: not found"));
    let out = crate::common::run(&["--once", "--journal-unit", "bad unit"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a systemd unit name"));
    let out = crate::common::run(&["--once", "--journal-file", &bad]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("need --journal-unit"));

    // Live, a failing journalctl is retried with back-off, counted, and warned about once.
    let mut e = Exporter::start(&["--journal-unit", "sglang-decode", "--journal-file", &bad]);
    let errors = format!("sglang_log_exporter_read_errors_total{SOURCE}");
    let m = e.scrape_until(30, |m| get(m, &errors).is_some_and(|v| v >= 2.0));
    assert!(get(&m, &errors).is_some_and(|v| v >= 2.0), "{m}");
    assert_eq!(
        get(&m, &format!("sglang_log_exporter_source_up{SOURCE}")),
        Some(0.0)
    );
    e.child.kill().expect("kill");
    let _ = e.child.wait();
    let log = e.stderr_to_end();
    assert_eq!(log.matches("Failed to open files").count(), 1, "{log}");
}

pub fn start(j: &Journal) -> Exporter {
    start_with(j, &[])
}

/// [`start`] with more arguments.
pub fn start_with(j: &Journal, more: &[&str]) -> Exporter {
    let path = j.path.display().to_string();
    // Entries are from June 2026: keep the idle policy from zeroing their gauges.
    let mut args = vec![
        "--journal-unit",
        "sglang-decode",
        "--journal-file",
        &path,
        "--idle-after",
        "1000000000",
    ];
    args.extend_from_slice(more);
    Exporter::start(&args)
}

pub fn lines_read(m: &str) -> Option<f64> {
    get(m, &format!("sglang_log_exporter_lines_read_total{SOURCE}"))
}

#[test]
fn follows_appended_entries_and_skips_other_units() {
    let j = Journal::new();
    let e = start(&j);
    let m = e.scrape_until(30, |m| lines_read(m) == Some(138.0));
    assert_sample_state(&m, 138.0);
    assert_eq!(
        get(&m, &format!("sglang_log_exporter_source_up{SOURCE}")),
        Some(1.0)
    );

    // A plain MESSAGE, another unit's entry, and a MESSAGE journalctl prints as a byte array
    // (it ends in an ANSI reset, which is not printable).
    let mut more = entry(
        "sglang-decode.service",
        INVOCATION,
        1_780_481_280_000_000,
        decode_line("10:08:00", 0, 42).as_bytes(),
    );
    more.extend(entry(
        "sglang-prefill.service",
        "1a2b3c4d5e6f708192a3b4c5d6e7f809",
        1_780_481_280_500_000,
        decode_line("10:08:00", 0, 77).as_bytes(),
    ));
    let mut colored = decode_line("10:08:01", 1, 43).into_bytes();
    colored.extend_from_slice(b"\x1b[0m");
    more.extend(entry(
        "sglang-decode.service",
        INVOCATION,
        1_780_481_281_000_000,
        &colored,
    ));
    j.append(&more);

    // Precondition: journalctl really prints that MESSAGE as an array of bytes.
    let raw = Command::new("journalctl")
        .args([
            "--output=json",
            "--all",
            "--lines=1",
            "--unit=sglang-decode",
        ])
        .arg(format!("--file={}", j.path.display()))
        .output()
        .expect("journalctl");
    assert!(String::from_utf8_lossy(&raw.stdout).contains(r#""MESSAGE":[91,50,48"#));

    let m = e.scrape_until(10, |m| {
        lines_read(m) == Some(140.0)
            && get(m, &format!("sglang:num_running_reqs{}", rank(1))) == Some(43.0)
    });
    assert_eq!(
        get(&m, &format!("sglang:num_running_reqs{}", rank(0))),
        Some(42.0),
        "{m}"
    );
    assert_eq!(
        get(&m, &format!("sglang:num_running_reqs{}", rank(1))),
        Some(43.0),
        "{m}"
    );
    assert_eq!(
        get(
            &m,
            &format!("sglang_last_stats_timestamp_seconds{}", rank(1))
        ),
        Some(1780481281.0)
    );
    assert_eq!(lines_read(&m), Some(140.0));
    assert!(!m.contains("sglang-prefill"), "{m}");
    assert!(
        !m.contains(" 77\n"),
        "the prefill unit's line was applied:\n{m}"
    );
}

/// The pids of `pid`'s child processes named `comm`.
pub fn children_named(pid: u32, comm: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let kids = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        for k in kids
            .split_whitespace()
            .filter_map(|k| k.parse::<u32>().ok())
        {
            let c = std::fs::read_to_string(format!("/proc/{k}/comm")).unwrap_or_default();
            if c.trim() == comm {
                out.push(k);
            }
        }
    }
    out
}

#[test]
fn a_killed_journalctl_is_restarted_from_its_cursor() {
    let j = Journal::new();
    let e = start(&j);
    let m = e.scrape_until(30, |m| lines_read(m) == Some(138.0));
    assert_sample_state(&m, 138.0);
    let decode_lines =
        |m: &str, dp| get(m, &format!("sglang_decode_stats_lines_total{}", rank(dp)));
    assert_eq!(decode_lines(&m, 0), Some(27.0));

    let deadline = Instant::now() + Duration::from_secs(10);
    let kids = loop {
        let k = children_named(e.child.id(), "journalctl");
        if k.len() == 1 || Instant::now() > deadline {
            break k;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(kids.len(), 1, "one following journalctl child: {kids:?}");
    let killed = Command::new("kill")
        .args(["-KILL", &kids[0].to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    // Entries written while the child is dead or restarting: none may be lost or doubled.
    let mut more = Vec::new();
    for (i, running) in [31, 32, 33].into_iter().enumerate() {
        more.extend(entry(
            "sglang-decode.service",
            INVOCATION,
            1_780_481_290_000_000 + i as u64 * 1_000_000,
            decode_line(&format!("10:08:1{i}"), 0, running).as_bytes(),
        ));
    }
    j.append(&more);

    let restarts = r#"sglang_log_exporter_journalctl_restarts_total{unit="sglang-decode.service"}"#;
    let m = e.scrape_until(30, |m| {
        lines_read(m) == Some(141.0) && get(m, restarts) == Some(1.0)
    });
    assert_eq!(get(&m, restarts), Some(1.0), "{m}");
    assert_eq!(lines_read(&m), Some(141.0), "{m}");
    assert_eq!(
        get(&m, &format!("sglang:num_running_reqs{}", rank(0))),
        Some(33.0)
    );
    assert_eq!(decode_lines(&m, 0), Some(30.0));
    assert_eq!(decode_lines(&m, 1), Some(20.0));
    assert_eq!(get(&m, REQUESTS), Some(15.0));
    assert_eq!(
        get(&m, &format!("sglang_log_exporter_source_up{SOURCE}")),
        Some(1.0)
    );
    let now = children_named(e.child.id(), "journalctl");
    assert_eq!(now.len(), 1);
    assert_ne!(now[0], kids[0]);
}

/// A temporary root holding the unit files, the systemd units they refer to and a stand-in
/// for `/usr/bin/sglang-log-exporter` (the packaged path), so `systemd-analyze verify` checks
/// ExecStart against a real executable without touching this host.
fn unit_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().expect("temp dir");
    let r = root.path();
    let units = r.join("etc/systemd/system");
    std::fs::create_dir_all(&units).expect("mkdir");
    std::fs::create_dir_all(r.join("usr/bin")).expect("mkdir");
    std::fs::copy(crate::common::bin(), r.join("usr/bin/sglang-log-exporter"))
        .expect("copy the binary");
    let sys = r.join("usr/lib/systemd/system");
    std::fs::create_dir_all(&sys).expect("mkdir");
    for d in std::fs::read_dir("/lib/systemd/system")
        .expect("/lib/systemd/system")
        .flatten()
    {
        let ft = d.file_type().expect("type");
        if ft.is_file() {
            std::fs::copy(d.path(), sys.join(d.file_name())).expect("copy a unit");
        }
    }
    let shipped = crate::common::root().join("systemd");
    std::fs::copy(
        shipped.join("sglang-log-exporter.service"),
        units.join("sglang-log-exporter.service"),
    )
    .expect("copy");
    std::fs::copy(
        shipped.join("sglang-log-exporter@.service"),
        units.join("sglang-log-exporter@sglang-decode.service"),
    )
    .expect("copy");
    root
}

const UNITS: [&str; 2] = [
    "sglang-log-exporter.service",
    "sglang-log-exporter@sglang-decode.service",
];

#[test]
fn units_verify() {
    let root = unit_root();
    for unit in UNITS {
        let out = Command::new("systemd-analyze")
            .arg("verify")
            .arg(format!("--root={}", root.path().display()))
            .arg(format!("/etc/systemd/system/{unit}"))
            .output()
            .expect("systemd-analyze");
        let err = String::from_utf8_lossy(&out.stderr);
        // Unknown keys are only warned about, so the output must be empty too.
        assert!(
            out.status.success() && err.trim().is_empty(),
            "{unit}: {err}"
        );
    }
    // The check can fail: without the binary, verify rejects ExecStart.
    std::fs::remove_file(root.path().join("usr/bin/sglang-log-exporter")).expect("rm");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", root.path().display()))
        .arg(format!("/etc/systemd/system/{}", UNITS[0]))
        .output()
        .expect("systemd-analyze");
    assert!(!out.status.success());
}

/// The exposure the README states ("`systemd-analyze security` exposure 1.6"), exactly: a
/// hardening line dropped from a unit moves it (the packaging check's bound is 2.0).
#[test]
fn units_security_exposure_is_the_readmes_1_6() {
    let root = unit_root();
    for unit in UNITS {
        let path = root.path().join("etc/systemd/system").join(unit);
        let (score, text) = crate::common::unit_exposure(&path);
        let score = score.unwrap_or_else(|| panic!("{unit}: no score: {text}"));
        println!("{unit}: systemd-analyze security exposure {score}");
        assert_eq!(
            score, 1.6,
            "{unit}: exposure {score}, the README says 1.6\n{text}"
        );
    }
}

/// The journal export format piped in (`journalctl -o export | sglang-log-exporter -`), as
/// real journalctl writes it from a real journal: each unit is its own server, the time is the
/// entry's `__REALTIME_TIMESTAMP`, and a binary `MESSAGE` (a newline, a colour code) is read
/// whole. The same values as reading the unit through `--journal-unit`.
#[test]
fn the_export_format_on_stdin_is_read_entry_by_entry() {
    let j = Journal::new();
    // A binary MESSAGE (colour codes, a newline inside: the text after it is not the line) and
    // a length whose first byte is a newline (10 bytes of message after the prefix's cut).
    let coloured = format!("\x1b[32m{}\x1b[0m", decode_line("10:07:51", 2, 61));
    let mut extra = entry(
        "sglang-decode.service",
        INVOCATION,
        1_780_481_271_000_000,
        coloured.as_bytes(),
    );
    extra.extend(entry(
        "sglang-decode.service",
        INVOCATION,
        1_780_481_271_500_000,
        b"0123456\n89",
    ));
    j.append(&extra);
    let export = Command::new("journalctl")
        .args(["-o", "export", "--file"])
        .arg(&j.path)
        .arg(format!("_SYSTEMD_INVOCATION_ID={INVOCATION}"))
        .arg("+")
        .arg("_SYSTEMD_UNIT=sglang-prefill.service")
        .output()
        .expect("journalctl");
    assert!(export.status.success());
    assert!(
        export.stdout.windows(8).any(|w| w == b"MESSAGE\n"),
        "journalctl wrote no binary field"
    );
    let mut cmd = Command::new(crate::common::bin());
    cmd.args(["--once", "--gpu.disable", "--timezone", "UTC", "-"]);
    let out = run_with_input(&mut cmd, &export.stdout, "the exporter");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = String::from_utf8(out.stdout).unwrap();
    for (dp, running) in [(0, 55.0), (1, 56.0), (2, 61.0), (3, 54.0)] {
        assert_eq!(
            get(&m, &format!("sglang:num_running_reqs{}", rank(dp))),
            Some(running),
            "{m}"
        );
    }
    assert_eq!(
        get(
            &m,
            &format!("sglang_last_stats_timestamp_seconds{}", rank(2))
        ),
        Some(1780481271.0)
    );
    assert_eq!(
        get(
            &m,
            &format!("sglang_last_stats_timestamp_seconds{}", rank(0))
        ),
        Some(1780481270.372041)
    );
    // The prefill unit is a server of its own, labelled prefill.
    assert_eq!(
        get(
            &m,
            r#"sglang_server_info{server="sglang-prefill",model_name="deepseek-ai/DeepSeek-V3",engine_type="prefill",tp_size="4",dp_size="1",pp_size="1",url="http://gpu-node-1:30000"}"#
        ),
        Some(1.0),
        "{m}"
    );
    assert!(!m.contains(r#"server="-""#), "{m}");
    assert_eq!(
        get(
            &m,
            r#"sglang_log_exporter_lines_incomplete_total{source="-"}"#
        ),
        Some(0.0)
    );
}
