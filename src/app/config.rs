//! The main mode's configuration: [`RunArgs`] validated into a [`Config`] (the metrics
//! endpoint, the API pollers, discovery, the GPU sampler, `--state.dir`), the pattern file and
//! `--timezone`.

use std::path::PathBuf;
use std::sync::Arc;

use jiff::tz::TimeZone;

use super::inputs::{parse_inputs, refuse_unit_clash, Input};
use super::ConfigError;
use crate::cli::RunArgs;
use crate::export::push;
use crate::export::server::{listen, routes, webconfig};
use crate::parse::patterns::{PatternError, Patterns};
use crate::parse::prefix::TimeResolver;
use crate::parse::Parser;
use crate::pipeline::{Ingest, Pipeline};
use crate::source::api::{ApiConfig, ApiTarget};
use crate::source::discover::DiscoverConfig;
use crate::source::file::TailConfig;
use crate::source::journald::{self, JournalConfig};
use crate::source::router::{RouterConfig, RouterTarget};
use crate::state::{persist, Shared, StateConfig};

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
    /// `--router.url` pollers; `None` without one.
    pub router: Option<RouterConfig>,
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
    /// `--web.names`.
    pub names: crate::export::format::Names,
    /// `--web.old-names`.
    pub old_names: bool,
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
            names: match a.names {
                crate::cli::WebNames::Upstream => crate::export::format::Names::Upstream,
                crate::cli::WebNames::Colons => crate::export::format::Names::Colons,
                crate::cli::WebNames::Underscores => crate::export::format::Names::Underscores,
            },
            old_names: a.old_names,
        })
    }
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
            router: router_config(a)?,
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
    /// given one of them (see [`crate::source::discover::Naming`]).
    pub(super) fn input_names(&self) -> Vec<String> {
        let units = self.journal.units.iter().map(|u| journald::server_of(u));
        self.inputs
            .iter()
            .map(|i| match i {
                Input::File { server, .. } | Input::Stdin { server } => server.clone(),
            })
            .chain(units)
            .collect()
    }

    pub(super) fn ingest(&self, state: &Shared, source: &str, server: &str) -> Ingest {
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

/// The router pollers from `--router.*`; `None` without `--router.url`.
fn router_config(a: &RunArgs) -> Result<Option<RouterConfig>, ConfigError> {
    let x = &a.router;
    if x.router_urls.is_empty() {
        return Ok(None);
    }
    if a.once {
        return Err(ConfigError(
            "--router.url polls a live router: it has no place in --once (which reads logs to their end)".into(),
        ));
    }
    if x.router_interval < std::time::Duration::from_millis(100) {
        return Err(ConfigError("--router.interval: at least 100ms".into()));
    }
    let mut targets: Vec<RouterTarget> = Vec::new();
    for u in &x.router_urls {
        let t = RouterTarget::parse(u).map_err(ConfigError)?;
        if targets.iter().any(|o| o.name == t.name) {
            return Err(ConfigError(format!(
                "--router.url {u:?}: a second router named {:?} (name them with NAME=URL)",
                t.name
            )));
        }
        targets.push(t);
    }
    Ok(Some(RouterConfig {
        targets,
        interval: x.router_interval,
        timeout: x.router_interval.min(std::time::Duration::from_secs(3)),
    }))
}

/// The API pollers from `--sglang.*`; `None` without `--sglang.url` and `--sglang.from-logs`
/// (on by default without `--sglang.url`, off in `--once`).
fn api_config(a: &RunArgs) -> Result<Option<ApiConfig>, ConfigError> {
    let x = &a.api;
    if a.once {
        if !x.api_urls.is_empty() || x.from_logs == Some(true) {
            return Err(ConfigError(
                "--sglang.url and --sglang.from-logs poll live servers: they have no place in --once (which reads logs to their end)".into(),
            ));
        }
        return Ok(None);
    }
    let from_logs = x.from_logs.unwrap_or(x.api_urls.is_empty());
    if x.api_urls.is_empty() && !from_logs {
        return Ok(None);
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
    let tls = match &x.api_ca_file {
        Some(p) => Some(std::sync::Arc::new(
            crate::ca::client_tls(p, "--sglang.ca-file").map_err(ConfigError)?,
        )),
        None => None,
    };
    Ok(Some(ApiConfig {
        targets,
        interval: x.api_interval,
        timeout,
        api_key,
        from_logs,
        tls,
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
