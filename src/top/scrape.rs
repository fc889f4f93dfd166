//! `top --url`: scrapes running exporters' `/metrics` and reads the text back into families.
//! HTTPS and basic auth as the Pushgateway client does them (`src/export/push.rs`): rustls
//! with the built-in web roots or `--url.ca-file`, `user:password@` in the URL or
//! `--url.basic-auth-user` with `--url.basic-auth-password-file`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::prom_text;
use crate::ca::client_tls;
use crate::family::Family;
use crate::readout::INSTANCE;
use crate::stop::Stop;

/// One exporter to scrape.
#[derive(Clone)]
pub struct Target {
    /// The URL without credentials (`/metrics` added when it had no path).
    pub url: String,
    /// `host:port`: the `instance` label of its series.
    pub instance: String,
    auth: Option<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the credentials.
        f.debug_struct("Target")
            .field("url", &self.url)
            .field("auth", &self.auth.as_ref().map(|_| "<set>"))
            .finish()
    }
}

/// Client settings shared by every target.
#[derive(Debug, Clone, Default)]
pub struct ClientArgs {
    /// Basic-auth user for every URL without one of its own.
    pub user: Option<String>,
    /// File holding the basic-auth password (trailing newline ignored).
    pub password_file: Option<std::path::PathBuf>,
    /// PEM CA certificates to trust instead of the built-in web roots.
    pub ca_file: Option<std::path::PathBuf>,
    /// Timeout of one scrape.
    pub timeout: Duration,
}

/// A scraper of several targets with one HTTP agent.
pub struct Scraper {
    agent: ureq::Agent,
    /// The targets, in command-line order.
    pub targets: Vec<Target>,
}

