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
/// tp_size_per_node`. Without `server_args` the ranks are their own numbers (the `--gpus`
/// slots weigh the hosts' blocks instead, see [`launch_slot`]).
pub fn local(r: &Ranks, args: Option<&ServerArgs>, all: &[Ranks]) -> Local {
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
        None => Local {
            tp,
            pp,
            tp_per_node: tp_size,
        },
    }
}

/// The rank's position in SGLang's launch order on this host, which `--gpus` lists follow:
/// `pp`·`tp_size_per_node` + `tp` of its [`local`] ranks, plus `dp_rank`·`tp_size`·`pp_size`
/// for plain DP (where TP ranks restart at 0 in each replica; under DP attention TP ranks are
/// already global). `None`: the ranks seen do not tell (the rank is left unmapped: a wrong GPU
/// is worse than none).
///
/// `gpus` is the length of the `--gpus` list. What `server_args` does not say is inferred
/// from what the ranks seen prove, never guessed where a guess could change later (see
/// [`Layout`]): every layout left possible is tried, and a rank maps only when all of those
/// under which every rank seen fits the list by that layout's slot put it at the same slot.
/// The layouts: DP attention where the ranks are consistent with it, or no DP, with each
/// `tp_size` from the largest TP rank seen up (it is the stride of a PP stage); plain DP with
/// each `tp_size` and `pp_size` (the stride of a replica) from the largest ranks seen up; and,
/// where `server_args` says `nnodes` > 1, or without it where no one-host layout fits the list
/// (the ranks seen cannot be counted by their own numbers), the blocks a host of a multi-node
/// server runs (SGLang's `_calculate_rank_ranges`): PP stages `o`..`2o`−1 with every TP rank
/// (`pp_size` ≥ `nnodes`), or one PP stage with TP ranks `o`..`2o`−1 (`pp_size` < `nnodes`; a
/// block of `k` ranks starts at a multiple of `k`, so only `o` > half the largest rank seen
/// can start one).
///
/// With `DP1 TP0` and `DP1 TP1` seen on a 4-GPU list, `DP1 TP0` proves plain DP (under DP
/// attention DP *n* holds TP ranks from *n*·tp/dp on), TP1 a `tp_size` of at least 2, and DP1
/// on 4 GPUs at most 2: slots 2 and 3; on an 8-GPU list `tp_size` could be 2 to 6, and they
/// stay unmapped. `DP2 TP2` and `DP3 TP3` (a log that starts mid-run) on a 4-GPU list fit by
/// their own numbers: slots 2 and 3. `PP1 TP0` on a 4-GPU list is slot 1, 2 or 3 (`tp_size` 1
/// to 3): unmapped. `TP8`-`TP15` on an 8-GPU list fit no one-host layout, and only as the
/// second host's block: slots 0-7. More ranks only rule layouts out, so a rank's slot, once
/// known, never changes as more ranks appear (unless they no longer fit one host).
pub fn launch_slot(
    r: &Ranks,
    args: Option<&ServerArgs>,
    all: &[Ranks],
    gpus: usize,
) -> Option<u32> {
    Slots::new(args, all, gpus).of(r)
}

/// [`launch_slot`] for the ranks of one server: the layouts are weighed once.
#[derive(Debug)]
struct Slots<'a> {
    args: Option<&'a ServerArgs>,
    all: &'a [Ranks],
    /// The layouts under which every rank seen fits the list.
    fit: Vec<Layout>,
}

