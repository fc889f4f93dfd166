//! Admission of HTTP connections: at most `--web.max-connections` at once, so idle, slow or
//! stuck clients can never take the file descriptors and the memory that scrapes and followed
//! files need.
//!
//! Each connection notes when it last moved bytes and what it last did ([`Progress`], kept by
//! [`ProgressIo`] around its socket). When full, a connection is closed to make room for the
//! newcomer, the first of these that exists:
//!
//! 1. the oldest of those that never moved a byte (connected and went quiet, a slowloris);
//! 2. the one still the longest among those that are *idle* — their last response written
//!    whole and nothing read since (a quiet keep-alive client between scrapes: closing it costs
//!    the client one reconnect, as any server's idle timeout does) — or still for at least
//!    [`MIN_STILL`] whatever they wait for (a client that asked for a response and stopped
//!    reading it).
//!
//! When every connection is being served (moved bytes within [`MIN_STILL`], not idle), the
//! newcomer waits until one may be evicted — at most [`MIN_STILL`] — rather than being refused
//! at once; at most [`MAX_WAITING`] newcomers (an eighth of the cap) wait, others are closed. A response whose write
//! makes no progress for [`WRITE_TIMEOUT`] ends its connection.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// A connection still for less than this is never evicted while it is being served (unless it
/// is idle between requests).
pub const MIN_STILL: Duration = Duration::from_secs(1);

/// A response write that makes no progress this long ends the connection (a client that asked
/// and stopped reading holds a socket and its response's buffers until then).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// A response not written whole this long after its first byte ends the connection (a client
/// that reads a byte now and then would otherwise hold its connection and its response's
/// encoding for ever; no scraper waits this long).
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(60);

/// Most newcomers waiting at once for a connection to become evictable (and at most an eighth
/// of the cap, so waiters never take the file descriptors the cap leaves to followed files).
pub const MAX_WAITING: usize = 64;

/// What a connection did last ([`Progress::phase`]).
const READ: u8 = 0;
/// Wrote bytes since its last read (a response under way).
const WROTE: u8 = 1;
/// Its writes flushed whole, nothing read since: idle between requests.
const IDLE: u8 = 2;

/// When a connection was admitted and last moved bytes (milliseconds since the admission
/// clock's start; [`NEVER`] until its first byte), and what it did last.
#[derive(Debug)]
pub struct Progress {
    epoch: Instant,
    admitted_ms: u64,
    last_ms: AtomicU64,
    phase: AtomicU8,
}

/// `last_ms` of a connection that has moved no byte yet.
const NEVER: u64 = u64::MAX;

impl Progress {
    fn new(epoch: Instant, admitted_ms: u64) -> Progress {
        Progress {
            epoch,
            admitted_ms,
            last_ms: AtomicU64::new(NEVER),
            phase: AtomicU8::new(READ),
        }
    }

    /// Notes that bytes moved now.
    pub fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Notes bytes read (a request, or part of one: the connection is being served).
    fn read(&self) {
        self.touch();
        self.phase.store(READ, Ordering::Relaxed);
    }

    /// Notes bytes written (a response under way).
    fn wrote(&self) {
        self.touch();
        self.phase.store(WROTE, Ordering::Relaxed);
    }

