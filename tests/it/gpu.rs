//! GPU metrics through a stand-in `libnvidia-ml.so.1` built from `fake_nvml.c` by the test and
//! loaded with `--gpu.nvml-library` (the production loading path). The stand-in serves what a
//! script file says; processes are real children with SGLang's process titles, or a prepared
//! proc tree (`--gpu.proc-root`) where a cgroup must name a systemd unit.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::{bin, samples, value, Exporter};

const GIB: u64 = 1 << 30;

/// Compiles the stand-in NVML into `dir` and returns its path.
pub fn fake_nvml(dir: &Path) -> PathBuf {
    let src = crate::common::root().join("tests/it/fake_nvml.c");
    let out = dir.join("libnvidia-ml.so.1");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let st = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("run {cc} (install gcc): {e}"));
    assert!(st.success(), "compiling {}", src.display());
    out
}

/// Replaces the stand-in's script atomically (the library re-reads it on every call).
fn script(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write script");
    std::fs::rename(&tmp, path).expect("rename script");
}

/// A child process whose argv[0] (what `/proc/PID/cmdline` shows first) is `title`, as
/// SGLang's `setproctitle` leaves it. Killed on drop.
struct Proc(Child);

impl Proc {
    fn start(title: &str) -> Proc {
        let c = Command::new("sleep")
            .arg0(title)
            .arg("300")
            .stdin(Stdio::null())
            .spawn()
            .expect("start sleep");
        Proc(c)
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The server name our own processes belong to: the systemd service unit of this test's cgroup
/// (without `.service`) when it has one, else any name (the only server then gets them).
fn own_server_name() -> String {
    let cg = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    sglang_log_exporter::gpu::procfs::unit_of_cgroup(&cg)
        .map(|u| u.trim_end_matches(".service").to_string())
        .unwrap_or_else(|| "solo".to_string())
}

/// Runs `--once` with the stand-in library and `script_path`; returns (stdout, stderr).
fn once(lib: &Path, script_path: &Path, args: &[&str]) -> (String, String) {
    let out = Command::new(bin())
        .args(["--once", "--timezone", "UTC", "--gpu.nvml-library"])
        .arg(lib)
        .args(args)
        .env("FAKE_NVML_SCRIPT", script_path)
        .env("TZ", "UTC")
        .stdin(Stdio::null())
        .output()
        .expect("run the binary");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "exit {:?}: {stderr}", out.status);
    (String::from_utf8(out.stdout).expect("utf-8"), stderr)
}

const GPU0: &str = "gpu 0 GPU-0a0a0a0a-0000-0000-0000-000000000000 00000000:18:00.0";
const GPU1: &str = "gpu 1 GPU-1b1b1b1b-0000-0000-0000-000000000001 00000000:2A:00.0";
const U0: &str = "GPU-0a0a0a0a-0000-0000-0000-000000000000";
const U1: &str = "GPU-1b1b1b1b-0000-0000-0000-000000000001";

#[test]
fn memory_processes_and_rank_from_real_scheduler_process() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_nvml(dir.path());
    let sched = Proc::start("sglang::scheduler_DP0_TP0");
    let other = Proc::start("python3");
    let s = script_file(dir.path());
    script(
        &s,
        &format!(
            "driver 550.54.15\n\
             {GPU0} {} {} {} {} NVIDIA H100 80GB HBM3\n\
             {GPU1} {} {} {} {} NVIDIA H100 80GB HBM3\n\
             proc 0 {p} {}\n\
             proc 0 {o} {}\n\
             proc 1 {p} {}\n\
             proc 1 999999999 {}\n",
            80 * GIB,
            512 << 20,
            74 * GIB,
            5 * GIB + (1 << 20),
            80 * GIB,
            512 << 20,
            9 * GIB,
            70 * GIB + 123,
            500 << 20,
            3 * GIB,
            69 * GIB,
            GIB,
            p = sched.pid(),
            o = other.pid(),
        ),
    );
    let server = own_server_name();
    let log = dir.path().join("decode.log");
    std::fs::write(
        &log,
        "[2026-06-03 10:00:00 DP0 TP0] KV Cache is allocated. #tokens: 100000, KV size: 2.00 GB\n\
         [2026-06-03 10:00:05 DP0 TP0] Decode batch, #running-req: 3, #token: 25000, token usage: 0.25, gen throughput (token/s): 40.00, #queue-req: 0\n",
    )
    .unwrap();
    let input = format!("{server}={}", log.display());
    let (out, _) = once(&lib, &s, &[&input]);
    // Each GPU family as the registry declares it (HELP, type, labels).
    let mismatches = crate::common::registry_mismatches(&out);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));

    assert_eq!(value(&out, "sglang_log_exporter_nvml_up"), Some(1.0));
    for (u, i, total, reserved, free, used) in [
        (U0, 0, 80 * GIB, 512 << 20, 74 * GIB, 5 * GIB + (1 << 20)),
        (U1, 1, 80 * GIB, 512 << 20, 9 * GIB, 70 * GIB + 123),
    ] {
        let l = format!("{{gpu=\"{i}\",uuid=\"{u}\"}}");
        assert_eq!(
            value(&out, &format!("sglang_gpu_memory_total_bytes{l}")),
            Some(total as f64)
        );
        assert_eq!(
            value(&out, &format!("sglang_gpu_memory_reserved_bytes{l}")),
            Some(reserved as f64)
        );
        assert_eq!(
            value(&out, &format!("sglang_gpu_memory_free_bytes{l}")),
            Some(free as f64)
        );
        assert_eq!(
            value(&out, &format!("sglang_gpu_memory_used_bytes{l}")),
            Some(used as f64)
        );
    }
    assert_eq!(
        samples(&out, "sglang_gpu_info"),
        [
            format!("sglang_gpu_info{{gpu=\"0\",uuid=\"{U0}\",name=\"NVIDIA H100 80GB HBM3\",pci_bus_id=\"00000000:18:00.0\",driver_version=\"550.54.15\"}} 1"),
            format!("sglang_gpu_info{{gpu=\"1\",uuid=\"{U1}\",name=\"NVIDIA H100 80GB HBM3\",pci_bus_id=\"00000000:2A:00.0\",driver_version=\"550.54.15\"}} 1"),
        ]
    );
    // Only the SGLang process; the other one and the vanished PID are left out.
    let p = sched.pid();
    assert_eq!(
        samples(&out, "sglang_gpu_process_memory_used_bytes"),
        [
            format!(
                "sglang_gpu_process_memory_used_bytes{{gpu=\"0\",uuid=\"{U0}\",pid=\"{p}\"}} {}",
                500u64 << 20
            ),
            format!(
                "sglang_gpu_process_memory_used_bytes{{gpu=\"1\",uuid=\"{U1}\",pid=\"{p}\"}} {}",
                69 * GIB
            ),
        ]
    );
    // The rank is on the GPU where its scheduler holds the most memory, not the stray context.
    // engine_type follows the server's name (no server_args line in this log).
    let engine = ["prefill", "decode"]
        .into_iter()
        .find(|e| server.contains(e))
        .unwrap_or("unified");
    let rank = format!("server=\"{server}\",engine_type=\"{engine}\",dp_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\",gpu=\"1\",uuid=\"{U1}\"");
    assert_eq!(
        samples(&out, "sglang_rank_gpu_info"),
        [format!(
            "sglang_rank_gpu_info{{{rank},method=\"process\"}} 1"
        )]
    );
    assert_eq!(
        value(
            &out,
            &format!("sglang_rank_gpu_memory_used_bytes{{{rank}}}")
        ),
        Some((70 * GIB + 123) as f64)
    );
    assert_eq!(
        value(
            &out,
            &format!("sglang_rank_gpu_memory_total_bytes{{{rank}}}")
        ),
        Some((80 * GIB) as f64)
    );
    // KV bytes in use: 0.25 of the 2 GiB pool.
    assert_eq!(
        value(
            &out,
            &format!("sglang_kv_pool_used_estimate_bytes{{server=\"{server}\",model_name=\"\",engine_type=\"{engine}\",dp_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"}}")
        ),
        Some((GIB / 2) as f64)
    );
}

