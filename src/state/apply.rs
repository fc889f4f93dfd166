//! Applying one parsed line to the state: its time on the log clock, its rank's values, the
//! defaults and derived values SGLang's own gauges would hold, the contradictions counted.

use super::line_metrics::LineMetrics;
use super::series::{confirm, give_way};
use super::{
    caps, clock, draft, live, Dropped, EngineType, HttpKey, RankState, SelfMetric, ServerKey,
    ServerState, SourceDelta, State,
};
use crate::parse::patterns::{Class, MetricId, MetricKind, Patterns, Scope};
use crate::record::{Ranks, Record, ServerArgs};

/// Metric ids the state derives values for (absent in a custom pattern file: nothing derived).
#[derive(Debug, Clone, Default)]
pub(super) struct Derived {
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

impl Derived {
    /// The ids of the metrics derived from in `pat`.
    pub(super) fn of(pat: &Patterns) -> Derived {
        let id = |n: &str| pat.metric_by_id(n);
        Derived {
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
            drafts: draft::DraftTwins::of(pat),
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
        }
    }
}

impl State {
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
    pub(super) fn count_record(&mut self, source: &str, rec: &Record<'_>) {
        let mut d = SourceDelta::default();
        d.count_record(rec);
        self.add_source_counts(source, &d);
    }

    /// What every applied line does before its time is decided: the key bounded (keys made by
    /// `ServerKey::new`/`set` are already: two length checks), the generation moved on, its
    /// unknown field names counted.
    pub(super) fn begin_line<'k>(
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
        let key = self.route(key, rec, ts, clock);
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
    /// state's clocks are left alone. `key` is where the line goes: the caller routed it with
    /// [`State::route_placed`] on the source's clock `clock` ([`State::clock_id`], which only
    /// names the source here, for [`super::apart`]).
    pub fn apply_placed(
        &mut self,
        source: &str,
        clock: usize,
        key: &ServerKey,
        rec: &Record<'_>,
        ts: Option<f64>,
    ) {
        self.count_record(source, rec);
        let key = self.begin_line(key, rec);
        self.apply_at(&key, rec, ts, clock);
    }

    /// Observes one line's time on clock `clock`; returns the time to use for that line's
    /// state. When the clock settles, a rank's time taken from an outlier is mended (on the
    /// servers that clock judges), and the line held before (a disagreeing stats line) gets its
    /// own time back.
    pub(super) fn clock_step(&mut self, clock: usize, t: f64) -> f64 {
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
    pub(super) fn apply_at(
        &mut self,
        key: &ServerKey,
        rec: &Record<'_>,
        ts: Option<f64>,
        clock: usize,
    ) {
        let (max_ranks, max_total) = (self.cfg.max_ranks, self.cfg.max_ranks_total);
        if self.restored_left
            && (self.ranks_total >= max_total || self.servers.len() >= self.cfg.max_servers)
        {
            let makes_rank = !matches!(
                rec.class,
                Class::ServerArgs | Class::Request | Class::Access | Class::Listen
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
            srv.first_seen.get_or_insert(t);
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
                        // Its log stays a source of its values across the restart.
                        first_seen: srv.first_seen.or(ts),
                        clock: srv.clock,
                        runs: srv.runs.restarted(srv.stats_lines, srv.ranks.len(), ts),
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
            Class::Listen => {
                // The rank of the line's note, else of its prefix; the line before a dump's
                // restart is the old process's (forgotten with it).
                if let Some(l) = rec.listen {
                    let dp = l.dp.or(rec.ranks.dp);
                    let ports = &mut srv.listen_ports;
                    if ports.len() < max_ranks || ports.contains_key(&l.port) {
                        ports.insert(l.port, dp);
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
    pub(super) fn clamp_outlier_times(&mut self, clock: usize) {
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
    pub(super) fn count_contradictions(&mut self, server: &str, n: u32) {
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

    pub(super) fn count_unknown(&mut self, key: &str) {
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

/// Applies a stats, retraction or startup line to its rank (created if new), marking the
/// metrics a startup line set in `facts`. Returns how many ranks now hold used tokens above
/// their known capacity because of this line (a contradiction, counted by the caller).
/// `ranks` is the key the line's rank is kept under ([`ServerState::rank_key`]).
pub(super) fn apply_rank_line(
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
            let rec = LineMetrics::of(rec);
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
pub(super) fn other_node(srv: &ServerState, args: Option<&ServerArgs>) -> bool {
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
pub(super) fn cap_of(m: Option<MetricId>, values: &[f64]) -> Option<f64> {
    m.map(|m| values[m as usize]).filter(|v| !v.is_nan())
}

/// The pattern file's `default` of every metric the line does not print (SGLang's own metrics
/// read 0 for a pool or feature the server lacks: `sglang:swa_token_usage`, `sglang:spec_*`).
/// `defaults` lists (metric, value, class) once, so a line costs a few comparisons.
pub(super) fn apply_defaults(
    defaults: &[(MetricId, f64, Class)],
    class: Class,
    rec: &LineMetrics<'_, '_>,
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
pub(super) fn derive(d: &Derived, class: Class, rec: &LineMetrics<'_, '_>, values: &mut [f64]) {
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
