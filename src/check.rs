//! `check`: a pattern coverage report for log files, to tell quickly whether a log has formats
//! the pattern file does not cover.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;

use crate::parse::patterns::{FieldTarget, MetricKind, Patterns};
use crate::parse::{foreign_prefix, Parser};
use crate::record::Class;
use crate::source::linebuf::{Event, LineBuf};
use crate::source::{Outcome, Pipeline};
use crate::state::SourceDelta;

/// Most unknown field names listed in the report (the rest are counted).
const MAX_LISTED: usize = 64;

/// Runs the subcommand: a report per input on stdout. Exit status 0 when every stats-like line
/// matched, every field was known and readable and no line or record was skipped (too long, cut
/// short); 1 when something was not read (so `check` can gate a CI job on a new SGLang
/// version's logs); 2 for a bad pattern file or an unreadable input. A
/// closed stdout (`| head`) ends the report quietly.
pub fn run(a: &crate::cli::CheckArgs) -> ExitCode {
    let fail = |msg: String| {
        eprintln!("error: {}", crate::logging::escape_controls(&msg));
        ExitCode::from(2)
    };
    let pat = match crate::app::load_patterns(a.patterns.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail(e.to_string()),
    };
    let key = a.json_message_key.as_deref();
    let mut gaps = false;
    for path in &a.paths {
        let name = path.display().to_string();
        let rep = if name == "-" {
            check(&pat, key, &mut std::io::stdin().lock())
        } else {
            match std::fs::File::open(path) {
                Ok(mut f) => check(&pat, key, &mut f),
                Err(e) => return fail(format!("cannot read {name}: {e}")),
            }
        };
        match rep {
            Ok(r) => {
                gaps |= r.has_gaps();
                match crate::app::write_stdout(r.render(&name).as_bytes()) {
                    crate::app::Written::Done => {}
                    // Read no further for a reader that has gone (`| head`).
                    crate::app::Written::Closed => return ExitCode::SUCCESS,
                    crate::app::Written::Failed => return ExitCode::from(2),
                }
            }
            Err(e) => return fail(format!("reading {name} failed: {e}")),
        }
    }
    if gaps {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Counts of a coverage run.
#[derive(Debug, Default)]
pub struct Report {
    /// Lines read.
    pub lines: u64,
    /// Messages those lines made (fewer where a record takes several lines: a journal export
    /// entry, a container record's pieces).
    pub messages: u64,
    /// Lines per line kind name.
    pub kinds: BTreeMap<String, u64>,
    /// Unknown field keys and their counts.
    pub unknown: BTreeMap<String, u64>,
    /// Lines that look like stats lines SGLang prints (known stats fields with values, see
    /// `StatsShape`) but match no kind: the first few, verbatim.
    pub suspicious: Vec<String>,
    /// All stats-like unmatched lines.
    pub suspicious_total: u64,
    /// Field values that could not be read (and stats-line pieces that were not `key: value`).
    pub bad_values: u64,
    /// The first few lines with unreadable values, verbatim.
    pub bad_samples: Vec<String>,
    /// Lines over the length limit.
    pub oversized: u64,
    /// A last line without its newline (not parsed).
    pub incomplete: u64,
    /// Lines whose reading hit a bug (caught panics).
    pub panics: u64,
    /// Lines read after a prefix SGLang does not print (a fork's, a launcher's: see
    /// [`crate::parse::foreign`]), by the `stream_prefixes` regex that reads that prefix exactly:
    /// how many, the first prefix of that shape and the engines it named (the first few).
    pub foreign: BTreeMap<String, Inferred>,
}

/// One inferred prefix shape of a [`Report`].
#[derive(Debug, Default)]
pub struct Inferred {
    /// Lines read after a prefix of this shape.
    pub lines: u64,
    /// The first such prefix, verbatim.
    pub sample: String,
    /// The engines its prefixes named (the first [`SAMPLES`]).
    pub engines: Vec<String>,
}

/// Lines quoted per problem in the report.
const SAMPLES: usize = 5;

/// Reads `input` and counts what the patterns make of it (through the same [`Pipeline`] as
/// every other input path: wrappers, colour codes, JSON envelopes).
pub fn check<R: Read>(
    patterns: &Arc<Patterns>,
    message_key: Option<&str>,
    input: &mut R,
) -> std::io::Result<Report> {
    let max_line = 1 << 20;
    let mut pipeline = Pipeline::new(Parser::new(patterns.clone()), max_line, message_key);
    let mut rep = Report::default();
    let mut lb = LineBuf::new(max_line);
    let mut d = SourceDelta::default();
    let stats = StatsShape::of(patterns);
    let mut on = |e: Event<'_>, rep: &mut Report| match e {
        Event::Oversized => {
            rep.oversized += 1;
            pipeline.oversized();
        }
        Event::Incomplete => rep.incomplete += 1,
        Event::NulRun(n) => {
            pipeline.nuls(n);
        }
        Event::Line(l, _) => {
            rep.lines += 1;
            let outcome = pipeline.run(l, &mut d);
            if !matches!(outcome, Outcome::Skipped) {
                rep.messages += 1;
            }
            match outcome {
                Outcome::Parsed { rec, .. } => {
                    *rep.kinds
                        .entry(patterns.lines[rec.kind].name.clone())
                        .or_insert(0) += 1;
                    if let Some(p) = foreign_prefix(patterns, rec.kind, rec.line) {
                        note_foreign(patterns, p, rec.engine.unwrap_or(""), rep);
                    }
                    for k in rec.unknown_keys() {
                        *rep.unknown.entry(k.to_string()).or_insert(0) += 1;
                    }
                    if rec.bad_values > 0 {
                        rep.bad_values += u64::from(rec.bad_values);
                        if rep.bad_samples.len() < SAMPLES {
                            rep.bad_samples.push(rec.line.chars().take(300).collect());
                        }
                    }
                }
                Outcome::Unmatched { text, .. } if stats.looks_like(text) => {
                    rep.suspicious_total += 1;
                    if rep.suspicious.len() < SAMPLES {
                        rep.suspicious.push(text.chars().take(300).collect());
                    }
                }
                Outcome::Unmatched { .. } | Outcome::Skipped => {}
                Outcome::Panicked => rep.panics += 1,
            }
        }
    };
    loop {
        if lb.fill(input, |e| on(e, &mut rep))? == 0 {
            break;
        }
    }
    lb.flush_partial(|e| on(e, &mut rep));
    // Cut JSON records, and container records whose last piece never came.
    rep.incomplete += d.incomplete + pipeline.drop_pending();
    // Records past the limit once joined (container pieces, journal export values).
    rep.oversized += d.oversized;
    Ok(rep)
}

/// Counts a line read after the foreign prefix `prefix` (its engine label `engine`) under the
/// `stream_prefixes` entry that would read it exactly.
fn note_foreign(patterns: &Patterns, prefix: &str, engine: &str, rep: &mut Report) {
    let entry = crate::parse::foreign::entry(&patterns.rank_tags, prefix);
    if !rep.foreign.contains_key(&entry) && rep.foreign.len() >= MAX_LISTED {
        return;
    }
    let i = rep.foreign.entry(entry).or_insert_with(|| Inferred {
        sample: prefix.chars().take(300).collect(),
        ..Inferred::default()
    });
    i.lines += 1;
    if i.engines.len() < SAMPLES && !i.engines.iter().any(|e| e == engine) {
        i.engines.push(engine.to_string());
    }
}

/// The fewest known fields a stats line SGLang prints carries: the retraction line's two
/// (`#retracted_reqs: N, #new_token_ratio: A -> B`); prefill and decode lines carry four or more.
const MIN_STATS_FIELDS: usize = 2;

/// What a stats line SGLang prints looks like, from the pattern file's stats kinds (classes
/// `prefill`, `decode`, `retract`): pieces split by their field separators, each a key they map
/// to a metric, their key/value separator and a number (`#running-req: 3`, `token usage: 0.08`,
/// `cuda graph: True`). An unmatched line with [`MIN_STATS_FIELDS`] such fields is a stats line
/// no kind read (a new label, a malformed prefix); a line that only mentions a batch (SGLang's
/// CUDA graph progress bar `Capturing batches (bs=4 avail_mem=20.10 GB)`, a traceback's
/// `batch = self.get_next_batch_to_run()`) is not.
struct StatsShape<'p> {
    pat: &'p Patterns,
    /// The stats kinds (indices into `pat.lines`).
    kinds: Vec<usize>,
    /// Their key/value separators (`: `; `=` on none of today's).
    kvs: Vec<&'p str>,
    /// Where a key starts: after one of their field separators, a key/value separator, or the
    /// end of a bracket (SGLang's prefix).
    starts: Vec<&'p str>,
}

