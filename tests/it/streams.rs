//! Streams that carry several sources under another tool's prefix, and exports that moved
//! SGLang's text or its time (issue 22): each named source is its own engine with its own
//! startup facts, never merged with another whose rank tags are the same; the nodes of one
//! multi-node server stay one server; a JSON record after other columns is unwrapped; an
//! export that ate SGLang's `[date time` keeps its rank and takes the export's time; a
//! newest-first export ends in the state of its latest line, with the same counters.
//!
//! Inputs are written in each tool's documented shape: `kubectl logs --prefix [--timestamps]`,
//! `docker compose logs`, `srun --label`, SkyPilot's job output, Fluentd's `out_file`, Loki's
//! `logcli query` (default output, `--direction backward`).

use crate::common::{once, value};

use crate::common::once_on as read;

/// `metric` of rank labels `ranks` (e.g. `pp_rank="0",tp_rank="0",moe_ep_rank="0"`) of engine
/// `engine` of server `server` with model `model`.
fn of(m: &str, metric: &str, server: &str, engine: &str, model: &str, ranks: &str) -> Option<f64> {
    let engine = if engine.is_empty() {
        String::new()
    } else {
        format!("engine=\"{}\",", engine.replace('"', "\\\""))
    };
    value(
        m,
        &format!(
            r#"{metric}{{server="{server}",{engine}model_name="{model}",engine_type="unified",{ranks}}}"#
        ),
    )
}

const TP0: &str = r#"pp_rank="0",tp_rank="0",moe_ep_rank="0""#;

fn args(model: &str) -> String {
    format!("server_args=ServerArgs(model_path='{model}', served_model_name='{model}', tp_size=1, dp_size=1)")
}

fn decode(running: u32, queued: u32) -> String {
    format!("Decode batch, #running-req: {running}, #token: {}, token usage: 0.{running:02}, cuda graph: True, gen throughput (token/s): 10.00, #queue-req: {queued}", running * 100)
}

/// Two replicas whose lines both say TP0 and both print their own startup, under `prefix(i)`.
fn two_replicas(prefix: impl Fn(usize) -> String) -> String {
    let mut s = String::new();
    for (i, model) in ["m/a", "m/b"].iter().enumerate() {
        s += &format!("{}[2026-09-26 10:00:00] {}\n", prefix(i), args(model));
    }
    for (i, pool) in [1000, 2000].iter().enumerate() {
        s += &format!(
            "{}[2026-09-26 10:00:00 TP0] KV Cache is allocated. #tokens: {pool}, KV size: 1.00 GB\n",
            prefix(i)
        );
    }
    s += &format!("{}[2026-09-26 10:00:01 TP0] {}\n", prefix(0), decode(3, 1));
    s += &format!("{}[2026-09-26 10:00:01 TP0] {}\n", prefix(1), decode(7, 2));
    s
}

fn assert_two_replicas(m: &str, server: &str, engines: [&str; 2]) {
    let running = |e, model| of(m, "sglang:num_running_reqs", server, e, model, TP0);
    assert_eq!(running(engines[0], "m/a"), Some(3.0), "{m}");
    assert_eq!(running(engines[1], "m/b"), Some(7.0), "{m}");
    let queued = |e, model| of(m, "sglang:num_queue_reqs", server, e, model, TP0);
    assert_eq!(queued(engines[0], "m/a"), Some(1.0));
    assert_eq!(queued(engines[1], "m/b"), Some(2.0));
    // Each replica's own pool (startup facts are its own).
    let pool = |e, model| of(m, "sglang_kv_pool_capacity_tokens", server, e, model, TP0);
    assert_eq!(pool(engines[0], "m/a"), Some(1000.0));
    assert_eq!(pool(engines[1], "m/b"), Some(2000.0));
    // Nothing was merged into the server without an engine.
    assert_eq!(of(m, "sglang:num_running_reqs", server, "", "", TP0), None);
}

#[test]
fn kubectl_prefix_keeps_two_pods_apart() {
    let pods = ["pod/sglang-0/server", "pod/sglang-1/server"];
    let m = read("k.log", &two_replicas(|i| format!("[{}] ", pods[i])));
    assert_two_replicas(&m, "k", pods);
    // `--timestamps`: the runtime's time after the prefix.
    let m = read(
        "kt.log",
        &two_replicas(|i| format!("[{}] 2026-09-26T10:00:01.250000000Z ", pods[i])),
    );
    assert_two_replicas(&m, "kt", pods);
}

#[test]
fn compose_services_and_srun_tasks_are_kept_apart() {
    // Compose pads service names to one width and colours them.
    let svc = [
        "\x1b[36msglang-a-1    |\x1b[0m ",
        "\x1b[33msglang-bb-1   |\x1b[0m ",
    ];
    let m = read("c.log", &two_replicas(|i| svc[i].to_string()));
    assert_two_replicas(&m, "c", ["sglang-a-1", "sglang-bb-1"]);
    let m = read("s.log", &two_replicas(|i| format!("{i}: ")));
    assert_two_replicas(&m, "s", ["0", "1"]);
}

