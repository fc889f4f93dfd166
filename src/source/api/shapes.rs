//! The JSON shapes of SGLang's load endpoints, read into per-DP-rank metric values.
//!
//! Read from each release's own code (`pip download --no-deps sglang==VERSION`):
//!
//! * `GET /v1/loads` (v0.5.8+, `entrypoints/v1_loads.py`): `{"loads": [...]}`, one object per
//!   DP rank — a `LoadSnapshot` (`managers/load_snapshot.py`, v0.5.19+) or a
//!   `GetLoadsReqOutput` (`managers/io_struct.py`, v0.5.8–v0.5.18), built by the scheduler
//!   (`scheduler_components/load_inquirer.py`, before that `scheduler_metrics_mixin.py`).
//!   Its `num_waiting_reqs` counts the PD queues too (bootstrap; prealloc, transfer and
//!   retracted), so it is the log's `#queue-req` only with `queues.waiting` or once the PD
//!   queues are taken off; v0.5.9–v0.5.18 name the bootstrap queue `prefill_prealloc_queue_reqs`.
//! * `GET /get_load` (v0.4.7–v0.5.20): from v0.5.3 a list of `GetLoadReqOutput` (`dp_rank`,
//!   `num_reqs` = running + waiting, `num_waiting_reqs` with the PD queues, `num_tokens` = used
//!   tokens plus the waiting requests': no used count); v0.4.7–v0.5.2 answer `{"load": N}`, DP
//!   rank 0's tokens in use and waiting, which says the server answers and nothing per rank.
//! * `GET /server_info` (v0.5.6+; `/get_server_info` from v0.4.x, kept as an alias): the
//!   server arguments, the scheduler info (`max_total_num_tokens`) and per-DP
//!   `internal_states`.
//!
//! A field that is absent, not a number, negative or not finite gives no value: the log may
//! still give it. Nothing here is guessed from a field of another meaning.

use serde_json::{Map, Value};

use crate::record::ServerArgs;
use crate::state::live::{DpLoad, ServerInfo};

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(pub String);

/// The kind of a value, which bounds what it may be.
#[derive(Clone, Copy)]
enum Kind {
    /// Requests, tokens: a whole number from 0 to 2^53.
    Count,
    /// A 0-1 share.
    Ratio,
    /// Tokens per second: finite, from 0 to 10^12.
    Rate,
}

/// Reads values of one answer and counts those present but out of their kind's range (not a
/// number, negative, fractional counts, shares above 1): each such value is left out.
#[derive(Default)]
struct Reader {
    bad: u32,
}

impl Reader {
    fn get(&mut self, o: &Map<String, Value>, key: &str, kind: Kind) -> Option<f64> {
        let v = o.get(key)?;
        if v.is_null() {
            return None;
        }
        let ok = v.as_f64().filter(|x| {
            x.is_finite()
                && *x >= 0.0
                && match kind {
                    Kind::Count => x.fract() == 0.0 && *x <= 9_007_199_254_740_992.0,
                    Kind::Ratio => *x <= 1.0,
                    Kind::Rate => *x <= 1e12,
                }
        });
        if ok.is_none() {
            self.bad += 1;
        }
        ok
    }
}

/// A count at `key` (see [`Kind::Count`]), for code that has no [`Reader`] at hand.
fn count(o: &Map<String, Value>, key: &str) -> Option<f64> {
    Reader::default().get(o, key, Kind::Count)
}

/// Above any DP size a server runs with (the rank caps are far below it).
const MAX_DP_RANK: u64 = 1 << 16;

/// `dp_rank`: a number below [`MAX_DP_RANK`], or `null`/absent for a server without data
/// parallelism (0).
fn dp_rank(o: &Map<String, Value>) -> Result<u32, ShapeError> {
    match o.get("dp_rank") {
        None | Some(Value::Null) => Ok(0),
        Some(v) => v
            .as_u64()
            .filter(|&n| n < MAX_DP_RANK)
            .map(|n| n as u32)
            .ok_or_else(|| ShapeError(format!("dp_rank {v} is not a rank number"))),
    }
}

/// Whether the server runs without PD disaggregation, from `/server_info` (`None`: unknown).
fn unified(info: Option<&ServerInfo>) -> Option<bool> {
    let mode = info?.args.disaggregation_mode.as_deref()?;
    Some(mode == "null")
}

