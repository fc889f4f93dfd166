//! What a scrape shows: the value of every per-rank series at a given "now", with its labels.
//!
//! One home for that truth: the `/metrics` exposition ([`crate::export::metrics`]), the
//! Pushgateway push (which sends that exposition) and `backfill` (which writes these samples at
//! each line's time) all read the state through here, so they cannot drift apart.

use crate::catalog::{self, FamilyDef};
use crate::family::{Family, Labels};
use crate::parse::patterns::{MetricKind, Patterns};
use crate::record::Ranks;
use crate::state::{RankState, ServerKey, ServerState, State};

/// The per-rank families besides the pattern file's metrics, in exposition order after them
/// (declared in [`catalog::rank`], in the same order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankFamily {
    /// `sglang_idle`.
    Idle,
    /// `sglang_last_stats_timestamp_seconds`.
    LastStats,
    /// `sglang_prefill_batches_total`.
    PrefillBatches,
    /// `sglang_decode_stats_lines_total`.
    DecodeLines,
    /// `sglang_retractions_total`.
    Retractions,
    /// `sglang_last_retraction_timestamp_seconds`.
    LastRetraction,
    /// `sglang_kv_pool_used_estimate_bytes`.
    KvUsedEstimate,
    /// `sglang_api_live`.
    ApiLive,
}

impl RankFamily {
    /// Every rank family, in exposition order.
    pub const ALL: [RankFamily; 8] = [
        RankFamily::Idle,
        RankFamily::LastStats,
        RankFamily::PrefillBatches,
        RankFamily::DecodeLines,
        RankFamily::Retractions,
        RankFamily::LastRetraction,
        RankFamily::KvUsedEstimate,
        RankFamily::ApiLive,
    ];

    /// Its declaration in the registry.
    pub const fn def(self) -> &'static FamilyDef {
        match self {
            RankFamily::Idle => &catalog::rank::IDLE,
            RankFamily::LastStats => &catalog::rank::LAST_STATS,
            RankFamily::PrefillBatches => &catalog::rank::PREFILL_BATCHES,
            RankFamily::DecodeLines => &catalog::rank::DECODE_LINES,
            RankFamily::Retractions => &catalog::rank::RETRACTIONS,
            RankFamily::LastRetraction => &catalog::rank::LAST_RETRACTION,
            RankFamily::KvUsedEstimate => &catalog::rank::KV_USED_ESTIMATE,
            RankFamily::ApiLive => &catalog::rank::API_LIVE,
        }
    }
}

/// The families of per-rank series, empty, in exposition order: the pattern file's metrics
/// (index = [`crate::parse::patterns::MetricId`]), then [`RankFamily::ALL`].
pub fn rank_catalog(pat: &Patterns) -> Vec<Family> {
    let mut out: Vec<Family> = pat
        .metrics
        .iter()
        .map(|d| Family::new(d.name.clone(), d.help.clone(), d.kind.into()))
        .collect();
    out.extend(RankFamily::ALL.iter().map(|f| Family::of(f.def())));
    out
}

/// The value a scrape shows for metric `id` of a rank at `now`: the server-scope value (the
/// capacity line) where there is one, else the rank's; 0 for an activity gauge of an idle rank;
/// 0 for a counter of a rank that prints stats but never added to it (so the first retraction is
/// an increase from 0 that `increase()` and alerts can see); `None` where never set or withdrawn.
/// On a rank the server's HTTP API feeds, its values win while it answers (see the comment
/// inside for the whole rule).
pub fn value(
    state: &State,
    srv: &ServerState,
    rank: &RankState,
    id: usize,
    now: f64,
) -> Option<f64> {
    let def = &state.patterns().metrics[id];
    if def.is_alias() {
        // SGLang's name and unit for a metric of ours: the first source with a value, scaled.
        let scale = def.scale.unwrap_or(1.0);
        return def
            .alias_of
            .iter()
            .find_map(|&src| value(state, srv, rank, src as usize, now))
            .map(|v| v * scale);
    }
    // Values from the server's HTTP API ([`crate::state::live`]) on a rank it feeds: while it
    // answers, the activity gauges are its own (no idle policy needed), and one it does not
    // give is not shown (the log's older line would contradict it in the same scrape). While
    // it does not answer, the log's activity gauges show where a stats line came after the
    // API's last answer (under the idle policy), else none: never the last busy value. Other
    // values (capacity) are the log's, else the API's last.
    let live = match (&srv.api, &rank.live) {
        (Some(api), Some(l)) => {
            let v = l.values[id];
            // A per-rank poller's failure is that rank's alone.
            if api.up && l.up {
                if !v.is_nan() {
                    return Some(v);
                }
                if def.activity {
                    return None;
                }
            } else if def.activity {
                let log_newer = rank
                    .last_stats
                    .zip(api.last_success)
                    .is_some_and(|(t, s)| t > s);
                if !log_newer {
                    return None;
                }
                // The log's own value, or none: never the API's last.
                return log_value(state, srv, rank, id, now);
            }
            v
        }
        _ => f64::NAN,
    };
    log_value(state, srv, rank, id, now).or_else(|| (!live.is_nan()).then_some(live))
}

