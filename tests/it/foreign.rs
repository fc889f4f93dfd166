//! Foreign prefixes found wrong by the closing trial (src/parse/foreign.rs, src/parse/words.rs,
//! src/pipeline/gpus.rs): each input as `--once` reads it, its exact series.

use crate::common::once_on as read;
use crate::common::value;

const TP0: &str = r#"pp_rank="0",tp_rank="0",moe_ep_rank="0""#;

/// `metric` of server `server`, engine `engine` (none when empty), ranks `ranks`.
fn of(m: &str, metric: &str, server: &str, engine: &str, ranks: &str) -> Option<f64> {
    let engine = match engine {
        "" => String::new(),
        e => format!("engine=\"{e}\","),
    };
    value(
        m,
        &format!(
            r#"{metric}{{server="{server}",{engine}model_name="",engine_type="unified",{ranks}}}"#
        ),
    )
}

fn decode(running: u32, queued: u32) -> String {
    format!("Decode batch. #running-req: {running}, #token: {}, token usage: 0.{running:02}, gen throughput (token/s): 10.00, #queue-req: {queued}", running * 100)
}

/// The series of `metric` in `m`.
fn series<'a>(m: &'a str, metric: &str) -> Vec<&'a str> {
    let start = format!("{metric}{{");
    m.lines().filter(|l| l.starts_with(&start)).collect()
}

fn unmatched(m: &str) -> f64 {
    m.lines()
        .filter(|l| l.starts_with("sglang_log_exporter_lines_unmatched_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

/// A sequence number, a counter, a PID, a request counter and glog's thread id changed on every
/// line and made an engine of each line: one rank is one series, its last line's values, and
/// glog's `I1210` gives the line its date (the year of the log's dated lines before it).
#[test]
fn per_line_tokens_make_no_engines() {
    let lines = [
        format!("[2025-12-10 14:02:10.000 seq=1 TP0] {}", decode(1, 0)),
        format!("[2025-12-10 14:02:10.100 seq=2 TP0] {}", decode(2, 0)),
        format!("[2025-12-10 14:02:10.200 #3 TP0] {}", decode(3, 0)),
        format!("[2025-12-10 14:02:10.300 pid=4101 TP0] {}", decode(4, 0)),
        format!("[2025-12-10 14:02:10.400 req#17 TP0] {}", decode(5, 0)),
        format!(
            "I1210 14:02:11.500000 140234 scheduler.py:1234] {}",
            decode(6, 1)
        ),
        format!(
            "I1210 14:02:12.250000 140235 scheduler.py:1234] {}",
            decode(7, 2)
        ),
    ];
    let m = read("glog.log", &(lines.join("\n") + "\n"));
    assert_eq!(series(&m, "sglang:num_running_reqs").len(), 1, "{m}");
    assert!(!m.contains("engine="), "{m}");
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "glog", "", TP0),
        Some(7.0)
    );
    assert_eq!(of(&m, "sglang:num_queue_reqs", "glog", "", TP0), Some(2.0));
    // 2025-12-10 14:02:12.25 UTC.
    assert_eq!(
        of(&m, "sglang_last_stats_timestamp_seconds", "glog", "", TP0),
        Some(1_765_375_332.25)
    );
    assert_eq!(unmatched(&m), 0.0, "{m}");
}

/// Request, trace and session ids in a prefix (a bare UUID, `req-<uuid>`, a 32-digit trace
/// id, `x_request_id=…`, `correlation_id=…`, `session=<hex>`) are new at every line and made
/// an engine of each line (four lines of two ranks were four series): two ranks are two
/// series, each its last line's values; a worker's name beside them stays the engine.
#[test]
fn request_and_trace_ids_make_no_engines() {
    let lines = [
        format!(
            "[2026-06-03 10:00:00 3fa85f64-5717-4562-b3fc-2c963f66afa6 TP0] {}",
            decode(1, 0)
        ),
        format!(
            "[2026-06-03 10:00:01 req-0b9e7a8c-1d2e-4f30-8a41-52c6d7e8f901 TP1] {}",
            decode(2, 0)
        ),
        format!(
            "[2026-06-03 10:00:02 4bf92f3577b34da6a3ce929d0e0e4736 TP0] {}",
            decode(3, 1)
        ),
        format!(
            "[2026-06-03 10:00:03 x_request_id=5f3a1c2e TP1] {}",
            decode(4, 2)
        ),
        format!(
            "[2026-06-03 10:00:04 correlation_id=abc7x TP0] {}",
            decode(5, 3)
        ),
        format!(
            "[2026-06-03 10:00:05 session=00f067aa0ba902b7 TP1] {}",
            decode(6, 4)
        ),
    ];
    let m = read("ids.log", &(lines.join("\n") + "\n"));
    assert_eq!(series(&m, "sglang:num_running_reqs").len(), 2, "{m}");
    assert!(!m.contains("engine="), "{m}");
    let tp1 = r#"pp_rank="0",tp_rank="1",moe_ep_rank="0""#;
    assert_eq!(of(&m, "sglang:num_running_reqs", "ids", "", TP0), Some(5.0));
    assert_eq!(of(&m, "sglang:num_queue_reqs", "ids", "", TP0), Some(3.0));
    assert_eq!(of(&m, "sglang:num_running_reqs", "ids", "", tp1), Some(6.0));
    assert_eq!(of(&m, "sglang:num_queue_reqs", "ids", "", tp1), Some(4.0));
    assert_eq!(unmatched(&m), 0.0, "{m}");

    let lines = [
        format!(
            "[2026-06-03 10:00:00 Worker 1 trace_id=4bf92f3577b34da6 TP0] {}",
            decode(1, 0)
        ),
        format!(
            "[2026-06-03 10:00:01 Worker 1 traceId=a3ce929d0e0e4736 TP0] {}",
            decode(2, 0)
        ),
    ];
    let m = read("ids.log", &(lines.join("\n") + "\n"));
    assert_eq!(series(&m, "sglang:num_running_reqs").len(), 1, "{m}");
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "ids", "Worker 1", TP0),
        Some(2.0)
    );
}

