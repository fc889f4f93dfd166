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

use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::record::ServerArgs;
use crate::state::live::{DpLoad, ServerInfo};

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(pub String);

impl From<serde_json::Error> for ShapeError {
    fn from(e: serde_json::Error) -> ShapeError {
        ShapeError(e.to_string())
    }
}

/// Longest text kept from an answer (a model name or path); a longer one is no value. Label
/// values are bounded further by [`crate::label`].
const MAX_TEXT: usize = 4096;

/// One JSON value of a field we read, kept small whatever the peer sends: a number, a bool,
/// `null`, a string up to [`MAX_TEXT`] bytes; a list, an object or a longer string is only
/// skipped over ([`IgnoredAny`]: nothing of it is kept). An absent field is
/// [`Scalar::Absent`].
///
/// Every answer is parsed into structs of these, never into a `serde_json::Value` (whose
/// objects cost ~90 bytes of heap per byte of JSON: a 4 MiB answer of small objects took
/// 350 MB, repro 23).
#[derive(Debug, Clone, Default, PartialEq)]
enum Scalar {
    #[default]
    Absent,
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    Text(String),
    /// A list, an object, a string above [`MAX_TEXT`]: present, but not a value we read.
    Other,
}

impl Scalar {
    fn as_f64(&self) -> Option<f64> {
        match *self {
            Scalar::U64(n) => Some(n as f64),
            Scalar::I64(n) => Some(n as f64),
            Scalar::F64(x) => Some(x),
            _ => None,
        }
    }

    fn as_u64(&self) -> Option<u64> {
        match *self {
            Scalar::U64(n) => Some(n),
            _ => None,
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Text(s) => Some(s),
            _ => None,
        }
    }

