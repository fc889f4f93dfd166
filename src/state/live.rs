//! First-hand values from SGLang's HTTP API ([`crate::source::api`]), kept beside the log's.
//!
//! The poller hands in one [`ApiReading`] per answer ([`State::apply_api`]) or says the server
//! did not answer ([`State::api_failed`]). What a scrape shows of them is decided in
//! [`crate::view::value`]: while the API answers, its values win over the last log line and the
//! idle policy is not needed for them; while it does not, the activity gauges of the ranks it
//! fed are withdrawn (never shown as current), and its last capacity still stands.

use crate::record::{Ranks, ServerArgs};

pub use super::readings::{ApiReading, ApiStatus, DpLoad, Live, ServerInfo};
use super::{caps, ServerKey, State};

/// How `/server_info` contradicts the log's `server_args`: another model or DP size.
fn contradiction(log: &ServerArgs, api: &ServerArgs) -> Option<String> {
    let differ = |a: &Option<_>, b: &Option<_>| a.is_some() && b.is_some() && a != b;
    if differ(&log.model_name, &api.model_name) {
        return Some(format!(
            "model {:?} in the log, {:?} in the API",
            log.model_name.as_deref().unwrap_or(""),
            api.model_name.as_deref().unwrap_or("")
        ));
    }
    let (ld, ad) = (log.dp_size.unwrap_or(1), api.dp_size.unwrap_or(1));
    if log.dp_size.is_some() && api.dp_size.is_some() && ld != ad {
        return Some(format!(
            "dp_size {} in the log, {} in the API",
            log.dp_size.unwrap_or(1),
            api.dp_size.unwrap_or(1)
        ));
    }
    None
}

impl State {
    /// Applies an answer of `server`'s API (wall-clock `now`): its status turns up, each DP
    /// rank's values go to the rank series the log uses for it ([`rank_for`]), and the
    /// server's arguments come from `/server_info` where no `server_args` line gave them.
    /// New servers and ranks count against the same caps as the log's.
    pub fn apply_api(&mut self, server: &str, r: &ApiReading, now: f64) {
        self.apply_api_at(server, None, r, now);
    }

