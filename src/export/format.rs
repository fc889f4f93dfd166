//! Which exposition a scrape gets, and how names are written in it: the same answer SGLang's own
//! `/metrics` gives the same `Accept` header, so a Prometheus scraping both stores the same names.
//!
//! SGLang serves `/metrics` with prometheus_client's ASGI app, which picks its encoder with
//! `prometheus_client.exposition.choose_encoder` (checked in prometheus_client 0.26.0):
//!
//! * The `Accept` header's entries are read in the order written, `q` weights ignored; the first
//!   `application/openmetrics-text` or `text/plain` entry that settles it wins.
//! * `application/openmetrics-text` without `version=`: OpenMetrics 1.0.0, names escaped with
//!   `underscores`, content type without an `escaping=` term. With `version=` 1.0.0 or later:
//!   OpenMetrics at that version, with the entry's `escaping=` (`allow-utf-8`, `underscores`,
//!   `dots`, `values`; anything else or none: `underscores`), said in the content type. An
//!   earlier version (Prometheus 2's `version=0.0.1` fallback entry) settles nothing.
//! * `text/plain` with `version=` 1.0.0 or later: the text format 1.0.0 with the entry's
//!   escaping; any other `text/plain` entry settles nothing.
//! * Nothing settled: the text format 0.0.4.
//!
//! In OpenMetrics, prometheus_client writes each *sample* name escaped as if it were a label
//! name (prometheus/client_python#1177): under `underscores` the colon is no legal character,
//! so `sglang:token_usage` samples come out as `sglang_token_usage` while the `# HELP` and
//! `# TYPE` lines keep the colon. Prometheus stores the sample names. So a Prometheus 2 (whose
//! `Accept` asks for OpenMetrics 1.0.0 and names no escaping) stores SGLang's families with
//! underscores, and a Prometheus 3 (which asks for `escaping=allow-utf-8`) with colons.
//! [`Names::Upstream`] writes what SGLang's server writes for each header. `colons` (the
//! default) and `underscores` fix one style for every scraper (`--web.names`): the text format
//! 0.0.4, which every scraper reads, with names as they are or each colon an underscore.
//!
//! `colons` is the default, not `upstream`: the shipped dashboard, alert rules and every query
//! of the README name `sglang:…` families, and under `upstream` a Prometheus 2 (Debian 12
//! ships 2.42) would store them as `sglang_…` — dashboards empty and alerts on those series
//! silent after an upgrade. `upstream` is for a Prometheus that scrapes SGLang's own
//! `/metrics` beside the exporter and must store one name for both.

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::family::{le_value, Family, Kind, Labels};

/// How names are written (`--web.names`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Names {
    /// As SGLang's own `/metrics` writes them for the scraper's `Accept` header.
    Upstream,
    /// Always with colons (`sglang:token_usage`), in the text format 0.0.4.
    #[default]
    Colons,
    /// Always with each colon an underscore (`sglang_token_usage`), in the text format 0.0.4.
    Underscores,
}

/// prometheus_client's name escaping schemes (the `escaping=` term of a content type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Escaping {
    /// `allow-utf-8`: names as they are.
    AllowUtf8,
    /// `underscores`: each character a legacy name may not hold becomes `_`.
    Underscores,
    /// `dots`: `_` → `__`, `.` → `_dot_`, any other illegal character → `__`.
    Dots,
    /// `values`: `U__`, then `_` → `__` and any other illegal character → `_HEX_`.
    Values,
}

impl Escaping {
    /// The term's value, as the content type writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Escaping::AllowUtf8 => "allow-utf-8",
            Escaping::Underscores => "underscores",
            Escaping::Dots => "dots",
            Escaping::Values => "values",
        }
    }

    /// An `escaping=` value as prometheus_client reads it: an unknown one is `underscores`.
    fn parse(v: &str) -> Escaping {
        match v {
            "allow-utf-8" => Escaping::AllowUtf8,
            "dots" => Escaping::Dots,
            "values" => Escaping::Values,
            _ => Escaping::Underscores,
        }
    }
}

/// What one exposition body is: its format and how its names are written. Two scrapes of one
/// variant get the same bytes (the cache keeps one encoding per variant).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Variant {
    /// OpenMetrics text (else the Prometheus text format).
    pub openmetrics: bool,
    /// How names are written ([`Escaping::AllowUtf8`]: as they are).
    pub escaping: Escaping,
    /// `--web.names underscores`: each `:` of a name an `_` before any escaping.
    pub underscored: bool,
}

