//! Every fault of the hostile test pass (`tests/data/repro/`, copied from `../shared/repro/`;
//! its README lists them), as a test with the right result. Each names the repro it keeps fixed.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{append, bin, once, parse_exposition, root, run, Exporter, Sample};

fn repro(n: u32, file: &str) -> PathBuf {
    root()
        .join("tests/data/repro")
        .join(n.to_string())
        .join(file)
}

/// The samples of `metric` in an exposition.
fn series<'a>(samples: &'a [Sample], metric: &str) -> Vec<&'a Sample> {
    samples.iter().filter(|s| s.name == metric).collect()
}

/// The one value of `metric` (panics unless there is exactly one series).
fn only(samples: &[Sample], metric: &str) -> f64 {
    let s = series(samples, metric);
    assert_eq!(s.len(), 1, "{metric}: {s:?}");
    s[0].value
}

fn once_samples(args: &[&str]) -> Vec<Sample> {
    let mut a = vec!["--gpu.disable", "--idle-after", "1000000h"];
    a.extend_from_slice(args);
    parse_exposition(&once(&a))
}

/// Repro 1: a non-ASCII digit in the prefix is a malformed prefix: the line is unmatched, never
/// a panic, in every mode (`--once`, stdin, `check`, `backfill`).
#[test]
fn repro_1_unicode_digit_in_the_timestamp_is_unmatched_in_every_mode() {
    let log = repro(1, "unicode-digit-date.log");
    let path = log.to_str().unwrap();
    let s = once_samples(&[path]);
    assert_eq!(only(&s, "sglang_log_exporter_lines_unmatched_total"), 1.0);
    assert!(
        series(&s, "sglang:num_running_reqs").is_empty(),
        "no rank is invented"
    );
    assert!(series(&s, "sglang_log_exporter_source_panics_total").is_empty());

    let input = std::fs::read(&log).unwrap();
    let out = crate::common::run_with_input(
        Command::new(bin()).args(["--once", "--gpu.disable", "-"]),
        &input,
        "the exporter",
    );
    assert_eq!(out.status.code(), Some(0));
    let s = parse_exposition(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(only(&s, "sglang_log_exporter_lines_unmatched_total"), 1.0);

    // `check` reports it as a stats-like line no pattern matched: exit 1 (a gap), not 101.
    let out = run(&["check", path]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("stats-like lines no pattern matched: 1"),
        "{text}"
    );

    let out = run(&["backfill", "--timezone", "UTC", "-o", "-", path]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "# EOF\n");
}

/// Repro 1, followed live: the reader goes on after the malformed line (lines 3, running 9).
#[test]
fn repro_1_a_followed_file_goes_on_after_the_malformed_line() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("live.log");
    std::fs::write(&log, "").unwrap();
    let e = Exporter::start(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        log.to_str().unwrap(),
    ]);
    append(
        &log,
        b"[2026-11-30 15:00:00 TP0] Decode batch, #running-req: 5, #queue-req: 0\n",
    );
    append(
        &log,
        &std::fs::read(repro(1, "unicode-digit-date.log")).unwrap(),
    );
    append(
        &log,
        b"[2026-11-30 15:00:01 TP0] Decode batch, #running-req: 9, #queue-req: 0\n",
    );
    let m = e.scrape_until(20, |m| {
        let s = parse_exposition(m);
        series(&s, "sglang:num_running_reqs")
            .first()
            .is_some_and(|x| x.value == 9.0)
    });
    let s = parse_exposition(&m);
    assert_eq!(only(&s, "sglang_log_exporter_lines_read_total"), 3.0);
    assert_eq!(only(&s, "sglang_log_exporter_source_up"), 1.0);
    assert!(series(&s, "sglang_log_exporter_source_panics_total").is_empty());
}

