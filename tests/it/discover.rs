//! Pod log discovery (`--input.glob`) on a real directory tree laid out like a Kubernetes
//! node's `/var/log/pods` (and `/var/log/containers`) in a temporary directory: pods appearing,
//! CRI rotation, a container restarting, pods disappearing, the cap on followed files; the
//! exact series with their labels, and their expiry. Every wait polls with a deadline.

use std::path::{Path, PathBuf};

use crate::common::{append, once, parse_exposition, samples, value, Exporter};

/// A CRI log record (`<RFC 3339 time> stdout F <message>`) stamped now, so live lines are
/// current (not idle).
fn cri(msg: &str) -> String {
    let now = jiff::Timestamp::now();
    format!(
        "{} stdout F {msg}\n",
        now.strftime("%Y-%m-%dT%H:%M:%S%.9fZ")
    )
}

/// A decode stats line of rank `tp` with token usage `usage`, prefixed with the time now (UTC).
fn decode(tp: u32, usage: &str) -> String {
    let now = jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC);
    format!(
        "[{} TP{tp}] Decode batch, #running-req: 1, #token: 10, token usage: {usage}, gen throughput (token/s): 1.00, #queue-req: 0",
        now.strftime("%Y-%m-%d %H:%M:%S")
    )
}

/// `<root>/<namespace>_<pod>_<uid>/<container>/<n>.log`, its directory created.
fn pod_log(root: &Path, ns: &str, pod: &str, uid: &str, container: &str, n: u32) -> PathBuf {
    let dir = root.join(format!("{ns}_{pod}_{uid}")).join(container);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{n}.log"))
}

/// The `sglang:token_usage` samples as `labels value` (labels in printed order).
fn usages(m: &str) -> Vec<String> {
    parse_exposition(m)
        .into_iter()
        .filter(|s| s.name == "sglang:token_usage")
        .map(|s| {
            let l: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("{} {}", l.join(","), s.value)
        })
        .collect()
}

fn usage_of(pod: &str, ns: &str, v: f64) -> String {
    format!("server={pod},namespace={ns},pod={pod},container=sglang,model_name=,engine_type=unified,pp_rank=0,tp_rank=0,moe_ep_rank=0 {v}")
}

fn source_up(m: &str, path: &Path) -> Option<f64> {
    value(
        m,
        &format!(
            "sglang_log_exporter_source_up{{source=\"{}\"}}",
            path.display()
        ),
    )
}

fn start(pods: &Path, extra: &[&str]) -> Exporter {
    let glob = format!("{}/*/*/*.log", pods.display());
    let mut args = vec![
        "--gpu.disable",
        "--input.glob",
        &glob,
        "--input.kubernetes-container",
        "sglang",
        "--input.scan-interval",
        "100ms",
        "--poll-interval",
        "50ms",
        "--deleted-file-grace",
        "1s",
        "--input.expiry",
        "2s",
    ];
    args.extend_from_slice(extra);
    Exporter::start(&args)
}

const FOLLOWED: &str = "sglang_log_exporter_discovery_files_followed";

