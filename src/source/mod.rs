//! Sources: where lines come from (followed files, stdin, journald units, pod-log discovery,
//! the servers' HTTP API, the router's `/metrics`). A source yields whole lines (never a partial one) to a
//! [`LineSink`]; the pipeline's ingest ([`crate::pipeline`]) turns each into state updates.

pub mod access;
pub mod api;
pub mod discover;
pub mod fault;
pub mod file;
pub mod follow;
pub mod journal_export;
pub mod journald;
pub mod linebuf;
mod names;
pub mod pool;
pub mod router;
pub mod stdin;
pub mod watch;
pub mod writer;

pub use names::{bytes_text, path_text, server_name_of, server_name_of_unit};

use crate::state::Shared;

/// What a source hands its lines and events to: a [`file::Sink`] (lines, bytes, errors, up and
/// down, history), plus what a journal reader and a followed file's job also tell it. The
/// pipeline's ingest ([`crate::pipeline::Ingest`]) is the one in use; sources never name it.
pub trait LineSink: file::Sink {
    /// The source name.
    fn source(&self) -> &str;

    /// The shared state.
    fn state(&self) -> &Shared;

    /// Handles one journal entry's `MESSAGE` (its `\n` at the end, if any, dropped), as a
    /// journal reader took it out of its entry, written by whom `fields` say (see [`writer`]);
    /// `None` for an entry without one. One entry is one line read.
    fn message(&mut self, text: Option<&[u8]>, fields: &writer::Fields, realtime: Option<f64>);

    /// Counts a journal entry skipped whole as one line read: `oversized` (a value past
    /// `--max-line-bytes`) or broken (cut short, or not in the export format).
    fn entry_skipped(&mut self, oversized: bool);
}
