//! The state file (`--state.dir`): each server's startup facts (model and `server_args`, KV
//! pool size and capacity, capacity line, weights and graph memory) and the journald cursors,
//! kept across restarts of the exporter.
//!
//! SGLang prints its startup facts once. A log rotated since then, or a journal vacuumed, no
//! longer holds them, and an exporter restarted then would never learn them again. So they are
//! written to `DIR/state.json` (atomically: a temporary file, fsync, rename) while running and
//! at exit, and read back at start; lines read later overwrite them as usual. The file is
//! versioned; one of another version, or unreadable, is ignored with a warning (the exporter
//! then starts as without it).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{RankState, ServerKey, ServerState, State};
use crate::record::{Ranks, ServerArgs};

/// Version of the file's layout.
const VERSION: u32 = 1;

/// The file's name in `--state.dir`.
pub const FILE: &str = "state.json";

#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct File {
    version: u32,
    servers: Vec<Server>,
    /// Unit → cursor of the last journal entry read.
    #[serde(default)]
    journal_cursors: BTreeMap<String, String>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Server {
    server: String,
    #[serde(default)]
    engine: String,
    args: Option<ServerArgs>,
    /// Metric id (as in the pattern file) → value, for server-scope facts.
    facts: BTreeMap<String, f64>,
    ranks: Vec<Rank>,
    last_seen: Option<f64>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Rank {
    dp: Option<u32>,
    pp: Option<u32>,
    attn_cp: Option<u32>,
    moe_dp: Option<u32>,
    tp: Option<u32>,
    ep: Option<u32>,
    facts: BTreeMap<String, f64>,
}

impl Rank {
    fn new(r: &Ranks, facts: BTreeMap<String, f64>) -> Rank {
        Rank {
            dp: r.dp,
            pp: r.pp,
            attn_cp: r.attn_cp,
            moe_dp: r.moe_dp,
            tp: r.tp,
            ep: r.ep,
            facts,
        }
    }

    fn ranks(&self) -> Ranks {
        Ranks {
            dp: self.dp,
            pp: self.pp,
            attn_cp: self.attn_cp,
            moe_dp: self.moe_dp,
            tp: self.tp,
            ep: self.ep,
        }
    }
}

/// The path of the state file in `dir`.
pub fn path(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// The startup facts of `state` (and `cursors`) as the file's JSON text.
pub fn snapshot(state: &State, cursors: &BTreeMap<String, String>) -> String {
    let pat = state.patterns();
    let facts = |values: &[f64]| -> BTreeMap<String, f64> {
        values
            .iter()
            .enumerate()
            .filter(|(id, v)| state.fact_metrics[*id] && !v.is_nan())
            .map(|(id, v)| (pat.metrics[id].id.clone(), *v))
            .collect()
    };
    let servers = state
        .servers
        .iter()
        .map(|(k, s)| Server {
            server: k.server.clone(),
            engine: k.engine.clone(),
            args: s.args.clone(),
            facts: facts(&s.values),
            ranks: s
                .ranks
                .iter()
                .map(|(r, rs)| Rank::new(r, facts(&rs.values)))
                .filter(|r| !r.facts.is_empty())
                .collect(),
            last_seen: s.last_seen,
        })
        .filter(|s| s.args.is_some() || !s.facts.is_empty() || !s.ranks.is_empty())
        .collect();
    let f = File {
        version: VERSION,
        servers,
        journal_cursors: cursors.clone(),
    };
    serde_json::to_string_pretty(&f).unwrap_or_default()
}

/// Writes `text` to `path` atomically (temporary file, fsync, rename).
///
/// # Errors
/// The I/O error.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Restores the startup facts of a state file into `state` (servers and ranks created as
/// needed, facts only: no stats, so nothing reads as current activity). Returns the journald
/// cursors.
///
/// # Errors
/// A message for a file that cannot be read or is not a state file of this version.
pub fn restore(state: &mut State, path: &Path) -> Result<BTreeMap<String, String>, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let f: File = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a state file: {e}", path.display()))?;
    if f.version != VERSION {
        return Err(format!(
            "{}: state file version {} (this exporter writes {VERSION})",
            path.display(),
            f.version
        ));
    }
    let pat = state.pat.clone();
    let n = pat.metrics.len();
    let put = |facts: &BTreeMap<String, f64>, values: &mut [f64], known: &mut [bool]| {
        for (id, v) in facts {
            if let Some(i) = pat.metric_by_id(id) {
                values[i as usize] = *v;
                known[i as usize] = true;
            }
        }
    };
    for s in f.servers {
        let key = ServerKey {
            server: s.server,
            engine: s.engine,
        };
        let mut srv = ServerState::new(n);
        srv.args = s.args;
        srv.last_seen = s.last_seen;
        put(&s.facts, &mut srv.values, &mut state.fact_metrics);
        for r in s.ranks {
            let ranks = r.ranks();
            let mut rs = RankState::new(n);
            put(&r.facts, &mut rs.values, &mut state.fact_metrics);
            srv.ranks.insert(ranks, rs);
        }
        if state.servers.len() < state.cfg.max_servers {
            state.ranks_total += srv.ranks.len();
            state.servers.insert(key, srv);
        }
    }
    state.generation += 1;
    state.journal_cursors = f.journal_cursors.clone();
    Ok(f.journal_cursors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::patterns::Patterns;
    use crate::parse::Parser;
    use crate::state::StateConfig;
    use std::sync::Arc;

    #[test]
    fn facts_survive_a_restart_and_activity_does_not() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let mut p = Parser::new(pat.clone());
        let mut s = State::new(pat.clone(), StateConfig::default());
        for l in [
            "[2026-06-03 10:00:00] server_args=ServerArgs(model_path='m', served_model_name='served', tp_size=2, disaggregation_mode='decode')",
            "[2026-06-03 10:00:01 TP1] KV Cache is allocated. #tokens: 786432, KV size: 51.47 GB",
            "[2026-06-03 10:00:02 TP0] max_total_num_tokens=786432, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=256, context_len=163840",
            "[2026-06-03 10:00:03 TP1] Decode batch, #running-req: 7, #token: 700, token usage: 0.07, #queue-req: 0",
        ] {
            let rec = p.parse(l).unwrap();
            s.apply("src", "decode", &rec, Some(1780480800.0));
        }
        let mut cursors = BTreeMap::new();
        cursors.insert("u.service".to_string(), "s=1;i=2".to_string());
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        write_atomic(&file, &snapshot(&s, &cursors)).unwrap();

        let mut fresh = State::new(pat.clone(), StateConfig::default());
        assert_eq!(restore(&mut fresh, &file).unwrap(), cursors);
        let key = ServerKey::plain("decode");
        let srv = &fresh.servers[&key];
        assert_eq!(srv.model_name(), "served");
        assert_eq!(srv.engine_type("decode").as_str(), "decode");
        let id = |n: &str| pat.metric_by_id(n).unwrap() as usize;
        assert_eq!(srv.values[id("max_total_num_tokens")], 786432.0);
        let tp1 = &srv.ranks[&Ranks {
            tp: Some(1),
            ..Ranks::default()
        }];
        assert_eq!(tp1.values[id("kv_pool_capacity_tokens")], 786432.0);
        // Activity is not a fact: nothing of the decode line came back.
        assert!(tp1.values[id("num_running_reqs")].is_nan());
        assert!(!tp1.has_stats());
        // Same snapshot again: nothing lost or invented.
        assert_eq!(snapshot(&fresh, &cursors), snapshot(&s, &cursors));
        // Another version is refused, a missing file is an empty start.
        std::fs::write(&file, r#"{"version":99,"servers":[]}"#).unwrap();
        assert!(restore(&mut fresh, &file)
            .unwrap_err()
            .contains("version 99"));
        assert!(restore(&mut fresh, &dir.path().join("none.json"))
            .unwrap()
            .is_empty());
    }
}
