//! Which first two bytes a regex's matches can start with: a [`Gate`] a line must pass before
//! the regex is tried (see [`super::stream`]: nearly every line of a plain log starts `[2026-…`,
//! which no stream prefix does, and costs one bit lookup instead of a regex search each).
//!
//! The set is gathered over the regex's syntax tree ([`Gate::of`]) in one walk that keeps, for
//! each node, the byte pairs its matches can start with, the bytes it can match alone, the
//! bytes its matches can start with, and whether it can match nothing. It never leaves out a
//! pair a match can start with (a line the regex matches always passes); it may hold a pair
//! no match starts with (`^`, `\b` and other assertions are read as matching nothing, a
//! repetition as one or two copies), which only costs that line a regex search. Listing the
//! regex's literal prefixes instead (`regex_syntax`'s extractor) gave the same sets or looser
//! ones for the shipped pattern file, at 37 M instructions of start-up (a third of it).

use regex_syntax::hir::{Class, Hir, HirKind};

/// A set of two-byte starts (bit `b0 * 256 + b1`).
#[derive(Clone, PartialEq, Eq)]
pub(super) struct Gate(Box<[u64; 1024]>);

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Gate")
    }
}

/// A set of bytes.
type Bytes = [u64; 4];

fn add_range(set: &mut Bytes, lo: u8, hi: u8) {
    for b in lo..=hi {
        set[usize::from(b / 64)] |= 1 << (b % 64);
    }
}

fn bytes_of(set: &Bytes) -> impl Iterator<Item = u8> + '_ {
    (0..=255u8).filter(|&b| set[usize::from(b / 64)] & (1 << (b % 64)) != 0)
}

/// Adds the members of `src` to `dst` (bit sets of the same layout: pairs or bytes).
fn or_into(dst: &mut [u64], src: &[u64]) {
    for (x, y) in dst.iter_mut().zip(src) {
        *x |= y;
    }
}

/// The word and bit of the pair `(a, b)` in a [`Gate`].
fn pair_bit(a: u8, b: u8) -> (usize, u64) {
    let i = usize::from(a) * 256 + usize::from(b);
    (i / 64, 1 << (i % 64))
}

impl Gate {
    pub(super) fn none() -> Gate {
        Gate(Box::new([0; 1024]))
    }

    pub(super) fn all() -> Gate {
        Gate(Box::new([u64::MAX; 1024]))
    }

    #[cfg(test)]
    pub(super) fn set(&mut self, a: u8, b: u8) {
        let (w, bit) = pair_bit(a, b);
        self.0[w] |= bit;
    }

    /// Whether `text` starts with a pair of the set (a line of one byte or none holds no
    /// prefix and a line after it).
    pub(super) fn has(&self, text: &[u8]) -> bool {
        let (a, b) = match text {
            [a, b, ..] => (*a, *b),
            _ => return false,
        };
        let (w, bit) = pair_bit(a, b);
        self.0[w] & bit != 0
    }

    pub(super) fn union(&mut self, o: &Gate) {
        or_into(&mut self.0[..], &o.0[..]);
    }

    /// Adds every pair of a first byte in `first` and a second in `second`.
    fn add_product(&mut self, first: &Bytes, second: &Bytes) {
        for a in bytes_of(first) {
            or_into(
                &mut self.0[usize::from(a) * 4..usize::from(a) * 4 + 4],
                second,
            );
        }
    }

    /// The pairs the matches of the regex `hir` can start with; every pair when a match can be
    /// empty, and `(a, any)` for a match that can be the one byte `a`.
    pub(super) fn of(hir: &Hir) -> Gate {
        let s = Starts::of(hir);
        if s.empty {
            return Gate::all();
        }
        let mut g = s.pairs.unwrap_or_else(Gate::none);
        g.add_product(&s.singles, &[u64::MAX; 4]);
        g
    }
}

/// What the matches of one node of a syntax tree can start with.
#[derive(Clone)]
struct Starts {
    /// Pairs a match of two bytes or more can start with (`None`: none; most nodes have no
    /// pairs, and a set is 8 KiB to clear and to join).
    pairs: Option<Gate>,
    /// Bytes that can be a whole match.
    singles: Bytes,
    /// Bytes a match can start with.
    firsts: Bytes,
    /// A match can be empty.
    empty: bool,
}

impl Starts {
    fn empty() -> Starts {
        Starts {
            pairs: None,
            singles: [0; 4],
            firsts: [0; 4],
            empty: true,
        }
    }

    fn nothing() -> Starts {
        Starts {
            empty: false,
            ..Starts::empty()
        }
    }

