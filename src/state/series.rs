//! One server and its ranks as the state keeps them: the series store's keys ([`ServerKey`])
//! and values ([`ServerState`], [`RankState`]), and how a restored rank is confirmed or gives
//! way (used by the log's lines and by the API's readings alike).

use std::collections::BTreeMap;

use super::{draft, readings, requests, HttpKey};
use crate::label;
use crate::record::{Ranks, ServerArgs};

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
    pub(super) startup_marks: Vec<Option<u64>>,
    /// By draft twin: the server's stats-line count when the rank last wrote that draft figure.
    pub(super) draft_marks: Vec<Option<u64>>,
    /// The server's stats-line count at the rank's latest weight line, and the runner its next
    /// pool lines belong to (see [`draft`]).
    pub(super) loaded: Option<(u64, draft::Whose)>,
    /// The hybrid SWA split announced at that count: full-attention and sliding-window pool
    /// capacities in tokens (see [`draft`]).
    pub(super) hybrid_split: Option<(u64, f64, f64)>,
    /// `last_stats` before its last change (what an outlier's time is undone to).
    pub(super) prev_stats: Option<f64>,
    /// The time of the last stats line applied, in the input's order (`last_stats` is the
    /// latest): older than `last_stats`, the values are not the latest line's ([`State::behind`]).
    pub(super) last_line: Option<f64>,
    /// Values from the server's HTTP API (see [`live`]), when it fed this rank.
    pub live: Option<readings::Live>,
    /// Restored from the state file ([`persist`]) and not named since by a line or the API:
    /// it gives way to a rank an input names when a rank cap is full.
    pub(super) restored: bool,
}

impl RankState {
    pub(super) fn new(n: usize) -> RankState {
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
    pub(super) fn bounded(&self) -> std::borrow::Cow<'_, ServerKey> {
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
    pub(super) clock: usize,
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
    pub(super) stats_lines: u64,
    /// How many of its ranks may still be restored and unconfirmed ([`RankState::restored`]):
    /// 0 spares looking for one; a search that finds none sets it to 0.
    pub(super) restored_ranks: usize,
    /// The `node_rank`s (below 64) of a multi-node server whose `server_args` dump this
    /// process has printed: each host prints one (a SkyPilot or Slurm stream carries them all),
    /// and only a second dump of one node is a restart.
    pub dumped_nodes: u64,
    /// The server's HTTP API probe (`--sglang.url`), once it answered.
    pub api: Option<Box<readings::ApiStatus>>,
    /// The ports its log says its own HTTP listeners bind (`listen` lines: one Rust server per
    /// DP rank under `SGLANG_RUST_SERVER=1`), with the DP rank each names: at most the per-server
    /// rank cap of them; a `server_args` dump (a restart) starts them over.
    pub listen_ports: BTreeMap<u16, Option<u32>>,
    /// Time of its first line (Unix seconds): since when its log gives values.
    pub first_seen: Option<f64>,
    /// The host whose process printed its last `server_args` dump, where that is not this
    /// host (a journal record's `_HOSTNAME`, a stream prefix's node); `None`: this host, or
    /// not known to be another. A server of another host is never polled from here unless
    /// `--sglang.url` names it ([`super::State::from_logs_targets`]).
    pub args_host: Option<String>,
    /// Its runs before the current one (restarts).
    pub runs: super::runs::Runs,
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

    pub(super) fn new(n: usize) -> ServerState {
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
            listen_ports: BTreeMap::new(),
            first_seen: None,
            args_host: None,
            runs: super::runs::Runs::default(),
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

/// Removes one of `srv`'s restored ranks that nothing named since (the last in label order), to
/// make room for an input's own; whether there was one. A search that finds none notes that
/// none is left.
pub(super) fn give_way(srv: &mut ServerState) -> bool {
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
pub(super) fn confirm(srv_restored: &mut usize, rank: &mut RankState) {
    if std::mem::replace(&mut rank.restored, false) {
        *srv_restored = srv_restored.saturating_sub(1);
    }
}
