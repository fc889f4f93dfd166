//! Ray's actor prefix: `(ActorName pid=N, ip=A) ` before each line an actor prints, in the
//! driver's log where several SGLang engines (Ray actors of an RL framework or Ray Serve) write
//! side by side. Ray prints it (`python/ray/_private/ray_logging`), optionally coloured (colour
//! codes are removed before this), and appends ` [repeated Nx across cluster]` to a line that
//! stands for N deduplicated ones.
//!
//! The engines' rank tags repeat (`TP0`, or none), so the prefix is what tells them apart:
//! [`actor_prefix`] gives its text as the engine's identity (`SGLangEngine pid=3725811
//! ip=10.0.0.11`), the `engine` label of that engine's series.

/// The engine identity of a line that starts with a Ray actor prefix: `Name pid=N` or
/// `Name pid=N ip=A` (the prefix without its parentheses and comma), or `None`.
///
/// Only the shape Ray prints is accepted (a name of word characters, `pid=` digits, an optional
/// `, ip=` address), so a line that merely starts with `(` is not mistaken for one.
pub fn actor_prefix(line: &str) -> Option<(&str, &str, Option<&str>)> {
    let rest = line.strip_prefix('(')?;
    let close = memchr::memchr(b')', rest.as_bytes())?;
    let inner = &rest[..close];
    let (name, attrs) = inner.split_once(' ')?;
    let name_ok = !name.is_empty()
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b':'));
    if !name_ok {
        return None;
    }
    let (pid, ip) = match attrs.split_once(", ") {
        Some((p, i)) => (p, Some(i.strip_prefix("ip=")?)),
        None => (attrs, None),
    };
    let pid = pid.strip_prefix("pid=")?;
    if pid.is_empty() || !pid.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if let Some(ip) = ip {
        let ok = !ip.is_empty()
            && ip
                .bytes()
                .all(|c| c.is_ascii_hexdigit() || matches!(c, b'.' | b':'));
        if !ok {
            return None;
        }
    }
    Some((name, pid, ip))
}

/// Formats an engine identity as the `engine` label value: `Name pid=N` or `Name pid=N ip=A`,
/// Ray's own words, so the value is what an operator greps the driver log for.
pub fn engine_label(name: &str, pid: &str, ip: Option<&str>, out: &mut String) {
    out.clear();
    out.push_str(name);
    out.push_str(" pid=");
    out.push_str(pid);
    if let Some(ip) = ip {
        out.push_str(" ip=");
        out.push_str(ip);
    }
}

/// `line` without Ray's deduplication note (` [repeated 7x across cluster]`) at its end: the
/// note is not a field of the line.
pub fn strip_repeat_note(line: &str) -> &str {
    let Some(body) = line.strip_suffix(" across cluster]") else {
        return line;
    };
    let Some(open) = body.rfind(" [repeated ") else {
        return line;
    };
    let n = &body[open + " [repeated ".len()..];
    match n.strip_suffix('x') {
        Some(d) if !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()) => &line[..open],
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ray_prefixes() {
        assert_eq!(
            actor_prefix("(SGLangEngine pid=3725811, ip=10.0.0.11) [2026-08-06 07:47:41] x"),
            Some(("SGLangEngine", "3725811", Some("10.0.0.11")))
        );
        assert_eq!(
            actor_prefix("(SGLangEngine pid=41820) [2026-03-22 13:53:37 TP0] Decode"),
            Some(("SGLangEngine", "41820", None))
        );
        assert_eq!(
            actor_prefix("(raylet, ip=fd00::1) x"),
            None,
            "no pid: not an actor prefix"
        );
        for not in [
            "(mixed #running-req: 3) x",
            "(SGLangEngine pid=abc) x",
            "(SGLangEngine pid=1, host=x) x",
            "(a b) x",
            "no paren",
        ] {
            assert_eq!(actor_prefix(not), None, "{not}");
        }
        let mut s = String::new();
        engine_label("SGLangEngine", "7", Some("10.0.0.1"), &mut s);
        assert_eq!(s, "SGLangEngine pid=7 ip=10.0.0.1");
    }

    #[test]
    fn repeat_note() {
        assert_eq!(
            strip_repeat_note("#queue-req: 0,  [repeated 7x across cluster]"),
            "#queue-req: 0, "
        );
        assert_eq!(strip_repeat_note("#queue-req: 0"), "#queue-req: 0");
        assert_eq!(
            strip_repeat_note("x [repeated many across cluster]"),
            "x [repeated many across cluster]"
        );
    }
}
