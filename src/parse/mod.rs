//! Turning one log line into a typed [`Record`]: wrapper and prefix, line kind, fields.
//!
//! Pure functions over `&str` with no I/O. A [`Parser`] owns reusable scratch space, so a line
//! that matches no pattern costs one multi-literal scan and no allocation.
//!
//! Steps, each in its own function: Ray's actor prefix ([`actor`]); a multi-literal prefilter
//! that names the candidate line kinds (known at once, with the first kind's match, for a line
//! whose shape was seen: the `shape` memo); per candidate kind (file order) its regex, the SGLang
//! prefix ([`prefix`]), then by class the access line, the `server_args` dump
//! ([`server_args`]) or the `key: value` fields ([`fields`]). A kind whose required fields are
//! missing hands the line to the next candidate.
//!
//! Two paths give the same records ([`ParseOptions`]). The plain path ([`Parser::plain`]) does
//! the steps above for every line. The fast path ([`Parser::new`]) adds memos that exist for
//! history throughput only (`--once`, `backfill`, the start-up catch-up of a long log; a live
//! server writes kilobytes a second, which the plain path reads with room to spare): the
//! `shape` memo (a line's literals and first kind by its shape), field templates (`template`:
//! a line's values read at the places the last line of its kind had them), the field-key memo
//! (`FieldMemo`), the prefix cache (`PrefixCache`) and anchored regex tries (`anchored`). The
//! fuzz harness (`tests/fuzz.rs`) runs both on every input and compares the records.

pub mod actor;
mod anchored;
mod before;
pub mod clean;
pub mod fields;
pub mod foreign;
mod gate;
pub mod literals;
pub mod patterns;
pub mod prefix;
pub mod request;
pub mod server_args;
mod shape;
pub mod stream;
mod template;
pub mod unread;
pub mod words;

use std::sync::Arc;

use regex::{CaptureLocations, Regex};

use anchored::{CaptureSpans, KindSearch};
pub use before::foreign_prefix;
use before::{actor_rest, gpu_tag, label_start, quoted_label};
use shape::Span;

use crate::record::{Access, LogTime, MetricSet, Ranks, Record, ServerArgs};
use fields::{
    compound_key, compound_part, parse_signed, parse_value, split_fields, split_kv, ValueError,
};
use patterns::{Class, FieldTarget, MetricId, Patterns};
pub use server_args::parse_server_args;

/// Parses lines with one compiled [`Patterns`]. One per source thread (it holds scratch space).
#[derive(Debug)]
pub struct Parser {
    pat: Arc<Patterns>,
    /// Per line kind, its regex's search and captures (see [`anchored`]).
    search: Vec<KindSearch>,
    scratch: Scratch,
    /// Scratch and group indices for the prefix regex, so that reading it allocates nothing.
    prefix: PrefixScratch,
    /// Groups `method`, `path`, `status` of each line kind's regex (for access lines).
    access_groups: Vec<[Option<usize>; 3]>,
    /// The prefilter literals, found together: a line's candidate kinds are those whose
    /// literal it holds.
    literals: literals::LiteralSet,
    /// Per line kind, field keys already looked up and their targets (see [`FieldMemo`]).
    field_memo: Vec<FieldMemo>,
    /// Per line kind, the bytes its values may hold in a template (`None`: the kind has none)
    /// and its last clean fields section (see [`template`]).
    templates: Vec<(Option<template::PlainBytes>, template::Template)>,
    /// Literal sets and first kind matches by line shape; `None` when the patterns tell digits
    /// apart (see [`shape`]).
    shapes: Option<shape::ShapeMemo>,
}

/// Buffers a [`Record`] borrows, reused from line to line.
#[derive(Debug, Default)]
struct Scratch {
    values: Vec<(MetricId, f64)>,
    bad_metrics: Vec<MetricId>,
    /// Bit sets over metric ids: which are in `values` / `bad_metrics`, so that the first value
    /// of a metric (nearly all) is added without a search of either.
    in_values: MetricSet,
    in_bad: MetricSet,
    unknown_text: String,
    unknown_spans: Vec<(usize, usize)>,
    /// A compound key expanded (`#token` + `full` → `#full token`).
    key_buf: String,
    /// The engine label of the line (Ray's actor prefix, then a foreign prefix's identity).
    engine: String,
    /// A foreign prefix's identity ([`foreign`]).
    foreign: String,
    /// What the last request record said.
    request: request::RequestRecord,
}

impl Scratch {
    fn clear(&mut self) {
        self.values.clear();
        self.bad_metrics.clear();
        self.in_values.clear();
        self.in_bad.clear();
        self.unknown_text.clear();
        self.unknown_spans.clear();
    }
}

/// The field keys of one line kind seen so far with [`Patterns::field`]'s answer (and whether
/// the key is one the kind requires), so the common keys cost a short comparison instead of two
/// hash lookups. Bounded: keys past `MEMO_KEYS` are looked up every time. Lines print their keys
/// in a fixed order, so the search starts after the previous hit.
#[derive(Debug)]
struct FieldMemo {
    keys: Vec<(Box<str>, Option<FieldTarget>, bool)>,
    next: usize,
    /// Keys kept at most ([`MEMO_KEYS`]; 0 in a plain parser).
    cap: usize,
}

/// Keys memoised per line kind: more than any SGLang line prints (about 20), few enough that a
/// flood of made-up keys costs a bounded scan.
const MEMO_KEYS: usize = 64;

impl FieldMemo {
    fn get(
        &mut self,
        pat: &Patterns,
        kind: &patterns::LineKind,
        key: &str,
    ) -> (Option<FieldTarget>, bool) {
        let n = self.keys.len();
        let start = if self.next < n { self.next } else { 0 };
        for i in (start..n).chain(0..start) {
            if fields::bytes_eq(self.keys[i].0.as_bytes(), key.as_bytes()) {
                self.next = i + 1;
                return (self.keys[i].1, self.keys[i].2);
            }
        }
        let t = pat.field(kind, key);
        let required = kind.requires.iter().any(|r| r == key);
        if n < self.cap {
            self.keys.push((key.into(), t, required));
            self.next = n + 1;
        }
        (t, required)
    }
}

