//! SGLang's own HTTP API as a source beside the logs (`--sglang.url [NAME=]URL`).
//!
//! One thread per server polls, every `--sglang.interval` and off the scrape path, its load
//! endpoint — `/v1/loads` (v0.5.8+) where it answers, else `/get_load` (v0.4.7–v0.5.20) — and,
//! once a minute and after every outage, `/server_info` (`/get_server_info` on releases
//! without it) for the model, the mode and the sizes. The loads are asked first, within one
//! `--sglang.timeout`, and tell whether the server answers; the server info has a timeout of
//! its own after them (SGLang answers it through the scheduler, so it is the slow one under a
//! long prefill: a slow or failing one costs its labels, never the loads). A release older
//! than every load endpoint (v0.4.1–v0.4.6) answers only `/get_server_info`, asked at every
//! poll after both load endpoints answered 404 (they are asked at every poll too, so a 404 in
//! passing or an upgrade is seen at the next poll): it is up, with its model and capacity, and
//! no per-rank values. Each answer goes to
//! the state ([`crate::state::State::apply_api`]); a refused connection, a timeout, an error
//! status or a body that cannot be read turns the server's `sglang_up` to 0 and withdraws the
//! activity gauges it fed ([`crate::state::State::api_failed`]).
//!
//! Answers are parsed into typed structs of only the fields read ([`shapes`]), never into a
//! `serde_json::Value`: what else a body holds is skipped, and lists are kept up to the
//! per-server rank cap, so an answer costs its bytes (at most [`MAX_BODY`]) and little more.
//!
//! HTTP is [`ureq`] (blocking, rustls for `https://`; a private CA with `--sglang.ca-file`,
//! loaded by [`crate::ca`] as for the Pushgateway).
//!
//! `--sglang.from-logs` ([`follow_logs`]) polls, with no URL given, each server the logs show
//! running on this host, at the host and port its own `server_args` line logs
//! ([`crate::state::State::from_logs_targets`]); a restart with another port moves the poll.
//! Under `SGLANG_RUST_SERVER=1` each DP rank serves its own port (`port + rank`, named by its
//! `Rust server listen on` line) and answers `/v1/loads` for its own rank: each port gets a
//! poller, whose failure withdraws that rank's live values alone.

pub mod shapes;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::state::live::{ApiReading, ServerInfo};
use crate::state::{lock, SelfMetric, Shared};
use crate::stop::Stop;

/// How often `/server_info` is asked again while the server answers.
const INFO_EVERY: Duration = Duration::from_secs(60);

/// The API source's settings, validated.
#[derive(Debug, Clone)]
pub struct ApiConfig {
    /// The servers to poll.
    pub targets: Vec<ApiTarget>,
    /// Time between two polls of a server.
    pub interval: Duration,
    /// Timeout of one request (connect and read).
    pub timeout: Duration,
    /// `--sglang.api-key-file`: sent as `Authorization: Bearer KEY`.
    pub api_key: Option<String>,
    /// `--sglang.from-logs`: also poll the servers the logs show on this host.
    pub from_logs: bool,
    /// `--sglang.ca-file`: the TLS settings trusting its CAs; `None`: the system's roots.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// One server to poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiTarget {
    /// The `server` label: `NAME` of `NAME=URL` (joining the log input of that name), else
    /// the URL's `host:port`.
    pub server: String,
    /// The server's base URL (`http://host:port`, a path prefix kept).
    pub base: url::Url,
}

impl ApiTarget {
    /// Reads `[NAME=]URL`.
    ///
    /// # Errors
    /// A message naming the argument when the URL is not `http://` or `https://` with a host.
    pub fn parse(arg: &str) -> Result<ApiTarget, String> {
        let bad =
            |why: &str| format!("--sglang.url {arg:?}: {why} (expected [NAME=]http://HOST:PORT)");
        let (name, mut base) = named_url(arg, &bad)?;
        // SGLang takes a bearer key, never basic auth; credentials in a URL would be logged.
        if !base.username().is_empty() || base.password().is_some() {
            return Err(
                "--sglang.url: credentials in the URL are not sent (SGLang's --api-key \
                 is a bearer key: give it with --sglang.api-key-file)"
                    .to_string(),
            );
        }
        let path = base.path().trim_end_matches('/');
        if ["/v1/loads", "/get_load", "/server_info", "/get_server_info"]
            .iter()
            .any(|e| path.ends_with(e))
        {
            return Err(bad("the URL names an endpoint; give the server's base URL"));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(bad("a query or fragment has no place in the base URL"));
        }
        if !base.path().ends_with('/') {
            let p = format!("{}/", base.path());
            base.set_path(&p);
        }
        let server = target_name(name, &base, &bad)?;
        Ok(ApiTarget { server, base })
    }
}

