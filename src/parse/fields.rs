//! Splitting the `key: value` part of a line into fields and reading values as numbers.
//!
//! These are pure functions over `&str`, allocation-free: the splitter lends sub-slices.

/// Splits `s` into fields on any of `seps`. Brackets do not group: a bracketed value that
/// contains a separator (`est uncap acc len: 4.90 [4.70, 5.10]`, v0.5.16+) is rejoined by
/// [`Fields::extend_bracket`] only where the pattern file declares that field bracketed, so a
/// stray `[` in a value (a broken colour code, a typo) can never swallow the fields after it.
/// Empty pieces are skipped. Allocation-free: the pieces are sub-slices of `s`.
#[derive(Debug, Clone)]
pub struct Fields<'a> {
    s: &'a str,
    seps: &'a [String],
    /// When every separator starts with the same byte, only that byte can start one: jump
    /// between its occurrences with memchr instead of stepping byte by byte.
    jump: Option<u8>,
    pos: usize,
}

/// The fields of `s` split on `seps` (see [`Fields`]).
pub fn split_fields<'a>(s: &'a str, seps: &'a [String]) -> Fields<'a> {
    let first = seps.first().and_then(|f| f.as_bytes().first().copied());
    let jump = first.filter(|&f| seps.iter().all(|s| s.as_bytes().first() == Some(&f)));
    Fields {
        s,
        seps,
        jump,
        pos: 0,
    }
}

impl<'a> Fields<'a> {
    /// The end of the piece starting at `start` and the start of the next one.
    fn piece_end(&self, start: usize) -> (usize, usize) {
        let b = self.s.as_bytes();
        let mut i = start;
        while i < b.len() {
            if let Some(f) = self.jump {
                match memchr::memchr(f, &b[i..]) {
                    Some(p) => i += p,
                    None => break,
                }
            }
            let c = b[i];
            if let Some(sep) = self.seps.iter().find(|sep| {
                let sb = sep.as_bytes();
                sb.first().is_none_or(|&f| f == c) && begins_with(&b[i..], sb)
            }) {
                return (i, i + sep.len());
            }
            i += 1;
        }
        (b.len(), b.len())
    }

    /// Rejoins `piece` (the one just returned) with the following pieces up to the `]` that
    /// closes its first unclosed `[`, for a field declared bracketed. Returns the longer piece,
    /// or `None` (nothing consumed) when no `]` closes it.
    pub fn extend_bracket(&mut self, piece: &'a str) -> Option<&'a str> {
        let start = piece.as_ptr() as usize - self.s.as_ptr() as usize;
        let open = start + memchr::memchr(b'[', piece.as_bytes())?;
        let close = open + memchr::memchr(b']', &self.s.as_bytes()[open..])?;
        if close < start + piece.len() {
            return Some(piece);
        }
        let (end, next) = self.piece_end(close + 1);
        self.pos = next;
        Some(&self.s[start..end])
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        while self.pos < self.s.len() {
            let start = self.pos;
            let (end, next) = self.piece_end(start);
            self.pos = next;
            let piece = &self.s[start..end];
            if !piece.trim().is_empty() {
                return Some(piece);
            }
        }
        None
    }
}

/// Splits a field into key and value at the earliest of the `kv` separators.
/// Returns `None` for a piece with no separator (a continuation of a compound value, or prose).
pub fn split_kv<'a>(field: &'a str, kv: &[String]) -> Option<(&'a str, &'a str)> {
    if let [one] = kv {
        // The common case: one separator.
        let p = find_str(field, one)?;
        return Some((field[..p].trim_ascii(), field[p + one.len()..].trim_ascii()));
    }
    let mut best: Option<(usize, usize)> = None;
    for sep in kv {
        if let Some(p) = find_str(field, sep) {
            if best.is_none_or(|(b, _)| p < b) {
                best = Some((p, sep.len()));
            }
        }
    }
    best.map(|(p, l)| (field[..p].trim_ascii(), field[p + l..].trim_ascii()))
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
        if begins_with(&h[i..], n) {
            return Some(i);
        }
        at = i + 1;
    }
    None
}

