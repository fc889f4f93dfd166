//! Following a file like `tail -F`.
//!
//! A [`Tailer`] reads the file from its start (so gauges and startup facts are right at once),
//! then follows it. After each end of file a small decision ([`classify`]) says what happened to
//! the path: the file grew, was truncated (copytruncate), was replaced (rename-and-create
//! rotation: the old file is finished first), is gone (deleted: keep the old handle for the
//! grace period) or is unchanged. `notify` wakes the tailer on directory events; a stat poll is
//! the backstop where inotify is not available or misses an event.
//!
//! The tailer knows nothing of parsing: it hands whole lines and what happened to a [`Sink`]
//! (the ingest, or a test's recorder). It keeps its position outside any one run, so a reader
//! restarted after a failure resumes after the last line it handed out ([`Tailer::recover`]).

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::linebuf::{Event, LineBuf};
use crate::stop::Stop;

/// What a tailer reports to.
pub trait Sink {
    /// A line, an over-long line, a cut line or a skipped NUL run.
    fn event(&mut self, e: Event<'_>);
    /// Bytes read.
    fn bytes(&mut self, n: usize);
    /// A read error (counted).
    fn error(&mut self);
    /// Whether the source is open and being read.
    fn up(&mut self, up: bool);
    /// The file cannot be opened, for `why` (the source is down: [`crate::state::ready`]).
    fn unreadable(&mut self, _why: &str) {
        self.up(false);
    }
    /// A moment to hand batched counters on (after each burst of reading).
    fn flush(&mut self);
    /// The history is read (the file's content when it was first opened): from now on lines
    /// are live. `mtime` is the file's modification time, the best time for history lines that
    /// carry none.
    fn history(&mut self, done: bool, mtime: Option<f64>);
    /// The file ended, or was rotated or truncated: what is held across lines is dropped.
    fn input_ended(&mut self) {}
    /// The first look is done: the file was read to its end, or there was none to read (see
    /// [`crate::state::ready`]). Said once per tailer.
    fn caught_up(&mut self) {}
}

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
    /// A character device at the path is read as a stream (a path given on the command line:
    /// a terminal, `/dev/stdin`); `false` for a discovered file, where one is no log file
    /// (`rnd.log -> /dev/urandom` would be read without end).
    pub char_devices: bool,
}

/// What a file at an input's path is when it is no log file to read: a block device or a
/// socket, or (unless `char_devices`) a character device. `None` for what is read: a regular
/// file, a FIFO, and with `char_devices` a character device.
pub fn unreadable_kind(m: &Metadata, char_devices: bool) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_char_device() && !char_devices {
        Some("a character device")
    } else {
        None
    }
}

fn identity(m: &Metadata) -> (u64, u64, u64) {
    (m.dev(), m.ino(), m.len())
}

/// An open file and where we are in it.
struct Open {
    file: File,
    id: (u64, u64),
    /// Bytes read from the file (the line buffer holds those of a partial line).
    offset: u64,
    /// The last bytes before `offset`, as read. copytruncate followed by a quick write can leave
    /// the file longer than our offset: only a change in these bytes tells it was truncated.
    tail: Vec<u8>,
    /// A regular file. A FIFO, a character device or a process substitution (`<(cmd)`) is read
    /// as a stream: no positioned reads, no truncation or rotation checks.
    regular: bool,
    /// A stream: the last read found nothing there for now (its writer is still there).
    blocked: bool,
    /// A stream: a writer was there (something read, or a read found nothing for now). Its
    /// history ends at its first end (its writers gone), not at a pause in their writing nor
    /// before the first writer came, as when a FIFO's open waited for a writer.
    had_writer: bool,
    lb: LineBuf,
    /// A partial last line not held in memory (see [`Spill`]).
    spilled: Option<Spill>,
    /// Bytes up to this offset were counted as read ([`Sink::bytes`]): a line read again after a
    /// spill is not counted twice.
    counted_to: u64,
}

/// A regular file's partial last line longer than half a [`LineBuf`] at rest, which is not kept
/// in memory: the writer may stay mid-line for hours, and 256 followed files each holding up to
/// `--max-line-bytes` would be 256 MiB. The bytes after it are only looked through for its `\n`
/// ([`LineBuf::scan`]); when it comes, the line is read again from the file, whole. What stays
/// in memory for a followed file is an idle buffer ([`crate::source::linebuf::IDLE_SIZE`]).
#[derive(Debug, Clone, Copy)]
struct Spill {
    /// Offset of the line's first byte.
    from: u64,
    /// It is longer than the limit: reported as oversized already, skipped when it ends.
    oversized: bool,
}

/// Most rotated-away files still read at once (rotations faster than the grace period).
const MAX_RETIRED: usize = 8;

/// How many bytes before the offset identify the content we already read.
const TAIL_CHECK: u64 = 64;

/// Most bytes one look reads from the followed file before it lets the other files of the
/// pool have their turn ([`Step::More`]): a file written without end, or a long history, does
/// not keep a thread of the pool ([`crate::source::pool`]) from the others.
pub const TURN_BYTES: u64 = 4 << 20;

/// A stream opened not to block (a FIFO, a terminal): "nothing to read now" is read as
/// nothing, like the end of a file, so a thread of the pool never waits in `read`; it is
/// noted (`.1`).
struct Ready<'a>(&'a mut File, &'a mut bool);

