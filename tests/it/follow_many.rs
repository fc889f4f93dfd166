//! Many followed files on a small fixed pool of threads (repro 36: a thread a file cost each
//! its stack, its malloc arena and its parsers' per-thread caches, 90 kB a file at 256).

use std::path::Path;

use crate::common::{append, value, Exporter};

/// A stats line (`scheduler_metrics_mixin.py`'s decode log).
const L: &str = "[2026-11-30 15:00:00 TP0] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, #queue-req: 0";

/// The names of the exporter's threads.
fn threads(e: &Exporter) -> Vec<String> {
    let dir = format!("/proc/{}/task", e.child.id());
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|t| {
            let comm = t.unwrap().path().join("comm");
            std::fs::read_to_string(comm)
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .collect();
    names.sort();
    names
}

fn lines_read(m: &str, path: &Path) -> Option<f64> {
    value(
        m,
        &format!(
            "sglang_log_exporter_lines_read_total{{source=\"{}\"}}",
            path.display()
        ),
    )
}

/// 200 files found by `--input.glob` and 50 named on the command line, each with one line: the
/// exporter follows all 250 with 4 threads of the pool (as many threads as an exporter of one
/// file), and a line appended to each is read (2 lines read from each, exactly). 250: the
/// state keeps the series of 256 sources at most.
#[test]
fn two_hundred_fifty_files_are_followed_by_four_threads() {
    let dir = tempfile::tempdir().unwrap();
    let (g, named) = (dir.path().join("g"), dir.path().join("named"));
    std::fs::create_dir(&g).unwrap();
    std::fs::create_dir(&named).unwrap();
    let mut files = Vec::new();
    for i in 0..200 {
        files.push(g.join(format!("s{i}.log")));
    }
    for i in 0..50 {
        files.push(named.join(format!("n{i}.log")));
    }
    for f in &files {
        std::fs::write(f, format!("{L}\n")).unwrap();
    }
    let glob = format!("{}/*.log", g.display());
    let mut args = vec![
        "--gpu.disable",
        "--input.max-files",
        "1000",
        "--input.glob",
        &glob,
    ];
    let names: Vec<String> = files[200..]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    args.extend(names.iter().map(String::as_str));
    let e = Exporter::start(&args);
    let all_read = |m: &str, n: f64| files.iter().all(|f| lines_read(m, f) == Some(n));
    let m = e.scrape_until(60, |m| all_read(m, 1.0));
    assert_eq!(
        value(&m, "sglang_log_exporter_discovery_files_followed"),
        Some(200.0)
    );
    for f in &files {
        append(f, format!("{L}\n").as_bytes());
    }
    let m = e.scrape_until(60, |m| all_read(m, 2.0));
    for f in &files {
        assert_eq!(lines_read(&m, f), Some(2.0), "{}", f.display());
    }
    let many = threads(&e);
    let pool: Vec<_> = many.iter().filter(|t| t.starts_with("follow ")).collect();
    assert_eq!(pool, ["follow 0", "follow 1", "follow 2", "follow 3"]);
    // One file costs as many threads: none is a file's own.
    let one_dir = dir.path().join("one");
    std::fs::create_dir(&one_dir).unwrap();
    std::fs::write(one_dir.join("a.log"), format!("{L}\n")).unwrap();
    let one_glob = format!("{}/*.log", one_dir.display());
    let one = Exporter::start(&["--gpu.disable", "--input.glob", &one_glob]);
    one.scrape_until(60, |m| lines_read(m, &one_dir.join("a.log")) == Some(1.0));
    assert_eq!(threads(&one), many);
}