    /// [`State::apply_api`] for the poller of one of `server`'s ports (`port`: a Rust server
    /// per DP rank, whose answer lists its own rank only), or of the whole server (`None`):
    /// the DP ranks another port's poller fed keep its values.
    pub fn apply_api_at(&mut self, server: &str, port: Option<u16>, r: &ApiReading, now: f64) {
        self.generation += 1;
        let server = crate::label::bounded("server", server);
        let server = &*server;
        let key = ServerKey::plain(server);
        // `/server_info`'s arguments, kept and compared as the log's are: bounded.
        let info_args = r.info.as_ref().map(|i| i.args.bounded());
        let n = self.pat.metrics.len();
        if !self.servers.contains_key(&key) {
            let State {
                servers,
                cfg,
                source_labels,
                ..
            } = self;
            if let Err(cap) = State::add_server(servers, cfg, source_labels, n, &key) {
                return self.refuse(cap, server);
            }
        }
        let ids: Vec<Vec<(usize, f64)>> = r
            .loads
            .iter()
            .map(|l| {
                l.values
                    .iter()
                    .filter_map(|&(m, v)| Some((self.pat.metric_by_id(m)? as usize, v)))
                    .collect()
            })
            .collect();
        let capacity = self.pat.metric_by_id("max_total_num_tokens");
        let (max_ranks, max_total) = (self.cfg.max_ranks, self.cfg.max_ranks_total);
        // Each DP rank refused by a cap is a series dropped.
        let mut refused = Vec::new();
        let mut added = 0;
        let mut gave_way = 0;
        let srv = self.servers.get_mut(&key).expect("added above");
        srv.unclaimed_since = None;
        let ep_size = r.info.as_ref().and_then(|i| i.ep_size);
        let status = srv.api.get_or_insert_with(|| {
            Box::new(ApiStatus {
                up: false,
                last_success: None,
                changed_at: now,
                ep_size,
                args_from_api: false,
                warned: false,
                capacity_from_api: false,
            })
        });
        if !status.up {
            status.up = true;
            status.changed_at = now;
        }
        status.last_success = Some(now);
        if ep_size.is_some() {
            status.ep_size = ep_size;
        }
        let ep_size = status.ep_size;
        if let Some(args) = info_args {
            match &srv.args {
                None => {
                    srv.args = Some(args);
                    status.args_from_api = true;
                }
                // A new answer of the API replaces what an earlier one said (a restart).
                Some(_) if status.args_from_api => srv.args = Some(args),
                Some(log) => {
                    if let Some(why) = contradiction(log, &args) {
                        // Two servers under one name: neither's numbers go to the other's series.
                        let first = !status.warned;
                        status.warned = true;
                        for rank in srv.ranks.values_mut() {
                            rank.live = None;
                        }
                        if first {
                            tracing::warn!(
                                server,
                                "the SGLang API contradicts the log of the same name ({why}): \
                                 its loads are not applied (sglang_log_exporter_api_contradictions_total)"
                            );
                        }
                        self.add_self(super::SelfMetric::ApiContradictions, server, 1.0);
                        return;
                    }
                }
            }
        }
        // A release without per-rank loads (before v0.4.7 no load endpoint, v0.4.7–v0.5.2 one
        // token count): the server info's capacity is a server-scope fact, as the log's
        // capacity line is.
        if r.loads.is_empty() {
            let info_capacity = r.info.as_ref().and_then(|i| i.max_total_num_tokens);
            if let (Some(c), Some(v)) = (capacity, info_capacity) {
                let slot = &mut srv.values[c as usize];
                if slot.is_nan() || status.capacity_from_api {
                    *slot = v;
                    status.capacity_from_api = true;
                }
            }
        }
        let many = r.loads.len() > 1;
        // DP ranks new to the state that found the ranks in all at their cap: they get a
        // restored rank's room, if one is left, once this server is no longer borrowed.
        let mut waiting = Vec::new();
        for (i, load) in r.loads.iter().enumerate() {
            let want = srv.rank_key(&rank_for(srv, load.dp_rank, many, ep_size));
            // The values move when the log shows another rank prints for this DP rank.
            for (ranks, rank) in srv.ranks.iter_mut() {
                if *ranks != want
                    && rank
                        .live
                        .as_ref()
                        .is_some_and(|l| l.dp_rank == load.dp_rank)
                {
                    rank.live = None;
                }
            }
            let new_rank = !srv.ranks.contains_key(&want);
            // The server's own restored rank gives way to one its API feeds.
            if new_rank && srv.ranks.len() >= max_ranks && super::series::give_way(srv) {
                self.ranks_total -= 1;
                gave_way += 1;
            }
            if new_rank && srv.ranks.len() >= max_ranks {
                refused.push(caps::Cap::Ranks);
                continue;
            }
            if new_rank && self.ranks_total + added >= max_total {
                waiting.push((i, want));
                continue;
            }
            added += usize::from(new_rank);
            feed(srv, want, load, &ids[i], capacity, r, port);
        }
        self.ranks_total += added;
        for _ in 0..gave_way {
            self.gave_way();
        }
        for (i, want) in waiting {
            // Checked again: an earlier one may have made this rank, or filled the server.
            let (exists, full) = self.servers.get(&key).map_or((false, false), |s| {
                (s.ranks.contains_key(&want), s.ranks.len() >= max_ranks)
            });
            if !exists {
                if full {
                    refused.push(caps::Cap::Ranks);
                    continue;
                }
                if self.restored_left {
                    self.make_room(&key, Some(&want));
                }
                if self.ranks_total >= max_total {
                    refused.push(caps::Cap::RanksTotal);
                    continue;
                }
                self.ranks_total += 1;
            }
            let srv = self.servers.get_mut(&key).expect("added above");
            feed(srv, want, &r.loads[i], &ids[i], capacity, r, port);
        }
        let srv = self.servers.get_mut(&key).expect("added above");
        // DP ranks the answer no longer lists keep no values of it (of this port's poller:
        // another port's answer lists its own ranks).
        let listed: Vec<u32> = r.loads.iter().map(|l| l.dp_rank).collect();
        for rank in srv.ranks.values_mut() {
            if rank
                .live
                .as_ref()
                .is_some_and(|l| l.port == port && !listed.contains(&l.dp_rank))
            {
                rank.live = None;
            }
        }
        // A rank made for the API alone that no longer holds its values is gone.
        let before = srv.ranks.len();
        srv.ranks.retain(|_, r| r.live.is_some() || r.from_log());
        self.ranks_total -= before - srv.ranks.len();
        for cap in refused {
            self.refuse(cap, server);
        }
    }