/// Reusable state for reading the SGLang prefix.
#[derive(Debug)]
struct PrefixScratch {
    /// The prefix regex anchored at the start of the text: the common case (the line starts with
    /// the prefix) is one anchored match instead of an unanchored search.
    anchored: Option<Arc<Regex>>,
    locs: CaptureLocations,
    /// Indices of groups `date`, `time`, `frac`, `tags`.
    groups: [Option<usize>; 4],
    /// Recently read prefixes (only for [`CACHEABLE_PREFIX`]).
    cache: Option<PrefixCache>,
    /// The prefix regex treats the ten digits alike: the shape memo may keep where it matched.
    digits_alike: bool,
}

/// The prefix regex the cache is proven for: it ends with `\]` and nothing before that can
/// match `]`, so its anchored match on any text that starts with an earlier match is that same
/// match, with the same groups. Another (custom) prefix regex is simply not cached.
const CACHEABLE_PREFIX: &str = r"\[(?:(?P<date>[0-9]{4}-[0-9][0-9]-[0-9][0-9]) )?(?P<time>[0-9][0-9]:[0-9][0-9]:[0-9][0-9])(?:[.,](?P<frac>[0-9]{1,9}))?(?P<tags>(?: [A-Z][A-Z_]*[0-9]+)*)\]";

/// What the prefix of a line says: its time and ranks. `None` from a reader: a prefix was there
/// but malformed (a non-ASCII digit, an impossible time), and the line is not read.
type PrefixRead = Option<(Option<LogTime>, Ranks)>;

/// The last few prefixes read (their text and what it gave). Consecutive lines mostly share one:
/// the same second and rank. Buffers are reused, so it allocates only while warming up.
#[derive(Debug, Default)]
struct PrefixCache {
    entries: [(Vec<u8>, Option<LogTime>, Ranks); 8],
    next: usize,
}

impl PrefixCache {
    fn get(&self, region: &str) -> Option<(usize, Option<LogTime>, Ranks)> {
        let r = region.as_bytes();
        self.entries
            .iter()
            .find(|(p, _, _)| !p.is_empty() && fields::begins_with(r, p))
            .map(|(p, t, r)| (p.len(), *t, *r))
    }

    fn put(&mut self, text: &str, t: Option<LogTime>, r: Ranks) {
        let e = &mut self.entries[self.next];
        e.0.clear();
        e.0.extend_from_slice(text.as_bytes());
        e.1 = t;
        e.2 = r;
        self.next = (self.next + 1) % self.entries.len();
    }
}

fn group_index(re: &Regex, name: &str) -> Option<usize> {
    re.capture_names().position(|n| n == Some(name))
}

/// What reading a line as one kind found, besides the values in the scratch buffers.
struct LineMatch<'a> {
    time: Option<LogTime>,
    ranks: Ranks,
    /// The time and ranks are a foreign prefix's, its identity in `Scratch::foreign`.
    foreign: bool,
    /// The GPU the foreign prefix names.
    gpu: Option<u32>,
    bad_values: u32,
    access: Option<Access<'a>>,
    server_args: Option<Box<ServerArgs>>,
    listen: Option<crate::record::Listen>,
    /// A request record was read into the scratch.
    request: bool,
}

/// What every parser of one pattern set searches with, compiled once per set (kept in it):
/// each line kind's anchored specialisation (built on first use), the anchored prefix regex and
/// the literal set.
/// A parser clones them (a regex clone shares the compiled program), so a parser per followed
/// file costs its own scratch and memos, not a compilation (about 1 MB each, measured).
#[derive(Debug)]
pub struct Prebuilt {
    starts: Vec<Arc<anchored::LazyStarts>>,
    anchored_prefix: Option<Arc<Regex>>,
    /// Every match of the prefix regex starts with `[` (the embedded one's, SGLang's own).
    prefix_bracket_led: bool,
    literals: literals::LiteralSet,
}

impl Prebuilt {
    fn of(pat: &Patterns) -> Prebuilt {
        Prebuilt {
            starts: pat.lines.iter().map(|_| Arc::default()).collect(),
            // `^(?:…)` keeps the group numbers and the leftmost-first preference of the original.
            anchored_prefix: Regex::new(&format!("^(?:{})", pat.prefix.as_str()))
                .ok()
                .map(Arc::new),
            prefix_bracket_led: bracket_led(pat.prefix.as_str()),
            literals: literals::LiteralSet::new(&pat.literals, pat.prefilter.clone()),
        }
    }
}

/// Which paths a parser takes. The fast paths (the shape memo, field templates, the field-key
/// memo, the prefix cache, anchored regex tries) give the same records as the plain path,
/// faster on history (`--once`, `backfill`, a start-up catch-up); the fuzz harness runs both on
/// every input and compares them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Take the fast paths.
    pub memos: bool,
}

impl ParseOptions {
    /// Every fast path (what the exporter runs).
    pub const FAST: ParseOptions = ParseOptions { memos: true };
    /// The plain path only: each line searched and split as if it were the first.
    pub const PLAIN: ParseOptions = ParseOptions { memos: false };
}

impl Parser {
    /// A parser for the given patterns, with every fast path.
    pub fn new(pat: Arc<Patterns>) -> Parser {
        Parser::with_options(pat, ParseOptions::FAST)
    }

    /// A parser that takes the plain path only (see [`ParseOptions::PLAIN`]).
    pub fn plain(pat: Arc<Patterns>) -> Parser {
        Parser::with_options(pat, ParseOptions::PLAIN)
    }

