//! Wrapped and special inputs through `--once`: container runtime log files (CRI, Docker
//! json-file), journald JSON on stdin, hybrid-model derivations, time-only prefixes, and the
//! cardinality bound.

use std::process::Command;

use crate::common::{bin, once, run_with_input, samples, value};

fn get(expo: &str, series: &str) -> f64 {
    value(expo, series).unwrap_or_else(|| panic!("no series {series} in:\n{expo}"))
}

fn labels(server: &str, tp: &str) -> String {
    format!("{{server=\"{server}\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\"}}")
}

#[test]
fn kubernetes_cri_file_with_a_partial_record() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("pod.log");
    std::fs::write(
        &p,
        "2026-06-03T10:00:00.000000001Z stderr P [2026-06-03 10:00:00 TP0] Decode batch, #running-req: 12, #token: 1200, token usage: 0.\n\
         2026-06-03T10:00:00.000000002Z stderr F 30, cuda graph: True, gen throughput (token/s): 99.00, #queue-req: 4\n\
         2026-06-03T10:00:01.5Z stdout F [2026-06-03 10:00:01] INFO:     10.0.0.1:5000 - \"GET /health HTTP/1.1\" 200 OK\n",
    )
    .unwrap();
    let expo = once(&["--idle-after", "1h", p.to_str().unwrap()]);
    let l = labels("pod", "0");
    assert_eq!(get(&expo, &format!("sglang:token_usage{l}")), 0.30);
    assert_eq!(get(&expo, &format!("sglang:num_queue_reqs{l}")), 4.0);
    // The CRI record time (not the SGLang prefix) is the sample time.
    assert_eq!(
        get(&expo, &format!("sglang_last_stats_timestamp_seconds{l}")),
        1780480800.000000001
    );
    assert_eq!(samples(&expo, "sglang_access_log_requests_total").len(), 1);
}

#[test]
fn docker_json_file_with_a_split_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("container-json.log");
    std::fs::write(
        &p,
        "{\"log\":\"[2026-06-03 10:00:00 DP1 TP1] Decode batch, #running-req: 3, #tok\",\"stream\":\"stderr\",\"time\":\"2026-06-03T10:00:00.25Z\"}\n\
         {\"log\":\"en: 300, token usage: 0.01, cuda graph: False, gen throughput (token/s): 5.00, #queue-req: 0\\n\",\"stream\":\"stderr\",\"time\":\"2026-06-03T10:00:00.3Z\"}\n",
    )
    .unwrap();
    let expo = once(&["--idle-after", "1h", p.to_str().unwrap()]);
    let l = "{server=\"container-json\",model_name=\"\",engine_type=\"unified\",dp_rank=\"1\",pp_rank=\"0\",tp_rank=\"1\",moe_ep_rank=\"0\"}";
    assert_eq!(get(&expo, &format!("sglang:num_used_tokens{l}")), 300.0);
    assert_eq!(get(&expo, &format!("sglang:is_cuda_graph{l}")), 0.0);
    assert_eq!(
        get(&expo, &format!("sglang_last_stats_timestamp_seconds{l}")),
        1780480800.25
    );
}

#[test]
fn journald_json_on_stdin_names_servers_by_unit() {
    let export = std::fs::read_to_string(crate::common::root().join("samples/journal-export.txt"))
        .unwrap_or_default();
    // Turn the export format into `journalctl -o json` lines (MESSAGE, unit, realtime).
    let mut json = String::new();
    for entry in export.split("\n\n") {
        let field = |k: &str| {
            entry
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")))
                .map(str::to_string)
        };
        if let (Some(m), Some(u), Some(t)) = (
            field("MESSAGE"),
            field("_SYSTEMD_UNIT"),
            field("__REALTIME_TIMESTAMP"),
        ) {
            let m = m.replace('\\', "\\\\").replace('"', "\\\"");
            json.push_str(&format!("{{\"MESSAGE\":\"{m}\",\"_SYSTEMD_UNIT\":\"{u}\",\"__REALTIME_TIMESTAMP\":\"{t}\"}}\n"));
        }
    }
    assert_eq!(json.lines().count(), 201);
    let out = run_with_input(
        Command::new(bin()).args(["--once", "--idle-after", "1h", "-"]),
        json.as_bytes(),
        "the exporter",
    );
    assert!(out.status.success());
    let expo = String::from_utf8(out.stdout).unwrap();
    let info = samples(&expo, "sglang_server_info");
    assert_eq!(info.len(), 2, "{info:?}"); // sglang-decode, sglang-prefill
    let dec = |n: u32| {
        format!("{{server=\"sglang-decode\",model_name=\"deepseek-ai/DeepSeek-V3\",engine_type=\"decode\",dp_rank=\"{n}\",pp_rank=\"0\",tp_rank=\"{n}\",moe_ep_rank=\"0\"}}")
    };
    // The last entry: 10:07:50 DP0 TP0, #running-req 55, #token 764782.
    assert_eq!(
        get(&expo, &format!("sglang:num_running_reqs{}", dec(0))),
        55.0
    );
    assert_eq!(
        get(&expo, &format!("sglang:num_used_tokens{}", dec(0))),
        764782.0
    );
    assert_eq!(
        get(&expo, &format!("sglang_retractions_total{}", dec(3))),
        1.0
    );
    let pre = "{server=\"sglang-prefill\",model_name=\"deepseek-ai/DeepSeek-V3\",engine_type=\"prefill\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"}";
    assert_eq!(
        get(&expo, &format!("sglang:max_total_num_tokens{pre}")),
        1070080.0
    );
}

