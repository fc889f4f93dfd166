//! OpenMetrics text with timestamps, for `promtool tsdb create-blocks-from openmetrics`.
//!
//! Samples are collected first and written at the end, because the format wants every sample of
//! a family in one block and `promtool` wants each series in time order. Of several samples of a
//! series at one time only the last is kept (already when added, so a burst of lines within one
//! second of the log costs one sample). Histograms are written point by point: at each time,
//! the `_bucket` samples (`le` as [`crate::family::le_value`] writes it, then `+Inf`), `_count`
//! and `_sum`.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::family::{le_value, Histogram, Kind, Labels};

#[derive(Debug)]
struct FamilyData {
    help: String,
    kind: Kind,
    /// Rendered label set (`{a="b"}` or empty) → (Unix seconds, value).
    series: BTreeMap<String, Vec<(f64, f64)>>,
    /// Of a histogram family: rendered label set (without `le`) → (Unix seconds, state).
    histograms: BTreeMap<String, Vec<(f64, Histogram)>>,
}

impl FamilyData {
    fn new(help: &str, kind: Kind) -> FamilyData {
        FamilyData {
            help: help.to_string(),
            kind,
            series: BTreeMap::new(),
            histograms: BTreeMap::new(),
        }
    }
}

/// Appends `(ts, v)` to a series, replacing its last point when that has the same time.
fn push_point<T>(points: &mut Vec<(f64, T)>, ts: f64, v: T) {
    match points.last_mut() {
        Some(last) if last.0 == ts => last.1 = v,
        _ => points.push((ts, v)),
    }
}

/// Samples a histogram point is written as: its buckets, `+Inf`, `_count` and `_sum`.
fn histogram_samples(h: &Histogram) -> u64 {
    h.bounds.len() as u64 + 3
}

/// Timestamped samples grouped by family and series.
#[derive(Debug, Default)]
pub struct OpenMetrics {
    families: BTreeMap<String, FamilyData>,
    samples: u64,
}

impl OpenMetrics {
    /// An empty collection.
    pub fn new() -> OpenMetrics {
        OpenMetrics::default()
    }

    /// Samples added so far.
    pub fn len(&self) -> u64 {
        self.samples
    }

    /// Whether no sample was added.
    pub fn is_empty(&self) -> bool {
        self.samples == 0
    }

    /// Adds one sample of family `name` at `ts` (Unix seconds). NaN and infinite values are
    /// skipped (SGLang never prints them; a state value that is unset is NaN).
    pub fn add(&mut self, name: &str, help: &str, kind: Kind, labels: &Labels, ts: f64, v: f64) {
        self.add_rendered(name, help, kind, &render_labels(labels), ts, v);
    }

    /// As [`OpenMetrics::add`], with labels already rendered by [`render_labels`] (so a caller
    /// adding many families for one label set renders it once).
    pub fn add_rendered(
        &mut self,
        name: &str,
        help: &str,
        kind: Kind,
        labels: &str,
        ts: f64,
        v: f64,
    ) {
        if !v.is_finite() || !ts.is_finite() {
            return;
        }
        let fam = self.family(name, help, kind);
        match fam.series.get_mut(labels) {
            Some(s) => push_point(s, ts, v),
            None => {
                fam.series.insert(labels.to_string(), vec![(ts, v)]);
            }
        }
        self.samples += 1;
    }

    /// Adds one point of histogram family `name` (its base name, without `_bucket`) at `ts`,
    /// with labels rendered by [`render_labels`] (without `le`). A point whose sum is not
    /// finite is skipped.
    pub fn add_histogram(&mut self, name: &str, help: &str, labels: &str, ts: f64, h: Histogram) {
        if !h.sum.is_finite() || !ts.is_finite() {
            return;
        }
        self.samples += histogram_samples(&h);
        let fam = self.family(name, help, Kind::Histogram);
        match fam.histograms.get_mut(labels) {
            Some(s) => push_point(s, ts, h),
            None => {
                fam.histograms.insert(labels.to_string(), vec![(ts, h)]);
            }
        }
    }

