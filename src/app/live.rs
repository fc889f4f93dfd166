//! The main mode live: every source followed on its own thread (or the file-following pool),
//! the API pollers, the GPU sampler, the state file, the systemd notifier, the pusher and the
//! HTTP server, until SIGTERM or SIGINT.

use std::sync::Arc;

use super::inputs::Input;
use super::limits::{fd_limit, raise_fd_limit, warn_task_limit};
use super::state_file::{restore_state, spawn_saver};
use super::supervise::{spawn_source, supervise};
use super::{Config, ConfigError};
use crate::export::server::cache::Exposition;
use crate::export::server::{self, listen, routes, worker};
use crate::export::{live, notify, push, signals};
use crate::source::api;
use crate::source::discover::{self, Discovery, Follow};
use crate::source::file::{TailConfig, Tailer};
use crate::source::journald;
use crate::source::stdin;
use crate::state::{persist, Shared, State};
use crate::stop::Stop;

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
    if let Some(r) = &cfg.router {
        crate::source::router::spawn(r.clone(), state.clone(), stop.clone())
            .map_err(|e| ConfigError(format!("cannot start the router poller: {e}")))?;
    }
    spawn_sources(&cfg, &state, &stop)?;
    if let Some(g) = &cfg.gpu {
        crate::gpu::spawn(g.clone(), state.clone(), stop.clone())
            .map_err(|e| ConfigError(format!("cannot start the GPU sampler: {e}")))?;
    }
    let exposition = Arc::new(
        Exposition::new(state.clone())
            .with_names(cfg.http.names)
            .with_old_names(cfg.http.old_names),
    );
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
    for t in cfg.router.iter().flat_map(|r| &r.targets) {
        out.push(format!("router {}", t.url));
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
