//! The pipeline: what turns a source's lines into state changes. A source ([`crate::source`])
//! yields whole lines (never a partial one) to an [`Ingest`]; its [`Pipeline`] unwraps
//! wrappers ([`framing`]), parses and stamps the line with a time, and the ingest applies it
//! to the shared state ([`ingest`]), in log order, also on several threads for history
//! ([`parallel`]); newest-first inputs are read backwards ([`order`]).

pub mod framing;
pub mod gpus;
pub mod ingest;
pub mod journal_lines;
pub mod json_record;
pub mod last_timed;
pub mod nodes;
pub mod order;
pub mod parallel;

pub use ingest::Ingest;

use crate::parse::stream::{join, StreamInfo, StreamScratch};
use crate::parse::Parser;
use crate::record::{LogTime, Record};
use crate::source::fault;
use crate::state::SourceDelta;
use framing::{Framed, Framer, Message};

/// How an ingest stamps lines that carry no wrapper time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timing {
    /// Use the SGLang prefix time (reading history: start-up catch-up, `--once`, backfill).
    LogTime,
    /// Use the arrival time (following live output; immune to a wrong `--timezone`).
    Arrival,
}

/// The steps every input path takes with a raw line before the state: unwrap a wrapper
/// ([`framing`]), remove terminal control codes ([`crate::parse::clean`]), decode UTF-8
/// (lossily, counted), parse. Live following, `--once`, `backfill` and `check` all use it, so
/// an input reads the same whichever way it is read.
#[derive(Debug)]
pub struct Pipeline {
    framer: Framer,
    steps: Steps,
    /// `max_line` and `message_key` as given, for [`Pipeline::sibling`].
    max_line: usize,
    message_key: Option<String>,
}

/// The steps of a [`Pipeline`] after the framer, with their buffers.
#[derive(Debug)]
struct Steps {
    clean_buf: Vec<u8>,
    lossy: String,
    parser: Parser,
    /// Stream prefixes ([`crate::parse::stream`], the parser's patterns): capture space, what
    /// the last line's said, and buffers for a JSON record after one (its message cleaned apart
    /// from the outer line, by a framer of its own: the outer record may be the first
    /// framer's) and for an engine named by several of them.
    stream_sc: StreamScratch,
    stream: StreamInfo,
    inner: Framer,
    inner_clean: Vec<u8>,
    inner_lossy: String,
    engine: String,
    /// A node named by a record and a stream prefix both.
    node_buf: String,
}

/// What [`Pipeline::run`] made of a line.
// Returned by value once per line: boxing the record would allocate per line.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Outcome<'a> {
    /// A line of a known kind.
    Parsed {
        /// The record.
        rec: Record<'a>,
        /// The systemd unit of a journald record (the server), if any.
        unit: Option<&'a str>,
        /// The wrapper's time of the line (journald, container runtime, shipper), if any.
        realtime: Option<f64>,
        /// The node a stream prefix named (see [`nodes`]), if any.
        node: Option<&'a str>,
        /// The service manager of a journal record's user unit, if any (see
        /// [`crate::source::writer`]).
        user: Option<&'a str>,
    },
    /// A line of no known kind (other output), as cleaned: counted in the delta already.
    Unmatched {
        /// The line as cleaned (after a stream prefix).
        text: &'a str,
        /// The wrapper's time of the line (journald, container runtime, shipper), if any.
        realtime: Option<f64>,
        /// A stream prefix's local time, if any (see [`crate::parse::stream`]).
        local: Option<LogTime>,
    },
    /// A record not to parse (a partial container record, a JSON object without message, an
    /// over-long joined record): counted in the delta already.
    Skipped,
    /// Reading the line hit a bug of ours (a panic): caught, the line skipped.
    Panicked,
}

impl Pipeline {
    /// A pipeline parsing with `parser`; joined container records are at most `max_line` bytes;
    /// JSON lines are also searched for a message under `message_key`.
    pub fn new(parser: Parser, max_line: usize, message_key: Option<&str>) -> Pipeline {
        Pipeline {
            framer: Framer::new(max_line).with_message_key(message_key),
            steps: Steps {
                clean_buf: Vec::new(),
                lossy: String::new(),
                stream_sc: parser.patterns().streams.scratch(),
                stream: StreamInfo::default(),
                inner: Framer::new(max_line).with_message_key(message_key),
                inner_clean: Vec::new(),
                inner_lossy: String::new(),
                engine: String::new(),
                node_buf: String::new(),
                parser,
            },
            max_line,
            message_key: message_key.map(str::to_string),
        }
    }

