//! The numbers `top` and the live page show, picked out of metric families: servers with their
//! ranks, GPUs, and sources that are down. Pure: the same families give the same model, wherever
//! they came from (this process's state or a scraped exporter). Below both readers (`top`,
//! [`crate::export::live`]), so neither imports the other.

use std::collections::BTreeMap;

use crate::catalog::{exporter, gpu, rank, router, server};
use crate::family::{Family, Labels};

/// A share (0-1) as `top` and the live page write it: a percentage with one decimal, `45.2%`.
pub fn percent(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// The rank labels in the order SGLang prints their tags (v0.5.9+), with the tag's prefix.
pub const RANK_LABELS: [(&str, &str); 6] = [
    ("dp_rank", "DP"),
    ("pp_rank", "PP"),
    ("attn_cp_rank", "ATTN_CP"),
    ("moe_dp_rank", "MOE_DP"),
    ("tp_rank", "TP"),
    ("moe_ep_rank", "EP"),
];

/// Label that tells scraped exporters apart (`--url`): `host:port`.
pub const INSTANCE: &str = "instance";

/// A rank's label values in [`RANK_LABELS`] order (empty where the prefix has no such tag).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RankId(pub [String; 6]);

impl RankId {
    fn of(labels: &Labels) -> RankId {
        RankId(RANK_LABELS.map(|(k, _)| label(labels, k).to_string()))
    }

    /// As SGLang prints it: `DP0 TP0`; `-` for a rank without tags (one GPU).
    pub fn display(&self) -> String {
        let tags: Vec<String> = RANK_LABELS
            .iter()
            .zip(&self.0)
            .filter(|(_, v)| !v.is_empty())
            .map(|((_, p), v)| format!("{p}{v}"))
            .collect();
        if tags.is_empty() {
            "-".into()
        } else {
            tags.join(" ")
        }
    }

    /// Numeric order: DP2 before DP10.
    pub fn sort_key(&self) -> Vec<(bool, u64, &str)> {
        self.0
            .iter()
            .map(|v| (!v.is_empty(), v.parse().unwrap_or(u64::MAX), v.as_str()))
            .collect()
    }
}

/// Names a server's ranks as SGLang prints them ([`Rank::shown`]): the exporter sets `tp_rank`,
/// `pp_rank` and `moe_ep_rank` to `"0"` where the log has no tag (as SGLang's own metrics do),
/// so such a tag that is `0` on every rank of the server is left out (`DP1 TP1`, not `DP1 PP0
/// TP1 EP0`; one rank without tags is `-`). SGLang prints `TP` with every `DP`, so `TP` stays
/// where `DP` is.
fn name_ranks(ranks: &mut [Rank]) {
    let col = |k: &str| RANK_LABELS.iter().position(|(l, _)| *l == k);
    let has_dp = col("dp_rank").is_some_and(|d| ranks.iter().any(|r| !r.id.0[d].is_empty()));
    let mut hide = [false; 6];
    for k in ["pp_rank", "tp_rank", "moe_ep_rank"] {
        let Some(i) = col(k) else { continue };
        hide[i] = !(k == "tp_rank" && has_dp) && ranks.iter().all(|r| r.id.0[i] == "0");
    }
    for r in ranks.iter_mut() {
        let mut id = r.id.clone();
        for (v, h) in id.0.iter_mut().zip(hide) {
            if h {
                v.clear();
            }
        }
        r.shown = id.display();
    }
}

/// One rank of one server: every value `top` shows (`None` where the exposition has none).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rank {
    /// Which rank.
    pub id: RankId,
    /// Its name on the screen (see `name_ranks`).
    pub shown: String,
    /// `sglang:num_used_tokens`.
    pub used_tokens: Option<f64>,
    /// `sglang:max_total_num_tokens`.
    pub max_total_tokens: Option<f64>,
    /// `sglang_kv_pool_capacity_tokens`.
    pub pool_capacity_tokens: Option<f64>,
    /// `sglang:token_usage` (0-1).
    pub token_usage: Option<f64>,
    /// `sglang:num_running_reqs`.
    pub running: Option<f64>,
    /// `sglang:num_queue_reqs`.
    pub queued: Option<f64>,
    /// `sglang:gen_throughput`, tokens per second.
    pub gen_throughput: Option<f64>,
    /// `sglang_prefill_input_throughput_tokens_per_second`.
    pub input_throughput: Option<f64>,
    /// PD decode: `sglang:num_decode_prealloc_queue_reqs`.
    pub prealloc: Option<f64>,
    /// PD decode: `sglang:num_decode_transfer_queue_reqs`.
    pub transfer: Option<f64>,
    /// PD prefill: `sglang:num_prefill_bootstrap_queue_reqs`.
    pub bootstrap: Option<f64>,
    /// PD prefill: `sglang:num_prefill_inflight_queue_reqs`.
    pub inflight: Option<f64>,
    /// `sglang_retractions_total`.
    pub retractions: Option<f64>,
    /// `sglang_last_retraction_timestamp_seconds`.
    pub last_retraction: Option<f64>,
    /// `sglang_idle` (1: no stats line for `--idle-after`).
    pub idle: Option<f64>,
    /// `sglang_last_stats_timestamp_seconds`.
    pub last_stats: Option<f64>,
    /// `sglang_kv_pool_size_bytes`.
    pub pool_bytes: Option<f64>,
    /// `sglang_full_pool_capacity_tokens` (a hybrid SWA model's full-attention pool).
    pub full_capacity_tokens: Option<f64>,
    /// `sglang_full_used_tokens`.
    pub full_used_tokens: Option<f64>,
    /// `sglang:full_token_usage` (0-1).
    pub full_token_usage: Option<f64>,
    /// `sglang_swa_pool_capacity_tokens`.
    pub swa_capacity_tokens: Option<f64>,
    /// `sglang_swa_pool_used_tokens`.
    pub swa_used_tokens: Option<f64>,
    /// `sglang:swa_token_usage` (0-1).
    pub swa_token_usage: Option<f64>,
    /// `sglang_swa_pool_size_bytes` (the sliding-window pool's own bytes).
    pub swa_pool_bytes: Option<f64>,
    /// `sglang_swa_kv_pool_size_bytes` (a hybrid SWA model's two pools together).
    pub hybrid_pool_bytes: Option<f64>,
    /// `sglang_mamba_used_slots`.
    pub mamba_used_slots: Option<f64>,
    /// `sglang:mamba_usage` (0-1).
    pub mamba_usage: Option<f64>,
    /// `sglang_api_live` (1: the values are live from the server's HTTP API; 0: that API does
    /// not answer).
    pub api_live: Option<f64>,
}

