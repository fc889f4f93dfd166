//! systemd `Type=notify` (through the `sd-notify` crate; nothing is sent without
//! `$NOTIFY_SOCKET`): `STATUS=` with what is followed while catching up, `READY=1` with the
//! final `STATUS=` once every source has caught up (see [`crate::state::ready`]), `WATCHDOG=1`
//! every half `WatchdogSec=` while the state can be locked (a wedged exporter stops pinging and
//! systemd restarts it), `STOPPING=1` at shutdown.

use std::sync::Arc;
use std::time::Duration;

use sd_notify::NotifyState;

use crate::state::Shared;
use crate::stop::Stop;

/// What the exporter follows and where it serves, for `STATUS=`: `following 2 files and 1
/// journal unit; serving :8771`.
pub fn status_text(files: usize, units: usize, globs: usize, listen: &[String]) -> String {
    let count = |n: usize, one: &str, many: &str| match n {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    };
    let mut what = Vec::new();
    if files > 0 {
        what.push(count(files, "file", "files"));
    }
    if units > 0 {
        what.push(count(units, "journal unit", "journal units"));
    }
    if globs > 0 {
        what.push(count(globs, "--input.glob", "--input.globs"));
    }
    let what = match what.len() {
        0 => "stdin".to_string(),
        1 => what.remove(0),
        _ => {
            let last = what.pop().unwrap_or_default();
            format!("{} and {last}", what.join(", "))
        }
    };
    let serving = if listen.is_empty() {
        "no HTTP server".to_string()
    } else {
        format!("serving {}", listen.join(", "))
    };
    format!("following {what}; {serving}")
}

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::debug!("sd_notify failed: {e}");
    }
}

/// Starts the notifier thread (only under `$NOTIFY_SOCKET`): `STATUS=catching up: …`, then
/// `READY=1` and `STATUS=…` when ready, then watchdog pings until `stop`.
///
/// # Errors
/// When the thread cannot be started.
pub fn spawn(state: Shared, status: String, stop: Arc<Stop>) -> std::io::Result<()> {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return Ok(());
    }
    let watchdog = sd_notify::watchdog_enabled();
    std::thread::Builder::new()
        .name("sd_notify".into())
        .spawn(move || {
            let readiness = crate::state::lock(&state).readiness().clone();
            let catching = format!("catching up: {status}");
            send(&[NotifyState::Status(&catching)]);
            // Waits in steps, so the watchdog is fed while catching up too; `systemctl status`
            // says why it is not ready when an input cannot be read.
            let step = watchdog.map_or(Duration::from_millis(500), |w| w / 2);
            let mut said = catching;
            while !readiness.wait(step) {
                if stop.is_set() {
                    return;
                }
                let now = match readiness.unreadable_now().is_empty() {
                    true => format!("catching up: {status}"),
                    false => format!("not ready: {}", readiness.why_not().unwrap_or_default()),
                };
                if now != said {
                    send(&[NotifyState::Status(&now)]);
                    said = now;
                }
                if watchdog.is_some() {
                    drop(crate::state::lock(&state));
                    send(&[NotifyState::Watchdog]);
                }
            }
            send(&[NotifyState::Ready, NotifyState::Status(&status)]);
            let Some(every) = watchdog.map(|w| w / 2) else {
                return;
            };
            while stop.wait(every) {
                // Taking the lock proves the state is not wedged.
                drop(crate::state::lock(&state));
                send(&[NotifyState::Watchdog]);
            }
        })
        .map(drop)
}

/// `STOPPING=1` (shutdown begins); nothing without `$NOTIFY_SOCKET`.
pub fn stopping() {
    if std::env::var_os("NOTIFY_SOCKET").is_some() {
        send(&[NotifyState::Stopping]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_what_is_followed() {
        assert_eq!(
            status_text(2, 1, 0, &[":8771".into()]),
            "following 2 files and 1 journal unit; serving :8771"
        );
        assert_eq!(
            status_text(1, 2, 1, &[]),
            "following 1 file, 2 journal units and 1 --input.glob; no HTTP server"
        );
        assert_eq!(
            status_text(0, 0, 0, &["127.0.0.1:1".into(), "[::1]:1".into()]),
            "following stdin; serving 127.0.0.1:1, [::1]:1"
        );
    }
}
