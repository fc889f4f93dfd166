//! Which GPU serves which SGLang server and rank. Per rank, the first method that answers wins:
//!
//! 1. `explicit` — `--gpus SERVER=4,5,6,7`: the rank at launch slot *i* (see [`launch_slot`])
//!    gets the *i*-th GPU of the list.
//! 2. `process` — NVML lists the PIDs with a compute context on each GPU; a PID whose title is
//!    `sglang::scheduler_…` names its ranks, and its cgroup's systemd unit names its server (a
//!    server called like the unit, with or without `.service`). A process outside any service
//!    unit (a container, a login session) belongs to the only server when there is exactly one.
//!    A process in a Kubernetes pod (its cgroup names the pod UID) belongs to the server read
//!    from that pod's log directory. A scheduler with contexts on several GPUs (a stray context on GPU 0 is common) is mapped to
//!    the GPU where it holds the most memory.
//! 3. `server_args` — SGLang's own placement (`scheduler.py`/`data_parallel_controller.py`):
//!    GPU id = `base_gpu_id` + `dp_rank`·`tp_size`·`pp_size`·`gpu_id_step` (plain DP only) +
//!    `pp_rank`·`tp_size` + `tp_rank`·`gpu_id_step`, read through the server's
//!    `CUDA_VISIBLE_DEVICES` (within a container's `NVIDIA_VISIBLE_DEVICES`) when one of its
//!    scheduler processes shows it, else as an NVML index.
//!    A server on several hosts (`--nnodes`) counts from each host's first rank (see [`local`]).

use std::collections::BTreeMap;

use super::nvml::Gpu;
use super::procfs::ProcInfo;
use crate::record::{Ranks, ServerArgs};

/// How a mapping was found: the `method` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Method {
    /// `--gpus`.
    Explicit,
    /// NVML process list, process title and cgroup.
    Process,
    /// `server_args` placement.
    ServerArgs,
}

impl Method {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Explicit => "explicit",
            Method::Process => "process",
            Method::ServerArgs => "server_args",
        }
    }
}

/// A GPU named on the command line or in `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuRef {
    /// NVML index.
    Index(u32),
    /// UUID or a unique prefix of it (`GPU-8f3e…`).
    Uuid(String),
}

impl GpuRef {
    /// Parses `4` or `GPU-…`.
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn parse(s: &str) -> Result<GpuRef, String> {
        let s = s.trim();
        if let Ok(n) = s.parse() {
            return Ok(GpuRef::Index(n));
        }
        if s.starts_with("GPU-") && s.len() > 4 {
            return Ok(GpuRef::Uuid(s.to_string()));
        }
        Err(format!("{s:?} is not a GPU index or a GPU-… UUID"))
    }

    fn find<'a>(&self, gpus: &'a [Gpu]) -> Option<&'a Gpu> {
        match self {
            GpuRef::Index(i) => gpus.iter().find(|g| g.index == *i),
            GpuRef::Uuid(u) => {
                let mut it = gpus.iter().filter(|g| g.uuid.starts_with(u.as_str()));
                let first = it.next()?;
                it.next().is_none().then_some(first)
            }
        }
    }
}

