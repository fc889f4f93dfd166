//! A byte-stream reader of the journal export format, for the `journalctl -o export` children of
//! the journald source ([`super::journald`]).
//!
//! The format (systemd's `JOURNAL_EXPORT_FORMATS` documentation, "Journal Export Format"): an
//! entry is a run of fields ended by an empty line; a field is either `NAME=value\n` (a value of
//! printable text) or, for any other value (a newline, a control code, invalid UTF-8), `NAME\n`
//! followed by the value's length as a 64-bit little-endian number, the value's bytes and `\n`.
//! journalctl writes `__CURSOR`, `__REALTIME_TIMESTAMP`, `__MONOTONIC_TIMESTAMP` and `_BOOT_ID`
//! first in every entry, then the fields asked for (`--output-fields` is honoured by
//! journalctl 252's export output).
//!
//! Unlike [`crate::pipeline::journal_lines`], which is fed the lines of any input (a file may hold
//! export entries among ordinary lines), this reader knows its input is journalctl's: it follows
//! the lengths exactly, so a binary value is read whole wherever the reads split it, and it hands
//! out whole entries (one entry is one line of the log) with their cursor. No maintained crate
//! reads this format from a stream (the `systemd` crate binds libsystemd's journal API, not its
//! export output), and the reader is small.
//!
//! Memory is bounded: a value longer than the line limit is skipped (its bytes counted past, never
//! held) and its entry reported as [`Item::Oversized`]; the read buffer holds at most one text
//! line of that limit plus one read.

use std::io::{self, Read};

use super::writer::{Field as WriterField, Fields};

/// Whether `name` is a journal field name (`[A-Z0-9_]+`, not starting with a digit).
pub fn field_name(name: &[u8]) -> bool {
    !name.is_empty()
        && !name[0].is_ascii_digit()
        && name
            .iter()
            .all(|&c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
}

/// Size of one read.
const READ_SIZE: usize = 64 * 1024;

/// The longest field name kept while reading a line (systemd allows 64 bytes).
const NAME_SLACK: usize = 256;

/// The fields of an entry that are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Cursor,
    Realtime,
    Writer(WriterField),
    Invocation,
    Message,
    Other,
}

impl Field {
    fn of(name: &[u8]) -> Field {
        match name {
            b"__CURSOR" => Field::Cursor,
            b"__REALTIME_TIMESTAMP" => Field::Realtime,
            b"_SYSTEMD_INVOCATION_ID" => Field::Invocation,
            b"MESSAGE" => Field::Message,
            _ => WriterField::of(name).map_or(Field::Other, Field::Writer),
        }
    }
}

/// One whole entry, as read (values are the raw bytes; a field given twice keeps its first
/// value).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `__CURSOR` (empty when the entry had none).
    pub cursor: Vec<u8>,
    /// `__REALTIME_TIMESTAMP`: µs since the Unix epoch, as text.
    pub realtime: Option<Vec<u8>>,
    /// Who wrote it: `_SYSTEMD_UNIT` and the other fields of [`super::writer`].
    pub writer: Fields,
    /// `_SYSTEMD_INVOCATION_ID`.
    pub invocation: Option<Vec<u8>>,
    /// `MESSAGE`.
    pub message: Option<Vec<u8>>,
}

impl Entry {
    /// The cursor as text (`None` when missing or not UTF-8).
    pub fn cursor(&self) -> Option<&str> {
        std::str::from_utf8(&self.cursor)
            .ok()
            .filter(|c| !c.is_empty())
    }

    /// The entry's time in Unix seconds (`None` when missing or not an unsigned count of µs).
    pub fn realtime_s(&self) -> Option<f64> {
        let t = std::str::from_utf8(self.realtime.as_deref()?).ok()?;
        t.parse::<u64>().ok().map(|us| us as f64 / 1e6)
    }

    fn slot(&mut self, f: Field) -> Option<&mut Vec<u8>> {
        let slot = match f {
            Field::Cursor => return Some(&mut self.cursor),
            Field::Writer(w) => return Some(self.writer.slot(w)),
            Field::Realtime => &mut self.realtime,
            Field::Invocation => &mut self.invocation,
            Field::Message => &mut self.message,
            Field::Other => return None,
        };
        Some(slot.get_or_insert_with(Vec::new))
    }