    /// Whether `server`'s API answers (some port of it, where it has one per DP rank); `None`
    /// before its first answer.
    pub fn api_up(&self, server: &str) -> Option<bool> {
        let key = ServerKey::plain(server);
        Some(self.servers.get(&key)?.api.as_ref()?.up)
    }

    /// Records that `server`'s API did not answer (or answered what cannot be read): its status
    /// turns down, so the activity gauges of the ranks it fed are withdrawn until it answers.
    pub fn api_failed(&mut self, server: &str) {
        self.api_failed_at(server, None);
    }

    /// [`State::api_failed`] for the poller of one of `server`'s ports (see
    /// [`State::apply_api_at`]): only the DP ranks it fed are withdrawn; the server's status
    /// turns down once no port's ranks are live.
    pub fn api_failed_at(&mut self, server: &str, port: Option<u16>) {
        // Bounded as `apply_api` keeps it.
        let key = ServerKey::plain(server);
        let now = self.clock().now().wall;
        let Some(srv) = self.servers.get_mut(&key) else {
            return;
        };
        if port.is_some() {
            let mut changed = false;
            for l in srv.ranks.values_mut().filter_map(|r| r.live.as_mut()) {
                if l.port == port && l.up {
                    l.up = false;
                    changed = true;
                }
            }
            let any_up = srv
                .ranks
                .values()
                .any(|r| r.live.as_ref().is_some_and(|l| l.up));
            if changed {
                self.generation += 1;
            }
            if any_up {
                return;
            }
        }
        if let Some(status) = srv.api.as_mut() {
            if status.up {
                status.up = false;
                status.changed_at = now;
                self.generation += 1;
            }
        }
    }
}

/// Gives DP rank `load`'s values (`values`, by metric index) to rank `want` of `srv`, made if
/// new (the caller counted it against the caps); with `/server_info`'s capacity where the load
/// gives none; `port`: the poller's, where the server has one per DP rank.
fn feed(
    srv: &mut super::ServerState,
    want: Ranks,
    load: &DpLoad,
    values: &[(usize, f64)],
    capacity: Option<crate::parse::patterns::MetricId>,
    r: &ApiReading,
    port: Option<u16>,
) {
    // Every metric's slot (a server keeps one per metric).
    let n = srv.values.len();
    let rank = srv
        .ranks
        .entry(want)
        .or_insert_with(|| super::RankState::new(n));
    super::series::confirm(&mut srv.restored_ranks, rank);
    let mut live = vec![f64::NAN; n].into_boxed_slice();
    for &(id, v) in values {
        live[id] = v;
    }
    if let (Some(c), Some(info)) = (capacity, &r.info) {
        let c = c as usize;
        if live[c].is_nan() {
            live[c] = info.max_total_num_tokens.unwrap_or(f64::NAN);
        }
    }
    rank.live = Some(Live {
        dp_rank: load.dp_rank,
        port,
        up: true,
        values: live,
    });
}