/// Reads a `/v1/loads` answer. `info` (the last `/server_info`) tells a server without PD
/// disaggregation, whose `num_waiting_reqs` is its waiting queue.
///
/// # Errors
/// A [`ShapeError`] when the body is not an object with a `loads` list of objects.
pub fn v1_loads(body: &Value, info: Option<&ServerInfo>) -> Result<Vec<DpLoad>, ShapeError> {
    let loads = body
        .get("loads")
        .and_then(Value::as_array)
        .ok_or_else(|| ShapeError("no \"loads\" list".into()))?;
    distinct(
        loads
            .iter()
            .map(|l| {
                let o = l
                    .as_object()
                    .ok_or_else(|| ShapeError("a load is not an object".into()))?;
                v1_load(o, info)
            })
            .collect::<Result<Vec<_>, _>>()?,
    )
}

/// Refuses an answer that lists a DP rank twice: which of the two is the rank's is unknown.
fn distinct(loads: Vec<DpLoad>) -> Result<Vec<DpLoad>, ShapeError> {
    let mut seen = std::collections::BTreeSet::new();
    for l in &loads {
        if !seen.insert(l.dp_rank) {
            return Err(ShapeError(format!("dp_rank {} is listed twice", l.dp_rank)));
        }
    }
    Ok(loads)
}

fn v1_load(o: &Map<String, Value>, info: Option<&ServerInfo>) -> Result<DpLoad, ShapeError> {
    let mut r = Reader::default();
    let mut values = Vec::new();
    let mut put = |id: &'static str, v: Option<f64>| {
        if let Some(v) = v {
            values.push((id, v));
        }
    };
    // 0 is the snapshot's default before the scheduler set it: no capacity.
    let capacity = r
        .get(o, "max_total_num_tokens", Kind::Count)
        .filter(|&v| v > 0.0);
    put("max_total_num_tokens", capacity);
    put(
        "num_running_reqs",
        r.get(o, "num_running_reqs", Kind::Count),
    );
    // More tokens in use than the pool holds is a contradiction, never a share above 100 %.
    let used = r.get(o, "num_used_tokens", Kind::Count);
    let used = match (used, capacity) {
        (Some(u), Some(c)) if u > c => {
            r.bad += 1;
            None
        }
        _ => used,
    };
    put("num_used_tokens", used);
    put("token_usage", r.get(o, "token_usage", Kind::Ratio));
    put("gen_throughput", r.get(o, "gen_throughput", Kind::Rate));
    put("cache_hit_rate", r.get(o, "cache_hit_rate", Kind::Ratio));
    put(
        "max_running_requests",
        r.get(o, "max_running_requests", Kind::Count)
            .filter(|&v| v > 0.0),
    );
    let disagg = o.get("disaggregation").and_then(Value::as_object);
    let mode = disagg.and_then(|d| d.get("mode")).and_then(Value::as_str);
    // The PD queues of the server's side, and their sum (what num_waiting_reqs adds).
    let mut pd_sum = Some(0.0);
    if let Some(d) = disagg {
        let side: &[(&'static str, &[&str])] = match mode {
            Some("prefill") => &[
                (
                    "num_prefill_bootstrap_queue_reqs",
                    &[
                        "prefill_bootstrap_queue_reqs",
                        "prefill_prealloc_queue_reqs",
                    ],
                ),
                (
                    "num_prefill_inflight_queue_reqs",
                    &["prefill_inflight_queue_reqs"],
                ),
            ],
            Some("decode") => &[
                (
                    "num_decode_prealloc_queue_reqs",
                    &["decode_prealloc_queue_reqs"],
                ),
                (
                    "num_decode_transfer_queue_reqs",
                    &["decode_transfer_queue_reqs"],
                ),
                (
                    "decode_retracted_queue_reqs",
                    &["decode_retracted_queue_reqs"],
                ),
            ],
            _ => &[],
        };
        for &(id, keys) in side {
            let v = keys.iter().find_map(|k| r.get(d, k, Kind::Count));
            put(id, v);
            // The inflight queue is not among the waiting ones.
            if id != "num_prefill_inflight_queue_reqs" {
                pd_sum = pd_sum.zip(v).map(|(a, b)| a + b);
            }
        }
    }
    let waiting = r.get(o, "num_waiting_reqs", Kind::Count);
    let queue = o
        .get("queues")
        .and_then(Value::as_object)
        .and_then(|q| r.get(q, "waiting", Kind::Count))
        .or_else(|| match (mode, unified(info)) {
            (Some("null"), _) | (None, Some(true)) => waiting,
            (Some("prefill" | "decode"), _) => waiting
                .zip(pd_sum)
                .map(|(w, s)| w - s)
                .filter(|&q| q >= 0.0),
            _ => None,
        });
    put("num_queue_reqs", queue);
    Ok(DpLoad {
        dp_rank: dp_rank(o)?,
        values,
        bad: r.bad,
    })
}

