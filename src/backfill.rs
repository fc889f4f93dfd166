//! `backfill`: reads finished logs and writes every stats sample with its own timestamp as
//! OpenMetrics text (see [`crate::export::openmetrics`]), for
//! `promtool tsdb create-blocks-from openmetrics`.
//!
//! Each line goes through the same framer, parser and [`State`] as the live exporter, so values
//! (derived ratios, counters summed over time) are what a scrape at that moment would have shown.
//! After each stats or retraction line the series of that line's rank are sampled at the line's
//! time: journald's realtime timestamp when present, else the SGLang prefix time in `--timezone`.
//!
//! After each counted request record (`--log-requests` Finish record) the request families of
//! its server (counters and histograms, [`view::request_families`]) are sampled at the record's
//! time: its prefix time, else the JSON record's own `timestamp`.
//!
//! The idle policy applies as live (`--idle-after`): when a rank's next stats line, or the end of
//! the input (the latest time read), comes more than idle-after after its previous one, its
//! activity gauges are written as 0 and `sglang_idle` as 1 at previous + idle-after, and
//! `sglang_idle` reads 0 again with the next stats line. Without these samples Prometheus would
//! carry the last busy values across the gap (5 minutes of lookback). The end of an input is its
//! last timed line, also one no kind reads (see [`crate::pipeline::last_timed`]). A rank the
//! state removes (a restart; at the end, an engine silent for an hour, as `--once` removes it)
//! gets its idle sample too, at the removal when that comes first (`write_dropped`).
//!
//! Times follow the log clock's rule ([`crate::state::clock`]), as `--once`'s do, with one line
//! of look-ahead ([`Lookahead`]): each input has its own clock, a line whose time the clock
//! cannot judge yet (a first line, one more than an hour from the clock) waits for the next
//! timed line, and an outlier (a wrong day that no neighbour confirms) is applied at the
//! clock's time: no sample is ever written at an outlier's time, and it makes no rank idle.

use std::io::{IsTerminal, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use crate::app::{load_patterns, parse_inputs, timezone, ConfigError, Input};
use crate::cli::BackfillArgs;
use crate::export::openmetrics::{render_labels, OpenMetrics};
use crate::family::{Family, Labels};
use crate::parse::patterns::Class;
use crate::parse::prefix::TimeResolver;
use crate::parse::Parser;
use crate::pipeline::last_timed::LastTimed;
use crate::pipeline::nodes::Nodes;
use crate::pipeline::{parallel, plausible_time, Outcome, Pipeline};
use crate::record::{LogTime, OwnedRecord, Ranks, Record};
use crate::source::linebuf::{Event, LineBuf};
use crate::state::clock::{Lookahead, Verdict};
use crate::state::{
    EngineType, RankState, ServerKey, ServerState, SourceDelta, State, StateConfig,
};
use crate::view;

/// Samples newer than this (seconds) may overlap Prometheus' head block and are unsafe to
/// backfill.
const RECENT: f64 = 3.0 * 3600.0;

/// Least gap between a stats sample and the idle sample after it (`--idle-after 0`): the output
/// keeps milliseconds, and of two samples at one time only the last would be kept.
const MIN_IDLE_GAP: f64 = 0.001;

/// What a backfill run saw.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Lines read.
    pub lines: u64,
    /// Samples written.
    pub samples: u64,
    /// Samples newer than 3 hours.
    pub recent: u64,
    /// Stats lines skipped because their prefix has a time but no date, and no `--date` was
    /// given.
    pub dateless: u64,
    /// Stats lines skipped because they carry no time at all (no SGLang prefix time, no
    /// wrapper time: SGLang before v0.2.14, or a wrapper that dropped the prefix).
    pub timeless: u64,
    /// Stats lines skipped because their time is implausible (in the future, or before 2023).
    pub implausible: u64,
    /// Lines whose reading hit a bug (caught panics), skipped.
    pub panics: u64,
    /// Counted request records (`--log-requests` Finish records) skipped because they carry no
    /// usable time: none (text records of v0.5.8-v0.5.11 have no prefix), a time without a date
    /// and no `--date`, or an implausible one.
    pub untimed_requests: u64,
}

