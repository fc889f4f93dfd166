//! The current value of every series, keyed by server (and engine) and rank.
//!
//! Sources apply parsed [`Record`]s; exporters read it through [`crate::view`]. It bounds its
//! own size: a flood of distinct servers, engines, ranks, HTTP paths or unknown field names
//! cannot grow memory without limit (what is refused is counted in
//! `sglang_log_exporter_series_dropped_total`).

pub mod caps;
pub mod clock;
mod draft;
pub mod http;
pub mod live;
pub mod persist;
mod printed;
pub mod ready;
pub mod requests;
pub mod selfmetric;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::label;
use crate::parse::patterns::{Class, MetricId, MetricKind, Patterns, Scope};
use crate::record::{Ranks, Record, ServerArgs};
pub use clock::LogClock;
pub use http::HttpKey;
use printed::Printed;
pub use selfmetric::SelfMetric;

/// Limits and policy of the state.
#[derive(Debug, Clone)]
pub struct StateConfig {
    /// Seconds without a stats line after which a rank's activity gauges read 0.
    pub idle_after: f64,
    /// Seconds without a line after which an engine of a multi-engine log (Ray actors) and its
    /// series are removed: a restarted actor (new pid) must not leave stale series forever.
    pub engine_expiry: f64,
    /// Seconds after its source went away (a discovered file deleted) that a server's series
    /// are removed.
    pub retired_expiry: f64,
    /// Most servers (server name and engine pairs) tracked.
    pub max_servers: usize,
    /// Most engines tracked per server name.
    pub max_engines: usize,
    /// Most ranks tracked per server.
    pub max_ranks: usize,
    /// Most ranks tracked in all: with the per-rank series this bounds the exposition and the
    /// memory whatever the mix of servers and ranks (see the README's "Bounds").
    pub max_ranks_total: usize,
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
            engine_expiry: 3600.0,
            retired_expiry: 300.0,
            max_servers: 256,
            max_engines: 64,
            max_ranks: 1024,
            max_ranks_total: 2048,
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
    /// Values by [`MetricId`]; NaN where never set (or withdrawn: the last value on the line
    /// was unreadable).
    pub values: Vec<f64>,
    /// Unix seconds of the last prefill or decode line that carried a time.
    pub last_stats: Option<f64>,
    /// Prefill lines seen.
    pub prefill_lines: u64,
    /// Decode lines seen.
    pub decode_lines: u64,
    /// Retraction lines seen.
    pub retractions: u64,
    /// Unix seconds of the last retraction line that carried a time.
    pub last_retraction: Option<f64>,
    /// By draft twin (see [`draft`]): the server's stats-line count when the rank last wrote
    /// that target figure.
    startup_marks: Vec<Option<u64>>,
    /// By draft twin: the server's stats-line count when the rank last wrote that draft figure.
    draft_marks: Vec<Option<u64>>,
    /// The server's stats-line count at the rank's latest weight line, and the runner its next
    /// pool lines belong to (see [`draft`]).
    loaded: Option<(u64, draft::Whose)>,
    /// The hybrid SWA split announced at that count: full-attention and sliding-window pool
    /// capacities in tokens (see [`draft`]).
    hybrid_split: Option<(u64, f64, f64)>,
    /// `last_stats` before its last change (what an outlier's time is undone to).
    prev_stats: Option<f64>,
    /// The time of the last stats line applied, in the input's order (`last_stats` is the
    /// latest): older than `last_stats`, the values are not the latest line's ([`State::behind`]).
    last_line: Option<f64>,
    /// Values from the server's HTTP API (see [`live`]), when it fed this rank.
    pub live: Option<live::Live>,
    /// Restored from the state file ([`persist`]) and not named since by a line or the API:
    /// it gives way to a rank an input names when a rank cap is full.
    restored: bool,
}

impl RankState {
    fn new(n: usize) -> RankState {
        RankState {
            startup_marks: Vec::new(),
            draft_marks: Vec::new(),
            loaded: None,
            hybrid_split: None,
            prev_stats: None,
            last_line: None,
            values: vec![f64::NAN; n],
            last_stats: None,
            prefill_lines: 0,
            decode_lines: 0,
            retractions: 0,
            last_retraction: None,
            live: None,
            restored: false,
        }
    }

    /// Whether the rank printed any stats line.
    pub fn has_stats(&self) -> bool {
        self.prefill_lines + self.decode_lines > 0
    }

    /// Whether the log said anything of the rank (a stats line or a value), as opposed to a
    /// rank the HTTP API made alone ([`live`]).
    pub fn from_log(&self) -> bool {
        self.has_stats() || self.values.iter().any(|v| !v.is_nan())
    }

    /// The idle policy: no stats line for more than `idle_after` seconds before `now`. A rank
    /// whose stats lines carry no time at all (logs before v0.2.14, wrappers that drop the
    /// prefix, read as history) cannot be judged and is not idle: its last values stand.
    /// Live scrapes, `--once` and backfill all judge by this.
    pub fn is_idle(&self, now: f64, idle_after: f64) -> bool {
        match self.last_stats {
            Some(t) => now - t > idle_after,
            None => !self.has_stats(),
        }
    }
}

/// What identifies one SGLang server in the state: the source's server name and, where several
/// engines write to one log (Ray actors), the engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerKey {
    /// The `server` label: the file stem, unit or `NAME=`.
    pub server: String,
    /// The `engine` label: Ray's actor identity (`SGLangEngine pid=N ip=A`); empty for a log of
    /// one engine.
    pub engine: String,
}

/// Ordered as `(server, engine)`, byte-wise, as a derived order would be; compared without a
/// call to `memcmp` (the server map is searched once per line, and libc's `memcmp` on these short
/// keys cost more than the rest of applying an access line).
impl Ord for ServerKey {
    fn cmp(&self, other: &ServerKey) -> std::cmp::Ordering {
        // A lookup nearly always lands on its own key: equality first, inline.
        use crate::parse::fields::bytes_eq;
        if bytes_eq(self.server.as_bytes(), other.server.as_bytes())
            && bytes_eq(self.engine.as_bytes(), other.engine.as_bytes())
        {
            return std::cmp::Ordering::Equal;
        }
        cmp_bytes(self.server.as_bytes(), other.server.as_bytes())
            .then_with(|| cmp_bytes(self.engine.as_bytes(), other.engine.as_bytes()))
    }
}

impl PartialOrd for ServerKey {
    fn partial_cmp(&self, other: &ServerKey) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Lexicographic byte order, eight bytes at a time (a big-endian word compares as its bytes do).
fn cmp_bytes(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let n = a.len().min(b.len());
    let (mut ca, mut cb) = (a[..n].chunks_exact(8), b[..n].chunks_exact(8));
    for (x, y) in (&mut ca).zip(&mut cb) {
        let (x, y) = (word(x), word(y));
        if x != y {
            return x.cmp(&y);
        }
    }
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

fn word(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().unwrap_or_default())
}

impl ServerKey {
    /// The key of `server` and `engine` (empty: a log of one engine), each bounded in length
    /// ([`crate::label`]): every key the state keeps is made by these.
    pub fn new(server: &str, engine: &str) -> ServerKey {
        ServerKey {
            server: label::bounded("server", server).into_owned(),
            engine: label::bounded("engine", engine).into_owned(),
        }
    }

    /// A key for a server of one engine.
    pub fn plain(server: &str) -> ServerKey {
        ServerKey::new(server, "")
    }

