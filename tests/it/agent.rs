//! deploy/agent/: Prometheus 2.42 in agent mode on the shipped configuration (only its ports,
//! receiver URL and scrape interval rewritten) and with the shipped unit's feature flags,
//! scraping a real exporter and remote-writing into a second Prometheus, the remote-write
//! receiver. The receiver is killed for 60 s while the exporter's values change; afterwards
//! every sample scraped during the outage is in the receiver, at its time, with its value.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::{append, free_port, root, unit_exposure, value, Exporter};
use crate::promtools::{get, labels, prometheus_on, query, wait_ready, Proc};

/// The host name the agent's unit would pass (`SGLANG_AGENT_HOST=%H`).
const HOST: &str = "gpu-node-7";
/// How long the receiver is down.
const OUTAGE: Duration = Duration::from_secs(60);

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A decode stats line of rank `DPdp TPdp`, stamped now (UTC).
fn decode(dp: u32, running: u32, tokens: u32, usage: &str) -> String {
    let t = jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M:%S");
    format!(
        "[{t} DP{dp} TP{dp}] Decode batch, #running-req: {running}, #token: {tokens}, token usage: \
         {usage}, cuda graph: True, gen throughput (token/s): 1635.11, #queue-req: 0\n"
    )
}

/// The exporter's series `name` of rank `dp` of server `decode`, as it prints it.
fn series(name: &str, dp: u32) -> String {
    format!(
        "{name}{{server=\"decode\",model_name=\"\",engine_type=\"unified\",dp_rank=\"{dp}\",\
         pp_rank=\"0\",tp_rank=\"{dp}\",moe_ep_rank=\"0\"}}"
    )
}

/// `text` with the one occurrence of `from` replaced: the test fails when the shipped file no
/// longer has it.
fn replace_once(text: &str, from: &str, to: &str) -> String {
    assert_eq!(
        text.matches(from).count(),
        1,
        "{from:?} once in the shipped file:\n{text}"
    );
    text.replacen(from, to, 1)
}

