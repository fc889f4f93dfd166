//! A rank's KV pools and what can be shown of them: the one rule for every KV share and bytes
//! estimate the exporter derives (the `--once` summary, `top`, the live page and its JSON,
//! `sglang_kv_pool_used_estimate_bytes`), so they cannot disagree.
//!
//! A model with one KV pool: its used tokens (`#token`) over its capacity, else SGLang's token
//! usage. A hybrid SWA model (gpt-oss, Gemma 3, …) has two pools, a full-attention and a
//! sliding-window one, each with its own capacity and size, and SGLang's `#token`/`token usage`
//! (`sglang:num_used_tokens`, `sglang:token_usage`) are the larger of the two
//! (`get_kv_token_stats`, `get_max_pool_usage` in `managers/scheduler_components/
//! pool_stats_observer.py`): neither belongs to a pool, so neither is ever paired with a pool's
//! capacity or size. Each pool is read from its own figures (`#full token`, `full token usage`
//! against the full-attention pool; `#swa token`, `swa token usage` against the sliding-window
//! pool); the rank's share is the fuller pool's; where a pool's own figures are missing (SGLang's
//! HTTP API gives only the larger), SGLang's token usage is shown as what it is, the fullest
//! pool's ([`Pool::Max`]). A hybrid Mamba model's KV pool is its full-attention pool (its
//! Mamba state is no KV pool, yet counts in SGLang's token usage): its share is that pool's.

/// The capacity a rank's used tokens may be shown as a share of: `capacity` when it is positive
/// and holds `used`; `None` when `used` exceeds it. A used count above its capacity is a
/// contradiction (a capacity line of another rank, server or process applied), never a share
/// over 100 %: callers fall back to SGLang's own token usage.
pub fn share_capacity(used: Option<f64>, capacity: Option<f64>) -> Option<f64> {
    capacity.filter(|&c| c > 0.0 && used.is_none_or(|u| u <= c))
}

/// SGLang's token usage (a 0-1 ratio) where it can be a share: `None` above 1 (a contradiction
/// of the line itself, never shown as a share over 100 %).
pub fn share_usage(usage: Option<f64>) -> Option<f64> {
    usage.filter(|&u| u <= 1.0)
}

/// One KV pool's figures: its used tokens, its own capacity and SGLang's printed usage of it
/// (0-1), each `None` where unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PoolUse {
    /// Tokens in use.
    pub used: Option<f64>,
    /// The pool's capacity in tokens.
    pub capacity: Option<f64>,
    /// SGLang's usage of the pool (0-1, two decimals as printed).
    pub usage: Option<f64>,
}

impl PoolUse {
    /// The capacity the used tokens are a share of: `None` where unknown, or where the used
    /// tokens exceed it (a contradiction, see [`share_capacity`]).
    pub fn held_capacity(&self) -> Option<f64> {
        share_capacity(self.used, self.capacity)
    }

    /// The pool's share (0-1): used / capacity where both are known, else its printed usage
    /// (never above 1).
    pub fn share(&self) -> Option<f64> {
        match (self.used, self.held_capacity()) {
            (Some(u), Some(c)) => Some(u / c),
            _ => share_usage(self.usage),
        }
    }

    /// The share a bytes estimate takes: the printed usage (0 while the rank is idle), or the
    /// exact used / capacity where it agrees with it within its two-decimal rounding.
    fn estimate_share(&self) -> Option<f64> {
        let u = share_usage(self.usage)?;
        let exact = self
            .used
            .zip(self.held_capacity())
            .map(|(used, cap)| used / cap)
            .filter(|r| (r - u).abs() <= 0.005 + 1e-9);
        Some(exact.unwrap_or(u))
    }
}

/// Which pool a shown share is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// The rank's one KV pool (a hybrid Mamba model's full-attention pool).
    One,
    /// A hybrid SWA model's full-attention pool.
    Full,
    /// A hybrid SWA model's sliding-window pool.
    Swa,
    /// No pool's own share is known: SGLang's token usage, the fullest pool's.
    Max,
}

