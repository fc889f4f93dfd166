//! Parsing history on several cores: a [`Batch`] gathers the lines of a finished input
//! (`--once`, `backfill`), cuts them at line boundaries into contiguous chunks (a few per
//! thread), parses the chunks at once (each thread with its own [`Pipeline`], taking the next
//! chunk when done), and hands the outcomes back in log order, so the state is applied
//! sequentially exactly as a single thread would.
//!
//! Parsing a line is a pure function of the line except for one thing: the [`Framer`] joins the
//! pieces of a partial container record (CRI `P`, Docker `json-file` over 16 KiB) across lines.
//! A chunk is only used when its framer held no piece after any of its lines; otherwise the
//! batch is parsed again sequentially by the input's own pipeline, and so is the rest of the
//! input. The parsers' caches (prefixes, field keys) change no result.
//!
//! [`Framer`]: super::framing::Framer

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::{Outcome, Pipeline};
use crate::parse::patterns::{Class, MetricId};
use crate::parse::request::RequestRecord;
use crate::record::{Access, LogTime, Ranks, Record, ServerArgs};
use crate::state::SourceDelta;

/// Bytes of lines each thread parses per batch: large enough that the threads meet rarely (at
/// each batch's end the caller waits for every thread, and on a busy machine a thread may wait
/// milliseconds for a core: 512 KiB gave 2.7 s of wall time on 100 MiB where 2 MiB gave 1.6 s),
/// small enough that a batch stays a few MiB.
pub const CHUNK_BYTES: usize = 2 << 20;

/// Most bytes of lines in one batch, whatever the number of threads (the memory a batch and its
/// results take: about twice this).
pub const MAX_BATCH_BYTES: usize = 16 << 20;

