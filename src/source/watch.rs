//! One file watcher (one inotify instance) for every followed file of the process.
//!
//! A follower subscribes to its file's directory and is woken (its [`Wake`] is called) by the
//! events that name its file or the directory itself (an overflow of the event queue wakes
//! every follower); an event naming a file no one follows (a
//! rotated-away file a tailer still reads in its grace period, a new file) wakes every
//! subscriber of the directory, at most every [`ALL_EVERY`]; the stat poll stays the backstop.
//! So 256 followed files in one directory cost a wake-up per write to each, not 256. One instance serves every directory, so
//! following more files than `fs.inotify.max_user_instances` (128 by default, shared with every
//! process of the user) costs watches, not instances, and no watcher thread per file.
//!
//! A follower whose directory cannot be watched (missing at start, no inotify) looks at its
//! poll interval instead ([`Watch::is_watching`]), and [`Watch::retry`] adds the watch once
//! the directory exists. Opening a file or the directory (a scan, our own reads) is no event
//! worth a look: it changes nothing.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};

/// Subscribers by watched directory. Locked by the watcher's callback; never held while the
/// watcher itself is called (its backend answers `watch` from the thread that runs callbacks).
type Subscribers = Arc<Mutex<HashMap<PathBuf, Dir>>>;

/// What wakes a follower: called from the watcher's thread, so it must be quick (a flag set,
/// a message sent).
pub type Wake = Arc<dyn Fn() + Send + Sync>;

/// The subscribers of one directory.
#[derive(Default)]
struct Dir {
    /// Id, the name of the file followed, and the follower's wake-up.
    subs: Vec<(u64, Option<OsString>, Wake)>,
    /// When an event of a file no one follows last woke them all.
    all_woken: Option<Instant>,
}

/// Events of files no one follows wake a directory's subscribers at most this often.
pub const ALL_EVERY: Duration = Duration::from_millis(250);

impl Dir {
    /// Wakes the subscribers an event of `name` in this directory concerns (`None`: the
    /// directory itself, every one).
    fn wake(&mut self, name: Option<&std::ffi::OsStr>) {
        let mut hit = false;
        for (_, n, wake) in &self.subs {
            if name.is_none() || n.as_deref() == name {
                wake();
                hit = true;
            }
        }
        if !hit && self.all_woken.is_none_or(|t| t.elapsed() >= ALL_EVERY) {
            self.all_woken = Some(Instant::now());
            for (_, _, wake) in &self.subs {
                wake();
            }
        }
    }
}

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
            use notify::event::{AccessKind, EventKind};
            if matches!(ev.kind, EventKind::Access(AccessKind::Open(_))) {
                return;
            }
            let mut subs = locked(&wake);
            if ev.paths.is_empty() {
                // The queue overflowed (events were lost): everyone looks.
                for d in subs.values_mut() {
                    d.wake(None);
                }
            }
            for p in &ev.paths {
                // An event names the watched directory itself, or a file in it.
                if let Some(d) = subs.get_mut(p.as_path()) {
                    d.wake(None);
                } else if let (Some(dir), Some(name)) = (p.parent(), p.file_name()) {
                    if let Some(d) = subs.get_mut(dir) {
                        d.wake(Some(name));
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

/// Subscribes `wake` to events in the directory of `path`.
pub fn subscribe(path: &Path, wake: Wake) -> Watch {
    let r = registry();
    let dir = dir_of(path);
    let id = r.next.fetch_add(1, Ordering::Relaxed);
    locked(&r.subs).entry(dir.clone()).or_default().subs.push((
        id,
        path.file_name().map(OsString::from),
        wake,
    ));
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
            let list = &mut subs.entry(self.dir.clone()).or_default().subs;
            list.retain(|(id, _, _)| *id != self.id);
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
    use std::sync::mpsc::{channel, Receiver};
    use std::time::Duration;

    fn woken(path: &Path) -> (Watch, Receiver<()>) {
        let (tx, rx) = channel();
        let tx = Mutex::new(tx);
        let w = subscribe(
            path,
            Arc::new(move || {
                let _ = locked(&tx).send(());
            }),
        );
        (w, rx)
    }

    /// A directory made after the subscription is watched from the next retry on; the channel
    /// of a subscriber without a watch waits instead of disconnecting.
    #[test]
    fn a_missing_directory_is_watched_once_it_exists() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("later");
        let (w, rx) = woken(&dir.join("x.log"));
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
        // Two subscribers of one directory share its watch; a write to one's file wakes that
        // one only (hostile pass: 256 files in one directory woke all 256 per write).
        let (w2, rx2) = woken(&dir.join("y.log"));
        assert!(w2.is_watching());
        std::thread::sleep(ALL_EVERY);
        while rx.try_recv().is_ok() {}
        std::fs::write(dir.join("y.log"), b"b\n").unwrap();
        assert_eq!(rx2.recv_timeout(Duration::from_secs(5)), Ok(()));
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(300)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        );
        // A file no one follows (a rotated-away one still read in its grace) wakes both.
        std::fs::write(dir.join("x.log.1"), b"c\n").unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(()));
        assert_eq!(rx2.recv_timeout(Duration::from_secs(5)), Ok(()));
        drop(w2);
        drop(w);
        assert!(!locked(&registry().subs).contains_key(&dir));
    }
}
