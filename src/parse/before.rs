//! The text before a line's label: where the label starts, a foreign prefix after Ray's actor
//! prefix, a label quoted inside another line, and v0.1's `[gpu_id=N]` tag.

use super::patterns::Patterns;
use super::{actor, foreign};

/// The N of a `[gpu_id=N]` / `[gpu=N]` message tag (v0.1.17-v0.2.13).
pub(super) fn gpu_tag(region: &str) -> Option<u32> {
    let p = memchr::memmem::find(region.as_bytes(), b"[gpu")?;
    let rest = &region[p + 4..];
    let rest = rest
        .strip_prefix("_id=")
        .or_else(|| rest.strip_prefix('='))?;
    let end = rest.find(']')?;
    let n = &rest[..end];
    n.bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| n.parse().ok())?
}

/// Where a kind's label starts in its match at `m_start`: after the `]`, `:` or `)` and space
/// that some kinds' regexes match before it (`(?:^|[\]:)] )new fill batch`).
pub(super) fn label_start(line: &str, m_start: usize) -> usize {
    match line.as_bytes()[m_start..] {
        [b']' | b':' | b')', b' ', ..] => m_start + 1,
        _ => m_start,
    }
}

/// The foreign prefix (see [`foreign`]) a record of kind `kind` was read after, if any: the
/// text before its label, where SGLang's own prefix is absent (for `check`'s report).
pub fn foreign_prefix<'l>(pat: &Patterns, kind: usize, line: &'l str) -> Option<&'l str> {
    let m = pat.lines.get(kind)?.regex.find(line)?;
    if !foreign::reads(pat.lines[kind].class) || pat.prefix.is_match(&line[..m.end()]) {
        return None;
    }
    let before = actor_rest(&line[..label_start(line, m.start())]);
    match foreign::read(&pat.rank_tags, before, &mut String::new()) {
        foreign::Read::Prefix { .. } => Some(before.trim()),
        foreign::Read::Nothing | foreign::Read::Refused => None,
    }
}

/// `before` after Ray's actor prefix (the parser's engine already), if it has one.
pub(super) fn actor_rest(before: &str) -> &str {
    match before.starts_with('(') && actor::actor_prefix(before).is_some() {
        true => before.split_once(") ").map_or("", |(_, r)| r),
        false => before,
    }
}

/// Whether the label after `before` (the text before a kind's match) is text quoted inside
/// another line (an exception quoting its input, a warning repeating user text): `before`
/// holds two SGLang prefixes with words between them. Prefixes with only spaces and bracketed
/// groups between them (a wrapper's own `[time] [level]` before SGLang's) are a wrapper, and the
/// last one is SGLang's. Lines with one `[` before the label (nearly all) skip the regex.
pub(super) fn quoted_label(pat: &Patterns, before: &str) -> bool {
    if memchr::memchr_iter(b'[', before.as_bytes())
        .nth(1)
        .is_none()
    {
        return false;
    }
    let mut found = pat.prefix.find_iter(before);
    let Some(first) = found.next() else {
        return false;
    };
    let Some(last) = found.last() else {
        return false;
    };
    let mut gap = before[first.end()..last.start()].trim_start();
    while !gap.is_empty() {
        let Some(rest) = gap.strip_prefix('[') else {
            return true;
        };
        let Some(close) = rest.find(']') else {
            return true;
        };
        gap = rest[close + 1..].trim_start();
    }
    false
}
