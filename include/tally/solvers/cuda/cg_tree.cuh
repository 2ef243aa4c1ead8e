// The fixed tree (core/tree.hpp) inside the CG kernels: one block reduces an
// aligned chunk of rows to one value, and a block reduces the chunks' values
// to the root. Chunks are aligned power-of-two ranges of the tree's vectors,
// so the root equals tally::dot's tree over the same leaves, bit for bit.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tally/core/tree.hpp"
#include "tally/cuda/device/block_reduce.cuh"
#include "tally/cuda/device/shuffle.cuh"
#include "tally/cuda/device/warp_reduce.cuh"

namespace tally::solvers::kernels {

inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
/// Rows of the tree's vector (its leaves are folded kV at a time): a lane's
/// rows in the CG kernels' vector paths.
template <class T>
inline constexpr int kV = tree::vector_width<T>;

template <class S>
using block_storage = device::block_reduce_storage<S, kThreads>;

/// Reads memory another block wrote during this kernel (L2, not L1).
template <class T>
__device__ __forceinline__ T load_cg(const T* p) {
  static_assert(sizeof(T) % 4 == 0, "load_cg moves 32-bit words");
  T value;
  unsigned* words = reinterpret_cast<unsigned*>(&value);
#pragma unroll
  for (int w = 0; w < static_cast<int>(sizeof(T) / 4); ++w) words[w] = __ldcg(reinterpret_cast<const unsigned*>(p) + w);
  return value;
}

/// maybe<S> moved `delta` lanes down; empty where lane + delta is past the warp.
template <class S>
__device__ __forceinline__ tree::maybe<S> shuffle_maybe(const tree::maybe<S>& v, int delta) {
  tree::maybe<S> out;
  out.value = device::shuffle_down(v.value, delta);
  out.has = __shfl_down_sync(device::kFullMask, v.has ? 1 : 0, delta) != 0;
  if ((threadIdx.x & 31) + delta >= 32) out.has = false;
  return out;
}

/// The tree over a warp's 32 leaves (lane order, consecutive elements): V
/// leaves folded left to right into each vector, the 32/V vectors combined
/// by the balanced tree. The result is in lane 0. Pre: all lanes call it.
template <int V, class S, class Op>
__device__ __forceinline__ tree::maybe<S> warp_leaves_tree(const tree::maybe<S>& leaf, const Op& op) {
  static_assert(V >= 1 && 32 % V == 0, "vectors must tile a warp");
  tree::maybe<S> acc = leaf;
#pragma unroll
  for (int e = 1; e < V; ++e) acc = tree::combine(acc, shuffle_maybe(leaf, e), op);
#pragma unroll
  for (int delta = V; delta < 32; delta <<= 1) acc = tree::combine(acc, shuffle_maybe(acc, delta), op);
  return acc;
}

/// warp_leaves_tree when all 32 leaves are present: the same combines in the
/// same order on plain values (lane 0's result; the other lanes' are
/// meaningless), without the emptiness flags, whose handling cost more
/// instructions than the CG rows themselves (measured: ~130 a row a phase).
template <int V, class S, class Op>
__device__ __forceinline__ S warp_full_tree(const S& leaf, const Op& op) {
  S acc = leaf;
#pragma unroll
  for (int e = 1; e < V; ++e) acc = op(acc, device::shuffle_down(leaf, e));
#pragma unroll
  for (int delta = V; delta < 32; delta <<= 1) acc = op(acc, device::shuffle_down(acc, delta));
  return acc;
}

/// Every lane's subtree is present (see warp_lanes_tree).
struct all_present {
  __device__ bool operator()(int) const { return true; }
};

/// The balanced tree over values held by lanes 0 .. count − 1 (count a power
/// of two, at most 32), in lane 0: the shuffle-down tree pairs neighbours
/// first, as tree::balanced does. `present(l)` says whether the subtree that
/// starts at lane l holds any value; the empty ones must be a suffix, and a
/// combine with one is skipped (the maybe<> tree's rule, without its flags).
/// Pre: all lanes call it.
template <class S, class Op, class Present = all_present>
__device__ __forceinline__ S warp_lanes_tree(S acc, int count, const Op& op, const Present& present = {}) {
  const int lane = threadIdx.x & 31;
  for (int delta = 1; delta < count; delta <<= 1) {
    const S right = device::shuffle_down(acc, delta);
    if (present(lane + delta)) acc = op(acc, right);
  }
  return acc;
}

/// Accumulates the values of consecutive aligned equal-size subtrees (the
/// passes of a chunk) into their balanced tree: a binary counter, as in
/// kernels/reduce.cuh's serial_subtree. Used by one thread.
template <class S, int kLevels>
struct subtree_stack {
  tree::maybe<S> level[kLevels];
  int count = 0;
  template <class Op>
  __device__ __forceinline__ void push(tree::maybe<S> node, const Op& op) {
    int h = 0;
    for (int bits = count; bits & 1; bits >>= 1, ++h) node = tree::combine(level[h], node, op);
    level[h] = node;
    ++count;
  }
  /// The root once a power-of-two number (at least one) of values was pushed;
  /// empty before any push.
  __device__ __forceinline__ tree::maybe<S> root() const {
    if (count == 0) return {S{}, false};
    return level[tree::bit_width(static_cast<std::uint64_t>(count)) - 1];
  }
};

/// A phase without a several-rows-a-lane form of its leaf (see chunk_tree).
struct no_vector_leaf {};

/// The value (in thread 0) of one chunk: `passes` (a power of two, at most
/// 32) runs of kThreads rows from `first`; row i's leaf is leaf(i, view) for
/// i < n, empty beyond, where view = rows.stage(r, n) is what the warp's
/// stager gives for the 32 rows from r that hold i. `first` is a multiple of
/// kThreads·passes. Pre: the whole block calls it.
///
/// Warp w takes the chunk's w-th eighth, 32 rows at a time, and folds them
/// into its own subtree; the block combines the eight at the end. That is
/// the balanced tree over the chunk's rows, as a pass-by-pass walk of the
/// whole block would build it, with one block barrier a chunk instead of one
/// every 256 rows: a warp no longer waits for the slowest of the eight before
/// its next loads.
///
/// A chunk whose rows are all below n (every chunk but the last) takes a
/// faster path to the same bits: plain values instead of maybe<> ones, and
/// the passes' values kept one a lane (pass p in lane p) and combined by
/// shuffles at the end instead of a stack in local memory. There, when the
/// phase gives `vector_leaf` (vector_leaf(i0): the leaves of rows i0 .. i0 +
/// V − 1 folded left to right, which is the tree's vector of V leaves) and
/// passes >= V, lane l takes the V rows of the warp's l-th vector of each
/// 32·V rows: a stencil row's neighbours and the vectors' elements are then
/// read once for V rows.
template <int V, class S, class Op, class Rows, class Leaf, class VectorLeaf = no_vector_leaf>
__device__ tree::maybe<S> chunk_tree(std::int64_t first, int passes, std::int64_t n, const Rows& rows,
                                     const Leaf& leaf, const Op& op, block_storage<S>& storage,
                                     const VectorLeaf& vector_leaf = {}) {
  const std::int64_t warp_first = first + static_cast<std::int64_t>(threadIdx.x / 32) * 32 * passes;
  const int lane = threadIdx.x & 31;
  if (first + static_cast<std::int64_t>(kThreads) * passes <= n) {  // block-uniform
    // Lane p holds the value of the warp's pass p; their tree is the warp's.
    const auto warp_tree = [&](const S& held, int count) {
      const S root = warp_lanes_tree(held, count, op);
      return device::block_combine_warps<kThreads>(tree::maybe<S>{root, lane == 0}, op, storage);
    };
    S held{};
    if constexpr (!std::is_same_v<VectorLeaf, no_vector_leaf>) {
      if (passes >= V) {
        for (int pass = 0; pass < passes / V; ++pass) {
          const std::int64_t row0 = warp_first + static_cast<std::int64_t>(pass) * 32 * V;
          const S value = device::shuffle(warp_lanes_tree(vector_leaf(row0 + V * lane), 32, op), 0);
          if (lane == pass) held = value;
        }
        return warp_tree(held, passes / V);
      }
    }
    for (int pass = 0; pass < passes; ++pass) {
      const std::int64_t row0 = warp_first + static_cast<std::int64_t>(pass) * 32;
      const auto view = rows.stage(row0, n);
      const S value = device::shuffle(warp_full_tree<V>(leaf(row0 + lane, view), op), 0);
      if (lane == pass) held = value;
    }
    return warp_tree(held, passes);
  }
  subtree_stack<S, 6> stack;  // used by lane 0
  for (int pass = 0; pass < passes; ++pass) {
    const std::int64_t row0 = warp_first + static_cast<std::int64_t>(pass) * 32;
    tree::maybe<S> mine{S{}, false};
    if (row0 < n) {  // warp-uniform
      const auto view = rows.stage(row0, n);
      const std::int64_t i = row0 + lane;
      if (i < n) mine = {leaf(i, view), true};
    }
    const auto warp_value = warp_leaves_tree<V>(mine, op);
    if (lane == 0) stack.push(warp_value, op);
  }
  tree::maybe<S> warp_value{S{}, false};
  if (lane == 0) warp_value = stack.root();
  return device::block_combine_warps<kThreads>(warp_value, op, storage);
}

/// The balanced tree over values[0, present) in slots of a group of `group`
/// (a power of two <= N; present <= group, the values a prefix): an aligned
/// subtree of the root's tree when each value is one of a chunk (or of an
/// aligned group of vectors), combined in values[0] and returned. Unrolled
/// over N, so that a local array stays in registers. Used by one thread.
template <int N, class S, class Op>
__device__ __forceinline__ S group_tree(S (&values)[N], int group, int present, const Op& op) {
#pragma unroll
  for (int width = 1; width < N; width <<= 1) {
#pragma unroll
    for (int k = 0; k + width < N; k += 2 * width)
      if (width < group && k + width < present) values[k] = op(values[k], values[k + width]);
  }
  return values[0];
}

/// The balanced tree over value(0) .. value(present − 1) in a run of N slots
/// (N a power of two; present <= N, the values a prefix, the rest skipped as
/// the maybe<> tree skips empty subtrees): group_tree's result, computed as
/// the values arrive through a binary counter of log2(N) + 1 partial
/// subtrees, so that a thread holds those rather than N values. Used by one
/// thread; value(k) is called for k < present only, in order.
template <int N, class S, class Value, class Op>
__device__ __forceinline__ S prefix_tree(int present, const Value& value, const Op& op) {
  constexpr int kLevels = __builtin_ctz(N) + 1;
  S level[kLevels];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if (k < present) {
      S carry = value(k);
#pragma unroll
      for (int h = 0; h < kLevels; ++h) {  // k's trailing ones: the subtrees this one completes
        if ((k >> h) & 1) {
          carry = op(level[h], carry);
        } else {
          level[h] = carry;
          break;
        }
      }
    }
  }
  // The pending subtrees of `present`, the smaller on the right.
  S root{};
  bool any = false;
#pragma unroll
  for (int h = 0; h < kLevels; ++h) {
    if ((present >> h) & 1) {
      root = any ? op(level[h], root) : level[h];
      any = true;
    }
  }
  return root;
}

