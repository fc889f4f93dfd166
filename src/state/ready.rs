//! Start-up readiness: the exporter is ready (`/-/ready` answers 200, systemd gets `READY=1`)
//! once every source expected at start has caught up once: a followed file read to its end (or
//! found missing: nothing to catch up with), a journald unit's entries that existed at start
//! read, the first `--input.glob` scan's files read to their end.
//!
//! Sources are named as everywhere else (`source` label: the path, `journald:UNIT`); each is
//! expected before its reader starts ([`Readiness::expect`]) and marked once it has caught up
//! ([`Readiness::caught_up`]). Marking a source that was never expected does nothing, so a
//! reader need not know whether anyone waits for it (`top`, `--once`, a file found later).

use std::collections::BTreeSet;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The sources still catching up; shared (in an `Arc`) by the readers, the HTTP probes and the
/// systemd notifier.
#[derive(Debug, Default)]
pub struct Readiness {
    pending: Mutex<BTreeSet<String>>,
    changed: Condvar,
}

impl Readiness {
    /// Notes that `source` is to catch up before the exporter is ready.
    pub fn expect(&self, source: &str) {
        self.lock().insert(source.to_string());
    }

    /// Notes that `source` has caught up (idempotent; unknown sources are ignored).
    pub fn caught_up(&self, source: &str) {
        let mut p = self.lock();
        if p.remove(source) && p.is_empty() {
            self.changed.notify_all();
        }
    }

    /// Whether no expected source is still catching up.
    pub fn is_ready(&self) -> bool {
        self.lock().is_empty()
    }

    /// The sources still catching up, in name order.
    pub fn pending(&self) -> Vec<String> {
        self.lock().iter().cloned().collect()
    }

    /// Waits up to `timeout` for readiness; whether ready.
    pub fn wait(&self, timeout: Duration) -> bool {
        let p = self.lock();
        let (p, _) = self
            .changed
            .wait_timeout_while(p, timeout, |p| !p.is_empty())
            .unwrap_or_else(|e| e.into_inner());
        p.is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
        // A reader that panicked while holding it left a set that is still whole.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_every_expected_source_caught_up() {
        let r = Readiness::default();
        assert!(r.is_ready());
        r.expect("/var/log/a.log");
        r.expect("journal:u.service");
        r.caught_up("never-expected");
        assert_eq!(r.pending(), ["/var/log/a.log", "journal:u.service"]);
        r.caught_up("/var/log/a.log");
        r.caught_up("/var/log/a.log");
        assert!(!r.is_ready());
        assert!(!r.wait(Duration::from_millis(1)));
        r.caught_up("journal:u.service");
        assert!(r.is_ready());
        assert!(r.wait(Duration::ZERO));
    }
}