/// A `server_args` line of the log: the server's arguments are the log's from now on (an API
/// answer no longer replaces them).
pub(super) fn args_from_log(srv: &mut super::ServerState) {
    if let Some(a) = srv.api.as_mut() {
        a.args_from_api = false;
    }
}

/// A stats line of rank `at` in a server the API feeds: where a rank without stats lines holds
/// the API's values for the same DP rank (made by the API before the log named its printer),
/// they move to `at` at once, so one DP rank is never two series until the next poll; that
/// rank is removed if nothing else of it is left. The number of ranks removed.
pub(super) fn adopt(srv: &mut super::ServerState, at: &Ranks) -> usize {
    let dp = at.dp.unwrap_or(0);
    let holds = |r: &super::RankState| r.live.as_ref().is_some_and(|l| l.dp_rank == dp);
    if srv.ranks.get(at).is_some_and(holds) {
        return 0;
    }
    let Some(from) = srv
        .ranks
        .iter()
        .find(|(k, r)| *k != at && k.dp == at.dp && holds(r) && !r.has_stats())
        .map(|(k, _)| *k)
    else {
        return 0;
    };
    let live = srv.ranks.get_mut(&from).and_then(|r| r.live.take());
    if let Some(r) = srv.ranks.get_mut(at) {
        r.live = live;
    }
    let empty = srv.ranks.get(&from).is_some_and(|r| !r.from_log());
    if empty {
        srv.ranks.remove(&from);
    }
    usize::from(empty)
}

/// The rank whose series a DP rank's API values join, the way SGLang numbers the ranks that
/// print stats lines: the log's own rank for that DP rank where it has one (the one printing
/// stats lines first, else the lowest), else the prefix SGLang would print for it: `DPn` where
/// the server has data parallelism, then `TPm` where `tp_size` > 1 (m = n × tp_size / dp_size
/// under DP attention, where each DP rank's first attention-TP rank prints; 0 under plain TP,
/// where TP0 prints), then `EPk` where `ep_size` > 1 (k = m / (tp_size / ep_size)).
pub fn rank_for(srv: &super::ServerState, dp_rank: u32, many: bool, ep_size: Option<u32>) -> Ranks {
    let args = srv.args.as_ref();
    // A size of 0 (garbage) reads as 1: no division by it.
    let dp_size = args.and_then(|a| a.dp_size).unwrap_or(1).max(1);
    let has_dp = dp_size > 1 || many || dp_rank > 0;
    let wanted_dp = has_dp.then_some(dp_rank);
    // DP ranks the log tags, and those it does not: a log without DP tags has one DP rank.
    let log_tags_dp = srv.ranks.keys().any(|r| r.dp.is_some());
    let matching = |r: &Ranks| {
        if log_tags_dp {
            r.dp == Some(dp_rank)
        } else {
            r.dp.is_none() && dp_rank == 0
        }
    };
    let own = srv
        .ranks
        .iter()
        .filter(|(r, _)| matching(r))
        .find(|(_, s)| s.has_stats())
        .or_else(|| {
            srv.ranks
                .iter()
                // A rank of the log (startup facts), never one the API made itself: those
                // follow what the API says now (a restart with another layout).
                .filter(|(r, s)| matching(r) && s.from_log())
                .min_by_key(|(r, _)| (r.pp, r.tp, r.ep))
        })
        .map(|(r, _)| *r);
    if let Some(r) = own {
        return r;
    }
    let tp_size = args.and_then(|a| a.tp_size).unwrap_or(1).max(1);
    let attention = args.and_then(|a| a.enable_dp_attention).unwrap_or(false);
    let tp = (tp_size > 1).then(|| {
        if attention && dp_size > 1 {
            dp_rank.saturating_mul((tp_size / dp_size).max(1))
        } else {
            0
        }
    });
    let ep = ep_size.filter(|&e| e > 1).map(|e| {
        let per = (tp_size / e).max(1);
        tp.unwrap_or(0) / per
    });
    Ranks {
        dp: wanted_dp,
        tp,
        ep,
        ..Ranks::default()
    }
}