fn script_file(dir: &Path) -> PathBuf {
    dir.join("nvml-script.txt")
}

/// A prepared proc tree entry: `cmdline`, `cgroup`, optional `environ`.
fn fake_proc(root: &Path, pid: u32, title: &str, cgroup: &str, environ: Option<&str>) {
    let d = root.join(pid.to_string());
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("cmdline"), format!("{title}\0")).unwrap();
    std::fs::write(d.join("cgroup"), cgroup).unwrap();
    if let Some(e) = environ {
        std::fs::write(d.join("environ"), e).unwrap();
    }
}

fn four_gpus() -> String {
    let mut s = String::from("driver 560.35.03\n");
    for i in 0..4 {
        s += &format!(
            "gpu {i} GPU-{i}{i}{i}{i} 00000000:{:02X}:00.0 {} 0 {} {} NVIDIA A100-SXM4-40GB\n",
            0x10 + i,
            40 * GIB,
            40 * GIB - (i as u64 + 1) * GIB,
            (i as u64 + 1) * GIB
        );
    }
    s
}

fn tp_log(dir: &Path, name: &str, header: &str) -> String {
    let p = dir.join(format!("{name}.log"));
    let mut text = String::from(header);
    for tp in 0..2 {
        text += &format!("[2026-06-03 10:00:0{tp} TP{tp}] Decode batch, #running-req: 1, #token: 10, token usage: 0.10, gen throughput (token/s): 1.00, #queue-req: 0\n");
    }
    std::fs::write(&p, text).unwrap();
    format!("{name}={}", p.display())
}

