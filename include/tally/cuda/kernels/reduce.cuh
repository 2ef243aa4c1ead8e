// The device-wide reduce kernel: one launch, the fixed tree, no host sync.
//
// The input's tiles (1024 vectors each, tree.hpp) are split into gridDim.x
// contiguous ranges, one per block. A block reduces each of its tiles
// (rows by warp shuffles, then the block's 8 warps) and writes the tile's
// value to scratch. Tiles form groups of 1024 (aligned subtrees); each block
// then adds the number of tiles it finished to each of its groups' counters,
// and the block that completes a group reduces that group's tile values.
// The block that completes the last group reduces the group values and writes
// the result. Every combine happens at a fixed node of the tree, so the bits
// do not depend on the grid, the timing or which block came last.
//
// Counters live in the workspace's zeroed region; whoever finishes with a
// counter resets it to zero, so the next call (or graph replay) finds zeros.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tally/core/source.hpp"
#include "tally/core/tree.hpp"
#include "tally/cuda/device/block_reduce.cuh"
#include "tally/cuda/device/vector_load.cuh"
#include "tally/cuda/device/warp_reduce.cuh"

namespace tally::kernels {

inline constexpr int kReduceThreads = 256;
inline constexpr int kReduceWarps = kReduceThreads / 32;
inline constexpr int kRowsPerWarp = tree::kTileVectors / tree::kRowVectors / kReduceWarps;
/// Blocks per SM the kernel is compiled for: caps registers at 64 a thread,
/// which fits the prefetched tile (measured: forcing 6 or 8 blocks spills and
/// runs slower, docs/NOTES.md).
inline constexpr int kReduceMinBlocks = 4;

/// Where the kernel keeps tile and group values, and its counters.
template <class Acc>
struct reduce_scratch {
  Acc* tile_values;         // [tiles]
  Acc* group_values;        // [groups]
  unsigned* group_counts;   // [groups], zero at rest
  unsigned* root_count;     // zero at rest
};

namespace detail {

/// Reads memory other blocks wrote during this kernel, bypassing L1.
template <class T>
__device__ __forceinline__ T load_coherent(const T* p) {
  if constexpr (sizeof(T) % 4 == 0) {
    unsigned words[sizeof(T) / 4];
#pragma unroll
    for (int w = 0; w < static_cast<int>(sizeof(T) / 4); ++w) words[w] = __ldcg(reinterpret_cast<const unsigned*>(p) + w);
    T value;
    memcpy(&value, words, sizeof(T));
    return value;
  } else {
    unsigned char bytes[sizeof(T)];
    const volatile unsigned char* src = reinterpret_cast<const volatile unsigned char*>(p);
    for (int b = 0; b < static_cast<int>(sizeof(T)); ++b) bytes[b] = src[b];
    T value;
    memcpy(&value, bytes, sizeof(T));
    return value;
  }
}

/// The raw elements of one vector of every input of the source.
template <class Source>
struct raw_vector {
  device::vector_of<typename Source::first_type, Source::V> x;
  device::vector_of<typename Source::second_type, (Source::inputs == 2 ? Source::V : 1)> y;
};

template <bool Aligned, class Source>
__device__ __forceinline__ raw_vector<Source> load_raw(const Source& src, std::int64_t vector) {
  raw_vector<Source> raw;
  raw.x = device::load_vector<typename Source::first_type, Source::V, Aligned>(src.x + vector * Source::V);
  if constexpr (Source::inputs == 2)
    raw.y = device::load_vector<typename Source::second_type, Source::V, Aligned>(src.y + vector * Source::V);
  return raw;
}

/// Left fold of a whole vector's leaves.
template <class Source, class Op>
__device__ __forceinline__ typename Source::acc_type fold_raw(const Source& src, const raw_vector<Source>& raw,
                                                               std::int64_t vector, const Op& op) {
  const std::int64_t first = vector * Source::V;
  auto leaf = [&](int e) {
    if constexpr (Source::inputs == 2) return src.leaf(raw.x.v[e], raw.y.v[e], first + e);
    else return src.leaf(raw.x.v[e], first + e);
  };
  auto acc = leaf(0);
#pragma unroll
  for (int e = 1; e < Source::V; ++e) acc = op(acc, leaf(e));
  return acc;
}

/// Left fold of the leaves of a vector that may be short or past the end.
template <class Source, class Op>
__device__ __forceinline__ tree::maybe<typename Source::acc_type> fold_partial(const Source& src, std::int64_t vector,
                                                                               const Op& op) {
  using Acc = typename Source::acc_type;
  const std::int64_t first = vector * Source::V;
  if (first >= src.n) return {Acc{}, false};
  Acc acc = src.leaf_at(first);
  for (int e = 1; e < Source::V && first + e < src.n; ++e) acc = op(acc, src.leaf_at(first + e));
  return {acc, true};
}

/// The tree's node over values[first, first+size) (size a power of two),
/// values past `count` being empty; sequential (a binary counter).
template <class Acc, class Op>
__device__ tree::maybe<Acc> serial_subtree(const Acc* values, std::int64_t first, std::int64_t size,
                                           std::int64_t count, const Op& op) {
  if (size == 1) {
    if (first < count) return {load_coherent(values + first), true};
    return {Acc{}, false};
  }
  tree::maybe<Acc> stack[64];
  for (std::int64_t k = 0; k < size; ++k) {
    tree::maybe<Acc> node{Acc{}, false};
    if (first + k < count) node = {load_coherent(values + first + k), true};
    int level = 0;
    for (std::int64_t bits = k; bits & 1; bits >>= 1, ++level) node = tree::combine(stack[level], node, op);
    stack[level] = node;
  }
  return stack[tree::bit_width(static_cast<std::uint64_t>(size)) - 1];
}

/// The tree over values[0, count) (padded to a power of two), in thread 0.
/// Pre: the whole block calls it; values were written by other blocks before
/// a fence this block has synchronised with.
template <class Acc, class Op>
__device__ tree::maybe<Acc> block_tree(const Acc* values, std::int64_t count, const Op& op,
                                       device::block_reduce_storage<Acc, kReduceThreads>& storage) {
  constexpr int kSlots = kReduceThreads * 4;
  std::int64_t padded = static_cast<std::int64_t>(tree::bit_ceil(static_cast<std::uint64_t>(count)));
  if (padded < kSlots) padded = kSlots;
  const std::int64_t per_slot = padded / kSlots;
  tree::maybe<Acc> slot[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    slot[k] = serial_subtree(values, (threadIdx.x * 4 + k) * per_slot, per_slot, count, op);
  return device::block_reduce<kReduceThreads>(tree::balanced(slot, op), op, storage);
}

/// The value of tile t (which may be the input's last, cut short) computed
/// by the whole block, in thread 0: rows by warp_reduce over empty-padded
/// leaves, then the warps.
template <class Source, class Op>
__device__ tree::maybe<typename Source::acc_type> block_partial_tile(
    const Source& src, std::int64_t t, const Op& op,
    device::block_reduce_storage<typename Source::acc_type, kReduceThreads>& storage) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  tree::maybe<typename Source::acc_type> row[kRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r)
    row[r] = device::warp_reduce(
        fold_partial(src, t * tree::kTileVectors + (warp * kRowsPerWarp + r) * tree::kRowVectors + lane, op), op);
  return device::block_combine_warps<kReduceThreads>(tree::balanced(row, op), op, storage);
}

}  // namespace detail

/// Writes fin(empty) to *out: the result for n == 0.
template <class Acc, class Out, class Finalize>
__global__ void write_empty_result(Out* out, const Finalize fin) {
  *out = fin(tree::maybe<Acc>{Acc{}, false});
}

/// Tiles whose warp values a block collects before one barrier combines them.
inline constexpr int kBatchTiles = 8;

/// Shared memory of the reduce kernel.
template <class Acc>
struct reduce_shared {
  device::block_reduce_storage<Acc, kReduceThreads> storage;
  // Each warp's value of each tile of a batch, double-buffered by batch.
  // Raw bytes: Acc may have constructors, which __shared__ variables cannot run.
  alignas(Acc) unsigned char warp_value_bytes[2 * kBatchTiles * kReduceWarps * sizeof(Acc)];
  int decision;
  __device__ __forceinline__ Acc (*warp_values())[kBatchTiles][kReduceWarps] {
    return reinterpret_cast<Acc(*)[kBatchTiles][kReduceWarps]>(warp_value_bytes);
  }
};

namespace detail {

/// Phase 1, tiles: the value of each of tiles [first, last) into
/// scratch.tile_values (or, when the input is one tile, returned in thread 0).
template <bool Aligned, class Source, class Op>
__device__ __forceinline__ typename Source::acc_type reduce_tiles(
    const Source& src, const Op& op, std::int64_t first, std::int64_t last, std::int64_t tiles,
    const reduce_scratch<typename Source::acc_type>& scratch, reduce_shared<typename Source::acc_type>& shared) {
  using Acc = typename Source::acc_type;
  using raw = raw_vector<Source>;
  constexpr std::int64_t kTileElements = std::int64_t{tree::kTileVectors} * Source::V;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t full_tiles = src.n / kTileElements;
  auto warp_values = shared.warp_values();

  // Vector index of this thread's leaf in row r of tile t.
  auto vector_of_row = [&](std::int64_t t, int r) {
    return t * tree::kTileVectors + (warp * kRowsPerWarp + r) * tree::kRowVectors + lane;
  };

  Acc tile_value{};  // thread 0, when the input is one tile: its value
  std::int64_t t = first;
  const std::int64_t full_end = last < full_tiles ? last : full_tiles;
  if (t < full_end) {
    // Whole tiles, pipelined: the next tile's loads are in flight while this
    // one is reduced. Warps meet at a barrier once per batch of tiles, and
    // then the batch's tiles are combined by as many threads at once.
    raw current[kRowsPerWarp], next[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) current[r] = load_raw<Aligned>(src, vector_of_row(t, r));
    for (; t < full_end; ++t) {
      if (t + 1 < full_end) {
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) next[r] = load_raw<Aligned>(src, vector_of_row(t + 1, r));
      }
      Acc row[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r)
        row[r] = device::warp_reduce(fold_raw(src, current[r], vector_of_row(t, r), op), op);
      const std::int64_t position = t - first;
      const int slot = static_cast<int>(position % kBatchTiles);
      const int buffer = static_cast<int>(position / kBatchTiles) & 1;
      if (lane == 0) warp_values[buffer][slot][warp] = tree::balanced(row, op);
      if (slot == kBatchTiles - 1 || t + 1 == full_end) {
        __syncthreads();
        if (threadIdx.x <= slot) {
          Acc w[kReduceWarps];
#pragma unroll
          for (int i = 0; i < kReduceWarps; ++i) w[i] = warp_values[buffer][threadIdx.x][i];
          const Acc value = tree::balanced(w, op);
          if (tiles == 1) tile_value = value;
          else scratch.tile_values[t - slot + threadIdx.x] = value;
        }
      }
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) current[r] = next[r];
    }
  }
  if (t < last) {  // the input's last tile, cut short: the same tree with empty leaves
    const auto value = block_partial_tile(src, t, op, shared.storage);
    if (threadIdx.x == 0) {
      if (tiles == 1) tile_value = value.value;
      else scratch.tile_values[t] = value.value;
    }
  }
  return tile_value;
}

