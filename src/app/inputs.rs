//! The inputs of the main mode as the command line names them (`PATH`, `NAME=PATH`, `-`):
//! [`Input`], read and checked by [`parse_inputs`].

use std::path::PathBuf;

use super::ConfigError;
use crate::cli::split_input;
use crate::source::journald;
use crate::source::server_name_of;

/// One input of the main mode.
#[derive(Debug, Clone)]
pub enum Input {
    /// A file to follow.
    File {
        /// `server` label.
        server: String,
        /// The path.
        path: PathBuf,
    },
    /// Standard input.
    Stdin {
        /// `server` label (journald records name their own).
        server: String,
    },
}

/// Reads the input arguments (`PATH`, `NAME=PATH`, `-`). With `finished` (the inputs are read
/// to their end: `--once`, `backfill`), a missing or unreadable file or a directory is an error
/// now rather than a source to wait for. A block device or a socket is never a log file (a
/// character device is read as a stream, as a FIFO is: a terminal, `/dev/stdin`).
///
/// # Errors
/// A [`ConfigError`] for stdin given twice, an input that cannot be read (`finished`), a block
/// device or socket, or two inputs whose file names give one server name (they would silently
/// merge).
pub fn parse_inputs(args: &[String], finished: bool) -> Result<Vec<Input>, ConfigError> {
    let mut inputs: Vec<Input> = Vec::new();
    for arg in args {
        let (name, path) = split_input(arg);
        if path == "-" {
            if inputs.iter().any(|i| matches!(i, Input::Stdin { .. })) {
                return Err(ConfigError("stdin (-) is given twice".into()));
            }
            inputs.push(Input::Stdin {
                server: name.unwrap_or_else(|| "stdin".into()),
            });
            continue;
        }
        let path = PathBuf::from(path);
        if let Some(kind) = std::fs::metadata(&path)
            .ok()
            .and_then(|m| crate::source::file::unreadable_kind(&m, true))
        {
            return Err(ConfigError(format!(
                "{} is {kind}, not a log file",
                crate::source::path_text(&path)
            )));
        }
        if finished {
            check_readable(&path)?;
        }
        let server = match name {
            Some(n) => n,
            None => {
                let n = server_name_of(&path);
                let taken = inputs.iter().any(|i| match i {
                    Input::File { server, .. } | Input::Stdin { server } => *server == n,
                });
                if taken {
                    return Err(ConfigError(format!(
                        "{} would be server {n:?}, like an input before it; name the servers apart with NAME=PATH",
                        crate::source::path_text(&path)
                    )));
                }
                n
            }
        };
        inputs.push(Input::File { server, path });
    }
    Ok(inputs)
}

/// A file input named by its file name alone that would be the server of a `--journal-unit`
/// is refused, as two such files are ([`parse_inputs`]): their lines would merge unasked.
/// `NAME=PATH` names it (the unit's name to merge on purpose).
pub(super) fn refuse_unit_clash(args: &[String], units: &[String]) -> Result<(), ConfigError> {
    for arg in args {
        let (name, path) = split_input(arg);
        if name.is_some() || path == "-" {
            continue;
        }
        let n = server_name_of(std::path::Path::new(&path));
        if let Some(u) = units.iter().find(|u| journald::server_of(u) == n) {
            return Err(ConfigError(format!(
                "{path} would be server {n:?}, like --journal-unit {u}; name the file's server with NAME=PATH"
            )));
        }
    }
    Ok(())
}

fn check_readable(path: &std::path::Path) -> Result<(), ConfigError> {
    let cannot = |e: std::io::Error| ConfigError(format!("cannot read {}: {e}", path.display()));
    let m = std::fs::metadata(path).map_err(cannot)?;
    if m.is_dir() {
        return Err(ConfigError(format!(
            "{}: is a directory, not a log file",
            path.display()
        )));
    }
    // Only a regular file is opened to check it: opening a FIFO here would take (and lose) its
    // writer.
    if m.is_file() {
        std::fs::File::open(path).map_err(cannot)?;
    }
    Ok(())
}
