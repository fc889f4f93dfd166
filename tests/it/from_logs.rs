//! `--sglang.from-logs` (on by default without `--sglang.url`): a server's own log names the
//! address its HTTP API listens on, and the exporter polls it there, against SGLang's released
//! endpoint code (tests/sglang_api/serve.py). Also `https://` APIs with a private CA
//! (`--sglang.ca-file`).

use std::path::Path;

use crate::api::{at, decode_v0523, exporter, SglangApi, DP0, DP1};
use crate::common::{append, value};

/// The decode server's `server_args` line as v0.5.18 prints it, listening on every address at
/// `port`, with the key a release logs (never to be used).
fn server_args(port: u16) -> String {
    format!(
        "[2026-06-03 10:00:00] server_args=ServerArgs(model_path='/models/DeepSeek-V3', \
         served_model_name='deepseek-ai/DeepSeek-V3', host='0.0.0.0', port={port}, tp_size=4, \
         dp_size=2, enable_dp_attention=True, disaggregation_mode='decode', \
         api_key='sk-logged-secret-123')\n"
    )
}

/// A decode stats line of DP0 with `running` requests.
fn stats(running: u32) -> String {
    format!(
        "[2026-06-03 10:17:30 DP0 TP0] Decode batch, #running-req: {running}, #token: 2290, \
         token usage: 0.00, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, \
         #retracted-req: 0, cuda graph: True, gen throughput (token/s): 40.01, #queue-req: 0\n"
    )
}

