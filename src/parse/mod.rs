//! Turning one log line into a typed [`Record`]: wrapper and prefix, line kind, fields.
//!
//! Pure functions over `&str` with no I/O. A [`Parser`] owns reusable scratch space, so a line
//! that matches no pattern costs one multi-literal scan and no allocation.

pub mod fields;
pub mod patterns;
pub mod prefix;

use std::sync::Arc;

use regex::{CaptureLocations, Regex};

use crate::record::{Access, LogTime, Ranks, Record, ServerArgs};
use fields::{compound_key, compound_part, parse_value, split_fields, split_kv};
use patterns::{Class, FieldTarget, MetricId, Patterns};

/// Parses lines with one compiled [`Patterns`]. One per source thread (it holds scratch space).
#[derive(Debug)]
pub struct Parser {
    pat: Arc<Patterns>,
    locs: Vec<CaptureLocations>,
    values: Vec<(MetricId, f64)>,
    unknown_spans: Vec<(usize, usize)>,
    key_buf: String,
    /// Scratch and group indices for the prefix regex, so that reading it allocates nothing.
    prefix: PrefixScratch,
    /// Groups `method`, `path`, `status` of each line kind's regex (for access lines).
    access_groups: Vec<[Option<usize>; 3]>,
    /// A substring finder per prefilter literal, to test the few a line's kinds ask about.
    finders: Vec<memchr::memmem::Finder<'static>>,
    /// The literals as a SIMD (Teddy) searcher: about ten times faster per line than the
    /// automaton in [`Patterns::prefilter`], which stays the fallback where Teddy is unavailable.
    packed: Option<aho_corasick::packed::Searcher>,
    /// Per line kind, field keys already looked up and their targets (see [`FieldMemo`]).
    field_memo: Vec<FieldMemo>,
}

/// The field keys of one line kind seen so far with [`Patterns::field`]'s answer, so the common
/// keys cost a short comparison instead of two hash lookups. Bounded: keys past `MEMO_KEYS` are
/// looked up every time. Lines print their keys in a fixed order, so the search starts after the
/// previous hit.
#[derive(Debug, Default)]
struct FieldMemo {
    keys: Vec<(Box<str>, Option<FieldTarget>)>,
    next: usize,
}

const MEMO_KEYS: usize = 64;

impl FieldMemo {
    fn get(&mut self, pat: &Patterns, kind: &patterns::LineKind, key: &str) -> Option<FieldTarget> {
        let n = self.keys.len();
        for j in 0..n {
            let i = (self.next + j) % n;
            if &*self.keys[i].0 == key {
                self.next = i + 1;
                return self.keys[i].1;
            }
        }
        let t = pat.field(kind, key);
        if n < MEMO_KEYS {
            self.keys.push((key.into(), t));
            self.next = n + 1;
        }
        t
    }
}

/// Reusable state for reading the SGLang prefix.
#[derive(Debug)]
struct PrefixScratch {
    /// The prefix regex anchored at the start of the text: the common case (the line starts with
    /// the prefix) is one anchored match instead of an unanchored search.
    anchored: Option<Regex>,
    locs: CaptureLocations,
    /// Indices of groups `date`, `time`, `frac`, `tags`.
    groups: [Option<usize>; 4],
    /// Recently read prefixes (only for [`CACHEABLE_PREFIX`]).
    cache: Option<PrefixCache>,
}

/// The prefix regex the cache is proven for: it ends with `\]` and nothing before that can
/// match `]`, so its anchored match on any text that starts with an earlier match is that same
/// match, with the same groups. Another (custom) prefix regex is simply not cached.
const CACHEABLE_PREFIX: &str = r"\[(?:(?P<date>\d{4}-\d\d-\d\d) )?(?P<time>\d\d:\d\d:\d\d)(?:[.,](?P<frac>\d{1,9}))?(?P<tags>(?: [A-Z][A-Z_]*\d+)*)\]";

/// The last few prefixes read (their text and what it gave). Consecutive lines mostly share one:
/// the same second and rank. Buffers are reused, so it allocates only while warming up.
#[derive(Debug, Default)]
struct PrefixCache {
    entries: [(Vec<u8>, Option<LogTime>, Ranks); 8],
    next: usize,
}

