//! The journal export format (`journalctl -o export`, systemd's "Journal Export Format"): one
//! entry per run of lines, ended by an empty line; each field is `NAME=value` on a line, or,
//! for a value that is not printable text (a newline, a colour code, invalid UTF-8), `NAME`
//! alone on a line followed by the value's length as a little-endian 64-bit number, the value's
//! bytes and a newline. An entry begins with `__CURSOR=` (or `__REALTIME_TIMESTAMP=`, where
//! journalctl was told to print fewer fields). `journalctl -o export | ssh host
//! sglang-log-exporter -` is a way to ship a journal.
//!
//! Of each entry, `MESSAGE` is the log line (its first value, where a field repeats),
//! `__REALTIME_TIMESTAMP` (µs) is its time and the writer fields ([`crate::source::writer`]: the
//! unit, a container, host, identifier and PID) say who wrote it; the other fields are skipped. The
//! decoder is fed the input's lines (split at `\n`; a `\r` before it is dropped from field lines)
//! and joins the lines of a binary value back together, so a value holding newlines is read whole.
//!
//! The format is recognised by an entry's first line, so an ordinary log that holds a line such
//! as `__CURSOR=x` must not lose what follows: a line that is neither a field nor the empty
//! line ends the entry (cut, counted as incomplete) and is read as a line of its own. A new
//! `__CURSOR=` inside an entry (a lost empty line) ends the one before and starts another.

use crate::source::journal_export::field_name;
use crate::source::writer::{Field as WriterField, Fields};

/// What one input line did to the entry being read.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The line is not part of an export entry: frame it as any other line (an entry it cut
    /// short is counted by [`Export::take_cut`]).
    NotExport,
    /// The line was a field (or part of one); the entry goes on.
    Held,
    /// The entry ended: read it with [`Export::take`].
    Ended,
    /// The entry ended but could not be read whole.
    Broken(Broken),
}

/// Why an entry could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// A binary length that does not match its bytes: incomplete.
    Cut,
    /// A value past the line limit (its bytes skipped, never read in part).
    Oversized,
    /// Already counted where it happened (a line the line reader skipped as too long).
    Counted,
}

/// What an ended entry said: its `MESSAGE` (`None`: it had none), writer fields and
/// `__REALTIME_TIMESTAMP` (Unix seconds).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Entry {
    /// The log line.
    pub message: Option<Vec<u8>>,
    /// Who wrote it (see [`crate::source::writer`]).
    pub writer: Fields,
    /// The entry's time, Unix seconds.
    pub realtime: Option<f64>,
}

/// Which field a value is kept for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Message,
    Writer(WriterField),
    Realtime,
    Other,
}

impl Field {
    fn of(name: &[u8]) -> Field {
        match name {
            b"MESSAGE" => Field::Message,
            b"__REALTIME_TIMESTAMP" => Field::Realtime,
            _ => WriterField::of(name).map_or(Field::Other, Field::Writer),
        }
    }
}

/// A binary value being joined from lines.
#[derive(Debug)]
struct Binary {
    field: Field,
    /// The length prefix, then the value's bytes (lines joined with the `\n` that split
    /// them); a value past the limit keeps only its prefix and counts the rest in `skipped`.
    bytes: Vec<u8>,
    skipped: u64,
    /// The longest value kept.
    limit: u64,
    /// A first piece was added.
    started: bool,
    /// NULs skipped by the line reader were added: the next line continues them directly.
    glued: bool,
}

impl Binary {
    /// Adds the `\n` at which the line reader split the value (none before the first piece).
    fn split(&mut self) {
        if self.started {
            self.push(b"\n");
        }
        self.started = true;
    }

    /// Adds bytes of the value; past the limit they are counted, not kept.
    fn push(&mut self, b: &[u8]) {
        let prefix = 8usize.saturating_sub(self.bytes.len()).min(b.len());
        self.bytes.extend_from_slice(&b[..prefix]);
        let rest = &b[prefix..];
        if self.bytes.len() == 8 && self.len() > self.limit {
            self.skipped += rest.len() as u64;
        } else {
            self.bytes.extend_from_slice(rest);
        }
    }

    /// The value's length from its prefix (0 until the prefix is whole).
    fn len(&self) -> u64 {
        self.bytes
            .get(..8)
            .map_or(0, |p| u64::from_le_bytes(p.try_into().unwrap_or_default()))
    }

    /// Value bytes seen so far.
    fn have(&self) -> u64 {
        (self.bytes.len().saturating_sub(8)) as u64 + self.skipped
    }
}

/// The entry being read (bounded: a value past `max_line` bytes is skipped, not kept).
#[derive(Debug, Default)]
pub struct Export {
    open: bool,
    broken: Option<Broken>,
    binary: Option<Binary>,
    message: Option<Vec<u8>>,
    writer: Fields,
    realtime: Option<f64>,
    /// Entries cut short by a line that is no field, not yet counted.
    cut: u64,
    max_line: usize,
}

