//! The exporter's own families (`sglang_log_exporter_*`, and SGLang's `sglang_up`) but the GPU sampler's, in exposition order: those the per-source counters, the caps, the label bounds, the exposition check and the build fill, then the [`SelfMetric`](crate::state::SelfMetric)s.

use super::{FamilyDef, Kind};

/// `sglang_log_exporter_build_info`.
pub const BUILD_INFO: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_build_info",
    help: "Always 1; the labels name the exporter build: its version, git revision and branch, and the rustc that compiled it (unknown where the build could not tell).",
    kind: Kind::Gauge,
    unit: "",
    labels: &["branch", "revision", "rustc", "version"],
    reads: "the build (version, git revision and branch, rustc)",
};

/// `sglang_log_exporter_exposition_samples_withheld_total`.
pub const SAMPLES_WITHHELD: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_exposition_samples_withheld_total",
    help: "Samples left out of an exposition because their series was given twice (which copy is right is not known); each rendering counts its own. Always 0 unless an input shows a fault of the exporter: please report it.",
    kind: Kind::Counter,
    unit: "samples",
    labels: &[],
    reads: "the exposition check (series given twice)",
};

/// `sglang_log_exporter_lines_read_total`.
pub const LINES_READ: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_lines_read_total",
    help: "Lines read from each source.",
    kind: Kind::Counter,
    unit: "lines",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_bytes_read_total`.
pub const BYTES_READ: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_bytes_read_total",
    help: "Bytes read from each source.",
    kind: Kind::Counter,
    unit: "bytes",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_lines_matched_total`.
pub const LINES_MATCHED: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_lines_matched_total",
    help: "Lines that matched a line kind of the pattern file, by source and kind.",
    kind: Kind::Counter,
    unit: "lines",
    labels: &["source", "kind"],
    reads: "the per-source line counters, by line kind",
};

/// `sglang_log_exporter_lines_unmatched_total`.
pub const LINES_UNMATCHED: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_lines_unmatched_total",
    help: "Lines that matched no line kind (other log output), by source.",
    kind: Kind::Counter,
    unit: "lines",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_lines_unread_total`.
pub const LINES_UNREAD: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_lines_unread_total",
    help: "Lines that are recognisably SGLang's stats (kind=stats) or capacity (kind=capacity) lines but that no line kind reads (a renamed field, a changed layout; also counted as unmatched), by source and kind; sglang-log-exporter check lists them.",
    kind: Kind::Counter,
    unit: "lines",
    labels: &["source", "kind"],
    reads: "the per-source line counters: stats- or capacity-like lines no kind reads",
};

/// `sglang_log_exporter_lines_oversized_total`.
pub const LINES_OVERSIZED: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_lines_oversized_total",
    help: "Lines longer than --max-line-bytes, skipped, by source.",
    kind: Kind::Counter,
    unit: "lines",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_lines_incomplete_total`.
pub const LINES_INCOMPLETE: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_lines_incomplete_total",
    help: "Partial last lines (no newline) dropped at the end of an input or at rotation or truncation, JSON records cut short, and container records whose last piece never came, by source.",
    kind: Kind::Counter,
    unit: "lines",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_lines_invalid_utf8_total`.
pub const LINES_INVALID_UTF8: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_lines_invalid_utf8_total",
    help: "Lines that were not valid UTF-8 and were read lossily, by source.",
    kind: Kind::Counter,
    unit: "lines",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_read_errors_total`.
pub const READ_ERRORS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_read_errors_total",
    help: "Errors opening or reading a source (missing, unreadable, a directory), by source.",
    kind: Kind::Counter,
    unit: "errors",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_field_value_errors_total`.
pub const FIELD_VALUE_ERRORS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_field_value_errors_total",
    help: "Known fields whose value was not a number, and stats-line pieces that were not key: value, by source.",
    kind: Kind::Counter,
    unit: "fields",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_lines_control_codes_total`.
pub const LINES_CONTROL_CODES: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_lines_control_codes_total",
    help: "Lines that held terminal colour or control codes or carriage-return fragments, removed before parsing, by source.",
    kind: Kind::Counter,
    unit: "lines",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_json_lines_without_message_total`.
pub const JSON_LINES_WITHOUT_MESSAGE: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_json_lines_without_message_total",
    help: "JSON object lines with no log message under a known key (a wrapper's own records), skipped, by source.",
    kind: Kind::Counter,
    unit: "lines",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_nul_runs_skipped_total`.
