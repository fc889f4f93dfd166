//! Retractions in the last minute: `sglang_retractions_total` is a counter, so `top` keeps the
//! totals it saw at each refresh and reports the increase over the window (a drop, from a
//! restarted exporter, counts as a reset to 0, as `increase()` treats it). Increases seen while
//! the rank's last retraction line, or its last stats line, was older than the window are not
//! counted: that is a log's history being read at start-up, not a retraction of the last minute.

use std::collections::{HashMap, VecDeque};

use crate::readout::{Model, RankId};

type Key = (String, String, RankId);

/// The totals seen per rank over the last window, oldest first.
#[derive(Debug, Clone)]
pub struct History {
    window: f64,
    seen: HashMap<Key, VecDeque<(f64, f64)>>,
}

impl History {
    /// A history over `window` seconds (the last minute: 60).
    pub fn new(window: f64) -> History {
        History {
            window,
            seen: HashMap::new(),
        }
    }

    /// The window in seconds.
    pub fn window(&self) -> f64 {
        self.window
    }

    /// Records every rank's retraction total at `now`; forgets what is older than the window
    /// (keeping the newest older total as the window's baseline) and ranks that are gone.
    pub fn observe(&mut self, model: &Model, now: f64) {
        let mut live = HashMap::with_capacity(self.seen.len());
        for s in &model.servers {
            for r in &s.ranks {
                let Some(total) = r.retractions else { continue };
                let key = (s.instance.clone(), s.name.clone(), r.id.clone());
                let mut q = self.seen.remove(&key).unwrap_or_default();
                // A rank whose last retraction or last stats line is older than the window
                // (history being read at start-up, or a rank that went quiet) retracted nothing
                // within it: what its total gained so far becomes the baseline. The retraction's
                // own time decides even when a refresh fell between it and a later stats line.
                let old = |t: Option<f64>| t.is_some_and(|t| t < now - self.window);
                if old(r.last_stats) || old(r.last_retraction) {
                    q.clear();
                }
                q.push_back((now, total));
                while q.len() > 1 && q[1].0 <= now - self.window {
                    q.pop_front();
                }
                live.insert(key, q);
            }
        }
        self.seen = live;
    }

    /// Retractions of a rank over the window: the increase since the window's baseline, or
    /// since the first refresh that saw the rank when that was less than a window ago. `None`
    /// for a rank never seen.
    pub fn recent(&self, instance: &str, server: &str, id: &RankId) -> Option<f64> {
        let q = self
            .seen
            .get(&(instance.to_string(), server.to_string(), id.clone()))?;
        let mut sum = 0.0;
        for (a, b) in q.iter().zip(q.iter().skip(1)) {
            sum += if b.1 >= a.1 { b.1 - a.1 } else { b.1 };
        }
        Some(sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::readout::{Rank, Server};

    fn model(total: f64) -> Model {
        Model {
            servers: vec![Server {
                name: "d".into(),
                ranks: vec![Rank {
                    retractions: Some(total),
                    ..Rank::default()
                }],
                ..Server::default()
            }],
            ..Model::default()
        }
    }

    #[test]
    fn increase_over_the_last_minute_with_resets() {
        let id = RankId::default();
        let mut h = History::new(60.0);
        h.observe(&model(5.0), 0.0);
        assert_eq!(
            h.recent("", "d", &id),
            Some(0.0),
            "the first total is the baseline"
        );
        h.observe(&model(7.0), 30.0);
        h.observe(&model(8.0), 50.0);
        assert_eq!(h.recent("", "d", &id), Some(3.0));
        // At 90 s the baseline is the total seen at 30 s.
        h.observe(&model(8.0), 90.0);
        assert_eq!(h.recent("", "d", &id), Some(1.0));
        // A restart: 8 → 2 counts 2.
        h.observe(&model(2.0), 95.0);
        assert_eq!(h.recent("", "d", &id), Some(3.0));
        assert_eq!(h.recent("", "x", &id), None);
    }

    #[test]
    fn history_read_at_start_up_is_not_recent() {
        let id = RankId::default();
        let mut h = History::new(60.0);
        let at = |total: f64, last: f64| {
            let mut m = model(total);
            m.servers[0].ranks[0].last_stats = Some(last);
            m
        };
        h.observe(&at(0.0, 100.0), 1000.0);
        // The reader catches up: lines of long ago, with two retractions.
        h.observe(&at(2.0, 200.0), 1001.0);
        assert_eq!(h.recent("", "d", &id), Some(0.0));
        // Live lines: a retraction now counts.
        h.observe(&at(3.0, 1001.5), 1002.0);
        assert_eq!(h.recent("", "d", &id), Some(1.0));
    }

    /// A refresh between an old retraction and a recent stats line (the reader mid-way through
    /// a log's history): the retraction is still not of the last minute.
    #[test]
    fn an_old_retraction_read_after_a_refresh_is_not_recent() {
        let id = RankId::default();
        let mut h = History::new(60.0);
        let at = |total: f64, last: f64, retracted: Option<f64>| {
            let mut m = model(total);
            m.servers[0].ranks[0].last_stats = Some(last);
            m.servers[0].ranks[0].last_retraction = retracted;
            m
        };
        h.observe(&at(0.0, 100.0, None), 1000.0);
        h.observe(&at(1.0, 990.0, Some(200.0)), 1000.0);
        assert_eq!(h.recent("", "d", &id), Some(0.0));
        // A retraction of the last minute counts.
        h.observe(&at(2.0, 995.0, Some(995.0)), 1001.0);
        assert_eq!(h.recent("", "d", &id), Some(1.0));
    }
}
