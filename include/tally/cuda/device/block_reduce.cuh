// Block-wide reduction in index order, built on warp_reduce.
#pragma once

#include "tally/core/tree.hpp"
#include "tally/cuda/device/warp_reduce.cuh"

namespace tally::device {

/// Shared memory a block_reduce over `Threads` threads needs.
template <class T, int Threads>
struct block_reduce_storage {
  static_assert(Threads % 32 == 0 && ((Threads / 32) & (Threads / 32 - 1)) == 0,
                "block_reduce needs a power-of-two number of whole warps");
  // Raw bytes: T may have constructors, which __shared__ variables cannot run.
  alignas(tree::maybe<T>) unsigned char bytes[sizeof(tree::maybe<T>) * (Threads / 32)];
  __device__ __forceinline__ tree::maybe<T>* warp_results() { return reinterpret_cast<tree::maybe<T>*>(bytes); }
};

/// Combines, in thread 0, one value per warp (held by each warp's lane 0) by
/// a balanced tree in warp order. Pre: every thread of a block of exactly
/// Threads threads calls it. Ends with the block synchronised, so `storage`
/// may be reused right after.
template <int Threads, class T, class Op>
__device__ __forceinline__ tree::maybe<T> block_combine_warps(const tree::maybe<T>& warp_value, const Op& op,
                                                              block_reduce_storage<T, Threads>& storage) {
  constexpr int kWarps = Threads / 32;
  if ((threadIdx.x & 31) == 0) storage.warp_results()[threadIdx.x >> 5] = warp_value;
  __syncthreads();
  tree::maybe<T> result = warp_value;
  if (threadIdx.x == 0) {
    auto& warps = *reinterpret_cast<tree::maybe<T>(*)[kWarps]>(storage.warp_results());
    result = tree::balanced(warps, op);
  }
  __syncthreads();
  return result;
}

/// Returns, in thread 0, the balanced in-order tree over the block's values
/// (thread i holds leaf i; empty leaves allowed). Pre: every thread of a block
/// of exactly Threads threads calls it; `storage` is shared memory not used by
/// anything else until this returns. Ends with the block synchronised.
template <int Threads, class T, class Op>
__device__ __forceinline__ tree::maybe<T> block_reduce(tree::maybe<T> value, const Op& op,
                                                       block_reduce_storage<T, Threads>& storage) {
  return block_combine_warps(warp_reduce(value, op), op, storage);
}

}  // namespace tally::device
