//! What the state keeps per source: line counters ([`SourceDelta`]), journal cursors, the
//! labels and Kubernetes pod UID a source gives its servers, which user first ran a server on
//! a host, and sources retired with their files.

use std::collections::BTreeMap;

use super::{caps, State};
use crate::label;
use crate::record::Record;

/// Per-source line counters (self metrics): the sum of what the source handed in.
pub type SourceStats = SourceDelta;

/// Counts a source gathers locally and hands to the state in batches: at the end of each read,
/// and with each parsed line's values (so a scrape that shows a value counts its line).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceDelta {
    /// Lines read.
    pub lines: u64,
    /// Lines that matched no kind.
    pub unmatched: u64,
    /// Lines over the length limit (skipped).
    pub oversized: u64,
    /// Inputs that ended, or were rotated or truncated, in the middle of a line (not parsed).
    pub incomplete: u64,
    /// Lines that were not valid UTF-8 (read lossily).
    pub invalid_utf8: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Read errors (open, read, permission, a directory instead of a file).
    pub errors: u64,
    /// Lines that held terminal control codes or `\r` fragments (removed before parsing).
    pub control_codes: u64,
    /// JSON object lines that carried no log message under a known key (skipped).
    pub json_without_message: u64,
    /// Runs of NUL bytes skipped (a copytruncate hole).
    pub nul_runs: u64,
    /// journald entries whose MESSAGE was null (also counted as unmatched).
    pub null_messages: u64,
    /// Lines by matched line kind index.
    pub matched: Vec<u64>,
    /// Field values that were not numbers, and stats-line pieces that were not `key: value`.
    pub bad_values: u64,
    /// Unmatched lines that are recognisably SGLang's stats and capacity lines
    /// ([`crate::parse::unread`]), in that order.
    pub unread: [u64; 2],
}

impl SourceDelta {
    /// Counts a parsed record: its kind, its unreadable values.
    pub fn count_record(&mut self, rec: &Record<'_>) {
        if self.matched.len() <= rec.kind {
            self.matched.resize(rec.kind + 1, 0);
        }
        self.matched[rec.kind] += 1;
        self.bad_values += u64::from(rec.bad_values);
    }

    /// Counts an unmatched line that looks like one of SGLang's.
    pub fn count_unread(&mut self, looks: crate::parse::unread::Looks) {
        self.unread[looks as usize] += 1;
    }

    /// Zeroes every count, keeping the allocation of `matched`: a parsed line's counts are
    /// handed to the state and reset on every such line, which must not cost an allocation.
    pub fn reset(&mut self) {
        let mut matched = std::mem::take(&mut self.matched);
        matched.clear();
        *self = SourceDelta {
            matched,
            ..SourceDelta::default()
        };
    }

    /// Adds `d` to these counts.
    pub fn add(&mut self, d: &SourceDelta) {
        self.lines += d.lines;
        self.unmatched += d.unmatched;
        self.oversized += d.oversized;
        self.incomplete += d.incomplete;
        self.invalid_utf8 += d.invalid_utf8;
        self.bytes += d.bytes;
        self.errors += d.errors;
        self.control_codes += d.control_codes;
        self.json_without_message += d.json_without_message;
        self.nul_runs += d.nul_runs;
        self.null_messages += d.null_messages;
        self.bad_values += d.bad_values;
        for (a, b) in self.unread.iter_mut().zip(d.unread) {
            *a += b;
        }
        if self.matched.len() < d.matched.len() {
            self.matched.resize(d.matched.len(), 0);
        }
        for (a, b) in self.matched.iter_mut().zip(&d.matched) {
            *a += b;
        }
    }
}

impl State {
    /// Notes the cursor of the last journal entry read for `unit`.
    pub fn set_journal_cursor(&mut self, unit: &str, cursor: &str) {
        match self.journal_cursors.get_mut(unit) {
            Some(c) => {
                c.clear();
                c.push_str(cursor);
            }
            None => {
                self.journal_cursors
                    .insert(unit.to_string(), cursor.to_string());
            }
        }
    }

    /// Every unit's journal cursor (for the state file).
    pub fn journal_cursors_map(&self) -> BTreeMap<String, String> {
        self.journal_cursors.clone()
    }

    /// The cursor of the last journal entry read for `unit` (also one restored from the state
    /// file).
    pub fn journal_cursor(&self, unit: &str) -> Option<&str> {
        self.journal_cursors.get(unit).map(String::as_str)
    }