#[test]
fn skypilot_nodes_of_one_multi_node_server_stay_one_server() {
    let head = "(head, rank=0, pid=4101) ";
    let worker = "\x1b[36m(worker1, rank=1, pid=4102, ip=10.0.0.2)\x1b[0m ";
    let dump = |node| {
        format!("[2026-09-26 10:00:00] server_args=ServerArgs(model_path='m/x', served_model_name='m/x', tp_size=4, dp_size=1, nnodes=2, node_rank={node})\n")
    };
    let mut s = format!("{head}{}{worker}{}", dump(0), dump(1));
    for tp in 0..4 {
        let who = if tp < 2 { head } else { worker };
        s += &format!("{who}[2026-09-26 10:00:00 TP{tp}] KV Cache is allocated. #tokens: 5000, KV size: 1.00 GB\n");
    }
    for tp in 0..4u32 {
        let who = if tp < 2 { head } else { worker };
        s += &format!("{who}[2026-09-26 10:00:01 TP{tp}] {}\n", decode(tp + 1, 0));
    }
    let m = read("sky.log", &s);
    for tp in 0..4u32 {
        let r = format!(r#"pp_rank="0",tp_rank="{tp}",moe_ep_rank="0""#);
        assert_eq!(
            of(&m, "sglang:num_running_reqs", "sky", "", "m/x", &r),
            Some(f64::from(tp + 1)),
            "{m}"
        );
        // The worker's dump is another host's, not a restart: the head's pools stay.
        assert_eq!(
            of(&m, "sglang_kv_pool_capacity_tokens", "sky", "", "m/x", &r),
            Some(5000.0)
        );
    }
    assert!(!m.contains("engine="), "{m}");
}

#[test]
fn fluentd_records_after_time_and_tag_are_unwrapped() {
    let tags = ["docker.sglang-a", "docker.sglang-b"];
    let text = two_replicas(|_| String::new());
    let mut s = String::new();
    for (n, line) in text.lines().enumerate() {
        // two_replicas writes replica 0's line, then 1's, for each step.
        let tag = tags[n % 2];
        let log = serde_json::to_string(&format!("{line}\n")).unwrap();
        s += &format!(
            "2026-09-26T10:00:0{}+0000\t{tag}\t{{\"log\":{log},\"stream\":\"stderr\"}}\n",
            n / 4
        );
    }
    // An access line, whose quotes are JSON-escaped in the record.
    let access = r#"[2026-09-26 10:00:02] INFO:     127.0.0.1:5 - "GET /health HTTP/1.1" 200 OK"#;
    let log = serde_json::to_string(&format!("{access}\n")).unwrap();
    s += &format!(
        "2026-09-26T10:00:02+0000\t{}\t{{\"log\":{log},\"stream\":\"stdout\"}}\n",
        tags[0]
    );
    let m = read("fluent.log", &s);
    assert_two_replicas(&m, "fluent", tags);
    assert_eq!(
        value(
            &m,
            r#"sglang_access_log_requests_total{server="fluent",engine="docker.sglang-a",model_name="m/a",engine_type="unified",method="GET",path="/health",status="200"}"#
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(value_errors(&m), 0.0, "{m}");
    assert_eq!(unmatched(&m), 0.0, "{m}");
}

/// The sum of the per-source counter `family` over every source.
fn total(m: &str, family: &str) -> f64 {
    let start = format!("{family}{{");
    m.lines()
        .filter(|l| l.starts_with(&start))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

fn unmatched(m: &str) -> f64 {
    total(m, "sglang_log_exporter_lines_unmatched_total")
}

fn value_errors(m: &str) -> f64 {
    total(m, "sglang_log_exporter_field_value_errors_total")
}

const LABELS: [&str; 2] = [
    r#"{app="sglang", pod="sglang-0"}"#,
    r#"{app="sglang", pod="sglang-1"}"#,
];

fn logcli(forward: bool) -> String {
    let text = two_replicas(|_| String::new());
    let mut lines: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(n, l)| format!("2026-09-26T10:00:0{}Z {} {l}", n / 4, LABELS[n % 2]))
        .collect();
    // A retraction and a later stats line of replica 0, to tell the last state apart.
    lines.push(format!("2026-09-26T10:00:03Z {} [2026-09-26 10:00:03 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_token_ratio: 0.5000 -> 0.8000", LABELS[0]));
    lines.push(format!(
        "2026-09-26T10:00:04Z {} [2026-09-26 10:00:04 TP0] {}",
        LABELS[0],
        decode(5, 4)
    ));
    if !forward {
        lines.reverse();
    }
    lines.join("\n") + "\n"
}

#[test]
fn logcli_streams_are_kept_apart() {
    let m = read("loki.log", &logcli(true));
    let running = |e, model| of(&m, "sglang:num_running_reqs", "loki", e, model, TP0);
    assert_eq!(running(LABELS[0], "m/a"), Some(5.0), "{m}");
    assert_eq!(running(LABELS[1], "m/b"), Some(7.0));
    assert_eq!(
        of(
            &m,
            "sglang_retracted_requests_total",
            "loki",
            LABELS[0],
            "m/a",
            TP0
        ),
        Some(2.0)
    );
}

/// The exposition without the lines that name the input's path.
fn without_source(m: &str) -> String {
    m.lines()
        .filter(|l| !l.contains("source=\""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The per-source counters with the path removed.
fn source_counters(m: &str) -> Vec<String> {
    m.lines()
        .filter(|l| l.contains("source=\""))
        .map(|l| {
            let (a, rest) = l.split_once("source=\"").unwrap();
            let (_, b) = rest.split_once('"').unwrap();
            format!("{a}{b}")
        })
        .collect()
}

#[test]
fn a_newest_first_export_gives_the_state_and_counters_of_the_same_export_in_order() {
    let fwd = read("fwd.log", &logcli(true));
    let back = read("back.log", &logcli(false));
    let running = |m: &str| of(m, "sglang:num_running_reqs", "back", LABELS[0], "m/a", TP0);
    // The latest line's values, not the oldest's (read last in file order: 3 running).
    assert_eq!(running(&back), Some(5.0), "{back}");
    assert_eq!(
        without_source(&fwd).replace("server=\"fwd\"", "server=\"back\""),
        without_source(&back)
    );
    assert_eq!(source_counters(&fwd), source_counters(&back));
    // The counters are there (a comparison of two empty expositions would pass).
    assert!(source_counters(&back)
        .iter()
        .any(|l| l == "sglang_log_exporter_lines_read_total{} 8"));
}

#[test]
fn a_newest_first_log_with_a_restart_ends_in_the_newer_process() {
    let forward = "\
[2026-09-26 10:00:00] server_args=ServerArgs(model_path='m/old', served_model_name='m/old', tp_size=1, dp_size=1)
[2026-09-26 10:00:01 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.5000 -> 0.8000
[2026-09-26 10:00:02 TP0] Decode batch, #running-req: 1, #token: 100, token usage: 0.01, #queue-req: 0
[2026-09-26 10:05:00] server_args=ServerArgs(model_path='m/new', served_model_name='m/new', tp_size=1, dp_size=1)
[2026-09-26 10:05:01 TP0] KV Cache is allocated. #tokens: 10000, KV size: 1.00 GB
[2026-09-26 10:05:02 TP0] Decode batch, #running-req: 4, #token: 400, token usage: 0.04, #queue-req: 2
[2026-09-26 10:05:03 TP0] Decode batch, #running-req: 5, #token: 500, token usage: 0.05, #queue-req: 3
";
    let mut lines: Vec<&str> = forward.lines().collect();
    lines.reverse();
    let m = read("r.log", &(lines.join("\n") + "\n"));
    let v = |metric| of(&m, metric, "r", "", "m/new", TP0);
    assert_eq!(v("sglang:num_running_reqs"), Some(5.0), "{m}");
    assert_eq!(v("sglang:num_used_tokens"), Some(500.0));
    assert_eq!(v("sglang_kv_pool_capacity_tokens"), Some(10000.0));
    // The old process's retraction is not the new one's.
    assert_eq!(v("sglang_retracted_requests_total"), Some(0.0));
    assert!(!m.contains("m/old"), "{m}");
}

#[test]
fn an_export_that_ate_sglangs_date_keeps_rank_and_takes_the_exports_time() {
    let s = "\
2026-09-26T10:00:01.500Z replica-7 INFO TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.5000 -> 0.8000
2026-09-26T10:00:02.000Z replica-7 INFO TP0] Decode batch, #running-req: 3, #token: 300, token usage: 0.03, #queue-req: 1
2026-09-26T10:00:02.000Z replica-8 INFO DP1 TP2] Decode batch, #running-req: 9, #token: 900, token usage: 0.09, #queue-req: 0
2026-09-26 10:00:03,250 WARNING TP1] KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_token_ratio: 0.5000 -> 0.8000
";
    let m = read("eaten.log", s);
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "eaten", "replica-7", "", TP0),
        Some(3.0),
        "{m}"
    );
    assert_eq!(
        of(
            &m,
            "sglang:num_running_reqs",
            "eaten",
            "replica-8",
            "",
            r#"dp_rank="1",pp_rank="0",tp_rank="2",moe_ep_rank="0""#
        ),
        Some(9.0)
    );
    assert_eq!(
        of(
            &m,
            "sglang_last_retraction_timestamp_seconds",
            "eaten",
            "replica-7",
            "",
            TP0
        ),
        Some(1_790_416_801.5)
    );
    // No host column, a local time (`--timezone UTC`) with a comma before the milliseconds.
    assert_eq!(
        of(
            &m,
            "sglang_last_retraction_timestamp_seconds",
            "eaten",
            "",
            "",
            r#"pp_rank="0",tp_rank="1",moe_ep_rank="0""#
        ),
        Some(1_790_416_803.25)
    );
}

/// `--once` on `log` (every rank busy) with the shipped patterns and a first stream prefix
/// entry `regex` (written next to `log`).
fn once_with_entry(regex: &str, log: &std::path::Path) -> String {
    let shipped =
        std::fs::read_to_string(crate::common::root().join("patterns/sglang.yaml")).unwrap();
    let entry = format!("stream_prefixes:\n  - name: fork\n    regex: '{regex}'\n");
    let pf = log.with_extension("yaml");
    std::fs::write(&pf, shipped.replacen("stream_prefixes:\n", &entry, 1)).unwrap();
    once(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        "--patterns",
        pf.to_str().unwrap(),
        log.to_str().unwrap(),
    ])
}

#[test]
fn a_forks_prefix_is_read_from_a_pattern_file_alone() {
    // A fork that logs `[ts.ms GPU=N Worker N (model) TP=N]`, several models in one file.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fork.log");
    std::fs::write(
        &log,
        format!(
            "[1790416801.000 GPU=0 Worker 0 (model_1) TP=0] {}\n[1790416801.500 GPU=1 Worker 0 (model_2) TP=0] {}\n[1790416802.250 GPU=2 Worker 1 (model_1) TP=1] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.5000 -> 0.8000\n[1790416803.000 GPU=3 Worker 1 (model_1) TP=99999999999] {}\n",
            decode(4, 1),
            decode(6, 0),
            decode(8, 0)
        ),
    )
    .unwrap();
    let m = once_with_entry(
        r"\[(?P<ts>[0-9]{10}\.[0-9]{3}) GPU=[0-9]+ Worker [0-9]+ \((?P<engine>[^()]+)\) TP=(?P<tp>[0-9]+)\] ",
        &log,
    );
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "fork", "model_1", "", TP0),
        Some(4.0),
        "{m}"
    );
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "fork", "model_2", "", TP0),
        Some(6.0)
    );
    assert_eq!(
        of(
            &m,
            "sglang_last_retraction_timestamp_seconds",
            "fork",
            "model_1",
            "",
            r#"pp_rank="0",tp_rank="1",moe_ep_rank="0""#
        ),
        Some(1_790_416_802.25)
    );
    // A rank that does not fit: the line is not read, never merged into a rank without it.
    assert_eq!(unmatched(&m), 1.0, "{m}");
    assert!(!m.contains("running_reqs{server=\"fork\",engine=\"model_1\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",moe_ep_rank"), "{m}");
}

#[test]
fn skypilot_nodes_that_print_the_same_rank_are_servers_apart() {
    // One replica per node (no multi-node server): both print TP0.
    let nodes = [
        "(head, rank=0, pid=4101) ",
        "(worker1, rank=1, pid=4102, ip=10.0.0.2) ",
    ];
    let m = read("sky2.log", &two_replicas(|i| nodes[i].to_string()));
    // The head's lines came first: it stays the server; the worker, whose own `server_args`
    // says it is a server of one host, is its own engine with its own model and pool.
    assert_two_replicas(&m, "sky2", ["", "worker1"]);
}

#[test]
fn json_records_that_name_their_writer_are_kept_apart() {
    // `logcli --output jsonl` and Fluent Bit's Kubernetes metadata.
    let text = two_replicas(|_| String::new());
    let mut jsonl = String::new();
    let mut fluentbit = String::new();
    for (n, line) in text.lines().enumerate() {
        let pod = ["sglang-0", "sglang-1"][n % 2];
        jsonl += &serde_json::json!({"labels": {"app": "sglang", "pod": pod}, "line": line, "timestamp": "2026-09-26T10:00:01Z"}).to_string();
        jsonl.push('\n');
        fluentbit += &serde_json::json!({"log": format!("{line}\n"), "kubernetes": {"pod_name": pod, "container_name": "server", "namespace_name": "llm"}}).to_string();
        fluentbit.push('\n');
    }
    let m = read("jsonl.log", &jsonl);
    assert_two_replicas(&m, "jsonl", LABELS);
    let m = read("fb.log", &fluentbit);
    assert_two_replicas(&m, "fb", ["pod/sglang-0/server", "pod/sglang-1/server"]);
}

/// Two units' lines under a syslog-style prefix, as `replica(i)` prints it before SGLang's line.
fn assert_hosts_apart(name: &str, prefix: impl Fn(usize) -> String, engines: [&str; 2]) {
    let m = read(name, &two_replicas(prefix));
    assert_two_replicas(&m, name.trim_end_matches(".log"), engines);
}

#[test]
fn journal_short_and_syslog_lines_of_two_units_are_kept_apart() {
    let units = ["sglang-prefill[111]", "sglang-decode[222]"];
    // The PID is part of the writer: two units of one host may log under one identifier.
    let ident = [
        "gpu-node-1 sglang-prefill[111]",
        "gpu-node-1 sglang-decode[222]",
    ];
    assert_hosts_apart(
        "short.log",
        |i| format!("Sep 26 10:00:03 gpu-node-1 {}: ", units[i]),
        ident,
    );
    assert_hosts_apart(
        "precise.log",
        |i| format!("Sep 26 10:00:03.123456 gpu-node-1 {}: ", units[i]),
        ident,
    );
    assert_hosts_apart(
        "iso.log",
        |i| format!("2026-09-26T10:00:03+0000 gpu-node-1 {}: ", units[i]),
        ident,
    );
    assert_hosts_apart(
        "full.log",
        |i| format!("Sat 2026-09-26 10:00:03 UTC gpu-node-1 {}: ", units[i]),
        ident,
    );
    assert_hosts_apart(
        "unix.log",
        |i| format!("1790416803.123456 gpu-node-1 {}: ", units[i]),
        ident,
    );
    // RFC 5424 from two hosts: `<PRI>1 TIME HOST APP PROCID MSGID SD MSG`.
    let hosts = ["gpu-node-1", "gpu-node-2"];
    assert_hosts_apart(
        "rfc5424.log",
        |i| {
            format!(
                "<14>1 2026-09-26T10:00:03.000Z {} sglang 4242 - - ",
                hosts[i]
            )
        },
        ["gpu-node-1 sglang", "gpu-node-2 sglang"],
    );
    // An export's time and host columns before SGLang's own prefix.
    assert_hosts_apart(
        "timehost.log",
        |i| format!("2026-09-26T10:00:03.000Z {} ", hosts[i]),
        hosts,
    );
}

#[test]
fn an_export_without_sglangs_time_keeps_rankless_lines_with_their_writer() {
    let s = "\
2026-09-26T10:00:00.000Z replica-7 INFO ] server_args=ServerArgs(model_path='m/x', served_model_name='m/x', tp_size=1, dp_size=1)
2026-09-26T10:00:00.100Z replica-8 I server_args=ServerArgs(model_path='m/y', served_model_name='m/y', tp_size=1, dp_size=1)
2026-09-26T10:00:01.123Z replica-7 I TP0] Decode batch, #running-req: 3, #token: 300, token usage: 0.03, #queue-req: 1
2026-09-26T10:00:01.500Z replica-8 level=info TP0] Decode batch, #running-req: 9, #token: 900, token usage: 0.09, #queue-req: 0
2026-09-26T10:00:02.000Z replica-7 W TP0] KV cache pool is full. Retract requests. #retracted_reqs: 4, #new_token_ratio: 0.5000 -> 0.8000
2026-09-26T10:00:02.500Z replica-7 INFO ] INFO:     127.0.0.1:5 - \"GET /health HTTP/1.1\" 200 OK
2026-09-26T10:00:03.000Z NODE7 TP0] Decode batch, #running-req: 5, #token: 500, token usage: 0.05, #queue-req: 0
";
    let m = read("cols.log", s);
    let v = |metric, e, model| of(&m, metric, "cols", e, model, TP0);
    assert_eq!(
        v("sglang:num_running_reqs", "replica-7", "m/x"),
        Some(3.0),
        "{m}"
    );
    assert_eq!(v("sglang:num_running_reqs", "replica-8", "m/y"), Some(9.0));
    // The level is no part of the writer: the retraction is replica-7's.
    assert_eq!(
        v("sglang_retracted_requests_total", "replica-7", "m/x"),
        Some(4.0)
    );
    // An upper-case host with a digit is a host, not a rank tag.
    assert_eq!(v("sglang:num_running_reqs", "NODE7", ""), Some(5.0));
    assert_eq!(
        value(
            &m,
            r#"sglang_access_log_requests_total{server="cols",engine="replica-7",model_name="m/x",engine_type="unified",method="GET",path="/health",status="200"}"#
        ),
        Some(1.0)
    );
    assert_eq!(unmatched(&m), 0.0, "{m}");
}

