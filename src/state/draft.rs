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
//! already holds the target's since the server started (see below). The start-up order of the
//! runners depends on the release:
//!
//! * to v0.5.13 (`model_executor/model_runner.py` `initialize`: load, pools, graphs; the draft's
//!   `TpModelWorker` built after the target's), and v0.5.14+ Frozen-KV MTP (whose draft needs
//!   the target's pool first): target weights, its pools, its graphs, then the draft's;
//! * v0.5.14+ (`managers/scheduler.py` `init_model_worker`): target weights, draft weights,
//!   then `init_memory_pools` (the target's pools, then the draft's), then every graph (the
//!   target's `Capture target verify CUDA graph`, then the draft's). A v0.5.2x MTP draft builds
//!   no pool of its own: one `KV Cache is allocated` after both weight lines, the target's.
//!
//! So every pool line after the target's weight line is the target's: a target may build
//! several pools (a hybrid SWA model's sliding-window and full-attention pools,
//! `mem_cache/swa_memory_pool.py`, each printing its own `KV Cache is allocated` line; a MiniMax
//! sparse model's main and index pools), and none of them is ever the draft's. After the draft's
//! weight line the pool lines are the draft's where the target built its pool before it (the
//! older order; a reserved pool, `KV Cache VA upper bound.`, counts as built), else they are
//! told by order (the first KV-pool figure is the target's, the next the draft's; a reserved
//! pool of the target's ends the target's). A rank whose weight line was not seen (a log that
//! starts later) falls back to the same order. Lines whose kind says `runner: target` (v0.5.17+
//! `Post-capture KV sizing: ...`, printed after both runners captured) are the target's
//! whatever loaded last.
//!
//! **Which pool.** A hybrid SWA model's two pools print the same unlabelled words before v0.5.17
//! (the sliding-window pool first, `SWAKVPool.__init__`) and in v0.5.23's hybrid MLA pool (the
//! full pool first, `kv_cache_configurator.py`). `Use sliding window memory pool.
//! full_layer_tokens=F, swa_layer_tokens=S` (v0.4.9.post3+, `model_runner.py`) comes before
//! them: an unlabelled pool line of S tokens (S ≠ F) is the sliding-window pool (its figures go
//! to `swa_pool_capacity_tokens` and `swa_layer_pool_size_bytes`), F tokens the full-attention
//! pool, the rank's KV pool. An all-SWA model announces `swa_layer_tokens=S` alone (v0.5.9+):
//! an unlabelled line of S tokens is its sliding-window pool. A pool of 0 tokens is no pool,
//! wherever it is printed (the full side of an all-SWA model, `full size: 0`), and a split with
//! no sliding-window side (`swa_layer_tokens=0`: v0.5.17+ post-capture sizing of a model with one
//! pool, whose count it prints as `full_layer_tokens`) is no hybrid split: neither count is
//! written. A draft model's hybrid pools (no metric of their own) are not exported.
//!
//! **Whole pools.** A line of a `whole_pool` kind (v0.5.17+ `Post-capture KV sizing: KV cache
//! allocated.`) gives the size of the rank's whole pool (`post_capture_backed_bytes`): on a
//! rank whose split of this start-up has a sliding-window side, both pools together. Its size
//! goes to the whole hybrid pool's metric (`swa_pool_size_bytes`), never the full-attention
//! pool's, whose own size (and the sliding-window pool's) is then withdrawn: this start-up's
//! pools printed only their reserved upper bounds. Its count is the full-attention pool's
//! (`max_total_num_tokens`; an all-SWA model's sliding-window pool's).
//!
//! "Before the server serves" is judged on the whole server, not the rank: only some ranks
//! print stats lines (TP rank 0 of each scheduler group), yet every rank of a process that has
//! served is past its start-up. So each target and draft figure remembers the server's count of
//! stats lines when it was written; the same words again at the same count are the draft's, at a
//! later count a new process's (a restart whose `server_args` line was not seen). A target
//! figure drops the draft's figure of an earlier count (the old process's), never one of its
//! own start-up: post-capture sizing (v0.5.17+) gives the target's pool after the draft built
//! its own (a draft outside the dflash family is never resized, `is_post_capture_kv_active` in
//! `kv_pool_runtime.py`).