/// The threads to parse with for `threads` as given (`0`: every core the process may use).
pub fn threads(threads: usize) -> usize {
    if threads > 0 {
        return threads;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Lines gathered for parallel parsing, and one pipeline per extra thread.
#[derive(Debug)]
pub struct Batch {
    /// The lines, back to back.
    arena: Vec<u8>,
    /// End of each line in `arena`.
    ends: Vec<usize>,
    /// One pipeline per thread.
    pipelines: Vec<Pipeline>,
    /// What each chunk of the batch gave; threads take the next chunk as they finish one, so a
    /// thread the system holds back (other work on its core) delays only its current chunk.
    chunks: Vec<Mutex<Chunk>>,
    /// A chunk was unsafe to parse apart: the rest of the input is parsed sequentially.
    sequential: bool,
}

/// Chunks per thread in a batch.
const CHUNKS_PER_THREAD: usize = 4;

/// What a pipeline made of one chunk.
#[derive(Debug, Default)]
struct Chunk {
    out: Parsed,
    delta: SourceDelta,
    /// Every line of the chunk left the framer without a partial record.
    safe: bool,
}

/// Owned outcomes of a chunk: per line an [`Item`], whose record borrows these buffers.
#[derive(Debug, Default)]
struct Parsed {
    items: Vec<Item>,
    values: Vec<(MetricId, f64)>,
    bad_metrics: Vec<MetricId>,
    text: String,
    unknown: Vec<(usize, usize)>,
    requests: Vec<RequestRecord>,
}

/// What a line was ([`Outcome`] without borrows).
// Kept by value: a box per line would be an allocation per line.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Item {
    Parsed(Rec),
    Unmatched(Text),
    Skipped,
    Panicked,
}

/// A text of an outcome: a range of the batch's lines where it is part of a line as read (most
/// texts: no copy), else of [`Parsed`]'s own text (what a wrapper or the parser's scratch made).
#[derive(Debug, Clone)]
enum Text {
    Line(Range<usize>),
    Own(Range<usize>),
}

/// A [`Record`] with its borrowed parts as ranges into [`Parsed`]'s buffers.
#[derive(Debug)]
struct Rec {
    kind: usize,
    class: Class,
    time: Option<LogTime>,
    ranks: Ranks,
    values: Range<usize>,
    bad_metrics: Range<usize>,
    line: Text,
    unknown_text: Text,
    unknown: Range<usize>,
    bad_values: u32,
    engine: Option<Text>,
    access: Option<(Text, Text, u16)>,
    server_args: Option<Box<ServerArgs>>,
    request: Option<usize>,
    unit: Option<Text>,
    realtime: Option<f64>,
}

impl Parsed {
    fn clear(&mut self) {
        self.items.clear();
        self.values.clear();
        self.bad_metrics.clear();
        self.text.clear();
        self.unknown.clear();
        self.requests.clear();
    }

    /// `s` as a range of `arena` when it lies in it, else copied.
    fn text(&mut self, arena: &[u8], s: &str) -> Text {
        let (a, p) = (arena.as_ptr() as usize, s.as_ptr() as usize);
        if p >= a && p + s.len() <= a + arena.len() {
            return Text::Line(p - a..p - a + s.len());
        }
        let start = self.text.len();
        self.text.push_str(s);
        Text::Own(start..self.text.len())
    }

    /// Keeps an outcome of the chunk's pipeline (`arena`: the batch's lines).
    fn keep(&mut self, arena: &[u8], o: Outcome<'_>) {
        let item = match o {
            Outcome::Parsed {
                rec,
                unit,
                realtime,
            } => Item::Parsed(self.keep_record(arena, &rec, unit, realtime)),
            Outcome::Unmatched(t) => Item::Unmatched(self.text(arena, t)),
            Outcome::Skipped => Item::Skipped,
            Outcome::Panicked => Item::Panicked,
        };
        self.items.push(item);
    }

    fn keep_record(
        &mut self,
        arena: &[u8],
        r: &Record<'_>,
        unit: Option<&str>,
        realtime: Option<f64>,
    ) -> Rec {
        let v = self.values.len();
        self.values.extend_from_slice(r.values);
        let b = self.bad_metrics.len();
        self.bad_metrics.extend_from_slice(r.bad_metrics);
        let u = self.unknown.len();
        self.unknown.extend_from_slice(r.unknown);
        let request = r.request.map(|q| {
            self.requests.push(*q);
            self.requests.len() - 1
        });
        Rec {
            kind: r.kind,
            class: r.class,
            time: r.time,
            ranks: r.ranks,
            values: v..self.values.len(),
            bad_metrics: b..self.bad_metrics.len(),
            line: self.text(arena, r.line),
            unknown_text: self.text(arena, r.unknown_text),
            unknown: u..self.unknown.len(),
            bad_values: r.bad_values,
            engine: r.engine.map(|e| self.text(arena, e)),
            access: r.access.map(|a| {
                let m = self.text(arena, a.method);
                (m, self.text(arena, a.path), a.status)
            }),
            server_args: r.server_args.clone(),
            request,
            unit: unit.map(|u| self.text(arena, u)),
            realtime,
        }
    }

    /// The text of `t` (`arena`: the batch's lines; a line range is UTF-8, as it was read as a
    /// `&str` there).
    fn get<'a>(&'a self, arena: &'a [u8], t: &Text) -> &'a str {
        match t {
            Text::Line(r) => std::str::from_utf8(&arena[r.clone()]).unwrap_or(""),
            Text::Own(r) => &self.text[r.clone()],
        }
    }

    /// The outcome of item `i`, borrowing these buffers and `arena`.
    fn outcome<'a>(&'a self, arena: &'a [u8], i: usize) -> Outcome<'a> {
        let r = match &self.items[i] {
            Item::Parsed(r) => r,
            Item::Unmatched(t) => return Outcome::Unmatched(self.get(arena, t)),
            Item::Skipped => return Outcome::Skipped,
            Item::Panicked => return Outcome::Panicked,
        };
        let t = |x: &Text| self.get(arena, x);
        let rec = Record {
            kind: r.kind,
            class: r.class,
            time: r.time,
            ranks: r.ranks,
            values: &self.values[r.values.clone()],
            bad_metrics: &self.bad_metrics[r.bad_metrics.clone()],
            line: t(&r.line),
            unknown_text: t(&r.unknown_text),
            unknown: &self.unknown[r.unknown.clone()],
            bad_values: r.bad_values,
            engine: r.engine.as_ref().map(t),
            access: r.access.as_ref().map(|(m, p, s)| Access {
                method: t(m),
                path: t(p),
                status: *s,
            }),
            server_args: r.server_args.clone(),
            request: r.request.map(|q| &self.requests[q]),
        };
        Outcome::Parsed {
            rec,
            unit: r.unit.as_ref().map(t),
            realtime: r.realtime,
        }
    }
}

impl Chunk {
    /// Parses `lines` with `pipeline` (ends relative to `arena`, the first line starting at
    /// `from`).
    fn parse(&mut self, pipeline: &mut Pipeline, arena: &[u8], from: usize, ends: &[usize]) {
        self.out.clear();
        self.delta = SourceDelta::default();
        self.safe = true;
        let mut start = from;
        for &end in ends {
            let o = pipeline.run(&arena[start..end], &mut self.delta);
            self.out.keep(arena, o);
            start = end;
            if !pipeline.framer_idle() {
                self.safe = false;
                return;
            }
        }
    }
}

impl Batch {
    /// A batch parsing with `threads` copies of `like` (at least 2; `like` itself stays with
    /// the caller, for the sequential fallback).
    pub fn new(like: &Pipeline, threads: usize) -> Batch {
        let threads = threads.max(2);
        Batch {
            arena: Vec::new(),
            ends: Vec::new(),
            pipelines: (0..threads).map(|_| like.sibling()).collect(),
            chunks: (0..threads * CHUNKS_PER_THREAD)
                .map(|_| Mutex::default())
                .collect(),
            sequential: false,
        }
    }

    /// Adds a line (without `\n`). Returns whether the batch is full: time to [`Batch::run`].
    pub fn push(&mut self, raw: &[u8]) -> bool {
        self.arena.extend_from_slice(raw);
        self.ends.push(self.arena.len());
        self.arena.len() >= (CHUNK_BYTES * self.pipelines.len()).min(MAX_BATCH_BYTES)
    }

    /// Whether no line waits.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Parses the lines gathered (in parallel, or with `main` where that is unsafe), hands each
    /// outcome to `f` in log order, and empties the batch. Returns the pipeline's counts of the
    /// batch (what [`Pipeline::run`] counts), to add to the source's.
    pub fn run(&mut self, main: &mut Pipeline, mut f: impl FnMut(Outcome<'_>)) -> SourceDelta {
        let mut d = SourceDelta::default();
        // A partial record held from before (a sequential stretch) joins lines apart.
        self.sequential |= !main.framer_idle();
        if !self.sequential && self.ends.len() > 1 {
            self.parse_parallel();
        }
        let chunks: Vec<&Chunk> = self.chunks.iter_mut().map(|c| &*lock(c)).collect();
        if !self.sequential && self.ends.len() > 1 && chunks.iter().all(|c| c.safe) {
            for c in chunks {
                for i in 0..c.out.items.len() {
                    f(c.out.outcome(&self.arena, i));
                }
                d.add(&c.delta);
            }
        } else {
            if !self.sequential && self.ends.len() > 1 {
                tracing::debug!(
                    "a partial container record: the rest of this input is parsed on one thread"
                );
                self.sequential = true;
            }
            let mut start = 0;
            for &end in &self.ends {
                f(main.run(&self.arena[start..end], &mut d));
                start = end;
            }
        }
        self.arena.clear();
        self.ends.clear();
        d
    }

    /// Cuts the lines into chunks (by bytes, at line ends) and parses them at once: each thread
    /// (this one too) takes the next chunk until none is left.
    fn parse_parallel(&mut self) {
        let Batch {
            arena,
            ends,
            pipelines,
            chunks,
            ..
        } = self;
        let (arena, ends, chunks) = (&arena[..], &ends[..], &chunks[..]);
        let n = chunks.len();
        let mut cuts = vec![0usize];
        for k in 1..n {
            let want = arena.len() * k / n;
            let c = ends
                .partition_point(|&e| e <= want)
                .max(*cuts.last().unwrap_or(&0));
            cuts.push(c);
        }
        cuts.push(ends.len());
        let next = AtomicUsize::new(0);
        let work = |p: &mut Pipeline| loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            if k >= n {
                break;
            }
            let (a, b) = (cuts[k], cuts[k + 1]);
            let from = if a == 0 { 0 } else { ends[a - 1] };
            let mut c = chunks[k].lock().unwrap_or_else(|e| e.into_inner());
            c.parse(p, arena, from, &ends[a..b]);
        };
        std::thread::scope(|s| {
            let (first, rest) = pipelines.split_at_mut(1);
            for p in rest {
                s.spawn(|| work(p));
            }
            work(&mut first[0]);
        });
    }
}

/// A chunk's results, also after a panic elsewhere (the results of a finished parse stand).
fn lock(c: &mut Mutex<Chunk>) -> &mut Chunk {
    c.get_mut().unwrap_or_else(|e| e.into_inner())
}
