//! The exporter's own log lines as log pipelines read them (`--log.format logfmt|json`), in the
//! keys Prometheus exporters use: `ts` (RFC 3339, UTC), `level` (lower case), `msg`, then the
//! event's fields. One event, one line. A formatter of ours because tracing-subscriber's JSON
//! and tracing-logfmt both name the message `message` and cannot rename it.

use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// `logfmt` or `json` lines (see the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// `ts=… level=info msg="…" key=value`.
    Logfmt,
    /// `{"ts":"…","level":"info","msg":"…","key":value}`.
    Json,
}

/// Whether `c` must not reach a terminal or a text log as it is: C0 controls (ESC, BEL, a
/// newline), DEL and C1 controls (U+009B is an 8-bit CSI), the bidi controls that reorder the
/// text after them (U+061C, U+200E/F, U+202A–U+202E, U+2066–U+2069) and the zero-width
/// characters that make two names look one (U+200B–U+200D, U+2060, U+FEFF).
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// `s` safe for a terminal and a text log: every character of [`is_unsafe`] written escaped,
/// ESC as `\e`, other ASCII controls as `\x07`, the rest as `\u{9b}` (as Rust writes them), so
/// a name taken from the input (a file name, a pod or model name) cannot set the window
/// title, colours or the clipboard, move the cursor, start a forged log line or reorder what
/// follows it. Used by every writer of text for a terminal (`--once`'s summary, `top`, `check`)
/// and by the text log format ([`TextFields`]).
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\u{1b}' => out.push_str("\\e"),
            c if is_unsafe(c) && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_unsafe(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The fields of the text log format (`--log.format text`) as tracing-subscriber's default
/// writes them (the message, then ` key=value`), each escaped with [`escape_controls`]: a value
/// logged with `%` (a path holding a newline or ESC) otherwise reached the log raw, ending the
/// exporter's line and starting a forged one.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextFields;

impl<'w> FormatFields<'w> for TextFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut w: Writer<'w>,
        fields: R,
    ) -> fmt::Result {
        let mut v = TextVisitor {
            w: &mut w,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut v);
        v.result
    }
}

struct TextVisitor<'a, 'w> {
    w: &'a mut Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl Visit for TextVisitor<'_, '_> {
    fn record_str(&mut self, f: &Field, v: &str) {
        self.record_debug(f, &v)
    }

    fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        let text = format!("{v:?}");
        let sep = if self.first { "" } else { " " };
        self.first = false;
        self.result = match f.name() {
            "message" => write!(self.w, "{sep}{}", escape_controls(&text)),
            n => write!(self.w, "{sep}{n}={}", escape_controls(&text)),
        };
    }
}

/// A field's value, typed so JSON keeps numbers and booleans.
enum Value {
    Text(String),
    Number(serde_json::Number),
    Bool(bool),
}