    fn family(&mut self, name: &str, help: &str, kind: Kind) -> &mut FamilyData {
        if !self.families.contains_key(name) {
            self.families
                .insert(name.to_string(), FamilyData::new(help, kind));
        }
        self.families
            .get_mut(name)
            .expect("the family was just inserted")
    }

    /// Samples with a timestamp after `t` (Unix seconds).
    pub fn count_after(&self, t: f64) -> u64 {
        let plain = self
            .families
            .values()
            .flat_map(|f| f.series.values().flatten())
            .filter(|(ts, _)| *ts > t)
            .count() as u64;
        let hist: u64 = self
            .families
            .values()
            .flat_map(|f| f.histograms.values().flatten())
            .filter(|(ts, _)| *ts > t)
            .map(|(_, h)| histogram_samples(h))
            .sum();
        plain + hist
    }

    /// Writes every family, each series in time order (of samples with the same timestamp the
    /// last one added is kept), then `# EOF`. Returns the number of samples written.
    ///
    /// # Errors
    /// An error of the writer.
    pub fn write<W: Write>(&mut self, w: &mut W) -> io::Result<u64> {
        let mut written = 0;
        for (name, fam) in &mut self.families {
            // OpenMetrics names a counter family without its `_total` suffix.
            let (fname, kind) = match fam.kind {
                Kind::Counter => match name.strip_suffix("_total") {
                    Some(base) => (base, "counter"),
                    None => (name.as_str(), "unknown"),
                },
                Kind::Gauge => (name.as_str(), "gauge"),
                Kind::Histogram => (name.as_str(), "histogram"),
            };
            let help = super::format::help_text(&fam.help, true);
            writeln!(w, "# HELP {fname} {help}")?;
            writeln!(w, "# TYPE {fname} {kind}")?;
            for (labels, samples) in &mut fam.series {
                // Stable: equal timestamps keep insertion order, and the last one wins below.
                samples.sort_by(|a, b| a.0.total_cmp(&b.0));
                for (i, (ts, v)) in samples.iter().enumerate() {
                    if samples.get(i + 1).is_some_and(|n| n.0 == *ts) {
                        continue;
                    }
                    writeln!(w, "{name}{labels} {v} {}", format_ts(*ts))?;
                    written += 1;
                }
            }
            for (labels, points) in &mut fam.histograms {
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                for (i, (ts, h)) in points.iter().enumerate() {
                    if points.get(i + 1).is_some_and(|n| n.0 == *ts) {
                        continue;
                    }
                    written += write_histogram(w, name, labels, &format_ts(*ts), h)?;
                }
            }
        }
        writeln!(w, "# EOF")?;
        Ok(written)
    }
}

/// Writes one histogram point: `_bucket` per bound and `+Inf`, `_count`, `_sum`. Returns the
/// number of samples written.
fn write_histogram<W: Write>(
    w: &mut W,
    name: &str,
    labels: &str,
    ts: &str,
    h: &Histogram,
) -> io::Result<u64> {
    let buckets = h
        .bounds
        .iter()
        .zip(&h.cumulative)
        .map(|(&b, &c)| (b, c))
        .chain([(f64::INFINITY, h.count)]);
    for (b, c) in buckets {
        let l = with_label(labels, "le", &le_value(b));
        writeln!(w, "{name}_bucket{l} {c} {ts}")?;
    }
    writeln!(w, "{name}_count{labels} {} {ts}", h.count)?;
    writeln!(w, "{name}_sum{labels} {} {ts}", h.sum)?;
    Ok(histogram_samples(h))
}

/// Rendered labels with one more pair (`k="v"`, `v` needing no escapes) at the end.
fn with_label(labels: &str, k: &str, v: &str) -> String {
    match labels.strip_suffix('}') {
        Some(open) => format!("{open},{k}=\"{v}\"}}"),
        None => format!("{{{k}=\"{v}\"}}"),
    }
}

/// Seconds with at most millisecond precision (what SGLang and journald-in-ms carry).
fn format_ts(ts: f64) -> String {
    let ms = (ts * 1000.0).round() as i64;
    if ms % 1000 == 0 {
        format!("{}", ms / 1000)
    } else {
        let s = format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
        s.trim_end_matches('0').to_string()
    }
}

