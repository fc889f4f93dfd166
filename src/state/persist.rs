//! The state file (`--state.dir`): each server's startup facts (model and `server_args`, KV
//! pool size and capacity, capacity line, weights and graph memory), the journald cursors and
//! the first user of each user unit name per host ([`State::first_user`]), kept across
//! restarts of the exporter.
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

use super::{EngineType, RankState, SelfMetric, ServerKey, ServerState, State};
use crate::parse::fields::MAX_EXACT;
use crate::parse::patterns::{FieldTarget, Patterns};
use crate::record::{Ranks, ServerArgs, BAD_RANK};

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
    /// Who logged a user unit of each name first on each host ([`State::first_user`]).
    #[serde(default)]
    first_users: Vec<FirstUser>,
}

/// One entry of [`State::first_user`]'s table.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct FirstUser {
    server: String,
    host: String,
    user: String,
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
    /// What its stats lines said of the PD mode ([`ServerState::engine_hint`]: `unified`,
    /// `prefill`, `decode`): a server whose `server_args` has no `disaggregation_mode` keeps
    /// its `engine_type` across a restart of the exporter. Absent from files written before
    /// it was kept (read as none); an unknown value is dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    engine_hint: Option<String>,
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
            engine_hint: s.engine_hint.map(|e| e.as_str().to_string()),
        })
        .filter(|s| {
            s.args.is_some()
                || !s.facts.is_empty()
                || !s.ranks.is_empty()
                || s.engine_hint.is_some()
        })
        .collect();
    let first_users = state
        .first_users
        .iter()
        .map(|((server, host), user)| FirstUser {
            server: server.clone(),
            host: host.clone(),
            user: user.clone(),
        })
        .collect();
    let f = File {
        version: VERSION,
        servers,
        journal_cursors: cursors.clone(),
        first_users,
    };
    serde_json::to_string_pretty(&f).unwrap_or_default()
}

/// The largest state file read (a link to `/dev/zero` or a runaway file is refused, not read
/// until memory runs out). A full state (256 servers, 2,048 ranks) is about 1 MB; reading one
/// of this size takes about five times as much memory for a moment (the hostile pass's 58 MB
/// file took 319 MB, past the units' `MemoryMax=256M`).
const MAX_FILE: u64 = 16 << 20;

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
    let rules = crate::optfile::Rules {
        limit: MAX_FILE,
        what: "a state file",
        follow_links: false,
    };
    match crate::optfile::read_text_as(path, &rules) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// What a log line can give one metric, from the pattern file's fields that read it.
#[derive(Debug, Clone, Copy)]
struct Rule {
    /// Some field reads it (else nothing restores it).
    read: bool,
    /// Some field that reads it is `signed`.
    signed: bool,
    /// The largest scale of those fields: a value is at most 2^53 times it.
    scale: f64,
    /// Whether every field reads it unscaled.
    unscaled: bool,
}

impl Rule {
    /// Every metric's rule.
    fn all(pat: &Patterns) -> Vec<Rule> {
        let none = Rule {
            read: false,
            signed: false,
            scale: 0.0,
            unscaled: true,
        };
        let mut rules = vec![none; pat.metrics.len()];
        for t in pat.targets() {
            if let FieldTarget::Metric {
                id, scale, signed, ..
            } = *t
            {
                let r = &mut rules[id as usize];
                r.read = true;
                r.signed |= signed;
                r.scale = r.scale.max(scale);
                r.unscaled &= scale == 1.0;
            }
        }
        rules
    }

    /// Whether `v`, a fact of a metric named `name`, is one a log line could have given it:
    /// finite, within 2^53 times the largest scale, negative only where a field is signed,
    /// and a count of tokens, requests or bytes (the names' units) no fraction below one, and
    /// whole where it is read unscaled (`#token: N`; a scaled `2.82 GB` is 3027951943.68 bytes).
    fn allows(&self, name: &str, v: f64) -> bool {
        let counted = ["_tokens", "_bytes", "_reqs", "_len"]
            .iter()
            .any(|u| name.ends_with(u));
        self.read
            && v.is_finite()
            && v.abs() <= MAX_EXACT * self.scale
            && (self.signed || v >= 0.0)
            && (!counted || v == 0.0 || v.abs() >= 1.0)
            && (!counted || !self.unscaled || v.fract() == 0.0)
    }
}