#[derive(Default)]
struct Fields(Vec<(&'static str, Value)>);

impl Fields {
    fn put(&mut self, f: &Field, v: Value) {
        let name = match f.name() {
            "message" => "msg",
            n => n,
        };
        self.0.push((name, v));
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
        self.put(f, Value::Text(format!("{v:?}")));
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        self.put(f, Value::Text(v.to_string()));
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.put(f, Value::Number(v.into()));
    }
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.put(f, Value::Number(v.into()));
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        match serde_json::Number::from_f64(v) {
            Some(n) => self.put(f, Value::Number(n)),
            None => self.put(f, Value::Text(v.to_string())),
        }
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.put(f, Value::Bool(v));
    }
}

/// A logfmt value: bare where it holds no space, quote, `=` or control character, else quoted
/// with `\"`, `\\` and `\n`-style escapes.
fn logfmt_value(out: &mut String, v: &str) {
    let bare = !v.is_empty()
        && !v
            .chars()
            .any(|c| c == ' ' || c == '"' || c == '=' || c == '\\' || c.is_control());
    if bare {
        out.push_str(v);
        return;
    }
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

impl Lines {
    /// One line for an event at `level` with `fields`, stamped `ts`.
    fn render(self, ts: &str, level: &str, fields: Fields) -> String {
        match self {
            Lines::Json => {
                // Written in order (ts, level, msg, fields), each key and value JSON-escaped.
                let text = |v: &str| serde_json::Value::from(v).to_string();
                let mut out = format!("{{\"ts\":{},\"level\":{}", text(ts), text(level));
                for (k, v) in fields.0 {
                    let _ = write!(out, ",{}:", text(k));
                    match v {
                        Value::Text(s) => out.push_str(&text(&s)),
                        Value::Number(n) => out.push_str(&n.to_string()),
                        Value::Bool(b) => out.push_str(if b { "true" } else { "false" }),
                    }
                }
                out.push('}');
                out
            }
            Lines::Logfmt => {
                let mut out = format!("ts={ts} level={level}");
                for (k, v) in fields.0 {
                    out.push(' ');
                    out.push_str(k);
                    out.push('=');
                    match v {
                        Value::Text(s) => logfmt_value(&mut out, &s),
                        Value::Number(n) => out.push_str(&n.to_string()),
                        Value::Bool(b) => out.push_str(if b { "true" } else { "false" }),
                    }
                }
                out
            }
        }
    }
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        // Always six decimals, so the width never varies.
        let ts = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ");
        let level = event.metadata().level().as_str().to_ascii_lowercase();
        writeln!(w, "{}", self.render(&ts.to_string(), &level, fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(v: Vec<(&'static str, Value)>) -> Fields {
        Fields(v)
    }

    #[test]
    fn lines_carry_ts_level_msg_and_typed_fields() {
        let f = || {
            fields(vec![
                ("msg", Value::Text("serving metrics".into())),
                ("address", Value::Text("[::]:8771".into())),
                ("n", Value::Number(3.into())),
                ("ok", Value::Bool(true)),
                ("why", Value::Text("a \"b\"\nc=d".into())),
            ])
        };
        let ts = "2026-12-01T21:00:00.000001Z";
        assert_eq!(
            Lines::Logfmt.render(ts, "info", f()),
            "ts=2026-12-01T21:00:00.000001Z level=info msg=\"serving metrics\" address=[::]:8771 n=3 ok=true why=\"a \\\"b\\\"\\nc=d\""
        );
        let line = Lines::Json.render(ts, "warn", f());
        assert!(
            line.starts_with(
                r#"{"ts":"2026-12-01T21:00:00.000001Z","level":"warn","msg":"serving metrics","#
            ),
            "{line}"
        );
        let j: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            j,
            serde_json::json!({"ts": ts, "level": "warn", "msg": "serving metrics",
                "address": "[::]:8771", "n": 3, "ok": true, "why": "a \"b\"\nc=d"})
        );
        let mut s = String::new();
        logfmt_value(&mut s, "");
        assert_eq!(s, "\"\"");
    }

    /// Repros 27, 28: controls, bidi and zero-width characters are written escaped.
    #[test]
    fn unsafe_characters_are_written_escaped() {
        assert_eq!(
            escape_controls("\u{1b}]0;PWNED\u{7}\u{1b}[31mred\nx\u{9b}2J\u{7f}"),
            "\\e]0;PWNED\\x07\\e[31mred\\x0ax\\u{9b}2J\\x7f"
        );
        assert_eq!(
            escape_controls("prod\u{202e}A-model zero\u{200b}width"),
            "prod\\u{202e}A-model zero\\u{200b}width"
        );
        assert!(matches!(
            escape_controls("décode-7 [pod/x]"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    /// Repro 28: a path holding a newline and ESC logged with `%` stays on the event's line.
    #[test]
    fn the_text_format_writes_one_line_per_event() {
        use std::sync::{Arc, Mutex};
        #[derive(Clone, Default)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf::default();
        let out = buf.clone();
        let sub = tracing_subscriber::fmt()
            .with_writer(move || out.clone())
            .with_ansi(false)
            .without_time()
            .with_target(false)
            .fmt_fields(TextFields)
            .finish();
        let path = "x\n2026-12-02T21:00:00.000000Z ERROR forged: lost\u{1b}[2K.log";
        tracing::subscriber::with_default(sub, || {
            tracing::warn!(path = %path, n = 3, "cannot read the file {}", "a\nb");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            " WARN cannot read the file a\\x0ab path=x\\x0a2026-12-02T21:00:00.000000Z ERROR forged: lost\\e[2K.log n=3\n"
        );
    }
}
