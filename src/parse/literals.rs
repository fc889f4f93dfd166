//! Which of the pattern file's prefilter literals a line holds, found in one pass.
//!
//! A line of a known kind holds its kind's literal; most lines hold none. [`LiteralSet::present`]
//! answers with a bit set over [`Patterns::literals`](super::patterns::Patterns) (bit `i` for
//! literal `i`; the loader refuses more than 64), so that trying the candidate kinds in file
//! order costs a bit test each instead of a substring search each.

/// The literals, searched together. Cloned for each parser from one built set (the searchers
/// are compiled once; a clone copies their small tables, the overlapping automaton is shared).
#[derive(Debug, Clone)]
pub struct LiteralSet {
    /// A SIMD (Teddy) searcher over the literals, longest first: where several literals start at
    /// one position, leftmost-first reports the longest, and every other one there is a prefix of
    /// it (`implied`). `None` where Teddy is unavailable.
    packed: Option<aho_corasick::packed::Searcher>,
    /// The literal index of each packed pattern.
    packed_literal: Vec<usize>,
    /// Per literal, the other literals that are prefixes of it (bit set).
    implied: Vec<u64>,
    /// Every occurrence, overlapping: the fallback where Teddy is unavailable.
    overlapping: aho_corasick::AhoCorasick,
    /// Teddy reads a haystack at least `minimum_len` long and hands a shorter one to a much
    /// slower Rabin-Karp search: the end of a line after its last occurrence (`1.1" 200 OK`
    /// after ` HTTP/`) is copied here and padded with NUL bytes instead. `None` when a literal
    /// holds a NUL (padding could then complete it).
    pad: Option<Vec<u8>>,
}

impl LiteralSet {
    /// The set of `literals` (non-empty, at most 64, distinct). `overlapping` must search the
    /// same literals, in the same order, with [`aho_corasick::MatchKind::Standard`].
    pub fn new(literals: &[String], overlapping: aho_corasick::AhoCorasick) -> LiteralSet {
        let mut order: Vec<usize> = (0..literals.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(literals[i].len()));
        let mut b = aho_corasick::packed::Config::new()
            .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
            .builder();
        for &i in &order {
            b.add(&literals[i]);
        }
        let implied = literals
            .iter()
            .enumerate()
            .map(|(i, l)| {
                literals
                    .iter()
                    .enumerate()
                    .filter(|&(j, p)| j != i && l.starts_with(p.as_str()))
                    .fold(0u64, |m, (j, _)| m | 1 << j)
            })
            .collect();
        let pad = (!literals.iter().any(|l| l.contains('\0'))).then(Vec::new);
        LiteralSet {
            packed: b.build(),
            packed_literal: order,
            implied,
            overlapping,
            pad,
        }
    }

    /// The literals `line` holds (bit `i` for literal `i`); 0 for none. Linear in the line: each
    /// search resumes one byte after the previous occurrence's start, so overlapping occurrences
    /// (`batch` inside `new fill batch. `) all count.
    pub fn present(&mut self, line: &str) -> u64 {
        let Some(p) = &self.packed else {
            return self
                .overlapping
                .find_overlapping_iter(line)
                .fold(0, |m, o| m | 1 << o.pattern().as_usize());
        };
        let hay = line.as_bytes();
        let min = p.minimum_len();
        let mut set = 0u64;
        let mut at = 0;
        while at < hay.len() {
            if hay.len() - at < min {
                if let Some(pad) = &mut self.pad {
                    // Every search in the padded copy spans at least `min` bytes.
                    let tail = &hay[at..];
                    pad.clear();
                    pad.extend_from_slice(tail);
                    pad.resize(tail.len() + min, 0);
                    let mut from = 0;
                    while let Some(m) = p.find_in(&*pad, aho_corasick::Span::from(from..pad.len()))
                    {
                        let lit = self.packed_literal[m.pattern().as_usize()];
                        set |= 1 << lit | self.implied[lit];
                        from = m.start() + 1;
                    }
                    return set;
                }
            }
            let Some(m) = p.find_in(hay, aho_corasick::Span::from(at..hay.len())) else {
                break;
            };
            let lit = self.packed_literal[m.pattern().as_usize()];
            set |= 1 << lit | self.implied[lit];
            at = m.start() + 1;
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(lits: &[&str]) -> LiteralSet {
        let lits: Vec<String> = lits.iter().map(|s| s.to_string()).collect();
        let ac = aho_corasick::AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::Standard)
            .build(&lits)
            .unwrap();
        LiteralSet::new(&lits, ac)
    }

    /// Both ways of searching give the same set, which is every literal the line contains.
    fn check(lits: &[&str], line: &str) -> u64 {
        let mut s = set(lits);
        let want = lits
            .iter()
            .enumerate()
            .filter(|(_, l)| line.contains(*l))
            .fold(0u64, |m, (i, _)| m | 1 << i);
        assert_eq!(s.present(line), want, "{line:?}");
        let mut slow = LiteralSet {
            packed: None,
            ..set(lits)
        };
        let mut unpadded = LiteralSet {
            pad: None,
            ..set(lits)
        };
        assert_eq!(unpadded.present(line), want, "{line:?} (not padded)");
        assert_eq!(slow.present(line), want, "{line:?} (fallback)");
        want
    }

    #[test]
    fn overlapping_nested_and_same_start_literals_all_count() {
        let lits = [
            "batch",
            "new fill batch. ",
            "#running-req: ",
            "abc",
            "abcd",
            "bcd",
        ];
        assert_eq!(check(&lits, "nothing here"), 0);
        assert_eq!(check(&lits, "x new fill batch. #running-req: 1"), 0b111);
        assert_eq!(check(&lits, "Decode batch, #running-req: 3"), 0b101);
        // `abc` and `abcd` start together; `bcd` starts inside them.
        assert_eq!(check(&lits, "zabcd"), 0b111000);
        assert_eq!(check(&lits, "abc bcd"), 0b101000);
        assert_eq!(check(&lits, "ab"), 0);
        assert_eq!(check(&lits, "batchbatchbatch abc"), 0b001001);
    }

    /// Occurrences at every distance from the end of lines longer and shorter than Teddy's
    /// minimum haystack (the padded tail), NUL bytes in the line, and cut-off literals at its end.
    #[test]
    fn occurrences_near_the_end_of_a_line_all_count() {
        let lits = [" HTTP/", "batch", "abc", "abcd", "bcd", "#queue-req: "];
        for lead in 0..80 {
            for tail in [
                "",
                "x",
                "1.1\" 200 OK",
                "\0\0",
                "abcd",
                "ab",
                "bcd abc",
                " HTTP",
                "batc",
            ] {
                for mid in ["", " HTTP/", "abc", "batch\0bcd", "#queue-req: 3"] {
                    let line = format!("{}{mid}{tail}", "x".repeat(lead));
                    check(&lits, &line);
                }
            }
        }
        // A literal with a NUL is never padded (the padding could complete it).
        let nul = ["a\0", "zz"];
        assert!(set(&nul).pad.is_none());
        assert_eq!(check(&nul, "xxa"), 0);
        assert_eq!(check(&nul, "xxa\0"), 0b01);
    }
}