    /// Makes this the key of `server` and `engine` (as [`ServerKey::new`]), reusing its
    /// allocations: a caller that keeps a key from line to line sets it only when the line's
    /// server or engine differs from the last.
    pub fn set(&mut self, server: &str, engine: &str) {
        label::set("server", &mut self.server, server);
        label::set("engine", &mut self.engine, engine);
    }

    /// This key with its names bounded: itself (no copy) when they are short, as every key made
    /// by [`ServerKey::new`] is. The state bounds every key it is handed, whoever made it.
    fn bounded(&self) -> std::borrow::Cow<'_, ServerKey> {
        if self.server.len() <= label::MAX_BYTES && self.engine.len() <= label::MAX_BYTES {
            std::borrow::Cow::Borrowed(self)
        } else {
            std::borrow::Cow::Owned(ServerKey::new(&self.server, &self.engine))
        }
    }
}

/// One SGLang server (one source name, one engine).
#[derive(Debug, Clone)]
pub struct ServerState {
    /// From `server_args`.
    pub args: Option<ServerArgs>,
    /// What the stats lines say of the mode: a PD-only field of a prefill or decode line gives
    /// that side; a stats line without one, before any, `unified` (every PD server's lines carry
    /// their PD fields: decode v0.4.6+, prefill v0.4.6+; sglang-formats.md §3).
    pub engine_hint: Option<EngineType>,
    /// Values of server-scope metrics by [`MetricId`]; NaN where never set.
    pub values: Vec<f64>,
    /// Ranks, in label order.
    pub ranks: BTreeMap<Ranks, RankState>,
    /// HTTP requests by (method, normalised path, status).
    pub http: BTreeMap<HttpKey, u64>,
    /// Request metrics from `--log-requests` Finish records; `None` until the first counted
    /// one.
    pub requests: Option<Box<requests::RequestStats>>,
    /// Time of the last line (Unix seconds), for the expiry of engines.
    pub last_seen: Option<f64>,
    /// The log clock of the input its last line came from ([`State::clock_id`]).
    clock: usize,
    /// When its source went away (a discovered file deleted); its series are removed
    /// `retired_expiry` later.
    pub retired_at: Option<f64>,
    /// Restored from the state file at this time and not (yet) named by an input, a
    /// discovered source or a line: removed `retired_expiry` later (a unit no longer among the
    /// inputs, a pod gone while the exporter restarted, another exporter's server).
    pub unclaimed_since: Option<f64>,
    /// Labels its source gives every series of the server (Kubernetes `namespace`, `pod`,
    /// `container`).
    pub source_labels: Vec<(&'static str, String)>,
    /// Stats lines of all its ranks (only some ranks print them), to tell start-up from serving.
    stats_lines: u64,
    /// How many of its ranks may still be restored and unconfirmed ([`RankState::restored`]):
    /// 0 spares looking for one; a search that finds none sets it to 0.
    restored_ranks: usize,
    /// The `node_rank`s (below 64) of a multi-node server whose `server_args` dump this
    /// process has printed: each host prints one (a SkyPilot or Slurm stream carries them all),
    /// and only a second dump of one node is a restart.
    pub dumped_nodes: u64,
    /// The server's HTTP API probe (`--sglang.url`), once it answered.
    pub api: Option<Box<live::ApiStatus>>,
}

impl ServerState {
    /// The key under which `r` is kept: `r` itself, or the rank already kept that names the
    /// same scheduler ([`Ranks::same_scheduler`]: `TP0` and an untagged line), so that two
    /// keys never render the same labels (two samples of one series, an invalid exposition).
    /// The first form seen stays the key (the `--once` summary names the rank by it).
    pub fn rank_key(&self, r: &Ranks) -> Ranks {
        if self.ranks.contains_key(r) {
            return *r;
        }
        // The other forms of the same scheduler (each of PP, TP and EP untagged or tagged 0):
        // at most 8 lookups, not a search of every rank (a server may hold 1,024).
        let forms = |v: Option<u32>| match v {
            None | Some(0) => [None, Some(0)],
            v => [v, v],
        };
        for pp in forms(r.pp) {
            for tp in forms(r.tp) {
                for ep in forms(r.ep) {
                    let k = Ranks { pp, tp, ep, ..*r };
                    if self.ranks.contains_key(&k) {
                        debug_assert!(k.same_scheduler(r));
                        return k;
                    }
                }
            }
        }
        *r
    }

    fn new(n: usize) -> ServerState {
        ServerState {
            args: None,
            engine_hint: None,
            values: vec![f64::NAN; n],
            ranks: BTreeMap::new(),
            http: BTreeMap::new(),
            requests: None,
            last_seen: None,
            clock: 0,
            retired_at: None,
            unclaimed_since: None,
            source_labels: Vec::new(),
            stats_lines: 0,
            restored_ranks: 0,
            dumped_nodes: 0,
            api: None,
        }
    }

    /// `engine_type`: `server_args`' `disaggregation_mode`, else what its stats lines say
    /// (`engine_hint`), else the server's name containing `prefill`/`decode` (a name only
    /// suggests a mode: `sglang-decode-crash.log` of a unified server is unified once its
    /// lines or its `server_args` say so), else `unified`.
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
        if let Some(hint) = self.engine_hint {
            hint
        } else if name.contains("prefill") {
            EngineType::Prefill
        } else if name.contains("decode") {
            EngineType::Decode
        } else {
            EngineType::Unified
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

/// Per-source line counters (self metrics): the sum of what the source handed in.
pub type SourceStats = SourceDelta;

/// Counts a source gathers locally and hands to the state in batches: at the end of each read,
/// and with each parsed line's values (so a scrape that shows a value counts its line).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceDelta {
    /// Lines read.
    pub lines: u64,
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
    /// Lines that held terminal control codes or `\r` fragments (removed before parsing).
    pub control_codes: u64,
    /// JSON object lines that carried no log message under a known key (skipped).
    pub json_without_message: u64,
    /// Runs of NUL bytes skipped (a copytruncate hole).
    pub nul_runs: u64,
    /// journald entries whose MESSAGE was null (also counted as unmatched).
    pub null_messages: u64,
    /// Lines by matched line kind index.
    pub matched: Vec<u64>,
    /// Field values that were not numbers, and stats-line pieces that were not `key: value`.
    pub bad_values: u64,
}

impl SourceDelta {
    /// Counts a parsed record: its kind, its unreadable values.
    pub fn count_record(&mut self, rec: &Record<'_>) {
        if self.matched.len() <= rec.kind {
            self.matched.resize(rec.kind + 1, 0);
        }
        self.matched[rec.kind] += 1;
        self.bad_values += u64::from(rec.bad_values);
    }

