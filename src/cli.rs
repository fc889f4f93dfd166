//! The command line (clap), in the Prometheus-exporter conventions (`--web.listen-address`, …).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// `--version`: the crate version and the git commit built from (`unknown` without git), e.g.
/// `0.1.0 (abc123def456)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("SGLANG_LOG_EXPORTER_REVISION"),
    ")"
);

/// Default `--web.listen-address`: outside node_exporter's 9100-9999 range and SGLang's 30000+.
pub const DEFAULT_LISTEN: &str = ":8771";

/// Follows SGLang server logs and serves their KV-cache, queue and throughput state as Prometheus
/// metrics.
#[derive(Debug, Parser)]
#[command(
    name = "sglang-log-exporter",
    version = VERSION,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to do instead of following inputs.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Options for following inputs.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Pattern coverage report: lines per kind, unknown fields, samples of unmatched stats-like
    /// lines.
    Check(CheckArgs),
    /// Write every stats sample of finished logs, with the log's own timestamps, as OpenMetrics
    /// text for `promtool tsdb create-blocks-from openmetrics`.
    Backfill(BackfillArgs),
    /// Write the man pages or the shell completions into a directory (used to build the
    /// packages), or rewrite the generated section of the metrics contract (hidden from --help).
    #[command(hide = true)]
    Generate(GenerateArgs),
    /// The servers' state on the terminal, from local inputs or running exporters (`--url`):
    /// KV cache, requests, throughput and GPUs per server and rank.
    Top(Box<TopArgs>),
}

/// `generate` options.
#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// What to write.
    #[arg(value_enum)]
    pub what: Generated,
    /// The directory to write into (created if missing); for `metrics-contract`, the contract
    /// file whose generated section is rewritten (`docs/metrics-contract.md`).
    #[arg(value_name = "PATH")]
    pub dir: PathBuf,
}

/// What `generate` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Generated {
    /// Man pages (section 1), one per command: `sglang-log-exporter.1`, `…-check.1`, ….
    Man,
    /// Completion scripts for bash (`sglang-log-exporter.bash`), zsh (`_sglang-log-exporter`)
    /// and fish (`sglang-log-exporter.fish`).
    Completions,
    /// The section "Every family this exporter exposes" of `docs/metrics-contract.md`, from the
    /// families registry and the embedded pattern file, rewritten in place between its markers.
    MetricsContract,
}

/// `check` options.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Log files to check (`-` for stdin).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Pattern file to use instead of the embedded one.
    #[arg(long)]
    pub patterns: Option<PathBuf>,
    /// For JSON object lines, also look for the log line under this key (as in the main mode).
    #[arg(long = "input.json-message-key", value_name = "KEY")]
    pub json_message_key: Option<String>,
}

