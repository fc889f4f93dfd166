//! Wiring: builds the configuration from the command line and runs the chosen mode.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use jiff::tz::TimeZone;

use crate::cli::{split_input, RunArgs};
use crate::clock::now_unix;
use crate::export::server::cache::Exposition;
use crate::export::server::{self, listen, routes, webconfig, worker};
use crate::export::{live, metrics, notify, push, signals};
use crate::parse::patterns::{PatternError, Patterns};
use crate::parse::prefix::TimeResolver;
use crate::parse::Parser;
use crate::pipeline::{order, Ingest, Pipeline};
use crate::source::api::{self, ApiConfig, ApiTarget};
use crate::source::discover::{self, DiscoverConfig, Discovery, Follow};
use crate::source::file::{TailConfig, Tailer};
use crate::source::journald::{self, JournalConfig};
use crate::source::{server_name_of, stdin};
use crate::state::{persist, SelfMetric, Shared, State, StateConfig};
use crate::stop::Stop;

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
    /// `--input.glob` discovery; `None` without globs.
    pub discover: Option<DiscoverConfig>,
    /// Pushgateway settings (`--push.url`).
    pub push: Option<push::PushConfig>,
    /// `--sglang.url` pollers; `None` without one.
    pub api: Option<ApiConfig>,
    /// `--input.json-message-key`.
    pub json_message_key: Option<String>,
    /// The metrics endpoint.
    pub http: HttpConfig,
    /// `--state.dir`.
    pub state_dir: Option<PathBuf>,
    /// Threads that parse a file read to its end (`--threads` as given: `0` is the default plan,
    /// see [`crate::pipeline::parallel::plan`]).
    pub threads: usize,
    /// `--once` writes the human summary to stderr (`--log.level` info or more verbose).
    pub summary: bool,
}

/// The metrics endpoint's settings, validated.
#[derive(Clone)]
pub struct HttpConfig {
    /// `--web.listen-address` (repeatable) resolved; empty for no server (`""`).
    pub listen: Vec<listen::Listen>,
    /// `--web.telemetry-path`.
    pub telemetry_path: String,
    /// `--web.config.file`, loaded.
    pub web: Option<webconfig::Reloader>,
    /// Connections served at once: `--web.max-connections`, at most half the open-file limit
    /// (the rest is kept for followed files and journalctl pipes).
    pub max_connections: usize,
    /// `--web.systemd-socket`: the sockets systemd passes instead of `listen`.
    pub systemd_socket: bool,
}

impl HttpConfig {
    fn from_args(a: &RunArgs) -> Result<HttpConfig, ConfigError> {
        let listen = a
            .listen_address
            .iter()
            .filter(|a| !a.is_empty())
            .map(|a| listen::parse_listen(a).map_err(ConfigError))
            .collect::<Result<Vec<_>, _>>()?;
        routes::check_telemetry_path(&a.telemetry_path).map_err(ConfigError)?;
        let web = match &a.web_config_file {
            Some(p) => Some(webconfig::Reloader::new(p).map_err(ConfigError)?),
            None => None,
        };
        if a.max_connections == 0 {
            return Err(ConfigError(
                "--web.max-connections must be at least 1".into(),
            ));
        }
        Ok(HttpConfig {
            listen,
            telemetry_path: a.telemetry_path.clone(),
            web,
            max_connections: a.max_connections,
            systemd_socket: a.systemd_socket,
        })
    }
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
fn refuse_unit_clash(args: &[String], units: &[String]) -> Result<(), ConfigError> {
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
        let gpu = gpu_config(a, &patterns)?;
        let tz = timezone(a.read.timezone.as_deref())?;
        let inputs = parse_inputs(&a.inputs, a.once)?;
        if a.poll_interval < std::time::Duration::from_millis(10) {
            return Err(ConfigError("--poll-interval must be at least 10ms".into()));
        }
        if a.read.max_line_bytes < 1024 {
            return Err(ConfigError("--max-line-bytes must be at least 1024".into()));
        }
        let journal = JournalConfig::new(
            &a.journal.units,
            &a.journal.files,
            &a.journal.directories,
            &a.journal.journalctl,
            a.read.max_line_bytes,
        )
        .map_err(ConfigError)?;
        refuse_unit_clash(&a.inputs, &journal.units)?;
        Ok(Config {
            journal,
            discover: discover_config(a)?,
            patterns,
            inputs,
            state: StateConfig {
                idle_after: a.read.idle_after.as_secs_f64(),
                retired_expiry: a.discover.expiry.as_secs_f64(),
                ..StateConfig::default()
            },
            tz,
            date: a.read.date,
            tail: TailConfig {
                poll: a.poll_interval,
                max_line: a.read.max_line_bytes,
                once: a.once,
                deleted_grace: a.deleted_grace,
                char_devices: true,
            },
            gpu,
            push: push::PushConfig::from_args(&a.push).map_err(ConfigError)?,
            api: api_config(a)?,
            json_message_key: a.read.json_message_key.clone(),
            http: HttpConfig::from_args(a)?,
            // `--once` only reads the state file: no write probe.
            state_dir: state_dir(a.state_dir.as_deref(), !a.once)?,
            summary: matches!(a.log_level.as_str(), "info" | "debug" | "trace"),
            threads: a.read.threads,
        })
    }