/// Runs the subcommand; exit status 0, 1 when writing failed, 2 for a bad argument or input.
pub fn run(a: &BackfillArgs) -> ExitCode {
    match backfill(a) {
        Ok(s) => {
            for (n, what) in [
                (s.dateless, "have a time but no date in their prefix (SGLang v0.2.14-v0.3.3); give --date YYYY-MM-DD to place them"),
                (s.timeless, "carry no time at all (no SGLang prefix time, no wrapper time); backfill cannot place them in time (--once shows their last values)"),
                (s.implausible, "have an implausible time (more than a day ahead, or before 2023: a corrupt prefix)"),
                (s.panics, "hit a bug of the exporter while being read (a panic)"),
            ] {
                if n > 0 {
                    eprintln!("warning: {n} stats lines were skipped: they {what}");
                }
            }
            if s.untimed_requests > 0 {
                eprintln!(
                    "warning: {} request records were skipped: they carry no usable time (no prefix and no JSON timestamp, as SGLang v0.5.8-v0.5.11 text records; a time without a date and no --date; or an implausible time)",
                    s.untimed_requests
                );
            }
            if s.recent > 0 {
                eprintln!(
                    "warning: {} samples are newer than 3 hours; Prometheus may refuse them or they may overlap its head block",
                    s.recent
                );
            }
            if s.samples == 0 {
                eprintln!("warning: no stats samples found");
            }
            eprintln!("wrote {} samples from {} lines", s.samples, s.lines);
            ExitCode::SUCCESS
        }
        Err(BackfillError::Config(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(BackfillError::Write(e)) => {
            eprintln!("error: writing {} failed: {e}", a.output.display());
            ExitCode::FAILURE
        }
    }
}

/// Why a backfill failed.
#[derive(Debug, thiserror::Error)]
pub enum BackfillError {
    /// A bad argument or an unreadable input.
    #[error("{0}")]
    Config(#[from] ConfigError),
    /// The output could not be written.
    #[error("{0}")]
    Write(#[from] std::io::Error),
}

/// Reads the inputs and writes the OpenMetrics file.
///
/// # Errors
/// A [`BackfillError`].
pub fn backfill(a: &BackfillArgs) -> Result<Summary, BackfillError> {
    let patterns = load_patterns(a.read.patterns.as_deref())?;
    let tz = timezone(a.read.timezone.as_deref())?;
    let inputs: Vec<(String, Option<std::path::PathBuf>)> = parse_inputs(&a.inputs, true)?
        .into_iter()
        .map(|i| match i {
            Input::File { server, path } => (server, Some(path)),
            Input::Stdin { server } => (server, None),
        })
        .collect();
    let idle_after = a.read.idle_after.as_secs_f64();
    let cfg = StateConfig {
        idle_after,
        ..StateConfig::default()
    };
    let mut state = State::new(patterns.clone(), cfg);
    // A rank the state removes (a restart) gets its idle sample (see `write_dropped`).
    state.keep_dropped();
    let mut pipeline = Pipeline::new(
        Parser::new(patterns.clone()),
        a.read.max_line_bytes,
        a.read.json_message_key.as_deref(),
    );
    let mut om = OpenMetrics::new();
    let mut sum = Summary::default();
    check_labels(&a.labels)?;
    let extra: Labels = a
        .labels
        .iter()
        .map(|(k, v)| (&*k.clone().leak(), v.clone()))
        .collect();
    let catalog = view::rank_catalog(&patterns);
    let bar = progress_bar(&inputs);
    let now = state.clock().now().wall;
    let mut idle_written = IdleWritten::new();
    // The latest time of all inputs: their end, when every rank is judged.
    let mut end: Option<f64> = None;
    for (server, path) in &inputs {
        let mut times = TimeResolver::new(tz.clone(), a.read.date);
        let mut reader = open_input(path.as_deref())?;
        let source = path
            .as_ref()
            .map_or("-".to_string(), |p| p.display().to_string());
        let clock = state.clock_id(&source);
        let mut ctx = Ctx {
            clock,
            state: &mut state,
            times: &mut times,
            out: Out {
                om: &mut om,
                catalog: &catalog,
                extra: &extra,
                buf: Vec::new(),
                engine_type: None,
            },
            sum: &mut sum,
            server,
            source: &source,
            date_given: a.read.date.is_some(),
            idle_after,
            now,
            key: ServerKey::plain(server),
            idle_written: &mut idle_written,
            nodes: Default::default(),
            look: Lookahead::default(),
            placed: Vec::new(),
            last_timed: LastTimed::default(),
        };
        let read = &a.read;
        feed(
            &mut ctx,
            &mut pipeline,
            &mut *reader,
            path.as_deref(),
            &bar,
            read.max_line_bytes,
            read.threads,
        )?;
        ctx.input_ended(&pipeline);
        if let Some(t) = ctx.look.now() {
            end = Some(end.map_or(t, |e| e.max(t)));
        }
    }
    bar.finish_and_clear();
    let mut out = Out {
        om: &mut om,
        catalog: &catalog,
        extra: &extra,
        buf: Vec::new(),
        engine_type: None,
    };
    // The end as `--once` renders it: engines silent for an hour are removed first.
    if let Some(end) = end {
        state.expire(end);
        write_dropped(&mut state, &mut out, &mut idle_written, idle_after);
    }
    idle_at_end(&state, &mut out, end, idle_after, &idle_written);
    sum.recent = om.count_after(now - RECENT);
    sum.samples = write_output(&a.output, &mut om)?;
    Ok(sum)
}

/// Refuses `--label`s that would give a series a label twice: one of our own label names, or a
/// name given twice (OpenMetrics, and so promtool, refuses such a sample).
fn check_labels(labels: &[(String, String)]) -> Result<(), ConfigError> {
    for (i, (k, _)) in labels.iter().enumerate() {
        if crate::family::is_exported_label(k) {
            return Err(ConfigError(format!(
                "--label {k}: the series carry a label {k:?} already"
            )));
        }
        if labels[..i].iter().any(|(p, _)| p == k) {
            return Err(ConfigError(format!("--label {k}: given twice")));
        }
    }
    Ok(())
}

/// Reads every line of one input into `ctx`: parsed on `threads` threads (0: every core) in
/// batches, applied in log order (see [`parallel`]), or one by one.
fn feed(
    ctx: &mut Ctx<'_>,
    pipeline: &mut Pipeline,
    reader: &mut dyn Read,
    path: Option<&Path>,
    bar: &ProgressBar,
    max_line: usize,
    threads: usize,
) -> Result<(), BackfillError> {
    let plan = parallel::plan(
        threads,
        path.and_then(|p| std::fs::metadata(p).ok())
            .map(|m| m.len()),
    );
    let mut batch = (plan.threads > 1)
        .then(|| parallel::Batch::new(pipeline, plan))
        .flatten();
    read_lines(reader, max_line, bar, path, |l| {
        if let Some(b) = batch.as_mut() {
            if b.gathers() {
                if b.push(l) {
                    b.run(pipeline, |o| ctx.apply(o));
                }
                return;
            }
            b.direct(l.len());
        }
        ctx.apply(pipeline.run(l, &mut SourceDelta::default()));
    })?;
    if let Some(b) = &mut batch {
        b.run(pipeline, |o| ctx.apply(o));
    }
    Ok(())
}

/// An input file, or stdin for `None`.
fn open_input(path: Option<&Path>) -> Result<Box<dyn Read>, BackfillError> {
    Ok(match path {
        Some(p) => Box::new(
            std::fs::File::open(p)
                .map_err(|e| ConfigError(format!("cannot read {}: {e}", p.display())))?,
        ),
        None => Box::new(std::io::stdin()),
    })
}

/// Writes the OpenMetrics file to `output` (`-`: stdout); returns the samples written.
fn write_output(output: &Path, om: &mut OpenMetrics) -> Result<u64, BackfillError> {
    let mut w: Box<dyn Write> = if output.as_os_str() == "-" {
        Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
    } else {
        Box::new(std::io::BufWriter::new(std::fs::File::create(output)?))
    };
    let n = om.write(&mut w)?;
    w.flush()?;
    Ok(n)
}

fn progress_bar(inputs: &[(String, Option<std::path::PathBuf>)]) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let total: u64 = inputs
        .iter()
        .filter_map(|(_, p)| p.as_ref().and_then(|p| std::fs::metadata(p).ok()))
        .map(|m| m.len())
        .sum();
    let b = ProgressBar::new(total);
    b.set_style(
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b
}

fn read_lines(
    r: &mut dyn Read,
    max_line: usize,
    bar: &ProgressBar,
    path: Option<&Path>,
    mut f: impl FnMut(&[u8]),
) -> Result<(), BackfillError> {
    let mut lb = LineBuf::new(max_line);
    let mut r = bar.wrap_read(r);
    loop {
        match lb.fill(&mut r, |e| {
            if let Event::Line(l, _) = e {
                f(l)
            }
        }) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                let name = path.map_or("-".to_string(), |p| p.display().to_string());
                return Err(ConfigError(format!("reading {name} failed: {e}")).into());
            }
        }
    }
    Ok(())
}

/// Where samples go: the OpenMetrics collection, with the per-rank catalog and the extra labels.
struct Out<'a> {
    om: &'a mut OpenMetrics,
    catalog: &'a [Family],
    extra: &'a Labels,
    buf: Vec<(usize, f64)>,
    /// The `engine_type` the samples written now carry instead of the state's: the one a rank
    /// had when it went idle, written after a stats line changed it ([`Ctx::engine_changed`]).
    engine_type: Option<EngineType>,
}

impl Out<'_> {
    /// Writes every series of one rank as a scrape at `at` would show it
    /// ([`view::rank_samples`]).
    fn rank(&mut self, state: &State, key: &ServerKey, ranks: &Ranks, at: f64) {
        self.rank_as_of(state, key, ranks, at, at);
    }

    /// Writes the series of one rank at `at` as they read when turning idle: the idle policy
    /// needs strictly more than `--idle-after` to have passed, so they are judged a moment
    /// after `at` (the sample keeps the moment the rank turned idle).
    fn idle(&mut self, state: &State, key: &ServerKey, ranks: &Ranks, last: f64, idle_after: f64) {
        let at = last + idle_after.max(MIN_IDLE_GAP);
        self.rank_as_of(state, key, ranks, at, at + MIN_IDLE_GAP);
    }

    /// Writes every request series of one server as a scrape at `at` would show it
    /// ([`view::request_families`]).
    fn requests(&mut self, state: &State, key: &ServerKey, at: f64) {
        let Some((srv, stats)) = state
            .servers()
            .get(key)
            .and_then(|s| s.requests.as_ref().map(|r| (s, r)))
        else {
            return;
        };
        let mut base = self.extra.clone();
        base.extend(view::server_labels(key, srv));
        let mut fams = crate::state::requests::request_catalog();
        stats.families_into(&base, &mut fams);
        for f in fams {
            for (labels, v) in &f.samples {
                self.om.add(&f.name, &f.help, f.kind, labels, at, *v);
            }
            for (labels, h) in f.histograms {
                self.om
                    .add_histogram(&f.name, &f.help, &render_labels(&labels), at, h);
            }
        }
    }

    fn rank_as_of(&mut self, state: &State, key: &ServerKey, ranks: &Ranks, at: f64, judged: f64) {
        let Some(srv) = state.servers().get(key) else {
            return;
        };
        let Some(rank) = srv.ranks.get(ranks) else {
            return;
        };
        self.rank_of(state, (key, srv), (ranks, rank), at, judged);
    }

    /// Writes every series of `rank` of server `srv` at `at` as a scrape at `judged` would show
    /// them (the server need not be in the state any more, see [`write_dropped`]).
    fn rank_of(
        &mut self,
        state: &State,
        (key, srv): (&ServerKey, &ServerState),
        (ranks, rank): (&Ranks, &RankState),
        at: f64,
        judged: f64,
    ) {
        let mut labels = self.extra.clone();
        labels.extend(view::rank_labels(key, srv, ranks));
        if let Some(e) = self.engine_type {
            for (_, v) in labels.iter_mut().filter(|(k, _)| *k == "engine_type") {
                *v = e.as_str().to_string();
            }
        }
        let labels = render_labels(&labels);
        view::rank_samples(state, srv, rank, judged, &mut self.buf);
        for &(i, v) in &self.buf {
            let f = &self.catalog[i];
            self.om
                .add_rendered(&f.name, &f.help, f.kind, &labels, at, v);
        }
    }
}

