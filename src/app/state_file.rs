//! `--state.dir`'s file: restored at start, written by a thread of its own while the state
//! changes.

use std::path::PathBuf;
use std::sync::Arc;

use super::inputs::Input;
use super::{Config, ConfigError};
use crate::state::{persist, Shared};
use crate::stop::Stop;

/// Restores the startup facts and journal cursors of `--state.dir`'s file, if given; a file
/// that cannot be used is warned about and ignored. The servers the inputs name (files, stdin,
/// units) are claimed at once; other restored ones (a removed unit, a gone pod, another
/// exporter's) are removed `--input.expiry` later unless a discovered source or a line names
/// them.
pub(super) fn restore_state(cfg: &Config, state: &Shared) {
    let Some(dir) = cfg.state_dir.as_deref() else {
        return;
    };
    let file = persist::path(dir);
    let mut s = crate::state::lock(state);
    let now = s.clock().now().wall;
    if let Err(e) = persist::restore(&mut s, &file, now) {
        tracing::warn!("the state file was not used: {e}");
    }
    for input in &cfg.inputs {
        match input {
            Input::File { server, .. } | Input::Stdin { server } => s.claim(server),
        }
    }
    for unit in &cfg.journal.units {
        s.claim(&crate::source::journald::server_of(unit));
    }
}

/// How often the state file is written while the state changes.
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Starts the thread that writes the state file when the state changed (at most every
/// [`SAVE_EVERY`]) and once more when `stop` is set.
pub(super) fn spawn_saver(
    file: PathBuf,
    state: Shared,
    stop: Arc<Stop>,
) -> Result<std::thread::JoinHandle<()>, ConfigError> {
    std::thread::Builder::new()
        .name("state file".into())
        .spawn(move || {
            let mut saved = None;
            let mut warned = false;
            loop {
                let done = !stop.wait(SAVE_EVERY);
                let (generation, text) = {
                    let s = crate::state::lock(&state);
                    if saved == Some(s.generation()) {
                        (s.generation(), None)
                    } else {
                        (s.generation(), Some(persist::snapshot(&s, &s.journal_cursors_map())))
                    }
                };
                if let Some(text) = text {
                    match persist::write_atomic(&file, &text) {
                        Ok(()) => {
                            saved = Some(generation);
                            warned = false;
                        }
                        Err(e) if !warned => {
                            warned = true;
                            tracing::warn!(file = %file.display(), "cannot write the state file: {e}");
                        }
                        Err(_) => {}
                    }
                }
                if done {
                    return;
                }
            }
        })
        .map_err(|e| ConfigError(format!("cannot start the state file thread: {e}")))
}
