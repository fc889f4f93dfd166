//! The numbers `top` shows, picked out of metric families: servers with their ranks, GPUs, and
//! sources that are down. Pure: the same families give the same model, wherever they came from
//! (this process's state or a scraped exporter).

use std::collections::BTreeMap;

use crate::family::{Family, Labels};

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
    /// `sglang_api_live` (1: the values are live from the server's HTTP API; 0: that API does
    /// not answer).
    pub api_live: Option<f64>,
}

impl Rank {
    /// KV-cache capacity in tokens: `sglang:max_total_num_tokens`, else the pool's capacity;
    /// `None` where the used tokens exceed it (a contradiction, see [`crate::view::share_capacity`]).
    pub fn capacity(&self) -> Option<f64> {
        let cap = self.max_total_tokens.or(self.pool_capacity_tokens);
        crate::view::share_capacity(self.used_tokens, cap)
    }

    /// KV-cache usage (0-1): used / capacity where both are known, else `sglang:token_usage`.
    pub fn kv_fraction(&self) -> Option<f64> {
        match (self.used_tokens, self.capacity()) {
            (Some(u), Some(c)) if c > 0.0 => Some(u / c),
            _ => crate::view::share_usage(self.token_usage),
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

    fn slot(&mut self, family: &str) -> Option<&mut Option<f64>> {
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
            "sglang_retractions_total" => &mut self.retractions,
            "sglang_last_retraction_timestamp_seconds" => &mut self.last_retraction,
            "sglang_idle" => &mut self.idle,
            "sglang_last_stats_timestamp_seconds" => &mut self.last_stats,
            "sglang_kv_pool_size_bytes" => &mut self.pool_bytes,
            "sglang_api_live" => &mut self.api_live,
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
        let mut down = Vec::new();
        for fam in families {
            for (labels, v) in &fam.samples {
                let server = label(labels, "server");
                if fam.name == "sglang_log_exporter_source_up" && *v == 0.0 {
                    down.push(with_instance(labels, label(labels, "source")));
                }
                if server.is_empty() || !(fam.name == "sglang_server_info" || is_rank(&fam.name)) {
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
                if fam.name == "sglang_server_info" {
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
        let gpus = gpus(families, &servers);
        down.sort();
        down.dedup();
        Model {
            servers,
            gpus,
            down_sources: down,
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
        let memory = matches!(
            fam.name.as_str(),
            "sglang_gpu_memory_used_bytes" | "sglang_gpu_memory_total_bytes" | "sglang_gpu_info"
        );
        if !memory && fam.name != "sglang_rank_gpu_info" {
            continue;
        }
        for (l, v) in &fam.samples {
            let g = gpus.entry(key(l)).or_insert_with(|| Gpu {
                instance: label(l, INSTANCE).to_string(),
                index: label(l, "gpu").to_string(),
                ..Gpu::default()
            });
            match fam.name.as_str() {
                "sglang_gpu_memory_used_bytes" => g.used = Some(*v),
                "sglang_gpu_memory_total_bytes" => g.total = Some(*v),
                "sglang_gpu_info" => g.name = label(l, "name").to_string(),
                _ => add_rank(g, l, servers),
            }
        }
    }
    gpus.into_values().collect()
}

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
    if let Some(b) = rank.and_then(|r| r.pool_bytes) {
        *g.kv_pool_bytes.get_or_insert(0.0) += b;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::Kind;

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
}
