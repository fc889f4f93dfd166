//! SGLang's router as a source beside its servers (`--router.url [NAME=]URL`).
//!
//! One thread per router reads, every `--router.interval` and off the scrape path, the router's
//! own Prometheus exposition (its `--prometheus-port` listener, `/metrics`) and keeps, per
//! worker, what the router prints of it ([`crate::state::router`]): in-flight requests
//! (`smg_worker_requests_active`), health (`smg_worker_health`) and circuit-breaker state
//! (`smg_worker_cb_state`), each labelled `worker` with the worker's URL. These names and labels
//! are those of sgl-model-gateway's `model_gateway/src/observability/metrics.rs`, as `smg` 1.x
//! and `sglang-router` 0.3.x print them (the router's TTFT, TPOT and error series are labelled by
//! model and endpoint, not by worker, so they are not joined here). The exposition is read by
//! [`crate::prom_text`], at most [`MAX_BODY`] of it.
//!
//! A refused connection, a timeout, an error status or a body that cannot be read turns the
//! router's `sglang_router_up` to 0, counts in `sglang_log_exporter_router_failures_total`, is
//! logged once per outage, and withdraws its workers' series until it answers again.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::family::Family;
use crate::state::router::{RouterReading, RouterWorker};
use crate::state::{lock, SelfMetric, Shared};
use crate::stop::Stop;

pub use super::api::MAX_BODY;

/// Where a worker's value goes.
type Slot = fn(&mut RouterWorker) -> &mut Option<f64>;

/// The router's families read, each with where its value goes.
const READ: [(&str, Slot); 3] = [
    ("smg_worker_requests_active", |w| &mut w.requests_active),
    ("smg_worker_health", |w| &mut w.healthy),
    ("smg_worker_cb_state", |w| &mut w.circuit),
];

/// The router source's settings, validated.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// The routers to poll.
    pub targets: Vec<RouterTarget>,
    /// Time between two polls of a router.
    pub interval: Duration,
    /// Timeout of one poll (connect and read).
    pub timeout: Duration,
}

/// One router to poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouterTarget {
    /// The `router` label: `NAME` of `NAME=URL`, else the URL's `host:port`.
    pub name: String,
    /// The URL of its exposition (`/metrics` where the URL names no path).
    pub url: url::Url,
}

impl RouterTarget {
    /// Reads `[NAME=]URL`: the router's Prometheus listener (`http://HOST:29000`), its path
    /// `/metrics` unless the URL names another.
    ///
    /// # Errors
    /// A message naming the argument when the URL is not `http://` or `https://` with a host.
    pub fn parse(arg: &str) -> Result<RouterTarget, String> {
        let bad = |why: &str| {
            format!(
                "--router.url {arg:?}: {why} (expected [NAME=]http://HOST:PORT, the router's \
                 --prometheus-port listener)"
            )
        };
        let (name, mut url) = super::api::named_url(arg, &bad)?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(bad("credentials in the URL would be logged"));
        }
        if url.path() == "/" {
            url.set_path("/metrics");
        }
        let name = super::api::target_name(name, &url, &bad)?;
        Ok(RouterTarget { name, url })
    }
}

/// The name of a router's poller among the sources (readiness).
pub fn source_of(router: &str) -> String {
    format!("router {router}")
}

/// Starts one poller thread per router, until `stop`.
///
/// # Errors
/// When a thread cannot be started.
pub fn spawn(cfg: RouterConfig, state: Shared, stop: Arc<Stop>) -> std::io::Result<()> {
    let readiness = lock(&state).readiness().clone();
    for t in &cfg.targets {
        readiness.expect(&source_of(&t.name));
    }
    let agent = ureq::AgentBuilder::new()
        .timeout(cfg.timeout)
        .redirects(0)
        .build();
    for t in cfg.targets.clone() {
        let (state, stop, agent, interval) =
            (state.clone(), stop.clone(), agent.clone(), cfg.interval);
        std::thread::Builder::new()
            .name(format!("router {}", t.name))
            .spawn(move || run(&t, &agent, interval, &state, &stop))?;
    }
    Ok(())
}

