//! `sglang-log-exporter top`: `--snapshot` frames against golden files, the terminal view in a
//! real terminal (tmux: `new-session`, `send-keys`, `capture-pane`) on the shipped samples and
//! on a file being appended to, and `--url` against real exporter processes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::{append, bin, root, sample, value, Exporter};

/// 2026-06-03 10:17:40 UTC: four seconds after the last decode line of pd-decode-session.log.
const PD_NOW: &str = "1780481860";

/// Runs `top` with `args` (stdin closed) and returns its output.
fn top(args: &[&str]) -> Output {
    Command::new(bin())
        .current_dir(root())
        .arg("top")
        .args(args)
        .env("TZ", "UTC")
        .stdin(Stdio::null())
        .output()
        .expect("run top")
}

/// `top --snapshot --timezone UTC` with `args`; panics unless it exits 0.
fn snapshot(args: &[&str]) -> String {
    let mut a = vec!["--snapshot", "--timezone", "UTC"];
    a.extend_from_slice(args);
    let out = top(&a);
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 frame")
}

/// Compares `got` with `tests/golden/<name>`; `BLESS=1` rewrites the file.
fn golden(name: &str, got: &str) {
    let path = root().join("tests/golden").join(name);
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (BLESS=1 writes it)", path.display()));
    assert_eq!(got, want, "{name} differs; got:\n{got}");
}

#[test]
fn top_snapshots_match_their_golden_files() {
    // "now" is the log's last time (as --once has it), or --now.
    let cases: [(&str, &[&str]); 4] = [
        (
            "top-single-gpu-2025.txt",
            &["--width", "100", "samples/single-gpu-2025.log"],
        ),
        (
            "top-pd-decode.txt",
            &[
                "--width",
                "100",
                "--now",
                PD_NOW,
                "samples/pd-decode-session.log",
            ],
        ),
        (
            "top-pd-80.txt",
            // At the decode server's last stats line (the logs go on quietly past it, so at
            // their end every rank reads idle).
            &[
                "--width",
                "80",
                "--now",
                "1780481856",
                "samples/pd-decode-session.log",
                "samples/prefill-session.log",
            ],
        ),
        (
            "top-variants-120.txt",
            // Time-only prefixes need a date (default: today's).
            &[
                "--width",
                "120",
                "--date",
                "2026-05-01",
                "samples/sglang-variants.log",
            ],
        ),
    ];
    for (name, args) in cases {
        let mut a = vec!["--gpu.disable"];
        a.extend_from_slice(args);
        let got = snapshot(&a);
        assert!(!got.contains('\x1b'), "no escape codes in a snapshot");
        golden(name, &got);
    }
}

