//! The GPU sampler's families (its own `collected` set, after the exporter's), in exposition order: NVML's health, then what it reads.

use super::{join, FamilyDef, Kind, RANK_PAIRS};

/// A GPU: its NVML index and UUID.
const GPU: &[&str] = &["gpu", "uuid"];

/// A rank's GPU: `server`, the source's Kubernetes labels, `engine_type`, the rank labels
/// ([`RANK_PAIRS`]: the GPU series join the rank series on them), then [`GPU`].
const RANK_GPU: &[&str] = &join::<13>(
    &join::<11>(
        &["server", "namespace?", "pod?", "container?", "engine_type"],
        RANK_PAIRS,
    ),
    GPU,
);

/// `sglang_log_exporter_nvml_up`.
pub const NVML_UP: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_nvml_up",
    help: "1 when the last GPU sample read NVML, 0 when NVML could not be loaded or a system call failed.",
    kind: Kind::Gauge,
    unit: "",
    labels: &[],
    reads: "the GPU sampler (NVML): whether the last sample read NVML",
};

/// `sglang_log_exporter_nvml_errors_total`.
pub const NVML_ERRORS: FamilyDef = FamilyDef {
    name: "sglang_log_exporter_nvml_errors_total",
    help: "Failed NVML calls, by GPU index (empty for loading and system calls) and call.",
    kind: Kind::Counter,
    unit: "",
    labels: &["gpu", "call"],
    reads: "the GPU sampler (NVML): failed calls",
};

/// `sglang_gpu_memory_total_bytes`.
pub const MEMORY_TOTAL: FamilyDef = FamilyDef {
    name: "sglang_gpu_memory_total_bytes",
    help: "Installed GPU memory in bytes (NVML memory info v2).",
    kind: Kind::Gauge,
    unit: "bytes",
    labels: GPU,
    reads: "the GPU sampler (NVML): memory info v2",
};

/// `sglang_gpu_memory_used_bytes`.
pub const MEMORY_USED: FamilyDef = FamilyDef {
    name: "sglang_gpu_memory_used_bytes",
    help: "Allocated GPU memory in bytes (NVML memory info v2; excludes reserved memory).",
    kind: Kind::Gauge,
    unit: "bytes",
    labels: GPU,
    reads: "the GPU sampler (NVML): memory info v2",
};

/// `sglang_gpu_memory_free_bytes`.
pub const MEMORY_FREE: FamilyDef = FamilyDef {
    name: "sglang_gpu_memory_free_bytes",
    help: "Unallocated GPU memory in bytes (NVML memory info v2).",
    kind: Kind::Gauge,
    unit: "bytes",
    labels: GPU,
    reads: "the GPU sampler (NVML): memory info v2",
};

/// `sglang_gpu_memory_reserved_bytes`.
pub const MEMORY_RESERVED: FamilyDef = FamilyDef {
    name: "sglang_gpu_memory_reserved_bytes",
    help: "GPU memory reserved by the driver in bytes (NVML memory info v2).",
    kind: Kind::Gauge,
    unit: "bytes",
    labels: GPU,
    reads: "the GPU sampler (NVML): memory info v2",
};

/// `sglang_gpu_info`.
pub const INFO: FamilyDef = FamilyDef {
    name: "sglang_gpu_info",
    help: "Always 1; labels name each GPU NVML reports: index, UUID, product name, PCI bus id and driver version.",
    kind: Kind::Gauge,
    unit: "",
    labels: &join::<5>(GPU, &["name", "pci_bus_id", "driver_version"]),
    reads: "the GPU sampler (NVML): each GPU's identity",
};

/// `sglang_gpu_process_memory_used_bytes`.
pub const PROCESS_MEMORY_USED: FamilyDef = FamilyDef {
    name: "sglang_gpu_process_memory_used_bytes",
    help: "GPU memory in bytes used by each SGLang process with a compute context on the GPU.",
    kind: Kind::Gauge,
    unit: "bytes",
    labels: &join::<3>(GPU, &["pid"]),
    reads: "the GPU sampler (NVML): compute processes, matched to SGLang's by /proc",
};

/// `sglang_rank_gpu_info`.
pub const RANK_INFO: FamilyDef = FamilyDef {
    name: "sglang_rank_gpu_info",
    help: "Always 1; maps each SGLang server and rank to its GPU; method says how the mapping was found (explicit, process, server_args).",
    kind: Kind::Gauge,
    unit: "",
    labels: &join::<14>(RANK_GPU, &["method"]),
    reads: "the GPU sampler (NVML), /proc and server_args: which GPU serves each rank",
};

/// `sglang_rank_gpu_memory_used_bytes`.
pub const RANK_MEMORY_USED: FamilyDef = FamilyDef {
    name: "sglang_rank_gpu_memory_used_bytes",
    help: "Allocated memory in bytes of the GPU that serves the SGLang rank (the whole GPU).",
    kind: Kind::Gauge,
    unit: "bytes",
    labels: RANK_GPU,
    reads: "the GPU sampler (NVML): the memory of the GPU serving the rank",
};

/// `sglang_rank_gpu_memory_total_bytes`.
pub const RANK_MEMORY_TOTAL: FamilyDef = FamilyDef {
    name: "sglang_rank_gpu_memory_total_bytes",
    help: "Installed memory in bytes of the GPU that serves the SGLang rank.",
    kind: Kind::Gauge,
    unit: "bytes",
    labels: RANK_GPU,
    reads: "the GPU sampler (NVML): the memory of the GPU serving the rank",
};

/// Every one, in exposition order.
pub const ALL: [&FamilyDef; 11] = [
    &NVML_UP,
    &NVML_ERRORS,
    &MEMORY_TOTAL,
    &MEMORY_USED,
    &MEMORY_FREE,
    &MEMORY_RESERVED,
    &INFO,
    &PROCESS_MEMORY_USED,
    &RANK_INFO,
    &RANK_MEMORY_USED,
    &RANK_MEMORY_TOTAL,
];
