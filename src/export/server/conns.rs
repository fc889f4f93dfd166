//! Admission of HTTP connections: at most `--web.max-connections` at once, so idle, slow or
//! stuck clients can never take the file descriptors and the memory that scrapes and followed
//! files need.
//!
//! Each connection notes when it last moved bytes and which phase of a request it is in
//! ([`Progress`], kept by [`ProgressIo`] around its socket and [`NoteDispatch`] around its
//! service). When full, a connection is closed to make room for the newcomer, the first of
//! these that exists:
//!
//! 1. the oldest of those that never moved a byte in the [`MIN_STILL`] since they connected
//!    (connected and went quiet);
//! 2. among the others, the one that has waited the longest of those that may go:
//!    * *idle* — its last response written whole and nothing read since (a quiet keep-alive
//!      client between scrapes: closing it costs the client one reconnect, as any server's idle
//!      timeout does) — at once;
//!    * sending a request head for [`MIN_STILL`] or more, however many bytes trickle in (a
//!      slowloris: a scraper's head arrives in one packet);
//!    * writing a response that moved no byte for [`MIN_STILL`] (a client that stopped
//!      reading);
//!    * being answered (its request handed to the routes) for [`SERVING_GRACE`].
//!
//! When none may go yet, the newcomer waits until one may — at most [`MIN_STILL`] and a little
//! — rather than being refused at once; at most [`MAX_WAITING`] newcomers (an eighth of the cap)
//! wait, and a newer one takes the place of the one waiting the longest. A response whose write makes no progress for [`WRITE_TIMEOUT`], or
//! that is not written whole within [`RESPONSE_DEADLINE`], ends its connection.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// A request head still arriving, or a response write that moved nothing, this long makes its
/// connection one that may be closed to make room.
pub const MIN_STILL: Duration = Duration::from_secs(1);

/// A request being answered this long (its response not begun) may be closed to make room.
pub const SERVING_GRACE: Duration = Duration::from_secs(10);

/// A response write that makes no progress this long ends the connection (a client that asked
/// and stopped reading holds a socket and its response's buffers until then).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// A response not written whole this long after its first byte ends the connection (a client
/// that reads a byte now and then would otherwise hold its connection and its response's
/// encoding for ever; no scraper waits this long).
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(60);

/// Most newcomers waiting at once for a connection to become evictable (and at most an eighth
/// of the cap, so waiters never take the file descriptors the cap leaves to followed files);
/// one more closes the one waiting the longest (a burst of connections that send nothing must
/// not keep out a scrape that comes after it).
pub const MAX_WAITING: usize = 64;

/// A connection's phase ([`Progress::phase`]): connected, or its last response flushed whole,
/// and nothing read since (idle between requests).
const IDLE: u8 = 0;
/// Reading a request head: bytes read since it was idle, the request not handed on yet.
const HEAD: u8 = 1;
/// Its request handed to the routes, no response byte written yet.
const SERVING: u8 = 2;
/// Writing a response.
const WRITING: u8 = 3;

/// When a connection was admitted and last moved bytes, which phase it is in and since when
/// (milliseconds since the admission clock's start; `last_ms` is [`NEVER`] until its first
/// byte).
#[derive(Debug)]
pub struct Progress {
    epoch: Instant,
    admitted_ms: u64,
    last_ms: AtomicU64,
    phase: AtomicU8,
    since_ms: AtomicU64,
}

/// `last_ms` of a connection that has moved no byte yet.
const NEVER: u64 = u64::MAX;

