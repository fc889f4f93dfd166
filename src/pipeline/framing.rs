//! Wrappers that frame a log line inside another record, undone before parsing:
//!
//! * JSON object lines (`{…}`) whose log line sits under a well-known key, decoded with its JSON
//!   escapes (see [`MESSAGE_KEYS`]): `journalctl -o json` (`MESSAGE`: a string, an array of bytes
//!   for non-UTF-8 data, or `null` when over 4096 bytes without `--all`; its writer fields name
//!   the server, engine and node as [`writer`] says; `__REALTIME_TIMESTAMP` in µs is the
//!   line's time), Docker `json-file` (`log`; a
//!   line over 16 KiB arrives as several objects and only the last one's `log` ends with `\n`),
//!   Fluent Bit, Vector and Loki exports (`log`, `message`, `msg`, `line`), cloud log exports
//!   (`textPayload`, `jsonPayload.message`), JSON-lines runners (`{"logger": …, "message": …}`),
//!   and any key given with `--input.json-message-key`. A wrapper timestamp (`time`,
//!   `timestamp`, `@timestamp`, `ts`: RFC 3339 or Unix seconds/ms/µs/ns) becomes the line's
//!   time. A JSON object without a message under those keys (a runner's own record) is skipped
//!   and counted. SGLang's own JSON request records (`--log-requests-format json`, v0.5.7+:
//!   `{"timestamp": "...", "event": "request.finished", ...}`, printed bare in v0.5.7-v0.5.11)
//!   are no wrapper: they pass through unparsed, to the request reader
//!   ([`crate::parse::request`]), which reads them in one pass without building the object.
//! * Kubernetes CRI lines: `<RFC 3339 time> <stdout|stderr> <P|F> <text>`; `P` pieces continue
//!   in the next record.
//! * The journal export format (`journalctl -o export`, [`super::journal_lines`]): entries of
//!   `NAME=value` lines ended by an empty line; `MESSAGE` is the line, the writer fields name
//!   its writer by the same rule as JSON's ([`writer`]), `__REALTIME_TIMESTAMP` is the
//!   time.
//!
//! Anything else passes through unchanged. Detection is per line, so a file may mix them. A
//! record reassembled from pieces past the line limit is skipped and counted, never parsed in
//! part (a cut number would be read as a smaller one).

use super::json_record::{Record, Val};
use crate::parse::stream::rfc3339;
use crate::source::writer::{self, Fields, Writer};

/// The keys a JSON object line's log message is looked for under, in this order (a dotted key
/// is nested: `jsonPayload.message` is `{"jsonPayload": {"message": …}}`). A key given with
/// `--input.json-message-key` is tried first.
pub const MESSAGE_KEYS: &[&str] = &[
    "MESSAGE",
    "log",
    "message",
    "msg",
    "line",
    "textPayload",
    "jsonPayload.message",
    "jsonPayload.msg",
];

/// The keys a JSON object line's own time is looked for under, in this order, after journald's
/// `__REALTIME_TIMESTAMP`.
pub const TIME_KEYS: &[&str] = &["time", "timestamp", "@timestamp", "ts"];

/// A log line with what its wrapper said of it (all `None` for a line no wrapper said anything
/// of).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Message<'a> {
    /// The log line.
    pub text: &'a [u8],
    /// The server a journal record names (its unit without `.service`, see [`writer`]).
    pub unit: Option<&'a str>,
    /// The record's time, Unix seconds.
    pub realtime: Option<f64>,
    /// Who wrote the line, as the record names it (see [`ORIGIN_KEYS`] and [`writer`]):
    /// an engine of the server, as a stream prefix's `engine` is.
    pub origin: Option<&'a str>,
    /// The host a journal record names: a node of its server (see [`super::nodes`]).
    pub node: Option<&'a str>,
    /// The service manager of a journal record's user unit (`user@1000`, see
    /// [`writer`]).
    pub user: Option<&'a str>,
}

impl<'a> Message<'a> {
    /// A line no wrapper said anything of.
    pub fn plain(text: &'a [u8]) -> Message<'a> {
        Message {
            text,
            unit: None,
            realtime: None,
            origin: None,
            node: None,
            user: None,
        }
    }

    /// A journal entry's message, its writer as [`writer`] named it.
    pub fn journal(
        text: &'a [u8],
        writer: &'a crate::source::writer::Writer,
        realtime: Option<f64>,
    ) -> Message<'a> {
        Message {
            text,
            unit: writer.server(),
            realtime,
            origin: writer.engine(),
            node: writer.node(),
            user: writer.user(),
        }
    }
}