    /// Whether field `f` already has a value (its later values are not kept).
    fn has(&self, f: Field) -> bool {
        match f {
            Field::Cursor => !self.cursor.is_empty(),
            Field::Realtime => self.realtime.is_some(),
            Field::Writer(w) => self.writer.has(w),
            Field::Invocation => self.invocation.is_some(),
            Field::Message => self.message.is_some(),
            Field::Other => true,
        }
    }
}

/// What the reader hands out.
#[derive(Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// A whole entry.
    Entry(&'a Entry),
    /// An entry with a value longer than the line limit: skipped whole (its cursor, if read, is
    /// in the entry; no other field is).
    Oversized(&'a Entry),
    /// An entry that broke the format (a line that is no field, a binary value not followed by
    /// `\n`): skipped from there to the next empty line (its cursor, if read, is in the entry).
    Broken(&'a Entry),
}

/// Where the reader is inside an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// At the start of a line: a field, or the empty line that ends the entry.
    LineStart,
    /// Inside a text line longer than the limit: skipped to its `\n`.
    SkipLine,
    /// Reading the 8 bytes of a binary value's length (`got` of them so far).
    BinLen { field: Field, got: usize },
    /// Reading a binary value's bytes (`left` to go; `keep`: into the entry).
    BinData { field: Field, left: u64, keep: bool },
    /// After a binary value: its `\n`.
    BinEnd,
    /// After a format error: lines skipped to the empty line that ends the entry.
    Resync,
}

/// How an entry in progress has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Health {
    Whole,
    Oversized,
    Broken,
}

/// The reader (see the module docs).
#[derive(Debug)]
pub struct Reader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_line: usize,
    at: At,
    health: Health,
    /// A field of the entry was read (an empty line then ends it; before, it is skipped).
    open: bool,
    entry: Entry,
    len: [u8; 8],
}

impl Reader {
    /// A reader whose kept values are at most `max_line` bytes.
    pub fn new(max_line: usize) -> Reader {
        Reader {
            buf: vec![0; READ_SIZE],
            start: 0,
            end: 0,
            max_line: max_line.max(1),
            at: At::LineStart,
            health: Health::Whole,
            open: false,
            entry: Entry::default(),
            len: [0; 8],
        }
    }

    /// Whether the input so far ended inside an entry (at its end: an entry cut short, never
    /// handed out).
    pub fn in_entry(&self) -> bool {
        self.open || self.end > self.start || self.at != At::LineStart
    }

    /// Reads once from `r` and hands every entry now whole to `f`. Returns the bytes read (0 at
    /// the end of the input).
    ///
    /// # Errors
    /// The read error (`Interrupted` is retried).
    pub fn fill<R: Read + ?Sized>(
        &mut self,
        r: &mut R,
        mut f: impl FnMut(Item<'_>),
    ) -> io::Result<usize> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < READ_SIZE / 2 {
            let want = (self.end + READ_SIZE).min(self.max_line + NAME_SLACK + READ_SIZE);
            if want > self.buf.len() {
                self.buf.resize(want, 0);
            }
        }
        let n = super::linebuf::read_retrying(r, &mut self.buf[self.end..])?;
        self.end += n;
        self.drain(&mut f);
        Ok(n)
    }