/// Options of the main mode.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Inputs: log files to follow, `-` for stdin. `NAME=PATH` sets the `server` label (default:
    /// the file stem; `stdin` for `-`).
    pub inputs: Vec<String>,

    /// Read every input to its end, print the exposition to stdout, then a summary of each
    /// rank's KV cache to stderr (at --log.level info or more verbose), and exit: 0 when done; 1
    /// when the output cannot be written or the push (--push.url) failed; 2 for a missing or
    /// unreadable input, a bad pattern file or a bad argument.
    #[arg(long)]
    pub once: bool,

    /// Address to serve on (repeatable): `:PORT` for every interface, IPv6 and IPv4 (IPv4
    /// alone where the host has no IPv6), `HOST:PORT` for one address (`[::1]:PORT` for IPv6);
    /// empty to disable the server.
    #[arg(long = "web.listen-address", value_name = "ADDRESS", default_value = DEFAULT_LISTEN)]
    pub listen_address: Vec<String>,

    /// Path of the metrics endpoint.
    #[arg(long = "web.telemetry-path", default_value = "/metrics")]
    pub telemetry_path: String,

    /// Most HTTP connections served at once. When full, the connection that has moved no byte
    /// the longest (1 s or more) is closed for the newcomer, else the newcomer is. At most half
    /// the open-file limit is used (the exporter raises its soft limit to the hard one at start).
    #[arg(long = "web.max-connections", default_value_t = 512)]
    pub max_connections: usize,

    /// How `/metrics` writes metric names. `colons` (the default; what the shipped dashboard
    /// and alerts query) or `underscores`: that style for every scraper, in the text format
    /// 0.0.4. `upstream`: as SGLang's own `/metrics` answers the scraper's `Accept` header, so
    /// a Prometheus scraping both stores one name: a Prometheus 2 asks for OpenMetrics and then
    /// stores `sglang_token_usage`, a Prometheus 3 stores `sglang:token_usage`.
    #[arg(long = "web.names", value_enum, default_value_t = WebNames::Colons)]
    pub names: WebNames,

    /// Also serve the three families renamed in this release under their old names, until
    /// the next release: `sglang_swa_used_tokens` (now `sglang_swa_pool_used_tokens`),
    /// `sglang_http_requests_total` (now `sglang_access_log_requests_total`) and
    /// `sglang_max_running_requests` (now `sglang_running_requests_limit`), on `/metrics`, in
    /// `--once` and in the push. Their old names met SGLang's own once colons become
    /// underscores: under such a style an old name that is one of SGLang's is left out.
    #[arg(long = "web.old-names")]
    pub old_names: bool,

    /// Serve on the listening sockets systemd passes (socket activation: a `.socket` unit, see
    /// systemd/sglang-log-exporter.socket) instead of `--web.listen-address`, which is then
    /// ignored; start-up fails when none was passed.
    #[arg(long = "web.systemd-socket")]
    pub systemd_socket: bool,

    /// How lines are read (patterns, times, idle policy, line limit).
    #[command(flatten)]
    pub read: ReadArgs,

    /// Files found by glob (Kubernetes pod logs).
    #[command(flatten)]
    pub discover: DiscoverArgs,

    /// How long a followed file that was renamed away (rotation) or deleted is still read before
    /// it is closed, which frees its disk space.
    #[arg(long = "deleted-file-grace", default_value = "60s", value_parser = parse_duration)]
    pub deleted_grace: std::time::Duration,

    /// Directory for the state file (`state.json`: each server's startup facts and the journald
    /// cursors, kept across restarts; systemd's `StateDirectory=` gives
    /// `/var/lib/sglang-log-exporter`). Without it nothing is kept.
    #[arg(long = "state.dir", value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Backstop poll interval for followed files whose events may not come (file events wake
    /// the follower sooner); 20 times this for a file whose directory is watched.
    #[arg(long = "poll-interval", default_value = "250ms", value_parser = parse_duration)]
    pub poll_interval: std::time::Duration,

    /// journald units to follow.
    #[command(flatten)]
    pub journal: JournalArgs,

    /// Log level of the exporter's own messages (error, warn, info, debug, trace).
    #[arg(long = "log.level", default_value = "info", value_parser = ["error", "warn", "info", "debug", "trace"])]
    pub log_level: String,

    /// Format of the exporter's own messages on stderr: `text` (time, level, message,
    /// `key=value` fields), `logfmt` (`ts=… level=info msg=… key=value`) or `json` (one object a
    /// line: `ts`, `level`, `msg`, then the fields).
    #[arg(long = "log.format", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// GPUs of a server, `SERVER=LIST` (repeatable): NVML indexes or `GPU-…` UUIDs in SGLang's
    /// launch order, e.g. `decode=4,5,6,7` (the rank at launch slot i gets the i-th GPU).
    #[arg(long = "gpus", value_name = "SERVER=LIST")]
    pub gpus: Vec<String>,

    /// Time between two GPU samples (NVML is never read on the scrape path).
    #[arg(long = "gpu.interval", default_value = "5s", value_parser = parse_duration)]
    pub gpu_interval: std::time::Duration,

    /// NVML library to load instead of the system's `libnvidia-ml.so.1`.
    #[arg(long = "gpu.nvml-library", value_name = "PATH")]
    pub gpu_nvml_library: Option<PathBuf>,

    /// Root of the proc file system, where NVML's PIDs are looked up (`/proc`; another path for
    /// tests or a host /proc mounted into a container).
    #[arg(long = "gpu.proc-root", default_value = "/proc", value_name = "PATH")]
    pub gpu_proc_root: PathBuf,

    /// Do not load NVML (no GPU metrics, no `sglang_log_exporter_nvml_up`).
    #[arg(long = "gpu.disable")]
    pub gpu_disable: bool,

    /// First wait before loading NVML again after a failure; doubles up to 10 minutes.
    #[arg(long = "gpu.retry-interval", default_value = "30s", value_parser = parse_duration, hide = true)]
    pub gpu_retry_interval: std::time::Duration,
    /// Exporter-toolkit web configuration file (TLS, bcrypt basic auth), re-read when it changes.
    #[arg(long = "web.config.file")]
    pub web_config_file: Option<PathBuf>,

    /// Pushgateway options.
    #[command(flatten)]
    pub push: PushArgs,

    /// SGLang HTTP API options.
    #[command(flatten)]
    pub api: ApiArgs,

    /// SGLang router options.
    #[command(flatten)]
    pub router: RouterArgs,
}

