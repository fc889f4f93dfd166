//! `--once` on whole sample sessions: exact series at the end of each log, the idle policy judged
//! by the log's own clock, exit status 2 for bad inputs, and a golden exposition.

use crate::common::{once, run, sample, samples, value};

/// The label set of a rank of the PD decode sample (`DPn TPn`, no PP/EP tags).
fn decode_rank(server: &str, n: u32) -> String {
    format!(
        "{{server=\"{server}\",model_name=\"deepseek-ai/DeepSeek-V3\",engine_type=\"decode\",dp_rank=\"{n}\",pp_rank=\"0\",tp_rank=\"{n}\",moe_ep_rank=\"0\"}}"
    )
}

fn get(expo: &str, name: &str, labels: &str) -> f64 {
    let series = format!("{name}{labels}");
    value(expo, &series).unwrap_or_else(|| panic!("no series {series} in:\n{expo}"))
}

#[test]
fn pd_decode_session_end_state_is_the_last_stats_line_by_log_clock() {
    let p = sample("pd-decode-session.log");
    let expo = once(&["--idle-after", "2m", p.to_str().unwrap()]);
    let s = "pd-decode-session";
    // The log clock is the last timed line: the /health access line at 10:18:46. Every rank's
    // last decode line (10:17:31-36) is within --idle-after (2 m here) of it: each shows that
    // line's values (with the default 30 s they read idle: a_log_that_goes_on_quietly_...).
    let last = [
        // (running, #token, token usage, gen throughput)
        (1.0, 2290.0, 0.00, 41.99),
        (1.0, 2707.0, 0.00, 63.66),
        (1.0, 5035.0, 0.01, 77.84),
        (1.0, 5226.0, 0.01, 41.25),
    ];
    for (n, (running, tokens, usage, gen)) in last.iter().enumerate() {
        let l = decode_rank(s, n as u32);
        assert_eq!(get(&expo, "sglang:num_running_reqs", &l), *running);
        assert_eq!(get(&expo, "sglang:num_used_tokens", &l), *tokens);
        assert_eq!(get(&expo, "sglang:token_usage", &l), *usage);
        assert_eq!(get(&expo, "sglang:gen_throughput", &l), *gen);
        assert_eq!(get(&expo, "sglang_idle", &l), 0.0);
    }
    for n in 0..4 {
        let l = decode_rank(s, n);
        // Capacity: the rank-0 capacity line applies to every rank; each rank's own KV line.
        assert_eq!(get(&expo, "sglang:max_total_num_tokens", &l), 786432.0);
        assert_eq!(get(&expo, "sglang:context_len", &l), 163840.0);
        assert_eq!(get(&expo, "sglang_kv_pool_capacity_tokens", &l), 786432.0);
        // 51.47 GB (2^30 bytes each) = 55265491681.28 bytes.
        assert_eq!(get(&expo, "sglang_kv_pool_size_bytes", &l), 55265491681.28);
        // Graph flag is not an activity gauge: it keeps the last value.
        assert_eq!(get(&expo, "sglang:is_cuda_graph", &l), 1.0);
    }
    let decode_lines = [597.0, 514.0, 512.0, 546.0];
    for (n, want) in decode_lines.iter().enumerate() {
        assert_eq!(
            get(
                &expo,
                "sglang_decode_stats_lines_total",
                &decode_rank(s, n as u32)
            ),
            *want
        );
    }
    // 10:17:36 (DP0's last line) as Unix seconds.
    assert_eq!(
        get(
            &expo,
            "sglang_last_stats_timestamp_seconds",
            &decode_rank(s, 0)
        ),
        1780481856.0
    );
    // Retractions: DP3 at 10:07:40 (16040 tokens freed), DP2 at 10:09:36 (12436).
    assert_eq!(
        get(&expo, "sglang_retractions_total", &decode_rank(s, 3)),
        1.0
    );
    assert_eq!(
        get(&expo, "sglang_retracted_requests_total", &decode_rank(s, 3)),
        1.0
    );
    assert_eq!(
        get(
            &expo,
            "sglang_retract_freed_tokens_total",
            &decode_rank(s, 3)
        ),
        16040.0
    );
    assert_eq!(
        get(
            &expo,
            "sglang_retract_freed_tokens_total",
            &decode_rank(s, 2)
        ),
        12436.0
    );
    assert_eq!(
        get(&expo, "sglang:new_token_ratio", &decode_rank(s, 2)),
        0.4036
    );
    // Ranks that never retracted read 0 (counters exist from a rank's first stats line, so an
    // alert on `increase()` sees the first retraction).
    assert_eq!(samples(&expo, "sglang_retractions_total").len(), 4);
    assert_eq!(
        get(&expo, "sglang_retractions_total", &decode_rank(s, 0)),
        0.0
    );
    assert_eq!(
        get(&expo, "sglang_retracted_requests_total", &decode_rank(s, 1)),
        0.0
    );
    // Access lines: 476 chat completions, 37 health checks, 1 generate, 1 model info.
    let http = |m: &str, p: &str| {
        format!("{{server=\"{s}\",model_name=\"deepseek-ai/DeepSeek-V3\",engine_type=\"decode\",method=\"{m}\",path=\"{p}\",status=\"200\"}}")
    };
    assert_eq!(
        get(
            &expo,
            "sglang_access_log_requests_total",
            &http("POST", "/v1/chat/completions")
        ),
        476.0
    );
    assert_eq!(
        get(
            &expo,
            "sglang_access_log_requests_total",
            &http("GET", "/health")
        ),
        37.0
    );
    assert_eq!(
        get(
            &expo,
            "sglang_access_log_requests_total",
            &http("POST", "/generate")
        ),
        1.0
    );
    assert_eq!(
        get(
            &expo,
            "sglang_access_log_requests_total",
            &http("GET", "/get_model_info")
        ),
        1.0
    );
    assert_eq!(
        get(
            &expo,
            "sglang_server_info",
            &format!("{{server=\"{s}\",model_name=\"deepseek-ai/DeepSeek-V3\",engine_type=\"decode\",tp_size=\"4\",dp_size=\"4\",pp_size=\"1\",url=\"http://127.0.0.1:30001\"}}")
        ),
        1.0
    );
    // Every line of the file is accounted for.
    let src = format!("{{source=\"{}\"}}", p.display());
    assert_eq!(
        get(&expo, "sglang_log_exporter_lines_read_total", &src),
        2727.0
    );
    assert_eq!(
        get(&expo, "sglang_log_exporter_lines_unmatched_total", &src),
        27.0
    );
}