impl Rank {
    /// The rank's KV pools, each against its own capacity (see [`crate::kv`]). The capacity of
    /// a rank with one pool is `sglang:max_total_num_tokens`, else the pool's.
    pub fn kv(&self) -> crate::kv::KvUse {
        crate::kv::KvUse::of(&crate::kv::KvValues {
            used: self.used_tokens,
            usage: self.token_usage,
            capacity: self.max_total_tokens.or(self.pool_capacity_tokens),
            pool_capacity: self.pool_capacity_tokens,
            full_capacity: self.full_capacity_tokens,
            max_total: self.max_total_tokens,
            full_used: self.full_used_tokens,
            full_usage: self.full_token_usage,
            swa_used: self.swa_used_tokens,
            swa_usage: self.swa_token_usage,
            swa_capacity: self.swa_capacity_tokens,
            mamba_used: self.mamba_used_slots,
            mamba_usage: self.mamba_usage,
        })
    }

    /// KV-cache usage (0-1): used / capacity where both are known, else `sglang:token_usage`;
    /// a hybrid SWA rank's fuller pool, each pool against its own capacity (see
    /// [`crate::kv::KvUse::share`]).
    pub fn kv_fraction(&self) -> Option<f64> {
        self.kv().share().map(|s| s.0)
    }

    /// The tokens [`Rank::kv_fraction`] is of: (used, capacity, pool), the pool named where the
    /// rank has several (`full`, `swa`; `max`: SGLang's larger-pool `#token`, no capacity).
    pub fn kv_tokens(&self) -> (Option<f64>, Option<f64>, Option<&'static str>) {
        let (u, c, pool) = self.kv().shown_tokens();
        (u, c, pool.and_then(crate::kv::Pool::label))
    }

