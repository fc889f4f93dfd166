//! The typed output of the parser: what one log line says.

use serde::Deserialize;

/// Index of a metric in [`crate::parse::patterns::Patterns::metrics`].
pub type MetricId = u16;

/// What a line kind is, which decides how the state applies its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// A scheduler `Prefill batch` statistics line.
    Prefill,
    /// A scheduler `Decode batch` statistics line.
    Decode,
    /// A startup fact (KV pool, capacity, weights, graphs).
    Fact,
    /// A retraction warning (KV cache pool full).
    Retract,
    /// A uvicorn HTTP access line.
    Access,
    /// The main process's `server_args=ServerArgs(...)` dump.
    ServerArgs,
    /// A per-request record of `--log-requests` (text `Receive:`/`Finish:`/`in=` lines, JSON
    /// `request.*` events), read by [`crate::parse::request`] from the `fields` group on.
    Request,
    /// Where a server's own HTTP listener binds (groups `port` and `dp`): under
    /// `SGLANG_RUST_SERVER=1` each DP rank's Rust server, on a port of its own.
    Listen,
}

/// Which rank a prefix tag sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankTag {
    /// `DPn`
    Dp,
    /// `PPn`
    Pp,
    /// `ATTN_CPn`
    AttnCp,
    /// `MOE_DPn`
    MoeDp,
    /// `TPn` (also the `[gpu_id=N]` message tag of v0.1.17-v0.2.13)
    Tp,
    /// `EPn`
    Ep,
}

impl RankTag {
    /// The field of `r` this tag sets.
    pub fn slot(self, r: &mut Ranks) -> &mut Option<u32> {
        match self {
            RankTag::Dp => &mut r.dp,
            RankTag::Pp => &mut r.pp,
            RankTag::AttnCp => &mut r.attn_cp,
            RankTag::MoeDp => &mut r.moe_dp,
            RankTag::Tp => &mut r.tp,
            RankTag::Ep => &mut r.ep,
        }
    }
}

/// How a request ended: `meta_info.finish_reason`'s `type` (v0.3.2+), or the `FINISH_*` text
/// of older releases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FinishKind {
    /// No finish reason, or one of another kind.
    #[default]
    Other,
    /// A stop token or string matched.
    Stop,
    /// The length limit was reached.
    Length,
    /// The request was aborted (by the client, a timeout, a rejection).
    Abort,
}

/// The numbers of a record's `out['meta_info']` the request metrics need (§6 of the doc).
/// `None`: the key is absent, `None`/`null`, or not a finite number.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MetaInfo {
    /// `prompt_tokens`: input tokens. Absent on waiting-queue aborts, which upstream never
    /// counts.
    pub prompt_tokens: Option<f64>,
    /// `completion_tokens`: output tokens.
    pub completion_tokens: Option<f64>,
    /// `cached_tokens`: prompt tokens served from the prefix cache (v0.3.4+).
    pub cached_tokens: Option<f64>,
    /// `cached_tokens_details` when it is a non-empty dict (v0.5.9+): device, host and
    /// storage tokens, 0 where the dict lacks the key.
    pub cached_details: Option<[f64; 3]>,
    /// `e2e_latency`: arrival to finish, seconds (v0.4.3.post3+).
    pub e2e_latency: Option<f64>,
    /// `first_token_latency`: arrival to first token, seconds (v0.5.21+ with
    /// `--enable-metrics`).
    pub first_token_latency: Option<f64>,
    /// `decode_throughput`: tokens per second (v0.5.5+, with `--enable-metrics` from v0.5.6).
    pub decode_throughput: Option<f64>,
    /// `queue_time`: seconds waiting before the first forward pass (v0.5.5+).
    pub queue_time: Option<f64>,
    /// `forward_entry_time`: Unix seconds of the first forward pass (v0.5.10+, metrics).
    pub forward_entry_time: Option<f64>,
    /// `prefill_finished_ts`: Unix seconds (v0.5.5-v0.5.11, metrics).
    pub prefill_finished_ts: Option<f64>,
    /// `request_received_ts`: Unix seconds (v0.5.5+, metrics).
    pub request_received_ts: Option<f64>,
    /// `spec_verify_ct`: verify forward passes (speculative decoding, v0.4.3.post2+).
    pub spec_verify_ct: Option<f64>,
    /// The key `num_retractions` is present (v0.5.12+; `total_retractions` before).
    pub num_retractions_key: bool,
    /// The key `reasoning_tokens` is present (v0.5.10+).
    pub reasoning_tokens_key: bool,
    /// The finish reason's kind.
    pub finish: FinishKind,
}