/// Parses `--gpus SERVER=LIST` (`LIST`: comma-separated NVML indexes or UUIDs).
///
/// # Errors
/// A message naming the bad argument.
pub fn parse_explicit(arg: &str) -> Result<(String, Vec<GpuRef>), String> {
    let (server, list) = arg
        .split_once('=')
        .filter(|(s, l)| !s.is_empty() && !l.is_empty())
        .ok_or_else(|| {
            format!("--gpus {arg:?}: expected SERVER=GPU,GPU,… (e.g. decode=4,5,6,7)")
        })?;
    let gpus = list
        .split(',')
        .map(GpuRef::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--gpus {arg:?}: {e}"))?;
    Ok((server.to_string(), gpus))
}

/// What the correlation needs to know about one server (a snapshot of the state).
#[derive(Debug, Clone)]
pub struct ServerView {
    /// `server` label.
    pub name: String,
    /// `engine_type` label.
    pub engine_type: &'static str,
    /// Its `server_args`, when seen.
    pub args: Option<ServerArgs>,
    /// Its ranks, in label order.
    pub ranks: Vec<Ranks>,
    /// The labels its source gives every series (Kubernetes `namespace`, `pod`, `container`).
    pub source_labels: Vec<(&'static str, String)>,
    /// The Kubernetes pod UID of its source (a discovered pod log), if any.
    pub pod_uid: Option<String>,
}

/// One rank's GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// `server` label.
    pub server: String,
    /// `engine_type` label.
    pub engine_type: &'static str,
    /// The server's source labels (see [`ServerView::source_labels`]).
    pub source_labels: Vec<(&'static str, String)>,
    /// The rank.
    pub ranks: Ranks,
    /// NVML index of the GPU.
    pub gpu: u32,
    /// Its UUID.
    pub uuid: String,
    /// How it was found.
    pub method: Method,
}

/// The server a process belongs to: the one whose pod log names the process's pod UID; else
/// the one named like its unit; without a unit, the only one.
pub fn server_of<'a>(p: &ProcInfo, servers: &'a [ServerView]) -> Option<&'a ServerView> {
    if let Some(uid) = &p.pod_uid {
        if let Some(s) = servers.iter().find(|s| s.pod_uid.as_ref() == Some(uid)) {
            return Some(s);
        }
    }
    match &p.unit {
        Some(u) => {
            let stem = crate::source::server_name_of_unit(u);
            servers.iter().find(|s| s.name == *u || s.name == stem)
        }
        None if servers.len() == 1 => servers.first(),
        None => None,
    }
}

/// Whether ranks repeat `(pp, tp)` under different `dp` (plain DP, where each replica counts
/// its TP ranks from 0) rather than numbering TP ranks globally (DP attention).
fn plain_dp(args: Option<&ServerArgs>, ranks: &[Ranks]) -> bool {
    if let Some(a) = args {
        if let Some(att) = a.enable_dp_attention {
            return !att && a.dp_size.unwrap_or(1) > 1;
        }
    }
    let mut seen: BTreeMap<(Option<u32>, Option<u32>), Option<u32>> = BTreeMap::new();
    ranks.iter().any(|r| {
        let prev = seen.insert((r.pp, r.tp), r.dp);
        prev.is_some_and(|d| d != r.dp)
    })
}

fn sizes(args: Option<&ServerArgs>, ranks: &[Ranks]) -> (u32, u32) {
    let max = |f: fn(&Ranks) -> Option<u32>| ranks.iter().filter_map(f).max().map_or(1, |m| m + 1);
    let tp = args
        .and_then(|a| a.tp_size)
        .unwrap_or_else(|| max(|r| r.tp));
    let pp = args
        .and_then(|a| a.pp_size)
        .unwrap_or_else(|| max(|r| r.pp));
    (tp.max(1), pp.max(1))
}

/// Where a rank sits on this host: its TP and PP rank among the host's ranks and the TP ranks
/// per host (`tp_size_per_node`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Local {
    /// TP rank on this host (`tp_rank % tp_size_per_node`).
    pub tp: u32,
    /// PP rank on this host (`pp_rank % pp_size_per_node`).
    pub pp: u32,
    /// TP ranks per host.
    pub tp_per_node: u32,
}

/// A rank's place on this host. A server started with `--nnodes N` runs its ranks on N hosts,
/// and each host's log (and exporter) sees only its own, under their global numbers (TP8-TP15
/// on the second host of a TP16). SGLang's rule (`engine.py` `_calculate_rank_ranges`, v0.5.23):
/// `pp_size_per_node = max(pp_size / nnodes, 1)`, `tp_size_per_node = tp_size / max(nnodes /
/// pp_size, 1)`, and the local ranks are `pp_rank % pp_size_per_node` and `tp_rank %
/// tp_size_per_node`. Without `server_args`, and only where `host_offset` says so (the ranks
/// cannot be the host's own numbers), the smallest TP (and PP) rank seen is taken as the host's
/// first when the ranks seen fill whole blocks above it (TP8-TP15 seen: 8; TP2-TP7: 0).
pub fn local(r: &Ranks, args: Option<&ServerArgs>, all: &[Ranks], host_offset: bool) -> Local {
    let (tp_size, pp_size) = sizes(args, all);
    let (tp, pp) = (r.tp.unwrap_or(0), r.pp.unwrap_or(0));
    match args {
        Some(a) => {
            let nnodes = a.nnodes.unwrap_or(1).max(1);
            let pp_per_node = (pp_size / nnodes).max(1);
            let tp_per_node = (tp_size / (nnodes / pp_size).max(1)).max(1);
            Local {
                tp: tp % tp_per_node,
                pp: pp % pp_per_node,
                tp_per_node,
            }
        }
        None if !host_offset => Local {
            tp,
            pp,
            tp_per_node: tp_size,
        },
        None => {
            let tp_off = offset_seen(all, |r| r.tp);
            let pp_off = offset_seen(all, |r| r.pp);
            Local {
                tp: tp.saturating_sub(tp_off),
                pp: pp.saturating_sub(pp_off),
                tp_per_node: tp_size.saturating_sub(tp_off).max(1),
            }
        }
    }
}

