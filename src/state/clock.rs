//! The log's own clock, for reading finished inputs (`--once`, `backfill`): "now" is the time
//! of the input's last timed line, so `--once old.log` shows the state at the end of that log,
//! not "idle since June", and a log that went on quietly (access lines only) past
//! `--idle-after` reads idle at its end, as the same file followed live does.

/// The wall clock, Unix seconds.
fn wall_clock() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Two times further apart than this do not agree: a line this far from the clock needs a
/// second line near it to move the clock.
pub const JUMP: f64 = 3600.0;

/// Lines that agree with the clock after which it is trusted: two agreeing lines far from it
/// move it only forward.
const TRUSTED: u32 = 4;

/// The latest plausible time of the input's timed lines (every kind: stats, retraction, startup,
/// access, `server_args` and request lines).
///
/// The clock follows times that agree with their neighbours, not outliers (a flipped day or
/// year digit):
/// - the first line is provisional: the clock is set once a second line lands within [`JUMP`]
///   of it (a first line with a wrong day is dropped when the next two agree elsewhere);
/// - a line within `JUMP` of the clock agrees: the clock goes to the later of the two;
/// - a line further away is held as pending until the next line lands within `JUMP` of it (a
///   log resumed after a quiet night has many such), which moves the clock there. Moving back
///   that way is allowed only while few lines have agreed with the clock (two consecutive
///   wrong-day lines are undone by the correct ones after them; a long log is not rewound by
///   two stray old lines).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LogClock {
    now: Option<f64>,
    pending: Option<f64>,
    /// Lines that agreed with `now` since it was last set by a jump.
    support: u32,
    /// The clock was set by two agreeing lines since [`LogClock::take_settled`] was last
    /// called: times given out before (a provisional first line's) may be outliers.
    settled: bool,
}

impl LogClock {
    /// Notes the time of a line (Unix seconds); returns the time to use for that line's state:
    /// its own when it agrees with the clock (or sets it), else the clock's (an outlier's time
    /// must not make its rank look busy for days, or idle since the wrong day).
    pub fn observe(&mut self, t: f64) -> f64 {
        let Some(now) = self.now else {
            match self.pending {
                Some(p) if (t - p).abs() <= JUMP => self.set(t.max(p)),
                _ => self.pending = Some(t),
            }
            return t;
        };
        if (t - now).abs() <= JUMP {
            self.now = Some(now.max(t));
            self.pending = None;
            self.support = self.support.saturating_add(1);
            return t;
        }
        match self.pending {
            Some(p) if (t - p).abs() <= JUMP && (t > now || self.support < TRUSTED) => {
                self.set(t.max(p));
                t
            }
            // A line of the present (live lines after a history) is no outlier: the clock
            // moves to it at once. Read only here, on a jump (a clock read per line costs).
            _ if (t - wall_clock()).abs() <= JUMP => {
                self.set(t);
                t
            }
            _ => {
                self.pending = Some(t);
                now
            }
        }
    }

    fn set(&mut self, t: f64) {
        self.now = Some(t);
        self.pending = None;
        self.support = 2;
        self.settled = true;
    }

    /// Whether the clock was set by agreeing lines since the last call (then a time given out
    /// to an earlier line more than [`JUMP`] ahead of it was an outlier's).
    pub fn take_settled(&mut self) -> bool {
        std::mem::take(&mut self.settled)
    }

    /// The clock, `None` before any timed line (an input of one timed line: that line's time).
    pub fn now(&self) -> Option<f64> {
        self.now.or(self.pending)
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
        c.observe(t0 - 1.0);
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

    #[test]
    fn a_wrong_first_line_and_two_wrong_lines_are_undone() {
        let t0 = 1780480800.0;
        let day = 86_400.0;
        // The first line five days ahead, then the log's own times.
        let mut c = LogClock::default();
        assert_eq!(c.observe(t0 + 5.0 * day), t0 + 5.0 * day);
        assert_eq!(c.now(), Some(t0 + 5.0 * day));
        c.observe(t0);
        c.observe(t0 + 1.0);
        assert_eq!(c.now(), Some(t0 + 1.0));
        // Two consecutive wrong-day lines move it; the correct lines after them move it back.
        let mut c = LogClock::default();
        for t in [t0, t0 + 1.0, t0 + 5.0 * day, t0 + 5.0 * day + 1.0] {
            c.observe(t);
        }
        assert_eq!(c.now(), Some(t0 + 5.0 * day + 1.0));
        c.observe(t0 + 2.0);
        c.observe(t0 + 3.0);
        assert_eq!(c.now(), Some(t0 + 3.0));
        // A long-trusted clock is not rewound by two stray old lines.
        let mut c = LogClock::default();
        for i in 0..10 {
            c.observe(t0 + f64::from(i));
        }
        c.observe(t0 - 2.0 * day);
        c.observe(t0 - 2.0 * day + 1.0);
        assert_eq!(c.now(), Some(t0 + 9.0));
    }

    #[test]
    fn a_line_of_the_present_after_a_history_is_taken_at_once() {
        let t0 = 1780480800.0;
        let mut c = LogClock::default();
        c.observe(t0);
        c.observe(t0 + 1.0);
        let now = wall_clock();
        assert_eq!(c.observe(now), now);
        assert_eq!(c.now(), Some(now));
    }

    #[test]
    fn an_outlier_gets_the_clocks_time() {
        let t0 = 1780480800.0;
        let mut c = LogClock::default();
        c.observe(t0);
        c.observe(t0 + 1.0);
        assert_eq!(c.observe(t0 + 5.0 * 86_400.0), t0 + 1.0);
        assert_eq!(c.observe(t0 + 2.0), t0 + 2.0);
        // Within the jump: its own time.
        assert_eq!(c.observe(t0 + 1800.0), t0 + 1800.0);
    }
}
