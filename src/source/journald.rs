//! The journald source: the exporter runs `journalctl --output=export` for each `--journal-unit`
//! itself and supervises it. The export format is binary-safe (a message with a newline or
//! invalid UTF-8 is length-prefixed) and journalctl writes it in about a third of the time of
//! `--output=json`; [`super::journal_export`] reads it. The short probes at start (the latest
//! entry, the invocation's first) print JSON lines without `MESSAGE`.
//!
//! * Start-up restores the current state: the child starts at the first entry of the unit's
//!   current invocation (`_SYSTEMD_INVOCATION_ID` of its latest entry), so startup lines hours
//!   old (capacity, model name) and the last stats line of every rank are read, then it follows.
//!   With `--state.dir`, a restart whose saved cursor is in the current invocation goes on after
//!   it instead (the startup facts come from the state file; see [`start_point`]).
//! * A child that exits or dies is restarted after a back-off (1 s doubling to 30 s) with
//!   `--cursor` = the `__CURSOR` of the last whole line read, whose entry is then dropped, so
//!   no entry is lost or counted twice. Not `--after-cursor`: journalctl skips one entry after
//!   seeking without checking that it is the cursor's, and where the cursor's entry is gone (a
//!   replaced `--journal-file`, a vacuumed journal) that skipped entry is a new one, lost. Restarts are counted in `sglang_log_exporter_journalctl_restarts_total{unit}`; the
//!   first exit of a failure streak is warned about, later attempts are logged at debug only (our
//!   own log may land in the journal we read).
//!
//! One child per unit, not one child with several `-u`: each unit has its own current
//! invocation to start from and its own cursor, while one child can start at one position only
//! (it would have to start at the oldest invocation and re-read other units' stale history). A
//! failing unit also restarts alone. The cost is one small journalctl process per unit.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::journal_export::{Item, Reader};
use super::LineSink;
use crate::state::{lock, SelfMetric, Shared};
use crate::stop::Stop;

/// First back-off after a child exits; doubled after each failed attempt.
pub const BACKOFF_START: Duration = Duration::from_secs(1);
/// Longest back-off.
pub const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// A child that ran this long was healthy: the next failure starts a new streak (a warning and
/// the shortest back-off).
const HEALTHY_RUN: Duration = Duration::from_secs(60);

/// Unit types journalctl knows; a name without one of these suffixes gets `.service`.
const UNIT_SUFFIXES: &[&str] = &[
    ".service",
    ".socket",
    ".scope",
    ".slice",
    ".target",
    ".mount",
    ".timer",
    ".path",
    ".swap",
    ".device",
    ".automount",
];

/// What the journald source needs, validated.
#[derive(Debug, Clone, Default)]
pub struct JournalConfig {
    /// Full unit names (`sglang-decode.service`).
    pub units: Vec<String>,
    /// Journal files for `--file` (absolute: journalctl 252 cannot follow a relative one).
    pub files: Vec<PathBuf>,
    /// Journal directories for `--directory` (absolute).
    pub directories: Vec<PathBuf>,
    /// The journalctl binary.
    pub journalctl: PathBuf,
    /// Longest JSON line kept, in bytes.
    pub max_line: usize,
}

impl JournalConfig {
    /// Validates the command-line values: unit names (`.service` added when no unit type is
    /// given), `--journal-file`/`--journal-directory` only with a unit, the binary found.
    ///
    /// # Errors
    /// A message naming the bad value.
    pub fn new(
        units: &[String],
        files: &[PathBuf],
        directories: &[PathBuf],
        journalctl: &Path,
        max_line: usize,
    ) -> Result<JournalConfig, String> {
        if units.is_empty() {
            if !files.is_empty() || !directories.is_empty() {
                return Err("--journal-file and --journal-directory need --journal-unit".into());
            }
            return Ok(JournalConfig::default());
        }
        let mut full = Vec::new();
        for u in units {
            let n = unit_name(u)?;
            if !full.contains(&n) {
                full.push(n);
            }
        }
        let abs = |p: &PathBuf| std::path::absolute(p).map_err(|e| format!("{}: {e}", p.display()));
        let files = files.iter().map(abs).collect::<Result<Vec<_>, _>>()?;
        let directories = directories.iter().map(abs).collect::<Result<Vec<_>, _>>()?;
        let journalctl = find_program(journalctl).ok_or_else(|| {
            format!(
                "--journalctl {}: not found or not executable",
                journalctl.display()
            )
        })?;
        Ok(JournalConfig {
            units: full,
            files,
            directories,
            journalctl,
            max_line,
        })
    }
}

