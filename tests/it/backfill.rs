//! `backfill` against real `promtool tsdb create-blocks-from openmetrics` and a Prometheus
//! started on the blocks.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use crate::common::{bin, sample};
use crate::promtools::{self, labels};

const DP0: &str = "server=\"pd-decode-session\",model_name=\"deepseek-ai/DeepSeek-V3\",engine_type=\"decode\",dp_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"";

/// DP0's last stats line before its gap in `pd-decode-session.log` (10:14:15) and its next one
/// (10:17:11).
const GAP: (f64, f64) = (1780481655.0, 1780481831.0);

/// Runs `backfill` with `args`, feeding `stdin`; returns (exit code, stdout, stderr).
fn backfill(args: &[&str], stdin: &str) -> (Option<i32>, String, String) {
    let mut child = Command::new(bin())
        .arg("backfill")
        .args(args)
        .env("TZ", "UTC")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run backfill");
    let mut w = child.stdin.take().expect("stdin");
    w.write_all(stdin.as_bytes()).expect("write stdin");
    drop(w);
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code(),
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

/// `backfill --timezone UTC EXTRA --output OM` of the PD decode session sample, which must
/// succeed: the file's text and the standard error.
fn backfill_session(om: &std::path::Path, extra: &[&str]) -> (String, String) {
    let mut args = vec!["--timezone", "UTC"];
    args.extend_from_slice(extra);
    let session = sample("pd-decode-session.log");
    args.extend(["--output", om.to_str().unwrap(), session.to_str().unwrap()]);
    let (code, _, err) = backfill(&args, "");
    assert_eq!(code, Some(0), "{err}");
    (std::fs::read_to_string(om).expect("output"), err)
}

/// Series text (`name{labels}`) → (timestamp, value) in file order.
fn series(om: &str) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for l in om.lines().filter(|l| !l.starts_with('#')) {
        let mut parts = l.rsplitn(3, ' ');
        let ts: f64 = parts.next().unwrap().parse().unwrap();
        let v: f64 = parts.next().unwrap().parse().unwrap();
        out.entry(parts.next().unwrap().to_string())
            .or_default()
            .push((ts, v));
    }
    out
}

/// Checks the OpenMetrics shape: `# EOF` last, one block per family, series in time order,
/// and the exposition check (HELP escaped as OpenMetrics wants, no series twice at one time).
fn check_shape(om: &str) {
    if let Err(e) = sglang_log_exporter::export::valid::check_text(om) {
        panic!("backfill output: {e:?}");
    }
    assert_eq!(om.lines().last(), Some("# EOF"));
    assert_eq!(om.matches("# EOF").count(), 1);
    let mut seen = std::collections::HashSet::new();
    let mut family = String::new();
    for l in om.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            let (name, kind) = t.split_once(' ').unwrap();
            assert!(seen.insert(name.to_string()), "family {name} twice");
            assert!(matches!(kind, "gauge" | "counter"), "{l}");
            family = name.to_string();
        } else if !l.starts_with('#') {
            let name = l.split(['{', ' ']).next().unwrap();
            assert!(
                name == family || name == format!("{family}_total"),
                "{name} outside its block {family}"
            );
        }
    }
    for (s, pts) in series(om) {
        assert!(
            pts.windows(2).all(|w| w[0].0 < w[1].0),
            "{s} out of time order"
        );
    }
}

