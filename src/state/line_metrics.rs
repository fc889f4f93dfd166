//! Which metrics one line printed, as bit sets: the derivations and defaults ask "does the line
//! print X" a dozen times per statistics line, and a bit test answers where a search of the
//! line's values would.

use crate::parse::patterns::MetricId;
use crate::record::{MetricSet, Record};

/// A record with the sets of the metrics it has a value for and an unreadable value for.
pub(super) struct LineMetrics<'r, 'a> {
    rec: &'r Record<'a>,
    has: MetricSet,
    bad: MetricSet,
}

impl<'r, 'a> LineMetrics<'r, 'a> {
    pub(super) fn of(rec: &'r Record<'a>) -> Self {
        let mut p = LineMetrics {
            rec,
            has: MetricSet::default(),
            bad: MetricSet::default(),
        };
        for &(id, _) in rec.values {
            p.has.set(id, true);
        }
        for &id in rec.bad_metrics {
            p.bad.set(id, true);
        }
        p
    }

    /// The line's value of `id` ([`Record::get`]).
    pub(super) fn get(&self, id: MetricId) -> Option<f64> {
        match self.has.contains(id) {
            Some(false) => None,
            _ => self.rec.get(id),
        }
    }

    /// Whether the line printed `id` with an unreadable value.
    pub(super) fn unreadable(&self, id: MetricId) -> bool {
        self.bad
            .contains(id)
            .unwrap_or_else(|| self.rec.bad_metrics.contains(&id))
    }
}