/// A poller's `[NAME=]URL` argument (`--sglang.url`, `--router.url`): `NAME` where one is given
/// (it holds no `/` nor `:`), and the URL, which must be `http://` or `https://` with a host;
/// `bad` words an error about the argument.
///
/// # Errors
/// `bad`'s message when the URL cannot be read or is not such.
pub fn named_url<'a>(
    arg: &'a str,
    bad: &dyn Fn(&str) -> String,
) -> Result<(Option<&'a str>, url::Url), String> {
    let (name, url) = match arg.split_once('=') {
        Some((n, u)) if !n.contains(['/', ':']) => (Some(n), u),
        _ => (None, arg),
    };
    let url = url::Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(bad("not an http:// or https:// URL with a host"));
    }
    Ok((name, url))
}

/// A polled target's name: its `NAME` (refused empty), else the URL's `host:port`.
///
/// # Errors
/// `bad`'s message for an empty `NAME`.
pub fn target_name(
    name: Option<&str>,
    url: &url::Url,
    bad: &dyn Fn(&str) -> String,
) -> Result<String, String> {
    Ok(match name {
        Some("") => return Err(bad("empty NAME")),
        Some(n) => n.to_string(),
        None => match url.port_or_known_default() {
            Some(p) => format!("{}:{p}", url.host_str().unwrap_or_default()),
            None => url.host_str().unwrap_or_default().to_string(),
        },
    })
}

/// Starts one poller thread per target, until `stop`.
///
/// # Errors
/// When a thread cannot be started.
pub fn spawn(cfg: ApiConfig, state: Shared, stop: Arc<Stop>) -> std::io::Result<()> {
    let cfg = Arc::new(cfg);
    // Ready (`/-/ready`) once each server's first poll is done, answered or not.
    let (readiness, max_ranks) = {
        let s = lock(&state);
        (s.readiness().clone(), s.config().max_ranks)
    };
    for t in &cfg.targets {
        readiness.expect(&source_of(&t.server));
    }
    for t in cfg.targets.clone() {
        lock(&state).set_api_url(&t.server, t.base.as_str());
        spawn_poller(&cfg, t, max_ranks, &state, stop.clone(), PollOf::default())?;
    }
    if cfg.from_logs {
        let (cfg, state) = (cfg.clone(), state.clone());
        std::thread::Builder::new()
            .name("sglang api from logs".into())
            .spawn(move || follow_logs(&cfg, &state, &stop, max_ranks))?;
    }
    Ok(())
}

fn spawn_poller(
    cfg: &Arc<ApiConfig>,
    t: ApiTarget,
    max_ranks: usize,
    state: &Shared,
    stop: Arc<Stop>,
    of: PollOf,
) -> std::io::Result<()> {
    let (cfg, state) = (cfg.clone(), state.clone());
    std::thread::Builder::new()
        .name(format!("sglang api {}", t.server))
        .spawn(move || {
            let mut p = Poller::new(&cfg, t, max_ranks);
            p.from_logs = of.from_logs;
            p.port = of.port;
            p.run(&state, &stop)
        })?;
    Ok(())
}

/// Why a poller polls: `--sglang.from-logs` or `--sglang.url`, and for one DP rank's port or
/// the whole server.
#[derive(Debug, Clone, Copy, Default)]
struct PollOf {
    from_logs: bool,
    port: Option<u16>,
}