/// Adds `count` finished items to *counter (thread 0) and tells the whole
/// block whether it was the last of `total`. Pre: the whole block calls it.
__device__ __forceinline__ bool block_completes(unsigned* counter, unsigned count, unsigned total, int& decision) {
  if (threadIdx.x == 0) {
    const unsigned before = atomicAdd(counter, count);
    decision = before + count == total;
    __threadfence();  // the count before reading other blocks' values
  }
  __syncthreads();
  const bool completes = decision;
  __syncthreads();
  return completes;
}

/// Phase 3, root: the tree over the group values, written through fin by
/// the block that completed the last group.
template <class Acc, class Op, class Out, class Finalize>
__device__ __forceinline__ void reduce_root(const Op& op, Out* out, const Finalize& fin, std::int64_t groups,
                                            const reduce_scratch<Acc>& scratch, reduce_shared<Acc>& shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (groups <= 32) {
    // Few groups: one warp, no barriers (the root is on every call's critical path).
    if (warp == 0) {
      tree::maybe<Acc> value{Acc{}, false};
      if (lane < groups) value = {load_coherent(scratch.group_values + lane), true};
      const auto root = device::warp_reduce(value, op);
      if (lane == 0) {
        *scratch.root_count = 0;
        *out = fin(root);
      }
    }
    return;
  }
  const auto root = block_tree(scratch.group_values, groups, op, shared.storage);
  if (threadIdx.x == 0) {
    *scratch.root_count = 0;
    *out = fin(root);
  }
}

