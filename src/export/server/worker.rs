//! Threads of the HTTP server's own for its blocking work (encoding a big exposition, the live
//! page's status, bcrypt), started once at start-up.
//!
//! Not tokio's blocking pool: it starts a thread when work comes and there is none idle, and
//! panics where the system refuses one (a unit's `TasksMax`, a user's process limit, which the
//! followers may have used up): a scrape then got an empty reply while the probes answered
//! 200. Threads that exist from the start cannot be refused later; a job that panics is
//! answered `None` and its thread goes on.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};

type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of threads that run jobs in the order they come.
#[derive(Debug)]
pub struct Worker {
    jobs: Sender<Job>,
}

impl Worker {
    /// Starts `threads` threads (at least one) named `name`.
    ///
    /// # Errors
    /// The system refused a thread.
    pub fn start(name: &str, threads: usize) -> std::io::Result<Arc<Worker>> {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || serve(&rx))?;
        }
        Ok(Arc::new(Worker { jobs: tx }))
    }

    /// Runs `f` on one of the threads and waits for it without holding an async worker;
    /// `None` when `f` panicked.
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<R> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        self.jobs.send(job).ok()?;
        rx.await.ok()
    }
}

/// One thread: runs jobs until the [`Worker`] is gone.
fn serve(rx: &Mutex<Receiver<Job>>) {
    loop {
        let job = match rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(job) => job,
            Err(_) => return,
        };
        // A panic drops the job's answer (its caller gets `None`); the thread goes on.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_on_the_threads_started_and_a_panic_is_none() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let w = Worker::start("test-worker", 1).unwrap();
        rt.block_on(async {
            let name = w
                .run(|| std::thread::current().name().map(str::to_string))
                .await;
            assert_eq!(name, Some(Some("test-worker".to_string())));
            assert_eq!(w.run(|| -> u32 { panic!("a bug") }).await, None);
            // The thread went on.
            assert_eq!(w.run(|| 41 + 1).await, Some(42));
        });
    }
}
