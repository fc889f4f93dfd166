//! The fields section of a line kind's last clean line, kept as a template: its text with the
//! values cut out. Statistics lines print the same keys and separators line after line and only
//! their numbers change, so a line whose text between values equals the template's reads its
//! values without splitting, trimming or looking up a single key.
//!
//! Why it answers what the general splitter ([`super::fields`]) would: values in a template are
//! runs of *plain* bytes, a set that excludes every byte of the kind's separators and `kv`
//! strings, `[` and `=`. So no separator or `kv` occurrence can touch a value, the splitter
//! finds the same pieces and keys in a line that matches the template's text, and those keys
//! have the same targets. A kind with a `stop` text, or whose separators leave no plain bytes
//! worth having, never uses one.

use super::patterns::{FieldTarget, LineKind};

/// Longest fields section kept as a template: statistics lines are 100-400 bytes, and a huge
/// line must not pin its size in memory for the parser's life.
const MAX_TEMPLATE: usize = 2048;

/// Bytes a value in a template may hold (see the module doc), for one line kind.
#[derive(Debug, Clone)]
pub(super) struct PlainBytes([bool; 256]);

impl PlainBytes {
    /// The plain bytes of `kind`: ASCII letters, digits, `.`, `_`, `+`, `-`, less any byte of
    /// its separators and `kv` strings. `None` for a kind a template cannot serve.
    pub(super) fn of(kind: &LineKind) -> Option<PlainBytes> {
        if kind.stop.is_some() {
            return None;
        }
        let mut set = [false; 256];
        for c in 0..=255u8 {
            set[c as usize] = c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'+' | b'-');
        }
        for s in kind.separators.iter().chain(&kind.kv) {
            if s.is_empty() {
                return None;
            }
            for &c in s.as_bytes() {
                set[c as usize] = false;
            }
        }
        // Numbers must stay whole, or the template would take a number for a piece of text.
        set[b'0' as usize..=b'9' as usize]
            .iter()
            .all(|&p| p)
            .then_some(PlainBytes(set))
    }

    /// The length of the run of plain bytes at the start of `b`.
    fn run(&self, b: &[u8]) -> usize {
        b.iter()
            .position(|&c| !self.0[c as usize])
            .unwrap_or(b.len())
    }

    fn all(&self, b: &[u8]) -> bool {
        !b.is_empty() && self.run(b) == b.len()
    }
}

/// One kind's template: literal text and value slots, in line order.
#[derive(Debug, Default)]
pub(super) struct Template {
    /// The literal pieces, one after another.
    text: Vec<u8>,
    /// Per value: where the literal before it ends in `text`, and its key's target (`None`:
    /// an unknown key, whose value is skipped).
    slots: Vec<(u32, Option<FieldTarget>)>,
    /// The unknown keys of the line, as the general path reports them.
    pub(super) unknown_text: String,
    pub(super) unknown_spans: Vec<(usize, usize)>,
    /// Whether the line carried a key its kind requires (or the kind requires none).
    pub(super) required: bool,
    /// The values of the line being read: spans in its fields section.
    found: Vec<(u32, u32)>,
    /// The values a [`Learner`] collects (spans in the line's fields section, targets), kept
    /// here so that learning allocates nothing per line.
    pending: Vec<(usize, usize, Option<FieldTarget>)>,
}

impl Template {
    /// Matches `rest` (the line from its fields section on) against the template: `false` when
    /// the text between its values differs. After `true`, [`Template::values`] gives them.
    pub(super) fn matches(&mut self, plain: &PlainBytes, rest: &str) -> bool {
        self.matched(plain, rest).is_some()
    }

