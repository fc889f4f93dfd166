//! A JSON object line as the framer reads it ([`super::framing`]): only the keys it looks at
//! are kept, every other value is skipped as it is parsed ([`IgnoredAny`]: nothing of it is
//! built), so a hostile line of thousands of keys costs a pass over its bytes, not a map of
//! them (a `serde_json::Map` holds ~90 bytes of heap per byte of such JSON; repro 23 is the
//! same kind on the API poller's answers).
//!
//! Bounds: values nest at most [`MAX_DEPTH`] deep under a kept key (deeper objects are
//! skipped whole, [`Val::Other`]; serde_json refuses an array nested past 128, which makes
//! the line unreadable, counted as an incomplete record); a nested object of more than
//! [`MAX_ENTRIES`] entries is skipped whole too, never kept in part;
//! of an array, its first element (a field with several values: the first counts), or all its
//! bytes when it is journald's array of byte values. Strings are borrowed from the line
//! unless they hold escapes.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// How deep objects are kept under a top-level key (`jsonPayload.message`, a user's dotted
/// `--input.json-message-key`): deeper values are skipped.
pub const MAX_DEPTH: u8 = 4;

/// Entries of a nested object kept (Loki's `labels`, `kubernetes`, `jsonPayload`): more than
/// any label set holds; an object of more is [`Val::Other`] (in part, it could name two
/// writers alike).
pub const MAX_ENTRIES: usize = 256;