    /// Sets the labels a source gives every series of the servers named `server` (Kubernetes
    /// `namespace`, `pod`, `container`): those that exist now (every engine) and those created
    /// later, so a server's first series already carry them. It also undoes a
    /// [`State::retire_server`] of that name (the source is back). Creates no server.
    pub fn set_source_labels(&mut self, server: &str, mut labels: Vec<(&'static str, String)>) {
        self.generation += 1;
        let server = label::bounded("server", server);
        let server = &*server;
        for (k, v) in labels.iter_mut() {
            label::bound(k, v);
        }
        for (k, s) in self.servers.iter_mut() {
            if k.server == server {
                s.source_labels = labels.clone();
                s.retired_at = None;
                s.unclaimed_since = None;
            }
        }
        self.source_labels.insert(server.to_string(), labels);
    }

    /// Whether `user` (a user service's manager, `user@1000`) is the first whose user unit
    /// named `server` logged on `host` (empty: none named): noted if none did yet. Two users
    /// of one host never run one server, so only the first one's lines are the server as it
    /// is named; another's are an engine of it ([`crate::pipeline::nodes`]). Every input asks
    /// here, in the order lines are applied, and the answer is kept in the state file: an
    /// input read later or an exporter restarted never gives the name to another user. Past
    /// `max_servers` pairs, a new pair's user is not the first (an engine: never merged).
    pub fn first_user(&mut self, server: &str, host: &str, user: &str) -> bool {
        let key = (
            label::bounded("server", server).into_owned(),
            label::bounded("node", host).into_owned(),
        );
        if let Some(u) = self.first_users.get(&key) {
            return u == user;
        }
        if self.first_users.len() >= self.cfg.max_servers {
            return false;
        }
        self.first_users.insert(key, user.to_string());
        true
    }

    /// Notes the Kubernetes pod UID of the source of the servers named `server` (a discovered
    /// pod log), which ties GPU processes to them (their cgroup names it); `None` forgets it.
    pub fn set_source_pod(&mut self, server: &str, uid: Option<&str>) {
        let server = label::bounded("server", server);
        let server = &*server;
        match uid {
            Some(u) => self.source_pods.insert(server.to_string(), u.to_string()),
            None => self.source_pods.remove(server),
        };
    }

    /// The pod UID noted for the servers named `server`.
    pub fn source_pod(&self, server: &str) -> Option<&str> {
        let server = label::bounded("server", server);
        self.source_pods.get(&*server).map(String::as_str)
    }

    /// Marks a source as gone at `at` (`Some`): its self metrics (`source` label) are removed
    /// `retired_expiry` seconds later, so sources that come and go (pods' log files) do not
    /// grow the exposition. `None`: the source is back, keep it.
    pub fn retire_source(&mut self, source: &str, at: Option<f64>) {
        self.generation += 1;
        let source = label::bounded("source", source);
        let source = &*source;
        match at {
            Some(t) => {
                self.retired_sources.insert(source.to_string(), t);
            }
            None => {
                self.retired_sources.remove(source);
            }
        }
    }

    /// Removes the self metrics of sources retired for `retired_expiry`; whether any were.
    pub(super) fn expire_sources(&mut self, now: f64) -> bool {
        if self.retired_sources.is_empty() {
            return false;
        }
        let expiry = self.cfg.retired_expiry;
        let due: Vec<String> = self
            .retired_sources
            .iter()
            .filter(|(_, &t)| now - t > expiry)
            .map(|(s, _)| s.clone())
            .collect();
        for s in &due {
            self.retired_sources.remove(s);
            self.sources.remove(s);
            self.self_metrics
                .retain(|(m, label), _| !(m.label() == "source" && label == s));
        }
        !due.is_empty()
    }

    /// Applies a batch of source counters.
    pub fn add_source_counts(&mut self, source: &str, d: &SourceDelta) {
        self.generation += 1;
        // A known source (every call but its first): one lookup.
        if let Some(s) = self.sources.get_mut(source) {
            s.add(d);
        } else if let Some(s) = self.source_mut(source) {
            s.add(d);
        }
    }

    pub(super) fn source_mut(&mut self, source: &str) -> Option<&mut SourceStats> {
        // The `source` label: bounded as every label value the state keeps.
        let source = label::bounded("source", source);
        if !self.sources.contains_key(&*source) {
            if self.sources.len() >= self.cfg.max_sources {
                self.refuse(caps::Cap::Sources, &source);
                return None;
            }
            self.sources
                .insert(source.to_string(), SourceStats::default());
        }
        self.sources.get_mut(&*source)
    }
}
