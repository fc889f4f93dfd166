//! Startup lines read right on the newest releases (issue 21): the dict form of `server_args`
//! (v0.5.19+), a speculative-decoding draft model's own figures kept apart from the target's,
//! memory deltas that SGLang prints negative on purpose, and `nan` as SGLang's "no value".

use crate::common::{once, parse_exposition, root, run, Sample};

fn data(name: &str) -> String {
    root()
        .join("tests/data/startup")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The values of metric `name` in `expo`, with their labels.
fn series(expo: &[Sample], name: &str) -> Vec<(f64, Vec<(String, String)>)> {
    expo.iter()
        .filter(|s| s.name == name)
        .map(|s| (s.value, s.labels.clone()))
        .collect()
}

fn one(expo: &[Sample], name: &str) -> Option<f64> {
    let s = series(expo, name);
    assert!(s.len() <= 1, "{name}: {s:?}");
    s.first().map(|(v, _)| *v)
}

const GIB: f64 = 1073741824.0;

/// The per-runner start-up order (to v0.5.13, and Frozen-KV MTP after: the target loads,
/// builds its pool and captures its graphs before the draft loads) with the dict `server_args`
/// of v0.5.19+; v0.5.14+'s own order is `a_deferred_*` below.
#[test]
fn a_draft_model_keeps_its_own_figures_and_the_dict_server_args_is_read() {
    let log = data("eagle-draft-v0519.log");
    let expo = parse_exposition(&once(&["--gpu.disable", &log]));
    // The dict form gives the model name (served_model_name over model_path).
    let running = series(&expo, "sglang:num_running_reqs");
    assert_eq!(running.len(), 1);
    let labels = &running[0].1;
    let label = |k: &str| labels.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    assert_eq!(label("model_name"), Some("deepseek-v3"));
    assert_eq!(label("engine_type"), Some("unified"));
    // The target's figures are the target's: 94 GB of weights, not the draft's -1.86 GB.
    assert_eq!(one(&expo, "sglang_weight_memory_bytes"), Some(94.0 * GIB));
    assert_eq!(one(&expo, "sglang:weight_memory_usage_gb"), Some(94.0));
    assert_eq!(one(&expo, "sglang_kv_pool_size_bytes"), Some(51.47 * GIB));
    assert_eq!(one(&expo, "sglang_kv_pool_capacity_tokens"), Some(786430.0));
    assert_eq!(
        one(&expo, "sglang_cuda_graph_memory_bytes"),
        Some(2.02 * GIB)
    );
    // The draft's, apart; negative deltas are readings, not errors.
    assert_eq!(
        one(&expo, "sglang_draft_weight_memory_bytes"),
        Some(-1.86 * GIB)
    );
    assert_eq!(
        one(&expo, "sglang_draft_kv_pool_size_bytes"),
        Some(0.80 * GIB)
    );
    assert_eq!(
        one(&expo, "sglang_draft_kv_pool_capacity_tokens"),
        Some(786430.0)
    );
    assert_eq!(
        one(&expo, "sglang_draft_cuda_graph_memory_bytes"),
        Some(-0.25 * GIB)
    );
    // `fwd occupancy: nan%` on the last line withdraws the gauge and is no error.
    assert_eq!(one(&expo, "sglang_forward_occupancy_ratio"), None);
    assert_eq!(one(&expo, "sglang:fwd_occupancy"), None);
    assert_eq!(
        one(&expo, "sglang_log_exporter_field_value_errors_total"),
        Some(0.0)
    );
    let check = run(&["check", &log]);
    assert!(
        check.status.success(),
        "check: {}",
        String::from_utf8_lossy(&check.stdout)
    );
}

#[test]
fn a_value_after_nan_is_shown_and_nan_after_a_value_withdraws_it() {
    let dir = tempfile::tempdir().unwrap();
    let base = "[2026-11-12 09:02:00 TP0] Decode batch, #running-req: 2, #token: 100, token usage: 0.00, cuda graph: True, gen throughput (token/s): 10.00, fwd occupancy: ";
    let log = dir.path().join("occ.log");
    std::fs::write(
        &log,
        format!("{base}nan%, #queue-req: 0\n{base}45.10%, #queue-req: 0\n"),
    )
    .unwrap();
    let expo = parse_exposition(&once(&["--gpu.disable", log.to_str().unwrap()]));
    assert_eq!(one(&expo, "sglang_forward_occupancy_ratio"), Some(0.451));
    assert_eq!(one(&expo, "sglang:fwd_occupancy"), Some(45.1));
}

#[test]
fn a_negative_count_is_still_refused_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("neg.log");
    std::fs::write(
        &log,
        "[2026-11-12 09:02:00 TP0] Decode batch, #running-req: -2, #token: 100, token usage: 0.00, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0\n\
         [2026-11-12 09:02:01 TP0] KV Cache is allocated. #tokens: -5, KV size: -1.00 GB\n",
    )
    .unwrap();
    let expo = parse_exposition(&once(&["--gpu.disable", log.to_str().unwrap()]));
    assert_eq!(one(&expo, "sglang:num_running_reqs"), None);
    assert_eq!(one(&expo, "sglang_kv_pool_capacity_tokens"), None);
    assert_eq!(one(&expo, "sglang_kv_pool_size_bytes"), None);
    assert_eq!(
        one(&expo, "sglang_log_exporter_field_value_errors_total"),
        Some(3.0)
    );
}