/// The full unit name of a `--journal-unit` value: `sglang-decode` → `sglang-decode.service`.
///
/// # Errors
/// A message for an empty name or one with characters systemd does not allow.
pub fn unit_name(arg: &str) -> Result<String, String> {
    let ok = !arg.is_empty()
        && arg.bytes().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b':' | b'_' | b'.' | b'@' | b'-' | b'\\')
        });
    if !ok {
        return Err(format!("--journal-unit {arg:?}: not a systemd unit name"));
    }
    if UNIT_SUFFIXES.iter().any(|s| arg.ends_with(s)) {
        Ok(arg.to_string())
    } else {
        Ok(format!("{arg}.service"))
    }
}

/// The `server` label of a unit: its name without `.service` (as the framer names journald
/// records by `_SYSTEMD_UNIT`).
pub fn server_of(unit: &str) -> String {
    super::server_name_of_unit(unit).to_string()
}

/// The source name of a unit in the self metrics.
pub fn source_of(unit: &str) -> String {
    format!("journald:{unit}")
}

/// Where a child starts reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// Everything of the unit the journal holds (no invocation found).
    All,
    /// At this entry, inclusive (the first of the current invocation).
    Cursor(String),
    /// After this entry (a restart: the last entry read). Run as `--cursor`; the child's first
    /// entry is dropped when it is this one (see the module docs).
    AfterCursor(String),
}

/// The arguments (without the binary) of the reading child for `unit`: the export format
/// (read by [`super::journal_export`]), each entry with its `__CURSOR`.
pub fn argv(cfg: &JournalConfig, unit: &str, start: &Start, follow: bool) -> Vec<OsString> {
    let mut a: Vec<OsString> = common_args(cfg, "export", READ_FIELDS);
    // Every entry carries its `__CURSOR`; this is for the exit status: with it, journalctl 252
    // exits 1 when it showed no entry (how `--once` tells an unknown unit).
    a.push("--show-cursor".into());
    if follow {
        // Without `--no-tail`, journalctl 252 shows only the last 10 entries when following,
        // even with `--cursor`.
        a.push("--follow".into());
        a.push("--no-tail".into());
    }
    a.push(format!("--unit={unit}").into());
    match start {
        Start::All => {}
        Start::Cursor(c) => a.push(format!("--cursor={c}").into()),
        Start::AfterCursor(c) => a.push(format!("--cursor={c}").into()),
    }
    a
}

/// The fields the reading child prints (journalctl adds `__CURSOR` and the timestamps): a
/// fraction of the bytes of a full entry (`_CMDLINE`, …). Besides the message and invocation,
/// the writer fields ([`super::writer::OUTPUT_FIELDS`]): a unit's entries may come from several
/// hosts (`--journal-directory` of `systemd-journal-remote`) or containers (`docker.service`),
/// named as a file of the same entries names them.
const READ_FIELDS: &str = "MESSAGE,_SYSTEMD_INVOCATION_ID,_SYSTEMD_UNIT,_SYSTEMD_USER_UNIT,CONTAINER_NAME,_HOSTNAME,SYSLOG_IDENTIFIER,_COMM,_PID,SYSLOG_PID";

/// The fields a probe prints: no `MESSAGE`, so its one line stays short however long the
/// entry's message is (a probe line cut at the line limit would fail the start).
const PROBE_FIELDS: &str = "_SYSTEMD_UNIT,_SYSTEMD_INVOCATION_ID";

/// Arguments of every journalctl run: `output` (`json` for the probes, whose one line is read
/// by serde; `export` for the reading child: binary-safe and a third of the time of JSON to
/// write) with the `fields`, no pager or hints, the journals.
fn common_args(cfg: &JournalConfig, output: &str, fields: &str) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![
        format!("--output={output}").into(),
        "--all".into(),
        "--no-pager".into(),
        "--quiet".into(),
        format!("--output-fields={fields}").into(),
    ];
    for f in &cfg.files {
        let mut s = OsString::from("--file=");
        s.push(f);
        a.push(s);
    }
    for d in &cfg.directories {
        let mut s = OsString::from("--directory=");
        s.push(d);
        a.push(s);
    }
    a
}

/// Arguments of the probe for the latest entry written by the unit's own processes.
pub fn latest_argv(cfg: &JournalConfig, unit: &str) -> Vec<OsString> {
    let mut a = common_args(cfg, "json", PROBE_FIELDS);
    a.push("--lines=1".into());
    a.push(format!("_SYSTEMD_UNIT={unit}").into());
    a
}

