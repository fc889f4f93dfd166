//! A hostile pass over issue 21's features (`tests/data/hostile21/`): the journal export format
//! met with ordinary logs, CRLF and lost empty lines; draft figures across a restart whose
//! `server_args` line was not seen; shares over 100 %; lines whose time disagrees with their
//! neighbours; Python's escapes in `server_args`. Each input with its exact values.

use crate::common::{once, parse_exposition, root, run, Sample};

fn input(name: &str) -> String {
    root()
        .join("tests/data/hostile21")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn read(name: &str) -> Vec<Sample> {
    parse_exposition(&once(&["--gpu.disable", &input(name)]))
}

/// (server, tp_rank, value) of every series of `metric`.
fn by_rank(s: &[Sample], metric: &str) -> Vec<(String, String, f64)> {
    let mut v: Vec<_> = s
        .iter()
        .filter(|x| x.name == metric)
        .map(|x| {
            let l = |k| x.label(k).unwrap_or("").to_string();
            (l("server"), l("tp_rank"), x.value)
        })
        .collect();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v
}

fn one(s: &[Sample], metric: &str, source: &str) -> Option<f64> {
    s.iter()
        .find(|x| x.name == metric && x.label("source").is_none_or(|v| v.ends_with(source)))
        .map(|x| x.value)
}

fn row(server: &str, tp: &str, v: f64) -> (String, String, f64) {
    (server.to_string(), tp.to_string(), v)
}

/// An ordinary log with a line that starts like a journal export entry (`__CURSOR=...`,
/// `__REALTIME_TIMESTAMP=1`) loses nothing after it: only that line is counted as a record
/// cut short.
#[test]
fn a_plain_log_holding_an_entry_start_loses_nothing() {
    let s = read("o1.txt");
    assert_eq!(
        by_rank(&s, "sglang_decode_stats_lines_total"),
        [row("o1", "0", 2.0)]
    );
    assert_eq!(
        by_rank(&s, "sglang:num_running_reqs"),
        [row("o1", "0", 4.0)]
    );
    assert_eq!(
        one(&s, "sglang_log_exporter_lines_incomplete_total", "o1.txt"),
        Some(1.0)
    );
    let s = read("o4.txt");
    assert_eq!(
        by_rank(&s, "sglang_decode_stats_lines_total"),
        [row("o4", "0", 3.0)]
    );
}

/// Plain lines after an entry's first line, then a whole entry: the plain lines are the file's
/// server, the entry its unit's.
#[test]
fn plain_lines_inside_an_entry_and_the_entry_after_them_are_read() {
    let s = read("g1.txt");
    assert_eq!(
        by_rank(&s, "sglang:num_running_reqs"),
        [row("g1", "0", 6.0), row("u1", "0", 7.0)]
    );
    assert_eq!(
        by_rank(&s, "sglang_decode_stats_lines_total"),
        [row("g1", "0", 2.0), row("u1", "0", 2.0)]
    );
}

/// CRLF endings are endings; a lost empty line (the next `__CURSOR=`) ends the entry before;
/// a MESSAGE given twice keeps its first value.
#[test]
fn crlf_lost_empty_lines_and_repeated_fields() {
    let s = read("j2.txt");
    assert_eq!(
        by_rank(&s, "sglang_decode_stats_lines_total"),
        [row("u1", "0", 2.0)]
    );
    assert_eq!(
        by_rank(&s, "sglang:num_running_reqs"),
        [row("u1", "0", 7.0)]
    );
    let s = read("f1.txt");
    assert_eq!(
        by_rank(&s, "sglang_decode_stats_lines_total"),
        [row("u1", "0", 3.0)]
    );
    let s = read("m1.txt");
    assert_eq!(
        by_rank(&s, "sglang:num_running_reqs"),
        [row("u1", "0", 1.0), row("u1", "1", 5.0)]
    );
    for name in ["j2.txt", "f1.txt", "m1.txt"] {
        let s = read(name);
        assert_eq!(
            one(&s, "sglang_log_exporter_lines_incomplete_total", name),
            Some(0.0)
        );
    }
}

/// Only TP0 prints stats lines; both ranks reload after serving (a restart, its `server_args`
/// line not seen): the new figures are the target's on every rank, and no draft figure is
/// shown.
#[test]
fn a_restart_seen_by_the_ranks_that_print_no_stats_is_no_draft() {
    let s = read("r1.log");
    let gib = 1073741824.0;
    assert_eq!(
        by_rank(&s, "sglang_weight_memory_bytes"),
        [row("r1", "0", 80.0 * gib), row("r1", "1", 80.0 * gib)]
    );
    assert_eq!(
        by_rank(&s, "sglang_kv_pool_capacity_tokens"),
        [row("r1", "0", 800.0), row("r1", "1", 800.0)]
    );
    assert_eq!(by_rank(&s, "sglang_draft_weight_memory_bytes"), []);
    assert_eq!(by_rank(&s, "sglang_draft_kv_pool_capacity_tokens"), []);
}

/// A token usage above 1 is a contradiction, never a share; an estimate above the pool is
/// left out.
#[test]
fn a_token_usage_above_one_is_no_share() {
    let out = run(&[
        "--once",
        "--gpu.disable",
        "--timezone",
        "UTC",
        &input("c4.log"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("TP0  busy at 10:00:02: KV cache token usage 1.50 printed, above 1 (contradictory), 3 running, 0 queued"),
        "{err}"
    );
    let s = parse_exposition(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        by_rank(&s, "sglang_log_exporter_kv_capacity_contradictions_total"),
        [row("c4", "", 1.0)]
    );
    let out = run(&[
        "--once",
        "--gpu.disable",
        "--timezone",
        "UTC",
        &input("estimate-over-pool.log"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("KV cache 90.0% (900/1000 tokens)"), "{err}");
    let s = parse_exposition(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(by_rank(&s, "sglang_kv_pool_used_estimate_bytes"), []);
}

/// The log's clock follows times that agree with their neighbours: a first line with a wrong
/// day does not set it; a wrong-day stats line does not make its rank busy for days; a line
/// printed out of order does not make a rank's last stats time older.
#[test]
fn outlier_times_neither_set_the_clock_nor_a_ranks_last_stats() {
    let s = read("clock-first-wrongday.log");
    assert_eq!(
        by_rank(&s, "sglang_idle"),
        [row("clock-first-wrongday", "0", 0.0)]
    );
    assert_eq!(
        by_rank(&s, "sglang_last_stats_timestamp_seconds"),
        [row("clock-first-wrongday", "0", 1780480808.0)]
    );
    let s = read("clock-future-stats.log");
    assert_eq!(
        by_rank(&s, "sglang_idle"),
        [row("clock-future-stats", "0", 1.0)]
    );
    assert_eq!(
        by_rank(&s, "sglang_last_stats_timestamp_seconds"),
        [row("clock-future-stats", "0", 1780480800.0)]
    );
    let s = read("clock-backwards-stats.log");
    assert_eq!(
        by_rank(&s, "sglang_idle"),
        [row("clock-backwards-stats", "0", 0.0)]
    );
    assert_eq!(
        by_rank(&s, "sglang_last_stats_timestamp_seconds"),
        [row("clock-backwards-stats", "0", 1780480800.0)]
    );
}

/// Python's escapes in a `server_args` string are decoded: the model is `a'b"c`.
#[test]
fn server_args_strings_are_unescaped() {
    let s = read("t3.log");
    let info: Vec<_> = s
        .iter()
        .filter(|x| x.name == "sglang_server_info")
        .collect();
    assert_eq!(info.len(), 1);
    assert_eq!(info[0].label("model_name"), Some("a'b\"c"));
    assert_eq!(info[0].label("tp_size"), Some("8"));
}
