//! [`Ingest`]: parses the lines of one source with its [`Pipeline`] and applies them to the
//! shared state (its `LineApplier`): a line's time, its writer's key, the per-source counters, the
//! log clock at the end of history. It is what every source hands its lines to
//! ([`crate::source::LineSink`]).

use super::framing::Message;
use super::{last_timed, nodes, order, parallel, plausible_time, Outcome, Pipeline, Timing};
use crate::clock::Clock;
use crate::parse::prefix::TimeResolver;
use crate::record::Record;
use crate::source::linebuf::Event;
use crate::source::{fault, file, writer, LineSink};
use crate::state::{lock, SelfMetric, Shared, SourceDelta};

/// Counters are handed to the state after this many lines (and at every pause), not per line.
const FLUSH_EVERY: u64 = 4096;

impl Pipeline {
    /// [`Pipeline::run`], then `ap` applies the outcome where it was made (an outcome is a few
    /// hundred bytes: not moving it is a few per cent of a line's cost). A panic in either is
    /// caught and applied as [`Outcome::Panicked`].
    fn run_into(&mut self, raw: &[u8], ap: &mut LineApplier) {
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let outcome = self.steps(raw, &mut ap.delta);
            ap.apply(&outcome);
        }));
        if done.is_err() {
            ap.apply(&Outcome::Panicked);
        }
    }

    /// [`Pipeline::run_into`] for a message a journal reader already took out of its entry
    /// (`text` without its `\n`, `writer` as [`writer::Fields::writer`] named it, `realtime` in
    /// Unix seconds): what the framer makes of a journal record, without the framer.
    fn message_into(
        &mut self,
        text: &[u8],
        writer: &writer::Writer,
        realtime: Option<f64>,
        ap: &mut LineApplier,
    ) {
        let done = std::panic::AssertUnwindSafe(|| {
            fault::check(fault::Stage::Parse, text);
            let line = Message::journal(text, writer, realtime);
            let outcome = self.steps.read(line, true, &mut ap.delta);
            ap.apply(&outcome);
        });
        if std::panic::catch_unwind(done).is_err() {
            ap.apply(&Outcome::Panicked);
        }
    }
}

/// The time of a parsed line: the wrapper's, else (live) its arrival or (history) its prefix
/// time, else the history's fallback; implausible times are not used. `now` is the wall clock:
/// read here for arrival times, else the caller's reading (a few milliseconds old at most
/// against the day of slack of [`plausible_time`]; one clock read per line was 3 % of `--once`).
fn line_time(
    times: &mut TimeResolver,
    timing: Timing,
    fallback: Option<f64>,
    rec: &Record<'_>,
    realtime: Option<f64>,
    now: &mut Option<f64>,
    wall: &Clock,
) -> Option<f64> {
    let now = match timing {
        Timing::Arrival => wall.now().wall,
        Timing::LogTime => *now.get_or_insert_with(|| wall.now().wall),
    };
    realtime
        .filter(|t| plausible_time(*t, now))
        .or_else(|| match timing {
            Timing::Arrival => Some(now),
            Timing::LogTime => rec
                .time
                .and_then(|t| times.resolve(t))
                .filter(|t| plausible_time(*t, now))
                .or(fallback),
        })
}

/// Parses lines of one source and applies them to the state.
#[derive(Debug)]
pub struct Ingest {
    pipeline: Pipeline,
    /// The writer of the last journal entry (see [`Ingest::message`]).
    writer: writer::Writer,
    /// Lines gathered for parsing on several threads (history only: see [`Ingest::parallel`]).
    batch: Option<parallel::Batch>,
    ap: LineApplier,
}

