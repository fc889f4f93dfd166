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
//!
//! Responses still being written hold their encoding. Clients that read slowly or not at all
//! would each hold another one (a new encoding every quarter second while lines arrive), so
//! memory is bounded: while the older encodings still held come to more than [`HELD_ENCODINGS`]
//! times the newest's size (and at least [`HELD_FLOOR`]), the newest is served as it is, with a
//! warning, until they are released. A response's write ends within its deadlines
//! ([`super::conns::WRITE_TIMEOUT`] without progress, [`super::conns::RESPONSE_DEADLINE`] in
//! all), so the exposition is never held back longer than that.
//!
//! Each body variant a scraper asks for ([`Variant`]: the text format or OpenMetrics, and how
//! names are written, [`crate::export::format`]) has its newest encoding of its own, kept by
//! the same rules; a Prometheus asks for one, so most exporters hold one.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::clock::{self, Clock, Now};
use crate::state::{lock, Shared, State};

use crate::export::format::{Names, Variant};
use crate::export::metrics;

/// One encoded exposition and what it is valid for. Its ages are on the monotonic clock: one on
/// the wall clock held an encoding "fresh" for as long as a step back of the clock (repro 38).
#[derive(Debug)]
struct Encoded {
    generation: u64,
    /// Valid until then: the moment a rank turns idle, as far from `at` as the state's wall
    /// clock says (`None`: no rank will turn idle).
    until: Option<Instant>,
    /// Shared by every response: cloning `Bytes` copies no data.
    text: Bytes,
    gzip: OnceLock<Bytes>,
    /// When it was encoded: the state's moment.
    at: Instant,
    /// When its encoding was done.
    done: Instant,
}

impl Encoded {
    /// Bytes of its text and gzip encodings.
    fn size(&self) -> usize {
        self.text.len() + self.gzip.get().map_or(0, Bytes::len)
    }

    /// Whether no rank turned idle since it was encoded.
    fn valid(&self, now: Instant) -> bool {
        self.until.is_none_or(|u| now < u)
    }

    /// Whether it answers a scrape asked at `asked` whatever changed since: younger than
    /// `min_age` seconds, or done after the scrape was asked.
    fn recent(&self, now: Instant, asked: Instant, min_age: f64) -> bool {
        clock::since(now, self.at) < min_age || self.done >= asked
    }
}

/// How long an encoding is served although the state changed since.
pub const MIN_AGE: f64 = 0.25;

/// Older encodings still held by responses may come to this many times the newest's size
/// before the newest is served although the state changed.
pub const HELD_ENCODINGS: usize = 3;

/// ... and at least this many bytes (small expositions are never held back).
pub const HELD_FLOOR: usize = 16 << 20;

/// The shared, lazily re-encoded exposition of a live state.
#[derive(Debug)]
pub struct Exposition {
    state: Shared,
    /// The newest encoding of each body variant asked for.
    last: Mutex<Vec<(Variant, Arc<Encoded>)>>,
    min_age: f64,
    /// Bytes of every encoding alive: the newest and those still held by responses.
    held: Arc<AtomicUsize>,
    /// [`HELD_FLOOR`], smaller in tests.
    held_floor: usize,
    /// Whether the newest is being served for want of memory (warned once per episode).
    crowded: AtomicBool,
    clock: Clock,
    /// `--web.names`.
    names: Names,
    /// `--web.old-names`.
    old_names: bool,
}

/// An encoding's bytes, counted in [`Exposition::held`] while any response holds them.
struct Held {
    data: Vec<u8>,
    held: Arc<AtomicUsize>,
}

impl AsRef<[u8]> for Held {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.held.fetch_sub(self.data.len(), Ordering::Relaxed);
    }
}

/// `data` as shared bytes counted in `held` until the last clone is dropped.
fn counted(data: Vec<u8>, held: &Arc<AtomicUsize>) -> Bytes {
    held.fetch_add(data.len(), Ordering::Relaxed);
    Bytes::from_owner(Held {
        data,
        held: held.clone(),
    })
}

