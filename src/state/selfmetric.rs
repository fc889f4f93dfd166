//! The exporter's own metrics that parts other than the line counters set (journalctl
//! supervision, push results, source health): one typed list, so a name is written once.

use super::State;
use crate::family::{Family, Kind};
use crate::label;

/// A self metric set through [`super::State::add_self`] / [`super::State::set_self`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SelfMetric {
    /// `sglang_log_exporter_source_up{source}`.
    SourceUp,
    /// `sglang_log_exporter_source_panics_total{source}`.
    SourcePanics,
    /// `sglang_log_exporter_journalctl_restarts_total{unit}`.
    JournalctlRestarts,
    /// `sglang_log_exporter_journal_entries_total{unit}`.
    JournalEntries,
    /// `sglang_log_exporter_push_last_success_timestamp_seconds`.
    PushLastSuccess,
    /// `sglang_log_exporter_pushes_total`.
    Pushes,
    /// `sglang_log_exporter_push_failures_total`.
    PushFailures,
    /// `sglang_log_exporter_push_last_status`.
    PushLastStatus,
    /// `sglang_log_exporter_discovery_files_followed`.
    DiscoveryFollowed,
    /// `sglang_log_exporter_discovery_files_skipped_total`.
    DiscoverySkipped,
    /// `sglang_log_exporter_discovery_files_not_logs_total`.
    DiscoverySpecial,
    /// `sglang_log_exporter_server_name_collisions_total`.
    ServerNameCollisions,
    /// `sglang_log_exporter_kv_capacity_contradictions_total{server}`.
    KvCapacityContradictions,
    /// `sglang_up{server}`.
    ApiUp,
    /// `sglang_log_exporter_api_requests_total{server}`.
    ApiRequests,
    /// `sglang_log_exporter_api_failures_total{server}`.
    ApiFailures,
    /// `sglang_log_exporter_api_last_success_timestamp_seconds{server}`.
    ApiLastSuccess,
    /// `sglang_log_exporter_api_poll_duration_seconds{server}`.
    ApiDuration,
    /// `sglang_log_exporter_api_bad_values_total{server}`.
    ApiBadValues,
    /// `sglang_log_exporter_api_contradictions_total{server}`.
    ApiContradictions,
    /// `sglang_log_exporter_restored_gave_way_total`.
    RestoredGaveWay,
    /// `sglang_log_exporter_restored_refused_total`.
    RestoredRefused,
}

impl SelfMetric {
    /// Every self metric, in exposition order.
    pub const ALL: [SelfMetric; 22] = [
        SelfMetric::SourceUp,
        SelfMetric::SourcePanics,
        SelfMetric::JournalctlRestarts,
        SelfMetric::JournalEntries,
        SelfMetric::PushLastSuccess,
        SelfMetric::Pushes,
        SelfMetric::PushFailures,
        SelfMetric::PushLastStatus,
        SelfMetric::DiscoveryFollowed,
        SelfMetric::DiscoverySkipped,
        SelfMetric::DiscoverySpecial,
        SelfMetric::ServerNameCollisions,
        SelfMetric::KvCapacityContradictions,
        SelfMetric::ApiUp,
        SelfMetric::ApiRequests,
        SelfMetric::ApiFailures,
        SelfMetric::ApiLastSuccess,
        SelfMetric::ApiDuration,
        SelfMetric::ApiBadValues,
        SelfMetric::ApiContradictions,
        SelfMetric::RestoredGaveWay,
        SelfMetric::RestoredRefused,
    ];

