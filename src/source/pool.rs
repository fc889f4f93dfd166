//! The threads that follow every followed file: a small fixed pool ([`THREADS`]) instead of a
//! thread per file.
//!
//! A [`Job`] (one followed file, see [`crate::source::follow`]) is given a turn when it is
//! woken (its [`Waker`]: the file watcher's events, its stop) or when the wait its last turn
//! asked for is over (the stat poll, the backstop). A turn does a bounded amount of work and
//! returns, so a file that is written without end does not keep a thread from the others. A
//! panic in a turn is caught here: [`Job::panicked`] says what then (the job counts it and is
//! retried); the other jobs and the threads go on.
//!
//! A thread per file cost each file a stack (24 kB touched of it), glibc's per-thread malloc
//! arena and the per-thread caches of the parsers (repro 36: 90 kB a file at 256 files).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How many threads serve every followed file. Reading and parsing a few files at once is what
/// two to four cores do; more threads would only cost their stacks and arenas.
pub const THREADS: usize = 4;

/// What a job asks for after a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Another turn when woken, or after this long at the latest.
    Wait(Duration),
    /// Another turn as soon as the jobs waiting before it had theirs (more to read).
    More,
    /// Another turn after this long, not sooner: a wake-up is kept for then (the pause after
    /// a panic, so a failing job does not fail at the rate of its file's events).
    Sleep(Duration),
    /// The job is over; it is dropped (its file closed).
    Done,
}

/// One followed file, as the pool sees it.
pub trait Job: Send {
    /// One turn: reads what is there to read, then says when it wants the next one.
    fn turn(&mut self) -> Next;
    /// The last turn panicked (caught by the pool): count it and say when to go on.
    fn panicked(&mut self) -> Next;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    /// Waiting for a wake-up or `due`; `deaf`: for `due` alone ([`Next::Sleep`]).
    Idle { deaf: bool },
    /// In the ready queue.
    Queued,
    /// Having its turn; `woken`: a wake-up came meanwhile (another turn at once).
    Running { woken: bool },
}

struct Slot {
    job: Option<Box<dyn Job>>,
    st: St,
    due: Instant,
    /// The time of this slot's entry in the timer heap, if it has one that is not stale.
    timer_at: Option<Instant>,
    done: Arc<Done>,
}

#[derive(Default)]
struct Inner {
    slots: HashMap<u64, Slot>,
    ready: VecDeque<u64>,
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    next: u64,
    threads: usize,
}

#[derive(Default)]
struct Shared {
    inner: Mutex<Inner>,
    cv: Condvar,
}

/// The guard of `m`, also after a panic elsewhere while it was held (jobs run unlocked, so
/// what it guards is never left half-changed).
fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A pool of [`THREADS`] threads, started with its first job.
#[derive(Clone, Default)]
pub struct Pool {
    shared: Arc<Shared>,
}

/// Wakes one job: its next turn comes as soon as a thread is free (at once if it is idle; after
/// its turn if it is having one). Cheap; a job that is over is not woken.
#[derive(Clone)]
pub struct Waker {
    shared: Arc<Shared>,
    id: u64,
}

impl Waker {
    /// Wakes the job.
    pub fn wake(&self) {
        let mut g = locked(&self.shared.inner);
        let Some(s) = g.slots.get_mut(&self.id) else {
            return;
        };
        match s.st {
            St::Idle { deaf: false } => {
                s.st = St::Queued;
                g.ready.push_back(self.id);
                self.shared.cv.notify_one();
            }
            St::Running { .. } => s.st = St::Running { woken: true },
            St::Idle { deaf: true } | St::Queued => {}
        }
    }
}

#[derive(Default)]
struct Done {
    done: Mutex<bool>,
    cv: Condvar,
}

/// A job in the pool: whether it is over (its file closed), waiting for that.
pub struct Handle {
    done: Arc<Done>,
    waker: Waker,
}

impl Handle {
    /// Whether the job is over and dropped.
    pub fn is_finished(&self) -> bool {
        *locked(&self.done.done)
    }