/// The tree's root (in thread 0) over values[0, count) (each an aligned
/// subtree of one size, in index order), read through L2. Pre: the whole
/// block calls it; count >= 1; the values were written before a grid-wide
/// barrier or a fence this block synchronised with.
template <class S, class Op>
__device__ tree::maybe<S> root_tree(const S* values, std::int64_t count, const Op& op, block_storage<S>& storage) {
  const std::int64_t padded = static_cast<std::int64_t>(tree::bit_ceil(static_cast<std::uint64_t>(count)));
  if (padded <= static_cast<std::int64_t>(kWarps) * 32 * 32) {
    // Warp w: the aligned run of span = max(padded / kWarps, 32) values from
    // w·span, read 32 consecutive ones at a time (coalesced, independent
    // loads), each 32 folded by a shuffle tree and the groups' values (group
    // k in lane k) by another. The values past `count` are a suffix, so an
    // empty subtree is one that starts at or past `count`: skipping those
    // combines is the maybe<> tree's rule, without its flags (and makes the
    // tree over kWarps·span slots the tree over `padded` when padded is
    // smaller). Every block does this after each grid barrier: a per-thread
    // run folded through a stack in local memory was ~13 % of the persistent
    // kernel's stall samples at g = 128, and a flagged block reduce of the
    // 117 values at g = 31 cost 0.5 µs an iteration.
    const int lane = threadIdx.x & 31;
    const std::int64_t span = padded / kWarps > 32 ? padded / kWarps : 32;
    const std::int64_t warp_first = static_cast<std::int64_t>(threadIdx.x / 32) * span;
    const int groups = static_cast<int>(span / 32);
    S held{};
    for (int k = 0; k < groups; ++k) {
      const std::int64_t first = warp_first + 32 * k;
      const S value = first + lane < count ? load_cg(values + first + lane) : S{};
      const S group = device::shuffle(warp_lanes_tree(value, 32, op, [&](int l) { return first + l < count; }), 0);
      if (lane == k) held = group;
    }
    held = warp_lanes_tree(held, groups, op, [&](int l) { return warp_first + 32 * l < count; });
    return device::block_combine_warps<kThreads>(tree::maybe<S>{held, warp_first < count}, op, storage);
  }
  // Thread t: the aligned run [t·per, (t+1)·per), a subtree of its own.
  const std::int64_t per = padded / kThreads;
  const std::int64_t first = threadIdx.x * per;
  subtree_stack<S, 24> stack;  // per <= 2^23
  for (std::int64_t k = 0; k < per; ++k) {
    tree::maybe<S> node{S{}, false};
    if (first + k < count) node = {load_cg(values + first + k), true};
    stack.push(node, op);
  }
  return device::block_reduce<kThreads>(stack.root(), op, storage);
}

}  // namespace tally::solvers::kernels