#[test]
fn docker_records_inside_loki_lines_are_unwrapped() {
    let text = two_replicas(|_| String::new());
    let mut plain = String::new();
    let mut jsonl = String::new();
    for (n, line) in text.lines().enumerate() {
        let rec = serde_json::json!({"log": format!("{line}\n"), "stream": "stderr", "time": "2026-09-26T10:00:01.5Z"}).to_string();
        plain += &format!("2026-09-26T10:00:01Z {} {rec}\n", LABELS[n % 2]);
        let pod = ["sglang-0", "sglang-1"][n % 2];
        jsonl += &serde_json::json!({"labels": {"app": "sglang", "pod": pod}, "line": rec, "timestamp": "2026-09-26T10:00:01Z"}).to_string();
        jsonl.push('\n');
    }
    let m = read("lokid.log", &plain);
    assert_two_replicas(&m, "lokid", LABELS);
    assert_eq!(value_errors(&m), 0.0, "{m}");
    let m = read("lokij.log", &jsonl);
    assert_two_replicas(&m, "lokij", LABELS);
    assert_eq!(value_errors(&m), 0.0, "{m}");
}

#[test]
fn a_nodes_first_rank_line_of_a_rank_another_node_printed_is_its_own() {
    let head = "(head, rank=0, pid=100) ";
    let worker = "(worker1, rank=1, pid=200, ip=10.0.0.2) ";
    let s = format!(
        "{head}[2026-09-26 10:00:01 TP0] {}\n{worker}[2026-09-26 10:00:02 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 7, #new_token_ratio: 0.5000 -> 0.8000\n{worker}[2026-09-26 10:00:02 TP0] KV Cache is allocated. #tokens: 5000, KV size: 1.00 GB\n{worker}[2026-09-26 10:00:03 TP0] {}\n",
        decode(10, 0),
        decode(20, 0)
    );
    let m = read("sky3.log", &s);
    let v = |metric, e| of(&m, metric, "sky3", e, "", TP0);
    assert_eq!(
        v("sglang_retracted_requests_total", "worker1"),
        Some(7.0),
        "{m}"
    );
    assert_eq!(v("sglang_retracted_requests_total", ""), Some(0.0));
    assert_eq!(v("sglang_kv_pool_capacity_tokens", "worker1"), Some(5000.0));
    assert_eq!(v("sglang_kv_pool_capacity_tokens", ""), None);
}