/// `a == b` for the short texts of a line (separators, field keys, cached prefixes, a template's
/// literals: mostly 2-40 bytes) without a call to `memcmp`: bytes one by one up to eight, else
/// the last and first eight as words, then the middle eight bytes at a time; past 64 bytes, the
/// standard comparison for the middle.
pub fn bytes_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n <= 8 {
        return a.iter().zip(b).all(|(x, y)| x == y);
    }
    let word = |s: &[u8], at: usize| u64::from_ne_bytes(s[at..at + 8].try_into().unwrap_or([0; 8]));
    if word(a, n - 8) != word(b, n - 8) || word(a, 0) != word(b, 0) {
        return false;
    }
    if n <= 16 {
        return true;
    }
    if n > 64 {
        return a[8..] == b[8..];
    }
    let mut at = 8;
    while at < n - 8 {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    true
}

/// `hay.starts_with(p)` by [`bytes_eq`].
pub fn begins_with(hay: &[u8], p: &[u8]) -> bool {
    hay.get(..p.len()).is_some_and(|h| bytes_eq(h, p))
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
    /// `nan` (or `nan%`): Python's float for a ratio with nothing to divide, which SGLang prints
    /// on purpose where it has no value yet (`fwd occupancy: nan%`, v0.5.11-v0.5.20, at start
    /// and after each idle spell). Not a corrupt line; the gauge has no value.
    NoValue,
}

/// Reads a field value as a number.
///
/// * `True`/`False` read 1/0 (graph flags);
/// * `A -> B` reads B (the retraction's `#new_token_ratio`);
/// * a number followed by `%` is divided by 100 (0-1 ratio);
/// * a unit after the number is ignored (`45.10 GB`, `0.50GB`, `69.16%.`, `4.90 [4.70, 5.10]`,
///   `11.35 s`).
///
/// Only ASCII digits are read, and only values a gauge can show truthfully: magnitudes above
/// 2^53 (where a double no longer holds every integer, e.g. a 400-digit count) and `inf`/`nan`
/// (Python prints `inf` for a rate over a zero time gap) are refused.
///
/// Negative numbers are refused too: every value SGLang prints in the lines read is a count,
/// a size, a usage, a rate or a duration, so `-5` is a corrupt line, not a reading (`-0.00`,
/// a rounded tiny difference, reads 0).
///
/// # Errors
/// [`ValueError::NoValue`] for `nan`/`nan%`; [`ValueError::NotANumber`] for anything else:
/// `inf`, exponents, hex, trailing garbage, numbers beyond 2^53, negative numbers.
pub fn parse_value(v: &str) -> Result<f64, ValueError> {
    match parse_number(v)? {
        x if x < 0.0 => Err(ValueError::NotANumber),
        // `-0.00` reads 0, not -0.
        x => Ok(x + 0.0),
    }
}

/// [`parse_value`] keeping a negative sign, for fields whose values are differences (a pattern
/// field's `signed: true`: the memory a draft model's loading freed, `mem usage=-1.86 GB`).
///
/// # Errors
/// As [`parse_value`], but negative numbers are read.
pub fn parse_signed(v: &str) -> Result<f64, ValueError> {
    // `-0.00` reads 0, not -0.
    parse_number(v).map(|x| x + 0.0)
}

