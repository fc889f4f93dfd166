//! `--web.config.file`: HTTPS and basic auth with real certificates from `openssl`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::common::{bin, free_port, once, sample, value, Exporter};

const LOG: &str = "pd-decode-session.log";
const SERIES: &str = "sglang:max_total_num_tokens{server=\"pd-decode-session\",model_name=\"deepseek-ai/DeepSeek-V3\",engine_type=\"decode\",dp_rank=\"2\",pp_rank=\"0\",tp_rank=\"2\",moe_ep_rank=\"0\"}";

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed server certificate for 127.0.0.1: `<name>.pem` and `<name>.key` in `dir`.
pub fn self_signed(dir: &Path, name: &str) -> PathBuf {
    let (c, k) = (format!("{name}.pem"), format!("{name}.key"));
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &k,
            "-out",
            &c,
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            // webpki refuses a CA certificate as a server's own.
            "-addext",
            "basicConstraints=critical,CA:FALSE",
        ],
    );
    dir.join(c)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// An HTTPS client trusting only `ca`, presenting `client` (cert, key) when given.
pub fn client(ca: &Path, client: Option<(&Path, &Path)>) -> ureq::Agent {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).expect("ca") {
        roots.add(c.expect("pem")).expect("add root");
    }
    let b = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    let cfg = match client {
        None => b.with_no_client_auth(),
        Some((c, k)) => b
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(c)
                    .unwrap()
                    .map(Result::unwrap)
                    .collect(),
                PrivateKeyDer::from_pem_file(k).unwrap(),
            )
            .expect("client cert"),
    };
    ureq::AgentBuilder::new()
        .tls_config(Arc::new(cfg))
        .timeout(Duration::from_secs(10))
        .build()
}

/// GETs `url` with optional basic auth; (status, WWW-Authenticate, body), status 0 on a
/// connection or TLS failure.
pub fn get(agent: &ureq::Agent, url: &str, auth: Option<(&str, &str)>) -> (u16, String, String) {
    use base64::Engine as _;
    let mut req = agent.get(url);
    if let Some((u, p)) = auth {
        let t = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        req = req.set("Authorization", &format!("Basic {t}"));
    }
    match req.call() {
        Ok(r) => (
            r.status(),
            String::new(),
            r.into_string().unwrap_or_default(),
        ),
        Err(ureq::Error::Status(c, r)) => (
            c,
            r.header("www-authenticate").unwrap_or("").to_string(),
            r.into_string().unwrap_or_default(),
        ),
        Err(e) => {
            eprintln!("GET {url}: {e}");
            (0, String::new(), String::new())
        }
    }
}