#[test]
fn promtool_accepts_it_and_prometheus_answers_with_the_log_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    let om_path = dir.path().join("history.om");
    let (om, err) = backfill_session(&om_path, &[]);
    assert!(!err.contains("newer than 3 hours"), "{err}");
    check_shape(&om);
    let all = series(&om);

    // `[2026-06-03 10:01:42 DP0 TP0] Decode batch, #running-req: 1, #token: 7836, …`
    let used = &all[&format!("sglang:num_used_tokens{{{DP0}}}")];
    assert_eq!(used[0], (1780480902.0, 7836.0));
    assert_eq!(used[1], (1780480903.0, 7876.0));
    // Counters are cumulative: the last value is the number of DP0 decode lines.
    let log = std::fs::read_to_string(sample("pd-decode-session.log")).unwrap();
    let dp0_decodes = log
        .lines()
        .filter(|l| l.contains(" DP0 TP0] Decode batch"))
        .count();
    let lines = &all[&format!("sglang_decode_stats_lines_total{{{DP0}}}")];
    assert_eq!(lines.last().unwrap().1, dp0_decodes as f64);
    // Non-decreasing: idle samples repeat the count between stats lines.
    assert!(lines.windows(2).all(|w| w[0].1 <= w[1].1));

    let data = dir.path().join("data");
    promtools::create_blocks(&om_path, &data);

    let prom = promtools::prometheus("scrape_configs: []\n", dir.path());
    let q = "sglang:num_used_tokens{dp_rank=\"0\"}";
    let r = promtools::query(&prom, q, Some(1780480902.0));
    let want = labels(&[
        ("__name__", "sglang:num_used_tokens"),
        ("server", "pd-decode-session"),
        ("model_name", "deepseek-ai/DeepSeek-V3"),
        ("engine_type", "decode"),
        ("dp_rank", "0"),
        ("pp_rank", "0"),
        ("tp_rank", "0"),
        ("moe_ep_rank", "0"),
    ]);
    assert_eq!(r, vec![(want.clone(), 7836.0)]);
    // DP0 prints nothing from 10:14:15 to 10:17:11: idle (running 0) from 10:14:45 on, as a
    // live scrape showed, instead of 5 minutes of lookback on the last busy value.
    let running = |t: f64| {
        promtools::query(&prom, "sglang:num_running_reqs{dp_rank=\"0\"}", Some(t))
            .into_iter()
            .map(|(_, v)| v)
            .collect::<Vec<_>>()
    };
    assert_eq!(running(GAP.0 + 10.0), vec![1.0]);
    assert_eq!(running(GAP.0 + 60.0), vec![0.0]);
    assert_eq!(running(GAP.1), vec![1.0]);
    // Every sample of the series comes back at its own second from a range query.
    let (first, last) = (used[0].0, used.last().unwrap().0);
    let r = promtools::query_range(&prom, q, first, last, 1.0);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].0, want);
    let points: BTreeMap<i64, f64> = r[0].1.iter().map(|(t, v)| (*t as i64, *v)).collect();
    for (t, v) in used {
        assert_eq!(points.get(&(*t as i64)), Some(v), "at {t}");
    }
}

const DECODE: &str = "Decode batch, #running-req: 1, #token: 7836, token usage: 0.01, cuda graph: True, gen throughput (token/s): 42.12, #queue-req: 0";

#[test]
fn a_pattern_files_help_with_quotes_and_backslashes_is_escaped_for_promtool() {
    // A HELP text is an escaped string in OpenMetrics: a bare `"` is no valid file. A user's
    // pattern file may say `"` and `\` in a help (the embedded one does not).
    let dir = tempfile::tempdir().expect("tempdir");
    let shipped = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("patterns/sglang.yaml"),
    )
    .unwrap();
    let from = r#"help: "The number of running requests, from the last stats line.""#;
    assert!(shipped.contains(from));
    let to =
        r##"help: 'Running requests ("#running-req"; a C:\path note), from the last stats line.'"##;
    let patterns = dir.path().join("quoted.yaml");
    std::fs::write(&patterns, shipped.replace(from, to)).unwrap();
    let om_path = dir.path().join("history.om");
    let (om, _) = backfill_session(&om_path, &["--patterns", patterns.to_str().unwrap()]);
    assert!(
        om.contains(
            r##"# HELP sglang:num_running_reqs Running requests (\"#running-req\"; a C:\\path note), from the last stats line."##
        ),
        "{}",
        om.lines().find(|l| l.contains("HELP sglang:num_running")).unwrap_or("")
    );
    check_shape(&om);
    promtools::create_blocks(&om_path, &dir.path().join("data"));
}

#[test]
fn journald_realtime_wins_and_stdin_works() {
    let line = format!(
        "{{\"MESSAGE\":\"[2026-06-03 10:01:42 DP0 TP0] {DECODE}\",\"_SYSTEMD_UNIT\":\"sglang-decode.service\",\"__REALTIME_TIMESTAMP\":\"1780480000123456\"}}\n"
    );
    let (code, out, err) = backfill(&["--timezone", "UTC", "-o", "-", "-"], &line);
    assert_eq!(code, Some(0), "{err}");
    check_shape(&out);
    let s = series(&out);
    let (name, pts) = s
        .iter()
        .find(|(k, _)| k.starts_with("sglang:num_used_tokens{"))
        .expect("num_used_tokens");
    assert!(name.contains("server=\"sglang-decode\""), "{name}");
    assert_eq!(pts, &vec![(1780480000.123, 7836.0)]);
}

#[test]
fn time_only_prefixes_need_a_date() {
    let log = "[16:43:29 TP0] Prefill batch. #new-seq: 1, #new-token: 2062, #cached-token: 0, cache hit rate: 0.00%, token usage: 0.00, #running-req: 0, #queue-req: 0\n";
    let (code, out, err) = backfill(&["--timezone", "UTC", "-o", "-", "-"], log);
    assert_eq!(code, Some(0));
    assert_eq!(out, "# EOF\n");
    assert!(
        err.contains("1 stats lines were skipped: they have a time but no date"),
        "{err}"
    );
    assert!(err.contains("--date"), "{err}");
    let (code, out, err) = backfill(
        &["--timezone", "UTC", "--date", "2024-10-01", "-o", "-", "-"],
        log,
    );
    assert_eq!(code, Some(0), "{err}");
    let s = series(&out);
    let (_, pts) = s
        .iter()
        .find(|(k, _)| k.starts_with("sglang_prefill_new_tokens_total{"))
        .expect("prefill_new_tokens_total");
    // 2024-10-01 16:43:29 UTC.
    assert_eq!(pts, &vec![(1727801009.0, 2062.0)]);
}