/// Whether `line` starts an entry.
fn starts_entry(line: &[u8]) -> bool {
    line.starts_with(b"__CURSOR=") || line.starts_with(b"__REALTIME_TIMESTAMP=")
}

impl Export {
    /// A decoder whose values are at most `max_line` bytes.
    pub fn new(max_line: usize) -> Export {
        Export {
            max_line,
            ..Export::default()
        }
    }

    /// Whether an entry is being read (its lines must reach [`Export::feed`]).
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// `n` NUL bytes the line reader skipped at the start of the next line (it takes them for
    /// a copytruncate hole): inside a binary value they are its bytes. `false` when no binary
    /// value is being read.
    pub fn nuls(&mut self, n: usize) -> bool {
        let Some(b) = self.binary.as_mut() else {
            return false;
        };
        b.split();
        b.push(&vec![0; n]);
        b.glued = true;
        true
    }

    /// The line reader skipped a line as too long (and counted it): inside an entry, the entry
    /// cannot be read whole (a binary value's bytes are lost, its end unknown). `true` when an
    /// entry was open.
    pub fn oversized(&mut self) -> bool {
        if !self.open {
            return false;
        }
        self.binary = None;
        self.broken = Some(Broken::Counted);
        true
    }

    /// Feeds one input line (without its `\n`).
    pub fn feed(&mut self, line: &[u8]) -> Step {
        if let Some(b) = self.binary.as_mut() {
            if !std::mem::take(&mut b.glued) {
                b.split();
            }
            b.push(line);
            self.binary_progress();
            return Step::Held;
        }
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !self.open {
            if !starts_entry(line) {
                return Step::NotExport;
            }
            self.open = true;
        } else if line.starts_with(b"__CURSOR=") {
            // The empty line before it was lost: the entry before ends here.
            return self.end();
        }
        if line.is_empty() {
            self.open = false;
            return self.end();
        }
        match memchr::memchr(b'=', line) {
            Some(eq) if field_name(&line[..eq]) => {
                self.keep(Field::of(&line[..eq]), &line[eq + 1..])
            }
            _ if field_name(line) => {
                self.binary = Some(Binary {
                    field: Field::of(line),
                    bytes: Vec::new(),
                    skipped: 0,
                    limit: self.max_line as u64,
                    started: false,
                    glued: false,
                })
            }
            _ => {
                // Not this format after all: the entry is cut, the line is a line.
                self.clear();
                self.open = false;
                self.cut += 1;
                return Step::NotExport;
            }
        }
        Step::Held
    }

    /// After a piece of a binary value: the value is whole once the length prefix and that
    /// many bytes are held; a line that runs past them breaks the entry.
    fn binary_progress(&mut self) {
        let Some(b) = self.binary.as_ref() else {
            return;
        };
        if b.bytes.len() < 8 || b.have() < b.len() {
            return;
        }
        let b = self.binary.take().expect("checked above");
        if b.have() > b.len() {
            // A length that does not match the bytes: skip to the entry's end.
            self.broken.get_or_insert(Broken::Cut);
        } else if b.skipped > 0 || b.len() > b.limit {
            self.broken.get_or_insert(Broken::Oversized);
        } else {
            self.keep(b.field, &b.bytes[8..]);
        }
    }

    fn keep(&mut self, field: Field, value: &[u8]) {
        match field {
            Field::Message if value.len() > self.max_line => {
                self.broken.get_or_insert(Broken::Oversized);
            }
            // A field may have several values: the first is the message.
            Field::Message if self.message.is_none() => self.message = Some(value.to_vec()),
            Field::Message => {}
            Field::Writer(f) => self.writer.set(f, value),
            Field::Realtime => {
                // An unsigned count of µs: anything else is no time.
                self.realtime = std::str::from_utf8(value)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                    .map(|us| us as f64 / 1e6);
            }
            Field::Other => {}
        }
    }

    /// The entry ends: [`Step::Ended`] with its fields kept for [`Export::take`], or
    /// [`Step::Broken`] with them dropped. `open` is the caller's (a `__CURSOR=` that ends an
    /// entry opens the next).
    fn end(&mut self) -> Step {
        match self.broken.take() {
            Some(why) => {
                self.clear();
                Step::Broken(why)
            }
            None => Step::Ended,
        }
    }

    fn clear(&mut self) {
        self.binary = None;
        self.broken = None;
        self.message = None;
        self.writer.clear();
        self.realtime = None;
    }

    /// The ended entry; clears it.
    pub fn take(&mut self) -> Entry {
        let out = Entry {
            message: self.message.take(),
            writer: std::mem::take(&mut self.writer),
            realtime: self.realtime.take(),
        };
        self.clear();
        out
    }