/// A line after unwrapping.
#[derive(Debug, PartialEq)]
pub enum Framed<'a> {
    /// The line as read (no wrapper).
    Plain(&'a [u8]),
    /// The wrapped text with what the wrapper said about it.
    Message(Message<'a>),
    /// A partial record was buffered; nothing to parse yet.
    Pending,
    /// A journald entry whose `MESSAGE` is null (over 4096 bytes; run journalctl with `--all`).
    NullMessage,
    /// A JSON object with no log message under a known key (a runner's own record).
    NoMessage,
    /// A record reassembled from pieces was longer than the line limit: skipped.
    Oversized,
    /// A line that starts as a JSON object but does not parse (a record cut short, a value
    /// nested past serde_json's limit of 128), or whose labels are no label set (a value that
    /// is no string, number or boolean: it would name no writer exactly): skipped, never read
    /// as plain text (its last value would be a cut number).
    CutJson,
    /// A journal export entry that broke its format (a binary length that does not match its
    /// bytes, a value past the line limit): skipped whole.
    BrokenEntry,
}

/// The pieces of one container record being joined.
#[derive(Debug, Default)]
struct Partial {
    buf: Vec<u8>,
    time: Option<f64>,
    /// The pieces went past the line limit.
    overflow: bool,
    /// Pieces are held.
    open: bool,
}

/// Undoes wrappers; holds partial container records (bounded by `max_line` each).
///
/// A container runtime writes stdout and stderr into one file, so the pieces of a record cut on
/// one stream can have the other stream's records between them: pieces are joined per stream.
#[derive(Debug)]
pub struct Framer {
    /// Partial records of stdout and stderr.
    partials: [Partial; 2],
    /// The message of the last record (decoded JSON string, bytes, or a joined record).
    out: Vec<u8>,
    /// The writer of the last journal record (export entry or JSON).
    writer: Writer,
    /// The writer fields of the last JSON journal record.
    fields: Fields,
    /// The origin of the last JSON record that is no journal record.
    origin: String,
    max_line: usize,
    /// `--input.json-message-key`, split at dots.
    user_key: Option<Vec<String>>,
    /// The journal export entry being read.
    export: super::journal_lines::Export,
}

impl Framer {
    /// A framer whose reassembled records are at most `max_line` bytes.
    pub fn new(max_line: usize) -> Framer {
        Framer {
            partials: Default::default(),
            out: Vec::new(),
            writer: Writer::default(),
            fields: Fields::default(),
            origin: String::new(),
            max_line,
            user_key: None,
            export: super::journal_lines::Export::new(max_line),
        }
    }

    /// Also looks for the message under `key` (dotted for nested objects), before the
    /// well-known keys.
    pub fn with_message_key(mut self, key: Option<&str>) -> Framer {
        self.user_key = key.map(|k| k.split('.').map(str::to_string).collect());
        self
    }

    /// Whether no partial record is held: the next line frames the same whatever came before
    /// (see [`crate::pipeline::parallel`]).
    pub fn is_idle(&self) -> bool {
        self.partials.iter().all(|p| !p.open) && !self.export.is_open()
    }

    /// Takes `n` NUL bytes skipped before the next line when a journal export entry's binary
    /// value is being read (see [`super::journal_lines::Export::nuls`]); `false` otherwise.
    pub fn nuls(&mut self, n: usize) -> bool {
        self.export.nuls(n)
    }

    /// A line the line reader skipped as too long (counted there): a journal export entry it
    /// fell in cannot be read whole.
    pub fn oversized(&mut self) {
        self.export.oversized();
    }

    /// Journal export entries cut short by a line that is no field (read as a line of its
    /// own) since the last call: to count as incomplete.
    pub fn take_cut(&mut self) -> u64 {
        self.export.take_cut()
    }

    /// Whether `line` needs [`Framer::frame`]: it may start a wrapper (`{`, a digit, `_` of a
    /// journal export entry's first field), or a journal export entry is being read.
    pub fn wants(&self, line: &[u8]) -> bool {
        matches!(line.first(), Some(b'{' | b'_' | b'0'..=b'9')) || self.export.is_open()
    }

    /// Unwraps one line.
    ///
    /// A `\r` at the end is left for [`crate::parse::clean`] (a CRLF ending): it may belong to
    /// a CRI `P` piece, where it is the middle of the joined line, not its end. JSON allows it
    /// as trailing whitespace.
    pub fn frame<'a>(&'a mut self, line: &'a [u8]) -> Framed<'a> {
        if self.export.is_open() || line.first() == Some(&b'_') {
            use super::journal_lines::{Broken, Step};
            match self.export.feed(line) {
                Step::NotExport => {}
                Step::Held => return Framed::Pending,
                Step::Broken(Broken::Cut) => return Framed::BrokenEntry,
                Step::Broken(Broken::Oversized) => return Framed::Oversized,
                Step::Broken(Broken::Counted) => return Framed::Pending,
                Step::Ended => {
                    let super::journal_lines::Entry {
                        message,
                        writer,
                        realtime,
                    } = self.export.take();
                    let Some(mut msg) = message else {
                        return Framed::NoMessage;
                    };
                    if msg.last() == Some(&b'\n') {
                        msg.pop();
                    }
                    self.out = msg;
                    writer.writer(&mut self.writer);
                    self.export.recycle(writer);
                    return Framed::Message(Message::journal(&self.out, &self.writer, realtime));
                }
            }
        }
        if is_request_event(line) {
            return Framed::Plain(line);
        }
        if line.first() == Some(&b'{') {
            // Only the keys read are kept (a hostile line of thousands of keys builds nothing).
            let user = self.user_key.as_deref().and_then(|k| k.first());
            let wanted = |k: &str| read_key(k) || user.is_some_and(|u| u == k);
            return match Record::parse(line, &wanted) {
                Ok(obj) => self.envelope(obj),
                Err(_) if looks_cut(line) => Framed::CutJson,
                Err(_) => Framed::Plain(line),
            };
        }
        if let Some((t, stream, partial, text)) = cri(line) {
            let t = rfc3339(t);
            return self.piece(stream, text, t, partial);
        }
        Framed::Plain(line)
    }

    /// The message of a JSON object line.
    fn envelope(&mut self, obj: Record<'_>) -> Framed<'_> {
        let user = self.user_key.as_deref();
        let found = user
            .and_then(|k| lookup(&obj, k.iter().map(String::as_str)).map(|v| (v, "")))
            .or_else(|| {
                MESSAGE_KEYS
                    .iter()
                    .find_map(|k| lookup(&obj, k.split('.')).map(|v| (v, *k)))
            });
        let Some((msg, key)) = found else {
            return Framed::NoMessage;
        };
        let realtime = obj
            .get("__REALTIME_TIMESTAMP")
            .and_then(Val::as_str)
            // journald writes an unsigned count of µs: `nan`, `inf` or `1e400` are no time.
            .and_then(|s| s.parse::<u64>().ok())
            .map(|us| us as f64 / 1e6)
            .or_else(|| {
                TIME_KEYS
                    .iter()
                    .find_map(|k| obj.get(k).and_then(time_value))
            });
        // A journal record (`journalctl -o json`, or a shipper's copy of one) names its writer
        // by the journal's rule; another record by its shipper's keys.
        self.origin.clear();
        let journal = key == "MESSAGE" || obj.contains_key("__CURSOR");
        if journal {
            self.fields.clear();
            let mut buf = Vec::new();
            for (f, name) in writer::FIELDS {
                buf.clear();
                // A field with several values is an array: its first value counts.
                if obj.get(name).is_some_and(|v| message_bytes(v, &mut buf)) {
                    self.fields.set(f, &buf);
                }
            }
            self.fields.writer(&mut self.writer);
        } else if !record_origin(&obj, &mut self.origin) {
            return Framed::CutJson;
        }
        // Docker json-file: `log` pieces of one line, the last ending with `\n`.
        if let (Some(stream), "log") = (obj.get("stream").and_then(Val::as_str), key) {
            if let Val::Str(log) = msg {
                let partial = !log.ends_with('\n');
                return self.piece(stream_index(stream), log.as_bytes(), realtime, partial);
            }
        }
        self.out.clear();
        if !message_bytes(msg, &mut self.out) {
            return match msg {
                Val::Null if key == "MESSAGE" => Framed::NullMessage,
                _ => Framed::NoMessage,
            };
        }
        if self.out.last() == Some(&b'\n') {
            self.out.pop();
        }
        if journal {
            return Framed::Message(Message::journal(&self.out, &self.writer, realtime));
        }
        Framed::Message(Message {
            realtime,
            origin: (!self.origin.is_empty()).then_some(self.origin.as_str()),
            ..Message::plain(&self.out)
        })
    }

    /// Joins one piece of a container record of `stream` (0 stdout, 1 stderr).
    fn piece(&mut self, stream: usize, text: &[u8], t: Option<f64>, partial: bool) -> Framed<'_> {
        let p = &mut self.partials[stream];
        let text = text.strip_suffix(b"\n").unwrap_or(text);
        if !p.open {
            p.open = true;
            p.time = t;
        }
        if p.buf.len() + text.len() > self.max_line {
            p.overflow = true;
            p.buf.clear();
        } else if !p.overflow {
            p.buf.extend_from_slice(text);
        }
        if partial {
            return Framed::Pending;
        }
        let p = std::mem::take(p);
        if p.overflow {
            return Framed::Oversized;
        }
        self.out = p.buf;
        Framed::Message(Message {
            realtime: p.time,
            // A record's pieces share their writer: the last one's names it.
            origin: (!self.origin.is_empty()).then_some(self.origin.as_str()),
            ..Message::plain(&self.out)
        })
    }

    /// Drops the records whose last piece never came (the input ended, or was rotated or
    /// truncated) and returns how many there were.
    pub fn drop_pending(&mut self) -> u64 {
        let open = self.partials.iter().filter(|p| p.open).count();
        self.partials = Default::default();
        open as u64 + u64::from(self.export.drop_open()) + self.export.take_cut()
    }
}

/// Whether a line that failed to parse as JSON is a JSON record cut short: it opens with a
/// key (`{"`) and holds no raw `\r` but at its end (JSON escapes control characters, so a
/// `\r` inside means terminal fragments, of which the last is the line).
fn looks_cut(line: &[u8]) -> bool {
    let body = line.strip_suffix(b"\r").unwrap_or(line);
    line.starts_with(b"{\"") && memchr::memchr(b'\r', body).is_none()
}

/// The partial-record slot of a container stream: stderr apart from stdout (and anything else).
fn stream_index(stream: &str) -> usize {
    usize::from(stream == "stderr")
}

/// Whether `line` starts as SGLang's JSON request record does (`log_json` in
/// `sglang/srt/utils/log_utils.py`, `json.dumps` with default separators, `timestamp` first):
/// `{"timestamp": "<ISO time>", "event": "request.`.
pub fn is_request_event(line: &[u8]) -> bool {
    const HEAD: &[u8] = b"{\"timestamp\": \"";
    const EVENT: &[u8] = b"\", \"event\": \"request.";
    let Some(rest) = line.strip_prefix(HEAD) else {
        return false;
    };
    // An ISO time is 19 to 32 characters; look no further.
    let window = &rest[..rest.len().min(40)];
    memchr::memchr(b'"', window).is_some_and(|q| rest[q..].starts_with(EVENT))
}

/// Whether the framer reads top-level key `k` of a JSON record (a message, time, writer or
/// origin key): only those are kept when it is parsed.
fn read_key(k: &str) -> bool {
    MESSAGE_KEYS.iter().any(|m| m.split('.').next() == Some(k))
        || TIME_KEYS.contains(&k)
        || writer::FIELDS.iter().any(|(_, n)| *n == k)
        || matches!(
            k,
            "__REALTIME_TIMESTAMP"
                | "__CURSOR"
                | "stream"
                | "labels"
                | "kubernetes"
                | "container_name"
        )
}

/// The value at a (dotted) key path of a JSON object.
fn lookup<'v, 'a, 'k>(
    obj: &'v Record<'a>,
    mut path: impl Iterator<Item = &'k str>,
) -> Option<&'v Val<'a>> {
    let mut v = obj.get(path.next()?)?;
    for k in path {
        v = v.get(k)?;
    }
    Some(v)
}