/// How often `--sglang.from-logs` looks for servers to poll, moved or gone.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// `--sglang.from-logs`: once the logs are read to their end at start (so a restart's old port
/// in history is never polled), and then every [`FOLLOW_EVERY`], starts a poller for each
/// server of this host whose `server_args` gave a port, and stops a poller whose server moved
/// (a restart on another port: the new one is started) or is gone. At most `max_servers`
/// pollers run at once.
fn follow_logs(cfg: &Arc<ApiConfig>, state: &Shared, stop: &Arc<Stop>, max_ranks: usize) {
    let configured: Vec<String> = cfg.targets.iter().map(|t| t.server.clone()).collect();
    let (readiness, max_servers) = {
        let s = lock(state);
        (s.readiness().clone(), s.config().max_servers)
    };
    while !readiness.wait(FOLLOW_EVERY) {
        if stop.is_set() {
            return;
        }
    }
    // (Server, the rank's port where polled per DP rank) → (the URL polled, the poller's own
    // stop).
    let mut running: BTreeMap<(String, Option<u16>), (String, Arc<Stop>)> = BTreeMap::new();
    let mut capped = false;
    // The base URLs --sglang.url polls: a server the logs name at one of them is polled once.
    let named: Vec<String> = cfg
        .targets
        .iter()
        .map(|t| t.base.as_str().trim_end_matches('/').to_string())
        .collect();
    // Logged addresses that are no URL, warned about once each.
    let mut bad: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    loop {
        let mut want = lock(state).from_logs_targets(&configured);
        want.retain(|t| !named.contains(&t.url));
        running.retain(|(server, port), (url, own)| {
            let now = want
                .iter()
                .find(|t| &t.server == server && t.port == *port)
                .map(|t| &t.url);
            if now == Some(url) {
                return true;
            }
            match now {
                Some(new) => tracing::info!(server = %server, from = %url, to = %new, "the server's log names another address: its API poll moves"),
                None => tracing::info!(server = %server, url = %url, "the server's log no longer names this address: it is no longer polled"),
            }
            own.set();
            false
        });
        for t in want {
            let id = (t.server.clone(), t.port);
            if running.contains_key(&id) {
                continue;
            }
            let polled = running.keys().filter(|(s, _)| *s != t.server);
            let mut servers: Vec<&String> = polled.map(|(s, _)| s).collect();
            servers.dedup();
            if servers.len() >= max_servers {
                if !std::mem::replace(&mut capped, true) {
                    tracing::warn!(max_servers, "--sglang.from-logs: more servers than the state's cap of {max_servers}; the others are not polled");
                }
                break;
            }
            let base = match url::Url::parse(&format!("{}/", t.url)) {
                Ok(b) => b,
                Err(e) => {
                    if bad.len() < max_servers && bad.insert(t.url.clone()) {
                        tracing::warn!(server = %t.server, url = %t.url, "--sglang.from-logs: the logged address is no URL ({e}); not polled");
                    }
                    continue;
                }
            };
            let own = Arc::new(Stop::new());
            let target = ApiTarget {
                server: t.server.clone(),
                base,
            };
            lock(state).set_api_url(&t.server, &t.base);
            let poll = PollOf {
                from_logs: true,
                port: t.port,
            };
            if let Err(e) = spawn_poller(cfg, target, max_ranks, state, own.clone(), poll) {
                tracing::warn!(server = %t.server, "--sglang.from-logs: cannot start a poller: {e}");
                continue;
            }
            running.insert(id, (t.url, own));
        }
        if !stop.wait(FOLLOW_EVERY) {
            for (_, own) in running.values() {
                own.set();
            }
            return;
        }
    }
}

/// The name of a server's poller among the sources (self metrics, readiness).
pub fn source_of(server: &str) -> String {
    format!("sglang api {server}")
}

/// Which load endpoint a server answers on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    V1Loads,
    GetLoad,
    /// None: a release before v0.4.7 answers only its server info (at this path).
    InfoOnly(&'static str),
}

impl Endpoint {
    /// As SGLang names it: `/v1/loads`, `/get_load`, `/get_server_info`.
    fn name(self) -> &'static str {
        match self {
            Endpoint::V1Loads => "/v1/loads",
            Endpoint::GetLoad => "/get_load",
            Endpoint::InfoOnly("server_info") => "/server_info",
            Endpoint::InfoOnly(_) => "/get_server_info",
        }
    }

    /// Relative to the base URL.
    fn path(self) -> &'static str {
        &self.name()[1..]
    }
}

