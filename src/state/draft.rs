//! Startup figures of a rank's pools: whose model runner printed them (the target's or a
//! speculative-decoding draft model's) and which pool they describe.
//!
//! With EAGLE, MTP or other draft models, each scheduler rank runs a second model runner after
//! the target's, which prints its own `Load weight end. ... mem usage=X GB` and its own
//! `KV Cache is allocated. ...` in the target's very words (`model_executor/model_runner.py`,
//! `mem_cache/memory_pool.py`, called from `speculative/eagle_worker.py`; no release passes a
//! draft `allocation_label`). Lines that name the draft (`Capture draft ... graph end`,
//! `Post-capture KV sizing: draft KV cache allocated`) have kinds of their own in the pattern
//! file; the ones that do not are told apart by order: each runner loads its weights, then
//! builds its pools, the target's first, and both before the server serves.
//!
//! **Which runner.** A `Load weight end` in the target's words is the draft's when its rank
//! already holds the target's since the server started (see below). Every pool line after a
//! weight line belongs to that weight line's runner: a target may build several pools (a hybrid
//! SWA model's sliding-window and full-attention pools, `mem_cache/swa_memory_pool.py`, each
//! printing its own `KV Cache is allocated` line; a MiniMax sparse model's main and index
//! pools), and none of them is ever the draft's; the draft's pool is the one printed after the
//! draft's weight line. A rank whose weight line was not seen (a log that starts later) falls
//! back to the order of the pool lines: the second KV-pool figure is the draft's. Lines whose
//! kind says `runner: target` (v0.5.17+ `Post-capture KV sizing: ...`, printed after both
//! runners captured) are the target's whatever loaded last.
//!
//! **Which pool.** A hybrid SWA model's two pools print the same unlabelled words before v0.5.17
//! (the sliding-window pool first, `SWAKVPool.__init__`) and in v0.5.23's hybrid MLA pool (the
//! full pool first, `kv_cache_configurator.py`). `Use sliding window memory pool.
//! full_layer_tokens=F, swa_layer_tokens=S` (v0.4.9.post3+, `model_runner.py`) comes before
//! them: an unlabelled pool line of S tokens (S ≠ F) is the sliding-window pool (its figures go
//! to `swa_pool_capacity_tokens` and `swa_layer_pool_size_bytes`), F tokens the full-attention
//! pool, the rank's KV pool. A pool of 0 tokens (the full side of an all-SWA model) is no pool.
//! A draft model's hybrid pools (no metric of their own) are not exported.
//!
//! "Before the server serves" is judged on the whole server, not the rank: only some ranks
//! print stats lines (TP rank 0 of each scheduler group), yet every rank of a process that has
//! served is past its start-up. So each target figure remembers the server's count of stats
//! lines when it was written; the same words again at the same count are the draft's, at a
//! later count a new process's (a restart whose `server_args` line was not seen), which also
//! drops the old process's draft figure.

use std::borrow::Cow;

use super::RankState;
use crate::parse::patterns::{MetricId, Patterns, Runner};
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

/// The rank's pool metrics of the pattern file: the target metrics a draft model runner prints
/// again in the same words, each with the draft's own metric, and the hybrid pool metrics.
#[derive(Debug, Clone, Default)]
pub struct DraftTwins {
    /// (target metric, draft metric).
    pairs: Vec<(MetricId, MetricId)>,
    /// Index in `pairs` of the weight memory (whose line tells which runner loaded last).
    weight: Option<usize>,
    /// The KV pool's capacity (tokens) and size (bytes).
    kv_tokens: Option<MetricId>,
    kv_bytes: Option<MetricId>,
    /// The hybrid split: full-attention and sliding-window pool capacities (tokens).
    full_tokens: Option<MetricId>,
    swa_tokens: Option<MetricId>,
    /// The sliding-window pool's own size (bytes).
    swa_bytes: Option<MetricId>,
    /// Pool metrics of the target alone (no draft metric): a draft runner's are not exported.
    target_only: Vec<MetricId>,
}

