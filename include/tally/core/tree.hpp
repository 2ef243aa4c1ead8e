// The fixed reduction tree: the one definition of the order in which tally
// combines values, shared by every backend.
//
// The input x[0..n) is cut into vectors of V consecutive elements, V =
// vector_width<Inputs...> (16 bytes of the widest input, at least 1). The last
// vector may be short. Each vector's leaves are folded left to right:
//
//     vector j  =  ((leaf(jV) ⊕ leaf(jV+1)) ⊕ leaf(jV+2)) ⊕ ...
//
// and the vectors are combined by a balanced binary tree over vector indices,
// padded to a power of two with empty leaves (x ⊕ empty = x):
//
//     node(0, j) = vector j,   node(h+1, k) = node(h, 2k) ⊕ node(h, 2k+1).
//
// The result depends on the element indices only: not on pointers, grid
// sizes, thread counts or timing. It keeps index order, so any associative
// operator works, commutative or not. Every aligned power-of-two range of
// vectors is a subtree, which is how the backends split the work:
//
//     row   = kRowVectors  (32) vectors  -- one warp-wide 16-byte load
//     tile  = kTileVectors (1024)        -- one block step on the GPU
//     group = kGroupTiles  (1024) tiles  -- combined by the last block to finish it
//
// reduce_reference() below evaluates the tree directly; the CPU backend and
// the GPU kernels are tested bit for bit against it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "tally/core/config.hpp"