/// GETs `url` until the answer holds [`SERIES`] (the log is read after the server starts);
/// panics after 20 s. Returns (status, content type, body) of that answer.
fn get_read(agent: &ureq::Agent, url: &str, auth: Option<(&str, &str)>) -> (u16, String, String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let r = get(agent, url, auth);
        if value(&r.2, SERIES).is_some() {
            return r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{SERIES} not served within 20 s; last answer: {r:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn hash(pass: &str) -> String {
    // Cost 4 keeps the tests fast; the exporter accepts any cost.
    bcrypt::hash(pass, 4).expect("bcrypt")
}

fn start(config: &Path) -> Exporter {
    Exporter::start(&[
        sample(LOG).to_str().unwrap(),
        "--web.config.file",
        config.to_str().unwrap(),
    ])
}

#[test]
fn https_with_basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let cert = self_signed(dir.path(), "server");
    let cfg = dir.path().join("web.yml");
    // Relative paths are relative to the config file.
    std::fs::write(
        &cfg,
        format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  min_version: TLS12\nbasic_auth_users:\n  prom: {}\n",
            hash("s3cret")
        ),
    )
    .unwrap();
    let e = start(&cfg);
    let url = format!("https://127.0.0.1:{}/metrics", e.port);
    let agent = client(&cert, None);
    let want = value(&once(&[sample(LOG).to_str().unwrap()]), SERIES).expect("series");
    assert_eq!(want, 786432.0);
    let (code, _, body) = get_read(&agent, &url, Some(("prom", "s3cret")));
    assert_eq!(code, 200);
    assert_eq!(value(&body, SERIES), Some(want));
    // The live page and its JSON over TLS with the credentials; the probes without.
    let at = |p: &str| format!("https://127.0.0.1:{}{p}", e.port);
    let (code, _, page) = get(&agent, &at("/"), Some(("prom", "s3cret")));
    assert_eq!(code, 200);
    assert!(
        page.contains("fetch(\"api/v1/status\""),
        "relative URL: {page}"
    );
    let (code, _, json) = get(&agent, &at("/api/v1/status"), Some(("prom", "s3cret")));
    assert_eq!(code, 200);
    assert!(json.contains("\"name\":\"pd-decode-session\""), "{json}");
    assert_eq!(
        get(&agent, &at("/-/healthy"), None),
        (200, String::new(), "Healthy.\n".into())
    );
    assert_eq!(get(&agent, &at("/"), None).0, 401);
    for auth in [
        None,
        Some(("prom", "wrong")),
        Some(("nobody", "s3cret")),
        Some(("prom", "")),
    ] {
        let (code, challenge, _) = get(&agent, &url, auth);
        assert_eq!(code, 401, "{auth:?}");
        assert_eq!(challenge, "Basic realm=\"sglang-log-exporter\"");
    }
    // Plain HTTP on the TLS port gets no page.
    let plain = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(5))
        .build();
    assert_ne!(
        get(
            &plain,
            &format!("http://127.0.0.1:{}/metrics", e.port),
            Some(("prom", "s3cret"))
        )
        .0,
        200
    );
}

/// Waits until `f` holds: a changed web config is read on the exporter's reload thread, and
/// applies to the connections after that (a hang guard of 30 s, not a timed assertion).
fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn certificates_and_users_are_reloaded_on_change() {
    let dir = tempfile::tempdir().unwrap();
    let old = self_signed(dir.path(), "old");
    let cfg = dir.path().join("web.yml");
    let write_cfg = |name: &str, pass: &str| {
        let tmp = dir.path().join("web.yml.tmp");
        std::fs::write(
            &tmp,
            format!(
                "tls_server_config:\n  cert_file: {name}.pem\n  key_file: {name}.key\nbasic_auth_users:\n  prom: {}\n",
                hash(pass)
            ),
        )
        .unwrap();
        std::fs::rename(&tmp, &cfg).unwrap();
    };
    write_cfg("old", "one");
    let mut e = start(&cfg);
    let logs = e.log_lines();
    let url = format!("https://127.0.0.1:{}/metrics", e.port);
    let new = self_signed(dir.path(), "new");
    assert_eq!(get(&client(&old, None), &url, Some(("prom", "one"))).0, 200);
    assert_eq!(
        get(&client(&new, None), &url, Some(("prom", "one"))).0,
        0,
        "not trusted yet"
    );
    write_cfg("new", "two");
    until("the new config", || {
        get(&client(&new, None), &url, Some(("prom", "two"))).0 == 200
    });
    assert_eq!(get(&client(&new, None), &url, Some(("prom", "one"))).0, 401);
    assert_eq!(
        get(&client(&old, None), &url, Some(("prom", "two"))).0,
        0,
        "old cert retired"
    );
    // Rotating the certificate files themselves (same names) applies too.
    std::fs::copy(dir.path().join("old.pem"), dir.path().join("new.pem")).unwrap();
    std::fs::copy(dir.path().join("old.key"), dir.path().join("new.key")).unwrap();
    until("the rotated certificate", || {
        get(&client(&old, None), &url, Some(("prom", "two"))).0 == 200
    });
    // A broken file keeps the last good configuration.
    std::fs::write(&cfg, "tls_server_config: [\n").unwrap();
    crate::common::wait_log(&logs, "web config reload failed", 30);
    assert_eq!(get(&client(&old, None), &url, Some(("prom", "two"))).0, 200);
}