#[test]
fn top_snapshot_shows_gpus_with_their_ranks_and_kv_pools() {
    let dir = tempfile::tempdir().unwrap();
    let lib = crate::gpu::fake_nvml(dir.path());
    let script = dir.path().join("nvml.txt");
    let gib = 1u64 << 30;
    std::fs::write(
        &script,
        format!(
            "driver 550.54.15\n\
             gpu 0 GPU-0000 00000000:18:00.0 {} {} {} {} NVIDIA H100 80GB HBM3\n\
             gpu 1 GPU-1111 00000000:2A:00.0 {} {} {} {} NVIDIA H100 80GB HBM3\n",
            80 * gib,
            512 << 20,
            10 * gib,
            70 * gib,
            80 * gib,
            512 << 20,
            74 * gib,
            6 * gib,
        ),
    )
    .unwrap();
    let out = Command::new(bin())
        .current_dir(root())
        .args(["top", "--snapshot", "--timezone", "UTC", "--width", "100"])
        .arg("--gpu.nvml-library")
        .arg(&lib)
        .args(["--gpus", "single-gpu-2025=0", "samples/single-gpu-2025.log"])
        .env("FAKE_NVML_SCRIPT", &script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    golden("top-gpu.txt", &String::from_utf8(out.stdout).unwrap());
}

#[test]
fn top_refuses_what_it_cannot_show() {
    for (args, msg) in [
        (&[][..], "nothing to show"),
        (&["--url", "http://127.0.0.1:1/", "x.log"][..], "not both"),
        (&["samples/single-gpu-2025.log"][..], "not a terminal"),
        (&["--snapshot", "/nonexistent/x.log"][..], "cannot read"),
        (
            &["--snapshot", "--url", "ftp://x"][..],
            "http:// or https://",
        ),
    ] {
        let out = top(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(msg), "{args:?}: {err}");
    }
}

/// A tmux server of its own (`-L`, no config file) with one session running a command; the
/// server is killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Runs `shell_command` in a `width` × `height` terminal.
    fn start(shell_command: &str, width: u16, height: u16) -> Tmux {
        static N: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "sglang-top-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let t = Tmux { socket };
        let (w, h) = (width.to_string(), height.to_string());
        let st = t
            .cmd(&[
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "top",
                "-x",
                &w,
                "-y",
                &h,
            ])
            .arg(shell_command)
            .env("TZ", "UTC")
            .status()
            .expect("run tmux (install it: apt-get install tmux)");
        assert!(st.success(), "tmux new-session failed");
        t
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.socket]).args(args);
        c.stdin(Stdio::null());
        c
    }

    /// The screen as text (`escapes`: with colour and attribute codes).
    fn screen(&self, escapes: bool) -> String {
        let mut a = vec!["capture-pane", "-p", "-t", "top"];
        if escapes {
            a.push("-e");
        }
        let out = self.cmd(&a).output().expect("capture-pane");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Polls the screen until `pred` holds; panics with the last screen after `secs`.
    fn wait_for(&self, what: &str, secs: u64, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.screen(false);
            if pred(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut a = vec!["send-keys", "-t", "top"];
        a.extend_from_slice(keys);
        assert!(self.cmd(&a).status().unwrap().success());
    }

    fn alive(&self) -> bool {
        self.cmd(&["has-session", "-t", "top"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).stderr(Stdio::null()).status();
    }
}

/// The shell command running `top` with `args` (paths quoted).
fn top_command(args: &[&str]) -> String {
    let q = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut c = format!("exec {} top --timezone UTC", q(bin().to_str().unwrap()));
    for a in args {
        c.push(' ');
        c.push_str(&q(a));
    }
    c
}

fn lines(screen: &str) -> Vec<&str> {
    screen.lines().map(str::trim_end).collect()
}

#[test]
fn top_terminal_shows_the_sample_and_answers_keys() {
    let log = sample("pd-decode-session.log");
    let cmd = top_command(&["--gpu.disable", "--now", PD_NOW, log.to_str().unwrap()]);
    let t = Tmux::start(&cmd, 100, 30);
    // Wait for the file to be read to its end: every rank's last line drawn (DP3's comes
    // before the others' in the file).
    let s = t.wait_for("the ranks", 20, |s| {
        ["2290/786.4k", "2707/786.4k", "5035/786.4k", "5226/786.4k"]
            .iter()
            .all(|v| s.contains(v))
            && s.contains("RETR/1m 0")
    });
    let l = lines(&s);
    assert_eq!(
        l[0],
        "sglang top  2026-06-03 10:17:40 UTC  1 server, 4 ranks"
    );
    assert_eq!(l[1], "model deepseek-ai/DeepSeek-V3 (decode)");
    assert_eq!(
        l[2],
        "total  run 4  queue 0  gen 225 tok/s  KV 0.5% 15.3k/3.15M  RETR/1m 0"
    );
    assert_eq!(
        l[4],
        "  RANK     KV CACHE                     USED/CAP     RUN  QUEUE  GEN t/s  PD QUEUES     RETR/1m  AGE"
    );
    assert_eq!(
        l[5],
        "pd-decode-session  decode · deepseek-ai/DeepSeek-V3 · log since 09:57:46Z"
    );
    let rows = [
        "  DP0 TP0  [|                 ]   0.3%  2290/786.4k    1      0     42.0  pre 0 xfer 0        0  4s",
        "  DP1 TP1  [|                 ]   0.3%  2707/786.4k    1      0     63.7  pre 0 xfer 0        0  5s",
        "  DP2 TP2  [|                 ]   0.6%  5035/786.4k    1      0     77.8  pre 0 xfer 0        0  6s",
        "  DP3 TP3  [|                 ]   0.7%  5226/786.4k    1      0     41.2  pre 0 xfer 0        0  9s",
    ];
    assert_eq!(l[6..10], rows);
    // The footer is on the last line.
    assert!(
        l[29].starts_with("q quit  s sort: rank  g GPUs: on  ? help"),
        "{s}"
    );
    assert!(l[29].ends_with("every 1s"), "{s}");

    // s: fullest KV cache first.
    t.keys(&["s"]);
    let s = t.wait_for("sort: kv", 10, |s| s.contains("sort: kv"));
    let l = lines(&s);
    assert_eq!(l[6..10], [rows[3], rows[2], rows[1], rows[0]]);
    // ?: the help; any key returns.
    t.keys(&["?"]);
    t.wait_for("the help", 10, |s| {
        s.contains("Keys") && s.contains("RETR/1m")
    });
    t.keys(&["x"]);
    t.wait_for("the table again", 10, |s| s.contains("DP3 TP3"));
    // q quits, and the terminal is given back.
    t.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!t.alive(), "q ends top");
}

/// A log with the KV pool's start-up line and one decode line from the past (idle now).
fn past_log(dir: &Path) -> PathBuf {
    let log = dir.join("decode.log");
    std::fs::write(
        &log,
        "[2026-06-03 10:00:00 DP0 TP0] KV Cache is allocated. #tokens: 100000, KV size: 2.00 GB\n\
         [2026-06-03 10:00:05 DP0 TP0] Decode batch, #running-req: 2, #token: 20000, token usage: 0.20, gen throughput (token/s): 50.00, #queue-req: 1\n",
    )
    .unwrap();
    log
}

const NEW_LINE: &str = "[2026-06-03 10:00:06 DP0 TP0] Decode batch, #running-req: 7, #token: 45000, token usage: 0.45, gen throughput (token/s): 321.40, #queue-req: 3\n";

/// The DP0 TP0 row once `NEW_LINE` arrived (at 100 columns), up to the age.
const NEW_ROW: &str =
    "  DP0 TP0  [||||||||||||||                ]  45.0%  45.0k/100.0k    7      3      321        0  ";

fn row_of<'a>(screen: &'a str, rank: &str) -> Option<&'a str> {
    screen
        .lines()
        .find(|l| l.starts_with(&format!("  {rank} ")))
}

