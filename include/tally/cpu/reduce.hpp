// The CPU backend of reduce, transform_reduce, dot, squared_norm and sum.
//
// It evaluates the fixed tree of core/tree.hpp exactly, so its results equal
// tree::reduce_reference bit for bit:
//
//   1. Tiles (kTileVectors vectors, an aligned subtree) are shared among the
//      OpenMP threads. Per tile, each vector's leaves are folded left to right
//      into a local array, which is then halved level by level (pairs in index
//      order) down to the tile's value.
//   2. The tile values are halved the same way, in parallel blocks of
//      kBlockTiles (again aligned subtrees) while there are many of them.
//
// Empty leaves only ever pad the end of the input, so halving a level of m
// values gives ceil(m / 2): pairs combined, an odd last value carried up
// unchanged (x ⊕ empty = x). That is the whole tree; no padding is stored.
//
// Host code only: it compiles with g++ and in nvcc's host pass alike.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include "tally/core/backend.hpp"
#include "tally/core/operators.hpp"
#include "tally/core/options.hpp"
#include "tally/core/tree.hpp"

namespace tally::detail::cpu_reduce {

/// Tile values halved per parallel task when there are many tiles: an aligned
/// power of two, so every block is a subtree.
inline constexpr std::int64_t kBlockTiles = 1024;

/// The operator the loops below apply: `Op` itself, except minimum and
/// maximum on float and double, rewritten as the same choice made by selects
/// instead of early returns, which gcc can vectorise (the operators' branches
/// stop it). Same result bit for bit: NaN a, else NaN b, else the extremum.
template <class Op>
struct simd_op {
  const Op& op;
  template <class T>
  T operator()(const T& a, const T& b) const {
    constexpr bool is_min = std::is_same_v<Op, minimum>, is_max = std::is_same_v<Op, maximum>;
    if constexpr ((is_min || is_max) && std::is_floating_point_v<T>) {
      T r = is_min ? (b < a ? b : a) : (a < b ? b : a);
      r = (b != b) ? b : r;
      return (a != a) ? a : r;
    } else {
      return op(a, b);
    }
  }
};

/// Leaves per tile.
template <class Source>
inline constexpr std::int64_t kTileLeaves = std::int64_t{tree::kTileVectors} * Source::V;

/// Threads an OpenMP region should use for `backend`.
inline int thread_count(const cpu_backend& backend) {
#if defined(_OPENMP)
  return backend.threads > 0 ? backend.threads : omp_get_max_threads();
#else
  (void)backend;
  return 1;
#endif
}

/// One level of the tree: to[k] = from[2k] ⊕ from[2k+1] for the pairs, and
/// the odd last value of `from` (if any) carried up. Returns ceil(m / 2).
/// Pre: from holds m >= 1 values; to holds ceil(m / 2); they do not overlap.
template <class Acc, class Op>
inline std::int64_t halve(const Acc* __restrict from, std::int64_t m, Acc* __restrict to, const Op& op) {
  const std::int64_t pairs = m / 2;
#pragma omp simd
  for (std::int64_t k = 0; k < pairs; ++k) to[k] = op(from[2 * k], from[2 * k + 1]);
  if (m % 2 != 0) to[pairs] = from[m - 1];
  return pairs + m % 2;
}

/// The value of the subtree over the m values in `a` (an aligned subtree's
/// children, empties beyond m). Halves between `a` and `b` until one is left.
/// Pre: m >= 1; a holds m values and is overwritten; b holds ceil(m / 2).
template <class Acc, class Op>
inline Acc reduce_levels(Acc* a, Acc* b, std::int64_t m, const Op& op) {
  while (m > 1) {
    m = halve(a, m, b, op);
    std::swap(a, b);
  }
  return a[0];
}

/// Scratch for one tile: the vector folds and the half-size level beside
/// them. On the stack while small; on the heap for large accumulators (user
/// operators on big structs), to stay well inside thread stacks.
template <class Acc>
class tile_scratch {
  static constexpr std::int64_t kCount = tree::kTileVectors + tree::kTileVectors / 2;
  static constexpr bool kOnStack = kCount * sizeof(Acc) <= 48 * 1024;

 public:
  tile_scratch() {
    if constexpr (!kOnStack) heap_ = std::make_unique<Acc[]>(kCount);
  }
  Acc* folds() { return data(); }
  Acc* level() { return data() + tree::kTileVectors; }

