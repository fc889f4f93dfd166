//! The GPUs a foreign prefix names (`[… GPU=4 TP=0] `, see [`crate::parse::foreign`]). A GPU
//! is the device of one rank: the ranks of one server print different GPUs (`GPU=0 TP=0`,
//! `GPU=1 TP=1`), so the GPU is no part of the writer's name and the ranks stay one server's.
//! Two schedulers that print the same rank on two GPUs (two servers on one host, each with
//! its `TP=0`) are two writers, though: merging them would show one's values as the other's.
//! So a GPU whose line names a rank (under the same server and engine) that another GPU's line
//! already named is a writer of its own, an engine named after it (`engine="GPU=4"`, after the
//! line's engine if it has one) from that line on.
//!
//! Decided in log order, where lines are applied (by [`super::nodes::Nodes::engine_of`]), as
//! nodes are.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use crate::record::{Ranks, Record};

/// Ranks remembered per source; past it a new rank's GPU is not checked (its lines are the
/// line's engine's, as before any split).
const MAX_RANKS: usize = 4096;

/// GPUs that are writers of their own, per source; past it the others are not split.
const MAX_OWN: usize = 256;

/// The GPUs of one source's lines.
#[derive(Debug, Default)]
pub struct Gpus {
    /// (hash of server and engine, ranks) → the GPU whose line named that rank first.
    first: HashMap<(u64, Ranks), u32>,
    /// (hash of server and engine, GPU) of the GPUs that are writers of their own.
    own: HashSet<(u64, u32)>,
    buf: String,
}

impl Gpus {
    /// The engine of `rec`, a line of `server` whose engine is `engine` so far: that one,
    /// unless its GPU is a writer of its own (see the module docs).
    pub fn engine<'s>(
        &'s mut self,
        server: &str,
        engine: Option<&'s str>,
        rec: &Record<'_>,
    ) -> Option<&'s str> {
        let Some(gpu) = rec.gpu else {
            return engine;
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (server, engine.unwrap_or("")).hash(&mut h);
        let who = h.finish();
        if !self.own.contains(&(who, gpu)) {
            let full = self.first.len() >= MAX_RANKS;
            match self.first.get(&(who, rec.ranks)) {
                Some(&g) if g != gpu && self.own.len() < MAX_OWN => {
                    tracing::warn!(
                        server,
                        engine = engine.unwrap_or(""),
                        gpu,
                        first = g,
                        "two GPUs print the same rank (two schedulers of one rank): lines of GPU={gpu} are an engine of their own"
                    );
                    self.own.insert((who, gpu));
                }
                None if !full => {
                    self.first.insert((who, rec.ranks), gpu);
                    return engine;
                }
                _ => return engine,
            }
        }
        self.buf.clear();
        if let Some(e) = engine {
            self.buf.push_str(e);
            self.buf.push(' ');
        }
        use std::fmt::Write;
        let _ = write!(self.buf, "GPU={gpu}");
        Some(self.buf.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::patterns::Class;

    fn line(tp: u32, gpu: Option<u32>) -> Record<'static> {
        Record {
            kind: 0,
            class: Class::Decode,
            time: None,
            ranks: Ranks {
                tp: Some(tp),
                ..Ranks::default()
            },
            gpu,
            values: &[],
            bad_metrics: &[],
            line: "",
            unknown_text: "",
            unknown: &[],
            bad_values: 0,
            engine: None,
            access: None,
            server_args: None,
            listen: None,
            request: None,
        }
    }

    #[test]
    fn a_second_gpu_of_one_rank_is_its_own_engine_and_a_servers_gpus_are_one() {
        let mut g = Gpus::default();
        let mut e = |server: &str, engine: Option<&'static str>, tp, gpu| {
            g.engine(server, engine, &line(tp, gpu)).map(str::to_string)
        };
        // One server's ranks on their GPUs: one writer.
        assert_eq!(e("s", None, 0, Some(0)), None);
        assert_eq!(e("s", None, 1, Some(1)), None);
        assert_eq!(e("s", None, 0, Some(0)), None);
        // Another scheduler of TP0 on GPU 4: its own, all its lines from then on.
        assert_eq!(e("s", None, 0, Some(4)), Some("GPU=4".into()));
        assert_eq!(e("s", None, 1, Some(4)), Some("GPU=4".into()));
        assert_eq!(e("s", None, 0, Some(0)), None);
        // Under another engine or server the same rank and GPU are that one's.
        assert_eq!(e("s", Some("m2"), 0, Some(4)), Some("m2".into()));
        assert_eq!(e("s", Some("m2"), 0, Some(5)), Some("m2 GPU=5".into()));
        assert_eq!(e("t", None, 0, Some(4)), None);
        // A line without a GPU is its engine's.
        assert_eq!(e("s", None, 0, None), None);
    }
}
