//! Newest-first inputs: an export written latest line first (`logcli --direction backward`, a
//! log platform's download, `tac`). Read as it stands, its end would be its oldest line, and a
//! restart's `server_args` dump (its first line, read last) would wipe what came after it.
//! So an input read to its end is first sampled: if its line times go backwards, it is read
//! backwards, last line first, and ends in the state the same lines in order give: the state
//! at the latest time, with the same counters.
//!
//! Reading backwards is by blocks from the end, so memory stays bounded by the block and the
//! line limit, whatever the file's size.

use std::io::{self, Read, Seek, SeekFrom};

use super::Ingest;
use crate::source::linebuf::Event;

/// The start of an input is sampled for its order in steps of this many bytes (a busy log
/// shows its order in its first step: a sampled line is read twice)…
const SAMPLE_STEP: usize = 64 << 10;

/// …until a writer's rank has moved in time this many times (forward or back): lines of one
/// second say nothing of the order, and a busy server prints thousands in its last second
/// (SGLang's prefix has whole seconds), which a reversed log holds first…
const SAMPLE_MOVES: usize = 32;

/// …or this many bytes (a long traceback or banner before the first stats line).
const SAMPLE_MAX: usize = 16 << 20;

/// Reads the start of an input for its order: each whole line once, through its own
/// pipeline and time resolver (the ingest's state is not touched).
#[derive(Debug)]
pub struct Sampler {
    pipeline: super::Pipeline,
    times: crate::parse::prefix::TimeResolver,
    delta: super::SourceDelta,
    /// The last time of each writer's rank (hashed: unit, engine, node, ranks).
    last: std::collections::HashMap<u64, f64>,
    /// Steps from one timed line of a writer's rank to its next that go back in time.
    back: usize,
    /// Steps that go forward.
    forward: usize,
    /// Timed lines.
    timed: usize,
    /// The first timed line is a `server_args` dump: a process's first line, so the input
    /// starts at its beginning.
    starts_with_dump: bool,
    /// Records of several lines were met (journal export entries, container records in
    /// pieces): their lines cannot be reversed one by one.
    multiline: bool,
}

impl Sampler {
    /// A sampler reading with `pipeline` and `times` (copies of the ingest's).
    pub fn new(pipeline: super::Pipeline, times: crate::parse::prefix::TimeResolver) -> Sampler {
        Sampler {
            pipeline,
            times,
            delta: super::SourceDelta::default(),
            last: std::collections::HashMap::new(),
            back: 0,
            forward: 0,
            timed: 0,
            starts_with_dump: false,
            multiline: false,
        }
    }

    /// Reads `lines`, whole lines each ended by `\n`.
    fn feed(&mut self, lines: &[u8]) {
        use std::hash::{Hash, Hasher};
        let Some(body) = lines.strip_suffix(b"\n") else {
            return;
        };
        for raw in body.split(|&b| b == b'\n') {
            if let super::Outcome::Parsed {
                rec,
                realtime,
                unit,
                node,
                user,
            } = self.pipeline.run(raw, &mut self.delta)
            {
                let time = realtime.or_else(|| rec.time.and_then(|t| self.times.resolve(t)));
                if let Some(t) = time {
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    (unit, rec.engine, node, user, rec.ranks).hash(&mut h);
                    if self.timed == 0 {
                        self.starts_with_dump = rec.class == crate::record::Class::ServerArgs;
                    }
                    self.timed += 1;
                    match self.last.insert(h.finish(), t) {
                        Some(prev) if t < prev => self.back += 1,
                        Some(prev) if t > prev => self.forward += 1,
                        _ => {}
                    }
                }
            }
            self.multiline |= !self.pipeline.framer_idle();
        }
    }

    /// Newest first: one rank's scheduler prints its lines in time order, so steps are counted
    /// per writer and rank (ranks of one log, writers of one stream, printed out of step with
    /// each other, are never compared). It goes back at least four times as often as forward
    /// (a clock stepped back once is outweighed by a forward log's steps), and it does not
    /// start with a process's first line.
    fn newest_first(&self) -> bool {
        !self.multiline && !self.starts_with_dump && self.back >= 1 && self.back >= 4 * self.forward
    }
}

