//! Parsing history on several cores: a [`Batch`] gathers the lines of a finished input
//! (`--once`, `backfill`), cuts them at line boundaries into contiguous chunks (a few per
//! thread), parses the chunks at once (each thread with its own [`Pipeline`], taking the next
//! chunk when done), and hands the outcomes back in log order, so the state is applied
//! sequentially exactly as a single thread would. The calling thread applies each chunk as soon
//! as it and every earlier one are parsed, and parses chunks itself while the next one is not
//! ready: applying (a quarter of the work) overlaps the other threads' parsing.
//!
//! Parsing a line is a pure function of the line except for one thing: the [`Framer`] joins the
//! pieces of a partial container record (CRI `P`, Docker `json-file` over 16 KiB) across lines.
//! A chunk is only used when its framer held no piece after any of its lines; otherwise the
//! batch is parsed again from that chunk on, sequentially, by the input's own pipeline, and so
//! is the rest of the input. The parsers' caches (prefixes, field keys) change no result.
//!
//! [`Framer`]: super::framing::Framer

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, LockResult, Mutex, PoisonError};

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

/// Under `--threads 0`, an input smaller than this is parsed on one thread: on 2 cores, 100 MiB
/// took as long or longer with a second thread (0.26-0.58 s against 0.26-0.54 s, runs
/// alternated on a shared machine), while 1 GiB gained up to 1.2× on a quiet one.
pub const AUTO_MIN_BYTES: u64 = 256 << 20;

/// How an input is parsed: on how many threads, and whether each batch goes the way that
/// measured faster ([`Pace`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Threads (1: sequential, no batches).
    pub threads: usize,
    /// Batches choose between one thread and `threads` by their measured pace.
    pub paced: bool,
}

/// The plan for an input of `len` bytes (`None`: not known) under `--threads threads`: `N > 0`
/// is `N` threads for every batch, as asked; `0` (the default) is one thread below
/// [`AUTO_MIN_BYTES`] and every core above, paced, so the default never loses much to one
/// thread (see [`Pace`]).
pub fn plan(threads: usize, len: Option<u64>) -> Plan {
    if threads > 0 {
        return Plan {
            threads,
            paced: false,
        };
    }
    let big = len.is_some_and(|l| l >= AUTO_MIN_BYTES);
    Plan {
        threads: if big { self::threads(0) } else { 1 },
        paced: true,
    }
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
    /// What each chunk of the batch gave, and its signal that it is parsed; threads take the
    /// next chunk as they finish one, so a thread the system holds back (other work on its
    /// core) delays only its current chunk.
    chunks: Vec<(Mutex<Chunk>, Condvar)>,
    /// A chunk was unsafe to parse apart: the rest of the input is parsed sequentially.
    sequential: bool,
    /// How fast each way has read this input's batches: the way of the next batch (`None`:
    /// always parallel, `--threads N`).
    pace: Option<Pace>,
    /// The current stretch of lines (a gathered batch, or lines handed on one thread without
    /// a batch): when it began and whether it is parallel; `None` between stretches.
    stretch: Option<(std::time::Instant, bool)>,
    /// Bytes of the current one-thread stretch.
    direct_bytes: usize,
}

/// The wall time per byte of batches parsed on one thread and on several, measured while the
/// input is read: each batch goes the faster way, and every [`EXPLORE_EVERY`]th the other, so a
/// change (other work taking the cores, lines of another cost) is seen. On 2 cores shared with
/// other work, or on small inputs, the other threads cost more than they save (the batches'
/// copies, the outcomes kept and rebuilt, a thread waiting for a core); measuring decides,
/// never a guess of the machine. The slower way costs at most one batch in
/// [`EXPLORE_EVERY`].
#[derive(Debug, Default)]
struct Pace {
    /// Seconds per byte (moving average) on one thread and on several.
    one: Option<f64>,
    many: Option<f64>,
    batches: u64,
    /// Of them, parsed on several threads.
    parallel_batches: u64,
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let Some(p) = &self.pace {
            tracing::debug!(
                batches = p.batches,
                parallel = p.parallel_batches,
                one_ns_per_byte = p.one.map(|s| s * 1e9),
                many_ns_per_byte = p.many.map(|s| s * 1e9),
                "parsing on several threads, by measured pace"
            );
        }
    }
}

