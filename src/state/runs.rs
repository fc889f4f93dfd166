//! A server's earlier runs: what a restart (a new `server_args` dump of the same source, see
//! `State::apply`) cleared, kept as counts so that a report on the whole input (`--once`'s
//! summary) still counts the scheduler lines of every run, not only of the last.

/// The runs of one server before its current one.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Runs {
    /// Restarts seen (new `server_args` dumps after a run's lines).
    pub restarts: u32,
    /// Stats lines (prefill and decode) of the runs before the current one.
    pub earlier_stats_lines: u64,
    /// Ranks (schedulers that printed a stats, startup or retraction line) of the run before
    /// the current one.
    pub earlier_ranks: usize,
    /// When the current run started (the time of its `server_args` line, Unix seconds), if
    /// it had one.
    pub restarted_at: Option<f64>,
}

impl Runs {
    /// The runs after a restart at `at` of a run that printed `stats_lines` stats lines over
    /// `ranks` ranks.
    pub fn restarted(self, stats_lines: u64, ranks: usize, at: Option<f64>) -> Runs {
        Runs {
            restarts: self.restarts.saturating_add(1),
            earlier_stats_lines: self.earlier_stats_lines.saturating_add(stats_lines),
            earlier_ranks: ranks,
            restarted_at: at.or(self.restarted_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_add_up() {
        let r = Runs::default()
            .restarted(3, 2, Some(10.0))
            .restarted(4, 1, None);
        assert_eq!(
            r,
            Runs {
                restarts: 2,
                earlier_stats_lines: 7,
                earlier_ranks: 1,
                restarted_at: Some(10.0)
            }
        );
    }
}
