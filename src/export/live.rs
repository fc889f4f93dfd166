//! The live page at `/` ([`PAGE`], one self-contained HTML file) and the JSON it refreshes
//! from, `/api/v1/status` ([`Status`]; its shape is documented in the README).
//!
//! The numbers come from the same families a scrape shows ([`crate::export::metrics::families`]),
//! picked out as `top` picks them ([`crate::readout::Model`]), so the page, `top` and
//! `/metrics` cannot disagree. The chart's history is sampled in the process every
//! [`SAMPLE_EVERY`] into a bounded ring ([`super::ring`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::ring::{KvRing, POINTS};
use crate::clock::{self, Clock};
use crate::readout::{percent, Model, Rank, RouterWorker, RANK_LABELS};
use crate::state::ready::Readiness;
use crate::state::Shared;
use crate::stop::Stop;

/// The page: HTML, CSS and a small script, no external asset; every URL in it is relative, so
/// it works behind TLS, basic auth and a path prefix.
pub const PAGE: &str = include_str!("page.html");

/// Time between two samples of the chart.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);

/// What the page and its JSON read: the state, the readiness and the sampled history.
pub struct Live {
    state: Shared,
    readiness: Arc<Readiness>,
    ring: Mutex<KvRing>,
    telemetry_path: String,
    /// The last status as JSON and when it was made (the monotonic clock: one on the wall
    /// clock stayed "fresh" for as long as a step back, repro 38), served to every request
    /// within [`STATUS_MIN_AGE`] of it or asked before it was made.
    json: Mutex<Option<(Instant, bytes::Bytes)>>,
    clock: Clock,
}

/// How long one status JSON answers every request: the page refreshes every few seconds, and
/// many clients at once must cost one status, not one each (each takes the state's families).
pub const STATUS_MIN_AGE: f64 = 0.5;

/// `/api/v1/status`.
#[derive(Debug, Serialize)]
pub struct Status {
    /// The exporter's version (`--version`).
    pub version: &'static str,
    /// "Now", Unix seconds.
    pub now: f64,
    /// Whether start-up catch-up is done (as `/-/ready`).
    pub ready: bool,
    /// Sources still catching up.
    pub pending: Vec<String>,
    /// `--web.telemetry-path`.
    pub telemetry_path: String,
    /// Seconds between two history samples.
    pub sample_interval_seconds: f64,
    /// Seconds of history kept (samples × interval).
    pub history_seconds: f64,
    /// Servers by name, their ranks in rank order.
    pub servers: Vec<ServerStatus>,
    /// GPUs (empty without NVML data).
    pub gpus: Vec<GpuStatus>,
    /// Sources whose `sglang_log_exporter_source_up` reads 0.
    pub down_sources: Vec<String>,
    /// Inputs named on the command line that cannot be read now, and why (the page's red
    /// banner; `/-/ready` is not ready meanwhile).
    pub unreadable: Vec<Unreadable>,
    /// Servers whose HTTP API (`--sglang.url`) does not answer (`sglang_up` 0): their
    /// activity is withdrawn (the page's banner).
    pub api_down: Vec<String>,
    /// Why GPU memory is unavailable (NVML could not be loaded or read), `null` when it is
    /// read or not asked for (`--gpu.disable`).
    pub gpu_unavailable: Option<String>,
    /// Workers a router (`--router.url`) sends to that no server read here listens at (not
    /// covered).
    pub uncovered_workers: Vec<WorkerStatus>,
}

/// One worker of a router, as the router says of it.
#[derive(Debug, Serialize)]
pub struct WorkerStatus {
    /// The `router` label.
    pub router: String,
    /// The worker's URL as the router prints it (`http://HOST:PORT`, `…@RANK`).
    pub worker: String,
    /// Requests the router has in flight to it.
    pub requests_active: Option<f64>,
    /// `healthy`, `unhealthy` or `-`.
    pub health: &'static str,
    /// The router's circuit breaker: `closed`, `open`, `half-open` or `-`.
    pub circuit: &'static str,
    /// As `top` writes it: `router gw: 2 in flight, healthy, circuit closed`.
    pub summary: String,
}

impl From<&RouterWorker> for WorkerStatus {
    fn from(w: &RouterWorker) -> WorkerStatus {
        WorkerStatus {
            router: w.router.clone(),
            worker: w.worker.clone(),
            requests_active: w.requests_active,
            health: w.health_text(),
            circuit: w.circuit_text(),
            summary: w.summary(),
        }
    }
}

/// One input that cannot be read.
#[derive(Debug, Serialize)]
pub struct Unreadable {
    /// Its `source` (the path, `journald:UNIT`).
    pub source: String,
    /// The error, in words (with what to do about a permission error).
    pub why: String,
}