/// What the log says of metric `id` (see [`value`]): the server-scope value, else the rank's,
/// under the idle policy; 0 for a counter of a rank with stats lines that never added to it.
fn log_value(
    state: &State,
    srv: &ServerState,
    rank: &RankState,
    id: usize,
    now: f64,
) -> Option<f64> {
    let def = &state.patterns().metrics[id];
    let v = if srv.values[id].is_nan() {
        rank.values[id]
    } else {
        srv.values[id]
    };
    if v.is_nan() {
        return (def.kind == MetricKind::Counter && rank.has_stats()).then_some(0.0);
    }
    if def.activity && rank.is_idle(now, state.config().idle_after) {
        return Some(0.0);
    }
    Some(v)
}

/// Every series of one rank at `now`, as (index in [`rank_catalog`], value), in catalog order.
pub fn rank_samples(
    state: &State,
    srv: &ServerState,
    rank: &RankState,
    now: f64,
    out: &mut Vec<(usize, f64)>,
) {
    out.clear();
    let pat = state.patterns();
    let n = pat.metrics.len();
    for id in 0..n {
        if let Some(v) = value(state, srv, rank, id, now) {
            out.push((id, v));
        }
    }
    let stats = rank.has_stats();
    for (i, f) in RankFamily::ALL.iter().enumerate() {
        let v = match f {
            RankFamily::Idle => match (&srv.api, &rank.live) {
                // Live from the API: idle when it says nothing runs or waits (never "idle"
                // beside its running requests).
                (Some(api), Some(l)) if api.up && l.up => {
                    let n = state.patterns();
                    let of = |m| n.metric_by_id(m).map(|i| l.values[i as usize]);
                    let busy = [of("num_running_reqs"), of("num_queue_reqs")]
                        .into_iter()
                        .flatten()
                        .any(|v| v > 0.0);
                    Some(f64::from(u8::from(!busy)))
                }
                _ => rank
                    .last_stats
                    .map(|_| f64::from(u8::from(rank.is_idle(now, state.config().idle_after)))),
            },
            RankFamily::LastStats => rank.last_stats,
            // Counters exist from a rank's first stats line (at 0), so their first increase is
            // seen by `rate()`/`increase()`.
            RankFamily::PrefillBatches => {
                (stats || rank.prefill_lines > 0).then_some(rank.prefill_lines as f64)
            }
            RankFamily::DecodeLines => {
                (stats || rank.decode_lines > 0).then_some(rank.decode_lines as f64)
            }
            RankFamily::Retractions => {
                (stats || rank.retractions > 0).then_some(rank.retractions as f64)
            }
            RankFamily::LastRetraction => rank.last_retraction,
            RankFamily::KvUsedEstimate => kv_used_estimate(state, srv, rank, now),
            RankFamily::ApiLive => srv
                .api
                .as_ref()
                .zip(rank.live.as_ref())
                .map(|(a, l)| f64::from(u8::from(a.up && l.up))),
        };
        if let Some(v) = v {
            out.push((n + i, v));
        }
    }
}

/// What a rank without any stats line reads as: under plain TP (no DP rank) only TP0 prints
/// them, so another TP rank never will; else it has not printed one yet.
pub fn no_stats_text(dp: Option<u32>, tp: Option<u32>) -> &'static str {
    if dp.is_none() && tp.is_some_and(|t| t != 0) {
        "no stats lines (only TP0 prints under plain TP)"
    } else {
        "no stats line yet"
    }
}

/// The KV-cache bytes in use, estimated: each pool's share times that pool's own bytes (see
/// [`crate::kv`]; a hybrid SWA model's full-attention and sliding-window pools each against its
/// own capacity and size, never SGLang's larger-pool token usage against the full pool's size).
/// 0 while the rank is idle, as token usage is.
///
/// SGLang prints the usage with two decimals (0.00 for 2,290 of 786,432 tokens), so where the
/// used tokens and the capacity agree with it (within its rounding), their exact ratio is used.
fn kv_used_estimate(state: &State, srv: &ServerState, rank: &RankState, now: f64) -> Option<f64> {
    let pat = state.patterns();
    let read = |name: &str| {
        pat.metric_by_id(name)
            .and_then(|i| value(state, srv, rank, i as usize, now))
    };
    let v = kv_values(&read);
    let kv = crate::kv::KvUse::of(&crate::kv::KvValues {
        capacity: v.max_total.or(v.pool_capacity),
        ..v
    });
    kv.used_bytes(
        read("kv_pool_size_bytes"),
        read("swa_layer_pool_size_bytes"),
    )
    .map(f64::round)
}

