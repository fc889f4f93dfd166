//! Admission of HTTP connections: at most `--web.max-connections` at once, so idle, slow or
//! stuck clients can never take the file descriptors and the memory that scrapes and followed
//! files need.
//!
//! Each connection notes when it last moved bytes ([`Progress`], kept by [`ProgressIo`] around
//! its socket). When full, a connection is closed to make room for the newcomer: the oldest of
//! those that never moved a byte (connected and went quiet), else the one still the longest
//! (at least [`MIN_STILL`]), whatever it waits for: a quiet keep-alive client between scrapes,
//! or one that asked for a response and stopped reading it. Only when every connection moved
//! bytes within `MIN_STILL` is the newcomer refused. A response whose write makes no progress for
//! [`WRITE_TIMEOUT`] ends its connection.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// A connection still for less than this is never evicted (it is being served).
pub const MIN_STILL: Duration = Duration::from_secs(1);

/// A response write that makes no progress this long ends the connection (a client that asked
/// and stopped reading holds a socket and its response's buffers until then).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// When a connection was admitted and last moved bytes: milliseconds since the admission
/// clock's start ([`NEVER`] until its first byte).
#[derive(Debug)]
pub struct Progress {
    epoch: Instant,
    admitted_ms: u64,
    last_ms: AtomicU64,
}

/// `last_ms` of a connection that has moved no byte yet.
const NEVER: u64 = u64::MAX;

impl Progress {
    fn new(epoch: Instant, admitted_ms: u64) -> Progress {
        Progress {
            epoch,
            admitted_ms,
            last_ms: AtomicU64::new(NEVER),
        }
    }

    /// Notes that bytes moved now.
    pub fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// How much this connection is to be evicted first at `now_ms` (larger: sooner); `None`
    /// while it moved bytes within [`MIN_STILL`]. One that never moved a byte (connected and
    /// went quiet, a slowloris yet to send) goes first, the oldest of them first.
    fn eviction_key(&self, now_ms: u64) -> Option<u64> {
        match self.last_ms.load(Ordering::Relaxed) {
            NEVER => Some(u64::MAX / 2 + now_ms.saturating_sub(self.admitted_ms)),
            last => {
                let still = now_ms.saturating_sub(last);
                (still >= MIN_STILL.as_millis() as u64).then_some(still)
            }
        }
    }
}

/// Milliseconds from `epoch` to `at`.
fn now_ms(epoch: Instant, at: Instant) -> u64 {
    at.saturating_duration_since(epoch).as_millis() as u64
}

/// The connections being served.
#[derive(Debug)]
pub struct Conns {
    cap: usize,
    live: Mutex<Vec<Entry>>,
    next: AtomicU64,
    epoch: Instant,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    progress: Arc<Progress>,
    evict: Arc<Notify>,
}

/// A connection's place; dropping it frees the place.
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    conns: Arc<Conns>,
    /// When the connection last moved bytes (kept by its [`ProgressIo`]).
    pub progress: Arc<Progress>,
    /// Notified when the connection is to be closed to make room.
    pub evict: Arc<Notify>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut live = self.conns.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|e| e.id != self.id);
    }
}

