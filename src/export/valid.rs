//! The one rule every exposition keeps: no two samples of one series, and each family's HELP
//! and TYPE once. Prometheus keeps one of two samples of a series at random, or refuses the
//! second as a duplicate sample, and `promtool check metrics` does not notice: a silently wrong
//! dashboard. Every family list a scrape, a push, `--once`, `top` and the live page show goes
//! through [`enforce`] ([`crate::export::metrics::families`]); [`check`] (families) and
//! [`check_text`] (an encoded exposition, text 0.0.4 or OpenMetrics with timestamps, as
//! `backfill` writes) are what the tests and the fuzzer assert.
//!
//! [`enforce`] stays on in release builds: it costs one hash of each sample's label set per
//! rendering (the encoding costs more), and a repeat it finds is withheld whole (each copy:
//! which one is right is not known, and a wrong number is worse than none), counted in
//! `sglang_log_exporter_exposition_samples_withheld_total` and logged once.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::family::{Family, Kind, Labels};

/// Samples withheld by [`enforce`] since the process started (every rendering counts its own).
static WITHHELD: AtomicU64 = AtomicU64::new(0);
/// Whether [`enforce`] logged its error yet.
static WARNED: AtomicBool = AtomicBool::new(false);

/// Samples [`enforce`] withheld since the process started.
pub fn withheld() -> u64 {
    WITHHELD.load(Ordering::Relaxed)
}

/// Label pairs as owned strings (a series key kept past its labels, or read from text).
type Pairs = Vec<(String, String)>;

/// A sample's label set as a series key: sorted by label name (the order does not tell series
/// apart).
fn series_key(labels: &Labels) -> Vec<(&str, &str)> {
    let mut k: Vec<(&str, &str)> = labels.iter().map(|(n, v)| (*n, v.as_str())).collect();
    k.sort_unstable();
    k
}

/// The names a family's samples are written under: a histogram's `_bucket`, `_sum` and
/// `_count`, a counter's name (the text encoder writes it as it is).
fn sample_names(f: &Family) -> Vec<String> {
    match f.kind {
        Kind::Histogram => ["_bucket", "_sum", "_count"]
            .iter()
            .map(|s| format!("{}{s}", f.name))
            .collect(),
        _ => vec![f.name.clone()],
    }
}

/// What breaks the rule in `families` (empty when nothing): a family name given twice (HELP and
/// TYPE twice), a name one family's samples share with another's, a label named twice in a
/// sample, `le` on a histogram series, and a label set given twice in one family (two samples
/// of one series). Empty families are not exposed and not checked.
pub fn check(families: &[Family]) -> Vec<String> {
    let mut out = Vec::new();
    let mut names: HashMap<String, &str> = HashMap::new();
    for f in families.iter().filter(|f| !f.is_empty()) {
        let mut own = sample_names(f);
        if !own.contains(&f.name) {
            own.push(f.name.clone());
        }
        for n in own {
            if let Some(other) = names.insert(n.clone(), &f.name) {
                out.push(format!(
                    "{n}: written by family {other} and again by {}",
                    f.name
                ));
            }
        }
        let mut seen = HashSet::new();
        let series = f
            .samples
            .iter()
            .map(|(l, _)| l)
            .chain(f.histograms.iter().map(|(l, _)| l));
        for labels in series {
            let key = series_key(labels);
            if key.windows(2).any(|w| w[0].0 == w[1].0) {
                out.push(format!("{}{labels:?}: a label named twice", f.name));
            }
            if f.kind == Kind::Histogram && key.iter().any(|(n, _)| *n == "le") {
                out.push(format!("{}{labels:?}: `le` on a histogram series", f.name));
            }
            if !seen.insert(key) {
                out.push(format!("{}{labels:?}: two samples of one series", f.name));
            }
        }
    }
    out
}

/// Makes `families` keep the rule: a family named again is merged into the first of its name
/// where the type is the same (HELP and TYPE once), else withheld; every sample of a series
/// given more than once is withheld (each copy). Returns the samples withheld, which are also
/// counted in [`withheld`] and logged once.
pub fn enforce(families: &mut Vec<Family>) -> u64 {
    let mut dropped = 0u64;
    // Same name: merged, or withheld when the type differs.
    let mut first: HashMap<String, usize> = HashMap::new();
    let mut i = 0;
    while i < families.len() {
        match first.get(&families[i].name).copied() {
            None => {
                first.insert(families[i].name.clone(), i);
                i += 1;
            }
            Some(j) => {
                let f = families.remove(i);
                if families[j].kind == f.kind {
                    families[j].samples.extend(f.samples);
                    families[j].histograms.extend(f.histograms);
                } else {
                    dropped += (f.samples.len() + f.histograms.len()) as u64;
                }
            }
        }
    }
    for f in families.iter_mut() {
        dropped += withhold_repeats(&mut f.samples);
        dropped += withhold_repeats(&mut f.histograms);
    }
    count_withheld(dropped);
    dropped
}