    /// A parser for the given patterns that takes the paths `opt` says.
    pub fn with_options(pat: Arc<Patterns>, opt: ParseOptions) -> Parser {
        let pre = pat.prebuilt.get_or_init(|| Prebuilt::of(&pat));
        let fast = opt.memos;
        let search = pat
            .lines
            .iter()
            .zip(&pre.starts)
            .map(|(l, s)| KindSearch::with(&l.regex, Some(s.clone()).filter(|_| fast)))
            .collect();
        let access_groups = pat
            .lines
            .iter()
            .map(|l| ["method", "path", "status"].map(|n| group_index(&l.regex, n)))
            .collect();
        let prefix = PrefixScratch {
            anchored: pre.anchored_prefix.clone().filter(|_| fast),
            locs: pat.prefix.capture_locations(),
            groups: ["date", "time", "frac", "tags"].map(|n| group_index(&pat.prefix, n)),
            cache: (fast && pat.prefix.as_str() == CACHEABLE_PREFIX).then(PrefixCache::default),
            digits_alike: pat.prefix_digits_alike,
        };
        let field_memo = pat
            .lines
            .iter()
            .map(|_| FieldMemo {
                keys: Vec::new(),
                next: 0,
                cap: if fast { MEMO_KEYS } else { 0 },
            })
            .collect();
        let templates = pat
            .lines
            .iter()
            .map(|l| {
                let plain = template::PlainBytes::of(l).filter(|_| fast);
                (plain, template::Template::default())
            })
            .collect();
        Parser {
            shapes: (fast && pat.digits_alike).then(shape::ShapeMemo::new),
            templates,
            literals: pre.literals.clone(),
            field_memo,
            pat,
            search,
            scratch: Scratch {
                values: Vec::with_capacity(32),
                ..Scratch::default()
            },
            prefix,
            access_groups,
        }
    }

    /// The patterns this parser uses.
    pub fn patterns(&self) -> &Arc<Patterns> {
        &self.pat
    }

    /// Parses one line (without its `\n`; a trailing `\r` is ignored; colour codes must have
    /// been removed, see [`clean`]). Returns `None` for a line that is none of the known kinds.
    pub fn parse<'a>(&'a mut self, line: &'a str) -> Option<Record<'a>> {
        let found = self.find(line)?;
        Some(self.record(found))
    }