 private:
  Acc* data() {
    if constexpr (kOnStack) return stack_;
    else return heap_.get();
  }
  struct none {};
  [[no_unique_address]] std::conditional_t<kOnStack, Acc[kCount], none> stack_;
  std::unique_ptr<Acc[]> heap_;
};

/// Left fold of one vector's leaves [first, last).
/// Pre: first < last <= first + V.
template <class Source, class Op>
inline typename Source::acc_type fold_vector(const Source& src, const Op& op, std::int64_t first, std::int64_t last) {
  auto acc = src.leaf_at(first);
  for (std::int64_t i = first + 1; i < last; ++i) acc = op(acc, src.leaf_at(i));
  return acc;
}

/// The value of tile t: node(log2 kTileVectors, t) of the tree.
/// Pre: tile t holds at least one leaf (t < tile_count(src.n, V)).
template <class Source, class Op>
typename Source::acc_type reduce_tile(const Source& src, const Op& op, std::int64_t t,
                                      tile_scratch<typename Source::acc_type>& scratch) {
  using Acc = typename Source::acc_type;
  constexpr int V = Source::V;
  const std::int64_t first = t * kTileLeaves<Source>;
  const std::int64_t leaves = std::min(kTileLeaves<Source>, src.n - first);
  const std::int64_t full_vectors = leaves / V;  // all but a short last vector
  Acc* folds = scratch.folds();
  // Each vector's fold is independent of the others: one SIMD lane per vector,
  // its V leaves folded in order within the lane (no reassociation).
#pragma omp simd
  for (std::int64_t j = 0; j < full_vectors; ++j) {
    const std::int64_t base = first + j * V;
    Acc acc = src.leaf_at(base);
    for (int k = 1; k < V; ++k) acc = op(acc, src.leaf_at(base + k));
    folds[j] = acc;
  }
  std::int64_t vectors = full_vectors;
  if (leaves % V != 0) folds[vectors++] = fold_vector(src, op, first + full_vectors * V, first + leaves);
  return reduce_levels(folds, scratch.level(), vectors, op);
}

/// The root over the tile values in `tiles` (overwritten), in parallel
/// blocks of kBlockTiles while there are several blocks.
template <class Acc, class Op>
Acc reduce_tile_values(std::vector<Acc>& tiles, const Op& op, [[maybe_unused]] int threads) {
  std::int64_t m = static_cast<std::int64_t>(tiles.size());
  std::vector<Acc> other((m + 1) / 2);
  while (m > 2 * kBlockTiles) {
    const std::int64_t blocks = (m + kBlockTiles - 1) / kBlockTiles;
    // Each block halves within its own slices of `tiles` and `other`, so the
    // blocks are independent; their roots go to a fresh array.
    std::vector<Acc> roots(blocks);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t begin = b * kBlockTiles;
      const std::int64_t count = std::min(kBlockTiles, m - begin);
      roots[b] = reduce_levels(tiles.data() + begin, other.data() + begin / 2, count, op);
    }
    tiles.swap(roots);
    m = blocks;
  }
  return reduce_levels(tiles.data(), other.data(), m, op);
}

/// The tree's root over all of src's leaves; empty when src.n == 0.
template <class Source, class Op>
tree::maybe<typename Source::acc_type> reduce_root(const cpu_backend& backend, const Source& src, const Op& op) {
  using Acc = typename Source::acc_type;
  if (src.n <= 0) return {Acc{}, false};
  const std::int64_t tiles = tree::tile_count(src.n, Source::V);
  if (tiles == 1) {  // small inputs: no thread start-up, no allocation
    tile_scratch<Acc> scratch;
    return {reduce_tile(src, op, 0, scratch), true};
  }
  // A thread is worth starting only for a few tiles of work (each tile is
  // 16 KB of input); below that, waking the team costs more than it saves.
  constexpr std::int64_t kTilesPerThread = 8;
  const int threads =
      static_cast<int>(std::clamp<std::int64_t>(tiles / kTilesPerThread, 1, thread_count(backend)));
  std::vector<Acc> values(tiles);
#pragma omp parallel num_threads(threads)
  {
    tile_scratch<Acc> scratch;  // one per thread, reused for each of its tiles
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < tiles; ++t) values[t] = reduce_tile(src, op, t, scratch);
  }
  return {reduce_tile_values(values, op, threads), true};
}

}  // namespace tally::detail::cpu_reduce

namespace tally::detail {

/// CPU backend of every reduction: *out = fin(root), root being the fixed
/// tree's value over src's leaves (empty when src.n == 0).
/// Pre: src's arrays and out are host memory, already validated by the caller;
/// src.n >= 0. Uses backend.threads OpenMP threads (0: OpenMP's default).
/// Post: *out written; the value does not depend on the thread count.
template <class Source, class Op, class Out, class Finalize>
void execute_reduce(const cpu_backend& backend, const Source& src, const Op& op, Out* out, const Finalize& fin,
                    const options&, const char*) {
  *out = fin(cpu_reduce::reduce_root(backend, src, cpu_reduce::simd_op<Op>{op}));
}

/// Runs run(&result) on a host temporary and returns the result.
template <class Out, class Run>
Out value_of(const cpu_backend&, const Run& run) {
  Out result{};
  run(&result);
  return result;
}

}  // namespace tally::detail
