//! `process_*`: the exporter's own process, named as the Prometheus client libraries' process collector names them; read from `/proc/self` at each scrape and shown before every other family of `/metrics` (not pushed, not backfilled).

use super::{FamilyDef, Kind};

/// `process_cpu_seconds_total`.
pub const CPU_SECONDS: FamilyDef = FamilyDef {
    name: "process_cpu_seconds_total",
    help: "Total user and system CPU time spent in seconds.",
    kind: Kind::Counter,
    unit: "seconds",
    labels: &[],
    reads: "/proc/self/stat",
};

/// `process_resident_memory_bytes`.
pub const RESIDENT_MEMORY: FamilyDef = FamilyDef {
    name: "process_resident_memory_bytes",
    help: "Resident memory size in bytes.",
    kind: Kind::Gauge,
    unit: "bytes",
    labels: &[],
    reads: "/proc/self/stat",
};

/// `process_virtual_memory_bytes`.
pub const VIRTUAL_MEMORY: FamilyDef = FamilyDef {
    name: "process_virtual_memory_bytes",
    help: "Virtual memory size in bytes.",
    kind: Kind::Gauge,
    unit: "bytes",
    labels: &[],
    reads: "/proc/self/stat",
};

/// `process_start_time_seconds`.
pub const START_TIME: FamilyDef = FamilyDef {
    name: "process_start_time_seconds",
    help: "Start time of the process since unix epoch in seconds.",
    kind: Kind::Gauge,
    unit: "seconds",
    labels: &[],
    reads: "/proc/self/stat and /proc/stat",
};

/// `process_threads`.
pub const THREADS: FamilyDef = FamilyDef {
    name: "process_threads",
    help: "Number of OS threads in the process.",
    kind: Kind::Gauge,
    unit: "threads",
    labels: &[],
    reads: "/proc/self/stat",
};

/// `process_open_fds`.
pub const OPEN_FDS: FamilyDef = FamilyDef {
    name: "process_open_fds",
    help: "Number of open file descriptors.",
    kind: Kind::Gauge,
    unit: "descriptors",
    labels: &[],
    reads: "/proc/self/fd",
};

/// `process_max_fds`.
pub const MAX_FDS: FamilyDef = FamilyDef {
    name: "process_max_fds",
    help: "Maximum number of open file descriptors.",
    kind: Kind::Gauge,
    unit: "descriptors",
    labels: &[],
    reads: "/proc/self/limits",
};

/// Every one, in exposition order.
pub const ALL: [&FamilyDef; 7] = [
    &CPU_SECONDS,
    &RESIDENT_MEMORY,
    &VIRTUAL_MEMORY,
    &START_TIME,
    &THREADS,
    &OPEN_FDS,
    &MAX_FDS,
];