    /// [`Parser::parse`], or for a line no kind reads what it looks like
    /// ([`Parser::unread`]): the pipeline asks both of every line.
    pub fn parse_or_unread<'a>(
        &'a mut self,
        line: &'a str,
    ) -> Result<Record<'a>, Option<unread::Looks>> {
        match self.find(line) {
            Some(found) => Ok(self.record(found)),
            None => Err(self.unread(line)),
        }
    }

    /// The kind that reads `line` and what it read (in `self.scratch` too), the line without
    /// Ray's actor prefix, and whether that prefix named an engine.
    fn find<'a>(&mut self, line: &'a str) -> Option<(usize, LineMatch<'a>, &'a str, bool)> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let (line, engine) = self.engine(line);
        let (lits, first) = self.first_kind(line);
        let mut next = first;
        loop {
            let k = next?;
            match self.read_kind(k, line, next == first) {
                Some(f) => return Some((k, f, line, engine)),
                None => next = self.next_kind(line, lits, k + 1),
            }
        }
    }

    /// The record of what [`Parser::find`] found.
    fn record<'a>(
        &'a mut self,
        (k, found, line, engine): (usize, LineMatch<'a>, &'a str, bool),
    ) -> Record<'a> {
        let engine = if found.foreign && !self.scratch.foreign.is_empty() {
            let Scratch {
                engine: e, foreign, ..
            } = &mut self.scratch;
            if !engine {
                e.clear();
            }
            stream::join(e, foreign);
            true
        } else {
            engine
        };
        let s = &self.scratch;
        Record {
            kind: k,
            class: self.pat.lines[k].class,
            time: found.time,
            ranks: found.ranks,
            gpu: found.gpu,
            values: &s.values,
            bad_metrics: &s.bad_metrics,
            line,
            unknown_text: &s.unknown_text,
            unknown: &s.unknown_spans,
            bad_values: found.bad_values,
            access: found.access,
            server_args: found.server_args,
            listen: found.listen,
            engine: engine.then_some(s.engine.as_str()),
            request: found.request.then_some(&s.request),
        }
    }

    /// What `text` looks like when [`Parser::parse`] just read no kind in it (see
    /// [`unread`]): asked once per line shape when the shape memo holds the line and the
    /// answer depends on the shape alone, else asked of the line.
    pub fn unread(&mut self, text: &str) -> Option<unread::Looks> {
        let u = self.pat.unread();
        match self.shapes.as_mut().filter(|_| u.digits_alike) {
            Some(m) => m.unread(text.as_bytes(), || u.looks_like(text)),
            None => u.looks_like(text),
        }
    }

    /// The time of SGLang's prefix at the start of `text` (after Ray's actor prefix, if any):
    /// for a line no kind reads, whose time is wanted only now and then (see
    /// [`crate::pipeline::last_timed`]), so the prefix regex runs here, not on every such line.
    /// `None` without a prefix there, or with a malformed one.
    pub fn prefix_time(&self, text: &str) -> Option<LogTime> {
        let text = text.strip_suffix('\r').unwrap_or(text);
        let start = match text.starts_with('(') {
            true => actor::actor_prefix(text)
                .and_then(|_| text.find(") ["))
                .map_or(0, |i| i + 2),
            false => 0,
        };
        match self.pat.prefix.captures_at(text, start) {
            Some(c) if c.get(0)?.start() == start => {
                prefix::read_prefix(&self.pat.rank_tags, &c)?.0
            }
            // A foreign prefix's bracket (see [`foreign`]).
            _ => {
                let end = start + text[start..].find("] ")? + 1;
                foreign::time(&self.pat.rank_tags, &text[start..end])
            }
        }
    }

    /// Ray's actor prefix: notes the engine in the scratch and drops Ray's repeat note.
    fn engine<'a>(&mut self, line: &'a str) -> (&'a str, bool) {
        if !line.starts_with('(') {
            return (line, false);
        }
        match actor::actor_prefix(line) {
            Some((name, pid, ip)) => {
                actor::engine_label(name, pid, ip, &mut self.scratch.engine);
                (actor::strip_repeat_note(line), true)
            }
            None => (line, false),
        }
    }

    /// The literals `line` holds and the first kind (file order) whose literal it holds and
    /// whose regex matches it (its captures left in `self.search[k].locs`): from the shape
    /// memo when the line's shape is known, else found and kept there.
    fn first_kind(&mut self, line: &str) -> (u64, Option<usize>) {
        let lookup = match &mut self.shapes {
            Some(m) => m.get(line.as_bytes()),
            None => shape::Lookup::Off,
        };
        match lookup {
            shape::Lookup::Hit(lits, first) => {
                let first = first.map(|(k, spans)| {
                    self.search[k].locs.set_memo(spans, 0);
                    k
                });
                return (lits, first);
            }
            shape::Lookup::Miss | shape::Lookup::Off => {}
        }
        let keep = matches!(lookup, shape::Lookup::Miss);
        let lits = self.literals.present(line);
        let first = if lits == 0 {
            None
        } else {
            self.next_kind(line, lits, 0)
        };
        if let (true, Some(m)) = (keep, &mut self.shapes) {
            m.put(lits, first.map(|k| (k, self.search[k].locs.spans(0))));
        }
        (lits, first)
    }

    /// The first kind from `from` on (file order) whose literal the line holds (`lits`, see
    /// [`literals::LiteralSet::present`]) and whose regex matches it (its captures left in
    /// `self.locs`).
    fn next_kind(&mut self, line: &str, lits: u64, from: usize) -> Option<usize> {
        let pat = &*self.pat;
        (from..pat.lines.len()).find(|&k| {
            lits & 1 << pat.kind_literal[k] != 0 && {
                self.search[k].captures(&pat.lines[k].regex, line)
            }
        })
    }

    /// Reads `line` as kind `k` (its regex matched): `None` when the line is not of that kind
    /// after all (a malformed prefix, an absurd rank, required fields missing). `first`: `k` is
    /// the line's first kind (the one the shape memo knows).
    fn read_kind<'a>(&mut self, k: usize, line: &'a str, first: bool) -> Option<LineMatch<'a>> {
        let pat = &*self.pat;
        let class = pat.lines[k].class;
        let (m_start, m_end) = self.search[k].locs.get(0)?;
        // Most lines hold one `[` before the label's end, at their start (the SGLang prefix):
        // then neither a quoted label nor a later prefix needs looking for.
        let one_bracket = memchr::memchr(b'[', &line.as_bytes()[1.min(m_end)..m_end]).is_none();
        if !one_bracket && quoted_label(pat, &line[..m_start]) {
            return None;
        }
        // The SGLang prefix: the last timestamp bracket before the end of the label.
        // The shape memo knows the prefix of the line's first kind only.
        let memo = self.shapes.as_mut().filter(|_| first);
        let (mut time, mut ranks) = self.prefix.read(pat, &line[..m_end], one_bracket, memo)?;
        let (mut foreign, mut gpu) = (false, None);
        if time.is_none() && ranks == Ranks::default() && foreign::reads(class) {
            // No SGLang prefix: a fork's or launcher's own before a known body.
            let before = actor_rest(&line[..label_start(line, m_start)]);
            match foreign::read(&pat.rank_tags, before, &mut self.scratch.foreign) {
                foreign::Read::Refused => return None,
                foreign::Read::Prefix {
                    time: t,
                    ranks: r,
                    gpu: g,
                } => {
                    (time, ranks, foreign, gpu) = (t, r, true, g);
                }
                foreign::Read::Nothing => {}
            }
        } else if time.is_some()
            && ranks == Ranks::default()
            && !one_bracket
            && foreign::reads(class)
        {
            // SGLang's own time, then a launcher's brackets before the body
            // (`[TIME] [worker-3] [TP1] Decode batch`): their rank tags and writer are the
            // line's, or two ranks would be read as one; the time stays SGLang's. A refused or
            // empty reading leaves the line as SGLang's prefix alone reads it.
            let before = actor_rest(&line[..label_start(line, m_start)]);
            let read = foreign::read(&pat.rank_tags, before, &mut self.scratch.foreign);
            if let foreign::Read::Prefix {
                ranks: r, gpu: g, ..
            } = read
            {
                if r != Ranks::default() || !self.scratch.foreign.is_empty() {
                    (ranks, foreign, gpu) = (r, true, g);
                }
            }
        }
        if time.is_none() && ranks == Ranks::default() && !foreign {
            if prefix::broken_timestamp(&line[..m_start]) {
                return None;
            }
            // v0.1.17-v0.2.13 tag every message with `[gpu_id=N] ` or `[gpu=N] ` (those
            // versions print no timestamp prefix).
            ranks.tp = gpu_tag(&line[..m_end]);
        }
        if ranks.has_bad() {
            return None;
        }
        self.scratch.clear();
        let mut found = LineMatch {
            time,
            ranks,
            foreign,
            gpu,
            bad_values: 0,
            access: None,
            server_args: None,
            listen: None,
            request: false,
        };
        match class {
            Class::Access => found.access = Some(self.access(k, line)),
            Class::ServerArgs => {
                found.server_args = Some(Box::new(parse_server_args(&line[m_end..])))
            }
            Class::Request => self.request(k, line, m_start, &mut found)?,
            Class::Listen => found.listen = Some(self.listen(k, line)?),
            _ => found.bad_values = self.fields(k, line, m_end)?,
        }
        Some(found)
    }

    /// Reads a request record from the kind's `fields` group on ([`request::read`]). `None`
    /// when the literal sits inside a quoted string of another line (user text in a `Receive:`
    /// record): the text before the match must hold no quote. A record that cannot be read is
    /// still of this kind, with one bad value and no request.
    fn request(
        &mut self,
        k: usize,
        line: &str,
        m_start: usize,
        found: &mut LineMatch<'_>,
    ) -> Option<()> {
        if line.as_bytes()[..m_start]
            .iter()
            .any(|&c| c == b'\'' || c == b'"')
        {
            return None;
        }
        let (_, m_end) = self.search[k].locs.get(0)?;
        let start = self.pat.lines[k]
            .fields_group
            .and_then(|g| self.search[k].locs.get(g))
            .map_or(m_end, |(s, _)| s);
        let rec = &mut self.scratch.request;
        match request::read(&line[start..], rec) {
            Ok(()) => {
                found.request = true;
                if found.time.is_none() {
                    found.time = rec.timestamp;
                }
            }
            Err(_) => found.bad_values = 1,
        }
        Some(())
    }

    /// Where a `listen` line's listener binds: its `port` group (a port number, else the line
    /// is not of this kind) and its `dp` group.
    fn listen(&self, k: usize, line: &str) -> Option<crate::record::Listen> {
        let locs = &self.search[k].locs;
        let group = |name| {
            group_index(&self.pat.lines[k].regex, name)
                .and_then(|g| locs.get(g))
                .map(|(s, e)| &line[s..e])
        };
        Some(crate::record::Listen {
            port: group("port")?.parse().ok().filter(|&p| p > 0)?,
            dp: group("dp").and_then(|d| d.parse().ok()),
        })
    }

    /// The request of an access line.
    fn access<'a>(&self, k: usize, line: &'a str) -> Access<'a> {
        let locs = &self.search[k].locs;
        let groups = &self.access_groups[k];
        let group = |i: usize| {
            groups[i]
                .and_then(|g| locs.get(g))
                .map_or("", |(s, e)| &line[s..e])
        };
        Access {
            method: group(0),
            path: group(1),
            status: group(2).parse().unwrap_or(0),
        }
    }

    /// Reads the named-group and `key: value` fields of a line of kind `k` into the scratch
    /// buffers. Returns the number of unreadable values and pieces, or `None` when the kind
    /// requires fields the line does not carry.
    fn fields(&mut self, k: usize, line: &str, m_end: usize) -> Option<u32> {
        let Parser {
            pat,
            search,
            scratch,
            field_memo,
            templates,
            ..
        } = self;
        let pat = &**pat;
        let kind = &pat.lines[k];
        let locs = &search[k].locs;
        let mut bad = 0u32;
        for &(gi, target) in &kind.group_fields {
            if let Some((s, e)) = locs.get(gi) {
                push_value(scratch, target, &line[s..e], &mut bad);
            }
        }
        let rest = &line[fields_start(kind, locs, m_end)..];
        let (plain, tpl) = &mut templates[k];
        let learner = match plain {
            Some(plain) if tpl.matches(plain, rest) => {
                for (t, v) in tpl.values(rest) {
                    push_value(scratch, t, v, &mut bad);
                }
                scratch.unknown_text.push_str(&tpl.unknown_text);
                scratch.unknown_spans.extend_from_slice(&tpl.unknown_spans);
                return tpl.required.then_some(bad);
            }
            Some(plain) => Some(tpl.learner(plain, rest)),
            None => None,
        };
        read_fields(pat, k, rest, scratch, &mut field_memo[k], learner, bad)
    }
}