impl PrefixCache {
    fn get(&self, region: &str) -> Option<(usize, Option<LogTime>, Ranks)> {
        self.entries
            .iter()
            .find(|(p, _, _)| !p.is_empty() && region.as_bytes().starts_with(p))
            .map(|(p, t, r)| (p.len(), *t, *r))
    }

    fn put(&mut self, text: &str, t: Option<LogTime>, r: Ranks) {
        let e = &mut self.entries[self.next];
        e.0.clear();
        e.0.extend_from_slice(text.as_bytes());
        e.1 = t;
        e.2 = r;
        self.next = (self.next + 1) % self.entries.len();
    }
}

fn group_index(re: &Regex, name: &str) -> Option<usize> {
    re.capture_names().position(|n| n == Some(name))
}

impl Parser {
    /// A parser for the given patterns.
    pub fn new(pat: Arc<Patterns>) -> Parser {
        let locs = pat
            .lines
            .iter()
            .map(|l| l.regex.capture_locations())
            .collect();
        let access_groups = pat
            .lines
            .iter()
            .map(|l| ["method", "path", "status"].map(|n| group_index(&l.regex, n)))
            .collect();
        let prefix = PrefixScratch {
            // `^(?:…)` keeps the group numbers and the leftmost-first preference of the original.
            anchored: Regex::new(&format!("^(?:{})", pat.prefix.as_str())).ok(),
            locs: pat.prefix.capture_locations(),
            groups: ["date", "time", "frac", "tags"].map(|n| group_index(&pat.prefix, n)),
            cache: (pat.prefix.as_str() == CACHEABLE_PREFIX).then(PrefixCache::default),
        };
        let finders = pat
            .literals
            .iter()
            .map(|l| memchr::memmem::Finder::new(l.as_bytes()).into_owned())
            .collect();
        let field_memo = pat.lines.iter().map(|_| FieldMemo::default()).collect();
        let mut packed = aho_corasick::packed::Config::new().builder();
        packed.extend(&pat.literals);
        let packed = packed.build();
        Parser {
            packed,
            finders,
            field_memo,
            pat,
            locs,
            values: Vec::with_capacity(32),
            unknown_spans: Vec::with_capacity(8),
            key_buf: String::with_capacity(64),
            prefix,
            access_groups,
        }
    }

    /// The patterns this parser uses.
    pub fn patterns(&self) -> &Arc<Patterns> {
        &self.pat
    }

