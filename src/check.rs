//! `check`: a pattern coverage report for log files, to tell quickly whether a log has formats
//! the pattern file does not cover.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;

use crate::parse::patterns::Patterns;
use crate::parse::{foreign_prefix, Parser};
use crate::pipeline::{Outcome, Pipeline};
use crate::source::linebuf::{Event, LineBuf};
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
    /// Lines that are recognisably SGLang's stats or startup lines (see
    /// [`crate::parse::unread`]) but match no kind: the first few, with their line numbers
    /// (1-based) and what they look like, verbatim.
    pub suspicious: Vec<(u64, &'static str, String)>,
    /// All such lines.
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
    let unread = patterns.unread();
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
                Outcome::Unmatched { text, .. } => {
                    if let Some(looks) = unread.looks_like(text) {
                        rep.suspicious_total += 1;
                        if rep.suspicious.len() < SAMPLES {
                            let line = (rep.lines, looks.as_str());
                            rep.suspicious
                                .push((line.0, line.1, text.chars().take(300).collect()));
                        }
                    }
                }
                Outcome::Skipped => {}
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
            for (n, looks, l) in &self.suspicious {
                let l = crate::logging::escape_controls(l);
                let _ = writeln!(s, "    line {n} ({looks}): {l}");
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