/// Reads the `key: value` fields of `rest` (a line of kind `k` from its fields section on) into
/// the scratch buffers, with `bad` unreadable values so far: the general path, which splits
/// the section into pieces and looks each key up. A `learner` sees every value read and keeps
/// the line as its kind's template when nothing in it needs the general path.
fn read_fields(
    pat: &Patterns,
    k: usize,
    rest: &str,
    scratch: &mut Scratch,
    memo: &mut FieldMemo,
    mut learner: Option<template::Learner<'_>>,
    mut bad: u32,
) -> Option<u32> {
    let kind = &pat.lines[k];
    let mut required = kind.requires.is_empty();
    let body = fields_section(kind, rest);
    if glued(pat, body) {
        return None;
    }
    let spoil = |l: &mut Option<template::Learner<'_>>| *l = None;
    let mut pieces = split_fields(body, &kind.separators);
    let mut compound: Option<&str> = None;
    while let Some(piece) = pieces.next() {
        let Some((key, mut value)) = split_kv(piece, &kind.kv).or_else(|| {
            // `swa=8192` after `#token: full=20480`
            let part = piece.trim();
            compound
                .filter(|_| compound_part(part).is_some())
                .map(|ck| (ck, part))
        }) else {
            spoil(&mut learner);
            // Not `key: value`: on a statistics line, where every piece is a field, counted
            // (never silently dropped); startup lines may carry prose between fields, but a
            // field of theirs cut to `full size:` (a key of a metric, its value missing) is
            // counted there too. A cut field's gauge is withdrawn, rather than left showing an
            // older value.
            let stats = matches!(kind.class, Class::Prefill | Class::Decode | Class::Retract);
            let cut = empty_value(piece, &kind.kv)
                .and_then(|key| memo.get(pat, kind, key).0)
                .filter(|t| stats || matches!(t, FieldTarget::Metric { .. }));
            if stats || cut.is_some() {
                bad += 1;
            }
            if let Some(t) = cut {
                push_value(scratch, t, "", &mut 0);
            }
            continue;
        };
        if value.contains('[') && pat.bracketed.iter().any(|b| b == key) {
            spoil(&mut learner);
            if let Some((_, v)) = pieces
                .extend_bracket(piece)
                .and_then(|p| split_kv(p, &kind.kv))
            {
                value = v;
            }
        }
        let (key, value) = match compound_part(value) {
            Some((sub, num)) if kind.kv.iter().all(|k| k != "=") => {
                spoil(&mut learner);
                compound = Some(key);
                (compound_key(key, sub, &mut scratch.key_buf) as &str, num)
            }
            _ => {
                if compound.take().is_some() {
                    spoil(&mut learner);
                }
                (key, value)
            }
        };
        let (target, is_required) = memo.get(pat, kind, key);
        required |= is_required;
        if let Some(l) = &mut learner {
            l.value(value, target);
        }
        match target {
            Some(t) => push_value(scratch, t, value, &mut bad),
            None => {
                // Field by field: `key` may borrow the key buffer.
                let s = scratch.unknown_text.len();
                scratch.unknown_text.push_str(key);
                scratch.unknown_spans.push((s, scratch.unknown_text.len()));
            }
        }
    }
    if let (Some(l), true) = (learner, required) {
        l.keep(&scratch.unknown_text, &scratch.unknown_spans, required);
    }
    required.then_some(bad)
}

