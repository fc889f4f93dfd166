//! The log's own clock, for reading finished inputs (`--once`, `backfill`): "now" is the time
//! of the input's last timed line, so `--once old.log` shows the state at the end of that log,
//! not "idle since June", and a log that went on quietly (access lines only) past
//! `--idle-after` reads idle at its end, as the same file followed live does.

/// A jump ahead by more than this needs a second line to confirm it.
pub const JUMP: f64 = 3600.0;

/// The latest plausible time of the input's timed lines (every kind: stats, retraction, startup,
/// access, `server_args` and request lines).
///
/// One line with a corrupt time (a flipped day or year digit) cannot move the clock alone: a
/// time more than [`JUMP`] ahead is held as pending until a second line lands within `JUMP` of
/// it (a log resumed after a quiet night has many), else ignored. Times going back are ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LogClock {
    now: Option<f64>,
    pending: Option<f64>,
}

impl LogClock {
    /// Notes the time of a line that carries rank state (Unix seconds).
    pub fn observe(&mut self, t: f64) {
        let Some(now) = self.now else {
            self.now = Some(t);
            return;
        };
        if t <= now + JUMP {
            self.now = Some(now.max(t));
            self.pending = None;
            return;
        }
        match self.pending {
            Some(p) if (t - p).abs() <= JUMP => {
                self.now = Some(t.max(p));
                self.pending = None;
            }
            _ => self.pending = Some(t),
        }
    }

    /// The clock, `None` before any timed line.
    pub fn now(&self) -> Option<f64> {
        self.now
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_corrupt_time_does_not_move_the_clock() {
        let mut c = LogClock::default();
        for t in [100.0, 110.0, 105.0] {
            c.observe(t);
        }
        assert_eq!(c.now(), Some(110.0));
        // Five days ahead, once: ignored.
        c.observe(110.0 + 5.0 * 86_400.0);
        assert_eq!(c.now(), Some(110.0));
        c.observe(120.0);
        assert_eq!(c.now(), Some(120.0));
        // A quiet night: the first line after it is pending, the second confirms it.
        let morning = 120.0 + 10.0 * 3600.0;
        c.observe(morning);
        assert_eq!(c.now(), Some(120.0));
        c.observe(morning + 2.0);
        assert_eq!(c.now(), Some(morning + 2.0));
        // Within the jump: at once.
        c.observe(morning + 1800.0);
        assert_eq!(c.now(), Some(morning + 1800.0));
    }

    #[test]
    fn two_corrupt_times_far_apart_do_not_confirm_each_other() {
        let t0 = 1780480800.0;
        let mut c = LogClock::default();
        c.observe(t0);
        // Five, then ten days ahead: the second is no confirmation of the first (more than
        // JUMP apart), only the new pending time.
        c.observe(t0 + 5.0 * 86_400.0);
        c.observe(t0 + 10.0 * 86_400.0);
        assert_eq!(c.now(), Some(t0));
        // A line within JUMP of the pending one confirms it (the later of the two wins).
        c.observe(t0 + 10.0 * 86_400.0 - 3600.0);
        assert_eq!(c.now(), Some(t0 + 10.0 * 86_400.0));
    }
}
