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

/// Which values a family can take (the router's own: a count, 0/1, the breaker's 0/1/2).
type Valid = fn(f64) -> bool;

/// The router's families read, each with where its value goes and the values it can have: any
/// other (negative, fractional, a state the breaker has not) is left out, never shown.
const READ: [(&str, Slot, Valid); 3] = [
    (
        "smg_worker_requests_active",
        |w| &mut w.requests_active,
        |v| v >= 0.0 && v.fract() == 0.0 && v <= 1e9,
    ),
    (
        "smg_worker_health",
        |w| &mut w.healthy,
        |v| v == 0.0 || v == 1.0,
    ),
    (
        "smg_worker_cb_state",
        |w| &mut w.circuit,
        |v| v == 0.0 || v == 1.0 || v == 2.0,
    ),
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
        let Some((_, slot, valid)) = READ.iter().find(|(n, _, _)| *n == f.name) else {
            continue;
        };
        for (labels, v) in &f.samples {
            let Some((_, worker)) = labels.iter().find(|(k, _)| *k == "worker") else {
                continue;
            };
            if worker.is_empty() {
                continue;
            }
            let i = *index.entry(worker.clone()).or_insert_with(|| {
                workers.push(RouterWorker {
                    worker: worker.clone(),
                    ..RouterWorker::default()
                });
                workers.len() - 1
            });
            if v.is_finite() && valid(*v) {
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

    /// Trial fault: values a router cannot have (a health of 2, a breaker state of 7 or 0.5, a
    /// negative or fractional count, 1e308) and an empty worker are left out, never shown.
    #[test]
    fn values_out_of_their_range_are_left_out() {
        let text = "smg_worker_health{worker=\"http://a:1\"} 2\n\
            smg_worker_health{worker=\"http://b:1\"} 1\n\
            smg_worker_cb_state{worker=\"http://a:1\"} 7\n\
            smg_worker_cb_state{worker=\"http://b:1\"} 0.5\n\
            smg_worker_requests_active{worker=\"http://a:1\"} -5\n\
            smg_worker_requests_active{worker=\"http://b:1\"} 1e308\n\
            smg_worker_requests_active{worker=\"\"} 3\n\
            smg_worker_requests_active{worker=\"http://c:1\"} 4\n";
        let r = reading(&crate::prom_text::parse(text, &Vec::new()).families);
        let got: Vec<_> = r
            .workers
            .iter()
            .map(|w| (w.worker.as_str(), w.requests_active, w.healthy, w.circuit))
            .collect();
        assert_eq!(
            got,
            [
                ("http://a:1", None, None, None),
                ("http://b:1", None, Some(1.0), None),
                ("http://c:1", Some(4.0), None, None),
            ]
        );
    }

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
