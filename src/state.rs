//! The current value of every series, keyed by server and rank.
//!
//! Sources apply parsed [`Record`]s; exporters read it through
//! [`crate::export::metrics::families`]. It bounds its own size: a flood of distinct servers,
//! ranks, HTTP paths or unknown field names cannot grow memory without limit (what is refused is
//! counted in `sglang_log_exporter_series_dropped_total`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::parse::patterns::{Class, MetricId, MetricKind, Patterns, Scope};
use crate::record::{Ranks, Record, ServerArgs};

/// Limits and policy of the state.
#[derive(Debug, Clone)]
pub struct StateConfig {
    /// Seconds without a stats line after which a rank's activity gauges read 0.
    pub idle_after: f64,
    /// Most servers tracked.
    pub max_servers: usize,
    /// Most ranks tracked per server.
    pub max_ranks: usize,
    /// Most (method, path, status) series per server.
    pub max_http_series: usize,
    /// Most distinct unknown field names counted by name (the rest count as `other`).
    pub max_unknown_fields: usize,
    /// Most sources tracked in the self metrics.
    pub max_sources: usize,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            idle_after: 30.0,
            max_servers: 256,
            max_ranks: 1024,
            max_http_series: 256,
            max_unknown_fields: 64,
            max_sources: 256,
        }
    }
}

/// Where a server runs: SGLang's `engine_type` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineType {
    /// No PD disaggregation.
    Unified,
    /// PD prefill server.
    Prefill,
    /// PD decode server.
    Decode,
}

impl EngineType {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            EngineType::Unified => "unified",
            EngineType::Prefill => "prefill",
            EngineType::Decode => "decode",
        }
    }
}

/// One scheduler rank of a server.
#[derive(Debug, Clone)]
pub struct RankState {
    /// Values by [`MetricId`]; NaN where never set.
    pub values: Vec<f64>,
    /// Unix seconds of the last prefill or decode line.
    pub last_stats: Option<f64>,
    /// Prefill lines seen.
    pub prefill_lines: u64,
    /// Decode lines seen.
    pub decode_lines: u64,
    /// Retraction lines seen.
    pub retractions: u64,
}

impl RankState {
    /// The idle policy: no stats line for more than `idle_after` seconds before `now` (or none
    /// at all). Live scrapes, `--once` and backfill all judge by this.
    pub fn is_idle(&self, now: f64, idle_after: f64) -> bool {
        self.last_stats.is_none_or(|t| now - t > idle_after)
    }
}

/// One SGLang server (one source name).
#[derive(Debug, Clone)]
pub struct ServerState {
    /// From `server_args`.
    pub args: Option<ServerArgs>,
    /// Inferred from PD-only fields when `server_args` was not seen.
    pub engine_hint: Option<EngineType>,
    /// Values of server-scope metrics by [`MetricId`]; NaN where never set.
    pub values: Vec<f64>,
    /// Ranks, in label order.
    pub ranks: BTreeMap<Ranks, RankState>,
    /// HTTP requests by (method, normalised path, status).
    pub http: BTreeMap<(&'static str, &'static str, u16), u64>,
}

impl ServerState {
    /// `engine_type`: `server_args`' `disaggregation_mode`, else the server's name containing
    /// `prefill`/`decode`, else PD-only fields seen, else `unified`.
    pub fn engine_type(&self, name: &str) -> EngineType {
        match self
            .args
            .as_ref()
            .and_then(|a| a.disaggregation_mode.as_deref())
        {
            Some("prefill") => return EngineType::Prefill,
            Some("decode") => return EngineType::Decode,
            Some(_) => return EngineType::Unified,
            None => {}
        }
        if name.contains("prefill") {
            EngineType::Prefill
        } else if name.contains("decode") {
            EngineType::Decode
        } else {
            self.engine_hint.unwrap_or(EngineType::Unified)
        }
    }

    /// `model_name`, or empty when no `server_args` line was seen.
    pub fn model_name(&self) -> &str {
        self.args
            .as_ref()
            .and_then(|a| a.model_name.as_deref())
            .unwrap_or("")
    }
}

/// Per-source line counters (self metrics).
#[derive(Debug, Clone, Default)]
pub struct SourceStats {
    /// Lines read.
    pub lines: u64,
    /// Lines by matched line kind index.
    pub matched: BTreeMap<usize, u64>,
    /// Lines that matched no kind.
    pub unmatched: u64,
    /// Lines over the length limit (skipped).
    pub oversized: u64,
    /// Inputs that ended, or were rotated or truncated, in the middle of a line (not parsed).
    pub incomplete: u64,
    /// Lines that were not valid UTF-8 (read lossily).
    pub invalid_utf8: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Read errors (open, read, permission, a directory instead of a file).
    pub errors: u64,
    /// Field values that were not numbers.
    pub bad_values: u64,
}

