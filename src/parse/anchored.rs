//! Searching one line kind's regex for its captures, faster than the regex's own search where the
//! regex's shape allows, with the same match and groups.
//!
//! Two specialisations (the first built by the first search that needs it), both derived from
//! any regex of the right shape (the patterns stay data):
//! - [`AnchoredStarts`]: a regex whose every match starts with one of at most three ASCII bytes and that
//!   has no look-around is tried anchored at each of those bytes in turn;
//! - [`Memo`]: for such a regex the whole search reads only the line from its first candidate
//!   byte on, so lines whose text from there is the same as a recent line's (uvicorn's
//!   `"GET /metrics HTTP/1.1" 200 OK`: few distinct tails, most of a log's lines) reuse that
//!   line's answer.

use std::sync::Arc;

use regex::{CaptureLocations, Regex};

use super::shape::{HitProbe, Span};

/// A line kind's captures, positioned in the line.
#[derive(Debug)]
pub(super) struct CaptureSpans {
    inner: CaptureLocations,
    /// Spans relative to `offset`, when the answer came from the memo (`from_memo`).
    memo_spans: Vec<Span>,
    from_memo: bool,
    /// Where the searched text starts in the line (an anchored search reads from there).
    offset: usize,
}

impl CaptureSpans {
    pub(super) fn new(re: &Regex) -> CaptureSpans {
        CaptureSpans {
            inner: re.capture_locations(),
            memo_spans: Vec::new(),
            from_memo: false,
            offset: 0,
        }
    }

    /// Byte span of group `i` in the line.
    pub(super) fn get(&self, i: usize) -> Option<(usize, usize)> {
        let o = self.offset;
        if self.from_memo {
            let (s, e) = (*self.memo_spans.get(i)?)?;
            return Some((s as usize + o, e as usize + o));
        }
        self.inner.get(i).map(|(s, e)| (s + o, e + o))
    }

    fn len(&self) -> usize {
        self.inner.len()
    }

    /// Takes the groups' spans from a memo: `spans` relative to `offset`.
    pub(super) fn set_memo(&mut self, spans: &[Span], offset: usize) {
        self.memo_spans.clear();
        self.memo_spans.extend_from_slice(spans);
        self.from_memo = true;
        self.offset = offset;
    }

    /// Every group's span relative to `origin` (no span starts before it; each fits in u32,
    /// the memoised texts being short).
    pub(super) fn spans(&self, origin: usize) -> impl Iterator<Item = Span> + '_ {
        (0..self.len()).map(move |i| {
            let (s, e) = self.get(i)?;
            Some(((s - origin) as u32, (e - origin) as u32))
        })
    }
}

/// How one line kind's regex is searched, and the captures of its last search.
#[derive(Debug)]
pub(super) struct KindSearch {
    pub(super) locs: CaptureSpans,
    /// Shared by every parser of the patterns: a cloned regex would get a cache pool of its
    /// own (and each its caches), a shared one serves every thread from one pool. `None`: not
    /// specialised (the plain path).
    starts: Option<Arc<LazyStarts>>,
    memo: Memo,
}

impl KindSearch {
    #[cfg(test)]
    pub(super) fn new(re: &Regex) -> KindSearch {
        KindSearch::with(re, Some(Arc::default()))
    }

    /// The search of `re` with its specialisation `starts` (built once, on the first search:
    /// [`AnchoredStarts::of`]; a clone shares the compiled regex).
    pub(super) fn with(re: &Regex, starts: Option<Arc<LazyStarts>>) -> KindSearch {
        KindSearch {
            locs: CaptureSpans::new(re),
            starts,
            memo: Memo::default(),
        }
    }

    /// Whether the search is specialised (see [`AnchoredStarts`]).
    #[cfg(test)]
    pub(super) fn is_specialised(&self, re: &Regex) -> bool {
        built(&self.starts, re).is_some()
    }

    /// Searches `line` as `re` would (`re` is the regex this was made of), leaving the captures
    /// in `self.locs`; `false` when it does not match.
    pub(super) fn captures(&mut self, re: &Regex, line: &str) -> bool {
        let KindSearch { locs, starts, memo } = self;
        locs.from_memo = false;
        let Some(st) = built(starts, re) else {
            locs.offset = 0;
            return re.captures_read(&mut locs.inner, line).is_some();
        };
        let Some(first) = st.next(line.as_bytes(), 0) else {
            return false;
        };
        let tail = &line.as_bytes()[first..];
        if let Some(found) = memo.get(tail) {
            return match found {
                Some(spans) => {
                    locs.set_memo(spans, first);
                    true
                }
                None => false,
            };
        }
        let found = st.captures(re, locs, line, first);
        if memo.wants(tail) {
            // Every span lies in the tail.
            memo.put(tail, found.then(|| locs.spans(first)));
        }
        found
    }
}

