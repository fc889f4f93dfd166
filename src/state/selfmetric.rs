//! The exporter's own metrics that parts other than the line counters set (journalctl
//! supervision, push results, source health): one typed list of keys, each declared (name, HELP,
//! type, label) once in [`crate::catalog`].

use super::State;
use crate::catalog::{exporter, gpu, FamilyDef};
use crate::family::Family;
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
    /// `sglang_router_up{router}`.
    RouterUp,
    /// `sglang_log_exporter_router_failures_total{router}`.
    RouterFailures,
    /// `sglang_log_exporter_restored_gave_way_total`.
    RestoredGaveWay,
    /// `sglang_log_exporter_restored_refused_total`.
    RestoredRefused,
}

impl SelfMetric {
    /// Every self metric, in exposition order.
    pub const ALL: [SelfMetric; 24] = [
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
        SelfMetric::RouterUp,
        SelfMetric::RouterFailures,
        SelfMetric::RestoredGaveWay,
        SelfMetric::RestoredRefused,
    ];

    /// Its declaration in the registry ([`crate::catalog::exporter`]).
    pub const fn def(self) -> &'static FamilyDef {
        use SelfMetric as S;
        match self {
            S::SourceUp => &exporter::SOURCE_UP,
            S::SourcePanics => &exporter::SOURCE_PANICS,
            S::JournalctlRestarts => &exporter::JOURNALCTL_RESTARTS,
            S::JournalEntries => &exporter::JOURNAL_ENTRIES,
            S::PushLastSuccess => &exporter::PUSH_LAST_SUCCESS,
            S::Pushes => &exporter::PUSHES,
            S::PushFailures => &exporter::PUSH_FAILURES,
            S::PushLastStatus => &exporter::PUSH_LAST_STATUS,
            S::DiscoveryFollowed => &exporter::DISCOVERY_FOLLOWED,
            S::DiscoverySkipped => &exporter::DISCOVERY_SKIPPED,
            S::DiscoverySpecial => &exporter::DISCOVERY_NOT_LOGS,
            S::ServerNameCollisions => &exporter::SERVER_NAME_COLLISIONS,
            S::KvCapacityContradictions => &exporter::KV_CAPACITY_CONTRADICTIONS,
            S::ApiUp => &exporter::API_UP,
            S::ApiRequests => &exporter::API_REQUESTS,
            S::ApiFailures => &exporter::API_FAILURES,
            S::ApiLastSuccess => &exporter::API_LAST_SUCCESS,
            S::ApiDuration => &exporter::API_POLL_DURATION,
            S::ApiBadValues => &exporter::API_BAD_VALUES,
            S::ApiContradictions => &exporter::API_CONTRADICTIONS,
            S::RouterUp => &exporter::ROUTER_UP,
            S::RouterFailures => &exporter::ROUTER_FAILURES,
            S::RestoredGaveWay => &exporter::RESTORED_GAVE_WAY,
            S::RestoredRefused => &exporter::RESTORED_REFUSED,
        }
    }

    /// Its label key (empty: no label).
    pub fn label(self) -> &'static str {
        self.def().labels.first().copied().unwrap_or("")
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

    /// Its declaration in the registry ([`crate::catalog::exporter`], [`crate::catalog::gpu`]).
    pub const fn def(self) -> &'static FamilyDef {
        use SelfFamily as S;
        match self {
            S::LinesRead => &exporter::LINES_READ,
            S::BytesRead => &exporter::BYTES_READ,
            S::LinesMatched => &exporter::LINES_MATCHED,
            S::LinesUnmatched => &exporter::LINES_UNMATCHED,
            S::LinesUnread => &exporter::LINES_UNREAD,
            S::LinesOversized => &exporter::LINES_OVERSIZED,
            S::LinesIncomplete => &exporter::LINES_INCOMPLETE,
            S::LinesInvalidUtf8 => &exporter::LINES_INVALID_UTF8,
            S::ReadErrors => &exporter::READ_ERRORS,
            S::FieldValueErrors => &exporter::FIELD_VALUE_ERRORS,
            S::LinesControlCodes => &exporter::LINES_CONTROL_CODES,
            S::JsonLinesWithoutMessage => &exporter::JSON_LINES_WITHOUT_MESSAGE,
            S::NulRunsSkipped => &exporter::NUL_RUNS_SKIPPED,
            S::UnknownFields => &exporter::UNKNOWN_FIELDS,
            S::SeriesDropped => &exporter::SERIES_DROPPED,
            S::SeriesDroppedByCap => &exporter::SERIES_DROPPED_BY_CAP,
            S::LabelValuesShortened => &exporter::LABEL_VALUES_SHORTENED,
            S::BuildInfo => &exporter::BUILD_INFO,
            S::SamplesWithheld => &exporter::SAMPLES_WITHHELD,
            S::NvmlUp => &gpu::NVML_UP,
            S::NvmlErrors => &gpu::NVML_ERRORS,
        }
    }

    /// An empty family of this declaration.
    pub fn family(self) -> Family {
        Family::of(self.def())
    }
}

impl State {
    /// Adds `by` to a self-metric counter, labelled `label` (empty for a metric without label;
    /// bounded in length, [`crate::label`], as every label value the state keeps).
    pub fn add_self(&mut self, m: SelfMetric, label: &str, by: f64) {
        self.generation += 1;
        let label = label::bounded(m.label(), label);
        *self
            .self_metrics
            .entry((m, label.into_owned()))
            .or_insert(0.0) += by;
    }

    /// Sets a self-metric gauge (its label bounded as in [`State::add_self`]).
    pub fn set_self(&mut self, m: SelfMetric, label: &str, v: f64) {
        self.generation += 1;
        let label = label::bounded(m.label(), label);
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
    use crate::family::Kind;

    /// One home, one declaration each: no name is declared twice, every one is the exporter's
    /// (`sglang_log_exporter_*`, or a polled peer's `sglang_up`, `sglang_router_up`), and a counter's ends in `_total`.
    #[test]
    fn every_self_family_is_declared_once() {
        let mut names: Vec<(&str, Kind)> = SelfMetric::ALL
            .iter()
            .map(|m| (m.def().name, m.def().kind))
            .chain(SelfFamily::ALL.iter().map(|f| (f.def().name, f.def().kind)))
            .collect();
        assert_eq!(names.len(), 24 + 21);
        for (n, k) in &names {
            assert!(
                n.starts_with("sglang_log_exporter_")
                    || ["sglang_up", "sglang_router_up"].contains(n),
                "{n}"
            );
            assert_eq!(*k == Kind::Counter, n.ends_with("_total"), "{n}");
        }
        names.sort_by_key(|(n, _)| *n);
        names.dedup_by_key(|(n, _)| *n);
        assert_eq!(names.len(), 24 + 21);
        assert_eq!(
            SelfFamily::NvmlUp.family().name,
            "sglang_log_exporter_nvml_up"
        );
    }
}
