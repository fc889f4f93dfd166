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

use super::linebuf::Event;
use super::Ingest;

/// The start of an input is sampled for its order in steps of this many bytes…
const SAMPLE_STEP: usize = 1 << 20;

/// …until it holds this many timed lines…
const SAMPLE_TIMED: usize = 32;

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

/// Reads the start of `r` (see [`SAMPLE_TIMED`]) into `sample`, each whole line sampled once;
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
        if ended || sampler.timed >= SAMPLE_TIMED || sample.len() >= SAMPLE_MAX {
            return Ok(sampler.newest_first());
        }
    }
}

/// `--once` on a path: a regular file whose start is newest-first is read backwards; a FIFO
/// (`<(tac log)`, `mkfifo`) is sampled and read as a stream (see [`read_stream`]). `false`
/// when the path is left to the forward reader ([`super::file`]): a file in order, one that
/// cannot be opened (the forward reader reports why), anything else.
pub fn read_once(path: &std::path::Path, ing: &mut Ingest, max_line: usize) -> bool {
    use std::os::unix::fs::FileTypeExt;
    // A FIFO is opened here too (the forward reader would wait for its writer the same way).
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(meta) = f.metadata() else {
        return false;
    };
    if meta.file_type().is_fifo() {
        read_stream(&mut f, ing, max_line);
        // Up at the end, as a file read to its end is.
        ing.set_up(true);
        return true;
    }
    // Only a regular file is sampled and read again from its end.
    let mut head = Vec::new();
    if !meta.is_file() || !sample(&mut f, ing, &mut head).unwrap_or(false) {
        return false;
    }
    // Up at the end, as a file read forwards to its end is.
    backwards(&mut f, meta.len(), ing, max_line);
    true
}

/// Reads a newest-first input from its end (see [`read_backwards`]), saying so; a read error
/// is counted and ends it.
fn backwards(f: &mut std::fs::File, len: u64, ing: &mut Ingest, max_line: usize) {
    tracing::info!(source = %ing.source(), "the input's line times go backwards (newest first): reading it from its end");
    ing.set_up(true);
    if let Err(e) = read_backwards(f, len, ing, max_line) {
        ing.count_error();
        tracing::warn!(source = %ing.source(), "reading failed: {e}; treating it as the end of the input");
    }
}

/// Reads `r` (of `len` bytes) line by line from its end into `ing`, as [`super::file`] reads
/// forwards: bytes counted, a line over `max_line` skipped and counted once, a last line
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

/// Reads a stream (stdin, a FIFO) to its end into `ing`: in order, or (newest-first, see
/// [`Sampler`]) spooled to an unlinked temporary file and read from its end.
pub fn read_stream(input: &mut dyn Read, ing: &mut Ingest, max_line: usize) {
    let mut head = Vec::new();
    let sampled = sample(input, ing, &mut head);
    if sampled.as_ref().is_ok_and(|&newest| newest) {
        match spool(&head, input) {
            Ok((mut f, len)) => {
                backwards(&mut f, len, ing, max_line);
                ing.set_up(false);
                return;
            }
            Err(e) => {
                tracing::warn!(source = %ing.source(), "the input is newest-first but could not be spooled to a temporary file ({e}): reading it as it comes");
            }
        }
    }
    let mut chained = io::Cursor::new(head).chain(input);
    super::stdin::read_to_end(&mut chained, ing, max_line);
}

/// Copies `head` and the rest of `input` to a temporary file removed at once (it lives while
/// open); returns it and its length.
fn spool(head: &[u8], input: &mut dyn Read) -> io::Result<(std::fs::File, u64)> {
    use std::io::Write;
    let dir = std::env::temp_dir();
    let name = dir.join(format!(
        ".sglang-log-exporter-{}-{}",
        std::process::id(),
        super::now_unix().to_bits()
    ));
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&name)?;
    let _ = std::fs::remove_file(&name);
    f.write_all(head)?;
    let len = head.len() as u64 + io::copy(input, &mut f)?;
    Ok((f, len))
}
