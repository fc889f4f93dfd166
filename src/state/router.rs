//! What each router (`--router.url`, [`crate::source::router`]) says of its workers, and which
//! server each worker is: a worker is joined to the server whose URL
//! ([`State::server_url`]) names the same host and port ([`address`]).
//!
//! The poller hands in one [`RouterReading`] per answer ([`State::apply_router`]) or says the
//! router did not answer ([`State::router_failed`]): its workers are then withdrawn, never shown
//! as current.

use std::collections::BTreeMap;

use super::State;

/// Most workers kept per router: a router fronts far fewer; the rest of a larger answer is
/// left out (a hostile or broken exposition cannot grow memory without bound).
pub const MAX_WORKERS: usize = 1024;

/// One worker as a router's `/metrics` shows it: values `None` where the router printed none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouterWorker {
    /// The router's `worker` label, as it prints it (`http://HOST:PORT`, `…@RANK`).
    pub worker: String,
    /// `smg_worker_requests_active`: requests in flight to the worker.
    pub requests_active: Option<f64>,
    /// `smg_worker_health`: 1 healthy, 0 not.
    pub healthy: Option<f64>,
    /// `smg_worker_cb_state`: 0 closed, 1 open, 2 half-open.
    pub circuit: Option<f64>,
}

/// One answer of a router: its workers, in the router's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouterReading {
    /// At most [`MAX_WORKERS`].
    pub workers: Vec<RouterWorker>,
}

/// Where a URL listens, as the join compares it: `host:port` (the host lowercased, `localhost`
/// as `127.0.0.1`, the scheme's default port where none is written; an IPv6 host bracketed),
/// and the DP rank of a router's `--dp-aware` worker (`URL@RANK`). The scheme, a path and a
/// trailing `/` do not count: a worker the router reaches over gRPC (`grpc://`) is the server
/// whose HTTP port it is. `None` for what is no URL with a host.
pub fn address(url: &str) -> Option<(String, Option<u32>)> {
    let url = url.trim();
    let (base, rank) = match url.rsplit_once('@') {
        Some((b, r)) if !r.is_empty() && r.bytes().all(|c| c.is_ascii_digit()) => {
            (b, r.parse().ok())
        }
        _ => (url, None),
    };
    let parsed = url::Url::parse(base.trim_end_matches('/')).ok()?;
    let host = match parsed.host()? {
        url::Host::Domain(d) if d.eq_ignore_ascii_case("localhost") => "127.0.0.1".to_string(),
        url::Host::Domain(d) => d.to_ascii_lowercase(),
        url::Host::Ipv4(a) => a.to_string(),
        url::Host::Ipv6(a) => format!("[{a}]"),
    };
    let port = parsed.port_or_known_default()?;
    Some((format!("{host}:{port}"), rank))
}

impl State {
    /// Applies an answer of `router` (its name): its workers replace the last answer's.
    pub fn apply_router(&mut self, router: &str, mut r: RouterReading) {
        self.generation += 1;
        r.workers.truncate(MAX_WORKERS);
        for w in &mut r.workers {
            w.worker = crate::label::bounded("worker", &w.worker).into_owned();
        }
        let router = crate::label::bounded("router", router).into_owned();
        self.routers.insert(router, r);
    }

    /// `router` did not answer: its workers are withdrawn until it answers again.
    pub fn router_failed(&mut self, router: &str) {
        self.generation += 1;
        self.routers
            .remove(&*crate::label::bounded("router", router));
    }

    /// The routers that answered last time, by name, with their workers.
    pub fn routers(&self) -> &BTreeMap<String, RouterReading> {
        &self.routers
    }

    /// The server each [`address`] is, by address: the servers of one engine whose URL is known
    /// ([`State::server_url`]); the first by name where two share one.
    pub fn servers_by_address(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (key, srv) in &self.servers {
            let Some(url) = self.server_url(key, srv) else {
                continue;
            };
            if let Some((a, _)) = address(&url) {
                out.entry(a).or_insert_with(|| key.server.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_url_is_its_host_and_port_and_its_rank() {
        let a = address;
        assert_eq!(
            a("http://127.0.0.1:30000"),
            Some(("127.0.0.1:30000".into(), None))
        );
        assert_eq!(
            a("http://127.0.0.1:30000/"),
            Some(("127.0.0.1:30000".into(), None))
        );
        assert_eq!(
            a("http://LOCALHOST:30000@3"),
            Some(("127.0.0.1:30000".into(), Some(3)))
        );
        assert_eq!(a("grpc://gpu-1:30001"), Some(("gpu-1:30001".into(), None)));
        assert_eq!(a("https://gpu-1"), Some(("gpu-1:443".into(), None)));
        assert_eq!(
            a("http://[::1]:8000@0"),
            Some(("[::1]:8000".into(), Some(0)))
        );
        assert_eq!(a("127.0.0.1:30000"), None);
        assert_eq!(a(""), None);
    }
}
