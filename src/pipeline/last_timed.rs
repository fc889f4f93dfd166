//! The last timed lines of an input that no line kind reads (SGLang's other output: `Cache
//! flushed successfully!`, `The server is fired up…`, a scheduler's `Traceback` line), after its
//! last line that one reads, for the log clock at the end of the input.
//!
//! A finished input's "now" is the time of its last timed line (see
//! [`crate::state::clock`]): a log that goes on past `--idle-after` with such lines (a server
//! that crashed, or stayed up with nothing to do) reads idle at its end, as it does followed
//! live. Reading the time of every such line would cost a prefix match on a third of a typical
//! log's lines; only the last ones before the end matter (a line a kind reads moves the clock
//! itself), so each such line costs a look at its first bytes and a copy of up to
//! [`HEAD`] bytes, and its time is read only at the end of the input.
//!
//! Two are kept, so that the clock's rule can judge them as it judges any line (a lone one far
//! from the clock is an outlier; a second one near it confirms it). Lines come in log order
//! (a newest-first input is read from its end, see [`super::order`]).

use crate::record::LogTime;

/// Bytes of a line kept: SGLang's prefix with every rank tag after Ray's actor prefix fits.
const HEAD: usize = 160;

/// One kept line: its start, or the wrapper's time.
#[derive(Debug, Default)]
struct Kept {
    /// The line's first bytes (where SGLang's prefix is); empty when a wrapper gave a time.
    head: String,
    realtime: Option<f64>,
    local: Option<LogTime>,
}

/// What a kept line gives: the wrapper's Unix time, else SGLang's prefix (its first bytes, to
/// read with [`crate::parse::Parser::prefix_time`]), else a stream prefix's local time.
#[derive(Debug, Clone, Copy)]
pub struct TimedLine<'a> {
    /// The wrapper's time (journald, container runtime, shipper), Unix seconds.
    pub realtime: Option<f64>,
    /// The line's first bytes.
    pub head: &'a str,
    /// A stream prefix's local time.
    pub local: Option<LogTime>,
}

/// The last two timed lines no kind reads since the last timed line one reads (see the
/// module docs).
#[derive(Debug, Default)]
pub struct LastTimed {
    kept: [Kept; 2],
    /// Lines kept (0 to 2), the later in `kept[1]` when two.
    n: usize,
}

impl LastTimed {
    /// Notes a line no kind reads: kept when it carries a time (a wrapper's, or SGLang's
    /// prefix at its start: `[2026-…`, also after Ray's actor prefix). Hot: a line without one
    /// costs a look at its first byte.
    #[inline]
    pub fn note(&mut self, text: &str, realtime: Option<f64>, local: Option<LogTime>) {
        if realtime.is_none() && local.is_none() && !prefixed(text.as_bytes()) {
            return;
        }
        let k = if self.n < 2 {
            self.n += 1;
            &mut self.kept[self.n - 1]
        } else {
            self.kept.swap(0, 1);
            &mut self.kept[1]
        };
        k.realtime = realtime;
        k.local = local;
        k.head.clear();
        if realtime.is_none() {
            let mut end = text.len().min(HEAD);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            k.head.push_str(&text[..end]);
        }
    }

    /// A timed line that a kind reads: it moves the clock itself, so the lines kept before it
    /// are not the last.
    #[inline]
    pub fn read_timed(&mut self) {
        self.n = 0;
    }

    /// Whether no line is kept.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The kept lines in log order, then forgets them (the end of the input: a followed file
    /// read on keeps only lines after this).
    pub fn take(&mut self, mut f: impl FnMut(TimedLine<'_>)) {
        for k in &self.kept[..self.n] {
            f(TimedLine {
                realtime: k.realtime,
                head: &k.head,
                local: k.local,
            });
        }
        self.n = 0;
    }
}

/// Whether a line starts with what may be SGLang's prefix: `[` and a digit, at its start or
/// after Ray's actor prefix `(Name pid=N) `.
#[inline]
fn prefixed(b: &[u8]) -> bool {
    match b.first() {
        Some(b'[') => b.get(1).is_some_and(u8::is_ascii_digit),
        Some(b'(') => {
            let head = &b[..b.len().min(HEAD)];
            memchr::memmem::find(head, b") [")
                .is_some_and(|i| head.get(i + 3).is_some_and(u8::is_ascii_digit))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heads(l: &mut LastTimed) -> Vec<String> {
        let mut v = Vec::new();
        l.take(|t| v.push(t.head.to_string()));
        v
    }

    #[test]
    fn keeps_the_last_two_timed_lines_after_the_last_read_one() {
        let mut l = LastTimed::default();
        l.note(
            "[2026-06-03 10:00:50 TP0] Cache flushed successfully!",
            None,
            None,
        );
        l.note("  File \"x.py\", line 1, in <module>", None, None);
        l.note("[2026-06-03 10:01:20] The server is fired up", None, None);
        l.note(
            "[2026-06-03 10:02:20 TP0] Scheduler hit an exception",
            None,
            None,
        );
        l.note("Traceback (most recent call last):", None, None);
        assert_eq!(
            heads(&mut l),
            [
                "[2026-06-03 10:01:20] The server is fired up",
                "[2026-06-03 10:02:20 TP0] Scheduler hit an exception"
            ]
        );
        assert!(l.is_empty());
        // A line a kind reads makes the kept ones not the last.
        l.note(
            "[2026-06-03 10:00:50 TP0] Cache flushed successfully!",
            None,
            None,
        );
        l.read_timed();
        assert!(l.is_empty());
        // Ray's actor prefix; a wrapper's time keeps no bytes.
        l.note("(SGLangEngine pid=12) [2026-06-03 10:00:51] x", None, None);
        l.note("no time", Some(1.0), None);
        let mut v = Vec::new();
        l.take(|t| v.push((t.head.to_string(), t.realtime)));
        assert_eq!(
            v,
            [
                (
                    "(SGLangEngine pid=12) [2026-06-03 10:00:51] x".to_string(),
                    None
                ),
                (String::new(), Some(1.0))
            ]
        );
    }
}
