//! Discovery of log files by glob (`--input.glob`): the pod logs of a Kubernetes node, or any
//! set of files that comes and goes.
//!
//! The globs are expanded again every `--input.scan-interval` (and at once when an entry is
//! created or removed in a glob's fixed leading directory, e.g. a pod directory appearing in
//! `/var/log/pods`). A file found is followed from its start by a [`crate::source::file::Tailer`]
//! of its own (started through [`Spawn`]); a file no longer found is closed after
//! `--deleted-file-grace`, its source and server retired ([`crate::state::State::retire_source`],
//! [`crate::state::State::retire_server`]), so their series disappear `--input.expiry` later:
//! a fleet whose pods churn does not grow series forever.
//!
//! Kubernetes layouts:
//! - CRI (`/var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log`, [`parse_cri`]): `n` is
//!   the container's restart count; only the highest `<n>.log` of a container is followed (a
//!   restart makes `1.log` current), rotated `<n>.log.<timestamp>` and `.gz` files never are
//!   (the tailer finishes a file renamed away by rotation itself).
//! - Docker (`/var/log/containers/<pod>_<namespace>_<container>-<id>.log`, [`parse_docker`]),
//!   usually symlinks into the CRI tree: the same file found both ways is followed once.
//!
//! Both give every series of the server `namespace`, `pod` and `container` labels; the `server`
//! label is the pod name ([`Naming`]).

use crate::source::pool::Handle;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant, UNIX_EPOCH};

use crate::state::{lock, SelfMetric, Shared};
use crate::stop::Stop;

/// Discovery settings (`--input.*`).
#[derive(Debug, Clone)]
pub struct DiscoverConfig {
    /// `--input.glob` patterns, as given.
    pub globs: Vec<String>,
    /// `--input.kubernetes-container`: containers whose logs are read (all when empty).
    pub containers: Vec<glob::Pattern>,
    /// `--input.max-files`: most files followed at once.
    pub max_files: usize,
    /// `--input.scan-interval`: time between two expansions of the globs.
    pub scan_interval: Duration,
    /// `--deleted-file-grace`: how long a file no longer found is still followed.
    pub grace: Duration,
    /// `--input.expiry`: how long a retired server's name stays reserved for it.
    pub expiry: Duration,
}

impl DiscoverConfig {
    /// Checks the patterns and limits.
    ///
    /// # Errors
    /// A message naming a bad glob or container pattern, `--input.max-files 0` or a scan
    /// interval under 10 ms.
    pub fn new(
        globs: &[String],
        containers: &[String],
        max_files: usize,
        scan_interval: Duration,
        grace: Duration,
        expiry: Duration,
    ) -> Result<DiscoverConfig, String> {
        for g in globs {
            glob::Pattern::new(g).map_err(|e| format!("--input.glob {g:?}: {e}"))?;
        }
        let containers = containers
            .iter()
            .map(|c| {
                glob::Pattern::new(c)
                    .map_err(|e| format!("--input.kubernetes-container {c:?}: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if max_files == 0 {
            return Err("--input.max-files must be at least 1".into());
        }
        if scan_interval < Duration::from_millis(10) {
            return Err("--input.scan-interval must be at least 10ms".into());
        }
        Ok(DiscoverConfig {
            globs: globs.to_vec(),
            containers,
            max_files,
            scan_interval,
            grace,
            expiry,
        })
    }

    fn container_wanted(&self, name: &str) -> bool {
        self.containers.is_empty() || self.containers.iter().any(|p| p.matches(name))
    }
}

/// Where a log file sits in a Kubernetes node's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLog {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub pod: String,
    /// The pod's UID (empty in the Docker layout, which does not name it).
    pub uid: String,
    /// The container's name.
    pub container: String,
    /// The container's restart count (CRI `<n>.log`); `None` in the Docker layout.
    pub restart: Option<u32>,
}

impl PodLog {
    /// The labels it gives every series of its server: `namespace`, `pod`, `container`.
    pub fn labels(&self) -> Vec<(&'static str, String)> {
        vec![
            ("namespace", self.namespace.clone()),
            ("pod", self.pod.clone()),
            ("container", self.container.clone()),
        ]
    }
}

/// A CRI pod log path, `…/<namespace>_<pod>_<uid>/<container>/<n>.log` (what the kubelet
/// writes under `/var/log/pods`). Namespace and pod names cannot hold `_` (DNS labels), so the
/// split is unambiguous. `None` for any other path, rotated files (`0.log.20260101-…`, `.gz`)
/// included.
pub fn parse_cri(path: &Path) -> Option<PodLog> {
    let name = path.file_name()?.to_str()?;
    let restart: u32 = name.strip_suffix(".log")?.parse().ok()?;
    let container_dir = path.parent()?;
    let container = container_dir.file_name()?.to_str()?;
    let pod_dir = container_dir.parent()?.file_name()?.to_str()?;
    let mut parts = pod_dir.split('_');
    let (namespace, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || [namespace, pod, uid, container].contains(&"") {
        return None;
    }
    Some(PodLog {
        namespace: namespace.into(),
        pod: pod.into(),
        uid: uid.into(),
        container: container.into(),
        restart: Some(restart),
    })
}

/// A Docker-layout container log name, `<pod>_<namespace>_<container>-<id>.log` (the symlinks
/// in `/var/log/containers`; `id` is the 64-hex container id). `None` for any other name.
pub fn parse_docker(path: &Path) -> Option<PodLog> {
    let stem = path.file_name()?.to_str()?.strip_suffix(".log")?;
    let mut parts = stem.split('_');
    let (pod, namespace, rest) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let (container, id) = rest.rsplit_once('-')?;
    let hex = id.len() == 64 && id.bytes().all(|c| c.is_ascii_hexdigit());
    if !hex || [pod, namespace, container].contains(&"") {
        return None;
    }
    Some(PodLog {
        namespace: namespace.into(),
        pod: pod.into(),
        uid: String::new(),
        container: container.into(),
        restart: None,
    })
}

/// A rotated or compressed log that is never followed: `*.gz`, or `<n>.log.<anything>` (CRI
/// rotation renames `0.log` to `0.log.20260101-000000`).
fn rotated(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name.ends_with(".gz") {
        return true;
    }
    name.split_once(".log.")
        .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
}

/// A file to follow, found by a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The path as the glob gave it.
    pub path: PathBuf,
    /// Its Kubernetes place, for a pod log.
    pub pod: Option<PodLog>,
    /// Newer files of one stream sort higher: (restart count, modification time).
    order: (u64, u64),
}

/// What a server name stands for (see [`Discovered::identity`]): kept as the path itself, never as
/// its text, so two paths whose names differ only in invalid UTF-8 are two identities.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Identity {
    /// A pod's container, `namespace/pod/container`.
    Pod(String),
    /// A plain file.
    File(PathBuf),
}

impl Discovered {
    /// What a server name stands for: the container of a pod (`namespace/pod/container`), else
    /// the path. Files of one identity (a container's restarts, a pod re-created under its
    /// name) share a server.
    pub fn identity(&self) -> Identity {
        match &self.pod {
            Some(p) => Identity::Pod(format!("{}/{}/{}", p.namespace, p.pod, p.container)),
            None => Identity::File(self.path.clone()),
        }
    }