impl Exposition {
    /// The exposition of `state`, judged by the wall clock, re-encoded at most every
    /// [`MIN_AGE`] (on the monotonic clock) while the state changes.
    pub fn new(state: Shared) -> Exposition {
        Exposition::with_min_age(state, MIN_AGE)
    }

    /// [`Exposition::new`] with another minimum age (0: encode anew after every change).
    pub fn with_min_age(state: Shared, min_age: f64) -> Exposition {
        let clock = lock(&state).clock().clone();
        Exposition {
            state,
            last: Mutex::new(Vec::new()),
            min_age,
            held: Arc::new(AtomicUsize::new(0)),
            held_floor: HELD_FLOOR,
            crowded: AtomicBool::new(false),
            clock,
            names: Names::default(),
            old_names: false,
        }
    }

    /// This exposition also serving the renamed families under their old names
    /// ([`crate::catalog::RENAMED`], `--web.old-names`).
    pub fn with_old_names(mut self, old_names: bool) -> Exposition {
        self.old_names = old_names;
        self
    }

    /// This exposition writing names as `names` says (`--web.names`).
    pub fn with_names(mut self, names: Names) -> Exposition {
        self.names = names;
        self
    }

    /// How it writes names (`--web.names`), for negotiating each scrape's variant.
    pub fn names(&self) -> Names {
        self.names
    }

    /// This exposition reading `clock` instead of the state's ([`State::clock`]).
    pub fn with_clock(mut self, clock: Clock) -> Exposition {
        self.clock = clock;
        self
    }

    /// Whether the encodings older than the newest of each variant (`newest` bytes in all,
    /// `e` among them) still held by responses come to more than the budget (then `e` is
    /// served although the state changed); warns when that starts and says when it ends.
    fn crowded(&self, e: &Encoded, newest: usize) -> bool {
        let older = self.held.load(Ordering::Relaxed).saturating_sub(newest);
        let budget = (HELD_ENCODINGS * e.text.len()).max(self.held_floor);
        let crowded = older > budget;
        if crowded != self.crowded.swap(crowded, Ordering::Relaxed) {
            if crowded {
                tracing::warn!(
                    held_bytes = older,
                    budget_bytes = budget,
                    "responses to slow clients still hold older expositions: serving the one \
                     encoded {:.1} s ago until they are written or time out",
                    clock::since(Instant::now(), e.at)
                );
            } else {
                tracing::info!("older expositions released: encoding the current state again");
            }
        }
        crowded
    }

    /// The encoding of body variant `v` to serve a scrape asked at `asked`.
    fn current(&self, v: Variant, asked: Instant) -> Arc<Encoded> {
        let v = v.body();
        // Scrapers that arrive while one encodes wait for it and share its result: an
        // encoding done after a scrape was asked is fresh for it, however long encoding took.
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let now = self.clock.now();
        let mut s = lock(&self.state);
        s.expire(now.wall);
        let newest: usize = last.iter().map(|(_, e)| e.size()).sum();
        let slot = last.iter().position(|(k, _)| *k == v);
        if let Some(e) = slot.map(|i| &last[i].1) {
            let fresh = e.generation == s.generation() || e.recent(now.mono, asked, self.min_age);
            if (fresh && e.valid(now.mono)) || self.crowded(e, newest) {
                return e.clone();
            }
        }
        let e = Arc::new(encode(&s, v, self.old_names, now, &self.clock, &self.held));
        drop(s);
        match slot {
            Some(i) => last[i].1 = e.clone(),
            None => last.push((v, e.clone())),
        }
        e
    }

    /// The encoding for a scrape asked at `asked` if one is at hand — younger
    /// than the minimum age or done since `asked`, and no rank turned idle since — without
    /// waiting for a lock or touching the state: the async workers answer most scrapes with it,
    /// and only an encoding due goes to a blocking thread (one per concurrent scrape would each
    /// keep an allocator arena of an encoding's size: memory growing with scrapers).
    pub fn fresh(&self, v: Variant, gzip: bool, asked: Instant) -> Option<Bytes> {
        let v = v.body();
        let e = {
            let last = self.last.try_lock().ok()?;
            let e = last.iter().find(|(k, _)| *k == v)?.1.clone();
            let now = self.clock.now().mono;
            (e.recent(now, asked, self.min_age) && e.valid(now)).then_some(e)?
        };
        if gzip {
            e.gzip.get().cloned()
        } else {
            Some(e.text.clone())
        }
    }

