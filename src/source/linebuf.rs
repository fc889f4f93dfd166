//! A read buffer that lends whole lines (bytes up to `\n`) without copying, keeps the partial tail
//! for the next read, and turns a line longer than the limit into a counted event instead of an
//! unbounded buffer.

use std::io::{self, Read};

/// Size of one read (at least 64 KiB, as the benchmarks want).
pub const READ_SIZE: usize = 64 * 1024;

/// The buffer of an idle reader: after a read that was small and left nothing held, the buffer
/// shrinks to this (a followed file that gets a line now and then holds 4 KiB, not 64), and
/// grows back to [`READ_SIZE`] reads as soon as a read fills it. A reader at rest with a
/// partial line keeps it in a buffer of this size too when it fits in half of one ([`LineBuf::rest`]).
pub const IDLE_SIZE: usize = 4 * 1024;

/// One read into `buf`, retried when interrupted.
///
/// # Errors
/// The read error.
pub fn read_retrying<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match r.read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

/// What the buffer hands out.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'a> {
    /// A whole line without its `\n`, and the stream position just past its `\n` (where
    /// reading resumes after it; set before the line is handed out, so a reader restarted after
    /// a failure on this line goes on with the next).
    Line(&'a [u8], u64),
    /// A run of NUL bytes where a line would start was skipped: how many of its bytes this
    /// read held (a run that goes on into the next read is reported once).
    NulRun(usize),
    /// A line longer than the limit was skipped (counted once per line).
    Oversized,
    /// The input ended (or was rotated or truncated) in the middle of a line: the bytes after the
    /// last `\n` are dropped, never parsed as a line. SGLang ends every record with `\n`, so
    /// this is a record still being written, or cut.
    Incomplete,
}

/// The line buffer. Memory stays under `max_line + READ_SIZE` bytes.
#[derive(Debug)]
pub struct LineBuf {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_line: usize,
    skipping: bool,
    /// Stream position of `buf[start]`.
    pos: u64,
    /// The last read ended inside a run of NULs (so its continuation is not a new run).
    in_nul_run: bool,
    /// Reads are small (an idle follower): the buffer is kept at [`IDLE_SIZE`].
    idle: bool,
}

impl LineBuf {
    /// A buffer that skips lines longer than `max_line` bytes.
    pub fn new(max_line: usize) -> LineBuf {
        LineBuf {
            buf: vec![0; READ_SIZE],
            start: 0,
            end: 0,
            max_line: max_line.max(1),
            skipping: false,
            pos: 0,
            in_nul_run: false,
            idle: false,
        }
    }

    /// Sets the stream position of the next byte read (after a seek).
    pub fn set_position(&mut self, pos: u64) {
        self.reset();
        self.pos = pos;
    }