#[test]
fn short_and_untimed_newest_first_inputs_and_fifos_read_as_in_order() {
    let forward = format!(
        "[2026-09-26 10:00:00] {}\n[2026-09-26 10:00:01 TP0] {}\nINFO:     127.0.0.1:5 - \"GET /health HTTP/1.1\" 200 OK\n[2026-09-26 10:00:03 TP0] {}\n",
        args("m/a"),
        decode(2, 0),
        decode(3, 1)
    );
    let mut lines: Vec<&str> = forward.lines().collect();
    lines.reverse();
    let backward = lines.join("\n") + "\n";
    let fwd = read("in_order.log", &forward);
    let back = read("in_order.log", &backward);
    // The untimed access line takes no time of its own (never the file's modification time).
    assert!(without_source(&fwd) == without_source(&back), "{back}");
    assert_eq!(
        of(&back, "sglang:num_running_reqs", "in_order", "", "m/a", TP0),
        Some(3.0),
        "{back}"
    );
    // Read through a FIFO (`<(tac log)`).
    let dir = tempfile::tempdir().unwrap();
    let (fifo, w) = crate::common::fifo_fed(dir.path(), "in_order.log", backward.into_bytes());
    let piped = once(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        "--log.level",
        "error",
        fifo.to_str().unwrap(),
    ]);
    w.join().unwrap();
    assert_eq!(
        of(
            &piped,
            "sglang:num_running_reqs",
            "in_order",
            "",
            "m/a",
            TP0
        ),
        Some(3.0),
        "{piped}"
    );
}