    /// The text exposition (what the push sends): text 0.0.4 in the fixed style of
    /// `--web.names` (colons under `upstream`).
    pub fn text(&self) -> Bytes {
        self.text_for(
            crate::export::format::plain(self.names),
            self.clock.now().mono,
        )
    }

    /// The exposition in body variant `v` for a scrape asked at `asked`.
    pub fn text_for(&self, v: Variant, asked: Instant) -> Bytes {
        self.current(v, asked).text.clone()
    }

    /// The text exposition, gzip-compressed (compressed once per encoding).
    pub fn gzip(&self) -> Bytes {
        self.gzip_for(
            crate::export::format::plain(self.names),
            self.clock.now().mono,
        )
    }

    /// [`Exposition::text_for`], gzip-compressed (compressed once per encoding).
    pub fn gzip_for(&self, v: Variant, asked: Instant) -> Bytes {
        let e = self.current(v, asked);
        e.gzip
            .get_or_init(|| {
                let mut z = flate2::write::GzEncoder::new(
                    Vec::with_capacity(e.text.len() / 4),
                    flate2::Compression::fast(),
                );
                // Writing to a Vec cannot fail.
                let _ = z.write_all(&e.text);
                counted(z.finish().unwrap_or_default(), &self.held)
            })
            .clone()
    }
}

