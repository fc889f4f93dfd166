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
    /// Restored and not claimed since this time (kept, so that restarts do not renew it).
    #[serde(default)]
    unclaimed_since: Option<f64>,
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
            unclaimed_since: s.unclaimed_since,
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

/// The largest state file read (a link to `/dev/zero` or a runaway file is refused, not read
/// until memory runs out). A full state (256 servers, 2,048 ranks) is well under 10 MB.
const MAX_FILE: u64 = 64 << 20;

/// A new file in `dir` that no one else has (a unique name, `O_CREAT|O_EXCL`, `O_NOFOLLOW`):
/// a planted symlink or another exporter's temporary file is never opened. Returns the file
/// and its path.
///
/// # Errors
/// The I/O error.
pub fn create_private(dir: &Path, stem: &str) -> std::io::Result<(std::fs::File, PathBuf)> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!(
        ".{stem}.{}.{}.{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let path = dir.join(name);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o600)
        .open(&path)?;
    Ok((f, path))
}

/// Writes `text` to `path` atomically (a private temporary file beside it, fsync, rename; the
/// temporary file removed on any error). The rename replaces a symlink at `path`, never writes
/// through it.
///
/// # Errors
/// The I/O error.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let (mut f, tmp) = create_private(dir, "state.json.tmp")?;
    let done = f
        .write_all(text.as_bytes())
        .and_then(|_| f.sync_all())
        .and_then(|_| std::fs::rename(&tmp, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// The state file's text: opened without following a symlink and without blocking (a FIFO),
/// read only if it is a regular file of at most [`MAX_FILE`] bytes. `None` when there is none.
fn read_file(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let f = match f {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(format!("{}: a symlink, not read", path.display()))
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let m = f
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !m.is_file() {
        return Err(format!("{}: not a regular file, not read", path.display()));
    }
    if m.len() > MAX_FILE {
        return Err(format!(
            "{}: {} bytes, more than a state file holds ({MAX_FILE}), not read",
            path.display(),
            m.len()
        ));
    }
    let mut text = String::new();
    f.take(MAX_FILE)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some(text))
}

/// Restores the startup facts of a state file into `state` (servers and ranks created as
/// needed, facts only: no stats, so nothing reads as current activity), within the state's
/// caps (servers, ranks per server, ranks in all). Each restored server is unclaimed since
/// `now`: it is removed `retired_expiry` later unless an input names it
/// ([`State::claim`]), a discovered source sets its labels, or a line of it is read.
/// Returns the journald cursors.
///
/// # Errors
/// A message for a file that cannot be read (a symlink, not a regular file, too large) or is
/// not a state file of this version.
pub fn restore(
    state: &mut State,
    path: &Path,
    now: f64,
) -> Result<BTreeMap<String, String>, String> {
    let Some(text) = read_file(path)? else {
        return Ok(BTreeMap::new());
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
        if state.servers.len() >= state.cfg.max_servers || state.servers.contains_key(&key) {
            continue;
        }
        let mut srv = ServerState::new(n);
        srv.args = s.args;
        srv.last_seen = s.last_seen;
        srv.unclaimed_since = Some(s.unclaimed_since.unwrap_or(now).min(now));
        put(&s.facts, &mut srv.values, &mut state.fact_metrics);
        for r in s.ranks {
            // The caps hold for restored ranks too: they must not crowd out the inputs' own.
            if srv.ranks.len() >= state.cfg.max_ranks
                || state.ranks_total >= state.cfg.max_ranks_total
            {
                break;
            }
            let ranks = r.ranks();
            if srv.ranks.contains_key(&ranks) {
                continue;
            }
            let mut rs = RankState::new(n);
            put(&r.facts, &mut rs.values, &mut state.fact_metrics);
            srv.ranks.insert(ranks, rs);
            state.ranks_total += 1;
        }
        state.servers.insert(key, srv);
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
        assert_eq!(restore(&mut fresh, &file, 1780480900.0).unwrap(), cursors);
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
        // Restored, it is unclaimed until an input names it; then the same snapshot again:
        // nothing lost or invented.
        assert_eq!(srv.unclaimed_since, Some(1780480900.0));
        fresh.claim("decode");
        assert_eq!(snapshot(&fresh, &cursors), snapshot(&s, &cursors));
        // Another version is refused, a missing file is an empty start.
        std::fs::write(&file, r#"{"version":99,"servers":[]}"#).unwrap();
        assert!(restore(&mut fresh, &file, 0.0)
            .unwrap_err()
            .contains("version 99"));
        assert!(restore(&mut fresh, &dir.path().join("none.json"), 0.0)
            .unwrap()
            .is_empty());
    }

    /// Repro 18: the state directory is not trusted. A symlink at the state file or among the
    /// temporary names is never written through; a symlink, a FIFO or a huge file at the state
    /// file is refused without reading it (no hang, no memory run-away).
    #[test]
    fn the_state_directory_is_not_trusted() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let file = path(dir.path());
        std::os::unix::fs::symlink(&victim, &file).unwrap();
        // Read: refused as a symlink.
        let mut s = State::new(pat.clone(), StateConfig::default());
        let e = restore(&mut s, &file, 0.0).unwrap_err();
        assert!(e.contains("symlink"), "{e}");
        // Written: the link is replaced by the new file; its target is untouched.
        write_atomic(&file, "{}").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!std::fs::symlink_metadata(&file)
            .unwrap()
            .file_type()
            .is_symlink());
        // A private file never opens an existing name (planted links included).
        let (_, a) = create_private(dir.path(), "t").unwrap();
        let (_, b) = create_private(dir.path(), "t").unwrap();
        assert_ne!(a, b);
        // A FIFO is refused at once (opened without blocking), a huge sparse file unread.
        let fifo = dir.path().join("fifo.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = restore(&mut s, &fifo, 0.0).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let big = dir.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_FILE + 1)
            .unwrap();
        let e = restore(&mut s, &big, 0.0).unwrap_err();
        assert!(e.contains("not read"), "{e}");
    }

    /// Repro 14 and 18(c): restored ranks count against the caps, and a restored server that no
    /// input claims is removed `retired_expiry` after the restore; a claimed one stays.
    #[test]
    fn restored_servers_keep_to_the_caps_and_expire_unless_claimed() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let mut p = Parser::new(pat.clone());
        let mut s = State::new(pat.clone(), StateConfig::default());
        for srv in ["gone", "kept"] {
            for tp in 0..40 {
                let l = format!("[2026-06-03 10:00:01 TP{tp}] KV Cache is allocated. #tokens: 1000, KV size: 1.00 GB");
                s.apply("src", srv, &p.parse(&l).unwrap(), Some(1780480800.0));
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        write_atomic(&file, &snapshot(&s, &BTreeMap::new())).unwrap();
        let cfg = StateConfig {
            max_ranks: 30,
            max_ranks_total: 50,
            retired_expiry: 300.0,
            ..StateConfig::default()
        };
        let mut fresh = State::new(pat.clone(), cfg);
        let t0 = 1780490000.0;
        restore(&mut fresh, &file, t0).unwrap();
        let ranks =
            |st: &State, n: &str| st.servers.get(&ServerKey::plain(n)).map(|x| x.ranks.len());
        assert_eq!(ranks(&fresh, "gone"), Some(30));
        assert_eq!(ranks(&fresh, "kept"), Some(20));
        assert_eq!(fresh.ranks_total, 50);
        fresh.claim("kept");
        fresh.expire(t0 + 299.0);
        assert_eq!(ranks(&fresh, "gone"), Some(30));
        fresh.expire(t0 + 301.0);
        assert_eq!(ranks(&fresh, "gone"), None);
        assert_eq!(ranks(&fresh, "kept"), Some(20));
    }
}
