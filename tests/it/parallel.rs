//! `--threads`: a finished input parsed on several threads gives, byte for byte, the exposition
//! and the backfill OpenMetrics of one thread, on every shipped and test log and on generated
//! logs large enough for several batches (plain, and with partial container records that force
//! the sequential fallback in the middle).

use std::path::{Path, PathBuf};

use crate::common::{bin, root};

/// Every log the repository ships or tests with: samples, cases, repro and request logs.
fn logs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in [
        "samples",
        "tests/data/cases",
        "tests/data/repro",
        "tests/data/request-logs",
    ] {
        collect(&root().join(dir), 2, &mut v);
    }
    v.sort();
    assert!(v.len() >= 5, "found only {v:?}");
    v
}

/// The log files under `dir`, `depth` levels down.
fn collect(dir: &Path, depth: u32, v: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if p.is_dir() && depth > 0 {
            collect(&p, depth - 1, v);
        } else if p.is_file() && matches!(ext, "log" | "txt" | "jsonl" | "json") {
            v.push(p);
        }
    }
}

/// Runs the binary with `args` (from the repository root, TZ=UTC); returns (stdout, stderr),
/// panicking on a failure.
fn run(args: &[&str]) -> (Vec<u8>, String) {
    let out = std::process::Command::new(bin())
        .current_dir(root())
        .env("TZ", "UTC")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the binary");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {err}");
    (out.stdout, err)
}

/// `--once` with `threads` on `path`: the exposition and stderr.
fn once(path: &Path, threads: &str, level: &str) -> (Vec<u8>, String) {
    let p = path.to_str().expect("utf-8 path");
    run(&[
        "--once",
        "--gpu.disable",
        "--timezone",
        "UTC",
        "--log.level",
        level,
        "--threads",
        threads,
        p,
    ])
}

/// `backfill` with `threads` on `path`: the OpenMetrics text.
fn backfill(path: &Path, threads: &str) -> Vec<u8> {
    let p = path.to_str().expect("utf-8 path");
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out.om");
    run(&[
        "backfill",
        "--timezone",
        "UTC",
        "--date",
        "2026-06-03",
        "--threads",
        threads,
        "-o",
        out.to_str().expect("utf-8 path"),
        p,
    ]);
    std::fs::read(out).expect("read the OpenMetrics file")
}

/// Asserts that 2, 3 and 8 threads give what 1 gives, for `--once` and `backfill`.
fn same_on_all_threads(path: &Path) {
    let (one, _) = once(path, "1", "warn");
    assert!(!one.is_empty(), "{path:?}: no exposition");
    let om = backfill(path, "1");
    for t in ["2", "3", "8"] {
        let (many, _) = once(path, t, "warn");
        assert!(one == many, "{path:?}: --once --threads {t} differs from 1");
        assert!(
            om == backfill(path, t),
            "{path:?}: backfill --threads {t} differs from 1"
        );
    }
}

#[test]
fn every_shipped_log_reads_the_same_on_any_number_of_threads() {
    for p in logs() {
        same_on_all_threads(&p);
    }
}

/// A log of at least `bytes` made of every shipped log's lines in turn (so every kind, wrapper
/// and oddity of them meets the batch and chunk boundaries), with `insert` after about half.
fn generated(dir: &Path, bytes: usize, insert: &[u8]) -> PathBuf {
    let mut body = Vec::new();
    // Not the journal export: its entries span lines, which is read on one thread by design.
    for p in logs()
        .into_iter()
        .filter(|p| !p.ends_with("samples/journal-export.txt"))
    {
        let mut t = std::fs::read(&p).expect("read a log");
        if !t.ends_with(b"\n") {
            t.push(b'\n');
        }
        body.extend_from_slice(&t);
    }
    let mut out = Vec::with_capacity(bytes + body.len() + insert.len());
    while out.len() < bytes {
        out.extend_from_slice(&body);
        if !insert.is_empty() && out.len() >= bytes / 2 && !out.ends_with(insert) {
            out.extend_from_slice(insert);
        }
    }
    let path = dir.join("generated.log");
    std::fs::write(&path, out).expect("write the generated log");
    path
}

#[test]
fn a_large_log_reads_the_same_on_any_number_of_threads() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Several batches of 2 and 3 threads (2 MiB per thread and batch), 32 chunks of 8 threads.
    let path = generated(dir.path(), 9 << 20, b"");
    same_on_all_threads(&path);
    let (_, err) = once(&path, "3", "debug");
    assert!(
        !err.contains("parsed on one thread"),
        "the plain log fell back to one thread: {err}"
    );
}

#[test]
fn a_partial_container_record_mid_log_falls_back_to_one_thread_with_the_same_result() {
    let dir = tempfile::tempdir().expect("temp dir");
    // A CRI record split in two pieces (`P` then `F`): the pieces join across lines.
    let cri = b"2026-06-03T10:20:00.5Z stdout P [2026-06-03 10:20:00 DP0 TP0] Decode batch, #running-req: 7, #token: 1234, \n\
                2026-06-03T10:20:00.6Z stdout F token usage: 0.42, gen throughput (token/s): 99.5, #queue-req: 3\n";
    let path = generated(dir.path(), 6 << 20, cri);
    same_on_all_threads(&path);
    let (_, err) = once(&path, "2", "debug");
    assert!(
        err.contains("parsed on one thread"),
        "no fallback at the partial record: {err}"
    );
}
