//! A router's per-worker families (`--router.url`), in exposition order after the per-server
//! families: what SGLang's router (sgl-model-gateway: `smg` 1.x, `sglang-router` 0.3.x) says of
//! each worker it sends to, joined to the server that listens at the worker's URL.
//!
//! Each reads one per-worker series of the router's own `/metrics` (its Prometheus listener,
//! `--prometheus-port`, 29000 by default), all labelled `worker` with the worker's URL as the
//! router was given it (`http://HOST:PORT`; `http://HOST:PORT@RANK` under `--dp-aware`). The
//! router sets them in `model_gateway/src/observability/metrics.rs` (`Metrics::set_worker_*`).
//!
//! Labels: `server`: the server whose URL (`sglang_server_info`'s `url`) is the worker's, its
//! host and port compared (the scheme and a trailing `/` aside, `localhost` as `127.0.0.1`);
//! empty where no log or API this exporter reads is that worker ("not covered"). `router`: the
//! router's name (`NAME=` of `--router.url`, else its `HOST:PORT`). `worker`: the router's label,
//! as it prints it. `dp_rank`: the rank of a `--dp-aware` worker (its `@RANK`), where it has one.

use super::{FamilyDef, Kind};

/// The labels of a router's worker series.
pub const WORKER_LABELS: &[&str] = &["server", "router", "worker", "dp_rank?"];

/// `sglang_router_worker_requests_active`.
pub const WORKER_REQUESTS_ACTIVE: FamilyDef = FamilyDef {
    name: "sglang_router_worker_requests_active",
    help: "Requests the router has sent to the worker and not yet seen finish (the router's smg_worker_requests_active).",
    kind: Kind::Gauge,
    unit: "requests",
    labels: WORKER_LABELS,
    reads: "the router's smg_worker_requests_active (set in model_gateway/src/worker/worker.rs from the worker's load)",
};

/// `sglang_router_worker_healthy`.
pub const WORKER_HEALTHY: FamilyDef = FamilyDef {
    name: "sglang_router_worker_healthy",
    help: "1 while the router deems the worker healthy (ready to route to), 0 while not (the router's smg_worker_health).",
    kind: Kind::Gauge,
    unit: "",
    labels: WORKER_LABELS,
    reads: "the router's smg_worker_health (set by its health checker, model_gateway/src/worker/worker.rs and builder.rs)",
};

/// `sglang_router_worker_circuit_state`.
pub const WORKER_CIRCUIT_STATE: FamilyDef = FamilyDef {
    name: "sglang_router_worker_circuit_state",
    help: "The router's circuit breaker for the worker: 0 closed (requests flow), 1 open (none sent), 2 half-open (trial requests) (the router's smg_worker_cb_state).",
    kind: Kind::Gauge,
    unit: "",
    labels: WORKER_LABELS,
    reads: "the router's smg_worker_cb_state (model_gateway/src/worker/circuit_breaker.rs: 0 closed, 1 open, 2 half-open)",
};

/// Every one, in exposition order.
pub const ALL: [&FamilyDef; 3] = [
    &WORKER_REQUESTS_ACTIVE,
    &WORKER_HEALTHY,
    &WORKER_CIRCUIT_STATE,
];
