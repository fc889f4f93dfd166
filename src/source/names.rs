//! Names from what a source is: a unit's, a path's, and bytes as text that keeps two names apart.

/// The server name of a systemd unit: the unit without `.service` (`sglang-decode.service` →
/// `sglang-decode`), for journald records, `--journal-unit` and the GPU correlation alike.
pub fn server_name_of_unit(unit: &str) -> &str {
    unit.strip_suffix(".service").unwrap_or(unit)
}

/// The default server name of a path: its file stem (`/var/log/sglang-decode.log` →
/// `sglang-decode`), invalid UTF-8 escaped ([`bytes_text`]).
pub fn server_name_of(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    path.file_stem()
        .map(|s| bytes_text(s.as_bytes()).into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "sglang".to_string())
}

/// Bytes as text, each byte of invalid UTF-8 written `\xHH` (`caf\xE9` for Latin-1 `café`):
/// names made of them (servers, sources, journal fields) stay apart where a lossy conversion
/// would make `caf\xe9` and `caf\xe8` both `caf\u{FFFD}` and merge two inputs.
pub fn bytes_text(b: &[u8]) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write;
    if let Ok(s) = std::str::from_utf8(b) {
        return s.into();
    }
    let mut out = String::with_capacity(b.len() + 8);
    for chunk in b.utf8_chunks() {
        out.push_str(chunk.valid());
        for c in chunk.invalid() {
            let _ = write!(out, "\\x{c:02X}");
        }
    }
    out.into()
}

/// A path as text for names and messages (the `source` label, a discovered file's identity):
/// [`bytes_text`] of its bytes, so two paths that differ only in invalid UTF-8 never share a
/// name.
pub fn path_text(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    bytes_text(path.as_os_str().as_bytes()).into_owned()
}