struct Ctx<'a> {
    state: &'a mut State,
    times: &'a mut TimeResolver,
    out: Out<'a>,
    sum: &'a mut Summary,
    server: &'a str,
    source: &'a str,
    /// The state's clock id of `source` (it only names the source: see
    /// [`State::apply_placed`]).
    clock: usize,
    date_given: bool,
    /// `--idle-after` in seconds.
    idle_after: f64,
    /// The wall clock at the start: no sample may lie beyond it (plus a day).
    now: f64,
    /// The key of the line's server, reused from line to line.
    key: ServerKey,
    /// The idle samples written so far.
    idle_written: &'a mut IdleWritten,
    /// The nodes stream prefixes named (one server's hosts, or servers apart).
    nodes: Nodes,
    /// This input's log clock, with the lines it holds until the next one tells.
    look: Lookahead<Deferred>,
    /// Lines the clock placed, to apply (reused).
    placed: Vec<(Deferred, Option<f64>)>,
    /// The last timed lines no kind reads, for the input's end.
    last_timed: LastTimed,
}

/// A line held until the log clock can place it.
#[derive(Debug)]
struct Deferred {
    rec: OwnedRecord,
    key: ServerKey,
}

/// Per rank, the last stats time whose idle sample (at that time + `--idle-after`) is written,
/// so it is written once whichever line finds the rank idle first.
type IdleWritten = std::collections::HashMap<(ServerKey, Ranks), f64>;