    fn of(hir: &Hir) -> Starts {
        match hir.kind() {
            // An assertion reads as matching nothing: a superset of what it allows.
            HirKind::Empty | HirKind::Look(_) => Starts::empty(),
            HirKind::Literal(l) => {
                let mut s = Starts::nothing();
                match &l.0[..] {
                    [] => s.empty = true,
                    [a] => (s.singles, s.firsts) = (one(*a), one(*a)),
                    [a, b, ..] => {
                        s.add_pairs(&one(*a), &one(*b));
                        s.firsts = one(*a);
                    }
                }
                s
            }
            HirKind::Class(c) => Starts::class(c),
            HirKind::Capture(c) => Starts::of(&c.sub),
            HirKind::Repetition(r) => {
                // Only the first two bytes count, and each copy that is not empty gives one at
                // least: `min` copies start as two of them do (as one, or none, when `min` is),
                // and the optional copies after them as up to two optional copies.
                let sub = Starts::of(&r.sub);
                let mandatory =
                    (0..r.min.min(2)).fold(Starts::empty(), |acc, _| acc.then(sub.clone()));
                let optional = r.max.map_or(2, |max| (max - r.min).min(2));
                let mut maybe = sub;
                maybe.empty = true;
                (0..optional).fold(mandatory, |acc, _| acc.then(maybe.clone()))
            }
            HirKind::Concat(parts) => parts
                .iter()
                .fold(Starts::empty(), |acc, p| acc.then(Starts::of(p))),
            HirKind::Alternation(alts) => alts.iter().fold(Starts::nothing(), |mut acc, a| {
                acc.or(Starts::of(a));
                acc
            }),
        }
    }

    /// A class: its bytes, or the first two bytes of its characters' UTF-8 encodings.
    fn class(c: &Class) -> Starts {
        let mut s = Starts::nothing();
        match c {
            Class::Bytes(b) => {
                for r in b.iter() {
                    add_range(&mut s.singles, r.start(), r.end());
                    add_range(&mut s.firsts, r.start(), r.end());
                }
            }
            Class::Unicode(u) => {
                for r in u.iter() {
                    for seq in regex_syntax::utf8::Utf8Sequences::new(r.start(), r.end()) {
                        let seq = seq.as_slice();
                        let mut first = [0; 4];
                        add_range(&mut first, seq[0].start, seq[0].end);
                        match seq.get(1) {
                            None => add_range(&mut s.singles, seq[0].start, seq[0].end),
                            Some(second) => {
                                let mut next = [0; 4];
                                add_range(&mut next, second.start, second.end);
                                s.add_pairs(&first, &next);
                            }
                        }
                        or_into(&mut s.firsts, &first);
                    }
                }
            }
        }
        s
    }

    fn add_pairs(&mut self, first: &Bytes, second: &Bytes) {
        if first.iter().any(|&w| w != 0) && second.iter().any(|&w| w != 0) {
            (self.pairs.get_or_insert_with(Gate::none)).add_product(first, second);
        }
    }

    fn add_all_pairs(&mut self, other: Option<Gate>) {
        match (&mut self.pairs, other) {
            (Some(p), Some(o)) => p.union(&o),
            (p @ None, o) => *p = o,
            (Some(_), None) => {}
        }
    }

    /// `self` followed by `next`.
    fn then(mut self, next: Starts) -> Starts {
        let singles = self.singles;
        self.add_pairs(&singles, &next.firsts);
        if self.empty {
            self.add_all_pairs(next.pairs);
            or_into(&mut self.firsts, &next.firsts);
        }
        // One byte in all: one side's byte, the other side empty.
        let keep = |s: Bytes, other_empty: bool| if other_empty { s } else { [0; 4] };
        let (mine, its) = (
            keep(self.singles, next.empty),
            keep(next.singles, self.empty),
        );
        self.singles = std::array::from_fn(|i| mine[i] | its[i]);
        self.empty &= next.empty;
        self
    }

    /// `self` or `other`.
    fn or(&mut self, other: Starts) {
        self.add_all_pairs(other.pairs);
        or_into(&mut self.singles, &other.singles);
        or_into(&mut self.firsts, &other.firsts);
        self.empty |= other.empty;
    }
}