pub const NUL_RUNS_SKIPPED: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_nul_runs_skipped_total",
    help: "Runs of NUL bytes skipped between lines (the hole copytruncate leaves when the writer did not append), by source.",
    kind: Kind::Counter,
    unit: "runs",
    labels: &["source"],
    reads: "the per-source line counters",
};

/// `sglang_log_exporter_unknown_fields_total`.
pub const UNKNOWN_FIELDS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_unknown_fields_total",
    help: "Fields of known lines whose key the pattern file does not know, by key (bounded; the rest count as other).",
    kind: Kind::Counter,
    unit: "fields",
    labels: &["field"],
    reads: "the state's unknown field keys (bounded)",
};

/// `sglang_log_exporter_series_dropped_total`.
pub const SERIES_DROPPED: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_series_dropped_total",
    help: "Servers, ranks, sources or HTTP series refused because a cardinality limit was reached.",
    kind: Kind::Counter,
    unit: "series",
    labels: &[],
    reads: "the cardinality caps",
};

/// `sglang_log_exporter_series_dropped_by_cap_total`.
pub const SERIES_DROPPED_BY_CAP: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_series_dropped_by_cap_total",
    help: "What each cardinality limit refused (servers, engines_per_server, ranks_per_server, ranks_total, http_series_per_server, sources); each is warned about once per server.",
    kind: Kind::Counter,
    unit: "series",
    labels: &["cap"],
    reads: "the cardinality caps, by cap",
};

/// `sglang_log_exporter_label_values_shortened_total`.
pub const LABEL_VALUES_SHORTENED: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_label_values_shortened_total",
    help: "Label values read from the input (server, engine and node names, model_name, Kubernetes labels, source paths, the state file's) longer than 256 bytes, shown as their first bytes, ~ and a hash of the whole; each distinct value counted once, by label.",
    kind: Kind::Counter,
    unit: "values",
    labels: &["label"],
    reads: "the label-value bound (256 bytes)",
};

/// `sglang_log_exporter_source_up`.
pub const SOURCE_UP: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_source_up",
    help: "1 while a source is open and being read, 0 while it is missing, failing or restarting.",
    kind: Kind::Gauge,
    unit: "",
    labels: &["source"],
    reads: "each source's reader (open, missing, failing, restarting)",
};

/// `sglang_log_exporter_source_panics_total`.
pub const SOURCE_PANICS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_source_panics_total",
    help: "Times reading a source hit a bug of the exporter (a panic); the line was skipped or the reader restarted where it stopped.",
    kind: Kind::Counter,
    unit: "",
    labels: &["source"],
    reads: "each source's reader (caught panics)",
};

/// `sglang_log_exporter_journalctl_restarts_total`.
pub const JOURNALCTL_RESTARTS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_journalctl_restarts_total",
    help: "Times a journalctl child was restarted after it exited, died or stalled.",
    kind: Kind::Counter,
    unit: "",
    labels: &["unit"],
    reads: "the journalctl supervisor",
};

/// `sglang_log_exporter_journal_entries_total`.
pub const JOURNAL_ENTRIES: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_journal_entries_total",
    help: "Journal entries read for each --journal-unit (stuck at 0: no entries, check the unit name).",
    kind: Kind::Counter,
    unit: "entries",
    labels: &["unit"],
    reads: "the journal reader, per --journal-unit",
};

/// `sglang_log_exporter_push_last_success_timestamp_seconds`.
pub const PUSH_LAST_SUCCESS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_push_last_success_timestamp_seconds",
    help: "Unix time in seconds of the last successful push to the Pushgateway.",
    kind: Kind::Gauge,
    unit: "seconds",
    labels: &[],
    reads: "the Pushgateway pusher",
};

/// `sglang_log_exporter_pushes_total`.
pub const PUSHES: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_pushes_total",
    help: "Successful pushes to the Pushgateway.",
    kind: Kind::Counter,
    unit: "",
    labels: &[],
    reads: "the Pushgateway pusher",
};

/// `sglang_log_exporter_push_failures_total`.
pub const PUSH_FAILURES: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_push_failures_total",
    help: "Push requests to the Pushgateway that failed (no answer, timeout or an error status).",
    kind: Kind::Counter,
    unit: "",
    labels: &[],
    reads: "the Pushgateway pusher",
};