#[test]
fn a_reload_never_switches_tls_on_or_off() {
    let dir = tempfile::tempdir().unwrap();
    let cert = self_signed(dir.path(), "server");
    let cfg = dir.path().join("web.yml");
    let write_cfg = |tls: bool, pass: &str| {
        let tmp = dir.path().join("web.yml.tmp");
        let tls = if tls {
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n"
        } else {
            ""
        };
        std::fs::write(
            &tmp,
            format!("{tls}basic_auth_users:\n  prom: {}\n", hash(pass)),
        )
        .unwrap();
        std::fs::rename(&tmp, &cfg).unwrap();
    };
    let plain = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(10))
        .build();

    // HTTPS stays HTTPS: a config without TLS is refused, the old users stay in force.
    write_cfg(true, "one");
    let mut e = start(&cfg);
    let logs = e.log_lines();
    let https = format!("https://127.0.0.1:{}/metrics", e.port);
    let http = format!("http://127.0.0.1:{}/metrics", e.port);
    assert_eq!(
        get(&client(&cert, None), &https, Some(("prom", "one"))).0,
        200
    );
    write_cfg(false, "two");
    crate::common::wait_log(&logs, "reload refused", 30);
    assert_eq!(
        get(&plain, &http, Some(("prom", "two"))).0,
        0,
        "no plain HTTP"
    );
    assert_eq!(
        get(&client(&cert, None), &https, Some(("prom", "one"))).0,
        200
    );
    assert_eq!(
        get(&client(&cert, None), &https, Some(("prom", "two"))).0,
        401
    );
    // A later config that keeps TLS applies again.
    write_cfg(true, "three");
    until("the config that keeps TLS", || {
        get(&client(&cert, None), &https, Some(("prom", "three"))).0 == 200
    });
    assert_eq!(
        get(&client(&cert, None), &https, Some(("prom", "one"))).0,
        401
    );
    let _ = e.child.kill();
    let _ = e.child.wait();
    let err = e.stderr_to_end();
    let refused: Vec<_> = err
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("reload refused"))
        .collect();
    assert_eq!(refused.len(), 1, "{err}");
    assert!(refused[0].contains("from HTTPS to plain HTTP"), "{err}");

    // Plain HTTP stays plain: a config with TLS is refused.
    write_cfg(false, "one");
    let mut e = start(&cfg);
    let logs = e.log_lines();
    let https = format!("https://127.0.0.1:{}/metrics", e.port);
    let http = format!("http://127.0.0.1:{}/metrics", e.port);
    assert_eq!(get(&plain, &http, Some(("prom", "one"))).0, 200);
    write_cfg(true, "two");
    crate::common::wait_log(&logs, "reload refused", 30);
    assert_eq!(
        get(&client(&cert, None), &https, Some(("prom", "two"))).0,
        0
    );
    assert_eq!(get(&plain, &http, Some(("prom", "one"))).0, 200);
    assert_eq!(get(&plain, &http, Some(("prom", "two"))).0, 401);
}

#[test]
fn basic_auth_without_tls() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("web.yml");
    std::fs::write(
        &cfg,
        format!("basic_auth_users:\n  alice: {}\n", hash("pw")),
    )
    .unwrap();
    let e = start(&cfg);
    let plain = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(10))
        .build();
    let url = format!("http://127.0.0.1:{}/metrics", e.port);
    assert_eq!(get(&plain, &url, None).0, 401);
    assert_eq!(get(&plain, &url, Some(("alice", "nope"))).0, 401);
    let (code, _, body) = get_read(&plain, &url, Some(("alice", "pw")));
    assert_eq!(code, 200);
    assert_eq!(value(&body, SERIES), Some(786432.0));
    // The probes answer without credentials (Kubernetes sends none); the ready one once the
    // log is read. Everything else, the page and its JSON included, asks for them.
    let at = |p: &str| format!("http://127.0.0.1:{}{p}", e.port);
    assert_eq!(
        get(&plain, &at("/-/healthy"), None),
        (200, String::new(), "Healthy.\n".into())
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while get(&plain, &at("/-/ready"), None).0 != 200 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        get(&plain, &at("/-/ready"), None),
        (200, String::new(), "Ready.\n".into())
    );
    for p in ["/", "/api/v1/status", "/-/other", "/-/healthy/x"] {
        assert_eq!(get(&plain, &at(p), None).0, 401, "{p}");
    }
}