#[test]
fn pods_appear_rotate_restart_and_go() {
    let dir = tempfile::tempdir().unwrap();
    let pods = dir.path().join("pods");
    let a0 = pod_log(&pods, "llm", "sglang-a", "uid-a", "sglang", 0);
    append(&a0, cri(&decode(0, "0.10")).as_bytes());
    // Another container of the pod: not read (--input.kubernetes-container sglang).
    let side = pod_log(&pods, "llm", "sglang-a", "uid-a", "istio-proxy", 0);
    append(&side, cri(&decode(0, "0.99")).as_bytes());
    let e = start(&pods, &[]);

    let m = e.scrape_until(20, |m| usages(m).len() == 1);
    assert_eq!(usages(&m), [usage_of("sglang-a", "llm", 0.1)]);
    assert_eq!(value(&m, FOLLOWED), Some(1.0));
    assert_eq!(source_up(&m, &side), None);

    // A pod appears.
    let b0 = pod_log(&pods, "batch", "sglang-b", "uid-b", "sglang", 0);
    append(&b0, cri(&decode(0, "0.20")).as_bytes());
    let m = e.scrape_until(20, |m| usages(m).len() == 2);
    assert_eq!(
        usages(&m),
        [
            usage_of("sglang-a", "llm", 0.1),
            usage_of("sglang-b", "batch", 0.2)
        ]
    );
    assert_eq!(value(&m, FOLLOWED), Some(2.0));

    // CRI rotation: 0.log renamed to 0.log.<time> (the runtime still writes a last line to it),
    // a new 0.log. The rotated file is finished by the tailer, never followed on its own.
    let rotated = a0.with_file_name("0.log.20260603-101010");
    std::fs::rename(&a0, &rotated).unwrap();
    append(&rotated, cri(&decode(0, "0.30")).as_bytes());
    append(&a0, cri(&decode(0, "0.35")).as_bytes());
    let lines_a0 = format!(
        "sglang_log_exporter_lines_read_total{{source=\"{}\"}}",
        a0.display()
    );
    let m = e.scrape_until(20, |m| value(m, &lines_a0) == Some(3.0));
    assert_eq!(usages(&m)[0], usage_of("sglang-a", "llm", 0.35));
    assert_eq!(source_up(&m, &rotated), None);
    assert_eq!(value(&m, FOLLOWED), Some(2.0));

    // The container restarts: 1.log is its current log (0.log stays for `kubectl logs
    // --previous`); the server is still the pod. 0.log is closed after the grace and its source
    // series expire; the server's do not.
    let a1 = pod_log(&pods, "llm", "sglang-a", "uid-a", "sglang", 1);
    append(&a1, cri(&decode(0, "0.40")).as_bytes());
    let m = e.scrape_until(20, |m| source_up(m, &a1) == Some(1.0));
    let m = if usages(&m)[0] == usage_of("sglang-a", "llm", 0.4) {
        m
    } else {
        e.scrape_until(20, |m| usages(m)[0] == usage_of("sglang-a", "llm", 0.4))
    };
    assert_eq!(usages(&m).len(), 2);
    let m = e.scrape_until(20, |m| source_up(m, &a0).is_none());
    assert_eq!(
        usages(&m),
        [
            usage_of("sglang-a", "llm", 0.4),
            usage_of("sglang-b", "batch", 0.2)
        ]
    );
    assert_eq!(value(&m, FOLLOWED), Some(2.0));
    assert_eq!(
        value(&m, &lines_a0),
        None,
        "the closed file's source expired"
    );

    a_pod_goes(&e, &pods.join("batch_sglang-b_uid-b"), &b0);
}

/// The pod of `b0` goes: its series stay for the grace and the expiry, then disappear, with
/// its source's self metrics; pod `sglang-a` stays.
fn a_pod_goes(e: &Exporter, pod_dir: &Path, b0: &Path) {
    std::fs::remove_dir_all(pod_dir).unwrap();
    let m = e.scrape();
    assert_eq!(usages(&m).len(), 2, "still shown right after the pod went");
    let m = e.scrape_until(20, |m| usages(m).len() == 1);
    assert_eq!(usages(&m), [usage_of("sglang-a", "llm", 0.4)]);
    let m = e.scrape_until(20, |m| source_up(m, b0).is_none());
    assert!(
        !m.contains("sglang-b"),
        "every series of the pod is gone:\n{m}"
    );
    assert_eq!(value(&m, FOLLOWED), Some(1.0));
    assert_eq!(
        samples(&m, "sglang_server_info"),
        ["sglang_server_info{server=\"sglang-a\",namespace=\"llm\",pod=\"sglang-a\",container=\"sglang\",model_name=\"\",engine_type=\"unified\",tp_size=\"\",dp_size=\"\",pp_size=\"\"} 1"]
    );
}

#[test]
fn a_cap_on_followed_files_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let pods = dir.path().join("pods");
    let logs: Vec<PathBuf> = ["p1", "p2", "p3"]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let f = pod_log(&pods, "llm", p, &format!("u{i}"), "sglang", 0);
            append(&f, cri(&decode(0, &format!("0.{}", i + 1))).as_bytes());
            f
        })
        .collect();
    let e = start(&pods, &["--input.max-files", "2"]);
    let skipped = "sglang_log_exporter_discovery_files_skipped_total";
    let m = e.scrape_until(20, |m| usages(m).len() == 2 && value(m, skipped).is_some());
    // Sorted by path: p1 and p2 are followed, p3 is skipped once (not at every scan).
    assert_eq!(
        usages(&m),
        [usage_of("p1", "llm", 0.1), usage_of("p2", "llm", 0.2)]
    );
    assert_eq!(value(&m, skipped), Some(1.0));
    assert_eq!(value(&m, FOLLOWED), Some(2.0));
    // A followed pod goes: the skipped one is followed in its place.
    std::fs::remove_dir_all(logs[0].parent().unwrap().parent().unwrap()).unwrap();
    let m = e.scrape_until(20, |m| {
        usages(m).contains(&usage_of("p3", "llm", 0.3)) && usages(m).len() == 2
    });
    assert_eq!(value(&m, skipped), Some(1.0));
    assert_eq!(value(&m, FOLLOWED), Some(2.0));
    drop(e);
}