impl<'p> StatsShape<'p> {
    fn of(pat: &'p Patterns) -> StatsShape<'p> {
        let kinds: Vec<usize> = (0..pat.lines.len())
            .filter(|&k| {
                matches!(
                    pat.lines[k].class,
                    Class::Prefill | Class::Decode | Class::Retract
                )
            })
            .collect();
        let mut kvs: Vec<&str> = Vec::new();
        let mut starts: Vec<&str> = vec!["] "];
        for &k in &kinds {
            let l = &pat.lines[k];
            for kv in &l.kv {
                if !kvs.contains(&kv.as_str()) {
                    kvs.push(kv);
                }
            }
            for sep in l.separators.iter().chain(&l.kv) {
                if !starts.contains(&sep.as_str()) {
                    starts.push(sep);
                }
            }
        }
        StatsShape {
            pat,
            kinds,
            kvs,
            starts,
        }
    }

    /// Whether a stats kind reads `key` into a metric: `Some(true)` when that metric moves with
    /// the batches (`activity: true`, or a counter summed from the lines: a stats line's own
    /// field, which no startup fact is), `Some(false)` for another (`#tokens`, `cache hit
    /// rate`), `None` for a key no stats kind reads.
    fn known(&self, key: &str) -> Option<bool> {
        let mut out = None;
        for &k in &self.kinds {
            if let Some(FieldTarget::Metric { id, .. }) = self.pat.field(&self.pat.lines[k], key) {
                let m = &self.pat.metrics[usize::from(id)];
                let own = m.activity || m.kind == MetricKind::Counter;
                out = Some(own || out == Some(true));
            }
        }
        out
    }

    /// Whether `text` (a line no kind read) looks like a stats line SGLang prints: it holds
    /// [`MIN_STATS_FIELDS`] distinct fields a stats kind reads, with a value, one of them a
    /// stats line's own. A comment line (`# ...`, `#` then
    /// a space, as in an annotated sample or a shell transcript) is not one: SGLang's own lines
    /// never start so (its v0.1 decode line starts `#running-req:`, no space).
    fn looks_like(&self, text: &str) -> bool {
        let t = text.trim_start();
        if t == "#" || t.starts_with("# ") {
            return false;
        }
        let mut found: Vec<&str> = Vec::new();
        // One of them a stats line's own (see `known`): a startup line that no kind reads
        // (`KV Cache VA upper bound. #tokens: N, KV size: X GB`, reserved address space) is none.
        let mut moving = false;
        for kv in &self.kvs {
            for (i, _) in text.match_indices(kv) {
                if !number_like(&text[i + kv.len()..]) {
                    continue;
                }
                let before = &text[..i];
                let from = self
                    .starts
                    .iter()
                    .filter_map(|s| before.rfind(s).map(|p| p + s.len()))
                    .max()
                    .unwrap_or(0);
                let key = before[from..].trim();
                if found.contains(&key) {
                    continue;
                }
                if let Some(own) = self.known(key) {
                    found.push(key);
                    moving |= own;
                    if moving && found.len() >= MIN_STATS_FIELDS {
                        return true;
                    }
                }
            }
        }
        false
    }
}

/// Whether a field's value starts as SGLang prints a number: a digit (`3`, `0.08`, `12.5%`), a
/// sign, `nan`, or a boolean (`cuda graph: True`).
fn number_like(v: &str) -> bool {
    let b = v.as_bytes();
    match b.first() {
        Some(c) if c.is_ascii_digit() => true,
        Some(b'-' | b'+') => b.get(1).is_some_and(u8::is_ascii_digit),
        _ => ["nan", "True", "False"].iter().any(|w| v.starts_with(w)),
    }
}

impl Report {
    /// The report as text.
    pub fn render(&self, name: &str) -> String {
        // The file name and the lines quoted reach a terminal: written escaped (repro 27).
        let name = crate::logging::escape_controls(name);
        let mut s = String::new();
        let matched: u64 = self.kinds.values().sum();
        if self.messages == self.lines {
            let _ = writeln!(s, "{name}: {} lines, {matched} matched", self.lines);
        } else {
            // Records of several lines (journal export entries, container pieces): the share
            // matched is of the messages.
            let _ = writeln!(
                s,
                "{name}: {} lines, {} messages, {matched} matched",
                self.lines, self.messages
            );
        }
        for (k, n) in &self.kinds {
            let _ = writeln!(s, "  {k:<22} {n}");
        }
        if self.oversized > 0 {
            let _ = writeln!(s, "  oversized lines skipped: {}", self.oversized);
        }
        if self.incomplete > 0 {
            let _ = writeln!(
                s,
                "  records not read whole (a last line without its newline, a record cut short): {}",
                self.incomplete
            );
        }
        if !self.unknown.is_empty() {
            let _ = writeln!(s, "  unknown fields:");
            for (k, n) in self.unknown.iter().take(MAX_LISTED) {
                let _ = writeln!(s, "    {k:?} {n}");
            }
            if self.unknown.len() > MAX_LISTED {
                let _ = writeln!(s, "    … and {} more", self.unknown.len() - MAX_LISTED);
            }
        }
        if self.suspicious_total > 0 {
            let _ = writeln!(
                s,
                "  stats-like lines no pattern matched: {} (first {}):",
                self.suspicious_total,
                self.suspicious.len()
            );
            for l in &self.suspicious {
                let _ = writeln!(s, "    {}", crate::logging::escape_controls(l));
            }
        }
        if self.bad_values > 0 {
            let _ = writeln!(
                s,
                "  unreadable field values: {} (lines, first {}):",
                self.bad_values,
                self.bad_samples.len()
            );
            for l in &self.bad_samples {
                let _ = writeln!(s, "    {}", crate::logging::escape_controls(l));
            }
        }
        if self.panics > 0 {
            let _ = writeln!(s, "  lines that hit a bug of the exporter: {}", self.panics);
        }
        for (entry, i) in &self.foreign {
            let engines: Vec<String> = i.engines.iter().map(|e| format!("{e:?}")).collect();
            let _ = writeln!(
                s,
                "  read after a prefix SGLang does not print: {} lines, like\n    {}\n    (engines {}); a stream_prefixes entry that reads it exactly:\n      - name: inferred\n        regex: '{}'",
                i.lines,
                i.sample,
                engines.join(", "),
                entry.replace('\'', "''")
            );
        }
        s
    }

