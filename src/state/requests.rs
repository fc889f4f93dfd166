//! SGLang's request metrics, rebuilt from `--log-requests` Finish records: what upstream's
//! tokenizer collector (`TokenizerMetricsCollector` in
//! `sglang/srt/observability/metrics_collector.py`, v0.5.23) records per finished request, and the
//! scheduler's queue-time histogram.
//!
//! Per server: counters by `is_streaming` / `cache_source` and histogram bucket counts with
//! upstream's default boundaries. Nothing is kept per request, so memory is fixed: at most three
//! `is_streaming` values (`false`, `true`, and unknown for releases that do not print `stream`)
//! times a few fixed bucket arrays. The rules of which records count and what each histogram
//! observes are those of `docs/request-log-formats.md` §7.

use crate::family::{Family, Histogram, Labels};
use crate::parse::request::{FinishKind, MetaInfo, RequestRecord};

/// `sglang:time_to_first_token_seconds` boundaries (seconds).
pub const TTFT_BUCKETS: [f64; 18] = [
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
    400.0,
];

/// `sglang:e2e_request_latency_seconds` boundaries (seconds).
pub const E2E_BUCKETS: [f64; 22] = [
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0, 200.0,
    400.0, 600.0, 1200.0, 1800.0, 2400.0,
];

/// `sglang:request_time_per_output_token_seconds` boundaries (seconds).
pub const TPOT_BUCKETS: [f64; 23] = [
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
    0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
];

/// `sglang:queue_time_seconds` boundaries (seconds).
pub const QUEUE_BUCKETS: [f64; 40] = [
    0.000, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 15.0,
    20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 200.0, 300.0, 400.0, 500.0, 600.0,
    700.0, 800.0, 900.0, 1000.0, 1200.0, 1400.0, 1600.0, 1800.0, 2000.0, 2500.0, 3000.0,
];

/// Boundaries of the token-count histograms (tokens).
pub const TOKEN_BUCKETS: [f64; 35] = [
    100.0, 300.0, 500.0, 700.0, 1000.0, 1500.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0, 7000.0,
    8000.0, 9000.0, 10000.0, 12500.0, 15000.0, 17500.0, 20000.0, 22500.0, 25000.0, 27500.0,
    30000.0, 35000.0, 40000.0, 60000.0, 80000.0, 100000.0, 200000.0, 300000.0, 400000.0, 600000.0,
    800000.0, 1000000.0, 1100000.0,
];

/// `SGLANG_FORCE_STREAM_INTERVAL`'s default: a non-streaming request sends an intermediate
/// output every this many tokens, so its first output (where upstream observes TTFT) came
/// before an abort only if it had at least this many tokens.
const FORCE_STREAM_INTERVAL: f64 = 50.0;

/// A histogram's running state: per-bucket (not cumulative) counts, sum and count.
#[derive(Debug, Clone, PartialEq)]
pub struct Hist {
    bounds: &'static [f64],
    /// Observations in each bucket `(bounds[i-1], bounds[i]]`; those above the last bound are
    /// only in `count`.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Hist {
    fn new(bounds: &'static [f64]) -> Hist {
        Hist {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    /// Counts `v` into the first bucket whose bound is `>= v` (Prometheus' `le`); a value that
    /// is not finite is not observed.
    fn observe(&mut self, v: f64) {
        if !v.is_finite() {
            return;
        }
        let i = self.bounds.partition_point(|&b| b < v);
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
        }
        self.sum += v;
        self.count += 1;
    }

    /// The exposition form: cumulative counts.
    pub fn snapshot(&self) -> Histogram {
        let mut acc = 0;
        Histogram {
            bounds: self.bounds,
            cumulative: self
                .counts
                .iter()
                .map(|c| {
                    acc += c;
                    acc
                })
                .collect(),
            sum: self.sum,
            count: self.count,
        }
    }
}

/// Observes into the histogram in `slot`, created with `bounds` on first use (upstream creates
/// a labelled series at its first observation).
fn observe(slot: &mut Option<Hist>, bounds: &'static [f64], v: f64) {
    if v.is_finite() {
        slot.get_or_insert_with(|| Hist::new(bounds)).observe(v);
    }
}

/// `is_streaming` values: index into the per-stream arrays, and the label value (`None`: the
/// record does not tell, the label is left out).
const STREAMING: [Option<&str>; 3] = [Some("false"), Some("true"), None];

/// `cache_source` values, in `cached` order.
const CACHE_SOURCES: [&str; 4] = ["device", "host", "storage", "total"];

/// One server's request metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestStats {
    /// Counted requests by [`STREAMING`] index.
    pub requests: [u64; 3],
    /// Prompt tokens by [`STREAMING`] index.
    pub prompt_tokens: [f64; 3],
    /// Completion tokens by [`STREAMING`] index.
    pub generation_tokens: [f64; 3],
    /// Cached prompt tokens by [`CACHE_SOURCES`] index.
    pub cached_tokens: [f64; 4],
    /// Structured-output requests.
    pub so_requests: u64,
    /// Speculative verify passes, once a record carried `spec_verify_ct`.
    pub spec_verify_calls: Option<f64>,
    e2e: [Option<Hist>; 3],
    ttft: [Option<Hist>; 3],
    tpot: [Option<Hist>; 3],
    queue: Option<Hist>,
    prompt_hist: Option<Hist>,
    uncached_hist: Option<Hist>,
    generation_hist: Option<Hist>,
}