fn rank_info(server: &str, engine: &str, tp: u32, gpu: u32, method: &str) -> String {
    format!(
        "sglang_rank_gpu_info{{server=\"{server}\",engine_type=\"{engine}\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}{gpu}{gpu}{gpu}\",method=\"{method}\"}} 1"
    )
}

#[test]
fn cgroup_unit_names_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_nvml(dir.path());
    let proc_root = dir.path().join("proc");
    let unit = |u: &str| format!("12:pids:/system.slice/{u}\n0::/system.slice/{u}\n");
    fake_proc(
        &proc_root,
        101,
        "sglang::scheduler_TP0",
        &unit("sglang-prefill.service"),
        None,
    );
    fake_proc(
        &proc_root,
        102,
        "sglang::scheduler_TP1",
        &unit("sglang-prefill.service"),
        None,
    );
    fake_proc(
        &proc_root,
        201,
        "sglang::scheduler_TP0",
        &unit("sglang-decode.service"),
        None,
    );
    fake_proc(
        &proc_root,
        202,
        "sglang::scheduler_TP1",
        &unit("sglang-decode.service"),
        None,
    );
    // An SGLang server this exporter does not read: its memory is listed, no rank mapped.
    fake_proc(
        &proc_root,
        301,
        "sglang::scheduler",
        &unit("sglang-other.service"),
        None,
    );
    let s = script_file(dir.path());
    script(
        &s,
        &(four_gpus()
            + "proc 2 101 1000\nproc 3 102 2000\nproc 0 201 3000\nproc 1 202 4000\nproc 0 301 5000\n"),
    );
    let pre = tp_log(dir.path(), "sglang-prefill", "");
    let dec = tp_log(dir.path(), "sglang-decode", "");
    let gp = format!("--gpu.proc-root={}", proc_root.display());
    let (out, _) = once(&lib, &s, &[&gp, &pre, &dec]);
    // Both print plain decode lines (no PD fields): unified servers, whatever the names say.
    assert_eq!(
        samples(&out, "sglang_rank_gpu_info"),
        [
            rank_info("sglang-decode", "unified", 0, 0, "process"),
            rank_info("sglang-decode", "unified", 1, 1, "process"),
            rank_info("sglang-prefill", "unified", 0, 2, "process"),
            rank_info("sglang-prefill", "unified", 1, 3, "process"),
        ]
    );
    assert_eq!(
        samples(&out, "sglang_gpu_process_memory_used_bytes"),
        [
            "sglang_gpu_process_memory_used_bytes{gpu=\"0\",uuid=\"GPU-0000\",pid=\"201\"} 3000",
            "sglang_gpu_process_memory_used_bytes{gpu=\"0\",uuid=\"GPU-0000\",pid=\"301\"} 5000",
            "sglang_gpu_process_memory_used_bytes{gpu=\"1\",uuid=\"GPU-1111\",pid=\"202\"} 4000",
            "sglang_gpu_process_memory_used_bytes{gpu=\"2\",uuid=\"GPU-2222\",pid=\"101\"} 1000",
            "sglang_gpu_process_memory_used_bytes{gpu=\"3\",uuid=\"GPU-3333\",pid=\"102\"} 2000",
        ]
    );
    assert_eq!(
        value(&out, "sglang_rank_gpu_memory_used_bytes{server=\"sglang-prefill\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"1\",moe_ep_rank=\"0\",gpu=\"3\",uuid=\"GPU-3333\"}"),
        Some((4 * GIB) as f64)
    );
}

