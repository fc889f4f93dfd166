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

/// Starts the exporter with `fd` as descriptor 3 and `LISTEN_FDS=1`, `LISTEN_PID` its
/// own pid (a shell sets it to `$$` and execs: the pid stays), as systemd does.
fn start_activated(fd: std::os::fd::RawFd, args: &[&str]) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let mut cmd = std::process::Command::new("sh");
    cmd.arg("-c")
        .arg("LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\" \"$@\"")
        .arg(crate::common::bin())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    // SAFETY: dup2 is async-signal-safe; the new descriptor 3 is not close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself keeps close-on-exec: cleared by hand then.
            let r = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// `--web.systemd-socket` serves on the socket passed as descriptor 3, not on
/// `--web.listen-address`.
#[test]
fn systemd_socket_activation_serves_on_the_passed_socket() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let ignored = crate::common::free_port();
    let log = sample("pd-decode-session.log");
    let child = start_activated(
        std::os::fd::AsRawFd::as_raw_fd(&listener),
        &[
            "--web.systemd-socket",
            "--web.listen-address",
            &format!("127.0.0.1:{ignored}"),
            "--gpu.disable",
            log.to_str().unwrap(),
        ],
    );
    // This test keeps its copy open: the exporter's is what accepts.
    let e = Exporter::tapped(child, port);
    let m = e.scrape_until(20, |m| m.contains("sglang:num_running_reqs{"));
    assert!(m.contains("sglang_log_exporter_build_info{"), "{m}");
    assert!(std::net::TcpStream::connect(("127.0.0.1", ignored)).is_err());
}

/// Without a socket passed (`LISTEN_FDS` for another process, or a descriptor that is no
/// listening TCP socket) it exits with a message saying so, never serving nothing.
#[test]
fn systemd_socket_without_one_passed_is_a_clear_error() {
    let out = std::process::Command::new(crate::common::bin())
        .args(["--web.systemd-socket", "--gpu.disable", "-"])
        .env("LISTEN_PID", "1")
        .env("LISTEN_FDS", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--web.systemd-socket: systemd passed no socket"),
        "{err}"
    );
    // A bound but not listening socket as descriptor 3.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut child = start_activated(
        std::os::fd::AsRawFd::as_raw_fd(&udp),
        &["--web.systemd-socket", "--gpu.disable", "-"],
    );
    let status = child.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success());
    assert!(
        err.contains("descriptor 3 from systemd is not a listening stream socket"),
        "{err}"
    );
}

/// The first line logged names the version and every input.
#[test]
fn the_start_up_line_names_the_version_and_the_inputs() {
    use std::os::unix::fs::PermissionsExt;
    let log = sample("pd-decode-session.log");
    // A journalctl refused the journal, as one run by a user outside systemd-journal is.
    let dir = tempfile::tempdir().unwrap();
    let jctl = dir.path().join("journalctl");
    std::fs::write(
        &jctl,
        "#!/bin/sh\necho 'No journal files were opened due to insufficient permissions.' >&2\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&jctl, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut e = Exporter::start(&[
        "--gpu.disable",
        "--journal-unit",
        "sglang-decode.service",
        "--journalctl",
        jctl.to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    // A journalctl that fails: not ready, saying why and which group reads (issue 38.5, 38.7).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut ready = e.get("/-/ready");
    while !ready.2.contains("cannot read journald:") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
        ready = e.get("/-/ready");
    }
    assert_eq!(ready.0, 503);
    let jctl = jctl.display();
    assert!(
        ready.2.contains(&format!("cannot read journald:sglang-decode.service ({jctl} failed (exit status: 1): No journal files were opened due to insufficient permissions. (the exporter's user may not read the system journal: add it to group systemd-journal")),
        "{}",
        ready.2
    );
    let _ = e.child.kill();
    let _ = e.child.wait();
    let all = e.stderr_to_end();
    let first = all.lines().next().unwrap();
    let want = format!(
        "INFO starting sglang-log-exporter version=\"{}\" inputs=file {}, journal unit sglang-decode.service",
        sglang_log_exporter::cli::VERSION,
        log.display()
    );
    assert!(first.ends_with(&want), "{first}\n{want}");
}