    /// Drops the container records whose last piece never came; returns how many.
    pub fn drop_pending(&mut self) -> u64 {
        self.framer.drop_pending() + self.steps.inner.drop_pending()
    }

    /// A new pipeline with the same patterns and settings (for another thread).
    pub fn sibling(&self) -> Pipeline {
        Pipeline::new(
            Parser::new(self.steps.parser.patterns().clone()),
            self.max_line,
            self.message_key.as_deref(),
        )
    }

    /// Hands `n` NUL bytes the line reader skipped at a line start to the framer; `true` when
    /// they were a binary value's bytes of a journal export entry (not a hole to count).
    pub fn nuls(&mut self, n: usize) -> bool {
        self.framer.nuls(n)
    }

    /// The line reader skipped a line as too long: a journal export entry it fell in is broken.
    pub fn oversized(&mut self) {
        self.framer.oversized();
    }

    /// The parser.
    pub fn parser(&self) -> &Parser {
        &self.steps.parser
    }

    /// Whether the framer holds no partial record (see [`framing::Framer::is_idle`]).
    pub fn framer_idle(&self) -> bool {
        self.framer.is_idle() && self.steps.inner.is_idle()
    }

    /// Runs one raw line (without `\n`) through the steps, counting what it meets in `d`
    /// (unmatched, invalid UTF-8, control codes, JSON without message, oversized records).
    /// A panic inside is caught and reported as [`Outcome::Panicked`].
    pub fn run<'a>(&'a mut self, raw: &'a [u8], d: &mut SourceDelta) -> Outcome<'a> {
        // Moving `self` out makes the closure FnOnce, so the outcome may borrow it.
        let run = std::panic::AssertUnwindSafe(move || {
            let this = self;
            this.steps(raw, d)
        });
        std::panic::catch_unwind(run).unwrap_or(Outcome::Panicked)
    }

    fn steps<'a>(&'a mut self, raw: &'a [u8], d: &mut SourceDelta) -> Outcome<'a> {
        fault::check(fault::Stage::Parse, raw);
        let Pipeline { framer, steps, .. } = self;
        // A journal export entry the line before cut short (that line was read as a line).
        d.incomplete += framer.take_cut();
        // Fast path: most lines are plain; only `{`, a digit and `_` can start a wrapper.
        let line = if !framer.wants(raw) {
            Message::plain(raw)
        } else {
            match unframe(framer.frame(raw), d) {
                Some(t) => t,
                None => return Outcome::Skipped,
            }
        };
        let wrapped = !std::ptr::eq(line.text, raw);
        steps.read(line, wrapped, d)
    }
}

impl Steps {
    /// Reads an unwrapped line (`wrapped`: it came out of a record, so a JSON record inside it
    /// is unwrapped too).
    fn read<'a>(
        &'a mut self,
        line: Message<'a>,
        wrapped: bool,
        d: &mut SourceDelta,
    ) -> Outcome<'a> {
        let Steps {
            clean_buf,
            lossy,
            parser,
            stream_sc,
            stream,
            inner,
            inner_clean,
            inner_lossy,
            engine,
            node_buf,
        } = self;
        let Message {
            text,
            mut unit,
            mut realtime,
            origin,
            mut node,
            mut user,
        } = line;
        // Who wrote the line, outermost first: the record's origin, stream prefixes, an
        // inner record's origin, Ray's actor.
        engine.clear();
        node_buf.clear();
        if let Some(o) = origin {
            join(engine, o);
        }
        let mut seen = Dirt::default();
        let mut text = decode_text(text, clean_buf, lossy, &mut seen, d);
        // Another tool's prefix before SGLang's line (one table lookup for most lines).
        let streamed = parser.patterns().streams.read(text, stream_sc, stream);
        if streamed {
            if stream.broken {
                d.unmatched += 1;
                return Outcome::Unmatched {
                    text,
                    realtime,
                    local: None,
                };
            }
            join(engine, &stream.engine);
            text = &text[stream.end..];
            realtime = realtime.or(stream.unix);
        }
        // A JSON record after a prefix (Fluentd's `out_file`, a Loki line holding a Docker
        // record) or inside another record (`logcli --output jsonl` of Docker records).
        if (streamed || wrapped) && text.starts_with('{') {
            let Some(i) = unframe(inner.frame(text.as_bytes()), d) else {
                return Outcome::Skipped;
            };
            text = decode_text(i.text, inner_clean, inner_lossy, &mut seen, d);
            unit = unit.or(i.unit);
            realtime = realtime.or(i.realtime);
            node = node.or(i.node);
            user = user.or(i.user);
            if let Some(o) = i.origin {
                join(engine, o);
            }
        }
        // A stream prefix's node (SkyPilot's `worker1`) inside a record that names its host:
        // both name the node.
        if streamed && !stream.node.is_empty() {
            node = Some(match node {
                Some(n) => {
                    join(node_buf, n);
                    join(node_buf, &stream.node);
                    node_buf.as_str()
                }
                None => stream.node.as_str(),
            });
        }
        match parser.parse_or_unread(text) {
            Ok(mut rec) => {
                if streamed {
                    rec.time = rec.time.or(stream.local);
                    if rec.ranks == crate::record::Ranks::default() {
                        rec.ranks = stream.ranks;
                    }
                }
                if !engine.is_empty() {
                    if let Some(ray) = rec.engine {
                        join(engine, ray);
                    }
                    rec.engine = Some(engine.as_str());
                }
                Outcome::Parsed {
                    rec,
                    unit,
                    realtime,
                    node,
                    user,
                }
            }
            Err(looks) => {
                d.unmatched += 1;
                if let Some(looks) = looks {
                    d.count_unread(looks);
                }
                Outcome::Unmatched {
                    text,
                    realtime,
                    local: if streamed { stream.local } else { None },
                }
            }
        }
    }
}