impl Read for Ready<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                *self.1 = true;
                Ok(0)
            }
            r => r,
        }
    }
}

impl Open {
    /// Opens `path`; a stream (FIFO, character device) without blocking when `follow` (for
    /// `once` it is read to its end, waiting for its writer).
    fn new(path: &Path, max_line: usize, char_devices: bool, follow: bool) -> io::Result<Open> {
        use std::os::unix::fs::OpenOptionsExt;
        let not_log = |kind: &str| io::Error::other(format!("it is {kind}, not a log file"));
        // Looked at before opening: opening a device can have effects of its own.
        if let Some(kind) = unreadable_kind(&std::fs::metadata(path)?, char_devices) {
            return Err(not_log(kind));
        }
        // Opening a FIFO waits for a writer, unless non-blocking (no effect on a regular file).
        let flags = if follow { libc::O_NONBLOCK } else { 0 };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(path)?;
        let m = file.metadata()?;
        if m.is_dir() {
            return Err(io::Error::other("it is a directory, not a file"));
        }
        if let Some(kind) = unreadable_kind(&m, char_devices) {
            return Err(not_log(kind));
        }
        let (dev, ino, _) = identity(&m);
        let mut o = Open {
            file,
            id: (dev, ino),
            offset: 0,
            tail: Vec::new(),
            regular: m.file_type().is_file(),
            blocked: false,
            had_writer: false,
            lb: LineBuf::new(max_line),
            spilled: None,
            counted_to: 0,
        };
        if o.regular {
            o.seek_to(0)?;
        }
        Ok(o)
    }

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

    /// Goes to `pos` (forgetting any partial line), then past a hole there: a copytruncate
    /// whose writer did not append leaves the file sparse up to the writer's offset, and the
    /// hole is skipped with `SEEK_DATA` instead of being read (where the filesystem has no
    /// holes, the line buffer skips the NULs).
    fn seek_to(&mut self, pos: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let mut at = pos;
        // SAFETY: lseek on a descriptor we own; it reads no memory of ours.
        let data =
            unsafe { libc::lseek(self.file.as_raw_fd(), pos as libc::off_t, libc::SEEK_DATA) };
        if data >= 0 {
            at = data as u64;
        } else if io::Error::last_os_error().raw_os_error() == Some(libc::ENXIO) {
            // Only a hole (or nothing) after `pos`: wait at the end for data.
            at = self.file.metadata()?.len().max(pos);
        }
        io::Seek::seek(&mut self.file, io::SeekFrom::Start(at))?;
        self.offset = at;
        self.spilled = None;
        self.lb.set_position(at);
        self.tail = if at > 0 {
            self.read_tail()?
        } else {
            Vec::new()
        };
        Ok(())
    }

    /// Reads to the end of the file, or [`TURN_BYTES`] of it; whether it got to the end. Then
    /// remembers the bytes before the new offset. At a line boundary, a hole ahead (the writer
    /// of a truncated file went on at its old offset) is skipped first rather than read.
    fn drain(&mut self, sink: &mut dyn Sink) -> io::Result<bool> {
        if self.regular && self.lb.pending() == 0 && self.spilled.is_none() {
            self.skip_hole()?;
        }
        let start = self.offset;
        let (mut ended, mut read) = (true, 0u64);
        self.blocked = false;
        if self.scan_spilled(sink)? {
            loop {
                let n = self.lb.fill(
                    &mut Ready(&mut self.file, &mut self.blocked) as &mut dyn Read,
                    |e| sink.event(e),
                )?;
                if n == 0 {
                    break;
                }
                self.advance(n, sink);
                self.had_writer = true;
                read += n as u64;
                if read >= TURN_BYTES {
                    ended = false;
                    break;
                }
            }
            // At rest: a long partial line of a regular file is let go (read again when it
            // ends), so what a followed file holds stays an idle buffer. Not at a pause after
            // `TURN_BYTES`: a line longer than that would be let go and read again for ever.
            if ended && self.regular && self.lb.pending() > 0 && !self.lb.rest() {
                // What is held may be the rest of a line over the limit, reported already:
                // it stays skipped.
                self.spilled = Some(Spill {
                    from: self.lb.position(),
                    oversized: self.lb.skipping(),
                });
                self.lb.release();
            }
        }
        if self.regular && self.offset != start {
            self.tail = self.read_tail()?;
        }
        self.had_writer |= self.blocked;
        if ended && self.spilled.is_none() {
            // At rest: nothing of a read buffer is kept where no partial line is.
            self.lb.shed();
        }
        Ok(ended)
    }

    /// Reads to the end of the file, however much that is.
    fn drain_all(&mut self, sink: &mut dyn Sink) -> io::Result<()> {
        while !self.drain(sink)? {}
        Ok(())
    }

    /// Moves the offset past `n` bytes just read, counting those not counted before.
    fn advance(&mut self, n: usize, sink: &mut dyn Sink) {
        let end = self.offset + n as u64;
        let fresh = end.saturating_sub(self.offset.max(self.counted_to));
        self.offset = end;
        self.counted_to = self.counted_to.max(end);
        if fresh > 0 {
            sink.bytes(fresh as usize);
        }
    }

