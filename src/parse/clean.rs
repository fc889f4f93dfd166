//! Terminal control sequences and carriage-return fragments, removed before a line is parsed.
//!
//! uvicorn colours its access lines when it believes it writes to a terminal, Ray colours its
//! actor prefixes, some deployments force colour on (`FORCE_COLOR`, `TERM=xterm` in a container),
//! and tqdm progress bars redraw with `\r` and erase-line codes. None of that is part of what
//! SGLang printed, so it is removed wherever it sits in the line:
//!
//! * ANSI escape sequences: CSI (`ESC [ … final`, colours and erase-line among them), OSC
//!   (`ESC ] … BEL` or `ESC ] … ESC \`), DCS/SOS/PM/APC strings (ended by `ESC \`), the
//!   two- and three-byte escapes (`ESC c`, `ESC ( B`), and a lone `ESC`;
//! * of a line holding carriage-return-separated fragments, only the last non-empty fragment is
//!   kept (what a terminal would show). A `\r` that ends the line (a CRLF line ending) is not a
//!   fragment: it is dropped first.
//!
//! Tabs read as spaces. A line with no ESC, `\r` or tab (nearly every line) costs one `memchr3`
//! and is not copied.

/// Whether `b` is all printable ASCII (bytes 0x20-0x7F): then it holds nothing [`clean`] removes
/// (ESC, `\r` and tab are below 0x20) and is valid UTF-8. [`PLAIN_CHUNK`] bytes at a time, each
/// byte tested alone (`x - 0x20 < 0x60`, wrapping: the compiler turns the chunk's loop into a few
/// vector compares); a line of a chunk or more ends with a chunk that overlaps the one before,
/// a shorter one is padded with spaces.
pub fn is_plain_ascii(b: &[u8]) -> bool {
    #[inline(always)]
    fn plain(c: &[u8; PLAIN_CHUNK]) -> bool {
        let mut bad = 0u8;
        for &x in c {
            bad |= u8::from(x.wrapping_sub(0x20) >= 0x60);
        }
        bad == 0
    }
    let n = b.len();
    if n < PLAIN_CHUNK {
        let mut c = [b' '; PLAIN_CHUNK];
        c[..n].copy_from_slice(b);
        return plain(&c);
    }
    let chunk = |at: usize| -> &[u8; PLAIN_CHUNK] {
        b[at..at + PLAIN_CHUNK]
            .try_into()
            .unwrap_or_else(|_| unreachable!())
    };
    let mut at = 0;
    while at + PLAIN_CHUNK < n {
        if !plain(chunk(at)) {
            return false;
        }
        at += PLAIN_CHUNK;
    }
    plain(chunk(n - PLAIN_CHUNK))
}

/// The bytes [`is_plain_ascii`] tests together.
const PLAIN_CHUNK: usize = 32;

/// Cleans `line`, writing into `buf` only when something had to be removed.
///
/// Returns the cleaned bytes (`line` itself, or a slice of `buf`) and whether anything was
/// removed besides a CRLF line ending.
pub fn clean<'a>(line: &'a [u8], buf: &'a mut Vec<u8>) -> (&'a [u8], bool) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(first) = memchr::memchr3(0x1b, b'\r', b'\t', line) else {
        return (line, false);
    };
    buf.clear();
    let removed = memchr::memchr2(0x1b, b'\r', &line[first..]).is_some();
    let (start, end) = if removed {
        strip_escapes(line, buf);
        last_fragment(buf)
    } else {
        buf.extend_from_slice(line);
        (0, buf.len())
    };
    // A tab reads as a space: SGLang separates fields with ", " and keys from values with ": ",
    // and a tab there (a log shipper's rewrite, a hand-edited line) must not glue two fields.
    for b in &mut buf[start..end] {
        if *b == b'\t' {
            *b = b' ';
        }
    }
    (&buf[start..end], removed)
}

/// Appends `line` without its escape sequences to `out`.
fn strip_escapes(line: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while let Some(p) = memchr::memchr(0x1b, &line[i..]) {
        out.extend_from_slice(&line[i..i + p]);
        i = skip_escape(line, i + p);
    }
    out.extend_from_slice(&line[i..]);
}

/// The index just past the escape sequence that starts with the ESC at `esc`.
fn skip_escape(b: &[u8], esc: usize) -> usize {
    let Some(&kind) = b.get(esc + 1) else {
        return esc + 1; // a lone ESC at the end
    };
    match kind {
        // CSI: parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, one final byte
        // 0x40-0x7E. A sequence cut short by a byte outside those ends before that byte, so a
        // broken code never swallows the text after it.
        b'[' => {
            let mut i = esc + 2;
            while i < b.len() && (0x20..=0x3f).contains(&b[i]) {
                i += 1;
            }
            if i < b.len() && (0x40..=0x7e).contains(&b[i]) {
                i + 1
            } else {
                i
            }
        }
        // OSC (ended by BEL or ST) and DCS/SOS/PM/APC (ended by ST). Unterminated: the rest of
        // the line is the string's (a terminal would not print it either).
        b']' | b'P' | b'X' | b'^' | b'_' => {
            let mut i = esc + 2;
            while i < b.len() {
                if kind == b']' && b[i] == 0x07 {
                    return i + 1;
                }
                if b[i] == 0x1b && b.get(i + 1) == Some(&b'\\') {
                    return i + 2;
                }
                i += 1;
            }
            i
        }
        // nF escapes (`ESC ( B`: intermediates 0x20-0x2F, then a final 0x30-0x7E).
        0x20..=0x2f => {
            let mut i = esc + 1;
            while i < b.len() && (0x20..=0x2f).contains(&b[i]) {
                i += 1;
            }
            if i < b.len() && (0x30..=0x7e).contains(&b[i]) {
                i + 1
            } else {
                i
            }
        }
        // Two-byte escapes (`ESC c`, `ESC 7`, `ESC M`, …).
        0x30..=0x7e => esc + 2,
        // ESC followed by a control or non-ASCII byte: drop the ESC alone.
        _ => esc + 1,
    }
}