#[test]
fn top_terminal_follows_a_file_being_appended_to() {
    let dir = tempfile::tempdir().unwrap();
    let log = past_log(dir.path());
    let cmd = top_command(&[
        "--gpu.disable",
        "--interval",
        "200ms",
        log.to_str().unwrap(),
    ]);
    let t = Tmux::start(&cmd, 100, 30);
    // Its last line is long past: the rank is idle and its activity reads 0.
    let s = t.wait_for("the idle rank", 20, |s| {
        row_of(s, "DP0 TP0").is_some_and(|r| r.trim_end().ends_with(" idle"))
    });
    let row = row_of(&s, "DP0 TP0").unwrap();
    assert!(
        row.starts_with(
            "  DP0 TP0  [                          ]   0.0%  0/100.0k    0      0        0        0  "
        ),
        "{s}"
    );
    append(&log, NEW_LINE.as_bytes());
    let s = t.wait_for("the appended line", 20, |s| {
        row_of(s, "DP0 TP0").is_some_and(|r| r.starts_with(NEW_ROW))
    });
    let row = row_of(&s, "DP0 TP0").unwrap().trim_end();
    let age = &row[NEW_ROW.len()..];
    assert!(
        age.ends_with('s') && age[..age.len() - 1].parse::<u32>().is_ok_and(|n| n < 10),
        "a fresh line and no idle marker: {row:?}"
    );
    assert!(
        lines(&s)[2].contains("run 7  queue 3  gen 321 tok/s  KV 45.0% 45.0k/100.0k"),
        "{s}"
    );
}