#[test]
fn a_python_logging_format_with_logger_names_is_one_server() {
    // `SGLANG_LOGGING_CONFIG_PATH` with `%(asctime)s - %(name)s - %(levelname)s - %(message)s`,
    // and `%(asctime)s %(levelname)s %(name)s: %(message)s`.
    for (name, sep) in [("dash.log", true), ("colon.log", false)] {
        let line = |t: &str, logger: &str, msg: &str| {
            if sep {
                format!("2026-09-26 {t},001 - {logger} - INFO - {msg}\n")
            } else {
                format!("2026-09-26 {t},001 INFO {logger}: {msg}\n")
            }
        };
        let s = line(
            "10:00:00",
            "sglang.srt.entrypoints.http_server",
            &args("m/a"),
        ) + &line(
            "10:00:00",
            "sglang.srt.mem_cache.memory_pool",
            "KV Cache is allocated. #tokens: 10000, KV size: 1.00 GB",
        ) + &line("10:00:01", "sglang.srt.managers.scheduler", &decode(3, 1))
            + &line(
                "10:00:02",
                "uvicorn.access",
                "127.0.0.1:5 - \"GET /health HTTP/1.1\" 200 OK",
            );
        let m = read(name, &s);
        let server = name.trim_end_matches(".log");
        assert_eq!(
            of(&m, "sglang:num_running_reqs", server, "", "m/a", TP0),
            Some(3.0),
            "{m}"
        );
        assert_eq!(
            of(&m, "sglang_kv_pool_capacity_tokens", server, "", "m/a", TP0),
            Some(10000.0)
        );
        assert!(!m.contains("engine="), "{m}");
    }
}