/// Arguments of the probe for the entries of one invocation, oldest first.
pub fn invocation_argv(cfg: &JournalConfig, unit: &str, invocation: &str) -> Vec<OsString> {
    let mut a = common_args(cfg, "json", PROBE_FIELDS);
    a.push(format!("_SYSTEMD_UNIT={unit}").into());
    a.push(format!("_SYSTEMD_INVOCATION_ID={invocation}").into());
    a
}

/// The `__CURSOR` of a `journalctl -o json` line. A plain substring search is exact here:
/// inside JSON string values every `"` is escaped, so `"__CURSOR":"` only matches the key.
pub fn cursor_of(line: &[u8]) -> Option<&str> {
    let key = br#""__CURSOR":""#;
    let at = memchr::memmem::find(line, key)? + key.len();
    let len = memchr::memchr(b'"', &line[at..])?;
    std::str::from_utf8(&line[at..at + len]).ok()
}

/// The `_SYSTEMD_INVOCATION_ID` of a `journalctl -o json` line.
fn invocation_of(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Inv {
        #[serde(rename = "_SYSTEMD_INVOCATION_ID")]
        id: Option<String>,
    }
    serde_json::from_slice::<Inv>(line).ok()?.id
}

/// A spawned journalctl, killed and reaped when dropped.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
    stderr_tail: Arc<Mutex<String>>,
    stderr_done: Option<std::sync::mpsc::Receiver<()>>,
}

impl ChildGuard {
    /// The child's standard output (once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Kills the child (SIGKILL: a stopped child cannot handle a gentler signal).
    ///
    /// # Errors
    /// The OS error.
    pub fn kill(&mut self) -> std::io::Result<()> {
        self.child.kill()
    }

    /// Waits for the child to exit, then (up to 1 s) for its stderr to be drained, so
    /// [`ChildGuard::stderr_tail`] holds its last words.
    ///
    /// # Errors
    /// The wait error.
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let status = self.child.wait()?;
        if let Some(done) = self.stderr_done.take() {
            let _ = done.recv_timeout(Duration::from_secs(1));
        }
        Ok(status)
    }

    /// The last line the child wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr_tail
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `journalctl` with `args`, stdout piped; stderr is drained by a thread (so the child
/// can never block on it), logged at debug, its last line kept for messages.
///
/// # Errors
/// The spawn error (binary missing, not executable…).
pub fn spawn(journalctl: &Path, args: &[OsString]) -> std::io::Result<ChildGuard> {
    let mut cmd = Command::new(journalctl);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // The guard kills the child when we drop it; SIGTERM/SIGKILL of the whole exporter skips
    // destructors, so the kernel is asked to end the child with its parent too.
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    let parent = std::process::id() as libc::pid_t;
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            // The exporter died between fork and prctl: do not outlive it.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the exporter is gone"));
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let stderr_tail = Arc::new(Mutex::new(String::new()));
    let mut stderr_done = None;
    if let Some(err) = child.stderr.take() {
        let tail = stderr_tail.clone();
        let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<()>(1);
        stderr_done = Some(done_rx);
        let drained = std::thread::Builder::new()
            .name("journalctl stderr".into())
            .spawn(move || {
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    tracing::debug!("journalctl: {line}");
                    if let Ok(mut t) = tail.lock() {
                        *t = line;
                    }
                }
                let _ = done_tx.send(());
            });
        if let Err(e) = drained {
            // Without a drainer the child could block; better not to run it.
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    }
    Ok(ChildGuard {
        child,
        stderr_tail,
        stderr_done,
    })
}

/// A failed journalctl run.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// It could not be started.
    #[error("cannot run {0}: {1}")]
    Spawn(String, std::io::Error),
    /// It exited with a failure.
    #[error("{0} failed ({1}): {2}{hint}", hint = crate::source::access::journal_hint(.2).map_or(String::new(), |h| format!(" ({h})")))]
    Failed(String, ExitStatus, String),
    /// The journals hold no entry of the unit (journalctl then exits 1 without a word).
    #[error("the journal has no entries of this unit (is the unit name right? `journalctl -u UNIT` lists them)")]
    NoEntries,
}

/// Where a reading child starts, and how far the journal went when that was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartPoint {
    /// Where the child starts.
    pub start: Start,
    /// The cursor of the unit's latest entry when the start was found: once the child hands it
    /// out, every entry that existed at start-up is read (see [`run_child`]). `None` when the
    /// journal had no entry of the unit.
    pub latest: Option<String>,
}