    /// The bytes of the rank's KV pools: a hybrid SWA model's whole pool, else the KV pool's
    /// and the sliding-window pool's.
    pub fn all_pool_bytes(&self) -> Option<f64> {
        match (self.hybrid_pool_bytes, self.pool_bytes, self.swa_pool_bytes) {
            (Some(w), ..) => Some(w),
            (None, Some(k), s) => Some(k + s.unwrap_or(0.0)),
            (None, None, s) => s,
        }
    }

    /// Whether the rank reads as idle (never while its values are live from the API).
    pub fn is_idle(&self) -> bool {
        self.idle == Some(1.0) && !self.is_live()
    }

    /// Whether its values are live from the server's HTTP API.
    pub fn is_live(&self) -> bool {
        self.api_live == Some(1.0)
    }

    /// Whether any PD queue gauge is present.
    pub fn has_pd(&self) -> bool {
        [self.prealloc, self.transfer, self.bootstrap, self.inflight]
            .iter()
            .any(Option::is_some)
    }

    /// Where the value of a rank series of family `family` goes: the registry's families by
    /// their declared names, the pattern file's by the embedded file's names.
    fn slot(&mut self, family: &str) -> Option<&mut Option<f64>> {
        const IDLE: &str = rank::IDLE.name;
        const LAST_STATS: &str = rank::LAST_STATS.name;
        const RETRACTIONS: &str = rank::RETRACTIONS.name;
        const LAST_RETRACTION: &str = rank::LAST_RETRACTION.name;
        const API_LIVE: &str = rank::API_LIVE.name;
        Some(match family {
            "sglang:num_used_tokens" => &mut self.used_tokens,
            "sglang:max_total_num_tokens" => &mut self.max_total_tokens,
            "sglang_kv_pool_capacity_tokens" => &mut self.pool_capacity_tokens,
            "sglang:token_usage" => &mut self.token_usage,
            "sglang:num_running_reqs" => &mut self.running,
            "sglang:num_queue_reqs" => &mut self.queued,
            "sglang:gen_throughput" => &mut self.gen_throughput,
            "sglang_prefill_input_throughput_tokens_per_second" => &mut self.input_throughput,
            "sglang:num_decode_prealloc_queue_reqs" => &mut self.prealloc,
            "sglang:num_decode_transfer_queue_reqs" => &mut self.transfer,
            "sglang:num_prefill_bootstrap_queue_reqs" => &mut self.bootstrap,
            "sglang:num_prefill_inflight_queue_reqs" => &mut self.inflight,
            RETRACTIONS => &mut self.retractions,
            LAST_RETRACTION => &mut self.last_retraction,
            IDLE => &mut self.idle,
            LAST_STATS => &mut self.last_stats,
            "sglang_kv_pool_size_bytes" => &mut self.pool_bytes,
            "sglang_full_pool_capacity_tokens" => &mut self.full_capacity_tokens,
            "sglang_full_used_tokens" => &mut self.full_used_tokens,
            "sglang:full_token_usage" => &mut self.full_token_usage,
            "sglang_swa_pool_capacity_tokens" => &mut self.swa_capacity_tokens,
            "sglang_swa_pool_used_tokens" => &mut self.swa_used_tokens,
            "sglang:swa_token_usage" => &mut self.swa_token_usage,
            "sglang_swa_pool_size_bytes" => &mut self.swa_pool_bytes,
            "sglang_swa_kv_pool_size_bytes" => &mut self.hybrid_pool_bytes,
            "sglang_mamba_used_slots" => &mut self.mamba_used_slots,
            "sglang:mamba_usage" => &mut self.mamba_usage,
            API_LIVE => &mut self.api_live,
            _ => return None,
        })
    }
}

