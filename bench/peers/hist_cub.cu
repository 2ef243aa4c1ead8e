// CUB's histogram, the peer a user would pick first.
#include <cstdint>
#include <string>

#include <cub/device/device_histogram.cuh>

#include "peers/hist_peers.hpp"

namespace tally::bench::peers {

std::string cub_hist_even(const double* x, std::int64_t n, std::int64_t bins, double lo, double hi, int* counts,
                          cudaStream_t stream) {
  static void* temp = nullptr;
  static std::size_t temp_capacity = 0;
  std::size_t bytes = 0;
  const int levels = static_cast<int>(bins + 1);
  cudaError_t status = cub::DeviceHistogram::HistogramEven(nullptr, bytes, x, counts, levels, lo, hi, n, stream);
  if (status == cudaSuccess && bytes > temp_capacity) {
    cudaFree(temp);
    temp = nullptr;
    temp_capacity = 0;
    status = cudaMalloc(&temp, bytes);
    if (status == cudaSuccess) temp_capacity = bytes;
  }
  if (status == cudaSuccess)
    status = cub::DeviceHistogram::HistogramEven(temp, bytes, x, counts, levels, lo, hi, n, stream);
  if (status == cudaSuccess) status = cudaGetLastError();
  if (status != cudaSuccess) {
    cudaGetLastError();  // clear a sticky launch error's record
    return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  }
  return {};
}

}  // namespace tally::bench::peers
