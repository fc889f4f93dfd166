//! Logs as people really have them: colour codes and carriage-return fragments, JSON envelopes,
//! several engines in one log, lines without a time, companion lines that share a label. Each
//! kind through the real binary with exact values.

use std::process::Command;

use crate::common::{bin, once, parse_exposition, run, run_with_input, Sample};

fn series<'a>(s: &'a [Sample], metric: &str) -> Vec<&'a Sample> {
    s.iter().filter(|x| x.name == metric).collect()
}

fn only(s: &[Sample], metric: &str) -> f64 {
    let v = series(s, metric);
    assert_eq!(v.len(), 1, "{metric}: {v:?}");
    v[0].value
}

/// `--once` of `text` written to a file named `name`.
fn once_text(name: &str, text: &str, extra: &[&str]) -> Vec<Sample> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, text).unwrap();
    let mut a = vec!["--gpu.disable", "--idle-after", "1000000h"];
    a.extend_from_slice(extra);
    a.push(p.to_str().unwrap());
    parse_exposition(&once(&a))
}

#[test]
fn coloured_uvicorn_access_lines_and_tqdm_fragments_are_read() {
    // uvicorn with colours on: level, request line and status each wrapped in SGR codes; a
    // tqdm bar redrawn with `\r` and erase-line before a stats line; a colour reset after the
    // last field.
    let text = "\
[2026-06-03 10:00:01] \x1b[32mINFO\x1b[0m:     127.0.0.1:5000 - \"\x1b[1mPOST /v1/chat/completions HTTP/1.1\x1b[0m\" \x1b[32m200 OK\x1b[0m
[2026-06-03 10:00:02] \x1b[32mINFO\x1b[0m:     127.0.0.1:5001 - \"\x1b[1mGET /health HTTP/1.1\x1b[0m\" \x1b[31m503 Service Unavailable\x1b[0m
 10%|#         | 1/10\r\x1b[2K 50%|#####     | 5/10\r[2026-06-03 10:00:03 TP0] Decode batch, #running-req: 7, #token: 700, token usage: 0.07, #queue-req: 2\x1b[0m
";
    let s = once_text("coloured.log", text, &[]);
    let http: Vec<(String, String, f64)> = series(&s, "sglang_access_log_requests_total")
        .iter()
        .map(|x| {
            (
                x.label("path").unwrap().to_string(),
                x.label("status").unwrap().to_string(),
                x.value,
            )
        })
        .collect();
    assert_eq!(
        http,
        [
            ("/health".to_string(), "503".to_string(), 1.0),
            ("/v1/chat/completions".to_string(), "200".to_string(), 1.0)
        ]
    );
    assert_eq!(only(&s, "sglang:num_running_reqs"), 7.0);
    assert_eq!(only(&s, "sglang:num_queue_reqs"), 2.0);
    assert_eq!(only(&s, "sglang:token_usage"), 0.07);
    assert_eq!(
        only(&s, "sglang_log_exporter_lines_control_codes_total"),
        3.0
    );
    assert_eq!(
        only(&s, "sglang_log_exporter_field_value_errors_total"),
        0.0
    );
}

#[test]
fn colour_codes_inside_a_journald_byte_array_message_are_removed() {
    // journald stores a MESSAGE with control characters as an array of bytes.
    let msg = "\x1b[36m[2026-06-03 10:00:00 DP1 TP1]\x1b[0m Decode batch, #running-req: 12, #token: 1200, token usage: 0.12, #queue-req: 0\x1b[0m";
    let bytes: Vec<String> = msg.bytes().map(|b| b.to_string()).collect();
    let line = format!(
        "{{\"MESSAGE\":[{}],\"_SYSTEMD_UNIT\":\"sglang-decode.service\",\"__REALTIME_TIMESTAMP\":\"1780480800000000\"}}\n",
        bytes.join(",")
    );
    let out = run_with_input(
        Command::new(bin()).args(["--once", "--gpu.disable", "--idle-after", "1000000h", "-"]),
        line.as_bytes(),
        "the exporter",
    );
    assert!(out.status.success());
    let s = parse_exposition(&String::from_utf8(out.stdout).unwrap());
    let r = series(&s, "sglang:num_running_reqs");
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].value, 12.0);
    assert_eq!(r[0].label("server"), Some("sglang-decode"));
    assert_eq!(r[0].label("dp_rank"), Some("1"));
    assert_eq!(only(&s, "sglang:token_usage"), 0.12);
}