    /// With a spilled partial line ([`Spill`]): reads on, keeping nothing, until its `\n`.
    /// Whether it came (or there was no spilled line): the file is then back at the line's
    /// start (or just past it, for a line over the limit, skipped) for reading as usual.
    fn scan_spilled(&mut self, sink: &mut dyn Sink) -> io::Result<bool> {
        let Some(mut spill) = self.spilled else {
            return Ok(true);
        };
        let max_line = self.lb.max_line() as u64;
        loop {
            let at = self.offset;
            let (n, nl) = self.lb.scan(&mut self.file as &mut dyn Read)?;
            if n == 0 {
                self.spilled = Some(spill);
                return Ok(false);
            }
            self.advance(n, sink);
            let len = match nl {
                Some(i) => at + i as u64 - spill.from,
                None => self.offset - spill.from,
            };
            // Over the limit: reported once, as the line buffer does.
            if len > max_line && !std::mem::replace(&mut spill.oversized, true) {
                sink.event(Event::Oversized);
            }
            let Some(i) = nl else {
                continue;
            };
            if spill.oversized {
                self.seek_to(at + i as u64 + 1)?;
            } else {
                self.seek_to(spill.from)?;
            }
            return Ok(true);
        }
    }

    /// Moves past a hole at the offset, if the filesystem reports one (`SEEK_DATA`).
    fn skip_hole(&mut self) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: lseek on a descriptor we own; it reads no memory of ours.
        let data = unsafe {
            libc::lseek(
                self.file.as_raw_fd(),
                self.offset as libc::off_t,
                libc::SEEK_DATA,
            )
        };
        // -1 (ENXIO: no data ahead; or no SEEK_DATA here) leaves the position as it was.
        if data > self.offset as libc::off_t {
            io::Seek::seek(&mut self.file, io::SeekFrom::Start(data as u64))?;
            self.offset = data as u64;
            self.lb.set_position(self.offset);
        }
        Ok(())
    }

    /// Drops the partial last line (reported as cut, unless it was over the limit: reported as
    /// oversized already, as the line buffer does).
    fn flush_partial(&mut self, sink: &mut dyn Sink) {
        if self.spilled.take().is_some_and(|s| !s.oversized) {
            sink.event(Event::Incomplete);
        }
        self.lb.flush_partial(|e| sink.event(e));
        sink.input_ended();
    }
}

/// A file followed like `tail -F`; see the module docs.
pub struct Tailer {
    path: PathBuf,
    cfg: TailConfig,
    open: Option<Open>,
    /// Files rotated away (renamed): the writer may go on writing to one until it reopens its
    /// log, so each is still read for the grace period.
    retired: Vec<(Open, Instant)>,
    /// Since when the path has had no file while we hold the deleted one open.
    gone_since: Option<Instant>,
    last_error: Option<String>,
    /// Still reading what the file held when first opened.
    in_history: bool,
    /// [`Sink::caught_up`] was said.
    said_caught_up: bool,
    /// The path was a symbolic link when last opened: its file's events come to the target's
    /// directory, which is not watched.
    via_link: bool,
}

/// A followed file whose events come (its directory is watched) is also looked at, in case one
/// was missed, every this many poll intervals (5 s at the default 250 ms).
pub const SLOW_POLL: u32 = 20;

/// Says [`Sink::caught_up`] unless `said`.
fn caught_up_once(said: &mut bool, sink: &mut dyn Sink) {
    if !std::mem::replace(said, true) {
        sink.caught_up();
    }
}

/// What one look at the file found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Caught up; wait for more.
    Wait,
    /// Something changed (rotation, truncation): look again at once.
    Again,
    /// `once`: the file is read to its end (or cannot be read).
    Done,
    /// [`TURN_BYTES`] were read and there is more: look again (after other files had a turn).
    More,
}

/// What a turn ([`Tailer::turn`]) leaves to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// Caught up: look again when woken (a file event), or after this long (the backstop).
    Wait(Duration),
    /// There is more to read: look again soon.
    More,
    /// Stopped (or, `once`, read to the end).
    Done,
}

impl Tailer {
    /// A tailer of `path`.
    pub fn new(path: &Path, cfg: TailConfig) -> Tailer {
        Tailer {
            path: path.to_path_buf(),
            cfg,
            open: None,
            retired: Vec::new(),
            gone_since: None,
            last_error: None,
            in_history: true,
            said_caught_up: false,
            via_link: false,
        }
    }

    /// Whether the followed file is open (and read).
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// After a failure in the middle of reading: goes back to just after the last line handed
    /// out (the line being read when it failed is not read again), forgetting the partial line.
    pub fn recover(&mut self) {
        if let Some(o) = self.open.as_mut() {
            if o.spilled.is_some() {
                // Looking for a spilled line's end: nothing of it was handed out; go on there.
                let at = io::SeekFrom::Start(o.offset);
                if io::Seek::seek(&mut o.file, at).is_err() {
                    o.spilled = None;
                    o.lb.reset();
                }
                return;
            }
            let pos = o.lb.position();
            if !o.regular || o.seek_to(pos).is_err() {
                o.lb.reset();
            }
        }
    }

