//! Property-based fuzzing of everything a raw log line goes through ("no panic can stop a
//! source"), on stable Rust with proptest.
//!
//! Targets (one `#[test]` each, so they run side by side):
//!
//! * `fuzz_parser_*`: [`Parser::parse`] on arbitrary strings and on mutated real lines; values
//!   read back exactly when re-rendered, and a value made unreadable is counted exactly once;
//! * `fuzz_pipeline_*`: the whole [`Pipeline::run`] (framing, ANSI/CR cleaning, UTF-8, parse)
//!   on arbitrary bytes, and wrappers (journald JSON, Docker json-file and CRI pieces, JSON
//!   envelopes, colour codes, `\r` fragments, Ray actor prefixes) that must not change what a
//!   line says;
//! * `fuzz_linebuf_*`: [`LineBuf`] over arbitrary chunkings against a reference split;
//! * `fuzz_journal_export_*`: the `journalctl -o export` stream [`Reader`]: entries of text and
//!   binary values (newlines, NULs, any byte) given back exactly at any read size, values past
//!   the limit skipped with their cursor, any mutated stream read the same at any read size;
//! * `fuzz_prefix_*`: the prefix reader and [`TimeResolver::resolve`] against the zone database
//!   (UTC, Europe/Berlin, America/New_York, Australia/Lord_Howe, …);
//! * `fuzz_state_*`: [`State::apply`] of what the pipeline returns: no infinite value stored, no
//!   NaN or infinity exported, counters never decrease.
//!
//! Generators start from every line of `samples/` and `tests/data/cases/` and mutate them (byte
//! flips, insertions of ESC, `[`, `\r`, NUL, Unicode digits, huge numbers, truncation, duplicated
//! fields, splices), so the search stays near the real formats.
//!
//! Budget: by default each target runs a fixed number of cases from a fixed seed (the whole
//! binary takes well under a minute in a debug build). `FUZZ_SECONDS=N` runs each target for N
//! seconds from random seeds instead (`cargo test --release --test fuzz -- --nocapture` prints
//! the cases run per target), `FUZZ_CASES=N` changes the fixed count, `FUZZ_SEED=N` replays a
//! seed printed by a failure. A case running longer than `FUZZ_HANG_SECONDS` (default 60) is a
//! hang: its input is printed and the process aborts.

use std::fmt;
use std::io::{self, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use sglang_log_exporter::parse::patterns::{Class, FieldTarget, MetricId, MetricKind, Patterns};
use sglang_log_exporter::parse::prefix::{read_prefix_parts, TimeResolver, BAD_RANK};
use sglang_log_exporter::parse::Parser;
use sglang_log_exporter::pipeline::{Outcome, Pipeline};
use sglang_log_exporter::record::{LogTime, Ranks, Record};
use sglang_log_exporter::source::journal_export::{Entry, Item, Reader};
use sglang_log_exporter::source::linebuf::{Event, LineBuf, READ_SIZE};
use sglang_log_exporter::state::{SourceDelta, State, StateConfig};

// ---------------------------------------------------------------------------------------------
// The harness: budget, seeds, watchdog.

fn env_num<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// What a running case is fed, for the watchdog to print if it hangs.
type Current = Arc<Mutex<(Instant, Option<String>)>>;

/// Aborts the process, naming the input, when one case runs longer than the hang limit (an
/// infinite loop would otherwise hang the test run silently).
fn watchdog(name: &'static str, current: Current, done: Arc<AtomicU64>) {
    let limit = Duration::from_secs(env_num("FUZZ_HANG_SECONDS").unwrap_or(60));
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(500));
        if done.load(Ordering::Relaxed) == u64::MAX {
            return;
        }
        let (since, input) = &*current.lock().unwrap_or_else(|p| p.into_inner());
        if since.elapsed() > limit {
            eprintln!(
                "fuzz {name}: one case has run for {:?} (a hang?); its input:\n{}",
                since.elapsed(),
                input.as_deref().unwrap_or("?")
            );
            std::process::abort();
        }
    });
}

/// Runs `test` on values of `strategy`: `default_cases` cases from a fixed seed, or as many as
/// fit in `FUZZ_SECONDS` from random seeds. A failure is shrunk and reported with its seed.
fn fuzz<S>(
    name: &'static str,
    default_cases: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) where
    S: Strategy,
    S::Value: fmt::Debug,
{
    let seconds: Option<f64> = env_num("FUZZ_SECONDS");
    let cases: u32 = env_num("FUZZ_CASES").unwrap_or(default_cases);
    let fixed_seed: Option<u64> = env_num("FUZZ_SEED");
    let mut seed = fixed_seed.unwrap_or_else(|| match seconds {
        Some(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
        // A fixed seed per target: the default run is the same search every time.
        None => name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
        }),
    });
    let current: Current = Arc::new(Mutex::new((Instant::now(), None)));
    let done = Arc::new(AtomicU64::new(0));
    watchdog(name, current.clone(), done.clone());
    /// Stops the watchdog however the target ends (a failure panics).
    struct Stop(Arc<AtomicU64>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(u64::MAX, Ordering::Relaxed);
        }
    }
    let _stop = Stop(done.clone());
    let start = Instant::now();
    let mut total = 0u64;
    // A timed run goes on after a failure (each is printed at once) and fails at the end.
    let mut failures = Vec::new();
    loop {
        let batch = if seconds.is_some() { 512 } else { cases };
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        let config = Config {
            cases: batch,
            failure_persistence: None,
            max_shrink_iters: 20_000,
            ..Config::default()
        };
        let mut runner = TestRunner::new_with_rng(config, rng);
        let result = runner.run(&strategy, |v| {
            {
                let mut c = current.lock().unwrap_or_else(|p| p.into_inner());
                c.0 = Instant::now();
                c.1 = Some(format!("{v:?}"));
            }
            test(v)
        });
        let failure = match result {
            Ok(()) => None,
            Err(TestError::Fail(why, v)) => Some(format!(
                "fuzz {name}: {why}\nminimal failing input: {v:#?}\nreplay: FUZZ_SEED={seed} \
                 FUZZ_CASES={batch} cargo test --test fuzz {name}"
            )),
            Err(TestError::Abort(why)) => {
                Some(format!("fuzz {name}: aborted: {why} (seed {seed})"))
            }
        };
        if let Some(f) = failure {
            if seconds.is_none() {
                panic!("{f}");
            }
            eprintln!("{f}");
            failures.push(f);
        }
        total += u64::from(batch);
        seed = seed.wrapping_add(1);
        match seconds {
            Some(s) if start.elapsed().as_secs_f64() < s => {}
            _ => break,
        }
    }
    eprintln!(
        "fuzz {name}: {total} cases in {:.1} s, {} failures",
        start.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// Bytes shown as an escaped byte string in failure reports.
#[derive(Clone, PartialEq, Eq)]
struct Bytes(Vec<u8>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"{}\"", self.0.escape_ascii())
    }
}

fn patterns() -> Arc<Patterns> {
    static P: OnceLock<Arc<Patterns>> = OnceLock::new();
    P.get_or_init(|| Arc::new(Patterns::embedded().expect("embedded patterns")))
        .clone()
}

/// The corpus the generators start from.
struct Seeds {
    /// Every distinct line of the sample and case files, as read (may be JSON, CRI, coloured).
    raw: Vec<Vec<u8>>,
    /// Plain lines: valid UTF-8, no ESC or `\r`, not starting with `{`, a digit or `(`.
    plain: Vec<String>,
    /// Plain lines the parser reads as a stats, retraction or startup line with no bad value,
    /// with their numeric `key: value` fields (see [`numeric_fields`]; at least one).
    stats: Vec<(String, Vec<NumField>)>,
}

fn seeds() -> &'static Seeds {
    static S: OnceLock<Seeds> = OnceLock::new();
    S.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        for dir in ["samples", "tests/data/cases"] {
            for e in std::fs::read_dir(root.join(dir)).expect("corpus dir") {
                let p = e.expect("dir entry").path();
                if p.extension().is_some_and(|x| x == "log" || x == "txt") {
                    files.push(p);
                }
            }
        }
        files.sort();
        let mut raw = std::collections::BTreeSet::new();
        for f in &files {
            let data = std::fs::read(f).expect("corpus file");
            let export = f.ends_with("journal-export.txt");
            for line in data.split(|&b| b == b'\n') {
                // The journal export: its MESSAGE values are the log lines.
                let line = match line.strip_prefix(b"MESSAGE=") {
                    Some(m) => m,
                    None if export => continue,
                    None => line,
                };
                if !line.is_empty() {
                    raw.insert(line.to_vec());
                }
            }
        }
        let raw: Vec<Vec<u8>> = raw.into_iter().collect();
        let plain: Vec<String> = raw
            .iter()
            .filter_map(|l| std::str::from_utf8(l).ok())
            .filter(|l| !l.contains(['\x1b', '\r']))
            .filter(|l| !l.starts_with(|c: char| c == '{' || c == '(' || c.is_ascii_digit()))
            .map(str::to_string)
            .collect();
        let pat = patterns();
        let mut parser = Parser::new(pat.clone());
        let stats = plain
            .iter()
            .filter(|l| {
                let Some(r) = parser.parse(l) else {
                    return false;
                };
                r.bad_values == 0
                    && matches!(
                        r.class,
                        Class::Prefill | Class::Decode | Class::Retract | Class::Fact
                    )
            })
            .map(|l| (l.clone(), numeric_fields(&pat, l)))
            .filter(|(_, f)| !f.is_empty())
            .collect::<Vec<_>>();
        assert!(raw.len() > 500, "corpus too small: {}", raw.len());
        assert!(stats.len() > 50, "too few stats lines: {}", stats.len());
        Seeds { raw, plain, stats }
    })
}