    /// Server names of the explicit inputs (discovered files are named apart from them).
    /// The server names the inputs and `--journal-unit`s hold: a discovered file is never
    /// given one of them (see [`discover::Naming`]).
    fn input_names(&self) -> Vec<String> {
        let units = self.journal.units.iter().map(|u| journald::server_of(u));
        self.inputs
            .iter()
            .map(|i| match i {
                Input::File { server, .. } | Input::Stdin { server } => server.clone(),
            })
            .chain(units)
            .collect()
    }

    fn ingest(&self, state: &Shared, source: &str, server: &str) -> Ingest {
        let pipeline = Pipeline::new(
            Parser::new(self.patterns.clone()),
            self.tail.max_line,
            self.json_message_key.as_deref(),
        );
        Ingest::new(
            pipeline,
            state.clone(),
            source,
            server,
            TimeResolver::new(self.tz.clone(), self.date),
        )
    }
}

/// The exposition text of the state: "now" is the log clock when `input_clock` (a finished
/// input), else the wall clock. Expired engines and retired servers are removed first.
pub fn render(state: &Shared, input_clock: bool) -> String {
    let mut s = crate::state::lock(state);
    let now = if input_clock {
        s.log_clock().unwrap_or_else(now_unix)
    } else {
        now_unix()
    };
    s.expire(now);
    let fams = metrics::families(&s, now);
    drop(s);
    metrics::encode_text(&fams)
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

/// Restores the startup facts and journal cursors of `--state.dir`'s file, if given; a file
/// that cannot be used is warned about and ignored. The servers the inputs name (files, stdin,
/// units) are claimed at once; other restored ones (a removed unit, a gone pod, another
/// exporter's) are removed `--input.expiry` later unless a discovered source or a line names
/// them.
fn restore_state(cfg: &Config, state: &Shared) {
    let Some(dir) = cfg.state_dir.as_deref() else {
        return;
    };
    let file = persist::path(dir);
    let mut s = crate::state::lock(state);
    if let Err(e) = persist::restore(&mut s, &file, now_unix()) {
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

/// The main mode: follow inputs and serve `/metrics` until SIGTERM or SIGINT (SIGHUP is not an
/// exit: see [`signals`]). On every way out the pusher is stopped, so the Pushgateway group is
/// deleted unless `--push.keep-on-exit`.
///
/// # Errors
/// A [`ConfigError`] when a thread cannot start or the listen address cannot be bound.
pub fn run_live(cfg: Config) -> Result<(), ConfigError> {
    tracing::info!(version = crate::cli::VERSION, inputs = %inputs_text(&cfg), "starting sglang-log-exporter");
    raise_fd_limit();
    warn_task_limit(&cfg);
    let mut cfg = cfg;
    cfg.http.max_connections = cfg
        .http
        .max_connections
        .min((fd_limit() / 2).max(16) as usize);
    let state = State::shared(cfg.patterns.clone(), cfg.state.clone());
    restore_state(&cfg, &state);
    let stop = Arc::new(Stop::new());
    let cfg = Arc::new(cfg);
    let saver = cfg
        .state_dir
        .as_ref()
        .map(|dir| spawn_saver(persist::path(dir), state.clone(), stop.clone()))
        .transpose()?;
    // Before the log sources, so readiness waits for each API's first poll too.
    if let Some(a) = &cfg.api {
        api::spawn(a.clone(), state.clone(), stop.clone())
            .map_err(|e| ConfigError(format!("cannot start the SGLang API poller: {e}")))?;
    }
    spawn_sources(&cfg, &state, &stop)?;
    if let Some(g) = &cfg.gpu {
        crate::gpu::spawn(g.clone(), state.clone(), stop.clone())
            .map_err(|e| ConfigError(format!("cannot start the GPU sampler: {e}")))?;
    }
    let exposition = Arc::new(Exposition::new(state.clone()));
    let live = Arc::new(live::Live::new(state.clone(), &cfg.http.telemetry_path));
    if !cfg.http.listen.is_empty() || cfg.http.systemd_socket {
        live::spawn_sampler(live.clone(), stop.clone())
            .map_err(|e| ConfigError(format!("cannot start the page sampler: {e}")))?;
    }
    notify::spawn(state.clone(), status_text(&cfg), stop.clone())
        .map_err(|e| ConfigError(format!("cannot start the systemd notifier: {e}")))?;
    let pusher = match &cfg.push {
        Some(p) => {
            let x = exposition.clone();
            let render: push::Render =
                Arc::new(move || String::from_utf8_lossy(&x.text()).into_owned());
            Some(
                push::spawn(p.clone(), state.clone(), render)
                    .map_err(|e| ConfigError(format!("cannot start the pusher: {e}")))?,
            )
        }
        None => None,
    };
    let served = serve(&cfg, exposition, live);
    notify::stopping();
    stop.set();
    if let Some(p) = pusher {
        p.stop();
    }
    if let Some(s) = saver {
        // It writes the file once more as it ends.
        let _ = s.join();
    }
    tracing::info!("shut down");
    served
}

/// What `cfg` reads, for the start-up line: `file /var/log/a.log, journal unit b.service,
/// stdin, glob /var/log/pods/*/*/*.log, api http://host:30000` (a URL's password left out).
pub fn inputs_text(cfg: &Config) -> String {
    let mut out: Vec<String> = cfg
        .inputs
        .iter()
        .map(|i| match i {
            Input::File { path, .. } => format!("file {}", crate::source::path_text(path)),
            Input::Stdin { .. } => "stdin".into(),
        })
        .collect();
    out.extend(
        cfg.journal
            .units
            .iter()
            .map(|u| format!("journal unit {u}")),
    );
    if let Some(d) = &cfg.discover {
        out.extend(d.globs.iter().map(|g| format!("glob {g}")));
    }
    for t in cfg.api.iter().flat_map(|a| &a.targets) {
        let mut u = t.base.clone();
        let _ = u.set_password(None);
        out.push(format!("api {u}"));
    }
    if out.is_empty() {
        return "none".into();
    }
    out.join(", ")
}

/// `STATUS=` for systemd: what `cfg` follows and where it serves.
fn status_text(cfg: &Config) -> String {
    let files = cfg
        .inputs
        .iter()
        .filter(|i| matches!(i, Input::File { .. }))
        .count();
    let globs = cfg.discover.as_ref().map_or(0, |d| d.globs.len());
    let listen: Vec<String> = if cfg.http.systemd_socket {
        vec!["the systemd socket".into()]
    } else {
        cfg.http.listen.iter().map(|l| l.to_string()).collect()
    };
    notify::status_text(files, cfg.journal.units.len(), globs, &listen)
}

/// Serves the routes of [`routes::router`] on every listen address (or just waits, without one)
/// until a shutdown signal.
fn serve(
    cfg: &Config,
    exposition: Arc<Exposition>,
    live: Arc<live::Live>,
) -> Result<(), ConfigError> {
    // Two async workers: connections are few and cheap; encoding runs on a thread of its own.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ConfigError(format!("cannot start the runtime: {e}")))?;
    let web = cfg.http.web.clone();
    rt.block_on(async move {
        let shutdown = signals::shutdown(web.clone());
        if cfg.http.listen.is_empty() && !cfg.http.systemd_socket {
            shutdown.await;
            return Ok(());
        }
        let mut listeners = Vec::new();
        if cfg.http.systemd_socket {
            for l in crate::export::sdsocket::listeners().map_err(ConfigError)? {
                let l = tokio::net::TcpListener::from_std(l)
                    .map_err(|e| ConfigError(format!("--web.systemd-socket: {e}")))?;
                let bound = l.local_addr().map_or("?".into(), |a| a.to_string());
                tracing::info!(address = %bound, path = %cfg.http.telemetry_path, "serving metrics on the socket systemd passed");
                listeners.push(l);
            }
        }
        let addresses = if cfg.http.systemd_socket {
            &[][..]
        } else {
            &cfg.http.listen[..]
        };
        for &addr in addresses {
            let l = listen::bind(addr)
                .and_then(tokio::net::TcpListener::from_std)
                .map_err(|e| ConfigError(format!("cannot listen on {addr}: {e}")))?;
            let bound = l.local_addr().map_or(addr.to_string(), |a| a.to_string());
            tracing::info!(address = %bound, path = %cfg.http.telemetry_path, "serving metrics");
            listeners.push(l);
        }
        // Threads for the encodings and the live page's status, started now: one that the
        // system refuses later (followers used up `TasksMax`) would fail scrapes.
        let thread = |name| {
            worker::Worker::start(name, 1)
                .map_err(|e| ConfigError(format!("cannot start the thread {name}: {e}")))
        };
        let (encoder, status) = (thread("http-encode")?, thread("http-status")?);
        let app = routes::router(&cfg.http.telemetry_path, exposition, live, encoder, status);
        server::serve(listeners, app, web, cfg.http.max_connections, shutdown)
            .await
            .map_err(|e| ConfigError(format!("HTTP server failed: {e}")))
    })
}

/// Starts a reader thread for every input and `--journal-unit`, applying to `state`, until
/// `stop` is set (each restarted where it stopped after a failure, see [`supervise`]).
///
/// # Errors
/// A [`ConfigError`] when a thread cannot be started.
pub fn spawn_sources(
    cfg: &Arc<Config>,
    state: &Shared,
    stop: &Arc<Stop>,
) -> Result<(), ConfigError> {
    // Readiness waits for the files, the units and the first scan (stdin may never end), and
    // for the files and units to be readable.
    let readiness = crate::state::lock(state).readiness().clone();
    for input in &cfg.inputs {
        if let Input::File { path, .. } = input {
            readiness.require(&crate::source::path_text(path));
        }
    }
    for unit in &cfg.journal.units {
        readiness.require(&journald::source_of(unit));
    }
    if !cfg.journal.units.is_empty() && !crate::source::access::may_read_journal() {
        // journalctl then shows only this user's own entries and exits 0: nothing fails.
        tracing::warn!(
            "{}; until then the --journal-units' entries cannot be read",
            crate::source::access::JOURNAL_GROUP_HINT
        );
    }
    if cfg.discover.is_some() {
        readiness.expect(discover::FIRST_SCAN);
    }
    for input in cfg.inputs.clone() {
        let (cfg, state, stop) = (cfg.clone(), state.clone(), stop.clone());
        match input {
            Input::File { server, path } => {
                let source = crate::source::path_text(&path);
                let tail = cfg.tail.clone();
                tail_file(&cfg, tail, &state, stop, (&source, &server), &path)
                    .map_err(|e| ConfigError(format!("cannot follow {source}: {e}")))?;
            }
            Input::Stdin { server } => spawn_source("stdin".into(), move || {
                let mut ing = cfg.ingest(&state, "-", &server);
                stdin::read_to_end(&mut std::io::stdin().lock(), &mut ing, cfg.tail.max_line);
                tracing::info!("stdin ended; serving the last state");
            })?,
        }
    }
    if let Some(d) = cfg.discover.clone() {
        let spawn_cfg = cfg.clone();
        let spawn_state = state.clone();
        let spawn: discover::Spawn =
            Box::new(move |f, own| spawn_follower(&spawn_cfg, &spawn_state, f, own));
        let discovery = Discovery::new(d, state.clone(), spawn, &cfg.input_names());
        let stop = stop.clone();
        spawn_source("discovery".into(), move || discovery.run(&stop))?;
    }
    for unit in cfg.journal.units.clone() {
        let (cfg, state, stop) = (cfg.clone(), state.clone(), stop.clone());
        spawn_source(format!("journal {unit}"), move || {
            let source = journald::source_of(&unit);
            let mut ing = cfg.ingest(&state, &source, &journald::server_of(&unit));
            // The cursor outlives a restart: the new child goes on after the last entry read.
            let mut cursor: Option<String> = None;
            supervise(
                &mut ing,
                &stop,
                &mut cursor,
                |c, ing| journald::follow_unit(&cfg.journal, &unit, ing, &state, &stop, c),
                |_| {},
            );
        })?;
    }
    Ok(())
}

/// Starts the follower of a discovered file, as a file input's, until `stop` (its own: set
/// when the file is gone, or when the exporter stops).
fn spawn_follower(
    cfg: &Config,
    state: &Shared,
    f: &Follow,
    stop: Arc<Stop>,
) -> std::io::Result<crate::source::pool::Handle> {
    // A discovered path is read only while it is a log file: should a device take its place
    // (a symlink replaced), it is not read.
    let tail = TailConfig {
        char_devices: false,
        ..cfg.tail.clone()
    };
    tail_file(cfg, tail, state, stop, (&f.source, &f.server), &f.path)
}

/// Follows the file at `path` as `source` of `server` until `stop` with `tail`'s settings, on
/// the threads of the file-following pool ([`crate::source::follow`]: a panic restarts the
/// tailer from where it was, as `supervise` does).
fn tail_file(
    cfg: &Config,
    tail: TailConfig,
    state: &Shared,
    stop: Arc<Stop>,
    (source, server): (&str, &str),
    path: &std::path::Path,
) -> std::io::Result<crate::source::pool::Handle> {
    let ing = cfg.ingest(state, source, server);
    let tailer = Tailer::new(path, tail);
    crate::source::follow::start(crate::source::pool::global(), path, tailer, ing, stop)
}

/// The API pollers from `--sglang.*`; `None` without `--sglang.url`.
fn api_config(a: &RunArgs) -> Result<Option<ApiConfig>, ConfigError> {
    let x = &a.api;
    if x.api_urls.is_empty() {
        return Ok(None);
    }
    if a.once {
        return Err(ConfigError(
            "--sglang.url polls live servers: it has no place in --once (which reads logs to their end)".into(),
        ));
    }
    let mut targets: Vec<ApiTarget> = Vec::new();
    for u in &x.api_urls {
        let t = ApiTarget::parse(u).map_err(ConfigError)?;
        if targets.iter().any(|o| o.server == t.server) {
            return Err(ConfigError(format!(
                "--sglang.url: two URLs for server {:?} (name them NAME=URL)",
                t.server
            )));
        }
        targets.push(t);
    }
    if x.api_interval < std::time::Duration::from_millis(100) {
        return Err(ConfigError(
            "--sglang.interval must be at least 100ms".into(),
        ));
    }
    // Unset, it is 3 s or the interval where that is shorter (as Prometheus' scrape_timeout);
    // given, it must fit in the interval.
    let timeout = x
        .api_timeout
        .unwrap_or(x.api_interval.min(std::time::Duration::from_secs(3)));
    if timeout.is_zero() || timeout > x.api_interval {
        return Err(ConfigError(
            "--sglang.timeout must be above 0 and at most --sglang.interval".into(),
        ));
    }
    let api_key = match &x.api_key_file {
        Some(p) => {
            let k = crate::optfile::read_text(p, crate::optfile::Kind::Secret)
                .map_err(|e| ConfigError(format!("--sglang.api-key-file {}: {e}", p.display())))?;
            let k = k.trim_end_matches(['\n', '\r']).to_string();
            // A header value: visible ASCII, bounded (the key itself is never printed).
            let header_safe = k.bytes().all(|b| b.is_ascii_graphic());
            if k.is_empty() || k.len() > 4096 || !header_safe {
                return Err(ConfigError(format!(
                    "--sglang.api-key-file {}: not one key on one line (1 to 4096 visible \
                     ASCII characters)",
                    p.display()
                )));
            }
            Some(k)
        }
        None => None,
    };
    Ok(Some(ApiConfig {
        targets,
        interval: x.api_interval,
        timeout,
        api_key,
    }))
}

/// The discovery settings from `--input.*`; `None` without `--input.glob`.
///
/// # Errors
/// A [`ConfigError`] for a bad pattern or limit, or container names without a glob.
fn discover_config(a: &RunArgs) -> Result<Option<DiscoverConfig>, ConfigError> {
    let d = &a.discover;
    if d.globs.is_empty() {
        if !d.containers.is_empty() {
            return Err(ConfigError(
                "--input.kubernetes-container needs --input.glob (e.g. '/var/log/pods/*/*/*.log')"
                    .into(),
            ));
        }
        return Ok(None);
    }
    DiscoverConfig::new(
        &d.globs,
        &d.containers,
        d.max_files,
        d.scan_interval,
        a.deleted_grace,
        d.expiry,
    )
    .map(Some)
    .map_err(ConfigError)
}

/// How often the state file is written while the state changes.
const SAVE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Starts the thread that writes the state file when the state changed (at most every
/// [`SAVE_EVERY`]) and once more when `stop` is set.
fn spawn_saver(
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

/// Checks `--state.dir`: an existing directory, writable when `write` (a private probe file,
/// never through a planted symlink).
fn state_dir(dir: Option<&std::path::Path>, write: bool) -> Result<Option<PathBuf>, ConfigError> {
    let Some(dir) = dir else {
        return Ok(None);
    };
    let m = std::fs::metadata(dir)
        .map_err(|e| ConfigError(format!("--state.dir {}: {e}", dir.display())))?;
    if !m.is_dir() {
        return Err(ConfigError(format!(
            "--state.dir {}: not a directory",
            dir.display()
        )));
    }
    if write {
        persist::create_private(dir, "write-test")
            .and_then(|(_, probe)| std::fs::remove_file(probe))
            .map_err(|e| {
                ConfigError(format!("--state.dir {}: cannot write: {e}", dir.display()))
            })?;
    }
    Ok(Some(dir.to_path_buf()))
}

/// Raises the soft limit on open files to the hard limit, as Go exporters do: the default soft
/// limit (1,024) lets idle connections starve scrapes and the reopening of rotated files.
fn raise_fd_limit() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write and read the struct we pass, nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            let want = libc::rlimit {
                rlim_cur: l.rlim_max,
                rlim_max: l.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
                tracing::debug!("cannot raise the open-file limit");
            }
        }
    }
}

/// Threads (and `journalctl` children) the inputs of `cfg` may need at most: the pool that
/// follows every file ([`crate::source::pool::THREADS`]), two per journal unit (its reader and
/// its child), one per `--sglang.url`, and a few of the exporter's own.
fn tasks_needed(cfg: &Config) -> u64 {
    let files = crate::source::pool::THREADS;
    let units = cfg.journal.units.len();
    let apis = cfg.api.as_ref().map_or(0, |a| a.targets.len());
    (files + 2 * units + apis + 16) as u64
}

/// The task limit of the cgroup this process runs in (cgroup v2 `pids.max`; a systemd unit's
/// `TasksMax=`), if there is one.
fn cgroup_task_limit() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let max = std::fs::read_to_string(format!("/sys/fs/cgroup{}/pids.max", path.trim())).ok()?;
    max.trim().parse().ok()
}

/// Warns at start when the cgroup's task limit is below what the inputs may need: a follower
/// that cannot start a thread reads nothing (warned each time it tries).
fn warn_task_limit(cfg: &Config) {
    let needed = tasks_needed(cfg);
    if let Some(limit) = cgroup_task_limit().filter(|&l| l < needed) {
        tracing::warn!(
            limit,
            needed,
            "the cgroup allows fewer tasks (pids.max, a unit's TasksMax=) than the inputs may need \
             (a thread per --sglang.url, two per journal unit, four following the files): raise \
             TasksMax"
        );
    }
}

/// The soft limit on open files now.
pub fn fd_limit() -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: as in `raise_fd_limit`.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } == 0;
    if ok {
        l.rlim_cur
    } else {
        1024
    }
}

