//! Splitting the `key: value` part of a line into fields and reading values as numbers.
//!
//! These are pure functions over `&str`, allocation-free: the splitter lends sub-slices.

/// Splits `s` on any of `seps` where the separator is outside `[...]` brackets, so that
/// `est uncap acc len: 4.90 [4.70, 5.10]` (v0.5.16+) stays one field. Empty pieces are skipped.
pub fn split_fields<'a>(s: &'a str, seps: &'a [String]) -> impl Iterator<Item = &'a str> + 'a {
    let bytes = s.as_bytes();
    // When every separator starts with the same byte, only that byte and the brackets can
    // change anything: jump between them with memchr instead of stepping byte by byte.
    let first = seps.first().and_then(|f| f.as_bytes().first().copied());
    let jump = first.filter(|&f| seps.iter().all(|s| s.as_bytes().first() == Some(&f)));
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        while pos < bytes.len() {
            let start = pos;
            let mut depth = 0i32;
            let mut i = pos;
            let end;
            loop {
                if i >= bytes.len() {
                    end = i;
                    pos = i;
                    break;
                }
                match bytes[i] {
                    b'[' => depth += 1,
                    b']' => depth -= 1,
                    _ => {}
                }
                if depth <= 0 {
                    // Compare the first byte before the whole separator: this runs per byte.
                    let c = bytes[i];
                    if let Some(sep) = seps.iter().find(|sep| {
                        let sb = sep.as_bytes();
                        sb.first().is_none_or(|&f| f == c) && bytes[i..].starts_with(sb)
                    }) {
                        end = i;
                        pos = i + sep.len();
                        break;
                    }
                }
                i = match jump {
                    Some(f) => memchr::memchr3(b'[', b']', f, &bytes[i + 1..])
                        .map_or(bytes.len(), |p| i + 1 + p),
                    None => i + 1,
                };
            }
            let piece = &s[start..end];
            if !piece.trim().is_empty() {
                return Some(piece);
            }
        }
        None
    })
}

/// Splits a field into key and value at the earliest of the `kv` separators.
/// Returns `None` for a piece with no separator (a continuation of a compound value, or prose).
pub fn split_kv<'a>(field: &'a str, kv: &[String]) -> Option<(&'a str, &'a str)> {
    let mut best: Option<(usize, usize)> = None;
    for sep in kv {
        if let Some(p) = find_str(field, sep) {
            if best.is_none_or(|(b, _)| p < b) {
                best = Some((p, sep.len()));
            }
        }
    }
    best.map(|(p, l)| (field[..p].trim(), field[p + l..].trim()))
}

/// The first occurrence of `needle` in `hay` (as `str::find`), by memchr on its first byte:
/// cheaper than a two-way searcher's set-up for the short keys and separators here.
fn find_str(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let Some(&first) = n.first() else {
        return Some(0);
    };
    let mut at = 0;
    while let Some(p) = memchr::memchr(first, &h[at..]) {
        let i = at + p;
        if h[i..].starts_with(n) {
            return Some(i);
        }
        at = i + 1;
    }
    None
}

/// `v.rfind("-> ")` by memrchr on `>`: no searcher set-up per value.
fn rfind_arrow(v: &str) -> Option<usize> {
    let b = v.as_bytes();
    memchr::memrchr_iter(b'>', b)
        .filter(|&i| i >= 1 && b[i - 1] == b'-' && b.get(i + 1) == Some(&b' '))
        .map(|i| i - 1)
        .next()
}

/// Why a value could not be read as a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueError {
    /// Not a number, boolean, percentage or ratio arrow.
    NotANumber,
}