/// One server.
#[derive(Debug, Serialize)]
pub struct ServerStatus {
    /// `server` (with ` [engine]` where several engines share a log).
    pub name: String,
    /// `model_name` (empty where the log did not name it).
    pub model_name: String,
    /// `engine_type`: `unified`, `prefill` or `decode`.
    pub engine_type: String,
    /// Its ranks.
    pub ranks: Vec<RankStatus>,
    /// What routers (`--router.url`) say of it as their worker.
    pub router_workers: Vec<WorkerStatus>,
    /// The URL its HTTP API listens on (`sglang_server_info`'s `url`); `null` where not known.
    pub url: Option<String>,
    /// Where its values come from: `log`, `api` or `both`; `null` where neither gives any.
    pub values_from: Option<String>,
    /// Since when `values_from` holds, Unix seconds.
    pub values_since: Option<f64>,
}

/// One rank. Numbers are `null` where the exposition has none.
#[derive(Debug, Serialize)]
pub struct RankStatus {
    /// As SGLang prints it (`DP0 TP0`; `-` for a single scheduler).
    pub rank: String,
    /// The rank labels of its series (`dp_rank`, `tp_rank`, …) that the log names.
    pub labels: BTreeMap<&'static str, String>,
    /// KV-cache share 0-1: used / capacity tokens, else SGLang's token usage; a hybrid SWA
    /// rank's fuller pool, each against its own capacity.
    pub kv_share: Option<f64>,
    /// `kv_share` as `top` prints it: `45.7%`.
    pub kv_percent: Option<String>,
    /// The pool `kv_share`, `used_tokens` and `capacity_tokens` are of where the rank has
    /// several: `full`, `swa`, or `max` (only SGLang's larger-pool figures are known: its token
    /// usage and `#token`, no capacity); `null` for a rank with one pool.
    pub kv_pool: Option<&'static str>,
    /// `sglang:num_used_tokens` (a hybrid SWA rank: that pool's used tokens).
    pub used_tokens: Option<f64>,
    /// KV capacity in tokens (`sglang:max_total_num_tokens`, else the pool's; a hybrid SWA
    /// rank: that pool's own).
    pub capacity_tokens: Option<f64>,
    /// A hybrid SWA rank's pools, each against its own capacity (empty for one pool).
    pub pools: Vec<PoolStatus>,
    /// `sglang:num_running_reqs`.
    pub running: Option<f64>,
    /// `sglang:num_queue_reqs`.
    pub queued: Option<f64>,
    /// `sglang:gen_throughput`, tokens per second.
    pub gen_throughput: Option<f64>,
    /// Prefill input throughput, tokens per second.
    pub input_throughput: Option<f64>,
    /// `sglang_retractions_total`.
    pub retractions: Option<f64>,
    /// `busy`, `idle` (no stats line for `--idle-after`: activity reads 0), `no-stats`, `live`
    /// (values live from the server's HTTP API, `--sglang.url`) or `api-down` (that API does
    /// not answer: activity withdrawn).
    pub state: &'static str,
    /// Why a rank has no stats (see [`crate::view::no_stats_text`]); `null` otherwise.
    pub note: Option<&'static str>,
    /// Unix seconds of the last stats line.
    pub last_stats: Option<f64>,
    /// `[unix seconds, share or null]` samples, oldest first (at most 180).
    pub history: Vec<(f64, Option<f64>)>,
}

/// One KV pool of a rank with several.
#[derive(Debug, Serialize)]
pub struct PoolStatus {
    /// `full` or `swa`.
    pub pool: &'static str,
    /// Its share 0-1: used / its capacity, else its printed usage.
    pub share: Option<f64>,
    /// Its used tokens.
    pub used_tokens: Option<f64>,
    /// Its capacity in tokens (`null` where the used tokens exceed it).
    pub capacity_tokens: Option<f64>,
}

/// One GPU.
#[derive(Debug, Serialize)]
pub struct GpuStatus {
    /// NVML index.
    pub index: String,
    /// Product name.
    pub name: String,
    /// Allocated memory, bytes.
    pub used_bytes: Option<f64>,
    /// Installed memory, bytes.
    pub total_bytes: Option<f64>,
    /// The KV pools of the ranks on it, bytes.
    pub kv_pool_bytes: Option<f64>,
    /// The ranks on it: `decode DP0 TP0`.
    pub ranks: Vec<String>,
}

impl Live {
    /// The live view of `state`; `telemetry_path` is linked from the page.
    pub fn new(state: Shared, telemetry_path: &str) -> Live {
        let (readiness, clock) = {
            let s = crate::state::lock(&state);
            (s.readiness().clone(), s.clock().clone())
        };
        Live {
            state,
            readiness,
            ring: Mutex::new(KvRing::default()),
            telemetry_path: telemetry_path.to_string(),
            json: Mutex::new(None),
            clock,
        }
    }