/// The span of the last non-empty `\r`-separated fragment of `b` (all of `b` without `\r`).
fn last_fragment(b: &[u8]) -> (usize, usize) {
    let mut end = b.len();
    loop {
        let start = memchr::memrchr(b'\r', &b[..end]).map_or(0, |p| p + 1);
        if start < end || start == 0 {
            return (start, end);
        }
        end = start - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ascii_is_exactly_bytes_0x20_to_0x7f() {
        // Lengths from none to three chunks and more, the odd byte in each place.
        let base: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
        for n in 0..base.len() {
            assert!(is_plain_ascii(&base[..n]));
            for at in 0..n {
                for c in 0..=255u8 {
                    let mut b = base[..n].to_vec();
                    b[at] = c;
                    assert_eq!(
                        is_plain_ascii(&b),
                        (0x20..0x80).contains(&c),
                        "{n} {at} {c}"
                    );
                }
            }
        }
        // Several low bytes in one word, after one that borrows.
        assert!(!is_plain_ascii(b"ab\x00\x1f\x1b\rxyzabcdefgh"));
    }

    fn c(s: &[u8]) -> (String, bool) {
        let mut buf = Vec::new();
        let (out, changed) = clean(s, &mut buf);
        (String::from_utf8_lossy(out).into_owned(), changed)
    }

    #[test]
    fn plain_lines_and_crlf_pass_unchanged() {
        assert_eq!(
            c(b"Decode batch, #running-req: 5"),
            ("Decode batch, #running-req: 5".into(), false)
        );
        assert_eq!(c(b"abc\r"), ("abc".into(), false));
        assert_eq!(c(b""), ("".into(), false));
    }

    #[test]
    fn tabs_read_as_spaces_and_are_not_counted() {
        assert_eq!(c(b"a: 5,\tb:\t6\r"), ("a: 5, b: 6".into(), false));
        assert_eq!(c(b"x\r\ta:\t1"), (" a: 1".into(), true));
        assert_eq!(c(b"\x1b[1m\ta\x1b[0m"), (" a".into(), true));
    }

    #[test]
    fn sgr_colours_around_and_inside_fields() {
        // uvicorn's coloured access line: level, request line and status each wrapped.
        let line = b"\x1b[32mINFO\x1b[0m:     127.0.0.1:5 - \"\x1b[1mPOST /generate HTTP/1.1\x1b[0m\" \x1b[32m200 OK\x1b[0m";
        assert_eq!(
            c(line).0,
            "INFO:     127.0.0.1:5 - \"POST /generate HTTP/1.1\" 200 OK"
        );
        assert_eq!(c(b"#queue-req: 3\x1b[0m").0, "#queue-req: 3");
        assert_eq!(c(b"rate: 2.\x1b[0m76%").0, "rate: 2.76%");
        assert_eq!(
            c(b"\x1b[36m(SGLangEngine pid=1)\x1b[0m x").0,
            "(SGLangEngine pid=1) x"
        );
        // 256-colour and truecolour parameters.
        assert_eq!(c(b"\x1b[38;5;208ma\x1b[38;2;1;2;3mb\x1b[m").0, "ab");
    }

    #[test]
    fn osc_charset_lone_and_broken_escapes() {
        assert_eq!(c(b"\x1b]0;title\x07text").0, "text");
        assert_eq!(c(b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\").0, "link");
        assert_eq!(c(b"\x1b(Bplain\x1bc").0, "plain");
        assert_eq!(c(b"end\x1b").0, "end");
        // A CSI cut short by a non-CSI byte ends there: the text after it stays.
        assert_eq!(c("\x1b[1\u{e9}t\u{e9}".as_bytes()).0, "\u{e9}t\u{e9}");
        assert_eq!(c(b"\x1b\x01x").0, "\x01x");
    }

    #[test]
    fn carriage_return_fragments_keep_the_last() {
        assert_eq!(
            c(b" 10%|#  \r 50%|##   \r[2026-06-03 10:00:00] Decode batch").0,
            "[2026-06-03 10:00:00] Decode batch"
        );
        // Erase-line codes with the redraw, and a CRLF ending after fragments.
        assert_eq!(c(b"\x1b[2K 50%\r\x1b[2Kdone\r").0, "done");
        // Trailing empty fragments are not the line.
        assert_eq!(c(b"last\r\r\r").0, "last");
        assert_eq!(c(b"\r\r").0, "");
    }
}