    /// Follows the file until `stop` is set (returns at the end with `once`), on this thread:
    /// what `--once` does (the followers of the service are jobs of
    /// [`crate::source::follow`], which take [`Tailer::turn`]s on a pool's threads).
    ///
    /// Errors never end the tailer: a missing file is waited for, an unreadable one or a
    /// directory is warned about once and retried, every error counted.
    pub fn run(&mut self, sink: &mut dyn Sink, stop: &Stop) {
        if self.open.is_some() {
            // Resumed after a failure (see `recover`).
            sink.up(true);
        }
        let (tx, rx) = channel::<()>();
        let wake: super::watch::Wake = Arc::new(move || {
            let _ = tx.send(());
        });
        let watch = (!self.cfg.once).then(|| super::watch::subscribe(&self.path, wake));
        loop {
            if let Some(w) = &watch {
                w.retry();
            }
            let watching = watch.as_ref().is_some_and(|w| w.is_watching());
            match self.turn(sink, stop, watching) {
                Turn::Done => return,
                Turn::More => {}
                Turn::Wait(d) => wait(&rx, d),
            }
        }
    }

    /// One turn of following: reads what is new (up to [`TURN_BYTES`] of the followed file;
    /// rotations and truncations are dealt with as they are found), then the rotated-away
    /// files, and hands the counters on. `watching`: the file's directory is watched, so its
    /// events wake the caller (see [`Tailer::backstop`]).
    pub fn turn(&mut self, sink: &mut dyn Sink, stop: &Stop, watching: bool) -> Turn {
        let more = loop {
            match self.step(sink) {
                Step::Done => return Turn::Done,
                Step::Again => {}
                Step::More => break true,
                Step::Wait => break false,
            }
        };
        self.read_retired(sink);
        sink.flush();
        if stop.is_set() {
            Turn::Done
        } else if more {
            Turn::More
        } else {
            Turn::Wait(self.backstop(watching))
        }
    }

    /// How long to wait for a wake-up before looking anyway: the poll interval where events may
    /// not come (the directory is not watched, the path is a symbolic link, the file is a
    /// stream, a deleted or rotated-away file is still read: their events are not all this
    /// path's), else [`SLOW_POLL`] poll intervals, in case an event was missed.
    pub fn backstop(&self, watching: bool) -> Duration {
        let evented = watching
            && !self.via_link
            && self.retired.is_empty()
            && self.gone_since.is_none()
            && self.open.as_ref().is_none_or(|o| o.regular);
        if evented {
            self.cfg.poll.saturating_mul(SLOW_POLL)
        } else {
            self.cfg.poll
        }
    }

    /// One look: open the file if needed, read what is new, decide what happened to the path.
    pub fn step(&mut self, sink: &mut dyn Sink) -> Step {
        if self.open.is_none() && !self.reopen(sink) {
            if self.cfg.once {
                return Step::Done;
            }
            // No file yet (or an unreadable one): nothing to catch up with at start.
            caught_up_once(&mut self.said_caught_up, sink);
            return Step::Wait;
        }
        let Some(o) = self.open.as_mut() else {
            return Step::Wait;
        };
        if o.regular && o.offset > 0 && !o.tail_intact() {
            tracing::info!(path = %self.path.display(), "the file was truncated and rewritten; reading it from the start");
            return self.rewind(sink);
        }
        match o.drain(sink) {
            Err(e) => {
                sink.error();
                tracing::warn!(path = %self.path.display(), "reading failed: {e}; reopening");
                self.open = None;
                return Step::Again;
            }
            Ok(false) => {
                sink.flush();
                return Step::More;
            }
            Ok(true) => {}
        }
        sink.flush();
        if self.cfg.once {
            o.flush_partial(sink);
            sink.flush();
            return Step::Done;
        }
        if self.in_history && !o.regular && (o.blocked || !o.had_writer) {
            // A stream whose writer has not come yet, or is still writing: not its end.
            return Step::Wait;
        }
        if self.in_history {
            // Caught up with history: from now on a line's time is when it arrives.
            self.in_history = false;
            sink.history(true, None);
        }
        caught_up_once(&mut self.said_caught_up, sink);
        let now = std::fs::metadata(&self.path).map(|m| identity(&m));
        let change = if o.regular {
            classify(o.id, o.offset, now)
        } else {
            Change::Same
        };
        if change != Change::Gone {
            self.gone_since = None;
        }
        match change {
            Change::Same => Step::Wait,
            Change::Gone => self.gone(sink),
            Change::Truncated => {
                tracing::info!(path = %self.path.display(), "the file was truncated; reading it from the start");
                self.rewind(sink)
            }
            Change::Replaced => self.rotated(sink),
        }
    }