#[test]
fn pd_decode_mid_traffic_shows_the_last_line_of_each_rank() {
    // The log cut at 10:07:50, while every rank is busy (token usage 0.94-0.97).
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(sample("pd-decode-session.log")).unwrap();
    let cut: String = text.lines().take(1230).map(|l| format!("{l}\n")).collect();
    let path = dir.path().join("busy.log");
    std::fs::write(&path, cut).unwrap();
    let expo = once(&[path.to_str().unwrap()]);
    // (running, #token, token usage, gen throughput, #prealloc-req, #retracted-req, cuda graph)
    let want = [
        (55.0, 764782.0, 0.97, 1230.74, 9.0, 0.0),
        (56.0, 741902.0, 0.94, 1241.48, 0.0, 0.0),
        (57.0, 765415.0, 0.97, 1263.72, 7.0, 0.0),
        (54.0, 750425.0, 0.95, 1196.08, 7.0, 1.0),
    ];
    for (n, w) in want.iter().enumerate() {
        let l = decode_rank("busy", n as u32);
        assert_eq!(get(&expo, "sglang:num_running_reqs", &l), w.0, "rank {n}");
        assert_eq!(get(&expo, "sglang:num_used_tokens", &l), w.1, "rank {n}");
        assert_eq!(get(&expo, "sglang:token_usage", &l), w.2, "rank {n}");
        assert_eq!(get(&expo, "sglang:gen_throughput", &l), w.3, "rank {n}");
        assert_eq!(
            get(&expo, "sglang:num_decode_prealloc_queue_reqs", &l),
            w.4,
            "rank {n}"
        );
        assert_eq!(
            get(&expo, "sglang_decode_retracted_queue_requests", &l),
            w.5,
            "rank {n}"
        );
        assert_eq!(get(&expo, "sglang:is_cuda_graph", &l), 0.0, "rank {n}");
        assert_eq!(get(&expo, "sglang_idle", &l), 0.0, "rank {n}");
    }
}

#[test]
fn idle_after_decides_what_the_end_of_an_old_log_shows() {
    // With a long --idle-after the end of the decode log shows each rank's last line.
    let p = sample("pd-decode-session.log");
    let expo = once(&["--idle-after", "1h", p.to_str().unwrap()]);
    let l = decode_rank("pd-decode-session", 2);
    assert_eq!(get(&expo, "sglang:num_used_tokens", &l), 5035.0);
    assert_eq!(get(&expo, "sglang:token_usage", &l), 0.01);
    assert_eq!(get(&expo, "sglang:gen_throughput", &l), 77.84);
    assert_eq!(get(&expo, "sglang_idle", &l), 0.0);
}

#[test]
fn the_last_retraction_of_each_rank_has_its_time() {
    let p = sample("pd-decode-session.log");
    let expo = once(&["--idle-after", "1h", p.to_str().unwrap()]);
    let name = "sglang_last_retraction_timestamp_seconds";
    // DP3's only retraction line is at 10:07:40 UTC, DP2's last at 10:09:36.
    assert_eq!(
        get(&expo, name, &decode_rank("pd-decode-session", 3)),
        1780481260.0
    );
    assert_eq!(
        get(&expo, name, &decode_rank("pd-decode-session", 2)),
        1780481376.0
    );
    assert_eq!(
        get(
            &expo,
            "sglang_retractions_total",
            &decode_rank("pd-decode-session", 3)
        ),
        1.0
    );
    // Ranks that never retracted have no such series.
    assert_eq!(samples(&expo, name).len(), 2, "{expo}");
}