/// Restores the startup facts of a state file into `state` (servers and ranks created as
/// needed, facts only: no stats, so nothing reads as current activity), within the state's
/// caps (servers, ranks per server, ranks in all). Facts are held to the rules of the lines
/// they came from ([`Rule`]) and ranks to the parser's (none is [`BAD_RANK`]): one that fails
/// is dropped, counted (`sglang_log_exporter_restored_refused_total`) and warned about, so a
/// hand-edited or corrupt file never serves a value a log line would have been refused for. Each restored server is unclaimed since
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
    let rules = Rule::all(&pat);
    let mut refused = 0u32;
    // Puts the facts that keep to their rules; how many do not.
    let put = |facts: &BTreeMap<String, f64>, values: &mut [f64], known: &mut [bool]| {
        let mut refused = 0;
        for (id, v) in facts {
            let Some(i) = pat.metric_by_id(id) else {
                continue;
            };
            let i = i as usize;
            if !rules[i].allows(&pat.metrics[i].name, *v) {
                refused += 1;
                continue;
            }
            values[i] = *v;
            known[i] = true;
        }
        refused
    };
    for s in f.servers {
        // Names and the model are label values: bounded as the inputs' are.
        let key = ServerKey::new(&s.server, &s.engine);
        if state.servers.len() >= state.cfg.max_servers || state.servers.contains_key(&key) {
            continue;
        }
        let mut srv = ServerState::new(n);
        srv.args = s.args.as_ref().map(ServerArgs::bounded);
        srv.last_seen = s.last_seen;
        srv.unclaimed_since = Some(s.unclaimed_since.unwrap_or(now).min(now));
        srv.engine_hint = match s.engine_hint.as_deref() {
            Some("unified") => Some(EngineType::Unified),
            Some("prefill") => Some(EngineType::Prefill),
            Some("decode") => Some(EngineType::Decode),
            _ => None,
        };
        refused += put(&s.facts, &mut srv.values, &mut state.fact_metrics);
        for r in s.ranks {
            // The caps hold for restored ranks too, and each gives way to a rank an input
            // names when a cap is full (`State::make_room`): they never crowd out the inputs'.
            if srv.ranks.len() >= state.cfg.max_ranks
                || state.ranks_total >= state.cfg.max_ranks_total
            {
                break;
            }
            let ranks = r.ranks();
            if ranks.has_bad() {
                refused += 1;
                continue;
            }
            let ranks = srv.rank_key(&ranks);
            if srv.ranks.contains_key(&ranks) {
                continue;
            }
            let mut rs = RankState::new(n);
            refused += put(&r.facts, &mut rs.values, &mut state.fact_metrics);
            rs.restored = true;
            srv.ranks.insert(ranks, rs);
            srv.restored_ranks += 1;
            state.ranks_total += 1;
        }
        state.servers.insert(key, srv);
    }
    for u in &f.first_users {
        state.first_user(&u.server, &u.host, &u.user);
    }
    if refused > 0 {
        tracing::warn!(
            file = %path.display(),
            refused,
            "facts or ranks of the state file that no log line could give (negative, absurd, \
             fractional counts, a rank number past {}) are dropped",
            BAD_RANK - 1
        );
        state.add_self(SelfMetric::RestoredRefused, "", f64::from(refused));
    }
    state.generation += 1;
    state.restored_left = true;
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
        // Who logged a user unit of a name first on a host (hostile pass 31, H6).
        assert!(s.first_user("sglang", "h", "user@1000"));
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
        // Restarted, the exporter still gives the name to that user only.
        assert!(!fresh.first_user("sglang", "h", "user@1001"));
        assert!(fresh.first_user("sglang", "h", "user@1000"));
        // Another version is refused, a missing file is an empty start.
        std::fs::write(&file, r#"{"version":99,"servers":[]}"#).unwrap();
        assert!(restore(&mut fresh, &file, 0.0)
            .unwrap_err()
            .contains("version 99"));
        assert!(restore(&mut fresh, &dir.path().join("none.json"), 0.0)
            .unwrap()
            .is_empty());
    }

    /// The PD mode its stats lines told (no `disaggregation_mode` in its `server_args`, as
    /// before v0.4.5, or `server_args` rotated away) survives a restart of the exporter: the
    /// restored facts keep `engine_type="decode"` until the next stats line, never fall back to
    /// what the name suggests (`unified`). A file written before the hint was kept loads.
    #[test]
    fn the_engine_type_told_by_stats_lines_survives_a_restart() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let mut p = Parser::new(pat.clone());
        let mut s = State::new(pat.clone(), StateConfig::default());
        for l in [
            "[2026-06-03 10:00:00] server_args=ServerArgs(model_path='m', tp_size=1)",
            "[2026-06-03 10:00:01] KV Cache is allocated. #tokens: 1000, KV size: 1.00 GB",
            "[2026-06-03 10:00:03] Decode batch, #running-req: 7, #token: 700, token usage: 0.70, pre-allocated usage: 0.00, #prealloc-req: 0, #transfer-req: 1, #retracted-req: 0, #queue-req: 0",
        ] {
            let rec = p.parse(l).unwrap();
            s.apply("src", "srv", &rec, Some(1780480800.0));
        }
        let key = ServerKey::plain("srv");
        assert_eq!(s.servers[&key].engine_type("srv"), EngineType::Decode);
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        let text = snapshot(&s, &BTreeMap::new());
        assert!(text.contains(r#""engine_hint": "decode""#), "{text}");
        write_atomic(&file, &text).unwrap();
        let mut fresh = State::new(pat.clone(), StateConfig::default());
        restore(&mut fresh, &file, 1780480900.0).unwrap();
        assert_eq!(fresh.servers[&key].engine_type("srv"), EngineType::Decode);
        assert_eq!(fresh.servers[&key].engine_hint, Some(EngineType::Decode));

        // A file of before (no `engine_hint`) loads, with no hint; an unknown one is dropped.
        for (hint, want) in [("", None), (r#", "engine_hint": "mixed""#, None)] {
            let old = format!(
                r#"{{"version":1,"servers":[{{"server":"srv","args":null,"facts":{{"max_total_num_tokens":1000.0}},"ranks":[],"last_seen":1780480800.0{hint}}}]}}"#
            );
            std::fs::write(&file, old).unwrap();
            let mut fresh = State::new(pat.clone(), StateConfig::default());
            restore(&mut fresh, &file, 1780480900.0).unwrap();
            let srv = &fresh.servers[&key];
            assert_eq!(srv.engine_hint, want);
            assert_eq!(
                srv.values[pat.metric_by_id("max_total_num_tokens").unwrap() as usize],
                1000.0
            );
            assert_eq!(srv.engine_type("srv"), EngineType::Unified);
        }
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

    /// Repro 31: restored facts were not held to any rule: a negative KV capacity, a weight
    /// size of 1e308, half a byte of KV pool and a rank numbered 4294967295 (the parser's
    /// BAD_RANK) were all served. Each is held to what a log line could give (the same values in
    /// a line are refused); what fails is dropped and counted, what passes is kept as stored.
    #[test]
    fn restored_facts_keep_to_the_rules_of_their_lines() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        let rank = |tp: u64, facts: &str| {
            format!(
                r#"{{"dp":null,"pp":null,"attn_cp":null,"moe_dp":null,"tp":{tp},"ep":null,"facts":{{{facts}}}}}"#
            )
        };
        let ranks = [
            rank(0, r#""kv_pool_capacity_tokens":-7,"weight_memory_bytes":1e308,"kv_pool_size_bytes":3027951943.68"#),
            rank(4294967295, r#""kv_pool_capacity_tokens":5"#),
            rank(7, r#""kv_pool_size_bytes":0.5,"kv_pool_capacity_tokens":786432.5"#),
            rank(8, r#""weight_memory_bytes":-1997159792.64,"kv_pool_capacity_tokens":786432"#),
        ]
        .join(",");
        let text = format!(
            r#"{{"version":1,"journal_cursors":{{}},"first_users":[],"servers":[{{"server":"s","engine":"","args":null,"facts":{{"max_total_num_tokens":-5,"context_len":1e308,"chunked_prefill_size":8192}},"last_seen":1.0,"ranks":[{ranks}]}}]}}"#
        );
        std::fs::write(&file, text).unwrap();
        let mut s = State::new(pat.clone(), StateConfig::default());
        restore(&mut s, &file, 1780480900.0).unwrap();
        let id = |n: &str| pat.metric_by_id(n).unwrap() as usize;
        let srv = &s.servers[&ServerKey::plain("s")];
        assert!(srv.values[id("max_total_num_tokens")].is_nan());
        assert!(srv.values[id("context_len")].is_nan());
        assert_eq!(srv.values[id("chunked_prefill_size")], 8192.0);
        let tp = |n: u32| {
            &srv.ranks[&Ranks {
                tp: Some(n),
                ..Ranks::default()
            }]
                .values
        };
        assert!(tp(0)[id("kv_pool_capacity_tokens")].is_nan());
        assert!(tp(0)[id("weight_memory_bytes")].is_nan());
        assert_eq!(tp(0)[id("kv_pool_size_bytes")], 3027951943.68);
        assert!(tp(7)[id("kv_pool_size_bytes")].is_nan());
        assert!(tp(7)[id("kv_pool_capacity_tokens")].is_nan());
        // A signed field's fact may be negative (the memory a draft model's loading freed).
        assert_eq!(tp(8)[id("weight_memory_bytes")], -1997159792.64);
        assert_eq!(tp(8)[id("kv_pool_capacity_tokens")], 786432.0);
        assert_eq!(srv.ranks.len(), 3, "no rank 4294967295");
        assert_eq!(
            s.self_metrics[&(SelfMetric::RestoredRefused, String::new())],
            7.0
        );
    }

    /// A state file's JSON text of `servers` servers `s0`, `s1`... holding `ranks` restored
    /// ranks (TP0, TP1...) each, every rank with a KV pool capacity: no input names them.
    fn restored_file(dir: &Path, servers: u32, ranks: u32) -> PathBuf {
        let rank = |t: u32| {
            format!(
                r#"{{"dp":null,"pp":null,"attn_cp":null,"moe_dp":null,"tp":{t},"ep":null,"facts":{{"kv_pool_capacity_tokens":1000.0}}}}"#
            )
        };
        let server = |s: u32| {
            let ranks: Vec<String> = (0..ranks).map(rank).collect();
            format!(
                r#"{{"server":"s{s}","engine":"","args":null,"facts":{{}},"last_seen":1.0,"ranks":[{}]}}"#,
                ranks.join(",")
            )
        };
        let all: Vec<String> = (0..servers).map(server).collect();
        let file = path(dir);
        std::fs::write(
            &file,
            format!(
                r#"{{"version":1,"journal_cursors":{{}},"servers":[{}]}}"#,
                all.join(",")
            ),
        )
        .unwrap();
        file
    }

    const DECODE: &str = "[2026-11-30 15:00:00 TP0] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, #queue-req: 0";

    /// The hostile pass's F4: a state file of 16 servers x 2,000 ranks that no input names took
    /// the whole budget of 2,048 ranks, and the input's own TP0 was refused. A restored rank no
    /// line or API named gives way to it (one of a server no input named first), counted.
    #[test]
    fn restored_ranks_give_way_to_the_inputs_own() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let mut p = Parser::new(pat.clone());
        let dir = tempfile::tempdir().unwrap();
        let file = restored_file(dir.path(), 16, 2000);
        let mut s = State::new(pat.clone(), StateConfig::default());
        restore(&mut s, &file, 1780480800.0).unwrap();
        let ranks =
            |st: &State, n: &str| st.servers.get(&ServerKey::plain(n)).map(|x| x.ranks.len());
        // Within the caps: 1,024 per server, 2,048 in all.
        assert_eq!(
            (ranks(&s, "s0"), ranks(&s, "s1"), ranks(&s, "s2")),
            (Some(1024), Some(1024), Some(0))
        );
        assert_eq!(s.ranks_total, 2048);
        s.apply("src", "s", &p.parse(DECODE).unwrap(), Some(1780480800.0));
        let running = pat.metric_by_id("num_running_reqs").unwrap() as usize;
        let own = &s.servers[&ServerKey::plain("s")].ranks[&Ranks {
            tp: Some(0),
            ..Ranks::default()
        }];
        assert_eq!(own.values[running], 1.0);
        assert_eq!(s.dropped_series, 0);
        assert_eq!(
            s.self_metrics[&(crate::state::SelfMetric::RestoredGaveWay, String::new())],
            1.0
        );
        // The last rank of the first restored server no input named gave way.
        assert_eq!(ranks(&s, "s0"), Some(1023));
        assert!(!s.servers[&ServerKey::plain("s0")]
            .ranks
            .contains_key(&Ranks {
                tp: Some(1023),
                ..Ranks::default()
            }));
        assert_eq!(s.ranks_total, 2048);
    }

    /// Restored ranks of a server an input names give way too, after those of unnamed servers,
    /// one per rank the input brings; a rank a line named is kept, and once no restored rank is
    /// left the cap refuses as before. The per-server cap and the servers cap work alike.
    #[test]
    fn only_unconfirmed_restored_entries_give_way_and_then_the_caps_refuse() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let mut p = Parser::new(pat.clone());
        let dir = tempfile::tempdir().unwrap();
        let file = restored_file(dir.path(), 2, 3);
        let cfg = StateConfig {
            max_ranks: 4,
            max_ranks_total: 6,
            max_servers: 3,
            ..StateConfig::default()
        };
        let mut s = State::new(pat.clone(), cfg);
        restore(&mut s, &file, 1780480800.0).unwrap();
        s.claim("s1");
        let line = |tp: u32| DECODE.replace("TP0", &format!("TP{tp}"));
        let mut apply = |s: &mut State, srv: &str, tp: u32| {
            s.apply("src", srv, &p.parse(&line(tp)).unwrap(), Some(1780480800.0));
        };
        let tps = |s: &State, n: &str| -> Vec<u32> {
            s.servers[&ServerKey::plain(n)]
                .ranks
                .keys()
                .filter_map(|r| r.tp)
                .collect()
        };
        // s1's TP0 is named by a line: confirmed.
        apply(&mut s, "s1", 0);
        // A third server fits (3 servers); its ranks take the unnamed s0's first.
        for tp in 0..3 {
            apply(&mut s, "new", tp);
        }
        assert_eq!(tps(&s, "s0"), Vec::<u32>::new());
        assert_eq!(tps(&s, "new"), [0, 1, 2]);
        // Then s1's restored ranks (the last first), never its confirmed TP0; nothing gives
        // way for a rank its server's own cap refuses.
        apply(&mut s, "new", 3);
        assert_eq!(tps(&s, "s1"), [0, 1]);
        apply(&mut s, "new", 4);
        assert_eq!(tps(&s, "s1"), [0, 1]);
        assert_eq!(
            s.dropped_by_cap[&crate::state::caps::Cap::Ranks],
            1,
            "new's TP4 is over its own cap of 4"
        );
        apply(&mut s, "s1", 5);
        assert_eq!(tps(&s, "s1"), [0, 5]);
        assert_eq!(s.ranks_total, 6);
        // Nothing restored is left: the cap refuses.
        apply(&mut s, "s1", 6);
        assert_eq!(s.dropped_by_cap[&crate::state::caps::Cap::RanksTotal], 1);
        // A fourth server takes the place of the unnamed, emptied s0.
        apply(&mut s, "fourth", 0);
        assert!(!s.servers.contains_key(&ServerKey::plain("s0")));
        assert!(s.servers[&ServerKey::plain("fourth")].ranks.is_empty());
        assert_eq!(s.dropped_by_cap[&crate::state::caps::Cap::RanksTotal], 2);
        assert_eq!(
            s.self_metrics[&(crate::state::SelfMetric::RestoredGaveWay, String::new())],
            6.0
        );
        // The server cap refuses when no restored server is left to give way.
        apply(&mut s, "fifth", 0);
        assert_eq!(s.dropped_by_cap[&crate::state::caps::Cap::Servers], 1);
    }

    /// A server's own restored rank gives way to one its input prints when the server is at
    /// its own cap; the ranks the server's API feeds come first as well.
    #[test]
    fn the_servers_own_cap_and_the_api_make_restored_ranks_give_way() {
        use crate::state::live::{ApiReading, DpLoad};
        let pat = Arc::new(Patterns::embedded().unwrap());
        let mut p = Parser::new(pat.clone());
        let dir = tempfile::tempdir().unwrap();
        let file = restored_file(dir.path(), 2, 4);
        let cfg = StateConfig {
            max_ranks: 4,
            max_ranks_total: 8,
            ..StateConfig::default()
        };
        let mut s = State::new(pat.clone(), cfg);
        restore(&mut s, &file, 1780480800.0).unwrap();
        s.claim("s0");
        let line = DECODE.replace("TP0", "TP9");
        s.apply("src", "s0", &p.parse(&line).unwrap(), Some(1780480800.0));
        let tps = |s: &State, n: &str| -> Vec<u32> {
            s.servers[&ServerKey::plain(n)]
                .ranks
                .keys()
                .filter_map(|r| r.tp)
                .collect()
        };
        assert_eq!(tps(&s, "s0"), [0, 1, 2, 9]);
        assert_eq!((s.dropped_series, s.ranks_total), (0, 8));
        // The API of a new server: its DP rank 0 takes s1's (unnamed) last restored rank.
        let reading = ApiReading {
            endpoint: "/v1/loads",
            info: None,
            loads: vec![DpLoad {
                dp_rank: 0,
                values: vec![("num_running_reqs", 9.0)],
                bad: 0,
            }],
        };
        s.apply_api("api", &reading, 1780480800.0);
        assert_eq!(tps(&s, "s1"), [0, 1, 2]);
        assert_eq!(s.servers[&ServerKey::plain("api")].ranks.len(), 1);
        assert_eq!((s.dropped_series, s.ranks_total), (0, 8));
        let gave = (crate::state::SelfMetric::RestoredGaveWay, String::new());
        assert_eq!(s.self_metrics[&gave], 2.0);
    }
}