impl Conns {
    /// Room for `cap` connections (at least one).
    pub fn new(cap: usize) -> Arc<Conns> {
        Arc::new(Conns {
            cap: cap.max(1),
            live: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }

    /// A place for a new connection: at once while there is room; else by evicting the
    /// connection still the longest, if for at least [`MIN_STILL`] (it closes when it next
    /// runs); `None` when every connection is moving bytes.
    pub fn admit(self: &Arc<Conns>) -> Option<Ticket> {
        self.admit_at(Instant::now())
    }

    /// [`Conns::admit`] judged at `now`.
    fn admit_at(self: &Arc<Conns>, now: Instant) -> Option<Ticket> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.len() >= self.cap {
            let now = now_ms(self.epoch, now);
            let (i, _) = live
                .iter()
                .enumerate()
                .filter_map(|(i, e)| Some((i, e.progress.eviction_key(now)?)))
                .max_by_key(|&(i, key)| (key, std::cmp::Reverse(i)))?;
            let old = live.remove(i);
            old.evict.notify_one();
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let admitted = now_ms(self.epoch, Instant::now());
        let progress = Arc::new(Progress::new(self.epoch, admitted));
        let evict = Arc::new(Notify::new());
        live.push(Entry {
            id,
            progress: progress.clone(),
            evict: evict.clone(),
        });
        Some(Ticket {
            id,
            conns: self.clone(),
            progress,
            evict,
        })
    }

    /// Connections held now.
    pub fn len(&self) -> usize {
        self.live.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A socket that notes its progress (every read or write that moves bytes) and gives up a
/// write that makes none for [`WRITE_TIMEOUT`] (`TimedOut`, which ends the connection).
pub struct ProgressIo<T> {
    inner: T,
    progress: Arc<Progress>,
    write_timeout: Duration,
    /// Armed while a write is pending.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> ProgressIo<T> {
    /// `inner`, its progress noted in `progress`.
    pub fn new(inner: T, progress: Arc<Progress>) -> ProgressIo<T> {
        ProgressIo::with_timeout(inner, progress, WRITE_TIMEOUT)
    }

    fn with_timeout(inner: T, progress: Arc<Progress>, write_timeout: Duration) -> ProgressIo<T> {
        ProgressIo {
            inner,
            progress,
            write_timeout,
            stalled: None,
        }
    }

    /// What a write of the inner socket came to: bytes moved note progress and end a stall; a
    /// pending write times out ([`ProgressIo::pending_write`]).
    fn written(
        &mut self,
        r: Poll<io::Result<usize>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<usize>> {
        match r {
            Poll::Ready(Ok(n)) => {
                if n > 0 {
                    self.progress.touch();
                }
                self.stalled = None;
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.pending_write(cx),
        }
    }

    /// A pending write: `TimedOut` once it has been pending for the write timeout.
    fn pending_write(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let timeout = self.write_timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing of the response for the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for ProgressIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.progress.touch();
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for ProgressIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.written(r, cx)
    }

    // Vectored writes pass through: hyper then queues a response's shared `Bytes` instead of
    // copying each body into a buffer of its own (which, with many slow readers of a large
    // exposition, is a copy per connection).
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.written(r, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Pending => self.pending_write(cx).map(|r| r.map(|_| ())),
            r => {
                self.stalled = None;
                r
            }
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits for a future on a one-thread runtime.
    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn full_evicts_the_connection_still_the_longest_else_refuses() {
        let c = Conns::new(2);
        let a = c.admit().unwrap();
        let b = c.admit().unwrap();
        // Neither moved a byte yet: the older, `a`, makes room.
        let x = c.admit().expect("room made");
        block_on(a.evict.notified());
        drop((a, x));
        let a = c.admit().unwrap();
        // Both moved bytes just now: the newcomer is refused.
        a.progress.touch();
        b.progress.touch();
        assert!(c.admit().is_none());
        // `a` still for 3 s (a quiet keep-alive client, or one that stopped reading), `b` for
        // 2 s, judged 5 s after the admission clock's start: `a` makes room, then `b`.
        let at = |ms: u64| c.epoch + Duration::from_millis(ms);
        a.progress.last_ms.store(2_000, Ordering::Relaxed);
        b.progress.last_ms.store(3_000, Ordering::Relaxed);
        let n = c.admit_at(at(5_000)).expect("room made");
        assert_eq!(c.len(), 2);
        block_on(a.evict.notified());
        n.progress.last_ms.store(5_000, Ordering::Relaxed);
        let m = c.admit_at(at(5_000)).expect("room made");
        block_on(b.evict.notified());
        m.progress.last_ms.store(5_000, Ordering::Relaxed);
        // Everyone moved bytes within the last second: refused.
        assert!(c.admit_at(at(5_500)).is_none());
        drop(n);
        assert!(c.admit().is_some(), "room again after a connection ended");
    }

    /// A write the peer never reads ends with `TimedOut` after the write timeout; bytes that
    /// move note progress.
    #[test]
    fn a_write_that_makes_no_progress_times_out() {
        block_on(async {
            use tokio::io::AsyncWriteExt;
            let (client, server) = tokio::io::duplex(64);
            let c = Conns::new(1);
            let t = c.admit().unwrap();
            let mut io =
                ProgressIo::with_timeout(server, t.progress.clone(), Duration::from_millis(200));
            io.write_all(b"hello").await.unwrap();
            let big = vec![b'x'; 1 << 16];
            let start = Instant::now();
            let err = io.write_all(&big).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
            assert!(start.elapsed() >= Duration::from_millis(200));
            drop(client);
        });
    }
}
