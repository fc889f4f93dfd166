//! The registry of exposed families: every family the exporter can show that the pattern file
//! does not declare, declared once as a [`FamilyDef`] constant (name, HELP, type, unit, label
//! keys, what fills it), grouped by the collector that fills it. Writers build
//! `Family::of(&catalog::rank::IDLE)`; readers match on `catalog::rank::IDLE.name`.
//!
//! With the pattern file's metrics ([`every_family`] takes them from a loaded
//! [`crate::parse::patterns::Patterns`]) this is the whole list: `docs/metrics-contract.md`'s
//! section "Every family this exporter exposes" is generated from it
//! (`sglang-log-exporter generate metrics-contract docs/metrics-contract.md`).
//!
//! A low floor: it imports [`crate::family`] only (the pattern file's loader imports it, to refuse
//! a metric named as one of these).

pub mod exporter;
pub mod gpu;
pub mod process;
pub mod rank;
pub mod request;
pub mod router;
pub mod server;

use crate::family::{Family, Kind};

/// One family's declaration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FamilyDef {
    /// The exposition name (a histogram's base name).
    pub name: &'static str,
    /// The HELP sentence.
    pub help: &'static str,
    /// Gauge, counter or histogram.
    pub kind: Kind,
    /// The unit of the values, in words (`seconds`, `bytes`, `tokens`; empty for a count of
    /// events, a state or an info family).
    pub unit: &'static str,
    /// The label keys, in output order; a key ending in `?` is set only where it applies (see
    /// [`RANK_LABELS`]).
    pub labels: &'static [&'static str],
    /// Which state it reads, or which collector fills it: one short phrase.
    pub reads: &'static str,
}

impl FamilyDef {
    /// The label keys without the `?` of the conditional ones.
    pub fn label_keys(&self) -> impl Iterator<Item = &'static str> {
        self.labels.iter().map(|l| l.trim_end_matches('?'))
    }
}

impl Family {
    /// An empty family of declaration `def`.
    pub fn of(def: &FamilyDef) -> Family {
        Family::new(def.name, def.help, def.kind)
    }
}

/// `a` then `b`, as one array of `N` (their lengths summed: checked when the constant is built).
pub const fn join<const N: usize>(a: &[&'static str], b: &[&'static str]) -> [&'static str; N] {
    assert!(a.len() + b.len() == N, "N is not the sum of the lengths");
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = if i < a.len() { a[i] } else { b[i - a.len()] };
        i += 1;
    }
    out
}

/// The labels that tell one server's series from another's (`crate::view::origin_labels`):
/// `server`, `engine` where several engines share a log, then the source's Kubernetes labels.
pub const ORIGIN_LABELS: &[&str] = &["server", "engine?", "namespace?", "pod?", "container?"];

/// The labels of a server's series (`crate::view::server_labels`): [`ORIGIN_LABELS`], then
/// `model_name` and `engine_type`.
pub const SERVER_LABELS: &[&str] = &join::<7>(ORIGIN_LABELS, &["model_name", "engine_type"]);

/// The rank labels, in output order (`crate::view::rank_label_pairs`), as upstream values them:
/// `dp_rank` only under a DP controller; `attn_cp_rank` and `moe_dp_rank` only where the prefix
/// names them.
pub const RANK_PAIRS: &[&str] = &[
    "dp_rank?",
    "pp_rank",
    "tp_rank",
    "moe_ep_rank",
    "attn_cp_rank?",
    "moe_dp_rank?",
];

/// The labels of a rank's series (`crate::view::rank_labels`): [`SERVER_LABELS`], then
/// [`RANK_PAIRS`].
pub const RANK_LABELS: &[&str] = &join::<13>(SERVER_LABELS, RANK_PAIRS);

/// The groups, each by the collector that fills it, in the order the exposition of `/metrics`
/// shows them (the pattern file's metrics come between [`process`] and [`rank`]).
pub const GROUPS: [(&str, &[&FamilyDef]); 7] = [
    ("process", &process::ALL),
    ("rank", &rank::ALL),
    ("request", &request::ALL),
    ("server", &server::ALL),
    ("router", &router::ALL),
    ("exporter", &exporter::ALL),
    ("gpu", &gpu::ALL),
];

/// Every declaration of the registry, in exposition order (the pattern file's metrics left out).
pub fn registry() -> impl Iterator<Item = &'static FamilyDef> {
    GROUPS.iter().flat_map(|(_, defs)| defs.iter().copied())
}

/// Every name a family of `name` and `kind` writes, each [`underscored`]: its own; a
/// histogram's `_bucket`, `_count` and `_sum` samples; a counter's OpenMetrics family name (its
/// name without `_total`). A family whose forms meet another's would write one name twice in
/// some style or format.
pub fn forms(name: &str, kind: Kind) -> Vec<String> {
    names_written(&underscored(name), kind)
}

/// The names a family of `base` and `kind` writes, as they are: its own; a histogram's
/// `_bucket`, `_count` and `_sum` samples; a counter's OpenMetrics family name (without
/// `_total`).
pub fn names_written(base: &str, kind: Kind) -> Vec<String> {
    let base = base.to_string();
    let mut out = vec![base.clone()];
    match kind {
        Kind::Histogram => out.extend(["_bucket", "_count", "_sum"].map(|s| format!("{base}{s}"))),
        Kind::Counter => out.extend(base.strip_suffix("_total").map(str::to_string)),
        Kind::Gauge => {}
    }
    out
}