/// A kind's specialisation, built by the first search that needs it: most kinds of a pattern
/// file see no line of a given log, and building every one at start-up cost 18 M instructions
/// (a fifth of it). Shared by every parser of the patterns.
pub(super) type LazyStarts = std::sync::OnceLock<Option<AnchoredStarts>>;

/// The specialisation of `re` (the search's regex), built on first use; `None` when the search
/// is not specialised.
fn built<'s>(starts: &'s Option<Arc<LazyStarts>>, re: &Regex) -> Option<&'s AnchoredStarts> {
    let lazy = starts.as_deref()?;
    lazy.get_or_init(|| AnchoredStarts::of(re)).as_ref()
}

/// Specialisation (built on first use, [`LazyStarts`]) of a line kind's regex whose every match
/// starts with one of at most three ASCII bytes and that has no look-around (`^`, `$`, `\b`):
/// its anchored form, tried at each of those bytes in turn, finds the same leftmost-first match
/// as the unanchored search, in one pass of the one-pass DFA instead of a forward and a reverse
/// lazy-DFA pass before it (the uvicorn access kind: ~0.1 µs of its ~0.4 µs).
#[derive(Debug, Clone)]
pub(super) struct AnchoredStarts {
    anchored: Regex,
    bytes: Vec<u8>,
    /// Every match starts with one of these (the prefix literals' longest common prefix, else
    /// the literals themselves, at most [`MAX_PREFIXES`]; empty: not checked). A candidate byte
    /// whose text starts with none of them (the `P` of `DP0` for `Prefill batch`) is passed
    /// over without running the regex.
    prefixes: Vec<Vec<u8>>,
}

/// The most prefix literals checked before an anchored try: beyond, the try itself is cheaper.
const MAX_PREFIXES: usize = 8;

/// Anchored attempts per line before the unanchored search takes over from the next candidate
/// byte: bounds the cost of a line holding many of them (each attempt may read far).
const MAX_ANCHORED_TRIES: usize = 4;

impl AnchoredStarts {
    /// The specialisation of `re`, if its shape allows it.
    pub(super) fn of(re: &Regex) -> Option<AnchoredStarts> {
        let hir = regex_syntax::Parser::new().parse(re.as_str()).ok()?;
        if !hir.properties().look_set().is_empty() {
            return None;
        }
        let seq = regex_syntax::hir::literal::Extractor::new().extract(&hir);
        let mut bytes = Vec::new();
        let lits = seq.literals()?;
        for l in lits {
            let b = *l.as_bytes().first()?;
            if !b.is_ascii() {
                return None;
            }
            if !bytes.contains(&b) {
                bytes.push(b);
            }
        }
        if bytes.is_empty() || bytes.len() > 3 {
            return None;
        }
        let anchored = Regex::new(&format!("^(?:{})", re.as_str())).ok()?;
        let prefixes = match seq.longest_common_prefix() {
            Some(common) if common.len() > 1 => vec![common.to_vec()],
            _ if lits.len() <= MAX_PREFIXES && lits.iter().any(|l| l.len() > 1) => {
                lits.iter().map(|l| l.as_bytes().to_vec()).collect()
            }
            _ => Vec::new(),
        };
        Some(AnchoredStarts {
            anchored,
            bytes,
            prefixes,
        })
    }

    /// The next candidate start at or after `from`.
    fn next(&self, hay: &[u8], from: usize) -> Option<usize> {
        let h = &hay[from..];
        let p = match self.bytes[..] {
            [a] => memchr::memchr(a, h),
            [a, b] => memchr::memchr2(a, b, h),
            [a, b, c] => memchr::memchr3(a, b, c, h),
            _ => None,
        }?;
        Some(from + p)
    }

    /// Whether a match may start at the start of `at`: it starts with a prefix literal.
    fn may_start(&self, at: &[u8]) -> bool {
        self.prefixes.is_empty()
            || self
                .prefixes
                .iter()
                .any(|l| super::fields::begins_with(at, l))
    }

