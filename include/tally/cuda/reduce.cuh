// The GPU backend of reduce, transform_reduce, dot, squared_norm, sum:
// argument checks, launch configuration and scratch for kernels/reduce.cuh.
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda_runtime.h>

#include "tally/core/backend.hpp"
#include "tally/core/error.hpp"
#include "tally/core/options.hpp"
#include "tally/core/tree.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
#include "tally/cuda/dispatch/pointer_checks.hpp"
#include "tally/cuda/kernels/reduce.cuh"
#include "tally/cuda/launch.cuh"
#include "tally/cuda/workspace.hpp"
#include "tally/reduce.hpp"

namespace tally::detail {

// How many blocks the reduce kernel launches (never the result, which the
// tree fixes). Large inputs run faster when SMs that drain their blocks
// sooner can take more of them; inputs of a few tiles per slot run best with
// one block per slot. The factor of blocks per resident slot is
// tiles_per_slot / kTilesPerBlockTarget, clamped to [1, kMaxOversubscription],
// and the full kMaxOversubscription from kFullOversubscriptionFrom tiles a slot
// (the sweep's best at 2^28 f32 and 2^26 f64). Swept on the H100 (f32, µs,
// factor 1/2/4/8/16): 2^24 (6 tiles a slot) 27.7/29.0/30.5/34.4/34.4; 2^26
// (25) 93.0/92.7/92.9/93.6/94.0; 2^28 (99) 358.6/355.3/350.6/347.6/346.4;
// 2^30 (397) 1403/1403/1410/1395/1385.
inline constexpr std::int64_t kMaxOversubscription = 16;
inline constexpr std::int64_t kTilesPerBlockTarget = 12;
inline constexpr std::int64_t kFullOversubscriptionFrom = 48;

/// Blocks of the reduce kernel that fit on the device at once.
template <auto Kernel>
int resident_blocks() {
  static const int per_sm = [] {
    int blocks = 0;
    TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Kernel, kernels::kReduceThreads, 0));
    return std::max(blocks, 1);
  }();
  return per_sm * current_device_info().sm_count;
}

template <bool Aligned, class Source, class Op, class Out, class Finalize>
void launch_reduce(const gpu_backend& gpu, const Source& source, const Op& op, Out* out, const Finalize& fin,
                   const options& opts, const char* function) {
  using Acc = typename Source::acc_type;
  const std::int64_t tiles = tree::tile_count(source.n, Source::V);
  constexpr auto kernel = kernels::reduce_kernel<Aligned, Source, Op, Out, Finalize>;
  const std::int64_t groups = (tiles + tree::kGroupTiles - 1) / tree::kGroupTiles;
  if (static_cast<std::size_t>(groups + 1) * sizeof(unsigned) > workspace::kZeroedBytes)
    throw_invalid_argument(function, "n", "is too large for the reduce kernel's counters");
  // As many blocks as fit at once, each with the same number of tiles (a
  // block with one tile more than the others would set the pace).
  std::int64_t capacity = opts.grid_blocks;
  if (capacity <= 0) {
    const std::int64_t slots = resident_blocks<kernel>();
    const std::int64_t tiles_per_slot = tiles / slots;
    const std::int64_t factor =
        tiles_per_slot >= kFullOversubscriptionFrom
            ? kMaxOversubscription
            : std::clamp<std::int64_t>(tiles_per_slot / kTilesPerBlockTarget, 1, kMaxOversubscription);
    capacity = slots * factor;
  }
  const std::int64_t tiles_per_block = (tiles + capacity - 1) / capacity;
  const int grid = static_cast<int>((tiles + tiles_per_block - 1) / tiles_per_block);

  // Scratch layout: [counters (zeroed region)][tile values][group values].
  const std::size_t value_bytes = static_cast<std::size_t>(tiles + groups) * sizeof(Acc) + alignof(Acc);
  auto* base = static_cast<unsigned char*>(scratch_for(gpu).get(tiles > 1 ? value_bytes : 0, gpu.stream));
  kernels::reduce_scratch<Acc> scratch{};
  scratch.group_counts = reinterpret_cast<unsigned*>(base);
  scratch.root_count = scratch.group_counts + groups;
  auto values = reinterpret_cast<std::uintptr_t>(base + workspace::kZeroedBytes);
  values = (values + alignof(Acc) - 1) / alignof(Acc) * alignof(Acc);
  scratch.tile_values = reinterpret_cast<Acc*>(values);
  scratch.group_values = scratch.tile_values + tiles;

  cudaLaunchConfig_t config = launch_config(dim3(grid), dim3(kernels::kReduceThreads), 0, gpu.stream);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = opts.programmatic_launch ? 1 : 0;
  launch("launch of tally::kernels::reduce_kernel", config, kernel, source, op, out, fin, scratch);
}

template <class Source, class Op, class Out, class Finalize>
void execute_reduce(const gpu_backend& gpu, const Source& source, const Op& op, Out* out, const Finalize& fin,
                    const options& opts, const char* function) {
  using Acc = typename Source::acc_type;
  if (opts.checks == check_mode::checked) {
    check_device_pointer(function, "x", source.x, source.n);
    if constexpr (Source::inputs == 2) check_device_pointer(function, "y", source.y, source.n);
    check_device_pointer(function, "out", out, 1);
  }
  if (source.n == 0) {
    launch("launch of tally::kernels::write_empty_result", launch_config(1, 1, 0, gpu.stream),
           kernels::write_empty_result<Acc, Out, Finalize>, out, fin);
    return;
  }
  bool aligned = device::vector_aligned<typename Source::first_type, Source::V>(source.x);
  if constexpr (Source::inputs == 2)
    aligned = aligned && device::vector_aligned<typename Source::second_type, Source::V>(source.y);
  if (aligned) launch_reduce<true>(gpu, source, op, out, fin, opts, function);
  else launch_reduce<false>(gpu, source, op, out, fin, opts, function);
}

/// The value-returning forms (sum): run(result) into a small stream-ordered
/// allocation, then a copy back and a wait. They allocate and synchronise, so
/// they cannot be captured in a CUDA graph (use reduce() into device memory).
template <class Out, class Run>
Out value_of(const gpu_backend& gpu, const Run& run) {
  if (stream_is_captured(gpu.stream))
    throw error("tally: the value-returning forms (sum) allocate and wait for the stream, which a stream being "
                "captured into a CUDA graph cannot do; capture reduce() into device memory instead");
  Out* result = nullptr;
  TALLY_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&result), sizeof(Out), gpu.stream));
  try {
    run(result);
  } catch (...) {
    cudaFreeAsync(result, gpu.stream);
    throw;
  }
  Out value;
  TALLY_CUDA(cudaMemcpyAsync(&value, result, sizeof(Out), cudaMemcpyDeviceToHost, gpu.stream));
  TALLY_CUDA(cudaFreeAsync(result, gpu.stream));
  TALLY_CUDA(cudaStreamSynchronize(gpu.stream));
  return value;
}

}  // namespace tally::detail