namespace tally::tree {

inline constexpr int kVectorBytes = 16;
inline constexpr int kRowVectors = 32;
inline constexpr int kTileVectors = 1024;
inline constexpr std::int64_t kGroupTiles = 1024;

/// Bits needed to write x (0 for 0). Our own, not std::bit_width: with nvcc
/// 13 and libstdc++ 12, <bit>'s functions fold to wrong constants in device
/// code.
TALLY_HD_INLINE constexpr int bit_width(std::uint64_t x) {
  int bits = 0;
  while (x != 0) {
    x >>= 1;
    ++bits;
  }
  return bits;
}

/// The smallest power of two >= x (1 for 0 and 1). See bit_width.
TALLY_HD_INLINE constexpr std::uint64_t bit_ceil(std::uint64_t x) {
  return x <= 1 ? 1 : std::uint64_t{1} << bit_width(x - 1);
}

/// Elements per vector for inputs of these types: 16 bytes of the widest one.
template <class... Inputs>
inline constexpr int vector_width = std::max<int>(1, kVectorBytes / static_cast<int>(std::max({sizeof(Inputs)...})));

/// Number of vectors that cover n elements.
constexpr std::int64_t vector_count(std::int64_t n, int v) { return (n + v - 1) / v; }

/// Number of tiles that cover n elements.
constexpr std::int64_t tile_count(std::int64_t n, int v) {
  return (vector_count(n, v) + kTileVectors - 1) / kTileVectors;
}

/// A value that may be empty: the padding leaves of the tree.
template <class T>
struct maybe {
  T value;
  bool has;
};

/// a ⊕ b where either side may be empty.
template <class T, class Op>
TALLY_HD_INLINE maybe<T> combine(const maybe<T>& a, const maybe<T>& b, const Op& op) {
  if (a.has && b.has) return {op(a.value, b.value), true};
  return a.has ? a : b;
}

/// The tree's node over K consecutive nodes of one level (K a power of two),
/// in index order: ((v0 ⊕ v1) ⊕ (v2 ⊕ v3)) ⊕ ... The one definition of this
/// combine for every fixed-width site (a warp's rows, a block's warps, a
/// thread's slots), host and device; unrolled, in place (values[0] holds the
/// result, the other entries are overwritten).
template <int K, class T, class Op>
TALLY_HD_INLINE T balanced(T (&values)[K], const Op& op) {
  static_assert(K > 0 && (K & (K - 1)) == 0, "tree::balanced combines a power of two of values");
  TALLY_UNROLL
  for (int stride = 1; stride < K; stride <<= 1)
    TALLY_UNROLL
    for (int i = 0; i + stride < K; i += 2 * stride) values[i] = op(values[i], values[i + stride]);
  return values[0];
}

/// balanced() over nodes that may be empty (padding leaves).
template <int K, class T, class Op>
TALLY_HD_INLINE maybe<T> balanced(maybe<T> (&values)[K], const Op& op) {
  static_assert(K > 0 && (K & (K - 1)) == 0, "tree::balanced combines a power of two of values");
  TALLY_UNROLL
  for (int stride = 1; stride < K; stride <<= 1)
    TALLY_UNROLL
    for (int i = 0; i + stride < K; i += 2 * stride) values[i] = combine(values[i], values[i + stride], op);
  return values[0];
}

/// The tree over `count` leaves (V = 1: leaf(j) is node(0, j)), evaluated in
/// one pass with a stack of at most MaxLevels + 1 partial nodes: after leaf j
/// the stack holds the complete subtrees of the aligned ranges that the bits
/// of j + 1 name, and the last partial ones are combined right to left, as
/// the padding's empty leaves leave them. The same result as
/// reduce_reference over `count` single-element vectors, host and device.
/// Pre: 0 < count <= 2^MaxLevels.
template <int MaxLevels, class T, class Leaf, class Op>
TALLY_HD_INLINE T balanced_fold(std::int64_t count, const Leaf& leaf, const Op& op) {
  T stack[MaxLevels + 1];
  int top = 0;  // entries in use
  for (std::int64_t j = 0; j < count; ++j) {
    stack[top++] = leaf(j);
    // A subtree is complete when j + 1 is a multiple of its size: merge
    // siblings while the low bits of j + 1 are zeros.
    for (std::uint64_t done = static_cast<std::uint64_t>(j) + 1; (done & 1) == 0; done >>= 1, --top)
      stack[top - 2] = op(stack[top - 2], stack[top - 1]);
  }
  T result = stack[top - 1];
  for (int k = top - 2; k >= 0; --k) result = op(stack[k], result);
  return result;
}

/// balanced_fold, reading the leaves 2^BatchLevels at a time: each aligned
/// batch is one subtree, its leaves loaded together (their loads in flight
/// at once, where balanced_fold's would wait on each other through its
/// stack) and combined by balanced() with the missing ones empty. The same
/// result as balanced_fold. Pre: 0 < count <= 2^MaxLevels, BatchLevels <=
/// MaxLevels.
template <int MaxLevels, int BatchLevels, class T, class Leaf, class Op>
TALLY_HD_INLINE T balanced_fold_batched(std::int64_t count, const Leaf& leaf, const Op& op) {
  constexpr int kBatch = 1 << BatchLevels;
  const std::int64_t batches = (count + kBatch - 1) / kBatch;
  return balanced_fold<MaxLevels - BatchLevels, T>(
      batches,
      [&](std::int64_t b) {
        maybe<T> v[kBatch];
        TALLY_UNROLL
        for (int i = 0; i < kBatch; ++i) {
          const std::int64_t j = b * kBatch + i;
          v[i] = {j < count ? leaf(j) : T{}, j < count};
        }
        return balanced(v, op).value;
      },
      op);
}

/// Evaluates the tree over `vectors` vectors, vector(j) giving vector j's
/// left fold. Returns empty when vectors == 0. Sequential, for reference.
template <class T, class VectorFold, class Op>
maybe<T> reduce_reference(std::int64_t vectors, const VectorFold& vector, const Op& op) {
  if (vectors <= 0) return {T{}, false};
  // Recursive halving over the padded power-of-two range; depth <= 64.
  struct walker {
    const VectorFold& vector;
    const Op& op;
    std::int64_t count;
    maybe<T> node(std::int64_t first, std::int64_t size) const {
      if (first >= count) return {T{}, false};
      if (size == 1) return {vector(first), true};
      const std::int64_t half = size / 2;
      return combine(node(first, half), node(first + half, half), op);
    }
  };
  const std::int64_t padded = static_cast<std::int64_t>(bit_ceil(static_cast<std::uint64_t>(vectors)));
  return walker{vector, op, vectors}.node(0, padded);
}

}  // namespace tally::tree