/// [`parse_value`] with its sign.
fn parse_number(v: &str) -> Result<f64, ValueError> {
    // Most values are bare decimals (`0.31`, `3580.10`): read at once, no trimming, unit or
    // arrow search (`nan` and a space start with no digit).
    if v.as_bytes().first().is_some_and(u8::is_ascii_digit) {
        if let Some(x) = fast_decimal(v.as_bytes(), 0) {
            return Ok(x);
        }
    }
    let v = v.trim_ascii();
    if matches!(v, "nan" | "nan%" | "-nan" | "-nan%") {
        return Err(ValueError::NoValue);
    }
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
        return Err(ValueError::NotANumber);
    }
    // What may follow the number: nothing, a unit after a space (`45.10 GB`, `11.35 s`, a
    // bracketed range), `%`, or `GB` glued to it (`0.50GB`). Anything else (`1e309`, `0x10`,
    // `35abc`, a NUL) is not a number SGLang prints.
    if !within_exact(&b[digits_start..i]) {
        return Err(ValueError::NotANumber);
    }
    let rest = &b[i..];
    // After `%`: the end, a space or the sentence's `.` (`69.16%.`); `91.2%%` is no number.
    let percent_ok = |r: &[u8]| {
        r.first()
            .is_none_or(|&c| c.is_ascii_whitespace() || c == b'.')
    };
    let unit_ok = rest.is_empty()
        || rest[0].is_ascii_whitespace()
        || (rest[0] == b'%' && percent_ok(&rest[1..]))
        || rest.starts_with(b"GB");
    if !unit_ok {
        return Err(ValueError::NotANumber);
    }
    let percent = b.get(i) == Some(&b'%');
    if let Some(v) = fast_decimal(&b[..i], if percent { 2 } else { 0 }) {
        return Ok(v);
    }
    if percent {
        // Parse `12.89%` as 12.89e-2 so the ratio is the nearest double to 0.1289 (dividing by
        // 100 would print 0.12890000000000001).
        let mut buf = [0u8; 48];
        let digits = &b[..i];
        if digits.len() + 3 <= buf.len() {
            buf[..digits.len()].copy_from_slice(digits);
            buf[digits.len()..digits.len() + 3].copy_from_slice(b"e-2");
            let s = std::str::from_utf8(&buf[..digits.len() + 3])
                .map_err(|_| ValueError::NotANumber)?;
            return s
                .parse()
                .map_err(|_| ValueError::NotANumber)
                .and_then(exact);
        }
    }
    let n: f64 = v[..i].parse().map_err(|_| ValueError::NotANumber)?;
    exact(if b.get(i) == Some(&b'%') {
        n / 100.0
    } else {
        n
    })
}

/// The value of `num` (an optional sign, digits, at most one `.`) times 10^-`shift`, when it can
/// be computed exactly fast: a mantissa of at most 15 digits and at most 22 fraction digits make
/// `mantissa / 10^k` the correctly rounded double (both operands are exact doubles, and IEEE
/// division rounds once), the same as `str::parse` gives. `None` sends the caller to the general
/// parser.
fn fast_decimal(num: &[u8], shift: u32) -> Option<f64> {
    const POW10: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ];
    let (neg, digits) = match num.first() {
        Some(b'-') => (true, &num[1..]),
        Some(b'+') => (false, &num[1..]),
        _ => (false, num),
    };
    let mut m: u64 = 0;
    let mut n = 0u32;
    let mut frac: Option<u32> = None;
    for &c in digits {
        match c {
            b'0'..=b'9' => {
                m = m * 10 + u64::from(c - b'0');
                n += 1;
                if let Some(f) = frac.as_mut() {
                    *f += 1;
                }
            }
            b'.' if frac.is_none() => frac = Some(0),
            _ => return None,
        }
        if n > 15 {
            return None;
        }
    }
    if n == 0 {
        return None;
    }
    let k = frac.unwrap_or(0) + shift;
    let v = m as f64 / *POW10.get(k as usize)?;
    Some(if neg { -v } else { v })
}

/// Largest magnitude read: up to 2^53 a double holds every integer exactly.
pub const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// Whether the integer part of `num` (digits, maybe a `.` and a fraction) is at most 2^53,
/// judged on the text: a double cannot tell 2^53 + 1 from 2^53.
fn within_exact(num: &[u8]) -> bool {
    const MAX: &[u8] = b"9007199254740992";
    let int = num.split(|&c| c == b'.').next().unwrap_or(num);
    let int = &int[int.iter().take_while(|&&c| c == b'0').count()..];
    int.len() < MAX.len() || (int.len() == MAX.len() && int <= MAX)
}

