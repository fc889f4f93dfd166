//! Which GPU serves which SGLang server and rank. Per rank, the first method that answers wins:
//!
//! 1. `explicit` — `--gpus SERVER=4,5,6,7`: the rank at launch slot *i* (see [`launch_slot`])
//!    gets the *i*-th GPU of the list.
//! 2. `process` — NVML lists the PIDs with a compute context on each GPU; a PID whose title is
//!    `sglang::scheduler_…` names its ranks, and its cgroup's systemd unit names its server (a
//!    server called like the unit, with or without `.service`). A process outside any service
//!    unit (a container, a login session) belongs to the only server when there is exactly one.
//!    A scheduler with contexts on several GPUs (a stray context on GPU 0 is common) is mapped to
//!    the GPU where it holds the most memory.
//! 3. `server_args` — SGLang's own placement (`scheduler.py`/`data_parallel_controller.py`):
//!    GPU id = `base_gpu_id` + `dp_rank`·`tp_size`·`pp_size`·`gpu_id_step` (plain DP only) +
//!    `pp_rank`·`tp_size` + `tp_rank`·`gpu_id_step`, read through the server's
//!    `CUDA_VISIBLE_DEVICES` when one of its scheduler processes shows it, else as an NVML index.
//!    Single-node placement only (`nnodes` 1).

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
}

/// One rank's GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// `server` label.
    pub server: String,
    /// `engine_type` label.
    pub engine_type: &'static str,
    /// The rank.
    pub ranks: Ranks,
    /// NVML index of the GPU.
    pub gpu: u32,
    /// Its UUID.
    pub uuid: String,
    /// How it was found.
    pub method: Method,
}

/// The server a process belongs to: the one named like its unit; without a unit, the only one.
pub fn server_of<'a>(p: &ProcInfo, servers: &'a [ServerView]) -> Option<&'a ServerView> {
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

/// The rank's position in SGLang's launch order, which `--gpus` lists follow:
/// `pp_rank`·`tp_size` + `tp_rank`, plus `dp_rank`·`tp_size`·`pp_size` for plain DP (where TP
/// ranks restart at 0 in each replica; under DP attention TP ranks are already global).
/// `tp_size`/`pp_size` come from `server_args`, else from the largest rank seen.
pub fn launch_slot(r: &Ranks, args: Option<&ServerArgs>, all: &[Ranks]) -> u32 {
    let (tp_size, pp_size) = sizes(args, all);
    let (dp, pp, tp) = (r.dp.unwrap_or(0), r.pp.unwrap_or(0), r.tp.unwrap_or(0));
    let dp_part = if plain_dp(args, all) {
        dp * tp_size * pp_size
    } else {
        0
    };
    dp_part + pp * tp_size + tp
}

/// SGLang's `gpu_id` of a rank (before `CUDA_VISIBLE_DEVICES`), from its `server_args`.
pub fn server_args_gpu(r: &Ranks, args: &ServerArgs, all: &[Ranks]) -> u32 {
    let (tp_size, pp_size) = sizes(Some(args), all);
    let base = args.base_gpu_id.unwrap_or(0);
    let step = args.gpu_id_step.unwrap_or(1).max(1);
    let (dp, pp, tp) = (r.dp.unwrap_or(0), r.pp.unwrap_or(0), r.tp.unwrap_or(0));
    let dp_part = if plain_dp(Some(args), all) {
        dp * tp_size * pp_size * step
    } else {
        0
    };
    base + dp_part + pp * tp_size + tp * step
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
            let slot = launch_slot(r, s.args.as_ref(), &s.ranks) as usize;
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
        let slots: Vec<u32> = att.iter().map(|r| launch_slot(r, None, &att)).collect();
        assert_eq!(slots, [0, 1, 2, 3]);
        // Plain DP: TP restarts per replica.
        let plain: Vec<Ranks> = (0..4).map(|i| rk(Some(i / 2), None, Some(i % 2))).collect();
        let slots: Vec<u32> = plain.iter().map(|r| launch_slot(r, None, &plain)).collect();
        assert_eq!(slots, [0, 1, 2, 3]);
        // PP x TP.
        let pp: Vec<Ranks> = (0..4).map(|i| rk(None, Some(i / 2), Some(i % 2))).collect();
        let slots: Vec<u32> = pp.iter().map(|r| launch_slot(r, None, &pp)).collect();
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