    /// Parses one line (without its `\n`; a trailing `\r` is ignored). Returns `None` for a line
    /// that is none of the known kinds.
    pub fn parse<'a>(&'a mut self, line: &'a str) -> Option<Record<'a>> {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let pat = &*self.pat;
        // Cheap rejection: most lines contain none of the literals.
        // Which literals occur is asked lazily, only for the kinds tried (overlapping literals
        // count: `new fill batch. ` contains `batch`). Every occurrence lies in a window from the
        // first one found: the substring tests look only there.
        let (window_start, first) = match &self.packed {
            // Leftmost-first: no occurrence starts before this one.
            Some(p) => p.find(line).map(|m| (m.start(), m.pattern().as_usize()))?,
            // Standard: this one ends first, so none starts before its end minus the longest.
            None => pat.prefilter.find(line).map(|m| {
                let from = m.end().saturating_sub(pat.prefilter.max_pattern_len());
                (from, m.pattern().as_usize())
            })?,
        };
        let window = &line.as_bytes()[window_start..];
        let mut known: u64 = 1 << first;
        let mut present: u64 = known;
        let finders = &self.finders;
        // Line kinds in file order; the first whose literal is present and whose regex matches.
        let k = (0..pat.lines.len()).find(|&k| {
            let bit = 1u64 << pat.kind_literal[k];
            if known & bit == 0 {
                known |= bit;
                if finders[pat.kind_literal[k]].find(window).is_some() {
                    present |= bit;
                }
            }
            present & bit != 0
                && pat.lines[k]
                    .regex
                    .captures_read(&mut self.locs[k], line)
                    .is_some()
        })?;
        let kind = &pat.lines[k];
        let locs = &self.locs[k];
        let (_, m_end) = locs.get(0)?;
        let group = |gi: Option<usize>| gi.and_then(|g| locs.get(g));

        // The SGLang prefix: the last timestamp bracket before the end of the label.
        let region = &line[..m_end];
        let (time, mut ranks) = self.prefix.read(pat, region);
        if ranks.tp.is_none() && time.is_none() {
            // v0.1.17-v0.2.13 tag every message with `[gpu_id=N] ` or `[gpu=N] ` (those versions
            // print no timestamp prefix).
            ranks.tp = gpu_tag(region);
        }
        let r = ranks;
        if [r.dp, r.pp, r.attn_cp, r.moe_dp, r.tp, r.ep].contains(&Some(prefix::BAD_RANK)) {
            return None;
        }

        self.values.clear();
        self.unknown_spans.clear();
        let mut bad_values = 0u32;
        let mut access = None;
        let mut server_args = None;
        match kind.class {
            Class::Access => {
                let [method, path, status] =
                    self.access_groups[k].map(|g| group(g).map(|(s, e)| &line[s..e]));
                access = Some(Access {
                    method: method.unwrap_or(""),
                    path: path.unwrap_or(""),
                    status: status.and_then(|s| s.parse().ok()).unwrap_or(0),
                });
            }
            Class::ServerArgs => server_args = Some(Box::new(parse_server_args(&line[m_end..]))),
            _ => {
                for &(gi, target) in &kind.group_fields {
                    if let Some((s, e)) = locs.get(gi) {
                        push_value(&mut self.values, target, &line[s..e], &mut bad_values);
                    }
                }
                let start = group(kind.fields_group).map_or(m_end, |(s, _)| s);
                let mut body = &line[start..];
                if let Some(stop) = &kind.stop {
                    if let Some(p) = body.find(stop.as_str()) {
                        body = &body[..p];
                    }
                }
                let body = body.trim_end_matches([' ', ',', '\t']);
                let mut compound: Option<&str> = None;
                for piece in split_fields(body, &kind.separators) {
                    let (key, value) = match split_kv(piece, &kind.kv) {
                        Some(kv) => kv,
                        None => match (compound, compound_part(piece.trim())) {
                            // `swa=8192` after `#token: full=20480`
                            (Some(ck), Some(_)) => (ck, piece.trim()),
                            _ => continue,
                        },
                    };
                    let (key, value) = match compound_part(value) {
                        Some((sub, num)) if kind.kv.iter().all(|k| k != "=") => {
                            compound = Some(key);
                            (compound_key(key, sub, &mut self.key_buf), num)
                        }
                        _ => {
                            compound = None;
                            (key, value)
                        }
                    };
                    match self.field_memo[k].get(pat, kind, key) {
                        Some(t) => push_value(&mut self.values, t, value, &mut bad_values),
                        None => {
                            let off = key.as_ptr() as usize;
                            if off >= line.as_ptr() as usize
                                && off + key.len() <= line.as_ptr() as usize + line.len()
                            {
                                let s = off - line.as_ptr() as usize;
                                self.unknown_spans.push((s, s + key.len()));
                            }
                        }
                    }
                }
            }
        }
        Some(Record {
            kind: k,
            class: kind.class,
            time,
            ranks,
            values: &self.values,
            line,
            unknown: &self.unknown_spans,
            bad_values,
            access,
            server_args,
        })
    }
}

/// The N of a `[gpu_id=N]` / `[gpu=N]` message tag (v0.1.17-v0.2.13).
fn gpu_tag(region: &str) -> Option<u32> {
    let p = memchr::memmem::find(region.as_bytes(), b"[gpu")?;
    let rest = &region[p + 4..];
    let rest = rest
        .strip_prefix("_id=")
        .or_else(|| rest.strip_prefix('='))?;
    let end = rest.find(']')?;
    rest[..end].parse().ok()
}

impl PrefixScratch {
    /// The time and ranks of the last prefix match in `region` (none: no time, no ranks).
    fn read(&mut self, pat: &Patterns, region: &str) -> (Option<LogTime>, Ranks) {
        if let Some((len, t, r)) = self.cache.as_ref().and_then(|c| c.get(region)) {
            if pat.prefix.find_at(region, len).is_none() {
                return (t, r);
            }
        }
        if self.read_at_start(pat, region) {
            let locs = &self.locs;
            let g = |i: Option<usize>| i.and_then(|i| locs.get(i)).map(|(s, e)| &region[s..e]);
            let [date, time, frac, tags] = self.groups.map(g);
            let (t, r) = prefix::read_prefix_parts(pat, date, time, frac, tags);
            if let (Some(c), Some((_, end))) = (self.cache.as_mut(), self.locs.get(0)) {
                c.put(&region[..end], t, r);
            }
            return (t, r);
        }
        match pat.prefix.captures_iter(region).last() {
            Some(c) => prefix::read_prefix(pat, &c),
            None => (None, Ranks::default()),
        }
    }