/// Why a poll failed: the message logged once per outage.
#[derive(Debug)]
enum Failure {
    /// No answer from the path: refused, reset, timed out, name not resolved.
    NoAnswer(&'static str, String),
    /// An answer with another status than 200 or 404 (the redirect's target, if any).
    Status(u16, &'static str, Option<String>),
    /// An answer that is not what the endpoint answers.
    Body(&'static str, String),
    /// Neither load endpoint nor the server info exists.
    NoEndpoint,
    /// A bug of ours (a panic) while reading the answer.
    Bug,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NoAnswer(p, e) => write!(f, "no answer from /{p} ({e})"),
            Failure::Status(s @ (401 | 403), p, _) => write!(
                f,
                "/{p} answered HTTP {s} (the server wants an API key: give it with --sglang.api-key-file)"
            ),
            Failure::Status(s, p, Some(to)) => {
                write!(f, "/{p} answered HTTP {s} (a redirect to {to}, not followed: give the URL it names)")
            }
            Failure::Status(s, p, None) => write!(f, "/{p} answered HTTP {s}"),
            Failure::Body(p, e) => write!(f, "/{p} answered what cannot be read: {e}"),
            Failure::Bug => f.write_str("a bug of the exporter (a panic) while reading the answer"),
            Failure::NoEndpoint => f.write_str(
                "none of /v1/loads, /get_load, /server_info and /get_server_info exists (not SGLang?)",
            ),
        }
    }
}

/// One server's poller.
struct Poller {
    target: ApiTarget,
    agent: ureq::Agent,
    api_key: Option<String>,
    interval: Duration,
    timeout: Duration,
    /// Most DP ranks one answer may list (the per-server rank cap).
    max_ranks: usize,
    endpoint: Option<Endpoint>,
    info: Option<ServerInfo>,
    info_at: Option<Instant>,
    /// Whether the last poll failed (so a failure is logged once per outage).
    down: bool,
    /// Whether the server info's failure was logged (once, until it is read again).
    info_warned: bool,
    /// Polled because its log names its address (`--sglang.from-logs`), not `--sglang.url`:
    /// its `sglang_up` shows only once it answered (a log of a server long stopped must not
    /// read as an API that went down).
    from_logs: bool,
    /// Whether it answered since the poller started.
    answered: bool,
    /// The port of the one DP rank it answers for, where the server has a listener per rank
    /// (a Rust server per DP rank, `SGLANG_RUST_SERVER=1`); `None`: the whole server.
    port: Option<u16>,
}

impl Poller {
    fn new(cfg: &ApiConfig, target: ApiTarget, max_ranks: usize) -> Poller {
        Poller {
            target,
            agent: {
                let mut b = ureq::AgentBuilder::new().timeout(cfg.timeout).redirects(0);
                if let Some(tls) = &cfg.tls {
                    b = b.tls_config(tls.clone());
                }
                b.build()
            },
            api_key: cfg.api_key.clone(),
            interval: cfg.interval,
            timeout: cfg.timeout,
            max_ranks,
            endpoint: None,
            info: None,
            info_at: None,
            down: false,
            info_warned: false,
            from_logs: false,
            answered: false,
            port: None,
        }
    }