/// Reads the start of `r` (see [`SAMPLE_MOVES`]) into `sample`, each whole line sampled once;
/// whether it is newest-first.
///
/// # Errors
/// A read error of `r` (what was read is in `sample`).
fn sample(r: &mut dyn Read, ing: &Ingest, sample: &mut Vec<u8>) -> io::Result<bool> {
    let mut sampler = ing.sampler();
    let mut fed = 0;
    loop {
        let before = sample.len();
        r.take(SAMPLE_STEP as u64).read_to_end(sample)?;
        let whole = memchr::memrchr(b'\n', &sample[fed..]).map_or(fed, |i| fed + i + 1);
        sampler.feed(&sample[fed..whole]);
        fed = whole;
        let ended = sample.len() - before < SAMPLE_STEP;
        if ended || sampler.back + sampler.forward >= SAMPLE_MOVES || sample.len() >= SAMPLE_MAX {
            return Ok(sampler.newest_first());
        }
    }
}

/// `--once` on a path: a regular file whose start is newest-first is read backwards; a FIFO
/// (`<(tac log)`, `mkfifo`) is sampled and read as a stream (see [`read_stream`]). `false`
/// when the path is left to the forward reader ([`crate::source::file`]): a file in order, one that
/// cannot be opened (the forward reader reports why), anything else.
///
/// # Errors
/// A newest-first FIFO that could not be spooled (see [`read_stream`]).
pub fn read_once(
    path: &std::path::Path,
    ing: &mut Ingest,
    max_line: usize,
) -> Result<bool, SpoolError> {
    use std::os::unix::fs::FileTypeExt;
    // A FIFO is opened here too (the forward reader would wait for its writer the same way).
    let Ok(mut f) = std::fs::File::open(path) else {
        return Ok(false);
    };
    let Ok(meta) = f.metadata() else {
        return Ok(false);
    };
    if meta.file_type().is_fifo() {
        read_stream(&mut f, ing, max_line)?;
        // Up at the end, as a file read to its end is.
        ing.set_up(true);
        return Ok(true);
    }
    // Only a regular file is sampled and read again from its end.
    let mut head = Vec::new();
    if !meta.is_file() || !sample(&mut f, ing, &mut head).unwrap_or(false) {
        return Ok(false);
    }
    // Up at the end, as a file read forwards to its end is.
    backwards(&mut f, meta.len(), ing, max_line);
    Ok(true)
}

/// Reads a newest-first input from its end (see [`read_backwards`]), saying so; a read error
/// is counted and ends it.
fn backwards<R: Read + Seek>(f: &mut R, len: u64, ing: &mut Ingest, max_line: usize) {
    tracing::info!(source = %ing.source(), "the input's line times go backwards (newest first): reading it from its end");
    ing.set_up(true);
    if let Err(e) = read_backwards(f, len, ing, max_line) {
        ing.count_error();
        tracing::warn!(source = %ing.source(), "reading failed: {e}; treating it as the end of the input");
    }
}