#[test]
fn without_a_draft_a_second_kv_pool_line_is_the_targets() {
    // A server known to run without speculative decoding (`None`), or a rank that has served
    // (a new process whose server_args line was not seen): the later figure is the target's.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("nodraft.log");
    let kv = |t: &str, gb: &str| {
        format!("[2026-11-12 {t} TP0] KV Cache is allocated. #tokens: 1000, KV size: {gb} GB\n")
    };
    let decode = "[2026-11-12 09:05:00 TP0] Decode batch, #running-req: 2, #token: 100, token usage: 0.10, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: 0\n";
    let text = format!(
        "[2026-11-12 09:00:00] server_args=ServerArgs(model_path='m', speculative_algorithm=None, tp_size=1)\n{}{}",
        kv("09:01:00", "10.00"),
        kv("09:01:01", "12.00"),
    );
    std::fs::write(&log, text).unwrap();
    let expo = parse_exposition(&once(&["--gpu.disable", log.to_str().unwrap()]));
    assert_eq!(one(&expo, "sglang_kv_pool_size_bytes"), Some(12.0 * GIB));
    assert_eq!(one(&expo, "sglang_draft_kv_pool_size_bytes"), None);
    let text = format!(
        "{}{decode}{}",
        kv("09:01:00", "10.00"),
        kv("09:06:00", "14.00")
    );
    std::fs::write(&log, text).unwrap();
    let expo = parse_exposition(&once(&["--gpu.disable", log.to_str().unwrap()]));
    assert_eq!(one(&expo, "sglang_kv_pool_size_bytes"), Some(14.0 * GIB));
    assert_eq!(one(&expo, "sglang_draft_kv_pool_size_bytes"), None);
}

/// The value of metric `name` on TP rank `tp`.
fn on_rank(expo: &[Sample], name: &str, tp: &str) -> Option<f64> {
    let s: Vec<f64> = series(expo, name)
        .into_iter()
        .filter(|(_, l)| l.iter().any(|(k, v)| k == "tp_rank" && v == tp))
        .map(|(v, _)| v)
        .collect();
    assert!(s.len() <= 1, "{name} TP{tp}: {s:?}");
    s.first().copied()
}

