//! The GPU sampler: reads NVML on its own timer (never on the scrape path), works out which GPU
//! serves which SGLang server and rank, and publishes the result as the `gpu` collector's
//! families ([`State::set_collected`]).
//!
//! Without NVML (no library, no driver, no permission, or a call failing mid-run) the exporter
//! keeps serving everything else: `sglang_log_exporter_nvml_up` reads 0, one warning is logged
//! per outage, and loading is retried on a doubling backoff (from `--gpu.retry-interval`, at most
//! [`MAX_BACKOFF`]). A failing call on one GPU is counted and leaves the other GPUs served.

pub mod correlate;
pub mod nvml;
pub mod procfs;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::family::{Family, Labels};
use crate::parse::patterns::{Patterns, RankTag};
use crate::record::Ranks;
use crate::state::{lock, SelfFamily, Shared, State};
use crate::view;
use correlate::{GpuRef, Inputs, Mapping, ServerView};
use nvml::Reading;
use procfs::ProcInfo;

/// Longest wait between two attempts to load NVML.
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// Settings of the sampler (from `--gpu.*` and `--gpus`).
#[derive(Debug, Clone)]
pub struct GpuConfig {
    /// The NVML library to load; `None`: the system's `libnvidia-ml.so.1`.
    pub library: Option<PathBuf>,
    /// Time between samples.
    pub interval: Duration,
    /// First wait before loading NVML again after a failure (doubles up to [`MAX_BACKOFF`]).
    pub retry: Duration,
    /// Root of the proc file system (`/proc`).
    pub proc_root: PathBuf,
    /// `--gpus SERVER=LIST` lists.
    pub explicit: Vec<(String, Vec<GpuRef>)>,
    /// The pattern file's rank tags, which also name the ranks in schedulers' process titles.
    pub rank_tags: Vec<(String, RankTag)>,
}

impl Default for GpuConfig {
    fn default() -> Self {
        GpuConfig {
            library: None,
            interval: Duration::from_secs(5),
            retry: Duration::from_secs(30),
            proc_root: PathBuf::from("/proc"),
            explicit: Vec::new(),
            rank_tags: Patterns::embedded()
                .map(|p| p.rank_tags)
                .unwrap_or_default(),
        }
    }
}

/// What to try when NVML does not load, most likely first; `--gpu.disable` last, for a host
/// without NVIDIA GPUs.
pub const FIXES: &str = "To fix: point --gpu.nvml-library at the driver's libnvidia-ml.so.1 (find it with `ldconfig -p | grep libnvidia-ml`, e.g. /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1) or add its directory to LD_LIBRARY_PATH; in a container, run it with the NVIDIA runtime (docker --gpus all / --runtime nvidia, the NVIDIA Container Toolkit) or, on Kubernetes, the NVIDIA device plugin, which mount the driver's library; on a host without NVIDIA GPUs, pass --gpu.disable";

/// Samples NVML and publishes the `gpu` families. Holds the NVML handle between samples.
pub struct Sampler {
    cfg: GpuConfig,
    nvml: Option<nvml_wrapper::Nvml>,
    retry_at: Option<Instant>,
    backoff: Duration,
    warned: bool,
    /// The last load or read failure, in words (`GPU memory unavailable: …` on the page).
    why_down: Option<String>,
    /// Failed calls by (GPU index or empty for system calls, call name).
    errors: BTreeMap<(String, &'static str), u64>,
}

impl Sampler {
    /// A sampler that loads NVML on its first [`Sampler::sample`].
    pub fn new(cfg: GpuConfig) -> Sampler {
        let backoff = cfg.retry;
        Sampler {
            cfg,
            nvml: None,
            retry_at: None,
            backoff,
            warned: false,
            why_down: None,
            errors: BTreeMap::new(),
        }
    }

    /// Takes one sample and publishes it into `state` (two short locks: a snapshot of the
    /// servers, then the result; NVML and `/proc` are read without the lock).
    pub fn sample(&mut self, state: &Shared) {
        let reading = self.read();
        let servers = {
            let s = lock(state);
            views(&s)
        };
        let fams = self.families(reading.as_ref(), &servers);
        let mut s = lock(state);
        s.gpu_unavailable = match reading {
            Some(_) => None,
            None => self.why_down.clone(),
        };
        s.set_collected("gpu", fams);
    }

