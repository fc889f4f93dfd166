//! Wrappers that frame a log line inside another record, undone before parsing:
//!
//! * `journalctl -o json` lines: the SGLang line is `MESSAGE` (a string, an array of bytes for
//!   non-UTF-8 data, or `null` when over 4096 bytes without `--all`); `_SYSTEMD_UNIT` names the
//!   server and `__REALTIME_TIMESTAMP` (µs) is the line's time.
//! * Docker `json-file` lines: `{"log": "...\n", "stream": ..., "time": ...}`; a line over 16 KiB
//!   arrives as several objects and only the last one's `log` ends with `\n`.
//! * Kubernetes CRI lines: `<RFC 3339 time> <stdout|stderr> <P|F> <text>`; `P` pieces continue
//!   in the next record.
//!
//! Anything else passes through unchanged. Detection is per line, so a file may mix them.

use std::borrow::Cow;

use serde::Deserialize;

/// A line after unwrapping.
#[derive(Debug, PartialEq)]
pub enum Framed<'a> {
    /// The line as read (no wrapper).
    Plain(&'a [u8]),
    /// The wrapped text with what the wrapper said about it.
    Message {
        /// The SGLang line.
        text: Cow<'a, [u8]>,
        /// The systemd unit (journald), without `.service`.
        unit: Option<String>,
        /// The record's time, Unix seconds.
        realtime: Option<f64>,
    },
    /// A partial record was buffered; nothing to parse yet.
    Pending,
    /// A journald entry whose `MESSAGE` is null (over 4096 bytes; run journalctl with `--all`).
    NullMessage,
}

#[derive(Deserialize)]
struct JsonRecord {
    /// `false` when the key is absent (a MESSAGE is never a boolean), `null` when null.
    #[serde(rename = "MESSAGE", default = "absent")]
    message: serde_json::Value,
    #[serde(rename = "_SYSTEMD_UNIT")]
    unit: Option<String>,
    #[serde(rename = "__REALTIME_TIMESTAMP")]
    realtime: Option<String>,
    log: Option<String>,
    time: Option<String>,
}

fn absent() -> serde_json::Value {
    serde_json::Value::Bool(false)
}

/// Undoes wrappers; holds partial container records (bounded by `max_line`).
#[derive(Debug)]
pub struct Framer {
    partial: Vec<u8>,
    partial_time: Option<f64>,
    max_line: usize,
}

impl Framer {
    /// A framer whose reassembled records are at most `max_line` bytes (the rest is dropped).
    pub fn new(max_line: usize) -> Framer {
        Framer {
            partial: Vec::new(),
            partial_time: None,
            max_line,
        }
    }

    /// Unwraps one line.
    pub fn frame<'a>(&'a mut self, line: &'a [u8]) -> Framed<'a> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.first() == Some(&b'{') {
            if let Ok(rec) = serde_json::from_slice::<JsonRecord>(line) {
                if rec.message != absent() {
                    let msg = rec.message;
                    let realtime = rec
                        .realtime
                        .and_then(|s| s.parse::<f64>().ok())
                        .map(|us| us / 1e6);
                    let unit = rec.unit.map(|u| super::server_name_of_unit(&u).to_string());
                    let text = match msg {
                        serde_json::Value::String(s) => s.into_bytes(),
                        serde_json::Value::Array(a) => a
                            .iter()
                            .map(|b| b.as_u64().unwrap_or(b'?' as u64) as u8)
                            .collect(),
                        _ => return Framed::NullMessage,
                    };
                    return Framed::Message {
                        text: Cow::Owned(text),
                        unit,
                        realtime,
                    };
                }
                if let Some(log) = rec.log {
                    let t = rec.time.as_deref().and_then(rfc3339);
                    return self.piece(log.as_bytes(), t, !log.ends_with('\n'));
                }
            }
            return Framed::Plain(line);
        }
        if let Some((t, partial, text)) = cri(line) {
            let t = rfc3339(t);
            return self.piece(text, t, partial);
        }
        Framed::Plain(line)
    }

    fn piece<'a>(&'a mut self, text: &[u8], t: Option<f64>, partial: bool) -> Framed<'a> {
        let text = text.strip_suffix(b"\n").unwrap_or(text);
        if self.partial.is_empty() {
            self.partial_time = t;
        }
        let room = self.max_line.saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&text[..text.len().min(room)]);
        if partial {
            return Framed::Pending;
        }
        let text = std::mem::take(&mut self.partial);
        Framed::Message {
            text: Cow::Owned(text),
            unit: None,
            realtime: self.partial_time.take(),
        }
    }
}

/// Splits a CRI log record: `(time, is_partial, text)`.
fn cri(line: &[u8]) -> Option<(&str, bool, &[u8])> {
    if line.len() < 25
        || !line[..4].iter().all(u8::is_ascii_digit)
        || line[4] != b'-'
        || line[10] != b'T'
    {
        return None;
    }
    let sp = memchr::memchr(b' ', line)?;
    let rest = &line[sp + 1..];
    let rest = rest
        .strip_prefix(b"stdout ")
        .or_else(|| rest.strip_prefix(b"stderr "))?;
    let (partial, text) = if let Some(t) = rest.strip_prefix(b"P ") {
        (true, t)
    } else if let Some(t) = rest.strip_prefix(b"F ") {
        (false, t)
    } else {
        return None;
    };
    Some((std::str::from_utf8(&line[..sp]).ok()?, partial, text))
}

fn rfc3339(s: &str) -> Option<f64> {
    let ts: jiff::Timestamp = s.parse().ok()?;
    Some(ts.as_second() as f64 + f64::from(ts.subsec_nanosecond()) / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journald_json_string_bytes_and_null() {
        let mut f = Framer::new(1 << 20);
        let l = br#"{"MESSAGE":"[2026-06-03 10:07:50 DP0 TP0] hi","_SYSTEMD_UNIT":"sglang-decode.service","__REALTIME_TIMESTAMP":"1780481270000000"}"#;
        assert_eq!(
            f.frame(l),
            Framed::Message {
                text: Cow::Owned(b"[2026-06-03 10:07:50 DP0 TP0] hi".to_vec()),
                unit: Some("sglang-decode".into()),
                realtime: Some(1780481270.0)
            }
        );
        let l = br#"{"MESSAGE":[104,255,105],"__REALTIME_TIMESTAMP":"1"}"#;
        assert!(matches!(f.frame(l), Framed::Message { text, .. } if &*text == b"h\xffi"));
        assert_eq!(f.frame(br#"{"MESSAGE":null}"#), Framed::NullMessage);
    }

    #[test]
    fn docker_and_cri_partials_join() {
        let mut f = Framer::new(1 << 20);
        assert_eq!(
            f.frame(br#"{"log":"abc","stream":"stderr","time":"2026-06-03T10:00:00.5Z"}"#),
            Framed::Pending
        );
        match f.frame(br#"{"log":"def\n","stream":"stderr","time":"2026-06-03T10:00:01Z"}"#) {
            Framed::Message { text, realtime, .. } => {
                assert_eq!(&*text, b"abcdef");
                assert_eq!(realtime, Some(1780480800.5));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            f.frame(b"2026-06-03T10:00:00.123456789Z stderr P [2026-06-03 10:00:00] Dec"),
            Framed::Pending
        );
        match f.frame(b"2026-06-03T10:00:00.2Z stderr F ode batch") {
            Framed::Message { text, .. } => {
                assert_eq!(&*text, b"[2026-06-03 10:00:00] Decode batch")
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(f.frame(b"plain line"), Framed::Plain(b"plain line"));
    }
}