/// One batch in this many goes the way that measured slower.
const EXPLORE_EVERY: u64 = 16;

impl Pace {
    /// Whether the next batch is parsed on several threads.
    fn parallel(&self) -> bool {
        match (self.one, self.many) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(one), Some(many)) => {
                let faster = many < one;
                faster != (self.batches % EXPLORE_EVERY == EXPLORE_EVERY - 1)
            }
        }
    }

    /// Notes a batch of `bytes` that took `secs`, parsed on several threads or not.
    fn note(&mut self, parallel: bool, bytes: usize, secs: f64) {
        self.batches += 1;
        self.parallel_batches += u64::from(parallel);
        let per_byte = secs / bytes.max(1) as f64;
        let avg = if parallel {
            &mut self.many
        } else {
            &mut self.one
        };
        *avg = Some(avg.map_or(per_byte, |a| 0.7 * a + 0.3 * per_byte));
    }
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
    /// Parsed in this batch (the caller waits for it on the chunk's condition variable).
    done: bool,
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
    Unmatched(Text, Option<f64>, Option<LogTime>),
    Skipped,
    Panicked,
}

/// A text of an outcome: bytes `start..start + len` of the batch's lines where it is part of a
/// line as read (most texts: no copy; `own: false`), else of [`Parsed`]'s own text (what a
/// wrapper or the parser's scratch made). 32-bit offsets keep an [`Item`] small (its bytes are
/// written and read once per line): a batch holds at most [`MAX_LINE`] + [`MAX_BATCH_BYTES`]
/// bytes of lines, and its own text at most three times that (invalid UTF-8 made lossy).
#[derive(Debug, Clone, Copy)]
struct Text {
    start: u32,
    len: u32,
    own: bool,
}

/// The longest line a batch takes (`--max-line-bytes` above this: no parallel batches), so
/// that every offset into a batch fits in 32 bits.
pub const MAX_LINE: usize = 512 << 20;

/// A range of [`Parsed`]'s value buffers.
type Span = (u32, u32);

/// `v[span]`.
fn at<T>(v: &[T], (a, b): Span) -> &[T] {
    &v[a as usize..b as usize]
}

/// `v.extend_from_slice(x)`, as the span of `v` it took.
fn append<T: Copy>(v: &mut Vec<T>, x: &[T]) -> Span {
    let a = v.len();
    v.extend_from_slice(x);
    (a as u32, v.len() as u32)
}