#[test]
fn more_writer_shapes_stay_apart_and_one_writer_stays_one() {
    // Two units of one host that both log as `python3` (journalctl -o short).
    assert_hosts_apart(
        "py3.log",
        |i| {
            format!(
                "Jun 03 09:57:43 gpu-node-1 python3[{}]: ",
                [47987, 48213][i]
            )
        },
        ["gpu-node-1 python3[47987]", "gpu-node-1 python3[48213]"],
    );
    // IPv6 hosts, a zone without an abbreviation, Fluentd's time with a space, Swarm tasks.
    assert_hosts_apart(
        "v6.log",
        |i| {
            format!(
                "Sep 26 10:00:01 {} sglang[1]: ",
                ["fe80::1", "2001:db8::1"][i]
            )
        },
        ["fe80::1 sglang[1]", "2001:db8::1 sglang[1]"],
    );
    assert_hosts_apart(
        "zone.log",
        |i| format!("Sat 2026-09-26 14:00:01 +04 h{i} sglang[1]: "),
        ["h0 sglang[1]", "h1 sglang[1]"],
    );
    assert_hosts_apart(
        "swarm.log",
        |i| format!("sglang.{}.k3x9q2m1z0ab@node-{i}    | ", i + 1),
        [
            "sglang.1.k3x9q2m1z0ab@node-0",
            "sglang.2.k3x9q2m1z0ab@node-1",
        ],
    );
    let text = two_replicas(|_| String::new());
    let mut fd = String::new();
    for (n, line) in text.lines().enumerate() {
        let log = serde_json::to_string(&format!("{line}\n")).unwrap();
        fd += &format!(
            "2026-09-26 10:00:01 +0000\tsglang.{}\t{{\"log\":{log}}}\n",
            ["a", "b"][n % 2]
        );
    }
    let m = read("fdspace.log", &fd);
    assert_two_replicas(&m, "fdspace", ["sglang.a", "sglang.b"]);
    // Loki's `stream` label: one container writes SGLang's lines to stderr and uvicorn's to
    // stdout; it is one writer.
    let pod = r#"{container="sglang", pod="sglang-0"#;
    let s = format!(
        "2026-09-26T10:00:00Z {pod}\", stream=\"stderr\"}} [2026-09-26 10:00:00] {}\n2026-09-26T10:00:01Z {pod}\", stream=\"stderr\"}} [2026-09-26 10:00:01 TP0] {}\n2026-09-26T10:00:02Z {pod}\", stream=\"stdout\"}} [2026-09-26 10:00:02] INFO:     127.0.0.1:5 - \"GET /health HTTP/1.1\" 200 OK\n",
        args("m/a"),
        decode(3, 1)
    );
    let m = read("lstream.log", &s);
    let engine = r#"{container="sglang", pod="sglang-0"}"#;
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "lstream", engine, "m/a", TP0),
        Some(3.0),
        "{m}"
    );
    let e = engine.replace('"', "\\\"");
    assert_eq!(
        value(
            &m,
            &format!(
                r#"sglang_access_log_requests_total{{server="lstream",engine="{e}",model_name="m/a",engine_type="unified",method="GET",path="/health",status="200"}}"#
            )
        ),
        Some(1.0),
        "{m}"
    );
}