/// What one request record says, as read by [`crate::parse::request::read`]. Holds no request content.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RequestRecord {
    /// A finished-request record: a text record with `out`, or a JSON `request.finished`
    /// event. `Receive:` lines and `request.received*` events are not.
    pub finished: bool,
    /// `obj.stream`: `Some(false)` for a request dataclass or JSON object without the field,
    /// `None` where the record cannot tell (v0.1.15-v0.2.13 print no `stream`).
    pub stream: Option<bool>,
    /// `obj.log_metrics` when printed as a boolean (`False` on health checks).
    pub log_metrics: Option<bool>,
    /// `obj.sampling_params` has a truthy `json_schema`, `regex`, `ebnf` or `structural_tag`
    /// (a structured-output request; needs `--log-requests-level` >= 1 from v0.4.9).
    pub structured_output: bool,
    /// `out['meta_info']`, when the record has one.
    pub meta: Option<MetaInfo>,
    /// The JSON record's own `timestamp` (local time, microseconds), for records printed
    /// without a prefix (v0.5.7-v0.5.11).
    pub timestamp: Option<LogTime>,
}

impl RequestRecord {
    /// Whether upstream counts this record in its request metrics (v0.5.23
    /// `TokenizerManager.collect_metrics`): a finished request with `prompt_tokens` whose
    /// `log_metrics` is not false.
    pub fn counts(&self) -> bool {
        self.finished
            && self.log_metrics != Some(false)
            && self.meta.is_some_and(|m| m.prompt_tokens.is_some())
    }
}

/// The parallelism ranks named by a line's prefix tags (`DP0 PP1 ATTN_CP0 MOE_DP0 TP1 EP1`),
/// `None` where the tag is absent. Single-GPU servers print no tags (v0.4.6.post2+).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ranks {
    /// Data-parallel rank (`DPn`).
    pub dp: Option<u32>,
    /// Pipeline-parallel rank (`PPn`).
    pub pp: Option<u32>,
    /// Attention context-parallel rank (`ATTN_CPn`, v0.5.9+).
    pub attn_cp: Option<u32>,
    /// MoE data-parallel rank (`MOE_DPn`, v0.5.9+).
    pub moe_dp: Option<u32>,
    /// Tensor-parallel rank (`TPn`; also the `[gpu_id=N]`/`[gpu=N]` message tag of v0.1.17-v0.2.13).
    pub tp: Option<u32>,
    /// Expert-parallel rank (`EPn`), exported as `moe_ep_rank` as SGLang does.
    pub ep: Option<u32>,
}

/// A rank number too large for a rank (`TP4294967296`), or a rank given twice: such a line is
/// garbage and is not parsed, rather than merged into the series of a rank without that tag.
pub const BAD_RANK: u32 = u32::MAX;

impl Ranks {
    /// Whether some rank is [`BAD_RANK`] (the line names no one rank).
    pub fn has_bad(&self) -> bool {
        [
            self.dp,
            self.pp,
            self.attn_cp,
            self.moe_dp,
            self.tp,
            self.ep,
        ]
        .contains(&Some(BAD_RANK))
    }

