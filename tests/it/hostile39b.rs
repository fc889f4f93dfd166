//! Faults of the fourth hostile pass of issue 39 (`../shared/repro/27`–`35`, part B), each with
//! the input that showed it. The API poller's (23, 26) are in `api.rs`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{bin, sample};

/// Runs the binary with `args`, killed after `secs` (a hang guard, not a timed assertion):
/// (exit code, stderr).
fn run_guarded(args: &[&str], secs: u64) -> (Option<i32>, String) {
    let mut c = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while c.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            panic!("{args:?}: still running after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = c.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn mkfifo(path: &Path) {
    assert!(Command::new("mkfifo").arg(path).status().unwrap().success());
}

/// Repro 34: every file an option names is read only if it is a regular file within its
/// kind's limit: a device, a FIFO or a huge file is refused at once (exit 2, a message), never
/// read to the end (2.1 GB for /dev/zero), waited on (a FIFO) or aborted on (the CA reader).
#[test]
fn option_files_that_are_devices_fifos_or_huge_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).display().to_string();
    mkfifo(&dir.path().join("fifo"));
    std::fs::write(d("big-key"), vec![b'k'; 9000]).unwrap();
    let log = sample("pd-decode-session.log").display().to_string();
    let listen = format!("127.0.0.1:{}", crate::common::free_port());
    for bad in ["/dev/zero", &d("fifo")] {
        // A web config naming the bad file as its certificate.
        let web = d("web.yml");
        std::fs::write(
            &web,
            format!("tls_server_config:\n  cert_file: {bad}\n  key_file: {bad}\n"),
        )
        .unwrap();
        let cases: Vec<(Vec<&str>, String)> = vec![
            (vec!["--patterns", bad], bad.to_string()),
            (vec!["--web.config.file", bad], bad.to_string()),
            (vec!["--web.config.file", &web], format!("cert_file {bad}")),
            (
                vec![
                    "--sglang.url",
                    "http://127.0.0.1:9",
                    "--sglang.api-key-file",
                    bad,
                ],
                format!("--sglang.api-key-file {bad}"),
            ),
            (
                vec![
                    "--push.url",
                    "http://127.0.0.1:9",
                    "--push.basic-auth-user",
                    "u",
                    "--push.basic-auth-password-file",
                    bad,
                ],
                format!("--push.basic-auth-password-file {bad}"),
            ),
            (
                vec!["--push.url", "https://127.0.0.1:9", "--push.ca-file", bad],
                format!("--push.ca-file {bad}"),
            ),
        ];
        for (opts, named) in cases {
            // Not --once (which refuses --sglang.url): an option let through would serve.
            let mut args = vec!["--gpu.disable", "--web.listen-address", &listen];
            args.extend(&opts);
            args.push(&log);
            let (code, err) = run_guarded(&args, 60);
            assert_eq!(code, Some(2), "{opts:?}: {err}");
            let kind = if bad == "/dev/zero" {
                "a character device, not read"
            } else {
                "a FIFO, not read"
            };
            assert!(
                err.contains(&named) && err.contains(kind),
                "{opts:?}: {err}"
            );
        }
    }
    let (code, err) = run_guarded(
        &[
            "--gpu.disable",
            "--web.listen-address",
            &listen,
            "--sglang.url",
            "http://127.0.0.1:9",
            "--sglang.api-key-file",
            &d("big-key"),
            &log,
        ],
        60,
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("9000 bytes or more, more than a key or password file may hold (8192 bytes)"),
        "{err}"
    );
}

const STATS: &str = "[2026-11-30 15:00:00 TP0] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, #queue-req: 0";

/// Repro 27: a server name from a file name holding ESC/BEL reaches the terminal escaped in
/// `--once`'s summary, `top --snapshot` and `check`: no ESC byte is written.
#[test]
fn names_from_the_input_reach_the_terminal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir
        .path()
        .join("\u{1b}]0;PWNED\u{7}\u{1b}[31mred\u{9b}2J.log");
    std::fs::write(&file, format!("{STATS}\n")).unwrap();
    let f = file.to_str().unwrap();
    let escaped = "\\e]0;PWNED\\x07\\e[31mred\\u{9b}2J";
    // `--once`'s exposition on stdout keeps the bytes inside quoted label values (valid, and
    // for a program): its summary on stderr is for a terminal.
    let run = |args: &[&str], stdout: bool| {
        let out = Command::new(bin())
            .args(args)
            .env("TZ", "UTC")
            .output()
            .unwrap();
        String::from_utf8(if stdout { out.stdout } else { out.stderr }).unwrap()
    };
    for (what, args, stdout) in [
        (
            "--once",
            vec!["--once", "--gpu.disable", "--timezone", "UTC", f],
            false,
        ),
        (
            "top --snapshot",
            vec!["top", "--snapshot", "--timezone", "UTC", f],
            true,
        ),
        ("check", vec!["check", f], true),
    ] {
        let text = run(&args, stdout);
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\u{9b}']),
            "{what}: {text:?}"
        );
        assert!(text.contains(escaped), "{what}: {text}");
    }
}

