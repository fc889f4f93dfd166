//! The pattern file's metrics as entries of the whole list of families
//! ([`crate::catalog::every_family`]).

use super::{FieldTarget, Patterns};
use crate::catalog::{self, Entry};

impl Patterns {
    /// Every metric of the file as a family of the whole list, in file order (their exposition
    /// order): name, HELP, type, the unit its name tells, the rank labels, and the log fields
    /// that set it (or what it is an alias of).
    pub fn family_entries(&self) -> Vec<Entry> {
        self.metrics
            .iter()
            .enumerate()
            .map(|(i, d)| Entry {
                name: d.name.clone(),
                help: d.help.clone(),
                kind: d.kind.into(),
                unit: catalog::unit_of_name(&d.name).to_string(),
                labels: catalog::RANK_LABELS.to_vec(),
                reads: self.reads(i),
            })
            .collect()
    }

    /// What sets metric `i`: the pattern file's field keys that name it, or its alias sources.
    fn reads(&self, i: usize) -> String {
        let d = &self.metrics[i];
        if d.is_alias() {
            let of: Vec<&str> = d
                .alias_of
                .iter()
                .map(|&j| self.metrics[j as usize].name.as_str())
                .collect();
            let scale = match d.scale {
                // 1 / 2^30 (bytes to GB) reads better as a division.
                Some(s) if s < 1.0 && (1.0 / s).fract() == 0.0 => format!(" ÷ {}", 1.0 / s),
                Some(s) => format!(" × {s}"),
                None => String::new(),
            };
            return format!("pattern file: alias of {}{scale}", of.join(", else "));
        }
        let mut keys: Vec<&str> = self
            .fields_prefill
            .iter()
            .chain(&self.fields_decode)
            .chain(&self.fields_other)
            .chain(self.lines.iter().flat_map(|l| &l.overrides))
            .filter(|(_, t)| matches!(t, FieldTarget::Metric { id, .. } if *id as usize == i))
            .map(|(k, _)| k.as_str())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        if keys.is_empty() {
            return "pattern file: no log field (set by the state or the HTTP API)".to_string();
        }
        let keys: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
        format!("pattern file: log field {}", keys.join(", "))
    }
}