    fn run(mut self, state: &Shared, stop: &Stop) {
        let server = self.target.server.clone();
        tracing::info!(server = %server, url = %self.target.base, "polling the SGLang HTTP API");
        let source = source_of(&server);
        let readiness = lock(state).readiness().clone();
        loop {
            let t0 = Instant::now();
            // A bug of ours on one answer must not end the poller: the poll counts as failed.
            let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.poll()));
            let (result, requests) = polled.unwrap_or_else(|_| {
                lock(state).add_self(SelfMetric::SourcePanics, &source, 1.0);
                (Err(Failure::Bug), 0)
            });
            let took = t0.elapsed().as_secs_f64();
            // Stopped while asking (the server moved to another port): this answer is not its.
            if stop.is_set() {
                return;
            }
            {
                let mut s = lock(state);
                s.add_self(SelfMetric::ApiRequests, &server, requests as f64);
                s.set_self(SelfMetric::ApiDuration, &server, took);
                match &result {
                    Ok(r) => {
                        let now = s.clock().now().wall;
                        let applied =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                s.apply_api_at(&server, self.port, r, now)
                            }));
                        if applied.is_err() {
                            s.add_self(SelfMetric::SourcePanics, &source, 1.0);
                        }
                        let bad: u32 = r.loads.iter().map(|l| l.bad).sum();
                        if bad > 0 {
                            s.add_self(SelfMetric::ApiBadValues, &server, f64::from(bad));
                        }
                        s.set_self(SelfMetric::ApiUp, &server, 1.0);
                        s.set_self(SelfMetric::ApiLastSuccess, &server, now);
                        self.answered = true;
                    }
                    Err(_) => {
                        s.api_failed_at(&server, self.port);
                        // One rank's port down leaves the server up while another answers.
                        let other_up = self.port.is_some() && s.api_up(&server) == Some(true);
                        // A server that answered before (this poller, or the one of its old
                        // address before a restart moved it) is an API gone down.
                        let answered = self.answered || s.api_answered(&server);
                        if (answered || !self.from_logs) && !other_up {
                            s.set_self(SelfMetric::ApiUp, &server, 0.0);
                        }
                        s.add_self(SelfMetric::ApiFailures, &server, 1.0);
                    }
                }
            }
            readiness.caught_up(&source);
            match result {
                Ok(r) if self.down => {
                    self.down = false;
                    tracing::info!(server = %server, endpoint = r.endpoint, "the SGLang API answers again");
                }
                Ok(_) => {}
                Err(e) => {
                    if !self.down && self.from_logs && !self.answered {
                        tracing::warn!(
                            server = %server,
                            url = %self.target.base,
                            "the SGLang API at the address the server's log names does not answer: {e}; \
                             polled again every --sglang.interval (sglang_up shows once it answered)"
                        );
                    } else if !self.down {
                        tracing::warn!(
                            server = %server,
                            url = %self.target.base,
                            "the SGLang API does not answer: {e}; sglang_up is 0 and the activity \
                             gauges it fed are withdrawn until it answers"
                        );
                    }
                    self.down = true;
                    // Ask again what the server is once it is back (it may be another release).
                    self.info_at = None;
                    self.endpoint = None;
                }
            }
            if !stop.wait(self.interval.saturating_sub(t0.elapsed())) {
                return;
            }
        }
    }

    /// One poll: the load endpoint within one `--sglang.timeout` (so a failing server reads
    /// down within one timeout, however its requests fail), then the server info when due,
    /// within a timeout of its own. Also the number of requests made.
    fn poll(&mut self) -> (Result<ApiReading, Failure>, u32) {
        let mut requests = 0;
        let r = self.poll_counted(&mut requests);
        (r, requests)
    }

    fn poll_counted(&mut self, requests: &mut u32) -> Result<ApiReading, Failure> {
        let deadline = Instant::now() + self.timeout;
        let order: &[Endpoint] = match self.endpoint {
            Some(Endpoint::GetLoad) => &[Endpoint::GetLoad, Endpoint::V1Loads],
            // A server that answered only its server info last time is asked for the loads
            // again: both 404 in passing (a restart, a proxy) or an upgrade must not leave it
            // read without loads for good.
            Some(Endpoint::V1Loads | Endpoint::InfoOnly(_)) | None => {
                &[Endpoint::V1Loads, Endpoint::GetLoad]
            }
        };
        let mut answer = None;
        for &ep in order {
            *requests += 1;
            if let Some(body) = self.get(ep.path(), deadline)? {
                answer = Some((ep, body));
                break;
            }
        }
        let Some((ep, body)) = answer else {
            // No load endpoint (v0.4.1–v0.4.6): the server info is what tells it answers.
            return match self.server_info(requests, deadline)? {
                Some((path, info)) => {
                    self.set_info(info);
                    self.endpoint = Some(Endpoint::InfoOnly(path));
                    Ok(ApiReading {
                        endpoint: Endpoint::InfoOnly(path).name(),
                        info: self.info.clone(),
                        loads: Vec::new(),
                    })
                }
                None => Err(Failure::NoEndpoint),
            };
        };
        if self.info_at.is_none_or(|t| t.elapsed() >= INFO_EVERY) {
            // The info only labels and sizes the loads: its failure, a timeout included, costs
            // the info, not them; it is asked again at its next turn.
            match self.server_info(requests, Instant::now() + self.timeout) {
                Ok(Some((_, i))) => self.set_info(i),
                Ok(None) => {}
                Err(e) => {
                    if !self.info_warned {
                        tracing::warn!(
                            server = %self.target.server,
                            "the SGLang API's server info cannot be read: {e}; the loads are read without it"
                        );
                    }
                    self.info_warned = true;
                }
            }
            self.info_at = Some(Instant::now());
        }
        let info = self.info.as_ref();
        let loads = match ep {
            Endpoint::V1Loads => shapes::v1_loads(&body, info, self.max_ranks),
            Endpoint::GetLoad | Endpoint::InfoOnly(_) => {
                shapes::get_load(&body, info, self.max_ranks)
            }
        }
        .map_err(|e| Failure::Body(ep.path(), e.0))?;
        self.endpoint = Some(ep);
        Ok(ApiReading {
            endpoint: ep.name(),
            info: self.info.clone(),
            loads,
        })
    }

    fn set_info(&mut self, info: ServerInfo) {
        self.info = Some(info);
        self.info_warned = false;
        self.info_at = Some(Instant::now());
    }

    /// `/server_info`, else `/get_server_info` (which of them answered); `None` where neither
    /// exists.
    fn server_info(
        &self,
        requests: &mut u32,
        deadline: Instant,
    ) -> Result<Option<(&'static str, ServerInfo)>, Failure> {
        for path in ["server_info", "get_server_info"] {
            *requests += 1;
            if let Some(body) = self.get(path, deadline)? {
                return shapes::server_info(&body)
                    .map(|i| Some((path, i)))
                    .map_err(|e| Failure::Body(path, e.0));
            }
        }
        Ok(None)
    }

    /// GETs `path` under the base URL before `deadline`: the body of a 200, `None` for a
    /// 404 (no such endpoint in this release); any other status (a redirect, 204, 401, 5xx) is
    /// a failure, as is a body above [`MAX_BODY`].
    fn get(&self, path: &'static str, deadline: Instant) -> Result<Option<Vec<u8>>, Failure> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::NoAnswer(
                path,
                format!("no answer within --sglang.timeout ({:?})", self.timeout),
            ));
        }
        let url = self
            .target
            .base
            .join(path)
            .map_err(|e| Failure::NoAnswer(path, e.to_string()))?;
        let mut req = self.agent.request_url("GET", &url).timeout(left);
        if let Some(k) = &self.api_key {
            req = req.set("Authorization", &format!("Bearer {k}"));
        }
        match req.call() {
            Ok(resp) if resp.status() == 200 => {
                let mut body = Vec::new();
                use std::io::Read;
                resp.into_reader()
                    .take(MAX_BODY + 1)
                    .read_to_end(&mut body)
                    .map_err(|e| Failure::NoAnswer(path, e.to_string()))?;
                if body.len() as u64 > MAX_BODY {
                    return Err(Failure::Body(
                        path,
                        format!("an answer larger than {} MiB", MAX_BODY >> 20),
                    ));
                }
                Ok(Some(body))
            }
            Ok(resp) => Err(Failure::Status(
                resp.status(),
                path,
                resp.header("location")
                    .map(|l| l.chars().take(200).collect()),
            )),
            Err(ureq::Error::Status(404, _)) => Ok(None),
            Err(ureq::Error::Status(s, _)) => Err(Failure::Status(s, path, None)),
            Err(ureq::Error::Transport(t)) => Err(Failure::NoAnswer(path, transport(&t))),
        }
    }
}