/// SGLang's router as a source of the main mode (see the README's "The router").
#[derive(Debug, Clone, Args)]
pub struct RouterArgs {
    /// Read this SGLang router's `/metrics` (repeatable): its Prometheus listener
    /// (`--prometheus-port`, 29000 by default; `/metrics` unless the URL names a path). Each
    /// worker it routes to is joined by URL to the server listening there: in-flight requests,
    /// health and circuit-breaker state per worker. `NAME=` names the router (the `router`
    /// label); without it, HOST:PORT.
    #[arg(long = "router.url", value_name = "[NAME=]URL")]
    pub router_urls: Vec<String>,

    /// Time between two reads of a router's `/metrics` (the timeout of one: the shorter of
    /// this and 3s).
    #[arg(long = "router.interval", default_value = "5s", value_name = "DURATION", value_parser = parse_duration)]
    pub router_interval: std::time::Duration,
}

/// The SGLang HTTP API as a source of the main mode (see the README's "SGLang's HTTP API").
#[derive(Debug, Clone, Args)]
pub struct ApiArgs {
    /// Poll this SGLang server's HTTP API for live values (repeatable): `/v1/loads` (v0.5.8+)
    /// or `/get_load` (per DP rank v0.5.3-v0.5.20; v0.4.7-v0.5.2 answer only that the server is
    /// up), and `/server_info` (alone on v0.4.1-v0.4.6, which have no load endpoint). `NAME=` joins the log input of that server name
    /// (`NAME=PATH`, a --journal-unit's name); without it the server is named HOST:PORT.
    #[arg(long = "sglang.url", value_name = "[NAME=]URL")]
    pub api_urls: Vec<String>,

    /// Time between two polls of a server's API.
    #[arg(long = "sglang.interval", default_value = "5s", value_name = "DURATION", value_parser = parse_duration)]
    pub api_interval: std::time::Duration,

    /// Timeout of one API request (at most --sglang.interval) [default: 3s, or
    /// --sglang.interval where that is shorter].
    #[arg(long = "sglang.timeout", value_name = "DURATION", value_parser = parse_duration)]
    pub api_timeout: Option<std::time::Duration>,

    /// File holding the servers' API key (SGLang's --api-key; trailing newline ignored), sent
    /// as `Authorization: Bearer KEY`.
    #[arg(long = "sglang.api-key-file", value_name = "PATH")]
    pub api_key_file: Option<PathBuf>,

    /// Poll the HTTP API of each server the logs show running on this host, at the host and
    /// port its `server_args` line logs (a wildcard bind on loopback; a restart with another
    /// port moves the poll). A log of another host (a journal record's `_HOSTNAME`, a node
    /// prefix) or of a Kubernetes pod is never polled from here. A key a release logs in
    /// `server_args` is never used: give it with --sglang.api-key-file. [default: true without
    /// --sglang.url, which then polls only the servers it names; false with it]
    #[arg(long = "sglang.from-logs", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub from_logs: Option<bool>,

    /// PEM file of the CA certificates that an `https://` API's certificate must chain to
    /// (a private CA); without it, the system's trust roots.
    #[arg(long = "sglang.ca-file", value_name = "PATH")]
    pub api_ca_file: Option<PathBuf>,
}

/// `--log.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// tracing-subscriber's plain text: `2026-06-03T10:00:00.123456Z  INFO message key=value`.
    Text,
    /// logfmt: `ts=… level=info msg=… key=value`.
    Logfmt,
    /// One JSON object a line: `ts`, `level`, `msg`, then the fields.
    Json,
}

/// Discovery options of the main mode: files found by glob, e.g. a Kubernetes node's pod logs.
#[derive(Debug, Clone, Args)]
pub struct DiscoverArgs {
    /// Follow every file matching this glob (repeatable), found again every
    /// --input.scan-interval: new files are read from their start, files gone are closed after
    /// --deleted-file-grace. Kubernetes pod logs (`/var/log/pods/*/*/*.log`,
    /// `/var/log/containers/*.log`) get `namespace`, `pod` and `container` labels and the pod
    /// name as `server`. Only regular files and FIFOs are read: a device or socket that matches
    /// is skipped, warned about and counted in
    /// sglang_log_exporter_discovery_files_not_logs_total.
    #[arg(long = "input.glob", value_name = "PATTERN")]
    pub globs: Vec<String>,

