//! One reading of every GPU through NVML (`nvml-wrapper`), with per-GPU errors kept apart so
//! that one failing GPU does not hide the others.

use std::path::Path;

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

/// Memory of one GPU in bytes, from `nvmlDeviceGetMemoryInfo_v2` (the v1 call counts reserved
/// memory as used on recent drivers; nvml-wrapper 0.10+ calls v2, see its issue 57).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memory {
    /// Installed framebuffer memory.
    pub total: u64,
    /// Memory the driver reserves for itself.
    pub reserved: u64,
    /// Unallocated memory.
    pub free: u64,
    /// Allocated memory.
    pub used: u64,
}

/// One GPU as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    /// NVML index (PCI bus order; `CUDA_DEVICE_ORDER=PCI_BUS_ID` numbering).
    pub index: u32,
    /// `GPU-…` UUID.
    pub uuid: String,
    /// Product name; empty when the call failed.
    pub name: String,
    /// PCI bus id (`00000000:18:00.0`); empty when the call failed.
    pub pci_bus_id: String,
    /// Memory; `None` when the call failed.
    pub memory: Option<Memory>,
    /// Compute processes: (PID, used bytes when NVML knows them); `None` when the call failed.
    pub processes: Option<Vec<(u32, Option<u64>)>>,
}

/// Everything one sample read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reading {
    /// Driver version string.
    pub driver_version: String,
    /// GPUs that could be identified (their UUID read).
    pub gpus: Vec<Gpu>,
    /// Failed per-GPU calls: (GPU index, call name, error text).
    pub errors: Vec<(u32, &'static str, String)>,
}

/// Loads and initialises NVML from `library`, or the system's `libnvidia-ml.so.1`.
///
/// # Errors
/// The loader's or `nvmlInit_v2`'s error: library missing, driver not loaded, no permission.
pub fn open(library: Option<&Path>) -> Result<Nvml, NvmlError> {
    match library {
        Some(p) => Nvml::builder().lib_path(p.as_os_str()).init(),
        None => Nvml::init(),
    }
}

/// Reads every GPU. A failing system-level call (driver version, device count) is an error: the
/// caller treats NVML as down. A failing per-GPU call is recorded in [`Reading::errors`]; a GPU
/// whose handle or UUID cannot be read is left out.
///
/// # Errors
/// The error of `nvmlSystemGetDriverVersion` or `nvmlDeviceGetCount_v2`.
pub fn read(nvml: &Nvml) -> Result<Reading, NvmlError> {
    let driver_version = nvml.sys_driver_version()?;
    let count = nvml.device_count()?;
    let mut out = Reading {
        driver_version,
        ..Reading::default()
    };
    for index in 0..count {
        let dev = match nvml.device_by_index(index) {
            Ok(d) => d,
            Err(e) => {
                out.errors.push((index, "handle", e.to_string()));
                continue;
            }
        };
        let uuid = match dev.uuid() {
            Ok(u) => u,
            Err(e) => {
                out.errors.push((index, "uuid", e.to_string()));
                continue;
            }
        };
        let mut note =
            |call: &'static str, e: NvmlError| out.errors.push((index, call, e.to_string()));
        let name = dev.name().map_err(|e| note("name", e)).unwrap_or_default();
        let pci_bus_id = dev
            .pci_info()
            .map(|p| p.bus_id)
            .map_err(|e| note("pci_info", e))
            .unwrap_or_default();
        let memory = dev
            .memory_info()
            .map(|m| Memory {
                total: m.total,
                reserved: m.reserved,
                free: m.free,
                used: m.used,
            })
            .map_err(|e| note("memory_info", e))
            .ok();
        // `nvmlDeviceGetComputeRunningProcesses_v3`: driver 510+ (SGLang's CUDA 12 needs 525+).
        let processes = dev
            .running_compute_processes()
            .map(|ps| {
                ps.into_iter()
                    .map(|p| {
                        let used = match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => Some(b),
                            UsedGpuMemory::Unavailable => None,
                        };
                        (p.pid, used)
                    })
                    .collect()
            })
            .map_err(|e| note("compute_processes", e))
            .ok();
        out.gpus.push(Gpu {
            index,
            uuid,
            name,
            pci_bus_id,
            memory,
            processes,
        });
    }
    Ok(out)
}