    /// The stream position of the first byte not yet handed out as part of a line (the start of
    /// the partial line held, if any).
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Reads once from `r` and hands every whole line now in the buffer to `f`. Returns the
    /// number of bytes read (0 at end of input).
    ///
    /// # Errors
    /// The read error (`Interrupted` is retried).
    pub fn fill<R: Read + ?Sized>(
        &mut self,
        r: &mut R,
        mut f: impl FnMut(Event<'_>),
    ) -> io::Result<usize> {
        // Compaction: lines already handed out are dropped by moving the partial line to the
        // front, when nothing is left (a free move) or when less than half a read's room is
        // left after the data. Half a read: a full read's room would compact after almost every
        // read of a 64 KiB buffer; a smaller margin would make reads short (and many) before
        // the buffer is compacted or grown. The same margin decides growth just below.
        let read_size = if self.idle { IDLE_SIZE } else { READ_SIZE };
        if self.start > 0 && (self.end == self.start || self.buf.len() - self.end < read_size / 2) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < read_size / 2 {
            let want = (self.end + read_size).min(self.max_line + read_size);
            if want > self.buf.len() {
                self.buf.resize(want, 0);
            }
        }
        let n = read_retrying(r, &mut self.buf[self.end..])?;
        let room = self.buf.len() - self.end;
        let scan_from = self.end;
        self.end += n;
        self.drain(scan_from, &mut f);
        if n == room {
            // A full read: more is coming; reads of a full size again.
            self.idle = false;
        } else if n < IDLE_SIZE / 2 && self.start == self.end && self.buf.len() > IDLE_SIZE {
            // A small read that left nothing held: an idle reader keeps a small buffer.
            self.idle = true;
            self.start = 0;
            self.end = 0;
            self.buf = vec![0; IDLE_SIZE];
        }
        Ok(n)
    }

    fn drain(&mut self, mut scan_from: usize, f: &mut impl FnMut(Event<'_>)) {
        loop {
            if !self.skipping && self.buf.get(self.start) == Some(&0) && self.start < self.end {
                self.skip_nuls(f);
                scan_from = scan_from.max(self.start);
            }
            let Some(p) = memchr::memchr(b'\n', &self.buf[scan_from..self.end]) else {
                break;
            };
            let nl = scan_from + p;
            let start = std::mem::replace(&mut self.start, nl + 1);
            self.pos += (nl + 1 - start) as u64;
            if self.skipping {
                self.skipping = false;
            } else if nl - start > self.max_line {
                // Longer than the limit but whole in the buffer (its end came in the same read
                // as the part held): skipped all the same, so whether a line is read never
                // depends on where the reads split the input.
                f(Event::Oversized);
            } else {
                f(Event::Line(&self.buf[start..nl], self.pos));
            }
            // A NUL after this newline starts a new run.
            self.in_nul_run = false;
            scan_from = self.start;
        }
        if self.end - self.start > self.max_line {
            // Too long: drop what we hold and skip to the next newline.
            if !self.skipping {
                f(Event::Oversized);
            }
            self.skipping = true;
            self.pos += (self.end - self.start) as u64;
            self.start = 0;
            self.end = 0;
        }
    }

    /// Skips the NUL bytes at the start of the line held; reports the run once (a run that
    /// continues into the next read is one run).
    fn skip_nuls(&mut self, f: &mut impl FnMut(Event<'_>)) {
        let held = &self.buf[self.start..self.end];
        let n = held.iter().position(|&b| b != 0).unwrap_or(held.len());
        if n > 0 && !self.in_nul_run {
            f(Event::NulRun(n));
        }
        self.start += n;
        self.pos += n as u64;
        // Still NULs up to the end of what is held: the run may go on in the next read.
        self.in_nul_run = self.start == self.end;
    }

    /// Drops the partial last line (no `\n` yet), if any, reporting it as
    /// [`Event::Incomplete`]: at the end of a finished input, or when a file is rotated or
    /// truncated under us. Only whole lines are ever parsed.
    pub fn flush_partial(&mut self, mut f: impl FnMut(Event<'_>)) {
        if self.end > self.start && !self.skipping {
            f(Event::Incomplete);
        }
        self.reset();
    }

    /// Forgets any buffered bytes (the position moves past them).
    pub fn reset(&mut self) {
        self.pos += (self.end - self.start) as u64;
        self.start = 0;
        self.end = 0;
        self.skipping = false;
        self.in_nul_run = false;
    }

    /// At rest (the input read to its end for now): keeps a partial line of at most half
    /// [`IDLE_SIZE`] in a buffer of that size, as an idle reader without one has. Whether the
    /// buffer is now that small: `false` for a longer partial line, which a reader that can read
    /// it again ([`crate::source::file`]) lets go ([`LineBuf::release`]) rather than hold a
    /// buffer of up to `max_line` for each file whose writer stopped mid-line.
    pub fn rest(&mut self) -> bool {
        if self.buf.len() <= IDLE_SIZE {
            return true;
        }
        let held = self.end - self.start;
        if held > IDLE_SIZE / 2 {
            return false;
        }
        let mut buf = vec![0; IDLE_SIZE];
        buf[..held].copy_from_slice(&self.buf[self.start..self.end]);
        self.buf = buf;
        self.start = 0;
        self.end = held;
        self.idle = true;
        true
    }

    /// Forgets the partial line held without reporting it, and keeps a buffer of [`IDLE_SIZE`]:
    /// for a reader that reads the line again from its file when its `\n` comes
    /// ([`LineBuf::scan`] looks for it). [`LineBuf::position`] stays the line's start.
    pub fn release(&mut self) {
        self.start = 0;
        self.end = 0;
        self.skipping = false;
        self.in_nul_run = false;
        self.buf = vec![0; IDLE_SIZE];
        self.idle = true;
    }

    /// At rest with nothing held: lets the buffer go, so a followed file at rest holds no
    /// read buffer (256 of them: 1 MiB); the next read takes one of [`IDLE_SIZE`] again.
    pub fn shed(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.buf = Vec::new();
            self.idle = true;
        }
    }

    /// After [`LineBuf::release`]: reads once into the buffer and keeps nothing. Returns the
    /// bytes read (0 at end of input) and the index of the first `\n` among them.
    ///
    /// # Errors
    /// The read error (`Interrupted` is retried).
    pub fn scan<R: Read + ?Sized>(&mut self, r: &mut R) -> io::Result<(usize, Option<usize>)> {
        debug_assert_eq!(self.start, self.end, "scan holds nothing");
        if self.buf.is_empty() {
            // Let go at rest ([`LineBuf::shed`]): an empty buffer would read as the end.
            self.buf = vec![0; IDLE_SIZE];
        }
        let n = read_retrying(r, &mut self.buf)?;
        Ok((n, memchr::memchr(b'\n', &self.buf[..n])))
    }

    /// Whether the bytes held are the rest of a line over the limit (reported as
    /// [`Event::Oversized`] already, dropped when its `\n` comes).
    pub fn skipping(&self) -> bool {
        self.skipping
    }

    /// The longest line handed out.
    pub fn max_line(&self) -> usize {
        self.max_line
    }

    /// Bytes held for an incomplete line.
    pub fn pending(&self) -> usize {
        self.end - self.start
    }

    /// Bytes allocated for the buffer: at most `max_line + READ_SIZE` (checked by the fuzz
    /// harness, `tests/fuzz.rs`).
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(input: &[&[u8]], max: usize) -> (Vec<String>, usize) {
        let mut lb = LineBuf::new(max);
        let mut lines = Vec::new();
        let mut over = 0;
        for chunk in input {
            let mut r: &[u8] = chunk;
            while lb
                .fill(&mut r, |e| match e {
                    Event::Line(l, _) => lines.push(String::from_utf8_lossy(l).into_owned()),
                    Event::Oversized => over += 1,
                    Event::NulRun(_) => lines.push("<NUL>".into()),
                    Event::Incomplete => unreachable!("fill never reports a partial line"),
                })
                .unwrap()
                > 0
            {}
        }
        (lines, over)
    }

    #[test]
    fn a_partial_last_line_is_reported_not_handed_out() {
        let mut lb = LineBuf::new(100);
        let mut got = Vec::new();
        let mut r: &[u8] = b"whole\n#running-req: 3";
        while lb.fill(&mut r, |e| got.push(format!("{e:?}"))).unwrap() > 0 {}
        lb.flush_partial(|e| got.push(format!("{e:?}")));
        assert_eq!(got, ["Line([119, 104, 111, 108, 101], 6)", "Incomplete"]);
        assert_eq!(lb.pending(), 0);
    }

    #[test]
    fn partial_lines_join_across_reads() {
        let (l, o) = collect(&[b"ab", b"c\nde", b"f\n"], 100);
        assert_eq!(l, ["abc", "def"]);
        assert_eq!(o, 0);
    }

    #[test]
    fn oversized_line_is_skipped_once() {
        let long = vec![b'x'; 300_000];
        let mut input = b"ok1\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\nok2\n");
        let (l, o) = collect(&[&input], 1000);
        assert_eq!(l, ["ok1", "ok2"]);
        assert_eq!(o, 1);
    }

    #[test]
    fn nul_holes_are_skipped_not_glued() {
        // A 300 kB hole (larger than the limit) before the first line after a copytruncate,
        // split over reads, and a hole in the middle of the stream.
        let mut hole = vec![0u8; 300_000];
        hole.extend_from_slice(b"after\nmore\n");
        let (l, o) = collect(&[&hole[..100_000], &hole[100_000..], b"\0\0\0x\n"], 1000);
        assert_eq!(l, ["<NUL>", "after", "more", "<NUL>", "x"]);
        assert_eq!(o, 0);
    }

    #[test]
    fn positions_follow_the_lines() {
        let mut lb = LineBuf::new(100);
        lb.set_position(1000);
        let mut got = Vec::new();
        let mut r: &[u8] = b"ab\n\0\0cd\nef";
        while lb
            .fill(&mut r, |e| {
                if let Event::Line(l, p) = e {
                    got.push((String::from_utf8_lossy(l).into_owned(), p))
                }
            })
            .unwrap()
            > 0
        {}
        assert_eq!(got, [("ab".into(), 1003), ("cd".into(), 1008)]);
        assert_eq!(lb.position(), 1008, "the partial `ef` is not consumed");
    }
}

#[cfg(test)]
mod idle_tests {
    use super::*;

    /// An idle reader (small reads, nothing held) keeps a 4 KiB buffer; a read that fills it
    /// brings full-size reads back, and lines are the same either way.
    #[test]
    fn an_idle_reader_keeps_a_small_buffer() {
        let mut lb = LineBuf::new(1 << 20);
        let mut lines = Vec::new();
        let mut small: &[u8] = b"one\ntwo\n";
        lb.fill(&mut small, |e| {
            if let Event::Line(l, _) = e {
                lines.push(l.to_vec());
            }
        })
        .unwrap();
        assert_eq!(lb.capacity(), IDLE_SIZE);
        // A burst: 100 kB of lines, read in reads that fill the buffer.
        let burst: Vec<u8> = b"0123456789abcdef\n".repeat(6000);
        let mut r: &[u8] = &burst;
        while lb
            .fill(&mut r, |e| {
                if let Event::Line(l, _) = e {
                    lines.push(l.to_vec());
                }
            })
            .unwrap()
            > 0
        {}
        assert_eq!(lines.len(), 2 + 6000);
        assert!(lines[2..].iter().all(|l| l == b"0123456789abcdef"));
        // Idle again after the burst.
        assert_eq!(lb.capacity(), IDLE_SIZE);
    }
}