thread_local! {
    /// A parser that lives across cases (its prefix cache and field memo see every line).
    static LONG_LIVED: std::cell::RefCell<Parser> = std::cell::RefCell::new(Parser::new(patterns()));
    /// A parser without any fast path (the reference the fast paths are compared with).
    static PLAIN: std::cell::RefCell<Parser> = std::cell::RefCell::new(Parser::plain(patterns()));
}

// ---------------------------------------------------------------------------------------------
// Mutations of real lines.

/// Tokens inserted by mutations: the bytes that broke parsers before, and near-misses of the
/// real syntax.
const TOKENS: &[&str] = &[
    "\x1b",
    "\x1b[",
    "\x1b[0m",
    "\x1b[1;31m",
    "\x1b]0;t\x07",
    "\x1b(B",
    "[",
    "]",
    "(",
    ")",
    "\r",
    "\r\n",
    "\n",
    "\0",
    "\0\0\0",
    "\u{0663}",
    "\u{09EB}",
    "\u{FF11}",
    "\u{1D7D7}",
    "\u{FFFD}",
    "\u{200B}",
    "99999999999999999999999999",
    "9007199254740993",
    "9007199254740992",
    "4294967295",
    "4294967296",
    "18446744073709551616",
    "1e309",
    "1E5",
    "-0",
    "-1",
    "+-1",
    ".",
    "..5",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "0x10",
    "True",
    "False",
    ", ",
    ": ",
    ":",
    ",",
    "=",
    " -> ",
    "->",
    "%",
    "GB",
    " GB",
    "#",
    " DP",
    " TP",
    " TP4294967296",
    " DP0 TP0",
    "[2026-06-03 10:00:00 TP1] ",
    "[2026-02-30 25:61:61] ",
    "[10:00:00] ",
    "[gpu_id=3] ",
    "(SGLangEngine pid=7, ip=10.0.0.1) ",
    " [repeated 3x across cluster]",
    "{",
    "}",
    "\"",
    "\\",
    "\\u0000",
    "{\"MESSAGE\":\"",
    "2026-06-03T10:00:00.5Z stdout P ",
    "2026-06-03T10:00:00.5Z stderr F ",
    "Decode batch, ",
    "Prefill batch, ",
    "#running-req: ",
    "token usage: ",
    "#token: full=1, swa=2",
    "est uncap acc len: 4.90 [4.70, 5.10]",
    "KV size: 51.47 GB",
    "K size: 1.00 GB, V size: 1.00 GB",
];

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::sample::select(TOKENS).prop_map(str::to_string),
        2 => any::<char>().prop_map(String::from),
        1 => "[0-9]{1,30}",
        1 => "-?[0-9]{1,17}\\.[0-9]{0,12}%?",
    ]
}

/// One edit of a line (positions are taken modulo its length).
#[derive(Debug, Clone)]
enum Mutation {
    Flip {
        at: usize,
        bit: u8,
    },
    Insert {
        at: usize,
        token: String,
    },
    Replace {
        at: usize,
        len: usize,
        token: String,
    },
    Truncate {
        at: usize,
    },
    Delete {
        at: usize,
        len: usize,
    },
    /// Copies the `nth` `, `-separated piece to after the `to`th one.
    DupField {
        nth: usize,
        to: usize,
    },
    /// Replaces the `nth` run of ASCII digits.
    Number {
        nth: usize,
        token: String,
    },
    /// This line up to `at`, then another seed line from `from`.
    Splice {
        other: usize,
        at: usize,
        from: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        (at, 0u8..8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (at, token()).prop_map(|(at, token)| Mutation::Insert { at, token }),
        (at, 0usize..8, token()).prop_map(|(at, len, token)| Mutation::Replace { at, len, token }),
        at.prop_map(|at| Mutation::Truncate { at }),
        (at, 0usize..16).prop_map(|(at, len)| Mutation::Delete { at, len }),
        (any::<usize>(), any::<usize>()).prop_map(|(nth, to)| Mutation::DupField { nth, to }),
        (any::<usize>(), token()).prop_map(|(nth, token)| Mutation::Number { nth, token }),
        (any::<usize>(), at, at).prop_map(|(other, at, from)| Mutation::Splice { other, at, from }),
    ]
}

fn apply_mutation(b: &mut Vec<u8>, m: &Mutation) {
    let len = b.len();
    let pos = |at: usize| if len == 0 { 0 } else { at % (len + 1) };
    match m {
        Mutation::Flip { at, bit } => {
            if len > 0 {
                b[at % len] ^= 1 << bit;
            }
        }
        Mutation::Insert { at, token } => {
            let p = pos(*at);
            b.splice(p..p, token.bytes());
        }
        Mutation::Replace { at, len: n, token } => {
            let p = pos(*at);
            let e = (p + n).min(len);
            b.splice(p..e, token.bytes());
        }
        Mutation::Truncate { at } => b.truncate(pos(*at)),
        Mutation::Delete { at, len: n } => {
            let p = pos(*at);
            let e = (p + n).min(len);
            b.drain(p..e);
        }
        Mutation::DupField { nth, to } => {
            let pieces: Vec<(usize, usize)> = piece_spans(b);
            if pieces.is_empty() {
                return;
            }
            let (s, e) = pieces[nth % pieces.len()];
            let (_, at) = pieces[to % pieces.len()];
            let mut ins = b", ".to_vec();
            ins.extend_from_slice(&b[s..e]);
            b.splice(at..at, ins);
        }
        Mutation::Number { nth, token } => {
            let runs = digit_runs(b);
            if !runs.is_empty() {
                let (s, e) = runs[nth % runs.len()];
                b.splice(s..e, token.bytes());
            }
        }
        Mutation::Splice { other, at, from } => {
            let s = seeds();
            let o = &s.raw[other % s.raw.len()];
            b.truncate(pos(*at));
            let f = if o.is_empty() { 0 } else { from % o.len() };
            b.extend_from_slice(&o[f..]);
        }
    }
}

/// The spans of the `, `-separated pieces of a line.
fn piece_spans(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i + 1 < b.len() {
        if &b[i..i + 2] == b", " {
            out.push((start, i));
            start = i + 2;
            i += 2;
        } else {
            i += 1;
        }
    }
    out.push((start, b.len()));
    out
}

fn digit_runs(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let s = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

/// A real line (any of the corpus), mutated 0 to 4 times.
fn mutated_raw() -> impl Strategy<Value = Vec<u8>> {
    let n = seeds().raw.len();
    (0..n, proptest::collection::vec(mutation(), 0..5)).prop_map(|(i, ms)| {
        let mut b = seeds().raw[i].clone();
        for m in &ms {
            apply_mutation(&mut b, m);
        }
        b
    })
}

/// A line for the parser: arbitrary text, or a mutated real line.
fn any_line() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => any::<String>(),
        1 => "[ -~]{0,160}",
        8 => mutated_raw().prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
    ]
}

// ---------------------------------------------------------------------------------------------
// What a record says, and what must hold of every record.

/// Everything a record says except the line text (compared between ways of reading a line).
#[derive(Debug, Clone, PartialEq)]
struct Said {
    kind: usize,
    class: Class,
    time: Option<LogTime>,
    ranks: Ranks,
    values: Vec<(MetricId, u64)>,
    bad_metrics: Vec<MetricId>,
    bad_values: u32,
    unknown: Vec<String>,
    engine: Option<String>,
    access: Option<(String, String, u16)>,
    server_args: Option<String>,
    request: Option<String>,
}

fn said(r: &Record<'_>) -> Said {
    Said {
        kind: r.kind,
        class: r.class,
        time: r.time,
        ranks: r.ranks,
        values: r.values.iter().map(|&(m, v)| (m, v.to_bits())).collect(),
        bad_metrics: r.bad_metrics.to_vec(),
        bad_values: r.bad_values,
        unknown: r.unknown_keys().map(str::to_string).collect(),
        engine: r.engine.map(str::to_string),
        access: r
            .access
            .map(|a| (a.method.to_string(), a.path.to_string(), a.status)),
        server_args: r.server_args.as_ref().map(|a| format!("{a:?}")),
        request: r.request.map(|q| format!("{q:?}")),
    }
}