/// A [`Record`] with its borrowed parts as spans of [`Parsed`]'s buffers.
#[derive(Debug)]
struct Rec {
    kind: u32,
    class: Class,
    bad_values: u32,
    time: Option<LogTime>,
    ranks: Ranks,
    gpu: Option<u32>,
    values: Span,
    bad_metrics: Span,
    unknown: Span,
    line: Text,
    unknown_text: Text,
    engine: Option<Text>,
    access: Option<(Text, Text, u16)>,
    server_args: Option<Box<ServerArgs>>,
    listen: Option<crate::record::Listen>,
    request: Option<u32>,
    unit: Option<Text>,
    realtime: Option<f64>,
    node: Option<Text>,
    user: Option<Text>,
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
        let len = s.len() as u32;
        if p >= a && p + s.len() <= a + arena.len() {
            let start = (p - a) as u32;
            return Text {
                start,
                len,
                own: false,
            };
        }
        let start = self.text.len() as u32;
        self.text.push_str(s);
        Text {
            start,
            len,
            own: true,
        }
    }

    /// Keeps an outcome of the chunk's pipeline (`arena`: the batch's lines).
    fn keep(&mut self, arena: &[u8], o: Outcome<'_>) {
        let item = match o {
            Outcome::Parsed {
                rec,
                unit,
                realtime,
                node,
                user,
            } => Item::Parsed(self.keep_record(arena, &rec, unit, realtime, (node, user))),
            Outcome::Unmatched {
                text,
                realtime,
                local,
            } => Item::Unmatched(self.text(arena, text), realtime, local),
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
        (node, user): (Option<&str>, Option<&str>),
    ) -> Rec {
        let values = append(&mut self.values, r.values);
        let bad_metrics = append(&mut self.bad_metrics, r.bad_metrics);
        let unknown = append(&mut self.unknown, r.unknown);
        let request = r.request.map(|q| {
            self.requests.push(*q);
            (self.requests.len() - 1) as u32
        });
        Rec {
            kind: r.kind as u32,
            class: r.class,
            time: r.time,
            ranks: r.ranks,
            gpu: r.gpu,
            values,
            bad_metrics,
            line: self.text(arena, r.line),
            unknown_text: self.text(arena, r.unknown_text),
            unknown,
            bad_values: r.bad_values,
            engine: r.engine.map(|e| self.text(arena, e)),
            access: r.access.map(|a| {
                let m = self.text(arena, a.method);
                (m, self.text(arena, a.path), a.status)
            }),
            server_args: r.server_args.clone(),
            listen: r.listen,
            request,
            unit: unit.map(|u| self.text(arena, u)),
            realtime,
            node: node.map(|n| self.text(arena, n)),
            user: user.map(|u| self.text(arena, u)),
        }
    }

    /// The text of `t` (`arena`: the batch's lines, as [`Parsed::keep`] saw them).
    fn get<'a>(&'a self, arena: &'a [u8], t: &Text) -> &'a str {
        let r = t.start as usize..(t.start + t.len) as usize;
        if t.own {
            return &self.text[r];
        }
        let bytes = &arena[r];
        debug_assert!(std::str::from_utf8(bytes).is_ok());
        // SAFETY: a `Text` that is not `own` was made by `Parsed::text` from a `&str` lying in
        // exactly these bytes of this batch's `arena`, so they were UTF-8 then; the arena is
        // not written between parsing a batch and handing its outcomes (`Batch::run` clears it
        // after). Checking again cost a fifth of the calling thread's work on 2 cores.
        unsafe { std::str::from_utf8_unchecked(bytes) }
    }

    /// The outcome of item `i`, borrowing these buffers and `arena`.
    fn outcome<'a>(&'a self, arena: &'a [u8], i: usize) -> Outcome<'a> {
        let r = match &self.items[i] {
            Item::Parsed(r) => r,
            Item::Unmatched(t, realtime, local) => {
                return Outcome::Unmatched {
                    text: self.get(arena, t),
                    realtime: *realtime,
                    local: *local,
                }
            }
            Item::Skipped => return Outcome::Skipped,
            Item::Panicked => return Outcome::Panicked,
        };
        let t = |x: &Text| self.get(arena, x);
        let rec = Record {
            kind: r.kind as usize,
            class: r.class,
            time: r.time,
            ranks: r.ranks,
            gpu: r.gpu,
            values: at(&self.values, r.values),
            bad_metrics: at(&self.bad_metrics, r.bad_metrics),
            line: t(&r.line),
            unknown_text: t(&r.unknown_text),
            unknown: at(&self.unknown, r.unknown),
            bad_values: r.bad_values,
            engine: r.engine.as_ref().map(t),
            access: r.access.as_ref().map(|(m, p, s)| Access {
                method: t(m),
                path: t(p),
                status: *s,
            }),
            server_args: r.server_args.clone(),
            listen: r.listen,
            request: r.request.map(|q| &self.requests[q as usize]),
        };
        Outcome::Parsed {
            rec,
            unit: r.unit.as_ref().map(t),
            realtime: r.realtime,
            node: r.node.as_ref().map(t),
            user: r.user.as_ref().map(t),
        }
    }
}

