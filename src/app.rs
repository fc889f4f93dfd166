//! Wiring: builds the configuration from the command line and runs the chosen mode.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use jiff::tz::TimeZone;

use crate::cli::{split_input, RunArgs};
use crate::export::{http, metrics, push, webconfig};
use crate::parse::patterns::{PatternError, Patterns};
use crate::parse::prefix::TimeResolver;
use crate::parse::Parser;
use crate::source::file::{follow, TailConfig};
use crate::source::journald::{self, JournalConfig};
use crate::source::{now_unix, server_name_of, stdin, Ingest};
use crate::state::{Shared, State, StateConfig};

/// A start-up error: printed as `error: …` and exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

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

/// Everything the main mode needs, validated.
pub struct Config {
    /// Compiled patterns.
    pub patterns: Arc<Patterns>,
    /// Inputs.
    pub inputs: Vec<Input>,
    /// State limits and idle policy.
    pub state: StateConfig,
    /// Zone of prefix times.
    pub tz: TimeZone,
    /// Date for time-only prefixes.
    pub date: Option<jiff::civil::Date>,
    /// Tailer settings.
    pub tail: TailConfig,
    /// GPU sampler settings; `None` with `--gpu.disable`.
    pub gpu: Option<crate::gpu::GpuConfig>,
    /// `--journal-unit` children (no units: none).
    pub journal: JournalConfig,
    /// Pushgateway settings (`--push.url`).
    pub push: Option<push::PushConfig>,
}

/// Reads the input arguments (`PATH`, `NAME=PATH`, `-`). With `finished` (the inputs are read
/// to their end: `--once`, `backfill`), a missing or unreadable file or a directory is an error
/// now rather than a source to wait for.
///
/// # Errors
/// A [`ConfigError`] for stdin given twice, an input that cannot be read (`finished`), or two
/// inputs whose file names give one server name (they would silently merge).
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
                        path.display()
                    )));
                }
                n
            }
        };
        inputs.push(Input::File { server, path });
    }
    Ok(inputs)
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

/// Loads the pattern file named on the command line, or the embedded one.
///
/// # Errors
/// A [`ConfigError`] naming the problem.
pub fn load_patterns(path: Option<&std::path::Path>) -> Result<Arc<Patterns>, ConfigError> {
    let p = match path {
        Some(p) => Patterns::from_file(p),
        None => Patterns::embedded(),
    };
    p.map(Arc::new).map_err(|e| match (path, &e) {
        (
            Some(path),
            PatternError::Yaml(_) | PatternError::Regex { .. } | PatternError::Invalid(_),
        ) => ConfigError(format!("{}: {e}", path.display())),
        _ => ConfigError(e.to_string()),
    })
}

/// Resolves `--timezone` (default: the host's zone).
///
/// # Errors
/// A [`ConfigError`] for an unknown zone name.
pub fn timezone(name: Option<&str>) -> Result<TimeZone, ConfigError> {
    match name {
        None => Ok(TimeZone::system()),
        Some("UTC") | Some("utc") => Ok(TimeZone::UTC),
        Some(n) => TimeZone::get(n).map_err(|e| ConfigError(format!("--timezone {n:?}: {e}"))),
    }
}

impl Config {
    /// Validates the main-mode arguments.
    ///
    /// # Errors
    /// A [`ConfigError`] for a bad pattern file, timezone or argument, or (with `--once`) an
    /// input that cannot be read.
    pub fn from_args(a: &RunArgs) -> Result<Config, ConfigError> {
        let patterns = load_patterns(a.read.patterns.as_deref())?;
        let tz = timezone(a.read.timezone.as_deref())?;
        let inputs = parse_inputs(&a.inputs, a.once)?;
        if a.poll_interval < std::time::Duration::from_millis(10) {
            return Err(ConfigError("--poll-interval must be at least 10ms".into()));
        }
        if a.read.max_line_bytes < 1024 {
            return Err(ConfigError("--max-line-bytes must be at least 1024".into()));
        }
        let journal = JournalConfig::new(
            &a.journal_units,
            &a.journal_files,
            &a.journal_directories,
            &a.journalctl,
            a.read.max_line_bytes,
        )
        .map_err(ConfigError)?;
        Ok(Config {
            journal,
            patterns,
            inputs,
            state: StateConfig {
                idle_after: a.read.idle_after.as_secs_f64(),
                ..StateConfig::default()
            },
            tz,
            date: a.read.date,
            tail: TailConfig {
                poll: a.poll_interval,
                max_line: a.read.max_line_bytes,
                once: a.once,
                deleted_grace: a.deleted_grace,
            },
            gpu: gpu_config(a)?,
            push: push::PushConfig::from_args(&a.push).map_err(ConfigError)?,
        })
    }