impl<'a> Slots<'a> {
    fn new(args: Option<&'a ServerArgs>, all: &'a [Ranks], gpus: usize) -> Slots<'a> {
        let mut s = Slots {
            args,
            all,
            fit: Vec::new(),
        };
        let fitting = |s: &Slots<'_>, hosts: bool| -> Vec<Layout> {
            layouts(args, all, gpus, hosts)
                .into_iter()
                .filter(|&l| {
                    all.iter()
                        .all(|x| s.slot_in(x, l).is_some_and(|at| (at as usize) < gpus))
                })
                .collect()
        };
        // A host's block of a multi-node server is weighed where `server_args` says there are
        // several hosts, or, without it, where no one-host layout fits the ranks seen in the
        // list: ranks that fit the list map by their own numbers (a log that starts mid-run
        // with DP2 and DP3 of four is no second host).
        let nnodes = args.and_then(|a| a.nnodes);
        s.fit = fitting(&s, nnodes.is_some_and(|n| n > 1));
        if s.fit.is_empty() && nnodes.is_none() {
            s.fit = fitting(&s, true);
        }
        s
    }

    /// The slot of `r`, one of the server's ranks: the one every layout left agrees on.
    fn of(&self, r: &Ranks) -> Option<u32> {
        let (&first, rest) = self.fit.split_first()?;
        let at = self.slot_in(r, first)?;
        rest.iter()
            .all(|&l| self.slot_in(r, l) == Some(at))
            .then_some(at)
    }

    /// The rank's slot under `layout`; `None` where the layout has no such rank on this host.
    fn slot_in(&self, r: &Ranks, layout: Layout) -> Option<u32> {
        match layout {
            Layout::Args { plain } => {
                let args = self.args?;
                let (tp_size, pp_size) = sizes(Some(args), self.all);
                let l = local(r, Some(args), self.all);
                let dp_part = if plain {
                    u64::from(r.dp.unwrap_or(0)) * u64::from(tp_size) * u64::from(pp_size)
                } else {
                    0
                };
                let s = dp_part + u64::from(l.pp) * u64::from(l.tp_per_node) + u64::from(l.tp);
                u32::try_from(s).ok()
            }
            Layout::Seen(b) => b.slot(r),
        }
    }
}

/// How a server's ranks sit on its GPUs, as far as `--gpus` slots go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `server_args` gives the sizes: SGLang's placement on this host (see [`local`]), plus
    /// the replica's base under plain DP.
    Args {
        /// Plain DP (each replica counts its TP ranks from 0).
        plain: bool,
    },
    /// Sizes not given: one candidate the ranks seen are weighed against.
    Seen(Block),
}

/// A candidate placement of a server's ranks on this host when `server_args` does not give
/// the sizes: slot = `dp`·`replica` + (`pp` − `pp_first`)·`tp_per_node` + (`tp` − `tp_first`),
/// for ranks with `tp_first` ≤ `tp` < `tp_first` + `tp_per_node` and `pp_first` ≤ `pp` <
/// `pp_first` + `pp_per_node` (others are not on this host under it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Block {
    /// GPUs of one plain-DP replica (`tp_size`·`pp_size`); 0 where TP ranks are global.
    replica: u64,
    /// TP ranks on the host (the stride of a PP stage).
    tp_per_node: u64,
    /// The host's first TP rank.
    tp_first: u64,
    /// The host's first PP stage.
    pp_first: u64,
    /// PP stages on the host.
    pp_per_node: u64,
}

impl Block {
    fn slot(&self, r: &Ranks) -> Option<u32> {
        let tp = u64::from(r.tp.unwrap_or(0)).checked_sub(self.tp_first)?;
        let pp = u64::from(r.pp.unwrap_or(0)).checked_sub(self.pp_first)?;
        if tp >= self.tp_per_node || pp >= self.pp_per_node {
            return None;
        }
        let dp = u64::from(r.dp.unwrap_or(0));
        let s = dp
            .checked_mul(self.replica)?
            .checked_add(pp.checked_mul(self.tp_per_node)?)?
            .checked_add(tp)?;
        u32::try_from(s).ok()
    }
}