/// Whether an SGLang prefix starts inside the fields: two lines glued into one (a writer killed
/// mid-line, then the restarted server's first line). Its values mix two lines (`#token:
/// 51[2026-06-03 10:05:00] INFO: …`), so the line is not read as this kind (it counts as
/// unmatched, and `check` shows it), rather than leave some gauges from the cut line and others
/// from the line before.
///
/// One search of the line: a search from each `[` that scans on to the line's end when it
/// finds nothing made a run of `[` quadratic (repro 24: 64,000 took 12 s, a 1 MiB line an
/// hour). A custom prefix that may start with another byte is tried anchored at each `[`
/// (linear too while it cannot read past the next `[`).
fn glued(pat: &Patterns, body: &str) -> bool {
    if memchr::memchr(b'[', body.as_bytes()).is_none() {
        return false;
    }
    let pre = pat.prebuilt.get_or_init(|| Prebuilt::of(pat));
    match (&pre.anchored_prefix, pre.prefix_bracket_led) {
        (_, true) | (None, _) => pat.prefix.is_match(body),
        (Some(a), false) => {
            memchr::memchr_iter(b'[', body.as_bytes()).any(|at| a.is_match(&body[at..]))
        }
    }
}

/// Whether every match of the regex `re` starts with `[` (its literal prefixes say so).
fn bracket_led(re: &str) -> bool {
    let Ok(hir) = regex_syntax::Parser::new().parse(re) else {
        return false;
    };
    let seq = regex_syntax::hir::literal::Extractor::new().extract(&hir);
    seq.literals()
        .is_some_and(|l| !l.is_empty() && l.iter().all(|l| l.as_bytes().first() == Some(&b'[')))
}

/// Where the `key: value` fields of a line of `kind` start: at the kind's `fields` group, else
/// at the end of its match (`m_end`).
fn fields_start(kind: &patterns::LineKind, locs: &CaptureSpans, m_end: usize) -> usize {
    kind.fields_group
        .and_then(|g| locs.get(g))
        .map_or(m_end, |(s, _)| s)
}

/// The part of `rest` (a line of `kind` from its [`fields_start`]) that holds its fields: up to
/// the kind's `stop` text, without trailing separators.
fn fields_section<'l>(kind: &patterns::LineKind, rest: &'l str) -> &'l str {
    let mut body = rest;
    if let Some(stop) = &kind.stop {
        if let Some(p) = body.find(stop.as_str()) {
            body = &body[..p];
        }
    }
    body.trim_end_matches([' ', ',', '\t'])
}

/// The key of a field whose value is missing (`#queue-req:`, once the line's trailing space is
/// trimmed), if `piece` is one.
fn empty_value<'a>(piece: &'a str, kv: &[String]) -> Option<&'a str> {
    let piece = piece.trim_end();
    kv.iter().find_map(|sep| {
        let sep = sep.trim_end();
        let key = piece.strip_suffix(sep).filter(|_| !sep.is_empty())?.trim();
        (!key.is_empty()).then_some(key)
    })
}

impl PrefixScratch {
    /// The time and ranks of the last prefix match in `region` (none: no time, no ranks);
    /// `None` for a malformed one.
    /// `one_bracket`: the region holds no `[` past its first byte.
    /// `memo`: the shape memo, when it may know (or keep) this region's prefix groups.
    fn read(
        &mut self,
        pat: &Patterns,
        region: &str,
        one_bracket: bool,
        memo: Option<&mut shape::ShapeMemo>,
    ) -> PrefixRead {
        if let Some((len, t, r)) = self.cache.as_ref().and_then(|c| c.get(region)) {
            // Every match of the cached prefix regex starts with `[`, and a cached prefix is
            // at least one byte long.
            if one_bracket
                || memchr::memchr(b'[', &region.as_bytes()[len..]).is_none()
                || pat.prefix.find_at(region, len).is_none()
            {
                return Some((t, r));
            }
        }
        let memo = memo.filter(|_| self.digits_alike);
        // Where the line's shape is known, so is where the prefix regex matched at its start:
        // the whole match, then groups `date`, `time`, `frac`, `tags`.
        let known = memo.as_ref().and_then(|m| m.prefix().copied());
        let spans = match known {
            Some(spans) => spans,
            None if self.read_at_start(pat, region) => {
                let span = |i: Option<usize>| {
                    let (s, e) = self.locs.get(i?)?;
                    Some((s as u32, e as u32))
                };
                let [d, t, f, g] = self.groups;
                let spans = [span(Some(0)), span(d), span(t), span(f), span(g)];
                if let Some(m) = memo {
                    m.set_prefix(spans);
                }
                spans
            }
            None => [None; 5],
        };
        if let [Some((_, end)), date, time, frac, tags] = spans {
            let g = |span: Span| span.map(|(s, e)| &region[s as usize..e as usize]);
            let (t, r) =
                prefix::read_prefix_parts(&pat.rank_tags, g(date), g(time), g(frac), g(tags))?;
            if let Some(c) = self.cache.as_mut() {
                c.put(&region[..end as usize], t, r);
            }
            return Some((t, r));
        }
        match pat.prefix.captures_iter(region).last() {
            Some(c) => prefix::read_prefix(&pat.rank_tags, &c),
            None => Some((None, Ranks::default())),
        }
    }

    /// Fills `locs` with the prefix when the region starts with it and holds no later match: then
    /// it is the last match, the one the general path (`captures_iter(..).last()`) would read.
    /// `false` sends the caller to the general path.
    fn read_at_start(&mut self, pat: &Patterns, region: &str) -> bool {
        let Some(a) = &self.anchored else {
            return false;
        };
        match a.captures_read(&mut self.locs, region) {
            Some(m) if !m.is_empty() => pat.prefix.find_at(region, m.end()).is_none(),
            _ => false,
        }
    }
}