#[test]
fn hybrid_models_derive_used_tokens_and_usage_from_the_largest_pool() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("hybrid.log");
    std::fs::write(
        &p,
        "[2025-07-06 09:05:00 TP0] Decode batch. #running-req: 4, #token: full=20480, swa=8192, token usage: full=0.10, swa=0.25, cuda graph: True, gen throughput (token/s): 300.55, #queue-req: 0\n\
         [2025-10-16 10:00:00 TP1] Decode batch. #running-req: 8, #full token: 42000, full token usage: 0.20, mamba num: 16, mamba usage: 0.05, accept len: 3.12, accept rate: 0.78, cuda graph: True, gen throughput (token/s): 1320.50, #queue-req: 0, \n",
    )
    .unwrap();
    let expo = once(&["--idle-after", "100000h", p.to_str().unwrap()]);
    let l0 = labels("hybrid", "0");
    assert_eq!(get(&expo, &format!("sglang:num_used_tokens{l0}")), 20480.0);
    assert_eq!(get(&expo, &format!("sglang:token_usage{l0}")), 0.25);
    assert_eq!(
        get(&expo, &format!("sglang_swa_pool_used_tokens{l0}")),
        8192.0
    );
    assert_eq!(get(&expo, &format!("sglang:swa_token_usage{l0}")), 0.25);
    let l1 = labels("hybrid", "1");
    assert_eq!(get(&expo, &format!("sglang:num_used_tokens{l1}")), 42000.0);
    assert_eq!(get(&expo, &format!("sglang:token_usage{l1}")), 0.20);
    assert_eq!(get(&expo, &format!("sglang:mamba_usage{l1}")), 0.05);
    assert_eq!(get(&expo, &format!("sglang_mamba_used_slots{l1}")), 16.0);
    assert_eq!(get(&expo, &format!("sglang:spec_accept_rate{l1}")), 0.78);
}

#[test]
fn time_only_prefixes_take_the_date_option_and_roll_over_midnight() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("old.log");
    std::fs::write(
        &p,
        "[23:59:58 TP0] Decode batch. #running-req: 1, #token: 10, token usage: 0.00, gen throughput (token/s): 1.00, #queue-req: 0\n\
         [00:00:03 TP0] Decode batch. #running-req: 2, #token: 20, token usage: 0.00, gen throughput (token/s): 2.00, #queue-req: 0\n",
    )
    .unwrap();
    let expo = once(&["--date", "2024-10-01", p.to_str().unwrap()]);
    let l = labels("old", "0");
    // 2024-10-02 00:00:03 UTC.
    assert_eq!(
        get(&expo, &format!("sglang_last_stats_timestamp_seconds{l}")),
        1727827203.0
    );
    assert_eq!(get(&expo, &format!("sglang:num_running_reqs{l}")), 2.0);
}

#[test]
fn a_flood_of_ranks_is_bounded_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("flood.log");
    let mut text = String::new();
    for tp in 0..1500 {
        text.push_str(&format!("[2026-06-03 10:00:00 TP{tp}] Decode batch, #running-req: 1, #token: 1, token usage: 0.00, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0\n"));
    }
    for i in 0..400 {
        text.push_str(&format!(
            "[2026-06-03 10:00:00] INFO:     1.2.3.4:5 - \"GET /scan/{i} HTTP/1.1\" {} OK\n",
            200 + i % 300
        ));
    }
    std::fs::write(&p, text).unwrap();
    let expo = once(&[p.to_str().unwrap()]);
    assert_eq!(samples(&expo, "sglang:num_running_reqs").len(), 1024);
    // Unknown paths all read `other`; statuses 200-499 are 300 distinct series, of which 256 fit.
    let http = samples(&expo, "sglang_access_log_requests_total");
    assert_eq!(http.len(), 256);
    assert!(http.iter().all(|l| l.contains("path=\"other\"")));
    // Dropped: 476 ranks, and the 44 lines whose status was the 257th-300th distinct one (the
    // last 100 lines repeat statuses 200-299, which fit).
    assert_eq!(
        get(&expo, "sglang_log_exporter_series_dropped_total"),
        476.0 + 44.0
    );
}