/// The layouts `server_args` and the ranks seen leave possible, before the fit to the list of
/// `gpus` (see [`launch_slot`]). With `server_args`' `tp_size`: its own placement, under the
/// kind of DP it says (else the kinds the ranks leave possible). Without: every [`Block`] that
/// can hold the ranks seen (one per slot function: sizes beyond what the list can hold behave
/// alike and are tried once), a host's block of a multi-node server only with `hosts`. The
/// conditions on the ranks only tighten as ranks appear, so the candidates left only shrink.
fn layouts(args: Option<&ServerArgs>, all: &[Ranks], gpus: usize, hosts: bool) -> Vec<Layout> {
    let said = args.and_then(|a| {
        a.enable_dp_attention
            .map(|att| !att && a.dp_size.unwrap_or(1) > 1)
    });
    let dp_seen = all.iter().any(|r| r.dp.is_some_and(|d| d > 0));
    let (global, plain) = match said {
        Some(plain) => (!plain, plain),
        None => (!dp_seen || attention_possible(all), dp_seen),
    };
    if args.and_then(|a| a.tp_size).is_some_and(|t| t > 0) {
        let mut v = Vec::new();
        if global {
            v.push(Layout::Args { plain: false });
        }
        if plain {
            v.push(Layout::Args { plain: true });
        }
        return v;
    }
    let one_host = !hosts;
    let g = u64::try_from(gpus).unwrap_or(u64::MAX).max(1);
    let span = |f: fn(&Ranks) -> Option<u32>| {
        let seen = || all.iter().map(move |r| u64::from(f(r).unwrap_or(0)));
        (seen().min().unwrap_or(0), seen().max().unwrap_or(0))
    };
    let (tp_min, tp_max) = span(|r| r.tp);
    let (pp_min, pp_max) = span(|r| r.pp);
    // A block of `k` ranks starting at `o` > 0 (a multiple of `k`) that holds `max` and fits
    // the list: `k` = `o` is the largest such size, so `o` qualifies when 2·`o` > `max`.
    let firsts = |min: u64, max: u64| {
        let lo = (max / 2 + 1).max(max.saturating_sub(g) + 1).max(1);
        lo..=min
    };
    let mut v = Vec::new();
    let block = |replica, tp_per_node, tp_first, pp_first, pp_per_node| {
        Layout::Seen(Block {
            replica,
            tp_per_node,
            tp_first,
            pp_first,
            pp_per_node,
        })
    };
    if global {
        // One host, or a host holding every TP rank of PP stages `o`..`2o`−1.
        let mut pp_firsts = vec![0];
        if !one_host {
            pp_firsts.extend(firsts(pp_min, pp_max));
        }
        for tp_size in tp_max + 1..=g.max(tp_max + 1) {
            for &o in &pp_firsts {
                let stages = if o == 0 { u64::MAX } else { o };
                v.push(block(0, tp_size, 0, o, stages));
            }
        }
        // A host holding TP ranks `o`..`2o`−1 of one PP stage.
        if !one_host && pp_min == pp_max {
            for o in firsts(tp_min, tp_max) {
                v.push(block(0, o, o, pp_min, 1));
            }
        }
    }
    if plain {
        for tp_size in tp_max + 1..=g.max(tp_max + 1) {
            let most = g.div_ceil(tp_size).max(pp_max + 1);
            for pp_size in pp_max + 1..=most {
                v.push(block(
                    tp_size.saturating_mul(pp_size),
                    tp_size,
                    0,
                    0,
                    pp_size,
                ));
            }
        }
    }
    v
}

/// Whether the ranks seen can be DP attention's: there DP rank *d* holds TP ranks *d*·`k` to
/// *d*·`k` + `k` − 1 (`k` = tp_size / dp_size, SGLang's `attn_tp_size`), so every rank's DP is
/// its TP rank divided by one same `k` (`DP1 TP0` is never DP attention's). Each rank bounds
/// `k`: `d` = ⌊`t`/`k`⌋ holds for ⌊`t`/(`d`+1)⌋ < `k` ≤ ⌊`t`/`d`⌋.
fn attention_possible(all: &[Ranks]) -> bool {
    let (mut lo, mut hi) = (1u64, u64::MAX);
    for r in all {
        let Some(d) = r.dp.map(u64::from) else {
            continue;
        };
        let t = u64::from(r.tp.unwrap_or(0));
        lo = lo.max(t / (d + 1) + 1);
        // DP0 bounds `k` from below only.
        if let Some(most) = t.checked_div(d) {
            hi = hi.min(most);
        }
    }
    lo <= hi
}