#[test]
fn a_python_logging_time_before_sglangs_line_is_written() {
    // Issue 37 item 3: SGLang's lines under an embedding project's logging format (no SGLang
    // prefix) were all skipped as untimed.
    let mut log = String::new();
    for (i, (prefix, _)) in crate::streams::PYTHON_LOGGING.iter().enumerate() {
        log += &format!("{prefix}Decode batch, #running-req: {}, #token: 300, token usage: 0.03, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 1\n", i + 3);
    }
    let (code, out, err) = backfill(&["--timezone", "UTC", "-o", "-", "-"], &log);
    assert_eq!(code, Some(0), "{err}");
    let s = series(&out);
    let (_, pts) = s
        .iter()
        .find(|(k, _)| k.starts_with("sglang:num_running_reqs{"))
        .expect("num_running_reqs");
    let want: Vec<(f64, f64)> = crate::streams::PYTHON_LOGGING
        .iter()
        .enumerate()
        .map(|(i, (_, t))| (*t, i as f64 + 3.0))
        .collect();
    assert_eq!(pts, &want, "{out}");
}

#[test]
fn recent_samples_are_warned_about() {
    let t = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(1);
    let stamp = t.strftime("%Y-%m-%d %H:%M:%S");
    let (code, out, err) = backfill(
        &["--timezone", "UTC", "-o", "-", "-"],
        &format!("[{stamp} DP0 TP0] {DECODE}\n"),
    );
    assert_eq!(code, Some(0), "{err}");
    let ts = t.as_second() as f64;
    let all = series(&out);
    let rank = "server=\"stdin\",model_name=\"\",engine_type=\"unified\",dp_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"";
    assert_eq!(
        all[&format!("sglang:num_used_tokens{{{rank}}}")],
        [(ts, 7836.0)],
        "{out}"
    );
    assert!(err.contains("newer than 3 hours"), "{err}");
}

#[test]
fn missing_input_is_a_clear_error() {
    let (code, _, err) = backfill(&["-o", "-", "/nonexistent/x.log"], "");
    assert_eq!(code, Some(2));
    assert!(err.contains("cannot read /nonexistent/x.log"), "{err}");
}

/// Families a scrape shows that backfill does not write (README, "Backfilling history"): the
/// HTTP counters and `sglang_server_info` are live-only, and so are the exporter's own series.
const LIVE_ONLY: [&str; 5] = [
    "sglang:http_requests_total",
    "sglang:http_responses_total",
    "sglang_access_log_requests_total",
    "sglang_server_info",
    // Where the values come from and since when: a fact of the reading, not of history.
    "sglang_server_source_timestamp_seconds",
];