    /// Adds `d` to these counts.
    pub fn add(&mut self, d: &SourceDelta) {
        self.lines += d.lines;
        self.unmatched += d.unmatched;
        self.oversized += d.oversized;
        self.incomplete += d.incomplete;
        self.invalid_utf8 += d.invalid_utf8;
        self.bytes += d.bytes;
        self.errors += d.errors;
        self.control_codes += d.control_codes;
        self.json_without_message += d.json_without_message;
        self.nul_runs += d.nul_runs;
        self.null_messages += d.null_messages;
        self.bad_values += d.bad_values;
        if self.matched.len() < d.matched.len() {
            self.matched.resize(d.matched.len(), 0);
        }
        for (a, b) in self.matched.iter_mut().zip(&d.matched) {
            *a += b;
        }
    }
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
    pub(crate) servers: BTreeMap<ServerKey, ServerState>,
    pub(crate) sources: BTreeMap<String, SourceStats>,
    pub(crate) unknown_fields: BTreeMap<String, u64>,
    /// The log clocks of finished inputs, one per source (see [`LogClock`]), each with the last
    /// line's server, ranks and own time when the clock gave it its own time instead (it
    /// disagreed): if the next line confirms that time, the rank gets it back.
    clocks: clock::Clocks<Option<(ServerKey, Ranks, f64)>>,
    pub(crate) dropped_series: u64,
    /// Refusals by cap (the `cap` label of the dropped-series counter).
    pub(crate) dropped_by_cap: BTreeMap<caps::Cap, u64>,
    warned_caps: caps::Warned,
    /// Ranks in all servers (bounded by `max_ranks_total`).
    ranks_total: usize,
    /// Something restored from the state file may still give way ([`State::make_room`]): set
    /// by a restore, cleared when nothing is left to (nothing is restored later), so a state at
    /// its caps without one costs no search per line.
    restored_left: bool,
    /// Restored servers and ranks removed to make room for an input's own were warned about.
    warned_gave_way: bool,
    /// Self metrics set by other parts (journalctl restarts, push results…), by label value.
    pub(crate) self_metrics: BTreeMap<(SelfMetric, String), f64>,
    /// Families produced by collectors that run on their own timer (the GPU sampler), by
    /// collector name; rendered after the state's own.
    pub(crate) collected: BTreeMap<&'static str, Vec<crate::family::Family>>,
    /// Why GPU memory is unavailable (NVML not loaded or not read), for the page and `top`.
    pub gpu_unavailable: Option<String>,
    /// Bumped by every change, so an encoded exposition can be reused until the next one.
    generation: u64,
    /// By [`MetricId`]: set by a startup line (kept in the state file, see [`persist`]).
    fact_metrics: Vec<bool>,
    /// Unit → cursor of the last journal entry read (kept in the state file).
    journal_cursors: BTreeMap<String, String>,
    /// Server name → the labels its source gives every series (see [`State::set_source_labels`]);
    /// copied into each server of that name as it is created.
    source_labels: BTreeMap<String, Vec<(&'static str, String)>>,
    /// Server name → the Kubernetes pod UID of its source (see [`State::set_source_pod`]).
    source_pods: BTreeMap<String, String>,
    /// Source → when it went away (a discovered file closed): its self metrics are removed
    /// `retired_expiry` seconds later.
    retired_sources: BTreeMap<String, f64>,
    /// Shared so applying a line can hold it while the state is borrowed mutably.
    derived: Arc<Derived>,
    /// Sources still catching up at start (see [`ready`]); shared with the probes.
    readiness: Arc<ready::Readiness>,
    /// Servers whose ranks the state removed, kept for [`State::take_dropped`] once
    /// [`State::keep_dropped`] asked for them (`backfill`); `None`: not kept.
    dropped: Option<Vec<Dropped>>,
    /// (server, host) → the user (service manager, `user@1000`) whose user unit of that name
    /// logged first on that host (see [`State::first_user`]; kept in the state file).
    first_users: BTreeMap<(String, String), String>,
}

/// Ranks the state removed, with their server as it was (labels and values), for a reader
/// that writes samples of its own (`backfill`: a removed rank's last busy sample must not
/// stand, see [`State::keep_dropped`]).
#[derive(Debug)]
pub struct Dropped {
    /// The server's key.
    pub key: ServerKey,
    /// The server as it was, holding the removed ranks (and only them).
    pub server: ServerState,
    /// When they were removed: the time of the line that restarted the server, or when an
    /// engine's or a retired server's expiry fell due; `None` for a line without a time.
    pub at: Option<f64>,
}

/// Metric ids the state derives values for (absent in a custom pattern file: nothing derived).
#[derive(Debug, Clone, Default)]
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
    full_usage: Option<MetricId>,
    /// (metric, default value, line class) of the rank-scope metrics with a `default`.
    defaults: Vec<(MetricId, f64, Class)>,
    /// The pool metrics a startup line is routed among (target, draft, hybrid pools).
    drafts: draft::DraftTwins,
    /// The rank's KV pool capacity and the server's capacity line, against which a stats
    /// line's used tokens are checked.
    pool_capacity: Option<MetricId>,
    max_total: Option<MetricId>,
    /// A hybrid SWA model's sliding-window pool capacity.
    swa_capacity: Option<MetricId>,
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
            full_usage: id("full_token_usage"),
            drafts: draft::DraftTwins::of(&pat),
            pool_capacity: id("kv_pool_capacity_tokens"),
            max_total: id("max_total_num_tokens"),
            swa_capacity: id("swa_pool_capacity_tokens"),
            defaults: pat
                .metrics
                .iter()
                .enumerate()
                .filter(|(_, m)| m.scope == Scope::Rank)
                .flat_map(|(i, m)| {
                    let v = m.default;
                    m.default_on
                        .iter()
                        .filter_map(move |&c| v.map(|v| (i as MetricId, v, c)))
                })
                .collect(),
        };
        let n = pat.metrics.len();
        State {
            pat,
            cfg,
            servers: BTreeMap::new(),
            sources: BTreeMap::new(),
            unknown_fields: BTreeMap::new(),
            clocks: clock::Clocks::default(),
            dropped: None,
            first_users: BTreeMap::new(),
            dropped_series: 0,
            dropped_by_cap: BTreeMap::new(),
            warned_caps: caps::Warned::default(),
            ranks_total: 0,
            restored_left: false,
            warned_gave_way: false,
            self_metrics: BTreeMap::new(),
            collected: BTreeMap::new(),
            gpu_unavailable: None,
            generation: 0,
            fact_metrics: vec![false; n],
            journal_cursors: BTreeMap::new(),
            source_labels: BTreeMap::new(),
            source_pods: BTreeMap::new(),
            retired_sources: BTreeMap::new(),
            derived: Arc::new(derived),
            readiness: Arc::default(),
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

    /// The start-up readiness of the sources (see [`ready`]).
    pub fn readiness(&self) -> &Arc<ready::Readiness> {
        &self.readiness
    }

    /// The configuration.
    pub fn config(&self) -> &StateConfig {
        &self.cfg
    }

    /// The log clock: the latest plausible time of the lines that carry rank state, in Unix
    /// seconds ("now" for a finished input).
    pub fn log_clock(&self) -> Option<f64> {
        self.clocks.now()
    }

    /// Servers by key.
    pub fn servers(&self) -> &BTreeMap<ServerKey, ServerState> {
        &self.servers
    }

    /// A counter that changes with every update: equal values mean an equal state.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Adds `by` to a self-metric counter, labelled `label` (empty for a metric without label;
    /// bounded in length, [`crate::label`], as every label value the state keeps).
    pub fn add_self(&mut self, m: SelfMetric, label: &str, by: f64) {
        self.generation += 1;
        let label = label::bounded(m.def().3, label);
        *self
            .self_metrics
            .entry((m, label.into_owned()))
            .or_insert(0.0) += by;
    }

    /// Sets a self-metric gauge (its label bounded as in [`State::add_self`]).
    pub fn set_self(&mut self, m: SelfMetric, label: &str, v: f64) {
        self.generation += 1;
        let label = label::bounded(m.def().3, label);
        self.self_metrics.insert((m, label.into_owned()), v);
    }

    /// Replaces the families of collector `name` (e.g. `gpu`), shown on every scrape until the
    /// next call. Collectors run on their own timer, never on the scrape path.
    pub fn set_collected(&mut self, name: &'static str, families: Vec<crate::family::Family>) {
        self.generation += 1;
        self.collected.insert(name, families);
    }

    /// Notes the cursor of the last journal entry read for `unit`.
    pub fn set_journal_cursor(&mut self, unit: &str, cursor: &str) {
        match self.journal_cursors.get_mut(unit) {
            Some(c) => {
                c.clear();
                c.push_str(cursor);
            }
            None => {
                self.journal_cursors
                    .insert(unit.to_string(), cursor.to_string());
            }
        }
    }

    /// Every unit's journal cursor (for the state file).
    pub fn journal_cursors_map(&self) -> BTreeMap<String, String> {
        self.journal_cursors.clone()
    }

    /// The cursor of the last journal entry read for `unit` (also one restored from the state
    /// file).
    pub fn journal_cursor(&self, unit: &str) -> Option<&str> {
        self.journal_cursors.get(unit).map(String::as_str)
    }

    /// Sets the labels a source gives every series of the servers named `server` (Kubernetes
    /// `namespace`, `pod`, `container`): those that exist now (every engine) and those created
    /// later, so a server's first series already carry them. It also undoes a
    /// [`State::retire_server`] of that name (the source is back). Creates no server.
    pub fn set_source_labels(&mut self, server: &str, mut labels: Vec<(&'static str, String)>) {
        self.generation += 1;
        let server = label::bounded("server", server);
        let server = &*server;
        for (k, v) in labels.iter_mut() {
            label::bound(k, v);
        }
        for (k, s) in self.servers.iter_mut() {
            if k.server == server {
                s.source_labels = labels.clone();
                s.retired_at = None;
                s.unclaimed_since = None;
            }
        }
        self.source_labels.insert(server.to_string(), labels);
    }

    /// Removes the servers restored from the state file that nothing claimed (for `--once`,
    /// whose inputs have all been read: they are no server of these inputs).
    pub fn drop_unclaimed(&mut self) {
        if self.remove_servers(|_, s| s.unclaimed_since.map(Some)) > 0 {
            self.generation += 1;
        }
    }

    /// Removes the servers `gone` picks, keeping the count of ranks in all right; returns how
    /// many were removed. `gone` says when each picked one fell due (`Some(None)`: no time),
    /// kept with it where [`State::keep_dropped`] asked.
    fn remove_servers(
        &mut self,
        mut gone: impl FnMut(&ServerKey, &ServerState) -> Option<Option<f64>>,
    ) -> usize {
        let picked: Vec<(ServerKey, Option<f64>)> = self
            .servers
            .iter()
            .filter_map(|(k, s)| gone(k, s).map(|at| (k.clone(), at)))
            .collect();
        for (key, at) in &picked {
            let Some(server) = self.servers.remove(key) else {
                continue;
            };
            self.ranks_total -= server.ranks.len();
            if let Some(d) = self.dropped.as_mut().filter(|_| !server.ranks.is_empty()) {
                d.push(Dropped {
                    key: key.clone(),
                    server,
                    at: *at,
                });
            }
        }
        picked.len()
    }

    /// Whether `user` (a user service's manager, `user@1000`) is the first whose user unit
    /// named `server` logged on `host` (empty: none named): noted if none did yet. Two users
    /// of one host never run one server, so only the first one's lines are the server as it
    /// is named; another's are an engine of it ([`crate::source::nodes`]). Every input asks
    /// here, in the order lines are applied, and the answer is kept in the state file: an
    /// input read later or an exporter restarted never gives the name to another user. Past
    /// `max_servers` pairs, a new pair's user is not the first (an engine: never merged).
    pub fn first_user(&mut self, server: &str, host: &str, user: &str) -> bool {
        let key = (
            label::bounded("server", server).into_owned(),
            label::bounded("node", host).into_owned(),
        );
        if let Some(u) = self.first_users.get(&key) {
            return u == user;
        }
        if self.first_users.len() >= self.cfg.max_servers {
            return false;
        }
        self.first_users.insert(key, user.to_string());
        true
    }

    /// Keeps what the state removes from now on — a server's ranks at its restart, expired
    /// engines and retired servers — for [`State::take_dropped`]. Restored ranks that give
    /// way to an input's own are not kept (a reader that restores nothing never sees one).
    pub fn keep_dropped(&mut self) {
        self.dropped.get_or_insert_with(Vec::new);
    }

    /// What the state removed since the last call (see [`State::keep_dropped`]).
    pub fn take_dropped(&mut self) -> Vec<Dropped> {
        self.dropped
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Notes that an input names servers called `server` (every engine): those restored from the
    /// state file are kept (see [`ServerState::unclaimed_since`]).
    pub fn claim(&mut self, server: &str) {
        let server = label::bounded("server", server);
        let server = &*server;
        for (k, s) in self.servers.iter_mut() {
            if k.server == server {
                s.unclaimed_since = None;
            }
        }
    }

    /// Notes the Kubernetes pod UID of the source of the servers named `server` (a discovered
    /// pod log), which ties GPU processes to them (their cgroup names it); `None` forgets it.
    pub fn set_source_pod(&mut self, server: &str, uid: Option<&str>) {
        let server = label::bounded("server", server);
        let server = &*server;
        match uid {
            Some(u) => self.source_pods.insert(server.to_string(), u.to_string()),
            None => self.source_pods.remove(server),
        };
    }

    /// The pod UID noted for the servers named `server`.
    pub fn source_pod(&self, server: &str) -> Option<&str> {
        let server = label::bounded("server", server);
        self.source_pods.get(&*server).map(String::as_str)
    }

    /// Marks the servers named `server` (every engine) as gone with their source at `at`: their
    /// series are removed `retired_expiry` seconds later. Labels set for a server that never
    /// logged a line are forgotten now.
    pub fn retire_server(&mut self, server: &str, at: f64) {
        self.generation += 1;
        let server = label::bounded("server", server);
        let server = &*server;
        let mut any = false;
        for (k, s) in self.servers.iter_mut() {
            if k.server == server {
                s.retired_at = Some(at);
                any = true;
            }
        }
        if !any {
            self.source_labels.remove(server);
            self.source_pods.remove(server);
        }
    }

    /// Marks a source as gone at `at` (`Some`): its self metrics (`source` label) are removed
    /// `retired_expiry` seconds later, so sources that come and go (pods' log files) do not
    /// grow the exposition. `None`: the source is back, keep it.
    pub fn retire_source(&mut self, source: &str, at: Option<f64>) {
        self.generation += 1;
        let source = label::bounded("source", source);
        let source = &*source;
        match at {
            Some(t) => {
                self.retired_sources.insert(source.to_string(), t);
            }
            None => {
                self.retired_sources.remove(source);
            }
        }
    }

    /// Removes engines silent for `engine_expiry`, and servers and sources retired for
    /// `retired_expiry`, before `now`. Returns how many servers were removed.
    pub fn expire(&mut self, now: f64) -> usize {
        let (engine_expiry, retired_expiry) = (self.cfg.engine_expiry, self.cfg.retired_expiry);
        let mut gone: Vec<String> = Vec::new();
        let removed = self.remove_servers(|k, s| {
            let stale_engine = s
                .last_seen
                .filter(|t| !k.engine.is_empty() && now - t > engine_expiry)
                .map(|t| t + engine_expiry);
            let retired = [s.retired_at, s.unclaimed_since]
                .into_iter()
                .flatten()
                .filter(|t| now - t > retired_expiry)
                .map(|t| t + retired_expiry)
                .reduce(f64::min);
            if retired.is_some() {
                gone.push(k.server.clone());
            }
            // When it fell due: the first of its expiries.
            [stale_engine, retired]
                .into_iter()
                .flatten()
                .reduce(f64::min)
                .map(Some)
        });
        for name in gone {
            if !self.servers.keys().any(|k| k.server == name) {
                self.source_labels.remove(&name);
                self.source_pods.remove(&name);
            }
        }
        let sources = self.expire_sources(now);
        if removed > 0 || sources {
            self.generation += 1;
        }
        removed
    }

    /// Removes the self metrics of sources retired for `retired_expiry`; whether any were.
    fn expire_sources(&mut self, now: f64) -> bool {
        if self.retired_sources.is_empty() {
            return false;
        }
        let expiry = self.cfg.retired_expiry;
        let due: Vec<String> = self
            .retired_sources
            .iter()
            .filter(|(_, &t)| now - t > expiry)
            .map(|(s, _)| s.clone())
            .collect();
        for s in &due {
            self.retired_sources.remove(s);
            self.sources.remove(s);
            self.self_metrics
                .retain(|(m, label), _| !(m.def().3 == "source" && label == s));
        }
        !due.is_empty()
    }

    /// The first moment after `now` at which what a scrape shows changes without a new line:
    /// a rank turning idle, an engine or a retired server expiring. `None` when nothing will.
    pub fn next_idle_change(&self, now: f64) -> Option<f64> {
        let c = &self.cfg;
        self.servers
            .iter()
            .flat_map(|(k, s)| {
                let ranks = s
                    .ranks
                    .values()
                    .filter_map(|r| r.last_stats.map(|t| t + c.idle_after));
                let engine = s
                    .last_seen
                    .filter(|_| !k.engine.is_empty())
                    .map(|t| t + c.engine_expiry);
                let retired = s.retired_at.map(|t| t + c.retired_expiry);
                let unclaimed = s.unclaimed_since.map(|t| t + c.retired_expiry);
                ranks.chain(engine).chain(retired).chain(unclaimed)
            })
            .chain(self.retired_sources.values().map(|t| t + c.retired_expiry))
            // `>=`: a rank is idle once strictly more than idle-after has passed.
            .filter(|&t| t >= now)
            .min_by(f64::total_cmp)
    }

    /// Adds the server of `key` (which `servers` lacks) where the bounds leave room; otherwise
    /// counts a dropped series. Apart from `self`, so that a caller holding other fields can
    /// call it.
    fn add_server<'a>(
        servers: &'a mut BTreeMap<ServerKey, ServerState>,
        cfg: &StateConfig,
        source_labels: &BTreeMap<String, Vec<(&'static str, String)>>,
        metrics: usize,
        key: &ServerKey,
    ) -> Result<&'a mut ServerState, caps::Cap> {
        let engines = || {
            servers
                .keys()
                .filter(|k| k.server == key.server && !k.engine.is_empty())
                .count()
        };
        if servers.len() >= cfg.max_servers {
            return Err(caps::Cap::Servers);
        }
        if !key.engine.is_empty() && engines() >= cfg.max_engines {
            return Err(caps::Cap::Engines);
        }
        let mut srv = ServerState::new(metrics);
        if let Some(l) = source_labels.get(&key.server) {
            srv.source_labels = l.clone();
        }
        Ok(servers.entry(key.clone()).or_insert(srv))
    }

    /// Makes room for what a line of an input brings when a cap is full: a server restored from
    /// the state file that no input has named gives way to a new server (or engine), and a
    /// restored rank not named since to a new rank (`rank`: the line's, for a line that makes
    /// one). The inputs' own come first: restored ones never crowd them out. Called only when
    /// the servers or the ranks in all are at their cap.
    fn make_room(&mut self, key: &ServerKey, rank: Option<&Ranks>) {
        let cfg = &self.cfg;
        if !self.servers.contains_key(key) {
            let unclaimed = |s: &ServerState| s.unclaimed_since.is_some();
            let victim = if self.servers.len() >= cfg.max_servers {
                self.servers.iter().find(|(_, s)| unclaimed(s))
            } else if !key.engine.is_empty() {
                let engine_of_name = |k: &ServerKey| k.server == key.server && !k.engine.is_empty();
                let engines = self.servers.keys().filter(|k| engine_of_name(k)).count();
                (engines >= cfg.max_engines)
                    .then(|| {
                        self.servers
                            .iter()
                            .find(|(k, s)| engine_of_name(k) && unclaimed(s))
                    })
                    .flatten()
            } else {
                None
            };
            if let Some(victim) = victim.map(|(k, _)| k.clone()) {
                self.remove_servers(|k, _| (*k == victim).then_some(None));
                self.gave_way();
            }
        }
        let Some(rank) = rank else {
            return;
        };
        // A rank it has, or one the server's own cap decides (where its own restored rank
        // gives way, which makes room in all too): nothing to remove here.
        let max_ranks = self.cfg.max_ranks;
        if self.ranks_total < self.cfg.max_ranks_total
            || self.servers.get(key).is_some_and(|s| {
                s.ranks.contains_key(&s.rank_key(rank)) || s.ranks.len() >= max_ranks
            })
        {
            return;
        }
        // A rank of a server no input named first (it is likely gone), then any restored one.
        let order = [true, false];
        for unclaimed in order {
            for srv in self.servers.values_mut() {
                if srv.unclaimed_since.is_some() == unclaimed && give_way(srv) {
                    self.ranks_total -= 1;
                    self.gave_way();
                    return;
                }
            }
        }
        // No restored rank is left; once no restored server is either, nothing will give way.
        if !self.servers.values().any(|s| s.unclaimed_since.is_some()) {
            self.restored_left = false;
        }
    }

    /// Counts a restored server or rank removed for an input's own, warning once.
    fn gave_way(&mut self) {
        self.generation += 1;
        self.add_self(SelfMetric::RestoredGaveWay, "", 1.0);
        if !std::mem::replace(&mut self.warned_gave_way, true) {
            tracing::warn!(
                "a cap is full: servers and ranks restored from the state file that no input has \
                 named since give way to the inputs' own \
                 (sglang_log_exporter_restored_gave_way_total); warned once"
            );
        }
    }

    /// Counts what `cap` refused for `server`, warning once per cap and server.
    fn refuse(&mut self, cap: caps::Cap, server: &str) {
        self.dropped_series += 1;
        *self.dropped_by_cap.entry(cap).or_insert(0) += 1;
        self.warned_caps.refused(cap, cap.limit(&self.cfg), server);
    }

    /// Applies a batch of source counters.
    pub fn add_source_counts(&mut self, source: &str, d: &SourceDelta) {
        self.generation += 1;
        if let Some(s) = self.source_mut(source) {
            s.add(d);
        }
    }

    fn source_mut(&mut self, source: &str) -> Option<&mut SourceStats> {
        // The `source` label: bounded as every label value the state keeps.
        let source = label::bounded("source", source);
        if !self.sources.contains_key(&*source) {
            if self.sources.len() >= self.cfg.max_sources {
                self.refuse(caps::Cap::Sources, &source);
                return None;
            }
            self.sources
                .insert(source.to_string(), SourceStats::default());
        }
        self.sources.get_mut(&*source)
    }

    /// Applies one parsed line from `source` to server `server` (and the line's engine, if it
    /// names one). `ts` is the line's time in Unix seconds (journald's or a wrapper's timestamp,
    /// the prefix time, or the arrival time); `None` for a line without a usable time.
    pub fn apply(&mut self, source: &str, server: &str, rec: &Record<'_>, ts: Option<f64>) {
        let key = ServerKey::new(server, rec.engine.unwrap_or(""));
        self.count_record(source, rec);
        let clock = self.clock_id(source);
        self.apply_to(&key, rec, ts, clock);
    }

    /// Counts `rec` as a line of `source` (for callers that do not keep a [`SourceDelta`]).
    fn count_record(&mut self, source: &str, rec: &Record<'_>) {
        let mut d = SourceDelta::default();
        d.count_record(rec);
        self.add_source_counts(source, &d);
    }

    /// What every applied line does before its time is decided: the key bounded (keys made by
    /// `ServerKey::new`/`set` are already: two length checks), the generation moved on, its
    /// unknown field names counted.
    fn begin_line<'k>(
        &mut self,
        key: &'k ServerKey,
        rec: &Record<'_>,
    ) -> std::borrow::Cow<'k, ServerKey> {
        self.generation += 1;
        for k in rec.unknown_keys() {
            self.count_unknown(k);
        }
        key.bounded()
    }