/// A value of a kept key.
#[derive(Debug, Clone, PartialEq)]
pub enum Val<'a> {
    /// A string (borrowed from the line unless it held escapes).
    Str(Cow<'a, str>),
    /// A number.
    Num(f64),
    /// `true` or `false`.
    Bool(bool),
    /// `null`.
    Null,
    /// An array of byte values (journald's `MESSAGE` of non-UTF-8 data), each as `n as u8`.
    Bytes(Vec<u8>),
    /// Another array: its first element.
    First(Box<Val<'a>>),
    /// An object of at most [`MAX_ENTRIES`] entries (the last of a key given twice counts).
    Obj(Vec<(Cow<'a, str>, Val<'a>)>),
    /// Anything else (a mixed array, an object too deep): no value the framer reads.
    Other,
}

impl<'a> Val<'a> {
    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value at `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Val<'a>> {
        match self {
            Val::Obj(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
}

impl fmt::Display for Val<'_> {
    /// As JSON text would show a scalar (a string as it is); `…` for what is not one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Val::Str(s) => f.write_str(s),
            Val::Num(n) => write!(f, "{n}"),
            Val::Bool(b) => write!(f, "{b}"),
            Val::Null => f.write_str("null"),
            _ => f.write_str("…"),
        }
    }
}

/// The kept keys of one JSON object line, in the order read.
#[derive(Debug, Default)]
pub struct Record<'a> {
    entries: Vec<(Cow<'a, str>, Val<'a>)>,
}

impl<'a> Record<'a> {
    /// Parses `line` (a whole JSON object) keeping the top-level keys `wanted` says yes to.
    /// An error for a line that is no JSON object (cut short, nested past serde_json's limit,
    /// trailing text).
    pub fn parse(line: &'a [u8], wanted: &dyn Fn(&str) -> bool) -> serde_json::Result<Record<'a>> {
        let mut de = serde_json::Deserializer::from_slice(line);
        let r = de.deserialize_map(Top { wanted })?;
        de.end()?;
        Ok(r)
    }

    /// The value of top-level `key` (the last, if given twice: as a JSON map reads it).
    pub fn get(&self, key: &str) -> Option<&Val<'a>> {
        self.entries
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Whether top-level `key` was given.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

/// A key, borrowed when it holds no escape.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }
}

/// The top-level object: kept keys read, the rest skipped.
struct Top<'w> {
    wanted: &'w dyn Fn(&str) -> bool,
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = Record<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut r = Record::default();
        while let Some(k) = a.next_key_seed(Key)? {
            if (self.wanted)(&k) {
                let v = a.next_value_seed(ValSeed(1))?;
                r.entries.push((k, v));
            } else {
                a.next_value::<IgnoredAny>()?;
            }
        }
        Ok(r)
    }
}

/// A kept value at depth `.0` (1: a top-level key's).
#[derive(Clone, Copy)]
struct ValSeed(u8);

impl<'de> DeserializeSeed<'de> for ValSeed {
    type Value = Val<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValSeed {
    type Value = Val<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Val::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Val::Str(Cow::Owned(v.to_string())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Val::Num(v as f64))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Val::Num(v as f64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Val::Num(v))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Val::Bool(v))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Val::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let Some(first) = a.next_element_seed(Elem(self.0))? else {
            return Ok(Val::Bytes(Vec::new()));
        };
        match first {
            // journald's bytes: every element a byte value, else no message at all.
            Elem0::Byte(b) => {
                let mut bytes = vec![b];
                let mut mixed = false;
                while let Some(e) = a.next_element_seed(Elem(MAX_DEPTH))? {
                    match e {
                        Elem0::Byte(b) => bytes.push(b),
                        _ => mixed = true,
                    }
                }
                Ok(if mixed { Val::Other } else { Val::Bytes(bytes) })
            }
            Elem0::Val(v) => {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Val::First(Box::new(v)))
            }
            Elem0::Skipped => {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Val::Other)
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        if self.0 >= MAX_DEPTH {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(Val::Other);
        }
        let mut entries: Vec<(Cow<'de, str>, Val<'de>)> = Vec::new();
        let mut over = false;
        while let Some(k) = a.next_key_seed(Key)? {
            if !over && entries.len() < MAX_ENTRIES {
                let v = a.next_value_seed(ValSeed(self.0 + 1))?;
                entries.push((k, v));
            } else {
                over = true;
                entries.clear();
                a.next_value::<IgnoredAny>()?;
            }
        }
        Ok(if over { Val::Other } else { Val::Obj(entries) })
    }
}

/// An array's element: a byte value (an unsigned number, kept as `n as u8`), another value
/// (kept when at depth under [`MAX_DEPTH`]), or skipped.
enum Elem0<'a> {
    Byte(u8),
    Val(Val<'a>),
    Skipped,
}

/// An array's element at depth `.0`.
struct Elem(u8);

impl<'de> DeserializeSeed<'de> for Elem {
    type Value = Elem0<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Elem {
    type Value = Elem0<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Elem0::Byte(v as u8))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Elem0::Val(Val::Num(v as f64)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Elem0::Val(Val::Num(v)))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Elem0::Val(Val::Bool(v)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Elem0::Val(Val::Null))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Elem0::Val(Val::Str(Cow::Borrowed(v))))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Elem0::Val(Val::Str(Cow::Owned(v.to_string()))))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
        self.nested(|s| s.visit_seq(a))
    }
    fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
        self.nested(|s| s.visit_map(a))
    }
}

impl Elem {
    /// An array or object element: kept under [`MAX_DEPTH`], else skipped.
    fn nested<'de, E: de::Error>(
        self,
        read: impl FnOnce(ValSeed) -> Result<Val<'de>, E>,
    ) -> Result<Elem0<'de>, E> {
        match self.0 < MAX_DEPTH {
            true => read(ValSeed(self.0 + 1)).map(Elem0::Val),
            // `ValSeed(MAX_DEPTH)` skips an object whole; an array's elements are skipped
            // below it the same way.
            false => read(ValSeed(MAX_DEPTH)).map(|_| Elem0::Skipped),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_kept_keys_are_read_and_values_are_bounded() {
        let keep = |k: &str| matches!(k, "log" | "labels" | "MESSAGE" | "x");
        let r = Record::parse(
            br#"{"a":{"deep":[1,2]},"log":"hi \"x\"","labels":{"pod":"p","n":3,"b":true},"MESSAGE":[104,105],"x":[["a"],2]}"#,
            &keep,
        )
        .unwrap();
        assert_eq!(r.get("a"), None);
        assert_eq!(r.get("log").and_then(Val::as_str), Some("hi \"x\""));
        let labels = r.get("labels").unwrap();
        assert_eq!(labels.get("pod").and_then(Val::as_str), Some("p"));
        assert_eq!(labels.get("n").map(ToString::to_string), Some("3".into()));
        assert_eq!(r.get("MESSAGE"), Some(&Val::Bytes(b"hi".to_vec())));
        assert_eq!(
            r.get("x"),
            Some(&Val::First(Box::new(Val::First(Box::new(Val::Str(
                "a".into()
            ))))))
        );
        // A mixed array is no bytes; a second key replaces the first.
        let r = Record::parse(br#"{"MESSAGE":[104,"x"],"log":"a","log":"b"}"#, &keep).unwrap();
        assert_eq!(r.get("MESSAGE"), Some(&Val::Other));
        assert_eq!(r.get("log").and_then(Val::as_str), Some("b"));
        // Objects past MAX_DEPTH are skipped, and those of more than MAX_ENTRIES.
        let r = Record::parse(br#"{"x":{"a":{"b":{"c":{"d":1}}}}}"#, &keep).unwrap();
        let c = r.get("x").and_then(|x| x.get("a")).and_then(|a| a.get("b"));
        assert_eq!(c.and_then(|b| b.get("c")), Some(&Val::Other));
        let many: Vec<String> = (0..MAX_ENTRIES).map(|i| format!("\"k{i}\":{i}")).collect();
        let line = format!("{{\"labels\":{{{}}}}}", many.join(","));
        let r = Record::parse(line.as_bytes(), &keep).unwrap();
        let Some(Val::Obj(e)) = r.get("labels") else {
            panic!()
        };
        assert_eq!(e.len(), MAX_ENTRIES);
        let line = format!("{{\"labels\":{{{},\"one_more\":1}}}}", many.join(","));
        let r = Record::parse(line.as_bytes(), &keep).unwrap();
        assert_eq!(r.get("labels"), Some(&Val::Other));
        // Not one object: an error.
        assert!(Record::parse(br#"{"log":"a"} x"#, &keep).is_err());
        assert!(Record::parse(br#"{"log":"a""#, &keep).is_err());
    }
}
