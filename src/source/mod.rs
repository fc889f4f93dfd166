//! Sources: where lines come from (followed files, stdin), and [`Ingest`], which turns each
//! line into state updates.
//!
//! A source yields whole lines (never a partial one) to an [`Ingest`]; the ingest unwraps
//! wrappers, parses, stamps the line with a time and applies it to the shared state.

pub mod file;
pub mod framing;
pub mod journald;
pub mod linebuf;
pub mod stdin;

use std::time::{SystemTime, UNIX_EPOCH};

use crate::parse::prefix::TimeResolver;
use crate::parse::Parser;
use crate::state::{lock, Shared, SourceDelta};
use framing::{Framed, Framer};
use linebuf::Event;

/// Counters are handed to the state after this many lines (and at every pause), not per line.
const FLUSH_EVERY: u64 = 4096;

/// Unix seconds now.
pub fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// How an ingest stamps lines that carry no wrapper time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Use the SGLang prefix time (reading history: start-up catch-up, `--once`, backfill).
    LogTime,
    /// Use the arrival time (following live output; immune to a wrong `--timezone`).
    Arrival,
}

/// Parses lines of one source and applies them to the state.
#[derive(Debug)]
pub struct Ingest {
    parser: Parser,
    framer: Framer,
    state: Shared,
    source: String,
    server: String,
    times: TimeResolver,
    timing: Timing,
    delta: SourceDelta,
    null_warned: bool,
}

impl Ingest {
    /// An ingest for source `source` whose lines belong to server `server` (unless a journald
    /// record names its unit).
    pub fn new(
        parser: Parser,
        state: Shared,
        source: &str,
        server: &str,
        times: TimeResolver,
        max_line: usize,
    ) -> Ingest {
        // The source is listed in the self metrics at once; a server appears with its first
        // record (a journald stream names its own servers, so `stdin` may never be one).
        lock(&state).add_source_counts(source, &SourceDelta::default());
        Ingest {
            parser,
            framer: Framer::new(max_line),
            state,
            source: source.to_string(),
            server: server.to_string(),
            times,
            timing: Timing::LogTime,
            delta: SourceDelta::default(),
            null_warned: false,
        }
    }

    /// Switches between log time and arrival time (see [`Timing`]).
    pub fn set_timing(&mut self, t: Timing) {
        self.timing = t;
    }

    /// The source name.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Handles one event of a [`linebuf::LineBuf`].
    pub fn event(&mut self, e: Event<'_>) {
        match e {
            Event::Line(l) => self.line(l),
            Event::Oversized => {
                self.delta.lines += 1;
                self.delta.oversized += 1;
                tracing::warn!(source = %self.source, "skipped a line longer than --max-line-bytes");
            }
            Event::Incomplete => {
                self.delta.incomplete += 1;
                tracing::warn!(source = %self.source, "the input ended in the middle of a line (no newline); that part was not read");
            }
        }
    }

    /// Handles one raw line (without `\n`), which may be wrapped.
    pub fn line(&mut self, raw: &[u8]) {
        self.delta.lines += 1;
        // Fast path: most lines are plain; avoid the framer's borrow dance for them.
        let first = raw.first().copied();
        if first != Some(b'{') && !first.is_some_and(|c| c.is_ascii_digit()) {
            self.message(raw, None, None);
        } else {
            // The framer's output borrows it; take it out for the call.
            let mut framer = std::mem::replace(&mut self.framer, Framer::new(0));
            match framer.frame(raw) {
                Framed::Plain(l) => self.message(l, None, None),
                Framed::Message {
                    text,
                    unit,
                    realtime,
                } => self.message(&text, unit.as_deref(), realtime),
                Framed::Pending => {}
                Framed::NullMessage => {
                    self.delta.unmatched += 1;
                    if !self.null_warned {
                        self.null_warned = true;
                        tracing::warn!(source = %self.source, "a journal entry's MESSAGE is null (over 4096 bytes): run journalctl with --all");
                    }
                }
            }
            self.framer = framer;
        }
        if self.delta.lines >= FLUSH_EVERY {
            self.flush();
        }
    }

    fn message(&mut self, bytes: &[u8], unit: Option<&str>, realtime: Option<f64>) {
        let text = match std::str::from_utf8(bytes) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => {
                self.delta.invalid_utf8 += 1;
                String::from_utf8_lossy(bytes)
            }
        };
        let Some(rec) = self.parser.parse(&text) else {
            self.delta.unmatched += 1;
            return;
        };
        // A time before 1970 or more than a day ahead is garbage (a bogus journal timestamp, a
        // year-9999 prefix): it would make every other rank look idle, so it is not used.
        let now = now_unix();
        let plausible = |t: &f64| *t > 0.0 && *t < now + 86_400.0;
        let ts = realtime.filter(plausible).or_else(|| match self.timing {
            Timing::Arrival => Some(now),
            Timing::LogTime => rec
                .time
                .and_then(|t| self.times.resolve(t))
                .filter(plausible),
        });
        let server = unit.unwrap_or(&self.server);
        lock(&self.state).apply(&self.source, server, &rec, ts);
    }

    /// Counts bytes read from the source (every byte, also those of skipped oversized lines).
    pub fn count_bytes(&mut self, n: usize) {
        self.delta.bytes += n as u64;
    }

    /// Counts a read error of this source (open, permission, a directory…).
    pub fn count_error(&mut self) {
        self.delta.errors += 1;
        // Errors are rare and the source may now wait a long time: show them at once.
        self.flush();
    }

    /// Hands the batched counters to the state.
    pub fn flush(&mut self) {
        let d = std::mem::take(&mut self.delta);
        lock(&self.state).add_source_counts(&self.source, &d);
    }

    /// Sets `sglang_log_exporter_source_up` for this source.
    pub fn set_up(&mut self, up: bool) {
        lock(&self.state).set_extra(
            "sglang_log_exporter_source_up",
            &self.source,
            f64::from(u8::from(up)),
        );
    }
}

/// The server name of a systemd unit: the unit without `.service` (`sglang-decode.service` →
/// `sglang-decode`), for journald records, `--journal-unit` and the GPU correlation alike.
pub fn server_name_of_unit(unit: &str) -> &str {
    unit.strip_suffix(".service").unwrap_or(unit)
}

/// The default server name of a path: its file stem (`/var/log/sglang-decode.log` →
/// `sglang-decode`).
pub fn server_name_of(path: &std::path::Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "sglang".to_string())
}
