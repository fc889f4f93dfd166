//! `backfill`: reads finished logs and writes every stats sample with its own timestamp as
//! OpenMetrics text (see [`crate::export::openmetrics`]), for
//! `promtool tsdb create-blocks-from openmetrics`.
//!
//! Each line goes through the same framer, parser and [`State`] as the live exporter, so values
//! (derived ratios, counters summed over time) are what a scrape at that moment would have shown.
//! After each stats or retraction line the series of that line's rank are sampled at the line's
//! time: journald's realtime timestamp when present, else the SGLang prefix time in `--timezone`.
//!
//! The idle policy applies as live (`--idle-after`): when a rank's next stats line, or the end of
//! the input (the latest time read), comes more than idle-after after its previous one, its
//! activity gauges are written as 0 and `sglang_idle` as 1 at previous + idle-after, and
//! `sglang_idle` reads 0 again with the next stats line. Without these samples Prometheus would
//! carry the last busy values across the gap (5 minutes of lookback).

use std::io::{IsTerminal, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

use crate::app::{load_patterns, parse_inputs, timezone, ConfigError, Input};
use crate::cli::BackfillArgs;
use crate::export::metrics::rank_labels;
use crate::export::openmetrics::{render_labels, OpenMetrics};
use crate::family::Kind;
use crate::parse::patterns::Class;
use crate::parse::patterns::MetricKind;
use crate::parse::prefix::TimeResolver;
use crate::parse::Parser;
use crate::record::Ranks;
use crate::source::framing::{Framed, Framer};
use crate::source::linebuf::{Event, LineBuf};
use crate::source::now_unix;
use crate::state::{State, StateConfig};

/// Samples newer than this (seconds) may overlap Prometheus' head block and are unsafe to
/// backfill.
const RECENT: f64 = 3.0 * 3600.0;

/// Rank counters sampled besides the pattern file's metrics (as in [`crate::export::metrics`]).
const RANK_COUNTERS: &[&str] = &[
    "sglang_prefill_batches_total",
    "sglang_decode_stats_lines_total",
    "sglang_retractions_total",
];

/// `sglang_idle` and `sglang_last_stats_timestamp_seconds`, with the help texts of
/// [`crate::export::metrics`].
const IDLE: (&str, &str) = (
    "sglang_idle",
    "1 when the rank printed no stats line for --idle-after seconds (its activity gauges then read 0), else 0.",
);
const LAST_STATS: (&str, &str) = (
    "sglang_last_stats_timestamp_seconds",
    "Unix time in seconds of the rank's last prefill or decode stats line.",
);
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
    /// Stats lines skipped because they carry no usable time.
    pub untimed: u64,
}

