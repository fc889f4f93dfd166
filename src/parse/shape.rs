//! Recent lines' literal sets and first kind matches, by the line's shape: its bytes with every
//! ASCII digit read as `0`.
//!
//! Why this is exact: when no prefilter literal holds an ASCII digit and every line kind's regex
//! treats the ten digits alike (each of its classes holds all of `0`-`9` or none, none of its
//! literals holds one; checked when the patterns are compiled, see
//! [`Patterns::digits_alike`](super::patterns::Patterns::digits_alike)), two lines of one shape
//! - hold the same literals: an occurrence of a digit-free literal covers no digit, and the
//!   shapes agree on every other byte;
//! - and are matched by every kind regex at the same place with the same groups: the regex
//!   cannot tell one digit from another, so it runs through the same states on both.
//!
//! So the literal scan and the search for the first matching kind are done once per shape
//! ([`ShapeMemo`]); everything that reads a value (prefix, ranks, fields) still reads the line
//! itself. Lines of a log repeat a few shapes (`"GET /metrics HTTP/1.1" 200` from one client,
//! a stats line whose numbers keep their widths, start-up noise); a log whose shapes do not
//! repeat switches the memo off ([`HitProbe`]).

use super::unread::Looks;

/// A memoised group's span in the line (`None`: the group did not take part).
pub(super) type Span = Option<(u32, u32)>;

/// Lines longer than this are not memoised (their scan costs more than a miss saves anyway).
const MAX_LINE: usize = 1024;
/// Shapes are made and hashed 32 bytes at a time.
const CHUNK: usize = 32;
const SLOTS: usize = 256;

/// The shape memo of one parser: a direct-mapped table, so a lookup costs making the line's
/// shape (about one instruction per byte: the loop over a chunk is vectorised) and one
/// comparison.
#[derive(Debug)]
pub(super) struct ShapeMemo {
    /// Slots, each allocated when first used: a parser of a quiet file holds a few entries,
    /// not the whole table.
    entries: Vec<Option<Box<Entry>>>,
    /// The shape of the line last looked up (its first `len` bytes), and its slot.
    shape: Box<[u8; MAX_LINE]>,
    len: usize,
    /// Where the line last looked up starts (an address, compared only): the unread answer
    /// is kept for that line only (see [`ShapeMemo::unread`]).
    at: usize,
    slot: usize,
    /// The entry at `slot` is the last looked-up line's (it hit, or its answer was kept).
    current: bool,
    probe: HitProbe,
}

#[derive(Debug, Default)]
struct Entry {
    shape: Vec<u8>,
    /// The literal set ([`super::literals::LiteralSet::present`]).
    lits: u64,
    /// The first kind whose literal the line holds and whose regex matches it, with its spans.
    first: Option<usize>,
    spans: Vec<Span>,
    /// The prefix read before the first kind's match, when the prefix regex matched at the
    /// line's start (see `PrefixScratch::read`): the whole match, then its groups.
    prefix: Option<[Span; 5]>,
    /// What a line of this shape that no kind read looks like (see [`super::unread`]), once
    /// asked: the outer `None` until then.
    unread: Option<Option<Looks>>,
}