/// Phase 2, groups: counts this block's tiles into their groups; for each
/// group it completes, the tree over the group's tile values, then (root
/// phase) the root if that group was the last.
template <class Acc, class Op, class Out, class Finalize>
__device__ __forceinline__ void reduce_groups(const Op& op, Out* out, const Finalize& fin, std::int64_t first,
                                              std::int64_t last, std::int64_t tiles,
                                              const reduce_scratch<Acc>& scratch, reduce_shared<Acc>& shared) {
  const std::int64_t groups = (tiles + tree::kGroupTiles - 1) / tree::kGroupTiles;
  __threadfence();  // this thread's tile values before the block counts them
  __syncthreads();
  for (std::int64_t g = first / tree::kGroupTiles; g <= (last - 1) / tree::kGroupTiles; ++g) {
    const std::int64_t group_first = g * tree::kGroupTiles;
    const std::int64_t group_size = tiles - group_first < tree::kGroupTiles ? tiles - group_first : tree::kGroupTiles;
    const std::int64_t lo = first > group_first ? first : group_first;
    const std::int64_t hi = last < group_first + group_size ? last : group_first + group_size;
    if (!block_completes(scratch.group_counts + g, static_cast<unsigned>(hi - lo), static_cast<unsigned>(group_size),
                         shared.decision))
      continue;

    const auto group_value = block_tree(scratch.tile_values + group_first, group_size, op, shared.storage);
    if (threadIdx.x == 0) {
      scratch.group_counts[g] = 0;
      if (groups == 1) {
        *out = fin(group_value);
      } else {
        scratch.group_values[g] = group_value.value;
        __threadfence();
        const unsigned before = atomicAdd(scratch.root_count, 1u);
        shared.decision = before + 1 == static_cast<unsigned>(groups);
        __threadfence();
      }
    }
    if (groups == 1) continue;
    __syncthreads();
    const bool completes_root = shared.decision;
    __syncthreads();
    if (completes_root) reduce_root(op, out, fin, groups, scratch, shared);
  }
}

}  // namespace detail

