//! The exposition data model every collector produces: metric families of labelled samples.
//! The exporters (HTTP, push) encode these; nothing here knows where values come from.

/// Prometheus metric type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Goes up and down.
    Gauge,
    /// Only goes up (resets on restart).
    Counter,
}

/// Label pairs of one sample, in output order.
pub type Labels = Vec<(&'static str, String)>;

/// One metric family: name, HELP sentence, type and samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Metric name, e.g. `sglang:token_usage`.
    pub name: String,
    /// One sentence naming the meaning and unit.
    pub help: String,
    /// Gauge or counter.
    pub kind: Kind,
    /// Samples: labels and value.
    pub samples: Vec<(Labels, f64)>,
}

impl Family {
    /// An empty family.
    pub fn new(name: impl Into<String>, help: impl Into<String>, kind: Kind) -> Family {
        Family {
            name: name.into(),
            help: help.into(),
            kind,
            samples: Vec::new(),
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
}