#[test]
fn json_envelopes_of_runners_cloud_exports_and_shippers() {
    let decode = |t: &str, n: u32| {
        format!("[2026-06-03 {t} TP0] Decode batch, #running-req: {n}, #token: 10{n}, token usage: 0.{n}0, #queue-req: 0")
    };
    let esc = |s: &str| s.replace('"', "\\\"");
    // Three files, three shapes; the runner's own records carry no message.
    let runner = format!(
        "{{\"logger\": \"rollouts\", \"step\": 1}}\n{{\"logger\": \"sglang\", \"message\": \"{}\"}}\n{{\"logger\": \"sglang\", \"message\": \"[2026-06-03 10:00:02] INFO:     127.0.0.1:1 - \\\"POST /generate HTTP/1.1\\\" 200 OK\"}}\n",
        esc(&decode("10:00:01", 3))
    );
    let s = once_text("runner.log", &runner, &[]);
    assert_eq!(only(&s, "sglang:num_running_reqs"), 3.0);
    assert_eq!(only(&s, "sglang:token_usage"), 0.3);
    assert_eq!(only(&s, "sglang_access_log_requests_total"), 1.0);
    assert_eq!(
        only(&s, "sglang_log_exporter_json_lines_without_message_total"),
        1.0
    );

    // A cloud log export: the line in textPayload, its time in `timestamp` (which wins over the
    // prefix: 10:05:00 here, so the decode line's time is the wrapper's).
    let cloud = format!(
        "{{\"textPayload\": \"{}\", \"timestamp\": \"2026-06-03T10:05:00Z\", \"severity\": \"INFO\"}}\n{{\"jsonPayload\": {{\"message\": \"{}\"}}, \"timestamp\": \"2026-06-03T10:05:01Z\"}}\n",
        esc(&decode("10:00:01", 4)),
        esc(&decode("10:00:02", 5)),
    );
    let s = once_text("cloud.log", &cloud, &[]);
    assert_eq!(only(&s, "sglang:num_running_reqs"), 5.0);
    assert_eq!(
        only(&s, "sglang_last_stats_timestamp_seconds"),
        1780481101.0
    );

    // Vector/Loki/Fluent Bit: `message` with `@timestamp`, `line` with a ns `ts`, `log` alone;
    // and a key of the user's own with --input.json-message-key.
    let shipper = format!(
        "{{\"message\": \"{}\", \"@timestamp\": \"2026-06-03T10:06:00Z\"}}\n{{\"line\": \"{}\", \"ts\": \"1780481161000000000\"}}\n{{\"log\": \"{}\\n\"}}\n{{\"payload\": {{\"text\": \"{}\"}}}}\n",
        esc(&decode("10:00:01", 6)),
        esc(&decode("10:00:02", 7)),
        esc(&decode("10:06:02", 8)),
        esc(&decode("10:06:03", 9)),
    );
    let s = once_text(
        "shipper.log",
        &shipper,
        &["--input.json-message-key", "payload.text"],
    );
    assert_eq!(only(&s, "sglang:num_running_reqs"), 9.0);
    assert_eq!(only(&s, "sglang_decode_stats_lines_total"), 4.0);
    assert_eq!(
        only(&s, "sglang_log_exporter_json_lines_without_message_total"),
        0.0
    );
}