use std::borrow::Cow;

use super::RankState;
use crate::parse::patterns::{LineKind, MetricId, Patterns, Runner};
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
    /// The whole hybrid SWA pool's size (bytes): both pools together.
    whole_bytes: Option<MetricId>,
    /// Each pool's capacity (tokens) with its size (bytes): a line that gives a pool 0 tokens
    /// gives neither (a pool of 0 tokens is no pool).
    sized: Vec<(MetricId, Option<MetricId>)>,
    /// Pool metrics of the target alone (no draft metric): a draft runner's are not exported.
    target_only: Vec<MetricId>,
    /// The line kind of a pool's reserved address space (`KV Cache VA upper bound.`, v0.5.18+):
    /// no figure is read from it, only that its runner built its pool.
    reserved: Option<usize>,
}

/// What a startup line's runner is, as far as the rank knows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Whose {
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
        let sized = [
            ("kv_pool_capacity_tokens", Some("kv_pool_size_bytes")),
            (
                "swa_pool_capacity_tokens",
                Some("swa_layer_pool_size_bytes"),
            ),
            (
                "draft_kv_pool_capacity_tokens",
                Some("draft_kv_pool_size_bytes"),
            ),
            ("full_pool_capacity_tokens", None),
        ]
        .iter()
        .filter_map(|&(t, b)| Some((id(t)?, b.and_then(id))))
        .collect();
        DraftTwins {
            pairs,
            weight,
            kv_tokens: id("kv_pool_capacity_tokens"),
            kv_bytes: id("kv_pool_size_bytes"),
            full_tokens: id("full_pool_capacity_tokens"),
            swa_tokens: id("swa_pool_capacity_tokens"),
            swa_bytes: id("swa_layer_pool_size_bytes"),
            whole_bytes: id("swa_pool_size_bytes"),
            sized,
            target_only,
            reserved: pat.lines.iter().position(|l| l.name == "kv_cache_reserved"),
        }
    }

    /// Every metric of startup line `rec` (of kind `line`) on `rank` routed to the target's
    /// metric, the draft's, or the pool it describes (or dropped), decided for the whole line
    /// before any of its values is written. `stats` is the server's count of stats lines so far;
    /// `no_draft`: the server is known to run without a draft model
    /// (`speculative_algorithm=None`). Notes on the rank which runner loaded last, the announced
    /// hybrid split, and which figures this line wrote; drops a draft figure of an earlier
    /// start-up when the line writes its target figure anew.
    pub fn route_line<'a>(
        &self,
        rec: &Record<'a>,
        line: &LineKind,
        rank: &mut RankState,
        stats: u64,
        no_draft: bool,
    ) -> Routed<'a> {
        let runner = line.runner;
        if rank.startup_marks.len() < self.pairs.len() {
            rank.startup_marks.resize(self.pairs.len(), None);
        }
        if rank.draft_marks.len() < self.pairs.len() {
            rank.draft_marks.resize(self.pairs.len(), None);
        }
        // `full_layer_tokens=F, swa_layer_tokens=S` (or the SWAKVPool line): the hybrid split
        // the next unlabelled pool lines of this start-up are told apart by. An all-SWA model
        // announces its sliding-window count alone (`Use sliding window memory pool (all SWA).
        // swa_layer_tokens=S`, no other figure on the line): no full-attention pool.
        match (
            self.full_tokens.and_then(|m| rec.get(m)),
            self.swa_tokens.and_then(|m| rec.get(m)),
        ) {
            (Some(f), Some(s)) => rank.hybrid_split = Some((stats, f, s)),
            (None, Some(s))
                if rec
                    .values
                    .iter()
                    .all(|&(id, _)| Some(id) == self.swa_tokens) =>
            {
                rank.hybrid_split = Some((stats, 0.0, s));
            }
            _ => {}
        }
        let whose = match runner {
            Runner::Target => {
                self.pool_was_drafts(rec, rank, stats);
                Whose::Target
            }
            Runner::Latest => {
                let weight = self.weight.map(|i| self.pairs[i].0);
                if let Some(w) = weight.filter(|&w| rec.get(w).is_some()) {
                    // A weight line: the target's or the draft's by order, and from now on the
                    // runner of this rank's pool lines.
                    let draft = self.by_order(w, rank, stats, no_draft);
                    rank.loaded = Some((stats, self.pools_after(draft, rank, stats)));
                    if draft {
                        Whose::Draft
                    } else {
                        Whose::Target
                    }
                } else {
                    match rank.loaded {
                        Some((at, whose)) if at == stats => whose,
                        _ => Whose::Unknown,
                    }
                }
            }
        };
        if Some(rec.kind) == self.reserved {
            self.reserved_pool(whose, rank, stats);
            return Routed {
                values: Cow::Borrowed(&[]),
                bad: Cow::Borrowed(&[]),
            };
        }
        // A hybrid SWA split of this start-up (one with a sliding-window pool).
        let hybrid = rank
            .hybrid_split
            .filter(|&(at, _, swa)| at == stats && swa > 0.0);
        let pool = match hybrid {
            Some((_, full, _)) if line.whole_pool => Pool::Whole {
                all_swa: full == 0.0,
            },
            _ if runner == Runner::Latest => self.pool_of(rec, rank, stats),
            _ => Pool::Kv,
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
        let mut values: Vec<(MetricId, f64)> = rec
            .values
            .iter()
            .filter_map(|&(id, v)| Some((route(id)?, v)))
            .collect();
        let mut bad: Vec<MetricId> = rec.bad_metrics.iter().filter_map(|&id| route(id)).collect();
        // A pool of 0 tokens is no pool: neither its capacity nor its size is written. A split
        // without a sliding-window side is no hybrid split (a model with one pool prints its
        // count as `full_layer_tokens`): its full-attention count is no hybrid pool either.
        let zero = |m: Option<MetricId>, values: &[(MetricId, f64)]| {
            m.is_some_and(|m| values.iter().any(|&(id, v)| id == m && v == 0.0))
        };
        let mut none: Vec<MetricId> = Vec::new();
        for &(tokens, bytes) in &self.sized {
            if zero(Some(tokens), &values) {
                none.push(tokens);
                none.extend(bytes);
            }
        }
        if zero(self.swa_tokens, &values) {
            none.extend(self.full_tokens);
        }
        if !none.is_empty() {
            values.retain(|(id, _)| !none.contains(id));
            bad.retain(|id| !none.contains(id));
        }
        // The whole hybrid pool's size: each pool's own size is not known in this start-up
        // (its pools printed `VA upper bound`), so an older one is withdrawn, never shown beside
        // it.
        if matches!(pool, Pool::Whole { .. }) && whose != Whose::Draft {
            bad.extend(self.kv_bytes);
            bad.extend(self.swa_bytes);
        }
        // The target and draft figures this line wrote.
        for &(id, _) in &values {
            if let Some(i) = self.pairs.iter().position(|p| p.0 == id) {
                if rank.draft_marks[i] != Some(stats) {
                    // A draft figure of an earlier start-up (a new process whose server_args
                    // line was not seen) is not this process's; one of this start-up stays
                    // (post-capture sizing rewrites the target's pool after the draft's).
                    rank.values[self.pairs[i].1 as usize] = f64::NAN;
                }
                rank.startup_marks[i] = Some(stats);
            } else if let Some(i) = self.pairs.iter().position(|p| p.1 == id) {
                rank.draft_marks[i] = Some(stats);
            }
        }
        Routed {
            values: Cow::Owned(values),
            bad: Cow::Owned(bad),
        }
    }

    /// Whose the pool lines after a weight line are: the target's after its own; after the
    /// draft's, the draft's where the target built its KV pool before the draft loaded (each
    /// runner loads, builds its pools and captures its graphs in turn: to v0.5.13, and
    /// Frozen-KV MTP, whose draft needs the target's pool), else decided by order, the target's
    /// first (v0.5.14+ `scheduler.py` `init_model_worker`: both runners load, then
    /// `init_memory_pools` builds the target's pools and then the draft's).
    fn pools_after(&self, draft: bool, rank: &RankState, stats: u64) -> Whose {
        if !draft {
            return Whose::Target;
        }
        let kv = self
            .kv_tokens
            .and_then(|m| self.pairs.iter().position(|p| p.0 == m));
        let target_pool = kv.is_some_and(|i| rank.startup_marks[i] == Some(stats));
        if target_pool {
            Whose::Draft
        } else {
            Whose::Unknown
        }
    }

    /// A target pool line that is the target's whatever loaded last (`Post-capture KV sizing`,
    /// v0.5.17+) after a pool figure this start-up took as the target's by order (the first
    /// after both weight lines): that one was the draft's, built at once while the target's was
    /// only reserved (its `VA upper bound` line not in the log). It moves to the draft's
    /// metrics.
    fn pool_was_drafts(&self, rec: &Record<'_>, rank: &mut RankState, stats: u64) {
        let Some(tokens) = self.kv_tokens.filter(|&m| rec.get(m).is_some()) else {
            return;
        };
        if rank.loaded != Some((stats, Whose::Unknown)) {
            return;
        }
        let kv = [Some(tokens), self.kv_bytes];
        for (i, &(t, d)) in self.pairs.iter().enumerate() {
            let own = rank.draft_marks[i] == Some(stats);
            if kv.contains(&Some(t)) && rank.startup_marks[i] == Some(stats) && !own {
                rank.values[d as usize] = std::mem::replace(&mut rank.values[t as usize], f64::NAN);
                rank.draft_marks[i] = Some(stats);
                rank.startup_marks[i] = None;
            }
        }
        rank.loaded = Some((stats, Whose::Draft));
    }

    /// A pool of `whose` runner whose address space was reserved (sized after graph capture,
    /// v0.5.18+): no figure, but the target's pool is built, so the pool lines after it (and
    /// after the draft's weights) are the draft's.
    fn reserved_pool(&self, whose: Whose, rank: &mut RankState, stats: u64) {
        if whose == Whose::Draft {
            return;
        }
        let kv = self
            .kv_tokens
            .and_then(|m| self.pairs.iter().position(|p| p.0 == m));
        if let Some(i) = kv {
            rank.startup_marks[i] = Some(stats);
        }
        if rank.loaded == Some((stats, Whose::Unknown)) {
            rank.loaded = Some((stats, Whose::Draft));
        }
    }

    /// Which pool an unlabelled KV-pool line of a rank's runner describes, by its token count.
    fn pool_of(&self, rec: &Record<'_>, rank: &RankState, stats: u64) -> Pool {
        let Some(tokens) = self.kv_tokens.and_then(|m| rec.get(m)) else {
            return Pool::Kv;
        };
        match rank.hybrid_split {
            Some((at, full, swa)) if at == stats && swa != full && tokens == swa && swa > 0.0 => {
                Pool::Swa
            }
            _ => Pool::Kv,
        }
    }

    /// Metric `id` of a KV-pool line that describes `pool`: `None` to drop it.
    fn pool_metric(&self, id: MetricId, pool: Pool) -> Option<MetricId> {
        let tokens = Some(id) == self.kv_tokens;
        if !tokens && Some(id) != self.kv_bytes {
            return Some(id);
        }
        match pool {
            Pool::Kv => Some(id),
            Pool::Swa if tokens => self.swa_tokens,
            Pool::Swa => self.swa_bytes,
            // An all-SWA model's `#tokens` is its sliding-window pool's.
            Pool::Whole { all_swa: true } if tokens => self.swa_tokens,
            Pool::Whole { .. } if tokens => Some(id),
            Pool::Whole { .. } => self.whole_bytes,
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
    /// A hybrid SWA model's two pools together (a `whole_pool` line): its count is the
    /// full-attention pool's (`max_total_num_tokens`; an all-SWA model's sliding-window pool's),
    /// its size both pools'.
    Whole {
        /// No full-attention pool (`full_layer_tokens=0`).
        all_swa: bool,
    },
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
            let line = &self.pat.lines[rec.kind];
            let r = self
                .tw
                .route_line(&rec, line, &mut self.rank, stats, no_draft);
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

    /// v0.5.14+: both runners load, then the target's pool, then the draft's. The first pool
    /// after the draft's weights is the target's; a reserved pool of the target's
    /// (`VA upper bound`, v0.5.18+) makes the next the draft's.
    #[test]
    fn after_both_weight_lines_the_first_pool_is_the_targets() {
        let lw =
            |gb: &str| format!("Load weight end. type=M, avail mem=40.00 GB, mem usage={gb} GB.");
        let kv = |n: u32| {
            format!("KV Cache is allocated. dtype: torch.bfloat16, #tokens: {n}, KV size: 1.00 GB")
        };
        let mut r = Rig::new();
        let (t, d) = (
            r.id("kv_pool_capacity_tokens"),
            r.id("draft_kv_pool_capacity_tokens"),
        );
        let (tb, db) = (r.id("kv_pool_size_bytes"), r.id("draft_kv_pool_size_bytes"));
        r.apply(&lw("60.00"), 0, false);
        assert_eq!(
            r.apply(&lw("-1.20"), 0, false),
            [r.id("draft_weight_memory_bytes")]
        );
        assert_eq!(r.apply(&kv(1000), 0, false), [t, tb]);
        assert_eq!(r.apply(&kv(2000), 0, false), [d, db]);
        assert_eq!(
            (
                r.get("kv_pool_capacity_tokens"),
                r.get("draft_kv_pool_capacity_tokens")
            ),
            (1000.0, 2000.0)
        );
        // Post-capture sizing: the target's pool is reserved, the plain pool after it the draft's.
        let mut r = Rig::new();
        r.apply(&lw("60.00"), 0, false);
        r.apply(&lw("1.00"), 0, false);
        let va = "KV Cache VA upper bound. dtype: torch.bfloat16, #tokens: 9, K size: 9.00 GB, V size: 9.00 GB";
        assert_eq!(r.apply(va, 0, false), Vec::<MetricId>::new());
        assert_eq!(r.apply(&kv(3000), 0, false), [d, db]);
        assert!(r.get("kv_pool_capacity_tokens").is_nan());
        // The older order: the target's pool before the draft loaded; the pool after the
        // draft's weights is the draft's.
        let mut r = Rig::new();
        r.apply(&lw("60.00"), 0, false);
        assert_eq!(r.apply(&kv(1000), 0, false), [t, tb]);
        r.apply(&lw("1.00"), 0, false);
        assert_eq!(r.apply(&kv(4000), 0, false), [d, db]);
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

    /// v0.5.23 EAGLE without dflash: the draft's pool is built at once (`KV Cache is
    /// allocated`), the target's sized after capture (`Post-capture KV sizing: KV cache
    /// allocated`, its first KV figure of the start-up): the draft's pool stays.
    #[test]
    fn the_targets_post_capture_pool_keeps_the_drafts() {
        let mut r = Rig::new();
        r.apply(
            "Load weight end. type=T, avail mem=60.00 GB, mem usage=15.00 GB.",
            0,
            false,
        );
        r.apply(
            "Load weight end. type=D, avail mem=11.50 GB, mem usage=1.00 GB.",
            0,
            false,
        );
        r.apply("KV Cache is allocated. dtype: torch.bfloat16, #tokens: 500000, K size: 1.00 GB, V size: 1.00 GB", 0, false);
        assert_eq!(
            r.apply(
                "Post-capture KV sizing: full_layer_tokens=400000, swa_layer_tokens=0",
                0,
                false
            ),
            Vec::<MetricId>::new()
        );
        r.apply("Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 400000, KV size: 48.00 GB, avail mem=1.00 GB", 0, false);
        assert_eq!(r.get("kv_pool_capacity_tokens"), 400000.0);
        assert_eq!(r.get("kv_pool_size_bytes"), 48.0 * GIB);
        assert_eq!(r.get("draft_kv_pool_capacity_tokens"), 500000.0);
        assert_eq!(r.get("draft_kv_pool_size_bytes"), 2.0 * GIB);
        assert!(r.get("swa_pool_capacity_tokens").is_nan());
        assert!(r.get("full_pool_capacity_tokens").is_nan());
        // A new process (the server served since) sizes the target anew: the old draft goes.
        r.apply("Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 300000, KV size: 36.00 GB, avail mem=1.00 GB", 7, false);
        assert!(r.get("draft_kv_pool_capacity_tokens").is_nan());
    }

    /// A hybrid SWA model's post-capture `KV size` is both pools': the whole hybrid pool's
    /// metric, never the full-attention pool's; an older full-pool size is withdrawn.
    #[test]
    fn a_hybrid_post_capture_size_is_the_whole_pools() {
        let mut r = Rig::new();
        let id = |n: &str| r.pat.metric_by_id(n).unwrap();
        let (kv_t, kv_b, whole, layer) = (
            id("kv_pool_capacity_tokens"),
            id("kv_pool_size_bytes"),
            id("swa_pool_size_bytes"),
            id("swa_layer_pool_size_bytes"),
        );
        r.rank.values[kv_b as usize] = 9.0 * GIB;
        r.apply(
            "Post-capture KV sizing: full_layer_tokens=300000, swa_layer_tokens=240000",
            0,
            false,
        );
        let line = "[2026-11-12 09:01:00 TP1] Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 300000, KV size: 6.00 GB, avail mem=1.00 GB";
        let Rig { pat, tw, p, rank } = &mut r;
        let rec = p.parse(line).unwrap();
        let routed = tw.route_line(&rec, &pat.lines[rec.kind], rank, 0, false);
        assert_eq!(
            routed.values.to_vec(),
            [(kv_t, 300000.0), (whole, 6.0 * GIB)]
        );
        assert_eq!(routed.bad.to_vec(), [kv_b, layer]);
        // All-SWA: `#tokens` is the sliding-window pool's.
        let mut r = Rig::new();
        r.apply(
            "Post-capture KV sizing: full_layer_tokens=0, swa_layer_tokens=240000",
            0,
            false,
        );
        assert_eq!(
            r.apply("Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 240000, KV size: 2.00 GB, avail mem=1.00 GB", 0, false),
            [r.id("swa_pool_capacity_tokens"), r.id("swa_pool_size_bytes")]
        );
        assert!(r.get("full_pool_capacity_tokens").is_nan());
    }

    /// Before v0.5.17 an all-SWA model prints both pools unlabelled (the sliding-window pool
    /// first, then the full pool of 0 tokens): the announced count tells the first.
    #[test]
    fn an_all_swa_models_unlabelled_pool_is_the_sliding_window_pool() {
        let mut r = Rig::new();
        r.apply(
            "Use sliding window memory pool (all SWA). swa_layer_tokens=300000",
            0,
            false,
        );
        assert_eq!(
            r.apply(
                "KV Cache is allocated. #tokens: 300000, K size: 1.00 GB, V size: 1.00 GB",
                0,
                false
            ),
            [
                r.id("swa_pool_capacity_tokens"),
                r.id("swa_layer_pool_size_bytes")
            ]
        );
        assert!(r.get("kv_pool_capacity_tokens").is_nan());
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