/// The keys of a JSON record that name who wrote its line, when one stream carries several:
/// Loki's `logcli --output jsonl` (`labels`, an object: written `{k="v", …}` as `logcli`'s
/// default output prints it), Fluent Bit's and Vector's Kubernetes metadata
/// (`kubernetes.pod_name` and `kubernetes.container_name`: written `pod/NAME/CONTAINER`, as
/// `kubectl logs --prefix` prints it), Docker's logging drivers (`container_name`; Docker's
/// leading `/` dropped). A journal record (its message under `MESSAGE`) is named by the
/// journal's rule instead ([`writer`]: its `CONTAINER_NAME`, unit, host…).
pub const ORIGIN_KEYS: &[&str] = &["labels", "kubernetes.pod_name", "container_name"];

/// Writes the origin of `obj` (see [`ORIGIN_KEYS`]) into `out`; nothing when it names none.
/// `false` for labels of a value that is no scalar (an object, an array): not a label set
/// (Loki's values are strings), and writing it in part could merge two writers.
fn record_origin(obj: &Record<'_>, out: &mut String) -> bool {
    use std::fmt::Write;
    if let Some(Val::Obj(labels)) = obj.get("labels") {
        out.push('{');
        // The output stream is not the writer: one container writes both.
        for (i, (k, v)) in labels.iter().filter(|(k, _)| *k != "stream").enumerate() {
            if !matches!(v, Val::Str(_) | Val::Num(_) | Val::Bool(_) | Val::Null) {
                return false;
            }
            let v = v.to_string();
            let sep = if i == 0 { "" } else { ", " };
            let _ = write!(out, "{sep}{k}={v:?}");
        }
        out.push('}');
        if out == "{}" {
            out.clear();
        }
        return true;
    }
    if matches!(obj.get("labels"), Some(Val::Other)) {
        return false;
    }
    if let Some(k8s @ Val::Obj(_)) = obj.get("kubernetes") {
        if let Some(pod) = k8s.get("pod_name").and_then(Val::as_str) {
            let container = k8s.get("container_name").and_then(Val::as_str);
            let _ = write!(out, "pod/{pod}/{}", container.unwrap_or(""));
            if container.is_none() {
                out.pop();
            }
            return true;
        }
    }
    if let Some(n) = obj.get("container_name").and_then(Val::as_str) {
        out.push_str(n.strip_prefix('/').unwrap_or(n));
    }
    true
}