impl Chunk {
    /// Parses `lines` with `pipeline` (ends relative to `arena`, the first line starting at
    /// `from`).
    fn parse(&mut self, pipeline: &mut Pipeline, arena: &[u8], from: usize, ends: &[usize]) {
        self.out.clear();
        self.delta.reset();
        self.safe = true;
        let mut start = from;
        for &end in ends {
            let o = pipeline.run(&arena[start..end], &mut self.delta);
            self.out.keep(arena, o);
            start = end;
            if !pipeline.framer_idle() {
                self.safe = false;
                break;
            }
        }
        self.done = true;
    }
}

impl Batch {
    /// A batch parsing with `plan.threads` copies of `like` (at least 2; `like` itself stays
    /// with the caller, for the sequential fallback); `None` where `like` takes lines longer
    /// than [`MAX_LINE`].
    pub fn new(like: &Pipeline, plan: Plan) -> Option<Batch> {
        if like.max_line > MAX_LINE {
            return None;
        }
        let threads = plan.threads.max(2);
        Some(Batch {
            arena: Vec::new(),
            ends: Vec::new(),
            pipelines: (0..threads).map(|_| like.sibling()).collect(),
            chunks: (0..threads * CHUNKS_PER_THREAD)
                .map(|_| (Mutex::default(), Condvar::new()))
                .collect(),
            sequential: false,
            pace: plan.paced.then(Pace::default),
            stretch: None,
            direct_bytes: 0,
        })
    }

    /// Whether the next line goes into the batch ([`Batch::push`]): `false` while a stretch of
    /// lines goes on one thread without a batch (the caller parses the line itself and calls
    /// [`Batch::direct`]; no copy, no outcome kept). Decided at the start of each stretch by
    /// the measured pace ([`Pace`]); always `true` for an unpaced batch.
    pub fn gathers(&mut self) -> bool {
        if let Some((_, parallel)) = self.stretch {
            return parallel;
        }
        let parallel = !self.sequential && self.pace.as_ref().is_none_or(Pace::parallel);
        self.stretch = Some((std::time::Instant::now(), parallel));
        parallel
    }

    /// A line of `len` bytes was parsed on one thread by the caller (see [`Batch::gathers`]).
    pub fn direct(&mut self, len: usize) {
        self.direct_bytes += len + 1;
        if self.direct_bytes < self.batch_bytes() {
            return;
        }
        if let (Some(p), Some((began, _))) = (self.pace.as_mut(), self.stretch.take()) {
            p.note(false, self.direct_bytes, began.elapsed().as_secs_f64());
        }
        self.direct_bytes = 0;
    }

    /// Bytes of lines in a full batch.
    fn batch_bytes(&self) -> usize {
        (CHUNK_BYTES * self.pipelines.len()).min(MAX_BATCH_BYTES)
    }

    /// Adds a line (without `\n`). Returns whether the batch is full: time to [`Batch::run`].
    pub fn push(&mut self, raw: &[u8]) -> bool {
        if self.stretch.is_none() {
            self.stretch = Some((std::time::Instant::now(), true));
        }
        self.arena.extend_from_slice(raw);
        self.ends.push(self.arena.len());
        self.arena.len() >= self.batch_bytes()
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
        let mut applied = 0;
        let parallel = !self.sequential && self.ends.len() > 1;
        if parallel {
            applied = self.parse_parallel(&mut d, &mut f);
            if applied < self.ends.len() {
                tracing::debug!(
                    "a record over several lines (a container record in pieces, a journal export entry): the rest of this input is parsed on one thread"
                );
                self.sequential = true;
            }
        }
        // The chunks before an unsafe one ended with an idle framer, as `main`'s is: the rest
        // is read by `main` from there, as one thread would.
        let mut start = applied.checked_sub(1).map_or(0, |i| self.ends[i]);
        for &end in &self.ends[applied..] {
            f(main.run(&self.arena[start..end], &mut d));
            start = end;
        }
        // Timed from the batch's first line: reading and cutting the lines count, as they do
        // for a stretch on one thread.
        let stretch = self.stretch.take();
        if let (Some(p), Some((began, true))) = (self.pace.as_mut(), stretch) {
            if !self.sequential {
                p.note(true, self.arena.len(), began.elapsed().as_secs_f64());
            }
        }
        self.arena.clear();
        self.ends.clear();
        d
    }

