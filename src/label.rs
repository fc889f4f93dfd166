//! The length bound of label values taken from the input.
//!
//! Every label value the exporter takes from what it reads (a server name from a file stem, a
//! journald unit or a pod, the `engine` of a stream prefix or a Ray actor, a stream's `node`,
//! `model_name` from `server_args` or `/server_info`, the Kubernetes labels, a source's path,
//! anything restored from the state file) passes through [`bounded`] before it is kept. The
//! caps on servers, engines and ranks bound how many series there are; this bounds how long
//! each one's labels are, so a 1 MiB line naming a pod of 200 KB can no longer make a 300 MB
//! exposition.
//!
//! A value of at most [`MAX_BYTES`] bytes is kept as it is. A longer one becomes its first
//! bytes (cut at a character boundary), `~`, and 16 hex digits of a hash of the whole value:
//! readable, at most [`MAX_BYTES`] long, and two long values that share their head stay
//! apart. The hash (FNV-1a, 64 bits) is fixed, so a name is the same after a restart (the
//! state file, Prometheus' series). Bounding a bounded value changes nothing.
//!
//! Each distinct value shortened is counted once in
//! `sglang_log_exporter_label_values_shortened_total{label}` (while fewer than 4,096
//! are remembered; past that each time it is met), and the first one of
//! each label is warned about.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;

/// The longest label value kept as it is, in bytes. Kubernetes names (a pod's is at most 253
/// characters), model paths and file names fit; a longer value is a garbled or hostile input.
pub const MAX_BYTES: usize = 256;

/// `~` and the 16 hex digits of the hash.
const SUFFIX: usize = 17;

/// Distinct shortened values remembered for counting each once (8 bytes each).
const MAX_REMEMBERED: usize = 4096;

/// What was shortened, process-wide: the state, the parsers and `backfill` all bound values,
/// and the self metric reports them together.
#[derive(Default)]
struct Shortened {
    /// By label name: values shortened.
    counts: BTreeMap<&'static str, u64>,
    /// Hashes of the values counted.
    seen: HashSet<u64>,
}

static SHORTENED: Mutex<Option<Shortened>> = Mutex::new(None);

/// `value`, or its bounded form when it is longer than [`MAX_BYTES`] (see the module docs);
/// `label` names what the value is for (`engine`, `server`…), for the count and the warning.
pub fn bounded<'a>(label: &'static str, value: &'a str) -> Cow<'a, str> {
    if value.len() <= MAX_BYTES {
        return Cow::Borrowed(value);
    }
    let hash = fnv1a(value.as_bytes());
    let short = shorten(value, hash);
    note(label, value.len(), hash, &short);
    Cow::Owned(short)
}

/// Sets `dst` to `value` bounded (see [`bounded`]), reusing `dst`'s allocation.
pub fn set(label: &'static str, dst: &mut String, value: &str) {
    dst.clear();
    dst.push_str(&bounded(label, value));
}

/// Bounds `s` in place; whether it was too long.
pub fn bound(label: &'static str, s: &mut String) -> bool {
    if s.len() <= MAX_BYTES {
        return false;
    }
    *s = bounded(label, s).into_owned();
    true
}

/// Shortened values by label name (for `sglang_log_exporter_label_values_shortened_total`).
pub fn shortened() -> Vec<(&'static str, u64)> {
    let g = SHORTENED.lock().unwrap_or_else(|p| p.into_inner());
    g.as_ref()
        .map(|s| s.counts.iter().map(|(k, v)| (*k, *v)).collect())
        .unwrap_or_default()
}

/// The bounded form of a value longer than [`MAX_BYTES`].
fn shorten(value: &str, hash: u64) -> String {
    let mut head = MAX_BYTES - SUFFIX;
    while !value.is_char_boundary(head) {
        head -= 1;
    }
    format!("{}~{hash:016x}", &value[..head])
}

/// Counts a shortened value (once per distinct value) and warns at a label's first.
fn note(label: &'static str, len: usize, hash: u64, short: &str) {
    let mut g = SHORTENED.lock().unwrap_or_else(|p| p.into_inner());
    let s = g.get_or_insert_with(Shortened::default);
    let new = if s.seen.contains(&hash) {
        false
    } else {
        if s.seen.len() < MAX_REMEMBERED {
            s.seen.insert(hash);
        }
        true
    };
    if !new {
        return;
    }
    let n = s.counts.entry(label).or_insert(0);
    *n += 1;
    if *n == 1 {
        tracing::warn!(
            label,
            bytes = len,
            "a value of {len} bytes for the {label} label, read from the input, is longer than \
             {MAX_BYTES} bytes: it is shown as its first bytes and a hash of the whole \
             ({short:?}); such values are counted in \
             sglang_log_exporter_label_values_shortened_total{{label=\"{label}\"}}, warned once"
        );
    }
}

/// FNV-1a, 64 bits: a fixed hash (the same in every build and run), unlike std's.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the hostile pass (F3): a kubectl `--prefix` engine naming a 200 KB pod.
    #[test]
    fn a_long_value_keeps_its_head_and_a_hash_and_stays_apart() {
        let pod = |i: u32| format!("pod/{}{i}/sglang", "p".repeat(200_000));
        let (a, b) = (pod(0), pod(1));
        let (ba, bb) = (bounded("engine", &a), bounded("engine", &b));
        assert_eq!(ba.len(), MAX_BYTES);
        assert_eq!(bb.len(), MAX_BYTES);
        assert_eq!(
            ba,
            format!("pod/{}~{:016x}", "p".repeat(235), fnv1a(a.as_bytes()))
        );
        assert_ne!(ba, bb);
        // Fixed: the same value gives the same name in every run (the state file's names).
        assert_eq!(fnv1a(b"sglang"), 0x8377_6631_6561_04bf);
        // Bounded twice is bounded once; a short value is not copied.
        assert_eq!(bounded("engine", &ba), ba);
        assert!(matches!(
            bounded("engine", "decode"),
            Cow::Borrowed("decode")
        ));
        let exact = "x".repeat(MAX_BYTES);
        assert_eq!(bounded("server", &exact), exact);
    }

    #[test]
    fn the_head_is_cut_at_a_character_boundary() {
        // 'é' is two bytes: byte 239 is in the middle of one.
        let v = format!("a{}", "é".repeat(300));
        let b = bounded("model_name", &v);
        assert!(b.len() <= MAX_BYTES);
        assert_eq!(b.len(), 1 + 2 * 119 + SUFFIX);
        assert!(b.starts_with("aé"));
        let mut s = v.clone();
        assert!(bound("model_name", &mut s));
        assert_eq!(s, b);
        assert!(!bound("model_name", &mut s));
        let mut dst = String::new();
        set("model_name", &mut dst, &v);
        assert_eq!(dst, b);
    }

    #[test]
    fn each_distinct_value_is_counted_once() {
        // Counts are process-wide (other tests bound values too): a label of this test alone.
        let count = || {
            shortened()
                .into_iter()
                .find(|(l, _)| *l == "test_label")
                .map_or(0, |(_, n)| n)
        };
        let v = "q".repeat(1000);
        bounded("test_label", &v);
        bounded("test_label", &v);
        assert_eq!(count(), 1);
        bounded("test_label", &format!("{v}2"));
        assert_eq!(count(), 2);
        bounded("test_label", "short");
        assert_eq!(count(), 2);
    }
}