/// Reads `r` (of `len` bytes) line by line from its end into `ing`, as [`crate::source::file`]
/// reads forwards: bytes counted, a line over `max_line` skipped and counted once, a last line
/// without `\n` (read first here) counted as incomplete and not parsed.
///
/// # Errors
/// A read or seek error of `r`; the lines read before it were applied.
pub fn read_backwards<R: Read + Seek>(
    r: &mut R,
    len: u64,
    ing: &mut Ingest,
    max_line: usize,
) -> io::Result<()> {
    const BLOCK: u64 = 1 << 20;
    let mut pos = len;
    // The bytes after the earliest newline seen so far: the end of a line whose start is
    // still before `pos`.
    let mut tail: Vec<u8> = Vec::new();
    // The line being gathered grew past the limit: its bytes are dropped up to its start.
    let mut skipping = false;
    // The input's last line ends without `\n`: cut short.
    let mut last = true;
    let mut block = Vec::new();
    while pos > 0 {
        let start = pos.saturating_sub(BLOCK);
        block.resize((pos - start) as usize, 0);
        r.seek(SeekFrom::Start(start))?;
        r.read_exact(&mut block)?;
        ing.count_bytes(block.len());
        pos = start;
        let mut end = block.len();
        while let Some(nl) = memchr::memrchr(b'\n', &block[..end]) {
            let piece = &block[nl + 1..end];
            emit(ing, piece, &mut tail, &mut skipping, &mut last, max_line);
            end = nl;
        }
        // No newline left in this block: the rest belongs to a line that starts earlier.
        if !skipping {
            let mut t = block[..end].to_vec();
            t.extend_from_slice(&tail);
            tail = t;
            if tail.len() > max_line {
                tail.clear();
                skipping = true;
            }
        }
    }
    // The first line of the input (maybe empty), or, without any newline, the cut last one.
    if len > 0 {
        emit(ing, &[], &mut tail, &mut skipping, &mut last, max_line);
    }
    ing.input_ended();
    ing.flush();
    Ok(())
}

/// Hands one whole line (`piece` before `tail`) to `ing`, or its skip.
fn emit(
    ing: &mut Ingest,
    piece: &[u8],
    tail: &mut Vec<u8>,
    skipping: &mut bool,
    last: &mut bool,
    max_line: usize,
) {
    let cut = std::mem::replace(last, false);
    if std::mem::replace(skipping, false) {
        tail.clear();
        ing.event(Event::Oversized);
        return;
    }
    let line: &[u8] = if tail.is_empty() {
        piece
    } else {
        let mut t = piece.to_vec();
        t.append(tail);
        *tail = t;
        tail
    };
    if cut {
        // The input ends without `\n`: nothing at all, or a line cut short.
        if !line.is_empty() {
            ing.event(Event::Incomplete);
        }
    } else if line.len() > max_line {
        ing.event(Event::Oversized);
    } else {
        ing.line(line);
    }
    tail.clear();
}

/// The most of a newest-first stream held in memory when no temporary file can hold it
/// (`$TMPDIR` missing, read-only or full): past it the input is refused, never read in the
/// wrong order.
pub const MEMORY_SPOOL_MAX: usize = 256 << 20;

/// A newest-first stream that could not be spooled: it is neither read in order (it would end in
/// its oldest line's state, repro 25) nor partly.
#[derive(Debug)]
pub struct SpoolError {
    /// The directory of the temporary file.
    pub dir: std::path::PathBuf,
    /// Why the temporary file failed.
    pub file: io::Error,
    /// Bytes the stream held at least.
    pub bytes: u64,
}

impl std::fmt::Display for SpoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the input is newest-first and must be read from its end, but it could not be spooled \
             to a temporary file in {} ({}), and at {} bytes or more it is past the {} MiB held in \
             memory instead: set TMPDIR to a writable directory with room for it",
            self.dir.display(),
            self.file,
            self.bytes,
            MEMORY_SPOOL_MAX >> 20
        )
    }
}

impl std::error::Error for SpoolError {}

/// Reads a stream (stdin, a FIFO) to its end into `ing`: in order, or (newest-first, see
/// [`Sampler`]) spooled to an unlinked temporary file, else to memory up to
/// [`MEMORY_SPOOL_MAX`], and read from its end.
///
/// # Errors
/// A newest-first stream that fits in neither: nothing of it is applied.
pub fn read_stream(
    input: &mut dyn Read,
    ing: &mut Ingest,
    max_line: usize,
) -> Result<(), SpoolError> {
    let dir = std::env::temp_dir();
    read_stream_within(input, ing, max_line, &dir, MEMORY_SPOOL_MAX)
}