/// Counts `n` samples withheld (in [`withheld`]), logged once: by [`enforce`], and by an encoding
/// whose names style two families into one name ([`crate::export::metrics::encode`]).
pub fn count_withheld(n: u64) {
    if n == 0 {
        return;
    }
    WITHHELD.fetch_add(n, Ordering::Relaxed);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::error!(
            samples = n,
            "an exposition held two samples of one series; each copy is withheld \
             (sglang_log_exporter_exposition_samples_withheld_total); please report the input"
        );
    }
}

/// Removes every entry whose label set repeats (sorted by name), or that names a label twice;
/// the number removed.
fn withhold_repeats<T>(series: &mut Vec<(Labels, T)>) -> u64 {
    let bad: Vec<bool> = {
        let keys: Vec<Vec<(&str, &str)>> = series.iter().map(|(l, _)| series_key(l)).collect();
        let mut count: HashMap<&[(&str, &str)], u32> = HashMap::with_capacity(keys.len());
        for k in &keys {
            *count.entry(k.as_slice()).or_insert(0) += 1;
        }
        keys.iter()
            .map(|k| count[k.as_slice()] > 1 || k.windows(2).any(|w| w[0].0 == w[1].0))
            .collect()
    };
    if !bad.contains(&true) {
        return 0;
    }
    let before = series.len();
    let mut i = 0;
    series.retain(|_| {
        i += 1;
        !bad[i - 1]
    });
    (before - series.len()) as u64
}

/// What an encoded exposition holds, by [`check_text`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TextCount {
    /// Families (TYPE lines).
    pub families: usize,
    /// Distinct series (name and label set).
    pub series: usize,
    /// Sample lines.
    pub samples: usize,
}

/// Whether a HELP text is escaped: every `\` starts `\\` or `\n` (in OpenMetrics also `\"`),
/// and in OpenMetrics no `"` stands bare (its HELP is an escaped string).
fn help_escaped(help: &str, openmetrics: bool) -> bool {
    let mut chars = help.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\\' | 'n') => {}
                Some('"') if openmetrics => {}
                _ => return false,
            },
            '"' if openmetrics => return false,
            _ => {}
        }
    }
    true
}

/// Checks an encoded exposition (text 0.0.4, or OpenMetrics with timestamps as `backfill`
/// writes; OpenMetrics ends with `# EOF`): each family's HELP at most once, its text escaped
/// as the format wants, HELP and TYPE before the family's samples, a family's samples
/// together (not split by another family), and no series twice, or, with timestamps, no series
/// twice at one time and each series in time order. Returns what it holds, or every fault.
///
/// # Errors
/// Each fault found, as a sentence naming the line.
pub fn check_text(text: &str) -> Result<TextCount, Vec<String>> {
    let mut faults = Vec::new();
    let mut help = HashSet::new();
    let mut typed: HashMap<String, String> = HashMap::new();
    let mut done: HashSet<String> = HashSet::new();
    let mut current: Option<String> = None;
    // Series → last timestamp (None without one).
    let mut series: HashMap<(String, Pairs), Option<f64>> = HashMap::new();
    let mut count = TextCount::default();
    let mut open = |fam: &str, current: &mut Option<String>, faults: &mut Vec<String>, n: usize| {
        if current.as_deref() != Some(fam) {
            if let Some(c) = current.take() {
                done.insert(c);
            }
            if done.contains(fam) {
                faults.push(format!("line {n}: family {fam} split by another family"));
            }
            *current = Some(fam.to_string());
        }
    };
    let openmetrics = text.trim_end_matches('\n').ends_with("# EOF");
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.is_empty() || line == "# EOF" {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or("");
            if !help.insert(name.to_string()) {
                faults.push(format!("line {n}: HELP of {name} twice"));
            }
            let said = rest.split_once(' ').map_or("", |(_, h)| h);
            if !help_escaped(said, openmetrics) {
                faults.push(format!("line {n}: HELP of {name} not escaped: {said}"));
            }
            open(name, &mut current, &mut faults, n);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut p = rest.split(' ');
            let (name, kind) = (p.next().unwrap_or(""), p.next().unwrap_or(""));
            if typed.insert(name.to_string(), kind.to_string()).is_some() {
                faults.push(format!("line {n}: TYPE of {name} twice"));
            }
            count.families += 1;
            open(name, &mut current, &mut faults, n);
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let Some((name, labels, rest)) = split_sample(line) else {
            faults.push(format!("line {n}: not a sample: {line}"));
            continue;
        };
        count.samples += 1;
        let fam = family_of(&name, &typed);
        open(&fam, &mut current, &mut faults, n);
        let mut words = rest.split_whitespace();
        let _value = words.next();
        let ts = words.next().and_then(|t| t.parse::<f64>().ok());
        let mut key = labels;
        key.sort();
        if key.windows(2).any(|w| w[0].0 == w[1].0) {
            faults.push(format!("line {n}: a label named twice: {line}"));
        }
        match series.insert((name.clone(), key), ts) {
            None => count.series += 1,
            Some(prev) => match (prev, ts) {
                (Some(a), Some(b)) if b > a => {}
                (Some(_), Some(_)) => faults.push(format!(
                    "line {n}: series again at or before its last time: {line}"
                )),
                _ => faults.push(format!("line {n}: two samples of one series: {line}")),
            },
        }
    }
    if faults.is_empty() {
        Ok(count)
    } else {
        Err(faults)
    }
}