    /// Fills `locs` with the prefix when the region starts with it and holds no later match: then
    /// it is the last match, the one the general path (`captures_iter(..).last()`) would read.
    /// `false` sends the caller to the general path.
    fn read_at_start(&mut self, pat: &Patterns, region: &str) -> bool {
        let Some(a) = &self.anchored else {
            return false;
        };
        match a.captures_read(&mut self.locs, region) {
            Some(m) if !m.is_empty() => pat.prefix.find_at(region, m.end()).is_none(),
            _ => false,
        }
    }
}

fn push_value(values: &mut Vec<(MetricId, f64)>, t: FieldTarget, raw: &str, bad: &mut u32) {
    let FieldTarget::Metric { id, scale, sum } = t else {
        return;
    };
    match parse_value(raw) {
        Ok(v) => {
            // Scaled values are byte counts from `X GB`: whole bytes.
            let v = if scale == 1.0 { v } else { (v * scale).round() };
            match values.iter_mut().find(|(m, _)| *m == id) {
                Some(slot) if sum => slot.1 += v,
                Some(slot) => slot.1 = v,
                None => values.push((id, v)),
            }
        }
        Err(_) => *bad += 1,
    }
}

/// Reads the few `ServerArgs(...)` fields we use from the repr SGLang prints
/// (`key='text'`, `key=123`, `key=None`, `key=True`), ignoring the rest.
pub fn parse_server_args(s: &str) -> ServerArgs {
    let mut out = ServerArgs::default();
    let mut model_path = None;
    let mut served = None;
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // key
        let ks = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        let key = &s[ks..i];
        if i >= b.len() || b[i] != b'=' {
            // not `key=`: skip to the next top-level `, `
            i = skip_value(b, i);
            continue;
        }
        i += 1;
        let vs = i;
        i = skip_value(b, i);
        let raw = s[vs..i.min(b.len())].trim_end_matches([',', ' ', ')']);
        let text = raw
            .strip_prefix('\'')
            .and_then(|r| r.strip_suffix('\''))
            .or_else(|| raw.strip_prefix('"').and_then(|r| r.strip_suffix('"')));
        let num = || raw.parse::<u32>().ok();
        match key {
            "model_path" => model_path = text.map(str::to_string),
            "served_model_name" => served = text.map(str::to_string),
            "disaggregation_mode" => out.disaggregation_mode = text.map(str::to_string),
            "tp_size" => out.tp_size = num(),
            "dp_size" => out.dp_size = num(),
            "pp_size" => out.pp_size = num(),
            "base_gpu_id" => out.base_gpu_id = num(),
            "gpu_id_step" => out.gpu_id_step = num(),
            "enable_dp_attention" => out.enable_dp_attention = Some(raw == "True"),
            _ => {}
        }
    }
    out.model_name = served.or(model_path);
    out
}

