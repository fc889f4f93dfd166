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
    assert!(
        err.contains("TP0  busy at 10:03:00: KV cache 8.0% (96000/1200000 tokens)"),
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
    // 180000 of 900000 tokens: 20 %, the printed full token usage; the estimate is 20 % of the
    // full pool's bytes.
    assert_eq!(
        one(&expo, "sglang_kv_pool_used_estimate_bytes"),
        Some((0.2 * (15.45 * GIB + 15.45 * GIB)).round())
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
        err.contains("busy at 09:02:00: KV cache 20.0% (180000/900000 tokens)"),
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