/// The raw samples (time, value) of the range selector `q` (e.g. `m[70s]`) at `time`.
fn raw(recv: &Proc, q: &str, time: f64) -> Vec<(f64, f64)> {
    let url = format!(
        "http://127.0.0.1:{}/api/v1/query?query={}&time={time}",
        recv.port,
        url::form_urlencoded::byte_serialize(q.as_bytes()).collect::<String>()
    );
    let (code, body) = get(&url);
    assert_eq!(code, 200, "{url}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let result = v["data"]["result"].as_array().expect("a matrix");
    assert_eq!(result.len(), 1, "one series for {q}: {body}");
    result[0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p[0].as_f64().unwrap(),
                p[1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// The value of the one series `q` selects at the receiver (at `time`, else now).
fn at(recv: &Proc, q: &str, time: Option<f64>) -> Option<f64> {
    let r = query(recv, q, time);
    (r.len() == 1).then(|| r[0].1)
}

/// Polls `f` (up to `secs` s); on timeout panics with the agent's log.
fn wait_for<T>(secs: u64, what: &str, agent_log: &Path, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(agent_log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            panic!(
                "timed out waiting for {what}; the agent's log, last lines first:\n{}",
                tail.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn agent_remote_writes_exact_values_and_rides_out_a_60s_receiver_outage() {
    let dir = tempfile::tempdir().unwrap();
    let shipped = root().join("deploy/agent");
    let config = std::fs::read_to_string(shipped.join("prometheus-agent.yml")).unwrap();
    let unit = std::fs::read_to_string(shipped.join("sglang-prometheus-agent.service")).unwrap();

    // The shipped configuration is valid for agent mode, and the unit and it agree: the unit's
    // listen address is what the agent scrapes of itself.
    let out = Command::new("promtool")
        .args(["check", "config", "--agent"])
        .arg(shipped.join("prometheus-agent.yml"))
        .output()
        .expect("run promtool (Debian package prometheus)");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // ExecStart= and its continuation lines.
    let exec: Vec<&str> = unit
        .lines()
        .skip_while(|l| !l.starts_with("ExecStart="))
        .scan(true, |more, l| {
            let this = more.then_some(l);
            *more = l.ends_with('\\');
            this
        })
        .collect();
    let flag = |name: &str| -> String {
        exec.iter()
            .flat_map(|l| l.split_whitespace())
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or_else(|| panic!("{name} in the unit's ExecStart"))
            .to_string()
    };
    let features = flag("--enable-feature=");
    let agent_listen = flag("--web.listen-address=");
    assert!(unit.contains("Environment=SGLANG_AGENT_HOST=%H"), "{unit}");

    // The exporter, following a decode server's log of two DP ranks.
    let log = dir.path().join("decode.log");
    append(&log, decode(0, 32, 11179, "0.08").as_bytes());
    append(&log, decode(1, 7, 2000, "0.25").as_bytes());
    let e = Exporter::start(&["--gpu.disable", "--idle-after", "1h", log.to_str().unwrap()]);
    let (running0, usage0) = (
        series("sglang:num_running_reqs", 0),
        series("sglang:token_usage", 0),
    );
    let (running1, usage1) = (
        series("sglang:num_running_reqs", 1),
        series("sglang:token_usage", 1),
    );
    let first = e.scrape_until(10, |s| {
        value(s, &running0) == Some(32.0) && value(s, &usage1) == Some(0.25)
    });

    // The receiver.
    let recv_dir = dir.path().join("receiver");
    std::fs::create_dir(&recv_dir).unwrap();
    let recv_port = free_port();
    let receiver = |port| {
        prometheus_on(
            "scrape_configs: []\n",
            &recv_dir,
            port,
            &["--web.enable-remote-write-receiver"],
        )
    };
    let mut recv = receiver(recv_port);

    // The agent, on the shipped file with this test's ports, URL and a 1 s interval.
    let agent_port = free_port();
    let mut cfg = replace_once(&config, "scrape_interval: 15s", "scrape_interval: 1s");
    cfg = replace_once(&cfg, "scrape_timeout: 10s", "scrape_timeout: 1s");
    cfg = replace_once(
        &cfg,
        "\"127.0.0.1:8771\"",
        &format!("\"127.0.0.1:{}\"", e.port),
    );
    cfg = replace_once(
        &cfg,
        &format!("\"{agent_listen}\""),
        &format!("\"127.0.0.1:{agent_port}\""),
    );
    cfg = replace_once(
        &cfg,
        "https://remote-write.example.com/api/v1/write",
        &format!("http://127.0.0.1:{recv_port}/api/v1/write"),
    );
    let cfg_path = dir.path().join("agent.yml");
    std::fs::write(&cfg_path, cfg).unwrap();
    let agent_log = dir.path().join("agent.log");
    let child = Command::new("prometheus")
        .arg(format!("--enable-feature={features}"))
        .arg(format!("--config.file={}", cfg_path.display()))
        .arg(format!(
            "--storage.agent.path={}",
            dir.path().join("agent-wal").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{agent_port}"))
        .env("SGLANG_AGENT_HOST", HOST)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&agent_log).unwrap())
        .spawn()
        .expect("start prometheus (Debian package prometheus)");
    let mut agent = Proc {
        child,
        port: agent_port,
    };
    wait_ready(&mut agent, "the Prometheus agent");

    // What the receiver stores: the exporter's values, exactly, with the host's labels and
    // `instance` named after the host (the shipped write relabelling).
    wait_for(60, "the first samples at the receiver", &agent_log, || {
        at(&recv, "sglang:num_running_reqs{dp_rank=\"1\"}", None)
    });
    let got = query(&recv, "sglang:num_running_reqs{dp_rank=\"0\"}", None);
    let instance = format!("{HOST}:{}", e.port);
    assert_eq!(
        got,
        vec![(
            labels(&[
                ("__name__", "sglang:num_running_reqs"),
                ("server", "decode"),
                ("engine_type", "unified"),
                ("dp_rank", "0"),
                ("pp_rank", "0"),
                ("tp_rank", "0"),
                ("moe_ep_rank", "0"),
                ("job", "sglang"),
                ("instance", &instance),
                ("host", HOST),
                ("cluster", "my-cluster"),
            ]),
            32.0
        )]
    );
    for (q, s) in [
        ("sglang:num_running_reqs{dp_rank=\"1\"}", &running1),
        ("sglang:token_usage{dp_rank=\"0\"}", &usage0),
        ("sglang:token_usage{dp_rank=\"1\"}", &usage1),
        (
            "sglang:num_used_tokens{dp_rank=\"0\"}",
            &series("sglang:num_used_tokens", 0),
        ),
    ] {
        assert_eq!(at(&recv, q, None), value(&first, s), "{q}");
    }
    assert_eq!(
        at(&recv, "sglang:token_usage{dp_rank=\"0\"}", None),
        Some(0.08)
    );
    assert_eq!(
        at(&recv, "sglang:num_used_tokens{dp_rank=\"0\"}", None),
        Some(11179.0)
    );
    // The agent's own series go along (its remote-write backlog, seen centrally).
    let self_instance = format!("{HOST}:{agent_port}");
    wait_for(30, "the agent's own series", &agent_log, || {
        at(
            &recv,
            &format!("up{{job=\"prometheus-agent\",instance=\"{self_instance}\"}}"),
            None,
        )
        .filter(|v| *v == 1.0)
    });

    // The outage: the receiver is killed; DP0's values change three times while it is down.
    // Each phase (running, token usage) lasts from when the exporter was seen serving it to
    // when the next line was written.
    drop(recv);
    let down = now();
    let started = Instant::now();
    let mut phases = vec![(32u32, "0.08", down, f64::NAN)];
    for (i, (running, tokens, usage)) in [
        (40u32, 13000u32, "0.11"),
        (41, 14000, "0.12"),
        (42, 15000, "0.13"),
    ]
    .into_iter()
    .enumerate()
    {
        let at = Duration::from_secs(10 + 15 * i as u64);
        std::thread::sleep(at.saturating_sub(started.elapsed()));
        phases.last_mut().unwrap().3 = now();
        append(&log, decode(0, running, tokens, usage).as_bytes());
        e.scrape_until(10, |s| value(s, &running0) == Some(running as f64));
        phases.push((running, usage, now(), f64::NAN));
    }
    std::thread::sleep(OUTAGE.saturating_sub(started.elapsed()));
    phases.last_mut().unwrap().3 = now();
    recv = receiver(recv_port);
    let up = now();

    // Every sample of the outage arrives: remote write keeps each series in order, so once one
    // scraped after the restart is there, all before it are.
    wait_for(60, "samples from after the restart", &agent_log, || {
        at(
            &recv,
            "timestamp(sglang:num_running_reqs{dp_rank=\"0\"})",
            None,
        )
        .filter(|t| *t > up + 1.0)
    });
    let window = (up - down).ceil() + 5.0;
    let during = |dp: u32| -> Vec<(f64, f64)> {
        raw(
            &recv,
            &format!("sglang:num_running_reqs{{dp_rank=\"{dp}\"}}[{window}s]"),
            up,
        )
        .into_iter()
        .filter(|(t, _)| (down..=up).contains(t))
        .collect()
    };
    let outage = during(0);
    // One sample a second through the outage: no gap longer than a late scrape's.
    let mut times: Vec<f64> = outage.iter().map(|(t, _)| *t).collect();
    times.insert(0, down);
    times.push(up);
    assert!(
        times.windows(2).all(|w| w[1] - w[0] <= 2.5),
        "a gap in the outage window {down}..{up}: {outage:?}"
    );
    assert!(outage.len() >= 55, "{} samples: {outage:?}", outage.len());
    // Each with the value the exporter served at its time (half a second's margin before a
    // change, for a scrape that began before the line was written and was answered after).
    for (t, v) in &outage {
        assert!(
            [32.0, 40.0, 41.0, 42.0].contains(v),
            "{v} at {t}: {outage:?}"
        );
    }
    for (running, usage, from, to) in &phases {
        let inside: Vec<f64> = outage
            .iter()
            .filter(|(t, _)| *t >= *from && *t <= *to - 0.5)
            .map(|(_, v)| *v)
            .collect();
        assert!(
            inside.len() + 2 >= (*to - *from) as usize,
            "{running} in {from}..{to}: {outage:?}"
        );
        assert!(
            inside.iter().all(|v| *v == *running as f64),
            "{running} in {from}..{to}: {outage:?}"
        );
        // Token usage too, in the middle of the phase.
        let mid = (from + to) / 2.0;
        let q = "sglang:token_usage{dp_rank=\"0\"}";
        assert_eq!(
            at(&recv, q, Some(mid)),
            Some(usage.parse().unwrap()),
            "{q} at {mid}"
        );
    }
    // The unchanged rank is whole through the outage too.
    let dp1 = during(1);
    assert!(
        dp1.len() >= 55 && dp1.iter().all(|(_, v)| *v == 7.0),
        "{dp1:?}"
    );

    // And now: the receiver holds what the exporter serves.
    let last = e.scrape();
    for (q, s) in [
        ("sglang:num_running_reqs{dp_rank=\"0\"}", &running0),
        ("sglang:num_running_reqs{dp_rank=\"1\"}", &running1),
        ("sglang:token_usage{dp_rank=\"0\"}", &usage0),
        ("sglang:token_usage{dp_rank=\"1\"}", &usage1),
    ] {
        assert_eq!(at(&recv, q, None), value(&last, s), "{q}");
    }
    assert_eq!(value(&last, &running0), Some(42.0));
    assert_eq!(value(&last, &usage0), Some(0.13));
}

/// The shipped unit: `systemd-analyze verify` accepts it as it is (ExecStart is Debian's
/// /usr/bin/prometheus, installed for these tests), and its hardening rates exposure 1.6, as
/// deploy/agent/README.md says. Verified only: no systemd runs here to start it.
#[test]
fn agent_unit_verifies_with_exposure_1_6() {
    let unit = root().join("deploy/agent/sglang-prometheus-agent.service");
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .expect("systemd-analyze");
    let err = String::from_utf8_lossy(&out.stderr);
    // Unknown keys are only warned about, so the output must be empty too.
    assert!(out.status.success() && err.trim().is_empty(), "{err}");
    let (score, text) = unit_exposure(&unit);
    assert_eq!(score, Some(1.6), "{text}");
}