/// DP0's 32 running requests live from the API (not a log's), and the server's API up.
fn dp0_live(s: &str) {
    assert_eq!(
        value(s, &at("sglang:num_running_reqs", DP0)),
        Some(32.0),
        "{s}"
    );
    assert_eq!(value(s, &at("sglang_api_live", DP0)), Some(1.0), "{s}");
    assert_eq!(value(s, r#"sglang_up{server="decode"}"#), Some(1.0), "{s}");
}

fn log(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(format!("{name}.log"));
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const INFO: &str = r#"sglang_server_info{server="decode",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",tp_size="4",dp_size="2",pp_size="""#;

fn info(url: &str) -> String {
    format!(r#"{INFO},url="{url}"}}"#)
}

/// A decode server's log alone (no `--sglang.url`): its API, at the port its `server_args`
/// logs, gives the live values over the log's; `sglang_server_info` carries the URL; the key
/// the log shows is never sent or shown.
#[test]
fn a_decode_servers_log_alone_gives_first_hand_live_values() {
    let api = SglangApi::start("0.5.23", &decode_v0523(), None);
    let dir = tempfile::tempdir().unwrap();
    let path = log(
        dir.path(),
        "decode",
        &format!("{}{}", server_args(api.port), stats(1)),
    );
    let mut e = exporter(&[&path]);
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP1)) == Some(17.0)
    });
    // The API's values, not the log's 1 running request.
    dp0_live(&s);
    let url = format!("http://127.0.0.1:{}", api.port);
    assert_eq!(value(&s, &info(&url)), Some(1.0), "{s}");
    let from = r#"sglang_server_source_timestamp_seconds{server="decode",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",from="both"}"#;
    let since = value(&s, from).unwrap_or_else(|| panic!("{s}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    // Both since the API's first answer, seconds ago (the log's line is from June 2026).
    assert!(since <= now && now - since < 60.0, "{since} {now}");
    // The API going away leaves the log alone as the source, since then.
    let mut api = api;
    api.down();
    let s = e.scrape_until(15, |s| {
        value(s, r#"sglang_up{server="decode"}"#) == Some(0.0)
    });
    let log_only = from.replace("both", "log");
    let since_down = value(&s, &log_only).unwrap_or_else(|| panic!("{s}"));
    assert!(since_down > since, "{since_down} {since}");
    let (_, _, status) = e.get("/api/v1/status");
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["servers"][0]["values_from"], "log", "{status}");
    assert_eq!(status["servers"][0]["url"], url.as_str(), "{status}");
    let err = e.stderr_to_end();
    assert!(
        err.contains("polling the SGLang HTTP API") && err.contains(&url),
        "{err}"
    );
    assert!(!err.contains("sk-logged-secret"), "{err}");
    assert!(!s.contains("sk-logged-secret"), "{s}");
}

/// The logged key is never sent: a server that wants one answers 401 (down, with what to do),
/// and the key from --sglang.api-key-file is what it takes.
#[test]
fn a_key_in_the_log_is_never_used() {
    let api = SglangApi::start("0.5.23", &decode_v0523(), Some("sk-logged-secret-123"));
    let dir = tempfile::tempdir().unwrap();
    let path = log(dir.path(), "decode", &server_args(api.port));
    let mut e = exporter(&[&path]);
    let s = e.scrape_until(15, |s| {
        value(s, r#"sglang_up{server="decode"}"#) == Some(0.0)
            || value(
                s,
                r#"sglang_log_exporter_api_failures_total{server="decode"}"#,
            )
            .is_some()
    });
    assert_eq!(value(&s, &at("sglang:num_running_reqs", DP0)), None, "{s}");
    let err = e.stderr_to_end();
    assert!(err.contains("--sglang.api-key-file"), "{err}");
    assert!(!err.contains("sk-logged-secret"), "{err}");
    let key = dir.path().join("key");
    std::fs::write(&key, "sk-logged-secret-123\n").unwrap();
    let e = exporter(&[&path, "--sglang.api-key-file", key.to_str().unwrap()]);
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(32.0)
    });
    assert!(!s.contains("sk-logged-secret"), "{s}");
}

/// Two servers on two ports, each polled at its own; a restart of one on another port moves
/// its poll (the old port's answers are no longer read), and its URL with it.
#[test]
fn a_restart_on_another_port_moves_the_poll() {
    let mut first = decode_v0523();
    first["loads"][0]["num_running_reqs"] = 11.into();
    let old = SglangApi::start("0.5.23", &first, None);
    let other = SglangApi::start("0.5.23", &decode_v0523(), None);
    let dir = tempfile::tempdir().unwrap();
    let decode = log(dir.path(), "decode", &server_args(old.port));
    let second = log(dir.path(), "second", &server_args(other.port));
    let e = exporter(&[&decode, &second]);
    let second_dp0 = DP0.replace(r#"server="decode""#, r#"server="second""#);
    e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(11.0)
            && value(s, &at("sglang:num_running_reqs", &second_dp0)) == Some(32.0)
    });
    // The restart: a new server_args line with another port, where another server answers.
    let mut moved = decode_v0523();
    moved["loads"][0]["num_running_reqs"] = 22.into();
    let new = SglangApi::start("0.5.23", &moved, None);
    append(Path::new(&decode), server_args(new.port).as_bytes());
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(22.0)
    });
    let url = format!("http://127.0.0.1:{}", new.port);
    assert_eq!(value(&s, &info(&url)), Some(1.0), "{s}");
    // The old port's server says something else now: it is not read any more.
    let mut again = decode_v0523();
    again["loads"][0]["num_running_reqs"] = 99.into();
    old.set(&again);
    std::thread::sleep(std::time::Duration::from_secs(1));
    let s = e.scrape();
    assert_eq!(
        value(&s, &at("sglang:num_running_reqs", DP0)),
        Some(22.0),
        "{s}"
    );
    assert_eq!(
        value(&s, &at("sglang:num_running_reqs", &second_dp0)),
        Some(32.0),
        "{s}"
    );
    // Trial fault: a restart onto a port where nothing answers is an API gone down (it answered
    // before, at its old port), and the log is the source again.
    let dead = crate::common::free_port();
    append(Path::new(&decode), server_args(dead).as_bytes());
    let s = e.scrape_until(15, |s| {
        value(s, r#"sglang_up{server="decode"}"#) == Some(0.0)
    });
    let from = r#"sglang_server_source_timestamp_seconds{server="decode",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",from="log"}"#;
    assert!(value(&s, from).is_some(), "{s}");
    assert_eq!(value(&s, &at("sglang:num_running_reqs", DP0)), None, "{s}");
}

