//! The log's own clock, for reading finished inputs (`--once`, `backfill`): "now" is the time
//! of the input's last timed line, so `--once old.log` shows the state at the end of that log,
//! not "idle since June", and a log that went on quietly (access lines, or SGLang's other
//! output: `Cache flushed successfully!`, a scheduler's traceback) past `--idle-after` reads
//! idle at its end, as the same file followed live does.
//!
//! One rule for both: [`LogClock`] says which times agree with their neighbours. `--once`
//! applies each line at once with the time the clock gives it and mends a rank's time when the
//! next line proves the clock wrong (see `State::apply_to`); `backfill` cannot take back a
//! sample it wrote, so [`Lookahead`] holds a line the clock cannot judge yet until the line
//! after it tells.

use std::collections::VecDeque;

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

    /// The clock once two agreeing lines set it (`None` while its first line is provisional).
    fn settled_now(&self) -> Option<f64> {
        self.now
    }

    /// The clock is set and holds a line that disagreed with it (the line last observed),
    /// until the next line confirms or drops it.
    fn holds(&self) -> bool {
        self.now.is_some() && self.pending.is_some()
    }
}

/// Most inputs with a clock of their own; later ones share the first clock (a discovered pod
/// log churning for weeks must not grow this for ever).
pub const MAX_CLOCKS: usize = 4096;

/// One [`LogClock`] per input, with what the caller keeps beside it (`H`), found by the
/// input's source name: each finished input's times are judged by its own neighbours (a log
/// of 09:00 read after one of 12:00 is no outlier of the other's), and "now" at the end of all
/// of them is the latest clock.
#[derive(Debug)]
pub struct Clocks<H> {
    ids: std::collections::HashMap<String, usize>,
    clocks: Vec<(LogClock, H)>,
}

impl<H: Default> Default for Clocks<H> {
    fn default() -> Self {
        Clocks {
            ids: std::collections::HashMap::new(),
            clocks: vec![(LogClock::default(), H::default())],
        }
    }
}

impl<H: Default> Clocks<H> {
    /// The clock of source `source` (a new one for a new source; the shared first one past
    /// [`MAX_CLOCKS`]).
    pub fn id(&mut self, source: &str) -> usize {
        if let Some(&id) = self.ids.get(source) {
            return id;
        }
        if self.clocks.len() >= MAX_CLOCKS {
            return 0;
        }
        self.clocks.push(Default::default());
        let id = self.clocks.len() - 1;
        self.ids.insert(source.to_string(), id);
        id
    }

    /// The source of clock `id`, if one has it alone.
    pub fn name(&self, id: usize) -> Option<&str> {
        self.ids
            .iter()
            .find(|(_, &i)| i == id)
            .map(|(n, _)| n.as_str())
    }

    /// Clock `id` and what is kept beside it (the shared first one for an unknown id).
    pub fn get_mut(&mut self, id: usize) -> &mut (LogClock, H) {
        let id = if id < self.clocks.len() { id } else { 0 };
        &mut self.clocks[id]
    }

    /// The latest of the clocks, `None` before any timed line.
    pub fn now(&self) -> Option<f64> {
        self.clocks
            .iter()
            .filter_map(|(c, _)| c.now())
            .reduce(f64::max)
    }

    /// Clock `id`'s time.
    pub fn now_of(&self, id: usize) -> Option<f64> {
        self.clocks.get(id).and_then(|(c, _)| c.now())
    }
}

/// What [`Lookahead::observe`] says of a line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Its time agrees with the clock: use it now, at this time.
    Place(f64),
    /// The clock cannot tell yet (its first lines, or a line far from the clock): hand the line
    /// to [`Lookahead::hold`]; it is placed when a later line tells.
    Hold,
}

/// A line held by [`Lookahead`].
#[derive(Debug)]
struct Held<T> {
    item: T,
    own: f64,
    /// What the clock gave it when observed: its own time on a provisional clock, else the
    /// clock's time (what an outlier is placed at).
    given: f64,
    provisional: bool,
}

/// Most lines held while the clock has not been set by two agreeing lines (an input whose
/// lines are each more than [`JUMP`] apart): past this the oldest is placed at its own time,
/// as `--once` uses it (no neighbour says otherwise).
const MAX_HELD: usize = 64;

