//! Hostile wrapper JSON lines (the kind of repro 23, on src/pipeline/framing.rs): a Docker
//! `json-file` record with thousands of keys beside its `log`, and one whose labels nest
//! deeper than any label set, in one file with plain records.

use crate::common::once_on as read;
use crate::common::value;

#[test]
fn a_record_of_thousands_of_keys_is_read_exactly_and_a_bad_one_counted() {
    let decode = |running: u32| {
        format!("[2026-06-03 10:00:0{running} TP0] Decode batch. #running-req: {running}, #token: 100, token usage: 0.10, gen throughput (token/s): 10.00, #queue-req: 0\\n")
    };
    let junk: Vec<String> = (0..50_000)
        .map(|i| format!("\"k{i}\":{{\"a\":[0]}}"))
        .collect();
    let text = format!(
        "{{\"log\":\"{}\",\"stream\":\"stderr\"}}\n{{{},\"log\":\"{}\",\"stream\":\"stderr\"}}\n{{\"log\":\"{}\",\"labels\":{}1{}}}\n",
        decode(1),
        junk.join(","),
        decode(2),
        decode(3),
        "{\"a\":".repeat(50),
        "}".repeat(50)
    );
    let m = read("docker.log", &text);
    let series = |name: &str| {
        value(
            &m,
            &format!(
                r#"{name}{{server="docker",model_name="",engine_type="unified",pp_rank="0",tp_rank="0",moe_ep_rank="0"}}"#
            ),
        )
    };
    // The record of 50,000 keys is read: its line's values and time are the rank's last.
    assert_eq!(series("sglang:num_running_reqs"), Some(2.0), "{m}");
    assert_eq!(
        series("sglang_last_stats_timestamp_seconds"),
        Some(1_780_480_802.0)
    );
    // The one with labels of no label set is not read, and counted.
    let incomplete: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("sglang_log_exporter_lines_incomplete_total{"))
        .collect();
    assert_eq!(incomplete.len(), 1, "{m}");
    assert!(incomplete[0].ends_with("docker.log\"} 1"), "{m}");
    assert!(!m.contains("engine="), "{m}");
}