/// `sglang_log_exporter_push_last_status`.
pub const PUSH_LAST_STATUS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_push_last_status",
    help: "HTTP status of the last push request to the Pushgateway; 0 when none came back.",
    kind: Kind::Gauge,
    unit: "",
    labels: &[],
    reads: "the Pushgateway pusher",
};

/// `sglang_log_exporter_discovery_files_followed`.
pub const DISCOVERY_FOLLOWED: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_discovery_files_followed",
    help: "Files found by --input.glob that are being followed now.",
    kind: Kind::Gauge,
    unit: "files",
    labels: &[],
    reads: "--input.glob discovery",
};

/// `sglang_log_exporter_discovery_files_skipped_total`.
pub const DISCOVERY_SKIPPED: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_discovery_files_skipped_total",
    help: "Files found by --input.glob that were not followed because --input.max-files were followed already (each file counted once per time it is skipped).",
    kind: Kind::Counter,
    unit: "files",
    labels: &[],
    reads: "--input.glob discovery",
};

/// `sglang_log_exporter_discovery_files_not_logs_total`.
pub const DISCOVERY_NOT_LOGS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_discovery_files_not_logs_total",
    help: "Matches of --input.glob that are no log files (character or block devices, sockets): never read, each warned about and counted once per time it is matched.",
    kind: Kind::Counter,
    unit: "files",
    labels: &[],
    reads: "--input.glob discovery",
};

/// `sglang_log_exporter_server_name_collisions_total`.
pub const SERVER_NAME_COLLISIONS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_server_name_collisions_total",
    help: "Discovered files whose every server name (stem, parent/stem, path) another input had: each got its path with #N added instead of merging with that input; and inputs named for one server that overlap in time (two servers under one name), each kept apart as an engine named after it; each warned about.",
    kind: Kind::Counter,
    unit: "",
    labels: &[],
    reads: "server naming of discovered and named inputs",
};

/// `sglang_log_exporter_kv_capacity_contradictions_total`.
pub const KV_CAPACITY_CONTRADICTIONS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_kv_capacity_contradictions_total",
    help: "Times a rank's used KV-cache tokens were seen above the capacity known for it (a stats line above its pool or capacity line, or a capacity line below its last count: a capacity of another rank or process), and stats lines printing a token usage above 1; such a share is never shown over 100 %.",
    kind: Kind::Counter,
    unit: "",
    labels: &["server"],
    reads: "the state's KV capacity checks on stats and capacity lines",
};

/// `sglang_up`.
pub const API_UP: FamilyDef = FamilyDef {
    name: "sglang_up",
    help: "1 while the server's HTTP API (--sglang.url) answers, 0 while it does not (refused, timed out, an error status, an answer that cannot be read); its activity gauges are then withdrawn.",
    kind: Kind::Gauge,
    unit: "",
    labels: &["server"],
    reads: "the HTTP API poller (--sglang.url)",
};

/// `sglang_router_up`.
pub const ROUTER_UP: FamilyDef = FamilyDef {
    name: "sglang_router_up",
    help: "1 while the router's /metrics (--router.url) answers, 0 while it does not (refused, timed out, an error status, an answer that cannot be read); its worker series are then withdrawn.",
    kind: Kind::Gauge,
    unit: "",
    labels: &["router"],
    reads: "the router poller (--router.url)",
};

/// `sglang_log_exporter_router_failures_total`.
pub const ROUTER_FAILURES: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_router_failures_total",
    help: "Polls of the router's /metrics that failed (no answer, timeout, an error status or an answer that cannot be read).",
    kind: Kind::Counter,
    unit: "",
    labels: &["router"],
    reads: "the router poller (--router.url)",
};

/// `sglang_log_exporter_api_requests_total`.
pub const API_REQUESTS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_api_requests_total",
    help: "HTTP requests made to the server's SGLang API (load endpoint and /server_info).",
    kind: Kind::Counter,
    unit: "requests",
    labels: &["server"],
    reads: "the HTTP API poller (--sglang.url)",
};

/// `sglang_log_exporter_api_failures_total`.
pub const API_FAILURES: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_api_failures_total",
    help: "Polls of the server's SGLang API that failed (no answer, timeout, an error status or an answer that cannot be read).",
    kind: Kind::Counter,
    unit: "",
    labels: &["server"],
    reads: "the HTTP API poller (--sglang.url)",
};