    /// Name, HELP, type and label name (empty: no label).
    pub fn def(self) -> (&'static str, &'static str, Kind, &'static str) {
        use SelfMetric as S;
        match self {
            S::SourceUp => (
                "sglang_log_exporter_source_up",
                "1 while a source is open and being read, 0 while it is missing, failing or restarting.",
                Kind::Gauge,
                "source",
            ),
            S::SourcePanics => (
                "sglang_log_exporter_source_panics_total",
                "Times reading a source hit a bug of the exporter (a panic); the line was skipped or the reader restarted where it stopped.",
                Kind::Counter,
                "source",
            ),
            S::JournalctlRestarts => (
                "sglang_log_exporter_journalctl_restarts_total",
                "Times a journalctl child was restarted after it exited, died or stalled.",
                Kind::Counter,
                "unit",
            ),
            S::JournalEntries => (
                "sglang_log_exporter_journal_entries_total",
                "Journal entries read for each --journal-unit (stuck at 0: no entries, check the unit name).",
                Kind::Counter,
                "unit",
            ),
            S::PushLastSuccess => (
                "sglang_log_exporter_push_last_success_timestamp_seconds",
                "Unix time in seconds of the last successful push to the Pushgateway.",
                Kind::Gauge,
                "",
            ),
            S::Pushes => (
                "sglang_log_exporter_pushes_total",
                "Successful pushes to the Pushgateway.",
                Kind::Counter,
                "",
            ),
            S::PushFailures => (
                "sglang_log_exporter_push_failures_total",
                "Push requests to the Pushgateway that failed (no answer, timeout or an error status).",
                Kind::Counter,
                "",
            ),
            S::PushLastStatus => (
                "sglang_log_exporter_push_last_status",
                "HTTP status of the last push request to the Pushgateway; 0 when none came back.",
                Kind::Gauge,
                "",
            ),
            S::DiscoveryFollowed => (
                "sglang_log_exporter_discovery_files_followed",
                "Files found by --input.glob that are being followed now.",
                Kind::Gauge,
                "",
            ),
            S::DiscoverySkipped => (
                "sglang_log_exporter_discovery_files_skipped_total",
                "Files found by --input.glob that were not followed because --input.max-files were followed already (each file counted once per time it is skipped).",
                Kind::Counter,
                "",
            ),
            S::DiscoverySpecial => (
                "sglang_log_exporter_discovery_files_not_logs_total",
                "Matches of --input.glob that are no log files (character or block devices, sockets): never read, each warned about and counted once per time it is matched.",
                Kind::Counter,
                "",
            ),
            S::ServerNameCollisions => (
                "sglang_log_exporter_server_name_collisions_total",
                "Discovered files whose every server name (stem, parent/stem, path) another input had: each got its path with #N added instead of merging with that input; and inputs named for one server that overlap in time (two servers under one name), each kept apart as an engine named after it; each warned about.",
                Kind::Counter,
                "",
            ),
            S::KvCapacityContradictions => (
                "sglang_log_exporter_kv_capacity_contradictions_total",
                "Times a rank's used KV-cache tokens were seen above the capacity known for it (a stats line above its pool or capacity line, or a capacity line below its last count: a capacity of another rank or process), and stats lines printing a token usage above 1; such a share is never shown over 100 %.",
                Kind::Counter,
                "server",
            ),
            S::ApiUp => (
                "sglang_up",
                "1 while the server's HTTP API (--sglang.url) answers, 0 while it does not (refused, timed out, an error status, an answer that cannot be read); its activity gauges are then withdrawn.",
                Kind::Gauge,
                "server",
            ),
            S::ApiRequests => (
                "sglang_log_exporter_api_requests_total",
                "HTTP requests made to the server's SGLang API (load endpoint and /server_info).",
                Kind::Counter,
                "server",
            ),
            S::ApiFailures => (
                "sglang_log_exporter_api_failures_total",
                "Polls of the server's SGLang API that failed (no answer, timeout, an error status or an answer that cannot be read).",
                Kind::Counter,
                "server",
            ),
            S::ApiLastSuccess => (
                "sglang_log_exporter_api_last_success_timestamp_seconds",
                "Unix time in seconds of the last answer read from the server's SGLang API.",
                Kind::Gauge,
                "server",
            ),
            S::ApiDuration => (
                "sglang_log_exporter_api_poll_duration_seconds",
                "Seconds the last poll of the server's SGLang API took (all its requests).",
                Kind::Gauge,
                "server",
            ),
            S::ApiBadValues => (
                "sglang_log_exporter_api_bad_values_total",
                "Values in the server's API answers out of their range (negative, a fractional count, a share above 1, more tokens in use than the pool holds), left out.",
                Kind::Counter,
                "server",
            ),
            S::ApiContradictions => (
                "sglang_log_exporter_api_contradictions_total",
                "API answers whose /server_info contradicts the server_args line of the log of the same name (another model or dp_size: another server?); their loads are not applied.",
                Kind::Counter,
                "server",
            ),
            S::RestoredGaveWay => (
                "sglang_log_exporter_restored_gave_way_total",
                "Servers and ranks restored from the state file (--state.dir) that no input had named since, removed to make room for an input's own when a cap (servers, engines, ranks) was full: restored ones never crowd out the inputs'.",
                Kind::Counter,
                "",
            ),
            S::RestoredRefused => (
                "sglang_log_exporter_restored_refused_total",
                "Facts and ranks of the state file (--state.dir) refused at start: a value no log line could give (negative where the field is unsigned, past 2^53 times its scale, a fraction of a token or byte) or a rank number the parser refuses.",
                Kind::Counter,
                "",
            ),
        }
    }
}

