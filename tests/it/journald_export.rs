//! `--journal-unit` reads `journalctl -o export`: the format's edge cases through the real
//! journalctl (binary values, values across reads, values past `--max-line-bytes`) and a child
//! that dies in the middle of an entry.

use std::os::unix::fs::PermissionsExt;

use crate::common::{once, value};
use crate::journald::{
    decode_line, entry, lines_read, rank, start_with, Journal, INVOCATION, REQUESTS, SOURCE,
};

fn get(m: &str, series: &str) -> Option<f64> {
    value(m, series)
}

/// Entries appended after the sample: a MESSAGE with a newline, one with invalid UTF-8, one of
/// 100 KB (colour codes before a stats line: binary, longer than one 64 KiB read) and an entry
/// whose message is 70,000 bytes of text.
fn edge_journal() -> Journal {
    let j = Journal::new();
    let t = |i: u64| 1_780_481_300_000_000 + i * 1_000_000;
    // Only the text before the newline is SGLang's line; the rest is unmatched in it.
    let newline = format!(
        "{}\nTraceback (most recent call last):",
        decode_line("10:08:20", 0, 21)
    );
    let mut more = entry(
        "sglang-decode.service",
        INVOCATION,
        t(0),
        newline.as_bytes(),
    );
    let mut bad = decode_line("10:08:21", 1, 22).into_bytes();
    bad.extend_from_slice(b" \xff\xfe");
    more.extend(entry("sglang-decode.service", INVOCATION, t(1), &bad));
    let mut big = "\x1b[0m".repeat(25_000).into_bytes();
    big.extend_from_slice(decode_line("10:08:22", 2, 23).as_bytes());
    more.extend(entry("sglang-decode.service", INVOCATION, t(2), &big));
    let text = format!("{} {}", decode_line("10:08:23", 3, 24), "x".repeat(70_000));
    more.extend(entry(
        "sglang-decode.service",
        INVOCATION,
        t(3),
        text.as_bytes(),
    ));
    j.append(&more);
    j
}

fn running(m: &str, dp: u32) -> Option<f64> {
    get(m, &format!("sglang:num_running_reqs{}", rank(dp)))
}

/// Asserts the running requests of each `(dp, running)`.
fn assert_running(m: &str, want: &[(u32, f64)]) {
    for &(dp, running_reqs) in want {
        assert_eq!(running(m, dp), Some(running_reqs), "DP{dp}\n{m}");
    }
}

fn counter(m: &str, name: &str) -> Option<f64> {
    get(m, &format!("sglang_log_exporter_{name}{SOURCE}"))
}

#[test]
fn journald_export_values_binary_and_across_reads() {
    let j = edge_journal();
    let path = j.path.display().to_string();
    // Precondition: this journalctl's export output honours --output-fields (the entries carry
    // `_HOSTNAME`), keeping __CURSOR and the timestamps.
    let out = std::process::Command::new("journalctl")
        .args(["-o", "export", "--output-fields=MESSAGE", "--lines=1"])
        .arg(format!("--file={path}"))
        .output()
        .expect("journalctl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("__CURSOR=") && text.contains("\n__REALTIME_TIMESTAMP="),
        "{text}"
    );
    assert!(!text.contains("_HOSTNAME="), "{text}");
    let m = once(&["--journal-unit", "sglang-decode", "--journal-file", &path]);
    // Each entry is one line: the sample's 138, then the 4 appended.
    assert_eq!(lines_read(&m), Some(142.0), "{m}");
    assert_running(&m, &[(0, 21.0), (1, 22.0), (2, 23.0), (3, 24.0)]);
    assert_eq!(
        get(
            &m,
            &format!("sglang_last_stats_timestamp_seconds{}", rank(2))
        ),
        Some(1_780_481_302.0)
    );
    assert_eq!(counter(&m, "lines_invalid_utf8_total"), Some(1.0));
    assert_eq!(counter(&m, "lines_control_codes_total"), Some(1.0));
    assert_eq!(counter(&m, "lines_oversized_total"), Some(0.0));
    assert_eq!(counter(&m, "lines_incomplete_total"), Some(0.0));
}

