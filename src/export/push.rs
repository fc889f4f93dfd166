//! Pushes the exposition to a Prometheus Pushgateway on an interval (`--push.url`).
//!
//! The group is `/metrics/job/<job>/instance/<host>[/<label>/<value>…]`; each push is a PUT of
//! the whole text exposition (no timestamps: the Pushgateway refuses them), so the group always
//! holds exactly the current state. The pusher runs on its own thread with a blocking client and
//! timeouts: a slow or dead Pushgateway never delays parsing or scraping. On a clean shutdown the
//! group is deleted (the Pushgateway never forgets a group) unless `--push.keep-on-exit`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use base64::Engine as _;

use crate::cli::PushArgs;
use crate::export::metrics::TEXT_CONTENT_TYPE;
use crate::state::{SelfMetric, Shared};
use crate::stop::Stop;

/// Attempts per push: the first plus retries after 0.5 s and 1 s (transport errors and 5xx only).
const ATTEMPTS: u32 = 3;
/// Most time the DELETE at shutdown may take (less when `--push.timeout` is shorter): a dead
/// Pushgateway must not hold up the exit.
const DELETE_TIMEOUT: Duration = Duration::from_secs(1);

/// Produces the exposition text to push.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// A validated push configuration.
#[derive(Clone)]
pub struct PushConfig {
    /// The group's full URL.
    pub group_url: String,
    /// `Authorization` header value, when basic auth is configured.
    pub auth: Option<String>,
    /// Time between pushes.
    pub interval: Duration,
    /// Timeout of one request (connect, send and answer).
    pub timeout: Duration,
    /// Leave the group on the Pushgateway at shutdown.
    pub keep_on_exit: bool,
    /// TLS client settings when `--push.ca-file` is given (else the built-in web roots).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl std::fmt::Debug for PushConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the credentials.
        f.debug_struct("PushConfig")
            .field("group_url", &self.group_url)
            .field("auth", &self.auth.as_ref().map(|_| "<set>"))
            .field("interval", &self.interval)
            .field("timeout", &self.timeout)
            .field("keep_on_exit", &self.keep_on_exit)
            .field("custom_ca", &self.tls.is_some())
            .finish()
    }
}