/// v0.5.10 gpt-oss with EAGLE3 on TP2 (`model_runner_kv_cache_mixin.py`,
/// `swa_memory_pool.py`): each rank's target prints two unlabelled `KV Cache is allocated`
/// lines, its sliding-window pool (960000 tokens, announced by `Use sliding window memory pool`)
/// then its full-attention pool (1200000); the draft's pool follows the draft's `Load weight
/// end`. The target's pools are its own, the full pool is the KV pool, the draft's is apart.
#[test]
fn a_hybrid_swa_targets_two_pools_are_never_the_drafts() {
    let log = data("swa-eagle-v0510.log");
    let expo = parse_exposition(&once(&["--gpu.disable", &log]));
    for tp in ["0", "1"] {
        let v = |name| on_rank(&expo, name, tp);
        assert_eq!(
            v("sglang_kv_pool_capacity_tokens"),
            Some(1200000.0),
            "TP{tp}"
        );
        assert_eq!(
            v("sglang_kv_pool_size_bytes"),
            Some(10.30 * GIB + 10.30 * GIB),
            "TP{tp}"
        );
        assert_eq!(
            v("sglang_swa_pool_capacity_tokens"),
            Some(960000.0),
            "TP{tp}"
        );
        assert_eq!(
            v("sglang_swa_pool_size_bytes"),
            Some(8.24 * GIB + 8.24 * GIB),
            "TP{tp}"
        );
        assert_eq!(
            v("sglang_full_pool_capacity_tokens"),
            Some(1200000.0),
            "TP{tp}"
        );
        assert_eq!(
            v("sglang_swa_kv_pool_size_bytes"),
            Some(37.08 * GIB),
            "TP{tp}"
        );
        assert_eq!(v("sglang:kv_cache_memory_usage_gb"), Some(37.08), "TP{tp}");
        assert_eq!(v("sglang_weight_memory_bytes"), Some(32.41 * GIB), "TP{tp}");
        assert_eq!(
            v("sglang_draft_kv_pool_capacity_tokens"),
            Some(1200000.0),
            "TP{tp}"
        );
        assert_eq!(
            v("sglang_draft_kv_pool_size_bytes"),
            Some(0.57 * GIB + 0.57 * GIB),
            "TP{tp}"
        );
        assert_eq!(
            v("sglang_draft_weight_memory_bytes"),
            Some(1.08 * GIB),
            "TP{tp}"
        );
    }
    // No contradiction counted (the series appears with the first one).
    assert_eq!(
        one(
            &expo,
            "sglang_log_exporter_kv_capacity_contradictions_total"
        ),
        None
    );
    let out = run(&["--once", "--gpu.disable", "--timezone", "UTC", &log]);
    let err = String::from_utf8_lossy(&out.stderr);
    // Each pool against its own capacity.
    assert!(
        err.contains("TP0  busy at 10:03:00: KV cache full 8.0% (96000/1200000 tokens), SWA 5.0% (48000/960000 tokens), 12 running, 0 queued"),
        "{err}"
    );
}

/// v0.5.17+ labels each pool of a hybrid SWA model (`allocation_label` in
/// `mem_cache/swa_memory_pool.py`): `Full KV Cache is allocated.` is the KV pool, `SWA KV Cache is
/// allocated.` (printed last) the sliding-window pool; the EAGLE3 draft's unlabelled pool after
/// its weights is the draft's (v0.5.23 shapes).
#[test]
fn labelled_pools_go_to_the_pool_they_name() {
    let log = data("swa-eagle-v0523.log");
    let expo = parse_exposition(&once(&["--gpu.disable", &log]));
    assert_eq!(one(&expo, "sglang_kv_pool_capacity_tokens"), Some(900000.0));
    assert_eq!(
        one(&expo, "sglang_kv_pool_size_bytes"),
        Some(15.45 * GIB + 15.45 * GIB)
    );
    assert_eq!(
        one(&expo, "sglang_swa_pool_capacity_tokens"),
        Some(720000.0)
    );
    assert_eq!(
        one(&expo, "sglang_swa_pool_size_bytes"),
        Some(12.36 * GIB + 12.36 * GIB)
    );
    assert_eq!(
        one(&expo, "sglang_swa_kv_pool_size_bytes"),
        Some(55.62 * GIB)
    );
    assert_eq!(one(&expo, "sglang:kv_cache_memory_usage_gb"), Some(55.62));
    assert_eq!(
        one(&expo, "sglang:max_total_num_tokens_swa"),
        Some(720000.0)
    );
    assert_eq!(
        one(&expo, "sglang_draft_kv_pool_capacity_tokens"),
        Some(900000.0)
    );
    assert_eq!(
        one(&expo, "sglang_draft_kv_pool_size_bytes"),
        Some(0.86 * GIB + 0.86 * GIB)
    );
    // 180000 of 900000 tokens: 20 %, the printed full token usage, of the full pool's bytes;
    // 36000 of 720000: 5 % of the sliding-window pool's.
    assert_eq!(
        one(&expo, "sglang_kv_pool_used_estimate_bytes"),
        Some((0.2 * (15.45 * GIB + 15.45 * GIB) + 0.05 * (12.36 * GIB + 12.36 * GIB)).round())
    );
    // No contradiction counted (the series appears with the first one).
    assert_eq!(
        one(
            &expo,
            "sglang_log_exporter_kv_capacity_contradictions_total"
        ),
        None
    );
    let out = run(&["--once", "--gpu.disable", "--timezone", "UTC", &log]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("busy at 09:02:00: KV cache full 20.0% (180000/900000 tokens), SWA 5.0% (36000/720000 tokens)"),
        "{err}"
    );
}