    fn ingest(&self, state: &Shared, source: &str, server: &str) -> Ingest {
        Ingest::new(
            Parser::new(self.patterns.clone()),
            state.clone(),
            source,
            server,
            TimeResolver::new(self.tz.clone(), self.date),
            self.tail.max_line,
        )
    }
}

/// The exposition text of the state: "now" is the latest input time when `input_clock` (a
/// finished input), else the wall clock.
pub fn render(state: &Shared, input_clock: bool) -> String {
    let s = crate::state::lock(state);
    let now = if input_clock {
        s.latest_input().unwrap_or_else(now_unix)
    } else {
        now_unix()
    };
    let fams = metrics::families(&s, now);
    drop(s);
    metrics::encode_text(&fams)
}

/// Reads every input of `cfg` to its end (files, stdin, `--journal-unit`s), then takes one GPU
/// sample; returns the state. `--once` and `top --snapshot` print it.
///
/// # Errors
/// A [`ConfigError`] when a journal cannot be read.
pub fn read_to_end(cfg: &Config) -> Result<Shared, ConfigError> {
    let state = State::shared(cfg.patterns.clone(), cfg.state.clone());
    let stop = AtomicBool::new(false);
    for input in &cfg.inputs {
        match input {
            Input::File { server, path } => {
                let mut ing = cfg.ingest(&state, &path.display().to_string(), server);
                follow(path, &mut ing, &cfg.tail, &stop);
            }
            Input::Stdin { server } => {
                let mut ing = cfg.ingest(&state, "-", server);
                stdin::read_to_end(&mut std::io::stdin().lock(), &mut ing, cfg.tail.max_line);
            }
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
    let text = render(&state, true);
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
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error.
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
    ExitCode::SUCCESS
}

/// The main mode: follow inputs and serve `/metrics` until SIGTERM or SIGINT.
///
/// # Errors
/// A [`ConfigError`] when the listen address is bad or cannot be bound.
pub fn run_live(cfg: Config, a: &RunArgs) -> Result<(), ConfigError> {
    let stop: Arc<AtomicBool> = Arc::new(AtomicBool::new(false));
    let cfg = Arc::new(cfg);
    let listen = if a.listen_address.is_empty() {
        None
    } else {
        Some(http::parse_listen(&a.listen_address).map_err(ConfigError)?)
    };
    let web = match &a.web_config_file {
        Some(p) => Some(webconfig::Reloader::new(p).map_err(ConfigError)?),
        None => None,
    };
    if !a.telemetry_path.starts_with('/') {
        return Err(ConfigError("--web.telemetry-path must start with /".into()));
    }
    let state = spawn_sources(&cfg, &stop)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ConfigError(format!("cannot start the runtime: {e}")))?;
    let render_state = state.clone();
    let render_fn: http::Render = Arc::new(move || render(&render_state, false));
    let pusher = match &cfg.push {
        Some(p) => Some(
            push::spawn(p.clone(), state.clone(), render_fn.clone())
                .map_err(|e| ConfigError(format!("cannot start the pusher: {e}")))?,
        ),
        None => None,
    };
    let telemetry = a.telemetry_path.clone();
    rt.block_on(async move {
        let shutdown = shutdown_signal();
        match listen {
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(&addr)
                    .await
                    .map_err(|e| ConfigError(format!("cannot listen on {addr}: {e}")))?;
                tracing::info!(address = %addr, path = %telemetry, "serving metrics");
                let app = http::router(&telemetry, render_fn);
                webconfig::serve(listener, app, web, shutdown)
                    .await
                    .map_err(|e| ConfigError(format!("HTTP server failed: {e}")))?;
            }
            None => shutdown.await,
        }
        Ok::<(), ConfigError>(())
    })?;
    stop.store(true, Ordering::Relaxed);
    if let Some(p) = pusher {
        p.stop();
    }
    tracing::info!("shut down");
    Ok(())
}