/// The end of the inputs (`end`: their latest time): every rank whose last stats line is more
/// than `idle_after` before it gets its idle sample.
fn idle_at_end(
    state: &State,
    out: &mut Out<'_>,
    end: Option<f64>,
    idle_after: f64,
    written: &IdleWritten,
) {
    let Some(end) = end else {
        return;
    };
    for (key, srv) in state.servers() {
        for (ranks, rank) in &srv.ranks {
            let done = written.get(&(key.clone(), *ranks)).copied();
            if let Some(last) = rank
                .last_stats
                .filter(|&l| end - l > idle_after && done != Some(l))
            {
                out.idle(state, key, ranks, last, idle_after);
            }
        }
    }
}

/// Writes the idle sample of each rank the state removed since the last call (a restart's
/// `server_args` line; at the end, an engine silent for an hour, as `--once` removes it) whose
/// last sample is still busy (a stats line with no idle sample after it): at its last stats
/// time + `idle_after` as the idle policy places it, or at the removal when that comes first.
/// OpenMetrics text has no staleness marker, so without it Prometheus' lookback would carry
/// the busy values 5 minutes past the last stats line; from the idle sample on it reads the
/// rank idle (0 running, `sglang_idle` 1) until its series ends, or the new process's rank of
/// the same labels writes its own.
fn write_dropped(state: &mut State, out: &mut Out<'_>, written: &mut IdleWritten, idle_after: f64) {
    for d in state.take_dropped() {
        for (ranks, rank) in &d.server.ranks {
            let Some(last) = rank.last_stats else {
                continue;
            };
            if written.insert((d.key.clone(), *ranks), last) == Some(last) {
                continue;
            }
            let idle_at = last + idle_after.max(MIN_IDLE_GAP);
            let at = match d.at {
                Some(t) if t < idle_at => t.max(last + MIN_IDLE_GAP),
                _ => idle_at,
            };
            out.rank_of(
                state,
                (&d.key, &d.server),
                (ranks, rank),
                at,
                idle_at + MIN_IDLE_GAP,
            );
        }
    }
}

