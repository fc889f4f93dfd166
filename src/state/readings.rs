//! What the state keeps of SGLang's HTTP API ([`crate::source::api`]) beside the log's values:
//! one answer as read ([`ApiReading`]), a server's API status and a rank's values from it. Plain
//! data, below both the servers that hold it ([`super::series`]) and the code that applies it
//! ([`super::live`]).

use crate::record::ServerArgs;

/// One answer of a server's API, read into metric values (see `source::api::shapes`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ApiReading {
    /// The load endpoint that answered: `/v1/loads` or `/get_load`.
    pub endpoint: &'static str,
    /// `/server_info`, when it answered (the last answer is kept by the poller).
    pub info: Option<ServerInfo>,
    /// One entry per DP rank, in the order the API lists them.
    pub loads: Vec<DpLoad>,
}

/// What `/server_info` says of a server: its arguments and sizes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerInfo {
    /// The arguments, in the words of a `server_args` log line.
    pub args: ServerArgs,
    /// `ep_size` (the `EPn` tag's range), when the server has one above 1.
    pub ep_size: Option<u32>,
    /// `max_total_num_tokens`: the KV pool's capacity in tokens (scheduler info).
    pub max_total_num_tokens: Option<f64>,
}

/// One DP rank's load: values by the pattern file's metric ids (`num_running_reqs`, …).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DpLoad {
    /// `dp_rank` as the API numbers it (0 for a server without data parallelism).
    pub dp_rank: u32,
    /// (metric id, value); a metric the answer does not give exactly is left out.
    pub values: Vec<(&'static str, f64)>,
    /// Values the answer gave out of their range (left out of `values`).
    pub bad: u32,
}

/// The state of a server's API probe.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiStatus {
    /// Whether the last request got an answer that could be read.
    pub up: bool,
    /// Unix seconds (wall clock) of the last answer read.
    pub last_success: Option<f64>,
    /// Unix seconds (wall clock) when `up` last changed (or the first answer).
    pub changed_at: f64,
    /// `ep_size` from `/server_info`, for the rank a DP rank's values go to.
    pub(super) ep_size: Option<u32>,
    /// Whether the server's arguments came from `/server_info` (then a new answer replaces
    /// them: the server restarted with another layout) rather than a `server_args` line.
    pub(super) args_from_api: bool,
    /// Whether the contradiction with the log was warned about.
    pub(super) warned: bool,
    /// Whether the server-scope capacity came from `/server_info` (then a new answer replaces
    /// it) rather than the log's capacity line (which it never overwrites).
    pub(super) capacity_from_api: bool,
}

/// A rank's values from the API: by [`crate::parse::patterns::MetricId`], NaN where the API
/// gives none.
#[derive(Debug, Clone, PartialEq)]
pub struct Live {
    /// The DP rank of the answer they came from.
    pub dp_rank: u32,
    /// The port of the poller that gave them where the server has one per DP rank (a Rust
    /// server per rank, [`crate::state::State::from_logs_targets`]); `None` for the server's
    /// one poller.
    pub port: Option<u16>,
    /// Whether that per-rank poller's last poll was answered (a whole server's poller tells
    /// it in [`ApiStatus::up`]).
    pub up: bool,
    /// Values by metric id.
    pub values: Box<[f64]>,
}