    /// Whether `self` and `other` name the same scheduler as its series' labels do
    /// ([`crate::view::rank_label_pairs`]): equal, or differing only where one has no `PPn`,
    /// `TPn` or `EPn` tag and the other tags rank 0. SGLang prints those tags only where the
    /// size is above 1 (v0.4.6.post2+ `scheduler.py` `configure_logger`: `if tp_size > 1`,
    /// `pp_size > 1`, `ep_size > 1`), and v0.3.4-v0.4.6.post1 printed `TP0` even on one GPU,
    /// so an untagged line and a `TP0` line of one server (a log across the upgrade, or cut
    /// before its `server_args`) are one scheduler: the only one a size of 1 allows. `DPn`,
    /// `ATTN_CPn` and `MOE_DPn` label a series only where printed, so they must be equal.
    pub fn same_scheduler(&self, other: &Ranks) -> bool {
        let z = |v: Option<u32>| v.unwrap_or(0);
        self.dp == other.dp
            && self.attn_cp == other.attn_cp
            && self.moe_dp == other.moe_dp
            && z(self.pp) == z(other.pp)
            && z(self.tp) == z(other.tp)
            && z(self.ep) == z(other.ep)
    }
}

/// The local wall-clock time in a line's SGLang prefix: no timezone, a date only from v0.3.4
/// (`HH:MM:SS` alone before), milliseconds only with `SGLANG_LOG_MS=1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogTime {
    /// The date, when printed.
    pub date: Option<jiff::civil::Date>,
    /// A month and day printed without a year (glog's `I1210`, vLLM's `12-10`), when `date`
    /// is `None`: the year is the log's ([`crate::parse::prefix::TimeResolver`]).
    pub month_day: Option<(i8, i8)>,
    /// The time of day, with sub-second part when printed.
    pub time: jiff::civil::Time,
}

/// A uvicorn access line's request (`"POST /v1/chat/completions HTTP/1.1" 200`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access<'a> {
    /// HTTP method as printed.
    pub method: &'a str,
    /// Path without the query string, not yet normalised.
    pub path: &'a str,
    /// Status code.
    pub status: u16,
}

/// Where a listener of the server binds, from a `listen` line: its port, and the DP rank it
/// serves (the line's `(DP rank N/M)` note; `None` without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listen {
    /// The port.
    pub port: u16,
    /// The DP rank the line names.
    pub dp: Option<u32>,
}

/// What the main process's `server_args=ServerArgs(...)` line says about the server. Kept in the
/// state file (`--state.dir`) as JSON; a field missing there reads `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ServerArgs {
    /// `served_model_name`, else `model_path`.
    pub model_name: Option<String>,
    /// `disaggregation_mode`: `prefill`, `decode` or `null`.
    pub disaggregation_mode: Option<String>,
    /// `tp_size`.
    pub tp_size: Option<u32>,
    /// `dp_size`.
    pub dp_size: Option<u32>,
    /// `pp_size`.
    pub pp_size: Option<u32>,
    /// `nnodes`: hosts the server's ranks run on.
    pub nnodes: Option<u32>,
    /// `node_rank`: which of them printed this (each host's rank offset is
    /// `node_rank * ranks / nnodes`).
    pub node_rank: Option<u32>,
    /// `base_gpu_id`.
    pub base_gpu_id: Option<u32>,
    /// `gpu_id_step`.
    pub gpu_id_step: Option<u32>,
    /// `enable_dp_attention`.
    pub enable_dp_attention: Option<bool>,
    /// `speculative_algorithm` as printed (`EAGLE`, `EAGLE3`, `NEXTN`, ...); `None` in Python
    /// (no speculative decoding) reads `"None"`, so that a server known to run without a draft
    /// model tells apart from one whose arguments were not seen.
    pub speculative_algorithm: Option<String>,
    /// `host`: the address the server's HTTP API binds (`127.0.0.1` by default; `0.0.0.0` or
    /// `::` bind every address). Read to poll the API (`--sglang.from-logs`) and for the `url`
    /// of `sglang_server_info`; never a label of its own.
    pub host: Option<String>,
    /// `port`: the HTTP API's port (under `SGLANG_RUST_SERVER=1`, DP rank r's is `port + r`).
    pub port: Option<u16>,
    /// Whether it serves HTTPS (`ssl_certfile` set: `true`; `None` printed: `false`).
    pub tls: Option<bool>,
}

