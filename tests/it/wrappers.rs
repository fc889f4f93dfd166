//! Values a new user's hostile pass found wrong: container and JSON wrappers that end or
//! interleave badly (pieces of a record cut on one stream with the other stream's records
//! between them, a JSON record cut short, a record whose last piece never comes), which must
//! give the values the whole records say or none, never a line glued or cut into wrong numbers;
//! and the KV bytes in use, which must not inherit the two-decimal rounding of token usage.

use crate::common::{once, value};

const STATS_50: &str = "[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 50, #token: 5000, token usage: 0.50, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 4";

use crate::common::once_on as read;

/// The value of `metric` for TP0 of server `server` (no DP tag, no model).
fn rank0(m: &str, server: &str, metric: &str) -> Option<f64> {
    value(
        m,
        &format!(
            r#"{metric}{{server="{server}",model_name="",engine_type="unified",pp_rank="0",tp_rank="0",moe_ep_rank="0"}}"#
        ),
    )
}

fn health(m: &str, server: &str) -> Option<f64> {
    value(
        m,
        &format!(
            r#"sglang_access_log_requests_total{{server="{server}",model_name="",engine_type="unified",method="GET",path="/health",status="200"}}"#
        ),
    )
}

/// `lines_incomplete_total` of the input whose path ends in `/file`.
fn incomplete(m: &str, file: &str) -> Option<f64> {
    let end = format!("/{file}\"}} ");
    m.lines()
        .filter(|l| l.starts_with("sglang_log_exporter_lines_incomplete_total{source=\""))
        .find_map(|l| {
            l.split_once(end.as_str())
                .map(|(_, v)| v.parse().expect("a number"))
        })
}

/// A stats line's values after a whole line of 50 running: 12 running, 1200 tokens, queue 3.
fn assert_joined(m: &str, server: &str) {
    assert_eq!(
        rank0(m, server, "sglang:num_running_reqs"),
        Some(12.0),
        "{m}"
    );
    assert_eq!(rank0(m, server, "sglang:num_used_tokens"), Some(1200.0));
    assert_eq!(rank0(m, server, "sglang:token_usage"), Some(0.12));
    assert_eq!(rank0(m, server, "sglang:num_queue_reqs"), Some(3.0));
    assert_eq!(
        rank0(m, server, "sglang_decode_stats_lines_total"),
        Some(2.0)
    );
    // The other stream's record between the pieces is read too, by itself.
    assert_eq!(health(m, server), Some(1.0), "{m}");
}

#[test]
fn cri_pieces_are_joined_per_stream() {
    let text = format!(
        "2026-06-03T10:00:00.000000001Z stdout F {STATS_50}\n\
         2026-06-03T10:00:01.000000001Z stdout P [2026-06-03 10:00:01 TP0] Decode batch, #running-req: 1\n\
         2026-06-03T10:00:01.000000002Z stderr F [2026-06-03 10:00:01] INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK\n\
         2026-06-03T10:00:01.000000003Z stdout F 2, #token: 1200, token usage: 0.12, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 3\n"
    );
    let m = read("cri.log", &text);
    assert_joined(&m, "cri");
    assert_eq!(incomplete(&m, "cri.log"), Some(0.0));
}

#[test]
fn docker_pieces_are_joined_per_stream() {
    let rec = |log: &str, stream: &str, t: u32| {
        format!(
            "{}\n",
            serde_json::json!({"log": log, "stream": stream, "time": format!("2026-06-03T10:00:0{t}.000000001Z")})
        )
    };
    let text = rec(&format!("{STATS_50}\n"), "stdout", 0)
        + &rec(
            "[2026-06-03 10:00:01 TP0] Decode batch, #running-req: 1",
            "stdout",
            1,
        )
        + &rec(
            "[2026-06-03 10:00:01] INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK\n",
            "stderr",
            1,
        )
        + &rec("2, #token: 1200, token usage: 0.12, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 3\n", "stdout", 1);
    let m = read("docker.log", &text);
    assert_joined(&m, "docker");
}

