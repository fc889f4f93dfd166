//! Where each server listens and where its values come from: the URL its HTTP API is polled at
//! (`--sglang.url`, or its own `server_args` under `--sglang.from-logs`), the `url` label of
//! `sglang_server_info` that joins it to a router's per-worker series, and whether its values
//! come from its log, its API or both, since when.

use std::collections::BTreeMap;

use super::series::{ServerKey, ServerState};
use super::State;

/// Where a server's values come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValuesFrom {
    /// Its log lines only (no API polled, or the API does not answer).
    Log,
    /// Its HTTP API only (no line of it read).
    Api,
    /// Both: the API's live values over the log's.
    Both,
}

impl ValuesFrom {
    /// The `from` label value: `log`, `api`, `both`.
    pub fn as_str(self) -> &'static str {
        match self {
            ValuesFrom::Log => "log",
            ValuesFrom::Api => "api",
            ValuesFrom::Both => "both",
        }
    }
}

/// One API `--sglang.from-logs` polls ([`State::from_logs_targets`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollTarget {
    /// The server it answers for.
    pub server: String,
    /// Where it is polled: `http://HOST:PORT`.
    pub url: String,
    /// The server's base URL (its `server_args` port): the `url` of its `sglang_server_info`.
    pub base: String,
    /// The port of one DP rank's own listener, where the server has one per rank (its answer
    /// lists that rank only: [`State::apply_api_at`]); `None`: the whole server's API.
    pub port: Option<u16>,
}

/// `SCHEME://HOST:PORT` for a server that logged it binds `host` and `port`: a wildcard address
/// (`0.0.0.0`, `::`, empty) is reached at `wildcard` (loopback on this host, the host's name
/// for another); an IPv6 address is bracketed.
fn listen_url(scheme: &str, host: &str, port: u16, wildcard: &str) -> String {
    let host = match host {
        "" | "0.0.0.0" | "::" | "[::]" => wildcard,
        h => h,
    };
    if host.contains(':') && !host.starts_with('[') {
        format!("{scheme}://[{host}]:{port}")
    } else {
        format!("{scheme}://{host}:{port}")
    }
}

/// `https` where the server serves TLS (an `ssl_certfile` in its arguments: SGLang's own
/// `ServerArgs.url()` says so), else `http`.
fn scheme(a: &crate::record::ServerArgs) -> &'static str {
    if a.tls == Some(true) {
        "https"
    } else {
        "http"
    }
}

/// Whether `host`, as `server_args` logs it, can be an address: a host name or an IP address
/// (IPv6 bracketed or not) of at most 253 bytes. Anything else is neither polled nor a `url`.
fn valid_host(host: &str) -> bool {
    host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]%_".contains(&b))
}

/// The loopback address of a wildcard bind: `::` binds IPv6 (and usually IPv4) too, `0.0.0.0`
/// IPv4 only.
fn loopback(host: &str) -> &'static str {
    if host.contains(':') {
        "::1"
    } else {
        "127.0.0.1"
    }
}

impl State {
    /// Notes that `server`'s HTTP API is polled at `url` (its base URL; a trailing `/` is
    /// dropped): the `url` of its `sglang_server_info` from now on.
    pub fn set_api_url(&mut self, server: &str, url: &str) {
        self.generation += 1;
        let server = crate::label::bounded("server", server).into_owned();
        let url = crate::label::bounded("url", url.trim_end_matches('/')).into_owned();
        self.api_urls.insert(server, url);
    }

    /// Notes who printed the `server_args` dump just applied to `key`: `host` where another
    /// host did (a journal record's `_HOSTNAME` that is not this host's, a stream prefix's
    /// node), `None` for this host.
    pub fn set_args_host(&mut self, key: &ServerKey, host: Option<&str>) {
        if let Some(srv) = self.servers.get_mut(key) {
            let host = host.map(|h| crate::label::bounded("node", h).into_owned());
            if srv.args_host != host {
                srv.args_host = host;
                self.generation += 1;
            }
        }
    }

    /// The URL `srv` (kept under `key`) listens on, `http://HOST:PORT`: the one its API is
    /// polled at, else the `host` and `port` of its `server_args` (a wildcard bind is this
    /// host's loopback, or the name of the host that logged it). `None` where neither is known,
    /// and for a wildcard bind in a Kubernetes pod (the pod's address is not in its log).
    pub fn server_url(&self, key: &ServerKey, srv: &ServerState) -> Option<String> {
        if key.engine.is_empty() {
            if let Some(u) = self.api_urls.get(&key.server) {
                return Some(u.clone());
            }
        }
        let a = srv.args.as_ref()?;
        let port = a.port?;
        let host = a.host.as_deref().unwrap_or("127.0.0.1");
        if !valid_host(host) {
            return None;
        }
        let scheme = scheme(a);
        let in_pod = srv.source_labels.iter().any(|(k, _)| *k == "pod");
        let wildcard = match &srv.args_host {
            Some(h) => h.as_str(),
            None if in_pod => {
                return (!matches!(host, "" | "0.0.0.0" | "::" | "[::]"))
                    .then(|| listen_url(scheme, host, port, ""))
            }
            None => loopback(host),
        };
        Some(listen_url(scheme, host, port, wildcard))
    }