    /// One stream of log files, of which only the newest is followed: a container of one pod
    /// (by UID where known), else the path (as bytes: two names that differ only in invalid
    /// UTF-8 are two streams).
    fn stream(&self) -> Identity {
        match &self.pod {
            Some(p) => Identity::Pod(format!(
                "{}/{}/{}/{}",
                p.namespace, p.pod, p.uid, p.container
            )),
            None => Identity::File(self.path.clone()),
        }
    }

    /// Server names to try, in order; the last one is the identity as text (invalid UTF-8
    /// escaped, [`crate::source::bytes_text`]), free unless another identity's text is the
    /// same (see [`Naming::take`]).
    fn names(&self) -> Vec<String> {
        match &self.pod {
            Some(p) => vec![
                p.pod.clone(),
                format!("{}/{}/{}", p.namespace, p.pod, p.container),
            ],
            None => {
                use std::os::unix::ffi::OsStrExt;
                let stem = crate::source::server_name_of(&self.path);
                let parent = self
                    .path
                    .parent()
                    .and_then(|d| d.file_name())
                    .map(|d| format!("{}/{stem}", crate::source::bytes_text(d.as_bytes())));
                [
                    Some(stem),
                    parent,
                    Some(crate::source::path_text(&self.path)),
                ]
                .into_iter()
                .flatten()
                .collect()
            }
        }
    }
}

/// What one expansion of the globs found.
#[derive(Debug, Default)]
pub struct Scan {
    /// The files to follow now, sorted by path.
    pub found: Vec<Discovered>,
    /// The errors met (unreadable directories).
    pub errors: Vec<String>,
    /// Matches that are no log files, never followed: character and block devices and sockets
    /// (`rnd.log -> /dev/urandom` would be read without end), with what each is.
    pub special: Vec<(PathBuf, &'static str)>,
}

/// Expands the globs once: the files to follow now, sorted by path (one per stream: its newest
/// file; one per file reached by several paths, the CRI path preferred), the errors met
/// (unreadable directories) and the matches that are no log files.
pub fn scan(cfg: &DiscoverConfig) -> Scan {
    let mut errors = Vec::new();
    let mut special = Vec::new();
    // By canonical path: a file reached by several paths is followed once.
    let mut by_file: BTreeMap<PathBuf, Discovered> = BTreeMap::new();
    for pattern in &cfg.globs {
        let Ok(paths) = glob::glob(pattern) else {
            continue;
        };
        // The glob crate skips names that are not UTF-8: those are added by a look of our own.
        let odd = non_utf8_matches(pattern).into_iter().map(Ok);
        for entry in paths.chain(odd) {
            let path = match entry {
                Ok(p) => p,
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            };
            let found = match candidate(cfg, path) {
                Candidate::Follow(f) => f,
                Candidate::Special(p, kind) => {
                    special.push((p, kind));
                    continue;
                }
                Candidate::No => continue,
            };
            let canon = std::fs::canonicalize(&found.path).unwrap_or(found.path.clone());
            let better = by_file.get(&canon).is_none_or(|o| {
                let uid = |f: &Discovered| f.pod.as_ref().is_some_and(|p| !p.uid.is_empty());
                uid(&found) && !uid(o)
            });
            if better {
                by_file.insert(canon, found);
            }
        }
    }
    let mut newest: BTreeMap<Identity, Discovered> = BTreeMap::new();
    for f in by_file.into_values() {
        let key = f.stream();
        if newest.get(&key).is_none_or(|o| f.order > o.order) {
            newest.insert(key, f);
        }
    }
    let mut found: Vec<Discovered> = newest.into_values().collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    special.sort();
    special.dedup();
    Scan {
        found,
        errors,
        special,
    }
}

/// The files matching `pattern` whose names are not valid UTF-8 (a Latin-1 name from old
/// tooling), which the glob crate never yields: the directories of the pattern's last
/// component are listed and each such name is matched as its lossy text (`caf\u{FFFD}.log`
/// against `*.log`). Only the match is lossy: its server and source name escape the invalid
/// bytes ([`crate::source::bytes_text`]).
fn non_utf8_matches(pattern: &str) -> Vec<PathBuf> {
    let p = Path::new(pattern);
    let (Some(dir_pat), Some(name_pat)) = (p.parent(), p.file_name().and_then(|n| n.to_str()))
    else {
        return Vec::new();
    };
    let Ok(name_pat) = glob::Pattern::new(name_pat) else {
        return Vec::new();
    };
    let dir_pat = dir_pat.to_string_lossy();
    let dirs: Vec<PathBuf> = if dir_pat.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        match glob::glob(&dir_pat) {
            Ok(d) => d.flatten().collect(),
            Err(_) => return Vec::new(),
        }
    };
    let mut out = Vec::new();
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            if name.to_str().is_none() && name_pat.matches(&name.to_string_lossy()) {
                out.push(e.path());
            }
        }
    }
    out
}