    /// This view reading `clock` instead of the state's ([`crate::state::State::clock`]).
    pub fn with_clock(mut self, clock: Clock) -> Live {
        self.clock = clock;
        self
    }

    /// The status JSON for a request asked at `asked` if one is at hand: made within
    /// [`STATUS_MIN_AGE`], or since `asked`. Never waits for a lock.
    pub fn status_at_hand(&self, asked: Instant) -> Option<bytes::Bytes> {
        let last = self.json.try_lock().ok()?;
        let (at, json) = last.as_ref()?;
        let young = clock::since(self.clock.now().mono, *at) < STATUS_MIN_AGE;
        (*at >= asked || young).then(|| json.clone())
    }

    /// The status JSON for a request asked at `asked`: the one at hand, else made now (and kept
    /// for the requests that come within [`STATUS_MIN_AGE`]).
    pub fn status_json(&self, asked: Instant) -> bytes::Bytes {
        if let Some(j) = self.status_at_hand(asked) {
            return j;
        }
        let json = bytes::Bytes::from(serde_json::to_vec(&self.status()).unwrap_or_default());
        let made = self.clock.now().mono;
        *self.json.lock().unwrap_or_else(|e| e.into_inner()) = Some((made, json.clone()));
        json
    }

    /// The start-up readiness (for `/-/ready`).
    pub fn readiness(&self) -> &Arc<Readiness> {
        &self.readiness
    }

    fn model(&self, now: f64) -> Model {
        let s = crate::state::lock(&self.state);
        let fams = super::metrics::families(&s, now);
        drop(s);
        Model::from_families(&fams)
    }

    /// Samples every rank's KV share into the chart's ring.
    pub fn sample(&self) {
        let now = self.clock.now().wall;
        let m = self.model(now);
        self.ring
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .observe(&m, now);
    }

    /// The status at the wall clock's now.
    pub fn status(&self) -> Status {
        let now = self.clock.now().wall;
        let m = self.model(now);
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        let servers = m
            .servers
            .iter()
            .map(|s| ServerStatus {
                name: s.name.clone(),
                model_name: s.model_name.clone(),
                engine_type: s.engine_type.clone(),
                ranks: s
                    .ranks
                    .iter()
                    .map(|r| rank_status(r, ring.of(&s.name, &r.id)))
                    .collect(),
                router_workers: s.router_workers.iter().map(WorkerStatus::from).collect(),
                url: Some(s.url.clone()).filter(|u| !u.is_empty()),
                values_from: Some(s.values_from.clone()).filter(|f| !f.is_empty()),
                values_since: s.values_since,
            })
            .collect();
        drop(ring);
        Status {
            version: crate::cli::VERSION,
            now,
            ready: self.readiness.is_ready(),
            pending: self.readiness.pending(),
            telemetry_path: self.telemetry_path.clone(),
            sample_interval_seconds: SAMPLE_EVERY.as_secs_f64(),
            history_seconds: SAMPLE_EVERY.as_secs_f64() * POINTS as f64,
            servers,
            gpus: m
                .gpus
                .into_iter()
                .map(|g| GpuStatus {
                    index: g.index,
                    name: g.name,
                    used_bytes: g.used,
                    total_bytes: g.total,
                    kv_pool_bytes: g.kv_pool_bytes,
                    ranks: g.ranks,
                })
                .collect(),
            down_sources: m.down_sources,
            unreadable: self
                .readiness
                .unreadable_now()
                .into_iter()
                .map(|(source, why)| Unreadable { source, why })
                .collect(),
            api_down: m.api_down,
            gpu_unavailable: m.nvml_down.then(|| {
                crate::state::lock(&self.state)
                    .gpu_unavailable
                    .clone()
                    .unwrap_or_else(|| "NVML is not read".into())
            }),
            uncovered_workers: m.uncovered_workers.iter().map(WorkerStatus::from).collect(),
        }
    }
}

