//! What `/proc` says about a process that NVML lists on a GPU: its SGLang process title, its
//! systemd unit and its `CUDA_VISIBLE_DEVICES`.
//!
//! The root is configurable (`--gpu.proc-root`) so tests can serve a prepared tree. NVML reports
//! PIDs of the host PID namespace: an exporter in another namespace (a container without
//! `--pid=host`) finds none of them, and correlation falls back to `server_args`.

use std::path::Path;

use crate::parse::patterns::RankTag;
use crate::record::Ranks;

/// What we read about one process; fields are `None` where unreadable or absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcInfo {
    /// The PID.
    pub pid: u32,
    /// `argv[0]` from `cmdline`: SGLang sets it with `setproctitle` to
    /// `sglang::scheduler_DP0_TP0` and the like (`scheduler.py`, `run_scheduler_process`).
    pub argv0: Option<String>,
    /// An argument names an SGLang module or file (`-m sglang.launch_server`,
    /// `…/site-packages/sglang/…`).
    pub mentions_sglang: bool,
    /// The deepest systemd service unit named in `cgroup`, e.g. `sglang-decode.service`.
    pub unit: Option<String>,
    /// The Kubernetes pod UID named in `cgroup` (see [`pod_uid_of_cgroup`]).
    pub pod_uid: Option<String>,
    /// The ranks of an SGLang scheduler, read from its title (see [`scheduler_ranks`]).
    pub ranks: Option<Ranks>,
}

impl ProcInfo {
    /// An SGLang process: its title starts with `sglang::`, or an argument names an SGLang
    /// module or file.
    pub fn is_sglang(&self) -> bool {
        self.mentions_sglang
            || self
                .argv0
                .as_deref()
                .is_some_and(|a| a.starts_with("sglang::"))
    }

    /// The scheduler's ranks, when the process is an SGLang scheduler.
    pub fn scheduler_ranks(&self) -> Option<Ranks> {
        self.ranks
    }
}

/// Reads `cmdline` and `cgroup` of `pid` under `root`; `tags` are the pattern file's rank tags.
/// A process that has exited or cannot be read yields a record with `None` fields, never an
/// error.
pub fn read(root: &Path, pid: u32, tags: &[(String, RankTag)]) -> ProcInfo {
    let dir = root.join(pid.to_string());
    let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
    let argv0 = cmdline
        .split(|&b| b == 0)
        .next()
        .map(|a| String::from_utf8_lossy(a).trim().to_string())
        .filter(|a| !a.is_empty());
    let mentions_sglang = cmdline
        .split(|&b| b == 0)
        .any(|a| a.starts_with(b"sglang.") || memchr::memmem::find(a, b"/sglang/").is_some());
    let cgroup = std::fs::read_to_string(dir.join("cgroup")).unwrap_or_default();
    ProcInfo {
        pid,
        ranks: argv0.as_deref().and_then(|t| scheduler_ranks(t, tags)),
        argv0,
        mentions_sglang,
        unit: unit_of_cgroup(&cgroup),
        pod_uid: pod_uid_of_cgroup(&cgroup),
    }
}

/// PIDs of every process under `root` (its numeric entries).
pub fn pids(root: &Path) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = rd
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .collect();
    out.sort_unstable();
    out
}

/// The GPUs a process sees, from `environ` of `pid` (readable for our own user or as root):
/// `CUDA_VISIBLE_DEVICES`, counted within `NVIDIA_VISIBLE_DEVICES` where a container runtime
/// set that to a list (Kubernetes' NVIDIA device plugin: `GPU-…` UUIDs; the container sees
/// them as devices 0, 1, …). `None` when neither names GPUs.
pub fn visible_devices(root: &Path, pid: u32) -> Option<String> {
    let env = std::fs::read(root.join(pid.to_string()).join("environ")).ok()?;
    let var = |name: &[u8]| {
        env.split(|&b| b == 0).find_map(|kv| {
            kv.strip_prefix(name)
                .map(|v| String::from_utf8_lossy(v).trim().to_string())
        })
    };
    let nvidia = var(b"NVIDIA_VISIBLE_DEVICES=")
        .filter(|v| !v.is_empty() && !matches!(v.as_str(), "all" | "none" | "void"));
    match (var(b"CUDA_VISIBLE_DEVICES="), nvidia) {
        (Some(cuda), Some(nv)) => {
            let nv: Vec<&str> = nv.split(',').map(str::trim).collect();
            let list: Vec<&str> = cuda
                .split(',')
                .map(str::trim)
                .map(|e| match e.parse::<usize>() {
                    Ok(i) => nv.get(i).copied().unwrap_or(e),
                    Err(_) => e,
                })
                .collect();
            Some(list.join(","))
        }
        (cuda, nv) => cuda.or(nv),
    }
}