impl Scraper {
    /// Validates the URLs and client settings.
    ///
    /// # Errors
    /// A message naming the bad URL, password file or CA file.
    pub fn new(urls: &[String], a: &ClientArgs) -> Result<Scraper, String> {
        let password = match &a.password_file {
            Some(f) => Some(crate::auth::password_file(
                "--url.basic-auth-password-file",
                f,
            )?),
            None => None,
        };
        if password.is_some() && a.user.is_none() {
            return Err("--url.basic-auth-password-file needs --url.basic-auth-user".into());
        }
        let targets = urls
            .iter()
            .map(|u| target(u, a.user.as_deref(), password.as_deref()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut agent = ureq::AgentBuilder::new()
            .timeout(a.timeout.max(Duration::from_millis(100)))
            .user_agent(concat!(
                "sglang-log-exporter-top/",
                env!("CARGO_PKG_VERSION")
            ));
        if let Some(p) = &a.ca_file {
            agent = agent.tls_config(Arc::new(client_tls(p, "--url.ca-file")?));
        }
        Ok(Scraper {
            agent: agent.build(),
            targets,
        })
    }

    /// Scrapes target `i` once: its families, each sample labelled with its `instance`.
    ///
    /// # Errors
    /// A message naming the URL and what went wrong (no answer, an error status, a body that
    /// is not the text format).
    pub fn scrape(&self, i: usize) -> Result<Vec<Family>, String> {
        let t = &self.targets[i];
        let mut req = self
            .agent
            .get(&t.url)
            .set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1");
        if let Some(a) = &t.auth {
            req = req.set("Authorization", a);
        }
        let body = match req.call() {
            Ok(r) => r.into_string().map_err(|e| format!("{}: {e}", t.url))?,
            Err(ureq::Error::Status(code, _)) => return Err(format!("{}: HTTP {code}", t.url)),
            // ureq names the URL in its own message (once is enough).
            Err(ureq::Error::Transport(e)) => {
                let e = e.to_string();
                return Err(if e.starts_with(&t.url) {
                    e
                } else {
                    format!("{}: {e}", t.url)
                });
            }
        };
        let mut parsed = prom_text::parse(&body, &vec![(INSTANCE, t.instance.clone())]);
        if parsed.families.is_empty() && parsed.bad_lines > 0 {
            return Err(format!("{}: not the Prometheus text format", t.url));
        }
        for f in &mut parsed.families {
            if let Some(colon) = with_colon(&f.name) {
                f.name = colon.to_string();
            }
        }
        Ok(parsed.families)
    }
}

/// The name with its colon of a family an exporter under `--web.names underscores` writes
/// with an underscore (`sglang_token_usage` for `sglang:token_usage`), so `top` reads it as the
/// same family: no two families of ours meet once colons are underscores (the registry's
/// tests), so the name is the one it stands for.
fn with_colon(name: &str) -> Option<&'static str> {
    static COLON_NAMES: std::sync::OnceLock<std::collections::HashMap<String, String>> =
        std::sync::OnceLock::new();
    let names = COLON_NAMES.get_or_init(|| {
        let pat = crate::parse::patterns::Patterns::embedded().ok();
        let pattern_names = pat
            .iter()
            .flat_map(|p| p.metrics.iter())
            .map(|m| m.name.clone());
        let registry_names = crate::catalog::registry().map(|d| d.name.to_string());
        pattern_names
            .chain(registry_names)
            .filter(|n| n.contains(':'))
            .map(|n| (crate::catalog::underscored(&n), n))
            .collect()
    });
    if name.contains(':') {
        return None;
    }
    names.get(name).map(String::as_str)
}

fn target(raw: &str, user: Option<&str>, password: Option<&str>) -> Result<Target, String> {
    let mut url = url::Url::parse(raw).map_err(|e| format!("--url {raw:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
        return Err(format!("--url {raw:?} must be an http:// or https:// URL"));
    }
    if url.path() == "/" || url.path().is_empty() {
        url.set_path("/metrics");
    }
    let auth = match crate::auth::take_userinfo(&mut url) {
        Some((u, p)) => Some(crate::auth::basic(&u, p.as_deref())),
        None => user.map(|u| crate::auth::basic(u, password)),
    };
    let host = url.host_str().unwrap_or_default();
    let instance = match url.port_or_known_default() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    Ok(Target {
        url: url.to_string(),
        instance,
        auth,
    })
}

/// The latest scrape of one target.
#[derive(Debug, Default)]
struct Latest {
    families: Vec<Family>,
    error: Option<String>,
}

/// Background scraping for the terminal view: one thread per target, each scraping every
/// interval, so a slow exporter never holds up the screen or the others.
pub struct Background {
    latest: Vec<Arc<Mutex<Latest>>>,
    stop: Arc<Stop>,
}

impl Background {
    /// Starts a thread per target of `scraper`.
    ///
    /// # Errors
    /// A thread could not be started.
    pub fn start(scraper: Scraper, interval: Duration) -> std::io::Result<Background> {
        let scraper = Arc::new(scraper);
        let stop = Arc::new(Stop::new());
        let mut latest = Vec::new();
        for i in 0..scraper.targets.len() {
            let slot = Arc::new(Mutex::new(Latest::default()));
            latest.push(slot.clone());
            let (scraper, stop) = (scraper.clone(), stop.clone());
            std::thread::Builder::new()
                .name(format!("scrape {}", scraper.targets[i].instance))
                .spawn(move || {
                    while !stop.is_set() {
                        let next = Instant::now() + interval;
                        let r = scraper.scrape(i);
                        let mut l = slot.lock().unwrap_or_else(|p| p.into_inner());
                        match r {
                            Ok(f) => {
                                *l = Latest {
                                    families: f,
                                    error: None,
                                }
                            }
                            // Keep the last families: the error line says they are old.
                            Err(e) => l.error = Some(e),
                        }
                        drop(l);
                        stop.wait(next.saturating_duration_since(Instant::now()));
                    }
                })?;
        }
        Ok(Background { latest, stop })
    }

    /// Every target's latest families, and their errors.
    pub fn take(&self) -> (Vec<Family>, Vec<String>) {
        let mut fams = Vec::new();
        let mut errors = Vec::new();
        for slot in &self.latest {
            let l = slot.lock().unwrap_or_else(|p| p.into_inner());
            fams.extend(l.families.iter().cloned());
            errors.extend(l.error.clone());
        }
        (fams, errors)
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.set();
    }
}

#[cfg(test)]
mod tests {

    /// `top --url` against `--web.names underscores`: the underscored names read as the
    /// families they stand for (trial of this stop: every figure read `-`).
    #[test]
    fn underscored_names_read_as_the_families_they_stand_for() {
        assert_eq!(with_colon("sglang_token_usage"), Some("sglang:token_usage"));
        assert_eq!(
            with_colon("sglang_num_running_reqs"),
            Some("sglang:num_running_reqs")
        );
        assert_eq!(with_colon("sglang:token_usage"), None);
        assert_eq!(with_colon("sglang_idle"), None);
        assert_eq!(with_colon("sglang_swa_pool_used_tokens"), None);
    }

    use super::*;

    #[test]
    fn urls_credentials_and_instances() {
        let t = target("https://us%40r:p%3Ass@gw.example:9443", None, None).unwrap();
        assert_eq!(t.url, "https://gw.example:9443/metrics");
        assert_eq!(t.instance, "gw.example:9443");
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode("us@r:p:ss");
        assert_eq!(t.auth, Some(format!("Basic {token}")));
        assert!(!format!("{t:?}").contains(&token));
        let t = target("http://h/custom", Some("u"), Some("pw")).unwrap();
        assert_eq!(
            (t.url.as_str(), t.instance.as_str()),
            ("http://h/custom", "h:80")
        );
        assert!(t.auth.is_some());
        assert!(target("ftp://h", None, None).is_err());
        assert!(target("not a url", None, None).is_err());
    }
}