/// The family a sample name belongs to: itself where typed, else its base before a suffix a
/// histogram, summary or counter adds.
fn family_of(name: &str, typed: &HashMap<String, String>) -> String {
    if typed.contains_key(name) {
        return name.to_string();
    }
    for s in ["_bucket", "_sum", "_count", "_total", "_created"] {
        if let Some(base) = name.strip_suffix(s) {
            if typed.contains_key(base) {
                return base.to_string();
            }
        }
    }
    name.to_string()
}

/// A sample line's name, label pairs (values as written, escapes kept) and the rest (value and
/// timestamp); `None` when it is not one.
fn split_sample(line: &str) -> Option<(String, Pairs, &str)> {
    let end = line.find(['{', ' '])?;
    let name = line[..end].to_string();
    if name.is_empty() {
        return None;
    }
    let mut labels = Vec::new();
    let b = line.as_bytes();
    if b[end] == b' ' {
        return Some((name, labels, &line[end + 1..]));
    }
    let mut i = end + 1;
    loop {
        while i < b.len() && (b[i] == b',' || b[i] == b' ') {
            i += 1;
        }
        if *b.get(i)? == b'}' {
            return Some((name, labels, line.get(i + 1..)?.trim_start()));
        }
        let eq = i + line[i..].find('=')?;
        let key = line[i..eq].to_string();
        if b.get(eq + 1) != Some(&b'"') {
            return None;
        }
        let mut j = eq + 2;
        while *b.get(j)? != b'"' {
            j += if b[j] == b'\\' { 2 } else { 1 };
        }
        labels.push((key, line[eq + 2..j].to_string()));
        i = j + 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(v: &str) -> Labels {
        vec![("server", "s".to_string()), ("tp_rank", v.to_string())]
    }

    #[test]
    fn a_repeated_series_is_found_and_each_copy_withheld() {
        let f = Family::new("g", "h", Kind::Gauge)
            .with(l("0"), 1.0)
            .with(l("1"), 2.0)
            .with(vec![("tp_rank", "0".into()), ("server", "s".into())], 3.0);
        let mut fams = vec![f, Family::new("g", "h", Kind::Gauge).with(l("2"), 4.0)];
        let faults = check(&fams);
        assert_eq!(faults.len(), 2, "{faults:?}");
        assert!(
            faults[0].contains("two samples of one series"),
            "{faults:?}"
        );
        assert!(faults[1].contains("again by g"), "{faults:?}");
        assert_eq!(enforce(&mut fams), 2);
        assert_eq!(fams.len(), 1);
        assert_eq!(fams[0].samples, vec![(l("1"), 2.0), (l("2"), 4.0)]);
        assert!(check(&fams).is_empty());
        assert!(withheld() >= 2);
    }

    #[test]
    fn help_escapes_are_checked_as_each_format_wants() {
        let text = |help: &str, eof: &str| format!("# HELP g {help}\n# TYPE g gauge\ng 1\n{eof}");
        for (help, prom_ok, om_ok) in [
            ("plain words", true, true),
            ("a \\\\ b \\n c", true, true),
            ("said \"x\"", true, false),
            ("said \\\"x\\\"", false, true),
            ("trailing \\", false, false),
            ("a \\t tab", false, false),
        ] {
            assert_eq!(check_text(&text(help, "")).is_ok(), prom_ok, "text: {help}");
            assert_eq!(
                check_text(&text(help, "# EOF\n")).is_ok(),
                om_ok,
                "OpenMetrics: {help}"
            );
        }
    }

    #[test]
    fn text_faults_are_each_named() {
        let ok =
            "# HELP a_total x\n# TYPE a_total counter\na_total{tp_rank=\"0\",m=\"a\\\"}\"} 1\n\
                  a_total{m=\"a\\\"}\",tp_rank=\"1\"} 2\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\n\
                  h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n";
        assert_eq!(
            check_text(ok),
            Ok(TextCount {
                families: 2,
                series: 6,
                samples: 6
            })
        );
        let dup = "# TYPE a gauge\na{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 1\n";
        assert_eq!(check_text(dup).unwrap_err().len(), 1);
        let twice = "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n# TYPE a gauge\n";
        let e = check_text(twice).unwrap_err();
        assert_eq!(
            e,
            [
                "line 5: TYPE of a twice",
                "line 5: family a split by another family"
            ]
        );
        // OpenMetrics: a series may repeat at later times only.
        let om = "# TYPE a gauge\na 1 10\na 2 11\na 3 11\n# EOF\n";
        let e = check_text(om).unwrap_err();
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("line 4:"), "{e:?}");
    }
}