/// One SGLang server (of one exporter, in `--url` mode).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Server {
    /// The scraped exporter (`host:port`); empty for local inputs.
    pub instance: String,
    /// The `server` label.
    pub name: String,
    /// `model_name` (empty when the log did not name it).
    pub model_name: String,
    /// `engine_type`: `unified`, `prefill` or `decode`.
    pub engine_type: String,
    /// Its ranks, in rank order.
    pub ranks: Vec<Rank>,
    /// What routers say of it as their worker (`--router.url`), by router and worker.
    pub router_workers: Vec<RouterWorker>,
    /// The `url` of `sglang_server_info`: where its HTTP API listens (empty where not known).
    pub url: String,
    /// Where its values come from (`sglang_server_source_timestamp_seconds`'s `from`: `log`,
    /// `api`, `both`; empty where neither gives any).
    pub values_from: String,
    /// Since when (Unix seconds).
    pub values_since: Option<f64>,
}

/// One worker of a router (`sglang_router_worker_*`): what the router says of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouterWorker {
    /// The scraped exporter (`host:port`); empty for local inputs.
    pub instance: String,
    /// The `router` label.
    pub router: String,
    /// The `worker` label: the worker's URL as the router prints it.
    pub worker: String,
    /// The `server` label: the server at the worker's URL; empty where none is (not covered).
    pub server: String,
    /// `sglang_router_worker_requests_active`: requests in flight to it.
    pub requests_active: Option<f64>,
    /// `sglang_router_worker_healthy` (1 healthy, 0 not).
    pub healthy: Option<f64>,
    /// `sglang_router_worker_circuit_state` (0 closed, 1 open, 2 half-open).
    pub circuit: Option<f64>,
}

impl RouterWorker {
    /// The circuit breaker's state in words: `closed`, `open`, `half-open` (`-` unknown).
    pub fn circuit_text(&self) -> &'static str {
        match self.circuit {
            Some(0.0) => "closed",
            Some(1.0) => "open",
            Some(2.0) => "half-open",
            _ => "-",
        }
    }

    /// Health in words: `healthy`, `unhealthy` (`-` unknown).
    pub fn health_text(&self) -> &'static str {
        match self.healthy {
            Some(1.0) => "healthy",
            Some(_) => "unhealthy",
            None => "-",
        }
    }

    /// As `top` and the live page write it: `router gw: 2 in flight, healthy, circuit closed`.
    pub fn summary(&self) -> String {
        let flight = self
            .requests_active
            .map_or("-".to_string(), |v| format!("{v}"));
        format!(
            "router {}: {flight} in flight, {}, circuit {}",
            self.router,
            self.health_text(),
            self.circuit_text()
        )
    }

    fn slot(&mut self, family: &str) -> Option<&mut Option<f64>> {
        const ACTIVE: &str = router::WORKER_REQUESTS_ACTIVE.name;
        const HEALTHY: &str = router::WORKER_HEALTHY.name;
        const CIRCUIT: &str = router::WORKER_CIRCUIT_STATE.name;
        Some(match family {
            ACTIVE => &mut self.requests_active,
            HEALTHY => &mut self.healthy,
            CIRCUIT => &mut self.circuit,
            _ => return None,
        })
    }
}

/// One GPU (when the exposition has the `sglang_gpu_*` families).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gpu {
    /// The scraped exporter (`host:port`); empty for local inputs.
    pub instance: String,
    /// NVML index.
    pub index: String,
    /// Product name.
    pub name: String,
    /// Allocated memory in bytes.
    pub used: Option<f64>,
    /// Installed memory in bytes.
    pub total: Option<f64>,
    /// Sum of the KV pools (bytes) of the ranks on it, where known.
    pub kv_pool_bytes: Option<f64>,
    /// The server and rank of each rank on it: `decode DP0 TP0`.
    pub ranks: Vec<String>,
}

/// Everything `top` shows, from one set of families.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Model {
    /// Servers, by instance and name.
    pub servers: Vec<Server>,
    /// GPUs, by instance and index.
    pub gpus: Vec<Gpu>,
    /// Sources (`source` label, with the instance in `--url` mode) whose
    /// `sglang_log_exporter_source_up` reads 0.
    pub down_sources: Vec<String>,
    /// Servers (with the instance in `--url` mode) whose `sglang_up` reads 0: the HTTP API of
    /// `--sglang.url` does not answer.
    pub api_down: Vec<String>,
    /// Whether `sglang_log_exporter_nvml_up` reads 0 (GPU memory is not read).
    pub nvml_down: bool,
    /// Router workers that no server this exporter reads listens at (not covered).
    pub uncovered_workers: Vec<RouterWorker>,
}

