//! Signals of the main mode. Every signal whose default action ends the process is handled,
//! so that none leaves the Pushgateway serving a dead exporter's last values as current
//! (repro 35), except those that cannot or must not be:
//!
//! * **Stop, as SIGTERM** (the Pushgateway group is deleted on the way out): SIGTERM, SIGINT,
//!   SIGQUIT (a request to quit; no core dump wanted from an exporter), SIGXCPU (the soft CPU
//!   limit: the system asks the process to end before SIGKILL comes) and SIGPWR (power
//!   failing: the host is going down).
//! * **Ignored, logged**: SIGHUP (re-checks the web config: log rotation scripts send it to make
//!   daemons reopen their logs, and this exporter follows rotation by itself), SIGUSR1 (what
//!   rotation sends to many daemons, nginx's and copied `postrotate` lines), SIGUSR2, SIGALRM,
//!   SIGVTALRM and SIGPROF (timers the exporter never sets: stray ones from tooling), SIGIO
//!   (no descriptor asks for it), SIGXFSZ (a write past the file size limit then fails with
//!   its own error, which the writer reports) and the real-time signals (none is used): a
//!   stray one must not stop the metrics.
//! * **Left to their default**: SIGKILL and SIGSTOP (they cannot be caught), and the faults
//!   SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS and SIGABRT (raised by the process itself
//!   on a bug or an abort: carrying on would run on broken state; the kernel's report and a
//!   core are what helps). SIGPIPE is ignored by Rust's runtime already (a write gets EPIPE).

use tokio::signal::unix::{signal, SignalKind};

use super::server::webconfig::Reloader;

/// What a handled signal does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// End as SIGTERM does.
    Stop,
    /// Keep running; SIGHUP also re-checks the web config.
    Ignore,
}

/// The signals handled, with their names and actions (see the module's documentation).
fn handled() -> Vec<(i32, String, Action)> {
    use Action::{Ignore, Stop};
    let mut v: Vec<(i32, String, Action)> = [
        (libc::SIGTERM, "SIGTERM", Stop),
        (libc::SIGINT, "SIGINT", Stop),
        (libc::SIGQUIT, "SIGQUIT", Stop),
        (libc::SIGXCPU, "SIGXCPU", Stop),
        (libc::SIGPWR, "SIGPWR", Stop),
        (libc::SIGHUP, "SIGHUP", Ignore),
        (libc::SIGUSR1, "SIGUSR1", Ignore),
        (libc::SIGUSR2, "SIGUSR2", Ignore),
        (libc::SIGALRM, "SIGALRM", Ignore),
        (libc::SIGVTALRM, "SIGVTALRM", Ignore),
        (libc::SIGPROF, "SIGPROF", Ignore),
        (libc::SIGIO, "SIGIO", Ignore),
        (libc::SIGXFSZ, "SIGXFSZ", Ignore),
    ]
    .into_iter()
    .map(|(n, name, a)| (n, name.to_string(), a))
    .collect();
    #[cfg(target_os = "linux")]
    {
        v.push((libc::SIGSTKFLT, "SIGSTKFLT".into(), Ignore));
        let (lo, hi) = (libc::SIGRTMIN(), libc::SIGRTMAX());
        v.extend((lo..=hi).map(|n| (n, format!("SIGRTMIN+{}", n - lo), Ignore)));
    }
    v
}

/// Completes on a stop signal (SIGTERM, SIGINT, SIGQUIT, SIGXCPU, SIGPWR); handles the ignored
/// ones meanwhile. The handlers are installed when this is called (inside the runtime), not
/// when the future is first polled: a signal that comes while the listeners are being bound is
/// not the default action (death).
pub fn shutdown(web: Option<Reloader>) -> impl std::future::Future<Output = ()> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut streams = Vec::new();
    for (n, name, action) in handled() {
        match signal(SignalKind::from_raw(n)) {
            Ok(s) => streams.push((s, name, action)),
            // A stop signal that cannot be handled is a broken runtime: stop on SIGTERM alone
            // rather than not at all (the others keep their default).
            Err(e) => tracing::debug!("cannot handle {name}: {e}"),
        }
    }
    async move {
        for (mut s, name, action) in streams {
            let tx = tx.clone();
            tokio::spawn(async move {
                while s.recv().await.is_some() {
                    if tx.send((name.clone(), action)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        while let Some((name, action)) = rx.recv().await {
            match action {
                Action::Stop => {
                    tracing::info!("{name}: shutting down");
                    return;
                }
                Action::Ignore if name == "SIGHUP" => {
                    if let Some(w) = &web {
                        let _ = w.current();
                    }
                    tracing::info!("SIGHUP: web config checked for changes; followed files need no reopening (rotation is detected)");
                }
                Action::Ignore => {
                    tracing::info!("{name} ignored: the exporter keeps running (followed files need no reopening: rotation is detected)");
                }
            }
        }
        // No handler could be installed: nothing to wait for but the end.
        std::future::pending::<()>().await;
    }
}