impl ServerArgs {
    /// These arguments with their texts bounded in length ([`crate::label`]): `model_name` is a
    /// label of every series of the server; the mode and the algorithm are only compared with
    /// short words, and are bounded so that a server's kept arguments are small whatever the
    /// line (or the API's answer, or the state file) said. What the state keeps is this.
    pub fn bounded(&self) -> ServerArgs {
        let b = |label, v: &Option<String>| {
            v.as_deref()
                .map(|t| crate::label::bounded(label, t).into_owned())
        };
        ServerArgs {
            model_name: b("model_name", &self.model_name),
            disaggregation_mode: b("disaggregation_mode", &self.disaggregation_mode),
            speculative_algorithm: b("speculative_algorithm", &self.speculative_algorithm),
            tp_size: self.tp_size,
            dp_size: self.dp_size,
            pp_size: self.pp_size,
            nnodes: self.nnodes,
            node_rank: self.node_rank,
            base_gpu_id: self.base_gpu_id,
            gpu_id_step: self.gpu_id_step,
            enable_dp_attention: self.enable_dp_attention,
            // A host name is at most 253 bytes (RFC 1035); a longer text is no address to poll,
            // and a shortened one would name another.
            // A host name is at most 253 bytes (RFC 1035): a longer text is kept cut at 254,
            // which no address is (never polled, never a `url`), and never taken for none.
            host: self.host.as_ref().map(|h| {
                let mut end = h.len().min(254);
                while !h.is_char_boundary(end) {
                    end -= 1;
                }
                h[..end].to_string()
            }),
            port: self.port,
            tls: self.tls,
        }
    }

    /// Whether the server is known to run without a speculative-decoding draft model.
    pub fn without_draft(&self) -> bool {
        self.speculative_algorithm.as_deref() == Some("None")
    }
}

/// One parsed line. Borrows the line and the parser's scratch space.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// Index of the line kind in the pattern file.
    pub kind: usize,
    /// What the line is.
    pub class: Class,
    /// The prefix time, when the line has a prefix.
    pub time: Option<LogTime>,
    /// The prefix rank tags.
    pub ranks: Ranks,
    /// The GPU a foreign prefix names (`GPU=4`, see [`crate::parse::foreign`]): two schedulers
    /// of one rank on two GPUs are two writers ([`crate::pipeline::nodes`]).
    pub gpu: Option<u32>,
    /// Metric values read from the fields, scaled to base units.
    pub values: &'a [(MetricId, f64)],
    /// Metrics whose field was on the line but its value could not be read (not a number as
    /// SGLang prints it). The state withdraws their series rather than go on showing an older
    /// value as current, and derives nothing from them.
    pub bad_metrics: &'a [MetricId],
    /// The line as parsed (without `\r`, colour codes and Ray's note).
    pub line: &'a str,
    /// Field keys not in the pattern file, as one text of keys…
    pub unknown_text: &'a str,
    /// …and the byte span of each key in it.
    pub unknown: &'a [(usize, usize)],
    /// Field values that could not be read, and pieces of the fields that were not `key: value`.
    pub bad_values: u32,
    /// The SGLang engine that printed the line, where several write to one log: Ray's actor
    /// prefix as `Name pid=N ip=A` (see [`crate::parse::actor`]); `None` for a line without one.
    pub engine: Option<&'a str>,
    /// The request, for access lines.
    pub access: Option<Access<'a>>,
    /// The arguments, for a `server_args=` line.
    pub server_args: Option<Box<ServerArgs>>,
    /// Where a listener binds, for a `listen` line.
    pub listen: Option<Listen>,
    /// What a request record (`--log-requests`, class `request`) says; `None` for other lines
    /// and for a request record whose structure could not be read (counted in `bad_values`).
    pub request: Option<&'a RequestRecord>,
}

impl<'a> Record<'a> {
    /// The value of `metric` in this line, if it has one.
    pub fn get(&self, metric: MetricId) -> Option<f64> {
        self.values
            .iter()
            .find(|(m, _)| *m == metric)
            .map(|(_, v)| *v)
    }

    /// The field keys of this line that the pattern file does not know.
    pub fn unknown_keys(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.unknown.iter().map(|&(s, e)| &self.unknown_text[s..e])
    }
}