/// What a glob's match is to discovery.
enum Candidate {
    /// A file to follow.
    Follow(Discovered),
    /// Not a log file (see [`crate::source::file::unreadable_kind`]): skipped, warned about
    /// and counted.
    Special(PathBuf, &'static str),
    /// Not followed, nothing to say (gone, a directory, rotated, a container not wanted).
    No,
}

/// A glob's match as a file to follow, or why not.
fn candidate(cfg: &DiscoverConfig, path: PathBuf) -> Candidate {
    if rotated(&path) {
        return Candidate::No;
    }
    let Ok(meta) = std::fs::metadata(&path) else {
        return Candidate::No;
    };
    if meta.is_dir() {
        return Candidate::No;
    }
    // A regular file or a FIFO (a pipe's writer decides when it ends) is read; a device or a
    // socket is no log file.
    if let Some(kind) = crate::source::file::unreadable_kind(&meta, false) {
        return Candidate::Special(path, kind);
    }
    let pod = parse_cri(&path).or_else(|| {
        let mut p = parse_docker(&path)?;
        // A symlink into the CRI tree: its restart count orders the container's files.
        p.restart = std::fs::canonicalize(&path)
            .ok()
            .and_then(|t| parse_cri(&t))
            .and_then(|t| t.restart);
        Some(p)
    });
    if pod
        .as_ref()
        .is_some_and(|p| !cfg.container_wanted(&p.container))
    {
        return Candidate::No;
    }
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    let restart = pod.as_ref().and_then(|p| p.restart).unwrap_or(0);
    Candidate::Follow(Discovered {
        path,
        pod,
        order: (u64::from(restart), mtime),
    })
}

/// Who uses a server name.
#[derive(Debug)]
struct NameUse {
    /// `None`: reserved for another input.
    identity: Option<Identity>,
    /// Followers using it now.
    live: usize,
    /// When the last follower using it ended.
    released: Option<Instant>,
}

/// Gives each followed file its `server` label: a pod's name (or a plain file's stem) unless
/// another identity holds it (another namespace's pod of that name, another container of the
/// pod, an input named so), then `namespace/pod/container` (`parent/stem`, then the path). A
/// name stays reserved for its identity `--input.expiry` after its last file closed, while its
/// series may still be shown.
#[derive(Debug)]
pub struct Naming {
    names: BTreeMap<String, NameUse>,
    expiry: Duration,
}

impl Naming {
    /// Names reserved for nothing yet; released names are held for `expiry`.
    pub fn new(expiry: Duration) -> Naming {
        Naming {
            names: BTreeMap::new(),
            expiry,
        }
    }

    /// Reserves `name` for good (an explicit input, a journal unit).
    pub fn reserve(&mut self, name: &str) {
        self.names.insert(
            name.to_string(),
            NameUse {
                identity: None,
                live: 1,
                released: None,
            },
        );
    }

    /// The server name for a newly followed file (counted as in use until [`Naming::release`]),
    /// and whether it collided: every name it could have (its stem, `parent/stem`, its path as
    /// text) is another identity's, so it got its path with `#2` (`#3`, …) added rather than
    /// share a server with a file that is not its own (to warn about and count).
    pub fn take(&mut self, f: &Discovered, now: Instant) -> (String, bool) {
        let id = f.identity();
        let names = f.names();
        let expiry = self.expiry;
        let free = |u: &NameUse| {
            u.identity.as_ref() == Some(&id)
                || (u.live == 0 && u.released.is_some_and(|t| now >= t + expiry))
        };
        let is_free = |n: &String| self.names.get(n).is_none_or(free);
        let found = names.iter().find(|n| is_free(n)).cloned();
        let fallback = found.is_none();
        let name = found.unwrap_or_else(|| {
            let last = names.last().cloned().unwrap_or_default();
            (2u64..)
                .map(|i| format!("{last}#{i}"))
                .find(|n| is_free(n))
                .expect("a free name")
        });
        // Said once per file: a follower restarted finds its `#N` its own.
        let collided = fallback
            && self
                .names
                .get(&name)
                .is_none_or(|u| u.identity.as_ref() != Some(&id));
        let u = self.names.entry(name.clone()).or_insert(NameUse {
            identity: Some(id.clone()),
            live: 0,
            released: None,
        });
        if u.identity.as_ref() != Some(&id) {
            *u = NameUse {
                identity: Some(id),
                live: 0,
                released: None,
            };
        }
        u.live += 1;
        u.released = None;
        (name, collided)
    }

