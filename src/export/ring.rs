//! The live page's chart data: each rank's KV-cache share sampled in the process, the last
//! [`POINTS`] samples per rank (15 minutes at one sample every 5 s). Bounded: one ring per rank
//! the state holds (itself capped by `StateConfig::max_ranks_total`), each at most [`POINTS`]
//! long; ranks gone from the state are forgotten at the next sample. No database: a restart
//! starts the chart afresh.

use std::collections::{HashMap, VecDeque};

use crate::readout::{Model, RankId};

/// Samples kept per rank.
pub const POINTS: usize = 180;

/// `(server name, rank)`.
type Key = (String, RankId);

/// Per rank, `(unix seconds, KV share 0-1 or None where unknown)`, oldest first.
#[derive(Debug, Default)]
pub struct KvRing {
    series: HashMap<Key, VecDeque<(f64, Option<f64>)>>,
}

impl KvRing {
    /// Records every rank's KV share ([`crate::readout::Rank::kv_fraction`]) at `now`.
    pub fn observe(&mut self, model: &Model, now: f64) {
        let mut live = HashMap::with_capacity(self.series.len());
        for s in &model.servers {
            for r in &s.ranks {
                let key = (s.name.clone(), r.id.clone());
                let mut ring = self.series.remove(&key).unwrap_or_default();
                if ring.len() == POINTS {
                    ring.pop_front();
                }
                ring.push_back((now, r.kv_fraction()));
                live.insert(key, ring);
            }
        }
        self.series = live;
    }

    /// The samples of one rank, oldest first (empty for a rank never sampled).
    pub fn of(&self, server: &str, id: &RankId) -> Vec<(f64, Option<f64>)> {
        self.series
            .get(&(server.to_string(), id.clone()))
            .map(|r| r.iter().copied().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readout::{Rank, Server};

    fn model(ranks: &[(&str, f64)]) -> Model {
        Model {
            servers: vec![Server {
                name: "d".into(),
                ranks: ranks
                    .iter()
                    .map(|(tp, usage)| {
                        let mut id = RankId::default();
                        id.0[4] = tp.to_string();
                        Rank {
                            id,
                            token_usage: Some(*usage),
                            ..Rank::default()
                        }
                    })
                    .collect(),
                ..Server::default()
            }],
            ..Model::default()
        }
    }

    #[test]
    fn keeps_the_last_points_of_the_ranks_present() {
        let mut ring = KvRing::default();
        let tp = |t: &str| {
            let mut id = RankId::default();
            id.0[4] = t.to_string();
            id
        };
        for i in 0..POINTS + 5 {
            ring.observe(&model(&[("0", 0.5), ("1", 0.25)]), i as f64);
        }
        let s = ring.of("d", &tp("0"));
        assert_eq!(s.len(), POINTS);
        assert_eq!(s[0], (5.0, Some(0.5)));
        assert_eq!(s[POINTS - 1], ((POINTS + 4) as f64, Some(0.5)));
        // TP1 is gone from the state: forgotten.
        ring.observe(&model(&[("0", 0.75)]), 1000.0);
        assert!(ring.of("d", &tp("1")).is_empty());
        assert_eq!(ring.of("d", &tp("0")).last(), Some(&(1000.0, Some(0.75))));
    }
}