    /// Waits until the job is over.
    pub fn join(&self) {
        let mut g = locked(&self.done.done);
        while !*g {
            g = self
                .done
                .cv
                .wait(g)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    /// Wakes the job (as its [`Waker`] does).
    pub fn wake(&self) {
        self.waker.wake();
    }
}

/// The pool every followed file of the process is served by.
pub fn global() -> &'static Pool {
    static P: OnceLock<Pool> = OnceLock::new();
    P.get_or_init(Pool::default)
}

impl Pool {
    /// Adds the job `make` builds from its waker; its first turn comes at once.
    ///
    /// # Errors
    /// When no thread of the pool could be started (the system refused it).
    pub fn add(&self, make: impl FnOnce(Waker) -> Box<dyn Job>) -> std::io::Result<Handle> {
        self.start_threads()?;
        let id = {
            let mut g = locked(&self.shared.inner);
            g.next += 1;
            g.next
        };
        let waker = Waker {
            shared: self.shared.clone(),
            id,
        };
        // Built unlocked: a job may subscribe to the watcher, whose callback wakes jobs.
        let job = make(waker.clone());
        let done = Arc::new(Done::default());
        let mut g = locked(&self.shared.inner);
        g.slots.insert(
            id,
            Slot {
                job: Some(job),
                st: St::Queued,
                due: Instant::now(),
                timer_at: None,
                done: done.clone(),
            },
        );
        g.ready.push_back(id);
        self.shared.cv.notify_one();
        Ok(Handle { done, waker })
    }

    /// Jobs in the pool (running, queued or waiting).
    pub fn jobs(&self) -> usize {
        locked(&self.shared.inner).slots.len()
    }

    fn start_threads(&self) -> std::io::Result<()> {
        let mut g = locked(&self.shared.inner);
        while g.threads < THREADS {
            let shared = self.shared.clone();
            let n = g.threads;
            match std::thread::Builder::new()
                .name(format!("follow {n}"))
                .spawn(move || work(&shared))
            {
                Ok(_) => g.threads += 1,
                // Fewer threads serve as well, more slowly; none cannot.
                Err(e) if g.threads == 0 => return Err(e),
                Err(e) => {
                    tracing::warn!("cannot start another file-following thread: {e}");
                    break;
                }
            }
        }
        Ok(())
    }
}

/// A thread of the pool: gives turns to ready jobs, moves due ones to the ready queue, sleeps
/// until the next is due or one is woken.
fn work(shared: &Shared) {
    let mut g = locked(&shared.inner);
    loop {
        if let Some(id) = g.ready.pop_front() {
            let Some(s) = g.slots.get_mut(&id) else {
                continue;
            };
            let Some(mut job) = s.job.take() else {
                continue;
            };
            s.st = St::Running { woken: false };
            drop(g);
            let next = run_turn(&mut *job);
            g = locked(&shared.inner);
            g = settle(shared, g, id, job, next);
            continue;
        }
        let now = Instant::now();
        fire_due(&mut g, now);
        if !g.ready.is_empty() {
            continue;
        }
        g = match g.timers.peek() {
            Some(&Reverse((t, _))) => {
                let d = t.saturating_duration_since(now);
                shared
                    .cv
                    .wait_timeout(g, d)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0
            }
            None => shared
                .cv
                .wait(g)
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        };
    }
}

/// One turn, a panic in it caught (and one in the job's answer to it: then the job is over).
fn run_turn(job: &mut dyn Job) -> Next {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    match catch_unwind(AssertUnwindSafe(|| job.turn())) {
        Ok(n) => n,
        Err(_) => catch_unwind(AssertUnwindSafe(|| job.panicked())).unwrap_or(Next::Done),
    }
}

/// Puts a job back after its turn as `next` says; a job that is over is dropped unlocked (its
/// drop unsubscribes from the watcher, whose callback takes this lock) and then said done.
fn settle<'a>(
    shared: &'a Shared,
    mut g: std::sync::MutexGuard<'a, Inner>,
    id: u64,
    job: Box<dyn Job>,
    next: Next,
) -> std::sync::MutexGuard<'a, Inner> {
    let now = Instant::now();
    let Some(s) = g.slots.get_mut(&id) else {
        return g;
    };
    let woken = matches!(s.st, St::Running { woken: true });
    let wait = match next {
        Next::Done => {
            let s = g.slots.remove(&id);
            drop(g);
            drop(job);
            if let Some(s) = s {
                *locked(&s.done.done) = true;
                s.done.cv.notify_all();
            }
            return locked(&shared.inner);
        }
        Next::More => None,
        Next::Wait(_) if woken => None,
        Next::Wait(d) => Some((d, false)),
        Next::Sleep(d) => Some((d, true)),
    };
    s.job = Some(job);
    match wait {
        None => {
            s.st = St::Queued;
            g.ready.push_back(id);
        }
        Some((d, deaf)) => {
            let due = now + d;
            s.st = St::Idle { deaf };
            s.due = due;
            // One live timer entry a job: a later one that is there fires, finds the job not
            // due yet and is pushed again for its due time.
            if s.timer_at.is_none_or(|t| t > due) {
                s.timer_at = Some(due);
                g.timers.push(Reverse((due, id)));
            }
        }
    }
    g
}