/// A label's value, empty when absent.
pub fn label<'a>(labels: &'a Labels, name: &str) -> &'a str {
    labels
        .iter()
        .find(|(k, _)| *k == name)
        .map_or("", |(_, v)| v.as_str())
}

type ServerKey = (String, String);

impl Model {
    /// Picks the model out of `families`.
    pub fn from_families(families: &[Family]) -> Model {
        let mut servers: BTreeMap<ServerKey, (Server, BTreeMap<RankId, Rank>)> = BTreeMap::new();
        let mut workers: BTreeMap<(String, String, String), RouterWorker> = BTreeMap::new();
        let mut down = Vec::new();
        let (mut api_down, mut nvml_down) = (Vec::new(), false);
        for fam in families {
            for (labels, v) in &fam.samples {
                let server = label(labels, "server");
                if fam.name == exporter::SOURCE_UP.name && *v == 0.0 {
                    down.push(with_instance(labels, label(labels, "source")));
                }
                if fam.name == exporter::API_UP.name && *v == 0.0 {
                    api_down.push(with_instance(labels, server));
                }
                if fam.name == gpu::NVML_UP.name && *v == 0.0 {
                    nvml_down = true;
                }
                if RouterWorker::default().slot(&fam.name).is_some() {
                    let (i, r, w) = (
                        label(labels, INSTANCE),
                        label(labels, "router"),
                        label(labels, "worker"),
                    );
                    let rw = workers
                        .entry((i.to_string(), r.to_string(), w.to_string()))
                        .or_insert_with(|| RouterWorker {
                            instance: i.to_string(),
                            router: r.to_string(),
                            worker: w.to_string(),
                            server: server.to_string(),
                            ..RouterWorker::default()
                        });
                    if let Some(slot) = rw.slot(&fam.name) {
                        *slot = Some(*v);
                    }
                    continue;
                }
                let is_source = fam.name == server::VALUES_FROM.name;
                if server.is_empty()
                    || !(fam.name == server::INFO.name || is_source || is_rank(&fam.name))
                {
                    continue;
                }
                // Several engines in one log (Ray actors) are servers of their own.
                let name = match label(labels, "engine") {
                    "" => server.to_string(),
                    engine => format!("{server} [{engine}]"),
                };
                let key = (label(labels, INSTANCE).to_string(), name.clone());
                let (srv, ranks) = servers.entry(key).or_insert_with(|| {
                    let s = Server {
                        instance: label(labels, INSTANCE).to_string(),
                        name,
                        ..Server::default()
                    };
                    (s, BTreeMap::new())
                });
                for (field, name) in [
                    (&mut srv.model_name, "model_name"),
                    (&mut srv.engine_type, "engine_type"),
                ] {
                    if field.is_empty() {
                        *field = label(labels, name).to_string();
                    }
                }
                if fam.name == server::INFO.name {
                    srv.url = label(labels, "url").to_string();
                    continue;
                }
                if is_source {
                    srv.values_from = label(labels, "from").to_string();
                    srv.values_since = Some(*v);
                    continue;
                }
                let id = RankId::of(labels);
                let rank = ranks.entry(id.clone()).or_insert_with(|| Rank {
                    id,
                    ..Rank::default()
                });
                if let Some(slot) = rank.slot(&fam.name) {
                    *slot = Some(*v);
                }
            }
        }
        let mut servers: Vec<Server> = servers
            .into_values()
            .map(|(mut s, ranks)| {
                s.ranks = ranks.into_values().collect();
                name_ranks(&mut s.ranks);
                s.ranks
                    .sort_by(|a, b| a.id.sort_key().cmp(&b.id.sort_key()));
                s
            })
            .collect();
        servers.sort_by(|a, b| (&a.instance, &a.name).cmp(&(&b.instance, &b.name)));
        let mut uncovered_workers = Vec::new();
        for w in workers.into_values() {
            match servers
                .iter_mut()
                .find(|s| !w.server.is_empty() && s.name == w.server && s.instance == w.instance)
            {
                Some(s) => s.router_workers.push(w),
                None => uncovered_workers.push(w),
            }
        }
        let gpus = gpus(families, &servers);
        down.sort();
        down.dedup();
        api_down.sort();
        api_down.dedup();
        Model {
            servers,
            gpus,
            down_sources: down,
            api_down,
            nvml_down,
            uncovered_workers,
        }
    }