impl Progress {
    fn new(epoch: Instant, admitted_ms: u64) -> Progress {
        Progress {
            epoch,
            admitted_ms,
            last_ms: AtomicU64::new(NEVER),
            phase: AtomicU8::new(IDLE),
            since_ms: AtomicU64::new(admitted_ms),
        }
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Enters `phase` now (its start kept if already in it).
    fn enter(&self, phase: u8, now: u64) {
        if self.phase.swap(phase, Ordering::Relaxed) != phase {
            self.since_ms.store(now, Ordering::Relaxed);
        }
    }

    /// Notes bytes read: an idle connection starts a request head (bytes read while a request
    /// is answered — a pipelined next one — change nothing).
    fn read(&self) {
        let now = self.now_ms();
        self.last_ms.store(now, Ordering::Relaxed);
        if self.phase.load(Ordering::Relaxed) == IDLE {
            self.enter(HEAD, now);
        }
    }

    /// Notes a request handed to the routes (its head is complete).
    pub fn dispatched(&self) {
        self.enter(SERVING, self.now_ms());
    }

    /// Notes bytes written (a response under way).
    fn wrote(&self) {
        let now = self.now_ms();
        self.last_ms.store(now, Ordering::Relaxed);
        self.enter(WRITING, now);
    }

    /// Notes a flush that completed: after a write, everything written has left (HTTP/1 flushes
    /// the socket once its own write buffer is empty), so the connection waits for its next
    /// request.
    fn flushed(&self) {
        if self.phase.load(Ordering::Relaxed) == WRITING {
            self.enter(IDLE, self.now_ms());
        }
    }

    /// How much this connection is to be evicted first at `now_ms` (larger: sooner), or
    /// `Err(ms)`: it may be evicted in `ms` milliseconds (see the module doc).
    fn eviction_key(&self, now_ms: u64) -> Result<u64, u64> {
        let last = self.last_ms.load(Ordering::Relaxed);
        let min_still = MIN_STILL.as_millis() as u64;
        if last == NEVER {
            // A connection gets MIN_STILL to begin its request (a newcomer admitted just now
            // is not the first to go when others arrive right behind it).
            let age = now_ms.saturating_sub(self.admitted_ms);
            return if age >= min_still {
                Ok(u64::MAX / 2 + age)
            } else {
                Err(min_still - age)
            };
        }
        let in_phase = now_ms.saturating_sub(self.since_ms.load(Ordering::Relaxed));
        let (waited, needed) = match self.phase.load(Ordering::Relaxed) {
            IDLE => (in_phase, Duration::ZERO),
            HEAD => (in_phase, MIN_STILL),
            SERVING => (in_phase, SERVING_GRACE),
            _ => (now_ms.saturating_sub(last), MIN_STILL),
        };
        let needed = needed.as_millis() as u64;
        if waited >= needed {
            Ok(waited)
        } else {
            Err(needed - waited)
        }
    }
}

/// A connection's service that notes each request handed to it ([`Progress::dispatched`]).
#[derive(Debug, Clone)]
pub struct NoteDispatch<S> {
    inner: S,
    progress: Arc<Progress>,
}

impl<S> NoteDispatch<S> {
    /// `inner`, each request noted in `progress`.
    pub fn new(inner: S, progress: Arc<Progress>) -> NoteDispatch<S> {
        NoteDispatch { inner, progress }
    }
}

impl<S: hyper::service::Service<R>, R> hyper::service::Service<R> for NoteDispatch<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, req: R) -> Self::Future {
        self.progress.dispatched();
        self.inner.call(req)
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
    /// Newcomers waiting, oldest first: an id and what tells it to give up.
    waiting: Mutex<VecDeque<(u64, Arc<Notify>)>>,
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
            waiting: Mutex::new(VecDeque::new()),
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
    /// evictable when none may go yet.
    ///
    /// # Errors
    /// [`Full::Refused`] when none became evictable in time, or when newer newcomers took its
    /// place among the [`MAX_WAITING`].
    pub async fn admit_waiting(self: &Arc<Conns>) -> Result<Ticket, Full> {
        let first = match self.admit() {
            Err(Full::Wait(d)) => d,
            r => return r,
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let give_up = Arc::new(Notify::new());
        {
            let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            w.push_back((id, give_up.clone()));
            if w.len() > (self.cap / 8).clamp(1, MAX_WAITING) {
                if let Some((_, oldest)) = w.pop_front() {
                    oldest.notify_one();
                }
            }
        }
        let deadline = tokio::time::Instant::now() + MIN_STILL + Duration::from_millis(100);
        let mut wait = first;
        let r = loop {
            let at = tokio::time::Instant::now() + wait;
            if at > deadline {
                break Err(Full::Refused);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(at) => {}
                _ = give_up.notified() => break Err(Full::Refused),
            }
            match self.admit() {
                Err(Full::Wait(d)) => wait = d,
                r => break r,
            }
        };
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        w.retain(|(i, _)| *i != id);
        r
    }

    /// [`Conns::admit`] judged at `now`.
    fn admit_at(self: &Arc<Conns>, now: Instant) -> Result<Ticket, Full> {
        let now = now_ms(self.epoch, now);
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.len() >= self.cap {
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
        let progress = Arc::new(Progress::new(self.epoch, now));
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

    /// Sets when `t` entered its phase and last moved bytes (ms on the admission clock).
    fn at_ms(t: &Ticket, since: u64, last: u64) {
        t.progress.since_ms.store(since, Ordering::Relaxed);
        t.progress.last_ms.store(last, Ordering::Relaxed);
    }

    #[test]
    fn full_evicts_the_connection_waiting_the_longest_else_says_how_long_to_wait() {
        let c = Conns::new(2);
        let at = |ms: u64| c.epoch + Duration::from_millis(ms);
        let a = c.admit_at(at(0)).unwrap();
        let b = c.admit_at(at(0)).unwrap();
        // Neither moved a byte yet; each gets MIN_STILL to begin its request.
        assert_eq!(
            c.admit_at(at(400)).unwrap_err(),
            Full::Wait(Duration::from_millis(600))
        );
        // Then the older, `a`, makes room.
        let x = c.admit_at(at(1_500)).expect("room made");
        block_on(a.evict.notified());
        drop((a, x));
        let a = c.admit().unwrap();
        // Both are sending a request head (for 300 and 600 ms): the newcomer is told to wait
        // until one has sent it for MIN_STILL, bytes arriving just now or not.
        a.progress.read();
        b.progress.read();
        at_ms(&a, 4_700, 4_999);
        at_ms(&b, 4_400, 4_999);
        assert_eq!(
            c.admit_at(at(5_000)).unwrap_err(),
            Full::Wait(Duration::from_millis(400))
        );
        // A head arriving a byte at a time (a slowloris) for 3 s, another for 2 s, judged 5 s
        // after the admission clock's start: `a` makes room, then `b`.
        a.progress.read();
        at_ms(&a, 2_000, 4_999);
        at_ms(&b, 3_000, 4_999);
        let n = c.admit_at(at(5_000)).expect("room made");
        assert_eq!(c.len(), 2);
        block_on(a.evict.notified());
        n.progress.read();
        at_ms(&n, 5_000, 5_000);
        let m = c.admit_at(at(5_000)).expect("room made");
        block_on(b.evict.notified());
        m.progress.read();
        at_ms(&m, 5_000, 5_000);
        // Both began their heads within the last second: wait for the sooner, 500 ms.
        assert_eq!(
            c.admit_at(at(5_500)).unwrap_err(),
            Full::Wait(Duration::from_millis(500))
        );
        // A request handed to the routes is answered for up to SERVING_GRACE before it may go.
        n.progress.dispatched();
        m.progress.dispatched();
        at_ms(&n, 5_000, 5_000);
        at_ms(&m, 6_000, 5_000);
        assert_eq!(
            c.admit_at(at(14_000)).unwrap_err(),
            Full::Wait(Duration::from_millis(1_000))
        );
        assert!(c.admit_at(at(15_000)).is_ok());
        block_on(n.evict.notified());
        drop(m);
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
            t.progress.dispatched();
            t.progress.wrote();
            at_ms(t, 800, last);
        }
        // Both wrote and neither flushed: a response under way each.
        assert_eq!(
            c.admit_at(at(1_000)).unwrap_err(),
            Full::Wait(Duration::from_millis(900))
        );
        // `b` flushed: idle, evicted although it moved bytes 50 ms ago.
        b.progress.flushed();
        at_ms(&b, 950, 950);
        let n = c.admit_at(at(1_000)).expect("room made");
        block_on(b.evict.notified());
        // A flush while a request head is read (nothing written since) is not idle.
        n.progress.read();
        n.progress.flushed();
        at_ms(&n, 1_000, 1_000);
        assert!(matches!(c.admit_at(at(1_010)), Err(Full::Wait(_))));
        drop(a);
    }

    /// A newcomer that finds every connection being served waits until one may be evicted,
    /// rather than being refused; past the most waiting, the newest takes the place of the one
    /// waiting the longest.
    #[test]
    fn a_newcomer_waits_for_a_connection_to_become_evictable() {
        block_on(async {
            // A cap of 8 lets one newcomer wait.
            let c = Conns::new(8);
            let held: Vec<Ticket> = (0..8).map(|_| c.admit().unwrap()).collect();
            for t in &held {
                t.progress.read();
            }
            let start = Instant::now();
            let first = tokio::spawn({
                let c = c.clone();
                async move { c.admit_waiting().await }
            });
            tokio::time::sleep(Duration::from_millis(100)).await;
            let second = c.admit_waiting().await.expect("admitted after the wait");
            assert!(start.elapsed() >= MIN_STILL - Duration::from_millis(5));
            assert_eq!(
                first.await.unwrap().unwrap_err(),
                Full::Refused,
                "the older waiter gave its place to the newer"
            );
            held[0].evict.notified().await;
            drop((held, second));
            assert_eq!(c.len(), 0);
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