#[test]
fn docker_symlinks_namespaces_and_plain_files() {
    let dir = tempfile::tempdir().unwrap();
    let pods = dir.path().join("pods");
    let containers = dir.path().join("containers");
    std::fs::create_dir_all(&containers).unwrap();
    // Two pods named alike in two namespaces, and a second wanted container of one of them.
    let x = pod_log(&pods, "ns1", "sglang-0", "u1", "sglang", 0);
    let y = pod_log(&pods, "ns2", "sglang-0", "u2", "sglang", 0);
    let z = pod_log(&pods, "ns1", "sglang-0", "u1", "sglang-decode", 0);
    for (f, v) in [(&x, "0.10"), (&y, "0.20"), (&z, "0.30")] {
        append(f, cri(&decode(0, v)).as_bytes());
    }
    // /var/log/containers symlinks to the same files, and one to a pod only found that way.
    let id = |c: char| c.to_string().repeat(64);
    std::os::unix::fs::symlink(
        &x,
        containers.join(format!("sglang-0_ns1_sglang-{}.log", id('a'))),
    )
    .unwrap();
    let only = dir.path().join("elsewhere.log");
    append(&only, cri(&decode(0, "0.40")).as_bytes());
    std::os::unix::fs::symlink(
        &only,
        containers.join(format!("other_ns3_sglang-{}.log", id('b'))),
    )
    .unwrap();
    // A plain log beside them, found by a third glob; and a compressed one, ignored.
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    append(
        &plain.join("decode.log"),
        format!("{}\n", decode(0, "0.50")).as_bytes(),
    );
    append(&plain.join("old.log.gz"), b"\x1f\x8b");
    let g1 = format!("{}/*/*/*.log", pods.display());
    let g2 = format!("{}/*.log", containers.display());
    let g3 = format!("{}/*", plain.display());
    let out = once(&[
        "--gpu.disable",
        "--idle-after",
        "1000h",
        "--input.glob",
        &g1,
        "--input.glob",
        &g2,
        "--input.glob",
        &g3,
        "--input.kubernetes-container",
        "sglang*",
    ]);
    let mut got = usages(&out);
    got.sort();
    let l = |server: &str, ns: &str, pod: &str, c: &str, v: f64| {
        format!("server={server},namespace={ns},pod={pod},container={c},model_name=,engine_type=unified,pp_rank=0,tp_rank=0,moe_ep_rank=0 {v}")
    };
    // Servers named `…decode…` whose decode lines have none of a PD decode server's fields:
    // unified (a name never gives the mode the lines deny).
    let decode_engine =
        "server=decode,model_name=,engine_type=unified,pp_rank=0,tp_rank=0,moe_ep_rank=0 0.5";
    assert_eq!(
        got,
        [
            decode_engine.to_string(),
            l(
                "ns1/sglang-0/sglang-decode",
                "ns1",
                "sglang-0",
                "sglang-decode",
                0.3
            ),
            l("ns2/sglang-0/sglang", "ns2", "sglang-0", "sglang", 0.2),
            l("other", "ns3", "other", "sglang", 0.4),
            l("sglang-0", "ns1", "sglang-0", "sglang", 0.1),
        ]
    );
    // Each file read once, under the path the glob found it by (the CRI one where both are).
    let sources: Vec<&str> = samples(&out, "sglang_log_exporter_lines_read_total");
    assert_eq!(sources.len(), 5, "{sources:?}");
}