/// `v` if a gauge can show it as the log printed it (finite, at most 2^53 in magnitude).
fn exact(v: f64) -> Result<f64, ValueError> {
    if v.is_finite() && v.abs() <= MAX_EXACT {
        Ok(v)
    } else {
        Err(ValueError::NotANumber)
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
    // Nearly every value is a number: a compound part starts with a letter.
    if !value.as_bytes().first()?.is_ascii_alphabetic() {
        return None;
    }
    let eq = memchr::memchr(b'=', value.as_bytes())?;
    let (name, num) = (&value[..eq], &value[eq + 1..]);
    name.bytes()
        .all(|c| c.is_ascii_alphanumeric() || c == b'_')
        .then_some((name, num))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_eq_and_begins_with_agree_with_the_standard_comparisons() {
        let a: Vec<u8> = (0..80u8).map(|i| b'a' + i % 26).collect();
        for n in 0..=a.len() {
            for flip in 0..n {
                let mut b = a[..n].to_vec();
                assert!(bytes_eq(&a[..n], &b) && begins_with(&a, &b), "{n}");
                b[flip] ^= 1;
                assert!(!bytes_eq(&a[..n], &b) && !begins_with(&a, &b), "{n} {flip}");
            }
            assert!(!bytes_eq(&a[..n], &a[..n.saturating_sub(1)]) || n == 0);
            assert_eq!(begins_with(&a[..n], &a), n == a.len());
        }
    }

    fn seps() -> Vec<String> {
        vec![", ".into()]
    }

    #[test]
    fn brackets_group_only_when_asked() {
        let s = seps();
        let line = "accept len: 4.20, est uncap acc len: 4.90 [4.70, 5.10], #queue-req: 0, ";
        let v: Vec<_> = split_fields(line, &s).collect();
        assert_eq!(
            v,
            [
                "accept len: 4.20",
                "est uncap acc len: 4.90 [4.70",
                "5.10]",
                "#queue-req: 0"
            ]
        );
        // The parser asks to rejoin the declared bracketed field.
        let mut f = split_fields(line, &s);
        assert_eq!(f.next(), Some("accept len: 4.20"));
        let p = f.next().unwrap();
        assert_eq!(
            f.extend_bracket(p),
            Some("est uncap acc len: 4.90 [4.70, 5.10]")
        );
        assert_eq!(f.collect::<Vec<_>>(), ["#queue-req: 0"]);
        // A stray `[` never swallows the fields after it.
        let v: Vec<_> = split_fields("#running-req: [8, #token: 30, #queue-req: 4", &s).collect();
        assert_eq!(v, ["#running-req: [8", "#token: 30", "#queue-req: 4"]);
        let mut f = split_fields("a: [8, b: 30", &s);
        let p = f.next().unwrap();
        assert_eq!(f.extend_bracket(p), None, "no closing bracket");
        assert_eq!(f.next(), Some("b: 30"));
    }

    #[test]
    fn a_bracket_is_rejoined_up_to_its_close_with_any_separator() {
        // A one-byte separator right before the `]`: the rejoined piece ends after the `]`.
        let s: Vec<String> = vec![",".into()];
        let mut f = split_fields("a: 4 [1,],b: 2", &s);
        let p = f.next().unwrap();
        assert_eq!(p, "a: 4 [1");
        assert_eq!(f.extend_bracket(p), Some("a: 4 [1,]"));
        assert_eq!(f.collect::<Vec<_>>(), ["b: 2"]);
        // Closed inside the piece: the piece as it is, nothing consumed.
        let s = seps();
        let mut f = split_fields("a: 4 [1], b: 2", &s);
        let p = f.next().unwrap();
        assert_eq!(f.extend_bracket(p), Some("a: 4 [1]"));
        assert_eq!(f.collect::<Vec<_>>(), ["b: 2"]);
        // No `[` at all: nothing.
        let mut f = split_fields("a: 4, b: 2", &s);
        let p = f.next().unwrap();
        assert_eq!(f.extend_bracket(p), None);
        assert_eq!(f.collect::<Vec<_>>(), ["b: 2"]);
    }

    #[test]
    fn key_and_value_split_at_the_earliest_kv_separator() {
        let kv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // One separator: a first byte that starts no separator is stepped over.
        assert_eq!(split_kv("a:b: 1", &kv(&[": "])), Some(("a:b", "1")));
        assert_eq!(split_kv("a:b:1", &kv(&[": "])), None);
        // Several: the earliest wins, the first listed on a tie.
        assert_eq!(split_kv("a: b=c", &kv(&["=", ": "])), Some(("a", "b=c")));
        assert_eq!(split_kv("a==b", &kv(&["=", "=="])), Some(("a", "=b")));
        assert_eq!(split_kv("a==b", &kv(&["==", "="])), Some(("a", "b")));
        assert_eq!(split_kv("ab", &kv(&["=", ": "])), None);
    }

    #[test]
    fn long_percentages_are_read_as_the_nearest_ratio() {
        // 17 digits, beyond the fast path: read as 58.73…e-2, the double nearest the ratio
        // (dividing the parsed 58.73… by 100 gives the double below it).
        let v = "58.733629687074913";
        assert_eq!(
            parse_value(&format!("{v}%")),
            Ok(format!("{v}e-2").parse::<f64>().unwrap())
        );
        assert_ne!(
            format!("{v}e-2").parse::<f64>().unwrap(),
            v.parse::<f64>().unwrap() / 100.0
        );
        // Longer than the exponent buffer (46 bytes with the 3 of `e-2` over 48): divided.
        let tiny = format!("0.{}1", "0".repeat(43));
        assert_eq!(parse_value(&format!("{tiny}%")), Ok(1e-46));
    }

    #[test]
    fn only_a_spaced_arrow_is_a_ratio_arrow() {
        assert_eq!(parse_value("0.1 -> 0.2"), Ok(0.2));
        assert_eq!(parse_value("0.0980 -> 12.5"), Ok(12.5));
        // A `>` that is not `-> ` leaves the value as printed.
        assert_eq!(parse_value("1 > 2"), Ok(1.0));
        assert_eq!(parse_value("1 ->2"), Ok(1.0));
        assert_eq!(parse_value("1 x> 2"), Ok(1.0));
        assert_eq!(parse_value(">"), Err(ValueError::NotANumber));
    }

    #[test]
    fn a_separator_byte_alone_does_not_split() {
        // `,` starts the separator `, ` but a bare `,` inside a value is no separator: the
        // splitter jumps to each `,` and must step past the ones that start none.
        let s = seps();
        let v: Vec<_> = split_fields("a: 1,2, b: 3,, c: x,", &s).collect();
        assert_eq!(v, ["a: 1,2", "b: 3,", "c: x,"]);
    }

    #[test]
    fn separators_with_different_first_bytes_are_scanned_byte_by_byte() {
        // No common first byte: no jump; every byte is tried, up to the end of the text.
        let s: Vec<String> = vec![", ".into(), "; ".into()];
        let f = split_fields("a: 1; b: 2, c: 3;d", &s);
        assert_eq!(f.jump, None);
        assert_eq!(f.collect::<Vec<_>>(), ["a: 1", "b: 2", "c: 3;d"]);
        let f = split_fields("a: 1, b: 2", &s[..1]);
        assert_eq!(f.jump, Some(b','));
        let two: Vec<String> = vec![", ".into(), ",\t".into()];
        assert_eq!(split_fields("x", &two).jump, Some(b','));
        assert_eq!(split_fields("x", &[]).jump, None);
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
        assert_eq!(parse_value("11.35 s"), Ok(11.35));
        assert_eq!(parse_value("27.60 GB."), Ok(27.60));
        // Not what SGLang prints: counted as value errors, never read by their leading digits.
        // 2^53 is the last integer a double holds exactly.
        assert_eq!(parse_value("9007199254740992"), Ok(9007199254740992.0));
        let huge = "9".repeat(400);
        for bad in [
            "inf",
            "-inf",
            "9007199254740993",
            huge.as_str(),
            "\u{0666}",
            "1\u{0666}",
            "1e309",
            "0x10",
            "35abc",
            "3\u{0}6",
            "11\u{fffd}179",
            "1.2.3",
            "Truex",
            "TRUE",
            "91.2%%",
            "5%x",
        ] {
            assert_eq!(parse_value(bad), Err(ValueError::NotANumber), "{bad:?}");
        }
        assert_eq!(parse_value("torch.bfloat16"), Err(ValueError::NotANumber));
        // A point or a sign without digits.
        for bad in [".", "-.", "+.", "..", ".%", "-"] {
            assert_eq!(parse_value(bad), Err(ValueError::NotANumber), "{bad:?}");
        }
        assert_eq!(parse_value(""), Err(ValueError::NotANumber));
    }

    #[test]
    fn the_fast_decimal_path_reads_what_the_general_parser_reads() {
        // Every value shape SGLang prints, and edges of the fast path, against `str::parse`.
        let cases = [
            "0",
            "7",
            "0.08",
            "1635.11",
            "12.89",
            "0.0980",
            "786432",
            "-3.5",
            "+2",
            "55265491681",
            "123456789012345",
            "0.000000000000000000001",
            "99.99",
            "1.",
            ".5",
        ];
        for c in cases {
            let want: f64 = c.parse().unwrap();
            assert_eq!(parse_number(c), Ok(want), "{c}");
            let pct = format!("{c}%");
            let want_pct: f64 = format!("{c}e-2").parse().unwrap();
            assert_eq!(parse_number(&pct), Ok(want_pct), "{pct}");
        }
        // What a gauge shows: never a negative reading; `-0.00` is 0.
        assert_eq!(parse_value("-3.5"), Err(ValueError::NotANumber));
        assert_eq!(parse_value("-1"), Err(ValueError::NotANumber));
        assert_eq!(parse_value("-2%"), Err(ValueError::NotANumber));
        assert_eq!(parse_value("-0.00").map(f64::to_bits), Ok(0.0f64.to_bits()));
        // A field marked signed (a memory delta) reads its sign; `-0.00` is still 0.
        assert_eq!(parse_signed("-1.86 GB"), Ok(-1.86));
        assert_eq!(parse_signed("-3.5"), Ok(-3.5));
        assert_eq!(parse_signed("2.5"), Ok(2.5));
        assert_eq!(
            parse_signed("-0.00").map(f64::to_bits),
            Ok(0.0f64.to_bits())
        );
        assert_eq!(parse_signed("-inf"), Err(ValueError::NotANumber));
        assert_eq!(parse_signed("--1"), Err(ValueError::NotANumber));
        // `nan` is SGLang's "no value", signed or not, percentage or not; `nanx` is garbage.
        for v in ["nan", "nan%", " nan% "] {
            assert_eq!(parse_value(v), Err(ValueError::NoValue), "{v:?}");
            assert_eq!(parse_signed(v), Err(ValueError::NoValue), "{v:?}");
        }
        assert_eq!(parse_value("nanx"), Err(ValueError::NotANumber));
        assert_eq!(parse_value("NaN"), Err(ValueError::NotANumber));
        // Beyond the fast path's 15 digits: the general parser, same result.
        assert_eq!(parse_value("1234567890123456"), Ok(1234567890123456.0));
        assert_eq!(
            parse_value("0.1234567890123456789"),
            Ok("0.1234567890123456789".parse::<f64>().unwrap())
        );
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
        assert_eq!(compound_part("swa_2=7"), Some(("swa_2", "7")));
        assert_eq!(compound_part("a-b=7"), None);
        assert_eq!(compound_part("full"), None);
    }
}