/// Runs the subcommand; exit status 0, 1 when writing failed, 2 for a bad argument or input.
pub fn run(a: &BackfillArgs) -> ExitCode {
    match backfill(a) {
        Ok(s) => {
            if s.untimed > 0 {
                eprintln!(
                    "warning: {} stats lines had no usable time and were skipped (time-only prefixes need --date)",
                    s.untimed
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
    let mut parser = Parser::new(patterns.clone());
    let mut om = OpenMetrics::new();
    let mut sum = Summary::default();
    let total: u64 = inputs
        .iter()
        .filter_map(|(_, p)| p.as_ref().and_then(|p| std::fs::metadata(p).ok()))
        .map(|m| m.len())
        .sum();
    let bar = if std::io::stderr().is_terminal() {
        let b = ProgressBar::new(total);
        b.set_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    for (server, path) in &inputs {
        let mut times = TimeResolver::new(tz.clone(), a.read.date);
        let mut reader: Box<dyn Read> = match path {
            Some(p) => Box::new(
                std::fs::File::open(p)
                    .map_err(|e| ConfigError(format!("cannot read {}: {e}", p.display())))?,
            ),
            None => Box::new(std::io::stdin()),
        };
        let source = path
            .as_ref()
            .map_or("-".to_string(), |p| p.display().to_string());
        let mut ctx = Ctx {
            state: &mut state,
            parser: &mut parser,
            framer: Framer::new(a.read.max_line_bytes),
            times: &mut times,
            om: &mut om,
            sum: &mut sum,
            server,
            source: &source,
            date_given: a.read.date.is_some(),
            idle_after,
        };
        read_lines(
            &mut *reader,
            a.read.max_line_bytes,
            &bar,
            path.as_deref(),
            |l| ctx.line(l),
        )?;
    }
    bar.finish_and_clear();
    idle_at_end(&state, &mut om, idle_after);
    let now = now_unix();
    let mut out: Box<dyn Write> = if a.output.as_os_str() == "-" {
        Box::new(std::io::BufWriter::new(std::io::stdout().lock()))
    } else {
        Box::new(std::io::BufWriter::new(std::fs::File::create(&a.output)?))
    };
    sum.recent = om.count_after(now - RECENT);
    sum.samples = om.write(&mut out)?;
    out.flush()?;
    Ok(sum)
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
            if let Event::Line(l) = e {
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
    lb.flush_partial(|e| {
        if let Event::Line(l) = e {
            f(l)
        }
    });
    Ok(())
}

struct Ctx<'a> {
    state: &'a mut State,
    parser: &'a mut Parser,
    framer: Framer,
    times: &'a mut TimeResolver,
    om: &'a mut OpenMetrics,
    sum: &'a mut Summary,
    server: &'a str,
    source: &'a str,
    date_given: bool,
    /// `--idle-after` in seconds.
    idle_after: f64,
}

/// The end of the input: every rank whose last stats line is more than `idle_after` before the
/// latest time read gets its idle sample.
fn idle_at_end(state: &State, om: &mut OpenMetrics, idle_after: f64) {
    let Some(end) = state.latest_input() else {
        return;
    };
    for (server, srv) in state.servers() {
        for (ranks, rank) in &srv.ranks {
            if let Some(last) = rank.last_stats {
                if end - last > idle_after {
                    idle_sample(state, om, server, ranks, last, idle_after);
                }
            }
        }
    }
}

/// Writes what changes when a rank turns idle, at `last + idle_after`: its activity gauges 0,
/// `sglang_idle` 1 (and its last stats time).
fn idle_sample(
    state: &State,
    om: &mut OpenMetrics,
    server: &str,
    ranks: &Ranks,
    last: f64,
    idle_after: f64,
) {
    let Some(srv) = state.servers().get(server) else {
        return;
    };
    let Some(rank) = srv.ranks.get(ranks) else {
        return;
    };
    let at = last + idle_after.max(MIN_IDLE_GAP);
    let labels = render_labels(&rank_labels(server, srv, ranks));
    for (id, def) in state.patterns().metrics.iter().enumerate() {
        if def.activity && !(srv.values[id].is_nan() && rank.values[id].is_nan()) {
            om.add_rendered(&def.name, &def.help, Kind::Gauge, &labels, at, 0.0);
        }
    }
    om.add_rendered(IDLE.0, IDLE.1, Kind::Gauge, &labels, at, 1.0);
    om.add_rendered(LAST_STATS.0, LAST_STATS.1, Kind::Gauge, &labels, at, last);
}

impl Ctx<'_> {
    fn line(&mut self, raw: &[u8]) {
        self.sum.lines += 1;
        let (text, unit, realtime) = match self.framer.frame(raw) {
            Framed::Plain(l) => (String::from_utf8_lossy(l).into_owned(), None, None),
            Framed::Message {
                text,
                unit,
                realtime,
            } => (String::from_utf8_lossy(&text).into_owned(), unit, realtime),
            Framed::Pending | Framed::NullMessage => return,
        };
        let Some(rec) = self.parser.parse(&text) else {
            return;
        };
        let stats = matches!(rec.class, Class::Prefill | Class::Decode | Class::Retract);
        let ts = realtime.or_else(|| match rec.time {
            // A time without a date would be placed on today: refuse it without --date.
            Some(t) if t.date.is_none() && !self.date_given => None,
            Some(t) => self.times.resolve(t),
            None => None,
        });
        let server = unit.as_deref().unwrap_or(self.server);
        if stats && ts.is_none() {
            self.sum.untimed += 1;
            return;
        }
        let ranks = rec.ranks;
        if let (Class::Prefill | Class::Decode, Some(ts)) = (rec.class, ts) {
            // The rank's first stats line after a gap: it went idle in between.
            let last = self
                .state
                .servers()
                .get(server)
                .and_then(|s| s.ranks.get(&ranks))
                .and_then(|r| r.last_stats);
            if let Some(last) = last.filter(|&l| ts - l > self.idle_after) {
                idle_sample(self.state, self.om, server, &ranks, last, self.idle_after);
            }
        }
        self.state.apply(self.source, server, &rec, ts);
        let (true, Some(ts)) = (stats, ts) else {
            return;
        };
        self.sample(server, &ranks, ts);
    }

    /// Adds the current values of one rank at `ts`: what [`crate::export::metrics::families`]
    /// shows for it (server-scope values on every rank; activity gauges 0 while idle, e.g. at a
    /// retraction line long after the last stats line), computed for this rank only so a long log
    /// costs time in proportion to its lines.
    fn sample(&mut self, server: &str, ranks: &Ranks, ts: f64) {
        let Some(srv) = self.state.servers().get(server) else {
            return;
        };
        let Some(rank) = srv.ranks.get(ranks) else {
            return;
        };
        let labels = render_labels(&rank_labels(server, srv, ranks));
        let pat = self.state.patterns();
        let idle = rank.is_idle(ts, self.idle_after);
        for (id, def) in pat.metrics.iter().enumerate() {
            let v = if srv.values[id].is_nan() {
                rank.values[id]
            } else {
                srv.values[id]
            };
            if v.is_nan() {
                continue;
            }
            let v = if def.activity && idle { 0.0 } else { v };
            let kind = match def.kind {
                MetricKind::Gauge => Kind::Gauge,
                MetricKind::Counter => Kind::Counter,
            };
            self.om
                .add_rendered(&def.name, &def.help, kind, &labels, ts, v);
        }
        if let Some(last) = rank.last_stats {
            let om = &mut *self.om;
            om.add_rendered(
                IDLE.0,
                IDLE.1,
                Kind::Gauge,
                &labels,
                ts,
                f64::from(u8::from(idle)),
            );
            om.add_rendered(LAST_STATS.0, LAST_STATS.1, Kind::Gauge, &labels, ts, last);
        }
        for (name, help, n) in [
            (
                RANK_COUNTERS[0],
                "Prefill batches, one per Prefill batch line.",
                rank.prefill_lines,
            ),
            (
                RANK_COUNTERS[1],
                "Decode batch stats lines (one every --decode-log-interval decode steps).",
                rank.decode_lines,
            ),
            (
                RANK_COUNTERS[2],
                "Retraction events (KV cache pool full), one per retraction line.",
                rank.retractions,
            ),
        ] {
            if n > 0 {
                self.om
                    .add_rendered(name, help, Kind::Counter, &labels, ts, n as f64);
            }
        }
    }
}