    /// Searches `line` as `re` would (`re` is the regex this was made of), leaving the captures
    /// in `locs`. `first` is the first candidate start: no match starts before it, and nothing
    /// before it is read.
    fn captures(&self, re: &Regex, locs: &mut CaptureSpans, line: &str, first: usize) -> bool {
        let hay = line.as_bytes();
        let mut next = Some(first);
        let mut tries = 0;
        let from = loop {
            let Some(p) = next else {
                return false;
            };
            if self.may_start(&hay[p..]) {
                if tries == MAX_ANCHORED_TRIES {
                    break p;
                }
                tries += 1;
                // An ASCII byte is a char boundary.
                if self
                    .anchored
                    .captures_read(&mut locs.inner, &line[p..])
                    .is_some()
                {
                    locs.offset = p;
                    return true;
                }
            }
            next = self.next(hay, p + 1);
        };
        locs.offset = 0;
        // No match starts before `from`; with no look-around the search may start there.
        re.captures_read_at(&mut locs.inner, line, from).is_some()
    }
}

/// Recent answers of one specialised kind's search, by the line's text from the first candidate
/// byte on (the tail): a direct-mapped table, so a lookup costs a hash of the tail and one
/// comparison. Tails longer than [`MEMO_MAX_TAIL`] are not kept. A kind whose tails rarely
/// repeat (a stats line's tail holds its values) stops memoising for a while ([`HitProbe`]).
#[derive(Debug, Default)]
struct Memo {
    entries: Vec<MemoEntry>,
    probe: HitProbe,
}

#[derive(Debug, Default)]
struct MemoEntry {
    tail: Vec<u8>,
    /// The spans relative to the tail; `None`: no match.
    spans: Option<Vec<Span>>,
}

const MEMO_SLOTS: usize = 64;
const MEMO_MAX_TAIL: usize = 256;