/// What a startup line's runner is, as far as the rank knows.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Whose {
    /// The target's (its weight line is the latest, or the line names the target).
    Target,
    /// The draft's (its weight line is the latest).
    Draft,
    /// No weight line at this start-up: decided per figure by order.
    Unknown,
}

impl DraftTwins {
    /// The metrics the patterns define (a pattern file without them has none: nothing routed).
    pub fn of(pat: &Patterns) -> DraftTwins {
        let id = |n: &str| pat.metric_by_id(n);
        let names = [
            ("weight_memory_bytes", "draft_weight_memory_bytes"),
            ("kv_pool_capacity_tokens", "draft_kv_pool_capacity_tokens"),
            ("kv_pool_size_bytes", "draft_kv_pool_size_bytes"),
        ];
        let pairs: Vec<(MetricId, MetricId)> = names
            .iter()
            .filter_map(|(t, d)| Some((id(t)?, id(d)?)))
            .collect();
        let weight = id("weight_memory_bytes").and_then(|w| pairs.iter().position(|p| p.0 == w));
        let target_only = [
            "full_pool_capacity_tokens",
            "swa_pool_capacity_tokens",
            "swa_pool_size_bytes",
            "swa_layer_pool_size_bytes",
        ]
        .iter()
        .filter_map(|n| id(n))
        .collect();
        DraftTwins {
            pairs,
            weight,
            kv_tokens: id("kv_pool_capacity_tokens"),
            kv_bytes: id("kv_pool_size_bytes"),
            full_tokens: id("full_pool_capacity_tokens"),
            swa_tokens: id("swa_pool_capacity_tokens"),
            swa_bytes: id("swa_layer_pool_size_bytes"),
            target_only,
        }
    }