/// v0.5.23 MiniMax M3.1 NVFP4 (`mem_cache/minimax_m3_nvfp4_pool.py`): `MiniMax MSA-v1 main NVFP4
/// KV Cache is allocated.` is the KV pool; `MiniMax MSA-v1 index KV Cache is allocated.` (the
/// indexer's K-only side cache, printed after it) is read but never the KV pool.
#[test]
fn an_index_side_cache_is_never_the_kv_pool() {
    let log = data("minimax-m3-nvfp4-v0523.log");
    let expo = parse_exposition(&once(&["--gpu.disable", &log]));
    assert_eq!(
        one(&expo, "sglang_kv_pool_capacity_tokens"),
        Some(2000000.0)
    );
    assert_eq!(
        one(&expo, "sglang_kv_pool_size_bytes"),
        Some(38.15 * GIB + 0.0 * GIB)
    );
    assert_eq!(one(&expo, "sglang:kv_cache_memory_usage_gb"), Some(38.15));
    assert_eq!(one(&expo, "sglang_draft_kv_pool_capacity_tokens"), None);
    assert_eq!(one(&expo, "sglang_swa_pool_capacity_tokens"), None);
    let check = run(&["check", &log]);
    let report = String::from_utf8_lossy(&check.stdout);
    assert!(check.status.success(), "check: {report}");
    assert!(report.contains("kv_cache_index"), "{report}");
}