/// The invariants of every record the parser returns.
fn check_record(r: &Record<'_>) -> Result<(), TestCaseError> {
    let pat = patterns();
    prop_assert!(r.kind < pat.lines.len());
    prop_assert_eq!(r.class, pat.lines[r.kind].class);
    let mut seen = std::collections::BTreeSet::new();
    for &(m, v) in r.values {
        prop_assert!(v.is_finite(), "non-finite value {} for {}", v, m);
        prop_assert!((m as usize) < pat.metrics.len());
        prop_assert!(seen.insert(m), "metric {} given twice", m);
        prop_assert!(
            !r.bad_metrics.contains(&m),
            "metric {} both read and bad",
            m
        );
    }
    let bad: std::collections::BTreeSet<_> = r.bad_metrics.iter().collect();
    prop_assert_eq!(bad.len(), r.bad_metrics.len(), "a bad metric listed twice");
    // Every withdrawn metric is an unreadable value, or a `nan` (SGLang's "no value", withdrawn
    // but not counted).
    let nans = r.line.matches("nan").count();
    prop_assert!(
        r.bad_values as usize + nans >= r.bad_metrics.len(),
        "{} bad metrics but {} bad values",
        r.bad_metrics.len(),
        r.bad_values
    );
    let rk = r.ranks;
    for x in [rk.dp, rk.pp, rk.attn_cp, rk.moe_dp, rk.tp, rk.ep] {
        prop_assert!(x != Some(BAD_RANK), "an absurd rank was read: {:?}", rk);
    }
    for &(s, e) in r.unknown {
        prop_assert!(s <= e && e <= r.unknown_text.len());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// (a) The parser.

#[test]
fn fuzz_parser_reads_any_line_sanely() {
    let pat = patterns();
    fuzz("parser_any_line", 1500, any_line(), |line| {
        let mut fresh = Parser::new(pat.clone());
        let a = fresh.parse(&line).map(|r| {
            let s = said(&r);
            (check_record(&r), s, r.line.len())
        });
        if let Some((check, _, n)) = &a {
            check.clone()?;
            prop_assert!(line.starts_with(&line[..*n]));
        }
        // Whatever a parser read before (prefix cache, field memo) does not change the answer.
        let b = LONG_LIVED.with(|p| p.borrow_mut().parse(&line).map(|r| said(&r)));
        prop_assert_eq!(a.as_ref().map(|x| &x.1), b.as_ref());
        // Nor do the fast paths: the plain parser (every memo off) says the same.
        let c = PLAIN.with(|p| p.borrow_mut().parse(&line).map(|r| said(&r)));
        prop_assert_eq!(a.map(|x| x.1), c);
        // A stream prefix's gate never turns away a line its regex matches.
        prop_assert_eq!(pat.streams.gate_refusing_a_match(&line), None);
        // Nor does the gate before the unread-line test, nor its answer kept by line shape
        // (asked twice: the second time the shape is known).
        let u = pat.unread();
        let want = u.looks_like_ungated(&line);
        prop_assert_eq!(u.looks_like(&line), want);
        for _ in 0..2 {
            let said = LONG_LIVED.with(|p| p.borrow_mut().parse_or_unread(&line).err());
            if let Some(looks) = said {
                prop_assert_eq!(looks, want);
            }
        }
        Ok(())
    });
}

/// A numeric `key: value` field of a line: the span of its value, the key, the target it
/// has on the line's kind, whether it was printed with a fraction or as a percentage.
#[derive(Debug, Clone)]
struct NumField {
    span: (usize, usize),
    id: MetricId,
    scale: f64,
    decimals: Option<usize>,
    percent: bool,
    /// The value lies inside what the kind's regex matches (an unlabelled v0.1 decode line is
    /// told by its `#running-req: N, #token: ` alone): unreadable there, the line is of no kind.
    in_label: bool,
}

/// The numeric fields of `line` whose key maps to a metric read from no other field of the
/// line, and whose value the parser reads as printed (so locating them here agrees with it).
fn numeric_fields(pat: &Arc<Patterns>, line: &str) -> Vec<NumField> {
    static RE: OnceLock<regex::Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"(?:^|, |\] |\. )([^,:\[\]]+?): (-?[0-9]+)(\.[0-9]+)?(%?)(?:,|$)")
            .unwrap()
    });
    let mut p = Parser::new(pat.clone());
    let Some(rec) = p.parse(line) else {
        return Vec::new();
    };
    let kind = &pat.lines[rec.kind];
    let label = kind
        .regex
        .find(line)
        .map_or((0, 0), |m| (m.start(), m.end()));
    let mut out: Vec<NumField> = Vec::new();
    let mut ids = Vec::new();
    let mut at = 0;
    while let Some(c) = re.captures_at(line, at) {
        let key_m = c.get(1).unwrap();
        let int = c.get(2).unwrap();
        let frac = c.get(3);
        let pct = c.get(4).unwrap();
        at = int.start();
        let key = key_m.as_str().trim();
        // The key after the label ("Decode batch, #running-req" is found at ", ").
        if let Some(FieldTarget::Metric { id, scale, sum, .. }) = pat.field(kind, key) {
            ids.push(id);
            if !sum {
                let end = frac.map_or(int.end(), |f| f.end());
                let text = &line[int.start()..end];
                let printed = if pct.as_str().is_empty() {
                    text.parse::<f64>().unwrap()
                } else {
                    format!("{text}e-2").parse::<f64>().unwrap()
                };
                if rec.get(id) == Some(printed * scale) {
                    out.push(NumField {
                        span: (int.start(), end),
                        id,
                        scale,
                        decimals: frac.map(|f| f.len() - 1),
                        percent: !pct.as_str().is_empty(),
                        in_label: int.start() < label.1 && end > label.0,
                    });
                }
            }
        }
    }
    // A metric read from two fields (a repeated key, a sum) is left out.
    out.retain(|f| ids.iter().filter(|&&i| i == f.id).count() == 1);
    out
}

/// A stats line with every numeric field re-rendered with a new value, and maybe one of them
/// made unreadable.
#[derive(Debug, Clone)]
struct Rerendered {
    line: String,
    /// (metric, value it must read) of the re-rendered fields.
    want: Vec<(MetricId, f64)>,
    /// The field made unreadable: its metric, the text put there, whether the line's kind
    /// is told by that value.
    broken: Option<(MetricId, String, bool)>,
}

/// Values that are no number as SGLang prints one (`parse_value` refuses them).
const UNREADABLE: &[&str] = &[
    "",
    "nan",
    "inf",
    "-inf",
    "1e309",
    "1E5",
    "35abc",
    "0x10",
    "1.2.3",
    "\u{0663}",
    "1\u{0663}",
    "9007199254740993",
    "99999999999999999999",
    "+-1",
    "--5",
    "TRUE",
    "Truex",
    "abc",
    "1\u{0}",
    "3;5",
];

fn rerendered() -> impl Strategy<Value = Rerendered> {
    let n = seeds().stats.len();
    (
        0..n,
        proptest::collection::vec((any::<u64>(), 0u32..4), 40),
        proptest::option::of((any::<usize>(), proptest::sample::select(UNREADABLE))),
    )
        .prop_map(|(i, nums, broken)| {
            let (line, fields) = &seeds().stats[i];
            let broken = broken.map(|(k, t)| (k % fields.len(), t));
            let mut out = String::new();
            let mut want = Vec::new();
            let mut bad = None;
            let mut last = 0;
            for (j, f) in fields.iter().enumerate() {
                out.push_str(&line[last..f.span.0]);
                last = f.span.1;
                if let Some((k, t)) = broken.filter(|(k, _)| *k == j) {
                    out.push_str(t);
                    bad = Some((f.id, t.to_string(), f.in_label));
                    // `%` after the broken value stays: `nan%` is no number either.
                    let _ = k;
                    continue;
                }
                let (raw, mag) = nums[j % nums.len()];
                // Magnitudes SGLang prints: counts up to 2^53, ratios, throughputs.
                let v = match mag {
                    0 => raw % 1000,
                    1 => raw % 1_000_000,
                    2 => raw % (1 << 53),
                    _ => raw % 10,
                };
                let text = match f.decimals {
                    Some(d) => {
                        let scale = 10u64.pow(d.min(6) as u32);
                        let int = v % (1 << 40);
                        format!("{}.{:0w$}", int / scale, int % scale, w = d.min(6))
                            + &"0".repeat(d.saturating_sub(6))
                    }
                    None => v.to_string(),
                };
                let printed: f64 = if f.percent {
                    format!("{text}e-2").parse().unwrap()
                } else {
                    text.parse().unwrap()
                };
                want.push((f.id, printed * f.scale));
                out.push_str(&text);
            }
            out.push_str(&line[last..]);
            Rerendered {
                line: out,
                want,
                broken: bad,
            }
        })
}

