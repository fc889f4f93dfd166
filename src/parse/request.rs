//! SGLang's per-request log records (`--log-requests`), read for their numbers only.
//!
//! The tokenizer manager writes one record when a request arrives and one when it finishes
//! (`docs/request-log-formats.md`). The line kinds are data (`class: request` in
//! `patterns/sglang.yaml`); this module reads the record that starts where the kind's `fields`
//! group starts:
//!
//! * text, the Python repr of the request and its output (§3-§4 of the doc):
//!   `GenerateReqInput(...)[, headers={...}], out={... 'meta_info': {...}}` after `Finish: obj=`
//!   (v0.4.1+, `RequestLogger.log_finished_request` in `sglang/srt/utils/request_logger.py` from
//!   v0.5.7, `TokenizerManager` in `sglang/srt/managers/tokenizer_manager.py` before), the same
//!   without `out` after `Receive: obj=`, and `in=GenerateReqInput(...), out={...}`
//!   (v0.2.14-v0.4.0.post2), `in={'text': ...}, out={...}` (v0.2.11-v0.2.13) or `in=<raw prompt>,
//!   out={...}` (v0.1.15-v0.2.10, `tokenizer_manager.py`);
//! * JSON (`--log-requests-format json`, v0.5.7+, `log_json` in `sglang/srt/utils/log_utils.py`):
//!   `{"timestamp": ..., "event": "request.finished", "rid": ..., "obj": {...}, "headers": {...},
//!   "out": {...}}`.
//!
//! A record can be megabytes (`--log-requests-level 3` prints the prompt and the output in
//! full), and its text is user data that may contain `'meta_info': {`, `, out={` or
//! `'e2e_latency': 0.5`. So it is read with a small lexer in one pass, never building the
//! objects: quoted strings are skipped whole (backslash escapes honoured, `memchr`), brackets are
//! balanced, SGLang's truncation marker (`'head' ... 'tail'`, `[..] ... [..]`) and non-literals
//! (`HTTPStatus.BAD_REQUEST`) are skipped as part of the value they belong to. Only the keys the
//! metrics need are looked at: `obj`'s `stream`, `log_metrics` and `sampling_params` (its
//! structured-output keys), and the numbers of `out['meta_info']`. Nothing of the request's
//! content (id, text, headers) is kept. Time and memory are linear in the line, with no
//! allocation.

use crate::record::LogTime;
pub use crate::record::{FinishKind, MetaInfo, RequestRecord};

/// The record's structure is broken where it had to be read (an unterminated string, an
/// unbalanced bracket, a missing `:` or `=`, text after `out`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

type Read<T> = Result<T, Unreadable>;

/// `out={` occurrences tried for an old record whose raw prompt precedes `out` (v0.1.15-v0.2.10).
const RAW_TRIES: usize = 8;

/// The structured-output keys of `sampling_params` (`sglang:num_so_requests_total`).
const SO_KEYS: [&[u8]; 4] = [b"json_schema", b"regex", b"ebnf", b"structural_tag"];

/// Reads the request record `text` (from the start of the request object, or the JSON record's
/// `{`) into `out`, which is reset first.
///
/// # Errors
/// [`Unreadable`] when the structure is broken; `out` then holds what was read before.
pub fn read(text: &str, out: &mut RequestRecord) -> Result<(), Unreadable> {
    *out = RequestRecord::default();
    let s = text.as_bytes();
    // Python's repr quotes dict keys with `'`, json.dumps with `"`.
    if s.starts_with(b"{\"") {
        return read_json(&mut Lex { s, i: 0 }, out);
    }
    match read_text(&mut Lex { s, i: 0 }, out) {
        Ok(()) => Ok(()),
        Err(e) => read_raw_prompt(s, out).map_err(|_| e),
    }
}

/// A Python or JSON value the walkers read; strings are raw bodies (escapes not undone).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scalar<'a> {
    Str(&'a [u8]),
    Num(f64),
    Null,
    Bool(bool),
    /// A container or a non-literal (`HTTPStatus.BAD_REQUEST`), and whether it is truthy.
    Other(bool),
}

impl Scalar<'_> {
    /// Python's truthiness (which JSON values share).
    fn truthy(self) -> bool {
        match self {
            Scalar::Str(s) => !s.is_empty(),
            Scalar::Num(v) => v != 0.0,
            Scalar::Null => false,
            Scalar::Bool(b) | Scalar::Other(b) => b,
        }
    }

    fn number(self) -> Option<f64> {
        match self {
            Scalar::Num(v) if v.is_finite() => Some(v),
            _ => None,
        }
    }
}