#[test]
fn explicit_list_and_server_args_placement() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_nvml(dir.path());
    let proc_root = dir.path().join("proc");
    // Server `vis`: its scheduler is not on NVML's list (another PID namespace), but /proc shows
    // its CUDA_VISIBLE_DEVICES, which server_args' GPU ids count from.
    fake_proc(
        &proc_root,
        401,
        "sglang::scheduler_TP0",
        "0::/system.slice/vis.service\n",
        Some("PATH=/usr/bin\0CUDA_VISIBLE_DEVICES=GPU-3333,GPU-1111\0"),
    );
    let s = script_file(dir.path());
    script(&s, &four_gpus());
    let args = |base: u32| {
        format!("[2026-06-03 09:59:00] server_args=ServerArgs(model_path='m', tp_size=2, dp_size=1, base_gpu_id={base}, gpu_id_step=1, enable_dp_attention=False)\n")
    };
    let ex = tp_log(dir.path(), "ex", &args(0));
    let sa = tp_log(dir.path(), "sa", &args(2));
    let vis = tp_log(dir.path(), "vis", &args(0));
    let gp = format!("--gpu.proc-root={}", proc_root.display());
    let (out, _) = once(&lib, &s, &[&gp, "--gpus", "ex=GPU-1111,0", &ex, &sa, &vis]);
    assert_eq!(
        samples(&out, "sglang_rank_gpu_info"),
        [
            rank_info("ex", "unified", 0, 1, "explicit"),
            rank_info("ex", "unified", 1, 0, "explicit"),
            rank_info("sa", "unified", 0, 2, "server_args"),
            rank_info("sa", "unified", 1, 3, "server_args"),
            rank_info("vis", "unified", 0, 3, "server_args"),
            rank_info("vis", "unified", 1, 1, "server_args"),
        ]
    );
}

#[test]
fn a_failing_gpu_does_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_nvml(dir.path());
    let s = script_file(dir.path());
    // GPU 0: memory call fails (GPU lost); GPU 1: no handle at all; GPUs 2, 3 fine.
    script(
        &s,
        &(four_gpus() + "fail 0 memory 15\nfail 1 handle 15\nfail 3 procs 999\n"),
    );
    // `--once` needs an input (without one it is the "no inputs" error): an empty log.
    let log = dir.path().join("empty.log");
    std::fs::write(&log, "").unwrap();
    let (out, err) = once(&lib, &s, &[log.to_str().unwrap()]);
    assert_eq!(value(&out, "sglang_log_exporter_nvml_up"), Some(1.0));
    assert_eq!(
        samples(&out, "sglang_gpu_memory_used_bytes"),
        [
            format!(
                "sglang_gpu_memory_used_bytes{{gpu=\"2\",uuid=\"GPU-2222\"}} {}",
                3 * GIB
            ),
            format!(
                "sglang_gpu_memory_used_bytes{{gpu=\"3\",uuid=\"GPU-3333\"}} {}",
                4 * GIB
            ),
        ]
    );
    let info: Vec<&str> = samples(&out, "sglang_gpu_info")
        .iter()
        .map(|l| &l[..l.find(",uuid").unwrap()])
        .collect();
    assert_eq!(
        info,
        [
            "sglang_gpu_info{gpu=\"0\"",
            "sglang_gpu_info{gpu=\"2\"",
            "sglang_gpu_info{gpu=\"3\""
        ]
    );
    assert_eq!(
        samples(&out, "sglang_log_exporter_nvml_errors_total"),
        [
            "sglang_log_exporter_nvml_errors_total{gpu=\"0\",call=\"memory_info\"} 1",
            "sglang_log_exporter_nvml_errors_total{gpu=\"1\",call=\"handle\"} 1",
            "sglang_log_exporter_nvml_errors_total{gpu=\"3\",call=\"compute_processes\"} 1",
        ]
    );
    assert_eq!(
        err.matches("NVML call failed on one GPU").count(),
        3,
        "{err}"
    );
}

