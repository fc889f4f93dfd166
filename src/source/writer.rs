//! Who wrote a journal entry: the one rule by which every journal form names a writer's `server`,
//! `engine` and node — the export format read from a file or stdin
//! ([`crate::pipeline::journal_lines`]), `journalctl -o json` records
//! ([`crate::pipeline::framing`]) and the supervised `--journal-unit` reader
//! ([`super::journal_export`]). They read the same fields ([`Field`]) into [`Fields`], and
//! [`Fields::writer`] alone turns them into labels, so the same entries give the same series
//! whichever form carried them.
//!
//! The rules, most specific name first:
//!
//! * **Server**: the entry's unit without `.service` (`_SYSTEMD_UNIT`). A user service runs
//!   under the user's manager (`_SYSTEMD_UNIT=user@1000.service`, which runs every service of
//!   that user): its own unit, `_SYSTEMD_USER_UNIT`, is the server. No unit: the input's own
//!   server (its file name, `stdin`). The user's manager (`user@1000`) is kept with it: two
//!   users' units of one name are two writers — the first of a host keeps the server as it
//!   is, another user's lines are an engine named after its manager ([`crate::pipeline::nodes`]).
//! * **Engine**: Docker's journald log driver writes every container's lines as `dockerd` under
//!   `docker.service`: `CONTAINER_NAME` (its leading `/` dropped) is the engine, as in a JSON
//!   record ([`crate::pipeline::framing::ORIGIN_KEYS`]). An entry with neither unit nor container
//!   (a process outside any service, `systemd-cat`) is named as `journalctl -o short` prints it:
//!   `HOST IDENT[PID]` (`SYSLOG_IDENTIFIER`, else `_COMM`; `_PID`, else `SYSLOG_PID`), the engine
//!   the short form's stream prefix gives the same entry. Its PID is part of it because nothing
//!   else tells two `python3` processes of one host apart; so a restart is a new writer there, as
//!   under `-o short`. Where a unit or container names the writer, the PID does not: a unit's
//!   restart is the same server, and SGLang's rank processes share the unit's output stream.
//! * **Node**: `_HOSTNAME`, unless the engine already holds it. The hosts of one multi-node server
//!   (under the same unit name on each host, in one merged journal) print different ranks and stay
//!   one server; a host that prints a rank another host of the server printed runs a server of its
//!   own and becomes an engine ([`crate::pipeline::nodes`]), so two hosts of one unit name never
//!   merge.

use std::borrow::Cow;

/// A field of an entry that names its writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `_SYSTEMD_UNIT`.
    Unit,
    /// `_SYSTEMD_USER_UNIT`.
    UserUnit,
    /// `CONTAINER_NAME` (Docker's and Podman's journald log drivers).
    Container,
    /// `_HOSTNAME`.
    Host,
    /// `SYSLOG_IDENTIFIER`.
    Ident,
    /// `_COMM`.
    Comm,
    /// `_PID`.
    Pid,
    /// `SYSLOG_PID`.
    SyslogPid,
}

/// Every writer field with its journal name.
pub const FIELDS: [(Field, &str); 8] = [
    (Field::Unit, "_SYSTEMD_UNIT"),
    (Field::UserUnit, "_SYSTEMD_USER_UNIT"),
    (Field::Container, "CONTAINER_NAME"),
    (Field::Host, "_HOSTNAME"),
    (Field::Ident, "SYSLOG_IDENTIFIER"),
    (Field::Comm, "_COMM"),
    (Field::Pid, "_PID"),
    (Field::SyslogPid, "SYSLOG_PID"),
];

/// The writer fields as a `journalctl --output-fields` list (for a reader that asks for only
/// the fields it reads).
pub const OUTPUT_FIELDS: &str =
    "_SYSTEMD_UNIT,_SYSTEMD_USER_UNIT,CONTAINER_NAME,_HOSTNAME,SYSLOG_IDENTIFIER,_COMM,_PID,SYSLOG_PID";

impl Field {
    /// The writer field of the journal field `name`, if it is one.
    pub fn of(name: &[u8]) -> Option<Field> {
        FIELDS
            .iter()
            .find(|(_, n)| n.as_bytes() == name)
            .map(|(f, _)| *f)
    }
}

/// The writer fields of one entry, as raw bytes (a field given twice keeps its first value, as
/// journalctl's short output does). Cleared for the next entry without freeing its buffers.
#[derive(Debug, Default, Clone)]
pub struct Fields {
    values: [Vec<u8>; 8],
    /// Bit `f` set: field `f` has a value.
    set: u8,
}