/// Repro 2: integers beyond 2^53 are refused like `1e309`: counted, and the gauges they feed are
/// withdrawn until a readable value (never `inf`, never the older value shown as current).
#[test]
fn repro_2_huge_integers_are_refused_and_counted_like_1e309() {
    let lines: Vec<String> = std::fs::read_to_string(repro(2, "huge-int.log"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    for (name, pick) in [("two.log", [0, 1]), ("three.log", [0, 2])] {
        let p = dir.path().join(name);
        std::fs::write(&p, format!("{}\n{}\n", lines[pick[0]], lines[pick[1]])).unwrap();
        let s = once_samples(&[p.to_str().unwrap()]);
        assert_eq!(
            only(&s, "sglang_log_exporter_field_value_errors_total"),
            2.0,
            "{name}"
        );
        assert!(series(&s, "sglang:num_running_reqs").is_empty(), "{name}");
        assert!(series(&s, "sglang:token_usage").is_empty(), "{name}");
        // The readable fields of the line are read.
        assert_eq!(only(&s, "sglang:num_used_tokens"), 10.0, "{name}");
        assert_eq!(only(&s, "sglang:gen_throughput"), 1.0, "{name}");
        assert!(s.iter().all(|x| x.value.is_finite()), "{name}");
    }
}

/// Repro 3: a derived gauge is not re-derived from the inputs left when one is unreadable (the
/// largest of the other pools is not the largest pool); colour codes inside a value are removed.
#[test]
fn repro_3_derived_gauges_keep_their_value_when_an_input_is_unreadable() {
    let run = |f: &str| once_samples(&[repro(3, f).to_str().unwrap()]);
    let good = run("good.log");
    assert_eq!(only(&good, "sglang:token_usage"), 0.3);
    let bad = run("bad-value.log");
    assert_eq!(only(&bad, "sglang:token_usage"), 0.3);
    assert_eq!(
        only(&bad, "sglang_log_exporter_field_value_errors_total"),
        1.0
    );
    assert!(
        series(&bad, "sglang:swa_token_usage").is_empty(),
        "withdrawn"
    );
    assert_eq!(only(&bad, "sglang:full_token_usage"), 0.15);
    let hit = run("hit-bad.log");
    assert_eq!(only(&hit, "sglang:cache_hit_rate"), 0.0276);
    assert_eq!(
        only(&hit, "sglang_log_exporter_field_value_errors_total"),
        0.0
    );
    assert_eq!(
        only(&hit, "sglang_log_exporter_lines_control_codes_total"),
        1.0
    );
}

/// Repro 4: the log clock of `--once` comes from lines that carry rank state: an access line
/// with a wrong day cannot make every rank idle.
#[test]
fn repro_4_one_access_line_with_a_wrong_day_makes_no_rank_idle() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("flipped.log");
    let mut text = std::fs::read_to_string(repro(4, "pd-decode-mid.log")).unwrap();
    text.push_str(
        "[2026-06-08 10:05:00] INFO:     127.0.0.1:5000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n",
    );
    std::fs::write(&p, text).unwrap();
    let s = parse_exposition(&once(&["--gpu.disable", p.to_str().unwrap()]));
    let mut running: Vec<(String, f64)> = series(&s, "sglang:num_running_reqs")
        .iter()
        .map(|x| (x.label("dp_rank").unwrap().to_string(), x.value))
        .collect();
    running.sort_by(|a, b| a.0.cmp(&b.0));
    let want = [("0", 42.0), ("1", 40.0), ("2", 41.0), ("3", 41.0)];
    assert_eq!(
        running,
        want.map(|(d, v)| (d.to_string(), v)).to_vec(),
        "the busy values of the last lines"
    );
    assert!(series(&s, "sglang_idle").iter().all(|x| x.value == 0.0));
}

/// Repro 5: copytruncate of a log whose writer lacks O_APPEND leaves a NUL hole as long as the
/// writer's offset: the first line after it is read, and the hole is skipped, not read.
#[test]
fn repro_5_a_copytruncate_hole_is_skipped_and_the_next_line_read() {
    use std::io::{Seek, Write};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("live.log");
    // No O_APPEND, like `python -m sglang.launch_server > live.log`.
    let mut w = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&log)
        .unwrap();
    let e = Exporter::start(&[
        "--gpu.disable",
        "--idle-after",
        "1000000h",
        log.to_str().unwrap(),
    ]);
    let line = |i: u32| {
        format!("[2026-11-30 15:00:00 TP0] Decode batch, #running-req: {i}, #token: 1, token usage: 0.01, #queue-req: 0\n")
    };
    let one = line(1);
    for _ in 0..15_000 {
        w.write_all(one.as_bytes()).unwrap();
    }
    let written = w.stream_position().unwrap();
    assert!(
        written > 1 << 20,
        "the hole will be longer than --max-line-bytes"
    );
    e.scrape_until(30, |m| {
        crate::common::value(
            m,
            &format!(
                "sglang_log_exporter_bytes_read_total{{source=\"{}\"}}",
                log.display()
            ),
        ) == Some(written as f64)
    });
    // logrotate's copytruncate; the writer goes on at its old offset.
    std::fs::copy(&log, dir.path().join("live.log.1")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    w.write_all(line(42).as_bytes()).unwrap();
    let m = e.scrape_until(30, |m| {
        let s = parse_exposition(m);
        series(&s, "sglang:num_running_reqs")
            .first()
            .is_some_and(|x| x.value == 42.0)
    });
    let s = parse_exposition(&m);
    assert_eq!(only(&s, "sglang_log_exporter_lines_oversized_total"), 0.0);
    // The hole (about 1.5 MB) was not read: only the lines were.
    let read = only(&s, "sglang_log_exporter_bytes_read_total");
    assert!(
        read < written as f64 + 4096.0 * 2.0,
        "read {read} bytes for {written} bytes of lines"
    );
}

/// Repro 6: the caps no longer multiply: 256 units × 256 ranks are bounded by the total rank
/// cap (2048), the rest counted as dropped, and memory stays far below the unit's MemoryMax.
#[test]
fn repro_6_a_flood_of_servers_and_ranks_is_bounded_in_all() {
    let mut input = Vec::new();
    for u in 0..256 {
        for r in 0..256 {
            let m = format!("[2026-11-30 15:00:00 DP{} TP{r}] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, cuda graph: True, gen throughput (token/s): 1.00, #queue-req: 0", r % 16);
            writeln!(
                input,
                "{}",
                serde_json::json!({"MESSAGE": m, "_SYSTEMD_UNIT": format!("unit-{u}.service"), "__REALTIME_TIMESTAMP": "1796050800000000"})
            )
            .unwrap();
        }
    }
    let out = crate::common::run_with_input(
        Command::new("/usr/bin/time")
            .args(["-f", "maxrss_kb=%M", "--"])
            .arg(bin())
            .args(["--once", "--gpu.disable", "--idle-after", "100000h", "-"]),
        &input,
        "/usr/bin/time (Debian package time)",
    );
    assert_eq!(out.status.code(), Some(0));
    let s = parse_exposition(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(series(&s, "sglang:num_running_reqs").len(), 2048);
    assert_eq!(
        only(&s, "sglang_log_exporter_series_dropped_total"),
        (256 * 256 - 2048) as f64
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let kb: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("maxrss_kb="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no maxrss in: {err}"));
    // The shipped units set MemoryMax=256M.
    assert!(kb < 128 * 1024, "peak RSS {kb} kB");
}

/// Repro 7: a soft fd limit of 1,024 and 1,100 idle connections no longer stop scrapes: the
/// limit is raised to the hard limit at start, and when the connection cap is reached the
/// oldest connection that never sent a request makes room.
#[test]
fn repro_7_idle_connections_do_not_stop_scrapes() {
    let port = crate::common::free_port();
    let log = crate::common::sample("pd-decode-session.log");
    let mut child = Command::new("bash")
        .args([
            "-c",
            "ulimit -Sn 1024 && exec \"$0\" \"$@\"",
            bin().to_str().unwrap(),
            "--gpu.disable",
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
            "--web.max-connections",
            "256",
            log.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the exporter did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let open_files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let soft: u64 = open_files
        .split_whitespace()
        .nth(3)
        .unwrap()
        .parse()
        .unwrap();
    assert!(soft > 1024, "soft limit not raised: {open_files}");
    let idle: Vec<_> = (0..1100)
        .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
        .collect();
    assert_eq!(idle.len(), 1100);
    for _ in 0..10 {
        let r = ureq::get(&format!("http://127.0.0.1:{port}/metrics"))
            .timeout(Duration::from_secs(3))
            .call()
            .expect("a scrape despite 1,100 idle connections");
        assert_eq!(r.status(), 200);
    }
    drop(idle);
    let _ = child.kill();
    let _ = child.wait();
}

/// Repro 8: SIGHUP does not end the exporter; SIGTERM afterwards deletes the pushed group.
#[test]
fn repro_8_sighup_is_survived_and_the_group_deleted_on_exit() {
    let gw = crate::promtools::pushgateway();
    let gw_url = format!("http://127.0.0.1:{}", gw.port);
    let log = crate::common::sample("pd-decode-session.log");
    let mut child = Command::new(bin())
        .args([
            "--gpu.disable",
            "--web.listen-address",
            "",
            "--push.url",
            &gw_url,
            "--push.interval",
            "1s",
            "--push.instance",
            "hup",
            log.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let group = || {
        ureq::get(&format!("{gw_url}/metrics"))
            .call()
            .map(|r| r.into_string().unwrap_or_default())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("instance=\"hup\""))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while group() == 0 {
        assert!(Instant::now() < deadline, "no push arrived");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The Pushgateway's time of the group's last push (each push moves it).
    let pushed = || {
        ureq::get(&format!("{gw_url}/metrics"))
            .call()
            .map(|r| r.into_string().unwrap_or_default())
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("push_time_seconds{") && l.contains("instance=\"hup\""))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
    };
    let pid = child.id() as i32;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    // Read after the signal: a later push time is a push after it.
    let before = pushed().expect("push_time_seconds of the group");
    // Survived: a push after the signal arrives (pushes are 1 s apart), the process still runs.
    let deadline = Instant::now() + Duration::from_secs(20);
    while pushed().is_none_or(|t| t <= before) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "SIGHUP ended the exporter"
        );
        assert!(Instant::now() < deadline, "no push after SIGHUP");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP ended the exporter"
    );
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(group(), 0, "the group is deleted on the way out");
}

/// Repro 9: backfill applies the live plausibility rule: a sample a century ahead is skipped,
/// counted and said; `--label` joins backfilled series to live ones.
#[test]
fn repro_9_backfill_skips_implausible_times_and_labels_series() {
    let out = run(&[
        "backfill",
        "--timezone",
        "UTC",
        "--label",
        "job=x",
        "--label",
        "instance=host:8771",
        "-o",
        "-",
        repro(9, "future.log").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("1 stats lines were skipped: they have an implausible time"),
        "{err}"
    );
    let om = String::from_utf8(out.stdout).unwrap();
    // Every sample at one of the two plausible lines' times (10:00:00 and 10:00:02 UTC), with
    // both labels; the same series at each.
    let (mut at0, mut at2) = (Vec::new(), Vec::new());
    for l in om.lines().filter(|l| !l.starts_with('#')) {
        let (series, ts) = l.rsplit_once(' ').unwrap();
        let (series, _) = series.rsplit_once(' ').unwrap();
        assert!(series.contains("{job=\"x\",instance=\"host:8771\","), "{l}");
        match ts {
            "1780480800" => at0.push(series),
            "1780480802" => at2.push(series),
            _ => panic!("a sample at another time: {l}"),
        }
    }
    assert_eq!(at0, at2);
    assert_eq!(at0.len(), 25, "{om}");
    let running = "sglang:num_running_reqs{job=\"x\",instance=\"host:8771\",server=\"future\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"0\",moe_ep_rank=\"0\"}";
    assert!(
        om.contains(&format!(
            "\n{running} 5 1780480800\n{running} 6 1780480802\n"
        )),
        "{om}"
    );
    assert!(!om.contains("tp_rank=\"1\""), "{om}");
}

/// Repro 11: an unbalanced `[` in a value no longer swallows the fields after it; colour codes
/// in a value are removed before reading.
#[test]
fn repro_11_a_stray_bracket_or_colour_code_never_swallows_later_fields() {
    let run = |f: &str| once_samples(&[repro(11, f).to_str().unwrap()]);
    let ansi = run("ansi.log");
    assert_eq!(only(&ansi, "sglang:num_running_reqs"), 7.0);
    assert_eq!(only(&ansi, "sglang:num_used_tokens"), 20.0);
    assert_eq!(only(&ansi, "sglang:token_usage"), 0.9);
    assert_eq!(only(&ansi, "sglang:num_queue_reqs"), 3.0);
    assert_eq!(
        only(&ansi, "sglang_log_exporter_field_value_errors_total"),
        0.0
    );
    let brk = run("brk.log");
    assert_eq!(only(&brk, "sglang:num_used_tokens"), 30.0);
    assert_eq!(only(&brk, "sglang:token_usage"), 0.95);
    assert_eq!(only(&brk, "sglang:num_queue_reqs"), 4.0);
    assert!(
        series(&brk, "sglang:num_running_reqs").is_empty(),
        "`[8` is unreadable"
    );
    assert_eq!(
        only(&brk, "sglang_log_exporter_field_value_errors_total"),
        1.0
    );
}

/// CPU time (user + system) of process `pid` in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat (utime, stime), counted from the state field (3rd).
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf reads a constant of the system.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// Asserts that process `pid` stays idle for 3 s: under half a second of CPU (a busy loop
/// takes all 3).
fn assert_idle(pid: u32, what: &str) {
    let before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(3));
    let used = cpu_seconds(pid) - before;
    assert!(used < 0.5, "{what}: {used:.2} s of CPU in 3 s while idle");
}

/// The inotify instances process `pid` holds.
fn inotify_instances(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().contains("inotify"))
        })
        .count()
}

/// Repro 12: a followed file whose directory is missing at start, and more followed files than
/// `fs.inotify.max_user_instances`: an idle exporter stays idle (no busy loop: a few per cent
/// of a core at most, where the fault took all of one), one inotify instance serves every
/// file, and the file is read once its directory appears.
#[test]
fn repro_12_no_watcher_is_no_busy_loop_and_one_instance_serves_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nodir");
    let line = "[2026-11-30 15:00:00 TP0] Decode batch, #running-req: 4, #token: 1, token usage: 0.01, #queue-req: 0\n";
    let e =
        crate::common::Exporter::start(&["--gpu.disable", missing.join("x.log").to_str().unwrap()]);
    let pid = e.child.id();
    assert_idle(pid, "directory missing");
    std::fs::create_dir(&missing).unwrap();
    std::fs::write(missing.join("x.log"), line).unwrap();
    e.scrape_until(20, |m| {
        m.contains("sglang_decode_stats_lines_total{server=\"x\"")
    });
    assert_idle(pid, "after the directory appeared");
    drop(e);
    // 140 files (more than the default 128 instances a user may have) through --input.glob.
    let many = dir.path().join("many");
    std::fs::create_dir(&many).unwrap();
    for i in 0..140 {
        std::fs::write(many.join(format!("s{i}.log")), line).unwrap();
    }
    let glob = format!("{}/*.log", many.display());
    let e = crate::common::Exporter::start(&["--gpu.disable", "--input.glob", &glob]);
    e.scrape_until(30, |m| {
        m.contains("sglang_log_exporter_discovery_files_followed 140")
    });
    let pid = e.child.id();
    assert!(
        inotify_instances(pid) <= 2,
        "{} inotify instances for 140 files",
        inotify_instances(pid)
    );
    assert_idle(pid, "140 idle files");
}

/// Repro 13: clients that made a request and went quiet on keep-alive (or stopped reading)
/// hold every place; a new scrape evicts one of them at once instead of being refused: their
/// responses were written whole (idle between requests), however recently.
#[test]
fn repro_13_quiet_served_connections_make_room_for_scrapes() {
    use std::io::{Read, Write};
    let log = crate::common::sample("pd-decode-session.log");
    let e = crate::common::Exporter::start(&[
        "--gpu.disable",
        "--web.max-connections",
        "4",
        log.to_str().unwrap(),
    ]);
    let port = e.port;
    let request = format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    // Two read their response and stay on keep-alive; two never read theirs.
    let mut quiet = Vec::new();
    for i in 0..4 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        if i < 2 {
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            assert!(
                n > 0 && buf.starts_with(b"HTTP/1.1 200"),
                "a first response"
            );
        }
        quiet.push(s);
    }
    // At once and back to back, each on a new connection: each evicts one that is idle.
    for _ in 0..6 {
        let r = ureq::get(&format!("http://127.0.0.1:{port}/metrics"))
            .timeout(Duration::from_secs(3))
            .call()
            .expect("a scrape despite four quiet served connections");
        assert_eq!(r.status(), 200);
    }
    drop(quiet);
}

/// Repro 13, of the same kind: clients that send their request head a byte at a time (a
/// slowloris, moving bytes all the while) or drip the next request on keep-alive hold every
/// place; a new scrape makes room by closing the one sending its head the longest.
#[test]
fn repro_13_heads_sent_a_byte_at_a_time_make_room_for_scrapes() {
    use std::io::{Read, Write};
    let log = crate::common::sample("pd-decode-session.log");
    let e = crate::common::Exporter::start(&[
        "--gpu.disable",
        "--web.max-connections",
        "8",
        log.to_str().unwrap(),
    ]);
    let port = e.port;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Four send a head a byte every 200 ms; four make one request, read it, then drip the next.
    let drips: Vec<_> = (0..8)
        .map(|i| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let head = format!("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ");
                let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                if i >= 4 {
                    s.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n")
                        .unwrap();
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf);
                }
                for b in head.bytes().chain(std::iter::repeat(b'a')) {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) || s.write_all(&[b]).is_err()
                    {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    for _ in 0..4 {
        let r = ureq::get(&format!("http://127.0.0.1:{port}/metrics"))
            .timeout(Duration::from_secs(3))
            .call()
            .expect("a scrape despite eight heads arriving a byte at a time");
        assert_eq!(r.status(), 200);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for d in drips {
        d.join().unwrap();
    }
}

/// Repro 13, of the same kind: a request head above 32 KiB is answered 431, so no connection's
/// read buffer grows to hyper's default ~400 KiB while a client sends a big head slowly.
#[test]
fn repro_13_a_request_head_above_32_kib_is_refused() {
    use std::io::{Read, Write};
    let log = crate::common::sample("pd-decode-session.log");
    let e = crate::common::Exporter::start(&["--gpu.disable", log.to_str().unwrap()]);
    let ask = |filler: usize| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", e.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let head = format!(
            "GET /-/healthy HTTP/1.1\r\nHost: x\r\nX-Filler: {}\r\nConnection: close\r\n\r\n",
            "a".repeat(filler)
        );
        // The server may answer and close before taking the whole of a refused head.
        let _ = s.write_all(head.as_bytes());
        let mut reply = Vec::new();
        let _ = s.read_to_end(&mut reply);
        String::from_utf8_lossy(&reply)
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(ask(16 * 1024), "HTTP/1.1 200 OK");
    assert_eq!(
        ask(40 * 1024),
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
}

/// Repro 21, of the same kind: gzip when asked for, plain otherwise, the same exposition either
/// way, and each response says it varies with `Accept-Encoding` (a cache between scraper and
/// exporter must not hand one the other's encoding).
#[test]
fn repro_21_gzip_as_asked_and_the_response_says_it_varies() {
    use std::io::{Read, Write};
    let log = crate::common::sample("pd-decode-session.log");
    let e = crate::common::Exporter::start(&["--gpu.disable", log.to_str().unwrap()]);
    e.scrape_until(20, |m| m.contains("sglang:num_running_reqs{"));
    let get = |accept: &str| {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", e.port)).unwrap();
        let head = format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{accept}Connection: close\r\n\r\n");
        s.write_all(head.as_bytes()).unwrap();
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).unwrap();
        let at = reply.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8(reply[..at].to_vec())
            .unwrap()
            .to_ascii_lowercase();
        (head, reply[at + 4..].to_vec())
    };
    let (plain_head, plain) = get("");
    let (gz_head, gz) = get("Accept-Encoding: gzip\r\n");
    assert!(
        plain_head.contains("\r\nvary: accept-encoding"),
        "{plain_head}"
    );
    assert!(!plain_head.contains("content-encoding"), "{plain_head}");
    assert!(gz_head.contains("\r\nvary: accept-encoding"), "{gz_head}");
    assert!(gz_head.contains("\r\ncontent-encoding: gzip"), "{gz_head}");
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut text)
        .unwrap();
    // The file was read to its end and nothing changes: one exposition, two encodings, except
    // the exporter's own scrape counters and process figures (CPU time, memory: read anew).
    let strip = |b: &[u8]| {
        String::from_utf8(b.to_vec())
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("sglang_log_exporter_") && !l.starts_with("process_"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&text), strip(&plain));
    assert!(strip(&plain).contains("sglang:num_running_reqs{"));
}

/// Repro 20: a cap that refuses is counted by cap and warned about once per cap and server,
/// naming the cap and its limit (ranks past 1,024 of one server, engines past 64, HTTP series
/// past 256).
#[test]
fn repro_20_a_cap_that_refuses_is_warned_once_and_counted_by_cap() {
    let dir = tempfile::tempdir().unwrap();
    let s = "] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, #queue-req: 0\n";
    let ranks: String = (0..1100)
        .map(|r| format!("[2026-11-30 15:00:00 DP{r} TP{r}{s}"))
        .collect();
    let ray: String = (0..100)
        .map(|p| format!("(SGLangEngine pid={p}) [2026-11-30 15:00:00 TP0{s}"))
        .collect();
    let http: String = (0..300)
        .map(|i| {
            format!(
                "[2026-11-30 15:00:00] INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" {} OK\n",
                100 + i
            )
        })
        .collect();
    for (name, text, cap, refused, limit) in [
        ("ranks", ranks, "ranks_per_server", 76.0, 1024),
        ("ray", ray, "engines_per_server", 36.0, 64),
        ("http", http, "http_series_per_server", 44.0, 256),
    ] {
        let p = dir.path().join(format!("{name}.log"));
        std::fs::write(&p, text).unwrap();
        let out = Command::new(bin())
            .args([
                "--once",
                "--gpu.disable",
                "--timezone",
                "UTC",
                "--log.level",
                "info",
            ])
            .arg(&p)
            .output()
            .unwrap();
        assert!(out.status.success());
        let m = String::from_utf8(out.stdout).unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            crate::common::value(
                &m,
                &format!("sglang_log_exporter_series_dropped_by_cap_total{{cap=\"{cap}\"}}")
            ),
            Some(refused),
            "{name}"
        );
        assert_eq!(
            crate::common::value(&m, "sglang_log_exporter_series_dropped_total"),
            Some(refused)
        );
        let warnings: Vec<&str> = err.lines().filter(|l| l.contains("is reached")).collect();
        assert_eq!(warnings.len(), 1, "{name}: {err}");
        assert!(
            warnings[0].contains(&format!("the cap of {limit} ")),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[0].contains(&format!("cap=\"{cap}\""))
                || warnings[0].contains(&format!("cap={cap}")),
            "{}",
            warnings[0]
        );
    }
}

