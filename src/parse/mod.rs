//! Turning one log line into a typed [`Record`]: wrapper and prefix, line kind, fields.
//!
//! Pure functions over `&str` with no I/O. A [`Parser`] owns reusable scratch space, so a line
//! that matches no pattern costs one multi-literal scan and no allocation.

pub mod fields;
pub mod patterns;
pub mod prefix;

use std::sync::Arc;

use regex::CaptureLocations;

use crate::record::{Access, Ranks, Record, ServerArgs};
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
}

impl Parser {
    /// A parser for the given patterns.
    pub fn new(pat: Arc<Patterns>) -> Parser {
        let locs = pat
            .lines
            .iter()
            .map(|l| l.regex.capture_locations())
            .collect();
        Parser {
            pat,
            locs,
            values: Vec::with_capacity(32),
            unknown_spans: Vec::with_capacity(8),
            key_buf: String::with_capacity(64),
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
        pat.prefilter.find(line)?;
        // Which literals occur (overlapping: `new fill batch. ` contains `batch`).
        let mut present: u64 = 0;
        for m in pat.prefilter.find_overlapping_iter(line) {
            present |= 1 << m.pattern().as_usize();
        }
        // Line kinds in file order; the first whose literal is present and whose regex matches.
        let k = (0..pat.lines.len()).find(|&k| {
            present & (1 << pat.kind_literal[k]) != 0
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
        let (time, mut ranks) = match pat.prefix.captures_iter(region).last() {
            Some(c) => prefix::read_prefix(pat, &c),
            None => (None, Ranks::default()),
        };
        if ranks.tp.is_none() {
            // v0.1.17-v0.2.13 tag every message with `[gpu_id=N] ` or `[gpu=N] `.
            ranks.tp = gpu_tag(region);
        }

        self.values.clear();
        self.unknown_spans.clear();
        let mut bad_values = 0u32;
        let mut access = None;
        let mut server_args = None;
        match kind.class {
            Class::Access => {
                let get = |n: &str| {
                    kind.regex
                        .capture_names()
                        .position(|x| x == Some(n))
                        .and_then(|g| locs.get(g))
                        .map(|(s, e)| &line[s..e])
                };
                access = Some(Access {
                    method: get("method").unwrap_or(""),
                    path: get("path").unwrap_or(""),
                    status: get("status").and_then(|s| s.parse().ok()).unwrap_or(0),
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
                    match pat.field(kind, key) {
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
    let p = region.find("[gpu")?;
    let rest = &region[p + 4..];
    let rest = rest
        .strip_prefix("_id=")
        .or_else(|| rest.strip_prefix('='))?;
    let end = rest.find(']')?;
    rest[..end].parse().ok()
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