    /// Opens the file at the path; `false` when it cannot be (counted and warned once).
    fn reopen(&mut self, sink: &mut dyn Sink) -> bool {
        self.via_link = std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.is_symlink());
        let follow = !self.cfg.once;
        match Open::new(&self.path, self.cfg.max_line, self.cfg.char_devices, follow) {
            // A rotated-away file renamed back: go on where we were in it, not from its
            // start (and never read it twice).
            Ok(o) if self.retired.iter().any(|(r, _)| r.id == o.id) => {
                if let Some(i) = self.retired.iter().position(|(r, _)| r.id == o.id) {
                    self.open = Some(self.retired.remove(i).0);
                    sink.up(true);
                }
                true
            }
            Ok(o) => {
                if self.last_error.take().is_some() || !self.in_history {
                    tracing::info!(path = %self.path.display(), "reading the file");
                }
                if self.in_history && !self.cfg.once {
                    let mtime = o.file.metadata().ok().and_then(|m| m.modified().ok());
                    let secs = mtime
                        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                        .map(|d| d.as_secs_f64());
                    sink.history(false, secs);
                }
                sink.up(true);
                self.open = Some(o);
                true
            }
            Err(e) => {
                let msg = match crate::source::access::file_hint(e.kind(), &self.path) {
                    Some(hint) => format!("{e} ({hint})"),
                    None => e.to_string(),
                };
                if self.last_error.as_deref() != Some(msg.as_str()) {
                    sink.error();
                    tracing::warn!(path = %self.path.display(), "cannot read the file: {msg}; will retry");
                    self.last_error = Some(msg.clone());
                }
                // After the count, so a scrape that sees the source down sees why.
                sink.unreadable(&msg);
                sink.flush();
                false
            }
        }
    }

    /// The file is shorter than what we read, or was rewritten: read it again from its start.
    fn rewind(&mut self, sink: &mut dyn Sink) -> Step {
        let Some(o) = self.open.as_mut() else {
            return Step::Again;
        };
        o.flush_partial(sink);
        // Another content: its bytes are read anew, and counted.
        o.counted_to = 0;
        if let Err(e) = o.seek_to(0) {
            tracing::warn!(path = %self.path.display(), "seek failed: {e}; reopening");
            self.open = None;
        }
        Step::Again
    }

    /// Keep reading the deleted file for a while (the writer may still be writing, a new file
    /// may appear), then let it go so its space is freed.
    fn gone(&mut self, sink: &mut dyn Sink) -> Step {
        let since = *self.gone_since.get_or_insert_with(|| {
            tracing::info!(path = %self.path.display(), grace = ?self.cfg.deleted_grace, "the file was deleted; still reading it for the grace period");
            Instant::now()
        });
        if since.elapsed() >= self.cfg.deleted_grace {
            if let Some(mut o) = self.open.take() {
                o.flush_partial(sink);
            }
            sink.flush();
            sink.up(false);
            // After the close, so whoever reads this finds the descriptor gone.
            tracing::info!(path = %self.path.display(), "the file was deleted and no new one appeared; closed it, waiting for the path to reappear");
            self.gone_since = None;
        }
        Step::Wait
    }

    /// Another file is at the path: finish what the old one holds, keep reading it for the
    /// grace period, and read the new one from its start.
    fn rotated(&mut self, sink: &mut dyn Sink) -> Step {
        if let Some(mut old) = self.open.take() {
            let _ = old.drain_all(sink);
            sink.flush();
            tracing::info!(path = %self.path.display(), "the file was rotated; following the new one");
            self.retired.push((old, Instant::now()));
            if self.retired.len() > MAX_RETIRED {
                let (mut o, _) = self.retired.remove(0);
                o.flush_partial(sink);
            }
        }
        Step::Again
    }

    /// Reads the rotated-away files still within their grace period; closes the others.
    fn read_retired(&mut self, sink: &mut dyn Sink) {
        let grace = self.cfg.deleted_grace;
        let before = self.retired.len();
        self.retired.retain_mut(|(o, since)| {
            // Read to its end, also the last time (closed after).
            let keep = o.drain_all(sink).is_ok() && since.elapsed() < grace;
            if !keep {
                o.flush_partial(sink);
            }
            keep
        });
        if self.retired.len() < before {
            // After the close (the `retain` above dropped the file).
            tracing::info!(path = %self.path.display(), "closed a file rotated away from this path: its grace period is over");
        }
    }

    /// Files held open: the followed one and the rotated-away ones in their grace period.
    pub fn open_files(&self) -> usize {
        usize::from(self.open.is_some()) + self.retired.len()
    }
}