/// The Kubernetes pod UID in a `/proc/PID/cgroup` text, for both cgroup drivers: systemd
/// (`/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid with _>.slice/…`) and
/// cgroupfs (`/kubepods/burstable/pod<uid>/…`). The pod log directory names the same UID
/// (`/var/log/pods/<namespace>_<pod>_<uid>/`), which ties a GPU process to its pod's server.
pub fn pod_uid_of_cgroup(text: &str) -> Option<String> {
    for line in text.lines() {
        let Some(path) = line.splitn(3, ':').nth(2) else {
            continue;
        };
        let mut in_kubepods = false;
        for comp in path.split('/') {
            if let Some(rest) = comp
                .strip_suffix(".slice")
                .filter(|c| c.starts_with("kubepods"))
            {
                if let Some((_, uid)) = rest.rsplit_once("-pod") {
                    return Some(uid.replace('_', "-"));
                }
            }
            if in_kubepods {
                if let Some(uid) = comp.strip_prefix("pod").filter(|u| !u.is_empty()) {
                    return Some(uid.to_string());
                }
            }
            in_kubepods |= comp.starts_with("kubepods");
        }
    }
    None
}

/// The deepest `*.service` unit in a `/proc/PID/cgroup` text (v1 or v2 lines
/// `ID:CONTROLLERS:PATH`), e.g. `sglang-decode.service` from
/// `0::/system.slice/sglang-decode.service`, or `sglang.service` from
/// `0::/user.slice/user-1000.slice/user@1000.service/app.slice/sglang.service`.
pub fn unit_of_cgroup(text: &str) -> Option<String> {
    let mut best: Option<(usize, &str)> = None;
    for line in text.lines() {
        let Some(path) = line.splitn(3, ':').nth(2) else {
            continue;
        };
        for (depth, comp) in path.split('/').enumerate() {
            let is_unit = comp.ends_with(".service") && comp.len() > ".service".len();
            if is_unit && best.is_none_or(|(d, _)| depth > d) {
                best = Some((depth, comp));
            }
        }
    }
    best.map(|(_, u)| u.to_string())
}