impl RequestStats {
    /// Applies one request record if upstream counts it ([`RequestRecord::counts`]); returns
    /// whether it did. On a PD prefill server (`prefill`) TTFT and time per output token are
    /// not observed, as upstream does not.
    pub fn observe(&mut self, r: &RequestRecord, prefill: bool) -> bool {
        let (true, Some(m)) = (r.counts(), r.meta.as_ref()) else {
            return false;
        };
        let Some(prompt) = m.prompt_tokens else {
            return false;
        };
        let s = match r.stream {
            Some(false) => 0,
            Some(true) => 1,
            None => 2,
        };
        let completion = m.completion_tokens.unwrap_or(0.0);
        let cached = m.cached_tokens.unwrap_or(0.0);
        self.requests[s] += 1;
        self.prompt_tokens[s] += prompt;
        self.generation_tokens[s] += completion;
        if cached > 0.0 {
            match m.cached_details {
                Some(d) => {
                    for (c, v) in self.cached_tokens.iter_mut().zip(d) {
                        if v > 0.0 {
                            *c += v;
                        }
                    }
                }
                None => self.cached_tokens[3] += cached,
            }
        }
        self.so_requests += u64::from(r.structured_output);
        if let Some(v) = m.spec_verify_ct.filter(|v| *v > 0.0) {
            *self.spec_verify_calls.get_or_insert(0.0) += v;
        }
        if let Some(e2e) = m.e2e_latency {
            observe(&mut self.e2e[s], &E2E_BUCKETS, e2e);
        }
        if !prefill {
            self.observe_latencies(m, r.stream, s);
        }
        if let Some(q) = queue_time(m) {
            observe(&mut self.queue, &QUEUE_BUCKETS, q);
        }
        observe(&mut self.prompt_hist, &TOKEN_BUCKETS, prompt);
        observe(&mut self.uncached_hist, &TOKEN_BUCKETS, prompt - cached);
        observe(&mut self.generation_hist, &TOKEN_BUCKETS, completion);
        true
    }

    /// TTFT and time per output token of a counted record (§7 of the doc).
    fn observe_latencies(&mut self, m: &MetaInfo, stream: Option<bool>, s: usize) {
        let completion = m.completion_tokens.unwrap_or(0.0);
        let l = latencies(m);
        // Upstream observes TTFT at the request's first output, unless that output is the
        // abort: an abort counts only when an output came before it.
        let earlier_output = if stream == Some(true) {
            completion > 0.0
        } else {
            completion >= FORCE_STREAM_INTERVAL
        };
        if let Some(ttft) = l.ttft {
            if m.finish != FinishKind::Abort || earlier_output {
                observe(&mut self.ttft[s], &TTFT_BUCKETS, ttft);
            }
        }
        if matches!(m.finish, FinishKind::Stop | FinishKind::Length) && completion > 1.0 {
            if let Some(tpot) = l.tpot {
                observe(&mut self.tpot[s], &TPOT_BUCKETS, tpot);
            }
        }
    }

