// What every report's JSON says about where it ran: versions (tally, CUDA
// runtime and driver, CUB, Thrust), the GPU (name, SMs, L2, clocks) or the
// host CPU.
#pragma once

#include <string>

#include "report.hpp"

namespace tally::bench {

/// {"tally": version, "compiler", "host": {cpu, hardware_threads,
/// openmp_threads, memory_gib, load_average}}. Never throws for a missing GPU.
json host_run_metadata();

/// host_run_metadata() plus "cuda_runtime", "cuda_driver", "cub", "thrust"
/// and "device": {name, compute_capability, sm_count, l2_bytes,
/// memory_bytes, memory_bus_bits, memory_clock_mhz, sm_clock_mhz,
/// theoretical_gbps}. Pre: a usable GPU (gpu_unusable_reason() == "").
json gpu_run_metadata();

/// Why no GPU can be used here ("no CUDA device", the CUDA error of the
/// first call), or "" when one can. Makes the first CUDA call of the process.
std::string gpu_unusable_reason();

}  // namespace tally::bench