impl Variant {
    /// The text format 0.0.4 with names as they are: what `/metrics` always served before,
    /// and what the Pushgateway is sent.
    pub const TEXT: Variant = Variant {
        openmetrics: false,
        escaping: Escaping::AllowUtf8,
        underscored: false,
    };
}

impl Variant {
    /// The variant whose body this one's equals: a text body whose escaping changes none of
    /// our names (every name of ours is a legacy name: only `dots` rewrites those) is
    /// [`Variant::TEXT`]'s, so the cache keeps one encoding for both.
    pub fn body(self) -> Variant {
        if !self.openmetrics && !self.underscored && self.escaping != Escaping::Dots {
            Variant::TEXT
        } else {
            self
        }
    }
}

/// The negotiated answer to one scrape: the body's variant and the `Content-Type` to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiated {
    /// The body.
    pub variant: Variant,
    /// The `Content-Type` header.
    pub content_type: Cow<'static, str>,
}

/// `Content-Type` of the text format 0.0.4.
pub const TEXT_004: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The answer to a scrape whose `Accept` header is `accept` (empty when none was sent), names
/// written as `names` says.
pub fn negotiate(accept: &str, names: Names) -> Negotiated {
    match names {
        Names::Upstream => choose(accept),
        // A fixed style: the text format every scraper reads, whatever was asked.
        Names::Colons | Names::Underscores => Negotiated {
            variant: Variant {
                underscored: names == Names::Underscores,
                ..Variant::TEXT
            },
            content_type: TEXT_004.into(),
        },
    }
}

/// The text 0.0.4 variant of a style (colons under [`Names::Upstream`]): what `--once` and the
/// push write, whatever any scraper asks.
pub fn plain(names: Names) -> Variant {
    negotiate("", names).variant
}

/// prometheus_client 0.26's `choose_encoder` (see the module).
fn choose(accept: &str) -> Negotiated {
    for entry in accept.split(',') {
        let toks: Vec<&str> = entry.split(';').collect();
        let media = toks[0].trim();
        let param = |key: &str| {
            toks.iter().find_map(|t| {
                let (k, v) = t.trim().split_once('=')?;
                (k == key).then_some(v)
            })
        };
        let version = param("version").unwrap_or("");
        let escaping = Escaping::parse(param("escaping").unwrap_or(""));
        if media == "application/openmetrics-text" {
            if version.is_empty() {
                return Negotiated {
                    variant: Variant {
                        openmetrics: true,
                        escaping: Escaping::Underscores,
                        underscored: false,
                    },
                    content_type: "application/openmetrics-text; version=1.0.0; charset=utf-8"
                        .into(),
                };
            }
            if at_least_1(version) {
                return Negotiated {
                    variant: Variant {
                        openmetrics: true,
                        escaping,
                        underscored: false,
                    },
                    content_type: format!(
                        "application/openmetrics-text; version={version}; charset=utf-8; escaping={}",
                        escaping.as_str()
                    )
                    .into(),
                };
            }
        } else if media == "text/plain" && at_least_1(version) {
            return Negotiated {
                variant: Variant {
                    openmetrics: false,
                    escaping,
                    underscored: false,
                },
                content_type: format!(
                    "text/plain; version=1.0.0; charset=utf-8; escaping={}",
                    escaping.as_str()
                )
                .into(),
            };
        }
    }
    Negotiated {
        variant: Variant::TEXT,
        content_type: TEXT_004.into(),
    }
}

/// Whether a `version=` value is 1.0.0 or later as prometheus_client compares it:
/// `parse_version` splits it at `.`, reads each part with Python's `int()` (whitespace around
/// it, a sign, `_` between digits, decimal digits of any script; any size), keeps a part it
/// cannot read as text, and the tuple is compared with `(1, 0, 0)`. Where that comparison
/// reaches a text part Python raises (prometheus_client answers 500): here such a version
/// settles nothing.
fn at_least_1(version: &str) -> bool {
    use std::cmp::Ordering;
    let mut parts = version.split('.');
    for r in [1u8, 0, 0] {
        // A shorter tuple, equal so far, is the smaller.
        let Some(p) = parts.next() else {
            return false;
        };
        match py_int_cmp(p, r) {
            Some(Ordering::Greater) => return true,
            Some(Ordering::Less) | None => return false,
            Some(Ordering::Equal) => {}
        }
    }
    true
}