/// What a lookup found.
pub(super) enum Lookup<'m> {
    /// The line's literal set and first matching kind with its groups' spans.
    Hit(u64, Option<(usize, &'m [Span])>),
    /// Not known: [`ShapeMemo::put`] keeps the answer.
    Miss,
    /// The memo is off for now (or the line too long): nothing to keep.
    Off,
}

impl ShapeMemo {
    pub(super) fn new() -> ShapeMemo {
        ShapeMemo {
            entries: Vec::new(),
            shape: Box::new([0; MAX_LINE]),
            len: 0,
            at: 0,
            slot: 0,
            current: false,
            probe: HitProbe::default(),
        }
    }

    /// Looks `line` up by its shape.
    pub(super) fn get(&mut self, line: &[u8]) -> Lookup<'_> {
        self.current = false;
        if line.len() > MAX_LINE || !self.probe.active() {
            return Lookup::Off;
        }
        let h = shape_of(line, &mut self.shape);
        self.len = line.len();
        self.at = line.as_ptr() as usize;
        self.slot = (h >> 56) as usize % SLOTS;
        let Some(e) = self.entries.get(self.slot).and_then(|e| e.as_deref()) else {
            self.probe.count(false);
            return Lookup::Miss;
        };
        // An unused entry's shape is empty; an empty line is never looked up by the parser
        // and would find an empty answer that is right for it anyway.
        let hit = e.shape[..] == self.shape[..self.len];
        self.probe.count(hit);
        if !hit {
            return Lookup::Miss;
        }
        self.current = true;
        Lookup::Hit(e.lits, e.first.map(|k| (k, &e.spans[..])))
    }

    /// Keeps the answer for the line of the last [`ShapeMemo::get`] (which said `Miss`).
    pub(super) fn put(&mut self, lits: u64, first: Option<(usize, impl Iterator<Item = Span>)>) {
        if self.entries.is_empty() {
            self.entries.resize_with(SLOTS, || None);
        }
        let e = self.entries[self.slot].get_or_insert_with(Box::default);
        e.shape.clear();
        e.shape.extend_from_slice(&self.shape[..self.len]);
        e.lits = lits;
        e.prefix = None;
        e.unread = None;
        e.spans.clear();
        e.first = first.map(|(k, spans)| {
            e.spans.extend(spans);
            k
        });
        self.current = true;
    }

    /// The prefix groups kept for the last looked-up line's shape.
    pub(super) fn prefix(&self) -> Option<&[Span; 5]> {
        self.entries
            .get(self.slot)
            .filter(|_| self.current)?
            .as_deref()?
            .prefix
            .as_ref()
    }

    /// What `line`, a line no kind read, looks like: `ask` answers it once per shape, when
    /// `line` is the line last looked up (the same bytes at the same place) and its shape is
    /// kept; any other line is asked about on its own. Exact when `ask`'s answer depends on the
    /// shape alone ([`super::unread::Unread::digits_alike`]).
    pub(super) fn unread(
        &mut self,
        line: &[u8],
        ask: impl FnOnce() -> Option<Looks>,
    ) -> Option<Looks> {
        let same = self.current && self.at == line.as_ptr() as usize && self.len == line.len();
        match self.entries.get_mut(self.slot) {
            Some(Some(e)) if same => *e.unread.get_or_insert_with(ask),
            _ => ask(),
        }
    }

    /// Keeps the prefix groups of the last looked-up line's shape.
    pub(super) fn set_prefix(&mut self, groups: [Span; 5]) {
        if let (true, Some(Some(e))) = (self.current, self.entries.get_mut(self.slot)) {
            e.prefix = Some(groups);
        }
    }
}

/// Writes the shape of `line` (at most [`MAX_LINE`] bytes) to the start of `out` and returns
/// its hash (FxHash-style over the shape's eight-byte words, seeded with the length). A line of
/// [`CHUNK`] bytes or more ends with a chunk that overlaps the one before (the same bytes
/// masked twice), so no chunk is copied; a shorter line is read zero-padded. Not inlined: on
/// its own the chunk loop is vectorised (about 16 instructions a chunk), inlined into the parser
/// it was not (measured: 128).
#[inline(never)]
fn shape_of(line: &[u8], out: &mut [u8; MAX_LINE]) -> u64 {
    let n = line.len();
    let mut h = n as u64;
    if n < CHUNK {
        let mut c = [0u8; CHUNK];
        c[..n].copy_from_slice(line);
        let dst: &mut [u8; CHUNK] = (&mut out[..CHUNK])
            .try_into()
            .unwrap_or_else(|_| unreachable!());
        return mask_chunk(h, &c, dst);
    }
    let mut at = 0;
    loop {
        let at_end = at + CHUNK >= n;
        if at_end {
            at = n - CHUNK;
        }
        let src: &[u8; CHUNK] = line[at..at + CHUNK]
            .try_into()
            .unwrap_or_else(|_| unreachable!());
        let dst: &mut [u8; CHUNK] = (&mut out[at..at + CHUNK])
            .try_into()
            .unwrap_or_else(|_| unreachable!());
        h = mask_chunk(h, src, dst);
        if at_end {
            return h;
        }
        at += CHUNK;
    }
}