/// Series text (`name{labels}`) → value of a `--once` exposition.
fn exposition(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

/// Both ways, exactly: every series backfill writes ends on the value `--once` shows, and every
/// series `--once` shows but the live-only ones is in backfill with that last value.
#[test]
fn last_samples_equal_what_once_shows() {
    for log in [
        "pd-decode-session.log",
        "prefill-session.log",
        "single-gpu-2025.log",
    ] {
        // The same idle policy on both sides: the default, and none.
        for idle in ["30s", "100000000"] {
            assert_ends_as_once_shows(&sample(log), idle);
        }
    }
}

/// Every series backfill writes of `path` ends on the value `--once` shows, and every series
/// `--once` shows but the live-only ones is in backfill with that last value.
fn assert_ends_as_once_shows(path: &std::path::Path, idle: &str) {
    let om = backfill_utc(path, idle);
    let last: BTreeMap<String, f64> = series(&om)
        .into_iter()
        .map(|(k, v)| (k, v.last().unwrap().1))
        .collect();
    let now = exposition(&crate::common::once(&[
        "--gpu.disable",
        "--idle-after",
        idle,
        path.to_str().unwrap(),
    ]));
    let shown: BTreeMap<String, f64> = now
        .into_iter()
        .filter(|(k, _)| {
            let name = k.split('{').next().unwrap();
            !name.starts_with("sglang_log_exporter_") && !LIVE_ONLY.contains(&name)
        })
        .collect();
    let log = path.display();
    let only_backfill: Vec<_> = last.keys().filter(|k| !shown.contains_key(*k)).collect();
    let only_once: Vec<_> = shown.keys().filter(|k| !last.contains_key(*k)).collect();
    assert_eq!(only_backfill, Vec::<&String>::new(), "{log} {idle}");
    assert_eq!(only_once, Vec::<&String>::new(), "{log} {idle}");
    for (k, v) in &last {
        assert_eq!(shown[k], *v, "{log} {idle}: {k}");
    }
}

/// Backfills `path` (UTC prefix times, `--idle-after idle`) to stdout; checks the exit status
/// and the file's shape.
fn backfill_utc(path: &std::path::Path, idle: &str) -> String {
    let args = [
        "--timezone",
        "UTC",
        "--idle-after",
        idle,
        "-o",
        "-",
        path.to_str().unwrap(),
    ];
    let (code, om, err) = backfill(&args, "");
    assert_eq!(code, Some(0), "{err}");
    check_shape(&om);
    om
}

/// (timestamp, value) of DP0's series `name` in `(from, to)`.
fn dp0_between(
    all: &BTreeMap<String, Vec<(f64, f64)>>,
    name: &str,
    from: f64,
    to: f64,
) -> Vec<(f64, f64)> {
    all[&format!("{name}{{{DP0}}}")]
        .iter()
        .copied()
        .filter(|(t, _)| *t > from && *t < to)
        .collect()
}

#[test]
fn idle_ranks_read_zero_after_idle_after() {
    let path = sample("pd-decode-session.log");
    let run = |idle: &str| series(&backfill_utc(&path, idle));
    let all = run("30s");
    // Around DP0's gap: the last busy sample, the idle one 30 s later, the next stats line.
    let around = |name: &str| dp0_between(&all, name, GAP.0 - 0.5, GAP.1 + 0.5);
    let idle_at = GAP.0 + 30.0;
    assert_eq!(
        around("sglang:num_running_reqs"),
        [(GAP.0, 1.0), (idle_at, 0.0), (GAP.1, 1.0)]
    );
    assert_eq!(
        around("sglang:num_used_tokens"),
        [(GAP.0, 25848.0), (idle_at, 0.0), (GAP.1, 1684.0)]
    );
    assert_eq!(
        around("sglang_idle"),
        [(GAP.0, 0.0), (idle_at, 1.0), (GAP.1, 0.0)]
    );
    assert_eq!(
        around("sglang_last_stats_timestamp_seconds"),
        [(GAP.0, GAP.0), (idle_at, GAP.0), (GAP.1, GAP.1)]
    );
    // Not an activity gauge: the idle sample (every series as a scrape then shows it) keeps
    // the capacity.
    assert_eq!(
        dp0_between(
            &all,
            "sglang:max_total_num_tokens",
            GAP.0 + 0.5,
            GAP.1 - 0.5
        ),
        [(idle_at, 786432.0)]
    );
    // The end of the input: the log clock is the last timed line (the /health line at
    // 10:18:46). Every rank's last stats line (10:17:31-36) is more than 30 s before it: each
    // ends idle, 30 s after its last stats line, as the same file followed live would.
    let last_stats = 1780481856.0;
    let mut ranks = 0;
    for (k, pts) in &all {
        if k.starts_with("sglang_idle{") {
            let (t, v) = *pts.last().unwrap();
            assert_eq!(v, 1.0, "{k}");
            assert!(
                t <= last_stats + 30.0 && t >= last_stats + 25.0,
                "{k} at {t}"
            );
            ranks += 1;
        }
    }
    assert_eq!(ranks, 4);
    // A gap shorter than --idle-after is not idle.
    let all = run("5m");
    assert_eq!(
        dp0_between(&all, "sglang:num_running_reqs", GAP.0 - 0.5, GAP.1 + 0.5),
        [(GAP.0, 1.0), (GAP.1, 1.0)]
    );
    assert!(all[&format!("sglang_idle{{{DP0}}}")]
        .iter()
        .all(|p| p.1 == 0.0));
}

/// 2026-06-03 10:00:00 UTC.
const T0: f64 = 1780480800.0;

/// The series of `backfill` (UTC, `--idle-after 30s`) of `tests/data/DIR/NAME`.
fn backfill_data(dir: &str, name: &str) -> BTreeMap<String, Vec<(f64, f64)>> {
    let p = crate::common::root()
        .join("tests/data")
        .join(dir)
        .join(name);
    series(&backfill_utc(&p, "30s"))
}

/// A rank's labels in the clock fixtures (no model, unified).
fn rank(server: &str, dp: Option<u32>, tp: u32) -> String {
    let dp = dp.map_or(String::new(), |d| format!("dp_rank=\"{d}\","));
    format!("{{server=\"{server}\",model_name=\"\",engine_type=\"unified\",{dp}pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\"}}")
}

/// The latest sample time of a backfill.
fn latest(all: &BTreeMap<String, Vec<(f64, f64)>>) -> f64 {
    all.values().flatten().map(|p| p.0).fold(f64::MIN, f64::max)
}

/// A lone stats line with a wrong date (hostile pass, `tests/data/clock/`) is an outlier: the
/// log clock follows the times that agree with their neighbours, in backfill as in `--once`.
/// No sample is written at the outlier's time, and it turns no busy rank idle: its values
/// count at the clock's time.
#[test]
fn an_outlier_time_writes_no_sample_and_turns_no_rank_idle() {
    // A day ahead among the first lines of a busy rank: the same samples as without it, but
    // for the stats-line count (the outlier's line counts, at 10:00:00).
    let with = backfill_data("clock", "future-stats-mid-busy.log");
    let without = backfill_data("clock", "no-outlier.log");
    let l = rank("future-stats-mid-busy", None, 0);
    let busy = [(T0, 0.0), (T0 + 10.0, 0.0), (T0 + 15.0, 0.0)];
    assert_eq!(with[&format!("sglang_idle{l}")], busy);
    assert_eq!(
        with[&format!("sglang:num_running_reqs{l}")],
        [(T0, 3.0), (T0 + 10.0, 3.0), (T0 + 15.0, 3.0)]
    );
    assert_eq!(
        with[&format!("sglang_decode_stats_lines_total{l}")],
        [(T0, 2.0), (T0 + 10.0, 3.0), (T0 + 15.0, 4.0)]
    );
    assert_eq!(latest(&with), T0 + 15.0);
    let renamed: BTreeMap<String, Vec<(f64, f64)>> = without
        .into_iter()
        .map(|(k, v)| (k.replace("no-outlier", "future-stats-mid-busy"), v))
        .collect();
    for (k, v) in &with {
        if !k.starts_with("sglang_decode_stats_lines_total") {
            assert_eq!(Some(v), renamed.get(k), "{k}");
        }
    }
    assert_eq!(with.len(), renamed.len());
    // The last line a day ahead, of the DP rank that is still busy: DP0 turns idle 30 s after
    // its last line (10:00:40); DP1's outlier counts at the clock's time (10:00:45).
    let all = backfill_data("clock", "dp-one-quiet-outlier.log");
    let dp = |d: u32| rank("dp-one-quiet-outlier", Some(d), d);
    assert_eq!(
        all[&format!("sglang_idle{}", dp(0))],
        [(T0, 0.0), (T0 + 10.0, 0.0), (T0 + 40.0, 1.0)]
    );
    assert_eq!(
        all[&format!("sglang_idle{}", dp(1))],
        [(T0 + 20.0, 0.0), (T0 + 45.0, 0.0)]
    );
    assert_eq!(
        all[&format!("sglang_decode_stats_lines_total{}", dp(1))],
        [(T0 + 20.0, 1.0), (T0 + 45.0, 3.0)]
    );
    assert_eq!(latest(&all), T0 + 45.0);
    // Last round's case (`tests/data/hostile21/clock-future-stats.log`): the second line five
    // days ahead; access lines to 10:10 end the input. Idle 30 s after 10:00:00, nothing on
    // June 8.
    let all = backfill_data("hostile21", "clock-future-stats.log");
    let l = rank("clock-future-stats", None, 0);
    assert_eq!(
        all[&format!("sglang_idle{l}")],
        [(T0, 0.0), (T0 + 30.0, 1.0)]
    );
    assert_eq!(
        all[&format!("sglang_last_stats_timestamp_seconds{l}")],
        [(T0, T0), (T0 + 30.0, T0)]
    );
    assert_eq!(latest(&all), T0 + 30.0);
}

/// The end of a backfilled input is its last timed line, also one no kind reads (hostile pass):
/// a log that goes on past `--idle-after` with SGLang's other output (and a crash's
/// traceback) ends idle, 30 s after its last stats line.
#[test]
fn lines_no_kind_reads_end_the_input_idle() {
    let all = backfill_data("clock", "quiet-other-lines.log");
    let l = rank("quiet-other-lines", None, 0);
    assert_eq!(
        all[&format!("sglang_idle{l}")],
        [(T0, 0.0), (T0 + 10.0, 0.0), (T0 + 40.0, 1.0)]
    );
    assert_eq!(
        all[&format!("sglang:num_running_reqs{l}")],
        [(T0, 3.0), (T0 + 10.0, 3.0), (T0 + 40.0, 0.0)]
    );
    let all = backfill_data("clock", "crash-traceback.log");
    assert_eq!(
        all[&format!("sglang_idle{}", rank("crash-traceback", None, 0))],
        [(T0, 0.0), (T0 + 10.0, 0.0), (T0 + 40.0, 1.0)]
    );
}

/// Backfill and `--once` agree on every clock fixture: each series ends on what `--once` shows.
#[test]
fn clock_fixtures_end_as_once_shows() {
    for name in [
        "quiet-other-lines.log",
        "crash-traceback.log",
        "future-stats-mid-busy.log",
        "dp-one-quiet-outlier.log",
    ] {
        let p = crate::common::root().join("tests/data/clock").join(name);
        assert_ends_as_once_shows(&p, "30s");
    }
}

/// A rank the state removes (hostile pass 31, H5; `tests/data/backfill/`) leaves no busy
/// sample standing: a restart's `server_args` line drops its server's ranks (`--once` shows
/// none of them), so the busy rank gets its idle sample at its last stats line + 30 s, or at
/// the restart when that comes first; an engine silent for an hour at the end (removed as
/// `--once` removes it) gets it at its expiry when `--idle-after` is longer.
#[test]
fn a_removed_busy_rank_gets_its_idle_sample() {
    // Busy (30 running) at 09:01:00, restarted at 09:05:00, input to 09:10:00.
    const T: f64 = 1794474060.0;
    let l = rank("restart-busy", None, 0);
    let all = backfill_data("backfill", "restart-busy.log");
    assert_eq!(
        all[&format!("sglang:num_running_reqs{l}")],
        [(T, 30.0), (T + 30.0, 0.0)]
    );
    assert_eq!(all[&format!("sglang_idle{l}")], [(T, 0.0), (T + 30.0, 1.0)]);
    assert_eq!(
        all[&format!("sglang_last_stats_timestamp_seconds{l}")],
        [(T, T), (T + 30.0, T)]
    );
    assert_dropped_series_end_idle("restart-busy.log", "30s");
    // With --idle-after 2h the restart (4 minutes later) comes first.
    let p = crate::common::root().join("tests/data/backfill/restart-busy.log");
    let all = series(&backfill_utc(&p, "2h"));
    assert_eq!(
        all[&format!("sglang:num_running_reqs{l}")],
        [(T, 30.0), (T + 240.0, 0.0)]
    );
    assert_eq!(
        all[&format!("sglang_idle{l}")],
        [(T, 0.0), (T + 240.0, 1.0)]
    );
    assert_dropped_series_end_idle("restart-busy.log", "2h");
    // Restarted 10 s after its last stats line: idle at the restart.
    let l = rank("restart-within-idle", None, 0);
    let all = backfill_data("backfill", "restart-within-idle.log");
    assert_eq!(
        all[&format!("sglang:num_running_reqs{l}")],
        [(T, 30.0), (T + 10.0, 0.0)]
    );
    assert_eq!(all[&format!("sglang_idle{l}")], [(T, 0.0), (T + 10.0, 1.0)]);
    assert_dropped_series_end_idle("restart-within-idle.log", "30s");
    // Engine sglang-1 busy at 09:00:00, sglang-2 prints to 10:30: with --idle-after 2h,
    // sglang-1 expires at 10:00 (an hour silent) and reads idle from then.
    let p = crate::common::root().join("tests/data/backfill/engine-expires.log");
    let all = series(&backfill_utc(&p, "2h"));
    let e1 = "{server=\"engine-expires\",engine=\"sglang-1\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"}";
    const E: f64 = 1794474000.0;
    assert_eq!(
        all[&format!("sglang:num_running_reqs{e1}")],
        [(E, 7.0), (E + 3600.0, 0.0)]
    );
    assert_eq!(
        all[&format!("sglang_idle{e1}")],
        [(E, 0.0), (E + 3600.0, 1.0)]
    );
    assert_dropped_series_end_idle("engine-expires.log", "2h");
    assert_dropped_series_end_idle("engine-expires.log", "30s");
}