#[test]
fn prefill_session_counts_tokens_and_labels_the_engine() {
    let p = sample("prefill-session.log");
    let expo = once(&["--idle-after", "1h", p.to_str().unwrap()]);
    let tp = |n: u32| {
        format!("{{server=\"prefill-session\",model_name=\"deepseek-ai/DeepSeek-V3\",engine_type=\"prefill\",pp_rank=\"0\",tp_rank=\"{n}\",moe_ep_rank=\"0\"}}")
    };
    // Sums of #new-token and #cached-token over the 357 prefill lines of TP0.
    assert_eq!(
        get(&expo, "sglang_prefill_new_tokens_total", &tp(0)),
        4222473.0
    );
    assert_eq!(
        get(&expo, "sglang_prefill_cached_tokens_total", &tp(0)),
        762289.0
    );
    assert_eq!(get(&expo, "sglang_prefill_batches_total", &tp(0)), 357.0);
    // The last prefill line (10:17:17).
    assert_eq!(
        get(&expo, "sglang:num_prefill_inflight_queue_reqs", &tp(0)),
        1.0
    );
    assert_eq!(
        get(&expo, "sglang:num_prefill_bootstrap_queue_reqs", &tp(0)),
        0.0
    );
    assert_eq!(
        get(
            &expo,
            "sglang_prefill_input_throughput_tokens_per_second",
            &tp(0)
        ),
        4331.7
    );
    assert_eq!(get(&expo, "sglang:cache_hit_rate", &tp(0)), 0.0);
    // Pure TP: only TP0 prints stats, but every rank has its KV pool and the server capacity.
    for n in 0..4 {
        assert_eq!(get(&expo, "sglang:max_total_num_tokens", &tp(n)), 1070080.0);
        assert_eq!(
            get(&expo, "sglang_kv_pool_capacity_tokens", &tp(n)),
            1070080.0
        );
    }
    assert_eq!(samples(&expo, "sglang_idle").len(), 1);
}

#[test]
fn single_gpu_log_has_empty_rank_labels() {
    let p = sample("single-gpu-2025.log");
    let expo = once(&[p.to_str().unwrap()]);
    let l = "{server=\"single-gpu-2025\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"}";
    // The log ends on a decode line (14:07:51): live values, not idle.
    assert_eq!(get(&expo, "sglang:num_running_reqs", l), 1.0);
    assert_eq!(get(&expo, "sglang:num_used_tokens", l), 2788.0);
    assert_eq!(get(&expo, "sglang:gen_throughput", l), 133.84);
    assert_eq!(get(&expo, "sglang_idle", l), 0.0);
    // Last prefill: 437 cached of 712 prompt tokens.
    assert_eq!(get(&expo, "sglang:cache_hit_rate", l), 437.0 / 712.0);
    assert_eq!(get(&expo, "sglang_prefill_batches_total", l), 189.0);
    assert_eq!(get(&expo, "sglang_decode_stats_lines_total", l), 100.0);
    // MHA pool: K 25.25 GB + V 25.25 GB.
    assert_eq!(get(&expo, "sglang_kv_pool_capacity_tokens", l), 413696.0);
    assert_eq!(
        get(&expo, "sglang_kv_pool_size_bytes", l),
        2.0 * (25.25f64 * 1073741824.0).round()
    );
}

#[test]
fn two_servers_never_collide_and_names_can_be_set() {
    let a = sample("pd-decode-session.log");
    let b = sample("prefill-session.log");
    let expo = once(&[
        &format!("dec={}", a.display()),
        &format!("pre={}", b.display()),
    ]);
    let info = samples(&expo, "sglang_server_info");
    assert_eq!(
        info,
        [
            "sglang_server_info{server=\"dec\",model_name=\"deepseek-ai/DeepSeek-V3\",engine_type=\"decode\",tp_size=\"4\",dp_size=\"4\",pp_size=\"1\",url=\"http://127.0.0.1:30001\"} 1",
            "sglang_server_info{server=\"pre\",model_name=\"deepseek-ai/DeepSeek-V3\",engine_type=\"prefill\",tp_size=\"4\",dp_size=\"1\",pp_size=\"1\",url=\"http://127.0.0.1:30000\"} 1",
        ]
    );
}

#[test]
fn unknown_field_is_counted_and_known_fields_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.log");
    std::fs::write(
        &path,
        "[2026-09-01 10:00:00 TP0] Decode batch, #running-req: 7, #token: 700, #brand-new-req: 3, token usage: 0.07, cuda graph: True, gen throughput (token/s): 70.00, #queue-req: 2, token usage: bogus\n",
    )
    .unwrap();
    let expo = once(&[path.to_str().unwrap()]);
    let l = "{server=\"new\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"}";
    assert_eq!(get(&expo, "sglang:num_running_reqs", l), 7.0);
    assert_eq!(get(&expo, "sglang:num_queue_reqs", l), 2.0);
    assert_eq!(get(&expo, "sglang:token_usage", l), 0.07);
    assert_eq!(
        get(
            &expo,
            "sglang_log_exporter_unknown_fields_total",
            "{field=\"#brand-new-req\"}"
        ),
        1.0
    );
    let src = format!("{{source=\"{}\"}}", path.display());
    assert_eq!(
        get(&expo, "sglang_log_exporter_field_value_errors_total", &src),
        1.0
    );
}

