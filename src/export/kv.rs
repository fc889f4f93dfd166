//! KV-cache bytes in use, estimated per rank: `sglang:token_usage` × `sglang_kv_pool_size_bytes`
//! (the pool's size from the `KV Cache is allocated` startup line). Shown next to the GPU's own
//! used and total memory (`sglang_rank_gpu_memory_*_bytes`), since token usage is a share of
//! SGLang's pool, not of the GPU.

use crate::family::{Family, Kind};
use crate::state::State;

use super::metrics::{rank_labels, shown_value};

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
    let mut fam = Family::new(
        "sglang_kv_pool_used_estimate_bytes",
        "Estimated KV-cache bytes in use on the rank: token usage (0-1) times the KV pool size in bytes.",
        Kind::Gauge,
    );
    for (name, srv) in state.servers() {
        for (ranks, rank) in &srv.ranks {
            let u = shown_value(state, srv, rank, usage, now);
            let p = shown_value(state, srv, rank, pool, now);
            if let (Some(u), Some(p)) = (u, p) {
                fam.push(rank_labels(name, srv, ranks), (u * p).round());
            }
        }
    }
    vec![fam]
}