/// Counts a source gathers locally and hands to the state in batches (not per line).
#[derive(Debug, Clone, Default)]
pub struct SourceDelta {
    /// Lines read.
    pub lines: u64,
    /// Lines that matched no kind.
    pub unmatched: u64,
    /// Oversized lines.
    pub oversized: u64,
    /// Incomplete last lines.
    pub incomplete: u64,
    /// Invalid UTF-8 lines.
    pub invalid_utf8: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Read errors.
    pub errors: u64,
}

/// The state shared by sources and exporters.
pub type Shared = Arc<Mutex<State>>;

/// Locks the shared state. A thread that panicked while holding the lock leaves the state
/// consistent enough to keep serving (every update is a few field writes), so poisoning is
/// ignored rather than silently dropping every later update.
pub fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// All series.
#[derive(Debug)]
pub struct State {
    pub(crate) pat: Arc<Patterns>,
    pub(crate) cfg: StateConfig,
    pub(crate) servers: BTreeMap<String, ServerState>,
    pub(crate) sources: BTreeMap<String, SourceStats>,
    pub(crate) unknown_fields: BTreeMap<String, u64>,
    /// The latest time any input line carried (Unix seconds).
    pub(crate) latest_input: Option<f64>,
    pub(crate) dropped_series: u64,
    /// Extra counters set by other parts (journalctl restarts, push results…), by
    /// (metric name, label value).
    pub(crate) extra: BTreeMap<(&'static str, String), f64>,
    /// Families produced by collectors that run on their own timer (the GPU sampler), by
    /// collector name; rendered after the state's own.
    pub(crate) collected: BTreeMap<&'static str, Vec<crate::family::Family>>,
    derived: Derived,
}

/// Metric ids the state derives values for (absent in a custom pattern file: nothing derived).
#[derive(Debug, Clone, Copy, Default)]
struct Derived {
    used: Option<MetricId>,
    usage: Option<MetricId>,
    full_used: Option<MetricId>,
    swa_used: Option<MetricId>,
    pool_usages: [Option<MetricId>; 4],
    hit_rate: Option<MetricId>,
    new_tokens: Option<MetricId>,
    cached_tokens: Option<MetricId>,
    pd_prefill: [Option<MetricId>; 2],
    pd_decode: [Option<MetricId>; 3],
}

impl State {
    /// An empty state for these patterns.
    pub fn new(pat: Arc<Patterns>, cfg: StateConfig) -> State {
        let id = |n: &str| pat.metric_by_id(n);
        let derived = Derived {
            used: id("num_used_tokens"),
            usage: id("token_usage"),
            full_used: id("full_used_tokens"),
            swa_used: id("swa_used_tokens"),
            pool_usages: [
                id("full_token_usage"),
                id("swa_token_usage"),
                id("mamba_usage"),
                id("gpu_token_usage"),
            ],
            hit_rate: id("cache_hit_rate"),
            new_tokens: id("prefill_new_tokens_total"),
            cached_tokens: id("prefill_cached_tokens_total"),
            pd_prefill: [
                id("num_prefill_bootstrap_queue_reqs"),
                id("num_prefill_inflight_queue_reqs"),
            ],
            pd_decode: [
                id("num_decode_prealloc_queue_reqs"),
                id("num_decode_transfer_queue_reqs"),
                id("decode_preallocated_usage"),
            ],
        };
        State {
            pat,
            cfg,
            servers: BTreeMap::new(),
            sources: BTreeMap::new(),
            unknown_fields: BTreeMap::new(),
            latest_input: None,
            dropped_series: 0,
            extra: BTreeMap::new(),
            collected: BTreeMap::new(),
            derived,
        }
    }

    /// Wraps a new state for sharing between threads.
    pub fn shared(pat: Arc<Patterns>, cfg: StateConfig) -> Shared {
        Arc::new(Mutex::new(State::new(pat, cfg)))
    }

    /// The patterns the state's metric ids refer to.
    pub fn patterns(&self) -> &Arc<Patterns> {
        &self.pat
    }

    /// The configuration.
    pub fn config(&self) -> &StateConfig {
        &self.cfg
    }

