//! Which metrics one line printed, as bit sets: the derivations and defaults ask "does the line
//! print X" a dozen times per statistics line, and a bit test answers where a search of the
//! line's values would.

use crate::parse::patterns::MetricId;
use crate::record::Record;

/// Metric ids a bit set covers; a pattern file with more metrics answers from the record.
const COVERED: usize = 256;

/// A record with bit sets of the metrics it has a value for and an unreadable value for.
pub(super) struct Printed<'r, 'a> {
    rec: &'r Record<'a>,
    has: [u64; COVERED / 64],
    bad: [u64; COVERED / 64],
}

fn bit(set: &[u64; COVERED / 64], id: MetricId) -> Option<bool> {
    let i = usize::from(id);
    (i < COVERED).then(|| set[i / 64] & 1 << (i % 64) != 0)
}

fn put(set: &mut [u64; COVERED / 64], id: MetricId) {
    let i = usize::from(id);
    if i < COVERED {
        set[i / 64] |= 1 << (i % 64);
    }
}

impl<'r, 'a> Printed<'r, 'a> {
    pub(super) fn of(rec: &'r Record<'a>) -> Self {
        let mut p = Printed {
            rec,
            has: [0; COVERED / 64],
            bad: [0; COVERED / 64],
        };
        for &(id, _) in rec.values {
            put(&mut p.has, id);
        }
        for &id in rec.bad_metrics {
            put(&mut p.bad, id);
        }
        p
    }

    /// The line's value of `id` ([`Record::get`]).
    pub(super) fn get(&self, id: MetricId) -> Option<f64> {
        match bit(&self.has, id) {
            Some(false) => None,
            _ => self.rec.get(id),
        }
    }

    /// Whether the line printed `id` with an unreadable value.
    pub(super) fn unreadable(&self, id: MetricId) -> bool {
        bit(&self.bad, id).unwrap_or_else(|| self.rec.bad_metrics.contains(&id))
    }
}