/// Repro 15: history lines stamped ahead of the wall clock (SGLang's container logging in
/// another zone than `--timezone`) are taken as the time they were read, warned once: the rank
/// reads idle after `--idle-after`, not for hours; its last stats time is not in the future.
#[test]
fn repro_15_a_line_time_ahead_of_the_clock_is_the_time_it_was_read() {
    let dir = tempfile::tempdir().unwrap();
    let fmt = |t: jiff::Timestamp| t.strftime("%Y-%m-%d %H:%M:%S").to_string();
    let now = jiff::Timestamp::now();
    let ahead = now + jiff::SignedDuration::from_hours(5);
    let line = |t: &str, tp: u32, n: u32| {
        format!("[{t} TP{tp}] Decode batch, #running-req: {n}, #token: 10, token usage: 0.10, #queue-req: 0\n")
    };
    let p = dir.path().join("sglang.log");
    std::fs::write(&p, line(&fmt(now), 0, 3) + &line(&fmt(ahead), 1, 7)).unwrap();
    let mut e = crate::common::Exporter::start(&[
        "--gpu.disable",
        "--idle-after",
        "2s",
        p.to_str().unwrap(),
    ]);
    let logs = e.log_lines();
    let rank = |tp: u32| {
        format!("{{server=\"sglang\",model_name=\"\",engine_type=\"unified\",pp_rank=\"0\",tp_rank=\"{tp}\",moe_ep_rank=\"0\"}}")
    };
    let m = e.scrape_until(20, |m| {
        crate::common::value(m, &format!("sglang_idle{}", rank(1))) == Some(1.0)
    });
    assert_eq!(
        crate::common::value(&m, &format!("sglang:num_running_reqs{}", rank(1))),
        Some(0.0)
    );
    let last = crate::common::value(
        &m,
        &format!("sglang_last_stats_timestamp_seconds{}", rank(1)),
    )
    .unwrap();
    assert!(
        last <= jiff::Timestamp::now().as_second() as f64 + 1.0,
        "last stats in the future: {last}"
    );
    crate::common::wait_log(&logs, "ahead of this host's clock", 10);
}

