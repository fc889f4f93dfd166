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
            (vec!["--patterns", bad], format!("{bad}")),
            (vec!["--web.config.file", bad], format!("{bad}")),
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