#[test]
fn no_library_or_no_driver_serves_everything_else() {
    let dir = tempfile::tempdir().unwrap();
    let log = crate::common::sample("pd-decode-session.log");
    let log = log.to_str().unwrap();
    let s = script_file(dir.path());
    script(&s, &four_gpus());
    let missing = dir.path().join("nowhere/libnvidia-ml.so.1");
    let lib = fake_nvml(dir.path());
    let with_driver_error = {
        script(&dir.path().join("no-driver.txt"), "init_error 9\n");
        dir.path().join("no-driver.txt")
    };
    for (lib, script_path) in [(&missing, &s), (&lib, &with_driver_error)] {
        let (out, err) = once(lib, script_path, &[log]);
        assert_eq!(value(&out, "sglang_log_exporter_nvml_up"), Some(0.0));
        assert_eq!(
            samples(&out, "sglang_log_exporter_nvml_errors_total"),
            ["sglang_log_exporter_nvml_errors_total{gpu=\"\",call=\"init\"} 1"]
        );
        assert!(
            out.lines()
                .all(|l| !l.starts_with("sglang_gpu_") && !l.starts_with("sglang_rank_gpu")),
            "{out}"
        );
        assert_eq!(
            samples(&out, "sglang:token_usage").len(),
            4,
            "log metrics still served"
        );
        assert_eq!(err.matches("NVML unavailable").count(), 1, "{err}");
    }
}

#[test]
fn live_outage_then_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_nvml(dir.path());
    let s = script_file(dir.path());
    script(&s, &four_gpus());
    let log = crate::common::sample("pd-decode-session.log");
    let env = [("FAKE_NVML_SCRIPT", s.as_os_str())];
    let mut e = Exporter::start_env(
        &[
            "--gpu.nvml-library",
            lib.to_str().unwrap(),
            "--gpu.interval",
            "50ms",
            "--gpu.retry-interval",
            "50ms",
            log.to_str().unwrap(),
        ],
        &env,
    );
    let used0 = "sglang_gpu_memory_used_bytes{gpu=\"0\",uuid=\"GPU-0000\"}";
    // Wait for the first sample and for the log to be read (the reader thread runs on its own).
    let m = e.scrape_until(20, |m| {
        value(m, used0).is_some() && samples(m, "sglang_kv_pool_used_estimate_bytes").len() == 4
    });
    assert_eq!(value(&m, used0), Some(GIB as f64));
    assert_eq!(value(&m, "sglang_log_exporter_nvml_up"), Some(1.0));
    // The 2026-06-03 log is idle by the wall clock: like token usage, the KV estimate reads 0.
    let kv = samples(&m, "sglang_kv_pool_used_estimate_bytes");
    assert_eq!(kv.len(), 4);
    assert!(kv.iter().all(|l| l.ends_with("} 0")), "{kv:?}");
    // The device count call starts failing: NVML is down, GPU series go, the rest stays.
    script(&s, &(four_gpus() + "count_error 999\n"));
    let m = e.scrape_until(20, |m| value(m, "sglang_log_exporter_nvml_up") == Some(0.0));
    assert_eq!(value(&m, "sglang_log_exporter_nvml_up"), Some(0.0));
    assert_eq!(value(&m, used0), None);
    assert_eq!(samples(&m, "sglang:token_usage").len(), 4);
    // It comes back with new values.
    script(
        &s,
        &four_gpus().replace(&format!(" {} NVIDIA", GIB), " 7 NVIDIA"),
    );
    let m = e.scrape_until(20, |m| value(m, used0) == Some(7.0));
    assert_eq!(value(&m, used0), Some(7.0));
    assert_eq!(value(&m, "sglang_log_exporter_nvml_up"), Some(1.0));
    let _ = e.child.kill();
    let _ = e.child.wait();
    let err = e.stderr_to_end();
    assert_eq!(err.matches("NVML unavailable").count(), 1, "{err}");
    assert_eq!(err.matches("NVML is available again").count(), 1, "{err}");
}