/// SGLang's `gpu_id` of a rank on its host (before `CUDA_VISIBLE_DEVICES`), from its
/// `server_args`, as `data_parallel_controller.py` computes it: `base_gpu_id` + the DP
/// replica's base (plain DP) + `local pp`·`tp_size_per_node` + `local tp`·`gpu_id_step`.
pub fn server_args_gpu(r: &Ranks, args: &ServerArgs, all: &[Ranks]) -> u32 {
    let (tp_size, pp_size) = sizes(Some(args), all);
    let base = args.base_gpu_id.unwrap_or(0);
    let step = args.gpu_id_step.unwrap_or(1).max(1);
    let l = local(r, Some(args), all);
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
        let slots = Slots::new(s.args.as_ref(), &s.ranks, list.len());
        for r in &s.ranks {
            let Some(slot) = slots.of(r) else {
                continue;
            };
            if let Some(g) = list.get(slot as usize).and_then(|x| x.find(i.gpus)) {
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
        let slots: Vec<_> = att.iter().map(|r| launch_slot(r, None, &att, 4)).collect();
        assert_eq!(slots, [Some(0), Some(1), Some(2), Some(3)]);
        // Plain DP: TP restarts per replica.
        let plain: Vec<Ranks> = (0..4).map(|i| rk(Some(i / 2), None, Some(i % 2))).collect();
        let slots: Vec<_> = plain
            .iter()
            .map(|r| launch_slot(r, None, &plain, 4))
            .collect();
        assert_eq!(slots, [Some(0), Some(1), Some(2), Some(3)]);
        // PP x TP.
        let pp: Vec<Ranks> = (0..4).map(|i| rk(None, Some(i / 2), Some(i % 2))).collect();
        let slots: Vec<_> = pp.iter().map(|r| launch_slot(r, None, &pp, 4)).collect();
        assert_eq!(slots, [Some(0), Some(1), Some(2), Some(3)]);
    }

    /// Plain DP seen in part (hostile pass, `tests/data/gpu/plaindp-dp1-only.log`): `DP1 TP0`
    /// proves plain DP, TP1 a `tp_size` of 2 or more, DP1 within 4 GPUs one of at most 2.
    #[test]
    fn a_partial_plain_dp_view_maps_what_it_proves_and_keeps_it() {
        let dp1: Vec<Ranks> = (0..2).map(|t| rk(Some(1), None, Some(t))).collect();
        let slots: Vec<_> = dp1.iter().map(|r| launch_slot(r, None, &dp1, 4)).collect();
        assert_eq!(slots, [Some(2), Some(3)]);
        // DP0 appears: DP1 keeps its slots.
        let all: Vec<Ranks> = (0..4)
            .map(|i| rk(Some(1 - i / 2), None, Some(i % 2)))
            .collect();
        let slots: Vec<_> = all.iter().map(|r| launch_slot(r, None, &all, 4)).collect();
        assert_eq!(slots, [Some(2), Some(3), Some(0), Some(1)]);
        // On 8 GPUs tp_size may be 2 to 6: DP1's slots are unknown, left unmapped.
        let slots: Vec<_> = dp1.iter().map(|r| launch_slot(r, None, &dp1, 8)).collect();
        assert_eq!(slots, [None, None]);
        // `DP1 TP1` alone: DP attention (slot 1) or plain DP of TP2 (slot 3): unknown.
        let one = [rk(Some(1), None, Some(1))];
        assert_eq!(launch_slot(&one[0], None, &one, 4), None);
        // Only the replicas' TP0 (plain DP's stats lines): DP0 TP0 is slot 0 whatever the
        // TP size; DP1 TP0 is 1, 2 or 3.
        let tp0 = [rk(Some(0), None, Some(0)), rk(Some(1), None, Some(0))];
        let slots: Vec<_> = tp0.iter().map(|r| launch_slot(r, None, &tp0, 4)).collect();
        assert_eq!(slots, [Some(0), None]);
        // server_args saying plain DP of TP2 settles it.
        let a = ServerArgs {
            tp_size: Some(2),
            dp_size: Some(2),
            enable_dp_attention: Some(false),
            ..ServerArgs::default()
        };
        let slots: Vec<_> = tp0
            .iter()
            .map(|r| launch_slot(r, Some(&a), &tp0, 4))
            .collect();
        assert_eq!(slots, [Some(0), Some(2)]);
        // DP attention's own view: DP1 TP2 and DP1 TP3 of k = 2 fit a 4-GPU list by their own
        // numbers (without `server_args` saying several hosts, no host's block is weighed):
        // slots 2 and 3, and they stay as ranks appear.
        let mut att: Vec<Ranks> = (2..4).map(|t| rk(Some(1), None, Some(t))).collect();
        let slots: Vec<_> = att.iter().map(|r| launch_slot(r, None, &att, 4)).collect();
        assert_eq!(slots, [Some(2), Some(3)]);
        assert!(attention_possible(&att));
        att.push(rk(Some(0), None, Some(1)));
        let slots: Vec<_> = att.iter().map(|r| launch_slot(r, None, &att, 4)).collect();
        assert_eq!(slots, [Some(2), Some(3), Some(1)]);
        assert!(!attention_possible(&dp1));
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
        // Without server_args, on an 8-GPU list: TP8-TP15 cannot be the host's own numbers;
        // the only block of a host that holds them all is the one from TP8.
        let slots: Vec<_> = node1
            .iter()
            .map(|r| launch_slot(r, None, &node1, 8))
            .collect();
        assert_eq!(slots, (0..8).map(Some).collect::<Vec<_>>());
        // A host that saw TP2-TP7 only (TP0-1 silent) is the first host.
        let part: Vec<Ranks> = (2..8).map(|t| rk(None, None, Some(t))).collect();
        assert_eq!(launch_slot(&part[0], None, &part, 8), Some(2));
        // DP attention seen from its middle (DP2 TP2, DP3 TP3 of four on `--gpus 4,5,6,7`):
        // the ranks fit the list, so they map by their own numbers (issue 21: the offset
        // applies only where `server_args` says several hosts or the ranks cannot fit), and
        // keep them as the other ranks appear. With `nnodes` 2 they could be the second host's
        // first two: unmapped.
        let mid: Vec<Ranks> = (2..4).map(|t| rk(Some(t), None, Some(t))).collect();
        let slots: Vec<_> = mid.iter().map(|r| launch_slot(r, None, &mid, 4)).collect();
        assert_eq!(slots, [Some(2), Some(3)]);
        let two_hosts = ServerArgs {
            nnodes: Some(2),
            ..ServerArgs::default()
        };
        let slots: Vec<_> = mid
            .iter()
            .map(|r| launch_slot(r, Some(&two_hosts), &mid, 4))
            .collect();
        assert_eq!(slots, [None, None]);
        let all: Vec<Ranks> = (0..4).map(|t| rk(Some(t), None, Some(t))).collect();
        let slots: Vec<_> = all.iter().map(|r| launch_slot(r, None, &all, 4)).collect();
        assert_eq!(slots, [Some(0), Some(1), Some(2), Some(3)]);
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

    /// Slots of `ranks` on a list of `gpus`, each weighed against all of them.
    fn slots_of(ranks: &[Ranks], gpus: usize) -> Vec<Option<u32>> {
        ranks
            .iter()
            .map(|r| launch_slot(r, None, ranks, gpus))
            .collect()
    }

    /// Pipeline parallelism without `server_args` (hostile pass 31, H4): the stride of a PP
    /// stage is `tp_size`, which the ranks seen bound but do not give; nothing is guessed
    /// from the largest TP rank seen, and no rank moves as more appear.
    #[test]
    fn pipeline_ranks_map_only_where_every_tp_size_agrees() {
        let pt = |pp, tp| rk(None, Some(pp), Some(tp));
        // The stats lines of a PP2 server (only each stage's TP0 prints): PP1 TP0 is slot
        // 1, 2 or 3 by `tp_size` (2 under PP2 x TP2), PP0 TP0 slot 0 under every one.
        assert_eq!(slots_of(&[pt(0, 0), pt(1, 0)], 4), [Some(0), None]);
        // PP1 TP0 alone: slot 1, 2 or 3 (`tp_size` 1 to 3).
        assert_eq!(slots_of(&[pt(1, 0)], 4), [None]);
        // PP0 TP1 appears: `tp_size` 2 or 3, PP1 TP0 still unknown; PP0 TP1 is slot 1.
        assert_eq!(slots_of(&[pt(1, 0), pt(0, 1)], 4), [None, Some(1)]);
        // PP1 TP1 on 4 GPUs proves `tp_size` 2.
        let all = [pt(1, 0), pt(0, 1), pt(0, 0), pt(1, 1)];
        assert_eq!(slots_of(&all, 4), [Some(2), Some(1), Some(0), Some(3)]);
        // On 8 GPUs `tp_size` may be 2 to 6: PP1's ranks stay unmapped.
        assert_eq!(slots_of(&all, 8), [None, Some(1), Some(0), None]);
        // The second host of a PP2 x TP8 (one stage per host): PP1 TP0-TP7 on its 8 GPUs.
        let stage1: Vec<Ranks> = (0..8).map(|t| pt(1, t)).collect();
        assert_eq!(slots_of(&stage1, 8), (0..8).map(Some).collect::<Vec<_>>());
        // Plain DP with PP: the replica's stride is `tp_size` x `pp_size`, both unknown.
        let d = |dp, pp, tp| rk(Some(dp), Some(pp), Some(tp));
        let rep = [d(1, 0, 0), d(1, 1, 0), d(0, 0, 0), d(0, 1, 0)];
        assert_eq!(slots_of(&rep, 4), [Some(2), Some(3), Some(0), Some(1)]);
        assert_eq!(slots_of(&rep, 8), [None, None, Some(0), None]);
        // `server_args` with one host (nnodes 1) and no sizes rules out other hosts' blocks.
        let one = ServerArgs {
            nnodes: Some(1),
            ..ServerArgs::default()
        };
        let r = [pt(1, 0), pt(0, 1)];
        assert_eq!(launch_slot(&r[0], Some(&one), &r, 4), None);
        assert_eq!(launch_slot(&r[1], Some(&one), &r, 4), Some(1));
    }

    /// A host of a multi-node server without `server_args` (hostile pass 31, H4): its block
    /// of TP ranks starts at a multiple of its size, which the ranks seen bound; a lone TP12
    /// is never counted from itself.
    #[test]
    fn a_host_block_maps_only_when_the_ranks_seen_place_it() {
        let t = |tp| rk(None, None, Some(tp));
        // TP12 on 8 GPUs: slot 4 (TP8-TP15), 0 (TP12-TP15 of 4 per host), 5 (TP7-TP13), ...
        assert_eq!(slots_of(&[t(12)], 8), [None]);
        assert_eq!(slots_of(&[t(12), t(13), t(14), t(15)], 8), [None; 4]);
        // TP12 then TP8: blocks from 7 or 8 remain.
        assert_eq!(slots_of(&[t(12), t(8)], 8), [None, None]);
        // TP8-TP15: only the block from 8 holds them all on 8 GPUs.
        let host: Vec<Ranks> = (8..16).rev().map(t).collect();
        assert_eq!(
            slots_of(&host, 8),
            (0..8).rev().map(Some).collect::<Vec<_>>()
        );
        // Rank numbers near the top of u32 cost no more than the list's length.
        let huge = [rk(Some(5), Some(4_000_000_000), Some(4_000_000_000))];
        assert_eq!(slots_of(&huge, 8), [None]);
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
