//! The journal export format (`journalctl -o export`, systemd's "Journal Export Format"): one
//! entry per run of lines, ended by an empty line; each field is `NAME=value` on a line, or,
//! for a value that is not printable text (a newline, a colour code, invalid UTF-8), `NAME`
//! alone on a line followed by the value's length as a little-endian 64-bit number, the value's
//! bytes and a newline. An entry begins with `__CURSOR=` (or `__REALTIME_TIMESTAMP=`, where
//! journalctl was told to print fewer fields). `journalctl -o export | ssh host
//! sglang-log-exporter -` is a way to ship a journal.
//!
//! Of each entry, `MESSAGE` is the log line, `_SYSTEMD_UNIT` names the server and
//! `__REALTIME_TIMESTAMP` (µs) is its time; the other fields are skipped. The decoder is fed the
//! input's lines (split at `\n`) and joins the lines of a binary value back together, so a
//! value holding newlines is read whole.

/// What one input line did to the entry being read.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// The line is not part of an export entry: frame it as any other line.
    NotExport,
    /// The line was a field (or part of one); the entry goes on.
    Held,
    /// The entry ended (an empty line): read it with [`Export::message`].
    Ended,
    /// The entry ended but broke the format (a binary length that does not match, a value past
    /// the line limit): skipped, counted as incomplete.
    Broken,
}

/// What an ended entry said: its `MESSAGE` (`None`: it had none), `_SYSTEMD_UNIT` and
/// `__REALTIME_TIMESTAMP` (Unix seconds).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Entry {
    /// The log line.
    pub message: Option<Vec<u8>>,
    /// The systemd unit, as written (`sglang-decode.service`).
    pub unit: Option<String>,
    /// The entry's time, Unix seconds.
    pub realtime: Option<f64>,
}

/// Which field a value is kept for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Message,
    Unit,
    Realtime,
    Other,
}

impl Field {
    fn of(name: &[u8]) -> Field {
        match name {
            b"MESSAGE" => Field::Message,
            b"_SYSTEMD_UNIT" => Field::Unit,
            b"__REALTIME_TIMESTAMP" => Field::Realtime,
            _ => Field::Other,
        }
    }
}

/// A binary value being joined from lines.
#[derive(Debug)]
struct Binary {
    field: Field,
    /// The length prefix and value bytes so far (lines joined with the `\n` that split them).
    bytes: Vec<u8>,
    /// A first piece was added.
    started: bool,
    /// NULs skipped by the line reader were added: the next line continues them directly.
    glued: bool,
}

impl Binary {
    /// Adds the `\n` at which the line reader split the value (none before the first piece).
    fn split(&mut self) {
        if self.started {
            self.bytes.push(b'\n');
        }
        self.started = true;
    }
}

/// The entry being read (bounded: a value past `max_line` bytes breaks the entry).
#[derive(Debug, Default)]
pub struct Export {
    open: bool,
    broken: bool,
    binary: Option<Binary>,
    message: Option<Vec<u8>>,
    unit: Option<String>,
    realtime: Option<f64>,
    max_line: usize,
}