/// What applies parsed lines to the state: everything of an [`Ingest`] but its pipeline.
#[derive(Debug)]
struct LineApplier {
    state: Shared,
    source: String,
    server: String,
    times: TimeResolver,
    timing: Timing,
    /// The time of history lines that carry none, while catching up with a live file: its
    /// modification time (so a stale timeless log reads idle live, not busy forever).
    fallback_time: Option<f64>,
    delta: SourceDelta,
    /// Lines read so far (for messages: "line N").
    line_no: u64,
    /// [`Ingest::warn_behind`] warned.
    behind_warned: bool,
    /// The key of the last line's server (reused).
    key: crate::state::ServerKey,
    /// `key` is `server` with no engine.
    key_is_own: bool,
    null_warned: bool,
    panic_logged: bool,
    /// A line time ahead of the wall clock was warned about.
    ahead_warned: bool,
    /// The wall clock read for history lines, read again after each flush of the counters.
    now: Option<f64>,
    /// The nodes stream prefixes named.
    nodes: nodes::Nodes,
    /// The last timed lines no kind reads, for the log clock at the input's end.
    last_timed: last_timed::LastTimed,
    /// The source's log clock in the state ([`crate::state::State::clock_id`]).
    clock: usize,
    /// The program's clock ([`crate::state::State::clock`]): "now" for arrival times and the
    /// not-ahead rule.
    wall: Clock,
}

/// How far a line's time may be ahead of the wall clock (clocks of two hosts, a wall clock read
/// a moment ago) before it is taken as the time it was read.
const AHEAD_SLACK: f64 = 60.0;

impl Ingest {
    /// An ingest for source `source` whose lines belong to server `server` (unless a journald
    /// record names its unit).
    pub fn new(
        pipeline: Pipeline,
        state: Shared,
        source: &str,
        server: &str,
        times: TimeResolver,
    ) -> Ingest {
        // The source is listed in the self metrics at once; a server appears with its first
        // record (a journald stream names its own servers, so `stdin` may never be one).
        let (clock, wall) = {
            let mut st = lock(&state);
            st.add_source_counts(source, &SourceDelta::default());
            (st.clock_id(source), st.clock().clone())
        };
        Ingest {
            pipeline,
            writer: writer::Writer::default(),
            batch: None,
            ap: LineApplier {
                state,
                source: source.to_string(),
                // Bounded once here (a label value, see `crate::label`), so the key of its
                // lines is compared with it as the state keeps it.
                server: crate::label::bounded("server", server).into_owned(),
                times,
                timing: Timing::LogTime,
                fallback_time: None,
                delta: SourceDelta::default(),
                line_no: 0,
                behind_warned: false,
                key: crate::state::ServerKey::plain(server),
                key_is_own: true,
                null_warned: false,
                ahead_warned: false,
                panic_logged: false,
                now: None,
                nodes: nodes::Nodes::default(),
                last_timed: last_timed::LastTimed::default(),
                clock,
                wall,
            },
        }
    }

    /// Parses lines on several threads as `plan` says (see [`parallel::plan`]; one thread keeps
    /// it sequential), applying them in log order: for an input read to its end (`--once`). The
    /// state ends byte for byte as with one thread (see [`parallel`]). Not with the fault hook
    /// (its reader stage must stop at the line that holds its text).
    pub fn parallel(mut self, plan: parallel::Plan) -> Ingest {
        if plan.threads > 1 && !fault::enabled() {
            self.batch = parallel::Batch::new(&self.pipeline, plan);
        }
        self
    }

    /// Switches between log time and arrival time (see [`Timing`]).
    pub fn set_timing(&mut self, t: Timing) {
        self.drain();
        self.ap.timing = t;
    }

    /// Sets the time given to history lines without one (see [`LineApplier`]'s `fallback_time`).
    pub fn set_fallback_time(&mut self, t: Option<f64>) {
        self.drain();
        self.ap.fallback_time = t;
    }

    /// The source name.
    pub fn source(&self) -> &str {
        &self.ap.source
    }

    /// A reader of this input's start for its order, apart from this ingest's state (see
    /// [`order`]).
    pub fn sampler(&self) -> order::Sampler {
        order::Sampler::new(self.pipeline.sibling(), self.ap.times.clone())
    }