fn rank_status(r: &Rank, history: Vec<(f64, Option<f64>)>) -> RankStatus {
    let labels: BTreeMap<&'static str, String> = RANK_LABELS
        .iter()
        .zip(&r.id.0)
        .filter(|(_, v)| !v.is_empty())
        .map(|((k, _), v)| (*k, v.clone()))
        .collect();
    let (state, note) = match (r.api_live, r.last_stats, r.is_idle()) {
        _ if r.is_live() => ("live", None),
        (Some(_), ..) => ("api-down", None),
        (None, None, _) => {
            let dp = r.id.0[0].parse().ok();
            let tp = r.id.0[4].parse().ok();
            ("no-stats", Some(crate::view::no_stats_text(dp, tp)))
        }
        (None, Some(_), true) => ("idle", None),
        (None, Some(_), false) => ("busy", None),
    };
    let kv = r.kv();
    let share = kv.share().map(|s| s.0);
    let (used_tokens, capacity_tokens, pool) = r.kv_tokens();
    let pools = match kv.swa {
        None => Vec::new(),
        Some(_) => kv
            .pools()
            .into_iter()
            .filter_map(|(p, u)| {
                Some(PoolStatus {
                    pool: p.label()?,
                    share: u.share(),
                    used_tokens: u.used,
                    capacity_tokens: u.held_capacity(),
                })
            })
            .collect(),
    };
    RankStatus {
        rank: r.shown.clone(),
        labels,
        kv_share: share,
        kv_percent: share.map(percent),
        kv_pool: pool,
        used_tokens,
        capacity_tokens,
        pools,
        running: r.running,
        queued: r.queued,
        gen_throughput: r.gen_throughput,
        input_throughput: r.input_throughput,
        retractions: r.retractions,
        state,
        note,
        last_stats: r.last_stats,
        history,
    }
}

/// Starts the thread that samples the chart every [`SAMPLE_EVERY`] until `stop`.
///
/// # Errors
/// When the thread cannot be started.
pub fn spawn_sampler(live: Arc<Live>, stop: Arc<Stop>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("page sampler".into())
        .spawn(move || {
            // The first sample once the start of the inputs is read (or after one interval).
            live.readiness.wait(SAMPLE_EVERY);
            loop {
                live.sample();
                if !stop.wait(SAMPLE_EVERY) {
                    return;
                }
            }
        })
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::patterns::Patterns;
    use crate::state::{State, StateConfig};

    /// Many clients of the status within its minimum age cost one status (hostile pass: 256
    /// pollers of `/api/v1/status` each took the state's families and kept scrapes waiting);
    /// a request asked before a status was made takes that one.
    #[test]
    fn one_status_answers_every_request_within_its_minimum_age() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        // The live view's clock, stepped by the test (no sleep).
        let start = clock::now();
        let (c, set) = clock::manual(start);
        let at = |secs: f64| start.mono + Duration::from_secs_f64(secs);
        let step = |secs: f64| {
            *set.lock().unwrap() = clock::Now {
                wall: start.wall + secs,
                mono: at(secs),
            }
        };
        let live = Live::new(State::shared(pat, StateConfig::default()), "/metrics").with_clock(c);
        let asked = at(0.0);
        assert!(live.status_at_hand(asked).is_none(), "none made yet");
        let a = live.status_json(asked);
        assert!(std::str::from_utf8(&a)
            .unwrap()
            .starts_with("{\"version\":"));
        step(0.01);
        let b = live.status_json(at(0.01));
        assert_eq!(
            a.as_ptr(),
            b.as_ptr(),
            "within the minimum age: the same bytes"
        );
        assert_eq!(live.status_at_hand(at(0.01)).unwrap().as_ptr(), a.as_ptr());
        let later = STATUS_MIN_AGE + 0.1;
        step(later);
        assert!(live.status_at_hand(at(later)).is_none(), "too old");
        // Asked before it was made: still that one.
        assert_eq!(live.status_at_hand(asked).unwrap().as_ptr(), a.as_ptr());
        let c = live.status_json(at(later));
        assert_ne!(c.as_ptr(), a.as_ptr());
    }

    /// Repro 38: after the wall clock stepped back, the status made before the step was served
    /// (`status.now` frozen) until the clock passed that moment again: its age is on the
    /// monotonic clock.
    #[test]
    fn a_wall_clock_step_back_does_not_freeze_the_status() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let (c, set) = clock::manual(clock::now());
        let live = Live::new(State::shared(pat, StateConfig::default()), "/metrics").with_clock(c);
        let now = |s: &bytes::Bytes| {
            let v: serde_json::Value = serde_json::from_slice(s).unwrap();
            v["now"].as_f64().unwrap()
        };
        let start = *set.lock().unwrap();
        let before = start.wall;
        let a = live.status_json(start.mono);
        // The status prints microseconds, so the wall clock's last bits are rounded away.
        let near = |got: f64, want: f64| (got - want).abs() < 1e-6;
        assert!(near(now(&a), before), "{} vs {before}", now(&a));
        {
            let mut n = set.lock().unwrap();
            n.wall -= 7200.0;
            n.mono += Duration::from_secs_f64(STATUS_MIN_AGE + 0.1);
        }
        let asked = set.lock().unwrap().mono;
        assert!(
            live.status_at_hand(asked).is_none(),
            "older than its minimum age"
        );
        let b = live.status_json(asked);
        assert!(
            near(now(&b), before - 7200.0),
            "{} vs {}",
            now(&b),
            before - 7200.0
        );
    }
}
