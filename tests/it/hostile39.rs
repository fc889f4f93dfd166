//! Faults of the fourth hostile pass's part A (`../shared/repro/24`-`38`), each with the input
//! that showed it.

use std::sync::Arc;
use std::time::Instant;

use sglang_log_exporter::parse::patterns::Patterns;
use sglang_log_exporter::parse::{ParseOptions, Parser};
use sglang_log_exporter::pipeline::{Outcome, Pipeline};
use sglang_log_exporter::state::SourceDelta;

use crate::common::value;

/// A stats line SGLang prints (scheduler.py, `Decode batch`), split where a run is put.
const HEAD: &str = "[2026-11-30 15:00:00 TP0]";
const LABEL: &str = " Decode batch, #running-req: ";
const TAIL: &str = "1, #token: 1, token usage: 0.01, #queue-req: 0";

/// The byte runs a hostile line is made of: every byte the parser, the framer or a stream
/// prefix looks for, alone and in the pieces that start a match (a prefix, a field, a JSON
/// record, an escape sequence).
const RUNS: &[&str] = &[
    "[",
    "(",
    "{",
    "\"",
    ",",
    ":",
    "0",
    "#",
    " ",
    "\x1b",
    "\x1b[",
    "\x1b[0",
    "\\",
    "\t",
    "]",
    "=",
    "/",
    "-",
    "[2",
    "[15:00:00",
    "[2026-11-30 15:00:00 TP0",
    "[2026-11-30 15:00:00 TP0] ",
    "[00:00:00 A",
    "(a pid=1) ",
    "(a pid=1",
    "#a: 1, ",
    "a: ",
    ": 1",
    "1, ",
    "[gpu=",
    "{\"log\":\"",
    "\"message\":",
    "\\\"",
    "Decode batch, ",
    "#running-req: ",
    "out={",
    ", out={",
    "pod/",
    "[pod/a/b] ",
    "2026-11-30T15:00:00Z stdout P ",
    "T",
    "Z ",
    "\u{00e9}",
    "\u{fffd}",
];

/// The ways a run of 1 MiB sits in a line: inside the fields, before the prefix, between the
/// prefix and the label, after the line, alone, and inside the wrappers that frame a line.
fn shapes(run: &str) -> Vec<String> {
    let n = (1 << 20) / run.len();
    let r = run.repeat(n);
    vec![
        format!("{HEAD}{LABEL}{r}{TAIL}"),
        format!("{r}{HEAD}{LABEL}{TAIL}"),
        format!("{HEAD}{r}{LABEL}{TAIL}"),
        format!("{HEAD}{LABEL}{TAIL}{r}"),
        r.clone(),
        format!("{{\"log\":\"{HEAD}{LABEL}{r}{TAIL}\\n\",\"stream\":\"stderr\"}}"),
        format!("{{\"log\":\"{r}\"}}"),
        format!("2026-11-30T15:00:00.000000000Z stderr F {r}{HEAD}{LABEL}{TAIL}"),
        format!("[pod/a/b] {r}{HEAD}{LABEL}{TAIL}"),
        format!("(EngineCore pid=1) {r}{HEAD}{LABEL}{TAIL}"),
    ]
}

/// Repro 24: a run of `[` in a stats line cost time quadratic in its length (an unanchored
/// prefix search from every `[`): 64,000 took 12 s, a 1 MiB line about an hour. Every line of 1
/// MiB of any run the parser, the framer or a stream prefix looks at, in every place, is read
/// by the plain and the fast paths, the framer included (`Pipeline`), in a bound no quadratic
/// search could meet (one search per byte of a 1 MiB line is 10^12 steps: hours; linear, the
/// slowest takes about 1.3 s in a debug build), and the line after it reads as it should.
#[test]
fn r24_every_per_line_search_is_linear() {
    let pat = Arc::new(Patterns::embedded().unwrap());
    let running = pat.metric_by_id("num_running_reqs").unwrap();
    let next = format!(
        "{HEAD} Decode batch, #running-req: 42, #token: 1, token usage: 0.01, #queue-req: 0"
    );
    let mut worst = (0.0, String::new());
    for opt in [ParseOptions::PLAIN, ParseOptions::FAST] {
        let mut p = Pipeline::new(Parser::with_options(pat.clone(), opt), 4 << 20, None);
        for run in RUNS {
            for (i, line) in shapes(run).iter().enumerate() {
                let what = format!("{opt:?} {run:?} shape {i}");
                let t = Instant::now();
                let mut d = SourceDelta::default();
                let out = p.run(line.as_bytes(), &mut d);
                assert!(!matches!(out, Outcome::Panicked), "{what}");
                let s = t.elapsed().as_secs_f64();
                if s > worst.0 {
                    worst = (s, what.clone());
                }
                match p.run(next.as_bytes(), &mut d) {
                    Outcome::Parsed { rec, .. } => {
                        assert_eq!(rec.get(running), Some(42.0), "{what}")
                    }
                    o => panic!("after {what}: {o:?}"),
                }
            }
        }
    }
    eprintln!("slowest 1 MiB line: {:.3} s ({})", worst.0, worst.1);
    assert!(worst.0 < 10.0, "{:.1} s for {}", worst.0, worst.1);
}