impl Pool {
    /// Its name where a rank has several pools (`full`, `swa`, `max`); `None` for the one pool.
    pub fn label(self) -> Option<&'static str> {
        match self {
            Pool::One => None,
            Pool::Full => Some("full"),
            Pool::Swa => Some("swa"),
            Pool::Max => Some("max"),
        }
    }
}

/// The values a rank's KV use is read from, each `None` where the rank has none.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KvValues {
    /// `sglang:num_used_tokens` (`#token`; a hybrid model's larger pool).
    pub used: Option<f64>,
    /// `sglang:token_usage` (a hybrid model's fullest pool).
    pub usage: Option<f64>,
    /// The KV pool's capacity (a hybrid SWA model's full-attention pool), as the caller ranks
    /// the rank's pool line and the capacity line.
    pub capacity: Option<f64>,
    /// `sglang_kv_pool_capacity_tokens`: the rank's KV pool line (a hybrid SWA model's
    /// full-attention pool); with `full_capacity`, tells an all-SWA model's capacity line (its
    /// sliding-window pool's) from a full-attention pool's.
    pub pool_capacity: Option<f64>,
    /// `sglang_full_pool_capacity_tokens` (the hybrid split's full-attention count).
    pub full_capacity: Option<f64>,
    /// `sglang:max_total_num_tokens` (a hybrid SWA model's full-attention pool; an all-SWA
    /// model's sliding-window pool).
    pub max_total: Option<f64>,
    /// `sglang_full_used_tokens` (`#full token`).
    pub full_used: Option<f64>,
    /// `sglang:full_token_usage`.
    pub full_usage: Option<f64>,
    /// `sglang_swa_pool_used_tokens` (`#swa token`).
    pub swa_used: Option<f64>,
    /// `sglang:swa_token_usage` (0 on a model without a sliding-window pool, as upstream).
    pub swa_usage: Option<f64>,
    /// `sglang_swa_pool_capacity_tokens`.
    pub swa_capacity: Option<f64>,
    /// `sglang_mamba_used_slots`.
    pub mamba_used: Option<f64>,
    /// `sglang:mamba_usage` (0 on a model without a Mamba pool, as upstream).
    pub mamba_usage: Option<f64>,
}

/// A rank's KV cache use, each pool against its own capacity.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KvUse {
    /// The rank's KV pool (a hybrid model's full-attention pool).
    pub kv: PoolUse,
    /// A hybrid SWA model's sliding-window pool.
    pub swa: Option<PoolUse>,
    /// Several pools (hybrid SWA or Mamba): SGLang's token usage, the fullest pool's.
    pub max_usage: Option<f64>,
    /// Several pools: SGLang's `#token`, the larger pool's used tokens.
    pub max_used: Option<f64>,
}

impl KvUse {
    /// The pools `v` describes. A rank has a sliding-window pool when it prints its used tokens
    /// (`#swa token`), announced one (its capacity), or prints a usage of it above 0; a Mamba
    /// pool likewise; `#full token` alone (a prefill line prints usages only) says hybrid too.
    pub fn of(v: &KvValues) -> KvUse {
        let positive = |x: Option<f64>| x.is_some_and(|x| x > 0.0);
        let swa = v.swa_used.is_some() || positive(v.swa_capacity) || positive(v.swa_usage);
        let mamba = v.mamba_used.is_some() || positive(v.mamba_usage);
        if !(swa || mamba || v.full_used.is_some()) {
            return KvUse {
                kv: PoolUse {
                    used: v.used,
                    capacity: v.capacity,
                    usage: v.usage,
                },
                ..KvUse::default()
            };
        }
        if !swa {
            // Hybrid Mamba: one KV pool, the full-attention pool (`#token` is its count).
            return KvUse {
                kv: PoolUse {
                    used: v.full_used.or(v.used),
                    capacity: v.capacity,
                    usage: v.full_usage,
                },
                swa: None,
                max_usage: v.usage,
                max_used: v.used,
            };
        }
        // The full-attention pool's capacity as the caller ranks the rank's pool line and the
        // capacity line (both count the full-attention pool), else the split's count — never
        // the capacity line's where it is the sliding-window pool's (an all-SWA model, no pool
        // line of a full-attention pool).
        let full_capacity = match v.capacity {
            Some(c)
                if v.max_total == Some(c)
                    && v.swa_capacity == Some(c)
                    && v.pool_capacity.is_none()
                    && v.full_capacity.is_none() =>
            {
                None
            }
            Some(c) => Some(c),
            None => v.full_capacity,
        };
        KvUse {
            kv: PoolUse {
                used: v.full_used,
                capacity: full_capacity,
                usage: v.full_usage,
            },
            swa: Some(PoolUse {
                used: v.swa_used,
                capacity: v.swa_capacity,
                usage: v.swa_usage,
            }),
            max_usage: v.usage,
            max_used: v.used,
        }
    }