/// `part` read as Python's `int()` reads it, compared with `r`; `None` when `int()` refuses it.
fn py_int_cmp(part: &str, r: u8) -> Option<std::cmp::Ordering> {
    use std::cmp::Ordering;
    let s = part.trim();
    let (negative, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return None;
    }
    // The number's significant digits, leading zeros dropped.
    let mut significant = 0usize;
    let mut low: u32 = 0;
    for c in digits.chars().filter(|&c| c != '_') {
        let d = decimal_digit(c)?;
        if significant > 0 || d > 0 {
            significant += 1;
            if significant <= 3 {
                low = low * 10 + u32::from(d);
            }
        }
    }
    Some(match (significant, negative) {
        (0, _) => 0.cmp(&r),
        (_, true) => Ordering::Less,
        (1..=3, false) => low.cmp(&u32::from(r)),
        _ => Ordering::Greater,
    })
}

/// The value of a decimal digit as Python's `int()` reads it: any character of Unicode's
/// decimal digits (general category Nd), each script's ten in a row from its zero.
fn decimal_digit(c: char) -> Option<u8> {
    /// The zero of every run of decimal digits (Unicode 14, as Python 3.11's `unicodedata`).
    const ZEROS: [u32; 66] = [
        0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66,
        0xDE6, 0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90,
        0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0,
        0xFF10, 0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0,
        0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0,
        0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
    ];
    let u = c as u32;
    ZEROS
        .iter()
        .find(|&&z| (z..z + 10).contains(&u))
        .map(|&z| (u - z) as u8)
}

/// Whether `c` at index `i` may stand in a legacy label name (`[a-zA-Z_][a-zA-Z0-9_]*`).
fn label_rune(c: char, i: usize) -> bool {
    c.is_ascii_alphabetic() || c == '_' || (c.is_ascii_digit() && i > 0)
}

/// Whether `c` at index `i` may stand in a legacy metric name (a label name's, and `:`).
fn metric_rune(c: char, i: usize) -> bool {
    label_rune(c, i) || c == ':'
}

/// Whether `s` is a legacy metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
fn legacy_metric(s: &str) -> bool {
    !s.is_empty() && s.chars().enumerate().all(|(i, c)| metric_rune(c, i))
}

/// Whether `s` is a legacy label name (not reserved: no leading `__`).
fn legacy_label(s: &str) -> bool {
    !s.is_empty() && !s.starts_with("__") && s.chars().enumerate().all(|(i, c)| label_rune(c, i))
}

/// prometheus_client's `_escape`: `s` under `escaping`, judging characters by `valid`.
fn escape(s: &str, escaping: Escaping, valid: fn(char, usize) -> bool) -> Cow<'_, str> {
    let mut out = String::with_capacity(s.len() + 4);
    match escaping {
        Escaping::AllowUtf8 => return Cow::Borrowed(s),
        Escaping::Underscores => {
            if s.chars().enumerate().all(|(i, c)| valid(c, i)) {
                return Cow::Borrowed(s);
            }
            out.extend(
                s.chars()
                    .enumerate()
                    .map(|(i, c)| if valid(c, i) { c } else { '_' }),
            );
        }
        Escaping::Dots => {
            for (i, c) in s.chars().enumerate() {
                match c {
                    '_' => out.push_str("__"),
                    '.' => out.push_str("_dot_"),
                    c if valid(c, i) => out.push(c),
                    _ => out.push_str("__"),
                }
            }
        }
        Escaping::Values => {
            out.push_str("U__");
            for (i, c) in s.chars().enumerate() {
                match c {
                    '_' => out.push_str("__"),
                    c if valid(c, i) => out.push(c),
                    c => {
                        let _ = write!(out, "_{:x}_", c as u32);
                    }
                }
            }
        }
    }
    Cow::Owned(out)
}

/// A name under `e` as prometheus_client's `escape_metric_name` and `escape_label_name` write
/// one: a legal name (`legacy`) as it is, except under `dots`, which escapes every name.
fn escape_name(
    s: &str,
    e: Escaping,
    rune: fn(char, usize) -> bool,
    legacy: fn(&str) -> bool,
) -> Cow<'_, str> {
    if e != Escaping::Dots && legacy(s) {
        Cow::Borrowed(s)
    } else {
        escape(s, e, rune)
    }
}

