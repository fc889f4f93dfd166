//! One stop signal for every thread of the exporter: readers check it between reads, sleepers
//! (back-off, sampling and push intervals, the state file) wake at once when it is set.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A flag that is set once (shutdown) and can be waited on.
#[derive(Default)]
pub struct Stop {
    flag: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
    /// Called when it is set: wakes a job of the file-following pool, which does not wait on
    /// the condition variable (see [`Stop::on_set`]).
    hooks: Mutex<Vec<Hook>>,
}

type Hook = Box<dyn Fn() + Send + Sync>;

impl std::fmt::Debug for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stop").field("set", &self.is_set()).finish()
    }
}

impl Stop {
    /// A stop not yet set.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Sets the stop and wakes every waiter.
    pub fn set(&self) {
        {
            let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.flag.store(true, Ordering::SeqCst);
            self.cv.notify_all();
        }
        // Unlocked: a hook takes locks of its own.
        let hooks = std::mem::take(&mut *self.hooks.lock().unwrap_or_else(|p| p.into_inner()));
        for h in hooks {
            h();
        }
    }

    /// Calls `f` once when the stop is set (at once if it is set already).
    pub fn on_set(&self, f: impl Fn() + Send + Sync + 'static) {
        {
            let mut hooks = self.hooks.lock().unwrap_or_else(|p| p.into_inner());
            if !self.flag.load(Ordering::SeqCst) {
                hooks.push(Box::new(f));
                return;
            }
        }
        f();
    }

    /// Whether the stop is set (cheap: for loops that check between reads).
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Relaxed)
    }

    /// Sleeps for `d` unless the stop is (or gets) set; `true` when the whole time passed.
    pub fn wait(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        while !self.flag.load(Ordering::SeqCst) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            g = match self.cv.wait_timeout(g, left) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_waiter_wakes_when_set() {
        let s = Arc::new(Stop::new());
        assert!(
            s.wait(Duration::from_millis(10)),
            "not set: the whole time passes"
        );
        let s2 = s.clone();
        let t = std::thread::spawn(move || s2.wait(Duration::from_secs(600)));
        std::thread::sleep(Duration::from_millis(50));
        s.set();
        assert!(!t.join().unwrap(), "woken by the stop, not by the time");
        assert!(s.is_set());
        // A hook added after the set is called at once; one added before, once, by the set.
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let c = calls.clone();
        s.on_set(move || {
            c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
        let later = Stop::new();
        let c = calls.clone();
        later.on_set(move || {
            c.fetch_add(10, std::sync::atomic::Ordering::SeqCst);
        });
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
        later.set();
        later.set();
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 11);
        assert!(!s.wait(Duration::from_secs(600)));
    }
}