#[test]
fn forward_logs_that_step_back_are_not_read_backwards() {
    // `kubectl logs --prefix --tail=2 -l app=sglang`: one pod after the other, the second's
    // lines older than the first's.
    let s = "\
[pod/sglang-a/sglang] [2026-09-26 10:00:05 TP0] Decode batch, #running-req: 5, #token: 1, token usage: 0.01, #queue-req: 0
[pod/sglang-a/sglang] [2026-09-26 10:00:05 TP0] Decode batch, #running-req: 6, #token: 1, token usage: 0.01, #queue-req: 0
[pod/sglang-b/sglang] [2026-09-26 10:00:04 TP0] Decode batch, #running-req: 7, #token: 1, token usage: 0.01, #queue-req: 0
[pod/sglang-b/sglang] [2026-09-26 10:00:04 TP0] Decode batch, #running-req: 8, #token: 1, token usage: 0.01, #queue-req: 0
";
    let m = read("tail2.log", s);
    let running = |e| of(&m, "sglang:num_running_reqs", "tail2", e, "", TP0);
    assert_eq!(
        (
            running("pod/sglang-a/sglang"),
            running("pod/sglang-b/sglang")
        ),
        (Some(6.0), Some(8.0)),
        "{m}"
    );
    // A clock stepped back just after start-up: the log starts with a process's first line.
    let s = format!(
        "[2026-09-26 10:00:05] {}\n[2026-09-26 10:00:05 TP0] {}\n[2026-09-26 10:00:03 TP0] {}\n[2026-09-26 10:00:03 TP0] {}\n",
        args("m/a"),
        decode(1, 0),
        decode(2, 0),
        decode(3, 0)
    );
    let m = read("ntp.log", &s);
    assert_eq!(
        of(&m, "sglang:num_running_reqs", "ntp", "", "m/a", TP0),
        Some(3.0),
        "{m}"
    );
}

/// The Python-logging prefixes of issue 37 item 3, each with its Unix time (UTC): comma or dot
/// milliseconds, with or without a level in brackets and a logger name.
pub const PYTHON_LOGGING: [(&str, f64); 5] = [
    (
        "2026-06-07 10:59:31,659 [INFO] sglang.srt.managers.scheduler: ",
        1_780_829_971.659,
    ),
    (
        "2026-06-07 10:59:32.250 [WARNING] myapp: ",
        1_780_829_972.25,
    ),
    ("2026-06-07 10:59:33,001 ", 1_780_829_973.001),
    ("2026-06-07 10:59:34,120 [info] ", 1_780_829_974.12),
    ("2026-06-07 10:59:35,500 myapp.worker: ", 1_780_829_975.5),
];

#[test]
fn a_python_logging_time_before_sglangs_line_is_the_lines_time() {
    // A project that embeds SGLang logs its lines under its own format: SGLang's `[TIME TP0]`
    // is gone, the logging module's time is the line's.
    for (i, (prefix, t)) in PYTHON_LOGGING.iter().enumerate() {
        let running = i as u32 + 3;
        let m = read("py.log", &format!("{prefix}{}\n", decode(running, 1)));
        let at = |metric: &str| of(&m, metric, "py", "", "", TP0);
        assert_eq!(
            at("sglang:num_running_reqs"),
            Some(f64::from(running)),
            "{m}"
        );
        assert_eq!(
            at("sglang_last_stats_timestamp_seconds"),
            Some(*t),
            "{prefix}"
        );
        assert!(!m.contains("engine="), "{m}");
    }
    // SGLang's own prefix after it still gives the line's time and rank.
    let m = read(
        "py.log",
        &format!(
            "2026-06-07 10:59:31,659 [INFO] sglang: [2026-06-07 10:59:30 TP1] {}\n",
            decode(2, 0)
        ),
    );
    assert_eq!(
        of(
            &m,
            "sglang_last_stats_timestamp_seconds",
            "py",
            "",
            "",
            r#"pp_rank="0",tp_rank="1",moe_ep_rank="0""#
        ),
        Some(1_780_829_970.0),
        "{m}"
    );
}