/// A [`Record`] that borrows nothing, for a line kept past the parser's next line (`backfill`
/// holds a line whose time the log clock cannot judge yet until the next one tells). Made only
/// for such lines: the hot path never copies a record.
#[derive(Debug, Clone)]
pub struct OwnedRecord {
    kind: usize,
    class: Class,
    time: Option<LogTime>,
    ranks: Ranks,
    gpu: Option<u32>,
    values: Vec<(MetricId, f64)>,
    bad_metrics: Vec<MetricId>,
    line: String,
    unknown_text: String,
    unknown: Vec<(usize, usize)>,
    bad_values: u32,
    engine: Option<String>,
    access: Option<(String, String, u16)>,
    server_args: Option<Box<ServerArgs>>,
    listen: Option<Listen>,
    request: Option<RequestRecord>,
}

impl OwnedRecord {
    /// A copy of `r`.
    pub fn of(r: &Record<'_>) -> OwnedRecord {
        OwnedRecord {
            kind: r.kind,
            class: r.class,
            time: r.time,
            ranks: r.ranks,
            gpu: r.gpu,
            values: r.values.to_vec(),
            bad_metrics: r.bad_metrics.to_vec(),
            line: r.line.to_string(),
            unknown_text: r.unknown_text.to_string(),
            unknown: r.unknown.to_vec(),
            bad_values: r.bad_values,
            engine: r.engine.map(str::to_string),
            access: r
                .access
                .map(|a| (a.method.to_string(), a.path.to_string(), a.status)),
            server_args: r.server_args.clone(),
            listen: r.listen,
            request: r.request.copied(),
        }
    }

    /// The record, borrowing this copy.
    pub fn record(&self) -> Record<'_> {
        Record {
            kind: self.kind,
            class: self.class,
            time: self.time,
            ranks: self.ranks,
            gpu: self.gpu,
            values: &self.values,
            bad_metrics: &self.bad_metrics,
            line: &self.line,
            unknown_text: &self.unknown_text,
            unknown: &self.unknown,
            bad_values: self.bad_values,
            engine: self.engine.as_deref(),
            access: self.access.as_ref().map(|(m, p, s)| Access {
                method: m,
                path: p,
                status: *s,
            }),
            server_args: self.server_args.clone(),
            listen: self.listen,
            request: self.request.as_ref(),
        }
    }
}

/// A set of metric ids as bits, so that "does this line carry metric X" is a bit test instead of
/// a search of its values. Ids from [`MetricSet::COVERED`] on (a pattern file with that many
/// metrics) are never stored: asking about one answers `None`, and the caller searches.
#[derive(Debug, Clone, Copy, Default)]
pub struct MetricSet([u64; MetricSet::COVERED / 64]);

impl MetricSet {
    /// Metric ids the set can hold.
    pub const COVERED: usize = 256;

    /// Whether `id` is in the set; `None` for an id past [`MetricSet::COVERED`].
    pub fn contains(&self, id: MetricId) -> Option<bool> {
        let i = usize::from(id);
        (i < Self::COVERED).then(|| self.0[i / 64] & 1 << (i % 64) != 0)
    }

    /// Adds (`on`) or removes `id`; an id past [`MetricSet::COVERED`] is not stored.
    pub fn set(&mut self, id: MetricId, on: bool) {
        let i = usize::from(id);
        if let Some(w) = self.0.get_mut(i / 64) {
            let bit = 1 << (i % 64);
            *w = if on { *w | bit } else { *w & !bit };
        }
    }

    /// Empties the set.
    pub fn clear(&mut self) {
        self.0 = [0; Self::COVERED / 64];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_set_holds_the_ids_it_covers_and_answers_none_past_them() {
        let mut s = MetricSet::default();
        for id in [0, 63, 64, 255] {
            assert_eq!(s.contains(id), Some(false));
            s.set(id, true);
            assert_eq!(s.contains(id), Some(true));
        }
        assert_eq!(s.contains(1), Some(false));
        s.set(64, false);
        assert_eq!(s.contains(64), Some(false));
        assert_eq!(s.contains(63), Some(true));
        s.set(256, true);
        assert_eq!(s.contains(256), None);
        s.clear();
        assert_eq!(s.contains(255), Some(false));
    }
}