    /// Notes a flush that completed: after a write, everything written has left (HTTP/1 flushes
    /// the socket once its own write buffer is empty), so the connection waits for its next
    /// request.
    fn flushed(&self) {
        let _ = self
            .phase
            .compare_exchange(WROTE, IDLE, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// How much this connection is to be evicted first at `now_ms` (larger: sooner), or
    /// `Err(ms)`: it may be evicted in `ms` milliseconds. One that never moved a byte goes first,
    /// the oldest of them first; then the one still the longest among the idle and those still
    /// for [`MIN_STILL`].
    fn eviction_key(&self, now_ms: u64) -> Result<u64, u64> {
        let min_still = MIN_STILL.as_millis() as u64;
        match self.last_ms.load(Ordering::Relaxed) {
            NEVER => Ok(u64::MAX / 2 + now_ms.saturating_sub(self.admitted_ms)),
            last => {
                let still = now_ms.saturating_sub(last);
                if still >= min_still || self.phase.load(Ordering::Relaxed) == IDLE {
                    Ok(still)
                } else {
                    Err(min_still - still)
                }
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
    waiting: AtomicUsize,
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

/// Why a newcomer got no place at once.
#[derive(Debug, PartialEq, Eq)]
pub enum Full {
    /// Every connection is being served; one may be evicted after this long.
    Wait(Duration),
    /// [`MAX_WAITING`] newcomers wait already, or the wait ran out.
    Refused,
}

impl Conns {
    /// Room for `cap` connections (at least one).
    pub fn new(cap: usize) -> Arc<Conns> {
        Arc::new(Conns {
            cap: cap.max(1),
            live: Mutex::new(Vec::new()),
            next: AtomicU64::new(0),
            epoch: Instant::now(),
            waiting: AtomicUsize::new(0),
        })
    }

    /// A place for a new connection: at once while there is room; else by evicting a
    /// connection (see the module doc; it closes when it next runs); else how long until one may
    /// be evicted.
    ///
    /// # Errors
    /// [`Full::Wait`] when every connection is being served.
    pub fn admit(self: &Arc<Conns>) -> Result<Ticket, Full> {
        self.admit_at(Instant::now())
    }

    /// [`Conns::admit`], waiting up to [`MIN_STILL`] (and a little) for a connection to become
    /// evictable when every one is being served.
    ///
    /// # Errors
    /// [`Full::Refused`] when [`MAX_WAITING`] newcomers wait already or none became evictable.
    pub async fn admit_waiting(self: &Arc<Conns>) -> Result<Ticket, Full> {
        let first = match self.admit() {
            Err(Full::Wait(d)) => d,
            r => return r,
        };
        if self.waiting.fetch_add(1, Ordering::Relaxed) >= (self.cap / 8).clamp(1, MAX_WAITING) {
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            return Err(Full::Refused);
        }
        let deadline = tokio::time::Instant::now() + MIN_STILL + Duration::from_millis(100);
        let mut wait = first;
        let r = loop {
            let at = tokio::time::Instant::now() + wait;
            if at > deadline {
                break Err(Full::Refused);
            }
            tokio::time::sleep_until(at).await;
            match self.admit() {
                Err(Full::Wait(d)) => wait = d,
                r => break r,
            }
        };
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        r
    }

    /// [`Conns::admit`] judged at `now`.
    fn admit_at(self: &Arc<Conns>, now: Instant) -> Result<Ticket, Full> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.len() >= self.cap {
            let now = now_ms(self.epoch, now);
            let mut best: Option<(u64, usize)> = None;
            let mut soonest = u64::MAX;
            for (i, e) in live.iter().enumerate() {
                match e.progress.eviction_key(now) {
                    // The first of equal keys: the one admitted earliest.
                    Ok(key) if best.is_none_or(|(k, _)| key > k) => best = Some((key, i)),
                    Ok(_) => {}
                    Err(ms) => soonest = soonest.min(ms),
                }
            }
            let Some((_, i)) = best else {
                return Err(Full::Wait(Duration::from_millis(soonest.max(1))));
            };
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
        Ok(Ticket {
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
/// write that makes none for [`WRITE_TIMEOUT`], or a response still unwritten
/// [`RESPONSE_DEADLINE`] after its first byte (`TimedOut`, which ends the connection).
pub struct ProgressIo<T> {
    inner: T,
    progress: Arc<Progress>,
    write_timeout: Duration,
    response_deadline: Duration,
    /// Armed while a write is pending.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
    /// When the bytes written since the last completed flush began.
    writing_since: Option<Instant>,
}

impl<T> ProgressIo<T> {
    /// `inner`, its progress noted in `progress`.
    pub fn new(inner: T, progress: Arc<Progress>) -> ProgressIo<T> {
        ProgressIo::with_timeouts(inner, progress, WRITE_TIMEOUT, RESPONSE_DEADLINE)
    }

    fn with_timeouts(
        inner: T,
        progress: Arc<Progress>,
        write_timeout: Duration,
        response_deadline: Duration,
    ) -> ProgressIo<T> {
        ProgressIo {
            inner,
            progress,
            write_timeout,
            response_deadline,
            stalled: None,
            writing_since: None,
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
                    self.progress.wrote();
                    self.writing_since.get_or_insert_with(Instant::now);
                }
                self.stalled = None;
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.pending_write(cx),
        }
    }

    /// A pending write: `TimedOut` once it has been pending for the write timeout, or once the
    /// response has taken its deadline.
    fn pending_write(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        if self
            .writing_since
            .is_some_and(|t| t.elapsed() >= self.response_deadline)
        {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read the whole response within the response deadline",
            )));
        }
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
            self.progress.read();
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
                if matches!(r, Poll::Ready(Ok(()))) {
                    self.progress.flushed();
                    self.writing_since = None;
                }
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
    fn full_evicts_the_connection_still_the_longest_else_says_how_long_to_wait() {
        let c = Conns::new(2);
        let a = c.admit().unwrap();
        let b = c.admit().unwrap();
        // Neither moved a byte yet: the older, `a`, makes room.
        let x = c.admit().expect("room made");
        block_on(a.evict.notified());
        drop((a, x));
        let a = c.admit().unwrap();
        // Both are being served (read a request just now): the newcomer is told to wait until
        // one has been still for MIN_STILL.
        let at = |ms: u64| c.epoch + Duration::from_millis(ms);
        a.progress.read();
        b.progress.read();
        a.progress.last_ms.store(4_700, Ordering::Relaxed);
        b.progress.last_ms.store(4_400, Ordering::Relaxed);
        assert_eq!(
            c.admit_at(at(5_000)).unwrap_err(),
            Full::Wait(Duration::from_millis(400))
        );
        // `a` still for 3 s (one that stopped reading), `b` for 2 s, judged 5 s after the
        // admission clock's start: `a` makes room, then `b`.
        a.progress.last_ms.store(2_000, Ordering::Relaxed);
        b.progress.last_ms.store(3_000, Ordering::Relaxed);
        let n = c.admit_at(at(5_000)).expect("room made");
        assert_eq!(c.len(), 2);
        block_on(a.evict.notified());
        n.progress.read();
        n.progress.last_ms.store(5_000, Ordering::Relaxed);
        let m = c.admit_at(at(5_000)).expect("room made");
        block_on(b.evict.notified());
        m.progress.read();
        m.progress.last_ms.store(5_000, Ordering::Relaxed);
        // Everyone moved bytes within the last second: wait for the sooner, 500 ms.
        assert_eq!(
            c.admit_at(at(5_500)).unwrap_err(),
            Full::Wait(Duration::from_millis(500))
        );
        drop(n);
        assert!(c.admit().is_ok(), "room again after a connection ended");
    }

    /// A keep-alive client whose response was written and flushed whole is idle: it makes room at
    /// once, however recently it moved bytes; one whose response is still being written is not.
    #[test]
    fn an_idle_keep_alive_connection_makes_room_at_once() {
        let c = Conns::new(2);
        let (a, b) = (c.admit().unwrap(), c.admit().unwrap());
        let at = |ms: u64| c.epoch + Duration::from_millis(ms);
        for (t, last) in [(&a, 900), (&b, 950)] {
            t.progress.read();
            t.progress.wrote();
            t.progress.last_ms.store(last, Ordering::Relaxed);
        }
        // Both wrote and neither flushed: a response under way each.
        assert_eq!(
            c.admit_at(at(1_000)).unwrap_err(),
            Full::Wait(Duration::from_millis(900))
        );
        // `b` flushed: idle, evicted although it moved bytes 50 ms ago.
        b.progress.flushed();
        let n = c.admit_at(at(1_000)).expect("room made");
        block_on(b.evict.notified());
        // A flush before any write since the last read (a request being answered) is not idle.
        n.progress.read();
        n.progress.flushed();
        n.progress.last_ms.store(1_000, Ordering::Relaxed);
        assert!(matches!(c.admit_at(at(1_010)), Err(Full::Wait(_))));
        drop(a);
    }

    /// A newcomer that finds every connection being served waits until one may be evicted,
    /// rather than being refused; beyond MAX_WAITING waiters, newcomers are refused.
    #[test]
    fn a_newcomer_waits_for_a_connection_to_become_evictable() {
        block_on(async {
            let c = Conns::new(1);
            let a = c.admit().unwrap();
            a.progress.read();
            // One waiter is allowed under a cap of 1.
            let start = Instant::now();
            let n = c.admit_waiting().await.expect("admitted after the wait");
            assert!(start.elapsed() >= MIN_STILL - Duration::from_millis(5));
            a.evict.notified().await;
            drop(a);
            n.progress.read();
            c.waiting.store(MAX_WAITING, Ordering::Relaxed);
            assert_eq!(c.admit_waiting().await.unwrap_err(), Full::Refused);
        });
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
            let mut io = ProgressIo::with_timeouts(
                server,
                t.progress.clone(),
                Duration::from_millis(200),
                RESPONSE_DEADLINE,
            );
            io.write_all(b"hello").await.unwrap();
            let big = vec![b'x'; 1 << 16];
            let start = Instant::now();
            let err = io.write_all(&big).await.unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
            assert!(start.elapsed() >= Duration::from_millis(200));
            drop(client);
        });
    }

    /// A client that reads a few bytes now and then makes progress, so the write timeout never
    /// fires; the response deadline ends it. A flush that completes starts the next response
    /// afresh.
    #[test]
    fn a_response_read_drop_by_drop_ends_at_its_deadline() {
        block_on(async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut client, server) = tokio::io::duplex(64);
            let c = Conns::new(1);
            let t = c.admit().unwrap();
            let mut io = ProgressIo::with_timeouts(
                server,
                t.progress.clone(),
                Duration::from_millis(200),
                Duration::from_millis(600),
            );
            // A response read whole and flushed: the deadline starts again with the next one.
            io.write_all(b"first").await.unwrap();
            io.flush().await.unwrap();
            let mut first = [0u8; 5];
            client.read_exact(&mut first).await.unwrap();
            tokio::time::sleep(Duration::from_millis(700)).await;
            let drip = tokio::spawn(async move {
                let mut b = [0u8; 8];
                // 8 bytes every 100 ms: well within the write timeout each time.
                while client.read(&mut b).await.is_ok_and(|n| n > 0) {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            });
            let start = Instant::now();
            let err = io.write_all(&vec![b'x'; 1 << 16]).await.unwrap_err();
            let took = start.elapsed();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
            assert!(
                took >= Duration::from_millis(600) && took < Duration::from_secs(5),
                "{took:?}"
            );
            drop(io);
            drip.await.unwrap();
        });
    }
}