    /// The shared state.
    pub fn state(&self) -> &Shared {
        &self.ap.state
    }

    /// The end of what is read as history (an input's end, or the catch-up of a followed one):
    /// the times of the last lines no kind reads move the log clock (see [`last_timed`]), as
    /// the times of lines a kind reads did. Read as each such line would be: the wrapper's
    /// time, else SGLang's prefix in `--timezone`, else a stream prefix's; implausible ones
    /// are not used.
    fn settle_last_timed(&mut self) {
        self.drain();
        let LineApplier {
            last_timed,
            times,
            state,
            clock,
            wall,
            ..
        } = &mut self.ap;
        if last_timed.is_empty() {
            return;
        }
        let parser = self.pipeline.parser();
        let now = wall.now().wall;
        let mut found = Vec::with_capacity(2);
        last_timed.take(|l| {
            let t = l.realtime.filter(|t| plausible_time(*t, now)).or_else(|| {
                parser
                    .prefix_time(l.head)
                    .or(l.local)
                    .and_then(|t| times.resolve(t))
                    .filter(|t| plausible_time(*t, now))
            });
            // Never later than when it was read, as any line's (see `LineApplier::not_ahead`).
            found.extend(t.map(|t| if t > now + AHEAD_SLACK { now } else { t }));
        });
        lock(state).observe_times(*clock, &found);
    }

    /// This source has caught up with what existed at start (see [`crate::state::ready`]).
    pub fn caught_up(&mut self) {
        self.settle_last_timed();
        self.flush();
        let r = crate::state::lock(&self.ap.state).readiness().clone();
        r.caught_up(&self.ap.source);
    }

    /// The input ended, or was rotated or truncated: container records whose last piece never
    /// came are dropped and counted as incomplete, never joined with the next file's pieces.
    pub fn input_ended(&mut self) {
        self.settle_last_timed();
        self.warn_behind();
        let n = self.pipeline.drop_pending();
        if n > 0 {
            self.ap.delta.incomplete += n;
            tracing::warn!(source = %self.ap.source, "the input ended in the middle of a container log record (its last piece never came); that record was not read");
        }
    }

    /// Warns (once per source) when a history input ended with ranks whose last line is older
    /// than their latest: read in order (its start was), it went newest-first later (an export
    /// in order with a `logcli --direction backward` one appended, repro 37), and their values
    /// are an older line's while their time is the latest one's.
    fn warn_behind(&mut self) {
        if self.ap.timing != Timing::LogTime || self.ap.behind_warned {
            return;
        }
        self.flush();
        let Some((n, last, latest)) = lock(&self.ap.state).behind(&self.ap.server) else {
            return;
        };
        self.ap.behind_warned = true;
        let at = |t: f64| {
            jiff::Timestamp::from_second(t as i64).map_or(t.to_string(), |t| t.to_string())
        };
        tracing::warn!(
            source = %self.ap.source,
            ranks = n,
            "the input changes direction: read in order (its start is), its last lines are \
             older than its latest ({} against {}); the values shown for {n} rank(s) are an \
             older line's, not the latest line's (newest-first input appended to one in order?)",
            at(last),
            at(latest)
        );
    }

    /// Handles one event of a [`crate::source::linebuf::LineBuf`].
    pub fn event(&mut self, e: Event<'_>) {
        if let Event::Line(l, _) = e {
            return self.line(l);
        }
        self.drain();
        let d = &mut self.ap.delta;
        match e {
            Event::Line(..) => {}
            Event::Oversized => {
                d.lines += 1;
                d.oversized += 1;
                self.pipeline.oversized();
                tracing::warn!(source = %self.ap.source, "skipped a line longer than --max-line-bytes");
            }
            Event::Incomplete => {
                d.incomplete += 1;
                tracing::warn!(source = %self.ap.source, "the input ended in the middle of a line (no newline); that part was not read");
            }
            // Inside a binary value of a journal export entry, NULs are the value's bytes (a
            // length prefix's high bytes after a `\n` in its low ones), not a hole.
            Event::NulRun(n) => {
                if !self.pipeline.nuls(n) {
                    self.ap.delta.nul_runs += 1;
                }
            }
        }
    }