#[test]
fn client_certificates_are_required_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let server = self_signed(d, "server");
    openssl(
        d,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=test-ca",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ],
    );
    openssl(
        d,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "client.key",
            "-out",
            "client.csr",
            "-subj",
            "/CN=prometheus",
        ],
    );
    std::fs::write(d.join("ext.cnf"), "extendedKeyUsage=clientAuth\n").unwrap();
    openssl(
        d,
        &[
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            "client.pem",
            "-extfile",
            "ext.cnf",
        ],
    );
    let cfg = d.join("web.yml");
    std::fs::write(
        &cfg,
        "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  client_ca_file: ca.pem\n  client_auth_type: RequireAndVerifyClientCert\n",
    )
    .unwrap();
    let e = start(&cfg);
    let url = format!("https://127.0.0.1:{}/metrics", e.port);
    assert_eq!(
        get(&client(&server, None), &url, None).0,
        0,
        "no client certificate"
    );
    let (code, _, body) = get_read(
        &client(
            &server,
            Some((&d.join("client.pem"), &d.join("client.key"))),
        ),
        &url,
        None,
    );
    assert_eq!(code, 200);
    assert_eq!(value(&body, SERIES), Some(786432.0));
    // A self-signed client certificate is not from the CA.
    let (code, _, _) = get(
        &client(&server, Some((&server, &d.join("server.key")))),
        &url,
        None,
    );
    assert_eq!(code, 0);
}

#[test]
fn bad_configs_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    self_signed(dir.path(), "server");
    let good_tls = "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n";
    let cases = [
        ("tls_server_config: [\n", "web0.yml"),
        (
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  bogus: 1\n",
            "bogus",
        ),
        (
            "tls_server_config:\n  cert_file: missing.pem\n  key_file: server.key\n",
            "missing.pem",
        ),
        (
            "tls_server_config:\n  cert_file: server.pem\n",
            "key_file is missing",
        ),
        (
            "tls_server_config:\n  cert_file: server.key\n  key_file: server.key\n",
            "cert_file",
        ),
        (&format!("{good_tls}  min_version: TLS10\n"), "TLS10"),
        (
            &format!("{good_tls}  client_auth_type: RequireAndVerifyClientCert\n"),
            "client_ca_file",
        ),
        (
            "basic_auth_users:\n  alice: plaintext\n",
            "not a bcrypt hash",
        ),
        ("unknown_section: {}\n", "unknown_section"),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let cfg = dir.path().join(format!("web{i}.yml"));
        std::fs::write(&cfg, text).unwrap();
        let out = Command::new(bin())
            .arg(sample(LOG))
            .args([
                "--web.listen-address",
                &format!("127.0.0.1:{}", free_port()),
            ])
            .arg("--web.config.file")
            .arg(&cfg)
            .output()
            .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert!(
            err.contains("error:") && err.contains(needle),
            "{text}: {err}"
        );
    }
    let out = Command::new(bin())
        .arg(sample(LOG))
        .args(["--web.config.file", "/nonexistent/web.yml"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn prometheus_scrapes_over_https_with_basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let cert = self_signed(dir.path(), "server");
    let cfg = dir.path().join("web.yml");
    std::fs::write(
        &cfg,
        format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\nbasic_auth_users:\n  prom: {}\n",
            hash("s3cret")
        ),
    )
    .unwrap();
    let e = start(&cfg);
    let want = value(&once(&[sample(LOG).to_str().unwrap()]), SERIES).expect("series");
    assert_eq!(want, 786432.0);
    let prom_dir = tempfile::tempdir().unwrap();
    let prom_cfg = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sglang\n    scheme: https\n    tls_config:\n      ca_file: {}\n    basic_auth:\n      username: prom\n      password: s3cret\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
        cert.display(),
        e.port
    );
    let prom = crate::promtools::prometheus(&prom_cfg, prom_dir.path());
    let q = "sglang:max_total_num_tokens{dp_rank=\"2\"}";
    let got = crate::promtools::poll(60, "Prometheus to scrape over HTTPS", || {
        let r = crate::promtools::query(&prom, q, None);
        (r.len() == 1).then(|| r[0].1)
    });
    assert_eq!(got, want);
}

