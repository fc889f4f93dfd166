//! Every labelled variant of `samples/sglang-variants.log` parses to exactly the record in
//! `tests/golden/variants.txt` (one block per variant: its `# ` comment, then per line the line
//! kind, time, ranks and every metric value in base units). The golden file was checked by hand
//! against sglang-formats.md; a change to it is a change of behaviour.

use std::sync::Arc;

use sglang_log_exporter::parse::patterns::Patterns;
use sglang_log_exporter::parse::Parser;
use sglang_log_exporter::record::Record;

/// One line's record as text: `kind time ranks | id=value ... | unknown=[..]`.
pub fn describe(pat: &Patterns, rec: &Record<'_>) -> String {
    let mut s = pat.lines[rec.kind].name.clone();
    if let Some(t) = rec.time {
        match t.date {
            Some(d) => s.push_str(&format!(" {d}T{}", t.time)),
            None => s.push_str(&format!(" T{}", t.time)),
        }
    }
    let r = rec.ranks;
    for (tag, v) in [
        ("DP", r.dp),
        ("PP", r.pp),
        ("ATTN_CP", r.attn_cp),
        ("MOE_DP", r.moe_dp),
        ("TP", r.tp),
        ("EP", r.ep),
    ] {
        if let Some(n) = v {
            s.push_str(&format!(" {tag}{n}"));
        }
    }
    s.push_str(" |");
    for (id, v) in rec.values {
        s.push_str(&format!(" {}={}", pat.metrics[*id as usize].id, v));
    }
    if let Some(a) = rec.access {
        s.push_str(&format!(" {} {} {}", a.method, a.path, a.status));
    }
    if let Some(a) = &rec.server_args {
        s.push_str(&format!(" {a:?}"));
    }
    let unknown: Vec<&str> = rec.unknown_keys().collect();
    if !unknown.is_empty() {
        s.push_str(&format!(" | unknown={unknown:?}"));
    }
    if rec.bad_values > 0 {
        s.push_str(&format!(" | bad_values={}", rec.bad_values));
    }
    s
}

/// The transcript of a whole file: comments kept, each other line replaced by its record (or
/// `none`).
pub fn transcript(text: &str) -> String {
    let pat = Arc::new(Patterns::embedded().expect("embedded patterns"));
    let mut parser = Parser::new(pat.clone());
    let mut out = String::new();
    for line in text.lines() {
        if line.starts_with("# ") {
            out.push_str(line);
        } else {
            match parser.parse(line) {
                Some(r) => out.push_str(&format!("  {}", describe(&pat, &r))),
                None => out.push_str("  none"),
            }
        }
        out.push('\n');
    }
    out
}

#[test]
fn every_variant_parses_to_its_golden_record() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let input = std::fs::read_to_string(root.join("samples/sglang-variants.log")).unwrap();
    let got = transcript(&input);
    let golden_path = root.join("tests/golden/variants.txt");
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&golden_path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&golden_path).unwrap();
    // Report every variant that differs, named by its comment, not just the first.
    let mut failures = Vec::new();
    let mut group = "";
    for (g, w) in got.lines().zip(want.lines()) {
        if w.starts_with("# ") {
            group = w;
        }
        if g != w {
            failures.push(format!("{group}\n   want: {w}\n    got: {g}"));
        }
    }
    assert_eq!(
        got.lines().count(),
        want.lines().count(),
        "line count differs"
    );
    assert!(
        failures.is_empty(),
        "{} variants differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
