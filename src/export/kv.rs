//! KV-cache bytes in use, estimated per rank: `sglang:token_usage` × `sglang_kv_pool_size_bytes`
//! (the pool's size from the `KV Cache is allocated` startup line). Shown next to the GPU's own
//! used and total memory (`sglang_rank_gpu_memory_*_bytes`), since token usage is a share of
//! SGLang's pool, not of the GPU.

use crate::family::{Family, Kind};
use crate::record::Ranks;
use crate::state::State;

use super::metrics::rank_labels;

/// `sglang_kv_pool_used_estimate_bytes` for every rank that has both a token usage and a pool
/// size; it reads 0 while the rank is idle, as token usage does.
pub fn families(state: &State, now: f64) -> Vec<Family> {
    let pat = state.patterns();
    let (Some(usage), Some(pool)) = (
        pat.metric_by_id("token_usage"),
        pat.metric_by_id("kv_pool_size_bytes"),
    ) else {
        return Vec::new();
    };
    let (usage, pool) = (usage as usize, pool as usize);
    let idle_after = state.config().idle_after;
    let activity = pat.metrics[usage].activity;
    let mut fam = Family::new(
        "sglang_kv_pool_used_estimate_bytes",
        "Estimated KV-cache bytes in use on the rank: token usage (0-1) times the KV pool size in bytes.",
        Kind::Gauge,
    );
    for (name, srv) in state.servers() {
        for (ranks, rank) in &srv.ranks {
            let pick = |id: usize| {
                if srv.values[id].is_nan() {
                    rank.values[id]
                } else {
                    srv.values[id]
                }
            };
            let (u, p) = (pick(usage), pick(pool));
            if u.is_nan() || p.is_nan() {
                continue;
            }
            let idle = rank.last_stats.is_none_or(|t| now - t > idle_after);
            let u = if activity && idle { 0.0 } else { u };
            let r: &Ranks = ranks;
            fam.push(rank_labels(name, srv, r), (u * p).round());
        }
    }
    vec![fam]
}