/// Backfill of `tests/data/backfill/NAME` against `--once`: a series both show ends on the
/// value `--once` shows; one only backfill writes (its rank removed) ends idle: activity 0,
/// `sglang_idle` 1.
fn assert_dropped_series_end_idle(name: &str, idle: &str) {
    let path = crate::common::root().join("tests/data/backfill").join(name);
    let last: BTreeMap<String, f64> = series(&backfill_utc(&path, idle))
        .into_iter()
        .map(|(k, v)| (k, v.last().unwrap().1))
        .collect();
    let shown = exposition(&crate::common::once(&[
        "--gpu.disable",
        "--idle-after",
        idle,
        path.to_str().unwrap(),
    ]));
    let mut removed = 0;
    for (k, v) in &last {
        let family = k.split('{').next().unwrap();
        match shown.get(k) {
            Some(s) => assert_eq!(s, v, "{name} {idle}: {k}"),
            None if family == "sglang_idle" => {
                removed += 1;
                assert_eq!(*v, 1.0, "{name} {idle}: {k}");
            }
            None if [
                "sglang:num_running_reqs",
                "sglang:num_queue_reqs",
                "sglang:token_usage",
                "sglang:num_used_tokens",
                "sglang:gen_throughput",
            ]
            .contains(&family) =>
            {
                assert_eq!(*v, 0.0, "{name} {idle}: {k}");
            }
            None => {}
        }
    }
    assert_eq!(removed, 1, "{name} {idle}: one removed rank");
}

