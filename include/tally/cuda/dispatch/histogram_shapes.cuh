// Launch shapes of the histogram kernels: grids from occupancy, clusters
// that fit the device, and how many partial rows a shared_memory launch
// writes. Host code; the plan they shape comes from histogram_strategy.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "tally/core/histogram_options.hpp"
#include "tally/core/scatter.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
#include "tally/cuda/dispatch/histogram_strategy.hpp"

namespace tally::detail {

/// Elements per launch: privatised counts are 32-bit.
inline constexpr std::int64_t kSliceElements = std::int64_t(1) << 31;
/// Fewest elements per thread worth a block (small inputs use fewer blocks).
inline constexpr std::int64_t kElementsPerThread = 16;

/// Blocks worth launching for n elements in blocks of `threads`.
inline std::int64_t grid_limit(std::int64_t n, int threads) {
  return std::max<std::int64_t>(1, (n + threads * kElementsPerThread - 1) / (threads * kElementsPerThread));
}

/// Whether the shared_memory kernel writes partial rows for `plan` (and
/// needs a cooperative launch): packed counters, and deterministic sums
/// converted to floating point in the kernel (histogram_shared_memory.cuh).
template <class Items, class Out>
bool writes_rows(const histogram_plan& plan) {
  if (plan.strategy != histogram_strategy::shared_memory || plan.registers > 0) return false;
  return plan.packed || (is_fixed_point_v<Items> && std::is_floating_point_v<Out>);
}

/// Bytes of partial rows a plan that writes them needs at most: a row per
/// block, at most kMaxPrivatizedBlocksPerSm blocks per SM, within
/// kPartialsCap unless one block per SM needs more.
inline std::size_t rows_bytes(const histogram_plan& plan) {
  const auto most = plan.row_bytes * static_cast<std::size_t>(current_device_info().sm_count) *
                    kMaxPrivatizedBlocksPerSm;
  return std::min(most, std::max(kPartialsCap, plan.row_bytes * current_device_info().sm_count));
}

/// A grid and block size; grid 0 when the device cannot hold one block.
struct launch_shape {
  int threads = 0;
  std::int64_t grid = 0;
  int cluster = 1;
  std::size_t shared_bytes = 0;
};

/// shared_memory_kernel: blocks resident together (it may have a grid
/// barrier), at most kMaxPrivatizedBlocksPerSm per SM, and no more blocks
/// than rows within `rows_bytes` (when it writes rows; 0: it does not).
template <class Kernel>
launch_shape shape_shared_memory(Kernel kernel, const histogram_plan& plan, std::int64_t n, std::size_t rows_bytes,
                                 const histogram_options& opts) {
  const device_info& dev = current_device_info();
  TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(plan.shared_bytes)));
  launch_shape shape;
  shape.shared_bytes = plan.shared_bytes;
  // Large rows: 1024-thread blocks, so fewer rows to write and read back.
  shape.threads = plan.row_bytes >= kWideRowBytes && !plan.thread_private ? 1024 : kPrivatizedThreads;
  int per_sm = 0;
  TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, shape.threads, plan.shared_bytes));
  if (per_sm == 0 && shape.threads > kPrivatizedThreads) {  // (thread_private plans are sized for kPrivatizedThreads)
    shape.threads = kPrivatizedThreads;
    TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, shape.threads, plan.shared_bytes));
  }
  const std::int64_t resident =
      static_cast<std::int64_t>(std::min(per_sm, kMaxPrivatizedBlocksPerSm)) * dev.sm_count;
  std::int64_t grid = std::min(resident, grid_limit(n, shape.threads));
  // A forced grid too must be resident all at once (the kernel may have a
  // grid barrier), and have a row for every block.
  if (opts.grid_blocks > 0) grid = std::min<std::int64_t>(opts.grid_blocks, resident);
  if (rows_bytes > 0) grid = std::min<std::int64_t>(grid, static_cast<std::int64_t>(rows_bytes / plan.row_bytes));
  shape.grid = std::max<std::int64_t>(grid, resident > 0 ? 1 : 0);
  return shape;
}

