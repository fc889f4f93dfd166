//! Basic auth as the exporter's HTTP clients send it (the Pushgateway push, `top --url`): the
//! one reader of a `*.basic-auth-password-file` option, the one taker of `user:password@` from
//! a URL, and the one builder of the `Authorization` header. The flags stay declared per client
//! (`--push.basic-auth-user`, `--url.basic-auth-user`: clap cannot prefix one struct twice);
//! what they mean is written once, here.

use base64::Engine as _;

/// The password in the file at `path` (trailing newline ignored), read with
/// [`crate::optfile`]'s bounds for secrets.
///
/// # Errors
/// `"{flag} {path}: …"` when the file cannot be read.
pub fn password_file(flag: &str, path: &std::path::Path) -> Result<String, String> {
    let p = crate::optfile::read_text(path, crate::optfile::Kind::Secret)
        .map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    Ok(p.trim_end_matches(['\n', '\r']).to_string())
}

/// The user and password of `url`'s userinfo, percent-decoded, taken out of `url` (so they stay
/// out of request lines and logs); `None` without a user.
pub fn take_userinfo(url: &mut url::Url) -> Option<(String, Option<String>)> {
    if url.username().is_empty() {
        return None;
    }
    let user = decode_pct(url.username());
    let pass = url.password().map(decode_pct);
    let _ = url.set_username("");
    let _ = url.set_password(None);
    Some((user, pass))
}

/// The `Authorization` header value of basic auth for `user` and `password` (empty when none).
pub fn basic(user: &str, password: Option<&str>) -> String {
    let token = base64::engine::general_purpose::STANDARD
        .encode(format!("{user}:{}", password.unwrap_or_default()));
    format!("Basic {token}")
}

/// Decodes URL userinfo: percent escapes only (`+` is a plus here, not a space as in a form).
pub fn decode_pct(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}
