//! The per-server families, in exposition order after the request families.

use super::{join, FamilyDef, Kind, ORIGIN_LABELS, SERVER_LABELS};

/// `sglang_server_info`.
pub const INFO: FamilyDef = FamilyDef {
    name: "sglang_server_info",
    help: "Always 1; labels name each SGLang server the exporter reads, its model, engine type, sizes and the URL its HTTP API listens on (url, to join a router's per-worker series).",
    kind: Kind::Gauge,
    unit: "",
    labels: &join::<11>(SERVER_LABELS, &["tp_size", "dp_size", "pp_size", "url?"]),
    reads: "the server_args line (model, sizes, host and port) and the engine type of each server; the URL --sglang.url polls",
};

/// `sglang_server_source_timestamp_seconds`.
pub const VALUES_FROM: FamilyDef = FamilyDef {
    name: "sglang_server_source_timestamp_seconds",
    help: "Unix time since which the server's values come from `from`: log (its log lines only), api (its HTTP API only) or both (the API's live values over the log's).",
    kind: Kind::Gauge,
    unit: "seconds",
    labels: &join::<8>(SERVER_LABELS, &["from"]),
    reads: "which of the log and the HTTP API gave the server's values, and when that last changed",
};

/// `sglang_access_log_requests_total` (until this release `sglang_http_requests_total`, which
/// met SGLang's `sglang:http_requests_total` once colons are underscores).
pub const HTTP_REQUESTS: FamilyDef = FamilyDef {
    name: "sglang_access_log_requests_total",
    help: "HTTP requests from the server's uvicorn access lines, by method, normalised path and status.",
    kind: Kind::Counter,
    unit: "requests",
    labels: &join::<10>(SERVER_LABELS, &["method", "path", "status"]),
    reads: "uvicorn access lines",
};

/// `sglang:http_requests_total`.
pub const UPSTREAM_HTTP_REQUESTS: FamilyDef = FamilyDef {
    name: "sglang:http_requests_total",
    help: "HTTP requests by endpoint and method, from the uvicorn access lines (SGLang's name; the endpoint is the normalised path).",
    kind: Kind::Counter,
    unit: "requests",
    labels: &join::<7>(ORIGIN_LABELS, &["endpoint", "method"]),
    reads: "uvicorn access lines",
};

/// `sglang:http_responses_total`.
pub const UPSTREAM_HTTP_RESPONSES: FamilyDef = FamilyDef {
    name: "sglang:http_responses_total",
    help: "HTTP responses by endpoint, method and status code, from the uvicorn access lines (SGLang's name).",
    kind: Kind::Counter,
    unit: "requests",
    labels: &join::<8>(ORIGIN_LABELS, &["endpoint", "method", "status_code"]),
    reads: "uvicorn access lines",
};

/// Every one, in exposition order.
pub const ALL: [&FamilyDef; 5] = [
    &INFO,
    &VALUES_FROM,
    &HTTP_REQUESTS,
    &UPSTREAM_HTTP_REQUESTS,
    &UPSTREAM_HTTP_RESPONSES,
];