/// Writes the idle sample of rank `ranks` when its last stats line is more than `idle_after`
/// before `ts` and that sample is not written yet: before any later sample of the rank, so its
/// series stays in time order.
fn idle_before(
    state: &State,
    key: &ServerKey,
    out: &mut Out<'_>,
    written: &mut IdleWritten,
    ranks: &Ranks,
    ts: f64,
    idle_after: f64,
) {
    let last = state
        .servers()
        .get(key)
        .and_then(|s| s.ranks.get(ranks))
        .and_then(|r| r.last_stats);
    if let Some(last) = last.filter(|&l| ts - l > idle_after) {
        if written.insert((key.clone(), *ranks), last) != Some(last) {
            out.idle(state, key, ranks, last, idle_after);
        }
    }
}

/// The time of a line: journald's, else its prefix's; `None` (counted in `sum`) for a stats
/// line or counted request record (`counts`: whether it is either) that has none, a date-less
/// one without `--date`, or an implausible one.
fn place(
    times: &mut TimeResolver,
    sum: &mut Summary,
    date_given: bool,
    now: f64,
    realtime: Option<f64>,
    time: Option<LogTime>,
    (stats, request): (bool, bool),
) -> Option<f64> {
    let ts = match (realtime, time) {
        (Some(t), _) => Some(t),
        // A time without a date would be placed on today: refused without --date.
        (None, Some(t)) if t.date.is_none() && !date_given => {
            sum.dateless += u64::from(stats);
            sum.untimed_requests += u64::from(request);
            return None;
        }
        (None, Some(t)) => times.resolve(t),
        (None, None) => {
            sum.timeless += u64::from(stats);
            sum.untimed_requests += u64::from(request);
            return None;
        }
    };
    let ts = ts.filter(|t| plausible_time(*t, now));
    if ts.is_none() {
        sum.implausible += u64::from(stats);
        sum.untimed_requests += u64::from(request);
    }
    ts
}