/// With `--max-line-bytes 65536`, the 100 KB binary message and the 70,000-byte text one are
/// skipped whole and counted; the entries around them are read.
#[test]
fn journald_export_entries_past_the_line_limit_are_counted() {
    let j = edge_journal();
    let path = j.path.display().to_string();
    let m = once(&[
        "--journal-unit",
        "sglang-decode",
        "--journal-file",
        &path,
        "--max-line-bytes",
        "65536",
        "--idle-after",
        "1000000h",
    ]);
    assert_eq!(counter(&m, "lines_oversized_total"), Some(2.0), "{m}");
    assert_eq!(lines_read(&m), Some(142.0));
    // DP2 and DP3 keep the sample's last values.
    assert_running(&m, &[(0, 21.0), (1, 22.0), (2, 57.0), (3, 54.0)]);
}

/// A stand-in for journalctl: the probes and every later run are the real journalctl; the first
/// reading child writes the first `cut` bytes of its output and dies (exit 1), as a journalctl
/// killed in the middle of an entry. Its output is kept in `DIR/cut.out`.
fn dying_journalctl(dir: &std::path::Path, cut: usize) -> std::path::PathBuf {
    let script = dir.join("journalctl");
    let body = format!(
        r#"#!/bin/sh
case " $* " in
  *" --output=export "*)
    if [ ! -e {dir}/died ]; then
      touch {dir}/died
      args=""
      for a in "$@"; do [ "$a" = "--follow" ] || args="$args $a"; done
      /usr/bin/journalctl $args | head -c {cut} | tee {dir}/cut.out
      exit 1
    fi;;
esac
exec /usr/bin/journalctl "$@"
"#,
        dir = dir.display()
    );
    std::fs::write(&script, body).expect("write");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

/// The child dies in the middle of an entry: that entry is not read in part; the restarted
/// child goes on from the last whole entry's cursor, so every entry is read exactly once.
#[test]
fn journald_export_a_child_dying_mid_entry_loses_and_doubles_nothing() {
    let j = Journal::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let fake = dying_journalctl(dir.path(), 20_000);
    let e = start_with(&j, &["--journalctl", fake.to_str().expect("utf-8")]);
    let restarts = r#"sglang_log_exporter_journalctl_restarts_total{unit="sglang-decode.service"}"#;
    let m = e.scrape_until(30, |m| {
        lines_read(m) == Some(138.0) && get(m, restarts) == Some(1.0)
    });
    let cut = std::fs::read(dir.path().join("cut.out")).expect("the first child ran");
    assert_eq!(cut.len(), 20_000);
    assert!(
        !cut.ends_with(b"\n\n"),
        "precondition: the cut is inside an entry"
    );
    assert_eq!(get(&m, restarts), Some(1.0), "{m}");
    assert_eq!(lines_read(&m), Some(138.0), "{m}");
    assert_running(&m, &[(0, 55.0), (1, 56.0), (2, 57.0), (3, 54.0)]);
    assert_eq!(get(&m, REQUESTS), Some(15.0));
    assert_eq!(
        get(
            &m,
            r#"sglang_log_exporter_journal_entries_total{unit="sglang-decode.service"}"#
        ),
        Some(138.0)
    );
    assert_eq!(counter(&m, "lines_incomplete_total"), Some(0.0));
}