    /// Handles one raw line (without `\n`), which may be wrapped.
    pub fn line(&mut self, raw: &[u8]) {
        if let Some(b) = &mut self.batch {
            if b.gathers() {
                if b.push(raw) {
                    self.drain();
                }
                return;
            }
            b.direct(raw.len());
        }
        // Outside the per-line guard: lets a test make the whole reader fail (see `fault`).
        // Counted first, so the line the reader failed on is not read again.
        self.ap.delta.lines += 1;
        self.ap.line_no += 1;
        fault::check(fault::Stage::Reader, raw);
        self.pipeline.run_into(raw, &mut self.ap);
    }

    /// Handles one journal entry's `MESSAGE` (its `\n` at the end, if any, dropped here), as
    /// a journal reader took it out of its entry, written by whom `fields` say (see
    /// [`writer`]); `None` for an entry without one (counted as a record without message). One
    /// entry is one line read.
    pub fn message(&mut self, text: Option<&[u8]>, fields: &writer::Fields, realtime: Option<f64>) {
        self.drain();
        self.ap.delta.lines += 1;
        self.ap.line_no += 1;
        let Some(text) = text else {
            self.ap.delta.json_without_message += 1;
            return;
        };
        let text = text.strip_suffix(b"\n").unwrap_or(text);
        fault::check(fault::Stage::Reader, text);
        fields.writer(&mut self.writer);
        self.pipeline
            .message_into(text, &self.writer, realtime, &mut self.ap);
    }

    /// Counts a journal entry skipped whole as one line read: `oversized` (a value past
    /// `--max-line-bytes`) or broken (cut short, or not in the export format), with a warning.
    pub fn entry_skipped(&mut self, oversized: bool) {
        self.drain();
        let d = &mut self.ap.delta;
        d.lines += 1;
        if oversized {
            d.oversized += 1;
            tracing::warn!(source = %self.ap.source, "skipped a journal entry with a value longer than --max-line-bytes");
        } else {
            d.incomplete += 1;
            tracing::warn!(source = %self.ap.source, "skipped a journal entry that broke the export format");
        }
    }

    /// Parses and applies the lines the batch holds.
    fn drain(&mut self) {
        let Some(b) = self.batch.as_mut().filter(|b| !b.is_empty()) else {
            return;
        };
        let ap = &mut self.ap;
        let d = b.run(&mut self.pipeline, |o| {
            ap.delta.lines += 1;
            ap.line_no += 1;
            ap.apply(&o);
        });
        ap.delta.add(&d);
        ap.warn_null();
    }

    /// Counts bytes read from the source (every byte, also those of skipped oversized lines).
    pub fn count_bytes(&mut self, n: usize) {
        self.ap.delta.bytes += n as u64;
    }

    /// Counts a read error of this source (open, permission, a directory…).
    pub fn count_error(&mut self) {
        self.ap.delta.errors += 1;
        // Errors are rare and the source may now wait a long time: show them at once.
        self.flush();
    }

    /// Hands the batched counters to the state (after parsing the lines a parallel batch
    /// holds). Nothing to hand is no change: the state's generation stays, so followers that
    /// wake with nothing new (every poll of every followed file) do not make each scrape encode
    /// the exposition anew.
    pub fn flush(&mut self) {
        self.drain();
        self.ap.flush();
    }

    /// Sets `sglang_log_exporter_source_up` for this source.
    /// Up, it is readable again for readiness; down alone (closed after a rotation, a
    /// restart after a clean exit) is no fault of reading: [`Ingest::cannot_read`] is.
    pub fn set_up(&mut self, up: bool) {
        self.drain();
        let mut s = lock(&self.ap.state);
        s.set_self(
            SelfMetric::SourceUp,
            &self.ap.source,
            f64::from(u8::from(up)),
        );
        if up {
            s.readiness().readable(&self.ap.source);
        }
    }