    /// Hands back the writer fields of an entry taken, so the next entries reuse their
    /// buffers (one allocation per field per entry otherwise).
    pub fn recycle(&mut self, mut writer: Fields) {
        writer.clear();
        self.writer = writer;
    }

    /// Entries cut short by a line that was no field since the last call (to count as
    /// incomplete).
    pub fn take_cut(&mut self) -> u64 {
        std::mem::take(&mut self.cut)
    }

    /// Drops an entry the input ended inside; whether there was one.
    pub fn drop_open(&mut self) -> bool {
        let open = self.open;
        self.open = false;
        self.clear();
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`decode`] saw: an entry, a broken one, or a line read as a line.
    #[derive(Debug, PartialEq)]
    enum Got {
        Entry(Box<Entry>),
        Broken(Broken),
        Line(String),
    }

    fn msg(m: &str) -> Got {
        Got::Entry(Box::new(Entry {
            message: Some(m.as_bytes().to_vec()),
            ..Entry::default()
        }))
    }

    /// Feeds `input` split at `\n` as the line reader does (limit `max`); returns what each
    /// line gave and the entries counted as cut.
    fn decode_with(input: &[u8], max: usize) -> (Vec<Got>, u64) {
        let mut e = Export::new(max);
        let mut out = Vec::new();
        let body = input.strip_suffix(b"\n").unwrap_or(input);
        for line in body.split(|&c| c == b'\n') {
            match e.feed(line) {
                Step::Ended => out.push(Got::Entry(Box::new(e.take()))),
                Step::Broken(why) => out.push(Got::Broken(why)),
                Step::NotExport => out.push(Got::Line(String::from_utf8_lossy(line).into())),
                Step::Held => {}
            }
        }
        (out, e.take_cut())
    }

    /// [`decode_with`] for input that is all export entries.
    fn decode(input: &[u8]) -> Vec<Result<Entry, ()>> {
        let (got, cut) = decode_with(input, 1 << 20);
        assert_eq!(cut, 0);
        got.into_iter()
            .map(|g| match g {
                Got::Entry(e) => Ok(*e),
                Got::Broken(_) => Err(()),
                Got::Line(l) => panic!("not export: {l:?}"),
            })
            .collect()
    }

    fn binary(name: &str, value: &[u8]) -> Vec<u8> {
        let mut v = format!("{name}\n").into_bytes();
        v.extend_from_slice(&(value.len() as u64).to_le_bytes());
        v.extend_from_slice(value);
        v.push(b'\n');
        v
    }

    #[test]
    fn text_and_binary_fields() {
        let mut input = b"__CURSOR=s=1;i=2\n__REALTIME_TIMESTAMP=1780480663400276\n_SYSTEMD_UNIT=sglang-decode.service\nMESSAGE=[2026-06-03 09:57:43 TP0] hello\nPRIORITY=6\n\n".to_vec();
        // A message with a newline, a colour code and invalid UTF-8 is binary; so is a length
        // whose bytes hold a newline (10) and a NUL.
        let odd = b"[2026-06-03 09:57:44 TP0] a\nb \x1b[0m \xff";
        input.extend_from_slice(b"__CURSOR=s=1;i=3\n__REALTIME_TIMESTAMP=1780480664000000\n");
        input.extend_from_slice(&binary("MESSAGE", odd));
        input.extend_from_slice(&binary("_SYSTEMD_UNIT", b"u.service"));
        input.extend_from_slice(b"\n");
        let ten = b"0123456\n89";
        input.extend_from_slice(b"__CURSOR=x\n");
        input.extend_from_slice(&binary("MESSAGE", ten));
        input.extend_from_slice(b"\n");
        let got = decode(&input);
        assert_eq!(got.len(), 3);
        let entry = |m: &[u8], unit: Option<&str>, realtime| {
            let mut writer = Fields::default();
            if let Some(u) = unit {
                writer.set(WriterField::Unit, u.as_bytes());
            }
            Entry {
                message: Some(m.to_vec()),
                writer,
                realtime,
            }
        };
        let hello = b"[2026-06-03 09:57:43 TP0] hello";
        let unit = Some("sglang-decode.service");
        assert_eq!(got[0], Ok(entry(hello, unit, Some(1780480663.400276))));
        assert_eq!(
            got[1],
            Ok(entry(odd, Some("u.service"), Some(1780480664.0)))
        );
        assert_eq!(got[2], Ok(entry(ten, None, None)));
    }