/// Whether `name` is a journal field name (`[A-Z0-9_]+`, not starting with a digit).
fn field_name(name: &[u8]) -> bool {
    !name.is_empty()
        && !name[0].is_ascii_digit()
        && name
            .iter()
            .all(|&c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_')
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
        b.bytes.resize(b.bytes.len() + n, 0);
        b.glued = true;
        true
    }

    /// Feeds one input line (without its `\n`).
    pub fn feed(&mut self, line: &[u8]) -> Step {
        if let Some(b) = self.binary.as_mut() {
            if !std::mem::take(&mut b.glued) {
                b.split();
            }
            b.bytes.extend_from_slice(line);
            return self.binary_progress();
        }
        if !self.open {
            if !(line.starts_with(b"__CURSOR=") || line.starts_with(b"__REALTIME_TIMESTAMP=")) {
                return Step::NotExport;
            }
            self.open = true;
        }
        if line.is_empty() {
            return self.end();
        }
        match memchr::memchr(b'=', line) {
            Some(eq) if field_name(&line[..eq]) => {
                let field = Field::of(&line[..eq]);
                self.keep(field, &line[eq + 1..]);
            }
            _ if field_name(line) => {
                self.binary = Some(Binary {
                    field: Field::of(line),
                    bytes: Vec::new(),
                    started: false,
                    glued: false,
                })
            }
            // Neither a field nor a binary field's name: not this format after all.
            _ => self.broken = true,
        }
        Step::Held
    }

    /// After a piece of a binary value: the value is whole once the length prefix and that
    /// many bytes are held; a line that runs past them breaks the entry.
    fn binary_progress(&mut self) -> Step {
        let Some(b) = self.binary.as_ref() else {
            return Step::Held;
        };
        if b.bytes.len() < 8 {
            return Step::Held;
        }
        let len = u64::from_le_bytes(b.bytes[..8].try_into().unwrap_or_default());
        let have = (b.bytes.len() - 8) as u64;
        if len > self.max_line as u64 || have > len {
            // A value past the limit, or a length that does not match the bytes: the entry
            // cannot be read; skip to its end.
            self.binary = None;
            self.broken = true;
            return Step::Held;
        }
        if have < len {
            return Step::Held;
        }
        if let Some(b) = self.binary.take() {
            self.keep(b.field, &b.bytes[8..]);
        }
        Step::Held
    }

    fn keep(&mut self, field: Field, value: &[u8]) {
        match field {
            Field::Message if value.len() > self.max_line => self.broken = true,
            Field::Message => self.message = Some(value.to_vec()),
            Field::Unit => {
                self.unit = Some(String::from_utf8_lossy(value).into_owned());
            }
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

    fn end(&mut self) -> Step {
        self.open = false;
        if std::mem::take(&mut self.broken) {
            self.clear();
            return Step::Broken;
        }
        Step::Ended
    }

    fn clear(&mut self) {
        self.binary = None;
        self.message = None;
        self.unit = None;
        self.realtime = None;
    }

    /// The ended entry; clears it.
    pub fn take(&mut self) -> Entry {
        let out = Entry {
            message: self.message.take(),
            unit: self.unit.take(),
            realtime: self.realtime.take(),
        };
        self.clear();
        out
    }

    /// Drops an entry the input ended inside; whether there was one.
    pub fn drop_open(&mut self) -> bool {
        let open = self.open;
        self.open = false;
        self.broken = false;
        self.clear();
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` split at `\n` as the line reader does; returns each ended entry.
    fn decode(input: &[u8]) -> Vec<Result<Entry, ()>> {
        let mut e = Export::new(1 << 20);
        let mut out = Vec::new();
        let body = input.strip_suffix(b"\n").unwrap_or(input);
        for line in body.split(|&c| c == b'\n') {
            match e.feed(line) {
                Step::Ended => out.push(Ok(e.take())),
                Step::Broken => out.push(Err(())),
                Step::NotExport => panic!("not export: {:?}", String::from_utf8_lossy(line)),
                Step::Held => {}
            }
        }
        out
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
        let entry = |m: &[u8], unit: Option<&str>, realtime| Entry {
            message: Some(m.to_vec()),
            unit: unit.map(str::to_string),
            realtime,
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
        assert_eq!(e.feed(b""), Step::Broken);
        // A line that is no field inside an entry.
        let mut e = Export::new(100);
        for l in [&b"__CURSOR=a"[..], b"not a field"] {
            assert_eq!(e.feed(l), Step::Held);
        }
        assert_eq!(e.feed(b""), Step::Broken);
        // Plain lines outside an entry are not this format.
        assert_eq!(e.feed(b"[2026-06-03 09:57:43 TP0] x"), Step::NotExport);
        assert_eq!(e.feed(b"MESSAGE=x"), Step::NotExport);
        assert_eq!(e.feed(b""), Step::NotExport);
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