#[test]
fn top_terminal_resizes() {
    let dir = tempfile::tempdir().unwrap();
    let log = past_log(dir.path());
    let cmd = top_command(&[
        "--gpu.disable",
        "--interval",
        "200ms",
        log.to_str().unwrap(),
    ]);
    let t = Tmux::start(&cmd, 100, 30);
    t.wait_for("the wide table", 20, |s| {
        s.contains("USED/CAP") && s.contains("DP0 TP0")
    });
    assert!(t
        .cmd(&["resize-window", "-t", "top", "-x", "60", "-y", "12"])
        .status()
        .unwrap()
        .success());
    // The narrow layout, waited for as a whole: once (CI, a loaded machine) a frame between
    // the two held neither `USED/CAP` nor the narrow header (`... GEN t/s RETR/1m AGE`, the
    // retraction column still in), and waiting for the first condition alone read that frame.
    const NARROW: &str = "  RANK    KV CACHE            RUN QUEUE GEN t/s AGE";
    let s = t.wait_for("the narrow table", 20, |s| {
        let l = lines(s);
        !s.contains("USED/CAP") && s.contains("DP0 TP0") && l.get(4) == Some(&NARROW)
    });
    let l = lines(&s);
    assert_eq!(l.len(), 12, "{s}");
    assert!(l.iter().all(|l| l.chars().count() <= 60), "{s}");
    assert_eq!(l[4], NARROW);
    assert!(
        l[11].starts_with("q quit"),
        "the footer on the last line: {s}"
    );
}

#[test]
fn top_reads_stdin_and_keys_from_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let log = past_log(dir.path());
    // The log comes through a pipe; keys still work (crossterm reads /dev/tty).
    let cmd = format!(
        "tail -n +1 -f '{}' | {}",
        log.display(),
        top_command(&["--gpu.disable", "--interval", "200ms", "decode=-"])
            .trim_start_matches("exec ")
    );
    let t = Tmux::start(&cmd, 100, 30);
    t.wait_for("the server read from stdin", 20, |s| {
        // A server named decode whose decode lines have no PD fields: unified.
        s.contains("decode  unified") && s.contains("DP0 TP0")
    });
    // Stdin lines keep their own time (there is no catch-up to tell apart): a line of now.
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%d %H:%M:%S")
        .to_string();
    append(
        &log,
        NEW_LINE.replace("2026-06-03 10:00:06", &now).as_bytes(),
    );
    t.wait_for("the appended line", 20, |s| {
        row_of(s, "DP0 TP0").is_some_and(|r| r.starts_with(NEW_ROW))
    });
    t.keys(&["g", "s"]);
    t.wait_for("the keys", 10, |s| {
        s.contains("sort: kv") && s.contains("GPUs: off")
    });
    t.keys(&["q"]);
    t.wait_for("the shell after top", 10, |s| !s.contains("sort: kv"));
}

#[test]
fn top_colours_only_without_no_color() {
    let log = sample("single-gpu-2025.log");
    let run = |no_color: bool| {
        let env = if no_color { "NO_COLOR=1 " } else { "" };
        let cmd = format!(
            "{env}{}",
            top_command(&["--gpu.disable", log.to_str().unwrap()]).trim_start_matches("exec ")
        );
        let t = Tmux::start(&format!("exec env {cmd}"), 100, 30);
        t.wait_for("the table", 20, |s| s.contains("single-gpu-2025  unified"));
        t.screen(true)
    };
    // Foreground colours: SGR 30-37, or 38;5;N as tmux writes them back.
    let coloured =
        |s: &str| s.contains("\x1b[38;5;") || (30..=37).any(|c| s.contains(&format!("\x1b[{c}m")));
    assert!(coloured(&run(false)), "colour on a terminal");
    let plain = run(true);
    assert!(!coloured(&plain), "NO_COLOR: no colour");
    assert!(
        plain.contains("\x1b[7m"),
        "the header is still shown reversed"
    );
}