#[test]
fn bad_discovery_options_are_refused() {
    let out = crate::common::run(&["--input.kubernetes-container", "sglang", "--once"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --input.glob"));
    let out = crate::common::run(&["--input.glob", "/x/[", "--once"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--input.glob"));
}

/// A prepared proc entry: a scheduler process of a Kubernetes pod (systemd cgroup driver).
fn pod_proc(root: &Path, pid: u32, title: &str, uid: &str, environ: &str) {
    let d = root.join(pid.to_string());
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("cmdline"), format!("{title}\0")).unwrap();
    let slice = uid.replace('-', "_");
    std::fs::write(
        d.join("cgroup"),
        format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{slice}.slice/cri-containerd-0123abcd.scope\n"),
    )
    .unwrap();
    std::fs::write(d.join("environ"), environ).unwrap();
}

/// Two SGLang pods on one node's four GPUs: each scheduler process's cgroup names its pod's
/// UID, as the pod log directory does, so NVML's processes map to the right pod's server (the
/// unit-based rule would only know "the only server"). A third pod whose processes NVML does
/// not list is placed by its server_args within the container's NVIDIA_VISIBLE_DEVICES.
#[test]
fn gpu_processes_map_to_their_pods() {
    let dir = tempfile::tempdir().unwrap();
    let pods = dir.path().join("pods");
    let (up, ud, u3) = (
        "aaaa1111-0000-4000-8000-000000000001",
        "bbbb2222-0000-4000-8000-000000000002",
        "cccc3333-0000-4000-8000-000000000003",
    );
    let args = "[2026-06-03 09:59:00] server_args=ServerArgs(model_path='m', tp_size=2, dp_size=1, base_gpu_id=0, gpu_id_step=1, enable_dp_attention=False)";
    for (pod, uid, with_args) in [
        ("sglang-prefill-0", up, false),
        ("sglang-decode-0", ud, false),
        ("sglang-2", u3, true),
    ] {
        let log = pod_log(&pods, "llm", pod, uid, "sglang", 0);
        if with_args {
            append(&log, cri(args).as_bytes());
        }
        for tp in 0..2 {
            append(&log, cri(&decode(tp, "0.10")).as_bytes());
        }
    }
    let proc_root = dir.path().join("proc");
    pod_proc(&proc_root, 101, "sglang::scheduler_TP0", up, "");
    pod_proc(&proc_root, 102, "sglang::scheduler_TP1", up, "");
    pod_proc(&proc_root, 201, "sglang::scheduler_TP0", ud, "");
    pod_proc(&proc_root, 202, "sglang::scheduler_TP1", ud, "");
    let env3 = "NVIDIA_VISIBLE_DEVICES=GPU-3333,GPU-2222\0";
    pod_proc(&proc_root, 301, "sglang::scheduler_TP0", u3, env3);
    let lib = crate::gpu::fake_nvml(dir.path());
    let script = dir.path().join("nvml-script.txt");
    let mut s = String::from("driver 560.35.03\n");
    for i in 0..4u64 {
        s += &format!(
            "gpu {i} GPU-{i}{i}{i}{i} 00000000:{:02X}:00.0 {} 0 {} {} NVIDIA A100-SXM4-40GB\n",
            0x10 + i,
            40u64 << 30,
            39u64 << 30,
            1u64 << 30
        );
    }
    s += "proc 2 101 1000\nproc 3 102 2000\nproc 0 201 3000\nproc 1 202 4000\n";
    std::fs::write(&script, s).unwrap();
    let glob = format!("{}/*/*/*.log", pods.display());
    let out = run_env(
        &[
            "--once",
            "--timezone",
            "UTC",
            "--gpu.nvml-library",
            lib.to_str().unwrap(),
            &format!("--gpu.proc-root={}", proc_root.display()),
            "--input.glob",
            &glob,
        ],
        &[("FAKE_NVML_SCRIPT", script.as_os_str())],
    );
    let info = |pod: &str, engine: &str, tp: u32, gpu: u32, method: &str| {
        format!("sglang_rank_gpu_info{{server=\"{pod}\",namespace=\"llm\",pod=\"{pod}\",container=\"sglang\",engine_type=\"{engine}\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\",gpu=\"{gpu}\",uuid=\"GPU-{gpu}{gpu}{gpu}{gpu}\",method=\"{method}\"}} 1")
    };
    assert_eq!(
        samples(&out, "sglang_rank_gpu_info"),
        [
            info("sglang-2", "unified", 0, 3, "server_args"),
            info("sglang-2", "unified", 1, 2, "server_args"),
            // Plain decode lines: unified, whatever the pods' names suggest.
            info("sglang-decode-0", "unified", 0, 0, "process"),
            info("sglang-decode-0", "unified", 1, 1, "process"),
            info("sglang-prefill-0", "unified", 0, 2, "process"),
            info("sglang-prefill-0", "unified", 1, 3, "process"),
        ]
    );
}

/// Runs the binary with `args` and extra environment variables; returns stdout, panicking
/// (with stderr) on a non-zero exit.
fn run_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> String {
    let out = std::process::Command::new(crate::common::bin())
        .args(args)
        .env("TZ", "UTC")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the binary");
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 exposition")
}

/// Repro 22 and hostile test F7: matching files whose names are not valid UTF-8 (Latin-1
/// `caf\xe9.log`, `caf\xe8.log`) are followed, each its own server named with the invalid
/// byte escaped (`caf\xE9`), never one lossy `caf\u{FFFD}` for both (which a valid
/// `caf\u{FFFD}.log` also has): three files, three servers, three sources.
#[test]
fn files_whose_names_are_not_utf8_stay_apart() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let line = |n: u32| {
        format!("[2026-11-30 15:00:00 TP0] Decode batch, #running-req: {n}, #token: 1, token usage: 0.01, #queue-req: 0\n")
    };
    std::fs::write(dir.path().join("good.log"), line(1)).unwrap();
    let names: [(&[u8], u32); 3] = [
        (b"caf\xe9.log", 3),
        (b"caf\xe8.log", 5),
        ("caf\u{FFFD}.log".as_bytes(), 7),
    ];
    for (name, n) in names {
        let odd = std::ffi::OsStr::from_bytes(name);
        std::fs::write(dir.path().join(odd), line(n)).unwrap();
    }
    let glob = format!("{}/*.log", dir.path().display());
    let running = |m: &str| -> Vec<(String, f64)> {
        let mut v: Vec<_> = parse_exposition(m)
            .into_iter()
            .filter(|s| s.name == "sglang:num_running_reqs")
            .map(|s| (s.label("server").unwrap_or("").to_string(), s.value))
            .collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v
    };
    let want = vec![
        ("caf\\xE8".to_string(), 5.0),
        ("caf\\xE9".to_string(), 3.0),
        ("caf\u{FFFD}".to_string(), 7.0),
        ("good".to_string(), 1.0),
    ];
    let args = [
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        "--input.glob",
        &glob,
    ];
    let m = once(&args);
    assert_eq!(running(&m), want, "{m}");
    let e = Exporter::start(&args);
    let m = e.scrape_until(20, |m| running(m).len() == 4);
    assert_eq!(running(&m), want, "{m}");
    assert_eq!(value(&m, FOLLOWED), Some(4.0));
    let sources = samples(&m, "sglang_log_exporter_lines_read_total");
    assert_eq!(sources.len(), 4, "{sources:?}");
    assert!(
        m.contains(&format!("{}/caf\\\\xE9.log", dir.path().display())),
        "{m}"
    );
}

/// Hostile test glob1's last step: a glob that matches a device (`rnd.log -> /dev/urandom`,
/// which kept a core busy reading it) or a socket reads neither: each is warned about once and
/// counted in `sglang_log_exporter_discovery_files_not_logs_total`; a FIFO and a regular file
/// are followed.
#[test]
fn devices_and_sockets_matched_by_a_glob_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let line = "[2026-11-30 15:00:00 TP0] Decode batch, #running-req: 4, #token: 1, token usage: 0.01, #queue-req: 0\n";
    std::fs::write(d.join("a.log"), line).unwrap();
    std::os::unix::fs::symlink("/dev/urandom", d.join("rnd.log")).unwrap();
    let _sock = std::os::unix::net::UnixListener::bind(d.join("sock.log")).unwrap();
    let glob = format!("{}/*.log", d.display());
    let args = [
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        "--input.scan-interval",
        "200ms",
        "--input.glob",
        &glob,
    ];
    let not_logs = "sglang_log_exporter_discovery_files_not_logs_total";
    let m = once(&args);
    assert_eq!(value(&m, not_logs), Some(2.0), "{m}");
    assert_eq!(samples(&m, "sglang:num_running_reqs").len(), 1, "{m}");

    // Live, with a FIFO that matches too: followed, the devices not.
    let fifo = d.join("fifo.log");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut e = Exporter::start(&args);
    let m = e.scrape_until(20, |m| {
        value(m, FOLLOWED) == Some(2.0) && m.contains(not_logs)
    });
    assert_eq!(value(&m, not_logs), Some(2.0), "{m}");
    let rnd = format!(
        "sglang_log_exporter_lines_read_total{{source=\"{}/rnd.log\"}}",
        d.display()
    );
    assert_eq!(value(&m, &rnd), None, "{m}");
    // Still two after more scans: counted once while it matches.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let m = e.scrape();
    assert_eq!(value(&m, not_logs), Some(2.0), "{m}");
    let _ = e.child.kill();
    let _ = e.child.wait();
    let log = e.stderr_to_end();
    let warned = log.matches("not a log file: not read").count();
    assert_eq!(warned, 2, "{log}");
}