/// A family's name on its `# HELP`/`# TYPE` lines (prometheus_client's `escape_metric_name`).
fn family_name(s: &str, e: Escaping) -> Cow<'_, str> {
    escape_name(s, e, metric_rune, legacy_metric)
}

/// A sample's name: in the text format as [`family_name`]; in OpenMetrics escaped as a label
/// name would be (the module: `:` is then illegal), except under `allow-utf-8`.
fn sample_name(s: &str, v: Variant) -> Cow<'_, str> {
    if v.openmetrics {
        escape(s, v.escaping, label_rune)
    } else {
        family_name(s, v.escaping)
    }
}

/// A label's name (prometheus_client's `escape_label_name`).
fn label_name(s: &str, e: Escaping) -> Cow<'_, str> {
    escape_name(s, e, label_rune, legacy_label)
}

/// `name` with each `:` an `_` where the variant says so.
fn styled(name: &str, v: Variant) -> Cow<'_, str> {
    if v.underscored && name.contains(':') {
        Cow::Owned(name.replace(':', "_"))
    } else {
        Cow::Borrowed(name)
    }
}

/// The families of `families` whose samples `v` would write under one name with another
/// family's (a name of a pattern file or `--web.old-names` that meets another once colons are
/// underscores): each of them, since which one is right is not known. Empty for our own
/// families, whose names never meet in any style (the registry's tests).
///
/// Every name a family writes counts ([`crate::catalog::names_written`]).
pub fn clashes(families: &[Family], v: Variant) -> Vec<usize> {
    let mut first: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, f) in families.iter().enumerate().filter(|(_, f)| !f.is_empty()) {
        let names = crate::catalog::names_written(&f.name, f.kind);
        for name in names.iter().map(|n| written_name(n, v)) {
            match first.get(&name) {
                Some(&j) if j != i => {
                    for k in [j, i] {
                        if !out.contains(&k) {
                            out.push(k);
                        }
                    }
                }
                Some(_) => {}
                None => {
                    first.insert(name, i);
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// A family's name as `v` writes its samples.
pub fn written_name(name: &str, v: Variant) -> String {
    sample_name(&styled(name, v), v).into_owned()
}

/// `families` encoded as `v` says. [`Variant::TEXT`] is the caller's to encode with the text
/// encoder it always used; this writes every other variant (the text format with escaped names,
/// and OpenMetrics, ended by `# EOF` when `eof`: a body others are put in front of ends once).
pub fn encode(families: &[Family], v: Variant, eof: bool) -> String {
    let mut out = String::new();
    for f in families.iter().filter(|f| !f.is_empty()) {
        write_family(&mut out, f, v);
    }
    if v.openmetrics && eof {
        out.push_str("# EOF\n");
    }
    out
}

/// One family in the variant's format.
fn write_family(out: &mut String, f: &Family, v: Variant) {
    let name = styled(&f.name, v);
    // OpenMetrics names a counter family without its `_total`, which its samples carry; a
    // counter whose name lacks it is written as `unknown`, keeping its samples' name.
    let (fam, kind) = match (v.openmetrics, f.kind) {
        (true, Kind::Counter) => match name.strip_suffix("_total") {
            Some(base) => (Cow::Owned(base.to_string()), "counter"),
            None => (name.clone(), "unknown"),
        },
        (_, Kind::Counter) => (name.clone(), "counter"),
        (_, Kind::Gauge) => (name.clone(), "gauge"),
        (_, Kind::Histogram) => (name.clone(), "histogram"),
    };
    let fam = family_name(&fam, v.escaping);
    let _ = writeln!(out, "# HELP {fam} {}", help_text(&f.help, v.openmetrics));
    let _ = writeln!(out, "# TYPE {fam} {kind}");
    let sample = sample_name(&name, v);
    for (labels, value) in &f.samples {
        if f.kind != Kind::Histogram {
            write_sample(out, &sample, labels, None, *value, v);
        }
    }
    for (labels, h) in &f.histograms {
        let bucket = sample_name(&format!("{name}_bucket"), v).into_owned();
        for (&b, &c) in h.bounds.iter().zip(&h.cumulative) {
            write_sample(out, &bucket, labels, Some(&le_value(b)), c as f64, v);
        }
        write_sample(out, &bucket, labels, Some("+Inf"), h.count as f64, v);
        let sum = sample_name(&format!("{name}_sum"), v).into_owned();
        write_sample(out, &sum, labels, None, h.sum, v);
        let count = sample_name(&format!("{name}_count"), v).into_owned();
        write_sample(out, &count, labels, None, h.count as f64, v);
    }
}

/// A `# HELP` text: `\` and newlines escaped, and in OpenMetrics `"` too (its HELP is an
/// escaped string, which holds no bare `"`; the Prometheus text format's escapes only the two).
pub(crate) fn help_text(help: &str, openmetrics: bool) -> Cow<'_, str> {
    if !help.contains(['\\', '\n', '"']) {
        return Cow::Borrowed(help);
    }
    let mut s = help.replace('\\', "\\\\").replace('\n', "\\n");
    if openmetrics {
        s = s.replace('"', "\\\"");
    }
    Cow::Owned(s)
}

/// One sample line: `name{labels} value`.
fn write_sample(
    out: &mut String,
    name: &str,
    labels: &Labels,
    le: Option<&str>,
    value: f64,
    v: Variant,
) {
    out.push_str(name);
    let pairs = labels
        .iter()
        .map(|(k, val)| (*k, val.as_str()))
        .chain(le.map(|le| ("le", le)));
    let mut first = true;
    for (k, val) in pairs {
        out.push(if first { '{' } else { ',' });
        first = false;
        out.push_str(&label_name(k, v.escaping));
        out.push_str("=\"");
        crate::family::push_label_value(out, val);
        out.push('"');
    }
    if !first {
        out.push('}');
    }
    out.push(' ');
    write_value(out, value);
    out.push('\n');
}

/// A sample value as Prometheus reads it (`+Inf`, `-Inf`, `NaN`, else Rust's shortest form).
fn write_value(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let _ = write!(out, "{v}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The headers the scrapers send: Prometheus 2.x's default `scrape_protocols`, Prometheus
    /// 3.x's (which adds `escaping=allow-utf-8` where it asks for UTF-8 names), curl's, none.
    const PROMETHEUS_2: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    const PROMETHEUS_3: &str = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1";

    fn fams() -> Vec<Family> {
        vec![
            Family::new("sglang:token_usage", "Token usage.", Kind::Gauge)
                .with(vec![("model_name", "m".into())], 0.08),
            Family::new(
                "sglang:num_requests_total",
                "Requests \"done\".",
                Kind::Counter,
            )
            .with(vec![("model_name", "m".into())], 3.0),
        ]
    }

    #[test]
    fn prometheus_2_gets_openmetrics_with_underscored_sample_names() {
        let n = negotiate(PROMETHEUS_2, Names::Upstream);
        assert_eq!(
            n.content_type,
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"
        );
        assert_eq!(
            encode(&fams(), n.variant, true),
            "# HELP sglang:token_usage Token usage.\n\
             # TYPE sglang:token_usage gauge\n\
             sglang_token_usage{model_name=\"m\"} 0.08\n\
             # HELP sglang:num_requests Requests \\\"done\\\".\n\
             # TYPE sglang:num_requests counter\n\
             sglang_num_requests_total{model_name=\"m\"} 3\n\
             # EOF\n"
        );
    }

    #[test]
    fn prometheus_3_gets_openmetrics_with_colons() {
        let n = negotiate(PROMETHEUS_3, Names::Upstream);
        assert_eq!(
            n.content_type,
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8"
        );
        let body = encode(&fams(), n.variant, true);
        assert!(
            body.contains("\nsglang:token_usage{model_name=\"m\"} 0.08\n"),
            "{body}"
        );
        assert!(
            body.contains("\nsglang:num_requests_total{model_name=\"m\"} 3\n"),
            "{body}"
        );
    }

    #[test]
    fn other_headers_as_prometheus_client_reads_them() {
        let ct = |a: &str| negotiate(a, Names::Upstream).content_type.into_owned();
        assert_eq!(ct(""), TEXT_004);
        assert_eq!(ct("*/*"), TEXT_004);
        assert_eq!(ct("text/plain"), TEXT_004);
        assert_eq!(ct("text/plain;version=0.0.4"), TEXT_004);
        assert_eq!(
            ct("application/openmetrics-text"),
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        // An OpenMetrics entry before 1.0.0 settles nothing: the next entry does.
        assert_eq!(
            ct("application/openmetrics-text;version=0.0.1,text/plain;version=1.0.0"),
            "text/plain; version=1.0.0; charset=utf-8; escaping=underscores"
        );
        assert_eq!(
            ct("application/openmetrics-text;version=1.0.0;escaping=bogus"),
            "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"
        );
        assert_eq!(
            ct("application/openmetrics-text; version=2.0.0; escaping=values"),
            "application/openmetrics-text; version=2.0.0; charset=utf-8; escaping=values"
        );
        // Versions as Python's int() reads their parts: any size, whitespace, `_`, other
        // scripts' digits; a part it cannot read settles nothing (prometheus_client fails).
        for v in [
            "999999999999999999999",
            " 1.0.0",
            "1_0.0.0",
            "\u{FF11}.0.0",
            "\u{1D7CF}.0.0",
            "\u{1947}.0.0",
            "1.0.0.0",
            "01.00.00",
            "2",
        ] {
            assert!(at_least_1(v), "{v}");
        }
        for v in [
            "0.0.4", "0.9", "1.0", "1", "", "1.0.x", "x", "-1.0.0", "1__0.0.0", "_1.0.0", "=1.0.0",
        ] {
            assert!(!at_least_1(v), "{v}");
        }
        assert!(at_least_1("1.1.x"), "decided before the text part");
        // q weights are not read: the first entry that settles it wins.
        assert_eq!(
            ct("text/plain;version=0.0.4;q=1,application/openmetrics-text;q=0.1").as_str(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
    }

    #[test]
    fn dots_and_values_escape_as_prometheus_client_does() {
        let om = |e| Variant {
            openmetrics: true,
            escaping: e,
            underscored: false,
        };
        let body = encode(&fams()[..1], om(Escaping::Dots), false);
        assert_eq!(
            body,
            "# HELP sglang:token__usage Token usage.\n\
             # TYPE sglang:token__usage gauge\n\
             sglang__token__usage{model__name=\"m\"} 0.08\n"
        );
        let body = encode(&fams()[..1], om(Escaping::Values), false);
        assert_eq!(
            body,
            "# HELP sglang:token_usage Token usage.\n\
             # TYPE sglang:token_usage gauge\n\
             U__sglang_3a_token__usage{model_name=\"m\"} 0.08\n"
        );
    }

    /// Two families that one style writes under one name (a pattern file's `a:b` beside
    /// `a_b`, under underscores) are both withheld and counted, never written twice.
    #[test]
    fn families_a_style_writes_under_one_name_are_withheld() {
        let f = |n: &str, v: f64| Family::new(n, "h", Kind::Gauge).with(vec![], v);
        let fams = vec![f("x:b", 1.0), f("x_b", 2.0), f("x:c", 3.0)];
        let under = negotiate("", Names::Underscores).variant;
        assert_eq!(clashes(&fams, under), [0, 1]);
        assert!(clashes(&fams, Variant::TEXT).is_empty());
        // Every name a family writes: a histogram's samples, a counter's OpenMetrics name.
        let mut h = Family::new("y", "h", Kind::Histogram);
        h.push_histogram(
            vec![],
            crate::family::Histogram {
                bounds: &[1.0],
                cumulative: vec![1],
                sum: 1.0,
                count: 1,
            },
        );
        let c = Family::new("z_total", "h", Kind::Counter).with(vec![], 1.0);
        let written = vec![h, f("y_count", 1.0), c, f("z", 2.0), f("w", 3.0)];
        assert_eq!(clashes(&written, Variant::TEXT), [0, 1, 2, 3]);
        let before = crate::export::valid::withheld();
        let body = crate::export::metrics::encode(&fams, under);
        assert_eq!(body, "# HELP x_c h\n# TYPE x_c gauge\nx_c 3\n");
        assert!(crate::export::valid::withheld() >= before + 2);
    }

    #[test]
    fn a_fixed_style_holds_whatever_is_asked() {
        let n = negotiate(PROMETHEUS_2, Names::Colons);
        assert_eq!((n.variant, &*n.content_type), (Variant::TEXT, TEXT_004));
        let n = negotiate(PROMETHEUS_3, Names::Underscores);
        assert_eq!(n.content_type, TEXT_004);
        let body = encode(&fams(), n.variant, false);
        assert!(body.starts_with("# HELP sglang_token_usage Token usage.\n# TYPE sglang_token_usage gauge\nsglang_token_usage{"), "{body}");
        assert!(
            body.contains("# TYPE sglang_num_requests_total counter\nsglang_num_requests_total{"),
            "{body}"
        );
    }
}
