//! Lines that are recognisably one of SGLang's stats or startup lines but that no line kind
//! reads: a field renamed (`max_total_tokens=` for the capacity line's `max_total_num_tokens=`),
//! a new label, the separators gone (`Decode batch #running-req 3 #token 100`). They match no
//! kind, so without this they would pass as other log output: `check` lists them (with their
//! line numbers) and exits 1, and the running exporter counts them
//! (`sglang_log_exporter_lines_unread_total`), so a changed format is seen, never read as
//! "no data".
//!
//! Three shapes, each from the pattern file's own keys:
//! * a stats line with its separators: [`MIN_FIELDS`] fields a stats kind (`prefill`,
//!   `decode`, `retract`) reads, `key: value` as the kinds split them, one of them a stats
//!   line's own (a gauge that moves with the batches or a counter summed from the lines);
//! * a stats line whose label is there (one of [`STATS_LABELS`], the words SGLang's scheduler
//!   prints: `scheduler_metrics_mixin.py`, `scheduler.py` before v0.4.4) with
//!   [`MIN_FIELDS`] of those fields in any form (`#token 100`, `#token=100`, `#token: 100`);
//! * a server-scope startup line read with `=` (the capacity line, `scheduler.py`/
//!   `tp_worker.py`: `max_total_num_tokens=N, chunked_prefill_size=N, ...`): [`MIN_FIELDS`] of
//!   its keys as `key=number`, outside a `ServerArgs` dump.

/// The fewest known fields that make a line one of SGLang's: the retraction line's two
/// (`#retracted_reqs: N, #new_token_ratio: A -> B`); prefill and decode lines carry four or more.
pub const MIN_FIELDS: usize = 2;

/// The labels SGLang's stats lines start with (v0.1.3+: `new fill batch`; v0.1.17 `Prefil
/// batch`; then `Prefill batch`, `Decode batch`; the retraction lines' words).
pub const STATS_LABELS: [&str; 6] = [
    "Prefill batch",
    "Prefil batch",
    "Decode batch",
    "new fill batch",
    "ecode out of memory happened",
    "KV cache pool is full",
];

/// What an unread line looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Looks {
    /// A prefill, decode or retraction line.
    Stats,
    /// The capacity line (a server-scope startup line of `key=value` fields).
    Capacity,
}

impl Looks {
    /// The name `check` and the counter's `kind` label give it.
    pub fn as_str(self) -> &'static str {
        match self {
            Looks::Stats => "stats",
            Looks::Capacity => "capacity",
        }
    }
}

/// The shapes of the lines of one pattern file (built once per pipeline).
#[derive(Debug)]
pub struct Unread {
    /// Keys a stats kind reads into a metric, with whether the metric is a stats line's own.
    stats_keys: Vec<(String, bool)>,
    /// Where a key starts: after a stats kind's field or key/value separator, or the end of a
    /// bracket (SGLang's prefix).
    starts: Vec<String>,
    /// Keys a server-scope `=` startup kind reads into a server-scope metric (the capacity
    /// line's).
    capacity_keys: Vec<String>,
    /// Every key and label above: a line holding none is none of these shapes.
    any: Option<aho_corasick::AhoCorasick>,
    /// The stats labels alone, for the gate in [`Unread::looks_like`]: a SIMD (Teddy) search,
    /// `None` where the CPU has none (the gate then lets every line through).
    labels: Option<aho_corasick::packed::Searcher>,
    /// The stats kinds' key/value separators (`: `; never empty, the loader refuses that),
    /// compiled once (a `str` search compiles its needle at every call).
    kv_finders: Vec<memchr::memmem::Finder<'static>>,
    /// No key, label or separator above holds an ASCII digit, so the answer for a line
    /// depends only on its shape (its digits all read as `0`, see [`super::shape`]): every
    /// test reads digits alike ([`number_like`], `is_alphanumeric`) and finds only digit-free
    /// words.
    pub digits_alike: bool,
}

