//! What to do about a permission error, in words: the groups that may read logs on a systemd
//! host. Files under `/var/log` are readable by group `adm` (Debian, Ubuntu; `syslog` and
//! rsyslog's files), the whole journal by `systemd-journal` (and `adm`, `wheel` where the
//! distribution grants it); the shipped units add both (`SupplementaryGroups=`).

use std::io::ErrorKind;
use std::path::Path;

/// The hint to add to an error opening `path`: for a permission error, the group to join.
pub fn file_hint(kind: ErrorKind, path: &Path) -> Option<String> {
    if kind != ErrorKind::PermissionDenied {
        return None;
    }
    let group = if path.starts_with("/var/log/journal") || path.starts_with("/run/log/journal") {
        "systemd-journal"
    } else {
        "adm"
    };
    Some(format!(
        "the exporter's user may not read it: files under /var/log are usually readable by group {group} (usermod -aG {group} USER, or SupplementaryGroups={group} in its unit, as the shipped units have), else grant read access (setfacl -m u:USER:r)"
    ))
}

/// The hint to add to journalctl's last words, where they say it lacks access (journalctl
/// prints "No journal files were opened due to insufficient permissions", or, without `-q`,
/// "Users in groups 'adm', 'systemd-journal' can see all messages").
pub fn journal_hint(stderr: &str) -> Option<&'static str> {
    let s = stderr.to_ascii_lowercase();
    (s.contains("insufficient permissions")
        || s.contains("permission denied")
        || s.contains("can see all messages"))
    .then_some(JOURNAL_GROUP_HINT)
}

/// What to do when journalctl cannot read the units' entries.
pub const JOURNAL_GROUP_HINT: &str = "the exporter's user may not read the system journal: add it to group systemd-journal (usermod -aG systemd-journal USER, or SupplementaryGroups=systemd-journal in its unit, as the shipped units have)";

/// Whether this process may read every journal entry: root, or a member (primary or
/// supplementary) of `systemd-journal`, `adm` or `wheel`, as `/etc/group` names them. Without
/// that, journalctl shows a user only its own entries and exits 0: no error to see.
pub fn may_read_journal() -> bool {
    // SAFETY: geteuid, getegid and getgroups have no preconditions; getgroups writes at most
    // the length it is given.
    let (euid, egid, groups) = unsafe {
        let mut gs = vec![0 as libc::gid_t; 4096];
        let n = libc::getgroups(gs.len() as libc::c_int, gs.as_mut_ptr());
        gs.truncate(usize::try_from(n).unwrap_or(0));
        (libc::geteuid(), libc::getegid(), gs)
    };
    if euid == 0 {
        return true;
    }
    let Ok(etc) = std::fs::read_to_string("/etc/group") else {
        // Unknown groups: no warning rather than a wrong one.
        return true;
    };
    let allowed = allowed_gids(&etc);
    allowed.is_empty() || allowed.iter().any(|g| *g == egid || groups.contains(g))
}

/// The gids of `systemd-journal`, `adm` and `wheel` in an `/etc/group` text.
fn allowed_gids(etc_group: &str) -> Vec<libc::gid_t> {
    etc_group
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let gid = f.nth(1)?.parse().ok()?;
            ["systemd-journal", "adm", "wheel"]
                .contains(&name)
                .then_some(gid)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_error_names_the_group_that_may_read() {
        let h = file_hint(
            ErrorKind::PermissionDenied,
            Path::new("/var/log/sglang/d.log"),
        )
        .unwrap();
        assert!(h.contains("group adm (usermod -aG adm USER"), "{h}");
        let h = file_hint(
            ErrorKind::PermissionDenied,
            Path::new("/var/log/journal/m/system.journal"),
        )
        .unwrap();
        assert!(h.contains("group systemd-journal"), "{h}");
        assert_eq!(
            file_hint(ErrorKind::NotFound, Path::new("/var/log/x")),
            None
        );
        assert_eq!(
            journal_hint("No journal files were opened due to insufficient permissions."),
            Some(JOURNAL_GROUP_HINT)
        );
        assert_eq!(
            journal_hint("Failed to add match 'x': Invalid argument"),
            None
        );
        let etc = "root:x:0:\nadm:x:4:syslog\nsystemd-journal:x:101:\nusers:x:100:\n";
        assert_eq!(allowed_gids(etc), [4, 101]);
    }
}