/// Repro 29: a journalctl that died in the middle of the start-up catch-up (after reading part
/// of it) made the source caught up: `/-/ready` answered 200 (systemd got `READY=1`) with most of
/// the history unread, though the restarted child went on from the cursor. Readiness now waits
/// for the catch-up: while the restarted child has read nothing, `/-/ready` is 503; once it
/// has read to the latest entry at start, 200.
#[test]
fn r29_readiness_waits_for_the_catch_up_after_journalctl_dies_in_it() {
    let j = crate::journald::Journal::new();
    let dir = tempfile::tempdir().unwrap();
    let (cut, gate) = (dir.path().join("cut"), dir.path().join("gate"));
    let jc = dir.path().join("journalctl");
    // The first follow run is cut after 3,000 bytes (a few entries); the restarted one waits
    // for the gate before it reads anything.
    std::fs::write(
        &jc,
        format!(
            "#!/bin/bash\ncase \" $* \" in *\" --follow \"*)\n  if [ ! -e {cut} ]; then touch {cut}; journalctl \"$@\" | head -c 3000; exit 1; fi\n  while [ ! -e {gate} ]; do sleep 0.05; done;;\nesac\nexec journalctl \"$@\"\n",
            cut = cut.display(),
            gate = gate.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&jc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut e = crate::journald::start_with(&j, &["--journalctl", jc.to_str().unwrap()]);
    let restarts = r#"sglang_log_exporter_journalctl_restarts_total{unit="sglang-decode.service"}"#;
    let m = e.scrape_until(30, |m| value(m, restarts).is_some_and(|v| v >= 1.0));
    let read = crate::journald::lines_read(&m).unwrap_or(0.0);
    assert!(read > 0.0, "the cut child read part of the catch-up:\n{m}");
    let (code, _, body) = e.get("/-/ready");
    assert_eq!(
        code, 503,
        "ready with the catch-up cut after {read} lines: {body}"
    );
    std::fs::write(&gate, b"").unwrap();
    let deadline = Instant::now() + std::time::Duration::from_secs(30);
    while e.get("/-/ready").0 != 200 {
        assert!(Instant::now() < deadline, "never ready");
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    // Ready once every entry at start is read: the sample's 138 lines (what an uncut start
    // reads, `journald::follows_appended_entries_and_skips_other_units`).
    let m = e.scrape_until(30, |m| {
        crate::journald::lines_read(m).is_some_and(|v| v > read)
    });
    assert_eq!(crate::journald::lines_read(&m), Some(138.0), "{m}");
    e.child.kill().unwrap();
    let _ = e.child.wait();
    let log = e.stderr_to_end();
    assert!(
        log.contains("caught up with the journal's entries at start"),
        "{log}"
    );
}

/// Repro 37: a log in order, then newest-first (an export in order with a backward one
/// appended) is read in order (its start is): the rank ended with the value of the reversed
/// part's last line (100 running, 10:01:40) shown at the latest time (10:03:19), a value and a
/// time no line printed together, and nothing said so. Now a warning names both times, for a
/// file and for stdin; an input in order says nothing of the kind.
#[test]
fn r37_an_input_that_changes_direction_is_warned_about() {
    let line = |i: u32| {
        format!(
            "[2026-11-30 10:{:02}:{:02} TP0] Decode batch, #running-req: {i}, #token: 10, token usage: 0.10, #queue-req: 0\n",
            i / 60,
            i % 60
        )
    };
    let forward: String = (0..100).map(line).collect();
    let flipped: String = forward.clone() + &(100..200).rev().map(line).collect::<String>();
    let dir = tempfile::tempdir().unwrap();
    let warning = "the input changes direction: read in order (its start is), its last lines are older than its latest (2026-11-30T10:01:40Z against 2026-11-30T10:03:19Z)";
    for (text, warned) in [(&flipped, true), (&forward, false)] {
        let log = dir.path().join("flip.log");
        std::fs::write(&log, text).unwrap();
        let args = ["--once", "--gpu.disable", "--timezone", "UTC"];
        let file = crate::common::run(&[&args[..], &[log.to_str().unwrap()]].concat());
        let stdin = crate::common::run_with_input(
            std::process::Command::new(crate::common::bin())
                .args(args)
                .arg("-"),
            text.as_bytes(),
            "--once -",
        );
        for out in [file, stdin] {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{err}");
            assert_eq!(err.contains(warning), warned, "{err}");
            assert_eq!(err.contains("changes direction"), warned, "{err}");
        }
    }
}

/// Repro 25 through the binary: `--once -` on a newest-first stdin with `TMPDIR` missing ends
/// in its latest line's state (39 running, 40 lines read), held in memory with a warning.
#[test]
fn r25_once_on_newest_first_stdin_without_tmpdir_reads_its_latest_state() {
    let text: String = (0..40)
        .rev()
        .map(|i| format!("[2026-11-30 10:00:{i:02} TP0] Decode batch, #running-req: {i}, #token: 10, token usage: 0.10, #queue-req: 0\n"))
        .collect();
    let out = crate::common::run_with_input(
        std::process::Command::new(crate::common::bin())
            .args(["--once", "--gpu.disable", "--timezone", "UTC", "-"])
            .env("TMPDIR", "/nonexistent-dir-of-repro-25"),
        text.as_bytes(),
        "--once -",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("held in memory instead"), "{err}");
    let m = String::from_utf8(out.stdout).unwrap();
    let running = crate::common::samples(&m, "sglang:num_running_reqs");
    assert_eq!(running.len(), 1, "{m}");
    assert!(running[0].ends_with("} 39"), "{m}");
    assert_eq!(
        value(&m, r#"sglang_log_exporter_lines_read_total{source="-"}"#),
        Some(40.0)
    );
}