    /// The log clock of source `source`, for [`State::apply_to`] and [`State::observe_times`]:
    /// each input's times are judged by its own neighbours.
    pub fn clock_id(&mut self, source: &str) -> usize {
        self.clocks.id(&crate::label::bounded("source", source))
    }

    /// [`State::apply`] for a caller that keeps the server's key (and counts the record in its
    /// own [`SourceDelta`], [`SourceDelta::count_record`]) and its source's clock
    /// ([`State::clock_id`]): no allocation per line.
    pub fn apply_to(&mut self, key: &ServerKey, rec: &Record<'_>, ts: Option<f64>, clock: usize) {
        let key = self.begin_line(key, rec);
        let key = &*key;
        // Every timed line moves its input's clock (a log that goes on with access lines past
        // --idle-after reads idle at its end, as it would followed live); the clock's own rule
        // keeps a lone line with a wrong day from moving it.
        let own = ts;
        let ts = match ts {
            Some(t) => Some(self.clock_step(clock, t)),
            None => {
                self.clocks.get_mut(clock).1 = None;
                None
            }
        };
        if let (Some(t), true) = (own, own != ts) {
            if matches!(rec.class, Class::Prefill | Class::Decode) {
                self.clocks.get_mut(clock).1 = Some((key.clone(), rec.ranks, t));
            }
        }
        self.apply_at(key, rec, ts, clock);
    }

