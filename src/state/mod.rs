//! The current value of every series, keyed by server (and engine) and rank.
//!
//! Sources apply parsed [`crate::record::Record`]s; exporters read it through [`crate::view`]. It
//! bounds its own size: a flood of distinct servers, engines, ranks, HTTP paths or unknown field
//! names cannot grow memory without limit (what is refused is counted in
//! `sglang_log_exporter_series_dropped_total`).
//!
//! Here the [`State`] and its configuration; in `series` the keys, servers and ranks it holds,
//! `apply` one line into it, `sources` what it keeps per source (counters, journal cursors, pod
//! UIDs), `lifecycle` the caps and expiry, [`selfmetric`] the self metrics' one list.

mod apart;
mod apply;
pub mod caps;
pub mod clock;
mod draft;
pub mod http;
mod lifecycle;
mod line_metrics;
pub mod live;
pub mod persist;
pub mod polled;
mod readings;
pub mod ready;
pub mod requests;
pub mod router;
pub mod runs;
pub mod selfmetric;
mod series;
mod sources;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use crate::parse::patterns::Patterns;
use crate::record::Ranks;
use apply::Derived;
pub use clock::LogClock;
pub use http::HttpKey;
pub use lifecycle::Dropped;
pub use selfmetric::{SelfFamily, SelfMetric};
pub use series::{EngineType, RankState, ServerKey, ServerState};
pub use sources::{SourceDelta, SourceStats};

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
    /// The program's clock: every "now" of the live run (a line's arrival time and the
    /// not-ahead rule, idle and expiry judged by `/metrics`, the live page and the push, the
    /// API's freshness, the state file's restore) is read from it through [`State::clock`], so
    /// a test steps it instead of sleeping.
    pub clock: crate::clock::Clock,
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
            clock: crate::clock::system(),
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
    /// Sources kept apart from a server of their name ([`apart`]).
    apart: apart::Apart,
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
    /// Server name → the base URL its HTTP API is polled at (`--sglang.url`, or from its
    /// log's `server_args` under `--sglang.from-logs`), without the trailing `/`: the `url` of
    /// `sglang_server_info` (see [`State::server_url`]).
    api_urls: BTreeMap<String, String>,
    /// Router name → its workers as its last answer gave them (see [`router`]).
    routers: BTreeMap<String, router::RouterReading>,
}

impl State {
    /// An empty state for these patterns.
    pub fn new(pat: Arc<Patterns>, cfg: StateConfig) -> State {
        let derived = Derived::of(&pat);
        let n = pat.metrics.len();
        State {
            pat,
            cfg,
            servers: BTreeMap::new(),
            sources: BTreeMap::new(),
            unknown_fields: BTreeMap::new(),
            clocks: clock::Clocks::default(),
            apart: apart::Apart::new(),
            dropped: None,
            first_users: BTreeMap::new(),
            api_urls: BTreeMap::new(),
            routers: BTreeMap::new(),
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

    /// The program's clock ([`StateConfig::clock`]).
    pub fn clock(&self) -> &crate::clock::Clock {
        &self.cfg.clock
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
}
#[cfg(test)]
mod tests;
