//! The cardinality caps of the state, and what it does when one refuses: count it (in the
//! total `sglang_log_exporter_series_dropped_total` and by cap), and warn once per cap and
//! server, naming the cap and its limit, so series that stop appearing are explained in the log.

use std::collections::BTreeSet;

/// Which cap refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cap {
    /// Servers (name and engine pairs) in all.
    Servers,
    /// Engines of one multi-engine log (Ray actors) per server name.
    Engines,
    /// Ranks per server.
    Ranks,
    /// Ranks in all.
    RanksTotal,
    /// HTTP (method, path, status) series per server.
    HttpSeries,
    /// Sources in the self metrics.
    Sources,
}

impl Cap {
    /// The `cap` label value.
    pub fn label(self) -> &'static str {
        match self {
            Cap::Servers => "servers",
            Cap::Engines => "engines_per_server",
            Cap::Ranks => "ranks_per_server",
            Cap::RanksTotal => "ranks_total",
            Cap::HttpSeries => "http_series_per_server",
            Cap::Sources => "sources",
        }
    }

    /// The cap's limit in `cfg`.
    pub fn limit(self, cfg: &super::StateConfig) -> usize {
        match self {
            Cap::Servers => cfg.max_servers,
            Cap::Engines => cfg.max_engines,
            Cap::Ranks => cfg.max_ranks,
            Cap::RanksTotal => cfg.max_ranks_total,
            Cap::HttpSeries => cfg.max_http_series,
            Cap::Sources => cfg.max_sources,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Cap::Servers => "servers (name and engine pairs)",
            Cap::Engines => "engines (Ray actors, stream prefixes) of one server",
            Cap::Ranks => "ranks of one server",
            Cap::RanksTotal => "ranks in all",
            Cap::HttpSeries => "HTTP (method, path, status) series of one server",
            Cap::Sources => "sources",
        }
    }
}

/// The (cap, server) pairs already warned about.
#[derive(Debug, Default)]
pub struct Warned(BTreeSet<(Cap, String)>);

impl Warned {
    /// Warns the first time `cap` (at `limit`) refuses something of `server`. Bounded: at most
    /// one entry per cap and server the state tracks (and one per cap for a refused server).
    pub fn refused(&mut self, cap: Cap, limit: usize, server: &str) {
        // A refused server is not tracked: one warning per cap for all of them.
        let who = match cap {
            Cap::Servers | Cap::Sources => "",
            _ => server,
        };
        if self.0.insert((cap, who.to_string())) {
            tracing::warn!(
                server,
                cap = cap.label(),
                limit,
                "the cap of {limit} {} is reached: what goes past it is not shown \
                 (sglang_log_exporter_series_dropped_by_cap_total{{cap=\"{}\"}}); warned once",
                cap.what(),
                cap.label()
            );
        }
    }
}