/// A server's PD mode is fixed for a run (`disaggregation_mode`), but a log without it in
/// `server_args` tells it only by the PD fields of its stats lines: here TP0's plain decode
/// line (10:00:10, `unified` as far as anyone can tell) comes before TP1's PD decode line
/// (10:00:20). From then on a scrape, `--once` and backfill all say `decode` for every rank:
/// backfill writes each rank under the new label at 10:00:20, and TP0's `unified` series ends
/// idle there, as a restarted rank's does. At the last timestamp the `engine_type` backfill
/// writes is the one `--once` prints.
#[test]
fn the_engine_type_a_later_pd_line_tells_is_every_ranks_from_then_on() {
    const T: f64 = 1780480800.0;
    let all = backfill_data("backfill", "engine-told-late.log");
    let tp = |e: &str, n: u32| {
        format!("{{server=\"engine-told-late\",model_name=\"m/x\",engine_type=\"{e}\",pp_rank=\"0\",tp_rank=\"{n}\",moe_ep_rank=\"0\"}}")
    };
    let running = |e: &str, n: u32| all[&format!("sglang:num_running_reqs{}", tp(e, n))].clone();
    assert_eq!(running("unified", 0), [(T + 10.0, 3.0), (T + 20.0, 0.0)]);
    assert_eq!(running("decode", 0), [(T + 20.0, 3.0)]);
    assert_eq!(running("decode", 1), [(T + 20.0, 4.0)]);
    assert!(!all.contains_key(&format!("sglang:num_running_reqs{}", tp("unified", 1))));
    assert_eq!(
        all[&format!("sglang_idle{}", tp("unified", 0))],
        [(T + 10.0, 0.0), (T + 20.0, 1.0)]
    );
    assert_eq!(
        all[&format!("sglang_kv_pool_capacity_tokens{}", tp("decode", 0))],
        [(T + 20.0, 100000.0)]
    );
    // The engine types of the series present at the last timestamp, against `--once`'s.
    let end = latest(&all);
    let engine_of = |k: &str| {
        k.split("engine_type=\"")
            .nth(1)
            .map(|r| r[..r.find('"').unwrap()].to_string())
    };
    let at_end: std::collections::BTreeSet<String> = all
        .iter()
        .filter(|(k, v)| k.starts_with("sglang_idle{") && v.last().unwrap() == &(end, 0.0))
        .filter_map(|(k, _)| engine_of(k))
        .collect();
    let p = crate::common::root().join("tests/data/backfill/engine-told-late.log");
    let once = crate::common::once(&["--gpu.disable", p.to_str().unwrap()]);
    let printed: std::collections::BTreeSet<String> = once
        .lines()
        .filter(|l| l.starts_with("sglang_idle{"))
        .filter_map(engine_of)
        .collect();
    assert_eq!(end, T + 20.0);
    assert_eq!(at_end, printed);
    assert_eq!(printed.into_iter().collect::<Vec<_>>(), ["decode"]);
    assert_dropped_series_end_idle("engine-told-late.log", "30s");
}

