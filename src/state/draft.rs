//! Startup figures of a speculative-decoding draft model, kept apart from the target's.
//!
//! With EAGLE, MTP or other draft models, each scheduler rank runs a second model runner after
//! the target's, which prints its own `Load weight end. ... mem usage=X GB` and, before v0.5.17,
//! its own `KV Cache is allocated. ...` in the target's very words (`model_executor/
//! model_runner.py`, `mem_cache/memory_pool.py`, called from `speculative/eagle_worker.py`).
//! Lines that name the draft (`Capture draft ... graph end`, `draft KV Cache is allocated`)
//! have kinds of their own in the pattern file; the ones that do not are told apart by order:
//! the target's comes first, and both come before the server serves.
//!
//! "Before the server serves" is judged on the whole server, not the rank: only some ranks
//! print stats lines (TP rank 0 of each scheduler group), yet every rank of a process that has
//! served is past its start-up. So each target figure remembers the server's count of stats
//! lines when it was written; the same words again at the same count are the draft's, at a
//! later count a new process's (a restart whose `server_args` line was not seen), which also
//! drops the old process's draft figure.

use std::borrow::Cow;

use super::RankState;
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

    /// Every metric of startup line `rec` on `rank` routed to the target's metric or the
    /// draft's, decided for the whole line before any of its values is written. `stats` is the
    /// server's count of stats lines so far; `no_draft`: the server is known to run without a
    /// draft model (`speculative_algorithm=None`). Notes on the rank which target figures this
    /// line wrote, and drops a draft figure whose target the line writes anew after serving.
    pub fn route_line<'a>(
        &self,
        rec: &Record<'a>,
        rank: &mut RankState,
        stats: u64,
        no_draft: bool,
    ) -> Routed<'a> {
        if rank.startup_marks.len() < self.0.len() {
            rank.startup_marks.resize(self.0.len(), None);
        }
        let route = |id: MetricId| match self.decide(id, rank, stats, no_draft) {
            Some((i, true)) => self.0[i].1,
            _ => id,
        };
        let routed = Routed {
            values: rec.values.iter().map(|&(id, v)| (route(id), v)).collect(),
            bad: rec.bad_metrics.iter().map(|&id| route(id)).collect(),
        };
        for &(id, _) in rec.values {
            if let Some((i, false)) = self.decide(id, rank, stats, no_draft) {
                if rank.startup_marks[i] != Some(stats) {
                    // A new process's target figure: the old process's draft is not this one's.
                    rank.values[self.0[i].1 as usize] = f64::NAN;
                }
                rank.startup_marks[i] = Some(stats);
            }
        }
        routed
    }

    /// The twin index of `id` and whether its value goes to the draft: the rank holds the
    /// target's figure, written at this same count of the server's stats lines.
    fn decide(
        &self,
        id: MetricId,
        rank: &RankState,
        stats: u64,
        no_draft: bool,
    ) -> Option<(usize, bool)> {
        let i = self.0.iter().position(|&(t, _)| t == id)?;
        let (t, _) = self.0[i];
        let fresh = rank.startup_marks[i] == Some(stats);
        Some((i, fresh && !no_draft && !rank.values[t as usize].is_nan()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::Parser;
    use std::sync::Arc;

    #[test]
    fn the_second_figure_before_serving_is_the_drafts() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let tw = DraftTwins::of(&pat);
        let mut p = Parser::new(pat.clone());
        let w = pat.metric_by_id("weight_memory_bytes").unwrap();
        let dw = pat.metric_by_id("draft_weight_memory_bytes").unwrap();
        let mut rank = RankState::new(pat.metrics.len());
        let gib = 1073741824.0;
        let mut apply = |rank: &mut RankState, gb: &str, stats: u64, no_draft: bool| {
            let line = format!("[2026-11-12 09:01:00 TP1] Load weight end. type=M, avail mem=40.00 GB, mem usage={gb} GB.");
            let rec = p.parse(&line).unwrap();
            let r = tw.route_line(&rec, rank, stats, no_draft);
            for &(id, v) in r.values.iter() {
                rank.values[id as usize] = v;
            }
            r.values.iter().map(|&(id, _)| id).collect::<Vec<_>>()
        };
        assert_eq!(apply(&mut rank, "94.00", 0, false), [w]);
        assert_eq!(apply(&mut rank, "-1.86", 0, false), [dw]);
        assert_eq!(rank.values[dw as usize], -1.86 * gib);
        // The server served (another rank's stats lines): the same words are a new process's
        // target figure, and the old draft figure goes.
        assert_eq!(apply(&mut rank, "80.00", 5, false), [w]);
        assert!(rank.values[dw as usize].is_nan());
        assert_eq!(rank.values[w as usize], 80.0 * gib);
        // Known to run without a draft: the target's again.
        assert_eq!(apply(&mut rank, "81.00", 5, true), [w]);
    }
}
