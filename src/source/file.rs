//! Following a file like `tail -F`.
//!
//! The file is read from its start (so gauges and startup facts are right at once), then
//! followed. After each end of file a small decision ([`classify`]) says what happened to the
//! path: the file grew, was truncated (copytruncate), was replaced (rename-and-create rotation:
//! the old file is finished first), is gone (deleted: keep the old handle until a new file
//! appears) or is unchanged. `notify` wakes the tailer on directory events; a stat poll is the
//! backstop where inotify is not available or misses an event.

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

use super::linebuf::LineBuf;
use super::{Ingest, Timing};

/// What happened to the path since the file was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Same file, no smaller than what was read.
    Same,
    /// Same file, now shorter than the read offset (copytruncate).
    Truncated,
    /// Another file is at the path now (rename-and-create rotation, or delete and re-create).
    Replaced,
    /// Nothing is at the path.
    Gone,
}

/// Decides what happened, from the open file's identity and offset and a fresh `stat` of the
/// path. Pure, so every case is tested without touching a disk.
pub fn classify(open: (u64, u64), offset: u64, now: io::Result<(u64, u64, u64)>) -> Change {
    match now {
        Err(_) => Change::Gone,
        Ok((dev, ino, _)) if (dev, ino) != open => Change::Replaced,
        Ok((_, _, len)) if len < offset => Change::Truncated,
        Ok(_) => Change::Same,
    }
}

/// Settings of a tailer.
#[derive(Debug, Clone)]
pub struct TailConfig {
    /// Backstop poll interval.
    pub poll: Duration,
    /// Longest line kept.
    pub max_line: usize,
    /// Read to the end once and return (no following).
    pub once: bool,
    /// How long a deleted or rotated-away file is still read before it is closed (its space
    /// freed).
    pub deleted_grace: Duration,
}

fn identity(m: &Metadata) -> (u64, u64, u64) {
    (m.dev(), m.ino(), m.len())
}

struct Open {
    file: File,
    id: (u64, u64),
    offset: u64,
    /// The last bytes before `offset`, as read. copytruncate followed by a quick write can leave
    /// the file longer than our offset: only a change in these bytes tells it was truncated.
    tail: Vec<u8>,
    /// A regular file. A FIFO, a character device or a process substitution (`<(cmd)`) is read
    /// as a stream: no positioned reads, no truncation or rotation checks.
    regular: bool,
}

/// Most rotated-away files still read at once (rotations faster than the grace period).
const MAX_RETIRED: usize = 8;

/// How many bytes before the offset identify the content we already read.
const TAIL_CHECK: u64 = 64;

impl Open {
    fn read_tail(&self) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let n = self.offset.min(TAIL_CHECK);
        let mut buf = vec![0u8; n as usize];
        self.file.read_exact_at(&mut buf, self.offset - n)?;
        Ok(buf)
    }

    /// Whether the bytes before the offset are still those we read (false also when they can no
    /// longer be read: the file is shorter).
    fn tail_intact(&self) -> bool {
        self.read_tail().is_ok_and(|t| t == self.tail)
    }
}

