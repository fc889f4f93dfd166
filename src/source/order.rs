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

/// How much of the start of an input is sampled for its order.
pub const SAMPLE: usize = 1 << 20;

/// Lines of the sample whose time must go backwards (against the next timed line) before an
/// input is read as newest-first: a few out-of-order lines of a forward log never are enough.
const MIN_STEPS: usize = 3;

/// Whether the timed lines of `sample` (the start of an input, cut at its last whole line) go
/// backwards: more than [`MIN_STEPS`] steps back, and at least four times as many steps back
/// as forward. Inputs of multi-line records (journal export entries, container records in
/// pieces) are never taken as newest-first: their lines cannot be reversed one by one.
pub fn newest_first(ing: &Ingest, sample: &[u8]) -> bool {
    let end = memchr::memrchr(b'\n', sample).map_or(0, |i| i + 1);
    let (times, multiline) = ing.sample_times(&sample[..end]);
    if multiline {
        return false;
    }
    let (mut back, mut forward) = (0usize, 0usize);
    for w in times.windows(2) {
        if w[1] < w[0] {
            back += 1;
        } else if w[1] > w[0] {
            forward += 1;
        }
    }
    back >= MIN_STEPS && back >= 4 * forward
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

/// Reads the file at `path` backwards into `ing` when it is newest-first; `false` (nothing
/// read) when it is not, or cannot be opened (the forward reader then reports why).
pub fn read_file_if_newest_first(
    path: &std::path::Path,
    ing: &mut Ingest,
    max_line: usize,
) -> bool {
    // Only a regular file is sampled: opening a FIFO would wait for its writer, and what the
    // sample read of it could not be read again.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(meta) = f.metadata() else {
        return false;
    };
    if !meta.is_file() {
        return false;
    }
    let mut sample = Vec::new();
    if (&mut f)
        .take(SAMPLE as u64)
        .read_to_end(&mut sample)
        .is_err()
        || !newest_first(ing, &sample)
    {
        return false;
    }
    tracing::info!(source = %ing.source(), "the input's line times go backwards (newest first): reading it from its end");
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64());
    ing.set_up(true);
    ing.set_fallback_time(mtime);
    // Up at the end, as a file read forwards to its end is.
    if let Err(e) = read_backwards(&mut f, meta.len(), ing, max_line) {
        ing.count_error();
        tracing::warn!(source = %ing.source(), "reading failed: {e}; treating it as the end of the input");
    }
    true
}

/// Reads stdin to its end into `ing`: in order, or (newest-first, see [`newest_first`])
/// spooled to an unlinked temporary file and read from its end.
pub fn read_stdin(input: &mut dyn Read, ing: &mut Ingest, max_line: usize) {
    let mut sample = Vec::new();
    let sampled = input.take(SAMPLE as u64).read_to_end(&mut sample);
    if sampled.is_ok() && newest_first(ing, &sample) {
        match spool(&sample, input) {
            Ok((mut f, len)) => {
                tracing::info!(source = %ing.source(), "the input's line times go backwards (newest first): reading it from its end");
                ing.set_up(true);
                if let Err(e) = read_backwards(&mut f, len, ing, max_line) {
                    ing.count_error();
                    tracing::warn!(source = %ing.source(), "reading failed: {e}; treating it as the end of the input");
                }
                ing.set_up(false);
                return;
            }
            Err(e) => {
                tracing::warn!(source = %ing.source(), "the input is newest-first but could not be spooled to a temporary file ({e}): reading it as it comes");
            }
        }
    }
    let mut chained = io::Cursor::new(sample).chain(input);
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