impl PartialEq for Fields {
    /// Equal when the same fields have the same values (buffers of unset fields aside).
    fn eq(&self, o: &Fields) -> bool {
        self.set == o.set
            && (0..8).all(|i| self.set & (1 << i) == 0 || self.values[i] == o.values[i])
    }
}

impl Eq for Fields {}

impl Fields {
    /// Whether `f` has a value already.
    pub fn has(&self, f: Field) -> bool {
        self.set & (1 << f as u8) != 0
    }

    /// The buffer of `f`'s value, empty when it had none (for a value read in pieces).
    pub fn slot(&mut self, f: Field) -> &mut Vec<u8> {
        if !self.has(f) {
            self.set |= 1 << f as u8;
            self.values[f as usize].clear();
        }
        &mut self.values[f as usize]
    }

    /// Sets `f` to `value` unless it has one.
    pub fn set(&mut self, f: Field, value: &[u8]) {
        if !self.has(f) {
            self.slot(f).extend_from_slice(value);
        }
    }

    /// Forgets every value.
    pub fn clear(&mut self) {
        self.set = 0;
    }

    /// The value of `f` as text (invalid UTF-8 escaped, as [`super::bytes_text`] does);
    /// `None` when missing or empty.
    pub fn get(&self, f: Field) -> Option<Cow<'_, str>> {
        let v = &self.values[f as usize];
        (self.has(f) && !v.is_empty()).then(|| super::bytes_text(v))
    }

    /// Who wrote the entry, by the rules of the module docs, into `out` (its buffers reused).
    pub fn writer(&self, out: &mut Writer) {
        use std::fmt::Write;
        out.clear();
        let unit = self.get(Field::Unit);
        let user_unit = self.get(Field::UserUnit);
        let manager = unit.as_deref().is_none_or(is_user_manager);
        // A user unit under its user's manager: that user writes it.
        if let (Some(m), Some(_), true) = (&unit, &user_unit, manager) {
            out.user.push_str(super::server_name_of_unit(m));
        }
        let server = match user_unit {
            Some(u) if manager => Some(u),
            _ => unit,
        };
        if let Some(s) = &server {
            out.server.push_str(super::server_name_of_unit(s));
        }
        let host = self.get(Field::Host);
        if let Some(c) = self.get(Field::Container) {
            out.engine.push_str(c.strip_prefix('/').unwrap_or(&c));
        } else if server.is_none() {
            // As `journalctl -o short` prints it: `HOST IDENT[PID]`.
            let ident = self.get(Field::Ident).or_else(|| self.get(Field::Comm));
            let pid = self.get(Field::Pid).or_else(|| self.get(Field::SyslogPid));
            if let Some(h) = &host {
                out.engine.push_str(h);
            }
            if let Some(i) = &ident {
                if !out.engine.is_empty() {
                    out.engine.push(' ');
                }
                out.engine.push_str(i);
            }
            if let (Some(p), false) = (&pid, out.engine.is_empty()) {
                let _ = write!(out.engine, "[{p}]");
            }
            if !out.engine.is_empty() {
                // The host is in the engine.
                return;
            }
        }
        if let Some(h) = host {
            out.node.push_str(&h);
        }
    }
}

/// Whether `unit` is a user's service manager (`user@1000.service`).
fn is_user_manager(unit: &str) -> bool {
    unit.strip_prefix("user@")
        .and_then(|u| u.strip_suffix(".service"))
        .is_some_and(|uid| !uid.is_empty() && uid.bytes().all(|c| c.is_ascii_digit()))
}

/// Who wrote an entry, as [`Fields::writer`] names it (empty: none).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Writer {
    /// The server (a unit without `.service`); empty: the input's own.
    pub server: String,
    /// The engine within that server; empty: none.
    pub engine: String,
    /// The host, a node of the server ([`crate::pipeline::nodes`]); empty: none.
    pub node: String,
    /// The service manager of a user service (`user@1000`, its unit without `.service`): two
    /// users' units of one name are two writers ([`crate::pipeline::nodes`]); empty: none.
    pub user: String,
}

impl Writer {
    fn clear(&mut self) {
        self.server.clear();
        self.engine.clear();
        self.node.clear();
        self.user.clear();
    }

    /// The user's service manager, if the entry is a user service's.
    pub fn user(&self) -> Option<&str> {
        (!self.user.is_empty()).then_some(self.user.as_str())
    }

    /// The server, if the entry names one.
    pub fn server(&self) -> Option<&str> {
        (!self.server.is_empty()).then_some(self.server.as_str())
    }

