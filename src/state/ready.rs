//! Start-up readiness: the exporter is ready (`/-/ready` answers 200, systemd gets `READY=1`)
//! once every source expected at start has caught up once: a followed file read to its end (or
//! found missing: nothing to catch up with), a journald unit's entries that existed at start
//! read, the first `--input.glob` scan's files read to their end.
//!
//! It is also not ready while an input it was told to read (`--input.file`, a `--journal-unit`:
//! [`Readiness::require`]) cannot be read: a missing or unreadable file, a journalctl that
//! cannot start or keeps failing. "Ready" with an input it cannot read would be a green probe
//! over a blind exporter; a discovered file going away (a pod deleted) is no such fault.
//!
//! Sources are named as everywhere else (`source` label: the path, `journald:UNIT`); each is
//! expected before its reader starts ([`Readiness::expect`]) and marked once it has caught up
//! ([`Readiness::caught_up`]). Marking a source that was never expected does nothing, so a
//! reader need not know whether anyone waits for it (`top`, `--once`, a file found later).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// The sources still catching up; shared (in an `Arc`) by the readers, the HTTP probes and the
/// systemd notifier.
#[derive(Debug, Default)]
pub struct Readiness {
    inner: Mutex<Inner>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Inner {
    pending: BTreeSet<String>,
    /// Inputs that must be readable for readiness.
    required: BTreeSet<String>,
    /// Required inputs that cannot be read now, with why.
    unreadable: BTreeMap<String, String>,
}

impl Inner {
    fn ready(&self) -> bool {
        self.pending.is_empty() && self.unreadable.is_empty()
    }
}

impl Readiness {
    /// Notes that `source` is to catch up before the exporter is ready.
    pub fn expect(&self, source: &str) {
        self.lock().pending.insert(source.to_string());
    }

    /// Notes that `source` is to catch up ([`Readiness::expect`]) and must stay readable: an
    /// input named on the command line.
    pub fn require(&self, source: &str) {
        let mut i = self.lock();
        i.pending.insert(source.to_string());
        i.required.insert(source.to_string());
    }

    /// Notes that `source` has caught up (idempotent; unknown sources are ignored).
    pub fn caught_up(&self, source: &str) {
        let mut i = self.lock();
        if i.pending.remove(source) && i.ready() {
            self.changed.notify_all();
        }
    }

    /// Notes that `source` cannot be read now, for `why` (ignored unless required).
    pub fn unreadable(&self, source: &str, why: &str) {
        let mut i = self.lock();
        if i.required.contains(source) {
            i.unreadable.insert(source.to_string(), why.to_string());
        }
    }

    /// Notes that `source` is being read (again).
    pub fn readable(&self, source: &str) {
        let mut i = self.lock();
        if i.unreadable.remove(source).is_some() && i.ready() {
            self.changed.notify_all();
        }
    }

    /// Whether no expected source is still catching up and every required one is readable.
    pub fn is_ready(&self) -> bool {
        self.lock().ready()
    }

    /// The sources still catching up, in name order.
    pub fn pending(&self) -> Vec<String> {
        self.lock().pending.iter().cloned().collect()
    }

    /// The required sources that cannot be read now and why, in name order.
    pub fn unreadable_now(&self) -> Vec<(String, String)> {
        let i = self.lock();
        i.unreadable
            .iter()
            .map(|(s, w)| (s.clone(), w.clone()))
            .collect()
    }

    /// Why it is not ready, in words (`None` when ready): `still reading a.log; cannot read
    /// b.log (No such file or directory)`.
    pub fn why_not(&self) -> Option<String> {
        let i = self.lock();
        if i.ready() {
            return None;
        }
        let mut parts = Vec::new();
        if !i.pending.is_empty() {
            let names: Vec<&str> = i.pending.iter().map(String::as_str).collect();
            parts.push(format!("still reading {}", names.join(", ")));
        }
        for (s, why) in &i.unreadable {
            parts.push(format!("cannot read {s} ({why})"));
        }
        Some(parts.join("; "))
    }

    /// Waits up to `timeout` for readiness; whether ready.
    pub fn wait(&self, timeout: Duration) -> bool {
        let i = self.lock();
        let (i, _) = self
            .changed
            .wait_timeout_while(i, timeout, |i| !i.ready())
            .unwrap_or_else(|e| e.into_inner());
        i.ready()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A reader that panicked while holding it left sets that are still whole.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
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

    #[test]
    fn not_ready_while_a_required_input_cannot_be_read() {
        let r = Readiness::default();
        r.require("/var/log/a.log");
        r.expect("/var/log/pods/x.log");
        // A missing file has nothing to catch up with, but is no input read.
        r.unreadable("/var/log/a.log", "No such file or directory (os error 2)");
        r.caught_up("/var/log/a.log");
        // A discovered file that goes is not required.
        r.unreadable("/var/log/pods/x.log", "gone");
        r.caught_up("/var/log/pods/x.log");
        assert!(!r.is_ready());
        assert!(!r.wait(Duration::from_millis(1)));
        assert_eq!(
            r.why_not().as_deref(),
            Some("cannot read /var/log/a.log (No such file or directory (os error 2))")
        );
        r.readable("/var/log/a.log");
        assert!(r.is_ready());
        assert_eq!(r.why_not(), None);
        assert_eq!(r.unreadable_now(), []);
    }
}