/// See the file comment: phase 1 (tiles), phase 2 (groups), phase 3 (root).
/// Pre: gridDim.x <= number of tiles; blockDim.x == kReduceThreads; the
/// counters in `scratch` are zero; Aligned only when every input pointer
/// passes device::vector_aligned.
template <bool Aligned, class Source, class Op, class Out, class Finalize>
__global__ void __launch_bounds__(kReduceThreads, kReduceMinBlocks)
    reduce_kernel(const Source src, const Op op, Out* out, const Finalize fin,
                  const reduce_scratch<typename Source::acc_type> scratch) {
  using Acc = typename Source::acc_type;
  __shared__ reduce_shared<Acc> shared;
  const std::int64_t tiles = tree::tile_count(src.n, Source::V);
  const std::int64_t first = blockIdx.x * tiles / gridDim.x;
  const std::int64_t last = (blockIdx.x + 1) * tiles / gridDim.x;

  // Launched as a programmatic dependent: wait for the previous kernel in the
  // stream (it may have written our input or still read our scratch), then
  // let the next one start launching while we work.
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");

  const Acc tile_value = detail::reduce_tiles<Aligned>(src, op, first, last, tiles, scratch, shared);
  if (tiles == 1) {  // one block, one tile: its value is the root
    if (threadIdx.x == 0) *out = fin(tree::maybe<Acc>{tile_value, true});
    return;
  }
  detail::reduce_groups(op, out, fin, first, last, tiles, scratch, shared);
}

}  // namespace tally::kernels