/// Adds one field's value to the scratch (scaled; summed where the field says so), or counts it
/// and notes its metric as unreadable. A metric ends up either with a value or unreadable: a
/// sum with an unreadable part is unreadable; otherwise a key given twice on one line keeps its
/// last readable value.
fn push_value(scratch: &mut Scratch, t: FieldTarget, raw: &str, bad: &mut u32) {
    let FieldTarget::Metric {
        id,
        scale,
        sum,
        signed,
    } = t
    else {
        return;
    };
    let slot = match scratch.in_values.contains(id) {
        Some(false) => None,
        _ => scratch.values.iter().position(|(m, _)| *m == id),
    };
    let unreadable = match scratch.in_bad.contains(id) {
        Some(false) => None,
        _ => scratch.bad_metrics.iter().position(|m| *m == id),
    };
    let read = if signed {
        parse_signed(raw)
    } else {
        parse_value(raw)
    };
    match read {
        Ok(_) if sum && unreadable.is_some() => {}
        Ok(v) => {
            // Not rounded: `2.82 GB` is 3027951943.68 bytes as printed (SGLang rounded the GB to
            // two decimals; rounding again per part would drift a K + V sum).
            let v = v * scale;
            if let Some(u) = unreadable {
                scratch.bad_metrics.swap_remove(u);
                scratch.in_bad.set(id, false);
            }
            match slot {
                Some(i) if sum => scratch.values[i].1 += v,
                Some(i) => scratch.values[i].1 = v,
                None => {
                    scratch.values.push((id, v));
                    scratch.in_values.set(id, true);
                }
            }
        }
        Err(e) => {
            // `nan` is SGLang's own "no value" (a ratio over an empty window): the gauge is
            // withdrawn as for an unreadable value, but the line is not counted as bad.
            if e != ValueError::NoValue {
                *bad += 1;
            }
            if sum || slot.is_none() {
                if let Some(i) = slot {
                    scratch.values.swap_remove(i);
                    scratch.in_values.set(id, false);
                }
                if unreadable.is_none() {
                    scratch.bad_metrics.push(id);
                    scratch.in_bad.set(id, true);
                }
            }
        }
    }
}

#[cfg(test)]
mod fast_path_tests {
    //! The parser's shortcuts (anchored prefix, literal window, field memo) against the cases
    //! that must take the general path.
    use super::*;

    fn parser() -> Parser {
        Parser::new(Arc::new(Patterns::embedded().unwrap()))
    }

    fn running(p: &mut Parser, line: &str) -> (Option<u32>, Option<u32>, Option<String>, f64) {
        let id = p.patterns().metric_by_id("num_running_reqs").unwrap();
        let r = p.parse(line).expect("a stats line");
        let time = r.time.map(|t| t.time.to_string());
        (r.ranks.dp, r.ranks.tp, time, r.get(id).unwrap())
    }

    /// A startup line's field cut to `key:` (found by the fuzzer: `full size: ` at the end of a
    /// SWA pool line) is counted and its gauge withdrawn, as on a stats line; prose without a
    /// key of a metric is not.
    #[test]
    fn a_cut_field_of_a_startup_line_is_counted() {
        let mut p = parser();
        let full = p
            .patterns()
            .metric_by_id("full_pool_capacity_tokens")
            .unwrap();
        let swa = p
            .patterns()
            .metric_by_id("swa_pool_capacity_tokens")
            .unwrap();
        let r = p
            .parse(
                "[2026-01-10 10:00:00 TP0] SWAKVPool mem usage: 61.32 GB, swa size: 0, full size: ",
            )
            .unwrap();
        assert_eq!(r.bad_values, 1);
        assert_eq!(r.bad_metrics, &[full][..]);
        assert_eq!(r.get(swa), Some(0.0));
        let r = p
            .parse(
                "[2026-01-10 10:00:00 TP0] SWAKVPool mem usage: 61.32 GB, swa size: 0, some prose",
            )
            .unwrap();
        assert_eq!(r.bad_values, 0);
    }

    #[test]
    fn prefix_after_other_text_and_the_last_of_two() {
        let mut p = parser();
        let tail = "Decode batch, #running-req: 5, #token: 10, token usage: 0.01, #queue-req: 0";
        let plain = format!("[2026-06-03 10:00:00 DP1 TP2] {tail}");
        let after = format!("host app: [2026-06-03 10:00:00 DP1 TP2] {tail}");
        let two = format!("[2026-06-03 09:00:00 DP0 TP0] [2026-06-03 11:00:00.5 DP2 TP3] {tail}");
        let want = |dp, tp, t: &str| (Some(dp), Some(tp), Some(t.to_string()), 5.0);
        assert_eq!(running(&mut p, &plain), want(1, 2, "10:00:00"));
        assert_eq!(running(&mut p, &after), want(1, 2, "10:00:00"));
        assert_eq!(running(&mut p, &two), want(2, 3, "11:00:00.5"));
        // No prefix at all.
        assert_eq!(running(&mut p, tail), (None, None, None, 5.0));
        // A wrapper's own time and level before SGLang's prefix: SGLang's is read.
        let wrapped = format!("[2026-06-03 09:00:00] [INFO] [2026-06-03 10:00:00 DP1 TP2] {tail}");
        assert_eq!(running(&mut p, &wrapped), want(1, 2, "10:00:00"));
        // Words between two prefixes: a stats line quoted inside another line, not one.
        for quoting in [
            format!("[2026-06-03 10:00:02 TP0] Scheduler hit an exception: bad input '[2026-06-03 10:00:02 TP0] {tail}'"),
            format!("[2026-06-03 10:00:03] WARNING:  user said: [2026-06-03 10:00:03 TP0] {tail}"),
        ] {
            assert!(p.parse(&quoting).is_none(), "{quoting}");
        }
    }