    /// Every metric of startup line `rec` on `rank` routed to the target's metric, the draft's,
    /// or the pool it describes (or dropped), decided for the whole line before any of its
    /// values is written. `runner` is the line kind's (see [`Runner`]); `stats` is the server's
    /// count of stats lines so far; `no_draft`: the server is known to run without a draft
    /// model (`speculative_algorithm=None`). Notes on the rank which runner loaded last, the
    /// announced hybrid split, and which target figures this line wrote; drops a draft figure
    /// whose target the line writes anew after serving.
    pub fn route_line<'a>(
        &self,
        rec: &Record<'a>,
        runner: Runner,
        rank: &mut RankState,
        stats: u64,
        no_draft: bool,
    ) -> Routed<'a> {
        if rank.startup_marks.len() < self.pairs.len() {
            rank.startup_marks.resize(self.pairs.len(), None);
        }
        // `full_layer_tokens=F, swa_layer_tokens=S` (or the SWAKVPool line): the hybrid split
        // the next unlabelled pool lines of this start-up are told apart by.
        if let (Some(f), Some(s)) = (
            self.full_tokens.and_then(|m| rec.get(m)),
            self.swa_tokens.and_then(|m| rec.get(m)),
        ) {
            rank.hybrid_split = Some((stats, f, s));
        }
        let whose = match runner {
            Runner::Target => Whose::Target,
            Runner::Latest => {
                let weight = self.weight.map(|i| self.pairs[i].0);
                if let Some(w) = weight.filter(|&w| rec.get(w).is_some()) {
                    // A weight line: the target's or the draft's by order, and from now on the
                    // runner of this rank's pool lines.
                    let draft = self.by_order(w, rank, stats, no_draft);
                    rank.loaded = Some((stats, draft));
                    if draft {
                        Whose::Draft
                    } else {
                        Whose::Target
                    }
                } else {
                    match rank.loaded {
                        Some((at, draft)) if at == stats => {
                            if draft {
                                Whose::Draft
                            } else {
                                Whose::Target
                            }
                        }
                        _ => Whose::Unknown,
                    }
                }
            }
        };
        let pool = if runner == Runner::Latest {
            self.pool_of(rec, rank, stats)
        } else {
            Pool::Kv
        };
        let route = |id: MetricId| -> Option<MetricId> {
            let id = self.pool_metric(id, pool)?;
            let draft = match whose {
                Whose::Target => false,
                Whose::Draft => true,
                Whose::Unknown => self.by_order(id, rank, stats, no_draft),
            };
            if !draft {
                return Some(id);
            }
            match self.pairs.iter().find(|p| p.0 == id) {
                Some(&(_, d)) => Some(d),
                None if self.target_only.contains(&id) => None,
                None => Some(id),
            }
        };
        let routed = Routed {
            values: rec
                .values
                .iter()
                .filter_map(|&(id, v)| Some((route(id)?, v)))
                .collect(),
            bad: rec.bad_metrics.iter().filter_map(|&id| route(id)).collect(),
        };
        // The target figures this line wrote.
        for &(id, _) in routed.values.iter() {
            if let Some(i) = self.pairs.iter().position(|p| p.0 == id) {
                if rank.startup_marks[i] != Some(stats) {
                    // A new process's target figure: the old process's draft is not this one's.
                    rank.values[self.pairs[i].1 as usize] = f64::NAN;
                }
                rank.startup_marks[i] = Some(stats);
            }
        }
        routed
    }

    /// Which pool an unlabelled KV-pool line of a rank's runner describes, by its token count.
    fn pool_of(&self, rec: &Record<'_>, rank: &RankState, stats: u64) -> Pool {
        let Some(tokens) = self.kv_tokens.and_then(|m| rec.get(m)) else {
            return Pool::Kv;
        };
        if tokens == 0.0 {
            return Pool::Empty;
        }
        match rank.hybrid_split {
            Some((at, full, swa)) if at == stats && swa != full && tokens == swa => Pool::Swa,
            _ => Pool::Kv,
        }
    }

    /// Metric `id` of a KV-pool line that describes `pool`: `None` to drop it.
    fn pool_metric(&self, id: MetricId, pool: Pool) -> Option<MetricId> {
        let kv = Some(id) == self.kv_tokens || Some(id) == self.kv_bytes;
        match pool {
            Pool::Kv => Some(id),
            _ if !kv => Some(id),
            Pool::Empty => None,
            Pool::Swa if Some(id) == self.kv_tokens => self.swa_tokens,
            Pool::Swa => self.swa_bytes,
        }
    }

    /// Whether target metric `id` (a twin) goes to the draft by order: the rank holds the
    /// target's figure, written at this same count of the server's stats lines.
    fn by_order(&self, id: MetricId, rank: &RankState, stats: u64, no_draft: bool) -> bool {
        let Some(i) = self.pairs.iter().position(|p| p.0 == id) else {
            return false;
        };
        let fresh = rank.startup_marks[i] == Some(stats);
        fresh && !no_draft && !rank.values[id as usize].is_nan()
    }
}