/// The README's PromQL joins, evaluated by `promtool test rules` over the series of a real
/// `--once` exposition scraped from two hosts (`a:8771`, `b:8771`, job `sglang`) that run a
/// server of the same name: each join answers once per host and rank, with no "many-to-many
/// matching" error (a join on the rank labels alone gave one).
#[test]
fn readme_joins_work_in_promtool() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_nvml(dir.path());
    let s = script_file(dir.path());
    script(&s, &four_gpus());
    let log = dir.path().join("dec.log");
    std::fs::write(
        &log,
        "[2026-06-03 10:00:00 TP0] KV Cache is allocated. #tokens: 100000, KV size: 4.00 GB\n\
         [2026-06-03 10:00:00 TP1] KV Cache is allocated. #tokens: 100000, KV size: 4.00 GB\n\
         [2026-06-03 10:00:01 TP0] max_total_num_tokens=100000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=64, context_len=131072\n\
         [2026-06-03 10:00:05 TP0] Decode batch, #running-req: 3, #token: 25000, token usage: 0.25, gen throughput (token/s): 40.00, #queue-req: 0\n\
         [2026-06-03 10:00:05 TP1] Decode batch, #running-req: 3, #token: 50000, token usage: 0.50, gen throughput (token/s): 40.00, #queue-req: 0\n",
    )
    .unwrap();
    let input = format!("dec={}", log.display());
    let (out, _) = once(&lib, &s, &["--gpus", "dec=2,3", &input]);

    let q = |t: &str| t.replace('\'', "''");
    let mut y = String::from(
        "rule_files: []\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n",
    );
    const HOSTS: [&str; 2] = ["a:8771", "b:8771"];
    let scraped = |host: &str, series: &str| {
        let extra = format!("instance=\"{host}\",job=\"sglang\"");
        match series.split_once('{') {
            Some((n, rest)) => format!("{n}{{{extra},{rest}"),
            None => format!("{series}{{{extra}}}"),
        }
    };
    for l in out.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (series, v) = l.rsplit_once(' ').unwrap();
        for host in HOSTS {
            y += &format!(
                "      - series: '{}'\n        values: '{v}'\n",
                q(&scraped(host, series))
            );
        }
    }
    y += "    promql_expr_test:\n";
    let readme = std::fs::read_to_string(crate::common::root().join("README.md")).unwrap();
    let blocks: Vec<String> = readme
        .split("```promql\n")
        .skip(1)
        .map(|b| {
            b.split("```")
                .next()
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with('#'))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(blocks.len(), 4, "the README's PromQL examples");
    let plain = |tp: u32| {
        format!("server=\"dec\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\"")
    };
    let kv_labels = |tp: u32| {
        format!("server=\"dec\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\",gpu=\"{g}\",uuid=\"GPU-{g}{g}{g}{g}\"", g = tp + 2)
    };
    let rank_labels = |tp: u32| {
        format!("server=\"dec\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\",gpu=\"{g}\",uuid=\"GPU-{g}{g}{g}{g}\",method=\"explicit\"", g = tp + 2)
    };
    // four_gpus: GPU i uses (i+1) GiB of 40 GiB.
    let expect: [Vec<(String, f64)>; 4] = [
        // A rank's exact KV share (the Metrics section).
        vec![(plain(0), 0.25), (plain(1), 0.5)],
        vec![(kv_labels(0), 0.25), (kv_labels(1), 0.5)],
        vec![(rank_labels(0), 3.0 / 40.0), (rank_labels(1), 4.0 / 40.0)],
        vec![
            (kv_labels(0), 0.25 * 4.0 / 40.0),
            (kv_labels(1), 0.5 * 4.0 / 40.0),
        ],
    ];
    for (expr, exp) in blocks.iter().zip(expect) {
        y += &format!(
            "      - expr: '{}'\n        eval_time: 0m\n        exp_samples:\n",
            q(expr)
        );
        for (labels, v) in exp {
            // Prometheus drops labels with empty values.
            let labels: Vec<&str> = labels
                .split(',')
                .filter(|l| !l.ends_with("=\"\""))
                .collect();
            let labels = labels.join(",");
            for host in HOSTS {
                y += &format!(
                    "          - labels: '{{instance=\"{host}\",job=\"sglang\",{}}}'\n            value: {v}\n",
                    q(&labels)
                );
            }
        }
    }
    crate::promtools::test_rules(dir.path(), "joins.test.yml", &y);
}

