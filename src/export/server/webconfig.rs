//! `--web.config.file`: the exporter-toolkit web configuration (the YAML format Prometheus and
//! node_exporter read): `tls_server_config` (certificate and key files, client CA and client
//! authentication, minimum TLS version) and `basic_auth_users` (user → bcrypt hash).
//!
//! The file and the files it names are checked for changes on every new connection and re-read
//! when one changed, so certificates can rotate without a restart; a reload that fails keeps the
//! previous configuration (and says so). Whether the listener speaks TLS is fixed at start-up: a
//! reload that would switch TLS on or off is refused the same way. Relative paths are relative
//! to the config file.

use std::collections::{BTreeMap, HashSet};
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::optfile;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;

/// Threads checking passwords at once: a flood of wrong ones costs at most these cores, and a
/// scraper's known password is remembered after its first check ([`AUTH_CACHE`]).
const BCRYPT_THREADS: usize = 2;
/// Most remembered successful logins (bcrypt is slow on purpose; a scrape every few seconds
/// should not pay it each time).
const AUTH_CACHE: usize = 256;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFormat {
    tls_server_config: Option<TlsFormat>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    /// Accepted for compatibility; HTTP/2 and headers are not configurable here.
    #[allow(dead_code)]
    http_server_config: Option<serde_norway::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsFormat {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    client_ca_file: Option<PathBuf>,
    client_auth_type: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
    /// Accepted for compatibility; rustls picks its own safe suites and curves.
    #[allow(dead_code)]
    cipher_suites: Option<serde_norway::Value>,
    #[allow(dead_code)]
    curve_preferences: Option<serde_norway::Value>,
    #[allow(dead_code)]
    prefer_server_cipher_suites: Option<bool>,
}

/// A loaded web configuration.
pub struct WebConfig {
    /// TLS settings; `None` serves plain HTTP.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// User → bcrypt hash; empty means no authentication.
    pub users: BTreeMap<String, String>,
    /// A bcrypt hash of no one's password at the highest cost of `users`: an unknown user is
    /// checked against it, so the reply time does not tell which user names exist (as
    /// exporter-toolkit does).
    dummy: Option<String>,
    /// The files read, with their modification times, to notice changes.
    files: Vec<(PathBuf, Option<SystemTime>)>,
}

fn mtime(p: &Path) -> Option<SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

impl WebConfig {
    /// Reads and validates the file at `path` and the files it names.
    ///
    /// # Errors
    /// A message naming the file and the problem (bad YAML, unknown key, missing certificate,
    /// bad hash, unsupported client auth or TLS version).
    pub fn load(path: &Path) -> Result<WebConfig, String> {
        WebConfig::load_after(path, None)
    }

    /// [`WebConfig::load`], keeping `old`'s dummy hash where its cost is still the highest
    /// configured one (the dummy depends on nothing else): a reload that did not change the
    /// users' costs (a certificate rotation, a `touch`) pays no bcrypt.
    fn load_after(path: &Path, old: Option<&WebConfig>) -> Result<WebConfig, String> {
        let name = path.display();
        let text =
            optfile::read_text(path, optfile::Kind::Config).map_err(|e| format!("{name}: {e}"))?;
        let f: FileFormat = if text.trim().is_empty() {
            FileFormat {
                tls_server_config: None,
                basic_auth_users: None,
                http_server_config: None,
            }
        } else {
            serde_norway::from_str(&text).map_err(|e| format!("{name}: {e}"))?
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut files = vec![(path.to_path_buf(), mtime(path))];
        let users = f.basic_auth_users.unwrap_or_default();
        let mut cost = None;
        for (u, h) in &users {
            if u.contains(':') {
                return Err(format!("{name}: basic_auth_users: user {u:?} contains ':'"));
            }
            let parts = h.parse::<bcrypt::HashParts>().map_err(|e| {
                format!("{name}: basic_auth_users: the hash of {u:?} is not a bcrypt hash: {e}")
            })?;
            cost = cost.max(Some(parts.get_cost()));
        }
        let old_dummy = old.and_then(|o| o.dummy.as_ref()).filter(|d| {
            d.parse::<bcrypt::HashParts>()
                .is_ok_and(|p| Some(p.get_cost()) == cost)
        });
        let dummy = match cost {
            Some(_) if old_dummy.is_some() => old_dummy.cloned(),
            Some(c) => Some(
                bcrypt::hash("no user has this password", c)
                    .map_err(|e| format!("{name}: basic_auth_users: {e}"))?,
            ),
            None => None,
        };
        let tls = match f.tls_server_config {
            None => None,
            Some(t) => Some(Arc::new(
                tls_config(&t, dir, &mut files)
                    .map_err(|e| format!("{name}: tls_server_config: {e}"))?,
            )),
        };
        Ok(WebConfig {
            tls,
            users,
            dummy,
            files,
        })
    }

    fn changed(&self) -> bool {
        self.files.iter().any(|(p, t)| mtime(p) != *t)
    }
}

/// The rustls server configuration of a `tls_server_config` section, every file it reads
/// recorded in `files` (with its mtime, so a change is noticed and the config re-read).
///
/// One function of ~90 lines on purpose: it is the section's fields checked in the order the
/// exporter-toolkit documents them (cert and key, versions, client auth, client CA), each with
/// its own message; split up, the pieces would pass `dir`, `files` and the half-built builder
/// around without making any of them testable alone (tests/it/webconfig.rs covers them).
fn tls_config(
    t: &TlsFormat,
    dir: &Path,
    files: &mut Vec<(PathBuf, Option<SystemTime>)>,
) -> Result<rustls::ServerConfig, String> {
    let mut resolve = |p: &Option<PathBuf>, what: &str| -> Result<PathBuf, String> {
        let p = p.as_ref().ok_or_else(|| format!("{what} is missing"))?;
        let full = dir.join(p);
        files.push((full.clone(), mtime(&full)));
        Ok(full)
    };
    let cert_file = resolve(&t.cert_file, "cert_file")?;
    let key_file = resolve(&t.key_file, "key_file")?;
    let pem = |p: &Path, what: &str| {
        optfile::read(p, optfile::Kind::Pem).map_err(|e| format!("{what} {}: {e}", p.display()))
    };
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&pem(&cert_file, "cert_file")?)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("cert_file {}: {e}", cert_file.display()))?;
    if certs.is_empty() {
        return Err(format!("cert_file {}: no certificate", cert_file.display()));
    }
    let key = PrivateKeyDer::from_pem_slice(&pem(&key_file, "key_file")?)
        .map_err(|e| format!("key_file {}: {e}", key_file.display()))?;
    let version = |v: &Option<String>, default| match v.as_deref() {
        None | Some("") => Ok(default),
        Some("TLS12") => Ok(12),
        Some("TLS13") => Ok(13),
        Some(o) => Err(format!(
            "TLS version {o:?} is not supported (TLS12 or TLS13)"
        )),
    };
    let (min, max) = (version(&t.min_version, 12)?, version(&t.max_version, 13)?);
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
            .into_iter()
            .filter(|(n, _)| (min..=max).contains(n))
            .map(|(_, v)| v)
            .collect();
    if versions.is_empty() {
        return Err("min_version is above max_version".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| e.to_string())?;
    let auth = t.client_auth_type.as_deref().unwrap_or("NoClientCert");
    let verify = match auth {
        "" | "NoClientCert" => None,
        "VerifyClientCertIfGiven" => Some(true),
        "RequireAndVerifyClientCert" => Some(false),
        "RequestClientCert" | "RequireAnyClientCert" => {
            return Err(format!(
                "client_auth_type {auth} (unverified client certificates) is not supported; use VerifyClientCertIfGiven or RequireAndVerifyClientCert"
            ))
        }
        o => return Err(format!("client_auth_type {o:?} is unknown")),
    };
    let builder = match verify {
        None => {
            if t.client_ca_file.is_some() {
                tracing::warn!("client_ca_file is ignored with client_auth_type NoClientCert");
            }
            builder.with_no_client_auth()
        }
        Some(optional) => {
            let ca_file = resolve(
                &t.client_ca_file,
                "client_ca_file (needed by client_auth_type)",
            )?;
            let roots = crate::ca::roots(&ca_file, "client_ca_file")?;
            let mut vb = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            if optional {
                vb = vb.allow_unauthenticated();
            }
            builder.with_client_cert_verifier(vb.build().map_err(|e| e.to_string())?)
        }
    };
    let mut cfg = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("certificate and key: {e}"))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// How often the reload thread looks at the files' modification times when nothing asks.
const RELOAD_POLL: Duration = Duration::from_secs(1);

/// The current configuration, re-read when its files change.
///
/// The files are watched and re-read on a thread of their own ([`reload_thread`]), never on
/// the task that hands out connections: a reload costs a bcrypt of the highest configured cost
/// when the users' costs changed (cost 17, htpasswd's highest, is ~14 s here) and the files may
/// sit on a slow mount, while the connections (the probes too) are served meanwhile with the
/// configuration in force, the new one swapped in whole once it is ready.
#[derive(Clone)]
pub struct Reloader {
    current: Arc<Mutex<Arc<WebConfig>>>,
    /// Wakes the reload thread to look at the files now (a connection came, SIGHUP).
    nudge: std::sync::mpsc::SyncSender<()>,
    auth_ok: Arc<Mutex<HashSet<u64>>>,
    hasher: std::collections::hash_map::RandomState,
    /// Threads for bcrypt (slow by design), started with the configuration (see
    /// [`super::worker`]).
    bcrypt: Arc<super::worker::Worker>,
}

impl Reloader {
    /// Loads the file once and starts the thread that reloads it.
    ///
    /// # Errors
    /// The message of [`WebConfig::load`], or the threads cannot be started.
    pub fn new(path: &Path) -> Result<Reloader, String> {
        let cfg = WebConfig::load(path)?;
        let bcrypt = super::worker::Worker::start("bcrypt", BCRYPT_THREADS)
            .map_err(|e| format!("cannot start the bcrypt threads: {e}"))?;
        let current = Arc::new(Mutex::new(Arc::new(cfg)));
        let auth_ok = Arc::new(Mutex::new(HashSet::new()));
        let (nudge, nudged) = std::sync::mpsc::sync_channel(1);
        let (path, weak, ok) = (
            path.to_path_buf(),
            Arc::downgrade(&current),
            Arc::downgrade(&auth_ok),
        );
        std::thread::Builder::new()
            .name("web config".into())
            .spawn(move || reload_thread(&path, &weak, &ok, &nudged))
            .map_err(|e| format!("cannot start the web config thread: {e}"))?;
        Ok(Reloader {
            current,
            nudge,
            auth_ok,
            hasher: Default::default(),
            bcrypt,
        })
    }

    /// The configuration in force. Never waits for a reload: it asks the reload thread to look
    /// at the files (a change applies to the connections after it is read).
    pub fn current(&self) -> Arc<WebConfig> {
        let _ = self.nudge.try_send(());
        Arc::clone(&lock(&self.current))
    }

    fn cache_key(&self, user: &str, pass: &str, hash: &str) -> u64 {
        // Keyed SipHash: the set holds no passwords, and a forged collision needs the key.
        self.hasher.hash_one((user, pass, hash))
    }

    /// Whether `Authorization` header `value` names a configured user with the right password.
    async fn check(&self, cfg: &WebConfig, value: Option<&str>) -> bool {
        let Some((user, pass)) = value.and_then(parse_basic) else {
            return false;
        };
        let Some(Login { hash, known, pad }) = login(cfg, &user) else {
            return false;
        };
        let key = self.cache_key(&user, &pass, &hash);
        if known && self.auth_ok.lock().is_ok_and(|a| a.contains(&key)) {
            return true;
        }
        // bcrypt takes tens of milliseconds by design: off the async workers.
        let ok = self
            .bcrypt
            .run(move || {
                let ok = bcrypt::verify(&pass, &hash).unwrap_or(false);
                if !ok {
                    if let Some(pad) = pad {
                        let _ = bcrypt::verify(&pass, &pad);
                    }
                }
                ok
            })
            .await
            .unwrap_or(false)
            && known;
        if ok {
            if let Ok(mut a) = self.auth_ok.lock() {
                if a.len() >= AUTH_CACHE {
                    a.clear();
                }
                a.insert(key);
            }
        }
        ok
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Watches the files of the configuration in `current` (every [`RELOAD_POLL`], or when
/// nudged) and swaps in a new configuration when one changed and reads well; ends when the
/// [`Reloader`]s are gone.
fn reload_thread(
    path: &Path,
    current: &std::sync::Weak<Mutex<Arc<WebConfig>>>,
    auth_ok: &std::sync::Weak<Mutex<HashSet<u64>>>,
    nudged: &std::sync::mpsc::Receiver<()>,
) {
    use std::sync::mpsc::RecvTimeoutError;
    loop {
        if let Err(RecvTimeoutError::Disconnected) = nudged.recv_timeout(RELOAD_POLL) {
            return;
        }
        let Some(current) = current.upgrade() else {
            return;
        };
        let cur = Arc::clone(&lock(&current));
        if !cur.changed() {
            continue;
        }
        let new = match WebConfig::load_after(path, Some(&cur)) {
            // The listener's protocol is fixed at start-up: a reload must never turn HTTPS
            // into plain HTTP (credentials in clear), nor plain HTTP into HTTPS (every client
            // would break).
            Ok(c) if c.tls.is_some() != cur.tls.is_some() => {
                let (has, from, to) = if cur.tls.is_some() {
                    ("no", "HTTPS", "plain HTTP")
                } else {
                    ("a", "plain HTTP", "HTTPS")
                };
                tracing::warn!(file = %path.display(), "web config reload refused, keeping the previous one: it has {has} tls_server_config and would switch the listener from {from} to {to}; that needs a restart");
                None
            }
            Ok(c) => {
                tracing::info!(file = %path.display(), "web config reloaded");
                Some(c)
            }
            Err(e) => {
                tracing::error!("web config reload failed, keeping the previous one: {e}");
                None
            }
        };
        let new = new.unwrap_or_else(|| WebConfig {
            // Kept, with the new mtimes, so a refused file is not re-read until it changes.
            tls: cur.tls.clone(),
            users: cur.users.clone(),
            dummy: cur.dummy.clone(),
            files: cur
                .files
                .iter()
                .map(|(p, _)| (p.clone(), mtime(p)))
                .collect(),
        });
        let users_changed = new.users != cur.users;
        *lock(&current) = Arc::new(new);
        if users_changed {
            if let Some(a) = auth_ok.upgrade() {
                lock(&a).clear();
            }
        }
    }
}

/// What a login of one user name is checked against.
#[derive(Debug, PartialEq)]
struct Login {
    /// The user's hash, or the dummy's for an unknown user (the same work either way).
    hash: String,
    /// Whether the user is configured.
    known: bool,
    /// For a known user whose hash is cheaper than the dearest configured one: the dummy hash
    /// (of that cost), verified too when the password is wrong, so every refusal costs the
    /// same and the reply time tells no user names apart, whatever their hashes' costs.
    pad: Option<String>,
}

/// The login of `user` under `cfg`; `None` where no users are configured.
fn login(cfg: &WebConfig, user: &str) -> Option<Login> {
    let cost = |h: &str| h.parse::<bcrypt::HashParts>().map(|p| p.get_cost()).ok();
    let dummy = cfg.dummy.as_ref()?;
    Some(match cfg.users.get(user) {
        Some(h) => Login {
            hash: h.clone(),
            known: true,
            pad: (cost(h) < cost(dummy)).then(|| dummy.clone()),
        },
        None => Login {
            hash: dummy.clone(),
            known: false,
            pad: None,
        },
    })
}

fn parse_basic(v: &str) -> Option<(String, String)> {
    let (scheme, token) = v.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let s = String::from_utf8(raw).ok()?;
    let (u, p) = s.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

pub(super) async fn basic_auth(
    State(r): State<Reloader>,
    mut req: Request,
    next: Next,
) -> Response {
    let cfg = r.current();
    if cfg.users.is_empty() {
        return next.run(req).await;
    }
    let value = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if super::routes::UNAUTHENTICATED.contains(&req.uri().path()) {
        // Answered without credentials (for probes), but what it names of the inputs only
        // with them (repro 32).
        let authorised = value.is_some() && r.check(&cfg, value).await;
        if !authorised {
            req.extensions_mut().insert(super::routes::Anonymous);
        }
        return next.run(req).await;
    }
    if r.check(&cfg, value).await {
        next.run(req).await
    } else {
        (
            StatusCode::UNAUTHORIZED,
            [(
                header::WWW_AUTHENTICATE,
                "Basic realm=\"sglang-log-exporter\"",
            )],
            "Unauthorized\n",
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Repro 17, of the same kind: with users whose hashes differ in cost, a refusal of any user
    /// name costs the dearest bcrypt: an unknown user is checked against the dummy (of the
    /// highest cost), a known user with a cheaper hash against the dummy too when the password
    /// is wrong, and the dearest user against nothing more.
    #[test]
    fn every_refusal_costs_the_dearest_hash() {
        let dir = tempfile::tempdir().unwrap();
        let (cheap, dear) = (bcrypt::hash("a", 4).unwrap(), bcrypt::hash("b", 6).unwrap());
        let path = dir.path().join("web.yml");
        std::fs::write(
            &path,
            format!("basic_auth_users:\n  alice: '{cheap}'\n  bob: '{dear}'\n"),
        )
        .unwrap();
        let cfg = WebConfig::load(&path).unwrap();
        let dummy = cfg.dummy.clone().unwrap();
        assert_eq!(dummy.parse::<bcrypt::HashParts>().unwrap().get_cost(), 6);
        assert!(!bcrypt::verify("a", &dummy).unwrap() && !bcrypt::verify("b", &dummy).unwrap());
        let l = |u: &str| login(&cfg, u).unwrap();
        assert_eq!(
            l("alice"),
            Login {
                hash: cheap,
                known: true,
                pad: Some(dummy.clone())
            }
        );
        assert_eq!(
            l("bob"),
            Login {
                hash: dear,
                known: true,
                pad: None
            }
        );
        assert_eq!(
            l("mallory"),
            Login {
                hash: dummy,
                known: false,
                pad: None
            }
        );
        // No users: nothing is checked.
        std::fs::write(&path, "").unwrap();
        assert_eq!(login(&WebConfig::load(&path).unwrap(), "alice"), None);
    }

    /// Repro 30: a reload that keeps the highest cost keeps the dummy hash (no bcrypt paid);
    /// one that changes it makes a new one of the new cost.
    #[test]
    fn a_reload_keeps_the_dummy_while_the_highest_cost_stays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("web.yml");
        let (a, b) = (bcrypt::hash("a", 4).unwrap(), bcrypt::hash("b", 5).unwrap());
        std::fs::write(&path, format!("basic_auth_users:\n  alice: '{a}'\n")).unwrap();
        let old = WebConfig::load(&path).unwrap();
        let cost = |c: &WebConfig| {
            let d = c.dummy.as_ref().unwrap();
            d.parse::<bcrypt::HashParts>().unwrap().get_cost()
        };
        // Another user of the same cost: the same dummy (a new one would have another salt).
        std::fs::write(
            &path,
            format!("basic_auth_users:\n  alice: '{a}'\n  carol: '{a}'\n"),
        )
        .unwrap();
        let same = WebConfig::load_after(&path, Some(&old)).unwrap();
        assert_eq!(same.dummy, old.dummy);
        std::fs::write(
            &path,
            format!("basic_auth_users:\n  alice: '{a}'\n  bob: '{b}'\n"),
        )
        .unwrap();
        let dearer = WebConfig::load_after(&path, Some(&old)).unwrap();
        assert_ne!(dearer.dummy, old.dummy);
        assert_eq!((cost(&old), cost(&dearer)), (4, 5));
    }
}