    /// Every rank of every server.
    pub fn ranks(&self) -> impl Iterator<Item = &Rank> {
        self.servers.iter().flat_map(|s| &s.ranks)
    }
}

fn is_rank(family: &str) -> bool {
    Rank::default().slot(family).is_some()
}

fn with_instance(labels: &Labels, what: &str) -> String {
    match label(labels, INSTANCE) {
        "" => what.to_string(),
        i => format!("{i} {what}"),
    }
}

/// The GPUs: memory, product name, the ranks on each (`sglang_rank_gpu_info`) and their KV pools.
fn gpus(families: &[Family], servers: &[Server]) -> Vec<Gpu> {
    let mut gpus: BTreeMap<(String, u64, String), Gpu> = BTreeMap::new();
    let key = |l: &Labels| {
        let idx = label(l, "gpu");
        (
            label(l, INSTANCE).to_string(),
            idx.parse().unwrap_or(u64::MAX),
            idx.to_string(),
        )
    };
    for fam in families {
        let memory = [
            gpu::MEMORY_USED.name,
            gpu::MEMORY_TOTAL.name,
            gpu::INFO.name,
        ]
        .contains(&fam.name.as_str());
        if !memory && fam.name != gpu::RANK_INFO.name {
            continue;
        }
        for (l, v) in &fam.samples {
            let g = gpus.entry(key(l)).or_insert_with(|| Gpu {
                instance: label(l, INSTANCE).to_string(),
                index: label(l, "gpu").to_string(),
                ..Gpu::default()
            });
            match fam.name.as_str() {
                GPU_MEMORY_USED => g.used = Some(*v),
                GPU_MEMORY_TOTAL => g.total = Some(*v),
                GPU_INFO => g.name = label(l, "name").to_string(),
                _ => add_rank(g, l, servers),
            }
        }
    }
    gpus.into_values().collect()
}

const GPU_MEMORY_USED: &str = gpu::MEMORY_USED.name;
const GPU_MEMORY_TOTAL: &str = gpu::MEMORY_TOTAL.name;
const GPU_INFO: &str = gpu::INFO.name;

