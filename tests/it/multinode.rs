//! A server on several hosts (`--nnodes 2`): each host's exporter sees its own ranks under
//! their global numbers (TP8-TP15 on the second host of a TP16) and maps them to its own GPUs
//! 0-7, through the stand-in NVML (`tests/it/fake_nvml.c`). The README's PromQL across hosts
//! is evaluated by `promtool test rules` over both hosts' expositions.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::{bin, samples};

const GIB: u64 = 1 << 30;

/// Eight 80 GiB GPUs; GPU i uses i+1 GiB.
fn eight_gpus() -> String {
    let mut s = String::from("driver 560.35.03\n");
    for i in 0..8u64 {
        s += &format!(
            "gpu {i} GPU-{i}{i}{i}{i} 00000000:{:02X}:00.0 {} 0 {} {} NVIDIA H100 80GB HBM3\n",
            0x10 + i,
            80 * GIB,
            80 * GIB - (i + 1) * GIB,
            (i + 1) * GIB
        );
    }
    s
}

/// The log of host `node` of a TP16 on two hosts: its `server_args` line (unless `args` is
/// false) and a KV-cache line from each of its eight ranks.
fn node_log(dir: &Path, node: u32, args: bool) -> std::path::PathBuf {
    let mut text = String::new();
    if args {
        text += &format!("[2026-06-03 09:59:00] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V3', tp_size=16, dp_size=1, pp_size=1, nnodes=2, node_rank={node}, base_gpu_id=0, gpu_id_step=1, enable_dp_attention=False)\n");
    }
    for tp in node * 8..node * 8 + 8 {
        text += &format!("[2026-06-03 10:00:00 TP{tp}] KV Cache is allocated. #tokens: 100000, KV size: 4.00 GB\n");
    }
    let p = dir.join(format!("node{node}.log"));
    std::fs::write(&p, text).unwrap();
    p
}

/// `--once` with the stand-in NVML serving `eight_gpus()`; stdout.
fn once(dir: &Path, args: &[&str]) -> String {
    let lib = crate::gpu::fake_nvml(dir);
    let script = dir.join("nvml-script.txt");
    std::fs::write(&script, eight_gpus()).unwrap();
    let empty_proc = dir.join("proc");
    std::fs::create_dir_all(&empty_proc).unwrap();
    let out = Command::new(bin())
        .args(["--once", "--timezone", "UTC", "--gpu.nvml-library"])
        .arg(&lib)
        .arg(format!("--gpu.proc-root={}", empty_proc.display()))
        .args(args)
        .env("FAKE_NVML_SCRIPT", &script)
        .stdin(Stdio::null())
        .output()
        .expect("run the binary");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn rank_info(tp: u32, gpu: u32, method: &str) -> String {
    format!(
        "sglang_rank_gpu_info{{server=\"deepseek\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}{gpu}{gpu}{gpu}\",method=\"{method}\"}} 1"
    )
}

#[test]
fn second_host_of_a_tp16_maps_tp8_to_tp15_to_its_gpus_0_to_7() {
    let dir = tempfile::tempdir().unwrap();
    // server_args: node_rank 1 of 2, TP16: local rank = tp_rank % 8.
    let log = node_log(dir.path(), 1, true);
    let out = once(dir.path(), &[&format!("deepseek={}", log.display())]);
    let want: Vec<String> = (8..16)
        .map(|tp| rank_info(tp, tp - 8, "server_args"))
        .collect();
    assert_eq!(samples(&out, "sglang_rank_gpu_info"), want);
    assert_eq!(
        samples(&out, "sglang_rank_gpu_memory_used_bytes")[0],
        format!("sglang_rank_gpu_memory_used_bytes{{server=\"deepseek\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"8\",moe_ep_rank=\"0\",gpu=\"0\",uuid=\"GPU-0000\"}} {GIB}")
    );

    // No server_args line (a log joined late): TP8-TP15 on an 8-GPU list fit only as the host
    // block that starts at TP8.
    let dir2 = tempfile::tempdir().unwrap();
    let log = node_log(dir2.path(), 1, false);
    let out = once(
        dir2.path(),
        &[
            "--gpus",
            "deepseek=7,6,5,4,3,2,1,0",
            &format!("deepseek={}", log.display()),
        ],
    );
    let want: Vec<String> = (8..16)
        .map(|tp| rank_info(tp, 15 - tp, "explicit"))
        .collect();
    assert_eq!(samples(&out, "sglang_rank_gpu_info"), want);
}

/// The README's PromQL across hosts (the ```` ```promql across-hosts ```` blocks), evaluated
/// by `promtool test rules` over the expositions of both hosts of the TP16, labelled as
/// Prometheus labels them when it scrapes (`instance`, `job`) plus the recommended `cluster`.
#[test]
fn readme_queries_across_hosts_work_in_promtool() {
    let dir = tempfile::tempdir().unwrap();
    let mut y = String::from(
        "rule_files: []\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n",
    );
    let q = |t: &str| t.replace('\'', "''");
    for node in 0..2 {
        let log = node_log(dir.path(), node, true);
        let out = once(dir.path(), &[&format!("deepseek={}", log.display())]);
        for l in out.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            let (series, v) = l.rsplit_once(' ').unwrap();
            let extra = format!("cluster=\"eu-1\",instance=\"gpu-{node}:8771\",job=\"sglang\"");
            let series = match series.split_once('{') {
                Some((n, rest)) => format!("{n}{{{extra},{rest}"),
                None => format!("{series}{{{extra}}}"),
            };
            y += &format!("      - series: '{}'\n        values: '{v}'\n", q(&series));
        }
    }
    let readme = std::fs::read_to_string(crate::common::root().join("README.md")).unwrap();
    let blocks: Vec<String> = readme
        .split("```promql across-hosts\n")
        .skip(1)
        .map(|b| {
            let body = b.split("```").next().unwrap();
            let lines: Vec<&str> = body.lines().filter(|l| !l.starts_with('#')).collect();
            lines.join(" ")
        })
        .collect();
    assert_eq!(blocks.len(), 3, "the README's PromQL across hosts");
    let model = "model_name=\"deepseek-ai/DeepSeek-V3\"";
    let rank = |tp: u32| {
        let (node, gpu) = (tp / 8, tp % 8);
        format!("cluster=\"eu-1\",instance=\"gpu-{node}:8771\",job=\"sglang\",server=\"deepseek\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}{gpu}{gpu}{gpu}\",method=\"server_args\",{model}")
    };
    let expect: [Vec<(String, f64)>; 3] = [
        vec![(format!("cluster=\"eu-1\",{model}"), 2.0)],
        vec![(
            format!("cluster=\"eu-1\",{model},engine_type=\"unified\""),
            (16 * 4 * GIB) as f64,
        )],
        (0..16).map(|tp| (rank(tp), 1.0)).collect(),
    ];
    y += "    promql_expr_test:\n";
    for (expr, exp) in blocks.iter().zip(expect) {
        y += &format!(
            "      - expr: '{}'\n        eval_time: 0m\n        exp_samples:\n",
            q(expr)
        );
        for (labels, v) in exp {
            y += &format!(
                "          - labels: '{{{}}}'\n            value: {v}\n",
                q(&labels)
            );
        }
    }
    crate::promtools::test_rules(dir.path(), "across.test.yml", &y);
}