    /// Notes the times of lines that carry no record, in log order (SGLang's other output at
    /// the end of an input: `Cache flushed successfully!`, a traceback's first line): they move
    /// the clock of their input (`clock`, [`State::clock_id`]) under its rule, as a record's
    /// time does, so an input that goes on past `--idle-after` with them reads idle at its end.
    pub fn observe_times(&mut self, clock: usize, times: &[f64]) {
        if times.is_empty() {
            return;
        }
        self.generation += 1;
        for &t in times {
            self.clock_step(clock, t);
        }
    }

    /// [`State::apply`] for a line whose time the caller placed with its own clock (`backfill`,
    /// which looks a line ahead, see [`clock::Lookahead`]): `ts` is used as it is and the
    /// state's clocks are left alone.
    pub fn apply_placed(
        &mut self,
        source: &str,
        key: &ServerKey,
        rec: &Record<'_>,
        ts: Option<f64>,
    ) {
        self.count_record(source, rec);
        let key = self.begin_line(key, rec);
        self.apply_at(&key, rec, ts, 0);
    }

    /// Observes one line's time on clock `clock`; returns the time to use for that line's
    /// state. When the clock settles, a rank's time taken from an outlier is mended (on the
    /// servers that clock judges), and the line held before (a disagreeing stats line) gets its
    /// own time back.
    fn clock_step(&mut self, clock: usize, t: f64) -> f64 {
        let (c, held) = self.clocks.get_mut(clock);
        let given = c.observe(t);
        let held = held.take();
        if c.take_settled() {
            self.clamp_outlier_times(clock);
            // The line before was no outlier after all (a log resumed after a quiet spell):
            // its rank's last stats time is its own.
            if let Some((k, r, t)) = held {
                let rank = self.servers.get_mut(&k).and_then(|s| {
                    let r = s.rank_key(&r);
                    s.ranks.get_mut(&r)
                });
                if let Some(rank) = rank.filter(|x| x.last_stats.is_some_and(|l| l < t)) {
                    rank.last_stats = Some(t);
                }
            }
        }
        given
    }