    #[test]
    fn a_length_that_does_not_match_breaks_only_its_entry() {
        let mut input = b"__CURSOR=a\nMESSAGE\n".to_vec();
        input.extend_from_slice(&3u64.to_le_bytes());
        input.extend_from_slice(b"toolong\n\n__CURSOR=b\nMESSAGE=ok\n\n");
        let got = decode(&input);
        let ok = Entry {
            message: Some(b"ok".to_vec()),
            ..Entry::default()
        };
        assert_eq!(got, [Err(()), Ok(ok)]);
        // A value past the limit.
        let mut e = Export::new(4);
        for l in [&b"__CURSOR=a"[..], b"MESSAGE=12345"] {
            assert_eq!(e.feed(l), Step::Held);
        }
        assert_eq!(e.feed(b""), Step::Broken(Broken::Oversized));
        // Plain lines outside an entry are not this format.
        assert_eq!(e.feed(b"[2026-06-03 09:57:43 TP0] x"), Step::NotExport);
        assert_eq!(e.feed(b"MESSAGE=x"), Step::NotExport);
        assert_eq!(e.feed(b""), Step::NotExport);
    }

    /// An ordinary log holding a line that starts like an entry loses nothing after it: the
    /// first line that is no field ends the entry (counted as cut) and is read as a line.
    #[test]
    fn a_plain_line_ends_an_entry_and_is_read() {
        let input = b"__CURSOR=my app cursor\n[2026-06-03 10:00:00 TP0] Decode batch, x\nnext\n\
            __REALTIME_TIMESTAMP=1\nPRIORITY=6\nnot a field\n__CURSOR=a\nMESSAGE=ok\n\n";
        let (got, cut) = decode_with(input, 100);
        assert_eq!(
            got,
            [
                Got::Line("[2026-06-03 10:00:00 TP0] Decode batch, x".into()),
                Got::Line("next".into()),
                Got::Line("not a field".into()),
                msg("ok"),
            ]
        );
        assert_eq!(cut, 2);
    }

    /// A lost empty line: the next `__CURSOR=` ends the entry before; a repeated MESSAGE keeps
    /// its first value; CRLF endings are endings.
    #[test]
    fn a_cursor_starts_the_next_entry_and_crlf_is_an_ending() {
        let input = b"__CURSOR=a\nMESSAGE=one\nMESSAGE=again\n__CURSOR=b\nMESSAGE=two\n\n\
            __CURSOR=c\r\nMESSAGE=three\r\n\r\n";
        let (got, cut) = decode_with(input, 100);
        assert_eq!(got, [msg("one"), msg("two"), msg("three")]);
        assert_eq!(cut, 0);
    }

    /// A binary value past the limit is skipped whole (its lines counted, not read as lines)
    /// and the entry after it is read; a line the line reader skipped as too long breaks only
    /// its entry (counted there).
    #[test]
    fn values_past_the_limit_are_skipped_whole() {
        let big: Vec<u8> = b"line one\n".repeat(20);
        let mut input = b"__CURSOR=a\n".to_vec();
        input.extend_from_slice(&binary("MESSAGE", &big));
        input.extend_from_slice(b"\n__CURSOR=b\nMESSAGE=after\n\n");
        let (got, cut) = decode_with(&input, 64);
        assert_eq!(got, [Got::Broken(Broken::Oversized), msg("after")]);
        assert_eq!(cut, 0);
        let mut e = Export::new(64);
        e.feed(b"__CURSOR=a");
        e.feed(b"MESSAGE");
        assert!(e.oversized());
        assert_eq!(e.feed(b""), Step::Broken(Broken::Counted));
        assert!(!e.oversized());
    }

    /// The line reader skips NULs at a line start (a copytruncate hole) and reports them: in a
    /// binary value they are put back, so lengths whose bytes hold `\n` then NULs read right.
    #[test]
    fn nuls_the_line_reader_skipped_are_put_back_in_a_binary_value() {
        for len in [10usize, 266, 2560, 2570] {
            let value: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            let mut input = b"__CURSOR=a\n".to_vec();
            input.extend_from_slice(&binary("MESSAGE", &value));
            input.extend_from_slice(b"\n");
            let mut e = Export::new(1 << 20);
            let mut got = None;
            for line in input[..input.len() - 1].split(|&c| c == b'\n') {
                let n = line.iter().take_while(|&&c| c == 0).count();
                if n > 0 {
                    assert!(e.nuls(n));
                }
                if e.feed(&line[n..]) == Step::Ended {
                    got = e.take().message;
                }
            }
            assert_eq!(got.as_deref(), Some(&value[..]), "{len}");
        }
        // Outside a binary value, NULs are no concern of the decoder.
        assert!(!Export::new(10).nuls(3));
    }

    #[test]
    fn an_entry_cut_by_the_end_of_the_input_is_dropped() {
        let mut e = Export::new(100);
        e.feed(b"__CURSOR=a");
        e.feed(b"MESSAGE=x");
        assert!(e.is_open());
        assert!(e.drop_open());
        assert!(!e.is_open());
        assert!(!e.drop_open());
    }
}
