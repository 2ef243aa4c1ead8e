// What `tally himeno` and `tally bench himeno` share: the read probe that
// sets the bandwidth the 56 B/point floor is measured at.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

namespace tally::cli {

/// The read probe's bandwidth in GB/s: 16-byte loads over a fresh buffer of
/// up to 1 GiB (larger than L2), the best of the probe's grids, median of
/// `trials` trials. Returns 0 (and bytes 0) when less than 256 MiB is free.
double himeno_read_probe_gbps(cudaStream_t stream, int trials, std::size_t* bytes = nullptr);

}  // namespace tally::cli
