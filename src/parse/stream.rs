//! Stream prefixes: what another tool writes before SGLang's line when one stream carries the
//! output of several processes or has been exported, e.g. `kubectl logs --prefix`
//! (`[pod/NAME/CONTAINER] `), `docker compose logs` (`service-1  | `), `srun --label` (`0: `),
//! SkyPilot (`(head, rank=0, pid=N) `), Fluentd's `out_file` (`TIME<TAB>TAG<TAB>{json}`),
//! Loki's `logcli` (`TIME {labels} `), or a log platform that parsed SGLang's `[date time`
//! into its own columns (`TIME HOST LEVEL TP0] `).
//!
//! They are data: the pattern file's `stream_prefixes` list, each a regex matched at the start
//! of the line (after wrappers and colour codes are removed), whose named groups say what the
//! prefix tells:
//!
//! * `engine`: who wrote the line. Lines of different `engine` values are kept apart (an
//!   `engine` label under the source's server, as Ray actors are), so two replicas that both
//!   tag their lines `TP0` never merge.
//! * `node`: a host of one multi-node server (SkyPilot's `head`, `worker1`): read and dropped,
//!   so the server stays one server with its ranks.
//! * `ts`: the line's time, RFC 3339 (`2026-09-26T10:00:01.123Z`) or Unix seconds, ms, µs or
//!   ns; a date and time without a zone is local time (`--timezone`).
//! * `date`, `time`, `frac`: a local time as in SGLang's own prefix.
//! * `tags` (SGLang's rank tags, `DP0 TP1`) and `dp`, `pp`, `attn_cp`, `moe_dp`, `tp`, `ep`
//!   (a rank number each): the ranks, where SGLang's own prefix is gone.
//! * `line`: where the line starts, when the regex must see its first bytes (`(?P<line>\[)`:
//!   only before SGLang's own prefix); else the line starts where the match ends.
//!
//! An entry with `json: true` matches only when a JSON object follows it. A JSON object after
//! any prefix is unwrapped as a wrapper record is (a Loki line holding a Docker record). Prefixes may nest (a compose service whose lines carry
//! kubectl's prefix): up to [`MAX_LAYERS`] are read, their `engine` values joined by a space.

use super::gate::Gate;
use regex::{CaptureLocations, Regex};

use crate::parse::prefix::{set_rank_tag, BAD_RANK};
use crate::record::{LogTime, RankTag, Ranks};

/// How many stream prefixes one line may carry, outermost first.
pub const MAX_LAYERS: usize = 4;

/// Log level words, never part of an `engine` value (a column of an export's line).
const LEVELS: &[&str] = &[
    "TRACE", "TRC", "T", "DEBUG", "DBG", "D", "INFO", "INF", "I", "NOTICE", "N", "WARN", "WRN",
    "WARNING", "W", "ERROR", "ERR", "E", "CRITICAL", "CRIT", "CRT", "C", "FATAL", "FTL", "F",
    "STDOUT", "STDERR",
];

/// Whether a column's `word` says something other than who wrote the line: a log level (how
/// loud: `INFO`, `W`, `level=warning`, `INFO:`), an output stream (`stderr`), a separator of a
/// logging format (`-`, `|`), or the name of the Python logger that printed it (`sglang.srt.
/// managers.scheduler`, `uvicorn.access`: which module, of one process).
pub fn names_no_writer(word: &str) -> bool {
    let w = word.trim_end_matches(':');
    // A module's logger (`sglang.srt.managers.scheduler`: dotted lower-case identifiers),
    // never a bare `sglang`: that is how a syslog identifier or an RFC 5424 app name reads.
    let ident = |p: &str| {
        p.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && p.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
    };
    let logger = |root: &str| {
        w.strip_prefix(root)
            .and_then(|r| r.strip_prefix('.'))
            .is_some_and(|r| r.split('.').all(ident))
    };
    matches!(w, "-" | "|" | "" | "__main__" | "uvicorn")
        || [
            "sglang",
            "uvicorn",
            "fastapi",
            "ray",
            "torch",
            "transformers",
            "vllm",
        ]
        .iter()
        .any(|r| logger(r))
        || is_level(word)
}