    /// A follower using `name` ended at `now`.
    pub fn release(&mut self, name: &str, now: Instant) {
        if let Some(u) = self.names.get_mut(name) {
            u.live = u.live.saturating_sub(1);
            if u.live == 0 {
                u.released = Some(now);
            }
        }
    }

    /// Forgets names released longer than the expiry ago (bounds the map).
    fn prune(&mut self, now: Instant) {
        let expiry = self.expiry;
        self.names
            .retain(|_, u| u.live > 0 || u.released.is_none_or(|t| now < t + expiry));
    }
}

/// What a follower reads: the file, its source name (the path, the `source` label of the self
/// metrics) and its server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follow {
    /// The file.
    pub path: PathBuf,
    /// `source` label.
    pub source: String,
    /// `server` label.
    pub server: String,
}

/// Starts a follower for a file (a job of the file-following pool,
/// [`crate::source::pool`]); it must end once its stop is set. The app's follower tails the
/// file into the state, as every file input.
pub type Spawn = Box<dyn FnMut(&Follow, Arc<Stop>) -> std::io::Result<Handle> + Send + 'static>;

struct Follower {
    follow: Follow,
    stop: Arc<Stop>,
    handle: Handle,
    /// Since when a scan has not found the file.
    missing_since: Option<Instant>,
    /// Its stop is set; waiting for it to end.
    closing: bool,
}

/// The discovery loop's state: the followed files, the names given, what was skipped.
pub struct Discovery {
    cfg: DiscoverConfig,
    state: Shared,
    spawn: Spawn,
    followers: BTreeMap<PathBuf, Follower>,
    naming: Naming,
    /// Files skipped by the last scan (each counted once while it stays skipped).
    skipped: BTreeSet<PathBuf>,
    /// Matches of the last scan that are no log files (each warned about and counted once
    /// while it stays matched).
    special: BTreeSet<PathBuf>,
    warned_cap: bool,
    warned_errors: bool,
    published: Option<usize>,
    /// The first scan is being applied: its files hold readiness until read to their end.
    first_scan: bool,
}

/// The name readiness knows the first `--input.glob` scan by (see [`crate::state::ready`]).
pub const FIRST_SCAN: &str = "--input.glob (first scan)";

impl Discovery {
    /// A discovery for `cfg` applying to `state`; `reserved` are server names taken by other
    /// inputs.
    pub fn new(cfg: DiscoverConfig, state: Shared, spawn: Spawn, reserved: &[String]) -> Self {
        let mut naming = Naming::new(cfg.expiry);
        for r in reserved {
            naming.reserve(r);
        }
        Discovery {
            cfg,
            state,
            spawn,
            followers: BTreeMap::new(),
            naming,
            skipped: BTreeSet::new(),
            special: BTreeSet::new(),
            warned_cap: false,
            warned_errors: false,
            published: None,
            first_scan: true,
        }
    }

    /// Files followed now (closing ones included).
    pub fn followed(&self) -> usize {
        self.followers.len()
    }

    /// Scans, follows and closes until `stop` is set, then stops every follower.
    pub fn run(mut self, stop: &Stop) {
        let (tx, rx) = channel::<()>();
        let _watchers = watch_bases(&self.cfg.globs, &tx);
        let tick = self.cfg.scan_interval.min(Duration::from_millis(250));
        let mut next_scan = Instant::now();
        loop {
            let now = Instant::now();
            if now >= next_scan {
                let sc = scan(&self.cfg);
                self.report(&sc);
                self.apply(&sc.found, now);
                next_scan = now + self.cfg.scan_interval;
                if std::mem::take(&mut self.first_scan) {
                    let r = lock(&self.state).readiness().clone();
                    r.caught_up(FIRST_SCAN);
                }
            }
            self.tick(Instant::now());
            if stop.is_set() {
                for f in self.followers.values() {
                    f.stop.set();
                }
                return;
            }
            if wait_event(&rx, tick) {
                // Something appeared or went: look now, and once more soon (a pod's directory
                // comes before its container's log file).
                let sc = scan(&self.cfg);
                self.report(&sc);
                let now = Instant::now();
                self.apply(&sc.found, now);
                next_scan = now + self.cfg.scan_interval.min(Duration::from_secs(1));
            }
        }
    }