    /// Cuts the lines into chunks (by bytes, at line ends) and parses them at once: each thread
    /// takes the next chunk until none is left. This thread also hands the parsed chunks to `f`
    /// in order as they are ready (so applying overlaps the other threads' parsing), and parses
    /// a chunk itself when the next one to hand is not yet taken. Returns the lines handed: all
    /// of them, or those before the first chunk that left a partial container record.
    fn parse_parallel(&mut self, d: &mut SourceDelta, f: &mut impl FnMut(Outcome<'_>)) -> usize {
        let Batch {
            arena,
            ends,
            pipelines,
            chunks,
            ..
        } = self;
        for (c, _) in chunks.iter_mut() {
            unpoisoned(c.get_mut()).done = false;
        }
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
        // Takes the next chunk, if any is left, and parses it.
        let take = |p: &mut Pipeline| {
            let k = next.fetch_add(1, Ordering::AcqRel);
            if k >= n {
                return false;
            }
            let (a, b) = (cuts[k], cuts[k + 1]);
            let from = if a == 0 { 0 } else { ends[a - 1] };
            let (m, ready) = &chunks[k];
            let mut c = unpoisoned(m.lock());
            let parse = std::panic::AssertUnwindSafe(|| c.parse(p, arena, from, &ends[a..b]));
            if std::panic::catch_unwind(parse).is_err() {
                // Never left undone (the caller waits for it): read again on one thread.
                c.safe = false;
                c.done = true;
            }
            drop(c);
            ready.notify_all();
            true
        };
        std::thread::scope(|s| {
            let (first, rest) = pipelines.split_at_mut(1);
            for p in rest {
                s.spawn(|| while take(p) {});
            }
            for k in 0..n {
                let (m, ready) = &chunks[k];
                // While chunk k is not ready, this thread parses the chunks left rather than
                // wait; with none left, it waits.
                let c = loop {
                    if let Some(c) = m.try_lock().ok().filter(|c| c.done) {
                        break c;
                    }
                    if !take(&mut first[0]) {
                        let mut c = unpoisoned(m.lock());
                        while !c.done {
                            c = unpoisoned(ready.wait(c));
                        }
                        break c;
                    }
                };
                if !c.safe {
                    return cuts[k];
                }
                for i in 0..c.out.items.len() {
                    f(c.out.outcome(arena, i));
                }
                d.add(&c.delta);
            }
            ends.len()
        })
    }
}

/// A chunk (its guard, or itself through `&mut`), also after a panic elsewhere (the results of a
/// finished parse stand).
fn unpoisoned<G>(r: LockResult<G>) -> G {
    r.unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_plan_is_one_thread_for_small_inputs_and_paced_for_large() {
        let one = Plan {
            threads: 1,
            paced: true,
        };
        assert_eq!(plan(0, Some(AUTO_MIN_BYTES - 1)), one);
        assert_eq!(plan(0, None), one);
        assert_eq!(
            plan(0, Some(AUTO_MIN_BYTES)),
            Plan {
                threads: threads(0),
                paced: true,
            }
        );
        // As asked, whatever the size.
        assert_eq!(
            plan(3, Some(1)),
            Plan {
                threads: 3,
                paced: false,
            }
        );
    }

    /// One thread first, then several, then the faster way but for every 8th batch.
    #[test]
    fn pace_tries_both_then_takes_the_faster_and_looks_again() {
        let mut p = Pace::default();
        let mut ways = Vec::new();
        for _ in 0..18 {
            let par = p.parallel();
            ways.push(par);
            // Several threads take half the time per byte.
            p.note(par, 1000, if par { 0.5 } else { 1.0 });
        }
        let want: Vec<bool> = (0..18u64)
            .map(|b| b == 1 || (b > 1 && b % EXPLORE_EVERY != EXPLORE_EVERY - 1))
            .collect();
        assert_eq!(ways, want);
        // Now one thread is faster: it takes over at once.
        p.note(false, 1000, 0.1);
        p.note(true, 1000, 2.0);
        assert!(!p.parallel());
    }
}
