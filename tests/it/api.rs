//! `--sglang.url`: SGLang's HTTP API as a source, tested against SGLang's own endpoint code
//! (tests/sglang_api/serve.py, set up by tests/sglang_api/setup.sh) with our numbers behind it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, parse_exposition, value, Exporter};

/// A stand-in SGLang server: SGLang's released endpoint code over a data file of ours.
pub struct SglangApi {
    child: Option<Child>,
    pub port: u16,
    release: &'static str,
    data: PathBuf,
    api_key: Option<String>,
    /// HTTPS: (certificate, key) PEM files.
    tls: Option<(PathBuf, PathBuf)>,
    _dir: tempfile::TempDir,
}

pub fn api_root() -> PathBuf {
    let root = crate::common::root().join("target/sglang-api");
    assert!(
        root.join("venv/bin/python").exists() && root.join("sglang-0.5.23/.done").exists(),
        "the SGLang API stand-in is not set up: run tests/sglang_api/setup.sh (.ci/run does)"
    );
    root
}

impl SglangApi {
    pub fn start(
        release: &'static str,
        data: &serde_json::Value,
        api_key: Option<&str>,
    ) -> SglangApi {
        SglangApi::start_with(release, data, api_key, None)
    }

    /// Served over HTTPS with this certificate and key (uvicorn's TLS, as SGLang's
    /// `--ssl-certfile` and `--ssl-keyfile` serve it).
    pub fn start_tls(
        release: &'static str,
        data: &serde_json::Value,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> SglangApi {
        SglangApi::start_with(release, data, None, Some((cert.into(), key.into())))
    }

    /// On `port` (one the caller found free).
    pub fn start_on(release: &'static str, data: &serde_json::Value, port: u16) -> SglangApi {
        SglangApi::start_at(release, data, None, None, port)
    }

    fn start_with(
        release: &'static str,
        data: &serde_json::Value,
        api_key: Option<&str>,
        tls: Option<(PathBuf, PathBuf)>,
    ) -> SglangApi {
        SglangApi::start_at(release, data, api_key, tls, free_port())
    }

    fn start_at(
        release: &'static str,
        data: &serde_json::Value,
        api_key: Option<&str>,
        tls: Option<(PathBuf, PathBuf)>,
        port: u16,
    ) -> SglangApi {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SglangApi {
            child: None,
            port,
            release,
            data: dir.path().join("data.json"),
            api_key: api_key.map(str::to_string),
            tls,
            _dir: dir,
        };
        s.set(data);
        s.up();
        s
    }

    /// Starts (again) on the same port.
    pub fn up(&mut self) {
        let root = api_root();
        let mut cmd = Command::new(root.join("venv/bin/python"));
        cmd.args(["-W", "ignore"])
            .arg(crate::common::root().join("tests/sglang_api/serve.py"))
            .args(["--release", self.release, "--root"])
            .arg(&root)
            .args(["--port", &self.port.to_string(), "--data"])
            .arg(&self.data)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if let Some(k) = &self.api_key {
            cmd.args(["--api-key", k]);
        }
        if let Some((c, k)) = &self.tls {
            cmd.arg("--ssl-certfile").arg(c).arg("--ssl-keyfile").arg(k);
        }
        self.child = Some(cmd.spawn().expect("start serve.py"));
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "serve.py did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn down(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// What the server says from now on.
    pub fn set(&self, data: &serde_json::Value) {
        let tmp = self.data.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec(data).unwrap()).unwrap();
        std::fs::rename(&tmp, &self.data).unwrap();
    }

    pub(crate) fn url(&self, name: &str) -> String {
        format!("{name}=http://127.0.0.1:{}", self.port)
    }
}

impl Drop for SglangApi {
    fn drop(&mut self) {
        self.down();
    }
}

/// Polled every 200 ms with a 150 ms timeout: outages show within a scrape or two.
pub fn exporter(extra: &[&str]) -> Exporter {
    let mut args = vec![
        "--sglang.interval",
        "200ms",
        "--sglang.timeout",
        "150ms",
        "--gpu.disable",
    ];
    args.extend_from_slice(extra);
    let e = Exporter::start(&args);
    e.wait_ready();
    e
}

/// A v0.5.23 PD decode server with DP attention (tp 4, dp 2): per DP rank what the scheduler's
/// load inquirer fills in.
pub fn decode_v0523() -> serde_json::Value {
    let load = |dp: u32, running: u32, used: u32, waiting: u32, prealloc: u32, transfer: u32| {
        serde_json::json!({
            "dp_rank": dp, "timestamp": 1780000000.5, "num_running_reqs": running,
            "num_waiting_reqs": waiting + prealloc + transfer, "num_used_tokens": used,
            "max_total_num_tokens": 786432, "max_running_requests": 256,
            "token_usage": (f64::from(used) / 786432.0 * 1e4).round() / 1e4,
            "gen_throughput": 1635.11, "cache_hit_rate": 0.25, "utilization": 0.5,
            "memory": {"weight_gb": 80.5, "kv_cache_gb": 40.25, "graph_gb": 1.5, "token_capacity": 786432},
            "disaggregation": {"mode": "decode", "decode_prealloc_queue_reqs": prealloc,
                "decode_transfer_queue_reqs": transfer, "decode_retracted_queue_reqs": 0},
            "queues": {"waiting": waiting, "grammar": 0, "paused": 0, "retracted": 0, "prealloc_ready": 0}
        })
    };
    serde_json::json!({
        "loads": [load(0, 32, 11179, 3, 4, 2), load(1, 17, 5000, 0, 1, 0)],
        "server_info": {"model_path": "/models/DeepSeek-V3", "served_model_name": "deepseek-ai/DeepSeek-V3",
            "disaggregation_mode": "decode", "tp_size": 4, "dp_size": 2, "pp_size": 1, "ep_size": 1,
            "enable_dp_attention": true, "speculative_algorithm": null},
        "scheduler_info": {"max_total_num_tokens": 786432, "max_req_input_len": 163840}
    })
}

pub const DP0: &str = r#"server="decode",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",dp_rank="0",pp_rank="0",tp_rank="0",moe_ep_rank="0""#;
pub const DP1: &str = r#"server="decode",model_name="deepseek-ai/DeepSeek-V3",engine_type="decode",dp_rank="1",pp_rank="0",tp_rank="2",moe_ep_rank="0""#;

pub fn at(name: &str, labels: &str) -> String {
    format!("{name}{{{labels}}}")
}

#[test]
fn v1_loads_alone_serves_each_dp_rank_with_the_servers_model_and_mode() {
    let api = SglangApi::start("0.5.23", &decode_v0523(), None);
    let e = exporter(&["--sglang.url", &api.url("decode")]);
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP1)).is_some()
    });
    for (name, dp0, dp1) in [
        ("sglang:num_running_reqs", 32.0, 17.0),
        // The waiting queue alone (num_waiting_reqs holds the PD queues too: 9 and 1).
        ("sglang:num_queue_reqs", 3.0, 0.0),
        ("sglang:num_used_tokens", 11179.0, 5000.0),
        ("sglang:max_total_num_tokens", 786432.0, 786432.0),
        ("sglang:token_usage", 0.0142, 0.0064),
        ("sglang:gen_throughput", 1635.11, 1635.11),
        ("sglang:cache_hit_rate", 0.25, 0.25),
        ("sglang:num_decode_prealloc_queue_reqs", 4.0, 1.0),
        ("sglang:num_decode_transfer_queue_reqs", 2.0, 0.0),
        ("sglang_decode_retracted_queue_requests", 0.0, 0.0),
        ("sglang_running_requests_limit", 256.0, 256.0),
        ("sglang_api_live", 1.0, 1.0),
    ] {
        assert_eq!(value(&s, &at(name, DP0)), Some(dp0), "{name} DP0\n{s}");
        assert_eq!(value(&s, &at(name, DP1)), Some(dp1), "{name} DP1\n{s}");
    }
    // Nothing of the prefill side, and two ranks only.
    assert!(
        !s.contains("sglang:num_prefill_bootstrap_queue_reqs{"),
        "{s}"
    );
    let running: Vec<_> = parse_exposition(&s)
        .into_iter()
        .filter(|x| x.name == "sglang:num_running_reqs")
        .collect();
    assert_eq!(running.len(), 2, "{s}");
    assert_eq!(value(&s, r#"sglang_up{server="decode"}"#), Some(1.0), "{s}");
    assert!(
        value(
            &s,
            r#"sglang_log_exporter_api_requests_total{server="decode"}"#
        )
        .unwrap()
            >= 3.0
    );
    assert_eq!(
        value(
            &s,
            r#"sglang_log_exporter_api_failures_total{server="decode"}"#
        ),
        None,
        "{s}"
    );
    // `top` marks the values live.
    let url = format!("http://127.0.0.1:{}/metrics", e.port);
    let out = crate::common::run(&["top", "--snapshot", "--width", "160", "--url", &url]);
    let frame = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = frame.lines().filter(|l| l.contains("live (API)")).collect();
    assert_eq!(rows.len(), 2, "{frame}");
    assert!(
        rows[0].contains("DP0 TP0") && rows[0].contains("1.4%  11.2k/786.4k   32      3"),
        "{frame}"
    );
    // The live page's JSON says so too.
    let (code, _, body) = e.get("/api/v1/status");
    assert_eq!(code, 200);
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    let ranks = &status["servers"][0]["ranks"];
    assert_eq!(ranks[0]["state"], "live", "{body}");
    assert_eq!(ranks[0]["running"], 32.0, "{body}");
    assert_eq!(ranks[1]["rank"], "DP1 TP2", "{body}");
    // Ready once the first poll is done.
    assert_eq!(e.get("/-/ready").0, 200);
    // A new answer shows at the next poll.
    let mut d = decode_v0523();
    d["loads"][1]["num_running_reqs"] = 5.into();
    api.set(&d);
    e.scrape_until(10, |s| {
        value(s, &at("sglang:num_running_reqs", DP1)) == Some(5.0)
    });
}

/// The log's own ranks get the API's live values (one series per rank, never two), and what
/// only the log has (graph use, startup facts, its counters) stays.
#[test]
fn the_api_joins_the_log_of_the_same_server_name() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decode.log");
    std::fs::write(
        &log,
        "[2026-06-03 10:00:00] server_args=ServerArgs(model_path='/models/DeepSeek-V3', served_model_name='deepseek-ai/DeepSeek-V3', tp_size=4, dp_size=2, enable_dp_attention=True, disaggregation_mode='decode')\n\
         [2026-06-03 10:17:30 DP0 TP0] Decode batch, #running-req: 1, #token: 2290, token usage: 0.00, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 40.01, #queue-req: 0\n\
         [2026-06-03 10:17:30 DP1 TP2] Decode batch, #running-req: 2, #token: 4000, token usage: 0.01, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: False, gen throughput (token/s): 80.02, #queue-req: 0\n",
    )
    .unwrap();
    let api = SglangApi::start("0.5.23", &decode_v0523(), None);
    let input = format!("decode={}", log.display());
    let e = exporter(&["--sglang.url", &api.url("decode"), &input]);
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP1)) == Some(17.0)
    });
    assert_eq!(
        value(&s, &at("sglang:num_running_reqs", DP0)),
        Some(32.0),
        "{s}"
    );
    assert_eq!(value(&s, &at("sglang:num_used_tokens", DP0)), Some(11179.0));
    // The log's 2026-06-03 lines are long idle by the wall clock: the API's values are current.
    assert_eq!(value(&s, &at("sglang:gen_throughput", DP1)), Some(1635.11));
    // An activity gauge the API does not give is not shown beside its values (the log's line
    // is older and would contradict them): pre-allocated usage, the full pool's usage.
    assert_eq!(
        value(&s, &at("sglang_decode_preallocated_token_usage_ratio", DP0)),
        None,
        "{s}"
    );
    assert_eq!(value(&s, &at("sglang:full_token_usage", DP0)), None, "{s}");
    // Not idle beside the API's running requests, however old the log's last line.
    assert_eq!(value(&s, &at("sglang_idle", DP0)), Some(0.0), "{s}");
    // What the log alone says.
    assert_eq!(
        value(&s, &at("sglang:is_cuda_graph", DP0)),
        Some(1.0),
        "{s}"
    );
    assert_eq!(value(&s, &at("sglang:is_cuda_graph", DP1)), Some(0.0));
    assert_eq!(
        value(&s, &at("sglang_decode_stats_lines_total", DP1)),
        Some(1.0)
    );
    let running = parse_exposition(&s)
        .into_iter()
        .filter(|x| x.name == "sglang:num_running_reqs")
        .count();
    assert_eq!(running, 2, "one series per rank:\n{s}");
}

