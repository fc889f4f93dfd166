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
}