/// The ranks named by a scheduler's process title: `sglang::scheduler` (one GPU, no tags),
/// `sglang::scheduler_TP1`, `sglang::scheduler_DP0_TP0`, `sglang::scheduler_PP1_TP3_EP3`,
/// `sglang::scheduler_DP0_ATTN_CP0_MOE_DP0_TP0`. SGLang builds the title from the same tags as its
/// log prefix (`" DP0 TP0"` with spaces turned into `_`), so these ranks equal the ones its log
/// lines carry, read with the same `rank_tags` of the pattern file (longest first). `None` for
/// any other title.
pub fn scheduler_ranks(title: &str, tags: &[(String, RankTag)]) -> Option<Ranks> {
    let rest = title.strip_prefix("sglang::scheduler")?;
    let mut r = Ranks::default();
    let mut s = rest;
    while !s.is_empty() {
        s = s.strip_prefix('_')?;
        let (which, after) = tags.iter().find_map(|(t, w)| {
            s.strip_prefix(t.as_str())
                .filter(|a| a.starts_with(|c: char| c.is_ascii_digit()))
                .map(|a| (*w, a))
        })?;
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let n: u32 = after[..digits].parse().ok()?;
        s = &after[digits..];
        *which.slot(&mut r) = Some(n);
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        let p = crate::parse::patterns::Patterns::embedded().expect("the embedded patterns");
        let scheduler_ranks = |t: &str| scheduler_ranks(t, &p.rank_tags);
        assert_eq!(scheduler_ranks("sglang::scheduler"), Some(Ranks::default()));
        assert_eq!(
            scheduler_ranks("sglang::scheduler_DP1_TP3"),
            Some(Ranks {
                dp: Some(1),
                tp: Some(3),
                ..Ranks::default()
            })
        );
        assert_eq!(
            scheduler_ranks("sglang::scheduler_DP0_ATTN_CP1_MOE_DP2_TP3_EP4"),
            Some(Ranks {
                dp: Some(0),
                attn_cp: Some(1),
                moe_dp: Some(2),
                tp: Some(3),
                ep: Some(4),
                pp: None,
            })
        );
        assert_eq!(scheduler_ranks("sglang::detokenizer"), None);
        assert_eq!(scheduler_ranks("sglang::scheduler_XY1"), None);
        assert_eq!(scheduler_ranks("sglang::scheduler_TP"), None);
        assert_eq!(scheduler_ranks("python3"), None);
    }

    #[test]
    fn titles_use_the_pattern_files_rank_tags() {
        // A pattern file that knows a `CP` tag reads it in titles too; unknown tags end the
        // title's parse as in a log prefix.
        let tags = vec![
            ("TP".to_string(), RankTag::Tp),
            ("CP".to_string(), RankTag::AttnCp),
        ];
        assert_eq!(
            scheduler_ranks("sglang::scheduler_CP2_TP5", &tags),
            Some(Ranks {
                attn_cp: Some(2),
                tp: Some(5),
                ..Ranks::default()
            })
        );
        assert_eq!(scheduler_ranks("sglang::scheduler_DP1_TP5", &tags), None);
    }

    #[test]
    fn pod_uids() {
        assert_eq!(
            pod_uid_of_cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6b9a8f5e_1c2d_4e3f_8a9b_0c1d2e3f4a5b.slice/cri-containerd-abc.scope\n").as_deref(),
            Some("6b9a8f5e-1c2d-4e3f-8a9b-0c1d2e3f4a5b")
        );
        assert_eq!(
            pod_uid_of_cgroup(
                "0::/kubepods.slice/kubepods-pod11_22.slice/cri-containerd-abc.scope\n"
            )
            .as_deref(),
            Some("11-22")
        );
        assert_eq!(
            pod_uid_of_cgroup("12:pids:/kubepods/burstable/pod6b9a-1c2d/0123abcd\n").as_deref(),
            Some("6b9a-1c2d")
        );
        assert_eq!(pod_uid_of_cgroup("0::/system.slice/sglang.service\n"), None);
        assert_eq!(pod_uid_of_cgroup("0::/pod12/x\n"), None);
    }

    #[test]
    fn visible_devices_in_containers() {
        let dir = tempfile::tempdir().unwrap();
        let env = |pid: u32, text: &str| {
            let d = dir.path().join(pid.to_string());
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("environ"), text).unwrap();
        };
        env(1, "CUDA_VISIBLE_DEVICES=2,3\0");
        env(2, "NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b\0");
        env(
            3,
            "NVIDIA_VISIBLE_DEVICES=GPU-a,GPU-b\0CUDA_VISIBLE_DEVICES=1\0",
        );
        env(4, "NVIDIA_VISIBLE_DEVICES=all\0");
        let v = |pid| visible_devices(dir.path(), pid);
        assert_eq!(v(1).as_deref(), Some("2,3"));
        assert_eq!(v(2).as_deref(), Some("GPU-a,GPU-b"));
        assert_eq!(v(3).as_deref(), Some("GPU-b"));
        assert_eq!(v(4), None);
    }

    #[test]
    fn units() {
        assert_eq!(
            unit_of_cgroup("0::/system.slice/sglang-decode.service\n").as_deref(),
            Some("sglang-decode.service")
        );
        assert_eq!(
            unit_of_cgroup(
                "0::/user.slice/user-1000.slice/user@1000.service/app.slice/sglang.service\n"
            )
            .as_deref(),
            Some("sglang.service")
        );
        assert_eq!(
            unit_of_cgroup(
                "12:pids:/system.slice/a.service\n1:name=systemd:/system.slice/a.service\n0::/\n"
            )
            .as_deref(),
            Some("a.service")
        );
        assert_eq!(unit_of_cgroup("0::/\n"), None);
        assert_eq!(unit_of_cgroup("0::/user.slice/session-3.scope\n"), None);
    }
}