    /// Read only the pod logs of containers with this name or glob (repeatable; default: every
    /// container).
    #[arg(long = "input.kubernetes-container", value_name = "NAME_OR_GLOB")]
    pub containers: Vec<String>,

    /// Most files followed at once through --input.glob; more are skipped, counted in
    /// sglang_log_exporter_discovery_files_skipped_total and warned about once. Above 256 the
    /// state's own caps still hold (256 sources, 256 servers): the files past them are read, but
    /// their series are refused and counted in sglang_log_exporter_series_dropped_by_cap_total.
    #[arg(long = "input.max-files", default_value_t = 256)]
    pub max_files: usize,

    /// Time between two expansions of the globs (entries created in a glob's fixed leading
    /// directory are looked at sooner).
    #[arg(long = "input.scan-interval", default_value = "5s", value_parser = parse_duration)]
    pub scan_interval: std::time::Duration,

    /// How long the series of a server whose discovered file is gone (closed after
    /// --deleted-file-grace) are still served before they are removed.
    #[arg(long = "input.expiry", default_value = "5m", value_parser = parse_duration)]
    pub expiry: std::time::Duration,
}

/// Pushgateway options of the main mode.
#[derive(Debug, Clone, Args)]
pub struct PushArgs {
    /// Pushgateway base URL (`http://host:9091`); enables pushing. `user:password@` in the URL
    /// is sent as basic auth.
    #[arg(long = "push.url")]
    pub url: Option<String>,

    /// Time between pushes.
    #[arg(long = "push.interval", default_value = "15s", value_parser = parse_duration)]
    pub interval: std::time::Duration,

    /// `job` of the pushed group.
    #[arg(long = "push.job", default_value = "sglang")]
    pub job: String,

    /// Extra grouping label `K=V` (repeatable), after `instance=<hostname>`.
    #[arg(long = "push.label")]
    pub labels: Vec<String>,

    /// `instance` of the pushed group (default: this host's name).
    #[arg(long = "push.instance")]
    pub instance: Option<String>,

    /// Timeout of one push request.
    #[arg(long = "push.timeout", default_value = "10s", value_parser = parse_duration)]
    pub timeout: std::time::Duration,

    /// Keep the group on the Pushgateway at shutdown (default: delete it).
    #[arg(long = "push.keep-on-exit")]
    pub keep_on_exit: bool,

    /// Basic-auth user for the Pushgateway.
    #[arg(long = "push.basic-auth-user")]
    pub basic_auth_user: Option<String>,

    /// File holding the basic-auth password (trailing newline ignored).
    #[arg(long = "push.basic-auth-password-file")]
    pub basic_auth_password_file: Option<PathBuf>,

    /// PEM file of the CA certificates to trust for an https:// Pushgateway instead of the
    /// built-in web roots (for an internal CA or a self-signed certificate).
    #[arg(long = "push.ca-file")]
    pub ca_file: Option<PathBuf>,
}

/// `backfill` options.
#[derive(Debug, Args)]
pub struct BackfillArgs {
    /// Log files to read (`NAME=PATH` sets the `server` label; `-` for stdin).
    #[arg(required = true)]
    pub inputs: Vec<String>,
    /// OpenMetrics file to write (`-` for stdout).
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    /// How lines are read (patterns, times, idle policy, line limit), as in the main mode.
    #[command(flatten)]
    pub read: ReadArgs,
    /// A label added to every series written, `NAME=VALUE` (repeatable), e.g. `job=sglang` and
    /// `instance=host:8771`, so backfilled series join the live ones.
    #[arg(long = "label", value_name = "NAME=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
}

/// Parses a `NAME=VALUE` label: a Prometheus label name, not reserved (`__…`).
///
/// # Errors
/// A message naming the problem.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
    let mut c = k.chars();
    let ok = matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
        && !k.starts_with("__");
    if !ok {
        return Err(format!(
            "{k:?} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not __…)"
        ));
    }
    Ok((k.to_string(), v.to_string()))
}