/// Starts a source's reader thread.
fn spawn_source(name: String, f: impl FnOnce() + Send + 'static) -> Result<(), ConfigError> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map(drop)
        .map_err(|e| ConfigError(format!("cannot start the thread {name}: {e}")))
}

/// Runs a source's reader until it returns normally (stop requested). A panic in it (a bug of
/// ours that the per-line guard did not catch) is counted in
/// `sglang_log_exporter_source_panics_total`, the source reads down, and after a second the
/// reader is recovered (`recover`: it goes on after the last line it handed out, so nothing is
/// read twice) and run again: one input's failure never stops the others or the server.
fn supervise<T>(
    ing: &mut Ingest,
    stop: &Stop,
    reader: &mut T,
    mut run: impl FnMut(&mut T, &mut Ingest),
    mut recover: impl FnMut(&mut T),
) {
    loop {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(reader, ing)));
        if r.is_ok() {
            return;
        }
        crate::state::lock(ing.state()).add_self(SelfMetric::SourcePanics, ing.source(), 1.0);
        ing.set_up(false);
        tracing::error!(
            source = ing.source(),
            "the reader of this source failed (a bug); restarting it where it stopped in 1 s"
        );
        if !stop.wait(std::time::Duration::from_secs(1)) {
            return;
        }
        recover(reader);
    }
}

/// The GPU sampler's settings from `--gpus` and `--gpu.*`; `None` with `--gpu.disable`.
///
/// # Errors
/// A [`ConfigError`] for a malformed `--gpus` argument.
pub fn gpu_config(
    a: &RunArgs,
    patterns: &Patterns,
) -> Result<Option<crate::gpu::GpuConfig>, ConfigError> {
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
        rank_tags: patterns.rank_tags.clone(),
    }))
}