/// register_counts_kernel: as many blocks as fit at once (fewer for small inputs).
template <class Kernel>
launch_shape shape_register_counts(Kernel kernel, const histogram_plan& plan, std::int64_t n,
                                   const histogram_options& opts) {
  TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(plan.shared_bytes)));
  launch_shape shape;
  shape.threads = kPrivatizedThreads;
  shape.shared_bytes = plan.shared_bytes;
  int per_sm = 0;
  TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kPrivatizedThreads, plan.shared_bytes));
  if (per_sm == 0) return shape;
  std::int64_t grid = static_cast<std::int64_t>(per_sm) * current_device_info().sm_count;
  grid = std::min(grid, grid_limit(n, kPrivatizedThreads));
  if (opts.grid_blocks > 0) grid = opts.grid_blocks;
  shape.grid = grid;
  return shape;
}

/// cluster_memory_kernel: the plan's cluster size, or the largest smaller one
/// this device can hold whose slices of `bins` bins of `slot` bytes still fit
/// a block; grid 0 when none can. Whole clusters, fewer for small inputs.
template <class Kernel>
launch_shape shape_cluster_memory(Kernel kernel, const histogram_plan& plan, std::int64_t bins, std::size_t slot,
                                  std::int64_t n, const histogram_options& opts) {
  const device_info& dev = current_device_info();
  launch_shape shape;
  shape.threads = kPrivatizedThreads;
  shape.shared_bytes = plan.shared_bytes;
  TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(shape.shared_bytes)));
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(kPrivatizedThreads);
  config.dynamicSmemBytes = shape.shared_bytes;
  cudaLaunchAttribute attribute{};
  int cluster = plan.cluster;
  std::int64_t grid = 0;
  while (cluster > 1) {
    if (cluster > 8) TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    attribute.id = cudaLaunchAttributeClusterDimension;
    attribute.val.clusterDim.x = cluster;
    attribute.val.clusterDim.y = 1;
    attribute.val.clusterDim.z = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
    config.gridDim = dim3(cluster);
    int clusters = 0;
    TALLY_CUDA(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
    if (clusters > 0) {
      grid = static_cast<std::int64_t>(clusters) * cluster;
      break;
    }
    // Too large for this device: a smaller cluster, if the bins still fit.
    const auto slice = (bins + cluster / 2 - 1) / (cluster / 2);
    if (slice * static_cast<std::int64_t>(slot) > static_cast<std::int64_t>(dev.shared_memory_per_block_optin) - 1024)
      return {};
    shape.shared_bytes = static_cast<std::size_t>(slice * static_cast<std::int64_t>(slot));
    config.dynamicSmemBytes = shape.shared_bytes;
    TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(shape.shared_bytes)));
    cluster /= 2;
  }
  if (cluster <= 1) return {};
  shape.cluster = cluster;
  // Small inputs: fewer blocks, in whole clusters.
  grid = std::min(grid, (grid_limit(n, kPrivatizedThreads) + cluster - 1) / cluster * cluster);
  if (opts.grid_blocks > 0) grid = (opts.grid_blocks + cluster - 1) / cluster * cluster;
  shape.grid = grid;
  return shape;
}

/// global_atomics_kernel: as many blocks as fit at once (fewer for small inputs).
template <class Kernel>
launch_shape shape_global_atomics(Kernel kernel, std::int64_t n, const histogram_options& opts) {
  launch_shape shape;
  shape.threads = kGlobalThreads;
  int per_sm = 0;
  TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGlobalThreads, 0));
  std::int64_t grid = std::max(per_sm, 1) * static_cast<std::int64_t>(current_device_info().sm_count);
  grid = std::min(grid, grid_limit(n, kGlobalThreads));
  if (opts.grid_blocks > 0) grid = opts.grid_blocks;
  shape.grid = grid;
  return shape;
}

/// hot_keys_kernel: as many blocks of kHotKeysThreads as fit at once, at
/// most kMaxHotKeysBlocksPerSm per SM: enough atomics in flight for the keys
/// that are not hot, while the flush (a global atomic per hot key per block:
/// ~120 keys for Zipf-like keys, 2048 at most) stays small.
template <class Kernel>
launch_shape shape_hot_keys(Kernel kernel, std::int64_t n, std::size_t shared_bytes, const histogram_options& opts) {
  launch_shape shape;
  shape.threads = kHotKeysThreads;
  shape.shared_bytes = shared_bytes;
  int per_sm = 0;
  TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kHotKeysThreads, shared_bytes));
  std::int64_t grid = static_cast<std::int64_t>(std::clamp(per_sm, 1, kMaxHotKeysBlocksPerSm)) *
                      current_device_info().sm_count;
  grid = std::min(grid, grid_limit(n, kHotKeysThreads));
  if (opts.grid_blocks > 0) grid = opts.grid_blocks;
  shape.grid = grid;
  return shape;
}

}  // namespace tally::detail
