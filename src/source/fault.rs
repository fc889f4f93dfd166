//! A test hook that makes reading fail on purpose, so tests can prove that a bug in a source is
//! caught, counted and survived (a panic is the one failure no input should be able to cause).
//!
//! Off unless the environment variable `SGLANG_LOG_EXPORTER_FAULT` is set to `STAGE:TEXT`: a
//! line containing `TEXT` then panics at that stage. `parse` panics inside the per-line guard
//! (the line is skipped, the source goes on); `reader` panics outside it, in the reader itself
//! (the source is restarted where it stopped). Not for production use; documented only here.
//!
//! Compiled in only with the cargo feature `fault-injection`, which `.ci/run` turns on for
//! `cargo test`; a build without it (the release binary, the Debian package, the image) has no
//! hook: [`enabled`] is `false` and [`check`] does nothing, whatever the environment says.

#[cfg(feature = "fault-injection")]
use std::sync::OnceLock;

/// Where a fault is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// While a line is unwrapped and parsed.
    Parse,
    /// In the source's reader, outside the per-line guard.
    Reader,
}

#[cfg(feature = "fault-injection")]
fn configured() -> &'static Option<(Stage, Vec<u8>)> {
    static FAULT: OnceLock<Option<(Stage, Vec<u8>)>> = OnceLock::new();
    FAULT.get_or_init(|| {
        let v = std::env::var("SGLANG_LOG_EXPORTER_FAULT").ok()?;
        let (stage, text) = v.split_once(':')?;
        let stage = match stage {
            "parse" => Stage::Parse,
            "reader" => Stage::Reader,
            _ => return None,
        };
        (!text.is_empty()).then(|| (stage, text.as_bytes().to_vec()))
    })
}

/// Whether the hook is set (for any stage).
#[cfg(feature = "fault-injection")]
pub fn enabled() -> bool {
    configured().is_some()
}

/// Whether the hook is set: never, in a build without it.
#[cfg(not(feature = "fault-injection"))]
pub fn enabled() -> bool {
    false
}

/// Panics when the hook is set for `stage` and `line` holds its text.
#[cfg(feature = "fault-injection")]
pub fn check(stage: Stage, line: &[u8]) {
    if let Some((s, text)) = configured() {
        if *s == stage && memchr::memmem::find(line, text).is_some() {
            panic!("injected fault ({stage:?}) on a line containing the test text");
        }
    }
}

/// Does nothing, in a build without the hook.
#[cfg(not(feature = "fault-injection"))]
#[inline(always)]
pub fn check(_stage: Stage, _line: &[u8]) {}