impl Unread {
    /// The shapes' parts, as [`Patterns::unread`](super::patterns::Patterns::unread) gathers them
    /// from a pattern file's kinds.
    pub(super) fn new(
        stats_keys: Vec<(String, bool)>,
        kvs: Vec<String>,
        starts: Vec<String>,
        capacity_keys: Vec<String>,
    ) -> Unread {
        let words = (stats_keys.iter().map(|(k, _)| k.as_str()))
            .chain(capacity_keys.iter().map(String::as_str))
            .chain(STATS_LABELS);
        let any = aho_corasick::AhoCorasick::new(words).ok();
        let labels = aho_corasick::packed::Searcher::new(STATS_LABELS);
        let kv_finders = kvs
            .iter()
            .map(|kv| memchr::memmem::Finder::new(kv.as_bytes()).into_owned())
            .collect();
        let digits_alike = (stats_keys.iter().map(|(k, _)| k))
            .chain(&kvs)
            .chain(&starts)
            .chain(&capacity_keys)
            .map(String::as_str)
            .chain(STATS_LABELS)
            .all(|w| !w.bytes().any(|b| b.is_ascii_digit()));
        Unread {
            digits_alike,
            stats_keys,
            starts,
            capacity_keys,
            any,
            labels,
            kv_finders,
        }
    }

    /// Whether `text` can be one of the shapes at all, from what each needs and few lines of
    /// other output have: a stats label, or [`MIN_FIELDS`] numbers after a key/value separator
    /// (a stats line with its separators), or after `=` (the capacity line). Most of a busy
    /// log's other lines fail it after a SIMD search or two; the full test reads every key.
    fn may_be(&self, text: &str) -> bool {
        if self.labels.as_ref().is_none_or(|l| l.find(text).is_some()) {
            return true;
        }
        let b = text.as_bytes();
        // `separated_stats` reads the value right after the separator, its fields found with
        // any of the separators together (a pattern file may give a kind `: ` and `=`, or two
        // kinds different ones); `capacity` (`has_field` with `=`) skips spaces first.
        let mut after_kv = self.kv_finders.iter().flat_map(|f| {
            f.find_iter(b)
                .filter(|&i| number_like(&text[i + f.needle().len()..]))
        });
        after_kv.nth(MIN_FIELDS - 1).is_some()
            || memchr::memchr_iter(b'=', b)
                .filter(|&i| number_like(text[i + 1..].trim_start_matches(' ')))
                .nth(MIN_FIELDS - 1)
                .is_some()
    }

    /// What `text`, a line no kind read, looks like, if it is recognisably one of SGLang's.
    /// A comment line (`# ...`, `#` then a space: an annotated sample, a shell transcript) is
    /// none: SGLang's own lines never start so (its v0.1 decode line starts `#running-req:`).
    pub fn looks_like(&self, text: &str) -> Option<Looks> {
        if !self.may_be(text) {
            return None;
        }
        self.looks_like_ungated(text)
    }

    /// [`Unread::looks_like`] without the gate of [`Unread::may_be`]: the reference the gate
    /// must never change (the tests and the fuzz harness compare the two).
    pub fn looks_like_ungated(&self, text: &str) -> Option<Looks> {
        if self.any.as_ref().is_some_and(|a| !a.is_match(text)) {
            return None;
        }
        let t = text.trim_start();
        if t == "#" || t.starts_with("# ") {
            return None;
        }
        if self.separated_stats(text) || self.labelled_stats(text) {
            return Some(Looks::Stats);
        }
        self.capacity(text).then_some(Looks::Capacity)
    }