    /// Applies one scan's result at `now`: starts followers for new files (up to
    /// `--input.max-files`, the rest counted as skipped) and notes which followed files were
    /// not found.
    pub fn apply(&mut self, found: &[Discovered], now: Instant) {
        let present: BTreeSet<&Path> = found.iter().map(|f| f.path.as_path()).collect();
        for (path, f) in self.followers.iter_mut() {
            if present.contains(path.as_path()) {
                f.missing_since = None;
            } else if f.missing_since.is_none() {
                f.missing_since = Some(now);
            }
        }
        // Every open file counts against the cap, those in their deleted-file grace too: a node
        // replacing its pods at once must not hold twice the cap (and its memory).
        let mut open = self.followers.values().filter(|f| !f.closing).count();
        let mut skipped = BTreeSet::new();
        for f in found {
            if self.followers.contains_key(&f.path) {
                continue;
            }
            if open >= self.cfg.max_files && self.close_oldest_missing() {
                open -= 1;
            }
            if open >= self.cfg.max_files {
                skipped.insert(f.path.clone());
                continue;
            }
            if self.start(f, now) {
                open += 1;
            }
        }
        self.count_skipped(skipped);
    }

    /// Ends the grace of the file missing the longest (its file is gone: only a writer still
    /// holding it would add lines), to make room for a file found now; whether there was one.
    fn close_oldest_missing(&mut self) -> bool {
        let oldest = self
            .followers
            .values_mut()
            .filter(|f| !f.closing && f.missing_since.is_some())
            .min_by_key(|f| f.missing_since);
        match oldest {
            Some(f) => {
                tracing::info!(path = %f.follow.path.display(), "closing a gone file before its grace ends: --input.max-files are open");
                f.closing = true;
                f.stop.set();
                true
            }
            None => false,
        }
    }

    fn count_skipped(&mut self, skipped: BTreeSet<PathBuf>) {
        let new = skipped.difference(&self.skipped).count();
        if new > 0 {
            lock(&self.state).add_self(SelfMetric::DiscoverySkipped, "", new as f64);
            if !self.warned_cap {
                self.warned_cap = true;
                tracing::warn!(
                    max_files = self.cfg.max_files,
                    "more files match --input.glob than --input.max-files; the rest are not read (counted in sglang_log_exporter_discovery_files_skipped_total)"
                );
            }
        }
        self.skipped = skipped;
    }

    /// Starts following `f`; whether it started.
    fn start(&mut self, f: &Discovered, now: Instant) -> bool {
        let (server, collided) = self.naming.take(f, now);
        let follow = Follow {
            path: f.path.clone(),
            source: crate::source::path_text(&f.path),
            server: server.clone(),
        };
        {
            let mut s = lock(&self.state);
            if collided {
                name_collision(&mut s, &f.path, &server);
            }
            register(&mut s, &server, f.pod.as_ref());
            s.retire_source(&follow.source, None);
            if self.first_scan {
                s.readiness().expect(&follow.source);
            }
        }
        let stop = Arc::new(Stop::new());
        match (self.spawn)(&follow, stop.clone()) {
            Ok(handle) => {
                tracing::info!(path = %f.path.display(), server = %server, "following a discovered file");
                self.followers.insert(
                    f.path.clone(),
                    Follower {
                        follow,
                        stop,
                        handle,
                        missing_since: None,
                        closing: false,
                    },
                );
                true
            }
            Err(e) => {
                tracing::warn!(path = %f.path.display(), "cannot start a follower: {e}");
                lock(&self.state).readiness().caught_up(&follow.source);
                self.naming.release(&server, now);
                false
            }
        }
    }

    /// The timers: a file not found for `--deleted-file-grace` is closed; a follower whose
    /// thread ended is removed and its source and server retired (the server only when no
    /// other followed file gives it lines: a restarted container's new log does).
    pub fn tick(&mut self, now: Instant) {
        for f in self.followers.values_mut() {
            let due = f.missing_since.is_some_and(|t| now >= t + self.cfg.grace);
            if due && !f.closing {
                tracing::info!(path = %f.follow.path.display(), "a discovered file is gone (or no longer current); closing it");
                f.closing = true;
                f.stop.set();
            }
        }
        let ended: Vec<PathBuf> = self
            .followers
            .iter()
            .filter(|(_, f)| f.handle.is_finished())
            .map(|(p, _)| p.clone())
            .collect();
        for p in ended {
            if let Some(f) = self.followers.remove(&p) {
                self.retire(f, now);
            }
        }
        self.naming.prune(now);
        let n = self.followers.values().filter(|f| !f.closing).count();
        if self.published != Some(n) {
            self.published = Some(n);
            lock(&self.state).set_self(SelfMetric::DiscoveryFollowed, "", n as f64);
        }
    }

    fn retire(&mut self, f: Follower, now: Instant) {
        f.handle.join();
        let server = &f.follow.server;
        let shared = self
            .followers
            .values()
            .any(|o| !o.closing && o.follow.server == *server);
        let mut s = lock(&self.state);
        let at = s.clock().now().wall;
        s.set_self(SelfMetric::SourceUp, &f.follow.source, 0.0);
        s.retire_source(&f.follow.source, Some(at));
        if !shared {
            s.retire_server(server, at);
        }
        drop(s);
        self.naming.release(server, now);
    }

    /// Warns about and counts what a scan found besides files to follow: errors (warned once)
    /// and matches that are no log files (each warned about and counted once while it matches).
    fn report(&mut self, sc: &Scan) {
        self.report_errors(&sc.errors);
        let now: BTreeSet<PathBuf> = sc.special.iter().map(|(p, _)| p.clone()).collect();
        let new: Vec<_> = sc
            .special
            .iter()
            .filter(|(p, _)| !self.special.contains(p))
            .collect();
        if !new.is_empty() {
            for (p, kind) in &new {
                warn_special(p, kind);
            }
            let mut s = lock(&self.state);
            s.add_self(SelfMetric::DiscoverySpecial, "", new.len() as f64);
        }
        self.special = now;
    }