/// `--once`'s summary of `log` (stderr), and its exposition.
fn once_summary(log: &str) -> (Vec<Sample>, String) {
    let out = run(&["--once", "--gpu.disable", "--timezone", "UTC", log]);
    assert!(out.status.success(), "{out:?}");
    let expo = parse_exposition(&String::from_utf8_lossy(&out.stdout));
    (expo, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `top --snapshot`'s frame on `log`.
fn top_frame(log: &str) -> String {
    let out = run(&[
        "top",
        "--snapshot",
        "--gpu.disable",
        "--timezone",
        "UTC",
        log,
    ]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `top --snapshot`'s last line (the one rank's row) on `log`.
fn top_row(log: &str) -> String {
    top_frame(log)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// Hostile pass 31, H1: a hybrid SWA model's `#token` and `token usage` are the larger of its
/// two pools (`get_kv_token_stats`, `get_max_pool_usage`); they are exported as SGLang's, but
/// every share and bytes estimate takes each pool's own used tokens against that pool's own
/// capacity and bytes. s02: the full-attention pool at 10 % (50000 of 500000, 6 GiB), the
/// sliding-window pool at 95 % (95000 of 100000, 4 GiB) — never 95000 of 500000 (19 %), never
/// 95 % of the full pool's bytes.
#[test]
fn a_hybrid_ranks_share_is_each_pool_against_its_own_capacity() {
    let log = data("swa-fuller-than-full.log");
    let (expo, err) = once_summary(&log);
    // SGLang's own gauges, as it computes them.
    assert_eq!(one(&expo, "sglang:num_used_tokens"), Some(95000.0));
    assert_eq!(one(&expo, "sglang:token_usage"), Some(0.95));
    assert_eq!(one(&expo, "sglang_full_used_tokens"), Some(50000.0));
    assert_eq!(one(&expo, "sglang_swa_pool_used_tokens"), Some(95000.0));
    assert_eq!(one(&expo, "sglang_kv_pool_size_bytes"), Some(6.0 * GIB));
    assert_eq!(one(&expo, "sglang_swa_pool_size_bytes"), Some(4.0 * GIB));
    // 10 % of 6 GiB plus 95 % of 4 GiB.
    assert_eq!(
        one(&expo, "sglang_kv_pool_used_estimate_bytes"),
        Some(4724464026.0)
    );
    assert_eq!(
        one(&expo, "sglang_kv_pool_used_estimate_bytes"),
        Some((0.1 * 6.0 * GIB + 0.95 * 4.0 * GIB).round())
    );
    assert!(
        err.contains("    -  busy at 09:00:17: KV cache full 10.0% (50000/500000 tokens), SWA 95.0% (95000/100000 tokens), 10 running, 0 queued\n"),
        "{err}"
    );
    // No contradiction: 95000 used tokens are the sliding-window pool's, within its own 100000.
    assert_eq!(
        one(
            &expo,
            "sglang_log_exporter_kv_capacity_contradictions_total"
        ),
        None
    );
    let frame = top_frame(&log);
    let row = frame.lines().last().unwrap_or_default();
    assert!(row.contains("  95.0%  swa 95.0k/100.0k "), "{frame}");
    // The header's total is over the pool the row shows.
    assert!(frame.contains("  KV 95.0% 95.0k/100.0k  "), "{frame}");
    // s03: both pools busy, the sliding-window pool fuller (95 % against 76 %).
    let log = data("swa-both-pools-busy.log");
    let (expo, err) = once_summary(&log);
    assert_eq!(one(&expo, "sglang:num_used_tokens"), Some(380000.0));
    assert_eq!(
        one(&expo, "sglang_kv_pool_used_estimate_bytes"),
        Some(8976481649.0)
    );
    assert!(
        err.contains("    -  busy at 09:00:17: KV cache full 76.0% (380000/500000 tokens), SWA 95.0% (380000/400000 tokens), 60 running, 0 queued\n"),
        "{err}"
    );
    let row = top_row(&log);
    assert!(row.contains("  95.0%  swa 380.0k/400.0k "), "{row}");
}

/// H1 on the live page's JSON: the pool the share is of, and each pool's own figures.
#[test]
fn the_live_json_names_a_hybrid_ranks_pool() {
    let dir = tempfile::tempdir().unwrap();
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M:%S")
        .to_string();
    let log = dir.path().join("hybrid.log");
    std::fs::write(
        &log,
        format!(
            "[{now}] Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 500000, K size: 3.00 GB, V size: 3.00 GB\n\
             [{now}] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, K size: 2.00 GB, V size: 2.00 GB\n\
             [{now}] Decode batch, #running-req: 10, #full token: 50000, full token usage: 0.10, #swa token: 95000, swa token usage: 0.95, cuda graph: True, gen throughput (token/s): 500.00, #queue-req: 0\n"
        ),
    )
    .unwrap();
    let e = crate::common::Exporter::start(&["--gpu.disable", log.to_str().unwrap()]);
    e.wait_ready();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let v = loop {
        let (code, _, body) = e.get("/api/v1/status");
        assert_eq!(code, 200, "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if !v["servers"][0]["ranks"][0]["kv_share"].is_null() {
            break v;
        }
        assert!(std::time::Instant::now() < deadline, "{v:#}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let r = &v["servers"][0]["ranks"][0];
    assert_eq!(r["kv_share"], 0.95, "{r:#}");
    assert_eq!(r["kv_percent"], "95.0%");
    assert_eq!(r["kv_pool"], "swa");
    assert_eq!(r["used_tokens"], 95000.0);
    assert_eq!(r["capacity_tokens"], 100000.0);
    let pools = r["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 2, "{r:#}");
    assert_eq!(
        (&pools[0]["pool"], &pools[0]["share"]),
        (&"full".into(), &0.1.into())
    );
    assert_eq!(
        (&pools[0]["used_tokens"], &pools[0]["capacity_tokens"]),
        (&50000.0.into(), &500000.0.into())
    );
    assert_eq!(
        (&pools[1]["pool"], &pools[1]["share"]),
        (&"swa".into(), &0.95.into())
    );
}

/// Hostile pass 31, H2: with post-capture KV sizing (v0.5.17+) the target's pools print `VA
/// upper bound` (reserved address space, not read), the EAGLE draft's pool a plain `KV Cache is
/// allocated` (`is_post_capture_kv_active` holds for a draft only with dflash, so its pool is
/// built at once and never resized), then the target's `Post-capture KV sizing: KV cache
/// allocated`. That target figure, the first of its start-up, is no new process: the draft's
/// pool stays.
#[test]
fn a_drafts_pool_stays_when_the_target_is_sized_after_capture() {
    let (expo, err) = once_summary(&data("post-capture-mha-eagle.log"));
    assert_eq!(
        one(&expo, "sglang_draft_kv_pool_capacity_tokens"),
        Some(500000.0)
    );
    assert_eq!(
        one(&expo, "sglang_draft_kv_pool_size_bytes"),
        Some(2.0 * GIB)
    );
    assert_eq!(one(&expo, "sglang_kv_pool_capacity_tokens"), Some(400000.0));
    assert_eq!(one(&expo, "sglang_kv_pool_size_bytes"), Some(48.0 * GIB));
    assert_eq!(one(&expo, "sglang:kv_cache_memory_usage_gb"), Some(48.0));
    assert_eq!(
        one(&expo, "sglang_kv_pool_used_estimate_bytes"),
        Some(24.0 * GIB)
    );
    assert!(
        err.contains("    -  busy at 09:00:18: KV cache 50.0% (200000/400000 tokens), 10 running, 0 queued\n"),
        "{err}"
    );
    // The same with a hybrid SWA target (its pools sized after capture too).
    let (expo, _) = once_summary(&data("post-capture-swa-eagle.log"));
    assert_eq!(
        one(&expo, "sglang_draft_kv_pool_capacity_tokens"),
        Some(500000.0)
    );
    assert_eq!(
        one(&expo, "sglang_draft_kv_pool_size_bytes"),
        Some(0.4 * GIB)
    );
    assert_eq!(one(&expo, "sglang_kv_pool_capacity_tokens"), Some(300000.0));
}

/// Hostile pass 31, H3: a hybrid SWA model's post-capture `KV size` is both pools together
/// (`SWAKVPool.post_capture_backed_bytes`, printed by `kv_pool_runtime.py`): it is the whole
/// hybrid pool's (`sglang_swa_kv_pool_size_bytes`, `sglang:kv_cache_memory_usage_gb`, as
/// upstream's), never the full-attention pool's gauge. Each pool's own bytes cannot be told
/// from it (the pools printed only their reserved upper bounds), so neither pool's size nor the
/// bytes estimate is exported; the shares are.
#[test]
fn a_hybrid_post_capture_size_is_both_pools_together() {
    for log in ["post-capture-swa.log", "post-capture-swa-eagle.log"] {
        let (expo, err) = once_summary(&data(log));
        assert_eq!(one(&expo, "sglang_kv_pool_size_bytes"), None, "{log}");
        assert_eq!(one(&expo, "sglang_swa_pool_size_bytes"), None, "{log}");
        assert_eq!(
            one(&expo, "sglang_swa_kv_pool_size_bytes"),
            Some(6.0 * GIB),
            "{log}"
        );
        assert_eq!(
            one(&expo, "sglang:kv_cache_memory_usage_gb"),
            Some(6.0),
            "{log}"
        );
        assert_eq!(
            one(&expo, "sglang_kv_pool_capacity_tokens"),
            Some(300000.0),
            "{log}"
        );
        assert_eq!(
            one(&expo, "sglang_full_pool_capacity_tokens"),
            Some(300000.0),
            "{log}"
        );
        assert_eq!(
            one(&expo, "sglang_swa_pool_capacity_tokens"),
            Some(240000.0),
            "{log}"
        );
        assert_eq!(
            one(&expo, "sglang_kv_pool_used_estimate_bytes"),
            None,
            "{log}"
        );
        assert!(
            err.contains("    -  busy at 09:00:18: KV cache full 50.0% (150000/300000 tokens), SWA 8.3% (20000/240000 tokens), 10 running, 0 queued\n"),
            "{log}: {err}"
        );
    }
}

/// Hostile pass 31, H7: a pool of 0 tokens is no pool, wherever it is printed. A model without
/// a sliding-window pool prints `Post-capture KV sizing: full_layer_tokens=N,
/// swa_layer_tokens=0` (its one pool's count as the full count): no sliding-window pool, no
/// hybrid full-attention pool. An all-SWA model's `full size: 0`: no full-attention pool.
#[test]
fn a_pool_of_no_tokens_is_no_pool_anywhere() {
    let (expo, _) = once_summary(&data("post-capture-mha-eagle.log"));
    assert_eq!(one(&expo, "sglang_swa_pool_capacity_tokens"), None);
    assert_eq!(one(&expo, "sglang:max_total_num_tokens_swa"), None);
    assert_eq!(one(&expo, "sglang_full_pool_capacity_tokens"), None);
    assert_eq!(one(&expo, "sglang_kv_pool_capacity_tokens"), Some(400000.0));
    let log = data("swa-all-swa.log");
    let (expo, err) = once_summary(&log);
    assert_eq!(one(&expo, "sglang_full_pool_capacity_tokens"), None);
    assert_eq!(one(&expo, "sglang_kv_pool_capacity_tokens"), None);
    assert_eq!(one(&expo, "sglang_kv_pool_size_bytes"), None);
    assert_eq!(
        one(&expo, "sglang_swa_pool_capacity_tokens"),
        Some(400000.0)
    );
    assert_eq!(
        one(&expo, "sglang:max_total_num_tokens_swa"),
        Some(400000.0)
    );
    assert_eq!(one(&expo, "sglang_swa_pool_size_bytes"), Some(4.0 * GIB));
    assert_eq!(one(&expo, "sglang_swa_kv_pool_size_bytes"), Some(4.0 * GIB));
    // 75 % of the sliding-window pool's 4 GiB; there is no full-attention pool.
    assert_eq!(
        one(&expo, "sglang_kv_pool_used_estimate_bytes"),
        Some(3.0 * GIB)
    );
    // The capacity line's 400000 is the sliding-window pool's: never the full pool's.
    assert!(
        err.contains("    -  busy at 09:00:17: KV cache full 0.0%, SWA 75.0% (300000/400000 tokens), 10 running, 0 queued\n"),
        "{err}"
    );
    let row = top_row(&log);
    assert!(row.contains("  75.0%  swa 300.0k/400.0k "), "{row}");
}

/// A capacity line read after a hybrid rank's stats lines is checked against the full-attention
/// pool's own count, never SGLang's larger-pool `#token` (here the sliding-window pool's 95000,
/// above the full pool's 50000 tokens yet within its own 100000).
#[test]
fn a_late_capacity_line_is_checked_against_the_full_pools_own_count() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("late.log");
    std::fs::write(
        &log,
        "[2026-11-12 09:00:12] Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 50000, K size: 1.00 GB, V size: 1.00 GB\n\
         [2026-11-12 09:00:13] SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 100000, K size: 1.00 GB, V size: 1.00 GB\n\
         [2026-11-12 09:00:17] Decode batch, #running-req: 10, #full token: 40000, full token usage: 0.80, #swa token: 95000, swa token usage: 0.95, cuda graph: True, gen throughput (token/s): 500.00, #queue-req: 0\n\
         [2026-11-12 09:00:18] max_total_num_tokens=50000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=64, context_len=131072, available_gpu_mem=0.80 GB\n\
         [2026-11-12 09:00:19] Decode batch, #running-req: 10, #full token: 40000, full token usage: 0.80, #swa token: 99000, swa token usage: 0.99, cuda graph: True, gen throughput (token/s): 500.00, #queue-req: 0\n",
    )
    .unwrap();
    let (expo, err) = once_summary(log.to_str().unwrap());
    assert_eq!(one(&expo, "sglang:num_used_tokens"), Some(99000.0));
    assert_eq!(
        one(
            &expo,
            "sglang_log_exporter_kv_capacity_contradictions_total"
        ),
        None,
        "{err}"
    );
    assert!(
        err.contains("KV cache full 80.0% (40000/50000 tokens), SWA 99.0% (99000/100000 tokens)"),
        "{err}"
    );
}

/// Exactly one series of `name`, its value.
fn only(expo: &[Sample], name: &str) -> f64 {
    one(expo, name).unwrap_or_else(|| panic!("no {name}"))
}

/// A v0.5.2x MTP boot in its own order (v0.5.14+ `scheduler.py` `init_model_worker`: both
/// runners load, then `init_memory_pools` builds the target's pool, then the draft's, then the
/// graphs): the target's `Load weight end`, the draft's (`mem usage` negative), one `KV Cache is
/// allocated` (the packed MTP pool, the target's: its verify graphs are captured on it), then
/// `Capture target verify CUDA graph`. The pool is the target's, not the draft's (it was shown
/// as `sglang_draft_kv_pool_*`, and the target had none).
#[test]
fn a_deferred_mtp_boot_keeps_its_one_pool_on_the_target() {
    let log = data("mtp-deferred-v0520.log");
    let expo = parse_exposition(&once(&["--gpu.disable", &log]));
    assert_eq!(only(&expo, "sglang_kv_pool_capacity_tokens"), 655360.0);
    assert_eq!(only(&expo, "sglang_kv_pool_size_bytes"), 42.87 * GIB);
    assert_eq!(only(&expo, "sglang:kv_cache_memory_usage_gb"), 42.87);
    assert_eq!(only(&expo, "sglang_weight_memory_bytes"), 86.5 * GIB);
    assert_eq!(only(&expo, "sglang_cuda_graph_memory_bytes"), 1.62 * GIB);
    // The draft's own figures: its weights and its graphs; it built no pool of its own.
    assert_eq!(only(&expo, "sglang_draft_weight_memory_bytes"), -1.2 * GIB);
    assert_eq!(
        only(&expo, "sglang_draft_cuda_graph_memory_bytes"),
        0.31 * GIB
    );
    assert_eq!(one(&expo, "sglang_draft_kv_pool_capacity_tokens"), None);
    assert_eq!(one(&expo, "sglang_draft_kv_pool_size_bytes"), None);
    // The used-bytes estimate is the target pool's: 6553 of 655360 tokens of 42.87 GiB.
    assert_eq!(
        only(&expo, "sglang_kv_pool_used_estimate_bytes"),
        (6553.0 / 655360.0 * 42.87 * GIB).round()
    );
}

/// A v0.5.14+ EAGLE3 boot whose draft builds a pool of its own: both runners load, then the
/// target's pool, then the draft's. The first pool after the draft's weights is the target's,
/// the second the draft's (it overwrote the target's pool as the draft's before).
#[test]
fn a_deferred_eagle3_boot_has_the_targets_pool_first_then_the_drafts() {
    let log = data("eagle3-deferred-v0515.log");
    let expo = parse_exposition(&once(&["--gpu.disable", &log]));
    assert_eq!(only(&expo, "sglang_kv_pool_capacity_tokens"), 9000.0);
    assert_eq!(
        only(&expo, "sglang_kv_pool_size_bytes"),
        (1.37 + 1.37) * GIB
    );
    assert_eq!(only(&expo, "sglang:kv_cache_memory_usage_gb"), 2.74);
    assert_eq!(only(&expo, "sglang_weight_memory_bytes"), 131.5 * GIB);
    assert_eq!(only(&expo, "sglang_cuda_graph_memory_bytes"), 0.52 * GIB);
    assert_eq!(only(&expo, "sglang_draft_weight_memory_bytes"), 2.5 * GIB);
    assert_eq!(only(&expo, "sglang_draft_kv_pool_capacity_tokens"), 9000.0);
    assert_eq!(
        only(&expo, "sglang_draft_kv_pool_size_bytes"),
        (0.02 + 0.02) * GIB
    );
    assert_eq!(
        only(&expo, "sglang_draft_cuda_graph_memory_bytes"),
        0.11 * GIB
    );
}

/// A v0.5.18+ boot with post-capture KV sizing in its own order: both runners load, the
/// target's pool reserves its address space (`KV Cache VA upper bound`, no figure), the EAGLE3
/// draft's pool is built at once (`KV Cache is allocated`: the draft's, the target's pool being
/// built), the graphs, then the target's pool is sized (`Post-capture KV sizing`).
#[test]
fn a_deferred_post_capture_boot_keeps_the_drafts_pool_after_the_targets_reserved_one() {
    let log = data("post-capture-deferred-v0520.log");
    let expo = parse_exposition(&once(&["--gpu.disable", &log]));
    assert_eq!(only(&expo, "sglang_kv_pool_capacity_tokens"), 400000.0);
    assert_eq!(only(&expo, "sglang_kv_pool_size_bytes"), 48.0 * GIB);
    assert_eq!(only(&expo, "sglang:kv_cache_memory_usage_gb"), 48.0);
    assert_eq!(
        only(&expo, "sglang_draft_kv_pool_capacity_tokens"),
        500000.0
    );
    assert_eq!(only(&expo, "sglang_draft_kv_pool_size_bytes"), 2.0 * GIB);
    assert_eq!(only(&expo, "sglang_cuda_graph_memory_bytes"), 1.5 * GIB);
    assert_eq!(
        only(&expo, "sglang_draft_cuda_graph_memory_bytes"),
        0.3 * GIB
    );
}
