//! A followed file (`--input.file`, a file `--input.glob` found) as a job of the file-following
//! pool ([`crate::source::pool`]): its [`Tailer`], its sink (the ingest, a [`LineSink`]), its stop
//! and its subscription to the file watcher ([`crate::source::watch`]). Woken by the file's events
//! and by its stop; between them it waits its tailer's backstop ([`Tailer::backstop`]).
//!
//! A panic while reading or parsing one file (a bug the per-line guard did not catch) is
//! counted in `sglang_log_exporter_source_panics_total`, the source reads down, and after a
//! second the tailer is recovered (it goes on after the last line it handed out, so nothing is
//! read twice) and followed again: the other files and the pool's threads go on meanwhile.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::file::{Tailer, Turn};
use super::pool::{Handle, Job, Next, Pool};
use super::watch::Watch;
use super::LineSink;
use crate::state::{lock, SelfMetric};
use crate::stop::Stop;

/// How long a file whose reader panicked rests before it is read again.
const AFTER_PANIC: Duration = Duration::from_secs(1);

struct FileJob<S> {
    tailer: Tailer,
    ing: S,
    stop: Arc<Stop>,
    watch: Watch,
    /// The last turn panicked: recover the tailer first.
    resume: bool,
}

/// Follows the file at `path` with `tailer` into `ing` on `pool`'s threads until `stop` is
/// set; the handle says when it is over (the file closed, the last counters handed on).
///
/// # Errors
/// When the pool has no thread and none can be started.
pub fn start<S: LineSink + Send + 'static>(
    pool: &Pool,
    path: &Path,
    tailer: Tailer,
    ing: S,
    stop: Arc<Stop>,
) -> std::io::Result<Handle> {
    pool.add(|waker| {
        let on_stop = waker.clone();
        stop.on_set(move || on_stop.wake());
        let watch = super::watch::subscribe(path, Arc::new(move || waker.wake()));
        Box::new(FileJob {
            tailer,
            ing,
            stop,
            watch,
            resume: false,
        })
    })
}

impl<S: LineSink> FileJob<S> {
    fn end(&mut self) -> Next {
        self.ing.flush();
        Next::Done
    }
}

impl<S: LineSink + Send> Job for FileJob<S> {
    fn turn(&mut self) -> Next {
        if std::mem::take(&mut self.resume) {
            if self.stop.is_set() {
                return self.end();
            }
            self.tailer.recover();
            if self.tailer.is_open() {
                self.ing.up(true);
            }
        }
        self.watch.retry();
        let watching = self.watch.is_watching();
        match self.tailer.turn(&mut self.ing, &self.stop, watching) {
            Turn::Wait(d) => Next::Wait(d),
            Turn::More => Next::More,
            Turn::Done => self.end(),
        }
    }

    fn panicked(&mut self) -> Next {
        lock(self.ing.state()).add_self(SelfMetric::SourcePanics, self.ing.source(), 1.0);
        self.ing.up(false);
        tracing::error!(
            source = self.ing.source(),
            "the reader of this source failed (a bug); restarting it where it stopped in 1 s"
        );
        if self.stop.is_set() {
            return self.end();
        }
        self.resume = true;
        Next::Sleep(AFTER_PANIC)
    }
}