/// Adds the rank of an `sglang_rank_gpu_info` sample to its GPU, and its KV pool's bytes.
fn add_rank(g: &mut Gpu, l: &Labels, servers: &[Server]) {
    let server = label(l, "server");
    let (dp, pp, tp) = (
        label(l, "dp_rank"),
        label(l, "pp_rank"),
        label(l, "tp_rank"),
    );
    let srv = servers
        .iter()
        .find(|s| s.name == server && s.instance == label(l, INSTANCE));
    let rank = srv.and_then(|s| {
        s.ranks
            .iter()
            .find(|r| r.id.0[0] == dp && r.id.0[1] == pp && r.id.0[4] == tp)
    });
    let shown = match rank {
        Some(r) => r.shown.clone(),
        None => {
            let mut id = RankId::default();
            (id.0[0], id.0[1], id.0[4]) = (dp.into(), pp.into(), tp.into());
            id.display()
        }
    };
    g.ranks.push(match shown.as_str() {
        "-" => server.to_string(),
        _ => format!("{server} {shown}"),
    });
    if let Some(b) = rank.and_then(Rank::all_pool_bytes) {
        *g.kv_pool_bytes.get_or_insert(0.0) += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::Kind;

    /// `top`'s KV column and the live page's `kv_percent` write a share alike.
    #[test]
    fn a_share_is_written_with_one_decimal() {
        assert_eq!(percent(0.08), "8.0%");
        assert_eq!(percent(0.4567), "45.7%");
        assert_eq!(percent(1.0), "100.0%");
    }

    fn rank_labels(server: &str, dp: &str, tp: &str) -> Labels {
        vec![
            ("server", server.into()),
            ("model_name", "m".into()),
            ("engine_type", "decode".into()),
            ("dp_rank", dp.into()),
            ("pp_rank", String::new()),
            ("tp_rank", tp.into()),
            ("moe_ep_rank", String::new()),
        ]
    }

    #[test]
    fn ranks_gpus_and_down_sources() {
        let g = |n: &str| Family::new(n, "h", Kind::Gauge);
        let fams = vec![
            g("sglang:num_used_tokens")
                .with(rank_labels("d", "10", "10"), 5.0)
                .with(rank_labels("d", "2", "2"), 50.0),
            g("sglang:max_total_num_tokens").with(rank_labels("d", "2", "2"), 200.0),
            g("sglang:token_usage").with(rank_labels("d", "10", "10"), 0.5),
            g("sglang_kv_pool_size_bytes").with(rank_labels("d", "2", "2"), 1e9),
            g("sglang_gpu_memory_total_bytes").with(vec![("gpu", "0".into())], 8e10),
            g("sglang_rank_gpu_info").with(
                vec![
                    ("server", "d".into()),
                    ("dp_rank", "2".into()),
                    ("tp_rank", "2".into()),
                    ("pp_rank", String::new()),
                    ("gpu", "0".into()),
                ],
                1.0,
            ),
            g("sglang_log_exporter_source_up").with(vec![("source", "x.log".into())], 0.0),
        ];
        let m = Model::from_families(&fams);
        assert_eq!(m.servers.len(), 1);
        let ranks = &m.servers[0].ranks;
        assert_eq!(ranks[0].id.display(), "DP2 TP2");
        assert_eq!(ranks[1].id.display(), "DP10 TP10");
        assert_eq!(ranks[0].kv_fraction(), Some(0.25));
        assert_eq!(ranks[1].kv_fraction(), Some(0.5));
        assert_eq!(m.gpus[0].ranks, ["d DP2 TP2"]);
        assert_eq!(m.gpus[0].kv_pool_bytes, Some(1e9));
        assert_eq!(m.down_sources, ["x.log"]);
    }

    /// A hybrid SWA rank: each pool against its own capacity, the fuller shown and named; its
    /// GPU holds both pools' bytes.
    #[test]
    fn a_hybrid_ranks_pools_are_each_their_own() {
        let g =
            |n: &str, v: f64| Family::new(n, "h", Kind::Gauge).with(rank_labels("d", "0", "0"), v);
        let mut fams = vec![
            g("sglang:num_used_tokens", 95000.0),
            g("sglang:token_usage", 0.95),
            g("sglang:max_total_num_tokens", 500000.0),
            g("sglang_kv_pool_capacity_tokens", 500000.0),
            g("sglang_full_used_tokens", 50000.0),
            g("sglang:full_token_usage", 0.1),
            g("sglang_swa_pool_used_tokens", 95000.0),
            g("sglang:swa_token_usage", 0.95),
            g("sglang_swa_pool_capacity_tokens", 100000.0),
            g("sglang_kv_pool_size_bytes", 6e9),
            g("sglang_swa_pool_size_bytes", 4e9),
        ];
        let mut info = rank_labels("d", "0", "0");
        info.push(("gpu", "0".into()));
        fams.push(Family::new("sglang_rank_gpu_info", "h", Kind::Gauge).with(info, 1.0));
        let m = Model::from_families(&fams);
        let r = &m.servers[0].ranks[0];
        assert_eq!(r.kv_fraction(), Some(0.95));
        assert_eq!(r.kv_tokens(), (Some(95000.0), Some(100000.0), Some("swa")));
        assert_eq!(m.gpus[0].kv_pool_bytes, Some(1e10));
        // Only SGLang's larger-pool figures (its HTTP API): its token usage, named `max`.
        let only: Vec<Family> = fams
            .into_iter()
            .filter(|f| {
                !f.name.contains("full_")
                    && !f.name.contains("swa_t")
                    && !f.name.contains("swa_used")
            })
            .collect();
        let r = Model::from_families(&only).servers[0].ranks[0].clone();
        assert_eq!(r.kv_fraction(), Some(0.95));
        assert_eq!(r.kv_tokens(), (Some(95000.0), None, Some("max")));
    }
}