/// A launcher's brackets after SGLang's own time (`[TIME] [worker-3] [TP1] Decode batch`): the
/// own prefix gave the time and no rank, and the rank tags after it were not read, so TP0 and
/// TP1 were one series taking turns with each other's values (found by this stop's trial).
#[test]
fn rank_tags_in_a_bracket_after_sglangs_own_time_are_ranks() {
    let lines = [
        format!("[2026-06-03 10:00:01] [worker-3] [TP0] {}", decode(1, 0)),
        format!("[2026-06-03 10:00:02] [worker-3] [TP1] {}", decode(2, 0)),
        format!("[2026-06-03 10:00:03] [worker-3] [TP0] {}", decode(3, 1)),
        format!("[2026-06-03 10:00:04] [worker-3] [TP1] {}", decode(4, 2)),
    ];
    let m = read("after.log", &(lines.join("\n") + "\n"));
    assert_eq!(series(&m, "sglang:num_running_reqs").len(), 2, "{m}");
    let tp1 = r#"pp_rank="0",tp_rank="1",moe_ep_rank="0""#;
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "after", "worker-3", TP0),
        Some(3.0)
    );
    assert_eq!(
        of(&m, "sglang:num_queue_reqs", "after", "worker-3", TP0),
        Some(1.0)
    );
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "after", "worker-3", tp1),
        Some(4.0)
    );
    assert_eq!(
        of(&m, "sglang:num_queue_reqs", "after", "worker-3", tp1),
        Some(2.0)
    );
    // The time is SGLang's own (10:00:03 and 10:00:04 UTC on 2026-06-03).
    assert_eq!(
        of(
            &m,
            "sglang_last_stats_timestamp_seconds",
            "after",
            "worker-3",
            tp1
        ),
        Some(1_780_480_804.0)
    );
    assert_eq!(unmatched(&m), 0.0, "{m}");
}

/// glog's prefix, then SGLang's rank tag before the body (`…scheduler.py:1234] TP1 Decode
/// batch`): the tag after the prefix's `]` was not read, so two ranks were one untagged rank
/// (found by this stop's trial). The thread id (12345, 12346) names no writer.
#[test]
fn a_rank_tag_after_a_glog_prefix_is_the_rank() {
    let lines = [
        format!(
            "I0603 10:00:01.123456 12345 scheduler.py:1234] TP0 {}",
            decode(1, 0)
        ),
        format!(
            "I0603 10:00:02.123456 12346 scheduler.py:1234] TP1 {}",
            decode(2, 0)
        ),
        format!(
            "I0603 10:00:03.123456 12345 scheduler.py:1234] TP0 {}",
            decode(3, 1)
        ),
        format!(
            "I0603 10:00:04.123456 12346 scheduler.py:1234] TP 1 {}",
            decode(4, 2)
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("glog.log");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let m = crate::common::once(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        "--log.level",
        "error",
        "--date",
        "2026-06-03",
        p.to_str().unwrap(),
    ]);
    assert_eq!(series(&m, "sglang:num_running_reqs").len(), 2, "{m}");
    let tp1 = r#"pp_rank="0",tp_rank="1",moe_ep_rank="0""#;
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "glog", "", TP0),
        Some(3.0)
    );
    assert_eq!(of(&m, "sglang:num_queue_reqs", "glog", "", TP0), Some(1.0));
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "glog", "", tp1),
        Some(4.0)
    );
    assert_eq!(of(&m, "sglang:num_queue_reqs", "glog", "", tp1), Some(2.0));
    assert_eq!(
        of(&m, "sglang_last_stats_timestamp_seconds", "glog", "", tp1),
        Some(1_780_480_804.123456)
    );
    assert_eq!(unmatched(&m), 0.0, "{m}");
}