/// Moves the jobs due by `now` to the ready queue.
fn fire_due(g: &mut Inner, now: Instant) {
    while let Some(&Reverse((t, id))) = g.timers.peek() {
        if t > now {
            break;
        }
        g.timers.pop();
        let Some(s) = g.slots.get_mut(&id) else {
            continue;
        };
        if s.timer_at != Some(t) {
            // Stale: an earlier entry replaced it.
            continue;
        }
        s.timer_at = None;
        if !matches!(s.st, St::Idle { .. }) {
            // Woken meanwhile: it asks for its next wait after its turn.
            continue;
        }
        if s.due <= now {
            s.st = St::Queued;
            g.ready.push_back(id);
        } else {
            let due = s.due;
            s.timer_at = Some(due);
            g.timers.push(Reverse((due, id)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::{channel, Sender};

    /// Counts its turns, reports each on a channel; panics at the turns listed; over after
    /// `last` turns.
    struct Counter {
        turns: usize,
        panic_at: Vec<usize>,
        last: usize,
        wait: Next,
        tx: Sender<usize>,
        panics: Arc<AtomicUsize>,
    }

    impl Job for Counter {
        fn turn(&mut self) -> Next {
            self.turns += 1;
            let _ = self.tx.send(self.turns);
            if self.panic_at.contains(&self.turns) {
                panic!("test panic");
            }
            if self.turns >= self.last {
                Next::Done
            } else {
                self.wait
            }
        }
        fn panicked(&mut self) -> Next {
            self.panics.fetch_add(1, Ordering::SeqCst);
            Next::Sleep(Duration::ZERO)
        }
    }

    fn counter(
        last: usize,
        wait: Next,
        panic_at: Vec<usize>,
    ) -> (Counter, std::sync::mpsc::Receiver<usize>, Arc<AtomicUsize>) {
        let (tx, rx) = channel();
        let panics = Arc::new(AtomicUsize::new(0));
        let c = Counter {
            turns: 0,
            panic_at,
            last,
            wait,
            tx,
            panics: panics.clone(),
        };
        (c, rx, panics)
    }

    const LONG: Duration = Duration::from_secs(3600);

    /// A job waiting for an hour has its turns when woken, exactly one a wake-up while it waits;
    /// a panicking job is counted and goes on, and the others are served meanwhile; a job that
    /// is over is said finished and not woken again.
    #[test]
    fn turns_come_from_wake_ups_and_panics_are_contained() {
        let pool = Pool::default();
        let (a, rx_a, _) = counter(4, Next::Wait(LONG), vec![]);
        let ha = pool.add(|_| Box::new(a)).unwrap();
        assert_eq!(rx_a.recv_timeout(Duration::from_secs(10)), Ok(1));
        for want in 2..=4 {
            ha.wake();
            assert_eq!(rx_a.recv_timeout(Duration::from_secs(10)), Ok(want));
        }
        ha.join();
        assert!(ha.is_finished());
        ha.wake();
        // A job that panics at its first and second turns is counted twice, retried, and over
        // at its fourth; the pool's threads all still serve.
        let (b, rx_b, panics) = counter(4, Next::More, vec![1, 2]);
        let hb = pool.add(|_| Box::new(b)).unwrap();
        hb.join();
        assert_eq!(rx_b.try_iter().collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(panics.load(Ordering::SeqCst), 2);
        let mut handles = Vec::new();
        let mut rxs = Vec::new();
        for _ in 0..3 * THREADS {
            let (c, rx, _) = counter(2, Next::Wait(Duration::ZERO), vec![]);
            handles.push(pool.add(|_| Box::new(c)).unwrap());
            rxs.push(rx);
        }
        for h in &handles {
            h.join();
        }
        for rx in rxs {
            assert_eq!(rx.try_iter().collect::<Vec<_>>(), [1, 2]);
        }
        assert_eq!(pool.jobs(), 0);
        assert_eq!(locked(&pool.shared.inner).threads, THREADS);
    }
}