/// A load answer is about 1 KB a DP rank; 4 MiB holds thousands and bounds a hostile one
/// (parsed, it costs little more: see [`shapes`]).
pub const MAX_BODY: u64 = 4 << 20;

/// A transport error's words without the request's headers (which hold the API key).
fn transport(t: &ureq::Transport) -> String {
    match t.message() {
        Some(m) if !m.contains("Bearer") => format!("{}: {m}", t.kind()),
        _ => t.kind().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_is_named_by_its_name_or_its_host_and_port() {
        let t = ApiTarget::parse("decode=http://10.0.0.5:30000").unwrap();
        assert_eq!(t.server, "decode");
        assert_eq!(t.base.as_str(), "http://10.0.0.5:30000/");
        let t = ApiTarget::parse("http://gpu-1:30000/sglang").unwrap();
        assert_eq!(t.server, "gpu-1:30000");
        assert_eq!(
            t.base.join("v1/loads").unwrap().as_str(),
            "http://gpu-1:30000/sglang/v1/loads"
        );
        let t = ApiTarget::parse("http://[::1]:8000").unwrap();
        assert_eq!(t.server, "[::1]:8000");
        assert_eq!(ApiTarget::parse("https://h").unwrap().server, "h:443");
        for bad in [
            "decode=",
            "x=ftp://h",
            "localhost:30000",
            "=http://h:1",
            "http://",
            "http://admin:s3cret@h:1",
            "http://h:1/v1/loads",
            "http://h:1/get_load/",
            "http://h:1/?x=1",
        ] {
            assert!(ApiTarget::parse(bad).is_err(), "{bad}");
        }
    }
}