/// [`LogClock`] with one line of look-ahead, for `backfill`, which writes a sample at each
/// line's time and cannot take it back: a line the clock cannot judge when it comes (a first
/// line, or one more than [`JUMP`] from the clock) is held until the next timed line tells
/// whether its time agrees with its neighbours. Then, in log order:
/// - a held line within `JUMP` of the clock is placed at its own time (a log resumed after a
///   quiet night: the second line of the morning confirms the first), and so is one of the
///   input's first lines (held before two agreeing lines set the clock) that lies before it;
/// - any other is an outlier: placed at the clock's time when it came (its values count, no
///   sample is written at its own time), or with no time when the clock had none (a first
///   line a day ahead: its values are applied, no sample is written for it).
///
/// Lines that agree with the clock are placed at once, at their own time. Items are whatever
/// the caller needs to apply a line later; it makes one only for a held line.
#[derive(Debug)]
pub struct Lookahead<T> {
    clock: LogClock,
    held: VecDeque<Held<T>>,
    /// The held line just observed: its own time, the clock's answer, whether provisional.
    hold_next: Option<(f64, f64, bool)>,
    /// The time of the latest line placed with a time (the clock's time for a provisional
    /// outlier).
    last: Option<f64>,
}

impl<T> Default for Lookahead<T> {
    fn default() -> Self {
        Lookahead {
            clock: LogClock::default(),
            held: VecDeque::new(),
            hold_next: None,
            last: None,
        }
    }
}

impl<T> Lookahead<T> {
    /// Observes a timed line's own time (Unix seconds). Lines held before it that this time
    /// tells about are appended to `placed` (in log order, with the time to apply them at;
    /// `None`: no time), to be applied before this line; the verdict says what to do with this
    /// one.
    pub fn observe(&mut self, own: f64, placed: &mut Vec<(T, Option<f64>)>) -> Verdict {
        let provisional = self.clock.settled_now().is_none();
        let given = self.clock.observe(own);
        self.clock.take_settled();
        self.resolve(placed);
        if self.clock.settled_now().is_none() || self.clock.holds() {
            self.hold_next = Some((own, given, provisional));
            return Verdict::Hold;
        }
        self.last = Some(self.last.map_or(given, |l| l.max(given)));
        Verdict::Place(given)
    }

    /// Holds the line [`Lookahead::observe`] just answered [`Verdict::Hold`] for. On a clock
    /// that has held [`MAX_HELD`] lines without being set, the oldest is appended to `placed`
    /// at its own time.
    pub fn hold(&mut self, item: T, placed: &mut Vec<(T, Option<f64>)>) {
        let Some((own, given, provisional)) = self.hold_next.take() else {
            return;
        };
        self.held.push_back(Held {
            item,
            own,
            given,
            provisional,
        });
        if self.held.len() > MAX_HELD {
            if let Some(h) = self.held.pop_front() {
                self.place(h.item, Some(h.own), placed);
            }
        }
    }

    /// Observes the time of a line that is not placed (a line no kind reads, at the end of an
    /// input): it moves the clock, and confirms or drops a held line, as any timed line does.
    pub fn note(&mut self, t: f64, placed: &mut Vec<(T, Option<f64>)>) {
        self.clock.observe(t);
        self.clock.take_settled();
        self.resolve(placed);
    }

    /// The end of the input: every held line is placed (see [`Lookahead`]); on a clock never
    /// set by two agreeing lines, each at its own time (no neighbour says otherwise).
    pub fn finish(&mut self, placed: &mut Vec<(T, Option<f64>)>) {
        self.hold_next = None;
        if self.clock.settled_now().is_some() {
            // A line held at the end was never confirmed: what `--once` gives it.
            self.resolve_all(placed);
        }
        while let Some(h) = self.held.pop_front() {
            self.place(h.item, Some(h.own), placed);
        }
    }

    /// The clock (see [`LogClock::now`]).
    pub fn now(&self) -> Option<f64> {
        self.clock.now()
    }

    /// Once the clock is set, places the lines held before the last one observed (which is
    /// itself held again when the clock holds it).
    fn resolve(&mut self, placed: &mut Vec<(T, Option<f64>)>) {
        if self.clock.settled_now().is_some() {
            self.resolve_all(placed);
        }
    }

    fn resolve_all(&mut self, placed: &mut Vec<(T, Option<f64>)>) {
        let Some(now) = self.clock.settled_now() else {
            return;
        };
        while let Some(h) = self.held.pop_front() {
            // A line of the clock's first ones is judged as `--once` mends it
            // (`State::clamp_outlier_times`): only one ahead of the clock is an outlier (it
            // would write a sample, and keep its rank busy, on a later day); one before it
            // is the log's start before a quiet spell, nothing before it to disagree with.
            let agrees = match h.provisional {
                true => h.own <= now + JUMP,
                false => (h.own - now).abs() <= JUMP,
            };
            let at = if agrees {
                Some(h.own)
            } else if h.provisional {
                self.last
            } else {
                Some(h.given)
            };
            self.place(h.item, at, placed);
        }
    }

