// The finishing passes of index_add's ordered sums (index_add_sums::ordered),
// after sorted_rows_kernel ran with ordered_runs: the runs that several tasks
// share left one piece in each of them -- the run's leaf 0 in the tail slot
// of the task it begins in, leaf j in the head slot of the j-th task after --
// and each run's total is the fixed balanced tree over its leaves
// (tree::balanced_fold), added to out with one rounding. The tree is cut at
// its level 10 so that no thread folds more than kOrderedNodeLeaves values:
//
//   1. ordered_nodes_kernel: every aligned subtree of kOrderedNodeLeaves
//      leaves of a run, one thread a subtree and column; a run of at most
//      that many leaves is then done, and its thread applies it to out; a
//      longer one's subtree values replace their first leaves;
//   2. ordered_long_runs_kernel: for runs of more leaves, the tree over those
//      subtree values, applied to out.
//
// A key that takes half of 7.77 M rows has 15 000 leaves: 15 subtrees, then
// one fold of 15 values, instead of 15 000 dependent additions in one thread;
// each thread loads its leaves 8 at a time (kOrderedBatchLevels).
// A thread finds a run's extent by searching the keys at task starts (the
// keys are sorted, so a run holds every task start between its ends).
#pragma once

#include <cstdint>

#include "tally/core/tree.hpp"
#include "tally/cuda/kernels/index_add_common.cuh"
#include "tally/cuda/kernels/index_add_sorted.cuh"

namespace tally::kernels::index_add {

/// Leaves of a run that one thread of ordered_nodes_kernel folds: an aligned
/// subtree of the run's tree (level kOrderedNodeLevels).
inline constexpr int kOrderedNodeLevels = 10;
inline constexpr std::int64_t kOrderedNodeLeaves = std::int64_t{1} << kOrderedNodeLevels;
/// Leaves a thread loads at once (tree::balanced_fold_batched), and the
/// blocks an SM keeps (at most 64 registers a thread). Most threads of both
/// passes only read a few keys and leave, so their speed is the warps in
/// flight; the few that fold a subtree need loads in flight instead of one
/// after another through balanced_fold's stack. H100, bf16, 7.77 M rows of
/// 128 into 1.72 M, half on one key, against the sorted path's ~1670 µs:
/// one leaf at a time (28 registers) 2157 µs, 8 at a time here 1862 (f32 at
/// D = 16: 6269 → 4948 against 4281). 32 at a time needed 128 registers (162
/// for double): a quarter of the warps for the threads that only read keys.
inline constexpr int kOrderedBatchLevels = 3;
inline constexpr int kOrderedMinBlocks = 4;

/// The key at the first position of task u.
__device__ __forceinline__ unsigned task_key(const unsigned* keys, std::int64_t u) { return keys[u * kSortedChunk]; }

/// The last task whose first position holds `key`, given that task `from`'s
/// does: a doubling search, then a halving one (a few loads for a short run).
__device__ inline std::int64_t last_task_of(const unsigned* keys, std::int64_t tasks, std::int64_t from, unsigned key) {
  std::int64_t lo = from, hi = tasks;  // task_key(lo) == key; hi: none from there on (or the end)
  for (std::int64_t step = 1; lo + step < tasks; step *= 2) {
    if (task_key(keys, lo + step) != key) {
      hi = lo + step;
      break;
    }
    lo += step;
  }
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (task_key(keys, mid) == key) lo = mid;
    else hi = mid;
  }
  return lo;
}

/// The task that holds the first position of the run at task t's first
/// position, given that the run began before it (keys[t·kSortedChunk − 1]
/// is its key too).
__device__ inline std::int64_t first_task_of(const unsigned* keys, std::int64_t t, unsigned key) {
  std::int64_t lo = -1, hi = t;  // task_key(hi) == key; lo: a task before the run's task starts (or none)
  for (std::int64_t step = 1; hi - step >= 0; step *= 2) {
    if (task_key(keys, hi - step) != key) {
      lo = hi - step;
      break;
    }
    hi -= step;
  }
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (task_key(keys, mid) == key) hi = mid;
    else lo = mid;
  }
  // hi is the first task starting with key; the run began in the task
  // before unless it begins exactly at hi's first position.
  return hi > 0 && keys[hi * kSortedChunk - 1] == key ? hi - 1 : hi;
}

/// One run's leaves for column `col`: leaf 0 in the tail slot of its first
/// task, leaf j in the head slot of task first + j. Acc may be const.
template <class Acc>
struct run_leaves {
  Acc* heads;
  Acc* tails;
  std::int64_t cols, first, col;
  __device__ __forceinline__ Acc& operator[](std::int64_t j) const {
    return (j == 0 ? tails : heads)[(first + j) * cols + col];
  }
};

/// out = out + total, rounded once to V.
template <class V, class Acc>
__device__ __forceinline__ void apply_total(V* o, Acc total) {
  *o = convert<V>(convert<Acc>(*o) + total);
}

