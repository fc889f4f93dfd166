//! One stop signal for every thread of the exporter: readers check it between reads, sleepers
//! (back-off, sampling and push intervals, the state file) wake at once when it is set.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A flag that is set once (shutdown) and can be waited on.
#[derive(Debug, Default)]
pub struct Stop {
    flag: AtomicBool,
    lock: Mutex<()>,
    cv: Condvar,
}

impl Stop {
    /// A stop not yet set.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Sets the stop and wakes every waiter.
    pub fn set(&self) {
        let _g = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        self.flag.store(true, Ordering::SeqCst);
        self.cv.notify_all();
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
        assert!(!s.wait(Duration::from_secs(600)));
    }
}