/// A fork whose own bracket replaces SGLang's prefix, two models' schedulers (TP0 and TP1 each)
/// in one file (issue 32 item 4); its last three lines are not read: a line no kind reads, a
/// time with a non-ASCII digit, a rank that does not fit.
const FORK_LOG: &str = "\
[2025-12-10 14:02:10.001 GPU=0 Worker 0 (model_1) TP=0] server_args=ServerArgs(model_path='m/one', served_model_name='m/one', tp_size=2, dp_size=1)
[2025-12-10 14:02:10.002 GPU=2 Worker 1 (model_2) TP=0] server_args=ServerArgs(model_path='m/two', served_model_name='m/two', tp_size=2, dp_size=1)
[2025-12-10 14:02:11.100 GPU=0 Worker 0 (model_1) TP=0] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB
[2025-12-10 14:02:11.101 GPU=1 Worker 0 (model_1) TP=1] KV Cache is allocated. #tokens: 1000, K size: 1.00 GB, V size: 1.00 GB
[2025-12-10 14:02:11.102 GPU=2 Worker 1 (model_2) TP=0] KV Cache is allocated. #tokens: 2000, K size: 2.00 GB, V size: 2.00 GB
[2025-12-10 14:02:11.103 GPU=3 Worker 1 (model_2) TP=1] KV Cache is allocated. #tokens: 2000, K size: 2.00 GB, V size: 2.00 GB
[2025-12-10 14:02:13.102 GPU=0 Worker 0 (model_1) TP=0] Prefill batch. #new-seq: 1, #new-token: 128, #cached-token: 0, token usage: 0.10, #running-req: 0, #queue-req: 0
[2025-12-10 14:02:13.105 GPU=1 Worker 0 (model_1) TP=1] Prefill batch. #new-seq: 1, #new-token: 64, #cached-token: 0, token usage: 0.11, #running-req: 0, #queue-req: 0
[2025-12-10 14:02:14.250 GPU=2 Worker 1 (model_2) TP=0] Decode batch. #running-req: 5, #token: 500, token usage: 0.25, gen throughput (token/s): 100.00, #queue-req: 2
[2025-12-10 14:02:14.260 GPU=3 Worker 1 (model_2) TP=1] Decode batch. #running-req: 6, #token: 600, token usage: 0.30, gen throughput (token/s): 110.00, #queue-req: 3
[2025-12-10 14:02:15.000 GPU=0 Worker 0 (model_1) TP=0] INFO: something else
[2025-12-1٠ 14:02:16.000 GPU=2 Worker 1 (model_2) TP=0] Decode batch. #running-req: 50, #token: 500, token usage: 0.25, gen throughput (token/s): 100.00, #queue-req: 2
[2025-12-10 14:02:17.000 GPU=3 Worker 1 (model_2) TP=99999999999] Decode batch. #running-req: 60, #token: 600, token usage: 0.30, gen throughput (token/s): 110.00, #queue-req: 3
";

/// The series of the fork's engines in `m`, sorted.
fn fork_series(m: &str) -> Vec<&str> {
    let mut s: Vec<&str> = m
        .lines()
        .filter(|l| l.contains("engine=\"Worker"))
        .collect();
    s.sort_unstable();
    s
}

#[test]
fn a_known_body_after_a_forks_own_prefix_is_read_each_model_apart() {
    let m = read("fork.log", FORK_LOG);
    let rank = |tp: u32| format!(r#"pp_rank="0",tp_rank="{tp}",moe_ep_rank="0""#);
    let at = |metric: &str, engine: &str, model: &str, tp: u32| {
        of(&m, metric, "fork", engine, model, &rank(tp))
    };
    let (one, two) = ("Worker 0 (model_1)", "Worker 1 (model_2)");
    for (metric, want) in [
        ("sglang:num_running_reqs", [0.0, 0.0, 5.0, 6.0]),
        ("sglang:token_usage", [0.10, 0.11, 0.25, 0.30]),
        ("sglang:num_queue_reqs", [0.0, 0.0, 2.0, 3.0]),
        (
            "sglang_kv_pool_capacity_tokens",
            [1000.0, 1000.0, 2000.0, 2000.0],
        ),
        (
            "sglang_last_stats_timestamp_seconds",
            [
                1_765_375_333.102,
                1_765_375_333.105,
                1_765_375_334.25,
                1_765_375_334.26,
            ],
        ),
    ] {
        let got = [
            at(metric, one, "m/one", 0),
            at(metric, one, "m/one", 1),
            at(metric, two, "m/two", 0),
            at(metric, two, "m/two", 1),
        ];
        assert_eq!(got, want.map(Some), "{metric}: {m}");
    }
    assert_eq!(
        at("sglang_prefill_new_tokens_total", one, "m/one", 1),
        Some(64.0)
    );
    // Nothing merged into a rank without the engine, and the three lines not read counted.
    assert!(
        !m.contains(r#"sglang:num_running_reqs{server="fork",model_name"#),
        "{m}"
    );
    assert_eq!(unmatched(&m), 3.0, "{m}");

    // `check` says what it inferred, and the entry it prints reads the same series.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("fork.log");
    std::fs::write(&log, FORK_LOG).unwrap();
    let out = crate::common::run(&["check", log.to_str().unwrap()]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("read after a prefix SGLang does not print: 10 lines, like\n    [2025-12-10 14:02:10.001 GPU=0 Worker 0 (model_1) TP=0]\n    (engines \"Worker 0 (model_1)\", \"Worker 1 (model_2)\")"),
        "{text}"
    );
    let regex = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("regex: '")?.strip_suffix('\''))
        .expect("an entry");
    // The lines no kind reads still move the input's clock to their prefix's time (the last
    // one's rank does not fit; its time does).
    let out = crate::common::run(&[
        "--once",
        "--gpu.disable",
        "--timezone",
        "UTC",
        log.to_str().unwrap(),
    ]);
    let summary = String::from_utf8(out.stderr).unwrap();
    assert!(
        summary.contains("KV cache at the end of the input (2025-12-10 14:02:17):"),
        "{summary}"
    );
    let named = once_with_entry(regex, &log);
    assert_eq!(fork_series(&named), fork_series(&m));
    // 112 series, and each engine's source: sglang_server_source_timestamp_seconds.
    assert_eq!(fork_series(&m).len(), 114, "{m}");
}