    /// Whether the rank has several pools (hybrid SWA or Mamba).
    pub fn hybrid(&self) -> bool {
        self.swa.is_some() || self.max_usage.is_some() || self.max_used.is_some()
    }

    /// The rank's share (0-1) and the pool it is of: one pool's share; a hybrid SWA rank's
    /// fuller pool (each against its own capacity); where a pool's own share is not known,
    /// SGLang's token usage, the fullest pool's ([`Pool::Max`]).
    pub fn share(&self) -> Option<(f64, Pool)> {
        let one = match self.swa {
            None => self.kv.share().map(|s| (s, Pool::One)),
            Some(swa) => match (self.kv.share(), swa.share()) {
                (Some(f), Some(s)) if s > f => Some((s, Pool::Swa)),
                (Some(f), Some(_)) => Some((f, Pool::Full)),
                _ => None,
            },
        };
        one.or_else(|| share_usage(self.max_usage).map(|u| (u, Pool::Max)))
    }

    /// The tokens the shown share is of: (used, capacity, pool). [`Pool::Max`] has SGLang's
    /// `#token` (the larger pool's) and no capacity.
    pub fn shown_tokens(&self) -> (Option<f64>, Option<f64>, Option<Pool>) {
        let of = |p: &PoolUse| (p.used, p.held_capacity());
        match self.share().map(|s| s.1) {
            Some(Pool::Swa) => {
                let (u, c) = self.swa.as_ref().map_or((None, None), of);
                (u, c, Some(Pool::Swa))
            }
            Some(Pool::Max) => (self.max_used, None, Some(Pool::Max)),
            Some(p) => {
                let (u, c) = of(&self.kv);
                (u, c, Some(p))
            }
            // Nothing to show a share of: one pool's tokens as known; none of a hybrid's.
            None if self.swa.is_none() => (self.kv.used, self.kv.held_capacity(), None),
            None => (None, None, None),
        }
    }

    /// Every pool with its name: the KV pool (`None` as the one pool, `full` beside a
    /// sliding-window pool), then the sliding-window pool.
    pub fn pools(&self) -> Vec<(Pool, PoolUse)> {
        match self.swa {
            None => vec![(Pool::One, self.kv)],
            Some(s) => vec![(Pool::Full, self.kv), (Pool::Swa, s)],
        }
    }

    /// The KV-cache bytes in use, estimated: each pool's share (its printed usage, or its exact
    /// used / capacity where that agrees with it) times that pool's own size. `kv_bytes` is the
    /// KV pool's (a hybrid SWA model's full-attention pool's), `swa_bytes` the sliding-window
    /// pool's; `None` where a pool's share or size is not known (a partial sum would read as the
    /// whole).
    ///
    /// A hybrid SWA rank's KV pool of no known capacity or size that holds no token is no pool
    /// (the full-attention side of an all-SWA model): it adds nothing.
    pub fn used_bytes(&self, kv_bytes: Option<f64>, swa_bytes: Option<f64>) -> Option<f64> {
        let of = |p: &PoolUse, bytes: Option<f64>| Some(p.estimate_share()? * bytes?);
        match self.swa {
            None => of(&self.kv, kv_bytes),
            Some(s) => {
                let none = kv_bytes.is_none() && self.kv.capacity.is_none();
                let kv = match of(&self.kv, kv_bytes) {
                    None if none && self.kv.used == Some(0.0) => 0.0,
                    kv => kv?,
                };
                Some(kv + of(&s, swa_bytes)?)
            }
        }
    }