/// Waits until the exporter has read `lines` lines of every source.
fn wait_read(e: &Exporter, sources: &[(&Path, usize)]) {
    let s = e.scrape_until(20, |s| {
        sources.iter().all(|(p, n)| {
            let series = format!(
                "sglang_log_exporter_lines_read_total{{source=\"{}\"}}",
                p.display()
            );
            value(s, &series) == Some(*n as f64)
        })
    });
    assert!(s.contains("sglang_server_info"), "{s}");
}

fn line_count(p: &Path) -> usize {
    std::fs::read_to_string(p).unwrap().lines().count()
}

#[test]
fn top_url_snapshot_is_the_local_frame_of_a_running_exporter() {
    let (d, p) = (
        sample("pd-decode-session.log"),
        sample("prefill-session.log"),
    );
    // Idle never: the exporter's clock is today's, the logs' is June's.
    let keep = ["--idle-after", "100000000", "--gpu.disable"];
    let mut args: Vec<&str> = keep.to_vec();
    args.extend([d.to_str().unwrap(), p.to_str().unwrap()]);
    let e = Exporter::start(&args);
    wait_read(&e, &[(&d, line_count(&d)), (&p, line_count(&p))]);
    let url = format!("http://127.0.0.1:{}/metrics", e.port);
    let got = snapshot(&["--width", "100", "--now", PD_NOW, "--url", &url]);
    let mut local_args = vec!["--width", "100", "--now", PD_NOW];
    local_args.extend(args.iter().copied());
    let want = snapshot(&local_args);
    // The same frame; each server's line names the exporter it came from.
    let instance = format!(" · @ 127.0.0.1:{}", e.port);
    let want: String = want
        .lines()
        .map(|l| {
            if l.starts_with("pd-decode-session ") || l.starts_with("prefill-session ") {
                // The exporter it came from, after the model and before where values come from.
                let (head, from) = l.split_once(" · log since").expect("a server line");
                format!("{head}{instance} · log since{from}\n")
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_eq!(got, want);
    assert!(got.contains("  DP3 TP3  "), "{got}");
}

#[test]
fn top_url_shows_several_exporters_on_one_screen() {
    let log = sample("single-gpu-2025.log");
    let args = [
        "--idle-after",
        "100000000",
        "--gpu.disable",
        log.to_str().unwrap(),
    ];
    let (a, b) = (Exporter::start(&args), Exporter::start(&args));
    let n = line_count(&log);
    wait_read(&a, &[(&log, n)]);
    wait_read(&b, &[(&log, n)]);
    let (ua, ub) = (
        format!("http://127.0.0.1:{}", a.port),
        format!("http://127.0.0.1:{}/metrics", b.port),
    );
    let got = snapshot(&[
        "--width",
        "100",
        "--now",
        "1749823676",
        "--url",
        &ua,
        "--url",
        &ub,
    ]);
    let (pa, pb) = if a.port < b.port {
        (a.port, b.port)
    } else {
        (b.port, a.port)
    };
    let row = "  -     [|                             ]   0.7%  2788/413.7k    1      0      134     0  5s";
    // A server's line, cut to the 100 columns as top cuts it.
    let server = |port: u16| {
        let l = format!(
            "single-gpu-2025  unified · meta-llama/Llama-3.1-8B-Instruct · @ 127.0.0.1:{port} · log since 14:02:09Z"
        );
        match l.char_indices().nth(99) {
            Some((i, _)) => format!("{}…", &l[..i]),
            None => l,
        }
    };
    let (sa, sb) = (server(pa), server(pb));
    let want = format!(
        "sglang top  2025-06-13 14:07:56 UTC  2 servers, 2 ranks\n\
         model meta-llama/Llama-3.1-8B-Instruct (unified)\n\
         total  run 2  queue 0  gen 268 tok/s  KV 0.7% 5576/827.4k  RETR 0\n\
         \n  RANK  KV CACHE                                 USED/CAP     RUN  QUEUE  GEN t/s  RETR  AGE\n\
         {sa}\n{row}\n{sb}\n{row}\n"
    );
    assert_eq!(got, want);
    // One exporter down: the other is still shown, the failure named under the totals.
    drop(b);
    let got = snapshot(&["--width", "100", "--url", &ua, "--url", &ub]);
    assert!(got.contains(&format!("@ 127.0.0.1:{}", a.port)), "{got}");
    assert!(got.contains(&format!("! {ub}: ")), "{got}");
}

#[test]
fn top_url_over_https_with_basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let cert = crate::webconfig::self_signed(dir.path(), "server");
    let cfg = dir.path().join("web.yml");
    std::fs::write(
        &cfg,
        format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\nbasic_auth_users:\n  prom: {}\n",
            crate::webconfig::hash("s3cret")
        ),
    )
    .unwrap();
    let log = sample("single-gpu-2025.log");
    let e = Exporter::start(&[
        "--gpu.disable",
        "--web.config.file",
        cfg.to_str().unwrap(),
        log.to_str().unwrap(),
    ]);
    let ca = cert.to_str().unwrap();
    let pass = dir.path().join("pass");
    std::fs::write(&pass, "s3cret\n").unwrap();
    let with_url = format!("https://prom:s3cret@127.0.0.1:{}/", e.port);
    let plain = format!("https://127.0.0.1:{}/metrics", e.port);
    let by_file = [
        "--url",
        &plain,
        "--url.basic-auth-user",
        "prom",
        "--url.basic-auth-password-file",
        pass.to_str().unwrap(),
        "--url.ca-file",
        ca,
    ];
    let server_line = format!(
        "single-gpu-2025  unified · meta-llama/Llama-3.1-8B-Instruct · @ 127.0.0.1:{}",
        e.port
    );
    for args in [&["--url", &with_url, "--url.ca-file", ca][..], &by_file[..]] {
        let mut a = vec!["--snapshot", "--width", "100"];
        a.extend_from_slice(args);
        // The exporter serves before it has read the log: wait for the server to show.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let out = loop {
            let out = top(&a);
            if String::from_utf8_lossy(&out.stdout).contains(&server_line)
                || std::time::Instant::now() > deadline
            {
                break out;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!(
                "single-gpu-2025  unified · meta-llama/Llama-3.1-8B-Instruct · @ 127.0.0.1:{}",
                e.port
            )),
            "{text}"
        );
    }
    // A wrong password, and no CA: refused, and said so.
    let wrong = format!("https://prom:nope@127.0.0.1:{}/", e.port);
    let out = top(&["--snapshot", "--url", &wrong, "--url.ca-file", ca]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTP 401"));
    let out = top(&["--snapshot", "--url", &with_url]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("s3cret"),
        "no password in errors"
    );
}

#[test]
fn top_url_terminal_follows_a_live_exporter() {
    let dir = tempfile::tempdir().unwrap();
    let log = past_log(dir.path());
    let e = Exporter::start(&["--gpu.disable", log.to_str().unwrap()]);
    let url = format!("http://127.0.0.1:{}/metrics", e.port);
    let cmd = top_command(&["--interval", "200ms", "--url", &url]);
    let t = Tmux::start(&cmd, 100, 30);
    t.wait_for("the idle rank", 20, |s| {
        row_of(s, "DP0 TP0").is_some_and(|r| r.trim_end().ends_with(" idle"))
    });
    append(&log, NEW_LINE.as_bytes());
    let s = t.wait_for("the appended line", 20, |s| {
        row_of(s, "DP0 TP0").is_some_and(|r| r.starts_with(NEW_ROW))
    });
    assert!(
        s.contains(&format!("decode  unified · @ 127.0.0.1:{}", e.port)),
        "{s}"
    );
}

#[test]
fn top_snapshot_of_a_journal_unit() {
    // A real journal file, written by systemd-journal-remote from the shipped export.
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("sample.journal");
    let st = Command::new("/lib/systemd/systemd-journal-remote")
        .arg(format!("--output={}", journal.display()))
        .arg(sample("journal-export.txt"))
        .stderr(Stdio::null())
        .status()
        .expect("systemd-journal-remote (Debian package systemd-journal-remote)");
    assert!(st.success());
    let got = snapshot(&[
        "--gpu.disable",
        "--width",
        "100",
        "--journal-unit",
        "sglang-decode",
        "--journal-file",
        journal.to_str().unwrap(),
    ]);
    let l = lines(&got);
    assert_eq!(l[1], "model deepseek-ai/DeepSeek-V3 (decode)", "{got}");
    assert_eq!(
        l[5], "sglang-decode  decode · deepseek-ai/DeepSeek-V3 · log since 09:57:46Z",
        "{got}"
    );
    let ranks: Vec<&str> = l[6..].iter().map(|r| &r[..9]).collect();
    assert_eq!(
        ranks,
        ["  DP0 TP0", "  DP1 TP1", "  DP2 TP2", "  DP3 TP3"],
        "{got}"
    );
    assert!(
        !got.contains("sglang-prefill"),
        "only the unit asked for: {got}"
    );
}

/// The pid of the process in the session's pane (`top_command` execs `top` there).
fn pane_pid(t: &Tmux) -> u32 {
    let out = t
        .cmd(&["list-panes", "-t", "top", "-F", "#{pane_pid}"])
        .output()
        .expect("list-panes");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a pane pid")
}

#[test]
fn top_ends_when_its_terminal_hangs_up() {
    // Closing the terminal (here: the tmux server) must end `top`; crossterm used to spin on the
    // dead terminal at 100% CPU, deaf to SIGTERM.
    let t = Tmux::start(
        &top_command(&[
            "--gpu.disable",
            sample("pd-decode-session.log").to_str().unwrap(),
        ]),
        100,
        30,
    );
    t.wait_for("the first frame", 20, |s| s.contains("sglang top"));
    let pid = pane_pid(&t);
    let _ = t.cmd(&["kill-server"]).stderr(Stdio::null()).status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() {
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))
        });
        if zombie {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "top (pid {pid}) still runs 10 s after its terminal hung up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 38.5: an NVML that does not load is said in `top`, with why, not a table left out.
#[test]
fn top_says_why_gpu_memory_is_unavailable() {
    let log = crate::common::sample("pd-decode-session.log");
    let frame = snapshot(&[
        "--width",
        "200",
        "--gpu.nvml-library",
        "/nonexistent/libnvidia-ml.so.1",
        log.to_str().unwrap(),
    ]);
    let want = "! GPU memory unavailable: NVML init failed: a libloading error occurred: /nonexistent/libnvidia-ml.so.1: cannot open shared object file: No such file or directory";
    assert!(frame.lines().any(|l| l.trim_end() == want), "{frame}");
}

/// Issue 38.6: for a rank that reads idle, `--once`'s summary, `top` and the page's JSON give
/// one answer to "how full is it now": the same share and running count.
#[test]
fn once_top_and_the_page_agree_for_an_idle_rank() {
    let log = crate::common::sample("pd-decode-session.log");
    let once = std::process::Command::new(crate::common::bin())
        .args([
            "--once",
            "--gpu.disable",
            "--timezone",
            "UTC",
            log.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let summary = String::from_utf8(once.stderr).unwrap();
    assert!(
        summary.contains("DP0 TP0  idle since 10:17:36: KV cache 0.0% (0/786432 tokens), 0 running, 0 queued; last busy:"),
        "{summary}"
    );
    let frame = snapshot(&["--gpu.disable", log.to_str().unwrap()]);
    let row = frame
        .lines()
        .find(|l| l.trim_start().starts_with("DP0 TP0"))
        .unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    // RANK(2) bar(2) KV USED/CAP RUN QUEUE
    assert_eq!(cols[4..8], ["0.0%", "0/786.4k", "0", "0"], "{row}");
    let status: serde_json::Value = {
        let e = crate::common::Exporter::start(&["--gpu.disable", log.to_str().unwrap()]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let v: serde_json::Value = serde_json::from_str(&e.get("/api/v1/status").2).unwrap();
            if v["ready"] == true && !v["servers"].as_array().unwrap().is_empty() {
                break v;
            }
            assert!(std::time::Instant::now() < deadline, "{v}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let r = &status["servers"][0]["ranks"][0];
    assert_eq!(r["rank"], "DP0 TP0");
    assert_eq!(r["state"], "idle");
    assert_eq!(r["kv_percent"], "0.0%");
    assert_eq!(r["running"], 0.0);
}