/// With basic auth, every unauthorised request gets the same 401 whatever its path and method
/// (no `Allow` header telling a route exists, repro 19); an unknown user costs a bcrypt as a
/// known one with a wrong password does, so the reply time does not tell user names apart
/// (repro 17: cost 10 here, ~50 ms a check; an unknown user was answered in 0.1 ms).
#[test]
fn unauthorised_replies_tell_nothing_of_routes_or_users() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("web.yml");
    let h = bcrypt::hash("pw", 10).unwrap();
    std::fs::write(&cfg, format!("basic_auth_users:\n  alice: {h}\n")).unwrap();
    let e = start(&cfg);
    let raw = |method: &str, path: &str| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", e.port)).unwrap();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        // The reply without its Date header (the one part that differs by time).
        out.lines()
            .filter(|l| !l.to_ascii_lowercase().starts_with("date:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let first = raw("GET", "/metrics");
    assert!(first.starts_with("HTTP/1.1 401"), "{first}");
    for (m, p) in [
        ("POST", "/metrics"),
        ("DELETE", "/"),
        ("POST", "/guess"),
        ("GET", "/nosuch"),
    ] {
        assert_eq!(raw(m, p), first, "{m} {p}");
    }
    assert!(!first.to_ascii_lowercase().contains("allow:"), "{first}");
    // The time of a wrong password for a known and an unknown user: the same bcrypt.
    let plain = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(10))
        .build();
    let url = format!("http://127.0.0.1:{}/metrics", e.port);
    let median = |user: &str| {
        let mut t: Vec<Duration> = (0..5)
            .map(|_| {
                let start = std::time::Instant::now();
                assert_eq!(get(&plain, &url, Some((user, "wrong"))).0, 401);
                start.elapsed()
            })
            .collect();
        t.sort();
        t[2]
    };
    let (known, unknown) = (median("alice"), median("mallory"));
    assert!(
        unknown * 4 >= known,
        "unknown user {unknown:?}, known user with a wrong password {known:?}"
    );
}

/// Repro 30: a reload whose users' costs changed pays a bcrypt of the new highest cost (cost 13
/// here: seconds in a debug build) for its dummy hash, on the reload thread: the probes are
/// answered meanwhile (with the configuration in force), never after the reload.
#[test]
fn a_costly_reload_does_not_hold_the_probes() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("web.yml");
    std::fs::write(
        &cfg,
        format!("basic_auth_users:\n  alice: {}\n", hash("pw")),
    )
    .unwrap();
    let mut e = start(&cfg);
    let logs = e.log_lines();
    let plain = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build();
    let healthy = format!("http://127.0.0.1:{}/-/healthy", e.port);
    assert_eq!(get(&plain, &healthy, None).0, 200);
    // A hash of cost 13 (its form is all the reload reads of it: no need to compute one).
    let dear = hash("pw").replacen("$04$", "$13$", 1);
    let tmp = dir.path().join("web.yml.tmp");
    std::fs::write(
        &tmp,
        format!(
            "basic_auth_users:\n  alice: {}\n  bob: {dear}\n",
            hash("pw")
        ),
    )
    .unwrap();
    std::fs::rename(&tmp, &cfg).unwrap();
    // Each probe nudges the reload thread; all are answered before the reload is done.
    for _ in 0..5 {
        assert_eq!(get(&plain, &healthy, None).0, 200);
    }
    let before: Vec<String> = logs.try_iter().collect();
    assert!(
        !before.iter().any(|l| l.contains("web config reloaded")),
        "the probes waited for the reload: {before:?}"
    );
    crate::common::wait_log(&logs, "web config reloaded", 120);
    let url = format!("http://127.0.0.1:{}/metrics", e.port);
    assert_eq!(get(&plain, &url, Some(("alice", "pw"))).0, 200);
}
