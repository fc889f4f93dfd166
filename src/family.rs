//! The exposition data model every collector produces: metric families of labelled samples.
//! The exporters (HTTP, push) encode these; nothing here knows where values come from.

/// Prometheus metric type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Goes up and down.
    Gauge,
    /// Only goes up (resets on restart).
    Counter,
    /// Observations counted into fixed buckets, with their sum and count (Prometheus' classic
    /// histogram: `_bucket{le}`, `_sum`, `_count`). Its series are in [`Family::histograms`].
    Histogram,
}

/// Whether our metrics carry a label named `name` (the rank labels end in `_rank`, the sizes in
/// `_size`): a label added to every series (`--push.label`, `backfill --label`) must not be one
/// of them, or a series would carry the name twice (OpenMetrics and the Pushgateway refuse it).
pub fn is_exported_label(name: &str) -> bool {
    const OURS: &[&str] = &[
        "server",
        "engine",
        "namespace",
        "pod",
        "container",
        "model_name",
        "engine_type",
        "method",
        "path",
        "status",
        "endpoint",
        "status_code",
        "is_streaming",
        "cache_source",
        "le",
        "source",
        "kind",
        "field",
        "version",
        "revision",
        "unit",
        "gpu",
        "uuid",
        "name",
        "pci_bus_id",
        "driver_version",
        "pid",
        "call",
        "label",
        "cap",
        "url",
        "from",
        "router",
        "worker",
    ];
    OURS.contains(&name) || name.ends_with("_rank") || name.ends_with("_size")
}

/// Label pairs of one sample, in output order.
pub type Labels = Vec<(&'static str, String)>;

/// One series of a histogram family: the state of its buckets, as Prometheus exposes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Upper bounds of the buckets (the `le` values), strictly increasing, without the implied
    /// `+Inf` bucket. Fixed per family (upstream's default boundaries).
    pub bounds: &'static [f64],
    /// Cumulative counts: `cumulative[i]` observations were `<= bounds[i]`. Same length as
    /// `bounds`; non-decreasing.
    pub cumulative: Vec<u64>,
    /// Sum of every observed value (the `_sum` sample), in the family's unit.
    pub sum: f64,
    /// Number of observations (the `_count` sample, and the `+Inf` bucket).
    pub count: u64,
}

/// How a bucket bound is written as the `le` label value: the way the `prometheus` crate's text
/// encoder writes it (`0.1`, `1`, `1000000`, `+Inf`), so the `/metrics` exposition, the
/// Pushgateway push and the OpenMetrics of `backfill` store the same `le` strings. Readers
/// compare `le` numerically (SGLang's prometheus_client writes `1.0` and `1e+06`).
pub fn le_value(bound: f64) -> String {
    if bound == f64::INFINITY {
        "+Inf".to_string()
    } else {
        bound.to_string()
    }
}

/// Appends `value` to `out` as a label value is written between its quotes, in the text format
/// and in OpenMetrics alike: `\`, `"` and newlines escaped.
pub fn push_label_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// One metric family: name, HELP sentence, type and samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Metric name, e.g. `sglang:token_usage` (a histogram's base name, without `_bucket`).
    pub name: String,
    /// One sentence naming the meaning and unit.
    pub help: String,
    /// Gauge, counter or histogram.
    pub kind: Kind,
    /// Samples of a gauge or counter: labels and value (empty for a histogram).
    pub samples: Vec<(Labels, f64)>,
    /// Series of a histogram: labels (without `le`) and buckets (empty for other kinds).
    pub histograms: Vec<(Labels, Histogram)>,
}

impl Family {
    /// An empty family.
    pub fn new(name: impl Into<String>, help: impl Into<String>, kind: Kind) -> Family {
        Family {
            name: name.into(),
            help: help.into(),
            kind,
            samples: Vec::new(),
            histograms: Vec::new(),
        }
    }

    /// Adds a sample; returns `self` for chaining.
    pub fn with(mut self, labels: Labels, value: f64) -> Family {
        self.samples.push((labels, value));
        self
    }

    /// Adds a sample.
    pub fn push(&mut self, labels: Labels, value: f64) {
        self.samples.push((labels, value));
    }

    /// Adds a histogram series.
    pub fn push_histogram(&mut self, labels: Labels, h: Histogram) {
        self.histograms.push((labels, h));
    }

    /// Whether the family has no sample and no histogram series (it is then not exposed).
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty() && self.histograms.is_empty()
    }
}