/// Repro 14 and 18: servers of the state file that no input names (a removed unit, another
/// exporter's) are not shown by `--once` and expire after `--input.expiry` live; the inputs'
/// own servers keep their restored facts; `--once` reads a state directory it cannot write.
#[test]
fn repro_14_restored_servers_no_input_names_go() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let kv = |t: &str| {
        format!(
            "[2026-06-03 10:00:0{t} TP0] KV Cache is allocated. #tokens: 1000, KV size: 1.00 GB\n"
        )
    };
    let old = dir.path().join("old.log");
    let new = dir.path().join("new.log");
    std::fs::write(&old, kv("1")).unwrap();
    std::fs::write(&new, kv("2")).unwrap();
    let st = state.to_str().unwrap();
    // Run 1 writes both servers' facts.
    let e = crate::common::Exporter::start(&[
        "--gpu.disable",
        "--state.dir",
        st,
        old.to_str().unwrap(),
        new.to_str().unwrap(),
    ]);
    e.scrape_until(20, |m| {
        m.contains("server=\"old\"") && m.contains("server=\"new\"")
    });
    // Saved every 10 s while running.
    let deadline = Instant::now() + Duration::from_secs(25);
    while !std::fs::read_to_string(state.join("state.json")).is_ok_and(|t| t.contains("\"old\"")) {
        assert!(Instant::now() < deadline, "no state file");
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(e);
    // The log of `new` rotated away: its facts come from the state file; `old` is no input.
    std::fs::write(&new, "").unwrap();
    let cap = "sglang_kv_pool_capacity_tokens";
    let m = crate::common::once(&["--gpu.disable", "--state.dir", st, new.to_str().unwrap()]);
    assert!(m.contains(&format!("{cap}{{server=\"new\"")), "{m}");
    assert!(!m.contains("server=\"old\""), "{m}");
    // Read-only for --once: no write probe.
    let mut perms = std::fs::metadata(&state).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o500);
    std::fs::set_permissions(&state, perms).unwrap();
    let out = crate::common::run(&[
        "--once",
        "--gpu.disable",
        "--state.dir",
        st,
        new.to_str().unwrap(),
    ]);
    let mut perms = std::fs::metadata(&state).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o700);
    std::fs::set_permissions(&state, perms).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Live: `old` is shown until --input.expiry after the restore, then gone; `new` stays.
    let e = crate::common::Exporter::start(&[
        "--gpu.disable",
        "--state.dir",
        st,
        "--input.expiry",
        "2s",
        new.to_str().unwrap(),
    ]);
    let m = e.scrape_until(20, |m| !m.contains("server=\"old\""));
    assert!(m.contains(&format!("{cap}{{server=\"new\"")), "{m}");
}