/// `--once s=a.log s=b.log` (closing trial): two inputs named for one server are two sources.
/// `b.log`'s `server_args` (10:01) comes while `a.log`'s run goes on (to 10:05): no restart
/// of it but a second server under the name, kept apart as an engine named after its input;
/// neither one's data is lost, in `--once` as in backfill. A piece that starts after the
/// other ended (`later.log`, 10:09: a rotated log, oldest first) is the same server's restart.
#[test]
fn two_inputs_of_one_name_that_overlap_are_two_servers() {
    let dir = crate::common::root().join("tests/data/apart");
    let input = |n: &str| format!("s={}", dir.join(n).display());
    let (a, b) = (input("a.log"), input("b.log"));
    let b_path = dir.join("b.log").display().to_string();
    let m = crate::common::once(&["--gpu.disable", "--idle-after", "1h", &a, &b]);
    let l = r#"model_name="m/a",engine_type="unified",pp_rank="0",tp_rank="0",moe_ep_rank="0""#;
    let a_series = format!("sglang:num_running_reqs{{server=\"s\",{l}}}");
    let b_series = format!(
        "sglang:num_running_reqs{{server=\"s\",engine=\"{b_path}\",{}}}",
        l.replace("m/a", "m/b")
    );
    assert_eq!(crate::common::value(&m, &a_series), Some(5.0), "{m}");
    assert_eq!(crate::common::value(&m, &b_series), Some(7.0), "{m}");
    let pool = |s: &str| s.replace("sglang:num_running_reqs", "sglang_kv_pool_capacity_tokens");
    assert_eq!(
        crate::common::value(&m, &pool(&a_series)),
        Some(1000.0),
        "{m}"
    );
    assert_eq!(
        crate::common::value(&m, &pool(&b_series)),
        Some(2000.0),
        "{m}"
    );
    assert_eq!(
        crate::common::value(&m, "sglang_log_exporter_server_name_collisions_total"),
        Some(1.0),
        "{m}"
    );
    let args = ["--timezone", "UTC", "--idle-after", "1h", "-o", "-", &a, &b];
    let (code, om, err) = backfill(&args, "");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("overlap in time (two servers under one name)"),
        "{err}"
    );
    let all = series(&om);
    assert_eq!(all[&a_series], [(T0 + 10.0, 3.0), (T0 + 300.0, 5.0)]);
    assert_eq!(all[&b_series], [(T0 + 310.0, 7.0)]);

    // Pieces one after the other: the later one's dump is a restart (only its run is shown).
    let m = crate::common::once(&[
        "--gpu.disable",
        "--idle-after",
        "1h",
        &a,
        &input("later.log"),
    ]);
    let later = l.replace("m/a", "m/b");
    let running: Vec<&str> = m
        .lines()
        .filter(|x| x.starts_with("sglang:num_running_reqs{"))
        .collect();
    assert_eq!(
        running,
        [format!("sglang:num_running_reqs{{server=\"s\",{later}}} 7")],
        "{m}"
    );
    assert!(!m.contains("engine=\""), "{m}");

    // Rotated pieces named newest first (found by the trial T): the older piece's dump comes
    // before the newer's last line. The warning said they "overlap in time" while `a.log`
    // (10:00-10:05) ended before `later.log` (10:09) began; it names both causes, and the
    // newer piece's state stays the server's.
    let out = crate::common::run(&[
        "--once",
        "--timezone",
        "UTC",
        "--gpu.disable",
        "--idle-after",
        "1h",
        &input("later.log"),
        &a,
    ]);
    let (m, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("or they are rotated pieces named newest first (name them oldest first)"),
        "{err}"
    );
    assert_eq!(
        crate::common::value(
            &m,
            &format!("sglang:num_running_reqs{{server=\"s\",{later}}}")
        ),
        Some(7.0),
        "{m}"
    );

    // The hosts of one multi-node server, each its own input under one name, overlap by
    // nature: one server with both hosts' ranks, nothing kept apart.
    let m = crate::common::once(&["--gpu.disable", &input("node0.log"), &input("node1.log")]);
    let running: Vec<&str> = m
        .lines()
        .filter(|x| x.starts_with("sglang:num_running_reqs{"))
        .collect();
    let big = |tp: u32| {
        format!(
            r#"sglang:num_running_reqs{{server="s",model_name="m/big",engine_type="unified",pp_rank="0",tp_rank="{tp}",moe_ep_rank="0"}} 5"#
        )
    };
    assert_eq!(running, [big(0), big(1)], "{m}");
    assert_eq!(
        crate::common::value(&m, "sglang_log_exporter_server_name_collisions_total"),
        None,
        "{m}"
    );
}