    fn place(&mut self, item: T, at: Option<f64>, placed: &mut Vec<(T, Option<f64>)>) {
        if let Some(t) = at {
            self.last = Some(self.last.map_or(t, |l| l.max(t)));
        }
        placed.push((item, at));
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

    /// Feeds `times` (item `i` is line `i`) to a [`Lookahead`], then ends the input; returns
    /// every line's placement in the order they were placed.
    fn placed(times: &[f64], notes_at_end: &[f64]) -> (Vec<(usize, Option<f64>)>, Option<f64>) {
        let mut l = Lookahead::default();
        let mut out = Vec::new();
        let mut placed = Vec::new();
        for (i, &t) in times.iter().enumerate() {
            let v = l.observe(t, &mut placed);
            out.append(&mut placed);
            match v {
                Verdict::Place(at) => out.push((i, Some(at))),
                Verdict::Hold => {
                    l.hold(i, &mut placed);
                    out.append(&mut placed);
                }
            }
        }
        for &t in notes_at_end {
            l.note(t, &mut placed);
            out.append(&mut placed);
        }
        l.finish(&mut placed);
        out.append(&mut placed);
        (out, l.now())
    }

    #[test]
    fn lookahead_places_an_outlier_at_the_clocks_time_never_its_own() {
        let t0 = 1780480800.0;
        let day = 86_400.0;
        // tests/data/clock/future-stats-mid-busy.log: the second line a day ahead, among the
        // first lines (before the clock is set): placed at the time of the line before it.
        let (p, now) = placed(&[t0, t0 + day + 5.0, t0 + 10.0, t0 + 15.0], &[]);
        assert_eq!(
            p,
            [
                (0, Some(t0)),
                (1, Some(t0)),
                (2, Some(t0 + 10.0)),
                (3, Some(t0 + 15.0))
            ]
        );
        assert_eq!(now, Some(t0 + 15.0));
        // Once the clock is set: the clock's time when it came.
        let (p, _) = placed(&[t0, t0 + 1.0, t0 + day, t0 + 2.0], &[]);
        assert_eq!(
            p,
            [
                (0, Some(t0)),
                (1, Some(t0 + 1.0)),
                (2, Some(t0 + 1.0)),
                (3, Some(t0 + 2.0))
            ]
        );
        // The last line (nothing after it confirms it).
        let (p, now) = placed(&[t0, t0 + 1.0, t0 + day], &[]);
        assert_eq!(p[2], (2, Some(t0 + 1.0)));
        assert_eq!(now, Some(t0 + 1.0));
        // The first line a day ahead: no clock time before it, no time at all.
        let (p, _) = placed(&[t0 + 5.0 * day, t0, t0 + 1.0], &[]);
        assert_eq!(p, [(0, None), (1, Some(t0)), (2, Some(t0 + 1.0))]);
    }

    #[test]
    fn lookahead_places_a_confirmed_jump_at_its_own_time() {
        let t0 = 1780480800.0;
        let morning = t0 + 10.0 * 3600.0;
        let (p, _) = placed(&[t0, t0 + 1.0, morning, morning + 1.0], &[]);
        assert_eq!(
            p,
            [
                (0, Some(t0)),
                (1, Some(t0 + 1.0)),
                (2, Some(morning)),
                (3, Some(morning + 1.0))
            ]
        );
        // A first line before a quiet spell keeps its time (as `--once` keeps it).
        let (p, _) = placed(&[t0, t0 + 7200.0, t0 + 7205.0], &[]);
        assert_eq!(
            p,
            [
                (0, Some(t0)),
                (1, Some(t0 + 7200.0)),
                (2, Some(t0 + 7205.0))
            ]
        );
        // A line no kind reads at the end confirms the last one.
        let (p, now) = placed(&[t0, t0 + 1.0, morning], &[morning + 5.0]);
        assert_eq!(p[2], (2, Some(morning)));
        assert_eq!(now, Some(morning + 5.0));
        // An input whose lines never agree: each at its own time.
        let (p, _) = placed(&[t0, t0 + 7200.0], &[]);
        assert_eq!(p, [(0, Some(t0)), (1, Some(t0 + 7200.0))]);
    }

    #[test]
    fn lookahead_moves_the_clock_with_lines_no_kind_reads() {
        let t0 = 1780480800.0;
        // tests/data/clock/quiet-other-lines.log: the end is the last timed line.
        let (_, now) = placed(&[t0, t0 + 10.0], &[t0 + 80.0, t0 + 140.0]);
        assert_eq!(now, Some(t0 + 140.0));
        // A lone one a day ahead does not move it.
        let (_, now) = placed(&[t0, t0 + 10.0], &[t0 + 80.0, t0 + 86_400.0]);
        assert_eq!(now, Some(t0 + 80.0));
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