/// `--sglang.from-logs=false`, and `--sglang.url` alone (which turns it off), poll nothing the
/// log names.
#[test]
fn from_logs_is_off_when_asked_or_with_sglang_url() {
    let api = SglangApi::start("0.5.23", &decode_v0523(), None);
    let dir = tempfile::tempdir().unwrap();
    let path = log(dir.path(), "decode", &server_args(api.port));
    for extra in [
        vec!["--sglang.from-logs=false"],
        vec!["--sglang.url", "other=http://127.0.0.1:9"],
    ] {
        let mut args = vec![path.as_str()];
        args.extend(extra.iter().copied());
        let e = exporter(&args);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let s = e.scrape();
        assert_eq!(
            value(&s, r#"sglang_up{server="decode"}"#),
            None,
            "{extra:?}\n{s}"
        );
        // The URL is still the one the log names.
        let url = format!("http://127.0.0.1:{}", api.port);
        assert_eq!(value(&s, &info(&url)), Some(1.0), "{s}");
    }
    // Trial fault: with both, a server the logs name at an address --sglang.url polls under
    // another name is polled once, as that name.
    let named = format!("other=http://127.0.0.1:{}", api.port);
    let e = exporter(&[&path, "--sglang.from-logs=true", "--sglang.url", &named]);
    let s = e.scrape_until(15, |s| {
        value(s, r#"sglang_up{server="other"}"#) == Some(1.0)
    });
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let s2 = e.scrape();
    assert_eq!(
        value(&s2, r#"sglang_up{server="decode"}"#),
        None,
        "{s}\n{s2}"
    );
}

/// A journal record of another host (`_HOSTNAME=gpu-node-1`): its server is never polled from
/// here; its URL names that host.
#[test]
fn another_hosts_log_is_never_polled() {
    let j = crate::journald::Journal::new();
    let mut e = crate::journald::start_with(&j, &["--sglang.interval", "200ms"]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let s = e.scrape();
    assert!(
        s.contains(r#"url="http://gpu-node-1:"#),
        "{}",
        crate::common::samples(&s, "sglang_server_info").join("\n")
    );
    assert!(!s.contains("sglang_up{"), "{s}");
    assert!(
        !s.contains("sglang_log_exporter_api_requests_total{"),
        "{s}"
    );
    let err = e.stderr_to_end();
    assert!(!err.contains("polling the SGLang HTTP API"), "{err}");
}

/// `https://` with a private CA: refused without `--sglang.ca-file` (a clear message), read
/// with it.
#[test]
fn an_https_api_with_a_private_ca() {
    let dir = tempfile::tempdir().unwrap();
    let cert = crate::webconfig::self_signed(dir.path(), "api");
    let key = dir.path().join("api.key");
    let api = SglangApi::start_tls("0.5.23", &decode_v0523(), &cert, &key);
    let url = format!("decode=https://127.0.0.1:{}", api.port);
    let mut e = exporter(&["--sglang.url", &url]);
    e.scrape_until(15, |s| {
        value(s, r#"sglang_up{server="decode"}"#) == Some(0.0)
    });
    let err = e.stderr_to_end();
    assert!(err.contains("the SGLang API does not answer"), "{err}");
    let e = exporter(&[
        "--sglang.url",
        &url,
        "--sglang.ca-file",
        cert.to_str().unwrap(),
    ]);
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP1)) == Some(17.0)
    });
    assert_eq!(
        value(&s, &at("sglang:num_running_reqs", DP0)),
        Some(32.0),
        "{s}"
    );
    let want = format!(r#"url="https://127.0.0.1:{}""#, api.port);
    assert!(s.contains(&want), "{s}");
    // A CA file that holds no certificate is refused at start.
    let out = crate::common::run(&[
        "--sglang.url",
        &url,
        "--sglang.ca-file",
        key.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--sglang.ca-file"), "{err}");
}

/// Two free ports in a row, `P` and `P + 1` (SGLang's Rust servers listen on `port + rank`).
fn consecutive_free_ports() -> u16 {
    for _ in 0..100 {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = a.local_addr().unwrap().port();
        if p < u16::MAX && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no two consecutive free ports");
}

/// `SGLANG_RUST_SERVER=1` with DP attention: each DP rank's Rust server listens on `port +
/// rank` (v0.5.23 `srt/rust_server/server.py` logs it) and its `/v1/loads` lists that rank
/// alone. Both ports are polled, neither answer withdraws the other's rank, the `url` stays the
/// base port's, and one port going down withdraws its own rank's live values only.
#[test]
fn rust_servers_are_polled_on_each_dp_ranks_port() {
    let port = consecutive_free_ports();
    let rank = |dp: usize| {
        let mut d = decode_v0523();
        let one = d["loads"][dp].clone();
        d["loads"] = serde_json::json!([one]);
        // As the rank's Rust server answers: its own slot.
        d["own_dp_rank"] = serde_json::json!(dp);
        d
    };
    let api0 = SglangApi::start_on("0.5.23", &rank(0), port);
    let mut api1 = SglangApi::start_on("0.5.23", &rank(1), port + 1);
    let dir = tempfile::tempdir().unwrap();
    let listen = |dp: u16| {
        format!(
            "[2026-06-03 10:00:09 DP{dp} TP{}] SGLANG_RUST_SERVER enabled, Rust server listen on \
             127.0.0.1:{} (DP rank {dp}/2)\n",
            dp * 2,
            port + dp
        )
    };
    let args = server_args(port).replace("host='0.0.0.0'", "host='127.0.0.1'");
    let path = log(
        dir.path(),
        "decode",
        &format!("{args}{}{}", listen(0), listen(1)),
    );
    let mut e = exporter(&[&path]);
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(32.0)
            && value(s, &at("sglang:num_running_reqs", DP1)) == Some(17.0)
    });
    assert_eq!(value(&s, &at("sglang_api_live", DP0)), Some(1.0), "{s}");
    assert_eq!(value(&s, &at("sglang_api_live", DP1)), Some(1.0), "{s}");
    assert_eq!(value(&s, r#"sglang_up{server="decode"}"#), Some(1.0), "{s}");
    let url = format!("http://127.0.0.1:{port}");
    assert_eq!(value(&s, &info(&url)), Some(1.0), "{s}");
    // Still both after several polls of each port (each answer lists its own rank only).
    std::thread::sleep(std::time::Duration::from_millis(600));
    let s = e.scrape();
    assert_eq!(
        value(&s, &at("sglang:num_running_reqs", DP1)),
        Some(17.0),
        "{s}"
    );
    // DP1's port goes down: its rank's live values go, DP0's stay.
    api1.down();
    let s = e.scrape_until(15, |s| value(s, &at("sglang_api_live", DP1)) == Some(0.0));
    assert_eq!(value(&s, &at("sglang:num_running_reqs", DP1)), None, "{s}");
    dp0_live(&s);
    let err = e.stderr_to_end();
    for p in [port, port + 1] {
        assert!(err.contains(&format!("http://127.0.0.1:{p}/")), "{err}");
    }
    drop(api0);
}

/// A journal unit of this host (`_HOSTNAME` is this host's name): its server is polled at the
/// address its `server_args` entry logs, as a file's is.
#[test]
fn a_journal_unit_of_this_host_is_polled_from_its_log() {
    let api = SglangApi::start("0.5.23", &decode_v0523(), None);
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("local.journal");
    let me = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let line = server_args(api.port);
    let export = crate::journald::entry(
        "sglang-api.service",
        crate::journald::INVOCATION,
        1_780_481_300_000_000,
        line.trim_end().as_bytes(),
    );
    let export = String::from_utf8(export)
        .unwrap()
        .replace("_HOSTNAME=gpu-node-1", &format!("_HOSTNAME={}", me.trim()));
    crate::journald::write_journal(&journal, export.as_bytes());
    let e = exporter(&[
        "--journal-unit",
        "sglang-api",
        "--journal-file",
        journal.to_str().unwrap(),
    ]);
    let dp0 = DP0.replace(r#"server="decode""#, r#"server="sglang-api""#);
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", &dp0)) == Some(32.0)
    });
    assert_eq!(
        value(&s, r#"sglang_up{server="sglang-api"}"#),
        Some(1.0),
        "{s}"
    );
    let url = format!(r#"url="http://127.0.0.1:{}""#, api.port);
    assert!(s.contains(&url), "{s}");
}