/// v0.5.6: `/get_load` (no `/v1/loads`) with `/server_info`; plain DP (no DP attention), so
/// each DP rank's TP0 prints.
#[test]
fn get_load_of_an_older_release_serves_running_and_queued_requests() {
    let data = serde_json::json!({
        "loads": [
            {"dp_rank": 0, "num_reqs": 12, "num_waiting_reqs": 5, "num_tokens": 9000},
            {"dp_rank": 1, "num_reqs": 3, "num_waiting_reqs": 0, "num_tokens": 100}
        ],
        "server_info": {"model_path": "Qwen/Qwen2.5-7B-Instruct", "served_model_name": "qwen",
            "disaggregation_mode": "null", "tp_size": 2, "dp_size": 2, "enable_dp_attention": false},
        "scheduler_info": {"max_total_num_tokens": 500000}
    });
    let api = SglangApi::start("0.5.6", &data, None);
    let e = exporter(&["--sglang.url", &api.url("qwen")]);
    let l = |dp: u32| {
        format!(
            r#"server="qwen",model_name="qwen",engine_type="unified",dp_rank="{dp}",pp_rank="0",tp_rank="0",moe_ep_rank="0""#
        )
    };
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", &l(1))).is_some()
    });
    assert_eq!(
        value(&s, &at("sglang:num_running_reqs", &l(0))),
        Some(7.0),
        "{s}"
    );
    assert_eq!(value(&s, &at("sglang:num_queue_reqs", &l(0))), Some(5.0));
    assert_eq!(value(&s, &at("sglang:num_running_reqs", &l(1))), Some(3.0));
    assert_eq!(value(&s, &at("sglang:num_queue_reqs", &l(1))), Some(0.0));
    assert_eq!(
        value(&s, &at("sglang:max_total_num_tokens", &l(0))),
        Some(500000.0)
    );
    // num_tokens counts the waiting requests' tokens too: it is never the used count.
    assert!(!s.contains("sglang:num_used_tokens{"), "{s}");
    assert_eq!(value(&s, r#"sglang_up{server="qwen"}"#), Some(1.0));
}

#[test]
fn a_server_that_goes_away_shows_no_busy_value_and_comes_back() {
    let mut api = SglangApi::start("0.5.23", &decode_v0523(), None);
    let e = exporter(&["--sglang.url", &api.url("decode")]);
    e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(32.0)
    });
    api.down();
    let t0 = Instant::now();
    let s = e.scrape_until(10, |s| {
        value(s, r#"sglang_up{server="decode"}"#) == Some(0.0)
    });
    // Two intervals (400 ms) and a timeout; a loaded machine gets some slack.
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    for name in [
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:num_used_tokens",
        "sglang:token_usage",
        "sglang:gen_throughput",
        "sglang:num_decode_prealloc_queue_reqs",
    ] {
        assert_eq!(value(&s, &at(name, DP0)), None, "{name} still shown:\n{s}");
    }
    // The capacity is a fact, not an activity: it stands.
    assert_eq!(
        value(&s, &at("sglang:max_total_num_tokens", DP0)),
        Some(786432.0)
    );
    assert_eq!(value(&s, &at("sglang_api_live", DP0)), Some(0.0));
    assert!(
        value(
            &s,
            r#"sglang_log_exporter_api_failures_total{server="decode"}"#
        )
        .unwrap()
            >= 1.0
    );
    // It comes back as another model with tp 8 (DP attention, dp 2): what it says now names
    // the series, and DP1 is the rank SGLang's prefix names (TP4).
    let mut d = decode_v0523();
    d["server_info"]["served_model_name"] = "deepseek-ai/DeepSeek-V3.2".into();
    d["server_info"]["tp_size"] = 8.into();
    api.set(&d);
    api.up();
    let dp1 = r#"server="decode",model_name="deepseek-ai/DeepSeek-V3.2",engine_type="decode",dp_rank="1",pp_rank="0",tp_rank="4",moe_ep_rank="0""#;
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", dp1)).is_some()
    });
    assert_eq!(value(&s, &at("sglang:num_running_reqs", dp1)), Some(17.0));
    assert_eq!(value(&s, r#"sglang_up{server="decode"}"#), Some(1.0));
    // The old model's series are gone.
    assert_eq!(value(&s, &at("sglang:num_running_reqs", DP1)), None, "{s}");
    assert!(
        !s.contains(r#"model_name="deepseek-ai/DeepSeek-V3","#),
        "{s}"
    );
}

/// While the API does not answer, a stats line newer than its last answer shows (the log is
/// first-hand then), under the idle policy.
#[test]
fn the_logs_newer_lines_show_while_the_api_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decode.log");
    std::fs::write(&log, "").unwrap();
    let api = SglangApi::start("0.5.23", &decode_v0523(), None);
    let input = format!("decode={}", log.display());
    // Prefix times read in UTC (the test harness sets --timezone UTC).
    let e = exporter(&["--sglang.url", &api.url("decode"), &input]);
    e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(32.0)
    });
    let mut d = decode_v0523();
    d["status"] = 503.into();
    api.set(&d);
    e.scrape_until(10, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)).is_none()
    });
    std::thread::sleep(Duration::from_millis(1100));
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M:%S")
        .to_string();
    crate::common::append(
        &log,
        format!("[{now} DP0 TP0] Decode batch, #running-req: 40, #token: 2290, token usage: 0.00, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True, gen throughput (token/s): 40.01, #queue-req: 0\n").as_bytes(),
    );
    let s = e.scrape_until(10, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(40.0)
    });
    assert_eq!(value(&s, r#"sglang_up{server="decode"}"#), Some(0.0));
    assert_eq!(value(&s, &at("sglang:num_used_tokens", DP0)), Some(2290.0));
    // DP1 printed nothing since: still withdrawn.
    assert_eq!(value(&s, &at("sglang:num_running_reqs", DP1)), None, "{s}");
}

/// A log and an API under one name that are not one server (another model): the API's loads
/// are not applied, a counter says so, the log's values stand.
#[test]
fn an_api_that_contradicts_the_log_of_its_name_is_not_applied() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("decode.log");
    std::fs::write(
        &log,
        "[2026-06-03 10:00:00] server_args=ServerArgs(model_path='/models/Qwen3', served_model_name='qwen3', tp_size=4, dp_size=2, enable_dp_attention=True, disaggregation_mode='decode')\n",
    )
    .unwrap();
    let api = SglangApi::start("0.5.23", &decode_v0523(), None);
    let input = format!("decode={}", log.display());
    let mut e = exporter(&["--sglang.url", &api.url("decode"), &input]);
    let logs = e.log_lines();
    let s = e.scrape_until(30, |s| {
        value(
            s,
            r#"sglang_log_exporter_api_contradictions_total{server="decode"}"#,
        )
        .is_some()
    });
    assert_eq!(value(&s, r#"sglang_up{server="decode"}"#), Some(1.0));
    assert!(!s.contains("sglang:num_running_reqs{"), "{s}");
    assert!(s.contains(r#"model_name="qwen3""#), "{s}");
    let line = crate::common::wait_log(&logs, "contradicts", 10);
    assert!(
        line.contains(r#"model \"qwen3\" in the log"#)
            || line.contains(r#"model "qwen3" in the log"#),
        "{line}"
    );
}

/// `/server_info` failing costs the info only: the loads are read without it.
#[test]
fn a_failing_server_info_does_not_stop_the_loads() {
    let mut d = decode_v0523();
    d["statuses"] = serde_json::json!({"/server_info": 500, "/get_server_info": 500});
    let api = SglangApi::start("0.5.23", &d, None);
    let e = exporter(&["--sglang.url", &api.url("decode")]);
    let l = r#"server="decode",model_name="",engine_type="decode",dp_rank="0",pp_rank="0",tp_rank="0",moe_ep_rank="0""#;
    let s = e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", l)).is_some()
    });
    assert_eq!(
        value(&s, &at("sglang:num_running_reqs", l)),
        Some(32.0),
        "{s}"
    );
    assert_eq!(value(&s, r#"sglang_up{server="decode"}"#), Some(1.0));
}

/// A slow server (no answer within --sglang.timeout), garbage, a 5xx, and a 401 without the key:
/// each is sglang_up 0 with a message, and the next good answer is up again.
#[test]
fn slow_garbage_error_and_unauthorised_answers_are_down_never_a_value() {
    let api = SglangApi::start("0.5.23", &decode_v0523(), Some("sk-test-1"));
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "sk-test-1\n").unwrap();
    // Without the key: 401.
    let mut bare = exporter(&["--sglang.url", &api.url("decode")]);
    let logs = bare.log_lines();
    bare.scrape_until(30, |s| {
        value(s, r#"sglang_up{server="decode"}"#) == Some(0.0)
    });
    let line = crate::common::wait_log(&logs, "does not answer", 10);
    assert!(
        line.contains("401") && line.contains("--sglang.api-key-file"),
        "{line}"
    );
    assert!(!bare.scrape().contains("sglang:num_running_reqs{"));
    drop(bare);

    let e = exporter(&[
        "--sglang.url",
        &api.url("decode"),
        "--sglang.api-key-file",
        key.to_str().unwrap(),
    ]);
    e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(32.0)
    });
    let mut d = decode_v0523();
    for fault in [
        serde_json::json!({"delay_s": 1.0}),
        serde_json::json!({"garbage": true}),
        serde_json::json!({"status": 503}),
        // A redirect whose body reads as loads is no answer.
        serde_json::json!({"redirect": "http://example.com/v1/loads"}),
        // Each request within the timeout (150 ms), the poll not: one deadline for the poll.
        serde_json::json!({"delays": {"/v1/loads": 0.1, "/get_load": 0.1},
            "statuses": {"/v1/loads": 404}}),
    ] {
        for (k, v) in fault.as_object().unwrap() {
            d[k] = v.clone();
        }
        api.set(&d);
        let s = e.scrape_until(15, |s| {
            value(s, r#"sglang_up{server="decode"}"#) == Some(0.0)
        });
        assert_eq!(
            value(&s, &at("sglang:num_running_reqs", DP0)),
            None,
            "{fault}\n{s}"
        );
        d = decode_v0523();
        api.set(&d);
        e.scrape_until(15, |s| {
            value(s, &at("sglang:num_running_reqs", DP0)) == Some(32.0)
        });
    }
}

#[test]
fn bad_api_arguments_are_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let sample = crate::common::sample("pd-decode-session.log")
        .display()
        .to_string();
    let key = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.display().to_string()
    };
    let (nul, bom) = (key("nul", b"k\x00ey\n"), key("bom", b"\xef\xbb\xbfkey\n"));
    for (args, needle) in [
        (vec!["--sglang.url", "localhost:30000"], "--sglang.url"),
        (
            vec![
                "--sglang.url",
                "a=http://h:1",
                "--sglang.url",
                "a=http://h:2",
            ],
            "two URLs",
        ),
        (
            vec!["--sglang.url", "http://h:1", "--sglang.timeout", "10s"],
            "--sglang.timeout",
        ),
        (
            vec![
                "--sglang.url",
                "http://h:1",
                "--sglang.api-key-file",
                empty.to_str().unwrap(),
            ],
            "not one key",
        ),
        (
            vec!["--once", "--sglang.url", "http://h:1", sample.as_str()],
            "--once",
        ),
        (
            vec!["--sglang.url", "http://u:pw@h:1"],
            "credentials in the URL",
        ),
        (
            vec!["--sglang.url", "http://h:1/v1/loads"],
            "names an endpoint",
        ),
        (
            vec![
                "--sglang.url",
                "http://h:1",
                "--sglang.api-key-file",
                nul.as_str(),
            ],
            "visible ASCII",
        ),
        (
            vec![
                "--sglang.url",
                "http://h:1",
                "--sglang.api-key-file",
                bom.as_str(),
            ],
            "visible ASCII",
        ),
    ] {
        let out = crate::common::run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

/// Repro 26: `/server_info` slower than `--sglang.timeout` (SGLang answers it through the
/// scheduler, busy under a long prefill) while the loads answer at once: the server is up, its
/// loads read, only the info's labels missing; never a failed poll.
#[test]
fn a_slow_server_info_costs_its_labels_never_the_loads() {
    let mut d = decode_v0523();
    d["delays"] = serde_json::json!({"/server_info": 5.0, "/get_server_info": 5.0});
    let api = SglangApi::start("0.5.23", &d, None);
    // A timeout the loads meet on a loaded machine too (the claim is: no poll fails).
    let mut e = Exporter::start(&[
        "--gpu.disable",
        "--sglang.interval",
        "2s",
        "--sglang.timeout",
        "2s",
        "--sglang.url",
        &api.url("decode"),
    ]);
    let logs = e.log_lines();
    let requests = r#"sglang_log_exporter_api_requests_total{server="decode"}"#;
    // Five polls or more, the first one (which asks the info) among them.
    let s = e.scrape_until(60, |s| value(s, requests).is_some_and(|n| n >= 7.0));
    let l = r#"server="decode",model_name="",engine_type="decode",dp_rank="0",pp_rank="0",tp_rank="0",moe_ep_rank="0""#;
    assert_eq!(value(&s, r#"sglang_up{server="decode"}"#), Some(1.0), "{s}");
    assert_eq!(
        value(&s, &at("sglang:num_running_reqs", l)),
        Some(32.0),
        "{s}"
    );
    assert_eq!(
        value(
            &s,
            r#"sglang_log_exporter_api_failures_total{server="decode"}"#
        )
        .unwrap_or(0.0),
        0.0,
        "{s}"
    );
    // The warning names the request that timed out.
    let line = crate::common::wait_log(&logs, "server info cannot be read", 10);
    assert!(line.contains("no answer from /server_info"), "{line}");
}

/// Issue 37 item 4: a release older than every load endpoint (v0.4.1, answering only
/// `/get_server_info`, served by that release's own handler) is up, with its model and capacity.
#[test]
fn a_server_without_a_load_endpoint_is_up_with_its_model_and_capacity() {
    let d = serde_json::json!({
        "server_info": {"model_path": "/models/Qwen2-7B-Instruct", "served_model_name": "qwen2-7b",
            "tp_size": 2},
        "scheduler_info": {"max_total_num_tokens": 412345, "max_req_input_len": 32763}
    });
    let api = SglangApi::start("0.4.1", &d, None);
    let e = Exporter::start(&[
        "--gpu.disable",
        "--sglang.interval",
        "500ms",
        "--sglang.timeout",
        "400ms",
        "--sglang.url",
        &api.url("old"),
    ]);
    let requests = r#"sglang_log_exporter_api_requests_total{server="old"}"#;
    // Polls after the first (which asks both load endpoints and both info paths; the next
    // ones the info paths alone), the last one answered: up, never by chance of a timing.
    let s = e.scrape_until(60, |s| {
        value(s, requests).is_some_and(|n| n >= 8.0)
            && value(s, r#"sglang_up{server="old"}"#) == Some(1.0)
    });
    assert_eq!(value(&s, r#"sglang_up{server="old"}"#), Some(1.0), "{s}");
    let capacity = crate::common::samples(&s, "sglang:max_total_num_tokens");
    assert_eq!(
        capacity,
        vec![
            r#"sglang:max_total_num_tokens{server="old",model_name="qwen2-7b",engine_type="unified",pp_rank="0",tp_rank="0",moe_ep_rank="0"} 412345"#
        ],
        "{s}"
    );
}

/// `--sglang.interval 1s` alone starts (the timeout is min(3 s, interval)); a timeout given
/// above the interval is still refused.
#[test]
fn an_unset_timeout_fits_the_interval_and_a_given_one_must() {
    let api = SglangApi::start("0.5.23", &decode_v0523(), None);
    let e = Exporter::start(&[
        "--gpu.disable",
        "--sglang.interval",
        "1s",
        "--sglang.url",
        &api.url("decode"),
    ]);
    e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(32.0)
    });
    drop(e);
    let out = crate::common::run(&[
        "--gpu.disable",
        "--sglang.interval",
        "1s",
        "--sglang.timeout",
        "2s",
        "--sglang.url",
        &api.url("decode"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--sglang.timeout must be above 0 and at most --sglang.interval"),
        "{err}"
    );
}

/// Repro 23: answers full of what is not read (3.9 MiB of small objects beside a valid
/// `loads` list; 100,000 DP-rank objects, refused) cost their bytes, not the 360 MB a server
/// (1.3 GB for four) they took parsed whole: the peak RSS of four servers polling them stays
/// under 120 MB.
#[test]
fn big_answers_of_small_objects_cost_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let srv = dir.path().join("srv.py");
    std::fs::write(
        &srv,
        r#"
import http.server, sys
small = b'{"loads":[{"dp_rank":0,"num_running_reqs":1}],"x":[' + b",".join([b'{"a":0}'] * int(3.9 * (1 << 20) / 8)) + b"]}"
ranks = b'{"loads":[' + b",".join([b'{"dp_rank":0}'] * 100000) + b"]}"
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        b = (ranks if self.path.startswith("/ranks/") else small) if self.path.endswith("/v1/loads") else b"{}"
        self.send_response(200 if self.path.endswith("/v1/loads") else 404)
        self.send_header("Content-Length", str(len(b))); self.end_headers(); self.wfile.write(b)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
s.serve_forever()
"#,
    )
    .unwrap();
    let port = free_port();
    let mut py = Command::new("python3")
        .arg(&srv)
        .arg(port.to_string())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "srv.py did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let urls: Vec<String> = (1..=4)
        .map(|i| format!("s{i}=http://127.0.0.1:{port}/"))
        .chain([format!("r=http://127.0.0.1:{port}/ranks/")])
        .collect();
    let mut args = vec!["--gpu.disable", "--sglang.interval", "1s"];
    for u in &urls {
        args.extend(["--sglang.url", u]);
    }
    let e = Exporter::start(&args);
    // Three polls of each server or more.
    let s = e.scrape_until(120, |s| {
        ["s1", "s2", "s3", "s4", "r"].iter().all(|n| {
            let r = format!("sglang_log_exporter_api_requests_total{{server=\"{n}\"}}");
            value(s, &r).is_some_and(|v| v >= 6.0)
        })
    });
    let status = std::fs::read_to_string(format!("/proc/{}/status", e.child.id())).unwrap();
    let _ = py.kill();
    let _ = py.wait();
    let kb = |k: &str| -> u64 {
        let l = status.lines().find(|l| l.starts_with(k)).unwrap();
        l.split_whitespace().nth(1).unwrap().parse().unwrap()
    };
    for i in 1..=4 {
        let l = format!(
            r#"server="s{i}",model_name="",engine_type="unified",pp_rank="0",tp_rank="0",moe_ep_rank="0""#
        );
        assert_eq!(
            value(&s, &at("sglang:num_running_reqs", &l)),
            Some(1.0),
            "{s}"
        );
        assert_eq!(
            value(&s, &format!("sglang_up{{server=\"s{i}\"}}")),
            Some(1.0)
        );
    }
    assert_eq!(value(&s, r#"sglang_up{server="r"}"#), Some(0.0));
    let peak = kb("VmHWM:");
    assert!(peak < 120 * 1024, "peak RSS {peak} kB");
}

/// Both load endpoints answering 404 for a while (a restart behind a proxy, an upgrade in
/// progress) reads the server as one without a load endpoint only for as long as they do: the
/// loads are asked again at every poll, and come back once they answer. (It stayed on the
/// server info alone for good, without its running requests, once it had read so.)
#[test]
fn load_endpoints_that_404_in_passing_are_asked_again() {
    let api = SglangApi::start("0.5.23", &decode_v0523(), None);
    let e = exporter(&["--sglang.url", &api.url("decode")]);
    e.scrape_until(30, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(32.0)
    });
    let mut d = decode_v0523();
    d["statuses"] = serde_json::json!({"/v1/loads": 404, "/get_load": 404});
    api.set(&d);
    // Up on its server info, without per-rank values.
    e.scrape_until(15, |s| {
        value(s, r#"sglang_up{server="decode"}"#) == Some(1.0)
            && value(s, &at("sglang:num_running_reqs", DP0)).is_none()
    });
    api.set(&decode_v0523());
    e.scrape_until(15, |s| {
        value(s, &at("sglang:num_running_reqs", DP0)) == Some(32.0)
    });
}