/// journald units to follow: shared by the main mode and `top`.
#[derive(Debug, Args, Clone, Default)]
pub struct JournalArgs {
    /// A systemd unit to follow through a supervised `journalctl --follow --output=export -u UNIT`
    /// (repeatable; `.service` may be omitted). The `server` label is the unit name.
    #[arg(long = "journal-unit", value_name = "UNIT")]
    pub units: Vec<String>,

    /// A journal file for the `--journal-unit` children (`journalctl --file`; repeatable).
    #[arg(long = "journal-file", value_name = "PATH")]
    pub files: Vec<PathBuf>,

    /// A journal directory for the `--journal-unit` children (`journalctl --directory`;
    /// repeatable).
    #[arg(long = "journal-directory", value_name = "DIR")]
    pub directories: Vec<PathBuf>,

    /// The journalctl binary run for `--journal-unit`.
    #[arg(long, value_name = "PATH", default_value = "journalctl")]
    pub journalctl: PathBuf,
}

/// How lines are read: shared by the main mode and `backfill`.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Pattern file to use instead of the embedded one.
    #[arg(long)]
    pub patterns: Option<PathBuf>,

    /// After this long without a stats line, a rank's activity gauges read 0 (e.g. `30s`, `2m`).
    #[arg(long = "idle-after", default_value = "30s", value_parser = parse_duration)]
    pub idle_after: std::time::Duration,

    /// Timezone of the SGLang prefix times (an IANA name such as `Europe/Berlin`, or `UTC`);
    /// default: this host's.
    #[arg(long)]
    pub timezone: Option<String>,

    /// Date (YYYY-MM-DD) for logs whose prefix has a time only (SGLang v0.2.14-v0.3.3).
    #[arg(long)]
    pub date: Option<jiff::civil::Date>,

    /// Longest line kept, in bytes; longer lines are skipped and counted. A `--log-requests`
    /// record at level 2-3 holds the prompt and the output: raise this for long ones, or log at
    /// level 0-1.
    #[arg(long = "max-line-bytes", default_value_t = 1 << 20)]
    pub max_line_bytes: usize,

    /// For JSON object lines, also look for the log line under this key (dotted for nested
    /// objects, e.g. `payload.text`), before the well-known keys (MESSAGE, log, message, msg,
    /// line, textPayload, jsonPayload.message, jsonPayload.msg).
    #[arg(long = "input.json-message-key", value_name = "KEY")]
    pub json_message_key: Option<String>,

    /// Threads that parse an input read to its end (`--once`, `backfill`). 0 (the default): a
    /// file under 256 MiB on one thread, a larger one on every core where that measures faster
    /// as it is read; N: N threads. The state is applied in log order whatever the number, so
    /// the output is the same; `1` reads sequentially. Stdin, the journal and live following are always read on one thread, and
    /// so is every input when --max-line-bytes is above 512 MiB.
    #[arg(long = "threads", value_name = "N", default_value_t = 0)]
    pub threads: usize,
}

/// Parses `30s`, `1m30s`, `500ms`, `2h`, `1d`, `2w` (as Prometheus: [`crate::duration`]) or a
/// plain number of seconds.
///
/// # Errors
/// A message naming the bad duration.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Ok(std::time::Duration::from_secs_f64(secs));
        }
    }
    if let Some(d) = crate::duration::prometheus(s) {
        return Ok(d);
    }
    let d: jiff::SignedDuration = s
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (e.g. 30s, 2m, 500ms, 1d, 2w)"))?;
    std::time::Duration::try_from(d).map_err(|_| format!("{s:?} must not be negative"))
}

/// Splits an input argument into (server name, path). `NAME=PATH` names the server unless the
/// whole argument is an existing file.
pub fn split_input(arg: &str) -> (Option<String>, String) {
    if let Some((name, path)) = arg.split_once('=') {
        let name_ok = !name.is_empty()
            && name.bytes().all(|c| {
                c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b'@' | b':')
            });
        if name_ok && !std::path::Path::new(arg).exists() {
            return (Some(name.to_string()), path.to_string());
        }
    }
    (None, arg.to_string())
}