    /// The request series into `fams` (laid out as [`request_catalog`]), each labelled
    /// `base` plus its own `is_streaming` / `cache_source`.
    pub fn families_into(&self, base: &Labels, fams: &mut [Family]) {
        let with = |k: &'static str, v: Option<&str>| {
            let mut l = base.clone();
            if let Some(v) = v {
                l.push((k, v.to_string()));
            }
            l
        };
        for (s, stream) in STREAMING.iter().enumerate() {
            let l = with("is_streaming", *stream);
            if self.requests[s] > 0 {
                fams[NUM_REQUESTS].push(l.clone(), self.requests[s] as f64);
                fams[PROMPT_TOKENS].push(l.clone(), self.prompt_tokens[s]);
                fams[GENERATION_TOKENS].push(l.clone(), self.generation_tokens[s]);
            }
            for (i, h) in [
                (E2E, &self.e2e[s]),
                (TTFT, &self.ttft[s]),
                (TPOT, &self.tpot[s]),
            ] {
                if let Some(h) = h {
                    fams[i].push_histogram(l.clone(), h.snapshot());
                }
            }
        }
        for (v, src) in self.cached_tokens.iter().zip(CACHE_SOURCES) {
            if *v > 0.0 {
                fams[CACHED_TOKENS].push(with("cache_source", Some(src)), *v);
            }
        }
        if self.so_requests > 0 {
            fams[SO_REQUESTS].push(base.clone(), self.so_requests as f64);
        }
        if let Some(v) = self.spec_verify_calls {
            fams[SPEC_VERIFY].push(base.clone(), v);
        }
        for (i, h) in [
            (QUEUE, &self.queue),
            (PROMPT_HIST, &self.prompt_hist),
            (UNCACHED_HIST, &self.uncached_hist),
            (GENERATION_HIST, &self.generation_hist),
        ] {
            if let Some(h) = h {
                fams[i].push_histogram(base.clone(), h.snapshot());
            }
        }
    }
}

/// TTFT and (where the record gives it directly) time per output token.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Latencies {
    ttft: Option<f64>,
    tpot: Option<f64>,
}

/// TTFT from `first_token_latency` (v0.5.21+), else derived as the releases before measured
/// it (§7): v0.5.12-v0.5.20 `e2e_latency - (completion_tokens - 1) / decode_throughput`
/// (`num_retractions` present) and time per output token `1 / decode_throughput`; v0.5.10-v0.5.11
/// `e2e_latency - completion_tokens / decode_throughput`; v0.5.5-v0.5.9 `prefill_finished_ts -
/// request_received_ts`. With `first_token_latency`, time per output token is
/// `(e2e_latency - first_token_latency) / (completion_tokens - 1)`. A derived TTFT below 0 (clock
/// steps) is dropped.
fn latencies(m: &MetaInfo) -> Latencies {
    let completion = m.completion_tokens.unwrap_or(0.0);
    if let Some(ttft) = m.first_token_latency {
        let tpot = m
            .e2e_latency
            .filter(|e2e| completion > 1.0 && e2e - ttft > 0.0)
            .map(|e2e| (e2e - ttft) / (completion - 1.0));
        return Latencies {
            ttft: Some(ttft),
            tpot,
        };
    }
    let mut l = Latencies::default();
    match (m.e2e_latency, m.decode_throughput, m.forward_entry_time) {
        (Some(e2e), Some(dt), Some(_)) if dt > 0.0 && completion > 1.0 => {
            if m.num_retractions_key {
                l.ttft = Some(e2e - (completion - 1.0) / dt);
                l.tpot = Some(1.0 / dt);
            } else {
                l.ttft = Some(e2e - completion / dt);
            }
        }
        (_, _, None) => {
            if let (Some(done), Some(received)) = (m.prefill_finished_ts, m.request_received_ts) {
                l.ttft = Some(done - received);
            }
        }
        _ => {}
    }
    l.ttft = l.ttft.filter(|t| *t >= 0.0);
    l
}

/// The queue time upstream's scheduler observed: `queue_time` when the request reached a
/// forward pass (`forward_entry_time`, v0.5.10+); before v0.5.10 (no `reasoning_tokens` key)
/// `queue_time` when it is not negative (a request that never ran has a negative one).
fn queue_time(m: &MetaInfo) -> Option<f64> {
    let q = m.queue_time?;
    if m.forward_entry_time.is_some() || (!m.reasoning_tokens_key && q >= 0.0) {
        Some(q)
    } else {
        None
    }
}

const NUM_REQUESTS: usize = 0;
const PROMPT_TOKENS: usize = 1;
const GENERATION_TOKENS: usize = 2;
const CACHED_TOKENS: usize = 3;
const SO_REQUESTS: usize = 4;
const SPEC_VERIFY: usize = 5;
const E2E: usize = 6;
const TTFT: usize = 7;
const TPOT: usize = 8;
const QUEUE: usize = 9;
const PROMPT_HIST: usize = 10;
const UNCACHED_HIST: usize = 11;
const GENERATION_HIST: usize = 12;

/// The request families, empty, in exposition order (declared in [`crate::catalog::request`],
/// laid out as the indices above).
pub fn request_catalog() -> Vec<Family> {
    crate::catalog::request::ALL
        .iter()
        .map(|d| Family::of(d))
        .collect()
}

#[cfg(test)]
mod tests;