#[test]
fn a_json_record_cut_short_is_skipped_and_counted() {
    // A Docker record and a journald record, each cut before its closing quote: read as
    // plain text they gave `#token: 80` (a cut number) and a server named after the file.
    let docker = format!(
        "{}\n{}\n",
        serde_json::json!({"log": format!("{STATS_50}\n"), "stream": "stdout", "time": "2026-06-03T10:00:00.000000001Z"}),
        r#"{"log":"[2026-06-03 10:00:01 TP0] Decode batch, #running-req: 8, #token: 80"#
    );
    let m = read("cut.log", &docker);
    assert_eq!(
        rank0(&m, "cut", "sglang:num_running_reqs"),
        Some(50.0),
        "{m}"
    );
    assert_eq!(rank0(&m, "cut", "sglang:num_used_tokens"), Some(5000.0));
    assert_eq!(incomplete(&m, "cut.log"), Some(1.0));

    let journald = format!(
        "{}\n{}\n",
        serde_json::json!({"MESSAGE": STATS_50, "_SYSTEMD_UNIT": "u.service", "__REALTIME_TIMESTAMP": "1780480800000000"}),
        r#"{"MESSAGE":"[2026-06-03 10:00:01 TP0] Decode batch, #running-req: 8, #token: 80"#
    );
    let m = read("jd.json", &journald);
    assert_eq!(rank0(&m, "u", "sglang:num_running_reqs"), Some(50.0), "{m}");
    assert!(!m.contains("server=\"jd\""), "{m}");
    assert_eq!(incomplete(&m, "jd.json"), Some(1.0));
}

#[test]
fn a_record_whose_last_piece_never_came_is_counted() {
    let cri = format!(
        "2026-06-03T10:00:00.000000001Z stdout F {STATS_50}\n\
         2026-06-03T10:00:01.000000001Z stdout P [2026-06-03 10:00:01 TP0] Decode batch, #running-req: 1\n"
    );
    let m = read("cri-end.log", &cri);
    assert_eq!(rank0(&m, "cri-end", "sglang:num_running_reqs"), Some(50.0));
    assert_eq!(incomplete(&m, "cri-end.log"), Some(1.0));
    let docker = format!(
        "{}\n{}\n",
        serde_json::json!({"log": format!("{STATS_50}\n"), "stream": "stdout", "time": "2026-06-03T10:00:00.000000001Z"}),
        serde_json::json!({"log": "[2026-06-03 10:00:01 TP0] Decode batch, #running-req: 1", "stream": "stdout", "time": "2026-06-03T10:00:01.000000001Z"}),
    );
    let m = read("docker-end.log", &docker);
    assert_eq!(incomplete(&m, "docker-end.log"), Some(1.0));
}

/// The first screen's sample: DP0 holds 2,290 of 786,432 tokens, which SGLang prints as token
/// usage 0.00; the bytes in use come from the exact ratio (pool 55,265,491,681.28 bytes).
#[test]
fn kv_bytes_in_use_come_from_the_exact_token_ratio() {
    // The log goes on 70 s past the last stats line: a longer --idle-after keeps it busy.
    let m = once(&[
        "--gpu.disable",
        "--idle-after",
        "2m",
        crate::common::sample("pd-decode-session.log")
            .to_str()
            .expect("utf-8 path"),
    ]);
    let rank = r#"{server="pd-decode-session",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",dp_rank="0",pp_rank="0",tp_rank="0",moe_ep_rank="0"}"#;
    assert_eq!(value(&m, &format!("sglang:token_usage{rank}")), Some(0.0));
    assert_eq!(
        value(&m, &format!("sglang_kv_pool_used_estimate_bytes{rank}")),
        Some(160_926_788.0)
    );
}