#[test]
fn fuzz_parser_values_round_trip_and_bad_values_are_counted_exactly() {
    let pat = patterns();
    fuzz("parser_round_trip", 1000, rerendered(), |c| {
        let mut p = Parser::new(pat.clone());
        let r = p.parse(&c.line);
        if r.is_none() && c.broken.as_ref().is_some_and(|b| b.2) {
            return Ok(());
        }
        prop_assert!(r.is_some(), "the re-rendered line is no longer read");
        let r = r.unwrap();
        check_record(&r)?;
        for &(id, v) in &c.want {
            prop_assert_eq!(
                r.get(id),
                Some(v),
                "metric {}",
                &pat.metrics[id as usize].id
            );
        }
        match &c.broken {
            None => prop_assert_eq!(r.bad_values, 0),
            Some((id, text, _)) => {
                // `nan` is SGLang's "no value": withdrawn like an unreadable value, not counted.
                let counted = u32::from(text != "nan");
                prop_assert_eq!(r.bad_values, counted, "one value was made unreadable");
                prop_assert_eq!(r.bad_metrics, &[*id][..]);
                prop_assert_eq!(r.get(*id), None);
            }
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// (b) The pipeline: framing, cleaning, UTF-8, parse.

/// A wrapper around a line, as a shipper, runtime or terminal would add it.
#[derive(Debug, Clone)]
enum Outer {
    None,
    /// `journalctl -o json`: MESSAGE as a string or as an array of bytes.
    Journald {
        bytes: bool,
        unit: String,
    },
    /// A JSON envelope with the message under one of the well-known keys.
    Json {
        key: usize,
    },
    /// Docker json-file: the line in `log` pieces split at these char positions.
    Docker {
        cuts: Vec<usize>,
    },
    /// CRI: `P` pieces split at these byte positions, then `F`.
    Cri {
        cuts: Vec<usize>,
    },
}

#[derive(Debug, Clone)]
enum Inner {
    /// A colour code at a char position.
    Colour { at: usize, code: usize },
    /// Terminal fragments before the line, separated by `\r`.
    Fragment { junk: String },
    /// Ray's actor prefix, maybe with the deduplication note.
    Ray {
        pid: u32,
        ip: bool,
        repeated: Option<u8>,
    },
}

const COLOURS: &[&str] = &[
    "\x1b[0m",
    "\x1b[32m",
    "\x1b[1;31m",
    "\x1b[38;5;208m",
    "\x1b[38;2;1;2;3m",
    "\x1b[m",
    "\x1b[2K",
    "\x1b]0;title\x07",
    "\x1b]8;;http://x\x1b\\",
    "\x1b(B",
    "\x1bc",
];

/// The envelope keys the framer knows, but journald's `MESSAGE` (its records are fuzzed as
/// journald records).
fn json_keys() -> &'static [&'static str] {
    &sglang_log_exporter::pipeline::framing::MESSAGE_KEYS[1..]
}

fn outer() -> impl Strategy<Value = Outer> {
    let cuts = proptest::collection::vec(any::<usize>(), 0..5);
    prop_oneof![
        Just(Outer::None),
        (any::<bool>(), "[a-z-]{1,12}(\\.service)?")
            .prop_map(|(bytes, unit)| Outer::Journald { bytes, unit }),
        (0..json_keys().len()).prop_map(|key| Outer::Json { key }),
        cuts.clone().prop_map(|cuts| Outer::Docker { cuts }),
        cuts.prop_map(|cuts| Outer::Cri { cuts }),
    ]
}

fn inner() -> impl Strategy<Value = Inner> {
    prop_oneof![
        3 => (any::<usize>(), 0..COLOURS.len()).prop_map(|(at, code)| Inner::Colour { at, code }),
        // No `\n`: a line never holds one (and Docker splits its records there).
        1 => "[^\r\n\x1b]{0,12}".prop_map(|junk| Inner::Fragment { junk }),
        1 => (any::<u32>(), any::<bool>(), proptest::option::of(1u8..50))
            .prop_map(|(pid, ip, repeated)| Inner::Ray { pid, ip, repeated }),
    ]
}

/// A plain real line, inner wrappers, an outer wrapper.
#[derive(Debug, Clone)]
struct Wrapped {
    base: String,
    inner: Vec<Inner>,
    outer: Outer,
}

impl Wrapped {
    /// The text after the inner wrappers (what the line looks like on a terminal's log),
    /// and the Ray engine label it carries.
    fn text(&self) -> (Vec<u8>, Option<String>) {
        let mut t = self.base.clone();
        let mut engine = None;
        // Ray's prefix first (colour codes may then fall inside it), fragments last.
        for i in &self.inner {
            if let Inner::Ray { pid, ip, repeated } = i {
                if engine.is_none() && !t.starts_with('(') {
                    let ipt = if *ip { ", ip=10.0.0.11" } else { "" };
                    t = format!("(SGLangEngine pid={pid}{ipt}) {t}");
                    if let Some(n) = repeated {
                        t.push_str(&format!(" [repeated {n}x across cluster]"));
                    }
                    let ipl = if *ip { " ip=10.0.0.11" } else { "" };
                    engine = Some(format!("SGLangEngine pid={pid}{ipl}"));
                }
            }
        }
        // Colour codes between the characters of the line, never inside one another.
        let mut codes: Vec<(usize, &str)> = self
            .inner
            .iter()
            .filter_map(|i| match i {
                Inner::Colour { at, code } => {
                    let mut p = at % (t.len() + 1);
                    while !t.is_char_boundary(p) {
                        p -= 1;
                    }
                    Some((p, COLOURS[*code]))
                }
                _ => None,
            })
            .collect();
        codes.sort_by_key(|c| std::cmp::Reverse(c.0));
        for (p, code) in codes {
            t.insert_str(p, code);
        }
        for i in &self.inner {
            if let Inner::Fragment { junk } = i {
                t = format!("{junk}\r{t}");
            }
        }
        (t.into_bytes(), engine)
    }

    /// The raw lines (without `\n`) this wrapped line is written as.
    fn raw_lines(&self) -> Vec<Vec<u8>> {
        let (text, _) = self.text();
        let s = || String::from_utf8(text.clone()).expect("inner wrappers keep UTF-8");
        match &self.outer {
            Outer::None => vec![text],
            Outer::Journald { bytes, unit } => {
                let msg = if *bytes {
                    serde_json::to_value(&text).unwrap()
                } else {
                    serde_json::Value::String(s())
                };
                let v = serde_json::json!({
                    "__CURSOR": "s=1;i=2",
                    "__REALTIME_TIMESTAMP": "1780481270372041",
                    "_SYSTEMD_UNIT": unit,
                    "MESSAGE": msg,
                });
                vec![v.to_string().into_bytes()]
            }
            Outer::Json { key } => {
                let key = json_keys()[*key];
                let v = match key.split_once('.') {
                    Some((a, b)) => serde_json::json!({ a: { b: s() }, "severity": "INFO" }),
                    None => serde_json::json!({ key: s(), "time": "2026-06-03T10:00:00.5Z" }),
                };
                vec![v.to_string().into_bytes()]
            }
            Outer::Docker { cuts } => {
                let t = s();
                let mut at: Vec<usize> = cuts
                    .iter()
                    .map(|c| {
                        let mut p = c % (t.len() + 1);
                        while !t.is_char_boundary(p) {
                            p -= 1;
                        }
                        p
                    })
                    .collect();
                at.push(t.len());
                at.sort_unstable();
                let mut prev = 0;
                let n = at.len();
                at.into_iter()
                    .enumerate()
                    .map(|(i, e)| {
                        let mut piece = t[prev..e].to_string();
                        prev = e;
                        if i + 1 == n {
                            piece.push('\n');
                        }
                        serde_json::json!({"log": piece, "stream": "stderr", "time": "2026-06-03T10:00:00.5Z"})
                            .to_string()
                            .into_bytes()
                    })
                    .collect()
            }
            Outer::Cri { cuts } => {
                let mut at: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
                at.push(text.len());
                at.sort_unstable();
                let mut prev = 0;
                let n = at.len();
                at.into_iter()
                    .enumerate()
                    .map(|(i, e)| {
                        let tag = if i + 1 == n { "F" } else { "P" };
                        let mut l =
                            format!("2026-06-03T10:00:00.123456789Z stdout {tag} ").into_bytes();
                        l.extend_from_slice(&text[prev..e]);
                        prev = e;
                        l
                    })
                    .collect()
            }
        }
    }
}

fn wrapped() -> impl Strategy<Value = Wrapped> {
    let n = seeds().plain.len();
    (0..n, proptest::collection::vec(inner(), 0..4), outer()).prop_map(|(i, inner, outer)| {
        Wrapped {
            base: seeds().plain[i].clone(),
            inner,
            outer,
        }
    })
}

/// A raw line for the pipeline: arbitrary bytes, a mutated real line, or a piece of a wrapped
/// line, mutated again (so envelopes break too).
fn raw_line() -> impl Strategy<Value = Bytes> {
    let wrapped_piece = (
        wrapped(),
        any::<usize>(),
        proptest::collection::vec(mutation(), 0..3),
    )
        .prop_map(|(w, k, ms)| {
            let lines = w.raw_lines();
            let mut b = lines[k % lines.len()].clone();
            for m in &ms {
                apply_mutation(&mut b, m);
            }
            b
        });
    // Another tool's prefix before a (mutated) line: kubectl, compose, srun, SkyPilot, logcli,
    // Fluentd's JSON record, an export that ate SGLang's time.
    let streamed = (
        0..7usize,
        mutated_raw(),
        proptest::collection::vec(mutation(), 0..2),
    )
        .prop_map(|(k, line, ms)| {
            let l = String::from_utf8_lossy(&line).into_owned();
            let mut b = match k {
                0 => format!("[pod/sglang-0/server] 2026-09-26T10:00:01.5Z {l}"),
                1 => format!("sglang-1  | {l}"),
                2 => format!(" 3: {l}"),
                3 => format!("(worker1, rank=1, pid=7, ip=10.0.0.2) {l}"),
                4 => format!("2026-09-26T10:00:01Z {{pod=\"a\"}} {l}"),
                5 => format!(
                    "2026-09-26T10:00:01+0000\tdocker.a\t{}",
                    serde_json::json!({ "log": format!("{l}\n"), "stream": "stderr" })
                ),
                _ => format!(
                    "2026-09-26T10:00:01.123Z replica-7 INFO TP0] {}",
                    l.rsplit("] ").next().unwrap_or("")
                ),
            }
            .into_bytes();
            for m in &ms {
                apply_mutation(&mut b, m);
            }
            b
        });
    prop_oneof![
        1 => proptest::collection::vec(any::<u8>(), 0..200),
        4 => mutated_raw(),
        4 => wrapped_piece,
        2 => streamed,
    ]
    .prop_map(|mut b| {
        // A line never holds its `\n` (the line buffer splits there).
        b.retain(|&c| c != b'\n');
        Bytes(b)
    })
}

fn check_outcome(o: &Outcome<'_>) -> Result<(), TestCaseError> {
    match o {
        Outcome::Panicked => prop_assert!(false, "the pipeline panicked"),
        Outcome::Parsed {
            rec,
            unit,
            realtime,
            node,
            user,
        } => {
            check_record(rec)?;
            if let Some(n) = node {
                prop_assert!(!n.is_empty(), "an empty node");
            }
            if let Some(u) = user {
                prop_assert!(u.starts_with("user@") && unit.is_some(), "user {:?}", u);
            }
            if let Some(e) = rec.engine {
                prop_assert!(!e.is_empty() && e.trim() == e, "engine {:?}", e);
            }
            prop_assert!(
                !rec.line.contains(['\r', '\x1b']),
                "uncleaned text reached the parser"
            );
            if let Some(t) = realtime {
                prop_assert!(t.is_finite(), "wrapper time {}", t);
            }
            if let Some(u) = unit {
                prop_assert!(!u.ends_with(".service"));
            }
        }
        Outcome::Unmatched {
            text: t, realtime, ..
        } => {
            if let Some(t) = realtime {
                prop_assert!(t.is_finite(), "wrapper time {}", t);
            }
            prop_assert!(!t.contains(['\x1b', '\r']), "uncleaned text {:?}", t)
        }
        Outcome::Skipped => {}
    }
    Ok(())
}

#[test]
fn fuzz_pipeline_runs_any_bytes() {
    let pat = patterns();
    let strategy = (
        proptest::collection::vec(raw_line(), 1..10),
        prop_oneof![Just(64usize), Just(1 << 20)],
        any::<bool>(),
    );
    fuzz("pipeline_any_bytes", 400, strategy, |(lines, max, key)| {
        let key = key.then_some("payload.text");
        let mut p = Pipeline::new(Parser::new(pat.clone()), max, key);
        let mut d = SourceDelta::default();
        let mut parsed = 0u64;
        for l in &lines {
            // A stream prefix's gate never turns away a line its regex matches.
            let text = String::from_utf8_lossy(&l.0);
            prop_assert_eq!(pat.streams.gate_refusing_a_match(&text), None, "{}", text);
            let o = p.run(&l.0, &mut d);
            check_outcome(&o)?;
            parsed += u64::from(matches!(o, Outcome::Parsed { .. }));
        }
        // Every per-line counter counts a line at most once, however many layers (record,
        // prefix, inner record) it was read through; and a line has at most one fate.
        let n = lines.len() as u64;
        let per_line = [
            ("unmatched", d.unmatched),
            ("invalid_utf8", d.invalid_utf8),
            ("control_codes", d.control_codes),
            ("oversized", d.oversized),
            ("incomplete", d.incomplete),
            ("json_without_message", d.json_without_message),
            ("null_messages", d.null_messages),
            ("unread", d.unread.iter().sum()),
        ];
        for (name, v) in per_line {
            prop_assert!(v <= n, "{} counted {} of {} lines: {:?}", name, v, n, d);
        }
        let fates = parsed + d.unmatched + d.oversized + d.incomplete + d.json_without_message;
        prop_assert!(fates <= n, "{} fates for {} lines: {:?}", fates, n, d);
        prop_assert!(d.null_messages <= d.unmatched && d.unread.iter().sum::<u64>() <= d.unmatched);
        Ok(())
    });
}

#[test]
fn fuzz_pipeline_wrappers_do_not_change_what_a_line_says() {
    let pat = patterns();
    fuzz("pipeline_wrappers", 600, wrapped(), |w| {
        let mut plain = Pipeline::new(Parser::new(pat.clone()), 1 << 20, None);
        let mut d = SourceDelta::default();
        let want = match plain.run(w.base.as_bytes(), &mut d) {
            Outcome::Parsed { rec, .. } => Some(said(&rec)),
            Outcome::Unmatched { .. } => None,
            other => return Err(TestCaseError::fail(format!("base line: {other:?}"))),
        };
        let (_, engine) = w.text();
        let lines = w.raw_lines();
        let mut p = Pipeline::new(Parser::new(pat.clone()), 1 << 20, None);
        let last = lines.len() - 1;
        for (i, l) in lines.iter().enumerate() {
            let o = p.run(l, &mut d);
            check_outcome(&o)?;
            if i < last {
                prop_assert!(matches!(o, Outcome::Skipped), "piece {}: {:?}", i, o);
                continue;
            }
            let got = match o {
                Outcome::Parsed { rec, unit, .. } => {
                    if let Outer::Journald { unit: u, .. } = &w.outer {
                        prop_assert_eq!(unit, Some(u.strip_suffix(".service").unwrap_or(u)));
                    }
                    Some(said(&rec))
                }
                Outcome::Unmatched { .. } => None,
                other => return Err(TestCaseError::fail(format!("wrapped line: {other:?}"))),
            };
            // A wrapper's engine (Ray's prefix) is the line's; without one the line keeps what
            // its own text names (a stream prefix of the base line, read once unwrapped).
            let mut want = want.clone();
            if let (Some(w), Some(e)) = (want.as_mut(), engine.clone()) {
                w.engine = Some(e);
            }
            prop_assert_eq!(got, want);
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// (c) The line buffer.

/// A reader handing out `data` in chunks of the given sizes (cycled), with an `Interrupted`
/// error now and then.
struct Chunked<'a> {
    data: &'a [u8],
    sizes: &'a [usize],
    i: usize,
    interrupt: bool,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.i += 1;
        if self.interrupt && self.i % 7 == 3 {
            return Err(io::Error::from(io::ErrorKind::Interrupted));
        }
        let want = self.sizes[self.i % self.sizes.len()].max(1);
        let n = want.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[derive(Debug, PartialEq, Eq, Clone)]
enum Ev {
    Line(Bytes, u64),
    Nul,
    Over,
    Incomplete,
}

/// The events the documented behaviour gives for `data`, whatever the chunking: each
/// `\n`-terminated line without its leading NULs (a run reported once), skipped and counted
/// when longer than `max`; the unterminated tail reported as incomplete unless it was skipped.
fn reference(data: &[u8], max: usize) -> Vec<Ev> {
    let max = max.max(1);
    let mut out = Vec::new();
    let mut pos = 0u64;
    let mut rest = data;
    loop {
        let nl = memchr_nl(rest);
        let seg = &rest[..nl.unwrap_or(rest.len())];
        let nuls = seg.iter().take_while(|&&b| b == 0).count();
        if nuls > 0 {
            out.push(Ev::Nul);
        }
        let body = &seg[nuls..];
        match nl {
            Some(n) => {
                pos += n as u64 + 1;
                if body.len() > max {
                    out.push(Ev::Over);
                } else {
                    out.push(Ev::Line(Bytes(body.to_vec()), pos));
                }
                rest = &rest[n + 1..];
            }
            None => {
                if body.len() > max {
                    out.push(Ev::Over);
                } else if !body.is_empty() {
                    out.push(Ev::Incomplete);
                }
                return out;
            }
        }
    }
}

fn memchr_nl(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

#[derive(Debug, Clone)]
struct LineBufCase {
    data: Bytes,
    sizes: Vec<usize>,
    max: usize,
    interrupt: bool,
}

fn linebuf_case() -> impl Strategy<Value = LineBufCase> {
    let byte = prop_oneof![
        3 => Just(b'\n'),
        2 => Just(0u8),
        4 => Just(b'a'),
        1 => Just(b'\r'),
        2 => any::<u8>(),
    ];
    let small = proptest::collection::vec(byte.clone(), 0..400);
    // Inputs past the read size: a short pattern repeated.
    let big = (proptest::collection::vec(byte, 1..40), 1usize..12_000).prop_map(|(p, n)| {
        let mut v = Vec::with_capacity(p.len() * n);
        for _ in 0..n {
            v.extend_from_slice(&p);
        }
        v
    });
    let data = prop_oneof![4 => small, 1 => big];
    let sizes = proptest::collection::vec(
        prop_oneof![1usize..8, 8usize..300, 300usize..(3 * READ_SIZE)],
        1..6,
    );
    let max = prop_oneof![0usize..20, 20usize..300, Just(READ_SIZE), Just(1 << 20)];
    (data, sizes, max, any::<bool>()).prop_map(|(data, sizes, max, interrupt)| LineBufCase {
        data: Bytes(data),
        sizes,
        max,
        interrupt,
    })
}

fn run_linebuf(c: &LineBufCase) -> Result<Vec<Ev>, TestCaseError> {
    let mut lb = LineBuf::new(c.max);
    let mut r = Chunked {
        data: &c.data.0,
        sizes: &c.sizes,
        i: 0,
        interrupt: c.interrupt,
    };
    let mut got = Vec::new();
    let bound = c.max.max(1) + READ_SIZE;
    let mut reads = 0;
    loop {
        let n = lb
            .fill(&mut r, |e| {
                got.push(match e {
                    Event::Line(l, p) => Ev::Line(Bytes(l.to_vec()), p),
                    Event::NulRun(_) => Ev::Nul,
                    Event::Oversized => Ev::Over,
                    Event::Incomplete => Ev::Incomplete,
                })
            })
            .map_err(|e| TestCaseError::fail(format!("read error {e}")))?;
        prop_assert!(
            lb.capacity() <= bound,
            "buffer {} > max_line + READ_SIZE",
            lb.capacity()
        );
        prop_assert!(lb.pending() <= c.max.max(1), "holds {} bytes", lb.pending());
        reads += 1;
        prop_assert!(reads < 1_000_000, "fill does not progress");
        if n == 0 {
            break;
        }
    }
    lb.flush_partial(|e| {
        got.push(match e {
            Event::Incomplete => Ev::Incomplete,
            other => Ev::Line(Bytes(format!("{other:?}").into_bytes()), 0),
        })
    });
    prop_assert_eq!(lb.pending(), 0);
    prop_assert_eq!(lb.position(), c.data.0.len() as u64);
    Ok(got)
}

#[test]
fn fuzz_linebuf_matches_a_reference_split() {
    fuzz("linebuf", 600, linebuf_case(), |c| {
        let got = run_linebuf(&c)?;
        prop_assert_eq!(got, reference(&c.data.0, c.max));
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// (d) The prefix: its parts, and local times in zones with daylight saving.

fn digits_like() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9:\\-]{0,12}",
        "[0-9]{4}-[0-9]{2}-[0-9]{2}",
        "[0-9]{2}:[0-9]{2}:[0-9]{2}",
        "[0-9\u{0660}-\u{0669}\u{FF10}-\u{FF19}:\\-]{0,12}",
        any::<String>(),
    ]
}

#[derive(Debug, Clone)]
struct PrefixCase {
    date: Option<String>,
    time: Option<String>,
    frac: Option<String>,
    tags: Vec<(usize, String)>,
}

const TAGS: &[&str] = &["DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP", "XX", "D", "tp"];

fn prefix_case() -> impl Strategy<Value = PrefixCase> {
    let num = prop_oneof![
        "[0-9]{1,3}",
        "[0-9]{9,12}",
        Just("4294967295".to_string()),
        Just("4294967294".to_string()),
        Just("".to_string()),
        "[0-9\u{0660}-\u{0669}]{1,3}",
    ];
    (
        proptest::option::of(digits_like()),
        proptest::option::of(digits_like()),
        proptest::option::of(prop_oneof!["[0-9]{0,11}", "[0-9\u{0661}a]{1,3}"]),
        proptest::collection::vec((0..TAGS.len(), num), 0..7),
    )
        .prop_map(|(date, time, frac, tags)| PrefixCase {
            date,
            time,
            frac,
            tags,
        })
}

/// `Some(numbers)` when `s` has the shape (`0`: an ASCII digit, anything else: that byte).
fn shape(s: &str, pattern: &str) -> Option<Vec<i64>> {
    if s.len() != pattern.len() {
        return None;
    }
    let mut out = vec![0i64];
    for (c, p) in s.bytes().zip(pattern.bytes()) {
        match p {
            b'0' if c.is_ascii_digit() => {
                let l = out.last_mut().unwrap();
                *l = *l * 10 + i64::from(c - b'0');
            }
            b'0' => return None,
            _ if c == p => out.push(0),
            _ => return None,
        }
    }
    Some(out)
}

#[test]
fn fuzz_prefix_parts_are_read_exactly() {
    let pat = patterns();
    fuzz("prefix_parts", 3000, prefix_case(), |c| {
        let tags: String = c
            .tags
            .iter()
            .map(|(t, n)| format!(" {}{n}", TAGS[*t]))
            .collect();
        let got = read_prefix_parts(
            &pat.rank_tags,
            c.date.as_deref(),
            c.time.as_deref(),
            c.frac.as_deref(),
            Some(&tags),
        );
        // The reference: each tag sets its rank, a number past u32 or a second tag for the
        // same rank is BAD_RANK; the time is read only when every part is well-formed and real.
        let mut ranks = Ranks::default();
        for (t, n) in &c.tags {
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let v = n.parse::<u64>().ok().filter(|&v| v < u64::from(u32::MAX));
            let v = v.map_or(BAD_RANK, |v| v as u32);
            let slot = match TAGS[*t] {
                "DP" => &mut ranks.dp,
                "PP" => &mut ranks.pp,
                "ATTN_CP" => &mut ranks.attn_cp,
                "MOE_DP" => &mut ranks.moe_dp,
                "TP" => &mut ranks.tp,
                "EP" => &mut ranks.ep,
                _ => continue,
            };
            *slot = Some(if slot.is_some() { BAD_RANK } else { v });
        }
        let time = match &c.time {
            None => Some(None),
            Some(t) => (|| {
                let hms = shape(t, "00:00:00")?;
                let nanos = match &c.frac {
                    None => 0,
                    Some(f)
                        if (1..=9).contains(&f.len()) && f.bytes().all(|b| b.is_ascii_digit()) =>
                    {
                        f.parse::<i64>().ok()? * 10i64.pow(9 - f.len() as u32)
                    }
                    Some(_) => return None,
                };
                if hms[0] > 23 || hms[1] > 59 || hms[2] > 59 {
                    return None;
                }
                let time =
                    Time::new(hms[0] as i8, hms[1] as i8, hms[2] as i8, nanos as i32).ok()?;
                let date = match &c.date {
                    None => None,
                    Some(d) => {
                        let ymd = shape(d, "0000-00-00")?;
                        let leap = ymd[0] % 4 == 0 && (ymd[0] % 100 != 0 || ymd[0] % 400 == 0);
                        let days = [
                            31,
                            if leap { 29 } else { 28 },
                            31,
                            30,
                            31,
                            30,
                            31,
                            31,
                            30,
                            31,
                            30,
                            31,
                        ];
                        if !(1..=12).contains(&ymd[1])
                            || ymd[2] < 1
                            || ymd[2] > days[ymd[1] as usize - 1]
                        {
                            return None;
                        }
                        Some(Date::new(ymd[0] as i16, ymd[1] as i8, ymd[2] as i8).ok()?)
                    }
                };
                Some(Some(LogTime {
                    date,
                    month_day: None,
                    time,
                }))
            })(),
        };
        prop_assert_eq!(got, time.map(|t| (t, ranks)));
        Ok(())
    });
}

const ZONES: &[&str] = &[
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
    "America/St_Johns",
    "Pacific/Chatham",
    "Europe/Dublin",
    "Africa/Casablanca",
    "Pacific/Apia",
];

/// Year, month, day.
type Ymd = (i16, i8, i8);
/// A prefix: maybe a date, and hour, minute, second, nanosecond.
type Stamp = (Option<Ymd>, (i8, i8, i8, i32));

#[derive(Debug, Clone)]
struct TimeCase {
    zone: usize,
    fixed: Option<Ymd>,
    /// Lines: an optional date (year, month, day) and a time (h, m, s, ns).
    times: Vec<Stamp>,
}

fn time_case() -> impl Strategy<Value = TimeCase> {
    // Dates near daylight-saving changes (March/April, September to November), any year
    // the prefix can print, and every day of a year.
    let date = prop_oneof![
        (
            1900i16..2100,
            prop_oneof![Just(3i8), Just(4), Just(9), Just(10), Just(11)],
            1i8..32
        ),
        (0i16..=9999, 1i8..13, 1i8..32),
        (2020i16..2030, 1i8..13, 1i8..32),
    ];
    let time = (
        0i8..24,
        prop_oneof![0i8..60, Just(0), Just(30), Just(59)],
        0i8..60,
        prop_oneof![Just(0i32), 0i32..1_000_000_000],
    );
    (
        0..ZONES.len(),
        proptest::option::of(date.clone()),
        proptest::collection::vec((proptest::option::weighted(0.7, date), time), 1..24),
    )
        .prop_map(|(zone, fixed, times)| TimeCase { zone, fixed, times })
}

fn date_of((y, m, d): (i16, i8, i8)) -> Option<Date> {
    Date::new(y, m, d).ok()
}

#[test]
fn fuzz_prefix_times_resolve_as_the_zone_database_says() {
    fuzz("time_resolver", 1500, time_case(), |c| {
        let tz = TimeZone::get(ZONES[c.zone]).expect("zone in the system's tzdata");
        let fixed = c.fixed.and_then(date_of);
        let mut r = TimeResolver::new(tz.clone(), fixed);
        let now = jiff::Timestamp::now().as_second() as f64;
        let mut prev: Option<f64> = None;
        for &(date, (h, mi, s, ns)) in &c.times {
            let time = Time::new(h, mi, s, ns).unwrap();
            let date = date.and_then(date_of);
            let got = r.resolve(LogTime {
                date,
                month_day: None,
                time,
            });
            let before = prev;
            prev = got.or(prev);
            match date {
                Some(d) => {
                    // The zone database's answer; for a time in a gap the one after it, for a
                    // repeated one the earlier (jiff's "compatible", as SGLang's clock reads),
                    // or the later once the lines have passed the earlier by 10 minutes.
                    let amb = tz.to_ambiguous_zoned(DateTime::from_parts(d, time));
                    let fold = matches!(amb.offset(), jiff::tz::AmbiguousOffset::Fold { .. });
                    let zoned = if fold {
                        let first = amb.clone().earlier().ok();
                        let passed = first.as_ref().is_some_and(|z| {
                            before.is_some_and(|p| (z.timestamp().as_second() as f64) < p - 600.0)
                        });
                        if passed {
                            amb.later().ok()
                        } else {
                            first
                        }
                    } else {
                        amb.compatible().ok()
                    };
                    let want = zoned.map(|z| {
                        // Whole seconds rounded down, then the fraction (as SGLang's
                        // clock printed it): also right before 1970.
                        let (s, n) = (z.timestamp().as_second(), z.timestamp().subsec_nanosecond());
                        let (s, n) = if n < 0 {
                            (s - 1, n + 1_000_000_000)
                        } else {
                            (s, n)
                        };
                        s as f64 + f64::from(n) / 1e9
                    });
                    prop_assert_eq!(got, want, "{} {} in {}", d, time, ZONES[c.zone]);
                }
                None => {
                    if let Some(t) = got {
                        prop_assert!(t.is_finite());
                        if fixed.is_none() && c.times.iter().all(|x| x.0.is_none()) {
                            prop_assert!(t <= now + 61.0, "a time-only line placed in the future");
                        }
                    }
                }
            }
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// (e) The state.

#[derive(Debug, Clone)]
struct StateCase {
    lines: Vec<(Bytes, Option<u32>)>,
}

fn state_case() -> impl Strategy<Value = StateCase> {
    let stats = (
        0..seeds().stats.len(),
        proptest::collection::vec(mutation(), 0..3),
    )
        .prop_map(|(i, ms)| {
            let mut b = seeds().stats[i].0.clone().into_bytes();
            for m in &ms {
                apply_mutation(&mut b, m);
            }
            b.retain(|&c| c != b'\n');
            Bytes(b)
        });
    let line = prop_oneof![2 => raw_line(), 3 => stats];
    proptest::collection::vec((line, proptest::option::of(0u32..7200)), 1..40)
        .prop_map(|lines| StateCase { lines })
}

/// Counter values of the state (by a description of the series), to compare before and after
/// a line.
fn counters(st: &State) -> Vec<(String, f64)> {
    let pat = st.patterns();
    let mut out = Vec::new();
    for (k, srv) in st.servers() {
        for (id, m) in pat.metrics.iter().enumerate() {
            if m.kind == MetricKind::Counter && !srv.values[id].is_nan() {
                out.push((format!("{k:?} {}", m.id), srv.values[id]));
            }
        }
        for (r, rs) in &srv.ranks {
            for (id, m) in pat.metrics.iter().enumerate() {
                if m.kind == MetricKind::Counter && !rs.values[id].is_nan() {
                    out.push((format!("{k:?} {r:?} {}", m.id), rs.values[id]));
                }
            }
            out.push((
                format!("{k:?} {r:?} prefill lines"),
                rs.prefill_lines as f64,
            ));
            out.push((format!("{k:?} {r:?} decode lines"), rs.decode_lines as f64));
            out.push((format!("{k:?} {r:?} retractions"), rs.retractions as f64));
        }
        for (h, n) in &srv.http {
            out.push((format!("{k:?} {h:?}"), *n as f64));
        }
    }
    out
}

#[test]
fn fuzz_state_stays_finite_and_counters_never_decrease() {
    let pat = patterns();
    let hit = pat.metric_by_id("cache_hit_rate");
    fuzz("state_apply", 300, state_case(), |c| {
        let cfg = StateConfig {
            max_servers: 3,
            max_engines: 2,
            max_ranks: 4,
            max_ranks_total: 6,
            max_http_series: 4,
            max_unknown_fields: 4,
            max_sources: 2,
            ..StateConfig::default()
        };
        let mut st = State::new(pat.clone(), cfg);
        let mut p = Pipeline::new(Parser::new(pat.clone()), 1 << 20, None);
        let mut d = SourceDelta::default();
        let t0 = 1_780_480_800.0;
        for (line, at) in &c.lines {
            let before = counters(&st);
            // Each rank's cache hit rate, to find the one a line changed.
            let hits = |st: &State| -> std::collections::BTreeMap<String, u64> {
                let h = hit.map_or(0, |h| h as usize);
                st.servers()
                    .iter()
                    .flat_map(|(k, s)| {
                        s.ranks
                            .iter()
                            .map(move |(r, rs)| (format!("{k:?} {r:?}"), rs.values[h].to_bits()))
                    })
                    .collect()
            };
            let hits_before = hits(&st);
            let mut derived_hit = false;
            // A `server_args` line starts its server over (a new process): its counters
            // restart, as the new process's own would.
            let mut restarted = None;
            if let Outcome::Parsed { rec, unit, .. } = p.run(&line.0, &mut d) {
                if rec.class == sglang_log_exporter::parse::patterns::Class::ServerArgs {
                    restarted = Some(format!(
                        "ServerKey {{ server: {:?}, engine: {:?} }}",
                        unit.unwrap_or("srv"),
                        rec.engine.unwrap_or("")
                    ));
                }
                derived_hit =
                    hit.is_some_and(|h| rec.get(h).is_none() && !rec.bad_metrics.contains(&h));
                st.apply(
                    "src",
                    unit.unwrap_or("srv"),
                    &rec,
                    at.map(|s| t0 + f64::from(s)),
                );
            }
            // A cache hit rate the state derives (cached / (new + cached)) is a ratio (one a
            // line prints is shown as printed).
            if derived_hit {
                for (k, bits) in hits(&st) {
                    let v = f64::from_bits(bits);
                    if hits_before.get(&k) != Some(&bits) && !v.is_nan() {
                        prop_assert!((0.0..=1.0).contains(&v), "derived cache hit rate {}", v);
                    }
                }
            }
            let after: std::collections::BTreeMap<_, _> = counters(&st).into_iter().collect();
            for (k, v) in before {
                if restarted
                    .as_ref()
                    .is_some_and(|r| k.starts_with(r.as_str()))
                {
                    continue;
                }
                let now = after.get(&k).copied();
                prop_assert!(
                    now.is_some_and(|n| n >= v),
                    "counter {:?}: {} then {:?}",
                    k,
                    v,
                    now
                );
            }
            for (k, srv) in st.servers() {
                for v in srv
                    .values
                    .iter()
                    .chain(srv.ranks.values().flat_map(|r| &r.values))
                {
                    prop_assert!(!v.is_infinite(), "{:?} stores {}", k, v);
                }
            }
        }
        // What a scrape shows: never NaN or infinity; each series once and each family's HELP
        // and TYPE once, as the state renders it (before `enforce` could hide a repeat) and as
        // encoded.
        use sglang_log_exporter::export::{metrics, valid};
        for now in [t0, t0 + 7200.0] {
            let raw = metrics::collect(&st, now);
            let faults = valid::check(&raw);
            prop_assert!(faults.is_empty(), "invalid exposition: {:?}", faults);
            let fams = metrics::families(&st, now);
            for f in &fams {
                for (labels, v) in &f.samples {
                    prop_assert!(v.is_finite(), "{}{:?} = {}", f.name, labels, v);
                }
            }
            let text = metrics::encode_text(&fams);
            let checked = valid::check_text(&text);
            prop_assert!(checked.is_ok(), "invalid text: {:?}", checked);
            // Every other body `/metrics` may answer with (`--web.names`, negotiated): each
            // series once also where colons become underscores (no family of ours meets
            // another), and a body with consistent names valid whole.
            use sglang_log_exporter::export::format::{Escaping, Variant};
            for (openmetrics, escaping, underscored) in [
                (false, Escaping::AllowUtf8, true),
                (true, Escaping::AllowUtf8, false),
                (true, Escaping::Underscores, false),
                (true, Escaping::Values, false),
            ] {
                let v = Variant {
                    openmetrics,
                    escaping,
                    underscored,
                };
                let body = metrics::encode(&fams, v);
                let mut seen = std::collections::HashSet::new();
                for l in body.lines().filter(|l| !l.starts_with('#')) {
                    let series = l.rsplit_once(' ').map_or(l, |(s, _)| s);
                    prop_assert!(seen.insert(series), "{:?}: {} twice", v, series);
                }
                if escaping == Escaping::AllowUtf8 {
                    let checked = valid::check_text(&body);
                    prop_assert!(checked.is_ok(), "{:?}: invalid: {:?}", v, checked);
                }
            }
        }
        Ok(())
    });
}

// ---------------------------------------------------------------------------------------------
// Regression tests: inputs the fuzzing found, with the right answer.

/// Found by `fuzz_linebuf_matches_a_reference_split`: a line longer than `--max-line-bytes`
/// was handed out whole when its end came in the same read as the part already held, and
/// skipped when the reads split it otherwise.
#[test]
fn regression_an_over_long_line_is_skipped_however_the_reads_split_it() {
    let mut data = b"a".to_vec();
    data.extend_from_slice(&[0; 12]);
    data.extend_from_slice(b"\nok\n");
    for sizes in [vec![2], vec![1000], vec![13, 1]] {
        let c = LineBufCase {
            data: Bytes(data.clone()),
            sizes,
            max: 12,
            interrupt: false,
        };
        let got = run_linebuf(&c).unwrap();
        assert_eq!(
            got,
            [Ev::Over, Ev::Line(Bytes(b"ok".to_vec()), 17)],
            "{c:?}"
        );
    }
}

/// Found while writing the reference of `fuzz_linebuf_matches_a_reference_split` (which checks
/// it since): a run of NULs at the start of a line was not counted (`nul_runs`) when the
/// previous run had ended a read.
#[test]
fn regression_every_nul_run_is_counted() {
    let c = LineBufCase {
        data: Bytes(b"\0\0x\n\0\0y\n".to_vec()),
        sizes: vec![2],
        max: 100,
        interrupt: false,
    };
    let line = |s: &[u8], p| Ev::Line(Bytes(s.to_vec()), p);
    assert_eq!(
        run_linebuf(&c).unwrap(),
        [Ev::Nul, line(b"x", 4), Ev::Nul, line(b"y", 8)]
    );
}

/// Found by `fuzz_pipeline_runs_any_bytes`: a journald `__REALTIME_TIMESTAMP` of `nan` (or
/// `inf`, `1e400`) became a NaN line time, so backfill dropped the line as implausible instead
/// of using its SGLang prefix time.
#[test]
fn regression_a_garbage_journald_timestamp_is_no_time() {
    let pat = patterns();
    for ts in ["nan", "inf", "-inf", "1e400", "-5", "1.5e15"] {
        let line = format!(
            r#"{{"MESSAGE":"[2026-06-03 10:00:24 DP0 TP0] Decode batch, #running-req: 3, #queue-req: 0","_SYSTEMD_UNIT":"a.service","__REALTIME_TIMESTAMP":"{ts}"}}"#
        );
        let mut p = Pipeline::new(Parser::new(pat.clone()), 1 << 20, None);
        match p.run(line.as_bytes(), &mut SourceDelta::default()) {
            Outcome::Parsed { realtime, rec, .. } => {
                assert_eq!(realtime, None, "{ts}");
                assert!(rec.time.is_some());
            }
            other => panic!("{ts}: {other:?}"),
        }
    }
}

/// Found by `fuzz_prefix_times_resolve_as_the_zone_database_says`: the per-hour cache placed
/// the times of an hour whose start falls in a daylight-saving gap (Lord Howe Island moves its
/// clock by 30 minutes, from 02:00 to 02:30) half an hour late.
#[test]
fn regression_lord_howe_half_hour_daylight_saving() {
    let tz = TimeZone::get("Australia/Lord_Howe").unwrap();
    let mut r = TimeResolver::new(tz, None);
    let at = |h, m| LogTime {
        date: Some(jiff::civil::date(2071, 10, 4)),
        month_day: None,
        time: Time::new(h, m, 0, 0).unwrap(),
    };
    // 01:59 +10:30, then 02:30 +11:00 (one minute later), 02:45 +11:00; 02:10 does not exist
    // and is placed after the gap (02:40 +11:00).
    assert_eq!(r.resolve(at(1, 59)), Some(3_211_111_740.0));
    assert_eq!(r.resolve(at(2, 30)), Some(3_211_111_800.0));
    assert_eq!(r.resolve(at(2, 45)), Some(3_211_112_700.0));
    assert_eq!(r.resolve(at(2, 10)), Some(3_211_112_400.0));
    // Berlin's one-hour change still reads through the cache: 02:30 on 2026-03-29 is 03:30.
    let mut b = TimeResolver::new(TimeZone::get("Europe/Berlin").unwrap(), None);
    let t = LogTime {
        date: Some(jiff::civil::date(2026, 3, 29)),
        month_day: None,
        time: Time::new(2, 30, 0, 0).unwrap(),
    };
    assert_eq!(b.resolve(t), Some(1_774_747_800.0));
}

/// Found by `fuzz_pipeline_wrappers_do_not_change_what_a_line_says`: a CRI `P` piece ending
/// in `\r` lost it (taken for a CRLF ending), so a progress-bar fragment was glued to the line
/// it preceded and the line (here a Ray actor's) read as another.
#[test]
fn regression_a_cri_piece_keeps_its_carriage_return() {
    let pat = patterns();
    let mut p = Pipeline::new(Parser::new(pat.clone()), 1 << 20, None);
    let mut d = SourceDelta::default();
    let first = b"2026-06-03T10:00:00.123456789Z stdout P  50%|##   \r";
    assert!(matches!(p.run(first, &mut d), Outcome::Skipped));
    let last = b"2026-06-03T10:00:00.123456789Z stdout F (SGLangEngine pid=7) [2026-06-03 10:17:10 TP0] Decode batch, #running-req: 3, #queue-req: 0";
    match p.run(last, &mut d) {
        Outcome::Parsed { rec, .. } => {
            assert_eq!(rec.engine, Some("SGLangEngine pid=7"));
            let running = pat.metric_by_id("num_running_reqs").unwrap();
            assert_eq!(rec.get(running), Some(3.0));
        }
        other => panic!("{other:?}"),
    }
}

/// Found by `fuzz_state_stays_finite_and_counters_never_decrease`: a garbled prefill line with
/// a negative token count (`#new-token: -1`) gave a derived cache hit rate above 1.
#[test]
fn regression_a_negative_token_count_derives_no_cache_hit_rate() {
    let pat = patterns();
    let mut st = State::new(pat.clone(), StateConfig::default());
    let mut p = Parser::new(pat.clone());
    let hit = pat.metric_by_id("cache_hit_rate").unwrap() as usize;
    let line = "[2025-06-13 14:05:02] Prefill batch. #new-seq: 1, #new-token: -1, #cached-token: 437, token usage: 0.01, #running-req: 2, #queue-req: 0";
    st.apply("src", "srv", &p.parse(line).unwrap(), None);
    let rank = only_rank(&st);
    assert!(rank.values[hit].is_nan(), "{}", rank.values[hit]);
    // A sane line still derives it.
    let line = "[2025-06-13 14:05:03] Prefill batch. #new-seq: 1, #new-token: 100, #cached-token: 300, token usage: 0.01, #running-req: 2, #queue-req: 0";
    st.apply("src", "srv", &p.parse(line).unwrap(), None);
    let rank = only_rank(&st);
    assert_eq!(rank.values[hit], 0.75);
}

/// The one rank of the one server of `st`.
fn only_rank(st: &State) -> &sglang_log_exporter::state::RankState {
    let srv = st.servers().values().next().expect("a server");
    srv.ranks.values().next().expect("a rank")
}

/// Found by `fuzz_parser_values_round_trip_and_bad_values_are_counted_exactly` (an emptied
/// value): a last field without its value (`#queue-req:` once the trailing space is trimmed)
/// was counted as a bad piece but left its gauge at the previous line's value.
#[test]
fn regression_a_last_field_without_its_value_withdraws_its_gauge() {
    let pat = patterns();
    let queue = pat.metric_by_id("num_queue_reqs").unwrap();
    let mut p = Parser::new(pat.clone());
    let mut st = State::new(pat.clone(), StateConfig::default());
    let full = "[2026-07-21 15:00:13 TP0 EP0] Decode batch, #running-req: 3, #queue-req: 5";
    st.apply("src", "srv", &p.parse(full).unwrap(), None);
    let cut = "[2026-07-21 15:00:14 TP0 EP0] Decode batch, #running-req: 4, #queue-req: ";
    let r = p.parse(cut).unwrap();
    assert_eq!((r.bad_values, r.bad_metrics), (1, &[queue][..]));
    st.apply("src", "srv", &r, None);
    let rank = st
        .servers()
        .values()
        .next()
        .unwrap()
        .ranks
        .values()
        .next()
        .unwrap();
    assert!(
        rank.values[queue as usize].is_nan(),
        "still {}",
        rank.values[queue as usize]
    );
}

// ---------------------------------------------------------------------------------------------
// The journal export stream (`journalctl -o export`, read entry by entry for `--journal-unit`).

/// An export stream of entries whose MESSAGE is text or binary, possibly mutated (cut, bytes
/// changed), read with a given read size.
#[derive(Debug, Clone)]
struct ExportCase {
    /// Per entry: the MESSAGE bytes and whether it is written in the binary form.
    messages: Vec<(Bytes, bool)>,
    mutations: Vec<Mutation>,
    chunk: usize,
    max: usize,
}

fn export_case() -> impl Strategy<Value = ExportCase> {
    let value = prop_oneof![
        "[ -~]{0,40}".prop_map(|s| s.into_bytes()),
        proptest::collection::vec(any::<u8>(), 0..300),
        proptest::collection::vec(prop_oneof![Just(b'\n'), Just(0u8), Just(b'=')], 0..20),
    ];
    (
        proptest::collection::vec((value.prop_map(Bytes), any::<bool>()), 0..6),
        proptest::collection::vec(mutation(), 0..3),
        1usize..200,
        prop_oneof![Just(64usize), Just(1 << 20)],
    )
        .prop_map(|(messages, mutations, chunk, max)| ExportCase {
            messages,
            mutations,
            chunk,
            max,
        })
}

/// The stream of `c`'s entries (before mutations).
fn export_bytes(c: &ExportCase) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (m, binary)) in c.messages.iter().enumerate() {
        out.extend_from_slice(format!("__CURSOR=c{i}\n__REALTIME_TIMESTAMP={i}\n").as_bytes());
        // Text is only for values without a newline.
        if *binary || m.0.contains(&b'\n') {
            out.extend_from_slice(b"MESSAGE\n");
            out.extend_from_slice(&(m.0.len() as u64).to_le_bytes());
            out.extend_from_slice(&m.0);
            out.push(b'\n');
        } else {
            out.extend_from_slice(b"MESSAGE=");
            out.extend_from_slice(&m.0);
            out.push(b'\n');
        }
        out.extend_from_slice(b"\n");
    }
    out
}

/// What the reader hands out for `data` read `chunk` bytes at a time (items owned, and whether it
/// ended inside an entry).
fn read_export(data: &[u8], chunk: usize, max: usize) -> (Vec<Result<Entry, Entry>>, bool) {
    struct Chunks<'a>(&'a [u8], usize);
    impl std::io::Read for Chunks<'_> {
        fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
            let n = self.0.len().min(self.1).min(b.len());
            b[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let mut r = Reader::new(max);
    let mut src = Chunks(data, chunk);
    let mut out = Vec::new();
    loop {
        let n = r
            .fill(&mut src, |i| {
                out.push(match i {
                    Item::Entry(e) => Ok(e.clone()),
                    Item::Oversized(e) | Item::Broken(e) => Err(e.clone()),
                })
            })
            .expect("reads from memory do not fail");
        if n == 0 {
            return (out, r.in_entry());
        }
    }
}

/// Any stream reads the same whatever the reads' sizes; an unmutated one gives back exactly its
/// entries (a MESSAGE past the limit: skipped, its cursor kept).
#[test]
fn fuzz_journal_export_reads_entries_whole_at_any_read_size() {
    fuzz("journal_export", 400, export_case(), |c| {
        let clean = export_bytes(&c);
        let (got, open) = read_export(&clean, c.chunk, c.max);
        prop_assert!(!open);
        prop_assert_eq!(got.len(), c.messages.len());
        for (i, ((m, _), g)) in c.messages.iter().zip(&got).enumerate() {
            let cursor = format!("c{i}").into_bytes();
            match g {
                Ok(e) => {
                    prop_assert!(m.0.len() <= c.max);
                    prop_assert_eq!(&e.cursor, &cursor);
                    prop_assert_eq!(e.message.as_deref(), Some(&m.0[..]));
                    prop_assert_eq!(e.realtime_s(), Some(i as f64 / 1e6));
                }
                Err(e) => {
                    prop_assert!(m.0.len() > c.max, "entry {} broken", i);
                    prop_assert_eq!(&e.cursor, &cursor);
                }
            }
        }
        let mut bad = clean;
        for m in &c.mutations {
            apply_mutation(&mut bad, m);
        }
        let whole = read_export(&bad, usize::MAX, c.max);
        prop_assert_eq!(read_export(&bad, c.chunk, c.max), whole);
        Ok(())
    });
}