/// Index just past the value starting at `i` (and its `, ` separator), honouring quotes and
/// brackets so that `a='x, y'` and `l=[1, 2]` stay whole.
fn skip_value(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0i32;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        match quote {
            Some(q) => {
                if c == b'\\' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                b'\'' | b'"' => quote = Some(c),
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                b',' if depth <= 0 => {
                    i += 1;
                    while i < b.len() && b[i] == b' ' {
                        i += 1;
                    }
                    return i;
                }
                _ => {}
            },
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod fast_path_tests {
    //! The parser's shortcuts (anchored prefix, literal window, field memo) against the cases
    //! that must take the general path.
    use super::*;

    fn parser() -> Parser {
        Parser::new(Arc::new(Patterns::embedded().unwrap()))
    }

    fn running(p: &mut Parser, line: &str) -> (Option<u32>, Option<u32>, Option<String>, f64) {
        let id = p.patterns().metric_by_id("num_running_reqs").unwrap();
        let r = p.parse(line).expect("a stats line");
        let time = r.time.map(|t| t.time.to_string());
        (r.ranks.dp, r.ranks.tp, time, r.get(id).unwrap())
    }

    #[test]
    fn prefix_after_other_text_and_the_last_of_two() {
        let mut p = parser();
        let tail = "Decode batch, #running-req: 5, #token: 10, token usage: 0.01, #queue-req: 0";
        let plain = format!("[2026-06-03 10:00:00 DP1 TP2] {tail}");
        let after = format!("host app: [2026-06-03 10:00:00 DP1 TP2] {tail}");
        let two = format!("[2026-06-03 09:00:00 DP0 TP0] [2026-06-03 11:00:00.5 DP2 TP3] {tail}");
        let want = |dp, tp, t: &str| (Some(dp), Some(tp), Some(t.to_string()), 5.0);
        assert_eq!(running(&mut p, &plain), want(1, 2, "10:00:00"));
        assert_eq!(running(&mut p, &after), want(1, 2, "10:00:00"));
        assert_eq!(running(&mut p, &two), want(2, 3, "11:00:00.5"));
        // No prefix at all.
        assert_eq!(running(&mut p, tail), (None, None, None, 5.0));
    }

    #[test]
    fn overlapping_literals_and_repeated_keys() {
        let mut p = parser();
        // `new fill batch. ` contains `batch`, the literal of the kinds tried first.
        let v01 = "new fill batch. #seq: 3. #cached_token: 128. #new_token: 1536. #remaining_req: 12. #running_req: 5";
        let pat = p.patterns().clone();
        for _ in 0..3 {
            let r = p.parse(v01).unwrap();
            assert_eq!(pat.lines[r.kind].name, "prefill_v01");
        }
        // The memo answers the same as the first lookup, unknown keys included.
        let line =
            "[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 7, #made-up: 1, #queue-req: 2";
        for _ in 0..3 {
            let r = p.parse(line).unwrap();
            assert_eq!(r.unknown_keys().collect::<Vec<_>>(), ["#made-up"]);
            assert_eq!(r.values.len(), 2);
        }
    }

    #[test]
    fn access_groups() {
        let mut p = parser();
        let r = p
            .parse(r#"[2026-06-03 10:00:26] INFO:     127.0.0.1:44941 - "POST /generate?x=1 HTTP/1.1" 503 Service Unavailable"#)
            .unwrap();
        let a = r.access.unwrap();
        assert_eq!((a.method, a.path, a.status), ("POST", "/generate", 503));
        assert!(p.parse("[2026-06-03 10:00:26] nothing to see").is_none());
    }
}

#[cfg(test)]
mod prefix_cache_tests {
    use super::*;

    /// The cache is on for the embedded prefix. If this fails, the prefix regex changed: check
    /// the argument on [`CACHEABLE_PREFIX`] still holds for the new one, then update the const.
    #[test]
    fn embedded_prefix_is_cached() {
        let p = Parser::new(Arc::new(Patterns::embedded().unwrap()));
        assert!(p.prefix.cache.is_some());
    }

    #[test]
    fn cached_prefix_reads_as_fresh() {
        let mut p = Parser::new(Arc::new(Patterns::embedded().unwrap()));
        let id = p.patterns().metric_by_id("num_running_reqs").unwrap();
        let tail = "Decode batch, #running-req: 5, #queue-req: 0";
        let lines = [
            format!("[2026-06-03 10:00:00 DP1 TP2] {tail}"),
            format!("[2026-06-03 10:00:00 DP1 TP2] {tail}"),
            // Starts with a cached prefix but carries a later one: the later one wins.
            format!("[2026-06-03 10:00:00 DP1 TP2] [2026-06-03 10:00:09 DP3 TP3] {tail}"),
            format!("[2026-06-03 10:00:00 DP1 TP2]{tail}"),
            format!("[2026-06-03 10:00:00 DP1] {tail}"),
        ];
        let got: Vec<_> = lines
            .iter()
            .map(|l| {
                let r = p.parse(l).unwrap();
                let t = r.time.map(|t| t.time.to_string());
                (r.ranks.dp, r.ranks.tp, t, r.get(id))
            })
            .collect();
        let t = |s: &str| Some(s.to_string());
        assert_eq!(
            got,
            [
                (Some(1), Some(2), t("10:00:00"), Some(5.0)),
                (Some(1), Some(2), t("10:00:00"), Some(5.0)),
                (Some(3), Some(3), t("10:00:09"), Some(5.0)),
                (Some(1), Some(2), t("10:00:00"), Some(5.0)),
                (Some(1), None, t("10:00:00"), Some(5.0)),
            ]
        );
    }
}