/// [`read_stream`] spooling to `dir`, else to at most `max_mem` bytes of memory.
fn read_stream_within(
    input: &mut dyn Read,
    ing: &mut Ingest,
    max_line: usize,
    dir: &std::path::Path,
    max_mem: usize,
) -> Result<(), SpoolError> {
    let mut head = Vec::new();
    let sampled = sample(input, ing, &mut head);
    if sampled.as_ref().is_ok_and(|&newest| newest) {
        let (spooled, len) = spool(head, input, ing, dir, max_mem)?;
        match spooled {
            Spooled::File(mut f) => backwards(&mut f, len, ing, max_line),
            Spooled::Memory(mut m) => backwards(&mut m, len, ing, max_line),
        }
        ing.set_up(false);
        return Ok(());
    }
    let mut chained = io::Cursor::new(head).chain(input);
    crate::source::stdin::read_to_end(&mut chained, ing, max_line);
    Ok(())
}

/// Where a newest-first stream was spooled.
enum Spooled {
    /// An unlinked temporary file.
    File(std::fs::File),
    /// Memory, where no file could hold it.
    Memory(io::Cursor<Vec<u8>>),
}

/// Copies `head` and the rest of `input` to a temporary file removed at once (it lives while
/// open), else (the file cannot be made, or a write fails: what it holds is taken back) to
/// memory up to `max_mem` bytes; returns it and its length. A read error of `input` ends the
/// input there (counted and warned, as every reader does).
///
/// # Errors
/// Neither holds it.
fn spool(
    head: Vec<u8>,
    input: &mut dyn Read,
    ing: &mut Ingest,
    dir: &std::path::Path,
    max_mem: usize,
) -> Result<(Spooled, u64), SpoolError> {
    let fail = |file, bytes| SpoolError {
        dir: dir.to_path_buf(),
        file,
        bytes,
    };
    let mut read_failed = |e: io::Error| {
        ing.count_error();
        tracing::warn!(source = %ing.source(), "reading failed: {e}; treating it as the end of the input");
    };
    let (mut mem, file) = match temp_file(dir) {
        Ok(mut f) => match fill(&mut f, &head, input, &mut read_failed) {
            Ok(len) => return Ok((Spooled::File(f), len)),
            Err((e, written, rest)) => {
                // What the file took is read back: nothing read is lost.
                let mut mem = Vec::new();
                let back = f
                    .seek(SeekFrom::Start(0))
                    .and_then(|_| (&mut f).take(written).read_to_end(&mut mem));
                if back.is_err() || mem.len() as u64 != written {
                    return Err(fail(e, written + rest.len() as u64));
                }
                mem.extend_from_slice(&rest);
                (mem, e)
            }
        },
        Err(e) => (head, e),
    };
    let mut buf = vec![0u8; 64 << 10];
    loop {
        if mem.len() > max_mem {
            return Err(fail(file, mem.len() as u64));
        }
        match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => mem.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                read_failed(e);
                break;
            }
        }
    }
    tracing::warn!(source = %ing.source(), bytes = mem.len(), "the input is newest-first and could not be spooled to a temporary file in {} ({file}): held in memory instead", dir.display());
    let len = mem.len() as u64;
    Ok((Spooled::Memory(io::Cursor::new(mem)), len))
}

