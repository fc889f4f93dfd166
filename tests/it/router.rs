//! `--router.url`: SGLang's router beside its servers, joined by URL. The router is the real
//! one, sgl-model-gateway `smg` 1.13.0 from PyPI (its Rust binary, installed by
//! tests/sglang_api/setup.sh), in front of two stand-in SGLang servers (tests/sglang_api/serve.py:
//! SGLang's released `/health`, `/v1/loads` and `/generate` code, and `/server_info`'s shape)
//! whose tokenizer-manager stand-in holds `/generate` requests while the test says so. The exporter reads one server's API (`a`) and the router's
//! `/metrics`; the other server is a worker no log or API covers.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::api::{api_root, SglangApi};
use crate::common::{free_port, run, value, Exporter};

/// The real router, killed on drop.
struct Router {
    child: Child,
    port: u16,
    metrics_port: u16,
}

impl Router {
    /// `smg launch` over `workers`: round robin, health checked every second (one failure
    /// marks a worker unhealthy), its circuit opened by two failures, no retries.
    fn start(workers: &[String], extra: &[&str]) -> Router {
        let (port, metrics_port) = (free_port(), free_port());
        let mut cmd = Command::new(api_root().join("venv/bin/smg"));
        cmd.arg("launch").arg("--worker-urls").args(workers).args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--prometheus-host",
            "127.0.0.1",
            "--prometheus-port",
            &metrics_port.to_string(),
            "--policy",
            "round_robin",
            "--health-check-interval-secs",
            "1",
            "--health-failure-threshold",
            "1",
            "--cb-failure-threshold",
            "2",
            "--disable-retries",
        ]);
        cmd.args(extra).stdout(Stdio::null()).stderr(Stdio::null());
        let child = cmd
            .spawn()
            .expect("start smg (run tests/sglang_api/setup.sh)");
        Router {
            child,
            port,
            metrics_port,
        }
    }

    /// The router's own exposition.
    fn metrics(&self) -> String {
        ureq::get(&format!("http://127.0.0.1:{}/metrics", self.metrics_port))
            .timeout(Duration::from_secs(5))
            .call()
            .ok()
            .and_then(|r| r.into_string().ok())
            .unwrap_or_default()
    }

    /// Waits until the router's exposition satisfies `pred`; that exposition.
    fn metrics_until(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = self.metrics();
            if pred(&m) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "the router: {what} did not happen; its /metrics:\n{m}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Once every one of `workers` reads healthy on the router, an exporter reading the API
    /// `api` (`NAME=URL`) and this router (named `gw`), both every 200 ms.
    fn exporter_beside(&self, workers: &[&str], api: &str) -> Exporter {
        self.metrics_until("every worker healthy", |m| {
            workers
                .iter()
                .all(|w| router_value(m, "smg_worker_health", w) == Some(1.0))
        });
        let e = Exporter::start(&[
            "--gpu.disable",
            "--sglang.url",
            api,
            "--sglang.interval",
            "200ms",
            "--router.url",
            &format!("gw=http://127.0.0.1:{}", self.metrics_port),
            "--router.interval",
            "200ms",
        ]);
        e.wait_ready();
        e
    }

    /// POSTs a `/generate` through the router on a thread of its own; its status.
    fn generate(&self) -> std::thread::JoinHandle<u16> {
        let url = format!("http://127.0.0.1:{}/generate", self.port);
        std::thread::spawn(move || {
            match ureq::post(&url)
                .timeout(Duration::from_secs(60))
                .set("Content-Type", "application/json")
                .send_string(r#"{"text": "hi", "sampling_params": {"max_new_tokens": 1}}"#)
            {
                Ok(r) => r.status(),
                Err(ureq::Error::Status(s, _)) => s,
                Err(e) => panic!("POST {url}: {e}"),
            }
        })
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A unified server with one rank at half its KV cache (the router's overload protection,
/// `--overload-token-usage-threshold`, leaves it in the rotation).
fn server(hold: bool) -> serde_json::Value {
    serde_json::json!({
        "loads": [{"dp_rank": 0, "num_running_reqs": 2, "num_waiting_reqs": 0,
            "num_used_tokens": 50000, "max_total_num_tokens": 100000, "token_usage": 0.5}],
        "server_info": {"model_path": "/models/m", "served_model_name": "m", "tp_size": 1,
            "dp_size": 1, "pp_size": 1},
        "scheduler_info": {"max_total_num_tokens": 100000},
        "hold": hold
    })
}

/// The router's sample of `family` for `worker`.
fn router_value(m: &str, family: &str, worker: &str) -> Option<f64> {
    value(m, &format!("{family}{{worker=\"{worker}\"}}"))
}

/// Our series of `family` for `worker` joined to `server` ("" where not covered).
fn ours(server: &str, worker: &str) -> impl Fn(&str) -> String {
    let (server, worker) = (server.to_string(), worker.to_string());
    move |family| format!("{family}{{server=\"{server}\",router=\"gw\",worker=\"{worker}\"}}")
}

#[test]
fn router_workers_join_their_servers_by_url() {
    let a = SglangApi::start("0.5.23", &server(false), None);
    let b = SglangApi::start("0.5.23", &server(false), None);
    let (wa, wb) = (
        format!("http://127.0.0.1:{}", a.port),
        format!("http://127.0.0.1:{}", b.port),
    );
    let router = Router::start(&[wa.clone(), wb.clone()], &[]);
    let e = router.exporter_beside(&[&wa, &wb], &a.url("a"));
    let (sa, sb) = (ours("a", &wa), ours("", &wb));

    // Four requests held by the servers, sent one after the other: round robin gives each
    // worker two.
    a.set(&server(true));
    b.set(&server(true));
    let mut held = Vec::new();
    for n in 1..=4 {
        held.push(router.generate());
        router.metrics_until(&format!("{n} requests in flight"), |m| {
            let f = |w| router_value(m, "smg_worker_requests_active", w).unwrap_or(0.0);
            f(&wa) + f(&wb) == f64::from(n)
        });
    }
    let s = e.scrape_until(30, |s| {
        value(s, &sa("sglang_router_worker_requests_active")) == Some(2.0)
            && value(s, &sb("sglang_router_worker_requests_active")) == Some(2.0)
    });
    for (family, va, vb) in [
        ("sglang_router_worker_requests_active", 2.0, 2.0),
        ("sglang_router_worker_healthy", 1.0, 1.0),
        ("sglang_router_worker_circuit_state", 0.0, 0.0),
    ] {
        assert_eq!(value(&s, &sa(family)), Some(va), "{family} a\n{s}");
        assert_eq!(value(&s, &sb(family)), Some(vb), "{family} b\n{s}");
    }
    assert_eq!(value(&s, r#"sglang_router_up{router="gw"}"#), Some(1.0));
    // The join's other side: the server's url, and its KV cache.
    assert!(
        s.contains(&format!(",url=\"{wa}\"}} 1")),
        "sglang_server_info of a has no url {wa}\n{s}"
    );

    // `top` shows the router's word under the server, and the uncovered worker apart.
    let url = format!("http://127.0.0.1:{}/metrics", e.port);
    let out = run(&["top", "--snapshot", "--width", "160", "--url", &url]);
    let frame = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = frame.lines().collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no {needle:?} in\n{frame}"))
    };
    let instance = format!("127.0.0.1:{}", e.port);
    let wline =
        |w: &str| format!("  router gw @ {instance} → {w}: 2 in flight, healthy, circuit closed");
    assert_eq!(
        lines[at(&format!("a  unified · m · @ {instance}")) + 1],
        wline(&wa),
        "{frame}"
    );
    let uncovered = at("router workers not covered");
    assert_eq!(lines[uncovered + 1], wline(&wb), "{frame}");

    // The live page's JSON and DOM.
    let (_, _, body) = e.get("/api/v1/status");
    let st: serde_json::Value = serde_json::from_str(&body).unwrap();
    let srv = st["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "a")
        .unwrap_or_else(|| panic!("{st}"));
    let worker = |w: &str| {
        serde_json::json!({"router": "gw", "worker": w, "requests_active": 2.0,
            "health": "healthy", "circuit": "closed",
            "summary": "router gw: 2 in flight, healthy, circuit closed"})
    };
    assert_eq!(
        srv["router_workers"],
        serde_json::json!([worker(&wa)]),
        "{st}"
    );
    assert_eq!(
        st["uncovered_workers"],
        serde_json::json!([worker(&wb)]),
        "{st}"
    );
    let dir = tempfile::tempdir().unwrap();
    let dom = crate::livepage::browse(
        &dir.path().join("profile"),
        &format!("http://127.0.0.1:{}/", e.port),
        &["--dump-dom"],
    );
    for w in [&wa, &wb] {
        let marker = format!("data-worker=\"{w}\"");
        assert_eq!(
            crate::livepage::text_after(&dom, &marker, "class=\"rw-flight\""),
            "2"
        );
        assert_eq!(
            crate::livepage::text_after(&dom, &marker, "class=\"rw-health healthy\""),
            "healthy"
        );
        assert_eq!(
            crate::livepage::text_after(&dom, &marker, "class=\"rw-circuit closed\""),
            "closed"
        );
    }
    let section_a = dom.find("data-server=\"a\"").expect("a's section");
    let uncovered = dom
        .find("class=\"uncovered\"")
        .expect("the uncovered section");
    assert!(dom[section_a..uncovered].contains(&format!("data-worker=\"{wa}\"")));
    assert!(dom[uncovered..].contains(&format!("data-worker=\"{wb}\"")));

    // A real Prometheus scraping the exporter and the router answers the dashboard's router
    // panels: the exporter's joined series, and the router's own joined by URL.
    let prom = crate::promtools::prometheus(
        &format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: sglang\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n  - job_name: smg\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n",
            e.port, router.metrics_port
        ),
        dir.path(),
    );
    crate::promtools::poll(
        60,
        "Prometheus to scrape the exporter and the router",
        || {
            let q = |e: &str| crate::promtools::query(&prom, e, None).len();
            (q("sglang_router_worker_requests_active == 2") == 2
                && q("smg_worker_requests_active == 2") == 2
                && q("sglang:token_usage") == 1)
                .then_some(())
        },
    );
    let panels: Vec<(String, String)> = crate::monitoring::dashboard_queries()
        .into_iter()
        .filter(|(p, _)| p.starts_with("Router: "))
        .collect();
    let answers: Vec<Vec<(String, String, f64)>> = panels
        .iter()
        .map(|(_, q)| {
            let mut r: Vec<(String, String, f64)> = crate::promtools::query(&prom, q, None)
                .into_iter()
                .map(|(l, v)| {
                    let get = |k: &str| l.get(k).cloned().unwrap_or_default();
                    (get("server"), get("worker"), v)
                })
                .collect();
            r.sort_by(|x, y| x.partial_cmp(y).unwrap());
            r
        })
        .collect();
    let row = |s: &str, w: &str, v: f64| (s.to_string(), w.to_string(), v);
    assert_eq!(
        answers,
        [
            vec![row("", &wb, 2.0), row("a", &wa, 2.0)],
            vec![row("a", &wa, 2.0)],
            vec![row("", &wb, 1.0), row("a", &wa, 1.0)],
            vec![row("", &wb, 0.0), row("a", &wa, 0.0)],
            vec![row("a", "", 0.5)],
        ],
        "{panels:?}"
    );
    drop(prom);

    // Released: nothing in flight.
    a.set(&server(false));
    b.set(&server(false));
    for h in held {
        assert_eq!(h.join().unwrap(), 200);
    }
    e.scrape_until(30, |s| {
        value(s, &sa("sglang_router_worker_requests_active")) == Some(0.0)
            && value(s, &sb("sglang_router_worker_requests_active")) == Some(0.0)
    });

    // b fails every request: two failures open its circuit. a's health check fails: unhealthy.
    let mut failing = server(false);
    failing["statuses"] = serde_json::json!({"/generate": 500});
    b.set(&failing);
    let deadline = Instant::now() + Duration::from_secs(30);
    while router_value(&router.metrics(), "smg_worker_cb_state", &wb) != Some(1.0) {
        assert!(Instant::now() < deadline, "b's circuit did not open");
        router.generate().join().unwrap();
    }
    let mut sick = server(false);
    sick["statuses"] = serde_json::json!({"/health": 503});
    a.set(&sick);
    let s = e.scrape_until(30, |s| {
        value(s, &sa("sglang_router_worker_healthy")) == Some(0.0)
            && value(s, &sb("sglang_router_worker_circuit_state")) == Some(1.0)
    });
    assert_eq!(
        value(&s, &sa("sglang_router_worker_circuit_state")),
        Some(0.0),
        "{s}"
    );
    assert_eq!(
        value(&s, &sb("sglang_router_worker_healthy")),
        Some(1.0),
        "{s}"
    );
    let out = run(&["top", "--snapshot", "--width", "160", "--url", &url]);
    let frame = String::from_utf8_lossy(&out.stdout);
    assert!(
        frame.contains(&format!(
            "router gw @ {instance} → {wa}: 0 in flight, unhealthy, circuit closed"
        )),
        "{frame}"
    );
    assert!(
        frame.contains(&format!(
            "router gw @ {instance} → {wb}: 0 in flight, healthy, circuit open"
        )),
        "{frame}"
    );

    // The router gone: up 0, a failure counted, its workers withdrawn.
    drop(router);
    let s = e.scrape_until(30, |s| {
        value(s, r#"sglang_router_up{router="gw"}"#) == Some(0.0)
    });
    assert!(!s.contains("sglang_router_worker_"), "{s}");
    assert!(
        value(
            &s,
            r#"sglang_log_exporter_router_failures_total{router="gw"}"#
        )
        .unwrap()
            >= 1.0,
        "{s}"
    );
}

/// `--dp-aware`: the router makes a worker of each DP rank (`URL@RANK`, from the server's
/// `dp_size`); both join the one server, each with its `dp_rank`.
#[test]
fn a_dp_aware_routers_rank_workers_join_their_server_with_their_rank() {
    let mut data = server(false);
    data["server_info"]["dp_size"] = serde_json::json!(2);
    data["server_info"]["enable_dp_attention"] = serde_json::json!(true);
    let rank = data["loads"][0].clone();
    data["loads"] = serde_json::json!([rank, rank]);
    data["loads"][1]["dp_rank"] = serde_json::json!(1);
    let d = SglangApi::start("0.5.23", &data, None);
    let base = format!("http://127.0.0.1:{}", d.port);
    let router = Router::start(std::slice::from_ref(&base), &["--dp-aware"]);
    let (w0, w1) = (format!("{base}@0"), format!("{base}@1"));
    let e = router.exporter_beside(&[&w0, &w1], &d.url("d"));
    let series = |w: &str, r: u32| {
        format!("sglang_router_worker_healthy{{server=\"d\",router=\"gw\",worker=\"{w}\",dp_rank=\"{r}\"}}")
    };
    let s = e.scrape_until(30, |s| {
        value(s, &series(&w0, 0)) == Some(1.0) && value(s, &series(&w1, 1)) == Some(1.0)
    });
    assert_eq!(s.matches("sglang_router_worker_healthy{").count(), 2, "{s}");
    let (_, _, body) = e.get("/api/v1/status");
    let st: serde_json::Value = serde_json::from_str(&body).unwrap();
    let workers: Vec<&str> = st["servers"][0]["router_workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["worker"].as_str().unwrap())
        .collect();
    assert_eq!(workers, [w0.as_str(), w1.as_str()], "{st}");
    assert_eq!(st["uncovered_workers"], serde_json::json!([]));
}