/// `--gpus` with a log that starts mid-run (only DP2 TP2 and DP3 TP3 have printed): the ranks
/// fit the list, so they map by their own numbers (the list's third and fourth GPU), not by the
/// smallest rank seen; and the mapping stays as the other ranks appear.
#[test]
fn an_explicit_list_maps_a_partial_view_of_ranks_by_their_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_nvml(dir.path());
    let s = script_file(dir.path());
    script(&s, &four_gpus());
    let log = dir.path().join("dec.log");
    let line = |dp: u32| {
        format!("[2026-06-03 10:00:0{dp} DP{dp} TP{dp}] Decode batch, #running-req: 1, #token: 10, token usage: 0.10, gen throughput (token/s): 1.00, #queue-req: 0\n")
    };
    std::fs::write(&log, line(2) + &line(3)).unwrap();
    let input = format!("dec={}", log.display());
    let info = |dp: u32, gpu: u32| {
        format!("sglang_rank_gpu_info{{server=\"dec\",engine_type=\"unified\",dp_rank=\"{dp}\",pp_rank=\"0\",tp_rank=\"{dp}\",moe_ep_rank=\"0\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}{gpu}{gpu}{gpu}\",method=\"explicit\"}} 1")
    };
    let (out, _) = once(&lib, &s, &["--gpus", "dec=0,1,2,3", &input]);
    assert_eq!(
        samples(&out, "sglang_rank_gpu_info"),
        [info(2, 2), info(3, 3)]
    );
    std::fs::write(&log, line(2) + &line(3) + &line(1)).unwrap();
    let (out, _) = once(&lib, &s, &["--gpus", "dec=0,1,2,3", &input]);
    assert_eq!(
        samples(&out, "sglang_rank_gpu_info"),
        [info(1, 1), info(2, 2), info(3, 3)]
    );
    std::fs::write(&log, line(2) + &line(3) + &line(1) + &line(0)).unwrap();
    let (out, _) = once(&lib, &s, &["--gpus", "dec=0,1,2,3", &input]);
    assert_eq!(
        samples(&out, "sglang_rank_gpu_info"),
        [info(0, 0), info(1, 1), info(2, 2), info(3, 3)]
    );
}

/// A fake NVML script of `n` idle GPUs, `GPU-iiii` each.
fn gpus(n: u32) -> String {
    let mut s = String::from("driver 560.35.03\n");
    for i in 0..n {
        s += &format!(
            "gpu {i} GPU-{i}{i}{i}{i} 00000000:{:02X}:00.0 {} 0 {} {} NVIDIA H100 80GB HBM3\n",
            0x10 + i,
            80 * GIB,
            GIB,
            79 * GIB
        );
    }
    s
}