#[test]
fn two_ray_engines_with_tp_ranks_are_kept_apart() {
    let line = |who: &str, tp: u32, n: u32| {
        format!("\x1b[36m({who})\x1b[0m [2026-08-06 07:47:5{tp} TP{tp}] Decode batch, #running-req: {n}, #token: {n}00, token usage: 0.{n}, #queue-req: 0, \n")
    };
    let a = "SGLangEngine pid=3725811, ip=10.0.0.11";
    let b = "SGLangEngine pid=3725944, ip=10.0.0.12";
    let mut text = String::new();
    text.push_str("(SGLangEngine pid=3725811, ip=10.0.0.11) [2026-08-06 07:47:40] server_args=ServerArgs(model_path='m/a', tp_size=2)\n");
    text.push_str("(SGLangEngine pid=3725944, ip=10.0.0.12) [2026-08-06 07:47:40] server_args=ServerArgs(model_path='m/b', tp_size=2)\n");
    text.push_str(&line(a, 0, 1));
    text.push_str(&line(a, 1, 2));
    text.push_str(&line(b, 0, 3));
    text.push_str(&line(b, 1, 4));
    // Ray's deduplication note is not a field.
    text.push_str(&line(b, 1, 5).replace(", \n", ",  [repeated 3x across cluster]\n"));
    let s = once_text("driver.log", &text, &[]);
    let mut got: Vec<(String, String, String, f64)> = series(&s, "sglang:num_running_reqs")
        .iter()
        .map(|x| {
            (
                x.label("engine").unwrap().to_string(),
                x.label("model_name").unwrap().to_string(),
                x.label("tp_rank").unwrap().to_string(),
                x.value,
            )
        })
        .collect();
    got.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let e = |who: &str| who.replace(',', "");
    assert_eq!(
        got,
        [
            (e(a), "m/a".to_string(), "0".to_string(), 1.0),
            (e(a), "m/a".to_string(), "1".to_string(), 2.0),
            (e(b), "m/b".to_string(), "0".to_string(), 3.0),
            (e(b), "m/b".to_string(), "1".to_string(), 5.0),
        ]
    );
    assert_eq!(
        only(&s, "sglang_log_exporter_field_value_errors_total"),
        0.0
    );
    assert_eq!(series(&s, "sglang_server_info").len(), 2);
}

#[test]
fn timeless_lines_show_their_last_values_in_once_and_are_explained_by_backfill() {
    // SGLang before v0.2.14: no prefix, no time at all.
    let text = "\
new fill batch. #seq: 1. #cached_token: 17. #new_token: 353. #remaining_req: 1. #running_req: 3. tree_cache_hit_rate: 80.82%.
#running-req: 5, #token: 1938, token usage: 0.24, #queue-req: 0
";
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v01.log");
    std::fs::write(&p, text).unwrap();
    // The default idle policy cannot call a rank without times idle.
    let s = parse_exposition(&once(&["--gpu.disable", p.to_str().unwrap()]));
    assert_eq!(only(&s, "sglang:num_running_reqs"), 5.0);
    assert_eq!(only(&s, "sglang:token_usage"), 0.24);
    assert_eq!(only(&s, "sglang:num_used_tokens"), 1938.0);
    assert!(
        series(&s, "sglang_idle").is_empty(),
        "no time, no idle judgement"
    );
    let out = run(&["backfill", "-o", "-", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "# EOF\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: 2 stats lines were skipped: they carry no time at all"),
        "{err}"
    );
}

#[test]
fn a_companion_line_that_shares_the_label_is_not_a_batch() {
    // sglang-jax prints `Prefill batch. #bid: N, #cache_miss: N` after each real prefill line.
    let text = "\
[2025-10-11 11:18:32] Prefill batch. #new-seq: 1, #new-token: 128, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0,
[2025-10-11 11:18:33] Prefill batch. #bid: 1, #cache_miss: 1
";
    let s = once_text("jax.log", text, &[]);
    assert_eq!(only(&s, "sglang_prefill_batches_total"), 1.0);
    assert_eq!(only(&s, "sglang_prefill_new_tokens_total"), 128.0);
    assert_eq!(only(&s, "sglang_log_exporter_lines_unmatched_total"), 1.0);
}

