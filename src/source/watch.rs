//! One file watcher (one inotify instance) for every followed file of the process.
//!
//! A tailer subscribes to its file's directory and is woken (a `()` on its channel) by any
//! event there; its stat poll stays the backstop. One instance serves every directory, so
//! following more files than `fs.inotify.max_user_instances` (128 by default, shared with every
//! process of the user) costs watches, not instances, and no watcher thread per file.
//!
//! The registry keeps each subscriber's sender, so a tailer's channel never disconnects: one
//! whose directory cannot be watched (missing at start, no inotify) sleeps its poll interval
//! between looks instead of spinning, and [`Watch::retry`] adds the watch once the directory
//! exists.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex, OnceLock};

use notify::{RecursiveMode, Watcher};

/// Subscribers by watched directory. Locked by the watcher's callback; never held while the
/// watcher itself is called (its backend answers `watch` from the thread that runs callbacks).
type Subscribers = Arc<Mutex<HashMap<PathBuf, Vec<(u64, Sender<()>)>>>>;

struct Registry {
    subs: Subscribers,
    /// `None` where no watcher could be made (no inotify): every tailer polls.
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
    next: AtomicU64,
}

/// The guard of `m`, also after a thread panicked holding it (what it guards stays usable).
fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| {
        let subs: Subscribers = Arc::default();
        let wake = subs.clone();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let Ok(ev) = res else { return };
            let subs = locked(&wake);
            for p in &ev.paths {
                // An event names a file in a watched directory, or the directory itself.
                for dir in [p.parent(), Some(p.as_path())].into_iter().flatten() {
                    for (_, tx) in subs.get(dir).into_iter().flatten() {
                        let _ = tx.send(());
                    }
                }
            }
        })
        .map_err(|e| tracing::warn!("no file watcher ({e}); files are polled"))
        .ok();
        Registry {
            subs,
            watcher: Mutex::new(watcher),
            next: AtomicU64::new(0),
        }
    })
}

/// A tailer's subscription to its file's directory; unsubscribes when dropped (the watch goes
/// with the directory's last subscriber).
pub struct Watch {
    dir: PathBuf,
    id: u64,
    watching: AtomicBool,
}

/// The directory a file's events come from (`.` for a bare file name).
pub fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Subscribes `tx` to events in the directory of `path`.
pub fn subscribe(path: &Path, tx: Sender<()>) -> Watch {
    let r = registry();
    let dir = dir_of(path);
    let id = r.next.fetch_add(1, Ordering::Relaxed);
    locked(&r.subs)
        .entry(dir.clone())
        .or_default()
        .push((id, tx));
    let w = Watch {
        dir,
        id,
        watching: AtomicBool::new(false),
    };
    w.retry();
    w
}

impl Watch {
    /// Adds the directory's watch if it is not there yet (the directory did not exist, or was
    /// removed and made again); cheap when it is. Called before each poll.
    pub fn retry(&self) {
        if self.watching.load(Ordering::Relaxed) {
            return;
        }
        let mut w = locked(&registry().watcher);
        let Some(watcher) = w.as_mut() else {
            return;
        };
        // Watching a directory twice is one watch (inotify); a failure (missing) is retried at
        // the next poll.
        match watcher.watch(&self.dir, RecursiveMode::NonRecursive) {
            Ok(()) => self.watching.store(true, Ordering::Relaxed),
            Err(e) => {
                tracing::debug!(dir = %self.dir.display(), "cannot watch the directory yet ({e}); polling")
            }
        }
    }

    /// Whether the directory's watch is in place.
    pub fn is_watching(&self) -> bool {
        self.watching.load(Ordering::Relaxed)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let r = registry();
        let last = {
            let mut subs = locked(&r.subs);
            let list = subs.entry(self.dir.clone()).or_default();
            list.retain(|(id, _)| *id != self.id);
            let last = list.is_empty();
            if last {
                subs.remove(&self.dir);
            }
            last
        };
        if last && self.is_watching() {
            if let Some(w) = locked(&r.watcher).as_mut() {
                let _ = w.unwatch(&self.dir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    /// A directory made after the subscription is watched from the next retry on; the channel
    /// of a subscriber without a watch waits instead of disconnecting.
    #[test]
    fn a_missing_directory_is_watched_once_it_exists() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("later");
        let (tx, rx) = channel();
        let w = subscribe(&dir.join("x.log"), tx);
        assert!(!w.is_watching());
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(50)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        );
        std::fs::create_dir(&dir).unwrap();
        w.retry();
        assert!(w.is_watching());
        std::fs::write(dir.join("x.log"), b"a\n").unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(()));
        // Two subscribers of one directory share its watch; both are woken.
        let (tx2, rx2) = channel();
        let w2 = subscribe(&dir.join("y.log"), tx2);
        assert!(w2.is_watching());
        while rx.try_recv().is_ok() {}
        std::fs::write(dir.join("y.log"), b"b\n").unwrap();
        assert_eq!(rx2.recv_timeout(Duration::from_secs(5)), Ok(()));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(()));
        drop(w2);
        drop(w);
        assert!(!locked(&registry().subs).contains_key(&dir));
    }
}