    /// Parses what the buffer holds, as far as it goes.
    fn drain(&mut self, f: &mut impl FnMut(Item<'_>)) {
        while self.start < self.end {
            let held = &self.buf[self.start..self.end];
            match self.at {
                At::LineStart | At::Resync | At::SkipLine => {
                    let Some(nl) = memchr::memchr(b'\n', held) else {
                        if held.len() > self.max_line + NAME_SLACK {
                            // A text line past the limit: its bytes are not held.
                            self.open = true;
                            if self.at == At::LineStart {
                                self.at = At::SkipLine;
                                self.mark(Health::Oversized);
                            }
                            self.start = self.end;
                        }
                        return;
                    };
                    let line_end = self.start + nl;
                    let from = std::mem::replace(&mut self.start, line_end + 1);
                    match self.at {
                        At::SkipLine => self.at = At::LineStart,
                        At::Resync if nl == 0 => self.end_entry(f),
                        At::Resync => {}
                        _ => self.line(from, line_end, f),
                    }
                }
                At::BinLen { field, got } => {
                    let take = (8 - got).min(held.len());
                    self.len[got..got + take].copy_from_slice(&held[..take]);
                    self.start += take;
                    if got + take < 8 {
                        self.at = At::BinLen {
                            field,
                            got: got + take,
                        };
                        continue;
                    }
                    let left = u64::from_le_bytes(self.len);
                    let mut keep = field != Field::Other && !self.entry.has(field);
                    if left > self.max_line as u64 {
                        if keep {
                            self.mark(Health::Oversized);
                        }
                        keep = false;
                    }
                    self.at = At::BinData { field, left, keep };
                }
                At::BinData { field, left, keep } => {
                    let take = (left.min(held.len() as u64)) as usize;
                    if keep && self.health == Health::Whole {
                        let (b, s) = (&self.buf[self.start..self.start + take], &mut self.entry);
                        if let Some(slot) = s.slot(field) {
                            slot.extend_from_slice(b);
                        }
                    }
                    self.start += take;
                    let left = left - take as u64;
                    self.at = if left == 0 {
                        At::BinEnd
                    } else {
                        At::BinData { field, left, keep }
                    };
                }
                At::BinEnd => {
                    if held[0] == b'\n' {
                        self.start += 1;
                        self.at = At::LineStart;
                    } else {
                        // A length that does not match the bytes.
                        self.mark(Health::Broken);
                        self.at = At::Resync;
                    }
                }
            }
        }
    }

    /// A whole line at a line start: `buf[from..to]` (without its `\n`).
    fn line(&mut self, from: usize, to: usize, f: &mut impl FnMut(Item<'_>)) {
        /// What the line is.
        enum Kind {
            End,
            Skip,
            NextCursor,
            Text(Field, usize),
            Binary(Field),
            NoField,
        }
        let line = &self.buf[from..to];
        let kind = if line.is_empty() {
            Kind::End
        } else if !self.open && line.starts_with(b"-- cursor: ") {
            // `--show-cursor`'s last line, between entries.
            Kind::Skip
        } else if self.open && line.starts_with(b"__CURSOR=") && self.entry.has(Field::Cursor) {
            Kind::NextCursor
        } else {
            match memchr::memchr(b'=', line) {
                Some(eq) if field_name(&line[..eq]) => Kind::Text(Field::of(&line[..eq]), eq),
                None if field_name(line) => Kind::Binary(Field::of(line)),
                _ => Kind::NoField,
            }
        };
        match kind {
            Kind::End if self.open => self.end_entry(f),
            Kind::End | Kind::Skip => {}
            Kind::NextCursor => {
                // The empty line before it was lost: the entry before is cut here.
                self.mark(Health::Broken);
                self.end_entry(f);
                self.line(from, to, f);
            }
            Kind::Text(field, eq) => {
                self.open = true;
                if field == Field::Other || self.entry.has(field) {
                    return;
                }
                if to - (from + eq + 1) > self.max_line {
                    self.mark(Health::Oversized);
                } else if self.health == Health::Whole {
                    let (v, e) = (&self.buf[from + eq + 1..to], &mut self.entry);
                    if let Some(slot) = e.slot(field) {
                        slot.extend_from_slice(v);
                    }
                }
            }
            Kind::Binary(field) => {
                self.open = true;
                self.at = At::BinLen { field, got: 0 };
            }
            Kind::NoField => {
                self.open = true;
                self.mark(Health::Broken);
                self.at = At::Resync;
            }
        }
    }

    /// Notes what went wrong with the entry; its values but the cursor are dropped.
    fn mark(&mut self, h: Health) {
        if self.health == Health::Whole {
            self.health = h;
            let cursor = std::mem::take(&mut self.entry.cursor);
            self.entry.writer.clear();
            self.entry = Entry {
                cursor,
                writer: std::mem::take(&mut self.entry.writer),
                ..Entry::default()
            };
        }
    }

    fn end_entry(&mut self, f: &mut impl FnMut(Item<'_>)) {
        match self.health {
            Health::Whole => f(Item::Entry(&self.entry)),
            Health::Oversized => f(Item::Oversized(&self.entry)),
            Health::Broken => f(Item::Broken(&self.entry)),
        }
        // The writer fields' buffers serve the next entry.
        self.entry.writer.clear();
        self.entry = Entry {
            writer: std::mem::take(&mut self.entry.writer),
            ..Entry::default()
        };
        self.health = Health::Whole;
        self.open = false;
        self.at = At::LineStart;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the reader handed out, as owned values: `Ok` entries, `Err` oversized (`true`) or
    /// broken (`false`) with their cursor.
    type Got = Result<Entry, (bool, Vec<u8>)>;

    /// Reads `input` in reads of `chunk` bytes; returns the items and whether it ended inside an
    /// entry.
    fn read(input: &[u8], chunk: usize, max: usize) -> (Vec<Got>, bool) {
        let mut r = Reader::new(max);
        let mut out = Vec::new();
        let mut src = Chunks(input, chunk);
        loop {
            let n = r
                .fill(&mut src, |i| {
                    out.push(match i {
                        Item::Entry(e) => Ok(e.clone()),
                        Item::Oversized(e) => Err((true, e.cursor.clone())),
                        Item::Broken(e) => Err((false, e.cursor.clone())),
                    })
                })
                .unwrap();
            if n == 0 {
                return (out, r.in_entry());
            }
        }
    }

    /// A reader that returns at most `.1` bytes per read.
    struct Chunks<'a>(&'a [u8], usize);

    impl Read for Chunks<'_> {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(self.1).min(b.len());
            b[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn binary(name: &str, value: &[u8]) -> Vec<u8> {
        let mut v = format!("{name}\n").into_bytes();
        v.extend_from_slice(&(value.len() as u64).to_le_bytes());
        v.extend_from_slice(value);
        v.push(b'\n');
        v
    }

    fn head(cursor: &str) -> Vec<u8> {
        format!("__CURSOR={cursor}\n__REALTIME_TIMESTAMP=1780481270372041\n__MONOTONIC_TIMESTAMP=1\n_BOOT_ID=b\n_SYSTEMD_UNIT=sglang-decode.service\n_SYSTEMD_INVOCATION_ID=0c9d\n").into_bytes()
    }

    fn whole(cursor: &str, message: &[u8]) -> Entry {
        let mut writer = Fields::default();
        writer.set(WriterField::Unit, b"sglang-decode.service");
        Entry {
            cursor: cursor.into(),
            realtime: Some(b"1780481270372041".to_vec()),
            writer,
            invocation: Some(b"0c9d".to_vec()),
            message: Some(message.to_vec()),
        }
    }

    /// A text MESSAGE, a MESSAGE with a newline and one of invalid UTF-8 (binary fields), a
    /// binary field not kept, and a length whose bytes hold `\n` (10) and NULs: the same
    /// entries whatever the size of the reads (every split point of the length and the value).
    #[test]
    fn text_and_binary_values_at_every_read_split() {
        let mut input = head("s=1;i=1");
        input.extend_from_slice(b"MESSAGE=[2026-06-03 10:07:50 DP0 TP0] text\nPRIORITY=6\n\n");
        input.extend(head("s=1;i=2"));
        input.extend(binary("MESSAGE", b"first\nsecond"));
        input.extend(binary("OTHER_BIN", b"x\n\ny"));
        input.extend_from_slice(b"\n");
        input.extend(head("s=1;i=3"));
        input.extend(binary("MESSAGE", b"bad \xff\xfe utf-8"));
        input.extend_from_slice(b"\n");
        input.extend(head("s=1;i=4"));
        input.extend(binary("MESSAGE", b"0123456\n89"));
        input.extend_from_slice(b"\n");
        let want: Vec<Got> = vec![
            Ok(whole("s=1;i=1", b"[2026-06-03 10:07:50 DP0 TP0] text")),
            Ok(whole("s=1;i=2", b"first\nsecond")),
            Ok(whole("s=1;i=3", b"bad \xff\xfe utf-8")),
            Ok(whole("s=1;i=4", b"0123456\n89")),
        ];
        for chunk in [1, 2, 3, 7, 8, 9, 13, 64, 1 << 20] {
            assert_eq!(
                read(&input, chunk, 1 << 20),
                (want.clone(), false),
                "{chunk}"
            );
        }
        let e = &want[0].as_ref().unwrap();
        assert_eq!(e.cursor(), Some("s=1;i=1"));
        assert_eq!(e.realtime_s(), Some(1780481270.372041));
    }

    /// A binary value far longer than one read (a 64 KiB buffer), crossing many reads.
    #[test]
    fn a_binary_value_across_many_reads() {
        let value: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let mut input = head("c");
        input.extend(binary("MESSAGE", &value));
        input.extend_from_slice(b"\n");
        for chunk in [4096, 65_535, 1 << 20] {
            let (got, open) = read(&input, chunk, 1 << 20);
            assert!(!open);
            assert_eq!(got, [Ok(whole("c", &value))], "{chunk}");
        }
    }

    /// The input ends inside an entry (the child died): nothing of it is handed out, and the
    /// reader says it ended inside one; the entries before are whole.
    #[test]
    fn an_entry_cut_by_the_end_is_not_handed_out() {
        let mut input = head("a");
        input.extend_from_slice(b"MESSAGE=one\n\n");
        let whole_len = input.len();
        input.extend(head("b"));
        input.extend(binary("MESSAGE", b"two\nlines"));
        input.extend_from_slice(b"\n");
        for cut in whole_len + 1..input.len() {
            let (got, open) = read(&input[..cut], 5, 1 << 20);
            assert_eq!(got, [Ok(whole("a", b"one"))], "{cut}");
            assert!(open, "{cut}");
        }
        assert!(!read(&input[..whole_len], 5, 1 << 20).1);
    }

    /// Values past the limit (text or binary, in one read or many) skip their entry whole,
    /// handing out its cursor; the reader holds no more than the limit; the next entry is read.
    #[test]
    fn values_past_the_limit_skip_their_entry() {
        let big = vec![b'x'; 5000];
        let mut input = head("t");
        input.extend_from_slice(b"MESSAGE=");
        input.extend_from_slice(&big);
        input.extend_from_slice(b"\n\n");
        input.extend(head("b"));
        input.extend(binary("MESSAGE", &big));
        input.extend_from_slice(b"\n");
        input.extend(head("ok"));
        input.extend_from_slice(b"MESSAGE=after\n\n");
        for chunk in [100, 4096, 1 << 20] {
            let (got, open) = read(&input, chunk, 1024);
            assert_eq!(
                got,
                [
                    Err((true, b"t".to_vec())),
                    Err((true, b"b".to_vec())),
                    Ok(whole("ok", b"after"))
                ],
                "{chunk}"
            );
            assert!(!open);
        }
        // A text line longer than the buffer may hold is never held whole.
        let mut r = Reader::new(1024);
        let mut long = b"__CURSOR=z\nMESSAGE=".to_vec();
        long.extend(vec![b'y'; 10 << 20]);
        let mut src = Chunks(&long, 1 << 20);
        while r.fill(&mut src, |_| panic!("nothing whole")).unwrap() > 0 {}
        assert!(
            r.buf.len() <= 1024 + NAME_SLACK + READ_SIZE,
            "{}",
            r.buf.len()
        );
        assert!(r.in_entry());
    }

    /// A binary length that does not match its bytes, or a line that is no field, breaks only
    /// its entry; a lost empty line ends the entry before at the next cursor; `--show-cursor`'s
    /// line and empty lines between entries are no entries.
    #[test]
    fn broken_entries_are_skipped_to_their_end() {
        let mut input = b"\n".to_vec();
        input.extend(head("a"));
        input.extend_from_slice(b"MESSAGE\n");
        input.extend_from_slice(&3u64.to_le_bytes());
        input.extend_from_slice(b"toolong\nMESSAGE=x\n\n");
        input.extend(head("b"));
        input.extend_from_slice(b"not a field\nMESSAGE=y\n\n");
        input.extend(head("c"));
        input.extend_from_slice(b"MESSAGE=lost its end\n");
        input.extend(head("d"));
        input.extend_from_slice(b"MESSAGE=ok\n\n-- cursor: d\n");
        for chunk in [1, 6, 1 << 20] {
            let (got, open) = read(&input, chunk, 1 << 20);
            assert_eq!(
                got,
                [
                    Err((false, b"a".to_vec())),
                    Err((false, b"b".to_vec())),
                    Err((false, b"c".to_vec())),
                    Ok(whole("d", b"ok")),
                ],
                "{chunk}"
            );
            assert!(!open);
        }
    }

    /// A repeated field keeps its first value; an entry without MESSAGE or cursor is handed out
    /// as it is.
    #[test]
    fn first_values_and_missing_fields() {
        let input = b"__CURSOR=a\nMESSAGE=one\nMESSAGE=two\n_SYSTEMD_UNIT=u1\n_SYSTEMD_UNIT=u2\n\nPRIORITY=6\n\n";
        let (got, _) = read(input, 1 << 20, 100);
        let mut writer = Fields::default();
        writer.set(WriterField::Unit, b"u1");
        let first = Entry {
            cursor: b"a".to_vec(),
            message: Some(b"one".to_vec()),
            writer,
            ..Entry::default()
        };
        assert_eq!(got, [Ok(first), Ok(Entry::default())]);
        assert_eq!(Entry::default().cursor(), None);
        assert_eq!(Entry::default().realtime_s(), None);
    }
}