    /// Applies a line to its server at `ts`, the time already decided, by its input's clock
    /// `clock` (the server is judged by that clock from now on).
    fn apply_at(&mut self, key: &ServerKey, rec: &Record<'_>, ts: Option<f64>, clock: usize) {
        let (max_ranks, max_total) = (self.cfg.max_ranks, self.cfg.max_ranks_total);
        if self.restored_left
            && (self.ranks_total >= max_total || self.servers.len() >= self.cfg.max_servers)
        {
            let makes_rank = !matches!(
                rec.class,
                Class::ServerArgs | Class::Request | Class::Access
            );
            self.make_room(key, makes_rank.then_some(&rec.ranks));
        }
        let max_http = self.cfg.max_http_series;
        // The state's fields borrowed apart (no reference counting per line); one lookup for
        // a known server (each costs string comparisons).
        let State {
            cfg,
            servers,
            source_labels,
            pat,
            derived: d,
            ranks_total,
            fact_metrics,
            dropped,
            ..
        } = self;
        let srv = match servers.get_mut(key) {
            Some(s) => s,
            None => {
                let n = pat.metrics.len();
                match State::add_server(servers, cfg, source_labels, n, key) {
                    Ok(s) => s,
                    Err(cap) => return self.refuse(cap, &key.server),
                }
            }
        };
        if let Some(t) = ts {
            srv.last_seen = Some(srv.last_seen.map_or(t, |l| l.max(t)));
        }
        srv.clock = clock;
        // A line of it: its source exists (a restored server is no one else's).
        srv.unclaimed_since = None;
        let mut restarted = 0;
        let mut contradictions = 0;
        let mut gave_way = 0;
        let refused = match rec.class {
            Class::ServerArgs => {
                // Kept and compared bounded (a long model name is kept shortened).
                let args = rec.server_args.as_deref().map(ServerArgs::bounded);
                let other_node = other_node(srv, args.as_ref());
                if !other_node && (srv.args.is_some() || !srv.ranks.is_empty()) {
                    // A new process of this server (a restart, a new journald invocation, a pod
                    // replaced under the same name): its ranks, facts and counts start over,
                    // so the old process's ranks and startup figures are never shown under
                    // the new model. Counters restart as the new process's own would.
                    restarted = srv.ranks.len();
                    let fresh = ServerState {
                        source_labels: srv.source_labels.clone(),
                        api: srv.api.take(),
                        last_seen: srv.last_seen,
                        clock: srv.clock,
                        ..ServerState::new(pat.metrics.len())
                    };
                    let old = std::mem::replace(srv, fresh);
                    if let Some(d) = dropped.as_mut().filter(|_| restarted > 0) {
                        d.push(Dropped {
                            key: key.clone(),
                            server: old,
                            at: ts,
                        });
                    }
                }
                if let Some(a) = args {
                    if let Some(n) = a.node_rank.filter(|&n| n < 64) {
                        srv.dumped_nodes |= 1 << n;
                    }
                    // Node 0's arguments stand for the server (its placement is the first).
                    if !other_node || a.node_rank == Some(0) {
                        srv.args = Some(a);
                        live::args_from_log(srv);
                    }
                }
                None
            }
            Class::Request => {
                if let Some(r) = rec.request.filter(|r| r.counts()) {
                    let prefill = srv.engine_type(&key.server) == EngineType::Prefill;
                    srv.requests
                        .get_or_insert_with(Box::default)
                        .observe(r, prefill);
                }
                None
            }
            Class::Access => rec.access.and_then(|a| {
                let key = HttpKey::of(a.method, a.path, a.status);
                // One lookup for a known request (most lines), a second to add a new one.
                if let Some(n) = srv.http.get_mut(&key) {
                    *n += 1;
                    None
                } else if srv.http.len() < max_http {
                    srv.http.insert(key, 1);
                    None
                } else {
                    Some(caps::Cap::HttpSeries)
                }
            }),
            class => {
                let ranks = srv.rank_key(&rec.ranks);
                let new_rank = !srv.ranks.contains_key(&ranks);
                // The server's own restored rank gives way to one its input prints.
                if new_rank && srv.ranks.len() >= max_ranks && give_way(srv) {
                    *ranks_total -= 1;
                    gave_way += 1;
                }
                if new_rank && srv.ranks.len() >= max_ranks {
                    Some(caps::Cap::Ranks)
                } else if new_rank && *ranks_total >= max_total {
                    Some(caps::Cap::RanksTotal)
                } else {
                    let line = (class, rec, ranks);
                    contradictions = apply_rank_line(pat, d, srv, line, ts, fact_metrics);
                    *ranks_total += usize::from(new_rank);
                    if matches!(class, Class::Prefill | Class::Decode) && srv.api.is_some() {
                        *ranks_total -= live::adopt(srv, &ranks);
                    }
                    None
                }
            }
        };
        *ranks_total -= restarted;
        for _ in 0..gave_way {
            self.gave_way();
        }
        if let Some(cap) = refused {
            self.refuse(cap, &key.server);
        }
        if contradictions > 0 {
            self.count_contradictions(&key.server, contradictions);
        }
    }