#[test]
fn bad_inputs_exit_2_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.log");
    let out = run(&["--once", missing.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: cannot read") && err.contains("nope.log"),
        "{err}"
    );

    let out = run(&["--once", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a directory"));

    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "prefix: '['\nrank_tags: {}\nlines: []\nfields: {}\nmetrics: {}\n",
    )
    .unwrap();
    let log = sample("single-gpu-2025.log");
    let out = run(&[
        "--once",
        "--patterns",
        bad.to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("regex of prefix does not compile"), "{err}");

    let out = run(&[
        "--once",
        "--patterns",
        missing.to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read patterns file"));
}

#[test]
fn empty_and_garbage_files_give_counters_not_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.log");
    std::fs::write(&empty, "").unwrap();
    let junk = dir.path().join("junk.log");
    let mut bytes: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    bytes.extend_from_slice(b"\n[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 3, #tok");
    std::fs::write(&junk, bytes).unwrap();
    let expo = once(&[empty.to_str().unwrap(), junk.to_str().unwrap()]);
    let src = format!("{{source=\"{}\"}}", empty.display());
    assert_eq!(
        get(&expo, "sglang_log_exporter_lines_read_total", &src),
        0.0
    );
    let src = format!("{{source=\"{}\"}}", junk.display());
    // 100000 bytes of 0..=255 hold 391 newlines, one more ends the junk: 392 lines. The decode
    // line cut mid-field has no newline: it is dropped and counted, never read as "3 running".
    assert_eq!(
        get(&expo, "sglang_log_exporter_lines_read_total", &src),
        392.0
    );
    assert_eq!(
        get(&expo, "sglang_log_exporter_lines_incomplete_total", &src),
        1.0
    );
    // Every line but the first (bytes 0..=9) holds bytes 128..=255 unpaired: 391.
    assert_eq!(
        get(&expo, "sglang_log_exporter_lines_invalid_utf8_total", &src),
        391.0
    );
    assert!(samples(&expo, "sglang:num_running_reqs").is_empty());
}

#[test]
fn whole_exposition_matches_the_golden_file() {
    // Run from the repository root with a relative path so the `source` label is stable.
    let out = std::process::Command::new(crate::common::bin())
        .current_dir(crate::common::root())
        .args([
            "--once",
            "--gpu.disable",
            "--timezone",
            "UTC",
            "samples/single-gpu-2025.log",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    // Commit-independent: the build_info line names the git revision, branch and rustc (kept
    // as REVISION, BRANCH and RUSTC in the golden file) and the crate version.
    let rev = format!("revision=\"{}\"", env!("SGLANG_LOG_EXPORTER_REVISION"));
    let branch = format!("branch=\"{}\"", env!("SGLANG_LOG_EXPORTER_BRANCH"));
    let rustc = format!("rustc=\"{}\"", env!("SGLANG_LOG_EXPORTER_RUSTC"));
    let got = String::from_utf8(out.stdout)
        .unwrap()
        .replace(&rev, "revision=\"REVISION\"")
        .replace(&branch, "branch=\"BRANCH\"")
        .replace(&rustc, "rustc=\"RUSTC\"");
    let golden = crate::common::root().join("tests/golden/single-gpu-2025.prom");
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&golden, &got).unwrap();
    }
    let want = std::fs::read_to_string(&golden).unwrap();
    let norm = |s: &str| s.replace(env!("CARGO_PKG_VERSION"), "VERSION");
    assert_eq!(norm(&got), norm(&want));
}

#[test]
fn check_reports_coverage_of_the_variants_file() {
    let out = run(&["check", sample("sglang-variants.log").to_str().unwrap()]);
    // Exit 0: every line is read; the file's `# ...` comment lines mention `batch` but are no
    // stats lines (SGLang never starts a line with `# `).
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("290 lines, 125 matched"), "{text}");
    assert!(text.contains("  decode                 43\n"), "{text}");
    assert!(text.contains("  prefill_v01            2\n"), "{text}");
    assert!(!text.contains("stats-like lines"), "{text}");
    assert!(!text.contains("unknown fields"), "{text}");
    // A journal export: its 201 entries are the messages the share matched is of (each entry
    // takes about 22 lines).
    let out = run(&["check", sample("journal-export.txt").to_str().unwrap()]);
    let export = String::from_utf8(out.stdout).unwrap();
    assert!(
        export.contains("journal-export.txt: 4422 lines, 201 messages, 152 matched\n"),
        "{export}"
    );
    // A stats line no pattern reads (a label SGLang might print next) still fails the check; a
    // comment line does not, nor a line that only mentions a batch or running requests.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("new.log");
    std::fs::write(
        &p,
        "# Decode batch, #running-req: 3, #token: 300, a note\n#\n\
         [2026-06-03 10:00:00 TP0] Decode batch: #running-req 3\n\
         [2026-06-03 10:00:00 TP0] Decode step, #running-req: 3, #token: 300, token usage: 0.03\n",
    )
    .unwrap();
    let out = run(&["check", p.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("stats-like lines no pattern matched: 1 "),
        "{text}"
    );
}

/// A line recognisably SGLang's whose fields no kind reads (closing trial): the capacity line
/// with a field renamed (`max_total_tokens=`), a decode line without its separators. `check`
/// names each by its line number and exits 1; the exporter counts them in
/// `sglang_log_exporter_lines_unread_total` (and as unmatched), and reads nothing from them.
#[test]
fn lines_of_sglang_whose_fields_are_not_read_are_reported_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("renamed.log");
    std::fs::write(
        &p,
        "[2026-06-03 10:00:00] server_args=ServerArgs(model_path='m/x', tp_size=1)\n\
         [2026-06-03 10:00:01] max_total_tokens=1000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=100, context_len=4096, available_gpu_mem=10.00 GB\n\
         [2026-06-03 10:00:10] Decode batch #running-req 3 #token 100 token usage 0.01\n\
         [2026-06-03 10:00:11] Decode batch, #running-req: 3, #token: 100, token usage: 0.10, gen throughput (token/s): 5.00, #queue-req: 0\n",
    )
    .unwrap();
    let out = run(&["check", p.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(
            "  stats-like lines no pattern matched: 2 (first 2):\n    line 2 (capacity): [2026-06-03 10:00:01] max_total_tokens=1000, chunked_prefill_size=8192,"
        ),
        "{text}"
    );
    assert!(
        text.contains("\n    line 3 (stats): [2026-06-03 10:00:10] Decode batch #running-req 3 #token 100 token usage 0.01\n"),
        "{text}"
    );
    let m = crate::common::once(&["--gpu.disable", p.to_str().unwrap()]);
    let src = p.display();
    for (kind, n) in [("stats", 1.0), ("capacity", 1.0)] {
        let series =
            format!("sglang_log_exporter_lines_unread_total{{source=\"{src}\",kind=\"{kind}\"}}");
        assert_eq!(crate::common::value(&m, &series), Some(n), "{m}");
    }
    let unmatched = format!("sglang_log_exporter_lines_unmatched_total{{source=\"{src}\"}}");
    assert_eq!(crate::common::value(&m, &unmatched), Some(2.0), "{m}");
    // Only the readable line's values; no capacity from the renamed line.
    assert!(!m.contains("sglang:max_total_num_tokens{"), "{m}");
    assert!(m.contains(r#"sglang:num_used_tokens{server="renamed",model_name="m/x",engine_type="unified",pp_rank="0",tp_rank="0",moe_ep_rank="0"} 100"#), "{m}");
}

/// `check` as a CI gate (issue 37 item 2): a modern boot with CUDA graph capture (its progress
/// bar `Capturing batches (bs=… avail_mem=… GB)`) and a scheduler crash (a traceback's
/// `batch = self.get_next_batch_to_run()`), every shipped sample and every public case exit 0;
/// only a line shaped like a stats line SGLang prints counts as unread.
#[test]
fn check_is_a_ci_gate_on_boots_crashes_samples_and_cases() {
    let boot = crate::common::root().join("tests/data/check/boot-capture-crash.log");
    let out = run(&["check", boot.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains(": 43 lines, 10 matched\n"), "{text}");
    assert!(text.contains("  decode                 1\n"), "{text}");
    assert!(text.contains("  prefill                2\n"), "{text}");
    assert!(!text.contains("stats-like"), "{text}");
    let mut logs: Vec<std::path::PathBuf> = Vec::new();
    for dir in ["samples", "tests/data/cases"] {
        for e in std::fs::read_dir(crate::common::root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if matches!(p.extension().and_then(|x| x.to_str()), Some("log" | "txt")) {
                logs.push(p);
            }
        }
    }
    logs.sort();
    assert_eq!(logs.len(), 18, "{logs:?}");
    for p in &logs {
        let out = run(&["check", p.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    // sglang-jax's `#cache_miss` (a JIT-cache diagnostic) is a known field, not exported.
    let jax = crate::common::root().join("tests/data/cases/10-sglang-jax-tpu.log");
    let text = String::from_utf8(run(&["check", jax.to_str().unwrap()]).stdout).unwrap();
    assert!(!text.contains("unknown fields"), "{text}");
}

/// `check` is clean on every shipped sample (the journal export read as what it is).
#[test]
fn check_is_clean_on_every_shipped_sample() {
    for name in [
        "pd-decode-session.log",
        "prefill-session.log",
        "single-gpu-2025.log",
        "sglang-variants.log",
        "journal-export.txt",
    ] {
        let out = run(&["check", sample(name).to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// One clock for history and live: the sample's server went quiet at 10:17:36 and its log goes
/// on with `/health` lines to 10:18:46, so `--once` reads every rank idle at the end (as the
/// same file followed live does), and backfill's last samples say idle from 30 s after each
/// rank's last stats line.
#[test]
fn a_log_that_goes_on_quietly_reads_idle_at_its_end() {
    let p = sample("pd-decode-session.log");
    let s = crate::common::parse_exposition(&once(&["--gpu.disable", p.to_str().unwrap()]));
    let of = |name: &str| -> Vec<f64> {
        s.iter()
            .filter(|x| x.name == name)
            .map(|x| x.value)
            .collect()
    };
    assert_eq!(of("sglang_idle"), [1.0; 4]);
    assert_eq!(of("sglang:num_running_reqs"), [0.0; 4]);
    assert_eq!(
        of("sglang_last_stats_timestamp_seconds"),
        [1780481856.0, 1780481855.0, 1780481854.0, 1780481851.0]
    );
    let dir = tempfile::tempdir().unwrap();
    let om = dir.path().join("bf.om");
    let out = run(&[
        "backfill",
        "--timezone",
        "UTC",
        "-o",
        om.to_str().unwrap(),
        p.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&om).unwrap();
    let last_idle = text
        .lines()
        .rfind(|l| l.starts_with("sglang_idle{") && l.contains("dp_rank=\"3\""))
        .unwrap();
    assert!(last_idle.ends_with("} 1 1780481881"), "{last_idle}");
}

/// No share over 100 %: the variants file's DP6 rank reports 2,811,200 used tokens while the
/// last capacity line of the file says 65,536 (another server's): counted, warned once, and
/// the share taken from its token usage (1.00).
#[test]
fn a_used_count_above_its_capacity_is_no_share_over_100_percent() {
    let p = sample("sglang-variants.log");
    let out = run(&[
        "--once",
        "--gpu.disable",
        "--timezone",
        "UTC",
        p.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("last busy: KV cache 100.0%, 2811200 tokens used, above the 65536-token capacity seen (contradictory), 251 running, 655 queued"),
        "{err}"
    );
    for share in err.split("KV cache ").skip(1) {
        let pct: f64 = share
            .split('%')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        assert!(pct <= 100.0, "{share}");
    }
    assert_eq!(
        err.matches("more KV-cache tokens in use than the capacity")
            .count(),
        1,
        "{err}"
    );
    let m = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        crate::common::value(
            &m,
            r#"sglang_log_exporter_kv_capacity_contradictions_total{server="sglang-variants"}"#
        ),
        Some(4.0)
    );
    // The KV-bytes estimate is never above the pool.
    for s in crate::common::samples(&m, "sglang_kv_pool_used_estimate_bytes") {
        assert!(!s.contains("e+"), "{s}");
    }
}

#[test]
fn once_ends_with_a_kv_summary_on_stderr_that_log_level_warn_silences() {
    let p = sample("pd-decode-session.log");
    let args = [
        "--once",
        "--gpu.disable",
        "--timezone",
        "UTC",
        p.to_str().unwrap(),
    ];
    let out = run(&args);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KV cache at the end of the input (2026-06-03 10:18:46):\n  pd-decode-session (decode, deepseek-ai/DeepSeek-V3)\n    DP0 TP0  idle since 10:17:36: KV cache 0.0% (0/786432 tokens), 0 running, 0 queued; last busy: KV cache 0.3% (2290/786432 tokens), 1 running, 0 queued\n    DP1 TP1  idle since 10:17:35: KV cache 0.0% (0/786432 tokens), 0 running, 0 queued; last busy: KV cache 0.3% (2707/786432 tokens), 1 running, 0 queued\n    DP2 TP2  idle since 10:17:34: KV cache 0.0% (0/786432 tokens), 0 running, 0 queued; last busy: KV cache 0.6% (5035/786432 tokens), 1 running, 0 queued\n    DP3 TP3  idle since 10:17:31: KV cache 0.0% (0/786432 tokens), 0 running, 0 queued; last busy: KV cache 0.7% (5226/786432 tokens), 1 running, 0 queued\n"),
        "{err}"
    );
    // Scripts read stdout: the exposition alone.
    let expo = String::from_utf8(out.stdout).unwrap();
    assert!(!expo.contains("KV cache at the end"), "{expo}");
    let quiet = run(&[&args[..], &["--log.level", "warn"]].concat());
    assert!(quiet.status.success());
    assert_eq!(String::from_utf8_lossy(&quiet.stderr), "");
    assert_eq!(quiet.stdout, expo.as_bytes());
}

/// A newcomer's first tries: `--once` without inputs is the same error as without `--once`, and
/// `--help` names the summary and the exit codes the README gives.
#[test]
fn once_without_inputs_and_its_help() {
    let want = "error: no inputs: give log files, - for stdin, --journal-unit, --input.glob or --sglang.url (see --help)\n";
    for args in [
        &["--once"][..],
        &["--web.listen-address", "127.0.0.1:1"][..],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), want, "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let help = String::from_utf8(run(&["--help"]).stdout).unwrap();
    let once: String = help
        .split("--once")
        .nth(1)
        .and_then(|s| s.split("\n      --").next())
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert_eq!(
        once,
        "Read every input to its end, print the exposition to stdout, then a summary of each rank's \
         KV cache to stderr (at --log.level info or more verbose), and exit: 0 when done; 1 when the \
         output cannot be written or the push (--push.url) failed; 2 for a missing or unreadable \
         input, a bad pattern file or a bad argument"
    );
}

/// `--once` on `tests/data/clock/NAME`: (stdout, stderr).
fn once_clock(name: &str) -> (String, String) {
    let p = crate::common::root().join("tests/data/clock").join(name);
    let out = run(&[
        "--once",
        "--gpu.disable",
        "--timezone",
        "UTC",
        p.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Lines no kind reads move the log clock too (hostile pass): a log that goes on past
/// `--idle-after` with `Cache flushed successfully!`, `The server is fired up…` and a
/// scheduler's traceback reads idle at its last timed line (10:02:20), as it does followed
/// live; a crashed server whose log ends in a traceback's untimed lines is not busy; a lone
/// wrong-day line among them does not move the clock; a newest-first copy reads the same.
#[test]
fn lines_no_kind_reads_move_the_clock_to_the_inputs_last_timed_line() {
    let labels = |s: &str| {
        format!("{{server=\"{s}\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"}}")
    };
    let (expo, err) = once_clock("quiet-other-lines.log");
    let l = labels("quiet-other-lines");
    assert_eq!(get(&expo, "sglang_idle", &l), 1.0);
    assert_eq!(get(&expo, "sglang:num_running_reqs", &l), 0.0);
    assert_eq!(
        get(&expo, "sglang_last_stats_timestamp_seconds", &l),
        1780480810.0
    );
    assert!(
        err.contains("KV cache at the end of the input (2026-06-03 10:02:20):\n  quiet-other-lines (unified)\n    TP0  idle since 10:00:10: KV cache 0.0%, 0 running, 0 queued; last busy: KV cache 10.0%, 3 running, 0 queued\n"),
        "{err}"
    );
    // Untimed traceback lines after the last timed one, and a day-ahead `Killed` line among
    // the last: the end is 10:01:01.
    let (expo, err) = once_clock("crash-traceback.log");
    assert_eq!(get(&expo, "sglang_idle", &labels("crash-traceback")), 1.0);
    assert!(
        err.contains("KV cache at the end of the input (2026-06-03 10:01:01):\n  crash-traceback (unified)\n    TP0  idle since 10:00:10"),
        "{err}"
    );
    // Newest first (`tac`): read from its end, the same state.
    let dir = tempfile::tempdir().unwrap();
    let src = crate::common::root().join("tests/data/clock/quiet-other-lines.log");
    let text = std::fs::read_to_string(src).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.reverse();
    let p = dir.path().join("quiet-other-lines.log");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    let out = run(&[
        "--once",
        "--gpu.disable",
        "--timezone",
        "UTC",
        p.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KV cache at the end of the input (2026-06-03 10:02:20):\n  quiet-other-lines (unified)\n    TP0  idle since 10:00:10"),
        "{err}"
    );
    assert_eq!(
        value(
            &String::from_utf8_lossy(&out.stdout),
            &format!("sglang_idle{l}")
        ),
        Some(1.0)
    );
}

/// Each input has its own log clock (hostile pass): `b.log` (09:00:00-09:00:10) read after
/// `a.log` (10:00-12:00) keeps its own times (not a's 12:00), and at the end of both (12:00)
/// its rank reads idle since 09:00:10 while a's is busy.
#[test]
fn each_input_is_judged_by_its_own_clock() {
    let dir = tempfile::tempdir().unwrap();
    let line = |t: &str, n: u32| {
        format!("[2026-06-03 {t} TP0] Decode batch, #running-req: {n}, #token: 100, token usage: 0.01, #queue-req: 0\n")
    };
    let mut a = String::new();
    for h in 10..12 {
        for m in (0..60).step_by(10) {
            a += &line(&format!("{h:02}:{m:02}:00"), 5);
        }
    }
    a += &line("12:00:00", 7);
    let b = line("09:00:00", 3) + &line("09:00:10", 4);
    let (pa, pb) = (dir.path().join("a.log"), dir.path().join("b.log"));
    std::fs::write(&pa, a).unwrap();
    std::fs::write(&pb, b).unwrap();
    let out = crate::common::run(&[
        "--once",
        "--gpu.disable",
        "--timezone",
        "UTC",
        pa.to_str().unwrap(),
        pb.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let expo = String::from_utf8(out.stdout).unwrap();
    let all = crate::common::parse_exposition(&expo);
    let at = |server: &str, name: &str| {
        let found: Vec<f64> = all
            .iter()
            .filter(|s| s.name == name && s.label("server") == Some(server))
            .map(|s| s.value)
            .collect();
        assert_eq!(found.len(), 1, "{name} of {server}: {found:?}");
        found[0]
    };
    // 2026-06-03 12:00:00 and 09:00:10 UTC.
    assert_eq!(at("a", "sglang_last_stats_timestamp_seconds"), 1780488000.0);
    assert_eq!(at("b", "sglang_last_stats_timestamp_seconds"), 1780477210.0);
    assert_eq!(at("a", "sglang_idle"), 0.0);
    assert_eq!(at("b", "sglang_idle"), 1.0);
    assert_eq!(at("a", "sglang:num_running_reqs"), 7.0);
    assert_eq!(at("b", "sglang:num_running_reqs"), 0.0);
    let summary = String::from_utf8(out.stderr).unwrap();
    assert!(
        summary.contains("KV cache at the end of the input (2026-06-03 12:00:00)")
            && summary.contains("idle since 09:00:10"),
        "{summary}"
    );
}

#[test]
fn a_files_name_never_gives_a_mode_its_lines_or_server_args_deny() {
    // Issue 37 item 5: a unified server's crash log named `…-decode-crash.log` read as decode.
    let tp0 = r#"pp_rank="0",tp_rank="0",moe_ep_rank="0""#;
    let unified = "[2026-06-03 10:00:00 TP0] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0\n\
        [2026-06-03 10:00:01 TP0] Decode batch, #running-req: 1, #token: 8, token usage: 0.01, cuda graph: True, gen throughput (token/s): 5.00, #queue-req: 0\n";
    let m = crate::common::once_on("sglang-decode-crash.log", unified);
    let series = |server: &str, kind: &str| {
        format!(
            r#"sglang:num_running_reqs{{server="{server}",model_name="",engine_type="{kind}",{tp0}}}"#
        )
    };
    assert_eq!(
        value(&m, &series("sglang-decode-crash", "unified")),
        Some(1.0),
        "{m}"
    );
    assert!(!m.contains("engine_type=\"decode\""), "{m}");
    // A decode line alone, without the PD group every PD decode server prints: unified too.
    let decode_only = unified.lines().nth(1).unwrap().to_string() + "\n";
    let m = crate::common::once_on("decode.log", &decode_only);
    assert_eq!(value(&m, &series("decode", "unified")), Some(1.0), "{m}");
    // `server_args` says unified (`disaggregation_mode='null'`) before any stats line.
    let m = crate::common::once_on(
        "sglang-prefill-old.log",
        "[2026-06-03 10:00:00] server_args=ServerArgs(model_path='m/a', served_model_name='m/a', tp_size=1, dp_size=1, disaggregation_mode='null')\n",
    );
    assert!(m.contains(r#"sglang_server_info{server="sglang-prefill-old",model_name="m/a",engine_type="unified","#), "{m}");
    // A PD decode server's line (its PD group) under a name that suggests nothing: decode.
    let pd = "[2026-06-03 10:00:01 TP0] Decode batch, #running-req: 2, #token: 8, token usage: 0.01, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 1, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 5.00, #queue-req: 0\n";
    let m = crate::common::once_on("node-7.log", pd);
    assert_eq!(value(&m, &series("node-7", "decode")), Some(2.0), "{m}");
    // Nothing says otherwise (a capacity line only): the name still suggests the mode.
    let m = crate::common::once_on(
        "sglang-decode.log",
        "[2026-06-03 10:00:00 TP0] max_total_num_tokens=1000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=64, context_len=4096\n",
    );
    assert!(m.contains(r#"sglang:max_total_num_tokens{server="sglang-decode",model_name="",engine_type="decode","#), "{m}");
}

/// A newest-first log whose first lines all share one second (hostile pass: a busy server's
/// last second, thousands of access lines, first in `tac` of its log) is still read from its
/// end: lines of one second say nothing of the order, so the sampler goes on until the times
/// move. The same gauges as the log in order, for bursts below and far above one sampling step.
#[test]
fn a_reversed_log_that_starts_with_a_burst_of_one_second_is_read_from_its_end() {
    let dir = tempfile::tempdir().unwrap();
    for burst in [100, 800, 20_000] {
        let mut lines: Vec<String> = (1..=60)
            .map(|i| {
                format!(
                    "[2026-06-03 10:00:{:02} TP0] Decode batch, #running-req: {i}, #token: {}, token usage: {:.2}, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0",
                    i - 1,
                    i * 100,
                    f64::from(i) / 100.0
                )
            })
            .collect();
        lines.extend((0..burst).map(|i| {
            format!(
                "[2026-06-03 10:00:59] INFO:     127.0.0.1:{} - \"POST /generate HTTP/1.1\" 200 OK",
                30000 + i % 30000
            )
        }));
        let forward = dir.path().join(format!("burst{burst}.log"));
        std::fs::write(&forward, lines.join("\n") + "\n").unwrap();
        lines.reverse();
        let backward = dir.path().join(format!("burst{burst}-tac.log"));
        std::fs::write(&backward, lines.join("\n") + "\n").unwrap();
        for p in [&forward, &backward] {
            let out = run(&[
                "--once",
                "--gpu.disable",
                "--idle-after",
                "1000000h",
                "--timezone",
                "UTC",
                p.to_str().unwrap(),
            ]);
            let expo = String::from_utf8_lossy(&out.stdout);
            let one = |name: &str| {
                let v: Vec<&str> = expo.lines().filter(|l| l.starts_with(name)).collect();
                assert_eq!(v.len(), 1, "{name} in {p:?}: {v:?}");
                v[0].rsplit(' ').next().unwrap().parse::<f64>().unwrap()
            };
            assert_eq!(one("sglang:num_running_reqs{"), 60.0, "{p:?}");
            assert_eq!(one("sglang:num_used_tokens{"), 6000.0, "{p:?}");
            assert_eq!(one("sglang:token_usage{"), 0.6, "{p:?}");
        }
    }
}