/// The exporter's own families that are no [`SelfMetric`]: their values come from elsewhere
/// (the per-source line counters, the caps, the label bounds, the exposition check, the build,
/// the GPU sampler), each rendered by its reader from [`SelfFamily::family`]. Declared here
/// beside [`SelfMetric`], so every self metric's name, HELP and type has this one home.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SelfFamily {
    /// `sglang_log_exporter_lines_read_total`.
    LinesRead,
    /// `sglang_log_exporter_bytes_read_total`.
    BytesRead,
    /// `sglang_log_exporter_lines_matched_total`.
    LinesMatched,
    /// `sglang_log_exporter_lines_unmatched_total`.
    LinesUnmatched,
    /// `sglang_log_exporter_lines_unread_total`.
    LinesUnread,
    /// `sglang_log_exporter_lines_oversized_total`.
    LinesOversized,
    /// `sglang_log_exporter_lines_incomplete_total`.
    LinesIncomplete,
    /// `sglang_log_exporter_lines_invalid_utf8_total`.
    LinesInvalidUtf8,
    /// `sglang_log_exporter_read_errors_total`.
    ReadErrors,
    /// `sglang_log_exporter_field_value_errors_total`.
    FieldValueErrors,
    /// `sglang_log_exporter_lines_control_codes_total`.
    LinesControlCodes,
    /// `sglang_log_exporter_json_lines_without_message_total`.
    JsonLinesWithoutMessage,
    /// `sglang_log_exporter_nul_runs_skipped_total`.
    NulRunsSkipped,
    /// `sglang_log_exporter_unknown_fields_total`.
    UnknownFields,
    /// `sglang_log_exporter_series_dropped_total`.
    SeriesDropped,
    /// `sglang_log_exporter_series_dropped_by_cap_total`.
    SeriesDroppedByCap,
    /// `sglang_log_exporter_label_values_shortened_total`.
    LabelValuesShortened,
    /// `sglang_log_exporter_build_info`.
    BuildInfo,
    /// `sglang_log_exporter_exposition_samples_withheld_total`.
    SamplesWithheld,
    /// `sglang_log_exporter_nvml_up`.
    NvmlUp,
    /// `sglang_log_exporter_nvml_errors_total`.
    NvmlErrors,
}