fn run(t: &RouterTarget, agent: &ureq::Agent, interval: Duration, state: &Shared, stop: &Stop) {
    tracing::info!(router = %t.name, url = %t.url, "polling the router's /metrics");
    let readiness = lock(state).readiness().clone();
    let mut down = false;
    loop {
        let t0 = Instant::now();
        let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| poll(t, agent)))
            .unwrap_or_else(|_| {
                Err("a bug of the exporter (a panic) while reading the answer".into())
            });
        {
            let mut s = lock(state);
            match &polled {
                Ok(r) => {
                    s.apply_router(&t.name, r.clone());
                    s.set_self(SelfMetric::RouterUp, &t.name, 1.0);
                }
                Err(_) => {
                    s.router_failed(&t.name);
                    s.set_self(SelfMetric::RouterUp, &t.name, 0.0);
                    s.add_self(SelfMetric::RouterFailures, &t.name, 1.0);
                }
            }
        }
        readiness.caught_up(&source_of(&t.name));
        match polled {
            Ok(_) if down => {
                down = false;
                tracing::info!(router = %t.name, "the router's /metrics answers again");
            }
            Ok(_) => {}
            Err(e) => {
                if !down {
                    tracing::warn!(
                        router = %t.name,
                        url = %t.url,
                        "the router's /metrics cannot be read: {e}; sglang_router_up is 0 and \
                         its worker series are withdrawn until it answers"
                    );
                }
                down = true;
            }
        }
        if !stop.wait(interval.saturating_sub(t0.elapsed())) {
            return;
        }
    }
}

/// One poll: the exposition, read into the workers.
fn poll(t: &RouterTarget, agent: &ureq::Agent) -> Result<RouterReading, String> {
    let resp = match agent.request_url("GET", &t.url).call() {
        Ok(r) if r.status() == 200 => r,
        Ok(r) => return Err(format!("it answered HTTP {}", r.status())),
        Err(ureq::Error::Status(s, _)) => return Err(format!("it answered HTTP {s}")),
        Err(ureq::Error::Transport(e)) => return Err(format!("no answer ({})", e.kind())),
    };
    let mut body = Vec::new();
    use std::io::Read;
    resp.into_reader()
        .take(MAX_BODY + 1)
        .read_to_end(&mut body)
        .map_err(|e| format!("no whole answer ({e})"))?;
    if body.len() as u64 > MAX_BODY {
        return Err(format!("an answer larger than {} MiB", MAX_BODY >> 20));
    }
    let text = String::from_utf8(body).map_err(|_| "an answer that is not UTF-8".to_string())?;
    let parsed = crate::prom_text::parse(&text, &Vec::new());
    if parsed.families.is_empty() {
        return Err("an answer without any metric (not a Prometheus exposition)".into());
    }
    Ok(reading(&parsed.families))
}

/// The workers of a router's families, in the order the router first names them.
pub fn reading(families: &[Family]) -> RouterReading {
    let mut workers: Vec<RouterWorker> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for f in families {
        let Some((_, slot)) = READ.iter().find(|(n, _)| *n == f.name) else {
            continue;
        };
        for (labels, v) in &f.samples {
            let Some((_, worker)) = labels.iter().find(|(k, _)| *k == "worker") else {
                continue;
            };
            let i = *index.entry(worker.clone()).or_insert_with(|| {
                workers.push(RouterWorker {
                    worker: worker.clone(),
                    ..RouterWorker::default()
                });
                workers.len() - 1
            });
            if v.is_finite() {
                *slot(&mut workers[i]) = Some(*v);
            }
        }
        if workers.len() > crate::state::router::MAX_WORKERS {
            break;
        }
    }
    RouterReading { workers }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_router_is_named_by_its_name_or_its_host_and_port() {
        let t = RouterTarget::parse("gw=http://10.0.0.5:29000").unwrap();
        assert_eq!(
            (t.name.as_str(), t.url.as_str()),
            ("gw", "http://10.0.0.5:29000/metrics")
        );
        let t = RouterTarget::parse("http://h:29000/custom").unwrap();
        assert_eq!(
            (t.name.as_str(), t.url.as_str()),
            ("h:29000", "http://h:29000/custom")
        );
        for bad in ["=http://h:1", "h:29000", "ftp://h", "http://u:p@h:1"] {
            assert!(RouterTarget::parse(bad).is_err(), "{bad}");
        }
    }
}