/// Stops the exporter with SIGTERM (the state file is written on the way out) and returns its
/// log.
fn term(e: &mut crate::common::Exporter) -> String {
    let ok = std::process::Command::new("kill")
        .args(["-TERM", &e.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    assert!(e.child.wait().expect("wait").success());
    e.stderr_to_end()
}

/// A restart with `--state.dir` goes on after the saved cursor: only the entries written since
/// are read (counters start again from them), the startup facts come from the state file, and
/// the catch-up's end is logged. A saved cursor of an older invocation is not resumed: the
/// current invocation is read from its start.
#[test]
fn journald_restart_resumes_at_the_saved_cursor() {
    let j = Journal::new();
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().display().to_string();
    let mut e = start_with(&j, &["--state.dir", &state]);
    let m = e.scrape_until(30, |m| lines_read(m) == Some(138.0));
    assert_eq!(get(&m, REQUESTS), Some(15.0), "{m}");
    let log = term(&mut e);
    assert!(
        log.contains("caught up with the journal's entries at start"),
        "{log}"
    );
    let saved = std::fs::read_to_string(dir.path().join("state.json")).expect("state file");
    assert!(saved.contains("sglang-decode.service"), "{saved}");

    let mut more = Vec::new();
    for (i, n) in [31, 32].into_iter().enumerate() {
        let t = 1_780_481_290_000_000 + i as u64 * 1_000_000;
        more.extend(entry(
            "sglang-decode.service",
            INVOCATION,
            t,
            decode_line(&format!("10:08:1{i}"), 0, n).as_bytes(),
        ));
    }
    j.append(&more);
    let mut e = start_with(&j, &["--state.dir", &state]);
    let m = e.scrape_until(30, |m| running(m, 0) == Some(32.0));
    assert_eq!(lines_read(&m), Some(2.0), "{m}");
    assert_eq!(running(&m, 0), Some(32.0));
    let cap = format!("sglang:max_total_num_tokens{}", rank(0));
    assert_eq!(get(&m, &cap), Some(786432.0), "the state file's facts: {m}");
    assert_eq!(
        get(&m, REQUESTS),
        None,
        "requests before the cursor are not read again"
    );
    assert_eq!(
        get(&m, &format!("sglang_decode_stats_lines_total{}", rank(0))),
        Some(2.0)
    );
    let log = term(&mut e);
    assert!(log.contains("resuming after the last entry read"), "{log}");
    assert!(
        log.contains("caught up with the journal's entries at start"),
        "{log}"
    );

    // A cursor of the older invocation: the current one is read whole.
    let old = std::process::Command::new("journalctl")
        .args([
            "-o",
            "json",
            "--output-fields=_SYSTEMD_INVOCATION_ID",
            "--lines=1",
        ])
        .arg(format!("--file={}", j.path.display()))
        .arg("_SYSTEMD_INVOCATION_ID=00000000000000000000000000000bad")
        .output()
        .expect("journalctl");
    let line = String::from_utf8(old.stdout).expect("utf-8");
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("one JSON entry");
    let cursor = v["__CURSOR"].as_str().expect("a cursor");
    let file = serde_json::json!({
        "version": 1,
        "servers": [],
        "journal_cursors": {"sglang-decode.service": cursor},
    });
    std::fs::write(dir.path().join("state.json"), file.to_string()).expect("write");
    let mut e = start_with(&j, &["--state.dir", &state]);
    let m = e.scrape_until(30, |m| lines_read(m) == Some(140.0));
    assert_eq!(lines_read(&m), Some(140.0), "{m}");
    assert_eq!(get(&m, REQUESTS), Some(15.0));
    let log = term(&mut e);
    assert!(
        log.contains("is not in the unit's current invocation"),
        "{log}"
    );
}

/// `(server, engine, value)` of series.
type Series = Vec<(String, String, f64)>;

/// `(server, engine, value)` of every `sglang:num_running_reqs` series (engine `-`: none).
fn writers(m: &str) -> Series {
    let mut v: Vec<_> = crate::common::parse_exposition(m)
        .into_iter()
        .filter(|s| s.name == "sglang:num_running_reqs")
        .map(|s| {
            let l = |k| s.label(k).unwrap_or("-").to_string();
            (l("server"), l("engine"), s.value)
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

fn w(server: &str, engine: &str, v: f64) -> (String, String, f64) {
    (server.to_string(), engine.to_string(), v)
}

fn writer_input(name: &str) -> String {
    crate::common::root()
        .join("tests/data/journal-writers")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Hostile test 21's journals (`tests/data/journal-writers/`, two entries each, TP0 printing
/// 1 then 2 running requests): the export, JSON and short forms of the same entries name their
/// writers by one rule (`source::writer`), and two writers never merge. Docker's journald
/// driver: each `CONTAINER_NAME` an engine of `docker`; user services: each
/// `_SYSTEMD_USER_UNIT` a server; one unit on two hosts both printing TP0: the second host an
/// engine (as a second node of a server does); no unit: `HOST IDENT[PID]`, exactly as
/// `-o short` prints it (a restart, a new PID, is a new writer in every form).
#[test]
fn every_journal_form_names_writers_alike() {
    let containers = [w("docker", "sglang-a", 1.0), w("docker", "sglang-b", 2.0)];
    let users = [w("sglang-a", "-", 1.0), w("sglang-b", "-", 2.0)];
    let hosts = [w("sglang", "-", 1.0), w("sglang", "node2", 2.0)];
    let no_unit = |server: &str| {
        [
            w(server, "h sglang-a[100]", 1.0),
            w(server, "h sglang-b[200]", 2.0),
        ]
    };
    let cases: Vec<(&str, Series)> = vec![
        ("j05_docker_driver.txt", containers.to_vec()),
        ("j05_json.log", containers.to_vec()),
        ("j04_user_units.txt", users.to_vec()),
        ("j04_json.log", users.to_vec()),
        ("j07_two_hosts.txt", hosts.to_vec()),
        ("j07_json.log", hosts.to_vec()),
        (
            "j07_short.log",
            vec![
                w("j07_short", "node1 python3[100]", 1.0),
                w("j07_short", "node2 python3[100]", 2.0),
            ],
        ),
        ("j08_no_unit.txt", no_unit("j08_no_unit").to_vec()),
        ("j08_json.log", no_unit("j08_json").to_vec()),
        ("j08_short.log", no_unit("j08_short").to_vec()),
    ];
    for (file, want) in cases {
        let m = once(&["--gpu.disable", &writer_input(file)]);
        assert_eq!(writers(&m), want, "{file}");
    }
    // The same entries written into a journal and read by `--journal-unit`: the same series.
    let dir = tempfile::tempdir().expect("temp dir");
    for (file, unit, want) in [
        ("j05_docker_driver.txt", "docker", containers.to_vec()),
        ("j04_user_units.txt", "user@1000", users.to_vec()),
        ("j07_two_hosts.txt", "sglang", hosts.to_vec()),
    ] {
        let path = dir.path().join(format!("{unit}.journal"));
        let export = std::fs::read(writer_input(file)).expect("read");
        crate::journald::write_journal(&path, &export);
        let path = path.display().to_string();
        let m = once(&[
            "--gpu.disable",
            "--journal-unit",
            unit,
            "--journal-file",
            &path,
        ]);
        assert_eq!(writers(&m), want, "{unit}");
    }
}

/// Two users' user units of one name on one host (hostile pass 31, H6;
/// `tests/data/journal-writers/k01_*`: `sglang.service` under `user@1000.service` printing 1
/// running request, then under `user@1001.service` printing 2): two writers, never merged.
/// The first user keeps the server as a single user's is named (`sglang`, no engine); the
/// other's lines are the engine `user@1001`, in the export and JSON forms alike, in `backfill`,
/// and across `--journal-unit` inputs (one per user's manager), where the first input read
/// names the first user.
#[test]
fn two_users_units_of_one_name_never_merge() {
    let two = [w("sglang", "-", 1.0), w("sglang", "user@1001", 2.0)];
    for file in ["k01_two_users.txt", "k01_json.log"] {
        let m = once(&["--gpu.disable", &writer_input(file)]);
        assert_eq!(writers(&m), two, "{file}");
    }
    let out = std::process::Command::new(crate::common::bin())
        .args(["backfill", "-o", "-"])
        .arg(writer_input("k01_two_users.txt"))
        .output()
        .expect("run backfill");
    assert!(out.status.success());
    let om = String::from_utf8(out.stdout).expect("utf-8");
    let running: Vec<&str> = om
        .lines()
        .filter(|l| l.starts_with("sglang:num_running_reqs{"))
        .collect();
    assert_eq!(
        running,
        [
            "sglang:num_running_reqs{server=\"sglang\",engine=\"user@1001\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"} 2 1780480802",
            "sglang:num_running_reqs{server=\"sglang\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"} 1 1780480801",
        ]
    );
    // Written into a journal and read by `--journal-unit`, one per user's manager.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("users.journal");
    let export = std::fs::read(writer_input("k01_two_users.txt")).expect("read");
    crate::journald::write_journal(&path, &export);
    let path = path.display().to_string();
    let read = |units: &[&str]| {
        let mut args = vec!["--gpu.disable", "--journal-file", &path];
        for u in units {
            args.extend(["--journal-unit", u]);
        }
        writers(&once(&args))
    };
    assert_eq!(read(&["user@1000"]), [w("sglang", "-", 1.0)]);
    assert_eq!(read(&["user@1001"]), [w("sglang", "-", 2.0)]);
    assert_eq!(read(&["user@1000", "user@1001"]), two);
    assert_eq!(
        read(&["user@1001", "user@1000"]),
        [w("sglang", "-", 2.0), w("sglang", "user@1000", 1.0)]
    );
}