    /// The engine, if the entry names one.
    pub fn engine(&self) -> Option<&str> {
        (!self.engine.is_empty()).then_some(self.engine.as_str())
    }

    /// The node, if the entry names one.
    pub fn node(&self) -> Option<&str> {
        (!self.node.is_empty()).then_some(self.node.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(fields: &[(&str, &[u8])]) -> Writer {
        let mut f = Fields::default();
        for (name, v) in fields {
            f.set(Field::of(name.as_bytes()).expect(name), v);
        }
        let mut w = Writer::default();
        f.writer(&mut w);
        w
    }

    fn w(server: &str, engine: &str, node: &str) -> Writer {
        Writer {
            server: server.into(),
            engine: engine.into(),
            node: node.into(),
            user: String::new(),
        }
    }

    /// The inputs of hostile test 21 (`/tmp/h21/journal`), field for field.
    #[test]
    fn every_kind_of_writer() {
        let common: &[(&str, &[u8])] = &[
            ("SYSLOG_IDENTIFIER", b"python3"),
            ("_PID", b"100"),
            ("_HOSTNAME", b"h"),
        ];
        let with = |more: &[(&str, &'static [u8])]| {
            let mut v = more.to_vec();
            v.extend_from_slice(common);
            writer(&v)
        };
        // A system unit: the server; the host a node; the PID no part of it.
        let unit = with(&[("_SYSTEMD_UNIT", b"sglang-decode.service")]);
        assert_eq!(unit, w("sglang-decode", "", "h"));
        // j04: user services under the user's manager.
        for (u, server) in [
            (&b"sglang-a.service"[..], "sglang-a"),
            (b"sglang-b", "sglang-b"),
        ] {
            let got = with(&[
                ("_SYSTEMD_UNIT", b"user@1000.service"),
                ("_SYSTEMD_USER_UNIT", u),
            ]);
            assert_eq!(
                got,
                Writer {
                    user: "user@1000".into(),
                    ..w(server, "", "h")
                }
            );
        }
        // Hostile pass 31 (k01): another user's unit of the same name names its manager,
        // which tells the two apart (`crate::pipeline::nodes`).
        let other = with(&[
            ("_SYSTEMD_UNIT", b"user@1001.service"),
            ("_SYSTEMD_USER_UNIT", b"sglang.service"),
        ]);
        assert_eq!(
            other,
            Writer {
                user: "user@1001".into(),
                ..w("sglang", "", "h")
            }
        );
        // The manager's own lines are its own; a user unit of no manager is the server.
        assert_eq!(
            with(&[("_SYSTEMD_UNIT", b"user@1000.service")]),
            w("user@1000", "", "h")
        );
        assert_eq!(
            with(&[("_SYSTEMD_USER_UNIT", b"x.service")]),
            w("x", "", "h")
        );
        // j05: Docker's journald driver.
        let docker = writer(&[
            ("_SYSTEMD_UNIT", b"docker.service"),
            ("CONTAINER_NAME", b"/sglang-a"),
            ("SYSLOG_IDENTIFIER", b"aaaaaaaaaaaa"),
            ("_PID", b"1"),
            ("_HOSTNAME", b"h"),
        ]);
        assert_eq!(docker, w("docker", "sglang-a", "h"));
        // j08: no unit: as `-o short` prints it; without a PID or host, what there is.
        let ident = |i: &'static [u8], pid: &'static [u8]| {
            writer(&[("SYSLOG_IDENTIFIER", i), ("_PID", pid), ("_HOSTNAME", b"h")])
        };
        assert_eq!(ident(b"sglang-a", b"100"), w("", "h sglang-a[100]", ""));
        assert_eq!(ident(b"sglang-b", b"200"), w("", "h sglang-b[200]", ""));
        assert_eq!(
            writer(&[("_COMM", b"python3"), ("SYSLOG_PID", b"7")]),
            w("", "python3[7]", "")
        );
        assert_eq!(writer(&[("_PID", b"7")]), w("", "", ""));
        assert_eq!(writer(&[]), w("", "", ""));
        // A value that is not UTF-8 is escaped, never merged with another's lossy text.
        assert_eq!(
            writer(&[("_SYSTEMD_UNIT", b"caf\xe9.service")]).server,
            "caf\\xE9"
        );
        // A field given twice keeps its first value; an empty one is none.
        let mut f = Fields::default();
        f.set(Field::Unit, b"a.service");
        f.set(Field::Unit, b"b.service");
        f.set(Field::Host, b"");
        let mut out = Writer::default();
        f.writer(&mut out);
        assert_eq!(out, w("a", "", ""));
    }
}
