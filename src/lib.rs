//! sglang-log-exporter: follows SGLang server logs and republishes the scheduler's state
//! (KV-cache usage, running and queued requests, throughput, retractions) as Prometheus metrics.
//!
//! Pipeline: [`source`] (files, stdin) → [`parse`] (prefix, patterns, fields) → [`state`]
//! (current values, idle policy, bounds) → [`export`] (`/metrics`). See `DESIGN.md` in the
//! repository for the metric contract.

pub mod app;
pub mod backfill;
pub mod check;
pub mod cli;
pub mod export;
pub mod family;
pub mod gpu;
pub mod parse;
pub mod record;
pub mod source;
pub mod state;