/// Appends `part` to the engine identity `buf`, a space between parts, without the part's
/// leading and trailing whitespace (any: a vertical tab as well as a space); a part of
/// whitespace or nothing adds nothing (an empty label set is already empty: see
/// [`push_labels_without_stream`] and `record_origin` of `pipeline::framing`).
pub fn join(buf: &mut String, part: &str) {
    let part = part.trim();
    if part.is_empty() {
        return;
    }
    if !buf.is_empty() {
        buf.push(' ');
    }
    buf.push_str(part);
}

/// Appends the label set `labels` (`{k="v", …}`) to `out` without its `stream` label.
fn push_labels_without_stream(labels: &str, out: &mut String) {
    let inner = &labels[1..labels.len() - 1];
    let mut first = true;
    out.push('{');
    for pair in split_labels(inner) {
        let pair = pair.trim();
        if pair.is_empty() || pair.starts_with("stream=") {
            continue;
        }
        if !first {
            out.push_str(", ");
        }
        first = false;
        out.push_str(pair);
    }
    out.push('}');
    if out.ends_with("{}") {
        out.truncate(out.len() - 2);
        let t = out.trim_end().len();
        out.truncate(t);
    }
}

/// The `k="v"` pairs of a label set's inside, split at commas outside quotes.
fn split_labels(inner: &str) -> impl Iterator<Item = &str> {
    let b = inner.as_bytes();
    let (mut quoted, mut escaped, mut start) = (false, false, 0);
    let mut cuts = Vec::new();
    for (i, &c) in b.iter().enumerate() {
        match c {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b',' if !quoted => {
                cuts.push((start, i));
                start = i + 1;
            }
            _ => {}
        }
    }
    cuts.push((start, b.len()));
    cuts.into_iter().map(move |(a, z)| &inner[a..z])
}

/// Whether `word` is a log level (`INFO`, `W`, `level=warning`, `INFO:`) or a stream name.
fn is_level(word: &str) -> bool {
    let w = word.strip_suffix(':').unwrap_or(word);
    let w = w
        .strip_prefix("level=")
        .or_else(|| w.strip_prefix("severity="))
        .unwrap_or(w);
    let w = w.trim_matches(|c| matches!(c, '"' | '\''));
    LEVELS.iter().any(|l| w.eq_ignore_ascii_case(l))
}

/// The rank groups a stream prefix may have, in [`Ranks`] order.
const RANK_GROUPS: [&str; 6] = ["dp", "pp", "attn_cp", "moe_dp", "tp", "ep"];

/// One compiled stream prefix.
#[derive(Debug)]
pub struct StreamPrefix {
    /// Its name in the pattern file (for messages).
    pub name: String,
    /// The regex, anchored at the start.
    regex: Regex,
    /// Only followed by a JSON object.
    json: bool,
    /// The `engine` group is free columns of an export or a logging format: log levels,
    /// separators and Python logger names in it name no writer and are dropped.
    columns: bool,
    /// Group indices: engine, node, ts, date, time, frac, tags.
    groups: [Option<usize>; 8],
    ranks: [Option<usize>; 6],
    /// Which first two bytes a match can start with (see [`Gate`]).
    gate: Gate,
}

impl StreamPrefix {
    /// Where the line after the prefix starts in a match: the start of group `line` when it
    /// took part (a prefix that must be followed by something it does not consume), else the
    /// end of the match.
    fn end(&self, locs: &CaptureLocations) -> Option<usize> {
        let line = self.groups[7].and_then(|g| locs.get(g)).map(|(s, _)| s);
        line.or_else(|| locs.get(0).map(|(_, e)| e))
    }
}

/// One entry of `stream_prefixes`, its regex compiled (with `^(?:…)` around it).
#[derive(Debug)]
pub struct StreamEntry {
    /// Its name (for messages).
    pub name: String,
    /// The anchored regex.
    pub regex: Regex,
    /// Its syntax tree (for the gate).
    pub hir: regex_syntax::hir::Hir,
    /// `json: true`.
    pub json: bool,
    /// `columns: true`.
    pub columns: bool,
}

/// The compiled `stream_prefixes` of a pattern file, in file order.
#[derive(Debug)]
pub struct StreamPrefixes {
    list: Vec<StreamPrefix>,
    /// The pattern file's rank tags (for a `tags` group).
    rank_tags: Vec<(String, RankTag)>,
    /// The union of every entry's gate.
    gate: Gate,
}

impl Default for StreamPrefixes {
    fn default() -> StreamPrefixes {
        StreamPrefixes {
            list: Vec::new(),
            rank_tags: Vec::new(),
            gate: Gate::none(),
        }
    }
}