/// The first rank of this host, judged from the ranks seen: the smallest, when it is a multiple
/// of the span seen (the host holds a whole block: TP8-TP15), else 0.
fn offset_seen(all: &[Ranks], f: fn(&Ranks) -> Option<u32>) -> u32 {
    let seen = || all.iter().filter_map(f);
    match (seen().min(), seen().max()) {
        (Some(min), Some(max)) if min > 0 && min % (max - min + 1) == 0 => min,
        _ => 0,
    }
}

/// The rank's position in SGLang's launch order on this host, which `--gpus` lists follow:
/// `pp`·`tp_size_per_node` + `tp` of its [`local`] ranks, plus `dp_rank`·`tp_size`·`pp_size`
/// for plain DP (where TP ranks restart at 0 in each replica; under DP attention TP ranks are
/// already global). `tp_size`/`pp_size` come from `server_args`, else from the largest rank
/// seen.
///
/// `gpus` is the length of the `--gpus` list. Ranks map by their own numbers whenever every
/// rank seen fits the list, so a rank's GPU never changes as more ranks appear (a log that
/// starts mid-run, with only DP2 TP2 and DP3 TP3 so far, maps them to the list's third and
/// fourth GPU); only ranks that cannot fit (TP8-TP15 on an 8-GPU host of a multi-node server
/// whose `server_args` line was not seen) are counted from the smallest seen.
pub fn launch_slot(r: &Ranks, args: Option<&ServerArgs>, all: &[Ranks], gpus: usize) -> u32 {
    let fits = all
        .iter()
        .all(|x| (slot(x, args, all, false) as usize) < gpus);
    slot(r, args, all, !fits)
}

/// [`launch_slot`] with or without the host offset of ranks seen.
fn slot(r: &Ranks, args: Option<&ServerArgs>, all: &[Ranks], host_offset: bool) -> u32 {
    let (tp_size, pp_size) = sizes(args, all);
    let l = local(r, args, all, host_offset);
    let dp_part = if plain_dp(args, all) {
        r.dp.unwrap_or(0) * tp_size * pp_size
    } else {
        0
    };
    dp_part + l.pp * l.tp_per_node + l.tp
}

/// SGLang's `gpu_id` of a rank on its host (before `CUDA_VISIBLE_DEVICES`), from its
/// `server_args`, as `data_parallel_controller.py` computes it: `base_gpu_id` + the DP
/// replica's base (plain DP) + `local pp`·`tp_size_per_node` + `local tp`·`gpu_id_step`.
pub fn server_args_gpu(r: &Ranks, args: &ServerArgs, all: &[Ranks]) -> u32 {
    let (tp_size, pp_size) = sizes(Some(args), all);
    let base = args.base_gpu_id.unwrap_or(0);
    let step = args.gpu_id_step.unwrap_or(1).max(1);
    let l = local(r, Some(args), all, false);
    let dp_part = if plain_dp(Some(args), all) {
        r.dp.unwrap_or(0) * tp_size * pp_size * step
    } else {
        0
    };
    base + dp_part + l.pp * l.tp_per_node + l.tp * step
}

/// Inputs of [`correlate`].
pub struct Inputs<'a> {
    /// Servers and their ranks.
    pub servers: &'a [ServerView],
    /// GPUs read from NVML.
    pub gpus: &'a [Gpu],
    /// `--gpus` lists by server.
    pub explicit: &'a [(String, Vec<GpuRef>)],
    /// What `/proc` says about each PID NVML listed.
    pub procs: &'a BTreeMap<u32, ProcInfo>,
    /// `CUDA_VISIBLE_DEVICES` of each server's processes, where found.
    pub visible: &'a BTreeMap<String, String>,
}