fn one(b: u8) -> Bytes {
    let mut s = [0; 4];
    add_range(&mut s, b, b);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The earlier gate, from the regex's literal prefixes (exact where it can list them).
    fn by_literals(hir: &Hir) -> Gate {
        use regex_syntax::hir::literal::{ExtractKind, Extractor};
        let mut ex = Extractor::new();
        ex.kind(ExtractKind::Prefix)
            .limit_class(96)
            .limit_literal_len(2)
            .limit_total(20_000);
        let seq = ex.extract(hir);
        let Some(lits) = seq.literals() else {
            return Gate::all();
        };
        let mut g = Gate::none();
        for l in lits {
            match l.as_bytes() {
                [a, b, ..] => g.set(*a, *b),
                [a] => (0..=255).for_each(|b| g.set(*a, b)),
                [] => return Gate::all(),
            }
        }
        g
    }

    fn hir(re: &str) -> Hir {
        regex_syntax::ParserBuilder::new()
            .build()
            .parse(&format!("^(?:{re})"))
            .unwrap()
    }

    /// Every pair the gate holds, as text.
    fn pairs(g: &Gate) -> Vec<String> {
        (0..=255u8)
            .flat_map(|a| (0..=255u8).map(move |b| (a, b)))
            .filter(|&(a, b)| g.has(&[a, b]))
            .map(|(a, b)| String::from_utf8_lossy(&[a, b]).into_owned())
            .collect()
    }

    /// Never looser than the literal prefixes, and the same on all but the entries where those
    /// gave up early.
    #[test]
    fn the_walk_gives_the_literal_prefixes_gate_on_every_shipped_stream_prefix() {
        let text = crate::parse::patterns::EMBEDDED;
        let doc: serde_norway::Value = serde_norway::from_str(text).unwrap();
        let list = doc["stream_prefixes"].as_sequence().unwrap();
        assert!(list.len() > 10, "{}", list.len());
        let mut same = 0;
        for e in list {
            let re = e["regex"].as_str().unwrap();
            let h = hir(re);
            let (walk, lits) = (Gate::of(&h), by_literals(&h));
            let mut both = walk.clone();
            both.union(&lits);
            assert!(
                both == lits,
                "{re}: a pair the literal prefixes do not hold"
            );
            same += usize::from(walk == lits);
        }
        // Where they differ the literal prefixes gave up early: ` {0,5}[0-9]{1,6}: ` let any
        // byte follow a space or a digit, the walk lets only what the regex allows.
        assert!(same >= list.len() - 2, "{same} of {}", list.len());
    }

    #[test]
    fn each_node_kind_gives_its_starts() {
        let of = |re: &str| pairs(&Gate::of(&hir(re)));
        assert_eq!(of("ab|cd"), ["ab", "cd"]);
        assert_eq!(of("a?b?cd").len(), ["ab", "ac", "bc", "cd"].len());
        assert_eq!(of("a?b?cd"), ["ab", "ac", "bc", "cd"]);
        assert_eq!(of("(?:ab)*c[xy]"), ["ab", "cx", "cy"]);
        assert_eq!(of("[0-9]{4}-").len(), 100);
        assert_eq!(of("x{0,5}yz"), ["xx", "xy", "yz"]);
        assert_eq!(of("(?:a|)(?:|b)cd"), ["ab", "ac", "bc", "cd"]);
        // Two bytes of one character: é is C3 A9.
        assert_eq!(of("é"), ["é"]);
        // A one-byte match lets any second byte through; an empty one lets every line.
        assert_eq!(of("a|bc").len(), 256 + 1);
        assert_eq!(of("a*").len(), 65536);
        // Case folded: `K`, `k` and the Kelvin sign (E2 84 AA).
        assert_eq!(
            of("(?i)k8"),
            ["K8", "k8", "\u{e2}\u{84}"].map(|p| {
                let b: Vec<u8> = p.chars().map(|c| c as u8).collect();
                String::from_utf8_lossy(&b).into_owned()
            })
        );
    }

    /// A line the regex matches always passes (generated lines of each shipped prefix).
    #[test]
    fn every_match_passes() {
        for (re, lines) in [
            (r"\[(?P<e>[a-z]+/[^/\] ]+)\] ", &["[pod/x] a", "[a/é] "][..]),
            (
                r" {0,5}(?P<engine>[0-9]{1,6}): ",
                &["     12: x", "1: ", "  7: "],
            ),
            (r"(?:^|[\]:)] )in=", &["in=3", "] in=", ": in="]),
        ] {
            let g = Gate::of(&hir(re));
            let r = regex::Regex::new(&format!("^(?:{re})")).unwrap();
            for l in lines {
                assert!(r.is_match(l), "{re} {l}");
                assert!(g.has(l.as_bytes()), "{re} {l}");
            }
        }
    }
}
