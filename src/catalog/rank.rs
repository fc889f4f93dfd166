//! The per-rank families besides the pattern file's metrics, in exposition order after them: each rank's series, labelled as SGLang's scheduler metrics ([`RANK_LABELS`]).

use super::{FamilyDef, Kind, RANK_LABELS};

/// `sglang_idle`.
pub const IDLE: FamilyDef = FamilyDef {
    name: "sglang_idle",
    help: "1 when the rank printed no stats line for --idle-after seconds (its activity gauges then read 0), else 0; on a rank live from the server's HTTP API (--sglang.url), 1 when it reports no running and no queued request.",
    kind: Kind::Gauge,
    unit: "",
    labels: RANK_LABELS,
    reads: "the rank's last stats line and --idle-after; the API's running and queued requests while it answers",
};

/// `sglang_last_stats_timestamp_seconds`.
pub const LAST_STATS: FamilyDef = FamilyDef {
    name: "sglang_last_stats_timestamp_seconds",
    help: "Unix time in seconds of the rank's last prefill or decode stats line.",
    kind: Kind::Gauge,
    unit: "seconds",
    labels: RANK_LABELS,
    reads: "the time of the rank's last Prefill or Decode batch line",
};

/// `sglang_prefill_batches_total`.
pub const PREFILL_BATCHES: FamilyDef = FamilyDef {
    name: "sglang_prefill_batches_total",
    help: "Prefill batches, one per Prefill batch line.",
    kind: Kind::Counter,
    unit: "",
    labels: RANK_LABELS,
    reads: "Prefill batch lines, counted",
};

/// `sglang_decode_stats_lines_total`.
pub const DECODE_LINES: FamilyDef = FamilyDef {
    name: "sglang_decode_stats_lines_total",
    help: "Decode batch stats lines (one every --decode-log-interval decode steps).",
    kind: Kind::Counter,
    unit: "",
    labels: RANK_LABELS,
    reads: "Decode batch lines, counted",
};

/// `sglang_retractions_total`.
pub const RETRACTIONS: FamilyDef = FamilyDef {
    name: "sglang_retractions_total",
    help: "Retraction events (KV cache pool full), one per retraction line.",
    kind: Kind::Counter,
    unit: "",
    labels: RANK_LABELS,
    reads: "retraction lines, counted",
};

/// `sglang_last_retraction_timestamp_seconds`.
pub const LAST_RETRACTION: FamilyDef = FamilyDef {
    name: "sglang_last_retraction_timestamp_seconds",
    help: "Unix time in seconds of the rank's last retraction line (KV cache pool full); absent until one.",
    kind: Kind::Gauge,
    unit: "seconds",
    labels: RANK_LABELS,
    reads: "the time of the rank's last retraction line",
};

/// `sglang_kv_pool_used_estimate_bytes`.
pub const KV_USED_ESTIMATE: FamilyDef = FamilyDef {
    name: "sglang_kv_pool_used_estimate_bytes",
    help: "Estimated KV-cache bytes in use on the rank: the used share of the pool (used / capacity tokens, else token usage) times the KV pool size in bytes; a hybrid SWA model's pools each by its own share and size, summed (absent where a pool's size is not known).",
    kind: Kind::Gauge,
    unit: "bytes",
    labels: RANK_LABELS,
    reads: "the rank's used KV share (pattern-file gauges) times its KV pool bytes",
};

/// `sglang_api_live`.
pub const API_LIVE: FamilyDef = FamilyDef {
    name: "sglang_api_live",
    help: "1 while the rank's values come live from the server's HTTP API (--sglang.url), 0 while the API that fed it does not answer (its activity gauges are then withdrawn); absent for a rank the API never fed.",
    kind: Kind::Gauge,
    unit: "",
    labels: RANK_LABELS,
    reads: "whether the server's HTTP API (--sglang.url) feeds the rank and answers",
};

/// Every one, in exposition order.
pub const ALL: [&FamilyDef; 8] = [
    &IDLE,
    &LAST_STATS,
    &PREFILL_BATCHES,
    &DECODE_LINES,
    &RETRACTIONS,
    &LAST_RETRACTION,
    &KV_USED_ESTIMATE,
    &API_LIVE,
];