/// A tab where SGLang prints a space (between fields, after a key) reads as the space: it used
/// to glue `#running-req: 5,\t#token: 500` into one field, withdraw the first and leave the
/// second's older 5000 on show.
#[test]
fn tabs_read_as_spaces() {
    let text = format!(
        "{STATS_50}\n\
         [2026-06-03 10:00:01 TP0] Decode batch, #running-req: 5,\t#token: 500, token usage: 0.05, cuda graph: True, gen throughput (token/s): 11.00, #queue-req:\t1\n"
    );
    let m = read("tabs.log", &text);
    assert_eq!(
        rank0(&m, "tabs", "sglang:num_running_reqs"),
        Some(5.0),
        "{m}"
    );
    assert_eq!(rank0(&m, "tabs", "sglang:num_used_tokens"), Some(500.0));
    assert_eq!(rank0(&m, "tabs", "sglang:num_queue_reqs"), Some(1.0));
    assert_eq!(
        rank0(&m, "tabs", "sglang_decode_stats_lines_total"),
        Some(2.0)
    );
}

/// SGLang prints no negative value in the lines read: a negative one is refused and counted
/// like any unreadable value (its gauge withdrawn, a counter not moved).
#[test]
fn negative_values_are_refused_and_counted() {
    let text = "[2026-06-03 10:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 1000, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0\n\
                [2026-06-03 10:00:01 TP0] Prefill batch, #new-seq: 1, #new-token: -600, #cached-token: -50, token usage: 0.00, #running-req: 0, #queue-req: 0\n\
                [2026-06-03 10:00:02 TP0] Decode batch, #running-req: -5, #token: -500, token usage: -0.05, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 2\n";
    let m = read("neg.log", text);
    assert_eq!(
        rank0(&m, "neg", "sglang_prefill_new_tokens_total"),
        Some(1000.0)
    );
    assert_eq!(rank0(&m, "neg", "sglang:num_running_reqs"), None, "{m}");
    assert_eq!(rank0(&m, "neg", "sglang:num_used_tokens"), None);
    assert_eq!(rank0(&m, "neg", "sglang:token_usage"), None);
    assert_eq!(rank0(&m, "neg", "sglang:num_queue_reqs"), Some(2.0));
    let errors: f64 = m
        .lines()
        .filter(|l| l.starts_with("sglang_log_exporter_field_value_errors_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(errors, 5.0, "{m}");
}

/// A stats line quoted inside another line (an exception quoting its input, a warning repeating
/// user text) is not a stats line: the rank keeps what its own last line said.
#[test]
fn stats_text_quoted_inside_another_line_is_not_read() {
    let text = format!(
        "{STATS_50}\n\
         [2026-06-03 10:00:02 TP0] Scheduler hit an exception: ValueError: bad input '[2026-06-03 10:00:02 TP0] Decode batch, #running-req: 993, #token: 9, token usage: 0.99, #queue-req: 9'\n\
         [2026-06-03 10:00:03] WARNING:  user said: [2026-06-03 10:00:03 TP0] Decode batch, #running-req: 995, #token: 9, token usage: 0.99, #queue-req: 9\n"
    );
    let m = read("quoted.log", &text);
    assert_eq!(
        rank0(&m, "quoted", "sglang:num_running_reqs"),
        Some(50.0),
        "{m}"
    );
    assert_eq!(rank0(&m, "quoted", "sglang:num_queue_reqs"), Some(4.0));
    assert_eq!(
        rank0(&m, "quoted", "sglang_decode_stats_lines_total"),
        Some(1.0)
    );
}

/// A prefix that names a rank twice (`TP0 TP1`, `DP0 DP1`) names no rank: the line is not read
/// (counted as unmatched), never filed under the last tag.
#[test]
fn a_rank_tag_given_twice_reads_no_line() {
    let text = format!(
        "{STATS_50}\n\
         [2026-06-03 10:00:01 TP0 TP1] Decode batch, #running-req: 7, #queue-req: 0\n\
         [2026-06-03 10:00:01 DP0 DP1 TP0] Decode batch, #running-req: 8, #queue-req: 0\n"
    );
    let m = read("twice.log", &text);
    assert_eq!(
        rank0(&m, "twice", "sglang:num_running_reqs"),
        Some(50.0),
        "{m}"
    );
    assert!(!m.contains("tp_rank=\"1\""), "{m}");
    assert!(!m.contains("dp_rank="), "{m}");
    let unmatched: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("sglang_log_exporter_lines_unmatched_total{"))
        .collect();
    assert_eq!(unmatched.len(), 1);
    assert!(unmatched[0].ends_with(" 2"), "{unmatched:?}");
}

/// Two lines glued into one (a writer killed mid-line, then the restarted server's first line):
/// not read as a stats line, so the rank keeps the values of its last whole line together,
/// rather than `#running-req` from the cut line and the rest from the line before.
#[test]
fn a_line_glued_to_the_next_servers_line_is_not_read() {
    let text = format!(
        "{STATS_50}\n\
         [2026-06-03 10:00:01 TP0] Decode batch, #running-req: 51, #token: 51[2026-06-03 10:05:00] INFO:     Started server process [123]\n"
    );
    let m = read("glued.log", &text);
    assert_eq!(
        rank0(&m, "glued", "sglang:num_running_reqs"),
        Some(50.0),
        "{m}"
    );
    assert_eq!(rank0(&m, "glued", "sglang:num_used_tokens"), Some(5000.0));
    assert_eq!(rank0(&m, "glued", "sglang:num_queue_reqs"), Some(4.0));
    assert_eq!(
        rank0(&m, "glued", "sglang_decode_stats_lines_total"),
        Some(1.0)
    );
}

/// A server restarted in the same log (a new `server_args` line: a restart, a new journald
/// invocation, a pod replaced under the same name) starts over: the old process's ranks and
/// startup figures are not shown under the new model, nor its capacity given to the new rank.
#[test]
fn a_restarted_server_starts_over() {
    let mut text = std::fs::read_to_string(crate::common::sample("pd-decode-session.log"))
        .expect("the sample");
    text.push_str(
        "[2026-06-03 10:30:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', served_model_name='Qwen/Qwen3-8B', tp_size=1, dp_size=1)\n\
         [2026-06-03 10:30:01 TP0] Decode batch, #running-req: 2, #token: 1234, token usage: 0.01, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0\n",
    );
    let m = read("restart.log", &text);
    let series: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("sglang:num_used_tokens{"))
        .collect();
    assert_eq!(
        series,
        [
            r#"sglang:num_used_tokens{server="restart",model_name="Qwen/Qwen3-8B",engine_type="unified",pp_rank="0",tp_rank="0",moe_ep_rank="0"} 1234"#
        ],
        "{m}"
    );
    assert!(!m.contains("sglang:max_total_num_tokens{"), "{m}");
    assert!(!m.contains("sglang_kv_pool_size_bytes{"), "{m}");
    assert!(!m.contains("DeepSeek"), "{m}");
    assert!(!m.contains("dp_rank="), "{m}");
}

