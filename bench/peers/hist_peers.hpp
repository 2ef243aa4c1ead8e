// The peers `tally bench histogram` measures against (seed 003's study):
// plain atomicAdd, the paper's shuffle-based warp aggregation as published
// (figure 5, adapted to the _sync intrinsics), and CUB's HistogramEven.
// Each queues its work on `stream` and clears the output first, as tally's
// histogram does, so the timed calls do the same work.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime.h>

namespace tally::bench::peers {

/// How the atomics-based peers add to a bin.
enum class hist_atomics { plain, paper_shuffle };

/// counts[floor((x - lo)·bins/(hi - lo))] += 1 for x in [lo, hi), one thread
/// per sample in grid-stride order with 128-thread blocks (the paper's setup).
void hist_even_atomics(hist_atomics how, const double* x, std::int64_t n, std::int64_t bins, double lo, double hi,
                       int* counts, cudaStream_t stream);
void hist_even_atomics(hist_atomics how, const double* x, std::int64_t n, std::int64_t bins, double lo, double hi,
                       double* counts, cudaStream_t stream);

/// out[index[i]] += value[i] (out cleared first): the paper's general case,
/// with 64-bit indices (10^7 elements: 160 MB read, as the bar assumes).
void scatter_add_atomics(hist_atomics how, const std::int64_t* index, const double* value, std::int64_t n, double* out,
                         std::int64_t out_size, cudaStream_t stream);

/// cub::DeviceHistogram::HistogramEven into int32 counts (temporary storage
/// kept between calls). Returns an empty string, or CUB's error (it fails
/// for very large bin counts; the caller reports it).
std::string cub_hist_even(const double* x, std::int64_t n, std::int64_t bins, double lo, double hi, int* counts,
                          cudaStream_t stream);

}  // namespace tally::bench::peers