/// Pass 1 (see the top of this file). Grid-stride over tasks × cols, the
/// column fastest (a warp's searches read the same keys). Pre: the sorted
/// keys of sorted_rows_kernel's call, whose ordered_runs wrote heads and
/// tails.
template <class I, class V>
__global__ void __launch_bounds__(kThreads, kOrderedMinBlocks)
    ordered_nodes_kernel(::tally::detail::row_scatter<I, V> p, const unsigned* keys,
                         default_accumulator_t<V>* heads, default_accumulator_t<V>* tails, V* out) {
  using Acc = default_accumulator_t<V>;
  const std::int64_t tasks = sorted_tasks(p.rows);
  const auto none = static_cast<unsigned>(p.out_rows);
  // The subtree of leaves j .. j + kOrderedNodeLeaves − 1 of the run whose
  // first task is `first`.
  const auto fold_subtree = [&](std::int64_t first, std::int64_t j, unsigned key, std::int64_t col) {
    const std::int64_t last = last_task_of(keys, tasks, first + (j > 0 ? j : 1), key);
    const std::int64_t leaves = last - first + 1;
    const run_leaves<Acc> leaf{heads, tails, p.cols, first, col};
    const std::int64_t count = leaves - j < kOrderedNodeLeaves ? leaves - j : kOrderedNodeLeaves;
    const Acc node = tree::balanced_fold_batched<kOrderedNodeLevels, kOrderedBatchLevels, Acc>(
        count, [&](std::int64_t i) { return leaf[j + i]; }, plus{});
    if (leaves <= kOrderedNodeLeaves) apply_total(out + static_cast<std::int64_t>(key) * p.out_stride + col, node);
    else leaf[j] = node;  // read by this thread only, above
  };
  for_each_task_column(p, [&](std::int64_t t, std::int64_t col) {
    const std::int64_t s0 = t * kSortedChunk;
    const std::int64_t s1 = s0 + kSortedChunk < p.rows ? s0 + kSortedChunk : p.rows;
    // The run at s1 − 1 begins in this task and goes on past it: leaf 0.
    if (s1 < p.rows) {
      const unsigned key = keys[s1 - 1];
      if (key != none && keys[s1] == key && !(s0 > 0 && keys[s0] == key && keys[s0 - 1] == key))
        fold_subtree(t, 0, key, col);
    }
    // The run at s0 began in an earlier task: this task holds its leaf j.
    if (s0 > 0) {
      const unsigned key = keys[s0];
      if (key != none && keys[s0 - 1] == key) {
        const std::int64_t first = first_task_of(keys, t, key);
        if ((t - first) % kOrderedNodeLeaves == 0) fold_subtree(first, t - first, key, col);
      }
    }
  });
}

/// Pass 2 (see the top of this file): the runs of more than
/// kOrderedNodeLeaves leaves, one thread a run and column, after
/// ordered_nodes_kernel.
template <class I, class V>
__global__ void __launch_bounds__(kThreads, kOrderedMinBlocks)
    ordered_long_runs_kernel(::tally::detail::row_scatter<I, V> p, const unsigned* keys,
                             const default_accumulator_t<V>* heads, const default_accumulator_t<V>* tails, V* out) {
  using Acc = default_accumulator_t<V>;
  const std::int64_t tasks = sorted_tasks(p.rows);
  const auto none = static_cast<unsigned>(p.out_rows);
  for_each_task_column(p, [&](std::int64_t t, std::int64_t col) {
    const std::int64_t s0 = t * kSortedChunk, s1 = s0 + kSortedChunk;
    // Only the first task of a run whose last task is kOrderedNodeLeaves or
    // more further on: a run holds every task start between its ends.
    if (t + kOrderedNodeLeaves >= tasks) return;
    const unsigned key = keys[s1 - 1];
    if (key == none || task_key(keys, t + kOrderedNodeLeaves) != key) return;
    if (s0 > 0 && keys[s0] == key && keys[s0 - 1] == key) return;  // began in an earlier task
    const std::int64_t last = last_task_of(keys, tasks, t + kOrderedNodeLeaves, key);
    const std::int64_t nodes = (last - t + kOrderedNodeLeaves) / kOrderedNodeLeaves;  // ceil(leaves / node)
    const run_leaves<const Acc> leaf{heads, tails, p.cols, t, col};
    // leaves <= 2^32 / kSortedChunk (rows < 2^32), so nodes <= 2^(24 - kOrderedNodeLevels).
    const Acc sum = tree::balanced_fold_batched<24 - kOrderedNodeLevels, kOrderedBatchLevels, Acc>(
        nodes, [&](std::int64_t k) { return leaf[k * kOrderedNodeLeaves]; }, plus{});
    apply_total(out + static_cast<std::int64_t>(key) * p.out_stride + col, sum);
  });
}

}  // namespace tally::kernels::index_add