/// A bug of ours while reading a line (a panic, injected by the test hook of
/// `src/source/fault.rs`) skips that line and is counted; the lines around it are read. The
/// count is exact: the line is applied once, as a panic, whether the parser or the state panicked.
/// The hook exists only in a build with the `fault-injection` feature (`.ci/run` turns it on).
#[cfg(feature = "fault-injection")]
#[test]
fn a_panic_while_reading_a_line_skips_and_counts_that_line_only() {
    let log = crate::common::sample("pd-decode-session.log");
    let decode_lines = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|l| l.contains("Decode batch"))
        .count();
    assert!(decode_lines > 1000, "{decode_lines}");
    let out = Command::new(bin())
        .args(["--once", "--gpu.disable", log.to_str().unwrap()])
        .env("SGLANG_LOG_EXPORTER_FAULT", "parse:Decode batch")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let panics = crate::common::value(
        &text,
        &format!(
            "sglang_log_exporter_source_panics_total{{source=\"{}\"}}",
            log.display()
        ),
    );
    assert_eq!(panics, Some(decode_lines as f64));
    // The start-up facts (other lines) are there; no decode gauge is.
    assert_eq!(
        crate::common::samples(&text, "sglang_kv_pool_capacity_tokens").len(),
        4
    );
    assert!(crate::common::samples(&text, "sglang:num_running_reqs").is_empty());
}

/// Paths given on the command line: a socket (or block device) is no log file and is refused
/// at start; a character device is read as a stream (`/dev/null` here: an empty input; a
/// terminal or `/dev/stdin` in use); a file whose name would be a `--journal-unit`'s server is
/// refused as two such files are (their lines would merge unasked), and `NAME=PATH` names it.
#[test]
fn devices_sockets_and_unit_names_among_explicit_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("sock.log");
    let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    for once_flag in [true, false] {
        let mut args = vec!["--gpu.disable", sock.to_str().unwrap()];
        if once_flag {
            args.insert(0, "--once");
        }
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is a socket, not a log file"), "{err}");
    }
    let m = parse_exposition(&once(&["--gpu.disable", "/dev/null"]));
    let read: Vec<_> = series(&m, "sglang_log_exporter_lines_read_total");
    assert_eq!(read.len(), 1);
    assert_eq!(
        (read[0].label("source"), read[0].value),
        (Some("/dev/null"), 0.0)
    );

    let log = dir.path().join("sglang-decode.log");
    std::fs::write(&log, "").unwrap();
    let out = run(&[
        "--once",
        "--gpu.disable",
        "--journal-unit",
        "sglang-decode",
        log.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "would be server \"sglang-decode\", like --journal-unit sglang-decode.service"
        ) && err.contains("NAME=PATH"),
        "{err}"
    );
}

#[test]
fn a_wrapped_line_dirty_in_both_layers_is_counted_once() {
    // A Fluentd `out_file` line holding a Docker record: the record carries a raw ESC and an
    // invalid UTF-8 byte, and its message, once unescaped, carries a `\u001b` colour code and
    // the same bad byte again. Both layers are cleaned; each per-line counter counts the line
    // once (the fuzz harness had found control codes counted twice for one line).
    let mut text = Vec::new();
    for (t, n) in [("10:00:01", 5), ("10:00:02", 6)] {
        text.extend_from_slice(
            format!(
                "2026-06-03T{t}+0000\tdocker.a\t{{\"log\":\"\x1b[0m\u{1b}[0m[2026-06-03 {t} TP0] Decode batch, #running-req: {n}, #token: 500, token usage: 0.05, #queue-req: 0 \\u001b[0m"
            )
            .as_bytes(),
        );
        text.extend_from_slice(b"\xff\\n\",\"stream\":\"stderr\"}\n");
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fluentd.log");
    std::fs::write(&p, &text).unwrap();
    let s = parse_exposition(&once(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        p.to_str().unwrap(),
    ]));
    assert_eq!(only(&s, "sglang:num_running_reqs"), 6.0);
    assert_eq!(
        only(&s, "sglang_log_exporter_lines_control_codes_total"),
        2.0
    );
    assert_eq!(
        only(&s, "sglang_log_exporter_lines_invalid_utf8_total"),
        2.0
    );
}