/// Appends the bytes of a message value: a string, or journald's array of bytes; for a field
/// with several values (an array of strings or byte arrays) its first value. `false` when the
/// value is no message (null, a number, an object).
fn message_bytes(v: &Val<'_>, out: &mut Vec<u8>) -> bool {
    match v {
        Val::Str(s) => {
            out.extend_from_slice(s.as_bytes());
            true
        }
        Val::Bytes(b) => {
            out.extend_from_slice(b);
            true
        }
        Val::First(f) => message_bytes(f, out),
        _ => false,
    }
}

/// A wrapper's time: RFC 3339 text, or a Unix time in seconds, ms, µs or ns (by magnitude).
fn time_value(v: &Val<'_>) -> Option<f64> {
    let n = match v {
        Val::Str(s) => {
            return rfc3339(s).or_else(|| {
                s.parse::<f64>()
                    .ok()
                    .and_then(crate::parse::stream::unix_of_number)
            })
        }
        Val::Num(n) => *n,
        _ => return None,
    };
    crate::parse::stream::unix_of_number(n)
}

/// Splits a CRI log record: `(time, stream index, is_partial, text)`.
fn cri(line: &[u8]) -> Option<(&str, usize, bool, &[u8])> {
    if line.len() < 25
        || !line[..4].iter().all(u8::is_ascii_digit)
        || line[4] != b'-'
        || line[10] != b'T'
    {
        return None;
    }
    let sp = memchr::memchr(b' ', line)?;
    let rest = &line[sp + 1..];
    let (stream, rest) = if let Some(r) = rest.strip_prefix(b"stdout ") {
        (0, r)
    } else {
        (1, rest.strip_prefix(b"stderr ")?)
    };
    let (partial, text) = if let Some(t) = rest.strip_prefix(b"P ") {
        (true, t)
    } else if let Some(t) = rest.strip_prefix(b"F ") {
        (false, t)
    } else {
        return None;
    };
    Some((
        std::str::from_utf8(&line[..sp]).ok()?,
        stream,
        partial,
        text,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(f: &mut Framer, l: &[u8]) -> (String, Option<String>, Option<f64>) {
        match f.frame(l) {
            Framed::Message(Message {
                text,
                unit,
                realtime,
                ..
            }) => (
                String::from_utf8_lossy(text).into_owned(),
                unit.map(str::to_string),
                realtime,
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn journald_json_string_bytes_null_and_multi_valued() {
        let mut f = Framer::new(1 << 20);
        let l = br#"{"MESSAGE":"[2026-06-03 10:07:50 DP0 TP0] hi","_SYSTEMD_UNIT":"sglang-decode.service","__REALTIME_TIMESTAMP":"1780481270000000"}"#;
        assert_eq!(
            msg(&mut f, l),
            (
                "[2026-06-03 10:07:50 DP0 TP0] hi".into(),
                Some("sglang-decode".into()),
                Some(1780481270.0)
            )
        );
        let l = br#"{"MESSAGE":[104,255,105],"__REALTIME_TIMESTAMP":"1"}"#;
        assert!(matches!(f.frame(l), Framed::Message(Message { text, .. }) if text == b"h\xffi"));
        assert_eq!(f.frame(br#"{"MESSAGE":null}"#), Framed::NullMessage);
        // Several values of one field: the first counts.
        let l = br#"{"MESSAGE":["a",[98]],"_SYSTEMD_UNIT":["u1.service","u2.service"]}"#;
        assert_eq!(msg(&mut f, l), ("a".into(), Some("u1".into()), None));
    }

    #[test]
    fn envelopes_of_runners_and_shippers() {
        let mut f = Framer::new(1 << 20);
        // A JSON-lines runner: escaped quotes decoded, no wrapper time.
        let l = br#"{"logger": "sglang", "message": "[2025-12-16 19:45:11] INFO:     127.0.0.1:5 - \"POST /generate HTTP/1.1\" 200 OK"}"#;
        assert_eq!(
            msg(&mut f, l).0,
            r#"[2025-12-16 19:45:11] INFO:     127.0.0.1:5 - "POST /generate HTTP/1.1" 200 OK"#
        );
        // Its own records carry no message.
        assert_eq!(f.frame(br#"{"logger": "x", "step": 1}"#), Framed::NoMessage);
        assert_eq!(f.frame(br#"{"message": {"nested": 1}}"#), Framed::NoMessage);
        // A cloud export: textPayload, RFC 3339 timestamp.
        let l = br#"{"textPayload":"Decode batch, #running-req: 1","timestamp":"2026-06-03T10:00:00.5Z"}"#;
        assert_eq!(
            msg(&mut f, l),
            (
                "Decode batch, #running-req: 1".into(),
                None,
                Some(1780480800.5)
            )
        );
        // Nested jsonPayload.message; Vector's message with @timestamp; Loki's line with ns ts.
        let l = br#"{"jsonPayload":{"message":"x1"},"severity":"INFO"}"#;
        assert_eq!(msg(&mut f, l).0, "x1");
        let l = br#"{"message":"x2","@timestamp":"2026-06-03T10:00:01Z"}"#;
        assert_eq!(msg(&mut f, l).2, Some(1780480801.0));
        let l = br#"{"line":"x3","ts":"1780480802000000000"}"#;
        assert_eq!(msg(&mut f, l).2, Some(1780480802.0));
        let l = br#"{"msg":"x4","ts":1780480803.25}"#;
        assert_eq!(msg(&mut f, l).2, Some(1780480803.25));
        // Fluent Bit: `log` without `stream` is a whole line.
        let l = br#"{"log":"x5\n","date":1}"#;
        assert_eq!(msg(&mut f, l).0, "x5");
        // A user key, nested.
        let mut u = Framer::new(1 << 20).with_message_key(Some("payload.text"));
        let l = br#"{"payload":{"text":"x6"},"message":"not this"}"#;
        assert_eq!(msg(&mut u, l).0, "x6");
        // Not JSON after all.
        assert_eq!(f.frame(b"{not json"), Framed::Plain(b"{not json"));
        // A record cut short is not read as text; terminal fragments before a line are.
        assert_eq!(f.frame(br#"{"log":"[x] #token: 80"#), Framed::CutJson);
        assert_eq!(
            f.frame(b"{\"log\r[x] line"),
            Framed::Plain(b"{\"log\r[x] line")
        );
    }

    /// A hostile JSON line (the kind of repro 23): thousands of keys beside the message cost a
    /// pass, not a map of them; the line is read exactly, as it is with a value nested
    /// thousands deep under a key not read (skipped without recursion). One nested past
    /// serde_json's limit under a key read is not read, never taken for text, and counted (as
    /// an incomplete record).
    #[test]
    fn hostile_json_lines_are_read_exactly_or_refused() {
        let mut f = Framer::new(1 << 24);
        let keys: Vec<String> = (0..20_000)
            .map(|i| format!("\"k{i}\":{{\"a\":[0]}}"))
            .collect();
        let l = format!(
            "{{{},\"log\":\"[2026-06-03 10:00:00 TP0] x\\n\",\"time\":\"2026-06-03T10:00:00.5Z\"}}",
            keys.join(",")
        );
        assert_eq!(
            msg(&mut f, l.as_bytes()),
            (
                "[2026-06-03 10:00:00 TP0] x".into(),
                None,
                Some(1780480800.5)
            )
        );
        let deep = format!(
            "{{\"log\":\"x\",\"a\":{}1{}}}",
            "[".repeat(5000),
            "]".repeat(5000)
        );
        assert_eq!(msg(&mut f, deep.as_bytes()).0, "x");
        // Deep under a key read (Loki's labels): no label set, not read.
        let deep = format!(
            "{{\"log\":\"x\",\"labels\":{}1{}}}",
            "{\"a\":".repeat(200),
            "}".repeat(200)
        );
        assert_eq!(f.frame(deep.as_bytes()), Framed::CutJson);
        // Nested within the bound: read.
        let ok = format!(
            "{{\"log\":\"y\",\"a\":{}1{}}}",
            "[".repeat(100),
            "]".repeat(100)
        );
        assert_eq!(msg(&mut f, ok.as_bytes()).0, "y");
    }

    #[test]
    fn sglang_request_events_pass_through() {
        let mut f = Framer::new(1 << 20);
        let l = br#"{"timestamp": "2026-04-20T09:30:00.595406", "event": "request.finished", "rid": "x", "out": {}}"#;
        assert_eq!(f.frame(l), Framed::Plain(&l[..]));
        let l =
            br#"{"timestamp": "2026-04-20T09:30:00.4124", "event": "request.received", "obj": {}}"#;
        assert_eq!(f.frame(l), Framed::Plain(&l[..]));
        // A shipper's record with a timestamp and a message is still unwrapped.
        let l = br#"{"timestamp": "2026-06-03T10:00:01Z", "message": "x7"}"#;
        assert_eq!(msg(&mut f, l).0, "x7");
        let l = br#"{"timestamp": "2026-06-03T10:00:01Z", "event": "other"}"#;
        assert_eq!(f.frame(l), Framed::NoMessage);
    }

    #[test]
    fn docker_and_cri_partials_join() {
        let mut f = Framer::new(1 << 20);
        assert_eq!(
            f.frame(br#"{"log":"abc","stream":"stderr","time":"2026-06-03T10:00:00.5Z"}"#),
            Framed::Pending
        );
        let l = br#"{"log":"def\n","stream":"stderr","time":"2026-06-03T10:00:01Z"}"#;
        assert_eq!(msg(&mut f, l), ("abcdef".into(), None, Some(1780480800.5)));
        assert_eq!(
            f.frame(b"2026-06-03T10:00:00.123456789Z stderr P [2026-06-03 10:00:00] Dec"),
            Framed::Pending
        );
        let l = b"2026-06-03T10:00:00.2Z stderr F ode batch";
        assert_eq!(msg(&mut f, l).0, "[2026-06-03 10:00:00] Decode batch");
        assert_eq!(f.frame(b"plain line"), Framed::Plain(b"plain line"));
    }

    #[test]
    fn an_over_long_record_is_skipped_whole() {
        let mut f = Framer::new(30);
        let p = b"2026-06-03T10:00:00.1Z stdout P #queue-req: 123";
        assert_eq!(f.frame(p), Framed::Pending);
        assert_eq!(
            f.frame(b"2026-06-03T10:00:00.1Z stdout P 45678901234567890"),
            Framed::Pending
        );
        assert_eq!(
            f.frame(b"2026-06-03T10:00:00.1Z stdout F 9"),
            Framed::Oversized
        );
        // The next record starts afresh.
        assert_eq!(msg(&mut f, b"2026-06-03T10:00:00.1Z stdout F ok").0, "ok");
    }
}