/// A new temporary file in `dir`, removed at once (it lives while open).
fn temp_file(dir: &std::path::Path) -> io::Result<std::fs::File> {
    let name = dir.join(format!(
        ".sglang-log-exporter-{}-{}",
        std::process::id(),
        crate::clock::now_unix().to_bits()
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&name)?;
    let _ = std::fs::remove_file(&name);
    Ok(f)
}

/// Writes `head` and the rest of `input` to `f`; its length. A read error of `input` goes to
/// `read_failed` and ends it.
///
/// # Errors
/// A write error, the bytes `f` holds, and the bytes read but not written.
fn fill(
    f: &mut std::fs::File,
    head: &[u8],
    input: &mut dyn Read,
    read_failed: &mut dyn FnMut(io::Error),
) -> Result<u64, (io::Error, u64, Vec<u8>)> {
    use std::io::Write;
    let mut written = 0u64;
    let put = |f: &mut std::fs::File, mut data: &[u8], written: &mut u64| {
        while !data.is_empty() {
            match f.write(data) {
                Ok(0) => return Err((io::ErrorKind::WriteZero.into(), data.to_vec())),
                Ok(n) => {
                    *written += n as u64;
                    data = &data[n..];
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err((e, data.to_vec())),
            }
        }
        Ok(())
    };
    put(f, head, &mut written).map_err(|(e, rest)| (e, written, rest))?;
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match input.read(&mut buf) {
            Ok(0) => return Ok(written),
            Ok(n) => put(f, &buf[..n], &mut written).map_err(|(e, rest)| (e, written, rest))?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                read_failed(e);
                return Ok(written);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::parse::patterns::Patterns;
    use crate::parse::prefix::TimeResolver;
    use crate::parse::Parser;
    use crate::pipeline::Pipeline;
    use crate::state::{lock, Shared, State, StateConfig};

    /// 40 stats lines newest-first: the latest says 39 running, the oldest 0.
    fn reversed() -> String {
        (0..40)
            .rev()
            .map(|i| {
                format!(
                    "[2026-11-30 10:00:{i:02} TP0] Decode batch, #running-req: {i}, #token: 10, \
                     token usage: 0.10, #queue-req: 0\n"
                )
            })
            .collect()
    }

    fn ingest() -> (Shared, Ingest) {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let state = State::shared(pat.clone(), StateConfig::default());
        let ing = Ingest::new(
            Pipeline::new(Parser::new(pat), 1 << 20, None),
            state.clone(),
            "-",
            "s",
            TimeResolver::new(jiff::tz::TimeZone::UTC, None),
        );
        (state, ing)
    }

    /// The running requests of the only rank, and the lines read.
    fn read(state: &Shared) -> (f64, u64) {
        let s = lock(state);
        let id = s.patterns().metric_by_id("num_running_reqs").unwrap() as usize;
        let srv = s.servers().values().next().unwrap();
        (
            srv.ranks.values().next().unwrap().values[id],
            s.sources["-"].lines,
        )
    }

    const MISSING: &str = "/nonexistent-dir-of-repro-25";

    /// Repro 25: a newest-first stream whose spool to `$TMPDIR` failed was read as it came and
    /// ended in its oldest line's state (0 running, not 39), exit 0. Where no file can be made
    /// it is held in memory and read from its end: the latest line's state, every line counted.
    #[test]
    fn a_newest_first_stream_without_a_temporary_directory_is_spooled_in_memory() {
        let text = reversed();
        let (state, mut ing) = ingest();
        let missing = std::path::Path::new(MISSING);
        read_stream_within(&mut text.as_bytes(), &mut ing, 1 << 20, missing, 1 << 20).unwrap();
        assert_eq!(read(&state), (39.0, 40));
        // And the same through a temporary file (no memory at all).
        let dir = tempfile::tempdir().unwrap();
        let (state, mut ing) = ingest();
        read_stream_within(&mut text.as_bytes(), &mut ing, 1 << 20, dir.path(), 0).unwrap();
        assert_eq!(read(&state), (39.0, 40));
    }

    /// ... and past the memory bound it is refused, nothing of it applied: never the oldest
    /// line's state as the answer.
    #[test]
    fn a_newest_first_stream_past_the_memory_bound_is_refused() {
        let text = reversed();
        let (state, mut ing) = ingest();
        let missing = std::path::Path::new(MISSING);
        let e =
            read_stream_within(&mut text.as_bytes(), &mut ing, 1 << 20, missing, 1000).unwrap_err();
        assert!(e.bytes > 1000, "{e}");
        assert!(e.to_string().contains("set TMPDIR"), "{e}");
        assert!(lock(&state).servers().is_empty());
    }

    /// A write that fails (a full `$TMPDIR`, here `/dev/full`) hands back what it did not
    /// write, so the memory spool goes on from there: nothing read is lost.
    #[test]
    fn a_spool_write_that_fails_hands_back_what_it_did_not_write() {
        let Ok(mut f) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
            return;
        };
        let mut input: &[u8] = b"rest";
        let (_, written, rest) = fill(&mut f, b"head", &mut input, &mut |_| {}).unwrap_err();
        assert_eq!((written, &rest[..]), (0, &b"head"[..]));
    }
}