    fn report_errors(&mut self, errors: &[String]) {
        if let Some(e) = errors.first() {
            if self.warned_errors {
                tracing::debug!("--input.glob: {e}");
            } else {
                self.warned_errors = true;
                tracing::warn!("--input.glob: {e} (files there are not found; further errors are logged at debug level)");
            }
        }
    }
}

/// Waits up to `d` for a watcher event; whether one came (a burst counts once).
fn wait_event(rx: &Receiver<()>, d: Duration) -> bool {
    match rx.recv_timeout(d) {
        Ok(()) => {
            while rx.try_recv().is_ok() {}
            true
        }
        Err(_) => false,
    }
}

/// The fixed leading directory of a glob: its components before the first with a wildcard
/// (`/var/log/pods` of `/var/log/pods/*/*/*.log`).
pub fn base_dir(pattern: &str) -> PathBuf {
    let mut out = PathBuf::new();
    let p = Path::new(pattern);
    let n = p.components().count();
    for (i, c) in p.components().enumerate() {
        let s = c.as_os_str().to_string_lossy();
        if i + 1 == n || s.contains(['*', '?', '[']) {
            break;
        }
        out.push(c);
    }
    out
}

/// Watches each glob's base directory (not recursively) for entries created, removed or
/// renamed; writes to files there wake nothing. Where no watcher can be set, the periodic scan
/// alone finds files.
fn watch_bases(globs: &[String], tx: &Sender<()>) -> Vec<notify::RecommendedWatcher> {
    use notify::{EventKind, RecursiveMode, Watcher};
    let dirs: BTreeSet<PathBuf> = globs.iter().map(|g| base_dir(g)).collect();
    let mut out = Vec::new();
    for dir in dirs {
        let tx = tx.clone();
        let w = notify::recommended_watcher(move |r: notify::Result<notify::Event>| {
            let entries = r.is_ok_and(|e| {
                matches!(
                    e.kind,
                    EventKind::Create(_)
                        | EventKind::Remove(_)
                        | EventKind::Modify(notify::event::ModifyKind::Name(_))
                )
            });
            if entries {
                let _ = tx.send(());
            }
        });
        let Ok(mut w) = w else { continue };
        match w.watch(&dir, RecursiveMode::NonRecursive) {
            Ok(()) => out.push(w),
            Err(e) => {
                tracing::debug!(dir = %dir.display(), "cannot watch the directory ({e}); scanning only")
            }
        }
    }
    out
}

/// Tells the state what a pod log says about the servers named `server`: the `namespace`,
/// `pod` and `container` labels of their series and the pod UID (for GPU correlation); nothing
/// for a plain file.
pub fn register(s: &mut crate::state::State, server: &str, pod: Option<&PodLog>) {
    s.set_source_labels(server, pod.map(PodLog::labels).unwrap_or_default());
    let uid = pod.map(|p| p.uid.as_str()).filter(|u| !u.is_empty());
    s.set_source_pod(server, uid);
}

/// Warns that a glob matched `path`, which is `kind` (see
/// [`crate::source::file::unreadable_kind`]), not a log file.
fn warn_special(path: &Path, kind: &str) {
    tracing::warn!(
        path = %crate::source::path_text(path),
        "--input.glob matched {kind}, not a log file: not read (counted in sglang_log_exporter_discovery_files_not_logs_total)"
    );
}

/// Warns about and counts a file whose every server name was another file's (see
/// [`Naming::take`]): it got `server`.
fn name_collision(s: &mut crate::state::State, path: &Path, server: &str) {
    tracing::warn!(
        path = %crate::source::path_text(path),
        server,
        "the server names of this file are other inputs'; it is server {server:?} so as not to merge with them (counted in sglang_log_exporter_server_name_collisions_total)"
    );
    s.add_self(SelfMetric::ServerNameCollisions, "", 1.0);
}