    /// Whether a stats kind reads `key`: `Some(true)` for a stats line's own metric.
    fn known(&self, key: &str) -> Option<bool> {
        self.stats_keys
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, own)| *own)
    }

    /// [`MIN_FIELDS`] stats fields as `key: value`, one a stats line's own.
    fn separated_stats(&self, text: &str) -> bool {
        let mut found: Vec<&str> = Vec::new();
        let mut moving = false;
        for f in &self.kv_finders {
            for i in f.find_iter(text.as_bytes()) {
                if !number_like(&text[i + f.needle().len()..]) {
                    continue;
                }
                let before = &text[..i];
                let from = self
                    .starts
                    .iter()
                    .filter_map(|s| before.rfind(s.as_str()).map(|p| p + s.len()))
                    .max()
                    .unwrap_or(0);
                let key = before[from..].trim();
                if found.contains(&key) {
                    continue;
                }
                if let Some(own) = self.known(key) {
                    found.push(key);
                    moving |= own;
                    if moving && found.len() >= MIN_FIELDS {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// A stats label, then [`MIN_FIELDS`] stats fields in any form, one a stats line's own.
    fn labelled_stats(&self, text: &str) -> bool {
        let Some(at) = STATS_LABELS.iter().filter_map(|l| text.find(l)).min() else {
            return false;
        };
        let rest = &text[at..];
        let mut found = 0;
        let mut moving = false;
        for (key, own) in &self.stats_keys {
            if has_field(rest, key, &[":", "=", ""]) {
                found += 1;
                moving |= own;
                if moving && found >= MIN_FIELDS {
                    return true;
                }
            }
        }
        false
    }

    /// [`MIN_FIELDS`] capacity keys as `key=number`, outside a `ServerArgs` dump.
    fn capacity(&self, text: &str) -> bool {
        if text.contains("ServerArgs(") || text.contains("server_args") {
            return false;
        }
        let found = self
            .capacity_keys
            .iter()
            .filter(|k| has_field(text, k, &["="]))
            .count();
        found >= MIN_FIELDS
    }
}

/// Whether `text` holds `key` as a whole word followed by one of `kvs` (`""`: none), spaces
/// and a number.
fn has_field(text: &str, key: &str, kvs: &[&str]) -> bool {
    text.match_indices(key).any(|(i, _)| {
        let word_start = text[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
        let after = &text[i + key.len()..];
        word_start
            && kvs.iter().any(|kv| {
                after.strip_prefix(kv).is_some_and(|v| {
                    let v2 = v.trim_start_matches(' ');
                    // A value after the key itself (`#token 100`) needs the space.
                    (!kv.is_empty() || v2.len() < v.len()) && number_like(v2)
                })
            })
    })
}

/// Whether a field's value starts as SGLang prints a number: a digit (`3`, `0.08`, `12.5%`), a
/// sign, `nan`, or a boolean (`cuda graph: True`).
pub fn number_like(v: &str) -> bool {
    let b = v.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_digit() => true,
        Some(b'-' | b'+') => b.get(1).is_some_and(u8::is_ascii_digit),
        _ => ["nan", "True", "False"].iter().any(|w| v.starts_with(w)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::patterns::Patterns;

    #[test]
    fn only_lines_shaped_like_sglangs_look_like_them() {
        let pat = Patterns::embedded().unwrap();
        let s = pat.unread();
        let stats = Some(Looks::Stats);
        let capacity = Some(Looks::Capacity);
        for (line, want) in [
            // A label SGLang might print next, with its fields.
            ("[2026-06-03 10:00:00 TP0] Decode step, #running-req: 3, #token: 300, token usage: 0.03", stats),
            ("Decode out of space. #retracted_reqs: 1, #new_token_ratio: 0.5000 -> 0.8000", stats),
            ("[2026-0٦-03 10:00:00 TP0] Decode batch, #running-req: 3, cuda graph: True", stats),
            // The label, the separators gone.
            ("[2026-06-03 10:00:10] Decode batch #running-req 3 #token 100 token usage 0.01", stats),
            ("[2026-06-03 10:00:10] Decode batch: #running-req=3 #token=100", stats),
            ("[2026-06-03 10:00:10 TP0] Prefill batch #new-seq 1 #new-token 100", stats),
            // The capacity line with a field renamed.
            ("[2026-06-03 10:00:00 TP0] max_total_tokens=1000, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=100, context_len=4096, available_gpu_mem=10.00 GB", capacity),
            ("max_total_tokens=1000, max_running_requests=100, context_len=4096", capacity),
            ("max_total_tokens=1000, max_running_requests=100", None),
            // Only a mention of a batch, or one figure.
            ("Capturing batches (bs=4 avail_mem=20.10 GB):  83%|████████▎ | 19/23 [00:04<00:00,  4.60it/s]", None),
            ("    batch = self.get_next_batch_to_run()", None),
            ("[2026-06-03 10:00:00 TP0] Decode batch: #running-req 3", None),
            ("[2026-06-03 10:00:00] Prefill batch. #bid: 1, #cache_miss: 1", None),
            ("warning: #running-req: 3 exceeds the limit", None),
            ("Decode batch size 3 is too large for #token budget", None),
            ("the context_len=4096 of the model", None),
            ("server_args=ServerArgs(chunked_prefill_size=8192, max_prefill_tokens=16384", None),
            // Startup figures no kind reads: no stats line's own field.
            ("[2026-08-10 10:00:00 TP0] KV Cache VA upper bound. dtype: torch.float8_e4m3fn, #tokens: 4100000, KV size: 140.00 GB", None),
            ("# Decode batch, #running-req: 3, #token: 300", None),
        ] {
            assert_eq!(s.looks_like(line), want, "{line}");
        }
    }

    /// The gate never changes the answer: every line of the shipped samples and the test
    /// inputs, and each with its separators, `=` signs or numbers taken away or shuffled.
    #[test]
    fn the_gate_never_changes_the_answer() {
        let pat = Patterns::embedded().unwrap();
        let s = pat.unread();
        let root = env!("CARGO_MANIFEST_DIR");
        let mut lines = Vec::new();
        for dir in ["samples", "tests/data"] {
            let Ok(rd) = std::fs::read_dir(format!("{root}/{dir}")) else {
                continue;
            };
            for e in rd.flatten() {
                if let Ok(t) = std::fs::read(e.path()) {
                    let t = String::from_utf8_lossy(&t).into_owned();
                    lines.extend(t.lines().map(str::to_string));
                }
            }
        }
        // Also with more separators than the shipped file's `: ` (a pattern file's own).
        let more_kvs = Unread::new(
            s.stats_keys.clone(),
            [": ", "="].map(String::from).to_vec(),
            s.starts.clone(),
            s.capacity_keys.clone(),
        );
        lines.extend(
            [
                "[2026-06-03 10:00:00 TP0] Decode step, #running-req: 3, #token=100",
                "[2026-06-03 10:00:00 TP0] Decode step, #running-req=3, #token: 100",
            ]
            .map(String::from),
        );
        let mut checked = 0;
        let mut looked = 0;
        // A parser keeps the answer by line shape: the same answer on every line, and on a
        // copy with other digits (the same shape, answered from the memo).
        let mut parser =
            crate::parse::Parser::new(std::sync::Arc::new(Patterns::embedded().unwrap()));
        let mut memo_answers = 0;
        for l in &lines {
            let other = l.replace(|c: char| c.is_ascii_digit(), "7");
            for v in [l, &other, l] {
                if let Err(looks) = parser.parse_or_unread(v) {
                    assert_eq!(looks, s.looks_like_ungated(v), "{v}");
                    memo_answers += usize::from(looks.is_some());
                }
            }
        }
        assert!(memo_answers > 100, "{memo_answers}");
        assert!(s.digits_alike && more_kvs.digits_alike);
        let digit_key = Unread::new(
            vec![("#token2".into(), true)],
            vec![": ".into()],
            s.starts.clone(),
            Vec::new(),
        );
        assert!(
            !digit_key.digits_alike,
            "a key with a digit tells shapes apart"
        );
        for (s, l) in lines.iter().flat_map(|l| [(s, l), (&more_kvs, l)]) {
            for v in [
                l.clone(),
                l.replace(": ", " "),
                l.replace(": ", "="),
                l.replace(", ", " "),
                l.replace('=', ": "),
                l.replace(|c: char| c.is_ascii_digit(), "x"),
                l.replace("batch", "step"),
            ] {
                let want = s.looks_like_ungated(&v);
                assert_eq!(s.looks_like(&v), want, "{v}");
                checked += 1;
                looked += usize::from(want.is_some());
            }
        }
        assert!(
            checked > 10_000 && looked > 100,
            "{checked} lines, {looked} look like"
        );
    }
}