    /// After an input's clock (`clock`) settled: a rank's last stats time more than an hour ahead
    /// of it came from an outlier line read before the clock could tell (a first line with a
    /// wrong day), and would keep the rank busy for days: it goes back to the time before it
    /// (else the clock's). Only the servers that clock judges.
    fn clamp_outlier_times(&mut self, clock: usize) {
        let Some(now) = self.clocks.now_of(clock) else {
            return;
        };
        let sane = |t: &f64| *t <= now + clock::JUMP;
        for srv in self.servers.values_mut().filter(|s| s.clock == clock) {
            for rank in srv.ranks.values_mut() {
                if rank.last_stats.is_some_and(|t| !sane(&t)) {
                    rank.last_stats = Some(rank.prev_stats.filter(sane).unwrap_or(now));
                }
            }
            if srv.last_seen.is_some_and(|t| !sane(&t)) {
                srv.last_seen = Some(now);
            }
        }
    }

    /// The ranks of `server` whose last stats line applied is older than their latest one (an
    /// input read in order that then went newest-first: its values are an older line's, shown
    /// at the latest time): how many, and the first's last and latest times.
    pub fn behind(&self, server: &str) -> Option<(usize, f64, f64)> {
        let mut found = None;
        let mut n = 0;
        let ranks = self.servers.iter().filter(|(k, _)| k.server == server);
        for r in ranks.flat_map(|(_, s)| s.ranks.values()) {
            if let (Some(last), Some(latest)) = (r.last_line, r.last_stats) {
                if last < latest {
                    n += 1;
                    found.get_or_insert((last, latest));
                }
            }
        }
        found.map(|(last, latest)| (n, last, latest))
    }

    /// Counts `n` stats lines whose used tokens exceed their rank's known capacity; warns once
    /// per server.
    fn count_contradictions(&mut self, server: &str, n: u32) {
        let first = !self
            .self_metrics
            .contains_key(&(SelfMetric::KvCapacityContradictions, server.to_string()));
        if first {
            tracing::warn!(
                server,
                "a stats line reports more KV-cache tokens in use than the capacity seen for its rank \
                 (a capacity line of another rank or process?); its share is shown from token usage \
                 (sglang_log_exporter_kv_capacity_contradictions_total)"
            );
        }
        self.add_self(SelfMetric::KvCapacityContradictions, server, f64::from(n));
    }