impl PushConfig {
    /// Validates the `--push.*` options; `Ok(None)` without `--push.url`.
    ///
    /// # Errors
    /// A message naming the bad URL, label or password file.
    pub fn from_args(a: &PushArgs) -> Result<Option<PushConfig>, String> {
        let Some(raw) = a.url.as_deref() else {
            return Ok(None);
        };
        let mut url = url::Url::parse(raw).map_err(|e| format!("--push.url {raw:?}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
            return Err(format!(
                "--push.url {raw:?} must be an http:// or https:// URL"
            ));
        }
        // user:password in the URL is basic auth; keep it out of the request line and logs.
        let (mut user, mut pass) = match crate::auth::take_userinfo(&mut url) {
            Some((u, p)) => (Some(u), p),
            None => (None, None),
        };
        if let Some(u) = &a.basic_auth_user {
            user = Some(u.clone());
        }
        if let Some(f) = &a.basic_auth_password_file {
            pass = Some(crate::auth::password_file(
                "--push.basic-auth-password-file",
                f,
            )?);
        }
        if pass.is_some() && user.is_none() {
            return Err("a push password needs --push.basic-auth-user".into());
        }
        let auth = user.map(|u| crate::auth::basic(&u, pass.as_deref()));
        if a.job.is_empty() {
            return Err("--push.job must not be empty".into());
        }
        let instance = a.instance.clone().unwrap_or_else(hostname);
        let mut labels = vec![("instance".to_string(), instance)];
        for l in &a.labels {
            let (k, v) = l
                .split_once('=')
                .ok_or_else(|| format!("--push.label {l:?} is not NAME=VALUE"))?;
            if !valid_label_name(k) || k == "job" || k == "instance" {
                return Err(format!(
                    "--push.label {l:?}: {k:?} is not a usable label name (job and instance are set already)"
                ));
            }
            if crate::family::is_exported_label(k) {
                return Err(format!(
                    "--push.label {l:?}: {k:?} is a label of the exported metrics; the Pushgateway refuses a grouping label that a metric also has"
                ));
            }
            labels.push((k.to_string(), v.to_string()));
        }
        let base = url.as_str().trim_end_matches('/');
        Ok(Some(PushConfig {
            group_url: format!("{base}{}", group_path(&a.job, &labels)),
            auth,
            interval: a.interval.max(Duration::from_millis(100)),
            timeout: a.timeout.max(Duration::from_millis(100)),
            keep_on_exit: a.keep_on_exit,
            tls: match &a.ca_file {
                Some(p) => Some(Arc::new(crate::ca::client_tls(p, "--push.ca-file")?)),
                None => None,
            },
        }))
    }
}

/// This host's name (`localhost` when it cannot be read).
pub fn hostname() -> String {
    let h = gethostname::gethostname().to_string_lossy().into_owned();
    if h.is_empty() {
        "localhost".into()
    } else {
        h
    }
}

fn valid_label_name(k: &str) -> bool {
    let mut b = k.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The Pushgateway path of a group: `/metrics/job/<job>{/<name>/<value>}`. A value that is
/// empty or has anything but URL-unreserved characters (e.g. `/`) is written as
/// `<name>@base64/<base64url>`, as the Pushgateway documents.
pub fn group_path(job: &str, labels: &[(String, String)]) -> String {
    let mut p = String::from("/metrics");
    for (k, v) in std::iter::once(&("job".to_string(), job.to_string())).chain(labels) {
        let plain = !v.is_empty()
            && v.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.' | b'~'));
        if plain {
            p.push_str(&format!("/{k}/{v}"));
        } else if v.is_empty() {
            p.push_str(&format!("/{k}@base64/="));
        } else {
            let enc = base64::engine::general_purpose::URL_SAFE.encode(v);
            p.push_str(&format!("/{k}@base64/{enc}"));
        }
    }
    p
}

/// Sends pushes and deletes of one group and records their outcome in the state.
///
/// Failures are logged like journalctl restarts: the first failed attempt of a streak is a
/// warning (with the reason), later ones are debug lines, and the first success after a streak
/// is an info line; the counters count every attempt.
pub struct Pusher {
    cfg: PushConfig,
    agent: ureq::Agent,
    state: Shared,
    /// Failed attempts since the last success (0: not failing).
    streak: AtomicU64,
}

impl Pusher {
    /// A pusher; sets the self metrics to their initial values.
    pub fn new(cfg: PushConfig, state: Shared) -> Pusher {
        let mut agent = ureq::AgentBuilder::new()
            .timeout(cfg.timeout)
            .user_agent(concat!("sglang-log-exporter/", env!("CARGO_PKG_VERSION")));
        if let Some(tls) = &cfg.tls {
            agent = agent.tls_config(tls.clone());
        }
        let agent = agent.build();
        {
            let mut s = crate::state::lock(&state);
            s.add_self(SelfMetric::PushFailures, "", 0.0);
            s.add_self(SelfMetric::Pushes, "", 0.0);
        }
        Pusher {
            cfg,
            agent,
            state,
            streak: AtomicU64::new(0),
        }
    }

    fn request(
        &self,
        method: &str,
        body: Option<&str>,
        timeout: Duration,
    ) -> Result<u16, (u16, String)> {
        let mut req = self
            .agent
            .request(method, &self.cfg.group_url)
            .timeout(timeout);
        if let Some(a) = &self.cfg.auth {
            req = req.set("Authorization", a);
        }
        let res = match body {
            Some(b) => req.set("Content-Type", TEXT_CONTENT_TYPE).send_string(b),
            None => req.call(),
        };
        match res {
            Ok(r) => Ok(r.status()),
            Err(ureq::Error::Status(code, r)) => {
                let text = r.into_string().unwrap_or_default();
                Err((code, text.trim().chars().take(300).collect()))
            }
            Err(ureq::Error::Transport(t)) => Err((0, t.to_string())),
        }
    }

    fn record(&self, result: &Result<u16, (u16, String)>) {
        let mut s = crate::state::lock(&self.state);
        match result {
            Ok(code) => {
                s.set_self(SelfMetric::PushLastStatus, "", f64::from(*code));
                let now = s.clock().now().wall;
                s.set_self(SelfMetric::PushLastSuccess, "", now);
                s.add_self(SelfMetric::Pushes, "", 1.0);
            }
            Err((code, _)) => {
                s.set_self(SelfMetric::PushLastStatus, "", f64::from(*code));
                s.add_self(SelfMetric::PushFailures, "", 1.0);
            }
        }
    }

    /// PUTs `body`, retrying transport errors and 5xx answers with backoff; `wait` sleeps between
    /// attempts and returns `false` to give up early (shutdown). Returns whether it succeeded.
    pub fn push(&self, body: &str, mut wait: impl FnMut(Duration) -> bool) -> bool {
        let mut backoff = Duration::from_millis(500);
        for attempt in 1..=ATTEMPTS {
            let r = self.request("PUT", Some(body), self.cfg.timeout);
            self.record(&r);
            match r {
                Ok(_) => {
                    let failed = self.streak.swap(0, Ordering::Relaxed);
                    if failed > 0 {
                        tracing::info!(url = %self.cfg.group_url, "pushing works again after {failed} failed attempts");
                    }
                    return true;
                }
                Err((code, msg)) => {
                    let retry = code == 0 || code >= 500 || code == 429;
                    if self.streak.fetch_add(1, Ordering::Relaxed) == 0 {
                        tracing::warn!(url = %self.cfg.group_url, status = code, "push failed: {msg} (further failures are logged at debug level until a push succeeds)");
                    } else {
                        tracing::debug!(url = %self.cfg.group_url, status = code, attempt, "push failed: {msg}");
                    }
                    if !retry || attempt == ATTEMPTS || !wait(backoff) {
                        return false;
                    }
                    backoff *= 2;
                }
            }
        }
        false
    }

    /// Deletes the group (one attempt, at most [`DELETE_TIMEOUT`]). Returns whether it succeeded.
    pub fn delete(&self) -> bool {
        match self.request("DELETE", None, self.cfg.timeout.min(DELETE_TIMEOUT)) {
            Ok(_) => {
                tracing::info!(url = %self.cfg.group_url, "deleted the pushed group");
                true
            }
            Err((code, msg)) => {
                tracing::warn!(url = %self.cfg.group_url, status = code, "deleting the pushed group failed: {msg}");
                false
            }
        }
    }
}

/// A stop request that stays set: every wait after [`Stop::set`] returns at once (a message on
/// a channel would be consumed by the first wait, e.g. a retry's, and missed by the next).
#[derive(Default)]
/// A running push loop; [`PushHandle::stop`] ends it (dropping the handle asks it to end too).
pub struct PushHandle {
    stop: Arc<Stop>,
    thread: Option<JoinHandle<()>>,
}

impl PushHandle {
    /// Stops the loop and waits for it: a push in flight ends within `--push.timeout`, no retry
    /// follows, and the group is deleted (at most [`DELETE_TIMEOUT`]) unless
    /// `--push.keep-on-exit`.
    pub fn stop(mut self) {
        self.stop.set();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for PushHandle {
    fn drop(&mut self) {
        self.stop.set();
    }
}

/// Starts the push loop on its own thread: push now, then every interval.
///
/// # Errors
/// The thread could not be started.
pub fn spawn(cfg: PushConfig, state: Shared, render: Render) -> std::io::Result<PushHandle> {
    let stop = Arc::new(Stop::new());
    let flag = stop.clone();
    tracing::info!(url = %cfg.group_url, interval = ?cfg.interval, "pushing to the Pushgateway");
    let thread = std::thread::Builder::new()
        .name("push".into())
        .spawn(move || {
            let keep = cfg.keep_on_exit;
            let interval = cfg.interval;
            let pusher = Pusher::new(cfg, state);
            let wait = |d: Duration| flag.wait(d);
            loop {
                let body = render();
                pusher.push(&body, wait);
                if !wait(interval) {
                    break;
                }
            }
            if !keep {
                pusher.delete();
            }
        })?;
    Ok(PushHandle {
        stop,
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_decoded_as_userinfo_not_as_a_form() {
        assert_eq!(crate::auth::decode_pct("a+b%2Bc%40d%3A"), "a+b+c@d:");
        assert_eq!(crate::auth::decode_pct("p%20w"), "p w");
    }
    use clap::Parser as _;

    fn cfg(args: &[&str]) -> Result<Option<PushConfig>, String> {
        let cli = crate::cli::Cli::try_parse_from(
            std::iter::once("sglang-log-exporter").chain(args.iter().copied()),
        )
        .expect("parse");
        PushConfig::from_args(&cli.run.push)
    }

    #[test]
    fn a_stop_is_seen_by_every_later_wait() {
        let stop = Stop::default();
        assert!(
            stop.wait(Duration::from_millis(1)),
            "no stop: the time passes"
        );
        stop.set();
        // The retry wait and the interval wait after it both see the one stop request.
        assert!(!stop.wait(Duration::from_secs(3600)));
        assert!(!stop.wait(Duration::from_secs(3600)));
    }

    #[test]
    fn group_paths_encode_awkward_values() {
        let l = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            group_path("sglang", &[l("instance", "gpu-1.example"), l("rack", "")]),
            "/metrics/job/sglang/instance/gpu-1.example/rack@base64/="
        );
        assert_eq!(
            group_path("a/b", &[l("instance", "h"), l("path", "/var/tmp")]),
            "/metrics/job@base64/YS9i/instance/h/path@base64/L3Zhci90bXA="
        );
    }

    #[test]
    fn url_credentials_become_basic_auth() {
        let c = cfg(&[
            "--push.url",
            "https://us%40r:p%3Ass@gw:9091/base/",
            "--push.instance",
            "h1",
            "--push.label",
            "cluster=eu",
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            c.group_url,
            "https://gw:9091/base/metrics/job/sglang/instance/h1/cluster/eu"
        );
        let token = base64::engine::general_purpose::STANDARD.encode("us@r:p:ss");
        assert_eq!(c.auth, Some(format!("Basic {token}")));
        assert!(
            !format!("{c:?}").contains(&token),
            "credentials never printed"
        );
        assert!(cfg(&[]).unwrap().is_none());
        assert!(cfg(&["--push.url", "http://gw", "--push.label", "server=x"]).is_err());
        assert!(cfg(&["--push.url", "http://gw", "--push.label", "dp_rank=0"]).is_err());
    }
}