/// A rank's KV figures by their pattern-file ids, read with `read` (the one-pool `capacity` is
/// left to the caller).
pub fn kv_values(read: &dyn Fn(&str) -> Option<f64>) -> crate::kv::KvValues {
    crate::kv::KvValues {
        used: read("num_used_tokens"),
        usage: read("token_usage"),
        capacity: None,
        pool_capacity: read("kv_pool_capacity_tokens"),
        full_capacity: read("full_pool_capacity_tokens"),
        max_total: read("max_total_num_tokens"),
        full_used: read("full_used_tokens"),
        full_usage: read("full_token_usage"),
        swa_used: read("swa_used_tokens"),
        swa_usage: read("swa_token_usage"),
        swa_capacity: read("swa_pool_capacity_tokens"),
        mamba_used: read("mamba_used_slots"),
        mamba_usage: read("mamba_usage"),
    }
}

/// The labels that tell one server's series from another's (every [`ServerKey`] and source
/// its own): `server`, then `engine` where several engines share a log, then the source's own
/// labels (Kubernetes `namespace`, `pod`, `container`). Every family fed per server carries
/// them all, or two engines (two replicas of a `kubectl logs --prefix` stream) would be two
/// samples of one series.
pub fn origin_labels(key: &ServerKey, srv: &ServerState) -> Labels {
    let mut l: Labels = vec![("server", key.server.clone())];
    if !key.engine.is_empty() {
        l.push(("engine", key.engine.clone()));
    }
    l.extend(srv.source_labels.iter().cloned());
    l
}

/// The labels of a server's series: [`origin_labels`], then `model_name` and `engine_type`.
pub fn server_labels(key: &ServerKey, srv: &ServerState) -> Labels {
    let mut l = origin_labels(key, srv);
    l.push(("model_name", srv.model_name().to_string()));
    l.push((
        "engine_type",
        srv.engine_type(&key.server).as_str().to_string(),
    ));
    l
}

/// The label set of SGLang's scheduler metrics plus ours: [`server_labels`], then
/// [`rank_label_pairs`].
pub fn rank_labels(key: &ServerKey, srv: &ServerState, r: &Ranks) -> Labels {
    let mut l = server_labels(key, srv);
    l.extend(rank_label_pairs(r));
    l
}

/// The rank labels, valued as upstream values them (v0.5.23 `metrics_collector.py`):
/// `tp_rank`, `pp_rank` and `moe_ep_rank` (the `EPn` tag) are always set, `"0"` where the
/// prefix names none (a single rank prints no tag); `dp_rank` only where the prefix names a DP
/// rank (upstream adds it only under a data-parallel controller). `attn_cp_rank` and
/// `moe_dp_rank` (v0.5.9+, ours) only where the prefix names them. The GPU series use the same
/// pairs, so they join the rank series.
pub fn rank_label_pairs(r: &Ranks) -> Labels {
    let s = |v: Option<u32>| v.unwrap_or(0).to_string();
    let mut l = Labels::new();
    if let Some(dp) = r.dp {
        l.push(("dp_rank", dp.to_string()));
    }
    l.extend([
        ("pp_rank", s(r.pp)),
        ("tp_rank", s(r.tp)),
        ("moe_ep_rank", s(r.ep)),
    ]);
    if let Some(v) = r.attn_cp {
        l.push(("attn_cp_rank", v.to_string()));
    }
    if let Some(v) = r.moe_dp {
        l.push(("moe_dp_rank", v.to_string()));
    }
    l
}

/// The per-rank families of the whole state at `now` (empty ones included).
pub fn rank_families(state: &State, now: f64) -> Vec<Family> {
    let mut fams = rank_catalog(state.patterns());
    let mut buf = Vec::new();
    for (key, srv) in state.servers() {
        if srv.ranks.is_empty() {
            // Server-scope facts (the capacity line) of a server with no rank line yet.
            for (id, v) in srv.values.iter().enumerate() {
                if !v.is_nan() {
                    fams[id].push(rank_labels(key, srv, &Ranks::default()), *v);
                }
            }
            continue;
        }
        for (ranks, rank) in &srv.ranks {
            rank_samples(state, srv, rank, now, &mut buf);
            let labels = rank_labels(key, srv, ranks);
            for &(i, v) in &buf {
                fams[i].push(labels.clone(), v);
            }
        }
    }
    fams
}

/// The request families of the whole state (empty ones included): SGLang's tokenizer metrics
/// rebuilt from `--log-requests` records (see [`crate::state::requests`]), each series labelled
/// with [`server_labels`].
pub fn request_families(state: &State) -> Vec<Family> {
    let mut fams = crate::state::requests::request_catalog();
    for (key, srv) in state.servers() {
        if let Some(r) = &srv.requests {
            r.families_into(&server_labels(key, srv), &mut fams);
        }
    }
    fams
}