/// Waits for a watcher event or the poll interval; coalesces a burst of events into one wake-up.
/// Waits for a wake-up or the poll interval, whichever comes first. A channel that cannot be
/// woken (no sender left) still waits the interval: never a busy loop.
fn wait(rx: &Receiver<()>, poll: Duration) {
    match rx.recv_timeout(poll) {
        Ok(()) => while rx.try_recv().is_ok() {},
        Err(RecvTimeoutError::Timeout) => {}
        Err(RecvTimeoutError::Disconnected) => std::thread::sleep(poll),
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

    /// Records what a tailer hands out.
    #[derive(Default)]
    struct Rec {
        lines: Vec<String>,
        nuls: usize,
        oversized: usize,
        incomplete: usize,
        bytes: usize,
        errors: usize,
        /// The `done` of each [`Sink::history`].
        history: Vec<bool>,
        caught_up: usize,
    }

    impl Sink for Rec {
        fn event(&mut self, e: Event<'_>) {
            match e {
                Event::Line(l, _) => self.lines.push(String::from_utf8_lossy(l).into_owned()),
                Event::NulRun(_) => self.nuls += 1,
                Event::Oversized => self.oversized += 1,
                Event::Incomplete => self.incomplete += 1,
            }
        }
        fn bytes(&mut self, n: usize) {
            self.bytes += n;
        }
        fn error(&mut self) {
            self.errors += 1;
        }
        fn up(&mut self, _: bool) {}
        fn flush(&mut self) {}
        fn history(&mut self, done: bool, _: Option<f64>) {
            self.history.push(done);
        }
        fn caught_up(&mut self) {
            self.caught_up += 1;
        }
    }

    fn cfg() -> TailConfig {
        TailConfig {
            poll: Duration::from_millis(10),
            max_line: 1024,
            once: false,
            deleted_grace: Duration::from_secs(60),
            char_devices: true,
        }
    }

    /// A discovered log replaced by a symlink to `/dev/zero` is not read (an endless read at
    /// full speed otherwise): counted once as an error, retried; a path given on the command
    /// line may be a character device, read as a stream.
    #[test]
    fn a_character_device_is_read_only_where_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rnd.log");
        std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        let discovered = TailConfig {
            char_devices: false,
            ..cfg()
        };
        let mut t = Tailer::new(&p, discovered);
        let mut rec = Rec::default();
        for _ in 0..3 {
            assert_eq!(t.step(&mut rec), Step::Wait);
        }
        assert_eq!((rec.bytes, rec.errors), (0, 1));
        assert!(unreadable_kind(&std::fs::metadata(&p).unwrap(), true).is_none());
        let null = Path::new("/dev/null");
        let mut t = Tailer::new(
            null,
            TailConfig {
                once: true,
                ..cfg()
            },
        );
        let mut rec = Rec::default();
        assert_eq!(t.step(&mut rec), Step::Done);
        assert_eq!(rec.errors, 0);
    }

    /// A FIFO followed on the pool's threads is opened and read without blocking: no writer
    /// yet, or a writer that is still writing, is no end of its history (it was when the open
    /// and the reads waited); its first end (the writer gone) is. Then a new writer's lines
    /// are live.
    #[test]
    fn a_fifo_is_read_without_blocking_and_its_history_ends_with_its_writer() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pipe.log");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let mut t = Tailer::new(&p, cfg());
        let mut rec = Rec::default();
        let stop = Stop::new();
        // No writer: the look returns at once, caught up with nothing.
        assert_eq!(t.turn(&mut rec, &stop, true), Turn::Wait(cfg().poll));
        assert_eq!((rec.history.as_slice(), rec.caught_up), (&[false][..], 0));
        let mut w = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        w.write_all(b"a\nb").unwrap();
        assert_eq!(t.turn(&mut rec, &stop, true), Turn::Wait(cfg().poll));
        assert_eq!(rec.lines, ["a"]);
        assert_eq!((rec.history.as_slice(), rec.caught_up), (&[false][..], 0));
        w.write_all(b"\n").unwrap();
        drop(w);
        assert_eq!(t.turn(&mut rec, &stop, true), Turn::Wait(cfg().poll));
        assert_eq!(rec.lines, ["a", "b"]);
        assert_eq!(
            (rec.history.as_slice(), rec.caught_up),
            (&[false, true][..], 1)
        );
        let mut w = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        w.write_all(b"c\n").unwrap();
        t.turn(&mut rec, &stop, true);
        assert_eq!(rec.lines, ["a", "b", "c"]);
        assert_eq!((rec.history.len(), rec.caught_up, rec.errors), (2, 1, 0));
        assert_eq!(rec.bytes, 6);
    }

    /// A look reads at most [`TURN_BYTES`] of the file, then lets the others have a turn; the
    /// history ends only when the file is read to its end.
    #[test]
    fn a_turn_reads_a_bounded_part_of_a_long_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        let line = format!("{STATS}\n");
        let n = (TURN_BYTES as usize * 5 / 2) / line.len() + 1;
        std::fs::write(&p, line.repeat(n)).unwrap();
        let mut t = Tailer::new(&p, cfg());
        let mut rec = Rec::default();
        let stop = Stop::new();
        assert_eq!(t.turn(&mut rec, &stop, true), Turn::More);
        // The lines of the bytes read, those of the last read's partial line aside.
        let read = rec.bytes as u64;
        assert!(
            (TURN_BYTES..TURN_BYTES + (1 << 20)).contains(&read),
            "{read}"
        );
        assert_eq!(rec.lines.len() as u64, read / line.len() as u64);
        assert_eq!((rec.history.as_slice(), rec.caught_up), (&[false][..], 0));
        assert_eq!(t.turn(&mut rec, &stop, true), Turn::More);
        // Watched: the backstop is the slow poll.
        assert_eq!(
            t.turn(&mut rec, &stop, true),
            Turn::Wait(cfg().poll * SLOW_POLL)
        );
        assert_eq!(rec.lines.len(), n);
        assert_eq!(rec.bytes, n * line.len());
        assert_eq!(
            (rec.history.as_slice(), rec.caught_up),
            (&[false, true][..], 1)
        );
        // Not watched (or a symbolic link at the path): the poll interval.
        assert_eq!(t.turn(&mut rec, &stop, false), Turn::Wait(cfg().poll));
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let mut t = Tailer::new(&link, cfg());
        assert_eq!(t.turn(&mut Rec::default(), &stop, true), Turn::More);
        while t.turn(&mut Rec::default(), &stop, true) == Turn::More {}
        assert_eq!(t.backstop(true), cfg().poll);
    }

    /// A line longer than [`TURN_BYTES`] is read across turns, held, not let go at each pause
    /// (then it would be read again from its start for ever): handed out whole, once.
    #[test]
    fn a_line_longer_than_a_turn_is_read_whole_across_turns() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        let long = "y".repeat(TURN_BYTES as usize * 3 / 2);
        std::fs::write(&p, format!("{long}\nnext\n")).unwrap();
        let mut t = Tailer::new(
            &p,
            TailConfig {
                max_line: 16 << 20,
                ..cfg()
            },
        );
        let mut rec = Rec::default();
        let stop = Stop::new();
        let mut turns = 1;
        while t.turn(&mut rec, &stop, true) == Turn::More {
            turns += 1;
            assert!(turns < 10, "{turns} turns");
        }
        assert_eq!(turns, 2);
        assert_eq!(rec.lines.len(), 2);
        assert!(rec.lines[0] == long);
        assert_eq!(rec.lines[1], "next");
        assert_eq!(rec.bytes, long.len() + 6);
    }

    #[test]
    fn a_sparse_hole_after_copytruncate_is_skipped_not_read() {
        use std::io::{Seek, Write};
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        // A writer without O_APPEND at offset 3 MiB after the truncation: a hole, then a line.
        let mut w = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&p)
            .unwrap();
        w.write_all(b"first\n").unwrap();
        let mut t = Tailer::new(&p, cfg());
        let mut rec = Rec::default();
        assert_eq!(t.step(&mut rec), Step::Wait);
        w.set_len(0).unwrap();
        w.seek(io::SeekFrom::Start(3 << 20)).unwrap();
        w.write_all(b"after the hole\n").unwrap();
        // Truncated (shorter? no: longer) — the tail check sees the rewrite.
        while t.step(&mut rec) == Step::Again {}
        assert_eq!(rec.lines, ["first", "after the hole"]);
        assert!(t.open.as_ref().unwrap().offset >= 3 << 20);
    }

    #[test]
    fn recover_resumes_after_the_last_line_handed_out() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        std::fs::write(&p, "a\nb\nc\n").unwrap();
        let mut t = Tailer::new(&p, cfg());
        let mut rec = Rec::default();
        t.step(&mut rec);
        assert_eq!(rec.lines, ["a", "b", "c"]);
        // A restart after a failure reads nothing twice.
        t.recover();
        t.step(&mut rec);
        assert_eq!(rec.lines, ["a", "b", "c"]);
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .and_then(|mut f| io::Write::write_all(&mut f, b"d\n"))
            .unwrap();
        t.step(&mut rec);
        assert_eq!(rec.lines, ["a", "b", "c", "d"]);
    }

    fn append(p: &Path, b: &[u8]) {
        let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
        io::Write::write_all(&mut f, b).unwrap();
    }

    /// What a followed file holds at rest: the line buffer's allocation and its partial line.
    fn held(t: &Tailer) -> (usize, usize) {
        let o = t.open.as_ref().unwrap();
        (o.lb.capacity(), o.lb.pending())
    }

    const STATS: &str = "[2026-11-30 15:00:00 TP0] Decode batch, #running-req: 1, #token: 1, token usage: 0.01, #queue-req: 0";

    /// The hostile pass's F5: a followed file ending in a 1,000,000-byte line with no newline
    /// held a buffer of that size (256 such files: 297 MB). At rest it now holds an idle buffer
    /// of 4 KiB and nothing of the line; when the line ends it is read again, whole, once, and
    /// its bytes are counted once; then, nothing held, no buffer at all.
    #[test]
    fn a_long_partial_line_is_not_held_and_is_read_whole_when_it_ends() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f0.log");
        let long = "x".repeat(1_000_000);
        std::fs::write(&p, format!("{STATS}\n{long}")).unwrap();
        let mut t = Tailer::new(
            &p,
            TailConfig {
                max_line: 1 << 20,
                ..cfg()
            },
        );
        let mut rec = Rec::default();
        assert_eq!(t.step(&mut rec), Step::Wait);
        assert_eq!(rec.lines, [STATS]);
        assert_eq!(held(&t), (4096, 0));
        let spill = t.open.as_ref().unwrap().spilled.unwrap();
        assert_eq!(
            (spill.from, spill.oversized),
            (STATS.len() as u64 + 1, false)
        );
        // More of the line, still no newline: looked through, not kept.
        append(&p, b"yyy");
        assert_eq!(t.step(&mut rec), Step::Wait);
        assert_eq!(held(&t), (4096, 0));
        append(&p, b"z\nnext\n");
        assert_eq!(t.step(&mut rec), Step::Wait);
        assert_eq!(rec.lines.len(), 3);
        assert_eq!(rec.lines[1], format!("{long}yyyz"));
        assert_eq!(rec.lines[2], "next");
        assert_eq!((rec.oversized, rec.incomplete), (0, 0));
        assert_eq!(rec.bytes as u64, std::fs::metadata(&p).unwrap().len());
        assert_eq!(held(&t), (0, 0));
        assert!(t.open.as_ref().unwrap().spilled.is_none());
    }

    /// A short partial line stays in memory (it fits an idle buffer): no read again.
    #[test]
    fn a_short_partial_line_is_kept_in_an_idle_buffer() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        std::fs::write(&p, format!("{}\n{STATS}\n#running", "a".repeat(100_000))).unwrap();
        let mut t = Tailer::new(&p, cfg());
        let mut rec = Rec::default();
        t.step(&mut rec);
        assert_eq!(rec.lines, [STATS]);
        assert_eq!(rec.oversized, 1);
        assert_eq!(held(&t), (4096, 8));
        assert!(t.open.as_ref().unwrap().spilled.is_none());
        append(&p, b"-req: 3\n");
        t.step(&mut rec);
        assert_eq!(rec.lines, [STATS, "#running-req: 3"]);
    }

    /// A spilled line that grows past the limit is reported once as oversized and skipped when
    /// it ends (as the line buffer does with a line it holds), never reported as cut.
    #[test]
    fn a_spilled_line_over_the_limit_is_skipped_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        std::fs::write(&p, format!("first\n{}", "y".repeat(3000))).unwrap();
        let mut t = Tailer::new(
            &p,
            TailConfig {
                max_line: 4096,
                ..cfg()
            },
        );
        let mut rec = Rec::default();
        t.step(&mut rec);
        assert!(t.open.as_ref().unwrap().spilled.is_some());
        append(&p, &[b'y'; 2000]);
        t.step(&mut rec);
        assert_eq!(rec.oversized, 1);
        append(&p, b"y\nnext\n");
        t.step(&mut rec);
        assert_eq!(rec.lines, ["first", "next"]);
        assert_eq!((rec.oversized, rec.incomplete), (1, 0));
        assert_eq!(rec.bytes as u64, std::fs::metadata(&p).unwrap().len());
    }

    /// Rotation while a spilled line waits for its end: the writer ends it in the renamed file,
    /// which is finished first; then the new file.
    #[test]
    fn a_spilled_line_ended_in_the_rotated_file_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        let long = "y".repeat(5000);
        std::fs::write(&p, format!("a\n{long}")).unwrap();
        let mut t = Tailer::new(&p, cfg_long());
        let mut rec = Rec::default();
        t.step(&mut rec);
        assert!(t.open.as_ref().unwrap().spilled.is_some());
        let old = dir.path().join("x.log.1");
        std::fs::rename(&p, &old).unwrap();
        std::fs::write(&p, "new\n").unwrap();
        append(&old, b"z\n");
        while t.step(&mut rec) == Step::Again {}
        assert_eq!(
            rec.lines,
            ["a".to_string(), format!("{long}z"), "new".into()]
        );
        assert_eq!(rec.incomplete, 0);
        assert_eq!(rec.bytes, 2 + 5000 + 2 + 4);
    }

    /// Truncation while a spilled line waits: the line is counted as cut (never joined with the
    /// new content), and the file is read from its start.
    #[test]
    fn a_spilled_line_cut_by_truncation_is_counted_not_joined() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        std::fs::write(&p, format!("a\n{}", "y".repeat(5000))).unwrap();
        let mut t = Tailer::new(&p, cfg_long());
        let mut rec = Rec::default();
        t.step(&mut rec);
        assert!(t.open.as_ref().unwrap().spilled.is_some());
        std::fs::write(&p, "b\n").unwrap();
        while t.step(&mut rec) == Step::Again {}
        assert_eq!(rec.lines, ["a", "b"]);
        assert_eq!((rec.incomplete, rec.oversized), (1, 0));
        assert_eq!(rec.bytes, 5002 + 2);
    }

    fn cfg_long() -> TailConfig {
        TailConfig {
            max_line: 1 << 20,
            ..cfg()
        }
    }

    /// Writes of random sizes (lines from empty to over the limit, cut anywhere, so partial
    /// lines of every length wait at each look, held or spilled, also the rest of a line over
    /// the limit): the lines handed out are the input's split at `\n`, the oversized ones
    /// skipped once each, every byte counted once, and what a file holds at rest stays an idle
    /// buffer. Several seeds.
    #[test]
    fn random_writes_read_as_the_input_splits_them() {
        for seed in 1..=12u64 {
            random_writes(seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
        }
    }

    fn random_writes(mut seed: u64) {
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let max_line = 8192;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.log");
        std::fs::write(&p, "").unwrap();
        let mut t = Tailer::new(&p, TailConfig { max_line, ..cfg() });
        let mut rec = Rec::default();
        let mut all = Vec::new();
        const LENS: [usize; 10] = [0, 10, 100, 2048, 2049, 4096, 8192, 8193, 9000, 20000];
        for i in 0..300 {
            let len = LENS[next(LENS.len() as u64) as usize];
            let mut line: Vec<u8> = (0..len).map(|j| b'a' + ((i + j) % 26) as u8).collect();
            line.push(b'\n');
            let mut rest = &line[..];
            while !rest.is_empty() {
                let n = (1 + next(rest.len() as u64 + 3000) as usize).min(rest.len());
                append(&p, &rest[..n]);
                all.extend_from_slice(&rest[..n]);
                rest = &rest[n..];
                t.step(&mut rec);
                assert!(held(&t).0 <= 4096, "held at rest: {:?}", held(&t));
            }
        }
        let want: Vec<&[u8]> = all.split(|&b| b == b'\n').collect();
        let want = &want[..want.len() - 1];
        let kept: Vec<String> = want
            .iter()
            .filter(|l| l.len() <= max_line)
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        // Compared by their lengths first: the lines are long to print.
        let lens = |v: &[String]| v.iter().map(String::len).collect::<Vec<_>>();
        let (got, exp) = (lens(&rec.lines), lens(&kept));
        let first = got.iter().zip(&exp).position(|(a, b)| a != b);
        assert_eq!(got.len(), exp.len(), "first difference at {first:?}");
        assert_eq!(first, None);
        assert!(rec.lines == kept);
        assert_eq!(rec.oversized, want.len() - kept.len());
        assert_eq!(rec.incomplete, 0);
        assert_eq!(rec.bytes, all.len());
    }
}