    fn matched(&mut self, plain: &PlainBytes, rest: &str) -> Option<()> {
        if self.text.is_empty() && self.slots.is_empty() {
            return None;
        }
        let b = rest.as_bytes();
        let mut pos = 0usize;
        let mut lit = 0usize;
        self.found.clear();
        for &(end, _) in &self.slots {
            let l = &self.text[lit..end as usize];
            if !super::fields::begins_with(&b[pos..], l) {
                return None;
            }
            pos += l.len();
            let n = plain.run(&b[pos..]);
            if n == 0 {
                return None;
            }
            self.found.push((pos as u32, (pos + n) as u32));
            pos += n;
            lit = end as usize;
        }
        super::fields::bytes_eq(&b[pos..], &self.text[lit..]).then_some(())
    }

    /// The values of the `rest` just matched, with their targets (unknown keys' values left out).
    pub(super) fn values<'s, 'l: 's>(
        &'s self,
        rest: &'l str,
    ) -> impl Iterator<Item = (FieldTarget, &'l str)> + 's {
        self.slots
            .iter()
            .zip(&self.found)
            .filter_map(move |(&(_, t), &(s, e))| Some((t?, &rest[s as usize..e as usize])))
    }

    /// Starts learning a new line (the general path then calls [`Learner::value`] per value).
    pub(super) fn learner<'a>(&'a mut self, plain: &'a PlainBytes, rest: &'a str) -> Learner<'a> {
        self.pending.clear();
        Learner {
            ok: rest.len() <= MAX_TEMPLATE && !rest.contains('['),
            plain,
            rest,
            tpl: self,
        }
    }
}

/// Collects the values the general path reads from one line; [`Learner::keep`] makes them the
/// template when every value was plain.
pub(super) struct Learner<'a> {
    tpl: &'a mut Template,
    plain: &'a PlainBytes,
    rest: &'a str,
    ok: bool,
}

impl Learner<'_> {
    /// A value the general path read (a sub-slice of the line), with its key's target.
    pub(super) fn value(&mut self, value: &str, target: Option<FieldTarget>) {
        if !self.ok {
            return;
        }
        let base = self.rest.as_ptr() as usize;
        let s = (value.as_ptr() as usize).wrapping_sub(base);
        let e = s.wrapping_add(value.len());
        let b = self.rest.as_bytes();
        // A plain value, the whole run (the byte after it is not plain), after the last one.
        self.ok = e <= b.len()
            && self.plain.all(&b[s..e])
            && b.get(e).is_none_or(|&c| !self.plain.0[c as usize])
            && self.tpl.pending.last().is_none_or(|&(_, le, _)| le <= s);
        self.tpl.pending.push((s, e, target));
    }

    /// The line was read with no piece the template cannot replay (compound or bracketed
    /// values, pieces without `kv`): keep it as the template, with the line's unknown keys and
    /// whether it carried a required key.
    pub(super) fn keep(self, unknown_text: &str, unknown_spans: &[(usize, usize)], required: bool) {
        if !self.ok {
            return;
        }
        let t = self.tpl;
        t.text.clear();
        t.slots.clear();
        let b = self.rest.as_bytes();
        let mut at = 0;
        for &(s, e, target) in &t.pending {
            t.text.extend_from_slice(&b[at..s]);
            t.slots.push((t.text.len() as u32, target));
            at = e;
        }
        t.text.extend_from_slice(&b[at..]);
        t.unknown_text.clear();
        t.unknown_text.push_str(unknown_text);
        t.unknown_spans.clear();
        t.unknown_spans.extend_from_slice(unknown_spans);
        t.required = required;
    }
}

#[cfg(test)]
pub(super) mod tests {
    //! A parser that uses templates against one that never does, line by line: the same record
    //! on every shipped log, every census line and values replaced by text that must not pass
    //! for a value.
    use std::sync::Arc;

    use super::super::{patterns::Patterns, Parser};

    fn parsers() -> (Parser, Parser) {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let mut general = Parser::new(pat.clone());
        for (plain, _) in &mut general.templates {
            *plain = None;
        }
        (Parser::new(pat), general)
    }

