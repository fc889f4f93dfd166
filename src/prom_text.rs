//! Reads the Prometheus text exposition format (0.0.4) back into [`Family`]s: for `top --url`, and
//! for a router's `/metrics` ([`crate::source::router`]).
//!
//! Our own small reader: `prometheus-parse` 0.2.5 (the crate for this) reads metric names with
//! `\w+`, so it rejects every `sglang:*` name (`:` is legal in metric names), splits label
//! values at `,` and `=` and ignores escapes; `openmetrics-parser` is LGPL. This reader follows
//! the format: names with `:`, quoted label values with `\\`, `\"` and `\n` escapes, `+Inf`,
//! `-Inf`, `NaN`, optional timestamps (ignored), `HELP` and `TYPE` lines; a line it cannot read
//! is skipped and counted.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock};

use crate::family::{Family, Kind, Labels};

/// Most distinct label names kept (names are interned for [`Labels`]' `&'static str`); labels
/// with further names are dropped, so a hostile exposition cannot grow memory without bound.
pub const MAX_LABEL_NAMES: usize = 512;

/// What was read: the families in the order of their first line, and the lines skipped.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Parsed {
    /// Families, each with its samples in exposition order.
    pub families: Vec<Family>,
    /// Lines that were neither a comment, blank, nor a readable sample.
    pub bad_lines: usize,
}

/// Parses `text`; every sample also gets the labels of `extra` (e.g. `instance`).
pub fn parse(text: &str, extra: &Labels) -> Parsed {
    let mut out = Parsed::default();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut types: HashMap<String, Kind> = HashMap::new();
    let mut helps: HashMap<String, String> = HashMap::new();
    for line in text.lines() {
        let line = line.trim_start();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = line.strip_prefix('#') {
            let mut it = c.trim_start().splitn(3, [' ', '\t']);
            match (it.next(), it.next(), it.next()) {
                (Some("TYPE"), Some(name), Some(t)) => {
                    let kind = if t.trim() == "counter" {
                        Kind::Counter
                    } else {
                        Kind::Gauge
                    };
                    types.insert(name.to_string(), kind);
                }
                (Some("HELP"), Some(name), help) => {
                    helps.insert(
                        name.to_string(),
                        unescape(help.unwrap_or("").trim_end(), false),
                    );
                }
                _ => {}
            }
            continue;
        }
        let Some((name, mut labels, value)) = sample(line) else {
            out.bad_lines += 1;
            continue;
        };
        labels.extend(extra.iter().cloned());
        let i = *index.entry(name.to_string()).or_insert_with(|| {
            let kind = types.get(name).copied().unwrap_or(Kind::Gauge);
            let help = helps.get(name).cloned().unwrap_or_default();
            out.families.push(Family::new(name, help, kind));
            out.families.len() - 1
        });
        out.families[i].push(labels, value);
    }
    out
}

/// One sample line: name, labels, value (a timestamp after it is ignored).
fn sample(line: &str) -> Option<(&str, Labels, f64)> {
    let end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let mut rest = &line[end..];
    let mut labels = Labels::new();
    if let Some(r) = rest.trim_start().strip_prefix('{') {
        rest = label_pairs(r, &mut labels)?;
    }
    let mut fields = rest.split_ascii_whitespace();
    let value = number(fields.next()?)?;
    match fields.next() {
        Some(ts) if ts.parse::<i64>().is_err() => return None,
        _ => {}
    }
    Some((name, labels, value))
}

/// Reads `name="value",…}`; returns what follows the `}`.
fn label_pairs<'a>(mut s: &'a str, labels: &mut Labels) -> Option<&'a str> {
    loop {
        s = s.trim_start();
        if let Some(r) = s.strip_prefix('}') {
            return Some(r);
        }
        let eq = s.find('=')?;
        let name = s[..eq].trim();
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return None;
        }
        let r = s[eq + 1..].trim_start().strip_prefix('"')?;
        let close = closing_quote(r)?;
        if let Some(k) = intern(name) {
            labels.push((k, unescape(&r[..close], true)));
        }
        s = r[close + 1..].trim_start();
        s = s.strip_prefix(',').unwrap_or(s);
    }
}

/// Byte index of the `"` that ends a quoted value (`\"` does not).
fn closing_quote(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// Undoes `\\` and `\n` (and `\"` in label values).
fn unescape(s: &str, quotes: bool) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            Some('"') if quotes => out.push('"'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// A sample value as Go prints it: a float, `+Inf`, `-Inf` or `NaN`.
fn number(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// The `&'static str` for a label name (each distinct name is allocated once, at most
/// [`MAX_LABEL_NAMES`]; `None` past that).
pub fn intern(name: &str) -> Option<&'static str> {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(k) = set.get(name) {
        return Some(k);
    }
    if set.len() >= MAX_LABEL_NAMES {
        return None;
    }
    let k: &'static str = Box::leak(name.to_string().into_boxed_str());
    set.insert(k);
    Some(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_our_encoder_writes() {
        let fams = vec![
            Family::new("sglang:token_usage", "Token usage.", Kind::Gauge).with(
                vec![
                    ("server", "a \"b\" \\ c,d=e".into()),
                    ("model_name", "x\ny".into()),
                ],
                0.25,
            ),
            Family::new(
                "sglang_retractions_total",
                "Retractions.\nTwo lines.",
                Kind::Counter,
            )
            .with(vec![], 3.0)
            .with(vec![("server", "z".into())], f64::INFINITY),
        ];
        let text = crate::export::metrics::encode_text(&fams);
        let got = parse(&text, &vec![]);
        assert_eq!(got.bad_lines, 0);
        assert_eq!(got.families, fams);
        let with = parse(&text, &vec![("instance", "h:1".into())]);
        assert_eq!(
            with.families[1].samples[0].0,
            vec![("instance", "h:1".to_string())]
        );
    }

    #[test]
    fn odd_lines() {
        let text = "# a comment\nno_labels 1 1700000000000\nspaced { a = \"1\" , } NaN\n\
                    bad{a=\"unterminated} 1\n9starts_with_digit 1\nmissing_value\n";
        let got = parse(text, &vec![]);
        assert_eq!(got.bad_lines, 3);
        assert_eq!(got.families[0].samples, vec![(vec![], 1.0)]);
        assert_eq!(got.families[1].samples[0].0, vec![("a", "1".to_string())]);
        assert!(got.families[1].samples[0].1.is_nan());
        assert_eq!(got.families[0].kind, Kind::Gauge);
    }
}