    fn count_unknown(&mut self, key: &str) {
        let key = if key.len() > MAX_UNKNOWN_KEY_LEN {
            "other"
        } else {
            key
        };
        if let Some(c) = self.unknown_fields.get_mut(key) {
            *c += 1;
        } else if self.unknown_fields.len() < self.cfg.max_unknown_fields {
            self.unknown_fields.insert(key.to_string(), 1);
        } else {
            *self.unknown_fields.entry("other".to_string()).or_insert(0) += 1;
        }
    }
}

/// The longest unknown field key counted under its own name (bytes); a longer one (a whole
/// sentence read as a key, a garbled line) is counted as `other`, so the label of
/// `sglang_log_exporter_unknown_fields_total` stays short. Real SGLang keys are under 40.
const MAX_UNKNOWN_KEY_LEN: usize = 64;

/// Removes one of `srv`'s restored ranks that nothing named since (the last in label order), to
/// make room for an input's own; whether there was one. A search that finds none notes that
/// none is left.
fn give_way(srv: &mut ServerState) -> bool {
    if srv.restored_ranks == 0 {
        return false;
    }
    let victim = srv
        .ranks
        .iter()
        .rev()
        .find(|(_, r)| r.restored)
        .map(|(k, _)| *k);
    match victim {
        Some(k) => {
            srv.ranks.remove(&k);
            srv.restored_ranks -= 1;
            true
        }
        None => {
            srv.restored_ranks = 0;
            false
        }
    }
}

/// A line or the API named `rank` of `srv`: a restored rank is confirmed (it no longer gives
/// way).
fn confirm(srv_restored: &mut usize, rank: &mut RankState) {
    if std::mem::replace(&mut rank.restored, false) {
        *srv_restored = srv_restored.saturating_sub(1);
    }
}

/// Applies a stats, retraction or startup line to its rank (created if new), marking the
/// metrics a startup line set in `facts`. Returns how many ranks now hold used tokens above
/// their known capacity because of this line (a contradiction, counted by the caller).
/// `ranks` is the key the line's rank is kept under ([`ServerState::rank_key`]).
fn apply_rank_line(
    pat: &Patterns,
    d: &Derived,
    srv: &mut ServerState,
    (class, rec, ranks): (Class, &Record<'_>, Ranks),
    ts: Option<f64>,
    facts: &mut [bool],
) -> u32 {
    let n = pat.metrics.len();
    let line_scope = pat.lines[rec.kind].scope;
    let rank = srv.ranks.entry(ranks).or_insert_with(|| RankState::new(n));
    confirm(&mut srv.restored_ranks, rank);
    let slot_of = |id: MetricId| {
        pat.metrics[id as usize].scope == Scope::Server || line_scope == Scope::Server
    };
    // A draft model's figure printed in the target's words goes to the draft's metric, a hybrid
    // model's sliding-window pool to the SWA pool's (see `draft`); decided for the whole line
    // before any of its values is written. Only startup lines (rare) are
    // copied; a stats line's values are used as they are.
    let draft::Routed {
        values: routed,
        bad,
    } = if class == Class::Fact {
        let no_draft = srv.args.as_ref().is_some_and(ServerArgs::without_draft);
        let line = &pat.lines[rec.kind];
        d.drafts
            .route_line(rec, line, rank, srv.stats_lines, no_draft)
    } else {
        draft::Routed::as_printed(rec)
    };
    for &(id, v) in routed.iter() {
        if class == Class::Fact {
            facts[id as usize] = true;
        }
        let slot = if slot_of(id) {
            &mut srv.values[id as usize]
        } else {
            &mut rank.values[id as usize]
        };
        match pat.metrics[id as usize].kind {
            MetricKind::Gauge => *slot = v,
            MetricKind::Counter if v.is_finite() && v >= 0.0 => {
                *slot = if slot.is_nan() { v } else { *slot + v }
            }
            MetricKind::Counter => {}
        }
    }
    // An unreadable value withdraws the gauge's series until the next readable value: an
    // older value would be shown as current. Counters keep their sum.
    for &id in bad.iter() {
        if pat.metrics[id as usize].kind == MetricKind::Gauge {
            if slot_of(id) {
                srv.values[id as usize] = f64::NAN;
            } else {
                rank.values[id as usize] = f64::NAN;
            }
        }
    }
    match class {
        Class::Prefill | Class::Decode => {
            if class == Class::Prefill {
                rank.prefill_lines += 1;
            } else {
                rank.decode_lines += 1;
            }
            srv.stats_lines += 1;
            // The latest of its stats lines (a line printed out of order does not make it
            // older).
            rank.prev_stats = rank.last_stats;
            rank.last_line = ts.or(rank.last_line);
            rank.last_stats = match (rank.last_stats, ts) {
                (Some(l), Some(t)) => Some(l.max(t)),
                (l, t) => t.or(l),
            };
            let rec = Printed::of(rec);
            derive(d, class, &rec, &mut rank.values);
            apply_defaults(&d.defaults, class, &rec, &mut rank.values);
            let (ids, hint) = if class == Class::Prefill {
                (&d.pd_prefill[..], EngineType::Prefill)
            } else {
                (&d.pd_decode[..], EngineType::Decode)
            };
            if ids.iter().flatten().any(|&m| rec.get(m).is_some()) {
                srv.engine_hint = Some(hint);
            } else if srv.engine_hint.is_none() {
                srv.engine_hint = Some(EngineType::Unified);
            }
            // The used count as printed (`#token`; a hybrid model's `#full token`), against the
            // rank's pool, else the server's capacity line; a hybrid SWA model's `#swa token`
            // against its sliding-window pool. Never SGLang's larger-pool count against one
            // pool's capacity.
            let capacity =
                cap_of(d.pool_capacity, &rank.values).or(cap_of(d.max_total, &srv.values));
            let printed = |m: Option<MetricId>| m.and_then(|m| rec.get(m));
            let over =
                |u: Option<f64>, c: Option<f64>| matches!((u, c), (Some(u), Some(c)) if u > c);
            let over_capacity = over(printed(d.full_used).or(printed(d.used)), capacity)
                || over(printed(d.swa_used), cap_of(d.swa_capacity, &rank.values));
            // A token usage above 1 contradicts itself.
            let over_one = d.usage.and_then(|m| rec.get(m)).is_some_and(|u| u > 1.0);
            return u32::from(over_capacity || over_one);
        }
        // A capacity that arrives after the stats lines it contradicts (a capacity line of
        // another process, read later) counts once per rank it contradicts.
        Class::Fact
            if routed
                .iter()
                .any(|&(m, _)| Some(m) == d.max_total || Some(m) == d.pool_capacity) =>
        {
            let server_cap = cap_of(d.max_total, &srv.values);
            return srv
                .ranks
                .values()
                .filter(|r| {
                    // The KV pool's own count (a hybrid model's full-attention pool's).
                    let used = cap_of(d.full_used, &r.values).or(cap_of(d.used, &r.values));
                    let c = cap_of(d.pool_capacity, &r.values).or(server_cap);
                    matches!((used, c), (Some(u), Some(c)) if u > c)
                })
                .count() as u32;
        }
        Class::Retract => {
            rank.retractions += 1;
            rank.last_retraction = ts.or(rank.last_retraction);
        }
        _ => {}
    }
    0
}

/// Whether `args`, a `server_args` dump, is another host's of the multi-node server `srv`
/// already runs (same model and node count, a node that has not dumped yet), not a restart.
fn other_node(srv: &ServerState, args: Option<&ServerArgs>) -> bool {
    let (Some(old), Some(new)) = (srv.args.as_ref(), args) else {
        return false;
    };
    let seen = |n: Option<u32>| n.is_some_and(|n| n < 64 && srv.dumped_nodes & (1 << n) != 0);
    old.nnodes.is_some_and(|n| n > 1)
        && old.nnodes == new.nnodes
        && old.model_name == new.model_name
        && new.node_rank != old.node_rank
        && !seen(new.node_rank)
}

/// The value of metric `m` in `values`, if set.
fn cap_of(m: Option<MetricId>, values: &[f64]) -> Option<f64> {
    m.map(|m| values[m as usize]).filter(|v| !v.is_nan())
}

/// The pattern file's `default` of every metric the line does not print (SGLang's own metrics
/// read 0 for a pool or feature the server lacks: `sglang:swa_token_usage`, `sglang:spec_*`).
/// `defaults` lists (metric, value, class) once, so a line costs a few comparisons.
fn apply_defaults(
    defaults: &[(MetricId, f64, Class)],
    class: Class,
    rec: &Printed<'_, '_>,
    values: &mut [f64],
) {
    for &(id, v, c) in defaults {
        if c == class && rec.get(id).is_none() && !rec.unreadable(id) {
            values[id as usize] = v;
        }
    }
}

/// Fills what SGLang's own gauges derive and the line leaves out: `#token`/`token usage` of
/// hybrid models (largest pool, as `sglang:num_used_tokens`/`sglang:token_usage` do since
/// v0.5.10) and the per-batch cache hit rate of lines after v0.4.3.post2 (which print none).
///
/// Nothing is derived from a line where an input of the derivation was unreadable: the derived
/// gauge keeps its value rather than be re-derived from the inputs that remain (the largest of
/// the other pools is not the largest pool).
fn derive(d: &Derived, class: Class, rec: &Printed<'_, '_>, values: &mut [f64]) {
    let got = |m: Option<MetricId>| m.and_then(|m| rec.get(m));
    let unreadable = |ms: &[Option<MetricId>]| ms.iter().flatten().any(|&m| rec.unreadable(m));
    if let Some(used) = d.used {
        if got(Some(used)).is_none() && !unreadable(&[d.full_used, d.swa_used, Some(used)]) {
            let pools = [got(d.full_used), got(d.swa_used)];
            if let Some(max) = pools.iter().flatten().copied().reduce(f64::max) {
                values[used as usize] = max;
            }
        }
    }
    if let Some(usage) = d.usage {
        if got(Some(usage)).is_none() && !unreadable(&d.pool_usages) && !unreadable(&[Some(usage)])
        {
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
    // `sglang:full_token_usage` is set on every report upstream: for a model with one pool it
    // is that pool's usage.
    if let (Some(full), Some(usage)) = (d.full_usage, d.usage) {
        if got(Some(full)).is_none() && !unreadable(&[Some(full)]) {
            if let Some(u) = got(Some(usage)) {
                values[full as usize] = u;
            }
        }
    }
    if class == Class::Prefill && !unreadable(&[d.new_tokens, d.cached_tokens, d.hit_rate]) {
        if let (Some(hit), Some(new), Some(cached)) =
            (d.hit_rate, got(d.new_tokens), got(d.cached_tokens))
        {
            // Token counts are never negative (a garbled line's `-1` would give a ratio > 1).
            if got(Some(hit)).is_none() && new >= 0.0 && cached >= 0.0 && new + cached > 0.0 {
                values[hit as usize] = cached / (new + cached);
            }
        }
    }
}

#[cfg(test)]
mod tests;
