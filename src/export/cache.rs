//! The exposition, encoded once per change of the state and served to every scraper (plain or
//! gzip), instead of being rendered anew for each of them: with many series and many scrapers
//! (several Prometheus replicas, agents, curl loops) encoding is the cost that grows.
//!
//! What is shown depends on the state and on "now" (a rank turns idle `--idle-after` after its
//! last stats line). The cache therefore holds while the state's generation is unchanged and
//! "now" has not reached the next moment a rank turns idle ([`State::next_idle_change`]).
//!
//! While lines arrive the state changes between any two scrapes, and every scrape would encode
//! anew: many scrapers (or clients that stop reading) would each hold an encoding of their
//! own, and memory would grow with them. So an encoding younger than [`MIN_AGE`] is served as
//! it is, whatever changed since (a scrape sees the state of at most a quarter of a second
//! ago: at most four encodings a second), unless a rank turned idle meanwhile.

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

use crate::source::now_unix;
use crate::state::{lock, Shared, State};

use super::metrics;

/// One encoded exposition and what it is valid for.
#[derive(Debug)]
struct Encoded {
    generation: u64,
    /// Valid until this time (Unix seconds; infinite when no rank will turn idle).
    until: f64,
    /// Shared by every response: cloning `Bytes` copies no data.
    text: Bytes,
    gzip: OnceLock<Bytes>,
    /// When it was encoded (Unix seconds).
    at: f64,
}

/// How long an encoding is served although the state changed since.
pub const MIN_AGE: f64 = 0.25;

/// The shared, lazily re-encoded exposition of a live state.
#[derive(Debug)]
pub struct Exposition {
    state: Shared,
    last: Mutex<Option<Arc<Encoded>>>,
    min_age: f64,
}

impl Exposition {
    /// The exposition of `state`, judged by the wall clock, re-encoded at most every
    /// [`MIN_AGE`] while the state changes.
    pub fn new(state: Shared) -> Exposition {
        Exposition::with_min_age(state, MIN_AGE)
    }

    /// [`Exposition::new`] with another minimum age (0: encode anew after every change).
    pub fn with_min_age(state: Shared, min_age: f64) -> Exposition {
        Exposition {
            state,
            last: Mutex::new(None),
            min_age,
        }
    }

    fn current(&self) -> Arc<Encoded> {
        // Scrapers that arrive while one encodes wait for it and share its result.
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let now = now_unix();
        let mut s = lock(&self.state);
        s.expire(now);
        if let Some(e) = last.as_ref() {
            let fresh = e.generation == s.generation() || now - e.at < self.min_age;
            if fresh && now < e.until {
                return e.clone();
            }
        }
        let e = Arc::new(encode(&s, now));
        drop(s);
        *last = Some(e.clone());
        e
    }

    /// The encoding if one younger than the minimum age is at hand (no rank turned idle since),
    /// without waiting for a lock or touching the state: the async workers answer most scrapes
    /// with it, and only an encoding due goes to a blocking thread (one per concurrent scrape
    /// would each keep an allocator arena of an encoding's size: memory growing with scrapers).
    pub fn fresh(&self, gzip: bool) -> Option<Bytes> {
        let e = {
            let last = self.last.try_lock().ok()?;
            let e = last.as_ref()?.clone();
            let now = now_unix();
            (now - e.at < self.min_age && now < e.until).then_some(e)?
        };
        if gzip {
            e.gzip.get().cloned()
        } else {
            Some(e.text.clone())
        }
    }

    /// The text exposition.
    pub fn text(&self) -> Bytes {
        self.current().text.clone()
    }

    /// The text exposition, gzip-compressed (compressed once per encoding).
    pub fn gzip(&self) -> Bytes {
        let e = self.current();
        e.gzip
            .get_or_init(|| {
                let mut z = flate2::write::GzEncoder::new(
                    Vec::with_capacity(e.text.len() / 4),
                    flate2::Compression::fast(),
                );
                // Writing to a Vec cannot fail.
                let _ = z.write_all(&e.text);
                Bytes::from(z.finish().unwrap_or_default())
            })
            .clone()
    }
}

fn encode(s: &State, now: f64) -> Encoded {
    let text = metrics::encode_text(&metrics::families(s, now));
    Encoded {
        generation: s.generation(),
        until: s.next_idle_change(now).unwrap_or(f64::INFINITY),
        text: Bytes::from(text),
        gzip: OnceLock::new(),
        at: now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::patterns::Patterns;
    use crate::parse::Parser;
    use crate::state::StateConfig;

    #[test]
    fn reused_until_the_state_changes_or_a_rank_turns_idle() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let state = State::shared(
            pat.clone(),
            StateConfig {
                idle_after: 2.0,
                ..StateConfig::default()
            },
        );
        let x = Exposition::with_min_age(state.clone(), 0.0);
        let a = x.text();
        assert_eq!(
            a.as_ptr(),
            x.text().as_ptr(),
            "unchanged state: the same encoding"
        );
        let mut p = Parser::new(pat);
        let rec = p
            .parse("[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 5, #queue-req: 0")
            .unwrap();
        lock(&state).apply("s", "srv", &rec, Some(now_unix()));
        let b = String::from_utf8(x.text().to_vec()).unwrap();
        assert!(b.contains("sglang:num_running_reqs{") && b.contains("} 5\n"));
        // Two seconds later the rank is idle: a new encoding although the state did not change.
        std::thread::sleep(std::time::Duration::from_millis(2100));
        let c = String::from_utf8(x.text().to_vec()).unwrap();
        assert_ne!(b, c);
        assert!(c.contains("sglang_idle{") && c.contains("} 0\n"));
        let z = x.gzip();
        let mut d = flate2::read::GzDecoder::new(&z[..]);
        let mut out = String::new();
        std::io::Read::read_to_string(&mut d, &mut out).unwrap();
        assert_eq!(out, *c);
    }

    /// While lines arrive, scrapes within [`MIN_AGE`] of an encoding share it: memory does not
    /// grow with scrapers.
    #[test]
    fn scrapes_within_the_minimum_age_share_one_encoding() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let state = State::shared(pat.clone(), StateConfig::default());
        let x = Exposition::with_min_age(state.clone(), 60.0);
        let a = x.text();
        let mut p = Parser::new(pat);
        let rec = p
            .parse("[2026-06-03 10:00:00 TP0] Decode batch, #running-req: 5, #queue-req: 0")
            .unwrap();
        lock(&state).apply("s", "srv", &rec, Some(now_unix()));
        assert_eq!(
            a.as_ptr(),
            x.text().as_ptr(),
            "within the minimum age: shared"
        );
        let y = Exposition::with_min_age(state, 0.0);
        assert!(String::from_utf8(y.text().to_vec())
            .unwrap()
            .contains("} 5\n"));
    }
}