/// A cursor over the record. Every loop advances the cursor or fails, and nothing is scanned
/// twice (but by the bounded retries of [`read_raw_prompt`]), so a walk is linear in the text.
struct Lex<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Lex<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, lit: &[u8]) -> bool {
        let hit = self.s[self.i..].starts_with(lit);
        if hit {
            self.i += lit.len();
        }
        hit
    }

    fn spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: u8) -> Read<()> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(Unreadable)
        }
    }

    /// At an opening quote (`'` or `"`): the string's raw body; the cursor ends after the
    /// closing quote. A backslash escapes the next byte (Python's repr and JSON alike).
    fn string(&mut self) -> Read<&'a [u8]> {
        let q = self.s[self.i];
        let start = self.i + 1;
        let mut j = start;
        loop {
            let p =
                memchr::memchr2(q, b'\\', self.s.get(j..).ok_or(Unreadable)?).ok_or(Unreadable)?;
            j += p;
            if self.s[j] == b'\\' {
                j += 2;
                continue;
            }
            self.i = j + 1;
            return Ok(&self.s[start..j]);
        }
    }

    /// Skips the rest of a value: up to the `,` or closing bracket that ends it at this depth
    /// (or the end of the text). Strings are skipped whole and brackets balanced, so a
    /// truncation tail (`'a' ... 'b'`) or a non-literal belongs to the value it follows.
    fn skip_value(&mut self) -> Read<()> {
        let mut depth = 0u32;
        while let Some(c) = self.peek() {
            match c {
                b'\'' | b'"' => {
                    self.string()?;
                    continue;
                }
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' if depth == 0 => return Ok(()),
                b')' | b']' | b'}' => depth -= 1,
                b',' if depth == 0 => return Ok(()),
                _ => {}
            }
            self.i += 1;
        }
        if depth == 0 {
            Ok(())
        } else {
            Err(Unreadable)
        }
    }

    /// Reads a whole value as a [`Scalar`].
    fn scalar(&mut self) -> Read<Scalar<'a>> {
        let start = self.i;
        match self.peek().ok_or(Unreadable)? {
            b'\'' | b'"' => {
                let s = self.string()?;
                self.skip_value()?;
                Ok(Scalar::Str(s))
            }
            open @ (b'(' | b'[' | b'{') => {
                self.i += 1;
                self.spaces();
                let empty = matches!(
                    (open, self.peek()),
                    (b'(', Some(b')')) | (b'[', Some(b']')) | (b'{', Some(b'}'))
                );
                self.i = start;
                self.skip_value()?;
                Ok(Scalar::Other(!empty))
            }
            _ => {
                self.skip_value()?;
                let token = self.s[start..self.i].trim_ascii_end();
                Ok(match token {
                    b"None" | b"null" => Scalar::Null,
                    b"True" | b"true" => Scalar::Bool(true),
                    b"False" | b"false" => Scalar::Bool(false),
                    t => std::str::from_utf8(t)
                        .ok()
                        .and_then(|t| t.parse().ok())
                        .map_or(Scalar::Other(true), Scalar::Num),
                })
            }
        }
    }

    /// At `{`: calls `f` with each key (a quoted string's raw body) and the cursor at its
    /// value; skips what `f` leaves of the value. Ends after the `}`.
    fn dict(&mut self, mut f: impl FnMut(&mut Self, &'a [u8]) -> Read<()>) -> Read<()> {
        self.expect(b'{')?;
        self.spaces();
        if self.eat(b"}") {
            return Ok(());
        }
        loop {
            if !matches!(self.peek(), Some(b'\'' | b'"')) {
                return Err(Unreadable);
            }
            let key = self.string()?;
            self.spaces();
            self.expect(b':')?;
            self.spaces();
            f(self, key)?;
            if self.end_of_item(b'}')? {
                return Ok(());
            }
        }
    }

    /// At a dataclass repr `Name(key=value, ...)`: calls `f` with each field name and the cursor
    /// at its value, as [`Lex::dict`] does. Ends after the `)`.
    fn call(&mut self, mut f: impl FnMut(&mut Self, &'a [u8]) -> Read<()>) -> Read<()> {
        self.identifier()?;
        self.expect(b'(')?;
        if self.eat(b")") {
            return Ok(());
        }
        loop {
            self.spaces();
            let key = self.identifier()?;
            self.expect(b'=')?;
            f(self, key)?;
            if self.end_of_item(b')')? {
                return Ok(());
            }
        }
    }

    /// A Python identifier (dotted for a qualified class name).
    fn identifier(&mut self) -> Read<&'a [u8]> {
        let start = self.i;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
        {
            self.i += 1;
        }
        if self.i == start || self.s[start].is_ascii_digit() {
            return Err(Unreadable);
        }
        Ok(&self.s[start..self.i])
    }

    /// After an item's value: skips what is left of it, then a `,` (and spaces) or the
    /// closing `close`. Returns whether the container closed (its `close` consumed).
    fn end_of_item(&mut self, close: u8) -> Read<bool> {
        self.skip_value()?;
        self.spaces();
        match self.peek() {
            Some(b',') => {
                self.i += 1;
                self.spaces();
                Ok(false)
            }
            Some(c) if c == close => {
                self.i += 1;
                Ok(true)
            }
            _ => Err(Unreadable),
        }
    }

    /// Whether only spaces are left.
    fn at_end(&self) -> bool {
        self.s[self.i..].iter().all(|&c| c == b' ')
    }
}