/// What the stream prefixes of one line said.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StreamInfo {
    /// Where the text after the prefixes starts.
    pub end: usize,
    /// The `engine` values, joined by a space (empty: none).
    pub engine: String,
    /// The `node` value (empty: none; see [`crate::pipeline::nodes`]).
    pub node: String,
    /// The time as Unix seconds (`ts` with a zone or a Unix number).
    pub unix: Option<f64>,
    /// A local time (`ts` without a zone, or `date`/`time`/`frac`).
    pub local: Option<LogTime>,
    /// The ranks the prefixes named.
    pub ranks: Ranks,
    /// A prefix was there but its time or ranks were malformed: the line is not read.
    pub broken: bool,
}

/// Capture space for each entry, reused from line to line.
#[derive(Debug)]
pub struct StreamScratch {
    locs: Vec<CaptureLocations>,
}

impl StreamPrefixes {
    /// The prefixes of a pattern file, in its order, reading rank tags with `rank_tags`.
    ///
    /// # Errors
    /// A message naming what is wrong with an entry (a regex that matches an empty prefix, a
    /// `date` group without a `time` group).
    pub fn new(
        entries: Vec<StreamEntry>,
        rank_tags: Vec<(String, RankTag)>,
    ) -> Result<StreamPrefixes, String> {
        let mut out = StreamPrefixes {
            rank_tags,
            ..StreamPrefixes::default()
        };
        for StreamEntry {
            name,
            regex,
            hir,
            json,
            columns,
        } in entries
        {
            if regex.is_match("") {
                return Err(format!(
                    "stream prefix {name}: the regex matches an empty prefix"
                ));
            }
            let idx = |n: &str| regex.capture_names().position(|x| x == Some(n));
            let groups = [
                "engine", "node", "ts", "date", "time", "frac", "tags", "line",
            ]
            .map(idx);
            if groups[3].is_some() && groups[4].is_none() {
                return Err(format!(
                    "stream prefix {name}: a group named date needs one named time"
                ));
            }
            let gate = Gate::of(&hir);
            out.gate.union(&gate);
            out.list.push(StreamPrefix {
                name,
                ranks: RANK_GROUPS.map(idx),
                groups,
                json,
                columns,
                regex,
                gate,
            });
        }
        Ok(out)
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Capture space for [`StreamPrefixes::read`].
    pub fn scratch(&self) -> StreamScratch {
        StreamScratch {
            locs: self
                .list
                .iter()
                .map(|p| p.regex.capture_locations())
                .collect(),
        }
    }

    /// Reads the stream prefixes at the start of `text` into `out` (cleared first); `false`
    /// when the line starts with none (most lines: one table lookup).
    pub fn read(&self, text: &str, sc: &mut StreamScratch, out: &mut StreamInfo) -> bool {
        if !self.gate.has(text.as_bytes()) {
            return false;
        }
        out.engine.clear();
        out.node.clear();
        out.end = 0;
        out.unix = None;
        out.local = None;
        out.ranks = Ranks::default();
        out.broken = false;
        let mut found = false;
        for _ in 0..MAX_LAYERS {
            let rest = &text[out.end..];
            let Some(k) = self.matching(rest, sc) else {
                break;
            };
            found = true;
            let p = &self.list[k];
            let locs = &sc.locs[k];
            let len = p.end(locs).unwrap_or(0);
            let g = |i: usize| {
                p.groups[i]
                    .and_then(|g| locs.get(g))
                    .map(|(s, e)| &rest[s..e])
            };
            let engine = g(0).unwrap_or("");
            if engine.starts_with('{') && engine.ends_with('}') {
                // A label set (Loki's stream): one writer whatever its output stream.
                if !out.engine.is_empty() {
                    out.engine.push(' ');
                }
                push_labels_without_stream(engine, &mut out.engine);
            } else {
                // Any whitespace parts words (a vertical tab too: `split_ascii_whitespace`
                // keeps it inside a word, and the label would start with it).
                for word in engine.split_whitespace() {
                    if !(p.columns && names_no_writer(word)) {
                        join(&mut out.engine, word);
                    }
                }
            }
            if let Some(n) = g(1).filter(|n| !n.is_empty()) {
                out.node.clear();
                out.node.push_str(n);
            }
            read_time(&self.rank_tags, g(2), g(3), g(4), g(5), out);
            if let Some(tags) = g(6) {
                for tag in tags.split_ascii_whitespace() {
                    set_rank_tag(&self.rank_tags, tag, &mut out.ranks);
                }
            }
            for (slot, gi) in [
                &mut out.ranks.dp,
                &mut out.ranks.pp,
                &mut out.ranks.attn_cp,
                &mut out.ranks.moe_dp,
                &mut out.ranks.tp,
                &mut out.ranks.ep,
            ]
            .into_iter()
            .zip(p.ranks)
            {
                if let Some((s, e)) = gi.and_then(|g| locs.get(g)) {
                    *slot = Some(rest[s..e].parse().unwrap_or(BAD_RANK));
                }
            }
            out.end += len;
            // The JSON record after it is unwrapped by the caller; no prefix is inside it.
            if p.json {
                break;
            }
        }
        out.broken |= out.ranks.has_bad();
        found
    }

    /// An entry whose regex matches at the start of `text` although its gate, or the gate of
    /// them all, refuses that start: `None` always (the gates never leave out a match, see
    /// [`super::gate`]); the fuzz harness asks it of every line it makes.
    pub fn gate_refusing_a_match(&self, text: &str) -> Option<&str> {
        let b = text.as_bytes();
        self.list
            .iter()
            .find(|p| p.regex.is_match(text) && !(p.gate.has(b) && self.gate.has(b)))
            .map(|p| p.name.as_str())
    }

    /// The first entry (file order) that matches at the start of `rest`, its captures left in
    /// `sc`. A match must leave a line after it, and a `json` entry a JSON object.
    fn matching(&self, rest: &str, sc: &mut StreamScratch) -> Option<usize> {
        let b = rest.as_bytes();
        (0..self.list.len()).find(|&k| {
            let p = &self.list[k];
            p.gate.has(b)
                && p.regex.captures_read(&mut sc.locs[k], rest).is_some()
                && p.end(&sc.locs[k])
                    .is_some_and(|e| e > 0 && e < b.len() && (!p.json || b[e] == b'{'))
        })
    }
}

/// Reads a prefix's time groups into `out` (the first layer that gives a time wins).
fn read_time(
    tags: &[(String, RankTag)],
    ts: Option<&str>,
    date: Option<&str>,
    time: Option<&str>,
    frac: Option<&str>,
    out: &mut StreamInfo,
) {
    if out.unix.is_some() || out.local.is_some() {
        return;
    }
    if let Some(ts) = ts.map(str::trim).filter(|t| !t.is_empty()) {
        if let Some(t) = unix_time(ts) {
            out.unix = Some(t);
        } else if let Some(t) = local_time(ts) {
            out.local = Some(t);
        } else {
            out.broken = true;
        }
        return;
    }
    if time.is_some() {
        match super::prefix::read_prefix_parts(tags, date, time, frac, None) {
            Some((t, _)) => out.local = t,
            None => out.broken = true,
        }
    }
}

/// RFC 3339 (a zone or `Z`), or a Unix time in seconds, ms, µs or ns (by magnitude).
pub fn unix_time(s: &str) -> Option<f64> {
    // `2026-09-26 10:00:01 +0000`: the zone after a space.
    let spaced;
    let s = match s.rsplit_once(' ') {
        Some((dt, z)) if z.starts_with(['+', '-']) && z.len() >= 5 && dt.len() >= 19 => {
            spaced = format!("{dt}{z}");
            spaced.as_str()
        }
        _ => s,
    };
    let b = s.as_bytes();
    // `+0000` (strftime's `%z`, Fluentd's default) is RFC 3339's `+00:00`.
    let colon;
    let s = match b.len().checked_sub(5).map(|i| &b[i..]) {
        Some([b'+' | b'-', h1, h2, m1, m2])
            if [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()) && b.len() > 10 =>
        {
            colon = format!("{}:{}", &s[..s.len() - 2], &s[s.len() - 2..]);
            colon.as_str()
        }
        _ => s,
    };
    if let Some(t) = rfc3339(s) {
        return Some(t);
    }
    if !s.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        return None;
    }
    unix_of_number(s.parse().ok()?)
}