impl SelfFamily {
    /// Every one, in the order they are declared.
    pub const ALL: [SelfFamily; 21] = [
        SelfFamily::LinesRead,
        SelfFamily::BytesRead,
        SelfFamily::LinesMatched,
        SelfFamily::LinesUnmatched,
        SelfFamily::LinesUnread,
        SelfFamily::LinesOversized,
        SelfFamily::LinesIncomplete,
        SelfFamily::LinesInvalidUtf8,
        SelfFamily::ReadErrors,
        SelfFamily::FieldValueErrors,
        SelfFamily::LinesControlCodes,
        SelfFamily::JsonLinesWithoutMessage,
        SelfFamily::NulRunsSkipped,
        SelfFamily::UnknownFields,
        SelfFamily::SeriesDropped,
        SelfFamily::SeriesDroppedByCap,
        SelfFamily::LabelValuesShortened,
        SelfFamily::BuildInfo,
        SelfFamily::SamplesWithheld,
        SelfFamily::NvmlUp,
        SelfFamily::NvmlErrors,
    ];

    /// Name, HELP and type.
    pub const fn def(self) -> (&'static str, &'static str, Kind) {
        use SelfFamily as S;
        match self {
            S::LinesRead => (
                "sglang_log_exporter_lines_read_total",
                "Lines read from each source.",
                Kind::Counter,
            ),
            S::BytesRead => (
                "sglang_log_exporter_bytes_read_total",
                "Bytes read from each source.",
                Kind::Counter,
            ),
            S::LinesMatched => (
                "sglang_log_exporter_lines_matched_total",
                "Lines that matched a line kind of the pattern file, by source and kind.",
                Kind::Counter,
            ),
            S::LinesUnmatched => (
                "sglang_log_exporter_lines_unmatched_total",
                "Lines that matched no line kind (other log output), by source.",
                Kind::Counter,
            ),
            S::LinesUnread => (
                "sglang_log_exporter_lines_unread_total",
                "Lines that are recognisably SGLang's stats (kind=stats) or capacity (kind=capacity) lines but that no line kind reads (a renamed field, a changed layout; also counted as unmatched), by source and kind; sglang-log-exporter check lists them.",
                Kind::Counter,
            ),
            S::LinesOversized => (
                "sglang_log_exporter_lines_oversized_total",
                "Lines longer than --max-line-bytes, skipped, by source.",
                Kind::Counter,
            ),
            S::LinesIncomplete => (
                "sglang_log_exporter_lines_incomplete_total",
                "Partial last lines (no newline) dropped at the end of an input or at rotation or truncation, JSON records cut short, and container records whose last piece never came, by source.",
                Kind::Counter,
            ),
            S::LinesInvalidUtf8 => (
                "sglang_log_exporter_lines_invalid_utf8_total",
                "Lines that were not valid UTF-8 and were read lossily, by source.",
                Kind::Counter,
            ),
            S::ReadErrors => (
                "sglang_log_exporter_read_errors_total",
                "Errors opening or reading a source (missing, unreadable, a directory), by source.",
                Kind::Counter,
            ),
            S::FieldValueErrors => (
                "sglang_log_exporter_field_value_errors_total",
                "Known fields whose value was not a number, and stats-line pieces that were not key: value, by source.",
                Kind::Counter,
            ),
            S::LinesControlCodes => (
                "sglang_log_exporter_lines_control_codes_total",
                "Lines that held terminal colour or control codes or carriage-return fragments, removed before parsing, by source.",
                Kind::Counter,
            ),
            S::JsonLinesWithoutMessage => (
                "sglang_log_exporter_json_lines_without_message_total",
                "JSON object lines with no log message under a known key (a wrapper's own records), skipped, by source.",
                Kind::Counter,
            ),
            S::NulRunsSkipped => (
                "sglang_log_exporter_nul_runs_skipped_total",
                "Runs of NUL bytes skipped between lines (the hole copytruncate leaves when the writer did not append), by source.",
                Kind::Counter,
            ),
            S::UnknownFields => (
                "sglang_log_exporter_unknown_fields_total",
                "Fields of known lines whose key the pattern file does not know, by key (bounded; the rest count as other).",
                Kind::Counter,
            ),
            S::SeriesDropped => (
                "sglang_log_exporter_series_dropped_total",
                "Servers, ranks, sources or HTTP series refused because a cardinality limit was reached.",
                Kind::Counter,
            ),
            S::SeriesDroppedByCap => (
                "sglang_log_exporter_series_dropped_by_cap_total",
                "What each cardinality limit refused (servers, engines_per_server, ranks_per_server, ranks_total, http_series_per_server, sources); each is warned about once per server.",
                Kind::Counter,
            ),
            S::LabelValuesShortened => (
                "sglang_log_exporter_label_values_shortened_total",
                "Label values read from the input (server, engine and node names, model_name, Kubernetes labels, source paths, the state file's) longer than 256 bytes, shown as their first bytes, ~ and a hash of the whole; each distinct value counted once, by label.",
                Kind::Counter,
            ),
            S::BuildInfo => (
                "sglang_log_exporter_build_info",
                "Always 1; the labels name the exporter build: its version, git revision and branch, and the rustc that compiled it (unknown where the build could not tell).",
                Kind::Gauge,
            ),
            S::SamplesWithheld => (
                "sglang_log_exporter_exposition_samples_withheld_total",
                "Samples left out of an exposition because their series was given twice (which copy is right is not known); each rendering counts its own. Always 0 unless an input shows a fault of the exporter: please report it.",
                Kind::Counter,
            ),
            S::NvmlUp => (
                "sglang_log_exporter_nvml_up",
                "1 when the last GPU sample read NVML, 0 when NVML could not be loaded or a system call failed.",
                Kind::Gauge,
            ),
            S::NvmlErrors => (
                "sglang_log_exporter_nvml_errors_total",
                "Failed NVML calls, by GPU index (empty for loading and system calls) and call.",
                Kind::Counter,
            ),
        }
    }

