//! Integration tests: one binary, one module per behaviour. They run the real binary
//! (`CARGO_BIN_EXE_sglang-log-exporter`) on real files and real sockets.

mod api;
mod backfill;
mod cases;
mod census;
mod common;
mod contract;
mod discover;
mod follow;
mod formats;
pub mod gpu;
mod hostile;
mod hostile21;
mod hostile23;
mod hostile39;
mod inputs;
mod journald;
mod journald_export;
mod listen;
mod livepage;
mod logformat;
mod monitoring;
mod multinode;
mod once;
mod parallel;
mod probes;
mod promtools;
mod push;
mod repro;
mod requests;
mod resilience;
mod startup;
mod streams;
mod top;
mod variants;
mod webconfig;
mod wrappers;
