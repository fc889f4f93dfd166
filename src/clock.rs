//! The process's two clocks, read together: the wall clock (`CLOCK_REALTIME`, Unix seconds) for
//! timestamps and for judging the state (a rank's last line is a time of day), the monotonic clock
//! ([`Instant`]) for every "how long since" of the process itself (an encoding's age, a status's
//! age, a deadline). The wall clock steps (NTP or chrony correcting a clock that ran ahead, a VM
//! restored from a snapshot, a manual `date`): an age measured on it is then negative for as
//! long as the step, and whatever it judges fresh stays "fresh" (repro 38: `/metrics` and
//! `/api/v1/status` served frozen for the 2 h of a step back).
//!
//! A [`Clock`] is handed to the parts that age things, so a test can step its wall clock.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// One reading of both clocks.
#[derive(Debug, Clone, Copy)]
pub struct Now {
    /// Wall clock, Unix seconds.
    pub wall: f64,
    /// Monotonic clock.
    pub mono: Instant,
}

/// A source of [`Now`] readings: the system's ([`system`]) or a test's ([`Clock::new`]).
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> Now + Send + Sync>);

impl Clock {
    /// A clock read by calling `f`.
    pub fn new(f: impl Fn() -> Now + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(f))
    }

    /// Both clocks now.
    pub fn now(&self) -> Now {
        (self.0)()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

/// Unix seconds now (the wall clock; 0 before 1970).
pub fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Both system clocks now.
pub fn now() -> Now {
    Now {
        wall: now_unix(),
        mono: Instant::now(),
    }
}

/// The system's clocks.
pub fn system() -> Clock {
    Clock::new(now)
}

/// Seconds from `earlier` to `later` on the monotonic clock (0 when `later` is earlier).
pub fn since(later: Instant, earlier: Instant) -> f64 {
    later.saturating_duration_since(earlier).as_secs_f64()
}

/// A clock that reads what the test set (both clocks), and the handle to set it.
#[cfg(test)]
pub(crate) fn manual(start: Now) -> (Clock, Arc<std::sync::Mutex<Now>>) {
    let at = Arc::new(std::sync::Mutex::new(start));
    let read = at.clone();
    (Clock::new(move || *read.lock().unwrap()), at)
}
