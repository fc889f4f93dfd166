//! Admission of HTTP connections: at most `--web.max-connections` at once, so idle or slow
//! clients can never take the file descriptors that scrapes and followed files need. When full,
//! the oldest connection that never sent a request (a client that connected and went quiet, or
//! a slowloris) is closed to make room for the newcomer; only when every connection is serving
//! or has served a request is the newcomer refused.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// The connections being served.
#[derive(Debug)]
pub struct Conns {
    cap: usize,
    live: Mutex<Vec<Entry>>,
    next: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    served: Arc<AtomicBool>,
    evict: Arc<Notify>,
}

/// A connection's place; dropping it frees the place.
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    conns: Arc<Conns>,
    /// Set when the connection delivers its first request.
    pub served: Arc<AtomicBool>,
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
            next: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// A place for a new connection: at once while there is room; else by evicting the oldest
    /// connection that never sent a request (it closes when it next runs; the count goes over
    /// the cap by the evicted ones until they end); `None` when every connection has served.
    pub fn admit(self: &Arc<Conns>) -> Option<Ticket> {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if live.len() >= self.cap {
            // Oldest first: entries are pushed in arrival order.
            let i = live
                .iter()
                .position(|e| !e.served.load(Ordering::Relaxed))?;
            let old = live.remove(i);
            old.evict.notify_one();
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let served = Arc::new(AtomicBool::new(false));
        let evict = Arc::new(Notify::new());
        live.push(Entry {
            id,
            served: served.clone(),
            evict: evict.clone(),
        });
        Some(Ticket {
            id,
            conns: self.clone(),
            served,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_evicts_the_oldest_silent_connection_else_refuses() {
        let c = Conns::new(2);
        let a = c.admit().unwrap();
        let b = c.admit().unwrap();
        a.served.store(true, Ordering::Relaxed);
        // Full: `b` never sent a request, so it makes room.
        let n = c.admit().unwrap();
        assert_eq!(c.len(), 2);
        let evicted = b.evict.notified();
        tokio_test_block_on(evicted);
        // Full again, and both served: the newcomer is refused.
        n.served.store(true, Ordering::Relaxed);
        assert!(c.admit().is_none());
        drop(a);
        assert!(c.admit().is_some(), "room again after a connection ended");
    }

    /// Waits for a future on a one-thread runtime.
    fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }
}
