//! When servers and ranks come and go: the caps (what is refused, what restored entries give
//! way to), expiry of silent engines and retired servers, the idle policy's next change, and
//! what was removed for a reader that keeps it ([`Dropped`]).

use std::collections::BTreeMap;

use super::series::give_way;
use super::{caps, SelfMetric, ServerKey, ServerState, State, StateConfig};
use crate::label;
use crate::record::Ranks;

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

impl State {
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
    pub(super) fn remove_servers(
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
    pub(super) fn add_server<'a>(
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
    pub(super) fn make_room(&mut self, key: &ServerKey, rank: Option<&Ranks>) {
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
    pub(super) fn gave_way(&mut self) {
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
    pub(super) fn refuse(&mut self, cap: caps::Cap, server: &str) {
        self.dropped_series += 1;
        *self.dropped_by_cap.entry(cap).or_insert(0) += 1;
        self.warned_caps.refused(cap, cap.limit(&self.cfg), server);
    }
}
