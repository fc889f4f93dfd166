//! Startup figures of a speculative-decoding draft model, kept apart from the target's.
//!
//! With EAGLE, MTP or other draft models, each scheduler rank runs a second model runner after
//! the target's, which prints its own `Load weight end. ... mem usage=X GB` and, before v0.5.17,
//! its own `KV Cache is allocated. ...` in the target's very words (`model_executor/
//! model_runner.py`, `mem_cache/memory_pool.py`, called from `speculative/eagle_worker.py`).
//! Lines that name the draft (`Capture draft ... graph end`, `draft KV Cache is allocated`)
//! have kinds of their own in the pattern file; the ones that do not are told apart by order:
//! the target's comes first.

use std::borrow::Cow;

use crate::parse::patterns::{MetricId, Patterns};
use crate::record::Record;

/// A line's values and withdrawn metrics, each under the metric it goes to.
pub struct Routed<'a> {
    /// (metric, value).
    pub values: Cow<'a, [(MetricId, f64)]>,
    /// Metrics withdrawn (unreadable on the line).
    pub bad: Cow<'a, [MetricId]>,
}

impl<'a> Routed<'a> {
    /// The line's own metrics, not copied (every line but startup lines).
    pub fn as_printed(rec: &Record<'a>) -> Routed<'a> {
        Routed {
            values: Cow::Borrowed(rec.values),
            bad: Cow::Borrowed(rec.bad_metrics),
        }
    }
}

/// The target metrics a draft model runner prints again in the same words, each with the
/// draft's own metric.
#[derive(Debug, Clone, Default)]
pub struct DraftTwins(Vec<(MetricId, MetricId)>);

impl DraftTwins {
    /// The pairs the patterns define (a pattern file without the draft metrics has none).
    pub fn of(pat: &Patterns) -> DraftTwins {
        let pairs = [
            ("weight_memory_bytes", "draft_weight_memory_bytes"),
            ("kv_pool_capacity_tokens", "draft_kv_pool_capacity_tokens"),
            ("kv_pool_size_bytes", "draft_kv_pool_size_bytes"),
        ];
        DraftTwins(
            pairs
                .iter()
                .filter_map(|(t, d)| Some((pat.metric_by_id(t)?, pat.metric_by_id(d)?)))
                .collect(),
        )
    }

    /// Every metric of startup line `rec` routed by [`DraftTwins::route`], decided for the whole
    /// line before any of its values is written.
    pub fn route_line<'a>(
        &self,
        rec: &Record<'a>,
        values: &[f64],
        serving: bool,
        no_draft: bool,
    ) -> Routed<'a> {
        let route = |id| self.route(id, values, serving, no_draft);
        Routed {
            values: rec.values.iter().map(|&(id, v)| (route(id), v)).collect(),
            bad: rec.bad_metrics.iter().map(|&id| route(id)).collect(),
        }
    }

    /// Where a startup line's value of `id` goes on a rank whose current values are `values`:
    /// the draft's twin when the rank already holds the target's figure from this process and
    /// has printed no stats line since (the draft's runner starts right after the target's,
    /// before any batch), unless the server is known to run without a draft model. A rank that
    /// prints the target's words again after serving is a new process (its `server_args` line
    /// not seen), and the figure is the target's.
    pub fn route(&self, id: MetricId, values: &[f64], serving: bool, no_draft: bool) -> MetricId {
        if serving || no_draft {
            return id;
        }
        match self.0.iter().find(|(t, _)| *t == id) {
            Some(&(t, d)) if !values[t as usize].is_nan() => d,
            _ => id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_second_figure_of_a_rank_is_the_drafts() {
        let pat = Patterns::embedded().unwrap();
        let tw = DraftTwins::of(&pat);
        let w = pat.metric_by_id("weight_memory_bytes").unwrap();
        let dw = pat.metric_by_id("draft_weight_memory_bytes").unwrap();
        let other = pat.metric_by_id("context_len").unwrap();
        let mut values = vec![f64::NAN; pat.metrics.len()];
        assert_eq!(tw.route(w, &values, false, false), w);
        values[w as usize] = 1.0;
        assert_eq!(tw.route(w, &values, false, false), dw);
        // Serving, or known to have no draft: the target's again.
        assert_eq!(tw.route(w, &values, true, false), w);
        assert_eq!(tw.route(w, &values, false, true), w);
        // A metric without a twin is never moved.
        values[other as usize] = 1.0;
        assert_eq!(tw.route(other, &values, false, false), other);
    }
}