/// Reads `path` to its end (`once`) or follows it until `stop` is set.
///
/// Errors never end the tailer: a missing file is waited for, an unreadable one or a directory
/// is warned about once and retried, every error counted in the source's self metrics.
pub fn follow(path: &Path, ingest: &mut Ingest, cfg: &TailConfig, stop: &AtomicBool) {
    let (tx, rx) = channel::<()>();
    // The watcher must live as long as the loop; without one the poll alone drives us.
    let _watcher = if cfg.once { None } else { watch_dir(path, tx) };
    let mut lb = LineBuf::new(cfg.max_line);
    let mut open: Option<Open> = None;
    let mut last_error: Option<String> = None;
    let mut first_pass = true;
    // Since when the path has had no file while we hold the deleted one open.
    let mut gone_since: Option<std::time::Instant> = None;
    // Files rotated away (renamed): the writer may go on writing to one until it reopens its
    // log, so each is still read, with its own line buffer, for the grace period.
    let mut retired: Vec<(Open, LineBuf, std::time::Instant)> = Vec::new();
    ingest.set_timing(Timing::LogTime);
    loop {
        if open.is_none() {
            match open_file(path) {
                // A rotated-away file renamed back: go on where we were in it, not from its
                // start (and never read it twice).
                Ok(o) if retired.iter().any(|(r, _, _)| r.id == o.id) => {
                    if let Some(i) = retired.iter().position(|(r, _, _)| r.id == o.id) {
                        let (r, l, _) = retired.remove(i);
                        lb = l;
                        open = Some(r);
                        ingest.set_up(true);
                    }
                }
                Ok(o) => {
                    if last_error.take().is_some() || !first_pass {
                        tracing::info!(path = %path.display(), "reading the file");
                    }
                    ingest.set_up(true);
                    open = Some(o);
                }
                Err(e) => {
                    let msg = e.to_string();
                    if last_error.as_deref() != Some(msg.as_str()) {
                        ingest.count_error();
                        tracing::warn!(path = %path.display(), "cannot read the file: {msg}; will retry");
                        last_error = Some(msg);
                    }
                    // After the count, so a scrape that sees the source down sees why.
                    ingest.set_up(false);
                    if cfg.once {
                        ingest.flush();
                        return;
                    }
                }
            }
        }
        if let Some(o) = open.as_mut() {
            if o.regular && o.offset > 0 && !o.tail_intact() {
                tracing::info!(path = %path.display(), "the file was truncated and rewritten; reading it from the start");
                lb.flush_partial(|e| ingest.event(e));
                if let Err(e) = rewind(o) {
                    tracing::warn!(path = %path.display(), "seek failed: {e}; reopening");
                    open = None;
                    continue;
                }
            }
            if let Err(e) = drain(o, &mut lb, ingest) {
                ingest.count_error();
                tracing::warn!(path = %path.display(), "reading failed: {e}; reopening");
                lb.reset();
                open = None;
                continue;
            }
            ingest.flush();
            if cfg.once {
                lb.flush_partial(|e| ingest.event(e));
                ingest.flush();
                return;
            }
            if first_pass {
                // Caught up with history: from now on a line's time is when it arrives.
                first_pass = false;
                ingest.set_timing(Timing::Arrival);
            }
            let now = std::fs::metadata(path).map(|m| identity(&m));
            let change = if o.regular {
                classify(o.id, o.offset, now)
            } else {
                Change::Same
            };
            if change != Change::Gone {
                gone_since = None;
            }
            match change {
                Change::Same => {}
                Change::Gone => {
                    // Keep reading the deleted file for a while (the writer may still be
                    // writing, a new file may appear), then let it go so its space is freed.
                    let since = *gone_since.get_or_insert_with(std::time::Instant::now);
                    if since.elapsed() >= cfg.deleted_grace {
                        tracing::info!(path = %path.display(), "the file was deleted and no new one appeared; closed it, waiting for the path to reappear");
                        lb.flush_partial(|e| ingest.event(e));
                        ingest.flush();
                        ingest.set_up(false);
                        open = None;
                        gone_since = None;
                    }
                }
                Change::Truncated => {
                    tracing::info!(path = %path.display(), "the file was truncated; reading it from the start");
                    lb.flush_partial(|e| ingest.event(e));
                    if let Err(e) = rewind(o) {
                        tracing::warn!(path = %path.display(), "seek failed: {e}; reopening");
                        open = None;
                    }
                    continue;
                }
                Change::Replaced => {
                    // Finish what the old file holds, keep reading it for a while, and read the
                    // new one from its start.
                    let _ = drain(o, &mut lb, ingest);
                    ingest.flush();
                    tracing::info!(path = %path.display(), "the file was rotated; following the new one");
                    if let Some(old) = open.take() {
                        let old_lb = std::mem::replace(&mut lb, LineBuf::new(cfg.max_line));
                        retired.push((old, old_lb, std::time::Instant::now()));
                        if retired.len() > MAX_RETIRED {
                            let (_, mut l, _) = retired.remove(0);
                            l.flush_partial(|e| ingest.event(e));
                        }
                    }
                    continue;
                }
            }
        }
        retired.retain_mut(|(o, l, since)| {
            let keep = drain(o, l, ingest).is_ok() && since.elapsed() < cfg.deleted_grace;
            if !keep {
                l.flush_partial(|e| ingest.event(e));
            }
            keep
        });
        ingest.flush();
        if stop.load(Ordering::Relaxed) {
            ingest.flush();
            return;
        }
        wait(&rx, cfg.poll);
    }
}

/// Waits for a watcher event or the poll interval; coalesces a burst of events into one wake-up.
fn wait(rx: &Receiver<()>, poll: Duration) {
    match rx.recv_timeout(poll) {
        Ok(()) => while rx.try_recv().is_ok() {},
        Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {}
    }
}

fn open_file(path: &Path) -> io::Result<Open> {
    let file = File::open(path)?;
    let m = file.metadata()?;
    if m.is_dir() {
        return Err(io::Error::other("it is a directory, not a file"));
    }
    let (dev, ino, _) = identity(&m);
    Ok(Open {
        file,
        id: (dev, ino),
        offset: 0,
        tail: Vec::new(),
        regular: m.file_type().is_file(),
    })
}

fn rewind(o: &mut Open) -> io::Result<()> {
    io::Seek::seek(&mut o.file, io::SeekFrom::Start(0))?;
    o.offset = 0;
    o.tail.clear();
    Ok(())
}

/// Reads to the end of the file, then remembers the bytes before the new offset.
fn drain(o: &mut Open, lb: &mut LineBuf, ingest: &mut Ingest) -> io::Result<()> {
    let start = o.offset;
    loop {
        let n = lb.fill(&mut o.file as &mut dyn Read, |e| ingest.event(e))?;
        if n == 0 {
            break;
        }
        o.offset += n as u64;
        ingest.count_bytes(n);
    }
    if o.regular && o.offset != start {
        o.tail = o.read_tail()?;
    }
    Ok(())
}

fn watch_dir(path: &Path, tx: std::sync::mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    let dir: PathBuf = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut w = notify::recommended_watcher(move |_res: notify::Result<notify::Event>| {
        let _ = tx.send(());
    })
    .map_err(|e| tracing::debug!("no file watcher ({e}); polling"))
    .ok()?;
    match w.watch(&dir, RecursiveMode::NonRecursive) {
        Ok(()) => Some(w),
        Err(e) => {
            tracing::debug!(dir = %dir.display(), "cannot watch the directory ({e}); polling");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_every_case() {
        let ok = |d, i, l| Ok((d, i, l));
        assert_eq!(classify((1, 2), 10, ok(1, 2, 10)), Change::Same);
        assert_eq!(classify((1, 2), 10, ok(1, 2, 50)), Change::Same);
        assert_eq!(classify((1, 2), 10, ok(1, 2, 3)), Change::Truncated);
        assert_eq!(classify((1, 2), 10, ok(1, 3, 50)), Change::Replaced);
        assert_eq!(
            classify((1, 2), 10, Err(io::Error::from(io::ErrorKind::NotFound))),
            Change::Gone
        );
    }
}