    /// The latest time carried by any input line, in Unix seconds.
    pub fn latest_input(&self) -> Option<f64> {
        self.latest_input
    }

    /// Servers by name.
    pub fn servers(&self) -> &BTreeMap<String, ServerState> {
        &self.servers
    }

    /// Adds `by` to an extra self-metric counter (`name` must be a metric in
    /// [`crate::export::metrics::EXTRA`]), labelled `label`.
    pub fn add_extra(&mut self, name: &'static str, label: &str, by: f64) {
        *self.extra.entry((name, label.to_string())).or_insert(0.0) += by;
    }

    /// Sets an extra self-metric gauge.
    pub fn set_extra(&mut self, name: &'static str, label: &str, v: f64) {
        self.extra.insert((name, label.to_string()), v);
    }

    /// Replaces the families of collector `name` (e.g. `gpu`), shown on every scrape until the
    /// next call. Collectors run on their own timer, never on the scrape path.
    pub fn set_collected(&mut self, name: &'static str, families: Vec<crate::family::Family>) {
        self.collected.insert(name, families);
    }

    fn server_mut(&mut self, server: &str) -> Option<&mut ServerState> {
        if !self.servers.contains_key(server) {
            if self.servers.len() >= self.cfg.max_servers {
                self.dropped_series += 1;
                return None;
            }
            let n = self.pat.metrics.len();
            self.servers.insert(
                server.to_string(),
                ServerState {
                    args: None,
                    engine_hint: None,
                    values: vec![f64::NAN; n],
                    ranks: BTreeMap::new(),
                    http: BTreeMap::new(),
                },
            );
        }
        self.servers.get_mut(server)
    }

    /// Applies a batch of source counters.
    pub fn add_source_counts(&mut self, source: &str, d: &SourceDelta) {
        let Some(s) = self.source_mut(source) else {
            return;
        };
        s.lines += d.lines;
        s.unmatched += d.unmatched;
        s.oversized += d.oversized;
        s.incomplete += d.incomplete;
        s.invalid_utf8 += d.invalid_utf8;
        s.bytes += d.bytes;
        s.errors += d.errors;
    }

    fn source_mut(&mut self, source: &str) -> Option<&mut SourceStats> {
        if !self.sources.contains_key(source) {
            if self.sources.len() >= self.cfg.max_sources {
                self.dropped_series += 1;
                return None;
            }
            self.sources
                .insert(source.to_string(), SourceStats::default());
        }
        self.sources.get_mut(source)
    }

    /// Applies one parsed line from `source` to server `server`. `ts` is the line's time in Unix
    /// seconds (journald's timestamp, the prefix time, or the arrival time).
    pub fn apply(&mut self, source: &str, server: &str, rec: &Record<'_>, ts: Option<f64>) {
        if let Some(s) = self.source_mut(source) {
            *s.matched.entry(rec.kind).or_insert(0) += 1;
            s.bad_values += rec.bad_values as u64;
        }
        for key in rec.unknown_keys() {
            self.count_unknown(key);
        }
        if let Some(t) = ts {
            if self.latest_input.is_none_or(|l| t > l) {
                self.latest_input = Some(t);
            }
        }
        let pat = self.pat.clone();
        let d = self.derived;
        let max_ranks = self.cfg.max_ranks;
        let max_http = self.cfg.max_http_series;
        let mut dropped = 0;
        let Some(srv) = self.server_mut(server) else {
            return;
        };
        match rec.class {
            Class::ServerArgs => {
                if let Some(a) = &rec.server_args {
                    srv.args = Some((**a).clone());
                }
            }
            Class::Access => {
                if let Some(a) = rec.access {
                    let key = (normalise_method(a.method), normalise_path(a.path), a.status);
                    if srv.http.len() < max_http || srv.http.contains_key(&key) {
                        *srv.http.entry(key).or_insert(0) += 1;
                    } else {
                        dropped += 1;
                    }
                }
            }
            class => {
                let line_scope = pat.lines[rec.kind].scope;
                let n = pat.metrics.len();
                if !srv.ranks.contains_key(&rec.ranks) && srv.ranks.len() >= max_ranks {
                    self.dropped_series += 1;
                    return;
                }
                let rank = srv.ranks.entry(rec.ranks).or_insert_with(|| RankState {
                    values: vec![f64::NAN; n],
                    last_stats: None,
                    prefill_lines: 0,
                    decode_lines: 0,
                    retractions: 0,
                });
                for &(id, v) in rec.values {
                    let def = &pat.metrics[id as usize];
                    let slot = if def.scope == Scope::Server || line_scope == Scope::Server {
                        &mut srv.values[id as usize]
                    } else {
                        &mut rank.values[id as usize]
                    };
                    match def.kind {
                        MetricKind::Gauge => *slot = v,
                        MetricKind::Counter if v.is_finite() && v >= 0.0 => {
                            *slot = if slot.is_nan() { v } else { *slot + v }
                        }
                        MetricKind::Counter => {}
                    }
                }
                match class {
                    Class::Prefill | Class::Decode => {
                        if class == Class::Prefill {
                            rank.prefill_lines += 1;
                        } else {
                            rank.decode_lines += 1;
                        }
                        rank.last_stats = ts.or(rank.last_stats);
                        derive(&d, class, rec, &mut rank.values);
                        let hint = if class == Class::Prefill {
                            d.pd_prefill
                                .iter()
                                .flatten()
                                .any(|&m| rec.get(m).is_some())
                                .then_some(EngineType::Prefill)
                        } else {
                            d.pd_decode
                                .iter()
                                .flatten()
                                .any(|&m| rec.get(m).is_some())
                                .then_some(EngineType::Decode)
                        };
                        if hint.is_some() {
                            srv.engine_hint = hint;
                        }
                    }
                    Class::Retract => rank.retractions += 1,
                    _ => {}
                }
            }
        }
        self.dropped_series += dropped;
    }