    /// The APIs `--sglang.from-logs` polls: every server of its own name (no engine) whose
    /// log's `server_args` gave a port, that this host runs (the dump came from this host, not
    /// from a pod), and that `--sglang.url` does not name (`configured`). A wildcard bind is
    /// polled on loopback. A server whose log names several listener ports (a Rust server per
    /// DP rank under `SGLANG_RUST_SERVER=1`, `port + rank`) is polled at each of them, each
    /// answering for its own DP rank; its `url` stays its base port's.
    pub fn from_logs_targets(&self, configured: &[String]) -> Vec<PollTarget> {
        let mut out = Vec::new();
        for (key, srv) in &self.servers {
            if !key.engine.is_empty()
                || configured.contains(&key.server)
                || srv.args_host.is_some()
                || srv.source_labels.iter().any(|(k, _)| *k == "pod")
            {
                continue;
            }
            let Some(a) = srv.args.as_ref() else { continue };
            let host = a.host.as_deref().unwrap_or("127.0.0.1");
            if !valid_host(host) {
                continue;
            }
            let url = |port| listen_url(scheme(a), host, port, loopback(host));
            // No more ranks than the server has (a log may print any number of listen lines).
            let dp = a.dp_size.unwrap_or(1).max(1) as usize;
            let ports: BTreeMap<u16, _> = srv
                .listen_ports
                .iter()
                .take(dp)
                .map(|(p, r)| (*p, *r))
                .collect();
            let ports = &ports;
            let Some(port) = a.port.or_else(|| ports.keys().next().copied()) else {
                continue;
            };
            let base = url(port);
            if ports.len() > 1 {
                out.extend(ports.keys().map(|&p| PollTarget {
                    server: key.server.clone(),
                    url: url(p),
                    base: base.clone(),
                    port: Some(p),
                }));
            } else {
                // One listener: the server's whole API, at the port it names.
                let at = ports.keys().next().copied().unwrap_or(port);
                out.push(PollTarget {
                    server: key.server.clone(),
                    url: url(at),
                    base,
                    port: None,
                });
            }
        }
        out
    }

    /// Whether `server`'s API answered since the exporter started (by any poller of it).
    pub fn api_answered(&self, server: &str) -> bool {
        let server = crate::label::bounded("server", server);
        self.servers
            .get(&ServerKey::plain(&server))
            .is_some_and(|s| s.api.is_some())
    }

    /// Where `srv`'s values come from and since when (Unix seconds): its log once a line of it
    /// was read, its API while that answers; `None` where neither gives any now.
    pub fn values_from(&self, srv: &ServerState) -> Option<(ValuesFrom, f64)> {
        let api = srv.api.as_deref();
        let api_up = api.is_some_and(|a| a.up);
        match (srv.first_seen, api) {
            (Some(log), Some(a)) if a.up => Some((ValuesFrom::Both, log.max(a.changed_at))),
            // The API went down: the log alone since then.
            (Some(log), Some(a)) => Some((ValuesFrom::Log, log.max(a.changed_at))),
            (Some(log), None) => Some((ValuesFrom::Log, log)),
            (None, Some(a)) if api_up => Some((ValuesFrom::Api, a.changed_at)),
            (None, _) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trial faults: a host that is no address is neither polled nor a `url` (a long one is not
    /// taken for none, which would poll loopback); TLS servers are `https`.
    #[test]
    fn only_addresses_are_polled_and_tls_is_https() {
        assert!(valid_host("gpu-1.example.com") && valid_host("[::1]") && valid_host("10.0.0.5"));
        for bad in ["a b", "x/../y", "h?q", "user:pw@h", &"a".repeat(254)] {
            assert!(!valid_host(bad), "{bad}");
        }
        let a = crate::parse::server_args::parse_server_args(&format!(
            "host='{}', port=31001, ssl_certfile='/etc/c.pem')",
            "a".repeat(300)
        ));
        assert_eq!(a.bounded().host.map(|h| h.len()), Some(254));
        assert_eq!(scheme(&a), "https");
        let b = crate::parse::server_args::parse_server_args("port=0, ssl_certfile=None)");
        assert_eq!((b.port, scheme(&b)), (None, "http"));
    }

    #[test]
    fn a_wildcard_bind_is_reached_on_loopback_and_ipv6_is_bracketed() {
        assert_eq!(
            listen_url("http", "0.0.0.0", 30000, "127.0.0.1"),
            "http://127.0.0.1:30000"
        );
        assert_eq!(
            listen_url("http", "::", 30000, loopback("::")),
            "http://[::1]:30000"
        );
        assert_eq!(listen_url("http", "fe80::1", 8, "x"), "http://[fe80::1]:8");
        assert_eq!(
            listen_url("http", "10.0.0.5", 30001, "x"),
            "http://10.0.0.5:30001"
        );
        assert_eq!(
            listen_url("http", "0.0.0.0", 30000, "gpu-7"),
            "http://gpu-7:30000"
        );
    }
}