    fn read(&mut self) -> Option<Reading> {
        let now = Instant::now();
        if self.nvml.is_none() && self.retry_at.is_none_or(|t| now >= t) {
            match nvml::open(self.cfg.library.as_deref()) {
                // Back only once a read succeeds: a library that loads and then fails every
                // read (a broken driver) is one outage, warned once, on a growing backoff.
                Ok(n) => {
                    self.nvml = Some(n);
                    self.retry_at = None;
                }
                Err(e) => self.down("init", &e.to_string()),
            }
        }
        let res = nvml::read(self.nvml.as_ref()?);
        match res {
            Ok(r) => {
                if self.warned {
                    tracing::info!("NVML is available again");
                }
                self.warned = false;
                self.backoff = self.cfg.retry;
                for (gpu, call, err) in &r.errors {
                    let n = self.errors.entry((gpu.to_string(), call)).or_insert(0);
                    if *n == 0 {
                        tracing::warn!(gpu, call, "NVML call failed on one GPU: {err}");
                    }
                    *n += 1;
                }
                Some(r)
            }
            Err(e) => {
                // Unload: a driver reload or a lost GPU needs a fresh `nvmlInit`.
                self.nvml = None;
                self.down("read", &e.to_string());
                None
            }
        }
    }

    fn down(&mut self, call: &'static str, err: &str) {
        *self.errors.entry((String::new(), call)).or_insert(0) += 1;
        let lib = self.cfg.library.as_ref().map_or_else(
            || "libnvidia-ml.so.1".to_string(),
            |p| p.display().to_string(),
        );
        self.why_down = Some(format!("NVML {call} failed: {err}"));
        if self.warned {
            tracing::debug!(library = %lib, "NVML still unavailable: {err}");
        } else {
            tracing::warn!(
                library = %lib,
                "NVML unavailable ({call}): {err}; GPU metrics are off, everything else is served. {}",
                FIXES
            );
            tracing::debug!(retry_in = ?self.backoff, "NVML will be loaded again later");
            self.warned = true;
        }
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    fn families(&self, reading: Option<&Reading>, servers: &[ServerView]) -> Vec<Family> {
        let mut up = SelfFamily::NvmlUp.family();
        up.push(vec![], if reading.is_some() { 1.0 } else { 0.0 });
        let mut errors = SelfFamily::NvmlErrors.family();
        for ((gpu, call), n) in &self.errors {
            errors.push(
                vec![("gpu", gpu.clone()), ("call", call.to_string())],
                *n as f64,
            );
        }
        let mut out = vec![up, errors];
        if let Some(r) = reading {
            out.extend(self.gpu_families(r, servers));
        }
        out
    }

    fn gpu_families(&self, r: &Reading, servers: &[ServerView]) -> Vec<Family> {
        let root = &self.cfg.proc_root;
        let pids: BTreeSet<u32> = r
            .gpus
            .iter()
            .flat_map(|g| g.processes.iter().flatten().map(|p| p.0))
            .collect();
        let procs: BTreeMap<u32, ProcInfo> = pids
            .into_iter()
            .map(|p| (p, procfs::read(root, p, &self.cfg.rank_tags)))
            .collect();
        let none = BTreeMap::new();
        let inputs = |visible| Inputs {
            servers,
            gpus: &r.gpus,
            explicit: &self.cfg.explicit,
            procs: &procs,
            visible,
        };
        let mut maps = correlate::correlate(&inputs(&none));
        // `server_args` placement counts from the server's CUDA_VISIBLE_DEVICES: look for it
        // only when some rank needs that method.
        let needs: Vec<&ServerView> = servers
            .iter()
            .filter(|s| {
                s.args.is_some()
                    && s.ranks.iter().any(|rk| {
                        !maps.iter().any(|m| {
                            m.server == s.name
                                && m.ranks == *rk
                                && m.method != correlate::Method::ServerArgs
                        })
                    })
            })
            .collect();
        if !needs.is_empty() {
            let visible = find_visible(root, &self.cfg.rank_tags, servers, &needs);
            if !visible.is_empty() {
                maps = correlate::correlate(&inputs(&visible));
            }
        }
        render(r, servers, &procs, &maps)
    }
}

/// The `CUDA_VISIBLE_DEVICES` of a scheduler process of each server in `needs`.
fn find_visible(
    root: &std::path::Path,
    tags: &[(String, RankTag)],
    servers: &[ServerView],
    needs: &[&ServerView],
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for pid in procfs::pids(root) {
        let p = procfs::read(root, pid, tags);
        if p.scheduler_ranks().is_none() {
            continue;
        }
        let Some(s) = correlate::server_of(&p, servers) else {
            continue;
        };
        if out.contains_key(&s.name) || !needs.iter().any(|n| n.name == s.name) {
            continue;
        }
        if let Some(v) = procfs::visible_devices(root, pid) {
            out.insert(s.name.clone(), v);
        }
    }
    out
}

/// `server`, the source's labels (Kubernetes `namespace`, `pod`, `container`), `engine_type`,
/// the rank labels of the rank series ([`view::rank_label_pairs`]), `gpu` and `uuid`.
fn rank_labels(m: &Mapping) -> Labels {
    let mut l = vec![("server", m.server.clone())];
    l.extend(m.source_labels.iter().cloned());
    l.push(("engine_type", m.engine_type.to_string()));
    l.extend(view::rank_label_pairs(&m.ranks));
    l.push(("gpu", m.gpu.to_string()));
    l.push(("uuid", m.uuid.clone()));
    l
}

/// The GPU, process and rank families of one reading.
fn render(
    r: &Reading,
    servers: &[ServerView],
    procs: &BTreeMap<u32, ProcInfo>,
    maps: &[Mapping],
) -> Vec<Family> {
    use crate::catalog::gpu as def;
    let mut total = Family::of(&def::MEMORY_TOTAL);
    let mut used = Family::of(&def::MEMORY_USED);
    let mut free = Family::of(&def::MEMORY_FREE);
    let mut reserved = Family::of(&def::MEMORY_RESERVED);
    let mut info = Family::of(&def::INFO);
    let mut pmem = Family::of(&def::PROCESS_MEMORY_USED);
    let mut rinfo = Family::of(&def::RANK_INFO);
    let mut rused = Family::of(&def::RANK_MEMORY_USED);
    let mut rtotal = Family::of(&def::RANK_MEMORY_TOTAL);
    for gpu in &r.gpus {
        let l = || vec![("gpu", gpu.index.to_string()), ("uuid", gpu.uuid.clone())];
        if let Some(m) = gpu.memory {
            total.push(l(), m.total as f64);
            used.push(l(), m.used as f64);
            free.push(l(), m.free as f64);
            reserved.push(l(), m.reserved as f64);
        }
        let mut il = l();
        il.push(("name", gpu.name.clone()));
        il.push(("pci_bus_id", gpu.pci_bus_id.clone()));
        il.push(("driver_version", r.driver_version.clone()));
        info.push(il, 1.0);
        for &(pid, bytes) in gpu.processes.iter().flatten() {
            let Some(bytes) = bytes else { continue };
            let sglang = procs.get(&pid).is_some_and(|p| {
                p.is_sglang() || (p.unit.is_some() && correlate::server_of(p, servers).is_some())
            });
            if sglang {
                let mut pl = l();
                pl.push(("pid", pid.to_string()));
                pmem.push(pl, bytes as f64);
            }
        }
    }
    for m in maps {
        let mut l = rank_labels(m);
        if let Some(mem) = r
            .gpus
            .iter()
            .find(|g| g.index == m.gpu)
            .and_then(|g| g.memory)
        {
            rused.push(l.clone(), mem.used as f64);
            rtotal.push(l.clone(), mem.total as f64);
        }
        l.push(("method", m.method.as_str().to_string()));
        rinfo.push(l, 1.0);
    }
    vec![
        total, used, free, reserved, info, pmem, rinfo, rused, rtotal,
    ]
}

fn views(s: &State) -> Vec<ServerView> {
    // One view per server name: the engines of a multi-engine log share its GPUs' process.
    let mut out: Vec<ServerView> = Vec::new();
    for (key, srv) in s.servers() {
        if out.last().is_some_and(|v| v.name == key.server) {
            continue;
        }
        out.push(ServerView {
            name: key.server.clone(),
            engine_type: srv.engine_type(&key.server).as_str(),
            args: srv.args.clone(),
            ranks: srv.ranks.keys().copied().collect::<Vec<Ranks>>(),
            source_labels: srv.source_labels.clone(),
            pod_uid: s.source_pod(&key.server).map(str::to_string),
        });
    }
    out
}

/// Starts the sampler thread: a sample now, then one every `interval` until `stop`.
///
/// # Errors
/// The OS error when the thread cannot be started.
pub fn spawn(
    cfg: GpuConfig,
    state: Shared,
    stop: Arc<crate::stop::Stop>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("gpu sampler".into())
        .spawn(move || {
            let interval = cfg.interval.max(Duration::from_millis(100));
            let mut sampler = Sampler::new(cfg);
            while !stop.is_set() {
                let next = Instant::now() + interval;
                sampler.sample(&state);
                stop.wait(next.saturating_duration_since(Instant::now()));
            }
        })
}
