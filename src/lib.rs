//! sglang-log-exporter: follows SGLang server logs and republishes the scheduler's state
//! (KV-cache usage, running and queued requests, throughput, retractions) as Prometheus metrics.
//!
//! Pipeline, each top-level module in its place:
//!
//! * [`source`]: where lines come from (followed files and their rotation, stdin, journald
//!   units, pod-log discovery, the servers' API, the router's `/metrics`); a source hands its lines to a
//!   [`source::LineSink`] and never imports the pipeline.
//! * [`pipeline`]: the glue that carries a line from a source to the state (`Pipeline`: wrapper
//!   framing, stream prefixes, cleaning, parsing; `Ingest`: counting and applying, in log
//!   order, also on several threads for history; newest-first inputs read backwards).
//! * [`parse`]: one line to a [`record::Record`] (prefix, a foreign prefix, pattern file, fields, `server_args`,
//!   request records), pure, no I/O; [`record`] is its output type, a leaf module.
//! * [`state`]: current values per server, engine and rank (`series`: keys, servers, ranks;
//!   `apply`: one line into the state; `sources`: per-source counters, journal cursors, pod
//!   UIDs; `lifecycle`: caps and expiry), the log clock, readiness, the state file, and the
//!   self metrics' keys ([`state::SelfMetric`], [`state::SelfFamily`]); [`label`] bounds the
//!   length of every label value taken from the input.
//! * [`catalog`]: the registry of exposed families (name, HELP, type, unit, labels, what fills
//!   it) for every family the pattern file does not declare; writers and readers name families
//!   through it.
//! * [`gpu`]: NVML readings and which GPUs each server uses.
//! * [`view`] (what a scrape shows of the state), [`kv`] (a rank's KV pools: every share and
//!   bytes estimate, each pool against its own capacity), [`family`] (the exposition data model),
//!   [`readout`] (the numbers `top` and the live page pick out of families) and [`export`]:
//!   encoders (`metrics`, `openmetrics`, `valid`; `format`: each scrape's format and metric
//!   names, negotiated as SGLang's own `/metrics` does, `--web.names`), the Pushgateway, the live page, `--once`'s
//!   summary, and `export::server` (listen addresses, admission, TLS and basic auth, routes).
//! * Commands beside the main job: [`backfill`], [`check`], [`top`], [`generate`].
//! * [`clock`] (the wall clock for timestamps, the monotonic one for ages; the program's one
//!   [`clock::Clock`] is the state's, [`state::State::clock`], so tests step it), [`duration`]
//!   (durations in Prometheus's units, `d` and `w` included), [`cli`] (the
//!   command line, clap only), [`app`] (turns it into each part's configuration and runs the
//!   mode), [`stop`] (one stop signal for every thread), [`optfile`] (the one bounded reader of
//!   the files options name: keys, passwords, patterns, configs, PEM, the state file), [`ca`]
//!   (the one loader of CA certificates), [`auth`] (basic auth as the HTTP clients send it),
//!   [`prom_text`] (the one reader of the Prometheus text format: `top --url`, the router).
//!
//! No import circle, no lower module importing a higher one (sources never import exporters nor
//! the pipeline, the pipeline never imports exporters, the state never imports sources):
//! `tests/it/layout.rs` checks it.
//!
//! See `DESIGN.md` in the repository for the metric contract.
//!
//! Parsing one line (the parser is pure: no I/O, no allocation for a line it does not match):
//!
//! ```
//! use std::sync::Arc;
//! use sglang_log_exporter::parse::{patterns::Patterns, Parser};
//!
//! let patterns = Arc::new(Patterns::embedded().unwrap());
//! let mut parser = Parser::new(patterns.clone());
//! let line = "[2026-04-05 20:02:51 DP0 TP0] Decode batch, #running-req: 32, #token: 11179, \
//!             token usage: 0.08, cuda graph: True, gen throughput (token/s): 1635.11, #queue-req: 0";
//! let rec = parser.parse(line).unwrap();
//! assert_eq!((rec.ranks.dp, rec.ranks.tp), (Some(0), Some(0)));
//! let usage = patterns.metric_by_id("token_usage").unwrap();
//! assert_eq!(rec.get(usage), Some(0.08));
//! let running = patterns.metric_by_id("num_running_reqs").unwrap();
//! assert_eq!(rec.get(running), Some(32.0));
//! assert!(parser.parse("[2026-04-05 20:02:51] INFO: something else").is_none());
//! ```

#![warn(missing_docs)]

pub mod app;
pub mod auth;
pub mod backfill;
pub mod ca;
pub mod catalog;
pub mod check;
pub mod cli;
pub mod clock;
pub mod duration;
pub mod export;
pub mod family;
pub mod generate;
pub mod gpu;
pub mod kv;
pub mod label;
pub mod logging;
pub mod optfile;
pub mod parse;
pub mod pipeline;
pub mod prom_text;
pub mod readout;
pub mod record;
pub mod source;
pub mod state;
pub mod stop;
pub mod top;
pub mod view;