/// Finds where to read `unit` from: after `saved` (the cursor a state file kept) when that
/// entry belongs to the unit's current invocation (`_SYSTEMD_INVOCATION_ID` of its latest
/// entry), else at the first entry of the current invocation, so startup lines hours old
/// (capacity, model name) and the last stats line of every rank are read. Without an
/// invocation (no entries, or none named), after `saved` or [`Start::All`]. A saved cursor that
/// journalctl refuses is warned about and not used.
///
/// # Errors
/// A [`JournalError`] when journalctl cannot be run or fails.
pub fn start_point(
    cfg: &JournalConfig,
    unit: &str,
    saved: Option<&str>,
) -> Result<StartPoint, JournalError> {
    let after_saved = || saved.map_or(Start::All, |c| Start::AfterCursor(c.to_string()));
    let Some(latest) = first_line(cfg, &latest_argv(cfg, unit))? else {
        return Ok(StartPoint {
            start: after_saved(),
            latest: None,
        });
    };
    let latest_cursor = cursor_of(&latest).map(str::to_string);
    let point = |start| StartPoint {
        start,
        latest: latest_cursor.clone(),
    };
    let Some(inv) = invocation_of(&latest) else {
        return Ok(point(after_saved()));
    };
    if let Some(c) = saved {
        match first_line(cfg, &resume_argv(cfg, unit, c)) {
            Ok(Some(at)) if invocation_of(&at).as_deref() == Some(inv.as_str()) => {
                tracing::info!(
                    unit,
                    cursor = c,
                    "resuming after the last entry read before the restart (the state file's cursor); \
                     entries before it are not read again"
                );
                return Ok(point(Start::AfterCursor(c.to_string())));
            }
            Ok(_) => tracing::info!(
                unit,
                "the state file's cursor is not in the unit's current invocation; reading that invocation from its start"
            ),
            Err(e) => tracing::warn!(
                unit,
                "the state file's cursor was not used ({e}); reading the current invocation from its start"
            ),
        }
    }
    let first = first_line(cfg, &invocation_argv(cfg, unit, &inv))?;
    Ok(point(match first.as_deref().and_then(cursor_of) {
        Some(c) => Start::Cursor(c.to_string()),
        None => Start::All,
    }))
}

/// Arguments of the probe for the unit's first entry at or after `cursor`.
pub fn resume_argv(cfg: &JournalConfig, unit: &str, cursor: &str) -> Vec<OsString> {
    let mut a = common_args(cfg, "json", PROBE_FIELDS);
    a.push(format!("--cursor={cursor}").into());
    a.push(format!("_SYSTEMD_UNIT={unit}").into());
    a
}

/// The first output line of a journalctl run (the child is killed after it).
fn first_line(cfg: &JournalConfig, args: &[OsString]) -> Result<Option<Vec<u8>>, JournalError> {
    let bin = cfg.journalctl.display().to_string();
    let mut child =
        spawn(&cfg.journalctl, args).map_err(|e| JournalError::Spawn(bin.clone(), e))?;
    let mut line = Vec::new();
    if let Some(out) = child.take_stdout() {
        // Bounded like every other line we read.
        let mut r = BufReader::new(out.take(cfg.max_line as u64 + 1));
        let _ = r.read_until(b'\n', &mut line);
    }
    if line.ends_with(b"\n") {
        line.pop();
        return Ok(Some(line));
    }
    // Nothing (or a partial line): the child's exit says whether that is an empty result.
    let status = child
        .wait()
        .map_err(|e| JournalError::Spawn(bin.clone(), e))?;
    if !status.success() {
        return Err(JournalError::Failed(bin, status, child.stderr_tail()));
    }
    Ok(None)
}

/// How one child run ended.
#[derive(Debug)]
pub enum RunEnd {
    /// The child exited by itself (its status and last words on stderr). For `--once` (no
    /// `--follow`) a clean exit is the end of the journal; following, any exit is a restart.
    Exited {
        /// Exit status, if it could be read.
        status: Option<ExitStatus>,
        /// The child's last line on stderr.
        stderr: String,
    },
    /// The child was stopped (SIGSTOP, a debugger) while we waited for output: killed, to be
    /// restarted from the cursor.
    Stalled,
    /// A `--journal-file` was replaced (rotated) under the child: killed, to be restarted on
    /// the new file from the cursor.
    FileReplaced,
    /// Reading its output failed.
    ReadFailed(std::io::Error),
}

/// Quiet checks ([`WATCH`] each) after which a catch-up whose last entry never came counts as
/// done: 30 s.
const QUIET_CATCH_UP: u32 = 15;

/// How often a following child's health is checked while it is quiet.
const WATCH: Duration = Duration::from_secs(2);

/// What a running child is checked for while it is quiet: stopped, or reading a replaced file.
struct Watch {
    pid: u32,
    /// Identity (dev, inode) of each `--journal-file` when the child started.
    files: Vec<(PathBuf, Option<(u64, u64)>)>,
    stopped_checks: u32,
}