    /// The summary's text (`--once`): `45.7% (45678/100000 tokens)` for one pool;
    /// `full 10.0% (50000/500000 tokens), SWA 95.0% (95000/100000 tokens)` for a hybrid SWA
    /// rank; SGLang's token usage, labelled as the fullest pool's, where no pool's own figures
    /// are known. Contradictions are said, never shown as a share over 100 %.
    pub fn text(&self) -> String {
        let max = share_usage(self.max_usage);
        let pools: Vec<(&str, &PoolUse)> = match &self.swa {
            None => vec![("", &self.kv)],
            Some(swa) => vec![("full ", &self.kv), ("SWA ", swa)],
        };
        let texts: Vec<Option<String>> = pools.iter().map(|(_, p)| pool_text(p)).collect();
        if texts.iter().all(Option::is_none) {
            return match max {
                Some(u) => format!("{:.1}% (token usage: the fullest pool's)", 100.0 * u),
                None => "usage not printed".to_string(),
            };
        }
        let mut out: Vec<String> = pools
            .iter()
            .zip(texts)
            .map(|((name, _), t)| {
                format!(
                    "{name}{}",
                    t.unwrap_or_else(|| "usage not printed".to_string())
                )
            })
            .collect();
        // A pool without a share of its own: SGLang's token usage says how full the fullest is.
        if let Some(u) = max.filter(|_| pools.iter().any(|(_, p)| p.share().is_none())) {
            out.push(format!("fullest pool {:.1}% (token usage)", 100.0 * u));
        }
        out.join(", ")
    }
}