    fn is_none(&self) -> bool {
        matches!(self, Scalar::Absent | Scalar::Null)
    }
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Absent => f.write_str("absent"),
            Scalar::Null => f.write_str("null"),
            Scalar::Bool(b) => write!(f, "{b}"),
            Scalar::U64(n) => write!(f, "{n}"),
            Scalar::I64(n) => write!(f, "{n}"),
            Scalar::F64(x) => write!(f, "{x}"),
            Scalar::Text(s) => write!(f, "{s:?}"),
            Scalar::Other => f.write_str("a list or an object"),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, b: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(b))
            }
            fn visit_u64<E>(self, n: u64) -> Result<Scalar, E> {
                Ok(Scalar::U64(n))
            }
            fn visit_i64<E>(self, n: i64) -> Result<Scalar, E> {
                Ok(if n >= 0 {
                    Scalar::U64(n as u64)
                } else {
                    Scalar::I64(n)
                })
            }
            fn visit_f64<E>(self, x: f64) -> Result<Scalar, E> {
                Ok(Scalar::F64(x))
            }
            fn visit_str<E>(self, s: &str) -> Result<Scalar, E> {
                Ok(if s.len() <= MAX_TEXT {
                    Scalar::Text(s.to_string())
                } else {
                    Scalar::Other
                })
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_none<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Scalar, D::Error> {
                Scalar::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
                while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// An object read into `T` (its fields as `T` names them, the rest skipped), or `None` for
/// anything else at its place (skipped).
#[derive(Debug, Clone, PartialEq)]
struct Obj<T>(Option<T>);

impl<T> Default for Obj<T> {
    fn default() -> Obj<T> {
        Obj(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Obj<T>, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = Obj<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, a: A) -> Result<Obj<T>, A::Error> {
                T::deserialize(de::value::MapAccessDeserializer::new(a)).map(|t| Obj(Some(t)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Obj<T>, A::Error> {
                while a.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Obj(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
            fn visit_unit<E>(self) -> Result<Obj<T>, E> {
                Ok(Obj(None))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// Reads a list of `T`, keeping at most `cap` of them: the rest are only counted (skipped as
/// [`IgnoredAny`]), so an answer of a million entries costs `cap` entries. The list's length
/// comes back beside the entries kept.
fn capped_seq<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(
    mut a: A,
    cap: usize,
) -> Result<(Vec<T>, usize), A::Error> {
    let mut kept = Vec::new();
    let mut len = 0;
    loop {
        let more = if kept.len() < cap {
            a.next_element::<T>()?.map(|t| kept.push(t)).is_some()
        } else {
            a.next_element::<IgnoredAny>()?.is_some()
        };
        if !more {
            return Ok((kept, len));
        }
        len += 1;
    }
}

/// A map key that is `name` (true) or another (false), read without keeping it.
struct KeyIs(&'static str);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        struct V(&'static str);
        impl Visitor<'_> for V {
            type Value = bool;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, s: &str) -> Result<bool, E> {
                Ok(s == self.0)
            }
        }
        d.deserialize_str(V(self.0))
    }
}

/// The list of loads of an answer, at most `cap` of them kept (see [`capped_seq`]).
struct Loads<T>(usize, PhantomData<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for Loads<T> {
    type Value = (Vec<T>, usize);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for Loads<T> {
    type Value = (Vec<T>, usize);
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of loads")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
        capped_seq(a, self.0)
    }
}

/// Parses a whole body with `seed` (trailing bytes other than white space are an error).
fn parse<'de, S: DeserializeSeed<'de>>(body: &'de [u8], seed: S) -> Result<S::Value, ShapeError> {
    let mut de = serde_json::Deserializer::from_slice(body);
    let v = seed.deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// A [`DeserializeSeed`] for a type that needs none.
struct NoSeed<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for NoSeed<T> {
    type Value = T;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        T::deserialize(d)
    }
}

/// Refuses more DP ranks than a server may have (`max_ranks`, the per-server rank cap).
fn within(len: usize, max_ranks: usize) -> Result<(), ShapeError> {
    if len > max_ranks {
        return Err(ShapeError(format!(
            "{len} DP ranks, more than a server may have ({max_ranks})"
        )));
    }
    Ok(())
}

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
    fn get(&mut self, v: &Scalar, kind: Kind) -> Option<f64> {
        if v.is_none() {
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

/// A count (see [`Kind::Count`]), for code that has no [`Reader`] at hand.
fn count(v: &Scalar) -> Option<f64> {
    Reader::default().get(v, Kind::Count)
}

/// Above any DP size a server runs with (the rank caps are far below it).
const MAX_DP_RANK: u64 = 1 << 16;

/// `dp_rank`: a number below [`MAX_DP_RANK`], or `null`/absent for a server without data
/// parallelism (0).
fn dp_rank(v: &Scalar) -> Result<u32, ShapeError> {
    if v.is_none() {
        return Ok(0);
    }
    v.as_u64()
        .filter(|&n| n < MAX_DP_RANK)
        .map(|n| n as u32)
        .ok_or_else(|| ShapeError(format!("dp_rank {v} is not a rank number")))
}

/// Whether the server runs without PD disaggregation, from `/server_info` (`None`: unknown).
fn unified(info: Option<&ServerInfo>) -> Option<bool> {
    let mode = info?.args.disaggregation_mode.as_deref()?;
    Some(mode == "null")
}

/// The fields of a `/v1/loads` entry that are read (the rest skipped).
#[derive(Deserialize, Default)]
#[serde(default)]
struct V1Load {
    dp_rank: Scalar,
    max_total_num_tokens: Scalar,
    num_running_reqs: Scalar,
    num_used_tokens: Scalar,
    token_usage: Scalar,
    gen_throughput: Scalar,
    cache_hit_rate: Scalar,
    max_running_requests: Scalar,
    num_waiting_reqs: Scalar,
    disaggregation: Obj<Disaggregation>,
    queues: Obj<Queues>,
}

/// A `/v1/loads` entry's `disaggregation` section.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Disaggregation {
    mode: Scalar,
    prefill_bootstrap_queue_reqs: Scalar,
    prefill_prealloc_queue_reqs: Scalar,
    prefill_inflight_queue_reqs: Scalar,
    decode_prealloc_queue_reqs: Scalar,
    decode_transfer_queue_reqs: Scalar,
    decode_retracted_queue_reqs: Scalar,
}

/// A `/v1/loads` entry's `queues` section.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Queues {
    waiting: Scalar,
}

/// A `/v1/loads` answer's top level: its `loads` list (at most `.0` entries kept), the rest
/// skipped.
struct V1Body(usize);

impl<'de> DeserializeSeed<'de> for V1Body {
    type Value = (Vec<V1Load>, usize);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for V1Body {
    type Value = (Vec<V1Load>, usize);
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an object with a \"loads\" list")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut loads = None;
        while let Some(is_loads) = a.next_key_seed(KeyIs("loads"))? {
            if !is_loads {
                a.next_value::<IgnoredAny>()?;
            } else if loads.is_some() {
                return Err(de::Error::duplicate_field("loads"));
            } else {
                loads = Some(a.next_value_seed(Loads(self.0, PhantomData))?);
            }
        }
        loads.ok_or_else(|| de::Error::missing_field("loads"))
    }
}

/// Reads a `/v1/loads` answer. `info` (the last `/server_info`) tells a server without PD
/// disaggregation, whose `num_waiting_reqs` is its waiting queue.
///
/// # Errors
/// A [`ShapeError`] when the body is not an object with a `loads` list of objects, when it
/// lists more than `max_ranks` DP ranks or one twice.
pub fn v1_loads(
    body: &[u8],
    info: Option<&ServerInfo>,
    max_ranks: usize,
) -> Result<Vec<DpLoad>, ShapeError> {
    let (loads, len) = parse(body, V1Body(max_ranks))?;
    within(len, max_ranks)?;
    let loads = loads
        .iter()
        .map(|l| v1_load(l, info))
        .collect::<Result<Vec<_>, _>>()?;
    distinct(loads)
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

fn v1_load(o: &V1Load, info: Option<&ServerInfo>) -> Result<DpLoad, ShapeError> {
    let mut r = Reader::default();
    let mut values = Vec::new();
    let mut put = |id: &'static str, v: Option<f64>| {
        if let Some(v) = v {
            values.push((id, v));
        }
    };
    // 0 is the snapshot's default before the scheduler set it: no capacity.
    let capacity = r
        .get(&o.max_total_num_tokens, Kind::Count)
        .filter(|&v| v > 0.0);
    put("max_total_num_tokens", capacity);
    put("num_running_reqs", r.get(&o.num_running_reqs, Kind::Count));
    // More tokens in use than the pool holds is a contradiction, never a share above 100 %.
    let used = r.get(&o.num_used_tokens, Kind::Count);
    let used = match (used, capacity) {
        (Some(u), Some(c)) if u > c => {
            r.bad += 1;
            None
        }
        _ => used,
    };
    put("num_used_tokens", used);
    put("token_usage", r.get(&o.token_usage, Kind::Ratio));
    put("gen_throughput", r.get(&o.gen_throughput, Kind::Rate));
    put("cache_hit_rate", r.get(&o.cache_hit_rate, Kind::Ratio));
    put(
        "max_running_requests",
        r.get(&o.max_running_requests, Kind::Count)
            .filter(|&v| v > 0.0),
    );
    let disagg = o.disaggregation.0.as_ref();
    let mode = disagg.and_then(|d| d.mode.as_str());
    // The PD queues of the server's side, and their sum (what num_waiting_reqs adds).
    let mut pd_sum = Some(0.0);
    if let Some(d) = disagg {
        let side: &[(&'static str, &[&Scalar])] = match mode {
            Some("prefill") => &[
                (
                    "num_prefill_bootstrap_queue_reqs",
                    &[
                        &d.prefill_bootstrap_queue_reqs,
                        &d.prefill_prealloc_queue_reqs,
                    ],
                ),
                (
                    "num_prefill_inflight_queue_reqs",
                    &[&d.prefill_inflight_queue_reqs],
                ),
            ],
            Some("decode") => &[
                (
                    "num_decode_prealloc_queue_reqs",
                    &[&d.decode_prealloc_queue_reqs],
                ),
                (
                    "num_decode_transfer_queue_reqs",
                    &[&d.decode_transfer_queue_reqs],
                ),
                (
                    "decode_retracted_queue_reqs",
                    &[&d.decode_retracted_queue_reqs],
                ),
            ],
            _ => &[],
        };
        for &(id, keys) in side {
            let v = keys.iter().find_map(|k| r.get(k, Kind::Count));
            put(id, v);
            // The inflight queue is not among the waiting ones.
            if id != "num_prefill_inflight_queue_reqs" {
                pd_sum = pd_sum.zip(v).map(|(a, b)| a + b);
            }
        }
    }
    let waiting = r.get(&o.num_waiting_reqs, Kind::Count);
    let queue = o
        .queues
        .0
        .as_ref()
        .and_then(|q| r.get(&q.waiting, Kind::Count))
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
        dp_rank: dp_rank(&o.dp_rank)?,
        values,
        bad: r.bad,
    })
}

/// The fields of a `/get_load` entry that are read (the rest skipped).
#[derive(Deserialize, Default)]
#[serde(default)]
struct GetLoad {
    dp_rank: Scalar,
    num_reqs: Scalar,
    num_waiting_reqs: Scalar,
}

/// A `/get_load` answer: a list of entries (at most `.0` kept), or v0.4.7–v0.5.2's
/// `{"load": N}` (`None`).
struct GetLoadBody(usize);

impl<'de> DeserializeSeed<'de> for GetLoadBody {
    type Value = Option<(Vec<GetLoad>, usize)>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for GetLoadBody {
    type Value = Option<(Vec<GetLoad>, usize)>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of loads or {\"load\": N}")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, a: A) -> Result<Self::Value, A::Error> {
        capped_seq(a, self.0).map(Some)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut load = false;
        while let Some(is_load) = a.next_key_seed(KeyIs("load"))? {
            if is_load {
                load = a.next_value::<Scalar>()?.as_f64().is_some();
            } else {
                a.next_value::<IgnoredAny>()?;
            }
        }
        if load {
            Ok(None)
        } else {
            Err(de::Error::custom("neither a list nor {\"load\": N}"))
        }
    }
}

/// Reads a `/get_load` answer: running requests (`num_reqs` − `num_waiting_reqs`), and the
/// queue where `info` says the server runs without PD disaggregation (else its
/// `num_waiting_reqs` holds the PD queues too, which cannot be taken apart).
///
/// # Errors
/// A [`ShapeError`] when the body is not a list of objects (nor `{"load": N}`), when it lists
/// more than `max_ranks` DP ranks or one twice.
pub fn get_load(
    body: &[u8],
    info: Option<&ServerInfo>,
    max_ranks: usize,
) -> Result<Vec<DpLoad>, ShapeError> {
    // v0.4.7–v0.5.2: one token count for the whole server, no request counts.
    let Some((loads, len)) = parse(body, GetLoadBody(max_ranks))? else {
        return Ok(Vec::new());
    };
    within(len, max_ranks)?;
    let loads = loads
        .iter()
        .map(|o| {
            let mut r = Reader::default();
            let mut values = Vec::new();
            let reqs = r.get(&o.num_reqs, Kind::Count);
            let waiting = r.get(&o.num_waiting_reqs, Kind::Count);
            if let Some(running) = reqs.zip(waiting).map(|(r, w)| r - w).filter(|&r| r >= 0.0) {
                values.push(("num_running_reqs", running));
            }
            if let (Some(w), Some(true)) = (waiting, unified(info)) {
                values.push(("num_queue_reqs", w));
            }
            Ok(DpLoad {
                dp_rank: dp_rank(&o.dp_rank)?,
                values,
                bad: r.bad,
            })
        })
        .collect::<Result<Vec<_>, ShapeError>>()?;
    distinct(loads)
}

/// The fields of a `/server_info` answer that are read (the rest, `internal_states` and the
/// other arguments, skipped).
#[derive(Deserialize, Default)]
#[serde(default)]
struct InfoBody {
    served_model_name: Scalar,
    model_path: Scalar,
    disaggregation_mode: Scalar,
    tp_size: Scalar,
    dp_size: Scalar,
    pp_size: Scalar,
    ep_size: Scalar,
    nnodes: Scalar,
    node_rank: Scalar,
    base_gpu_id: Scalar,
    gpu_id_step: Scalar,
    enable_dp_attention: Scalar,
    speculative_algorithm: Scalar,
    max_total_num_tokens: Scalar,
}

/// Reads a `/server_info` answer: `served_model_name` (else `model_path`), the mode, the
/// sizes and placement, `enable_dp_attention`, `speculative_algorithm` and the capacity.
///
/// # Errors
/// A [`ShapeError`] when the body is not an object.
pub fn server_info(body: &[u8]) -> Result<ServerInfo, ShapeError> {
    let o: InfoBody = parse(body, NoSeed(PhantomData))?;
    let text = |v: &Scalar| v.as_str().map(str::to_string);
    // Sizes and placement outside 0..65536 are garbage (no server has them): no value.
    let place = |v: &Scalar| v.as_u64().filter(|&n| n < 65536).map(|n| n as u32);
    let size = |v: &Scalar| place(v).filter(|&n| n > 0);
    let args = ServerArgs {
        model_name: text(&o.served_model_name).or_else(|| text(&o.model_path)),
        disaggregation_mode: text(&o.disaggregation_mode),
        tp_size: size(&o.tp_size),
        dp_size: size(&o.dp_size),
        pp_size: size(&o.pp_size),
        nnodes: size(&o.nnodes),
        node_rank: place(&o.node_rank),
        base_gpu_id: place(&o.base_gpu_id),
        gpu_id_step: size(&o.gpu_id_step),
        enable_dp_attention: match o.enable_dp_attention {
            Scalar::Bool(b) => Some(b),
            _ => None,
        },
        // Python's None reads "None", as in a server_args line.
        speculative_algorithm: match &o.speculative_algorithm {
            Scalar::Null => Some("None".into()),
            Scalar::Text(s) => Some(s.clone()),
            _ => None,
        },
        // Where it listens is what was asked: the URL polled.
        host: None,
        port: None,
        tls: None,
    };
    Ok(ServerInfo {
        args,
        ep_size: size(&o.ep_size).filter(|&e| e > 1),
        max_total_num_tokens: count(&o.max_total_num_tokens).filter(|&v| v > 0.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    // The tests write answers as `json!` values: these read them as the bytes they serialise to.
    fn v1_loads(v: &Value, info: Option<&ServerInfo>) -> Result<Vec<DpLoad>, ShapeError> {
        super::v1_loads(&serde_json::to_vec(v).unwrap(), info, 1024)
    }

    fn get_load(v: &Value, info: Option<&ServerInfo>) -> Result<Vec<DpLoad>, ShapeError> {
        super::get_load(&serde_json::to_vec(v).unwrap(), info, 1024)
    }

    fn server_info(v: &Value) -> Result<ServerInfo, ShapeError> {
        super::server_info(&serde_json::to_vec(v).unwrap())
    }

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

    /// Repro 23: what an answer holds beside the fields read is skipped, and a list is kept
    /// only up to the rank cap (the rest counted, never built).
    #[test]
    fn an_answer_is_read_for_its_fields_only_and_its_lists_up_to_the_rank_cap() {
        let mut body = br#"{"loads":[{"dp_rank":0,"num_running_reqs":1,"disaggregation":[1,{"a":2}],"queues":"x"}],"x":["#.to_vec();
        body.extend(vec![&b"{\"a\":0}"[..]; 1000].join(&b","[..]));
        body.extend(b"]}");
        let l = super::v1_loads(&body, None, 1024).unwrap();
        assert_eq!(
            l,
            vec![DpLoad {
                dp_rank: 0,
                values: vec![("num_running_reqs", 1.0)],
                bad: 0
            }]
        );
        let many = |n: usize| {
            let mut b = br#"{"loads":["#.to_vec();
            b.extend(vec![&b"{}"[..]; n].join(&b","[..]));
            b.extend(b"]}");
            b
        };
        assert_eq!(
            super::v1_loads(&many(100_000), None, 1024).unwrap_err().0,
            "100000 DP ranks, more than a server may have (1024)"
        );
        assert_eq!(super::v1_loads(&many(1), None, 1).unwrap().len(), 1);
        let mut b = b"[".to_vec();
        b.extend(vec![&br#"{"dp_rank":0}"#[..]; 5000].join(&b","[..]));
        b.push(b']');
        assert_eq!(
            super::get_load(&b, None, 1024).unwrap_err().0,
            "5000 DP ranks, more than a server may have (1024)"
        );
        // A model name longer than any kept is no name; a list where a number goes is a bad value.
        let long = "m".repeat(MAX_TEXT + 1);
        let i = server_info(&json!({"served_model_name": long, "model_path": "/m"})).unwrap();
        assert_eq!(i.args.model_name.as_deref(), Some("/m"));
        let l = &v1_loads(&json!({"loads": [{"num_running_reqs": [1, 2]}]}), None).unwrap()[0];
        assert_eq!((&l.values, l.bad), (&vec![], 1));
        // Not JSON, or JSON with something after it: an error.
        assert!(super::v1_loads(b"{\"loads\":[]} x", None, 8).is_err());
        assert!(super::v1_loads(b"{\"loads\":[],\"loads\":[]}", None, 8).is_err());
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