/// The files to read once (`--once`), with their server names and pod log places, named as the
/// live discovery names them; matches that are no log files and name collisions are warned
/// about and counted in `state`.
pub fn snapshot(
    cfg: &DiscoverConfig,
    reserved: &[String],
    state: &Shared,
) -> Vec<(Follow, Option<PodLog>)> {
    let mut naming = Naming::new(cfg.expiry);
    for r in reserved {
        naming.reserve(r);
    }
    let now = Instant::now();
    let sc = scan(cfg);
    for e in &sc.errors {
        tracing::warn!("--input.glob: {e}");
    }
    for (p, kind) in &sc.special {
        warn_special(p, kind);
    }
    if !sc.special.is_empty() {
        let n = sc.special.len() as f64;
        lock(state).add_self(SelfMetric::DiscoverySpecial, "", n);
    }
    sc.found
        .iter()
        .take(cfg.max_files)
        .map(|f| {
            let (server, collided) = naming.take(f, now);
            if collided {
                name_collision(&mut lock(state), &f.path, &server);
            }
            let follow = Follow {
                path: f.path.clone(),
                source: crate::source::path_text(&f.path),
                server,
            };
            (follow, f.pod.clone())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_paths() {
        let p = parse_cri(Path::new("/var/log/pods/llm_sglang-0_0b1c-22/sglang/3.log")).unwrap();
        assert_eq!(
            p,
            PodLog {
                namespace: "llm".into(),
                pod: "sglang-0".into(),
                uid: "0b1c-22".into(),
                container: "sglang".into(),
                restart: Some(3),
            }
        );
        for bad in [
            "/var/log/pods/llm_sglang-0_0b1c/sglang/0.log.20260101-000000",
            "/var/log/pods/llm_sglang-0_0b1c/sglang/0.log.gz",
            "/var/log/pods/llm_sglang-0/sglang/0.log",
            "/var/log/pods/a_b_c_d/sglang/0.log",
            "/var/log/pods/llm_sglang-0_0b1c/sglang/x.log",
        ] {
            assert_eq!(parse_cri(Path::new(bad)), None, "{bad}");
        }
    }

    #[test]
    fn docker_names() {
        let id = "a".repeat(64);
        let p = parse_docker(Path::new(&format!(
            "/var/log/containers/sglang-0_llm_sglang-main-{id}.log"
        )))
        .unwrap();
        assert_eq!(
            (p.pod.as_str(), p.namespace.as_str(), p.container.as_str()),
            ("sglang-0", "llm", "sglang-main")
        );
        assert_eq!(
            parse_docker(Path::new("/x/sglang-0_llm_sglang-abc.log")),
            None
        );
        assert_eq!(parse_docker(Path::new("/x/decode.log")), None);
    }

    #[test]
    fn rotated_names() {
        assert!(rotated(Path::new("/p/0.log.20260101-101010")));
        assert!(rotated(Path::new("/p/0.log.20260101-101010.gz")));
        assert!(rotated(Path::new("/p/decode.log.gz")));
        assert!(!rotated(Path::new("/p/0.log")));
        assert!(!rotated(Path::new("/p/decode.log.1")));
    }

    #[test]
    fn bases() {
        assert_eq!(
            base_dir("/var/log/pods/*/*/*.log"),
            PathBuf::from("/var/log/pods")
        );
        assert_eq!(base_dir("/logs/x.log"), PathBuf::from("/logs"));
        assert_eq!(base_dir("/logs/[ab]*/x.log"), PathBuf::from("/logs"));
    }

    fn pod(ns: &str, pod: &str, c: &str) -> Discovered {
        Discovered {
            path: PathBuf::from(format!("/p/{ns}_{pod}_u/{c}/0.log")),
            pod: Some(PodLog {
                namespace: ns.into(),
                pod: pod.into(),
                uid: "u".into(),
                container: c.into(),
                restart: Some(0),
            }),
            order: (0, 0),
        }
    }

    /// [`Naming::take`]'s name, checking that it did not collide.
    fn take(n: &mut Naming, f: &Discovered, t: Instant) -> String {
        let (name, collided) = n.take(f, t);
        assert!(!collided, "{name}");
        name
    }

    #[test]
    fn names_are_pods_unless_taken() {
        let mut n = Naming::new(Duration::from_secs(60));
        let t = Instant::now();
        assert_eq!(take(&mut n, &pod("a", "sglang-0", "sglang"), t), "sglang-0");
        // The same container again (a restart's new log): the same server.
        assert_eq!(take(&mut n, &pod("a", "sglang-0", "sglang"), t), "sglang-0");
        // Another namespace's pod of that name, another container of the pod.
        assert_eq!(
            take(&mut n, &pod("b", "sglang-0", "sglang"), t),
            "b/sglang-0/sglang"
        );
        assert_eq!(
            take(&mut n, &pod("a", "sglang-0", "router"), t),
            "a/sglang-0/router"
        );
        // Released, the name is held for the expiry, then free for others.
        n.release("sglang-0", t);
        n.release("sglang-0", t);
        assert_eq!(
            take(
                &mut n,
                &pod("c", "sglang-0", "sglang"),
                t + Duration::from_secs(1)
            ),
            "c/sglang-0/sglang"
        );
        assert_eq!(
            take(
                &mut n,
                &pod("d", "sglang-0", "sglang"),
                t + Duration::from_secs(61)
            ),
            "sglang-0"
        );
        n.reserve("decode");
        let plain = |p: &str| Discovered {
            path: PathBuf::from(p),
            pod: None,
            order: (0, 0),
        };
        assert_eq!(take(&mut n, &plain("/logs/a/decode.log"), t), "a/decode");
        assert_eq!(take(&mut n, &plain("/logs/b/prefill.log"), t), "prefill");
    }

    /// Hostile test F7: `caf\xe9.log`, `caf\xe8.log` and a valid `caf\u{FFFD}.log` are three
    /// files with three names (never one lossy name for all); a file whose every name is
    /// another input's gets `#2` and says it collided, never merging with it.
    #[test]
    fn names_of_non_utf8_paths_stay_apart() {
        use std::os::unix::ffi::OsStrExt;
        let plain = |p: &[u8]| Discovered {
            path: PathBuf::from(std::ffi::OsStr::from_bytes(p)),
            pod: None,
            order: (0, 0),
        };
        let mut n = Naming::new(Duration::from_secs(60));
        let t = Instant::now();
        let e9 = plain(b"/w/caf\xe9.log");
        let e8 = plain(b"/w/caf\xe8.log");
        let fffd = plain("/w/caf\u{FFFD}.log".as_bytes());
        assert_ne!(e9.stream(), e8.stream());
        assert_ne!(e9.identity(), fffd.identity());
        assert_eq!(take(&mut n, &e9, t), "caf\\xE9");
        assert_eq!(take(&mut n, &e8, t), "caf\\xE8");
        assert_eq!(take(&mut n, &fffd, t), "caf\u{FFFD}");
        // The Latin-1 file again (a restart of its follower): its own name.
        assert_eq!(take(&mut n, &e9, t), "caf\\xE9");
        // A valid name that reads like an escaped one, where other inputs hold the stem and
        // `parent/stem` and the Latin-1 file took the path's text: `#2`, said to collide.
        let mut n = Naming::new(Duration::from_secs(60));
        n.reserve(r"caf\xE9");
        n.reserve(r"w/caf\xE9");
        assert_eq!(take(&mut n, &e9, t), r"/w/caf\xE9.log");
        let lookalike = plain(br"/w/caf\xE9.log");
        let want = (r"/w/caf\xE9.log#2".to_string(), true);
        assert_eq!(n.take(&lookalike, t), want);
        assert_eq!(n.take(&lookalike, t), (want.0, false));
    }
}

#[cfg(test)]
mod kind_tests {
    use super::*;

    /// Hostile test glob1's last step: a glob that matches a device (`rnd.log ->
    /// /dev/urandom`, `null.log -> /dev/null`) or a socket finds no file to follow but says what
    /// each is; a FIFO and a regular file are followed.
    #[test]
    fn devices_and_sockets_are_no_log_files() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("a.log"), b"x\n").unwrap();
        let fifo = std::ffi::CString::new(d.join("fifo.log").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::os::unix::fs::symlink("/dev/urandom", d.join("rnd.log")).unwrap();
        std::os::unix::fs::symlink("/dev/null", d.join("null.log")).unwrap();
        let _sock = std::os::unix::net::UnixListener::bind(d.join("sock.log")).unwrap();
        let cfg = DiscoverConfig::new(
            &[format!("{}/*.log", d.display())],
            &[],
            256,
            Duration::from_secs(1),
            Duration::from_secs(60),
            Duration::from_secs(300),
        )
        .unwrap();
        let sc = scan(&cfg);
        let names = |ps: Vec<&PathBuf>| -> Vec<String> {
            ps.iter()
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(
            names(sc.found.iter().map(|f| &f.path).collect()),
            ["a.log", "fifo.log"]
        );
        assert_eq!(
            names(sc.special.iter().map(|(p, _)| p).collect()),
            ["null.log", "rnd.log", "sock.log"]
        );
        let kinds: Vec<&str> = sc.special.iter().map(|(_, k)| *k).collect();
        assert_eq!(
            kinds,
            ["a character device", "a character device", "a socket"]
        );
    }
}

#[cfg(test)]
mod cap_tests {
    use super::*;
    use crate::parse::patterns::Patterns;
    use crate::state::{State, StateConfig};

    /// Repro 16's cap: files in their deleted-file grace count against `--input.max-files`; a
    /// new file takes the place of the one gone the longest (its grace ended early), so at most
    /// the cap is ever open.
    #[test]
    fn files_in_their_grace_count_against_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let glob = format!("{}/*.log", dir.path().display());
        let cfg = DiscoverConfig::new(
            &[glob],
            &[],
            2,
            Duration::from_secs(1),
            Duration::from_secs(60),
            Duration::from_secs(300),
        )
        .unwrap();
        let state = State::shared(
            Arc::new(Patterns::embedded().unwrap()),
            StateConfig::default(),
        );
        // A follower that waits for its stop.
        struct Idle(Arc<Stop>);
        impl crate::source::pool::Job for Idle {
            fn turn(&mut self) -> crate::source::pool::Next {
                use crate::source::pool::Next;
                if self.0.is_set() {
                    Next::Done
                } else {
                    Next::Wait(Duration::from_secs(3600))
                }
            }
            fn panicked(&mut self) -> crate::source::pool::Next {
                crate::source::pool::Next::Done
            }
        }
        let pool = crate::source::pool::Pool::default();
        let spawn: Spawn = Box::new(move |_f: &Follow, stop: Arc<Stop>| {
            pool.add(|w| {
                stop.on_set(move || w.wake());
                Box::new(Idle(stop))
            })
        });
        let mut d = Discovery::new(cfg, state, spawn, &[]);
        let found = |names: &[&str]| -> Vec<Discovered> {
            names
                .iter()
                .map(|n| Discovered {
                    path: dir.path().join(n),
                    pod: None,
                    order: (0, 0),
                })
                .collect()
        };
        let t0 = Instant::now();
        d.apply(&found(&["a.log", "b.log"]), t0);
        assert_eq!(d.followed(), 2);
        // `a` and `b` are gone (in their grace); `c` and `d` appear: each takes a place of one
        // gone, the one gone the longest first; never more than 2 open.
        d.apply(&found(&[]), t0);
        d.apply(
            &found(&["c.log", "d.log", "e.log"]),
            t0 + Duration::from_secs(1),
        );
        let open: Vec<_> = d
            .followers
            .iter()
            .filter(|(_, f)| !f.closing)
            .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(open, ["c.log", "d.log"]);
        for f in d.followers.values() {
            f.stop.set();
        }
    }
}