    /// Everything a record says but the line itself.
    pub(in super::super) fn read(p: &mut Parser, line: &str) -> String {
        p.parse(line).map_or("none".into(), |r| {
            let r = super::super::Record { line: "", ..r };
            format!("{r:?}")
        })
    }

    /// Every line of the shipped logs, cases, request logs and census.
    pub(in super::super) fn corpus() -> Vec<String> {
        let root = env!("CARGO_MANIFEST_DIR");
        let mut lines = Vec::new();
        let mut files: Vec<_> = ["samples", "tests/data/cases", "tests/data/request-logs"]
            .iter()
            .flat_map(|d| std::fs::read_dir(format!("{root}/{d}")).unwrap())
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read(&f).unwrap();
            lines.extend(String::from_utf8_lossy(&text).lines().map(String::from));
        }
        let census =
            std::fs::read_to_string(format!("{root}/tests/data/census-lines.tsv")).unwrap();
        lines.extend(
            census
                .lines()
                .filter(|l| !l.starts_with('#'))
                .filter_map(|l| l.split('\t').nth(2))
                .map(|l| l.replace("\\t", "\t")),
        );
        lines
    }

    #[test]
    fn templates_read_every_shipped_line_as_the_general_path_does() {
        let (mut fast, mut general) = parsers();
        let lines = corpus();
        assert!(lines.len() > 1000, "{}", lines.len());
        for line in &lines {
            // Twice: the second read of a clean line is the template's.
            for _ in 0..2 {
                assert_eq!(read(&mut fast, line), read(&mut general, line), "{line}");
            }
        }
        let used = fast
            .templates
            .iter()
            .filter(|(_, t)| !t.text.is_empty())
            .count();
        assert!(used >= 2, "templates learned: {used}");
    }

    #[test]
    fn a_value_that_is_not_plain_sends_the_line_to_the_general_path() {
        let (mut fast, mut general) = parsers();
        let base = "[2026-06-03 10:00:00 DP0 TP0] Decode batch, #running-req: 111, #token: 243962, token usage: 0.31, cuda graph: True, gen throughput (token/s): 3580.10, #queue-req: 53";
        let odd = [
            "",
            " ",
            "1,2",
            "1, 2",
            "7 ",
            " 8",
            "x: 3",
            "[1]",
            "3]",
            "a=1",
            "full=5",
            "5 GB",
            "nan",
            "-1",
            "+2",
            "1e5",
            "0.5.6",
            "12abc",
            "1,",
            "2:",
            "4\t",
            "é",
            "1 [2, 3]",
            "True",
            "False",
            "0.00",
            "99999999999999999999",
        ];
        let values: Vec<(usize, usize)> = {
            let b = base.as_bytes();
            let mut v = Vec::new();
            let mut i = base.find("batch, ").unwrap() + 7;
            while let Some(p) = base[i..].find(": ") {
                let s = i + p + 2;
                let e = s + b[s..]
                    .iter()
                    .position(|&c| c == b',')
                    .unwrap_or(b.len() - s);
                v.push((s, e));
                i = e;
            }
            v
        };
        assert_eq!(values.len(), 6);
        for &(s, e) in &values {
            for o in odd {
                let line = format!("{}{o}{}", &base[..s], &base[e..]);
                // The template learned from `base` first, then the odd line, then `base` again.
                for l in [base, line.as_str(), base] {
                    assert_eq!(read(&mut fast, l), read(&mut general, l), "{l}");
                }
            }
        }
        // The text between values changed: a key, a separator, the end.
        for (from, to) in [
            ("#token", "#tokens"),
            (", token usage", "; token usage"),
            ("#queue-req: 53", "#queue-req: 53, "),
            ("#queue-req: 53", "#queue-req: 53 extra"),
            ("cuda graph: ", "cuda graph:"),
        ] {
            let line = base.replace(from, to);
            for l in [base, line.as_str(), base] {
                assert_eq!(read(&mut fast, l), read(&mut general, l), "{l}");
            }
        }
    }
}