/// `{a="b",c="d"}` with OpenMetrics escaping; empty for no labels.
pub fn render_labels(labels: &Labels) -> String {
    if labels.is_empty() {
        return String::new();
    }
    let mut s = String::from("{");
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(k);
        s.push_str("=\"");
        crate::family::push_label_value(&mut s, v);
        s.push('"');
    }
    s.push('}');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_in_blocks_series_in_time_order() {
        let mut om = OpenMetrics::new();
        let l = |r: &str| vec![("tp_rank", r.to_string())];
        om.add("a_total", "A.", Kind::Counter, &l("1"), 20.0, 2.0);
        // A pattern file's help may hold `\`, a newline and `"`: all three escaped.
        om.add("g", "G \\ \"x\"\n", Kind::Gauge, &l("0"), 10.5, 0.25);
        om.add("a_total", "A.", Kind::Counter, &l("0"), 10.0, 1.0);
        om.add("a_total", "A.", Kind::Counter, &l("1"), 10.0, 1.0);
        om.add("a_total", "A.", Kind::Counter, &l("1"), 20.0, 3.0);
        let mut out = Vec::new();
        assert_eq!(om.write(&mut out).unwrap(), 4);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "# HELP a A.\n# TYPE a counter\n\
             a_total{tp_rank=\"0\"} 1 10\n\
             a_total{tp_rank=\"1\"} 1 10\n\
             a_total{tp_rank=\"1\"} 3 20\n\
             # HELP g G \\\\ \\\"x\\\"\\n\n# TYPE g gauge\n\
             g{tp_rank=\"0\"} 0.25 10.5\n# EOF\n"
        );
    }

    #[test]
    fn histogram_points_with_le_last() {
        static BOUNDS: [f64; 2] = [0.5, 1000000.0];
        let h = |c: [u64; 2], n, sum| Histogram {
            bounds: &BOUNDS,
            cumulative: c.to_vec(),
            sum,
            count: n,
        };
        let mut om = OpenMetrics::new();
        let l = render_labels(&vec![("server", "s".to_string())]);
        om.add_histogram("x_seconds", "X.", &l, 20.0, h([1, 2], 3, 7.5));
        om.add_histogram("x_seconds", "X.", &l, 10.0, h([0, 0], 1, 2e6));
        // Same time as the previous point: replaces it.
        om.add_histogram("x_seconds", "X.", &l, 10.0, h([1, 1], 1, 0.25));
        om.add_histogram("x_seconds", "X.", "", 10.0, h([0, 0], 0, 0.0));
        assert_eq!(om.len(), 20);
        let mut out = Vec::new();
        assert_eq!(om.write(&mut out).unwrap(), 15);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "# HELP x_seconds X.\n# TYPE x_seconds histogram\n\
             x_seconds_bucket{le=\"0.5\"} 0 10\n\
             x_seconds_bucket{le=\"1000000\"} 0 10\n\
             x_seconds_bucket{le=\"+Inf\"} 0 10\n\
             x_seconds_count 0 10\n\
             x_seconds_sum 0 10\n\
             x_seconds_bucket{server=\"s\",le=\"0.5\"} 1 10\n\
             x_seconds_bucket{server=\"s\",le=\"1000000\"} 1 10\n\
             x_seconds_bucket{server=\"s\",le=\"+Inf\"} 1 10\n\
             x_seconds_count{server=\"s\"} 1 10\n\
             x_seconds_sum{server=\"s\"} 0.25 10\n\
             x_seconds_bucket{server=\"s\",le=\"0.5\"} 1 20\n\
             x_seconds_bucket{server=\"s\",le=\"1000000\"} 2 20\n\
             x_seconds_bucket{server=\"s\",le=\"+Inf\"} 3 20\n\
             x_seconds_count{server=\"s\"} 3 20\n\
             x_seconds_sum{server=\"s\"} 7.5 20\n# EOF\n"
        );
    }

    #[test]
    fn timestamps() {
        assert_eq!(format_ts(1780480821.345), "1780480821.345");
        assert_eq!(format_ts(1780480821.0), "1780480821");
        assert_eq!(format_ts(1780480821.5), "1780480821.5");
    }
}
