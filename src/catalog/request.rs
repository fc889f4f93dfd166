//! The request families: SGLang's tokenizer metrics rebuilt from `--log-requests` Finish records, in exposition order (upstream's names, types and units), each labelled [`SERVER_LABELS`] plus its own.

use super::{join, FamilyDef, Kind, SERVER_LABELS};

/// [`SERVER_LABELS`] and `is_streaming` (where the record tells).
const BY_STREAMING: &[&str] = &join::<8>(SERVER_LABELS, &["is_streaming?"]);

/// `sglang:num_requests_total`.
pub const NUM_REQUESTS: FamilyDef = FamilyDef {
    name: "sglang:num_requests_total",
    help: "Finished requests, from --log-requests Finish records (health checks and requests aborted in the waiting queue excluded, as upstream).",
    kind: Kind::Counter,
    unit: "requests",
    labels: BY_STREAMING,
    reads: "--log-requests Finish records",
};

/// `sglang:prompt_tokens_total`.
pub const PROMPT_TOKENS: FamilyDef = FamilyDef {
    name: "sglang:prompt_tokens_total",
    help: "Prompt tokens of finished requests (meta_info.prompt_tokens).",
    kind: Kind::Counter,
    unit: "tokens",
    labels: BY_STREAMING,
    reads: "--log-requests Finish records: meta_info.prompt_tokens",
};

/// `sglang:generation_tokens_total`.
pub const GENERATION_TOKENS: FamilyDef = FamilyDef {
    name: "sglang:generation_tokens_total",
    help: "Generated tokens of finished requests (meta_info.completion_tokens).",
    kind: Kind::Counter,
    unit: "tokens",
    labels: BY_STREAMING,
    reads: "--log-requests Finish records: meta_info.completion_tokens",
};

/// `sglang:cached_tokens_total`.
pub const CACHED_TOKENS: FamilyDef = FamilyDef {
    name: "sglang:cached_tokens_total",
    help: "Prompt tokens of finished requests served from the prefix cache, by cache source (meta_info.cached_tokens_details, else cached_tokens as total).",
    kind: Kind::Counter,
    unit: "tokens",
    labels: &join::<8>(SERVER_LABELS, &["cache_source"]),
    reads: "--log-requests Finish records: meta_info.cached_tokens(_details)",
};

/// `sglang:num_so_requests_total`.
pub const SO_REQUESTS: FamilyDef = FamilyDef {
    name: "sglang:num_so_requests_total",
    help: "Finished structured-output requests (sampling_params with json_schema, regex, ebnf or structural_tag; needs --log-requests-level 1 or more).",
    kind: Kind::Counter,
    unit: "requests",
    labels: SERVER_LABELS,
    reads: "--log-requests Received/Finish records: structured-output sampling_params",
};

/// `sglang:spec_verify_calls_total`.
pub const SPEC_VERIFY: FamilyDef = FamilyDef {
    name: "sglang:spec_verify_calls_total",
    help: "Speculative-decoding verify passes of finished requests (meta_info.spec_verify_ct).",
    kind: Kind::Counter,
    unit: "",
    labels: SERVER_LABELS,
    reads: "--log-requests Finish records: meta_info.spec_verify_ct",
};

/// `sglang:e2e_request_latency_seconds`.
pub const E2E_LATENCY: FamilyDef = FamilyDef {
    name: "sglang:e2e_request_latency_seconds",
    help: "End-to-end latency of finished requests in seconds (meta_info.e2e_latency).",
    kind: Kind::Histogram,
    unit: "seconds",
    labels: BY_STREAMING,
    reads: "--log-requests Finish records: meta_info.e2e_latency",
};

/// `sglang:time_to_first_token_seconds`.
pub const TTFT: FamilyDef = FamilyDef {
    name: "sglang:time_to_first_token_seconds",
    help: "Time to first token of finished requests in seconds (meta_info.first_token_latency, or derived for v0.5.5-v0.5.20 records with --enable-metrics).",
    kind: Kind::Histogram,
    unit: "seconds",
    labels: BY_STREAMING,
    reads: "--log-requests Finish records: meta_info.first_token_latency",
};

/// `sglang:request_time_per_output_token_seconds`.
pub const TPOT: FamilyDef = FamilyDef {
    name: "sglang:request_time_per_output_token_seconds",
    help: "Time per output token after the first of finished requests in seconds (stop and length finishes).",
    kind: Kind::Histogram,
    unit: "seconds",
    labels: BY_STREAMING,
    reads: "--log-requests Finish records: latency after the first token over the output tokens",
};

/// `sglang:queue_time_seconds`.
pub const QUEUE_TIME: FamilyDef = FamilyDef {
    name: "sglang:queue_time_seconds",
    help: "Time finished requests waited before their first forward pass in seconds (meta_info.queue_time; all scheduler ranks together).",
    kind: Kind::Histogram,
    unit: "seconds",
    labels: SERVER_LABELS,
    reads: "--log-requests Finish records: meta_info.queue_time",
};

/// `sglang:prompt_tokens_histogram`.
pub const PROMPT_TOKENS_HISTOGRAM: FamilyDef = FamilyDef {
    name: "sglang:prompt_tokens_histogram",
    help: "Prompt tokens per finished request.",
    kind: Kind::Histogram,
    unit: "tokens",
    labels: SERVER_LABELS,
    reads: "--log-requests Finish records: meta_info.prompt_tokens",
};

/// `sglang:uncached_prompt_tokens_histogram`.
pub const UNCACHED_PROMPT_TOKENS_HISTOGRAM: FamilyDef = FamilyDef {
    name: "sglang:uncached_prompt_tokens_histogram",
    help: "Prompt tokens per finished request not served from the prefix cache.",
    kind: Kind::Histogram,
    unit: "tokens",
    labels: SERVER_LABELS,
    reads: "--log-requests Finish records: prompt less cached tokens",
};

/// `sglang:generation_tokens_histogram`.
pub const GENERATION_TOKENS_HISTOGRAM: FamilyDef = FamilyDef {
    name: "sglang:generation_tokens_histogram",
    help: "Generated tokens per finished request.",
    kind: Kind::Histogram,
    unit: "tokens",
    labels: SERVER_LABELS,
    reads: "--log-requests Finish records: meta_info.completion_tokens",
};

/// Every one, in exposition order.
pub const ALL: [&FamilyDef; 13] = [
    &NUM_REQUESTS,
    &PROMPT_TOKENS,
    &GENERATION_TOKENS,
    &CACHED_TOKENS,
    &SO_REQUESTS,
    &SPEC_VERIFY,
    &E2E_LATENCY,
    &TTFT,
    &TPOT,
    &QUEUE_TIME,
    &PROMPT_TOKENS_HISTOGRAM,
    &UNCACHED_PROMPT_TOKENS_HISTOGRAM,
    &GENERATION_TOKENS_HISTOGRAM,
];
