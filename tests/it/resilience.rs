//! Faults around the sources that a service meets in production: a journalctl child stopped
//! with SIGSTOP, a `--journal-file` replaced under it, a misspelled unit, a journald record
//! with several units, and an exporter restarted after the log that held the startup facts
//! was rotated away (`--state.dir`).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{bin, run_with_input, sample, value, Exporter};
use crate::journald::{
    children_named, decode_line, entry, lines_read, rank, start, write_journal, Journal,
    INVOCATION, SOURCE,
};

const RESTARTS: &str =
    r#"sglang_log_exporter_journalctl_restarts_total{unit="sglang-decode.service"}"#;
const ENTRIES: &str = r#"sglang_log_exporter_journal_entries_total{unit="sglang-decode.service"}"#;

/// The one journalctl child of the exporter, waited for up to 10 s.
fn only_journalctl(e: &Exporter) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let k = children_named(e.child.id(), "journalctl");
        if k.len() == 1 {
            return k[0];
        }
        assert!(
            Instant::now() < deadline,
            "one following journalctl child: {k:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Two decode entries of the current invocation at 10:09:0i, DP0 running `first`, `first + 1`.
fn two_entries(first: u32) -> Vec<u8> {
    let mut more = Vec::new();
    for i in 0..2u32 {
        more.extend(entry(
            "sglang-decode.service",
            INVOCATION,
            1_780_481_340_000_000 + u64::from(i) * 1_000_000,
            decode_line(&format!("10:09:0{i}"), 0, first + i).as_bytes(),
        ));
    }
    more
}

fn running(m: &str, dp: u32) -> Option<f64> {
    value(m, &format!("sglang:num_running_reqs{}", rank(dp)))
}

#[test]
fn a_stopped_journalctl_is_killed_and_restarted_from_its_cursor() {
    let j = Journal::new();
    let e = start(&j);
    e.scrape_until(30, |m| lines_read(m) == Some(138.0));
    let stopped = only_journalctl(&e);
    let ok = Command::new("kill")
        .args(["-STOP", &stopped.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
    // Written while the child is stopped: read by its successor, once.
    j.append(&two_entries(61));
    let m = e.scrape_until(30, |m| {
        lines_read(m) == Some(140.0) && value(m, RESTARTS) == Some(1.0)
    });
    assert_eq!(running(&m, 0), Some(62.0), "{m}");
    assert_eq!(value(&m, ENTRIES), Some(140.0), "{m}");
    assert_eq!(
        value(&m, &format!("sglang_log_exporter_source_up{SOURCE}")),
        Some(1.0)
    );
    let now = only_journalctl(&e);
    assert_ne!(now, stopped, "the stopped child is still the one followed");
    // Killed, not left stopped: its /proc entry is gone once reaped.
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::path::Path::new(&format!("/proc/{stopped}")).exists() {
        assert!(
            Instant::now() < deadline,
            "the stopped journalctl {stopped} was left running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_replaced_journal_file_is_followed_on_the_new_file() {
    let j = Journal::new();
    let e = start(&j);
    e.scrape_until(30, |m| lines_read(m) == Some(138.0));
    let first = only_journalctl(&e);
    // As journald rotates: the active file moves away, a new one holds the new entries only.
    let fresh = j.path.with_file_name("fresh.journal");
    write_journal(&fresh, &two_entries(71));
    std::fs::rename(&j.path, j.path.with_extension("old")).expect("move the old file away");
    std::fs::rename(&fresh, &j.path).expect("put the new file in place");
    let m = e.scrape_until(30, |m| {
        lines_read(m) == Some(140.0) && value(m, RESTARTS) == Some(1.0)
    });
    assert_eq!(running(&m, 0), Some(72.0), "{m}");
    // The other ranks keep what the old file said.
    assert_eq!(running(&m, 1), Some(56.0), "{m}");
    assert_ne!(only_journalctl(&e), first);
}

#[test]
fn a_misspelled_unit_is_warned_about_and_counts_no_entries() {
    let j = Journal::new();
    let path = j.path.display().to_string();
    let mut e = Exporter::start(&["--journal-unit", "sglang-decod", "--journal-file", &path]);
    let series = r#"sglang_log_exporter_journal_entries_total{unit="sglang-decod.service"}"#;
    let m = e.scrape_until(10, |m| value(m, series).is_some());
    assert!(!m.contains("sglang:num_running_reqs"), "{m}");
    // Read stderr as it comes; the warning is written while the unit is probed.
    let warning = "the journal has no entries of this unit yet";
    let rx = e.log_lines();
    crate::common::wait_log(&rx, warning, 10);
    // Still 0 after the unit was probed, and warned about once however often it is probed.
    let m = e.scrape();
    assert_eq!(value(&m, series), Some(0.0), "{m}");
    e.child.kill().expect("kill");
    e.child.wait().expect("wait");
    let err = e.stderr_to_end();
    assert_eq!(err.matches(warning).count(), 1, "{err}");
    assert!(err.contains("unit=\"sglang-decod.service\""), "{err}");
}

#[test]
fn a_record_with_several_units_is_the_first_units() {
    let line = |units: &str, n: u32| {
        format!(
            "{{\"MESSAGE\":\"[2026-06-03 10:00:00 TP0] Decode batch, #running-req: {n}, #queue-req: 0\",\"_SYSTEMD_UNIT\":{units},\"__REALTIME_TIMESTAMP\":\"178048080{n}000000\"}}\n"
        )
    };
    let input = line(r#"["sglang-a.service","sglang-b.service"]"#, 3)
        + &line(r#""sglang-b.service""#, 4)
        + &line("[]", 5);
    let out = run_with_input(
        Command::new(bin()).args([
            "--once",
            "--gpu.disable",
            "--idle-after",
            "1000000h",
            "--timezone",
            "UTC",
            "-",
        ]),
        input.as_bytes(),
        "the exporter",
    );
    assert!(out.status.success());
    let m = String::from_utf8(out.stdout).expect("utf-8");
    let r = |server: &str| {
        value(
            &m,
            &format!(
                r#"sglang:num_running_reqs{{server="{server}",model_name="",engine_type="unified",pp_rank="0",tp_rank="0",moe_ep_rank="0"}}"#
            ),
        )
    };
    assert_eq!(r("sglang-a"), Some(3.0), "{m}");
    assert_eq!(r("sglang-b"), Some(4.0), "{m}");
    // An empty array names no unit: the input's own name.
    assert_eq!(r("stdin"), Some(5.0), "{m}");
}

#[test]
fn startup_facts_survive_a_restart_after_the_log_rotated() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("mkdir");
    let log = dir.path().join("decode.log");
    std::fs::copy(sample("pd-decode-session.log"), &log).expect("copy the sample");
    let state_arg = state.display().to_string();
    let log_arg = log.display().to_string();
    let args = [
        "--state.dir",
        &state_arg,
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        &log_arg,
    ];
    let cap = r#"sglang:max_total_num_tokens{server="decode",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",dp_rank="2",pp_rank="0",tp_rank="2",moe_ep_rank="0"}"#;
    {
        let mut e = Exporter::start(&args);
        let m = e.scrape_until(20, |m| value(m, cap).is_some());
        assert_eq!(value(&m, cap), Some(786432.0), "{m}");
        // SIGTERM: the state file is written on the way out.
        let ok = Command::new("kill")
            .args(["-TERM", &e.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(ok.success());
        assert!(e.child.wait().expect("wait").success());
    }
    assert!(state.join("state.json").is_file());
    // Rotated: the new file has one stats line of DP2 and no startup lines.
    std::fs::write(
        &log,
        "[2026-06-03 10:20:00 DP2 TP2] Decode batch, #running-req: 9, #token: 7000, token usage: 0.01, #queue-req: 0\n",
    )
    .expect("rotate");
    let e = Exporter::start(&args);
    let m = e.scrape_until(20, |m| {
        value(
            m,
            r#"sglang:num_running_reqs{server="decode",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",dp_rank="2",pp_rank="0",tp_rank="2",moe_ep_rank="0"}"#,
        ) == Some(9.0)
    });
    assert_eq!(value(&m, cap), Some(786432.0), "{m}");
    // `--once` reads the state file too (and leaves it as it is).
    let before = std::fs::read(state.join("state.json")).expect("the state file");
    let with = crate::common::once(&["--gpu.disable", "--state.dir", &state_arg, &log_arg]);
    assert_eq!(value(&with, cap), Some(786432.0), "{with}");
    assert_eq!(std::fs::read(state.join("state.json")).unwrap(), before);
    // Without the state file the same log gives no capacity and no model.
    let bare = crate::common::once(&["--gpu.disable", &log_arg]);
    assert!(!bare.contains("sglang:max_total_num_tokens{"), "{bare}");
    assert!(!bare.contains("DeepSeek-V3"), "{bare}");
}
