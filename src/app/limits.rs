//! The process's limits: the open-file limit (raised at start), the cgroup's task limit (warned
//! about when the inputs may need more).

use super::Config;

/// Raises the soft limit on open files to the hard limit, as Go exporters do: the default soft
/// limit (1,024) lets idle connections starve scrapes and the reopening of rotated files.
pub(super) fn raise_fd_limit() {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write and read the struct we pass, nothing else.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            let want = libc::rlimit {
                rlim_cur: l.rlim_max,
                rlim_max: l.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) != 0 {
                tracing::debug!("cannot raise the open-file limit");
            }
        }
    }
}

/// Threads (and `journalctl` children) the inputs of `cfg` may need at most: the pool that
/// follows every file ([`crate::source::pool::THREADS`]), two per journal unit (its reader and
/// its child), one per `--sglang.url`, and a few of the exporter's own.
fn tasks_needed(cfg: &Config) -> u64 {
    let files = crate::source::pool::THREADS;
    let units = cfg.journal.units.len();
    let apis = cfg.api.as_ref().map_or(0, |a| a.targets.len());
    (files + 2 * units + apis + 16) as u64
}

/// The task limit of the cgroup this process runs in (cgroup v2 `pids.max`; a systemd unit's
/// `TasksMax=`), if there is one.
fn cgroup_task_limit() -> Option<u64> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroup.lines().find_map(|l| l.strip_prefix("0::"))?;
    let max = std::fs::read_to_string(format!("/sys/fs/cgroup{}/pids.max", path.trim())).ok()?;
    max.trim().parse().ok()
}

/// Warns at start when the cgroup's task limit is below what the inputs may need: a follower
/// that cannot start a thread reads nothing (warned each time it tries).
pub(super) fn warn_task_limit(cfg: &Config) {
    let needed = tasks_needed(cfg);
    if let Some(limit) = cgroup_task_limit().filter(|&l| l < needed) {
        tracing::warn!(
            limit,
            needed,
            "the cgroup allows fewer tasks (pids.max, a unit's TasksMax=) than the inputs may need \
             (a thread per --sglang.url, two per journal unit, four following the files): raise \
             TasksMax"
        );
    }
}

/// The soft limit on open files now.
pub fn fd_limit() -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: as in `raise_fd_limit`.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } == 0;
    if ok {
        l.rlim_cur
    } else {
        1024
    }
}