/// Unix seconds of an RFC 3339 time (a zone or `Z` required).
pub fn rfc3339(s: &str) -> Option<f64> {
    let ts: jiff::Timestamp = s.parse().ok()?;
    Some(ts.as_second() as f64 + f64::from(ts.subsec_nanosecond()) / 1e9)
}

/// Unix seconds of a number in seconds, ms, µs or ns (told apart by magnitude); `None` for
/// zero, a negative number or one that is not finite.
pub fn unix_of_number(n: f64) -> Option<f64> {
    let secs = match n {
        n if n < 1e11 => n,
        n if n < 1e14 => n / 1e3,
        n if n < 1e17 => n / 1e6,
        n => n / 1e9,
    };
    (secs.is_finite() && secs > 0.0).then_some(secs)
}

/// A date and time without a zone (`2026-09-26 10:00:01.123`, `T` or a space between).
fn local_time(s: &str) -> Option<LogTime> {
    let dt: jiff::civil::DateTime = s.parse().ok()?;
    Some(LogTime {
        date: Some(dt.date()),
        month_day: None,
        time: dt.time(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::patterns::Patterns;

    fn read(line: &str) -> Option<(String, StreamInfo)> {
        let pat = Patterns::embedded().unwrap();
        let mut sc = pat.streams.scratch();
        let mut out = StreamInfo::default();
        pat.streams
            .read(line, &mut sc, &mut out)
            .then(|| (line[out.end..].to_string(), out))
    }

    const SG: &str = "[2026-09-26 10:00:01 TP0] Decode batch, #running-req: 3";

    /// Fuzz seed 1796693720487463152: a vertical tab before an export's writer column read as
    /// part of the writer (`split_ascii_whitespace` keeps it), so the engine label started with
    /// it. Any whitespace now parts the words, and a joined part is trimmed.
    #[test]
    fn whitespace_of_any_kind_around_a_writer_is_no_part_of_its_name() {
        let line = "2025-02-04 21:29:17 \x0b2025-02-04 05:29:17 TP0] Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=8.37 GB";
        let (rest, i) = read(line).unwrap();
        assert_eq!(i.engine, "2025-02-04 05:29:17");
        assert!(rest.starts_with("Load weight end."), "{rest}");
        for ws in ["\x0b", "\u{85}", "\u{3000}", "\x0c"] {
            let l = format!("2026-09-26 10:00:01 worker{ws}7 TP0] Decode batch, #running-req: 3");
            let (_, i) = read(&l).unwrap();
            assert_eq!(i.engine, "worker 7", "{l:?}");
        }
        let mut buf = String::new();
        for part in ["\x0b", " a\x0b", "", "\u{3000}b "] {
            join(&mut buf, part);
        }
        assert_eq!(buf, "a b");
    }

    #[test]
    fn a_plain_sglang_line_has_no_stream_prefix() {
        assert_eq!(read(SG), None);
        assert_eq!(read("Decode batch, #running-req: 3"), None);
        assert_eq!(
            read("INFO:     127.0.0.1:5 - \"GET /health HTTP/1.1\" 200 OK"),
            None
        );
        // Ray's actor prefix is the parser's (no comma after the name).
        assert_eq!(
            read(&format!("(SGLangEngine pid=12, ip=10.0.0.1) {SG}")),
            None
        );
    }

    #[test]
    fn kubectl_prefix_with_and_without_timestamps() {
        let (rest, i) = read(&format!("[pod/sglang-7d9f-abc/server] {SG}")).unwrap();
        assert_eq!(
            (rest.as_str(), i.engine.as_str()),
            (SG, "pod/sglang-7d9f-abc/server")
        );
        assert_eq!(i.unix, None);
        let (rest, i) = read(&format!(
            "[pod/sglang-0/server] 2026-09-26T10:00:01.500000000Z {SG}"
        ))
        .unwrap();
        assert_eq!(rest, SG);
        assert_eq!(i.unix, Some(1_790_416_801.5));
    }

    #[test]
    fn compose_srun_and_skypilot() {
        let (rest, i) = read(&format!("sglang-decode-2  | {SG}")).unwrap();
        assert_eq!((rest.as_str(), i.engine.as_str()), (SG, "sglang-decode-2"));
        let (rest, i) = read(&format!("3: {SG}")).unwrap();
        assert_eq!((rest.as_str(), i.engine.as_str()), (SG, "3"));
        let (rest, i) = read(&format!(" 3: {SG}")).unwrap();
        assert_eq!((rest.as_str(), i.engine.as_str()), (SG, "3"));
        // SkyPilot's node prefix names a host of one server: no engine.
        let (rest, i) = read(&format!("(worker1, rank=1, pid=4242, ip=10.0.0.2) {SG}")).unwrap();
        assert_eq!((rest.as_str(), i.engine.as_str()), (SG, ""));
        assert_eq!(i.node, "worker1");
        let (rest, _) = read(&format!("(head, rank=0, pid=4241) {SG}")).unwrap();
        assert_eq!(rest, SG);
    }

    #[test]
    fn an_export_that_ate_sglangs_date_gives_time_and_ranks() {
        let (rest, i) =
            read("2026-09-26T10:00:01.123Z replica-7 INFO DP1 TP3] Decode batch, #running-req: 3")
                .unwrap();
        assert_eq!(rest, "Decode batch, #running-req: 3");
        assert_eq!(i.engine, "replica-7");
        assert_eq!(i.unix, Some(1_790_416_801.123));
        assert_eq!((i.ranks.dp, i.ranks.tp), (Some(1), Some(3)));
        // Two columns and a level; rank tags right after the time.
        let (_, i) =
            read("2026-09-26T10:00:01Z node-3 sglang-0 WARNING TP1] Decode batch, #running-req: 3")
                .unwrap();
        assert_eq!(
            (i.engine.as_str(), i.ranks.tp),
            ("node-3 sglang-0", Some(1))
        );
        let (_, i) = read("2026-09-26T10:00:01Z DP1 TP1] Decode batch, #running-req: 3").unwrap();
        assert_eq!(
            (i.engine.as_str(), i.ranks.dp, i.ranks.tp),
            ("", Some(1), Some(1))
        );
        // No host column: the level is not taken for one.
        let (_, i) =
            read("2026-09-26 10:00:01,123 INFO TP0] Decode batch, #running-req: 3").unwrap();
        assert_eq!(i.engine, "");
        assert_eq!(i.ranks.tp, Some(0));
        assert_eq!(i.local.map(|t| t.time.millisecond()), Some(123));
    }

    #[test]
    fn loggers_separators_and_the_stream_label_name_no_writer() {
        let (_, i) = read("2026-09-26 10:00:01,001 - sglang.srt.managers.scheduler - INFO - Decode batch, #running-req: 3").unwrap();
        assert_eq!(i.engine, "");
        let (_, i) = read(
            "2026-09-26T10:00:01Z {container=\"sglang\", pod=\"p-0\", stream=\"stderr\"} [x] y",
        )
        .unwrap();
        assert_eq!(i.engine, "{container=\"sglang\", pod=\"p-0\"}");
        let (_, i) = read("2026-09-26T10:00:01Z {stream=\"stdout\"} [x] y").unwrap();
        assert_eq!(i.engine, "");
        let (_, i) = read("2026-09-26T10:00:01Z {a=\"x, stream=\\\"q\", b=\"2\"} [x] y").unwrap();
        assert_eq!(i.engine, "{a=\"x, stream=\\\"q\", b=\"2\"}");
    }

    #[test]
    fn zone_offsets_with_and_without_a_colon() {
        assert_eq!(unix_time("2026-09-26T12:00:01+0200"), Some(1_790_416_801.0));
        assert_eq!(
            unix_time("2026-09-26T12:00:01+02:00"),
            Some(1_790_416_801.0)
        );
        assert_eq!(unix_time("1790416801123"), Some(1_790_416_801.123));
        assert_eq!(unix_time("2026-09-26 10:00:01"), None);
        assert_eq!(
            unix_time("2026-09-26 12:00:01 +0200"),
            Some(1_790_416_801.0)
        );
    }

    #[test]
    fn json_after_columns_and_logcli_labels() {
        let line = "2026-09-26T10:00:01+00:00 docker.abc {\"log\":\"x\\n\",\"stream\":\"stderr\"}";
        let (rest, i) = read(line).unwrap();
        assert!(rest.starts_with("{\"log\""), "{rest}");
        assert_eq!(i.engine, "docker.abc");
        // The `json: true` entry wants the JSON object: the same columns before a plain line
        // are no Fluentd record (the export entries read them, with their own engine).
        if let Some((_, i)) = read("2026-09-26T10:00:01+00:00 docker.abc x") {
            assert_ne!(i.engine, "docker.abc");
        }
        let (rest, i) = read(&format!(
            "2026-09-26T10:00:01Z {{app=\"sglang\", pod=\"p-1\"}} {SG}"
        ))
        .unwrap();
        assert_eq!(rest, SG);
        assert_eq!(i.engine, "{app=\"sglang\", pod=\"p-1\"}");
    }
}
