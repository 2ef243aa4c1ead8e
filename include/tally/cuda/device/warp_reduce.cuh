// Warp-wide reduction in index order.
//
// The 32 lanes' values are combined by a balanced binary tree over lane
// indices: (v0 ⊕ v1) ⊕ (v2 ⊕ v3), ... -- the same shape as tally's fixed tree
// (core/tree.hpp), so it is exact for non-commutative operators and gives the
// same bits as the CPU backend. The result lands in lane 0 (other lanes hold
// partial results); that saves the broadcast most callers do not need.
#pragma once

#include "tally/core/tree.hpp"
#include "tally/cuda/device/shuffle.cuh"

namespace tally::device {

/// Returns, in lane 0, v(lane 0) ⊕ v(lane 1) ⊕ ... ⊕ v(lane 31), combined as
/// a balanced tree in lane order. Pre: all 32 lanes call it (converged);
/// T trivially copyable, at most 32 bytes; op associative.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T value, const Op& op) {
#pragma unroll
  for (int delta = 1; delta < 32; delta <<= 1) {
    // Every lane combines (no divergence); only lanes at multiples of
    // 2·delta hold nodes of the tree, and lane 0 holds the root at the end.
    const T right = shuffle_down(value, delta);
    value = op(value, right);
  }
  return value;
}

/// warp_reduce() where some lanes may hold no value (has == false): empty
/// lanes are the tree's padding leaves. The result in lane 0 is empty only if
/// every lane was. Pre: all 32 lanes call it.
template <class T, class Op>
__device__ __forceinline__ tree::maybe<T> warp_reduce(tree::maybe<T> value, const Op& op) {
#pragma unroll
  for (int delta = 1; delta < 32; delta <<= 1) {
    tree::maybe<T> right;
    right.value = shuffle_down(value.value, delta);
    right.has = __shfl_down_sync(kFullMask, value.has ? 1 : 0, delta) != 0;
    const int lane = threadIdx.x & 31;
    if (lane + delta >= 32) right.has = false;  // shuffle_down returned our own value
    value = tree::combine(value, right, op);
  }
  return value;
}

}  // namespace tally::device