/// The pool a KV-pool line describes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pool {
    /// The rank's KV pool (a hybrid model's full-attention pool).
    Kv,
    /// A hybrid SWA model's sliding-window pool.
    Swa,
    /// A pool of no tokens.
    Empty,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::Parser;
    use std::sync::Arc;

    const GIB: f64 = 1073741824.0;

    /// Applies `lines` (startup lines of TP1) to a fresh rank as the state does, at `stats`.
    struct Rig {
        pat: Arc<Patterns>,
        tw: DraftTwins,
        p: Parser,
        rank: RankState,
    }

    impl Rig {
        fn new() -> Rig {
            let pat = Arc::new(Patterns::embedded().unwrap());
            Rig {
                tw: DraftTwins::of(&pat),
                p: Parser::new(pat.clone()),
                rank: RankState::new(pat.metrics.len()),
                pat,
            }
        }

        fn apply(&mut self, msg: &str, stats: u64, no_draft: bool) -> Vec<MetricId> {
            let line = format!("[2026-11-12 09:01:00 TP1] {msg}");
            let rec = self.p.parse(&line).unwrap();
            let runner = self.pat.lines[rec.kind].runner;
            let r = self
                .tw
                .route_line(&rec, runner, &mut self.rank, stats, no_draft);
            for &(id, v) in r.values.iter() {
                self.rank.values[id as usize] = v;
            }
            r.values.iter().map(|&(id, _)| id).collect()
        }

        fn id(&self, name: &str) -> MetricId {
            self.pat.metric_by_id(name).unwrap()
        }

        fn get(&self, name: &str) -> f64 {
            self.rank.values[self.id(name) as usize]
        }
    }

    #[test]
    fn the_second_figure_before_serving_is_the_drafts() {
        let mut r = Rig::new();
        let (w, dw) = (
            r.id("weight_memory_bytes"),
            r.id("draft_weight_memory_bytes"),
        );
        let lw =
            |gb: &str| format!("Load weight end. type=M, avail mem=40.00 GB, mem usage={gb} GB.");
        assert_eq!(r.apply(&lw("94.00"), 0, false), [w]);
        assert_eq!(r.apply(&lw("-1.86"), 0, false), [dw]);
        assert_eq!(r.get("draft_weight_memory_bytes"), -1.86 * GIB);
        // The server served (another rank's stats lines): the same words are a new process's
        // target figure, and the old draft figure goes.
        assert_eq!(r.apply(&lw("80.00"), 5, false), [w]);
        assert!(r.get("draft_weight_memory_bytes").is_nan());
        assert_eq!(r.get("weight_memory_bytes"), 80.0 * GIB);
        // Known to run without a draft: the target's again.
        assert_eq!(r.apply(&lw("81.00"), 5, true), [w]);
    }

    /// v0.5.10 gpt-oss with EAGLE3: the target's two hybrid pools (sliding-window first), then
    /// the draft's one pool after its weight line.
    #[test]
    fn a_hybrid_targets_pools_are_its_own_and_the_drafts_follows_its_weights() {
        let mut r = Rig::new();
        r.apply("Load weight end. elapsed=30.00 s, type=GptOssForCausalLM, avail mem=75.00 GB, mem usage=61.00 GB.", 0, false);
        r.apply(
            "Use sliding window memory pool. full_layer_tokens=500000, swa_layer_tokens=400000",
            0,
            false,
        );
        let swa = r.apply(
            "KV Cache is allocated. #tokens: 400000, K size: 2.00 GB, V size: 2.00 GB",
            0,
            false,
        );
        assert_eq!(
            swa,
            [
                r.id("swa_pool_capacity_tokens"),
                r.id("swa_layer_pool_size_bytes")
            ]
        );
        let full = r.apply(
            "KV Cache is allocated. #tokens: 500000, K size: 3.00 GB, V size: 3.00 GB",
            0,
            false,
        );
        assert_eq!(
            full,
            [r.id("kv_pool_capacity_tokens"), r.id("kv_pool_size_bytes")]
        );
        r.apply("Load weight end. elapsed=2.00 s, type=LlamaForCausalLMEagle3, avail mem=1.50 GB, mem usage=1.00 GB.", 0, false);
        r.apply(
            "KV Cache is allocated. #tokens: 500000, K size: 0.20 GB, V size: 0.20 GB",
            0,
            false,
        );
        assert_eq!(r.get("kv_pool_capacity_tokens"), 500000.0);
        assert_eq!(r.get("kv_pool_size_bytes"), 6.0 * GIB);
        assert_eq!(r.get("swa_pool_capacity_tokens"), 400000.0);
        assert_eq!(r.get("swa_layer_pool_size_bytes"), 4.0 * GIB);
        assert_eq!(r.get("draft_kv_pool_capacity_tokens"), 500000.0);
        assert_eq!(r.get("draft_kv_pool_size_bytes"), 0.4 * GIB);
        assert_eq!(r.get("draft_weight_memory_bytes"), 1.0 * GIB);
    }

    /// A draft with hybrid pools of its own: its sliding-window figures have no metric and are
    /// not written over the target's; its full pool is the draft's KV pool.
    #[test]
    fn a_hybrid_drafts_pools_never_overwrite_the_targets() {
        let mut r = Rig::new();
        r.apply(
            "Load weight end. type=T, avail mem=75.00 GB, mem usage=61.00 GB.",
            0,
            false,
        );
        r.apply(
            "Use sliding window memory pool. full_layer_tokens=500000, swa_layer_tokens=400000",
            0,
            false,
        );
        r.apply(
            "KV Cache is allocated. #tokens: 400000, K size: 2.00 GB, V size: 2.00 GB",
            0,
            false,
        );
        r.apply(
            "KV Cache is allocated. #tokens: 500000, K size: 3.00 GB, V size: 3.00 GB",
            0,
            false,
        );
        r.apply(
            "SWAKVPool mem usage: 10.00 GB, swa size: 400000, full size: 500000",
            0,
            false,
        );
        r.apply(
            "Load weight end. type=D, avail mem=5.00 GB, mem usage=1.00 GB.",
            0,
            false,
        );
        assert_eq!(
            r.apply(
                "KV Cache is allocated. #tokens: 400000, K size: 0.10 GB, V size: 0.10 GB",
                0,
                false
            ),
            Vec::<MetricId>::new()
        );
        r.apply(
            "KV Cache is allocated. #tokens: 500000, K size: 0.20 GB, V size: 0.20 GB",
            0,
            false,
        );
        assert_eq!(
            r.apply(
                "SWAKVPool mem usage: 0.70 GB, swa size: 400000, full size: 500000",
                0,
                false
            ),
            Vec::<MetricId>::new()
        );
        assert_eq!(r.get("swa_layer_pool_size_bytes"), 4.0 * GIB);
        assert_eq!(r.get("swa_pool_size_bytes"), 10.0 * GIB);
        assert_eq!(r.get("kv_pool_size_bytes"), 6.0 * GIB);
        assert_eq!(r.get("draft_kv_pool_capacity_tokens"), 500000.0);
        assert_eq!(r.get("draft_kv_pool_size_bytes"), 0.4 * GIB);
    }

    /// Post-capture sizing (v0.5.17+) is printed after the draft loaded and is the target's.
    #[test]
    fn post_capture_sizing_is_the_targets_after_the_draft_loaded() {
        let mut r = Rig::new();
        r.apply(
            "Load weight end. type=T, avail mem=75.00 GB, mem usage=61.00 GB.",
            0,
            false,
        );
        r.apply(
            "Load weight end. type=D, avail mem=5.00 GB, mem usage=1.00 GB.",
            0,
            false,
        );
        let t = r.apply("Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 786432, KV size: 51.47 GB, avail mem=4.00 GB", 0, false);
        assert_eq!(
            t,
            [r.id("kv_pool_capacity_tokens"), r.id("kv_pool_size_bytes")]
        );
        let d = r.apply("Post-capture KV sizing: draft KV cache allocated. dtype: torch.bfloat16, #tokens: 786432, KV size: 0.80 GB", 0, false);
        assert_eq!(
            d,
            [
                r.id("draft_kv_pool_capacity_tokens"),
                r.id("draft_kv_pool_size_bytes")
            ]
        );
        let s = r.apply(
            "Post-capture KV sizing: full_layer_tokens=786432, swa_layer_tokens=600000",
            0,
            false,
        );
        assert_eq!(
            s,
            [
                r.id("full_pool_capacity_tokens"),
                r.id("swa_pool_capacity_tokens")
            ]
        );
    }

    /// An all-SWA model's full-attention pool has no tokens: it is no KV pool.
    #[test]
    fn a_pool_of_no_tokens_is_no_pool() {
        let mut r = Rig::new();
        r.apply(
            "Use sliding window memory pool (all SWA). swa_layer_tokens=300000",
            0,
            false,
        );
        assert_eq!(
            r.apply(
                "KV Cache is allocated. #tokens: 0, K size: 0.00 GB, V size: 0.00 GB",
                0,
                false
            ),
            Vec::<MetricId>::new()
        );
        assert_eq!(r.apply("Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 0, K size: 0.00 GB, V size: 0.00 GB", 0, false), Vec::<MetricId>::new());
        assert!(r.get("kv_pool_capacity_tokens").is_nan());
    }
}