/// `sglang_log_exporter_api_last_success_timestamp_seconds`.
pub const API_LAST_SUCCESS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_api_last_success_timestamp_seconds",
    help: "Unix time in seconds of the last answer read from the server's SGLang API.",
    kind: Kind::Gauge,
    unit: "seconds",
    labels: &["server"],
    reads: "the HTTP API poller (--sglang.url)",
};

/// `sglang_log_exporter_api_poll_duration_seconds`.
pub const API_POLL_DURATION: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_api_poll_duration_seconds",
    help: "Seconds the last poll of the server's SGLang API took (all its requests).",
    kind: Kind::Gauge,
    unit: "seconds",
    labels: &["server"],
    reads: "the HTTP API poller (--sglang.url)",
};

/// `sglang_log_exporter_api_bad_values_total`.
pub const API_BAD_VALUES: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_api_bad_values_total",
    help: "Values in the server's API answers out of their range (negative, a fractional count, a share above 1, more tokens in use than the pool holds), left out.",
    kind: Kind::Counter,
    unit: "values",
    labels: &["server"],
    reads: "the HTTP API poller (--sglang.url)",
};

/// `sglang_log_exporter_api_contradictions_total`.
pub const API_CONTRADICTIONS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_api_contradictions_total",
    help: "API answers whose /server_info contradicts the server_args line of the log of the same name (another model or dp_size: another server?); their loads are not applied.",
    kind: Kind::Counter,
    unit: "",
    labels: &["server"],
    reads: "the HTTP API poller against the server_args line",
};

/// `sglang_log_exporter_restored_gave_way_total`.
pub const RESTORED_GAVE_WAY: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_restored_gave_way_total",
    help: "Servers and ranks restored from the state file (--state.dir) that no input had named since, removed to make room for an input's own when a cap (servers, engines, ranks) was full: restored ones never crowd out the inputs'.",
    kind: Kind::Counter,
    unit: "",
    labels: &[],
    reads: "the state file (--state.dir) and the caps",
};

/// `sglang_log_exporter_restored_refused_total`.
pub const RESTORED_REFUSED: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_restored_refused_total",
    help: "Facts and ranks of the state file (--state.dir) refused at start: a value no log line could give (negative where the field is unsigned, past 2^53 times its scale, a fraction of a token or byte) or a rank number the parser refuses.",
    kind: Kind::Counter,
    unit: "",
    labels: &[],
    reads: "the state file (--state.dir) at start",
};

/// Every one, in exposition order.
pub const ALL: [&FamilyDef; 43] = [
    &BUILD_INFO,
    &SAMPLES_WITHHELD,
    &LINES_READ,
    &BYTES_READ,
    &LINES_MATCHED,
    &LINES_UNMATCHED,
    &LINES_UNREAD,
    &LINES_OVERSIZED,
    &LINES_INCOMPLETE,
    &LINES_INVALID_UTF8,
    &READ_ERRORS,
    &FIELD_VALUE_ERRORS,
    &LINES_CONTROL_CODES,
    &JSON_LINES_WITHOUT_MESSAGE,
    &NUL_RUNS_SKIPPED,
    &UNKNOWN_FIELDS,
    &SERIES_DROPPED,
    &SERIES_DROPPED_BY_CAP,
    &LABEL_VALUES_SHORTENED,
    &SOURCE_UP,
    &SOURCE_PANICS,
    &JOURNALCTL_RESTARTS,
    &JOURNAL_ENTRIES,
    &PUSH_LAST_SUCCESS,
    &PUSHES,
    &PUSH_FAILURES,
    &PUSH_LAST_STATUS,
    &DISCOVERY_FOLLOWED,
    &DISCOVERY_SKIPPED,
    &DISCOVERY_NOT_LOGS,
    &SERVER_NAME_COLLISIONS,
    &KV_CAPACITY_CONTRADICTIONS,
    &API_UP,
    &API_REQUESTS,
    &API_FAILURES,
    &API_LAST_SUCCESS,
    &API_POLL_DURATION,
    &API_BAD_VALUES,
    &API_CONTRADICTIONS,
    &ROUTER_UP,
    &ROUTER_FAILURES,
    &RESTORED_GAVE_WAY,
    &RESTORED_REFUSED,
];