/// Starts the reader thread of every input of `cfg` (files, stdin, `--journal-unit`s) and the
/// GPU sampler, all feeding one new state, and returns that state; they stop when `stop` is set.
/// The main mode serves the state over HTTP, `top` draws it.
///
/// # Errors
/// A [`ConfigError`] when a thread cannot be started.
pub fn spawn_sources(cfg: &Arc<Config>, stop: &Arc<AtomicBool>) -> Result<Shared, ConfigError> {
    let state = State::shared(cfg.patterns.clone(), cfg.state.clone());
    for input in cfg.inputs.clone() {
        let (cfg, state, stop) = (cfg.clone(), state.clone(), stop.clone());
        match input {
            Input::File { server, path } => {
                let source = path.display().to_string();
                spawn_source(format!("follow {source}"), move || {
                    supervise(&source, &stop, || {
                        let mut ing = cfg.ingest(&state, &source, &server);
                        follow(&path, &mut ing, &cfg.tail, &stop);
                    })
                })?;
            }
            Input::Stdin { server } => spawn_source("stdin".into(), move || {
                let mut ing = cfg.ingest(&state, "-", &server);
                stdin::read_to_end(&mut std::io::stdin().lock(), &mut ing, cfg.tail.max_line);
                tracing::info!("stdin ended; serving the last state");
            })?,
        }
    }
    for unit in cfg.journal.units.clone() {
        let (cfg, state, stop) = (cfg.clone(), state.clone(), stop.clone());
        spawn_source(format!("journal {unit}"), move || {
            let source = journald::source_of(&unit);
            supervise(&source, &stop, || {
                let mut ing = cfg.ingest(&state, &source, &journald::server_of(&unit));
                journald::supervise(&cfg.journal, &unit, &mut ing, &state, &stop);
            })
        })?;
    }
    if let Some(g) = &cfg.gpu {
        crate::gpu::spawn(g.clone(), state.clone(), stop.clone())
            .map_err(|e| ConfigError(format!("cannot start the GPU sampler: {e}")))?;
    }
    Ok(state)
}

/// Starts a source's reader thread.
fn spawn_source(name: String, f: impl FnOnce() + Send + 'static) -> Result<(), ConfigError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map(drop)
        .map_err(|e| ConfigError(format!("cannot start the thread {name}: {e}")))
}

/// Runs a source until it returns normally (stop requested); a panic in it (a bug of ours) is
/// logged and the source restarted after a pause, so one input's failure never stops the others
/// or the server.
fn supervise(source: &str, stop: &AtomicBool, mut run: impl FnMut()) {
    loop {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut run)) {
            Ok(()) => return,
            Err(_) => {
                tracing::error!(
                    source,
                    "the reader of this source failed (a bug); restarting it in 5 s"
                );
                std::thread::sleep(std::time::Duration::from_secs(5));
                if stop.load(Ordering::Relaxed) {
                    return;
                }
            }
        }
    }
}

/// Completes on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {},
            _ = term.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
    tracing::info!("shutting down");
}

/// The GPU sampler's settings from `--gpus` and `--gpu.*`; `None` with `--gpu.disable`.
///
/// # Errors
/// A [`ConfigError`] for a malformed `--gpus` argument.
pub fn gpu_config(a: &RunArgs) -> Result<Option<crate::gpu::GpuConfig>, ConfigError> {
    if a.gpu_disable {
        return Ok(None);
    }
    let explicit = a
        .gpus
        .iter()
        .map(|g| crate::gpu::correlate::parse_explicit(g))
        .collect::<Result<Vec<_>, _>>()
        .map_err(ConfigError)?;
    Ok(Some(crate::gpu::GpuConfig {
        library: a.gpu_nvml_library.clone(),
        interval: a.gpu_interval,
        retry: a.gpu_retry_interval,
        proc_root: a.gpu_proc_root.clone(),
        explicit,
    }))
}