/// An output that cannot be written (a full disk) fails the run with a message: a cron job must
/// not take an empty file for the result. `backfill --label` refuses a label the series carry
/// already, or one given twice (promtool refuses such samples).
#[test]
fn unwritable_output_and_clashing_labels_fail() {
    let full = || std::fs::File::create("/dev/full").expect("/dev/full");
    let log = crate::common::sample("single-gpu-2025.log");
    let log = log.to_str().expect("utf-8 path");
    for (args, code) in [
        (vec!["--once", "--gpu.disable", log], 1),
        (vec!["top", "--snapshot", log], 1),
        (vec!["check", log], 2),
    ] {
        let out = std::process::Command::new(crate::common::bin())
            .args(&args)
            .stdout(full())
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("error: writing the output failed: No space left on device"),
            "{args:?}: {err}"
        );
    }
    for (labels, msg) in [
        (
            &["--label", "server=x"][..],
            "error: --label server: the series carry a label \"server\" already",
        ),
        (
            &["--label", "job=a", "--label", "job=b"][..],
            "error: --label job: given twice",
        ),
    ] {
        let mut a = vec!["backfill", "--output", "/dev/null"];
        a.extend_from_slice(labels);
        a.push(log);
        let out = crate::common::run(&a);
        assert_eq!(out.status.code(), Some(2), "{labels:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), msg);
    }
}