    #[test]
    fn overlapping_literals_and_repeated_keys() {
        let mut p = parser();
        // `new fill batch. ` contains `batch`, the literal of the kinds tried first.
        let v01 = "new fill batch. #seq: 3. #cached_token: 128. #new_token: 1536. #remaining_req: 12. #running_req: 5";
        let pat = p.patterns().clone();
        for _ in 0..3 {
            let r = p.parse(v01).unwrap();
            assert_eq!(pat.lines[r.kind].name, "prefill_v01");
        }
        // The memo answers the same as the first lookup, unknown keys included.
        let line =
            "[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 7, #made-up: 1, #queue-req: 2";
        for _ in 0..3 {
            let r = p.parse(line).unwrap();
            assert_eq!(r.unknown_keys().collect::<Vec<_>>(), ["#made-up"]);
            assert_eq!(r.values.len(), 2);
        }
    }

    #[test]
    fn access_groups() {
        let mut p = parser();
        let r = p
            .parse(r#"[2026-06-03 10:00:26] INFO:     127.0.0.1:44941 - "POST /generate?x=1 HTTP/1.1" 503 Service Unavailable"#)
            .unwrap();
        let a = r.access.unwrap();
        assert_eq!((a.method, a.path, a.status), ("POST", "/generate", 503));
        assert!(p.parse("[2026-06-03 10:00:26] nothing to see").is_none());
    }

    /// v0.5.23 `srt/rust_server/server.py`: each DP rank's Rust server prints its port (`port +
    /// local DP rank`) and, under DP, its rank; earlier builds print no rank.
    #[test]
    fn a_rust_server_listen_line_gives_its_port_and_dp_rank() {
        use crate::record::Listen;
        let mut p = parser();
        let mut read = |line: &str| {
            let r = p.parse(line).unwrap();
            assert_eq!(r.class, Class::Listen, "{line}");
            (r.listen.unwrap(), r.ranks.dp)
        };
        assert_eq!(
            read("[2026-08-14 18:00:09 DP1 TP4] SGLANG_RUST_SERVER enabled, Rust server listen on 0.0.0.0:30001 (DP rank 1/4)"),
            (Listen { port: 30001, dp: Some(1) }, Some(1))
        );
        assert_eq!(
            read("[2026-08-14 18:00:09 DP3 TP12] SGLANG_RUST_SERVER enabled, Rust server listen on [::]:30003 (DP rank 3/4)"),
            (Listen { port: 30003, dp: Some(3) }, Some(3))
        );
        assert_eq!(
            read("[2026-08-14 18:00:09] SGLANG_RUST_SERVER enabled, Rust server listen on 127.0.0.1:30000"),
            (Listen { port: 30000, dp: None }, None)
        );
        assert_eq!(
            read("[2026-08-14 18:00:09 TP0] SGLANG_RUST_SERVER enabled, Rust server listen on [::1]:8"),
            (Listen { port: 8, dp: None }, None)
        );
        // No port, or one past 65535: not a listen line.
        for bad in [
            "[2026-08-14 18:00:09] SGLANG_RUST_SERVER enabled, Rust server listen on 0.0.0.0:",
            "[2026-08-14 18:00:09] SGLANG_RUST_SERVER enabled, Rust server listen on 0.0.0.0:70000",
            "[2026-08-14 18:00:09] SGLANG_RUST_SERVER enabled, Rust server listen on 0.0.0.0:0",
        ] {
            assert!(p.parse(bad).is_none_or(|r| r.listen.is_none()), "{bad}");
        }
    }
}

#[cfg(test)]
mod prefix_cache_tests {
    use super::*;

    /// The cache is on for the embedded prefix. If this fails, the prefix regex changed: check
    /// the argument on [`CACHEABLE_PREFIX`] still holds for the new one, then update the const.
    #[test]
    fn embedded_prefix_is_cached() {
        let p = Parser::new(Arc::new(Patterns::embedded().unwrap()));
        assert!(p.prefix.cache.is_some());
    }

    #[test]
    fn cached_prefix_reads_as_fresh() {
        let mut p = Parser::new(Arc::new(Patterns::embedded().unwrap()));
        let id = p.patterns().metric_by_id("num_running_reqs").unwrap();
        let tail = "Decode batch, #running-req: 5, #queue-req: 0";
        let lines = [
            format!("[2026-06-03 10:00:00 DP1 TP2] {tail}"),
            format!("[2026-06-03 10:00:00 DP1 TP2] {tail}"),
            // Starts with a cached prefix but carries a later one: the later one wins.
            format!("[2026-06-03 10:00:00 DP1 TP2] [2026-06-03 10:00:09 DP3 TP3] {tail}"),
            format!("[2026-06-03 10:00:00 DP1 TP2]{tail}"),
            format!("[2026-06-03 10:00:00 DP1] {tail}"),
        ];
        let got: Vec<_> = lines
            .iter()
            .map(|l| {
                let r = p.parse(l).unwrap();
                let t = r.time.map(|t| t.time.to_string());
                (r.ranks.dp, r.ranks.tp, t, r.get(id))
            })
            .collect();
        let t = |s: &str| Some(s.to_string());
        assert_eq!(
            got,
            [
                (Some(1), Some(2), t("10:00:00"), Some(5.0)),
                (Some(1), Some(2), t("10:00:00"), Some(5.0)),
                (Some(3), Some(3), t("10:00:09"), Some(5.0)),
                (Some(1), Some(2), t("10:00:00"), Some(5.0)),
                (Some(1), None, t("10:00:00"), Some(5.0)),
            ]
        );
    }
}

#[cfg(test)]
mod search_tests {
    use super::*;

    #[test]
    fn the_access_kind_is_specialised() {
        let p = Parser::new(Arc::new(Patterns::embedded().unwrap()));
        let k = p.pat.lines.iter().position(|l| l.name == "access").unwrap();
        assert!(p.search[k].is_specialised(&p.pat.lines[k].regex));
    }
}