/// Every rank's GPU that one of the methods finds, ordered by server and rank.
pub fn correlate(i: &Inputs<'_>) -> Vec<Mapping> {
    let mut out: BTreeMap<(String, Ranks), Mapping> = BTreeMap::new();
    let mut put = |s: &ServerView, r: Ranks, g: &Gpu, method: Method| {
        let key = (s.name.clone(), r);
        if out.get(&key).is_none_or(|m| m.method > method) {
            out.insert(
                key,
                Mapping {
                    server: s.name.clone(),
                    engine_type: s.engine_type,
                    source_labels: s.source_labels.clone(),
                    ranks: r,
                    gpu: g.index,
                    uuid: g.uuid.clone(),
                    method,
                },
            );
        }
    };
    // a. explicit
    for (name, list) in i.explicit {
        let Some(s) = i.servers.iter().find(|s| s.name == *name) else {
            continue;
        };
        for r in &s.ranks {
            let slot = launch_slot(r, s.args.as_ref(), &s.ranks, list.len()) as usize;
            if let Some(g) = list.get(slot).and_then(|x| x.find(i.gpus)) {
                put(s, *r, g, Method::Explicit);
            }
        }
    }
    // b. process: per (server, ranks) the GPU where the scheduler holds the most memory.
    let mut best: BTreeMap<(usize, Ranks), (u64, &Gpu)> = BTreeMap::new();
    for g in i.gpus {
        for &(pid, used) in g.processes.iter().flatten() {
            let Some(p) = i.procs.get(&pid) else { continue };
            let Some(r) = p.scheduler_ranks() else {
                continue;
            };
            let Some(s) = server_of(p, i.servers) else {
                continue;
            };
            let si = i.servers.iter().position(|x| x.name == s.name).unwrap_or(0);
            let used = used.unwrap_or(0);
            let e = best.entry((si, r)).or_insert((used, g));
            if used > e.0 {
                *e = (used, g);
            }
        }
    }
    for ((si, r), (_, g)) in best {
        put(&i.servers[si], r, g, Method::Process);
    }
    // c. server_args
    for s in i.servers {
        let Some(args) = &s.args else { continue };
        let visible: Option<Vec<&str>> = i
            .visible
            .get(&s.name)
            .map(|v| v.split(',').map(str::trim).collect());
        for r in &s.ranks {
            let id = server_args_gpu(r, args, &s.ranks);
            let g = match &visible {
                None => GpuRef::Index(id).find(i.gpus),
                Some(list) => list
                    .get(id as usize)
                    .and_then(|x| GpuRef::parse(x).ok())
                    .and_then(|x| x.find(i.gpus)),
            };
            if let Some(g) = g {
                put(s, *r, g, Method::ServerArgs);
            }
        }
    }
    out.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rk(dp: Option<u32>, pp: Option<u32>, tp: Option<u32>) -> Ranks {
        Ranks {
            dp,
            pp,
            tp,
            ..Ranks::default()
        }
    }

    #[test]
    fn slots_follow_sglang_launch_order() {
        // DP attention: TP global, DP derived.
        let att: Vec<Ranks> = (0..4).map(|t| rk(Some(t / 2), None, Some(t))).collect();
        let slots: Vec<u32> = att.iter().map(|r| launch_slot(r, None, &att, 4)).collect();
        assert_eq!(slots, [0, 1, 2, 3]);
        // Plain DP: TP restarts per replica.
        let plain: Vec<Ranks> = (0..4).map(|i| rk(Some(i / 2), None, Some(i % 2))).collect();
        let slots: Vec<u32> = plain
            .iter()
            .map(|r| launch_slot(r, None, &plain, 4))
            .collect();
        assert_eq!(slots, [0, 1, 2, 3]);
        // PP x TP.
        let pp: Vec<Ranks> = (0..4).map(|i| rk(None, Some(i / 2), Some(i % 2))).collect();
        let slots: Vec<u32> = pp.iter().map(|r| launch_slot(r, None, &pp, 4)).collect();
        assert_eq!(slots, [0, 1, 2, 3]);
    }

    #[test]
    fn server_args_placement() {
        let a = ServerArgs {
            tp_size: Some(2),
            dp_size: Some(2),
            base_gpu_id: Some(1),
            gpu_id_step: Some(2),
            enable_dp_attention: Some(false),
            ..ServerArgs::default()
        };
        let plain: Vec<Ranks> = (0..4).map(|i| rk(Some(i / 2), None, Some(i % 2))).collect();
        let ids: Vec<u32> = plain
            .iter()
            .map(|r| server_args_gpu(r, &a, &plain))
            .collect();
        assert_eq!(ids, [1, 3, 5, 7]);
    }

    #[test]
    fn second_node_of_a_multi_node_server() {
        // TP16 on two hosts: the second one runs TP8-TP15 on its GPUs 0-7.
        let a = ServerArgs {
            tp_size: Some(16),
            nnodes: Some(2),
            node_rank: Some(1),
            ..ServerArgs::default()
        };
        let node1: Vec<Ranks> = (8..16).map(|t| rk(None, None, Some(t))).collect();
        let ids: Vec<u32> = node1
            .iter()
            .map(|r| server_args_gpu(r, &a, &node1))
            .collect();
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
        // Without server_args, on an 8-GPU list: TP8-TP15 cannot be the host's own numbers,
        // so they count from the smallest rank seen.
        let slots: Vec<u32> = node1
            .iter()
            .map(|r| launch_slot(r, None, &node1, 8))
            .collect();
        assert_eq!(slots, (0..8).collect::<Vec<_>>());
        // A host that saw TP2-TP7 only (TP0-1 silent) is the first host.
        let part: Vec<Ranks> = (2..8).map(|t| rk(None, None, Some(t))).collect();
        assert_eq!(launch_slot(&part[0], None, &part, 8), 2);
        // DP attention seen from its middle (DP2 TP2, DP3 TP3 of four on `--gpus 4,5,6,7`):
        // the ranks fit the list, so they map by their own numbers, and keep them as the
        // other ranks appear.
        let mid: Vec<Ranks> = (2..4).map(|t| rk(Some(t), None, Some(t))).collect();
        let slots: Vec<u32> = mid.iter().map(|r| launch_slot(r, None, &mid, 4)).collect();
        assert_eq!(slots, [2, 3]);
        let all: Vec<Ranks> = (0..4).map(|t| rk(Some(t), None, Some(t))).collect();
        let slots: Vec<u32> = all.iter().map(|r| launch_slot(r, None, &all, 4)).collect();
        assert_eq!(slots, [0, 1, 2, 3]);
        // PP2 x TP8 on two hosts: a PP stage per host, TP ranks 0-7 on each.
        let pp = ServerArgs {
            tp_size: Some(8),
            pp_size: Some(2),
            nnodes: Some(2),
            node_rank: Some(1),
            ..ServerArgs::default()
        };
        let stage1: Vec<Ranks> = (0..8).map(|t| rk(None, Some(1), Some(t))).collect();
        let ids: Vec<u32> = stage1
            .iter()
            .map(|r| server_args_gpu(r, &pp, &stage1))
            .collect();
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
        // PP4 x TP4 on two hosts: two stages per host.
        let pp4 = ServerArgs {
            tp_size: Some(4),
            pp_size: Some(4),
            nnodes: Some(2),
            ..ServerArgs::default()
        };
        let r = rk(None, Some(3), Some(2));
        assert_eq!(server_args_gpu(&r, &pp4, &[r]), 4 + 2);
        // DP attention over two hosts: DP8-15 TP8-15 on the second.
        let att = ServerArgs {
            tp_size: Some(16),
            dp_size: Some(16),
            enable_dp_attention: Some(true),
            nnodes: Some(2),
            node_rank: Some(1),
            ..ServerArgs::default()
        };
        let ranks: Vec<Ranks> = (8..16).map(|t| rk(Some(t), None, Some(t))).collect();
        let ids: Vec<u32> = ranks
            .iter()
            .map(|r| server_args_gpu(r, &att, &ranks))
            .collect();
        assert_eq!(ids, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn explicit_args() {
        assert_eq!(
            parse_explicit("decode=4,5,GPU-ab").unwrap(),
            (
                "decode".to_string(),
                vec![
                    GpuRef::Index(4),
                    GpuRef::Index(5),
                    GpuRef::Uuid("GPU-ab".into())
                ]
            )
        );
        assert!(parse_explicit("decode").is_err());
        assert!(parse_explicit("=1").is_err());
        assert!(parse_explicit("d=1,x").is_err());
    }
}