/// `top` options.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Inputs, as in the main mode: log files (`NAME=PATH` names the server), `-` for stdin
    /// (keys are then read from the terminal, /dev/tty).
    pub inputs: Vec<String>,

    /// Show a running exporter instead of local inputs: its metrics URL
    /// (`http://HOST:8771/metrics`; repeatable: each URL's servers are told apart by host and
    /// port). `user:password@` in the URL is sent as basic auth.
    #[arg(long = "url", value_name = "URL")]
    pub urls: Vec<String>,

    /// Basic-auth user for the `--url`s.
    #[arg(long = "url.basic-auth-user")]
    pub url_user: Option<String>,

    /// File holding the basic-auth password for the `--url`s (trailing newline ignored).
    #[arg(long = "url.basic-auth-password-file")]
    pub url_password_file: Option<PathBuf>,

    /// PEM file of CA certificates to trust for https `--url`s instead of the built-in web
    /// roots.
    #[arg(long = "url.ca-file")]
    pub url_ca_file: Option<PathBuf>,

    /// Timeout of one scrape of a `--url`.
    #[arg(long = "url.timeout", default_value = "5s", value_parser = parse_duration)]
    pub url_timeout: Duration,

    /// Print one frame as plain text and exit: files and stdin are read to their end first (as
    /// with `--once`, "now" is then the log's last time), a `--url` is scraped once.
    #[arg(long)]
    pub snapshot: bool,

    /// Time between two refreshes of the screen.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,

    /// Width of the `--snapshot` frame (default: the terminal's, or 100 when there is none).
    #[arg(long)]
    pub width: Option<usize>,

    /// "Now" as Unix seconds, instead of the clock (or the log's last time for --snapshot):
    /// for stable ages in tests and bug reports.
    #[arg(long, value_name = "UNIX_SECONDS")]
    pub now: Option<f64>,

    /// How lines are read (patterns, times, idle policy, line limit), as in the main mode.
    #[command(flatten)]
    pub read: ReadArgs,

    /// journald units to follow, as in the main mode.
    #[command(flatten)]
    pub journal: JournalArgs,

    /// GPUs of a server, `SERVER=LIST`, as in the main mode (repeatable).
    #[arg(long = "gpus", value_name = "SERVER=LIST")]
    pub gpus: Vec<String>,

    /// NVML library to load instead of the system's `libnvidia-ml.so.1`.
    #[arg(long = "gpu.nvml-library", value_name = "PATH")]
    pub gpu_nvml_library: Option<PathBuf>,

    /// Do not load NVML (no GPU section for local inputs).
    #[arg(long = "gpu.disable")]
    pub gpu_disable: bool,

    /// Log level of the exporter's own messages on stderr; `off` by default, as they would
    /// scribble over the screen.
    #[arg(long = "log.level", default_value = "off", value_parser = ["off", "error", "warn", "info", "debug", "trace"])]
    pub log_level: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("30s"),
            Ok(std::time::Duration::from_secs(30))
        );
        assert_eq!(parse_duration("2"), Ok(std::time::Duration::from_secs(2)));
        assert_eq!(
            parse_duration("500ms"),
            Ok(std::time::Duration::from_millis(500))
        );
        assert_eq!(parse_duration("1m"), Ok(std::time::Duration::from_secs(60)));
        // What the doc promises: a compound duration, and zero (`--idle-after 0`) accepted.
        assert_eq!(
            parse_duration("1m30s"),
            Ok(std::time::Duration::from_secs(90))
        );
        assert_eq!(parse_duration("0"), Ok(std::time::Duration::ZERO));
        assert_eq!(parse_duration("0s"), Ok(std::time::Duration::ZERO));
        // Prometheus's day and week (issue 38.7), so a flag reads as the rule beside it.
        assert_eq!(
            parse_duration("1d"),
            Ok(std::time::Duration::from_secs(86_400))
        );
        assert_eq!(
            parse_duration("2w"),
            Ok(std::time::Duration::from_secs(1_209_600))
        );
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-5s").is_err());
        assert!(parse_duration("-1").is_err());
        assert!(parse_duration("NaN").is_err());
    }

    #[test]
    fn inputs() {
        assert_eq!(
            split_input("decode=/x/y.log"),
            (Some("decode".into()), "/x/y.log".into())
        );
        assert_eq!(split_input("/x/y.log"), (None, "/x/y.log".into()));
        assert_eq!(split_input("-"), (None, "-".into()));
    }
}

/// `--web.names` (the exporter's `export::format::Names`, which `app` maps it to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WebNames {
    /// As SGLang's own `/metrics` answers the scraper's `Accept` header.
    Upstream,
    /// Always colons, text format 0.0.4.
    Colons,
    /// Always underscores, text format 0.0.4.
    Underscores,
}