/// One pool's figures as the summary says them; `None` where nothing is known.
fn pool_text(p: &PoolUse) -> Option<String> {
    let usage = share_usage(p.usage);
    Some(match (p.used, p.held_capacity(), usage) {
        // A used count above the capacity seen: a contradiction, never a share over 100 %.
        (Some(u), None, r) if p.capacity.is_some() => {
            let c = p.capacity.unwrap_or_default();
            let share = r.map_or(String::new(), |r| format!("{:.1}%, ", 100.0 * r));
            format!(
                "{share}{u:.0} tokens used, above the {c:.0}-token capacity seen (contradictory)"
            )
        }
        (Some(u), Some(c), _) => format!("{:.1}% ({u:.0}/{c:.0} tokens)", 100.0 * u / c),
        (_, _, None) if p.usage.is_some() => format!(
            "token usage {:.2} printed, above 1 (contradictory)",
            p.usage.unwrap_or_default()
        ),
        (_, Some(c), Some(r)) => format!("{:.1}% of {c:.0} tokens", 100.0 * r),
        (_, None, Some(r)) => format!("{:.1}%", 100.0 * r),
        (Some(u), _, None) => format!("{u:.0} tokens"),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = 1073741824.0;

    /// s02: the sliding-window pool (95000 of 100000) is fuller than the full-attention pool
    /// (50000 of 500000); SGLang's `#token` 95000 and token usage 0.95 are the larger.
    fn swa_fuller() -> KvValues {
        KvValues {
            used: Some(95000.0),
            usage: Some(0.95),
            capacity: Some(500000.0),
            pool_capacity: Some(500000.0),
            max_total: Some(500000.0),
            full_used: Some(50000.0),
            full_usage: Some(0.10),
            swa_used: Some(95000.0),
            swa_usage: Some(0.95),
            swa_capacity: Some(100000.0),
            ..KvValues::default()
        }
    }

    #[test]
    fn each_pool_against_its_own_capacity_and_bytes() {
        let k = KvUse::of(&swa_fuller());
        assert_eq!(k.share(), Some((0.95, Pool::Swa)));
        assert_eq!(
            k.shown_tokens(),
            (Some(95000.0), Some(100000.0), Some(Pool::Swa))
        );
        assert_eq!(
            k.text(),
            "full 10.0% (50000/500000 tokens), SWA 95.0% (95000/100000 tokens)"
        );
        // 10 % of the full pool's 6 GiB and 95 % of the sliding-window pool's 4 GiB, never
        // 95 % of the full pool's.
        let b = k.used_bytes(Some(6.0 * GIB), Some(4.0 * GIB)).unwrap();
        assert_eq!(b, 0.1 * 6.0 * GIB + 0.95 * 4.0 * GIB);
        // A pool's size unknown: no estimate rather than a part of one.
        assert_eq!(k.used_bytes(Some(6.0 * GIB), None), None);
    }

    #[test]
    fn only_the_larger_is_shown_as_what_it_is() {
        // SGLang's HTTP API: `num_used_tokens` and `token_usage` are the larger pool's; the
        // pools' own figures are not given.
        let v = KvValues {
            full_used: None,
            full_usage: None,
            swa_used: None,
            swa_usage: None,
            ..swa_fuller()
        };
        let k = KvUse::of(&v);
        assert_eq!(k.share(), Some((0.95, Pool::Max)));
        assert_eq!(k.shown_tokens(), (Some(95000.0), None, Some(Pool::Max)));
        assert_eq!(k.text(), "95.0% (token usage: the fullest pool's)");
        assert_eq!(k.used_bytes(Some(6.0 * GIB), Some(4.0 * GIB)), None);
    }

    #[test]
    fn one_pool_reads_as_before() {
        let v = KvValues {
            used: Some(45678.0),
            usage: Some(0.46),
            capacity: Some(100000.0),
            swa_usage: Some(0.0),
            mamba_usage: Some(0.0),
            ..KvValues::default()
        };
        let k = KvUse::of(&v);
        assert!(!k.hybrid());
        assert_eq!(k.share(), Some((0.45678, Pool::One)));
        assert_eq!(k.text(), "45.7% (45678/100000 tokens)");
        // The exact 45678/100000 (within the printed 0.46's rounding) of the pool's bytes.
        let b = k.used_bytes(Some(100000.0), None).unwrap();
        assert_eq!(b.round(), 45678.0);
    }

    #[test]
    fn a_mamba_pool_is_no_kv_pool() {
        // `full token usage: 0.74, mamba usage: 0.80`: token usage 0.80 is the Mamba pool's.
        let v = KvValues {
            used: Some(350592.0),
            usage: Some(0.80),
            capacity: Some(473760.0),
            full_used: Some(350592.0),
            full_usage: Some(0.74),
            swa_usage: Some(0.0),
            mamba_used: Some(160.0),
            mamba_usage: Some(0.80),
            ..KvValues::default()
        };
        let k = KvUse::of(&v);
        assert_eq!(k.share(), Some((350592.0 / 473760.0, Pool::One)));
        // 74 % of the KV pool's bytes, never the Mamba pool's 80 %.
        let b = k.used_bytes(Some(473760.0), None).unwrap();
        assert_eq!(b.round(), 350592.0);
    }

    #[test]
    fn an_all_swa_models_capacity_line_is_its_sliding_window_pools() {
        let v = KvValues {
            used: Some(300000.0),
            usage: Some(0.75),
            capacity: Some(400000.0),
            max_total: Some(400000.0),
            full_used: Some(0.0),
            full_usage: Some(0.0),
            swa_used: Some(300000.0),
            swa_usage: Some(0.75),
            swa_capacity: Some(400000.0),
            ..KvValues::default()
        };
        let k = KvUse::of(&v);
        assert_eq!(k.kv.capacity, None);
        assert_eq!(k.share(), Some((0.75, Pool::Swa)));
        assert_eq!(k.text(), "full 0.0%, SWA 75.0% (300000/400000 tokens)");
        // No full-attention pool: the sliding-window pool's bytes alone.
        assert_eq!(k.used_bytes(None, Some(4.0 * GIB)), Some(3.0 * GIB));
    }
}