/// Reads a field value as a number.
///
/// * `True`/`False` read 1/0 (graph flags);
/// * `A -> B` reads B (the retraction's `#new_token_ratio`);
/// * a number followed by `%` is divided by 100 (0-1 ratio);
/// * a unit after the number is ignored (`45.10 GB`, `0.50GB`, `69.16%.`, `4.90 [4.70, 5.10]`,
///   `11.35 s`); `inf` is read as such.
///
/// # Errors
/// [`ValueError::NotANumber`] for anything else: `nan`, exponents, hex, trailing garbage.
pub fn parse_value(v: &str) -> Result<f64, ValueError> {
    let v = v.trim();
    let v = match rfind_arrow(v) {
        Some(p) => &v[p + 3..],
        None => v,
    };
    match v {
        "True" => return Ok(1.0),
        "False" => return Ok(0.0),
        _ => {}
    }
    let b = v.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        i += 1;
    }
    if i == digits_start {
        // Python prints `inf` for a rate over a zero time gap; `nan` has no value to show.
        return match &v[digits_start..] {
            "inf" => Ok(if b.first() == Some(&b'-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            }),
            _ => Err(ValueError::NotANumber),
        };
    }
    // What may follow the number: nothing, a unit after a space (`45.10 GB`, `11.35 s`, a
    // bracketed range), `%`, or `GB` glued to it (`0.50GB`). Anything else (`1e309`, `0x10`,
    // `35abc`, a NUL) is not a number SGLang prints.
    let rest = &b[i..];
    let unit_ok = rest.is_empty()
        || rest[0].is_ascii_whitespace()
        || rest[0] == b'%'
        || rest.starts_with(b"GB");
    if !unit_ok {
        return Err(ValueError::NotANumber);
    }
    if b.get(i) == Some(&b'%') {
        // Parse `12.89%` as 12.89e-2 so the ratio is the nearest double to 0.1289 (dividing by
        // 100 would print 0.12890000000000001).
        let mut buf = [0u8; 48];
        let digits = &b[..i];
        if digits.len() + 3 <= buf.len() {
            buf[..digits.len()].copy_from_slice(digits);
            buf[digits.len()..digits.len() + 3].copy_from_slice(b"e-2");
            let s = std::str::from_utf8(&buf[..digits.len() + 3])
                .map_err(|_| ValueError::NotANumber)?;
            return s.parse().map_err(|_| ValueError::NotANumber);
        }
    }
    let n: f64 = v[..i].parse().map_err(|_| ValueError::NotANumber)?;
    if b.get(i) == Some(&b'%') {
        Ok(n / 100.0)
    } else {
        Ok(n)
    }
}

/// Expands a compound key (v0.4.9-v0.4.9.post2 hybrid SWA: `#token: full=N, swa=N`) into the key
/// of the later spelling: `#token` + `full` gives `#full token`; `token usage` + `swa` gives
/// `swa token usage`. Writes into `buf` (reused, so no allocation once it has grown).
pub fn compound_key<'b>(key: &str, sub: &str, buf: &'b mut String) -> &'b str {
    buf.clear();
    if let Some(rest) = key.strip_prefix('#') {
        buf.push('#');
        buf.push_str(sub);
        buf.push(' ');
        buf.push_str(rest);
    } else {
        buf.push_str(sub);
        buf.push(' ');
        buf.push_str(key);
    }
    buf
}

/// If `value` is a compound value part `name=number` (and not a plain number), returns the parts.
pub fn compound_part(value: &str) -> Option<(&str, &str)> {
    let (name, num) = value.split_once('=')?;
    if !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        Some((name, num))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seps() -> Vec<String> {
        vec![", ".into()]
    }

    #[test]
    fn split_keeps_brackets_whole() {
        let s = seps();
        let v: Vec<_> = split_fields(
            "accept len: 4.20, est uncap acc len: 4.90 [4.70, 5.10], #queue-req: 0, ",
            &s,
        )
        .collect();
        assert_eq!(
            v,
            [
                "accept len: 4.20",
                "est uncap acc len: 4.90 [4.70, 5.10]",
                "#queue-req: 0"
            ]
        );
    }

    #[test]
    fn values() {
        assert_eq!(parse_value("0.08"), Ok(0.08));
        assert_eq!(parse_value("69.16%."), Ok(0.6916));
        assert_eq!(parse_value("12.89%"), Ok(0.1289));
        assert_eq!(parse_value("0.00%"), Ok(0.0));
        assert_eq!(parse_value("True"), Ok(1.0));
        assert_eq!(parse_value("False "), Ok(0.0));
        assert_eq!(parse_value("0.0980 -> 0.3236"), Ok(0.3236));
        assert_eq!(parse_value("45.10 GB"), Ok(45.10));
        assert_eq!(parse_value("0.50GB"), Ok(0.50));
        assert_eq!(parse_value("4.90 [4.70, 5.10]"), Ok(4.90));
        assert_eq!(parse_value("inf"), Ok(f64::INFINITY));
        assert_eq!(parse_value("-inf"), Ok(f64::NEG_INFINITY));
        assert_eq!(parse_value("11.35 s"), Ok(11.35));
        assert_eq!(parse_value("27.60 GB."), Ok(27.60));
        // Not what SGLang prints: counted as value errors, never read by their leading digits.
        for bad in [
            "nan",
            "1e309",
            "0x10",
            "35abc",
            "3\u{0}6",
            "11\u{fffd}179",
            "1.2.3",
            "Truex",
            "TRUE",
        ] {
            assert_eq!(parse_value(bad), Err(ValueError::NotANumber), "{bad:?}");
        }
        assert_eq!(parse_value("torch.bfloat16"), Err(ValueError::NotANumber));
        assert_eq!(parse_value(""), Err(ValueError::NotANumber));
    }

    #[test]
    fn compound_keys() {
        let mut b = String::new();
        assert_eq!(compound_key("#token", "full", &mut b), "#full token");
        assert_eq!(
            compound_key("token usage", "swa", &mut b),
            "swa token usage"
        );
        assert_eq!(compound_part("full=20480"), Some(("full", "20480")));
        assert_eq!(compound_part("0.5"), None);
    }
}