    /// An empty family of this declaration.
    pub fn family(self) -> Family {
        let (name, help, kind) = self.def();
        Family::new(name, help, kind)
    }
}

impl State {
    /// Adds `by` to a self-metric counter, labelled `label` (empty for a metric without label;
    /// bounded in length, [`crate::label`], as every label value the state keeps).
    pub fn add_self(&mut self, m: SelfMetric, label: &str, by: f64) {
        self.generation += 1;
        let label = label::bounded(m.def().3, label);
        *self
            .self_metrics
            .entry((m, label.into_owned()))
            .or_insert(0.0) += by;
    }

    /// Sets a self-metric gauge (its label bounded as in [`State::add_self`]).
    pub fn set_self(&mut self, m: SelfMetric, label: &str, v: f64) {
        self.generation += 1;
        let label = label::bounded(m.def().3, label);
        self.self_metrics.insert((m, label.into_owned()), v);
    }

    /// Replaces the families of collector `name` (e.g. `gpu`), shown on every scrape until the
    /// next call. Collectors run on their own timer, never on the scrape path.
    pub fn set_collected(&mut self, name: &'static str, families: Vec<crate::family::Family>) {
        self.generation += 1;
        self.collected.insert(name, families);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One home, one declaration each: no name is declared twice, every one is the exporter's
    /// (`sglang_log_exporter_*`, or SGLang's own `sglang_up`), and a counter's ends in `_total`.
    #[test]
    fn every_self_family_is_declared_once() {
        let mut names: Vec<(&str, Kind)> = SelfMetric::ALL
            .iter()
            .map(|m| (m.def().0, m.def().2))
            .chain(SelfFamily::ALL.iter().map(|f| (f.def().0, f.def().2)))
            .collect();
        assert_eq!(names.len(), 22 + 21);
        for (n, k) in &names {
            assert!(
                n.starts_with("sglang_log_exporter_") || *n == "sglang_up",
                "{n}"
            );
            assert_eq!(*k == Kind::Counter, n.ends_with("_total"), "{n}");
        }
        names.sort_by_key(|(n, _)| *n);
        names.dedup_by_key(|(n, _)| *n);
        assert_eq!(names.len(), 22 + 21);
        assert_eq!(
            SelfFamily::NvmlUp.family().name,
            "sglang_log_exporter_nvml_up"
        );
    }
}