impl Ctx<'_> {
    /// A startup fact changes what a scrape shows: on the line's rank, and for a server-scope
    /// one (the capacity line, printed by rank 0) on every rank. So every rank of the server
    /// gets a sample at `ts`, those with no stats line yet included (a scrape shows them;
    /// without this a rank that only printed facts had no series at all).
    fn fact_samples(&mut self, key: &ServerKey, ts: f64) {
        let all: Vec<Ranks> = self
            .state
            .servers()
            .get(key)
            .map(|s| s.ranks.keys().copied().collect())
            .unwrap_or_default();
        for r in all {
            idle_before(
                self.state,
                key,
                &mut self.out,
                self.idle_written,
                &r,
                ts,
                self.idle_after,
            );
            self.out.rank(self.state, key, &r, ts);
        }
    }

    /// Applies what the pipeline made of one line.
    fn apply(&mut self, outcome: Outcome<'_>) {
        self.sum.lines += 1;
        // Apart from `self` while the line's engine borrows it.
        let mut nodes = std::mem::take(&mut self.nodes);
        self.apply_line(outcome, &mut nodes);
        self.nodes = nodes;
    }

    fn apply_line<'n>(&mut self, outcome: Outcome<'n>, nodes: &'n mut Nodes) {
        let (rec, realtime) = match outcome {
            Outcome::Parsed {
                rec,
                realtime,
                unit,
                node,
                user,
            } => {
                // Bounded as the state keeps it (`crate::label`): the key names the samples.
                crate::label::set("server", &mut self.key.server, unit.unwrap_or(self.server));
                let host = node.unwrap_or("");
                let other_user = user.filter(|u| !self.state.first_user(&self.key.server, host, u));
                let engine = nodes.engine_of(&self.key.server, node, other_user, &rec);
                (crate::record::Record { engine, ..rec }, realtime)
            }
            Outcome::Unmatched {
                text,
                realtime,
                local,
            } => {
                self.last_timed.note(text, realtime, local);
                return;
            }
            Outcome::Skipped => return,
            Outcome::Panicked => {
                self.sum.panics += 1;
                return;
            }
        };
        crate::label::set("engine", &mut self.key.engine, rec.engine.unwrap_or(""));
        let stats = matches!(rec.class, Class::Prefill | Class::Decode | Class::Retract);
        let request = rec.request.is_some_and(|r| r.counts());
        let Some(ts) = place(
            self.times,
            self.sum,
            self.date_given,
            self.now,
            realtime,
            rec.time,
            (stats, request),
        ) else {
            return;
        };
        self.last_timed.read_timed();
        let mut placed = std::mem::take(&mut self.placed);
        let verdict = self.look.observe(ts, &mut placed);
        self.apply_all(&mut placed);
        match verdict {
            Verdict::Place(t) => {
                let key = std::mem::replace(&mut self.key, ServerKey::plain(""));
                self.apply_at(&key, &rec, Some(t));
                self.key = key;
            }
            Verdict::Hold => {
                let d = Deferred {
                    rec: OwnedRecord::of(&rec),
                    key: self.key.clone(),
                };
                self.look.hold(d, &mut placed);
                self.apply_all(&mut placed);
            }
        }
        self.placed = placed;
    }

    /// Applies the lines the clock placed, in log order (`placed` is left empty).
    fn apply_all(&mut self, placed: &mut Vec<(Deferred, Option<f64>)>) {
        for (d, t) in placed.drain(..) {
            self.apply_at(&d.key, &d.rec.record(), t);
        }
    }

    /// The end of this input: the times of its last lines no kind reads move its clock, and
    /// the lines still held are placed.
    fn input_ended(&mut self, pipeline: &Pipeline) {
        let parser = pipeline.parser();
        let mut found = Vec::with_capacity(2);
        let (times, date_given, now) = (&mut *self.times, self.date_given, self.now);
        self.last_timed.take(|l| {
            let t = match l.realtime {
                Some(t) => Some(t),
                None => parser
                    .prefix_time(l.head)
                    .or(l.local)
                    // A time without a date is placed on no day without --date, as a line's.
                    .filter(|t| t.date.is_some() || date_given)
                    .and_then(|t| times.resolve(t)),
            };
            found.extend(t.filter(|t| plausible_time(*t, now)));
        });
        let mut placed = std::mem::take(&mut self.placed);
        for t in found {
            self.look.note(t, &mut placed);
        }
        self.look.finish(&mut placed);
        self.apply_all(&mut placed);
        self.placed = placed;
    }

    /// Applies one line at `ts`, the time the clock placed it at, and writes its samples there;
    /// `None` (an outlier before the clock had a time): its values are applied, no sample is
    /// written.
    fn apply_at(&mut self, key: &ServerKey, rec: &Record<'_>, ts: Option<f64>) {
        // An input kept apart from a server of its name (two inputs that overlap in time):
        // its samples go under the key the state keeps its lines under.
        let routed = self.state.route_placed(self.clock, key, rec, ts);
        let key = routed.as_ref().unwrap_or(key);
        let Some(ts) = ts else {
            self.state
                .apply_placed(self.source, self.clock, key, rec, None);
            write_dropped(
                self.state,
                &mut self.out,
                self.idle_written,
                self.idle_after,
            );
            return;
        };
        let stats = matches!(rec.class, Class::Prefill | Class::Decode | Class::Retract);
        let request = rec.request.is_some_and(|r| r.counts());
        // The key the state keeps the line's rank under (`TP0` and an untagged line are one).
        let ranks = (self.state.servers().get(key)).map_or(rec.ranks, |s| s.rank_key(&rec.ranks));
        if matches!(rec.class, Class::Prefill | Class::Decode) {
            // The rank's first stats line after a gap: it went idle in between.
            idle_before(
                self.state,
                key,
                &mut self.out,
                self.idle_written,
                &ranks,
                ts,
                self.idle_after,
            );
        }
        let class = rec.class;
        let engine_before = self.engine_type(key);
        let existed = (self.state.servers().get(key)).is_some_and(|s| s.ranks.contains_key(&ranks));
        self.state
            .apply_placed(self.source, self.clock, key, rec, Some(ts));
        write_dropped(
            self.state,
            &mut self.out,
            self.idle_written,
            self.idle_after,
        );
        let changed = engine_before.filter(|&b| Some(b) != self.engine_type(key));
        if let Some(before) = changed {
            self.engine_changed(key, before, ts, (ranks, existed));
        } else if stats {
            self.out.rank(self.state, key, &ranks, ts);
        } else if class == Class::Fact {
            self.fact_samples(key, ts);
        }
        if request && changed.is_none() {
            self.out.requests(self.state, key, ts);
        }
    }

    /// The `engine_type` of the server of `key` now, if the state has it.
    fn engine_type(&self, key: &ServerKey) -> Option<EngineType> {
        let srv = self.state.servers().get(key)?;
        Some(srv.engine_type(&key.server))
    }

    /// The server's `engine_type` label changed at `ts` (its first PD stats line told its
    /// mode; `line_rank` the line's rank, `existed` whether it was there before the line): a
    /// scrape from then on shows every series of the server under the new label, so every rank
    /// (and its request series) gets a sample at `ts`, as `--once` and a live scrape at that
    /// moment show them. Each series of the old label (`before`) ends idle, as a restarted
    /// rank's does (see [`write_dropped`]): at its idle time when that came first, else at
    /// `ts`; without it Prometheus' lookback would count the rank twice for 5 minutes.
    fn engine_changed(
        &mut self,
        key: &ServerKey,
        before: EngineType,
        ts: f64,
        (line_rank, existed): (Ranks, bool),
    ) {
        let all: Vec<(Ranks, Option<f64>)> = self
            .state
            .servers()
            .get(key)
            .map(|s| s.ranks.iter().map(|(r, x)| (*r, x.last_stats)).collect())
            .unwrap_or_default();
        self.out.engine_type = Some(before);
        for &(r, last) in all.iter().filter(|(r, _)| existed || *r != line_rank) {
            let Some(last) = last else { continue };
            if ts - last > self.idle_after {
                idle_before(
                    self.state,
                    key,
                    &mut self.out,
                    self.idle_written,
                    &r,
                    ts,
                    self.idle_after,
                );
            } else if self.idle_written.get(&(key.clone(), r)) != Some(&last) {
                // Busy under the old label until now: that series ends idle at `ts` (its
                // idle sample under the new label, when it comes, is still to write).
                let judged = last.max(ts) + self.idle_after.max(MIN_IDLE_GAP) + MIN_IDLE_GAP;
                self.out.rank_as_of(self.state, key, &r, ts, judged);
            }
        }
        self.out.engine_type = None;
        for (r, _) in &all {
            self.out.rank(self.state, key, r, ts);
        }
        self.out.requests(self.state, key, ts);
    }
}