/// The state encoded at `now` in body variant `v`; valid until the next idle change the
/// state's wall clock sees, counted from `now` on the monotonic clock.
/// With `old_names`, the renamed families also under their old names.
fn encode(
    s: &State,
    v: Variant,
    old_names: bool,
    now: Now,
    clock: &Clock,
    held: &Arc<AtomicUsize>,
) -> Encoded {
    let text = metrics::encode_served(metrics::families(s, now.wall), v, old_names);
    let until = s.next_idle_change(now.wall).and_then(|t| {
        let wait = Duration::try_from_secs_f64((t - now.wall).max(0.0)).ok()?;
        // Beyond what an Instant holds: never.
        now.mono.checked_add(wait)
    });
    Encoded {
        generation: s.generation(),
        until,
        text: counted(text.into_bytes(), held),
        gzip: OnceLock::new(),
        at: now.mono,
        done: clock.now().mono,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::now_unix;
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
        // The state's clock, stepped by the test (no sleep): the exposition reads it.
        let start = clock::now();
        let (c, set) = clock::manual(start);
        lock(&state).cfg.clock = c;
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
        lock(&state).apply("s", "srv", &rec, Some(start.wall));
        // A moment later (a scrape asked after the last encoding was done).
        let step = |secs: f64| {
            *set.lock().unwrap() = clock::Now {
                wall: start.wall + secs,
                mono: start.mono + Duration::from_secs_f64(secs),
            }
        };
        step(0.001);
        let b = String::from_utf8(x.text().to_vec()).unwrap();
        assert!(b.contains("sglang:num_running_reqs{") && b.contains("} 5\n"));
        // Two seconds later the rank is idle: a new encoding although the state did not change.
        step(2.1);
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

    /// Responses that hold older encodings (clients that read slowly or not at all) bound what
    /// is encoded: past HELD_ENCODINGS times the newest's size, the newest is served although
    /// the state changed, until they are released.
    #[test]
    fn encodings_held_by_responses_are_bounded() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let state = State::shared(pat.clone(), StateConfig::default());
        let mut x = Exposition::with_min_age(state.clone(), 0.0);
        x.held_floor = 0;
        let mut p = Parser::new(pat);
        let mut apply = |running: u32| {
            let line = format!(
                "[2026-06-03 10:00:00 TP0] Decode batch, #running-req: {running}, #queue-req: 0"
            );
            let rec = p.parse(&line).unwrap();
            lock(&state).apply("s", "srv", &rec, Some(now_unix()));
        };
        let shows = |b: &Bytes, running: u32| {
            let text = std::str::from_utf8(b).unwrap();
            text.lines().any(|l| {
                l.starts_with("sglang:num_running_reqs{") && l.ends_with(&format!("}} {running}"))
            })
        };
        // Every response held: a new encoding per change while the older ones come to at most
        // three times the newest's size; past that the newest is served again. (Sizes differ by
        // a few bytes between encodings, so where exactly is read from them.)
        let mut held: Vec<Bytes> = Vec::new();
        let mut reused = None;
        for running in 1..=8 {
            apply(running);
            let older: usize = held.iter().rev().skip(1).map(Bytes::len).sum();
            let t = x.text();
            match held.last() {
                Some(newest) if newest.as_ptr() == t.as_ptr() => {
                    assert!(older > HELD_ENCODINGS * newest.len(), "reused too soon");
                    assert!(shows(&t, running - 1));
                    reused = Some(running);
                    break;
                }
                Some(newest) => assert!(older <= HELD_ENCODINGS * newest.len(), "{running}"),
                None => {}
            }
            assert!(shows(&t, running), "encoding {running}");
            held.push(t);
        }
        let reused = reused.expect("the newest served again");
        assert!((5..=6).contains(&reused), "{reused}");
        let t = x.text();
        assert_eq!(t.as_ptr(), held.last().unwrap().as_ptr());
        assert_eq!(
            x.held.load(Ordering::Relaxed),
            held.iter().map(Bytes::len).sum::<usize>()
        );
        // Released: the state is encoded again.
        drop((held, t));
        let t = x.text();
        assert!(shows(&t, reused));
        assert_eq!(x.held.load(Ordering::Relaxed), t.len());
    }

    /// Repro 38: after the wall clock stepped back 2 h, the encoding made before the step was
    /// served as fresh (its age on the wall clock negative) until the clock passed that moment
    /// again. Ages are on the monotonic clock: the lines after the step are shown as they come.
    #[test]
    fn a_wall_clock_step_back_does_not_freeze_the_exposition() {
        let pat = Arc::new(Patterns::embedded().unwrap());
        let state = State::shared(
            pat.clone(),
            StateConfig {
                idle_after: 5.0,
                ..StateConfig::default()
            },
        );
        let start = clock::now();
        let (c, set) = clock::manual(start);
        let x = Exposition::with_min_age(state.clone(), MIN_AGE).with_clock(c);
        let mut p = Parser::new(pat);
        let mut line = |running: u32| {
            let wall = set.lock().unwrap().wall;
            let l = format!(
                "[2026-06-03 10:00:00 TP0] Decode batch, #running-req: {running}, #queue-req: 0"
            );
            lock(&state).apply("s", "srv", &p.parse(&l).unwrap(), Some(wall));
        };
        let running = |b: Bytes| {
            let text = String::from_utf8(b.to_vec()).unwrap();
            let v = text.lines().find_map(|l| {
                l.strip_prefix("sglang:num_running_reqs{")
                    .and_then(|l| l.rsplit_once("} "))
            });
            v.map(|(_, v)| v.to_string())
        };
        let advance = |wall: f64, secs: f64| {
            let mut n = set.lock().unwrap();
            n.wall += wall + secs;
            n.mono += Duration::from_secs_f64(secs);
        };
        line(12);
        assert_eq!(running(x.text()).as_deref(), Some("12"));
        // The wall clock steps back two hours; a second later a line says 21.
        advance(-7200.0, 1.0);
        line(21);
        assert_eq!(running(x.text()).as_deref(), Some("21"), "after the step");
        // Within the minimum age the encoding is shared; past it the next line shows.
        advance(0.0, 0.1);
        line(22);
        assert_eq!(
            running(x.text()).as_deref(),
            Some("21"),
            "within the minimum age"
        );
        advance(0.0, 0.2);
        assert_eq!(
            running(x.text()).as_deref(),
            Some("22"),
            "past the minimum age"
        );
    }
}
