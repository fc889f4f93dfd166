//! `--once` (and `top --snapshot`): every input read to its end into a new state, its
//! exposition written to stdout (or pushed) and its summary to stderr.

use std::io::Write;
use std::process::ExitCode;

use super::inputs::Input;
use super::state_file::restore_state;
use super::{Config, ConfigError};
use crate::clock::now_unix;
use crate::export::{metrics, push};
use crate::pipeline::order;
use crate::source::discover;
use crate::source::file::{TailConfig, Tailer};
use crate::source::journald;
use crate::state::{Shared, State};
use crate::stop::Stop;

/// The exposition text of the state: "now" is the log clock when `input_clock` (a finished
/// input), else the wall clock. Expired engines and retired servers are removed first. Text
/// 0.0.4 in the fixed style of `--web.names` (colons under `upstream`), with the renamed
/// families' old names under `--web.old-names`.
pub fn render(state: &Shared, input_clock: bool, http: &super::config::HttpConfig) -> String {
    let mut s = crate::state::lock(state);
    let wall = s.clock().now().wall;
    let now = if input_clock {
        s.log_clock().unwrap_or(wall)
    } else {
        wall
    };
    s.expire(now);
    let fams = metrics::families(&s, now);
    drop(s);
    let v = crate::export::format::plain(http.names);
    metrics::encode_served(fams, v, http.old_names)
}

/// How the file at `path` is parsed (by its size now; see [`crate::pipeline::parallel::plan`]).
fn plan_for(cfg: &Config, path: &std::path::Path) -> crate::pipeline::parallel::Plan {
    let len = std::fs::metadata(path).ok().map(|m| m.len());
    crate::pipeline::parallel::plan(cfg.threads, len)
}

/// Reads every input of `cfg` to its end (files, stdin, the journal's current invocations)
/// into a new state, then samples the GPUs once: what `--once` and `top --snapshot` show.
///
/// # Errors
/// A [`ConfigError`] when a journal unit cannot be read, or a newest-first stream cannot be
/// spooled ([`order::SpoolError`]).
pub fn read_to_end(cfg: &Config) -> Result<Shared, ConfigError> {
    let state = State::shared(cfg.patterns.clone(), cfg.state.clone());
    // Read, never written: `--once` reports on its inputs and leaves the service's file alone.
    restore_state(cfg, &state);
    let stop = Stop::new();
    for input in &cfg.inputs {
        match input {
            Input::File { server, path } => {
                let mut ing = cfg
                    .ingest(&state, &crate::source::path_text(path), server)
                    .parallel(plan_for(cfg, path));
                let path_name = crate::source::path_text(path);
                let read = order::read_once(path, &mut ing, cfg.tail.max_line)
                    .map_err(|e| ConfigError(format!("{path_name}: {e}")))?;
                if !read {
                    Tailer::new(path, cfg.tail.clone()).run(&mut ing, &stop);
                }
                ing.flush();
            }
            Input::Stdin { server } => {
                let mut ing = cfg.ingest(&state, "-", server);
                order::read_stream(&mut std::io::stdin().lock(), &mut ing, cfg.tail.max_line)
                    .map_err(|e| ConfigError(format!("-: {e}")))?;
            }
        }
    }
    if let Some(d) = &cfg.discover {
        for (f, pod) in discover::snapshot(d, &cfg.input_names(), &state) {
            discover::register(&mut crate::state::lock(&state), &f.server, pod.as_ref());
            let mut ing = cfg
                .ingest(&state, &f.source, &f.server)
                .parallel(plan_for(cfg, &f.path));
            let tail = TailConfig {
                char_devices: false,
                ..cfg.tail.clone()
            };
            Tailer::new(&f.path, tail).run(&mut ing, &stop);
            ing.flush();
        }
    }
    for unit in &cfg.journal.units {
        let mut ing = cfg.ingest(
            &state,
            &journald::source_of(unit),
            &journald::server_of(unit),
        );
        journald::read_once(&cfg.journal, unit, &mut ing)
            .map_err(|e| ConfigError(format!("{unit}: {e}")))?;
    }
    // Every input is read: a restored server none of them named is not one of theirs.
    crate::state::lock(&state).drop_unclaimed();
    if let Some(g) = &cfg.gpu {
        crate::gpu::Sampler::new(g.clone()).sample(&state);
    }
    Ok(state)
}

/// `--once`: read every input to its end, print the exposition, exit 0.
pub fn run_once(cfg: &Config) -> ExitCode {
    let state = match read_to_end(cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let text = render(&state, true, &cfg.http);
    if let Some(p) = &cfg.push {
        // Cron-style: one push (with retries), no delete; the exit status tells the outcome.
        let ok = push::Pusher::new(p.clone(), state.clone()).push(&text, |d| {
            std::thread::sleep(d);
            true
        });
        return if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    if write_stdout(text.as_bytes()) == Written::Failed {
        return ExitCode::FAILURE;
    }
    if cfg.summary {
        // After the exposition, on stderr: the last lines a person sees, never in the way of a
        // script that reads stdout. `--log.level warn` (or error) leaves it out.
        let s = crate::state::lock(&state);
        let now = s.log_clock().unwrap_or_else(now_unix);
        let text = crate::export::summary::render(&s, now, &cfg.tz);
        drop(s);
        let _ = std::io::stderr().write_all(text.as_bytes());
    }
    ExitCode::SUCCESS
}

/// What became of output written to stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
    /// All of it was written.
    Done,
    /// The reader closed the pipe (`| head`): its choice, not a failure.
    Closed,
    /// Writing failed (a full disk, a closed file); said on stderr. A cron job must not take
    /// an empty file for a result.
    Failed,
}

/// Writes `bytes` to stdout and flushes.
pub fn write_stdout(bytes: &[u8]) -> Written {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Ok(()) => Written::Done,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Written::Closed,
        Err(e) => {
            eprintln!("error: writing the output failed: {e}");
            Written::Failed
        }
    }
}
