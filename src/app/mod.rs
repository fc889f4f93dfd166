//! Wiring: builds the configuration from the command line (`config.rs`: [`Config`], from the
//! inputs of `inputs.rs`) and runs the chosen mode: `--once` (`once.rs`) or live (`live.rs`:
//! its sources supervised by `supervise.rs`, the state file of `state_file.rs`, the process
//! limits of `limits.rs`).

mod config;
mod inputs;
mod limits;
mod live;
mod once;
mod state_file;
mod supervise;

pub use config::{gpu_config, load_patterns, timezone, Config, HttpConfig};
pub use inputs::{parse_inputs, Input};
pub use limits::fd_limit;
pub use live::{inputs_text, run_live, spawn_sources};
pub use once::{read_to_end, render, run_once, write_stdout, Written};

/// A start-up error: printed as `error: …` and exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);