/// The family that a family of `name` and `kind` would meet ([`forms`]): a registry
/// declaration, or a renamed family's old name (`--web.old-names` serves it; as it is: under
/// underscores an old name is SGLang's own family's, and is then left out).
pub fn taken_by(name: &str, kind: Kind) -> Option<String> {
    // Every form the registry and the old names write, built once (a pattern file asks for
    // each of its metrics).
    static TAKEN: std::sync::OnceLock<[std::collections::HashMap<String, String>; 2]> =
        std::sync::OnceLock::new();
    let [registry_forms, old_forms] = TAKEN.get_or_init(|| {
        let mut by_form = std::collections::HashMap::new();
        for d in registry() {
            for f in forms(d.name, d.kind) {
                by_form.insert(f, format!("{} ({})", d.name, d.reads));
            }
        }
        let mut old_forms = std::collections::HashMap::new();
        for (new, old) in RENAMED {
            let kind = if old.ends_with("_total") {
                Kind::Counter
            } else {
                Kind::Gauge
            };
            for f in names_written(old, kind) {
                old_forms.insert(f, format!("{old} (the old name of {new}, --web.old-names)"));
            }
        }
        [by_form, old_forms]
    });
    let in_registry = forms(name, kind)
        .into_iter()
        .find_map(|f| registry_forms.get(&f));
    in_registry
        .or_else(|| {
            names_written(name, kind)
                .into_iter()
                .find_map(|f| old_forms.get(&f))
        })
        .cloned()
}

/// `name` as it is written where colons are not allowed: each `:` turned into `_` (what
/// prometheus_client's OpenMetrics escaping and many relabel rules do). Two families whose
/// names meet here would be one family there.
pub fn underscored(name: &str) -> String {
    name.replace(':', "_")
}

/// One family of the whole list ([`every_family`]): a registry declaration or a pattern-file
/// metric.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The exposition name.
    pub name: String,
    /// The HELP sentence.
    pub help: String,
    /// Its type.
    pub kind: Kind,
    /// Its unit, in words (empty where none or not known).
    pub unit: String,
    /// Label keys in output order (`?`: conditional).
    pub labels: Vec<&'static str>,
    /// What fills it.
    pub reads: String,
}

impl From<&FamilyDef> for Entry {
    fn from(d: &FamilyDef) -> Entry {
        Entry {
            name: d.name.to_string(),
            help: d.help.to_string(),
            kind: d.kind,
            unit: d.unit.to_string(),
            labels: d.labels.to_vec(),
            reads: d.reads.to_string(),
        }
    }
}

/// Every family the exporter can expose, in the order `/metrics` shows them: the process
/// families, the pattern file's metrics `pattern` (as
/// [`crate::parse::patterns::Patterns::family_entries`] gives them), then the registry's other
/// groups.
pub fn every_family(pattern: Vec<Entry>) -> Vec<Entry> {
    let mut out: Vec<Entry> = process::ALL.iter().map(|d| Entry::from(*d)).collect();
    out.extend(pattern);
    out.extend(
        GROUPS
            .iter()
            .filter(|(g, _)| *g != "process")
            .flat_map(|(_, defs)| defs.iter().map(|d| Entry::from(*d))),
    );
    out
}

/// The unit a metric's name ends in (`_seconds`, `_bytes`, …; before `_total`), in words; empty
/// where the name does not tell.
pub fn unit_of_name(name: &str) -> &'static str {
    let base = name.strip_suffix("_total").unwrap_or(name);
    const UNITS: &[(&str, &str)] = &[
        ("_seconds", "seconds"),
        ("_bytes", "bytes"),
        ("_gb", "GB (2^30 bytes)"),
        ("_tokens", "tokens"),
        ("_ratio", "ratio (0-1)"),
        ("_usage", "ratio (0-1)"),
        ("_rate", "ratio (0-1)"),
        ("_reqs", "requests"),
        ("_requests", "requests"),
        ("_slots", "slots"),
    ];
    UNITS
        .iter()
        .find(|(suffix, _)| base.ends_with(suffix))
        .map_or("", |(_, unit)| unit)
}

/// Pairs of entries of `list` whose names are equal, or equal once [`underscored`]: each pair's
/// two names, the first in list order first.
pub fn collisions(list: &[Entry]) -> Vec<(String, String)> {
    let mut seen: std::collections::HashMap<String, &str> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for e in list {
        if let Some(first) = seen.insert(underscored(&e.name), &e.name) {
            out.push((first.to_string(), e.name.clone()));
        }
    }
    out
}

#[cfg(test)]
mod tests;

/// Families of ours renamed because their names met upstream's once colons become underscores
/// (under `--web.names underscores`, `upstream` for a Prometheus 2, or a relabel rule): new
/// name, old name. `sglang_swa_used_tokens` met `sglang:swa_used_tokens` (which we also serve,
/// with the same value and labels: one series twice), `sglang_http_requests_total{method,path,
/// status}` met `sglang:http_requests_total{endpoint,method}`, and `sglang_max_running_requests`
/// is a name SGLang's `/v1/loads?format=prometheus` serves. `--web.old-names` serves the old
/// names beside the new ones until the next release.
pub const RENAMED: &[(&str, &str)] = &[
    ("sglang_swa_pool_used_tokens", "sglang_swa_used_tokens"),
    (
        "sglang_access_log_requests_total",
        "sglang_http_requests_total",
    ),
    (
        "sglang_running_requests_limit",
        "sglang_max_running_requests",
    ),
];