/// Reads a `/get_load` answer: running requests (`num_reqs` − `num_waiting_reqs`), and the
/// queue where `info` says the server runs without PD disaggregation (else its
/// `num_waiting_reqs` holds the PD queues too, which cannot be taken apart).
///
/// # Errors
/// A [`ShapeError`] when the body is not a list of objects.
pub fn get_load(body: &Value, info: Option<&ServerInfo>) -> Result<Vec<DpLoad>, ShapeError> {
    // v0.4.7–v0.5.2: one token count for the whole server, no request counts.
    if body.get("load").is_some_and(Value::is_number) {
        return Ok(Vec::new());
    }
    let loads = body
        .as_array()
        .ok_or_else(|| ShapeError("neither a list nor {\"load\": N}".into()))?;
    let loads = loads
        .iter()
        .map(|l| {
            let o = l
                .as_object()
                .ok_or_else(|| ShapeError("a load is not an object".into()))?;
            let mut r = Reader::default();
            let mut values = Vec::new();
            let reqs = r.get(o, "num_reqs", Kind::Count);
            let waiting = r.get(o, "num_waiting_reqs", Kind::Count);
            if let Some(running) = reqs.zip(waiting).map(|(r, w)| r - w).filter(|&r| r >= 0.0) {
                values.push(("num_running_reqs", running));
            }
            if let (Some(w), Some(true)) = (waiting, unified(info)) {
                values.push(("num_queue_reqs", w));
            }
            Ok(DpLoad {
                dp_rank: dp_rank(o)?,
                values,
                bad: r.bad,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    distinct(loads)
}

/// Reads a `/server_info` answer: `served_model_name` (else `model_path`), the mode, the
/// sizes and placement, `enable_dp_attention`, `speculative_algorithm` and the capacity.
///
/// # Errors
/// A [`ShapeError`] when the body is not an object.
pub fn server_info(body: &Value) -> Result<ServerInfo, ShapeError> {
    let o = body
        .as_object()
        .ok_or_else(|| ShapeError("not an object".into()))?;
    let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
    // Sizes and placement outside 0..65536 are garbage (no server has them): no value.
    let number = |k: &str| o.get(k).and_then(Value::as_u64).filter(|&n| n < 65536);
    let place = |k: &str| number(k).map(|n| n as u32);
    let size = |k: &str| place(k).filter(|&n| n > 0);
    let args = ServerArgs {
        model_name: text("served_model_name").or_else(|| text("model_path")),
        disaggregation_mode: text("disaggregation_mode"),
        tp_size: size("tp_size"),
        dp_size: size("dp_size"),
        pp_size: size("pp_size"),
        nnodes: size("nnodes"),
        node_rank: place("node_rank"),
        base_gpu_id: place("base_gpu_id"),
        gpu_id_step: size("gpu_id_step"),
        enable_dp_attention: o.get("enable_dp_attention").and_then(Value::as_bool),
        // Python's None reads "None", as in a server_args line.
        speculative_algorithm: match o.get("speculative_algorithm") {
            Some(Value::Null) => Some("None".into()),
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        },
    };
    Ok(ServerInfo {
        args,
        ep_size: size("ep_size").filter(|&e| e > 1),
        max_total_num_tokens: count(o, "max_total_num_tokens").filter(|&v| v > 0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(mode: &str) -> ServerInfo {
        server_info(&json!({"disaggregation_mode": mode, "tp_size": 8})).unwrap()
    }

    fn get(l: &DpLoad, id: &str) -> Option<f64> {
        l.values.iter().find(|(k, _)| *k == id).map(|(_, v)| *v)
    }

    /// v0.5.23 decode: num_waiting_reqs = waiting + prealloc + transfer + retracted.
    #[test]
    fn a_decode_servers_queue_is_its_waiting_queue_not_the_pd_queues() {
        let body = json!({"loads": [{"dp_rank": 1, "num_running_reqs": 32, "num_waiting_reqs": 9,
            "num_used_tokens": 11179, "max_total_num_tokens": 786432, "token_usage": 0.0142,
            "gen_throughput": 1635.11, "cache_hit_rate": 0.5,
            "disaggregation": {"mode": "decode", "prefill_bootstrap_queue_reqs": 0,
                "prefill_inflight_queue_reqs": 0, "decode_prealloc_queue_reqs": 4,
                "decode_transfer_queue_reqs": 2, "decode_retracted_queue_reqs": 1}}]});
        let l = &v1_loads(&body, None).unwrap()[0];
        assert_eq!(l.dp_rank, 1);
        assert_eq!(get(l, "num_queue_reqs"), Some(2.0));
        assert_eq!(get(l, "num_decode_prealloc_queue_reqs"), Some(4.0));
        assert_eq!(get(l, "num_decode_transfer_queue_reqs"), Some(2.0));
        assert_eq!(get(l, "decode_retracted_queue_reqs"), Some(1.0));
        assert_eq!(get(l, "num_prefill_bootstrap_queue_reqs"), None);
        assert_eq!(get(l, "num_used_tokens"), Some(11179.0));
        assert_eq!(get(l, "token_usage"), Some(0.0142));
        // With the queues section, its waiting count is the queue.
        let mut b = body.clone();
        b["loads"][0]["queues"] = json!({"waiting": 3, "grammar": 0, "paused": 0, "retracted": 0});
        assert_eq!(
            get(&v1_loads(&b, None).unwrap()[0], "num_queue_reqs"),
            Some(3.0)
        );
    }

    /// v0.5.9–v0.5.18 name the bootstrap queue prefill_prealloc_queue_reqs; dp_rank may be null.
    #[test]
    fn older_names_and_a_null_dp_rank_read_the_same() {
        let body = json!({"loads": [{"dp_rank": null, "num_running_reqs": 1, "num_waiting_reqs": 5,
            "disaggregation": {"mode": "prefill", "prefill_prealloc_queue_reqs": 3,
                "prefill_inflight_queue_reqs": 7}}]});
        let l = &v1_loads(&body, None).unwrap()[0];
        assert_eq!(l.dp_rank, 0);
        assert_eq!(get(l, "num_prefill_bootstrap_queue_reqs"), Some(3.0));
        assert_eq!(get(l, "num_prefill_inflight_queue_reqs"), Some(7.0));
        assert_eq!(get(l, "num_queue_reqs"), Some(2.0));
    }

    /// Without the sections, the waiting count is the queue only on a server known unified.
    #[test]
    fn the_waiting_count_is_the_queue_only_where_the_server_has_no_pd_queues() {
        let body = json!({"loads": [{"num_running_reqs": 2, "num_waiting_reqs": 4,
            "max_total_num_tokens": 0}]});
        let l = &v1_loads(&body, None).unwrap()[0];
        assert_eq!(get(l, "num_queue_reqs"), None);
        assert_eq!(get(l, "max_total_num_tokens"), None);
        let l = &v1_loads(&body, Some(&info("null"))).unwrap()[0];
        assert_eq!(get(l, "num_queue_reqs"), Some(4.0));
        let l = &v1_loads(&body, Some(&info("decode"))).unwrap()[0];
        assert_eq!(get(l, "num_queue_reqs"), None);
    }

    #[test]
    fn get_load_gives_running_requests_and_a_unified_servers_queue() {
        let body = json!([{"rid": null, "http_worker_ipc": null, "dp_rank": 0, "num_reqs": 12,
            "num_waiting_reqs": 5, "num_tokens": 9000}]);
        let l = &get_load(&body, Some(&info("null"))).unwrap()[0];
        assert_eq!(get(l, "num_running_reqs"), Some(7.0));
        assert_eq!(get(l, "num_queue_reqs"), Some(5.0));
        // num_tokens is used + waiting tokens: never the used count.
        assert_eq!(get(l, "num_used_tokens"), None);
        let l = &get_load(&body, Some(&info("decode"))).unwrap()[0];
        assert_eq!(get(l, "num_queue_reqs"), None);
        let l = &get_load(&body, None).unwrap()[0];
        assert_eq!(get(l, "num_queue_reqs"), None);
        // v0.4.7–v0.5.2: an answer, nothing per rank.
        assert_eq!(get_load(&json!({"load": 12345}), None).unwrap(), vec![]);
    }

    #[test]
    fn garbage_is_an_error_and_bad_numbers_are_no_values() {
        assert!(v1_loads(&json!({"loads": 3}), None).is_err());
        assert!(v1_loads(&json!([1]), None).is_err());
        assert!(v1_loads(&json!({"loads": [{"dp_rank": -1}]}), None).is_err());
        assert!(v1_loads(&json!({"loads": [{"dp_rank": 4294967295u64}]}), None).is_err());
        assert!(get_load(&json!([{"dp_rank": 1.5}]), None).is_err());
        assert!(get_load(&json!({"a": 1}), None).is_err());
        assert!(server_info(&json!("x")).is_err());
        let body = json!({"loads": [{"num_running_reqs": -3, "token_usage": "0.5",
            "num_used_tokens": null}]});
        let l = &v1_loads(&body, None).unwrap()[0];
        assert_eq!((&l.values, l.bad), (&vec![], 2));
        // Out of their kind's range: a fractional count, shares above 1, a rate of 1e308, more
        // tokens in use than the pool holds.
        let body = json!({"loads": [{"num_running_reqs": 1.5, "token_usage": 7.5,
            "cache_hit_rate": 3, "gen_throughput": 1e308, "num_used_tokens": 9e15,
            "max_total_num_tokens": 1000}]});
        let l = &v1_loads(&body, None).unwrap()[0];
        assert_eq!(
            (&l.values, l.bad),
            (&vec![("max_total_num_tokens", 1000.0)], 5)
        );
        // A DP rank twice: which one is the rank's is unknown.
        let body = json!({"loads": [{"dp_rank": 0, "num_running_reqs": 32},
            {"dp_rank": 0, "num_running_reqs": 5}]});
        assert!(v1_loads(&body, None).unwrap_err().0.contains("twice"));
        assert!(get_load(&json!([{"dp_rank": 1}, {"dp_rank": 1}]), None).is_err());
        let i = server_info(&json!({"tp_size": 0, "dp_size": 1e18, "pp_size": -1,
            "ep_size": "8", "nnodes": 4000000000u64}))
        .unwrap();
        assert_eq!(
            (
                i.args.tp_size,
                i.args.dp_size,
                i.args.pp_size,
                i.args.nnodes,
                i.ep_size
            ),
            (None, None, None, None, None)
        );
        // More waiting than the queues hold after the PD ones: no queue rather than a wrong one.
        let body = json!({"loads": [{"num_waiting_reqs": 1, "disaggregation": {"mode": "decode",
            "decode_prealloc_queue_reqs": 4}}]});
        assert_eq!(
            get(&v1_loads(&body, None).unwrap()[0], "num_queue_reqs"),
            None
        );
    }

    #[test]
    fn server_info_reads_the_model_mode_and_sizes() {
        let i = server_info(
            &json!({"model_path": "/models/ds", "served_model_name": "ds-v3",
            "disaggregation_mode": "decode", "tp_size": 8, "dp_size": 8, "ep_size": 8,
            "enable_dp_attention": true, "speculative_algorithm": null,
            "max_total_num_tokens": 786432, "internal_states": []}),
        )
        .unwrap();
        assert_eq!(i.args.model_name.as_deref(), Some("ds-v3"));
        assert_eq!(i.args.disaggregation_mode.as_deref(), Some("decode"));
        assert_eq!(
            (i.args.tp_size, i.args.dp_size, i.ep_size),
            (Some(8), Some(8), Some(8))
        );
        assert_eq!(i.args.enable_dp_attention, Some(true));
        assert_eq!(i.args.speculative_algorithm.as_deref(), Some("None"));
        assert_eq!(i.max_total_num_tokens, Some(786432.0));
        let i = server_info(&json!({"model_path": "/m", "served_model_name": null})).unwrap();
        assert_eq!(i.args.model_name.as_deref(), Some("/m"));
    }
}