/// What a wrapper made of a line, or `None` for a record not to parse (counted in `d`).
fn unframe<'a>(f: Framed<'a>, d: &mut SourceDelta) -> Option<Message<'a>> {
    match f {
        Framed::Plain(l) => Some(Message::plain(l)),
        Framed::Message(m) => Some(m),
        Framed::Pending => None,
        Framed::NullMessage => {
            d.unmatched += 1;
            d.null_messages += 1;
            None
        }
        Framed::NoMessage => {
            d.json_without_message += 1;
            None
        }
        Framed::Oversized => {
            d.oversized += 1;
            None
        }
        Framed::CutJson | Framed::BrokenEntry => {
            d.incomplete += 1;
            None
        }
    }
}

/// What decoding has already counted against one line. A wrapped line is decoded twice (the
/// record, then the message inside it), and both can hold control codes or invalid UTF-8 (a raw
/// ESC in the record and a `\u001b` in its message): the per-line counters count it once.
#[derive(Default)]
struct Dirt {
    control_codes: bool,
    invalid_utf8: bool,
}

/// A line's bytes as text: terminal control codes removed, invalid UTF-8 read lossily, each
/// counted once per line (`seen`). `buf` and `lossy` hold the result when it is not `text`.
fn decode_text<'a>(
    text: &'a [u8],
    buf: &'a mut Vec<u8>,
    lossy: &'a mut String,
    seen: &mut Dirt,
    d: &mut SourceDelta,
) -> &'a str {
    // Nearly every line is printable ASCII: nothing to clean, valid UTF-8 (one pass).
    if crate::parse::clean::is_plain_ascii(text) {
        debug_assert!(std::str::from_utf8(text).is_ok());
        // SAFETY: every byte is below 0x80 (`is_plain_ascii`), and ASCII is valid UTF-8.
        // (`str::from_utf8` would read the line a second time: ~4 % of all the work.)
        return unsafe { std::str::from_utf8_unchecked(text) };
    }
    let (text, changed) = crate::parse::clean::clean(text, buf);
    if changed && !seen.control_codes {
        seen.control_codes = true;
        d.control_codes += 1;
    }
    match simdutf8::basic::from_utf8(text) {
        Ok(s) => s,
        Err(_) => {
            if !seen.invalid_utf8 {
                seen.invalid_utf8 = true;
                d.invalid_utf8 += 1;
            }
            lossy.clear();
            lossy.push_str(&String::from_utf8_lossy(text));
            lossy.as_str()
        }
    }
}

/// The earliest plausible line time: 2023-01-01 UTC (SGLang's first release is from 2024).
pub const EARLIEST: f64 = 1_672_531_200.0;

/// A time before 2023 or more than a day ahead is garbage (a bogus journal timestamp, a
/// year-9999 prefix, a flipped digit, a clock reset to 1970): it would make every other rank
/// look idle, or write samples decades away, so it is not used. Live following, `--once` and
/// backfill share this rule.
pub fn plausible_time(t: f64, now: f64) -> bool {
    (EARLIEST..now + 86_400.0).contains(&t)
}