/// Two overlapping inputs under a server name past the label bound (256 bytes, so the state
/// keeps it shortened): backfill keeps the second apart as `--once` does, each sample under
/// the series its line was routed to (backfill routes a line once, on the bounded key, and
/// applies it under that key).
#[test]
fn a_long_server_name_is_kept_apart_by_backfill_as_by_once() {
    let dir = crate::common::root().join("tests/data/apart");
    let name = "s".repeat(300);
    let input = |n: &str| format!("{name}={}", dir.join(n).display());
    let (a, b) = (input("a.log"), input("b.log"));
    let b_engine = format!("engine=\"{}\"", dir.join("b.log").display());
    let running = |text: &str, apart: bool| -> Vec<String> {
        let mut v: Vec<String> = text
            .lines()
            .filter(|l| l.starts_with("sglang:num_running_reqs{"))
            .filter(|l| l.contains(&b_engine) == apart)
            .map(|l| l.split_whitespace().last().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    let m = crate::common::once(&["--gpu.disable", "--idle-after", "1h", &a, &b]);
    assert_eq!(running(&m, false), ["5"], "{m}");
    assert_eq!(running(&m, true), ["7"], "{m}");
    let (code, om, err) = backfill(
        &["--timezone", "UTC", "--idle-after", "1h", "-o", "-", &a, &b],
        "",
    );
    assert_eq!(code, Some(0), "{err}");
    let all = series(&om);
    let pick = |apart: bool| -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = all
            .iter()
            .filter(|(k, _)| k.starts_with("sglang:num_running_reqs{"))
            .filter(|(k, _)| k.contains(&b_engine) == apart)
            .flat_map(|(_, s)| s.iter().copied())
            .collect();
        v.sort_by(|x, y| x.0.total_cmp(&y.0));
        v
    };
    assert_eq!(pick(false), [(T0 + 10.0, 3.0), (T0 + 300.0, 5.0)], "{om}");
    assert_eq!(pick(true), [(T0 + 310.0, 7.0)], "{om}");
}