/// Repro 28: a file name holding a newline and ESC, logged in the default text format, stays
/// on its event's line, escaped: it cannot forge a line of its own.
#[test]
fn a_file_name_cannot_forge_a_text_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let forged = "2026-12-02T21:00:00.000000Z ERROR forged: the exporter lost its credentials";
    let file = dir.path().join(format!("x\n{forged}\u{1b}[2K.log"));
    let mut e = crate::common::Exporter::start(&["--gpu.disable", file.to_str().unwrap()]);
    let logs = e.log_lines();
    // The warning (the start-up line naming the inputs is escaped alike).
    let line = crate::common::wait_log(&logs, "cannot read the file", 30);
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains(&format!("x\\x0a{forged}\\e[2K.log")),
        "{line}"
    );
    let _ = e.child.kill();
    let _ = e.child.wait();
    let all = e.stderr_to_end();
    assert!(!all.contains('\u{1b}'), "{all:?}");
    // The start-up line and the warning, each one line.
    assert_eq!(
        all.lines().filter(|l| l.contains("forged")).count(),
        2,
        "{all}"
    );
    assert!(
        !all.lines()
            .any(|l| l.starts_with("2026-12-02T21:00:00.000000Z")),
        "{all}"
    );
}

/// Repro 32: under basic auth `/-/ready` answers without credentials (for probes) but names
/// nothing of the inputs then: the paths still being read go only to an authorised request.
#[test]
fn ready_names_the_pending_inputs_only_with_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("customer-acme-secret");
    std::fs::create_dir(&secret).unwrap();
    let fifo = secret.join("prod-llama.log");
    mkfifo(&fifo);
    let web = dir.path().join("web.yml");
    let hash = crate::webconfig::hash("s3cret");
    std::fs::write(&web, format!("basic_auth_users:\n  prom: {hash}\n")).unwrap();
    let e = crate::common::Exporter::start(&[
        "--gpu.disable",
        "--web.config.file",
        web.to_str().unwrap(),
        fifo.to_str().unwrap(),
    ]);
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(30))
        .build();
    let url = format!("http://127.0.0.1:{}/-/ready", e.port);
    let ready = |auth| crate::webconfig::get(&agent, &url, auth);
    assert_eq!(ready(None), (503, String::new(), "Not ready.\n".into()));
    assert_eq!(
        ready(Some(("prom", "wrong"))),
        (503, String::new(), "Not ready.\n".into())
    );
    let want = format!("Not ready: still reading {}.\n", fifo.display());
    assert_eq!(ready(Some(("prom", "s3cret"))), (503, String::new(), want));
    // Nothing else of it without credentials.
    let status = format!("http://127.0.0.1:{}/api/v1/status", e.port);
    assert_eq!(crate::webconfig::get(&agent, &status, None).0, 401);
}

/// Repro 33: the live page shows names with their bidi and zero-width characters escaped and
/// isolated (a `<bdi>` each), so `prod` + U+202E cannot reverse the facts after it and
/// `zero`+U+200B+`width` does not look like `zerowidth`; every response carries the CSP (the
/// page's script allowed by its hash: it runs in Chromium under it), nosniff and DENY framing,
/// and the status JSON `Cache-Control: no-store`.
#[test]
fn the_live_page_isolates_names_and_its_responses_are_hardened() {
    let dir = tempfile::tempdir().unwrap();
    let args = "[2026-11-30 15:00:00] server_args=ServerArgs(model_path='model-A', tp_size=1)";
    let prod = dir.path().join("prod\u{202e}.log");
    std::fs::write(&prod, format!("{args}\n{STATS}\n")).unwrap();
    let k = dir.path().join("k.log");
    std::fs::write(
        &k,
        format!("[pod/zero\u{200b}width/sglang] {STATS}\n[pod/zerowidth/sglang] {STATS}\n"),
    )
    .unwrap();
    let e = crate::common::Exporter::start(&[
        "--gpu.disable",
        prod.to_str().unwrap(),
        k.to_str().unwrap(),
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !e.get("/api/v1/status").2.contains("zerowidth") {
        assert!(Instant::now() < deadline, "the logs were not read");
        std::thread::sleep(Duration::from_millis(50));
    }
    let agent = ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(30))
        .build();
    for (path, cache) in [("/", None), ("/api/v1/status", Some("no-store"))] {
        let r = agent
            .get(&format!("http://127.0.0.1:{}{path}", e.port))
            .call()
            .unwrap();
        let csp = r.header("content-security-policy").unwrap_or_default();
        assert!(
            csp.starts_with("default-src 'none'; script-src 'sha256-")
                && csp.ends_with(
                    "'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self'; frame-ancestors 'none'"
                ),
            "{path}: {csp}"
        );
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(r.header("x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(r.header("cache-control"), cache, "{path}");
    }
    let url = format!("http://127.0.0.1:{}/", e.port);
    let dom = crate::livepage::browse(&dir.path().join("profile"), &url, &["--dump-dom"]);
    // The script ran (under the CSP): the servers are there, each name escaped in its <bdi>.
    assert!(
        dom.contains(
            r#"<h2><bdi>prod\u{202e}</bdi><span class="facts"><bdi>unified</bdi> · <bdi>model-A</bdi> · <bdi>log since 15:00:00Z</bdi></span></h2>"#
        ),
        "{dom}"
    );
    assert!(
        dom.contains(r"[pod/zero\u{200b}width/sglang]</bdi>"),
        "{dom}"
    );
    assert!(dom.contains("[pod/zerowidth/sglang]</bdi>"), "{dom}");
    // Nothing shown holds them raw: only the data-server attributes (identifiers, never shown).
    let mut shown = String::new();
    for (i, part) in dom.split("data-server=\"").enumerate() {
        shown.push_str(if i == 0 {
            part
        } else {
            part.split_once('"').map_or("", |p| p.1)
        });
    }
    assert!(!shown.contains(['\u{202e}', '\u{200b}']), "{shown}");
}