/// Plain DP seen in part (hostile pass, `tests/data/gpu/plaindp-dp1-only.log`: the start-up
/// lines of `DP1 TP0` and `DP1 TP1` only, no `server_args`) on `--gpus …=4,5,6,7`: `DP1 TP0`
/// proves plain DP (under DP attention DP1 holds TP ranks from tp/dp on), TP1 a TP size of 2
/// or more, and a second replica within 4 GPUs a TP size of 2: DP1 is on the list's last two,
/// GPUs 6 and 7, and stays there when DP0 appears. On an 8-GPU list the TP size could be 2 to
/// 6: DP1 is left unmapped rather than mapped wrongly.
#[test]
fn a_partial_plain_dp_view_maps_only_what_it_proves() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_nvml(dir.path());
    let s = script_file(dir.path());
    script(&s, &gpus(8));
    let src = crate::common::root().join("tests/data/gpu/plaindp-dp1-only.log");
    let log = dir.path().join("plaindp.log");
    std::fs::copy(&src, &log).unwrap();
    let input = format!("plaindp={}", log.display());
    let info = |dp: u32, tp: u32, gpu: u32| {
        format!("sglang_rank_gpu_info{{server=\"plaindp\",engine_type=\"unified\",dp_rank=\"{dp}\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}{gpu}{gpu}{gpu}\",method=\"explicit\"}} 1")
    };
    let (out, _) = once(&lib, &s, &["--gpus", "plaindp=4,5,6,7", &input]);
    assert_eq!(
        samples(&out, "sglang_rank_gpu_info"),
        [info(1, 0, 6), info(1, 1, 7)]
    );
    let (out, _) = once(&lib, &s, &["--gpus", "plaindp=0,1,2,3,4,5,6,7", &input]);
    assert_eq!(samples(&out, "sglang_rank_gpu_info"), Vec::<&str>::new());
    // DP0 appears: DP1 keeps GPUs 6 and 7.
    let dp0 = (0..2)
        .map(|tp| format!("[2026-06-03 09:00:01 DP0 TP{tp}] Load weight end. elapsed=1.00 s, type=X, avail mem=1.00 GB, mem usage=1.00 GB.\n"))
        .collect::<String>();
    crate::common::append(&log, dp0.as_bytes());
    let (out, _) = once(&lib, &s, &["--gpus", "plaindp=4,5,6,7", &input]);
    assert_eq!(
        samples(&out, "sglang_rank_gpu_info"),
        [info(0, 0, 4), info(0, 1, 5), info(1, 0, 6), info(1, 1, 7)]
    );
}

/// `--gpus` without `server_args` under pipeline parallelism and on a host of a multi-node
/// server (hostile pass 31, H4; `tests/data/gpu/`). A PP stage's stride is `tp_size`, which
/// the ranks seen only bound, and a host's block of ranks starts where the ranks seen leave
/// open: a rank maps only where every layout left agrees, and never moves as ranks appear.
#[test]
fn pipeline_and_host_offsets_map_only_what_every_layout_agrees_on() {
    let dir = tempfile::tempdir().unwrap();
    let lib = fake_nvml(dir.path());
    let s = script_file(dir.path());
    script(&s, &gpus(8));
    let info = |server: &str, pp: u32, tp: u32, gpu: u32| {
        format!("sglang_rank_gpu_info{{server=\"{server}\",engine_type=\"unified\",pp_rank=\"{pp}\",tp_rank=\"{tp}\",moe_ep_rank=\"0\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}{gpu}{gpu}{gpu}\",method=\"explicit\"}} 1")
    };
    let run = |file: &str, list: &str| {
        let src = crate::common::root().join("tests/data/gpu").join(file);
        let log = dir.path().join(file);
        std::fs::copy(&src, &log).unwrap();
        let server = file.trim_end_matches(".log");
        let input = format!("{server}={}", log.display());
        let (out, _) = once(&lib, &s, &["--gpus", &format!("{server}={list}"), &input]);
        samples(&out, "sglang_rank_gpu_info")
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    // The stats lines of PP0 TP0 and PP1 TP0 (what a PP2 server prints after start-up):
    // PP1 TP0 is GPU 5, 6 or 7 by `tp_size` (6 under PP2 x TP2); PP0 TP0 is GPU 4 under all.
    assert_eq!(
        run("pp2-stats-only.log", "4,5,6,7"),
        [info("pp2-stats-only", 0, 0, 4)]
    );
    // PP1 TP0 alone: GPU 5, 6 or 7 by `tp_size`; then PP0 TP1 appears
    // (GPU 5 under every layout) and PP1 TP0 stays unmapped, never moved.
    assert_eq!(run("pp1-tp0-only.log", "4,5,6,7"), Vec::<String>::new());
    assert_eq!(
        run("pp1-tp0-then-pp0-tp1.log", "4,5,6,7"),
        [info("pp1-tp0-then-pp0-tp1", 0, 1, 5)]
    );
    // TP12 alone on an 8-GPU list (a host of a multi-node server, no server_args): GPU 4 of
    // TP8-TP15, 0 of TP12-TP15, ...: unmapped; so it stays when TP8 appears.
    assert_eq!(
        run("tp12-only.log", "0,1,2,3,4,5,6,7"),
        Vec::<String>::new()
    );
    assert_eq!(
        run("tp12-then-tp8.log", "0,1,2,3,4,5,6,7"),
        Vec::<String>::new()
    );
}