/// Masks one chunk into `dst` and folds it into the hash `h`.
#[inline(always)]
fn mask_chunk(mut h: u64, src: &[u8; CHUNK], dst: &mut [u8; CHUNK]) -> u64 {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    for (d, &b) in dst.iter_mut().zip(src) {
        // A byte-wise select the compiler turns into vector compares.
        *d = if b.wrapping_sub(b'0') < 10 { b'0' } else { b };
    }
    for w in dst.chunks_exact(8) {
        let w = u64::from_le_bytes(w.try_into().unwrap_or_default());
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    h
}

/// Whether a memo earns its keep: counts hits over a probe of [`PROBE`] lookups, and when
/// fewer than a quarter hit, stays off for [`PAUSE`] lines before probing again.
#[derive(Debug, Default)]
pub(super) struct HitProbe {
    lookups: u32,
    hits: u32,
    /// Lines left before the next probe (0: probing).
    paused: u32,
}

pub(super) const PROBE: u32 = 1024;
pub(super) const PAUSE: u32 = 1 << 16;

impl HitProbe {
    /// Whether to look up this line (counts down a pause).
    pub(super) fn active(&mut self) -> bool {
        if self.paused > 0 {
            self.paused -= 1;
            return false;
        }
        true
    }

    /// Whether the memo is on.
    pub(super) fn on(&self) -> bool {
        self.paused == 0
    }

    pub(super) fn count(&mut self, hit: bool) {
        self.lookups += 1;
        self.hits += u32::from(hit);
        if self.lookups == PROBE {
            if self.hits < PROBE / 4 {
                self.paused = PAUSE;
            }
            self.lookups = 0;
            self.hits = 0;
        }
    }

    #[cfg(test)]
    pub(super) fn paused(&self) -> bool {
        self.paused > 0
    }
}

#[cfg(test)]
mod tests {
    //! A parser that memoises shapes against one that never does, line by line: the same record
    //! on every shipped line and on copies with other digits (same shape: answers from the
    //! memo, values from the line).
    use std::sync::Arc;

    use super::super::template::tests::{corpus, read};
    use super::super::{patterns::Patterns, Parser};
    use super::*;

    fn digits_alike(re: &str) -> bool {
        let hir = regex_syntax::Parser::new().parse(re).unwrap();
        super::super::patterns::digits_alike(&hir)
    }

    fn parsers(pat: Patterns) -> (Parser, Parser) {
        let pat = Arc::new(pat);
        let mut plain = Parser::new(pat.clone());
        plain.shapes = None;
        (Parser::new(pat), plain)
    }

    /// `line` with every ASCII digit moved on by `by` (mod 10): the same shape.
    fn redigit(line: &str, by: u8) -> String {
        line.chars()
            .map(|c| match c {
                '0'..='9' => char::from(b'0' + (c as u8 - b'0' + by) % 10),
                c => c,
            })
            .collect()
    }

    #[test]
    fn shapes_read_every_shipped_line_and_its_redigited_copies_as_the_plain_path_does() {
        let (mut memo, mut plain) = parsers(Patterns::embedded().unwrap());
        assert!(
            memo.shapes.is_some(),
            "the shipped patterns treat digits alike"
        );
        let lines = corpus();
        assert!(lines.len() > 1000, "{}", lines.len());
        for line in &lines {
            // The line, then copies of its shape (hits) with other times, ranks and values
            // (`9` makes impossible times and absurd ranks: the kind is then read and refused,
            // and the next kind tried), then the line again.
            let copies = [1, 5, 9].map(|by| redigit(line, by));
            for l in std::iter::once(line).chain(&copies).chain([line]) {
                assert_eq!(read(&mut memo, l), read(&mut plain, l), "{l}");
            }
        }
        let m = memo.shapes.as_ref().unwrap();
        let kept = m
            .entries
            .iter()
            .flatten()
            .filter(|e| !e.shape.is_empty())
            .count();
        assert!(kept > SLOTS / 2, "shapes kept: {kept}");
    }

    #[test]
    fn mutated_lines_and_their_redigited_copies_read_as_the_plain_path_does() {
        // Every shipped line with a few bytes replaced (seeded xorshift), each mutant followed by
        // a copy with its digits shifted: the memo answers the copy from the mutant's shape.
        let (mut memo, mut plain) = parsers(Patterns::embedded().unwrap());
        let alphabet = b"0123456789 :,=.[]()#-_/\"'xDPTe\t\x1b";
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for line in corpus() {
            for _ in 0..4 {
                let mut b = line.clone().into_bytes();
                for _ in 0..1 + next() % 3 {
                    if b.is_empty() {
                        break;
                    }
                    let at = (next() % b.len() as u64) as usize;
                    b[at] = alphabet[(next() % alphabet.len() as u64) as usize];
                }
                let m = String::from_utf8_lossy(&b).into_owned();
                for l in [m.clone(), redigit(&m, 3), m] {
                    assert_eq!(read(&mut memo, &l), read(&mut plain, &l), "{l}");
                }
            }
        }
    }

    #[test]
    fn a_line_hits_only_its_own_shape() {
        let pat = Patterns::embedded().unwrap();
        let (mut memo, mut plain) = parsers(pat);
        let decode = "[2026-06-03 10:00:00 DP0 TP0] Decode batch, #running-req: 1, #token: 22, token usage: 0.31, cuda graph: True, gen throughput (token/s): 3.10, #queue-req: 5";
        let access =
            r#"[2026-06-03 10:00:00] INFO:     127.0.0.1:44628 - "GET /metrics HTTP/1.1" 200 OK"#;
        for l in [
            decode,
            &decode.replace("Decode", "decode"),
            &decode.replace("#token: 22", "#token: 2x"),
            &decode.replace("#token: 22", "#token: 222"),
            &decode.replace("DP0", "DP٠"),
            &decode.replace(" TP0]", " TP0] \u{1b}[1m"),
            decode,
            access,
            &access.replace("GET", "PUT"),
            &access.replace(" HTTP/", " HTTP "),
            &access.replace("200", "2000"),
            access,
            &access[..access.len() - 1],
            "",
            "0",
            "1",
        ] {
            assert_eq!(read(&mut memo, l), read(&mut plain, l), "{l}");
        }
    }

    #[test]
    fn patterns_that_tell_digits_apart_are_not_memoised() {
        for re in [
            r"Decode batch, #running-req: 1",
            r"DP0 Decode",
            r"x[0-5]",
            r"x[^0-5]",
            r"x[a-z4]",
            r"(?i)x[a-f0-7]",
        ] {
            assert!(!digits_alike(re), "{re}");
        }
        for re in [
            r"Decode batch(?: \[[0-9]+\])?[.,] ",
            r#""(?P<method>[A-Z]{3,10}) (?P<path>[^ "?]*) HTTP/[0-9.]+" (?P<status>[0-9]{3})"#,
            r"Capture (?:[A-Za-z0-9_-]+ )*?[A-Za-z]+ graph end\.(?: |$)",
            r"\bx\w+[^a]",
            r"(?-u)[\x00-\x7f]",
        ] {
            assert!(digits_alike(re), "{re}");
        }
        let yaml =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/patterns/sglang.yaml"))
                .unwrap();
        let decode = r"regex: 'Decode batch(?: \[[0-9]+\])?[.,] '";
        assert!(yaml.contains(decode));
        let narrowed = yaml.replace(decode, r"regex: 'Decode batch(?: \[[0-5]+\])?[.,] '");
        let (memo, _) = parsers(Patterns::from_yaml(&narrowed).unwrap());
        assert!(memo.shapes.is_none());
        let literal = yaml.replace(r#"literal: " HTTP/""#, r#"literal: " HTTP/1""#);
        assert_ne!(literal, yaml);
        let (memo, _) = parsers(Patterns::from_yaml(&literal).unwrap());
        assert!(memo.shapes.is_none());
    }

    #[test]
    fn a_shape_keeps_every_byte_but_digits() {
        let mut a = Box::new([0u8; MAX_LINE]);
        let mut b = Box::new([0u8; MAX_LINE]);
        // Every byte value at every position of the first two chunks and the tail.
        for len in [1, 7, 8, 31, 32, 33, 64, 70] {
            for at in 0..len {
                for v in 0..=255u8 {
                    let mut line = vec![b'a'; len];
                    line[at] = v;
                    let h = shape_of(&line, &mut a);
                    let want = if v.is_ascii_digit() { b'0' } else { v };
                    assert_eq!(a[at], want, "byte {v} at {at} of {len}");
                    assert!(a[..len]
                        .iter()
                        .enumerate()
                        .all(|(i, &c)| i == at || c == b'a'));
                    if v.is_ascii_digit() {
                        line[at] = b'7';
                        assert_eq!(shape_of(&line, &mut b), h);
                    }
                }
            }
        }
    }

    #[test]
    fn distinct_shapes_pause_the_memo_and_answers_stay_right() {
        let (mut memo, mut plain) = parsers(Patterns::embedded().unwrap());
        for i in 0..(3 * PROBE as usize) {
            // Distinct shapes: letters, not digits, vary (`i` in base 26).
            let tag: String = (0..3)
                .map(|j| char::from(b'a' + (i / 26usize.pow(j) % 26) as u8))
                .collect();
            let l = format!(
                r#"[2026-06-03 10:00:00] INFO:     127.0.0.1:1 - "GET /{tag} HTTP/1.1" 200 OK"#
            );
            assert_eq!(read(&mut memo, &l), read(&mut plain, &l), "{l}");
        }
        assert!(memo.shapes.as_ref().unwrap().probe.paused());
        let l = r#"[2026-06-03 10:00:00] INFO:     127.0.0.1:1 - "GET /x HTTP/1.1" 200 OK"#;
        assert_eq!(read(&mut memo, l), read(&mut plain, l));
    }
}
