//! The live page at `/`, rendered by a real browser (Debian's `chromium-headless-shell`,
//! installed by `.ci/run`) against a running exporter: the rank rows and their exact
//! percentages in the DOM, GPU memory bars from a stand-in NVML, and a screenshot kept under
//! `target/` (docs/live-page.png is one). Its JSON, `/api/v1/status`, with exact values.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{root, Exporter};

const GIB: u64 = 1 << 30;

/// The browser: `$CHROMIUM`, else Debian's headless shell.
fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(p);
    }
    for p in [
        "/usr/bin/chromium-headless-shell",
        "/usr/lib/chromium-headless-shell/chromium-headless-shell",
        "/usr/bin/chromium",
    ] {
        if Path::new(p).exists() {
            return PathBuf::from(p);
        }
    }
    panic!("no headless Chromium: apt-get install chromium-headless-shell (.ci/run does)");
}

/// Runs the browser on `url` with `args` (a profile of its own, no sandbox: tests run as
/// root); its stdout.
pub fn browse(profile: &Path, url: &str, args: &[&str]) -> String {
    let out = Command::new(chromium())
        .args([
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1280,760",
            // Enough virtual time for the fetch and the render; the page then idles.
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A log whose lines are from the last seconds (busy ranks) and from 10 minutes ago (idle).
fn logs(dir: &Path) -> (PathBuf, PathBuf) {
    let fmt = |ago: i64| {
        let t = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(ago);
        t.strftime("%Y-%m-%d %H:%M:%S").to_string()
    };
    let (now, old) = (fmt(0), fmt(600));
    let stats = "pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 0, #retracted-req: 0, cuda graph: True";
    let decode = format!(
        "[{old} DP0 TP0] KV Cache is allocated. #tokens: 786432, KV size: 51.47 GB\n\
         [{old} DP1 TP1] KV Cache is allocated. #tokens: 786432, KV size: 51.47 GB\n\
         [{now} DP0 TP0] Decode batch, #running-req: 12, #token: 359254, token usage: 0.46, {stats}, gen throughput (token/s): 812.40, #queue-req: 3\n\
         [{now} DP1 TP1] Decode batch, #running-req: 40, #token: 712345, token usage: 0.91, {stats}, gen throughput (token/s): 1630.20, #queue-req: 7\n"
    );
    // Plain TP2: only TP0 prints stats lines; it went idle 10 minutes ago.
    let chat = format!(
        "[{old} TP0] KV Cache is allocated. #tokens: 100000, K size: 3.05 GB, V size: 3.05 GB\n\
         [{old} TP1] KV Cache is allocated. #tokens: 100000, K size: 3.05 GB, V size: 3.05 GB\n\
         [{old} TP0] Decode batch. #running-req: 2, #token: 1234, token usage: 0.01, gen throughput (token/s): 95.50, #queue-req: 0\n"
    );
    let (d, c) = (dir.join("decode.log"), dir.join("chat.log"));
    std::fs::write(&d, decode).unwrap();
    std::fs::write(&c, chat).unwrap();
    (d, c)
}

fn start(dir: &Path) -> Exporter {
    let lib = crate::gpu::fake_nvml(dir);
    let script = dir.join("nvml-script.txt");
    let mut s = String::from("driver 560.35.03\n");
    for (i, used) in [(0u64, 60 * GIB), (1, 72 * GIB)] {
        s += &format!(
            "gpu {i} GPU-{i}{i}{i}{i} 00000000:{:02X}:00.0 {} 0 {} {used} NVIDIA H100 80GB HBM3\n",
            0x10 + i,
            80 * GIB,
            80 * GIB - used,
        );
    }
    std::fs::write(&script, s).unwrap();
    let (decode, chat) = logs(dir);
    Exporter::start_env(
        &[
            "--gpu.nvml-library",
            lib.to_str().unwrap(),
            "--gpu.interval",
            "100ms",
            "--gpus",
            "decode=0,1",
            // The decode ranks' lines are from the start: busy however long a loaded machine
            // takes to sample and start a browser (the chat ranks' are 10 minutes old).
            "--idle-after",
            "5m",
            decode.to_str().unwrap(),
            chat.to_str().unwrap(),
        ],
        &[("FAKE_NVML_SCRIPT", script.as_os_str())],
    )
}

/// Polls the JSON until every rank has a history sample and the GPUs are in.
fn status_until_sampled(e: &Exporter) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, ct, body) = e.get("/api/v1/status");
        assert_eq!((code, ct.as_str()), (200, "application/json"), "{body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let ranks: Vec<&serde_json::Value> = v["servers"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["ranks"].as_array().unwrap())
            .collect();
        let sampled = ranks.len() == 4
            && ranks
                .iter()
                .all(|r| !r["history"].as_array().unwrap().is_empty());
        if sampled && v["gpus"].as_array().unwrap().len() == 2 && v["ready"] == true {
            return v;
        }
        assert!(Instant::now() < deadline, "not sampled within 30 s: {v:#}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn rank<'a>(v: &'a serde_json::Value, server: &str, rank: &str) -> &'a serde_json::Value {
    v["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == server)
        .and_then(|s| {
            s["ranks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["rank"] == rank)
        })
        .unwrap_or_else(|| panic!("no {server} {rank} in {v:#}"))
}

#[test]
fn status_json_has_each_rank_with_exact_values() {
    let dir = tempfile::tempdir().unwrap();
    let e = start(dir.path());
    let v = status_until_sampled(&e);
    let r = rank(&v, "decode", "DP0 TP0");
    assert_eq!(r["kv_share"], 359254.0 / 786432.0);
    assert_eq!(r["kv_percent"], "45.7%");
    assert_eq!(r["used_tokens"], 359254.0);
    assert_eq!(r["capacity_tokens"], 786432.0);
    assert_eq!(
        (r["running"].clone(), r["queued"].clone()),
        (12.0.into(), 3.0.into())
    );
    assert_eq!(r["gen_throughput"], 812.4);
    assert_eq!(r["state"], "busy");
    assert_eq!(r["labels"]["dp_rank"], "0");
    let h = r["history"].as_array().unwrap();
    assert_eq!(h.last().unwrap()[1], 359254.0 / 786432.0);
    assert_eq!(rank(&v, "decode", "DP1 TP1")["kv_percent"], "90.6%");
    // Idle: activity reads 0, as on /metrics.
    let tp0 = rank(&v, "chat", "TP0");
    assert_eq!(
        (tp0["state"].clone(), tp0["kv_percent"].clone()),
        ("idle".into(), "0.0%".into())
    );
    let tp1 = rank(&v, "chat", "TP1");
    assert_eq!(tp1["state"], "no-stats");
    assert_eq!(
        tp1["note"],
        "no stats lines (only TP0 prints under plain TP)"
    );
    assert_eq!(tp1["kv_share"], serde_json::Value::Null);
    assert_eq!(tp1["capacity_tokens"], 100000.0);
    let g = &v["gpus"][1];
    assert_eq!(g["used_bytes"], (72 * GIB) as f64);
    assert_eq!(g["total_bytes"], (80 * GIB) as f64);
    assert_eq!(g["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(v["telemetry_path"], "/metrics");
    assert_eq!(v["history_seconds"], 900.0);
}

/// The text of the first element after `marker` in `html` whose opening tag contains `tag`.
pub(crate) fn text_after<'a>(html: &'a str, marker: &str, tag: &str) -> &'a str {
    let at = html
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker:?} in\n{html}"));
    let rest = &html[at..];
    let open = rest
        .find(tag)
        .unwrap_or_else(|| panic!("no {tag:?} after {marker:?}"));
    let rest = &rest[open..];
    let start = rest.find('>').unwrap() + 1;
    let end = rest[start..].find('<').unwrap() + start;
    &rest[start..end]
}

#[test]
fn live_page_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let e = start(dir.path());
    status_until_sampled(&e);
    let url = format!("http://127.0.0.1:{}/", e.port);
    let dom = browse(&dir.path().join("profile"), &url, &["--dump-dom"]);
    // Every rank has its row, in rank order, with its exact share and counts.
    let rows: Vec<&str> = dom
        .match_indices("<tr class=\"rank ")
        .map(|(i, _)| {
            let tag = &dom[i..];
            &tag[..tag.find('>').unwrap() + 1]
        })
        .collect();
    assert_eq!(
        rows,
        [
            r#"<tr class="rank idle" data-server="chat" data-rank="TP0">"#,
            r#"<tr class="rank no-stats" data-server="chat" data-rank="TP1">"#,
            r#"<tr class="rank busy" data-server="decode" data-rank="DP0 TP0">"#,
            r#"<tr class="rank busy" data-server="decode" data-rank="DP1 TP1">"#,
        ]
    );
    let row = |r: &str| format!("data-server=\"decode\" data-rank=\"{r}\"");
    assert_eq!(
        text_after(&dom, &row("DP0 TP0"), "class=\"kv-pct\""),
        "45.7%"
    );
    assert_eq!(
        text_after(&dom, &row("DP0 TP0"), "class=\"tokens\""),
        "359,254 / 786,432 tokens"
    );
    assert_eq!(
        text_after(&dom, &row("DP0 TP0"), "class=\"num running\""),
        "12"
    );
    assert_eq!(
        text_after(&dom, &row("DP0 TP0"), "class=\"num queued\""),
        "3"
    );
    assert_eq!(
        text_after(&dom, &row("DP0 TP0"), "class=\"num throughput\""),
        "812"
    );
    assert_eq!(
        text_after(&dom, &row("DP1 TP1"), "class=\"kv-pct\""),
        "90.6%"
    );
    assert!(
        dom.contains(r#"<span class="fill bad" style="width:90.58%">"#),
        "{dom}"
    );
    let tp1 = "data-server=\"chat\" data-rank=\"TP1\"";
    assert_eq!(
        text_after(&dom, tp1, "class=\"state no-stats\""),
        "no stats lines (only TP0 prints under plain TP)"
    );
    assert_eq!(text_after(&dom, tp1, "class=\"kv-pct\""), "-");
    assert!(text_after(
        &dom,
        "data-server=\"chat\" data-rank=\"TP0\"",
        "class=\"state idle\""
    )
    .starts_with("idle 10m"));
    // A chart line per rank with a share (not TP1: it has none), GPU memory bars, the ready
    // badge, the metrics link.
    assert_eq!(dom.matches("<polyline class=\"line\"").count(), 3, "{dom}");
    assert_eq!(
        text_after(&dom, "data-gpu=\"0\"", "class=\"kv-pct\""),
        "75.0%"
    );
    assert_eq!(
        text_after(&dom, "data-gpu=\"1\"", "class=\"tokens\""),
        "72.0 / 80.0 GiB"
    );
    assert_eq!(text_after(&dom, "id=\"ready\"", ""), "ready");
    assert!(
        dom.contains(r#"<a id="metrics-link" href="metrics">Metrics</a>"#),
        "{dom}"
    );
    // No banner: nothing down, nothing catching up, no failed refresh.
    assert!(dom.contains(r#"<div id="banners"></div>"#), "{dom}");
    // The screenshot, kept for people (docs/live-page.png is one).
    let shot = root().join("target").join("live-page.png");
    let _ = std::fs::remove_file(&shot);
    browse(
        &dir.path().join("profile"),
        &url,
        &[&format!("--screenshot={}", shot.display())],
    );
    let png = std::fs::read(&shot).expect("the screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

/// Polls the status JSON until `pred` holds; that status.
fn status_until(e: &Exporter, pred: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let v: serde_json::Value = serde_json::from_str(&e.get("/api/v1/status").2).unwrap();
        if pred(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "not within 30 s: {v:#}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 38.5: an input that cannot be read, an SGLang API that does not answer and an NVML
/// that does not load are banners and a red badge, never a green "ready"; `/-/ready` stays 503
/// (saying which input and why) until the file can be read, then answers 200.
#[test]
fn unreadable_input_api_down_and_no_nvml_are_banners_and_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("decode.log");
    let closed = crate::common::free_port();
    let api = format!("http://127.0.0.1:{closed}");
    let nolib = dir.path().join("no-libnvidia-ml.so.1");
    let e = Exporter::start(&[
        "--gpu.nvml-library",
        nolib.to_str().unwrap(),
        "--sglang.url",
        &api,
        "--sglang.interval",
        "200ms",
        missing.to_str().unwrap(),
    ]);
    let v = status_until(&e, |v| {
        !v["unreadable"].as_array().unwrap().is_empty()
            && !v["api_down"].as_array().unwrap().is_empty()
            && !v["gpu_unavailable"].is_null()
            && v["pending"].as_array().unwrap().is_empty()
    });
    let path = missing.display().to_string();
    let why = "No such file or directory (os error 2)";
    assert_eq!(v["ready"], false);
    assert_eq!(
        v["unreadable"],
        serde_json::json!([{"source": path, "why": why}])
    );
    assert_eq!(
        v["api_down"],
        serde_json::json!([format!("127.0.0.1:{closed}")])
    );
    let gpu = v["gpu_unavailable"].as_str().unwrap();
    assert!(gpu.starts_with("NVML init failed: "), "{gpu}");
    let (code, _, body) = e.get("/-/ready");
    assert_eq!(
        (code, body.as_str()),
        (
            503,
            format!("Not ready: cannot read {path} ({why}).\n").as_str()
        )
    );
    let url = format!("http://127.0.0.1:{}/", e.port);
    let dom = browse(&dir.path().join("profile"), &url, &["--dump-dom"]);
    assert!(
        dom.contains(r#"<span id="ready" class="badge bad">cannot read input</span>"#),
        "{dom}"
    );
    assert!(
        dom.contains(&format!(
            r#"<div class="banner unreadable">Cannot read <b><bdi>{path}</bdi></b>: <bdi>{why}</bdi> (not ready until it can be read).</div>"#
        )),
        "{dom}"
    );
    assert!(
        dom.contains(&format!(
            r#"<div class="banner api-down">SGLang API down: <span><bdi>127.0.0.1:{closed}</bdi></span> (--sglang.url does not answer; activity withdrawn).</div>"#
        )),
        "{dom}"
    );
    let lib = nolib.display();
    assert!(
        dom.contains(&format!(
            r#"<div class="banner info gpu-unavailable">GPU memory unavailable: <bdi>NVML init failed: a libloading error occurred: {lib}: cannot open shared object file: No such file or directory</bdi> (see the exporter's log for the fixes, or pass --gpu.disable on a host without NVIDIA GPUs).</div>"#
        )),
        "{dom}"
    );
    // The file appears: readable, so ready (the API is no input it must read).
    std::fs::write(&missing, "").unwrap();
    status_until(&e, |v| v["unreadable"].as_array().unwrap().is_empty());
    let (code, _, body) = e.get("/-/ready");
    assert_eq!((code, body.as_str()), (200, "Ready.\n"));
}