/// The text form: the request object, optionally `, headers={...}`, then `, out={...}` to the
/// end of the line (absent on `Receive:` lines and on multimodal-generation servers).
fn read_text(lex: &mut Lex<'_>, rec: &mut RequestRecord) -> Read<()> {
    match lex.peek() {
        Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
            // A request dataclass always has `stream` (False unless given) from v0.2.14.
            rec.stream = Some(false);
            lex.call(|l, key| obj_field(l, key, rec))?;
        }
        // v0.2.11-v0.2.13: `in={'text': '...'}`, no `stream`.
        Some(b'{') => lex.skip_value()?,
        _ => return Err(Unreadable),
    }
    if lex.eat(b", headers=") {
        lex.skip_value()?;
    }
    if lex.at_end() {
        return Ok(());
    }
    if !lex.eat(b", out=") {
        return Err(Unreadable);
    }
    read_out(lex, rec)?;
    if lex.at_end() {
        Ok(())
    } else {
        Err(Unreadable)
    }
}

/// v0.1.15-v0.2.10 print the prompt raw (`in=<prompt>, out={...}`), so `out` is found as the
/// first `, out={` (of the first [`RAW_TRIES`]) from which a dict runs exactly to the end of
/// the line. The prompt is user text: a prompt that itself ends in such a dict would be read
/// instead; `stream` is unknown.
fn read_raw_prompt(s: &[u8], rec: &mut RequestRecord) -> Read<()> {
    for p in memchr::memmem::find_iter(s, b", out={").take(RAW_TRIES) {
        *rec = RequestRecord::default();
        let mut lex = Lex { s, i: p + 6 };
        if read_out(&mut lex, rec).is_ok() && lex.at_end() {
            return Ok(());
        }
    }
    *rec = RequestRecord::default();
    Err(Unreadable)
}

/// The JSON form: the record object; `obj` and `out` as in the text form.
fn read_json(lex: &mut Lex<'_>, rec: &mut RequestRecord) -> Read<()> {
    lex.dict(|l, key| {
        match key {
            b"timestamp" => {
                if let Scalar::Str(t) = l.scalar()? {
                    rec.timestamp = iso_local_time(t);
                }
            }
            b"event" => rec.finished = l.scalar()? == Scalar::Str(b"request.finished"),
            b"obj" if l.peek() == Some(b'{') => {
                rec.stream = Some(false);
                l.dict(|l, key| obj_field(l, key, rec))?;
            }
            b"out" if l.peek() == Some(b'{') => {
                let finished = rec.finished;
                read_out(l, rec)?;
                rec.finished = finished;
            }
            _ => {}
        }
        Ok(())
    })
}

/// One field of the request object (a dataclass field or a JSON key).
fn obj_field(lex: &mut Lex<'_>, key: &[u8], rec: &mut RequestRecord) -> Read<()> {
    match key {
        b"stream" => rec.stream = Some(lex.scalar()?.truthy()),
        b"log_metrics" => {
            if let Scalar::Bool(b) = lex.scalar()? {
                rec.log_metrics = Some(b);
            }
        }
        b"sampling_params" if lex.peek() == Some(b'{') => lex.dict(|l, k| {
            if SO_KEYS.contains(&k) && l.scalar()?.truthy() {
                rec.structured_output = true;
            }
            Ok(())
        })?,
        _ => {}
    }
    Ok(())
}