impl Memo {
    fn slot(tail: &[u8]) -> usize {
        // FxHash-style: multiply-rotate over eight-byte words.
        let mut h = tail.len() as u64;
        let mut words = tail.chunks_exact(8);
        for w in &mut words {
            h = (h.rotate_left(5) ^ u64::from_le_bytes(w.try_into().unwrap_or_default()))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        for &b in words.remainder() {
            h = (h.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        (h >> 58) as usize % MEMO_SLOTS
    }

    /// The answer for `tail`, if memoised: `Some(None)` for no match.
    fn get(&mut self, tail: &[u8]) -> Option<Option<&[Span]>> {
        if !self.probe.active() {
            return None;
        }
        if tail.len() > MEMO_MAX_TAIL || self.entries.is_empty() {
            self.probe.count(false);
            return None;
        }
        let i = Memo::slot(tail);
        // A tail is never empty (it holds its candidate byte), so an unused entry never hits.
        let hit = self.entries[i].tail == tail;
        self.probe.count(hit);
        let e = &self.entries[i];
        hit.then_some(e.spans.as_deref())
    }

    /// Whether an answer for `tail` would be kept.
    fn wants(&self, tail: &[u8]) -> bool {
        self.probe.on() && tail.len() <= MEMO_MAX_TAIL
    }

    fn put(&mut self, tail: &[u8], spans: Option<impl Iterator<Item = Span>>) {
        if self.entries.is_empty() {
            self.entries.resize_with(MEMO_SLOTS, MemoEntry::default);
        }
        let e = &mut self.entries[Memo::slot(tail)];
        e.tail.clear();
        e.tail.extend_from_slice(tail);
        match spans {
            Some(it) => {
                let v = e.spans.get_or_insert_with(Vec::new);
                v.clear();
                v.extend(it);
            }
            None => e.spans = None,
        }
    }
}

#[cfg(test)]
mod tests {
    //! The specialised search against the regex's own search: same match, same groups, also when
    //! the answer comes from the memo.
    use super::*;

    fn same(ks: &mut KindSearch, re: &Regex, hay: &str) {
        let mut b = re.capture_locations();
        let fa = ks.captures(re, hay);
        let fb = re.captures_read(&mut b, hay).is_some();
        assert_eq!(fa, fb, "{re} on {hay:?}");
        if fb {
            for i in 0..b.len() {
                assert_eq!(ks.locs.get(i), b.get(i), "group {i} of {re} on {hay:?}");
            }
        }
    }

    fn check(re: &str, hays: &[&str]) {
        let re = Regex::new(re).unwrap();
        let mut ks = KindSearch::new(&re);
        assert!(ks.is_specialised(&re), "{re}");
        // Twice over: the second round's answers come from the memo.
        for hay in hays.iter().chain(hays) {
            same(&mut ks, &re, hay);
        }
    }

    const ACCESS: &str = r#""(?P<method>[A-Z]{3,10}) (?P<path>[^ "?]*)(?:\?[^ "]*)? HTTP/[0-9.]+" (?P<status>[0-9]{3})"#;

    #[test]
    fn anchored_tries_find_the_leftmost_first_match() {
        check(
            ACCESS,
            &[
                r#"[2026-06-03 10:00:00] INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK"#,
                r#"x "no" "also no" "GET /a?b=c HTTP/1.1" 404 "POST /b HTTP/1.0" 200"#,
                r#""" "" "" "" "" "GET /late HTTP/1.1" 500"#,
                r#"" HTTP/1.1" 200 and no request"#,
                "\"GET /ünï HTTP/1.1\" 201 é",
                "",
            ],
        );
        check(
            "[Dd]ecode (?P<n>[0-9]+)",
            &["a decode Decode 12, decode 3", "decode x"],
        );
        check(
            "(?P<fields>)max_total_num_tokens=",
            &["x max_total_num_tokens=5"],
        );
    }

    #[test]
    fn candidates_without_a_prefix_literal_are_passed_over_and_the_rest_still_found() {
        // Many `P`s that start no `Prefill batch` (rank tags), then a line with more misses
        // that do start a literal than the anchored tries allow, then the match.
        let prefill = r"Prefill? batch(?:\(mixed #running-req: (?P<r>[0-9]+)\))?[.,] ";
        let re = Regex::new(prefill).unwrap();
        let ks = KindSearch::new(&re);
        let st = built(&ks.starts, &re).unwrap();
        assert!(st.may_start(b"Prefill batch, x") && st.may_start(b"Prefil batch."));
        assert!(
            !st.may_start(b"P0 TP0] Prefill batch, "),
            "{:?}",
            st.prefixes
        );
        check(
            prefill,
            &[
                "[t DP0 TP0 PP1 EP3] Prefill batch, #new-seq: 1",
                "[t DP0 TP0] Decode batch, #running-req: 1",
                "Prefil Prefill Prefill batch Prefill batchx Prefill batch(mixed #running-req: 2). ",
                "PPPPPPPPPPPPPPPPPPPPPPPPPPPP Prefil batch. ",
                "Prefill batch(mixed #running-req: x). Prefill batch(mixed #running-req: 7), ",
            ],
        );
    }

    #[test]
    fn the_same_tail_after_another_head_reads_at_its_own_place() {
        check(
            ACCESS,
            &[
                r#"[2026-06-03 10:00:00] INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK"#,
                r#"[2026-06-03 10:00:01 DP1] INFO: 10.0.0.7:65000 - "GET /health HTTP/1.1" 200 OK"#,
                r#"- "GET /health HTTP/1.1" 200 OK"#,
                r#"[2026-06-03 10:00:00] INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 503 OK"#,
                r#""GET /health HTTP/1.1" 20"#,
            ],
        );
    }

    #[test]
    fn many_distinct_tails_pause_the_memo_and_answers_stay_right() {
        let re = Regex::new(ACCESS).unwrap();
        let mut ks = KindSearch::new(&re);
        for i in 0..(3 * super::super::shape::PROBE) {
            same(
                &mut ks,
                &re,
                &format!(r#"x "GET /p{i} HTTP/1.1" {} z"#, 100 + i % 900),
            );
        }
        assert!(ks.memo.probe.paused());
        for i in 0..100 {
            same(&mut ks, &re, &format!(r#"x "GET /q{i} HTTP/1.1" 200"#));
        }
    }

    #[test]
    fn look_around_and_open_starts_are_not_specialised() {
        for re in [
            r"\bDecode",
            "^Decode",
            "Decode$",
            ".*Decode",
            "(?:a|b|c|d)x",
            "é",
        ] {
            assert!(
                AnchoredStarts::of(&Regex::new(re).unwrap()).is_none(),
                "{re}"
            );
        }
    }
}
