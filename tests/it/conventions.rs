//! Issue 38.7: the conventions an SRE expects of any exporter. `process_*` for the exporter
//! itself, `build_info` with the goversion-style labels, `--web.systemd-socket`, a start-up
//! line naming the version and the inputs.

use crate::common::{sample, value, Exporter};

/// `process_max_fds` is the soft `RLIMIT_NOFILE` the child inherited from this test, and
/// `process_start_time_seconds` is what its own `/proc/PID/stat` says (boot time plus the
/// start in clock ticks): exact, both read while it runs; the body is read whole gzip or not.
#[test]
fn process_metrics_describe_the_exporter_itself() {
    let log = sample("pd-decode-session.log");
    let e = Exporter::start(&["--gpu.disable", log.to_str().unwrap()]);
    let m = e.scrape_until(20, |m| m.contains("sglang:num_running_reqs{"));
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) }, 0);
    assert_eq!(value(&m, "process_max_fds"), Some(rl.rlim_cur as f64));
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", e.child.id())).unwrap();
    let btime: f64 = std::fs::read_to_string("/proc/stat")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: sysconf reads a configuration value.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let s = sglang_log_exporter::export::process::parse_stat(&stat, btime, ticks, 4096.0).unwrap();
    assert_eq!(value(&m, "process_start_time_seconds"), Some(s.start_time));
    // Followers, HTTP workers and the main thread.
    assert!(
        value(&m, "process_threads").is_some_and(|n| n >= 3.0),
        "{m}"
    );
    assert!(value(&m, "process_resident_memory_bytes").is_some_and(|n| n > 0.0));
    assert!(value(&m, "process_open_fds").is_some_and(|n| n >= 3.0));
    assert!(m.contains("# TYPE process_cpu_seconds_total counter\n"));
}

/// `build_info` carries version, revision, branch and rustc, as Go exporters' `goversion`.
#[test]
fn build_info_names_branch_and_rustc() {
    let text = crate::common::once(&[
        "--gpu.disable",
        sample("pd-decode-session.log").to_str().unwrap(),
    ]);
    let want = format!(
        "sglang_log_exporter_build_info{{branch=\"{}\",revision=\"{}\",rustc=\"{}\",version=\"{}\"}} 1",
        env!("SGLANG_LOG_EXPORTER_BRANCH"),
        env!("SGLANG_LOG_EXPORTER_REVISION"),
        env!("SGLANG_LOG_EXPORTER_RUSTC"),
        env!("CARGO_PKG_VERSION"),
    );
    assert!(text.lines().any(|l| l == want), "{want}\n{text}");
    // The compiler's version as `rustc -V` gives it: three numbers.
    let rustc = env!("SGLANG_LOG_EXPORTER_RUSTC");
    let parts: Vec<&str> = rustc.split('.').collect();
    assert_eq!(parts.len(), 3, "{rustc}");
    assert!(
        parts[0].parse::<u32>().is_ok() && parts[1].parse::<u32>().is_ok(),
        "{rustc}"
    );
}