/// At `out`'s `{`: its `meta_info`; marks the record finished.
fn read_out(lex: &mut Lex<'_>, rec: &mut RequestRecord) -> Read<()> {
    rec.finished = true;
    lex.dict(|l, key| {
        if key == b"meta_info" && l.peek() == Some(b'{') {
            let mut m = MetaInfo::default();
            l.dict(|l, k| meta_field(l, k, &mut m))?;
            rec.meta = Some(m);
        }
        Ok(())
    })
}

/// One key of `meta_info`.
fn meta_field(lex: &mut Lex<'_>, key: &[u8], m: &mut MetaInfo) -> Read<()> {
    let slot = match key {
        b"prompt_tokens" => &mut m.prompt_tokens,
        b"completion_tokens" => &mut m.completion_tokens,
        b"cached_tokens" => &mut m.cached_tokens,
        b"e2e_latency" => &mut m.e2e_latency,
        b"first_token_latency" => &mut m.first_token_latency,
        b"decode_throughput" => &mut m.decode_throughput,
        b"queue_time" => &mut m.queue_time,
        b"forward_entry_time" => &mut m.forward_entry_time,
        b"prefill_finished_ts" => &mut m.prefill_finished_ts,
        b"request_received_ts" => &mut m.request_received_ts,
        b"spec_verify_ct" => &mut m.spec_verify_ct,
        b"finish_reason" => {
            m.finish = finish_kind(lex)?;
            return Ok(());
        }
        b"cached_tokens_details" => {
            m.cached_details = cache_details(lex)?;
            return Ok(());
        }
        b"num_retractions" => {
            m.num_retractions_key = true;
            return Ok(());
        }
        b"reasoning_tokens" => {
            m.reasoning_tokens_key = true;
            return Ok(());
        }
        _ => return Ok(()),
    };
    *slot = lex.scalar()?.number();
    Ok(())
}

/// `finish_reason`: a dict with `type` (v0.3.2+) or the text of a `FINISH_*` reason (earlier).
fn finish_kind(lex: &mut Lex<'_>) -> Read<FinishKind> {
    let kind = |t: &[u8]| match t {
        b"stop" => FinishKind::Stop,
        b"length" => FinishKind::Length,
        b"abort" => FinishKind::Abort,
        t if t.starts_with(b"FINISH_MATCHED") => FinishKind::Stop,
        t if t.starts_with(b"FINISH_LENGTH") => FinishKind::Length,
        t if t.starts_with(b"FINISH_ABORT") => FinishKind::Abort,
        _ => FinishKind::Other,
    };
    if lex.peek() != Some(b'{') {
        return Ok(match lex.scalar()? {
            Scalar::Str(t) => kind(t),
            _ => FinishKind::Other,
        });
    }
    let mut out = FinishKind::Other;
    lex.dict(|l, k| {
        if k == b"type" {
            if let Scalar::Str(t) = l.scalar()? {
                out = kind(t);
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// `cached_tokens_details`: `None`, or `{'device': N, 'host': N[, 'storage': N, ...]}`.
fn cache_details(lex: &mut Lex<'_>) -> Read<Option<[f64; 3]>> {
    if lex.peek() != Some(b'{') {
        return Ok(None);
    }
    let mut v = [0.0; 3];
    let mut any = false;
    lex.dict(|l, k| {
        any = true;
        let i = match k {
            b"device" => 0,
            b"host" => 1,
            b"storage" => 2,
            _ => return Ok(()),
        };
        v[i] = l.scalar()?.number().unwrap_or(0.0);
        Ok(())
    })?;
    Ok(any.then_some(v))
}

/// A JSON record's `timestamp` (`datetime.isoformat()` of local time: `2026-11-05T14:00:00.595406`).
fn iso_local_time(t: &[u8]) -> Option<LogTime> {
    let dt: jiff::civil::DateTime = std::str::from_utf8(t).ok()?.parse().ok()?;
    Some(LogTime {
        date: Some(dt.date()),
        month_day: None,
        time: dt.time(),
    })
}

#[cfg(test)]
mod tests;