impl Watch {
    fn new(cfg: &JournalConfig, pid: u32) -> Watch {
        let files = cfg.files.iter().map(|f| (f.clone(), file_id(f))).collect();
        Watch {
            pid,
            files,
            stopped_checks: 0,
        }
    }

    /// A reason to end the child now, if any.
    fn check(&mut self) -> Option<RunEnd> {
        if self.files.iter().any(|(f, id)| file_id(f) != *id) {
            return Some(RunEnd::FileReplaced);
        }
        // Stopped twice in a row: not a passing ptrace stop.
        if process_stopped(self.pid) {
            self.stopped_checks += 1;
        } else {
            self.stopped_checks = 0;
        }
        (self.stopped_checks >= 2).then_some(RunEnd::Stalled)
    }
}

fn file_id(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// Whether process `pid` is stopped (state `T` or `t` in `/proc/PID/stat`).
fn process_stopped(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rfind(')')
        .and_then(|p| stat[p + 1..].split_whitespace().next())
        .is_some_and(|st| st == "T" || st == "t")
}

/// Waits until `fd` has data or `timeout` passes; `false` on timeout.
fn readable(fd: std::os::fd::RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let n = unsafe { libc::poll(&mut p, 1, timeout.as_millis() as libc::c_int) };
    n != 0
}

/// Runs one child for `unit` from `start` and feeds the `MESSAGE` of each whole entry to
/// `ingest`, remembering the cursor of the last one in `cursor`. An entry the child's output
/// ends inside (it died, or was killed) is not read: it is read again after the cursor. While
/// following, a quiet child is checked every few seconds ([`Watch`]).
fn run_child(
    cfg: &JournalConfig,
    unit: &str,
    (start, until): (&Start, &mut Option<String>),
    follow: bool,
    ingest: &mut impl LineSink,
    cursor: &mut Option<String>,
    entries: &mut u64,
) -> Result<RunEnd, std::io::Error> {
    use std::os::fd::AsRawFd;
    let mut child = spawn(&cfg.journalctl, &argv(cfg, unit, start, follow))?;
    tracing::debug!(unit, pid = child.id(), ?start, "journalctl started");
    ingest.up(true);
    let mut watch = Watch::new(cfg, child.id());
    let mut end = None;
    if let Some(mut out) = child.take_stdout() {
        let mut reader = Reader::new(cfg.max_line);
        let mut caught_up = false;
        let mut counted = *entries;
        // The entry a restart goes on after, if the child prints it first.
        let mut read_before = match start {
            Start::AfterCursor(c) => Some(c.as_str()),
            _ => None,
        };
        // Quiet checks while the entry that ends the catch-up has not come: it may have been
        // vacuumed, so after a long quiet the catch-up counts as done.
        let mut quiet = 0u32;
        while end.is_none() {
            if follow && !readable(out.as_raw_fd(), WATCH) {
                quiet += 1;
                if until.is_some() && quiet == QUIET_CATCH_UP {
                    tracing::debug!(unit, "the latest entry at start never came (vacuumed?)");
                    *until = None;
                    caught_up_log(unit, follow, ingest);
                }
                end = watch.check();
                continue;
            }
            quiet = 0;
            let r = reader.fill(&mut out, |item| {
                let (Item::Entry(e) | Item::Oversized(e) | Item::Broken(e)) = &item;
                if let Some(c) = e.cursor() {
                    if until.as_deref() == Some(c) {
                        // Applied below (or read before a restart): the catch-up ends here.
                        *until = None;
                        caught_up = true;
                    }
                    if read_before.take() == Some(c) {
                        return;
                    }
                    *cursor = Some(c.to_string());
                    *entries += 1;
                }
                match item {
                    Item::Entry(e) => {
                        ingest.message(e.message.as_deref(), &e.writer, e.realtime_s())
                    }
                    Item::Oversized(_) => ingest.entry_skipped(true),
                    Item::Broken(_) => ingest.entry_skipped(false),
                }
            });
            match r {
                Ok(0) => break,
                Ok(n) => ingest.bytes(n),
                Err(e) => {
                    ingest.error();
                    end = Some(RunEnd::ReadFailed(e));
                }
            }
            if let Some(c) = cursor.as_deref() {
                let mut st = lock(ingest.state());
                st.set_journal_cursor(unit, c);
                // Counted as read (not when the child ends): a healthy unit's count moves.
                if follow && *entries > counted {
                    st.add_self(
                        SelfMetric::JournalEntries,
                        unit,
                        (*entries - counted) as f64,
                    );
                    counted = *entries;
                }
            }
            ingest.flush();
            if std::mem::take(&mut caught_up) {
                caught_up_log(unit, follow, ingest);
            }
        }
        if reader.in_entry() {
            tracing::debug!(
                unit,
                "journalctl's output ended inside an entry; it is read again after the cursor"
            );
        }
    }
    if end.is_some() {
        // Dropping the guard kills it; wait here so its stderr is drained first.
        let _ = child.kill();
    }
    let status = child.wait().ok();
    ingest.up(false);
    ingest.flush();
    Ok(end.unwrap_or(RunEnd::Exited {
        status,
        stderr: child.stderr_tail(),
    }))
}

/// The point where the reader of `unit` has caught up with the journal: every entry that
/// existed when it started (the latest one then, [`StartPoint::latest`], is read and applied, its
/// counters handed to the state), or the journal had none. Reached once per start of the
/// exporter; what comes after is live. Logged (at info when following), and the source is
/// ready (`/-/ready`, systemd's `READY=1`).
fn caught_up_log(unit: &str, follow: bool, ingest: &mut impl LineSink) {
    ingest.caught_up();
    if follow {
        tracing::info!(
            unit,
            "caught up with the journal's entries at start; following"
        );
    } else {
        tracing::debug!(unit, "read to the journal's latest entry");
    }
}

/// `--once`: reads the current invocation of `unit` to the end of the journal.
///
/// # Errors
/// A [`JournalError`] when journalctl cannot be run or fails.
pub fn read_once(
    cfg: &JournalConfig,
    unit: &str,
    ingest: &mut impl LineSink,
) -> Result<(), JournalError> {
    let bin = cfg.journalctl.display().to_string();
    // `--once` shows the whole current invocation, never the part after a saved cursor.
    let point = start_point(cfg, unit, None)?;
    let mut cursor = None;
    let mut entries = 0;
    let mut until = point.latest;
    let start = (&point.start, &mut until);
    let end = run_child(cfg, unit, start, false, ingest, &mut cursor, &mut entries)
        .map_err(|e| JournalError::Spawn(bin.clone(), e))?;
    // The end of the input: its last entries that no kind reads move the log clock.
    ingest.input_ended();
    match end {
        RunEnd::Exited {
            status: Some(s), ..
        } if s.success() => Ok(()),
        RunEnd::Exited {
            status: Some(_),
            stderr,
        } if cursor.is_none() && stderr.trim().is_empty() => Err(JournalError::NoEntries),
        RunEnd::Exited {
            status: Some(s),
            stderr,
        } => Err(JournalError::Failed(bin, s, stderr)),
        RunEnd::ReadFailed(e) => Err(JournalError::Spawn(bin, e)),
        _ => Ok(()),
    }
}

/// Follows `unit` until `stop` is set (checked between children): restores the current
/// invocation (or goes on after `cursor`, kept by the caller across restarts of this
/// function), then restarts the child after each exit, stall or file replacement (see the
/// module docs). Every restart is counted; an unknown unit is warned about once.
pub fn follow_unit(
    cfg: &JournalConfig,
    unit: &str,
    ingest: &mut impl LineSink,
    state: &Shared,
    stop: &Stop,
    cursor: &mut Option<String>,
) {
    let mut backoff = BACKOFF_START;
    let mut warned = false;
    let mut started_once = cursor.is_some();
    let mut entries = 0u64;
    let mut no_entries_warned = false;
    // The latest entry at start-up, until it is read.
    let mut until: Option<String> = None;
    // The counter exists at 0 from the start: stuck at 0 means a unit without entries.
    lock(state).add_self(SelfMetric::JournalEntries, unit, 0.0);
    while !stop.is_set() {
        let start = match cursor.as_ref() {
            Some(c) => Ok(Start::AfterCursor(c.clone())),
            // The first start: after the state file's cursor when it is in the current
            // invocation, else at that invocation's start (its startup lines).
            None => {
                let saved = lock(state).journal_cursor(unit).map(str::to_string);
                start_point(cfg, unit, saved.as_deref()).map(|p| {
                    until = p.latest.clone();
                    if until.is_none() {
                        caught_up_log(unit, true, ingest);
                    }
                    p.start
                })
            }
        };
        if matches!(start, Ok(Start::All)) && !no_entries_warned {
            no_entries_warned = true;
            tracing::warn!(unit, "the journal has no entries of this unit yet (is the name right? `journalctl -u UNIT` lists them); following it for its first entry");
        }
        if started_once {
            lock(state).add_self(SelfMetric::JournalctlRestarts, unit, 1.0);
        }
        started_once = true;
        let began = Instant::now();
        let read_before = entries;
        let (outcome, failed) = match start {
            Ok(start) => match run_child(
                cfg,
                unit,
                (&start, &mut until),
                true,
                ingest,
                cursor,
                &mut entries,
            ) {
                Ok(end) => (describe(&end, &cfg.journalctl), end.is_failure()),
                Err(e) => (
                    format!("cannot run {}: {e}", cfg.journalctl.display()),
                    true,
                ),
            },
            Err(e) => (e.to_string(), true),
        };
        // The child ended. Cut in the middle of the start-up catch-up after reading some of it
        // (killed, OOM, SIGPIPE), the restart goes on from the cursor and the catch-up is not
        // done: readiness waits for it (repro 29: `/-/ready` and `READY=1` came with 1.5 % of
        // the history read). A child that read nothing (a unit that cannot be read) must not
        // hold readiness forever: then what it could read is read.
        if until.is_none() || entries == read_before {
            ingest.caught_up();
        }
        if failed {
            // A failure of journalctl (not a clean exit, a stall or a rotated file) is a read
            // error of the source.
            ingest.error();
        }
        if stop.is_set() {
            return;
        }
        if failed {
            ingest.unreadable(&outcome);
        } else {
            ingest.up(false);
        }
        ingest.flush();
        if began.elapsed() >= HEALTHY_RUN {
            warned = false;
            backoff = BACKOFF_START;
        }
        if warned {
            tracing::debug!(unit, "{outcome}; restarting in {backoff:?}");
        } else {
            warned = true;
            tracing::warn!(unit, "{outcome}; restarting it from the last entry read (further failures are logged at debug level)");
        }
        stop.wait(backoff);
        backoff = next_backoff(backoff);
    }
}

impl RunEnd {
    /// Whether it ended by failing: a non-zero exit, a signal, a read error.
    pub fn is_failure(&self) -> bool {
        match self {
            RunEnd::Exited { status, .. } => !status.is_some_and(|s| s.success()),
            RunEnd::ReadFailed(_) => true,
            RunEnd::Stalled | RunEnd::FileReplaced => false,
        }
    }
}

/// Why a child ended, in words.
fn describe(end: &RunEnd, bin: &Path) -> String {
    match end {
        RunEnd::Exited { status, stderr } => {
            let how = status.map_or("ended".to_string(), |s| s.to_string());
            match (
                stderr.is_empty(),
                crate::source::access::journal_hint(stderr),
            ) {
                (true, _) => format!("journalctl exited ({how})"),
                (false, None) => format!("journalctl exited ({how}): {stderr}"),
                (false, Some(hint)) => format!("journalctl exited ({how}): {stderr} ({hint})"),
            }
        }
        RunEnd::Stalled => "journalctl was stopped (SIGSTOP?) and read nothing; killed it".into(),
        RunEnd::FileReplaced => {
            "a --journal-file was replaced (rotated); restarting journalctl on the new file".into()
        }
        RunEnd::ReadFailed(e) => format!("reading {} failed: {e}", bin.display()),
    }
}

/// The back-off after `d`: doubled, at most [`BACKOFF_MAX`].
pub fn next_backoff(d: Duration) -> Duration {
    (d * 2).min(BACKOFF_MAX)
}

/// The program `p` as it will be run: a path with a `/` as is, a bare name searched in `PATH`.
/// `None` when it is not an executable file.
pub fn find_program(p: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let exec = |c: &Path| {
        std::fs::metadata(c).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if p.components().count() > 1 || p.is_absolute() {
        return exec(p).then(|| p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(p))
        .find(|c| exec(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> JournalConfig {
        JournalConfig {
            units: vec!["sglang-decode.service".into()],
            files: vec!["/j/a.journal".into()],
            directories: vec!["/var/log/journal".into()],
            journalctl: "/bin/journalctl".into(),
            max_line: 1 << 20,
        }
    }

    fn strs(v: Vec<OsString>) -> Vec<String> {
        v.into_iter().map(|s| s.into_string().unwrap()).collect()
    }

    /// The reading child asks for every field the writer rule reads.
    #[test]
    fn the_child_prints_the_writer_fields() {
        let want = format!(
            "MESSAGE,_SYSTEMD_INVOCATION_ID,{}",
            super::super::writer::OUTPUT_FIELDS
        );
        assert_eq!(READ_FIELDS, want);
    }

    #[test]
    fn argv_follow_from_cursor_and_after_cursor() {
        let c = cfg();
        let base = [
            "--output=export",
            "--all",
            "--no-pager",
            "--quiet",
            "--output-fields=MESSAGE,_SYSTEMD_INVOCATION_ID,_SYSTEMD_UNIT,_SYSTEMD_USER_UNIT,CONTAINER_NAME,_HOSTNAME,SYSLOG_IDENTIFIER,_COMM,_PID,SYSLOG_PID",
            "--file=/j/a.journal",
            "--directory=/var/log/journal",
            "--show-cursor",
        ];
        let mut want: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        want.extend(
            [
                "--follow",
                "--no-tail",
                "--unit=u.service",
                "--cursor=s=1;i=2",
            ]
            .map(String::from),
        );
        assert_eq!(
            strs(argv(
                &c,
                "u.service",
                &Start::Cursor("s=1;i=2".into()),
                true
            )),
            want
        );
        let mut want: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        want.extend(["--unit=u.service", "--cursor=s=9"].map(String::from));
        assert_eq!(
            strs(argv(
                &c,
                "u.service",
                &Start::AfterCursor("s=9".into()),
                false
            )),
            want
        );
        let a = strs(argv(&c, "u.service", &Start::All, false));
        assert_eq!(a.last().map(String::as_str), Some("--unit=u.service"));
        assert!(!a.iter().any(|s| s == "--follow" || s == "--no-tail"));
    }

    #[test]
    fn probes_match_the_units_own_entries() {
        let c = cfg();
        let l = strs(latest_argv(&c, "u.service"));
        assert_eq!(&l[l.len() - 2..], ["--lines=1", "_SYSTEMD_UNIT=u.service"]);
        let i = strs(invocation_argv(&c, "u.service", "abc"));
        assert_eq!(
            &i[i.len() - 2..],
            ["_SYSTEMD_UNIT=u.service", "_SYSTEMD_INVOCATION_ID=abc"]
        );
        assert!(!i
            .iter()
            .any(|a| a == "--follow" || a.starts_with("--lines")));
    }

    #[test]
    fn backoff_doubles_to_30s() {
        let mut d = BACKOFF_START;
        let mut seen = vec![d.as_secs()];
        for _ in 0..6 {
            d = next_backoff(d);
            seen.push(d.as_secs());
        }
        assert_eq!(seen, [1, 2, 4, 8, 16, 30, 30]);
    }

    #[test]
    fn unit_names() {
        assert_eq!(unit_name("sglang-decode").unwrap(), "sglang-decode.service");
        assert_eq!(
            unit_name("sglang-decode.service").unwrap(),
            "sglang-decode.service"
        );
        assert_eq!(unit_name("sglang@v0.5").unwrap(), "sglang@v0.5.service");
        assert_eq!(unit_name("run-u1.scope").unwrap(), "run-u1.scope");
        assert!(unit_name("").is_err());
        assert!(unit_name("a b").is_err());
        assert!(unit_name("x;rm").is_err());
        assert_eq!(server_of("sglang-decode.service"), "sglang-decode");
        assert_eq!(server_of("run-u1.scope"), "run-u1.scope");
    }

    #[test]
    fn cursors() {
        let l = br#"{"__CURSOR":"s=7b;i=c9;x=d7","MESSAGE":"a \"__CURSOR\":\"no\""}"#;
        assert_eq!(cursor_of(l), Some("s=7b;i=c9;x=d7"));
        let l = br#"{"MESSAGE":"\"__CURSOR\":\"fake\"","__CURSOR":"s=1"}"#;
        assert_eq!(cursor_of(l), Some("s=1"));
        assert_eq!(cursor_of(br#"{"MESSAGE":"x"}"#), None);
        assert_eq!(cursor_of(br#"{"__CURSOR":"unterminated"#), None);
        assert_eq!(
            invocation_of(br#"{"_SYSTEMD_INVOCATION_ID":"0c9d","MESSAGE":[1,2]}"#).as_deref(),
            Some("0c9d")
        );
        assert_eq!(invocation_of(br#"{"MESSAGE":"x"}"#), None);
    }

    #[test]
    fn config_checks() {
        let sh = PathBuf::from("sh");
        assert!(JournalConfig::new(&[], &["/x".into()], &[], &sh, 1024).is_err());
        let c = JournalConfig::new(
            &["a".into(), "a.service".into()],
            &["rel.journal".into()],
            &[],
            &sh,
            1024,
        )
        .unwrap();
        assert_eq!(c.units, ["a.service"]);
        assert!(c.files[0].is_absolute());
        assert!(c.journalctl.is_absolute());
        let e = JournalConfig::new(
            &["a".into()],
            &[],
            &[],
            Path::new("/nonexistent/jctl"),
            1024,
        );
        assert!(e.unwrap_err().contains("not found"));
    }
}