    /// The source is down because it cannot be read, for `why`: readiness waits while an input
    /// named on the command line is ([`crate::state::ready`]).
    pub fn cannot_read(&mut self, why: &str) {
        self.set_up(false);
        lock(&self.ap.state)
            .readiness()
            .unreadable(&self.ap.source, why);
    }
}

impl LineApplier {
    /// A line's time is never later than when it was read: a time ahead of the wall clock (an
    /// SGLang container logging in another zone than `--timezone`) would keep its rank busy
    /// for hours. It is taken as the time of reading, and warned about once per source.
    fn not_ahead(&mut self, t: f64) -> f64 {
        if self.now.is_some_and(|now| t <= now + AHEAD_SLACK) {
            return t;
        }
        // The reading kept may be old (an idle follower): ahead of a fresh one only.
        let now = self.wall.now().wall;
        self.now = Some(now);
        if t <= now + AHEAD_SLACK {
            return t;
        }
        if !std::mem::replace(&mut self.ahead_warned, true) {
            tracing::warn!(
                source = %self.source,
                "line times are {:.1} h ahead of this host's clock: is --timezone the zone SGLang logs in? \
                 such times are taken as the time they were read (warned once)",
                (t - now) / 3600.0
            );
        }
        now
    }

    /// Applies what the pipeline made of a line (already counted in `lines`).
    fn apply(&mut self, outcome: &Outcome<'_>) {
        let line_no = self.line_no;
        let applied = match outcome {
            Outcome::Parsed {
                rec,
                unit,
                realtime,
                node,
                user,
            } => {
                let ts = line_time(
                    &mut self.times,
                    self.timing,
                    self.fallback_time,
                    rec,
                    *realtime,
                    &mut self.now,
                    &self.wall,
                )
                .map(|t| self.not_ahead(t));
                // The key is rebuilt only when the server or engine changes: no allocation
                // per line.
                // A line of the source's own server with no engine (most lines) needs no string
                // comparison when the key already is that.
                let server = unit.unwrap_or(&self.server);
                let host = node.unwrap_or("");
                let other_user = user.filter(|u| !lock(&self.state).first_user(server, host, u));
                let engine = self.nodes.engine_of(server, *node, other_user, rec);
                if !(self.key_is_own && unit.is_none() && engine.is_none()) {
                    let engine = engine.unwrap_or("");
                    // A name longer than a label value is set (bounded) again on each of its
                    // lines: only a garbled or hostile input pays that.
                    if self.key.server != server || self.key.engine != engine {
                        self.key.set(server, engine);
                    }
                    self.key_is_own = self.key.server == self.server && self.key.engine.is_empty();
                }
                self.delta.count_record(rec);
                if ts.is_some() {
                    self.last_timed.read_timed();
                }
                let (state, key, source, clock, d) = (
                    &self.state,
                    &self.key,
                    &self.source,
                    self.clock,
                    &self.delta,
                );
                // The counters travel with the values, under the same lock: a scrape that shows
                // a line's values also counts that line (and every line read before it).
                let apply = std::panic::AssertUnwindSafe(|| {
                    let mut st = lock(state);
                    st.add_source_counts(source, d);
                    st.apply_to(key, rec, ts, clock);
                    if rec.class == crate::parse::patterns::Class::ServerArgs {
                        // Another host's server is never polled from here (--sglang.from-logs).
                        st.set_args_host(key, node.filter(|n| !nodes::is_this_host(n)));
                    }
                });
                let applied = std::panic::catch_unwind(apply).is_ok();
                self.delta.reset();
                applied
            }
            Outcome::Unmatched {
                text,
                realtime,
                local,
            } => {
                // Live, a line's time is when it arrives: the wall clock judges idleness.
                if self.timing == Timing::LogTime {
                    self.last_timed.note(text, *realtime, *local);
                }
                true
            }
            Outcome::Skipped => true,
            Outcome::Panicked => false,
        };
        if !applied {
            self.panicked(line_no);
        }
        self.warn_null();
        if self.delta.lines >= FLUSH_EVERY {
            self.flush();
        }
    }