    fn count_unknown(&mut self, key: &str) {
        let key = if key.len() > 64 { "other" } else { key };
        if let Some(c) = self.unknown_fields.get_mut(key) {
            *c += 1;
        } else if self.unknown_fields.len() < self.cfg.max_unknown_fields {
            self.unknown_fields.insert(key.to_string(), 1);
        } else {
            *self.unknown_fields.entry("other".to_string()).or_insert(0) += 1;
        }
    }
}

/// Fills what SGLang's own gauges derive and the line leaves out: `#token`/`token usage` of
/// hybrid models (largest pool, as `sglang:num_used_tokens`/`sglang:token_usage` do since
/// v0.5.10) and the per-batch cache hit rate of lines after v0.4.3.post2 (which print none).
fn derive(d: &Derived, class: Class, rec: &Record<'_>, values: &mut [f64]) {
    let got = |m: Option<MetricId>| m.and_then(|m| rec.get(m));
    if let Some(used) = d.used {
        if got(Some(used)).is_none() {
            let pools = [got(d.full_used), got(d.swa_used)];
            if let Some(max) = pools.iter().flatten().copied().reduce(f64::max) {
                values[used as usize] = max;
            }
        }
    }
    if let Some(usage) = d.usage {
        if got(Some(usage)).is_none() {
            if let Some(max) = d
                .pool_usages
                .iter()
                .filter_map(|&m| got(m))
                .reduce(f64::max)
            {
                values[usage as usize] = max;
            }
        }
    }
    if class == Class::Prefill {
        if let (Some(hit), Some(new), Some(cached)) =
            (d.hit_rate, got(d.new_tokens), got(d.cached_tokens))
        {
            if got(Some(hit)).is_none() && new + cached > 0.0 {
                values[hit as usize] = cached / (new + cached);
            }
        }
    }
}

/// HTTP methods kept as label values; others read `OTHER`.
pub fn normalise_method(m: &str) -> &'static str {
    const KNOWN: [&str; 7] = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"];
    KNOWN.iter().find(|k| **k == m).copied().unwrap_or("OTHER")
}

/// SGLang's HTTP endpoints kept as label values; any other path reads `other`, so scanners and
/// typos cannot grow the series count.
pub fn normalise_path(p: &str) -> &'static str {
    const KNOWN: [&str; 28] = [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/models",
        "/v1/rerank",
        "/v1/score",
        "/v1/responses",
        "/v1/loads",
        "/generate",
        "/encode",
        "/classify",
        "/health",
        "/health_generate",
        "/get_model_info",
        "/get_server_info",
        "/server_info",
        "/model_info",
        "/get_load",
        "/flush_cache",
        "/metrics",
        "/abort_request",
        "/start_profile",
        "/stop_profile",
        "/update_weights_from_disk",
        "/pause_generation",
        "/continue_generation",
        "/set_internal_state",
        "/",
    ];
    let p = p.strip_suffix('/').filter(|s| !s.is_empty()).unwrap_or(p);
    KNOWN.iter().find(|k| **k == p).copied().unwrap_or("other")
}
