//! Two inputs named for one server (`s=a.log s=b.log`) are two sources. A server restarts
//! when its source prints a new `server_args` dump; one input read after another of the same
//! name (rotated pieces, oldest first) may start a new run the same way, once the run before
//! it has ended. But a dump of another source at a time before the last line of the server's
//! run (the two overlap: `b.log` starts at 10:00 while `a.log` runs to 10:05) is no restart:
//! two processes ran at once, two servers under one name. Read as a restart, it would drop
//! the first one's ranks and facts silently; merged, two `TP0`s would be one series. So that
//! source is kept apart from then on: its lines go to an engine of the server named after the
//! source (`engine="b.log"`'s path), as a stream's other writer is, warned about once and
//! counted in `sglang_log_exporter_server_name_collisions_total`. Rotated pieces named newest
//! first look the same at the older piece's dump (its run's end is not known yet): the warning
//! names both causes, and keeping it apart leaves the newer piece's state as the server's. Another host's dump of a
//! multi-node server (same model and node count, a node not seen yet) is no second server:
//! the hosts' logs join as one server's.

use std::borrow::Cow;

use super::{SelfMetric, ServerKey, State};
use crate::record::{Class, Record, ServerArgs};

/// Sources kept apart from a server of the same name: (server, source clock) → engine.
pub type Apart = std::collections::HashMap<(String, usize), String>;

impl State {
    /// The key a line of `key` from the source of clock `clock` (at `ts`) goes under: its own,
    /// or that source's engine when it is kept apart (see the module). Clock 0, shared past
    /// the clocks' bound, names no one source: never kept apart.
    pub(super) fn route<'k>(
        &mut self,
        key: Cow<'k, ServerKey>,
        rec: &Record<'_>,
        ts: Option<f64>,
        clock: usize,
    ) -> Cow<'k, ServerKey> {
        if clock == 0 {
            return key;
        }
        if !self.apart.is_empty() {
            if let Some(e) = self.apart.get(&(key.server.clone(), clock)) {
                return Cow::Owned(ServerKey::new(&key.server, e));
            }
        }
        if rec.class != Class::ServerArgs || !key.engine.is_empty() {
            return key;
        }
        let Some(srv) = self.servers.get(&*key) else {
            return key;
        };
        let ran = srv.args.is_some() || !srv.ranks.is_empty();
        let overlaps = matches!((ts, srv.last_seen), (Some(t), Some(l)) if l > t);
        if !(ran && overlaps && srv.clock != 0 && srv.clock != clock) {
            return key;
        }
        // Another host's dump of the same multi-node server (each node's log its own input)
        // joins it, as in one stream.
        let args = rec.server_args.as_deref().map(ServerArgs::bounded);
        if super::apply::other_node(srv, args.as_ref()) {
            return key;
        }
        let source = self
            .clocks
            .name(clock)
            .unwrap_or("another input")
            .to_string();
        let other = self
            .clocks
            .name(srv.clock)
            .unwrap_or("another input")
            .to_string();
        tracing::warn!(
            server = %key.server,
            source = %source,
            other = %other,
            "{source} starts a run before the last line read of {other}, an input of the same \
             server name: either the two overlap in time (two servers under one name) or they \
             are rotated pieces named newest first (name them oldest first); not read as a \
             restart, so the newer data stays: {source} is kept apart as engine {source:?} \
             (name the inputs apart with NAME=PATH)"
        );
        self.add_self(SelfMetric::ServerNameCollisions, "", 1.0);
        self.apart
            .insert((key.server.clone(), clock), source.clone());
        Cow::Owned(ServerKey::new(&key.server, &source))
    }

    /// The key a line of `key` from the source of clock `clock` ([`State::clock_id`]) goes
    /// under when it is not `key` itself (bounded, or the source kept apart from a server of
    /// its name: the module), for callers of [`State::apply_placed`], which applies the line
    /// under the key given.
    pub fn route_placed(
        &mut self,
        clock: usize,
        key: &ServerKey,
        rec: &Record<'_>,
        ts: Option<f64>,
    ) -> Option<ServerKey> {
        match self.route(key.bounded(), rec, ts, clock) {
            Cow::Owned(k) => Some(k),
            Cow::Borrowed(_) => None,
        }
    }
}