    /// Whether something of this input was not read: stats-like lines unmatched, fields
    /// unknown or unreadable, lines or records skipped as too long or cut short, or a bug hit.
    /// (`check` then exits 1.)
    pub fn has_gaps(&self) -> bool {
        self.suspicious_total > 0
            || self.oversized > 0
            || self.incomplete > 0
            || !self.unknown.is_empty()
            || self.bad_values > 0
            || self.panics > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_lines_shaped_like_sglangs_stats_lines_look_like_them() {
        let pat = Patterns::embedded().unwrap();
        let s = StatsShape::of(&pat);
        for (line, want) in [
            // A label SGLang might print next, with its fields.
            ("[2026-06-03 10:00:00 TP0] Decode step, #running-req: 3, #token: 300, token usage: 0.03", true),
            ("Decode out of space. #retracted_reqs: 1, #new_token_ratio: 0.5000 -> 0.8000", true),
            ("[2026-0٦-03 10:00:00 TP0] Decode batch, #running-req: 3, cuda graph: True", true),
            // Only a mention of a batch, or one figure.
            ("Capturing batches (bs=4 avail_mem=20.10 GB):  83%|████████▎ | 19/23 [00:04<00:00,  4.60it/s]", false),
            ("    batch = self.get_next_batch_to_run()", false),
            ("[2026-06-03 10:00:00 TP0] Decode batch: #running-req 3", false),
            ("[2026-06-03 10:00:00] Prefill batch. #bid: 1, #cache_miss: 1", false),
            ("warning: #running-req: 3 exceeds the limit", false),
            // Startup figures no kind reads: no stats line's own field.
            ("[2026-08-10 10:00:00 TP0] KV Cache VA upper bound. dtype: torch.float8_e4m3fn, #tokens: 4100000, KV size: 140.00 GB", false),
            ("# Decode batch, #running-req: 3, #token: 300", false),
        ] {
            assert_eq!(s.looks_like(line), want, "{line}");
        }
    }
}