/// Two schedulers of TP0 on GPUs 0 and 4 (two servers on one host) were merged into one rank:
/// they are two series, each with its own values; one server's ranks on their GPUs stay one.
#[test]
fn two_gpus_of_one_rank_are_two_series() {
    let text = format!(
        "[2025-12-10 14:02:13.100 GPU=0 TP=0] {}\n[2025-12-10 14:02:13.150 GPU=1 TP=1] {}\n[2025-12-10 14:02:13.200 GPU=4 TP=0] {}\n[2025-12-10 14:02:13.300 GPU=0 TP=0] {}\n",
        decode(5, 2),
        decode(6, 0),
        decode(7, 3),
        decode(8, 1)
    );
    let m = read("gpus.log", &text);
    let tp1 = r#"pp_rank="0",tp_rank="1",moe_ep_rank="0""#;
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "gpus", "", TP0),
        Some(8.0),
        "{m}"
    );
    assert_eq!(of(&m, "sglang:num_queue_reqs", "gpus", "", TP0), Some(1.0));
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "gpus", "", tp1),
        Some(6.0)
    );
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "gpus", "GPU=4", TP0),
        Some(7.0)
    );
    assert_eq!(
        of(&m, "sglang:num_queue_reqs", "gpus", "GPU=4", TP0),
        Some(3.0)
    );
    assert_eq!(
        of(
            &m,
            "sglang_last_stats_timestamp_seconds",
            "gpus",
            "GPU=4",
            TP0
        ),
        Some(1_765_375_333.2)
    );
    assert_eq!(series(&m, "sglang:num_running_reqs").len(), 3, "{m}");
}

/// `tp=0`, `TP 1`, `tp_rank=2`, `dp=1`, `DP 1` became engines (`engine="tp=0"`): they are
/// ranks of the writer `node-a`; a rank-shaped word without a number is refused and counted.
#[test]
fn rank_tags_in_every_spelling_are_ranks() {
    let text = format!(
        "[2025-12-10 14:02:13 node-a tp=0] {}\n[2025-12-10 14:02:13 node-a TP 1] {}\n[2025-12-10 14:02:13 node-a tp_rank=2] {}\n[2025-12-10 14:02:13 node-a dp=1 tp=3] {}\n[2025-12-10 14:02:13 node-a DP 1 TP 4] {}\n[2025-12-10 14:02:13 node-a tp=x] {}\n",
        decode(10, 0),
        decode(11, 0),
        decode(12, 0),
        decode(13, 0),
        decode(14, 0),
        decode(99, 0)
    );
    let m = read("ranks.log", &text);
    let r = |dp: Option<u32>, tp: u32| match dp {
        Some(d) => format!(r#"dp_rank="{d}",pp_rank="0",tp_rank="{tp}",moe_ep_rank="0""#),
        None => format!(r#"pp_rank="0",tp_rank="{tp}",moe_ep_rank="0""#),
    };
    for (dp, tp, want) in [
        (None, 0, 10.0),
        (None, 1, 11.0),
        (None, 2, 12.0),
        (Some(1), 3, 13.0),
        (Some(1), 4, 14.0),
    ] {
        assert_eq!(
            of(&m, "sglang:num_running_reqs", "ranks", "node-a", &r(dp, tp)),
            Some(want),
            "dp {dp:?} tp {tp}: {m}"
        );
    }
    assert_eq!(series(&m, "sglang:num_running_reqs").len(), 5, "{m}");
    assert!(!m.to_lowercase().contains("engine=\"node-a tp"), "{m}");
    assert_eq!(unmatched(&m), 1.0, "{m}");
}

/// A bracket of 100 to 200 digits became an engine, one of 300 did not: a run of digits is no
/// writer at any length (the line is its rank's); a prefix too long to read is refused.
#[test]
fn a_bracket_of_digits_is_never_an_engine() {
    let mut text = String::new();
    for (i, n) in [1usize, 20, 99, 100, 150, 200, 220].iter().enumerate() {
        text += &format!(
            "[{} 2025-12-10 14:02:1{i} TP1] {}\n",
            "4".repeat(*n),
            decode(20 + i as u32, 0)
        );
    }
    text += &format!("[{} TP1] {}\n", "4".repeat(300), decode(99, 0));
    let m = read("digits.log", &text);
    let tp1 = r#"pp_rank="0",tp_rank="1",moe_ep_rank="0""#;
    assert!(!m.contains("engine="), "{m}");
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "digits", "", tp1),
        Some(26.0),
        "{m}"
    );
    assert_eq!(series(&m, "sglang:num_running_reqs").len(), 1, "{m}");
    assert_eq!(unmatched(&m), 1.0, "{m}");
}