    fn warn_null(&mut self) {
        if self.delta.null_messages > 0 && !self.null_warned {
            self.null_warned = true;
            tracing::warn!(source = %self.source, "a journal entry's MESSAGE is null (over 4096 bytes): run journalctl with --all");
        }
    }

    /// Counts a line that hit a bug (caught panic); the first is logged with its position.
    fn panicked(&mut self, line_no: u64) {
        lock(&self.state).add_self(SelfMetric::SourcePanics, &self.source, 1.0);
        if !self.panic_logged {
            self.panic_logged = true;
            tracing::error!(source = %self.source, line = line_no, "reading this line hit a bug of the exporter (a panic); the line was skipped and reading goes on (further ones are counted in sglang_log_exporter_source_panics_total)");
        }
    }

    fn flush(&mut self) {
        self.now = None;
        if self.delta == SourceDelta::default() {
            return;
        }
        lock(&self.state).add_source_counts(&self.source, &self.delta);
        self.delta.reset();
    }
}

impl file::Sink for Ingest {
    fn event(&mut self, e: Event<'_>) {
        Ingest::event(self, e);
    }

    fn input_ended(&mut self) {
        Ingest::input_ended(self);
    }

    fn bytes(&mut self, n: usize) {
        self.count_bytes(n);
    }

    fn error(&mut self) {
        self.count_error();
    }

    fn up(&mut self, up: bool) {
        self.set_up(up);
    }

    fn unreadable(&mut self, why: &str) {
        self.cannot_read(why);
    }

    fn flush(&mut self) {
        Ingest::flush(self);
    }

    fn caught_up(&mut self) {
        Ingest::caught_up(self);
    }

    fn history(&mut self, done: bool, mtime: Option<f64>) {
        if done {
            self.set_timing(Timing::Arrival);
            self.set_fallback_time(None);
        } else {
            self.set_timing(Timing::LogTime);
            self.set_fallback_time(mtime);
        }
    }
}

impl LineSink for Ingest {
    fn source(&self) -> &str {
        Ingest::source(self)
    }

    fn state(&self) -> &Shared {
        Ingest::state(self)
    }

    fn message(&mut self, text: Option<&[u8]>, fields: &writer::Fields, realtime: Option<f64>) {
        Ingest::message(self, text, fields, realtime);
    }

    fn entry_skipped(&mut self, oversized: bool) {
        Ingest::entry_skipped(self, oversized);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::parse::patterns::Patterns;
    use crate::parse::Parser;
    use crate::state::{State, StateConfig};

    /// CI once saw a scrape show a stats line's value with `lines_read_total` one line short:
    /// the counters waited for the end of the read while the value was in the state already.
    #[test]
    fn a_parsed_lines_values_and_its_counts_reach_the_state_together() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let state = State::shared(pat.clone(), StateConfig::default());
        let mut ing = Ingest::new(
            Pipeline::new(Parser::new(pat), 1 << 20, None),
            state.clone(),
            "src",
            "decode",
            TimeResolver::new(jiff::tz::TimeZone::UTC, None),
        );
        ing.line(b"not sglang");
        ing.line(b"[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 7, #token: 10, token usage: 0.01, #queue-req: 0");
        // No flush: the read has not ended.
        let s = lock(&state);
        let src = &s.sources["src"];
        assert_eq!((src.lines, src.unmatched), (2, 1));
        let ranks = &s.servers().values().next().unwrap().ranks;
        assert_eq!(ranks.values().next().unwrap().decode_lines, 1);
    }
}
