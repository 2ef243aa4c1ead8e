// The CPU backend of reduce, transform_reduce, dot, squared_norm and sum.
//
// It evaluates the fixed tree of core/tree.hpp exactly, so its results equal
// tree::reduce_reference bit for bit. The input's vectors are cut into aligned
// power-of-two ranges (subtrees), evaluated
//
//   - with SIMD registers (cpu/tree_simd.hpp) for the common sources and
//     operators: several subtrees side by side in the lanes, each vector's
//     leaf fold done on transposed registers;
//   - otherwise by folding each vector's leaves into a local array, which is
//     then halved level by level (pairs in index order).
//
// Large inputs are shared among OpenMP threads as contiguous ranges of tiles.
// Each thread cuts its range into aligned subtrees; their values are merged in
// index order (siblings combined as they meet), and what is left is combined
// from the right, which is how the tree treats its padding (x ⊕ empty = x).
// The result depends on the element indices only, never on the thread count.
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
#include "tally/cpu/tree_simd.hpp"

namespace tally::detail::cpu_reduce {

/// The operator the loops below apply: `Op` itself, except minimum and
/// maximum on float and double, rewritten as the same choice made by selects
/// instead of early returns, which gcc can vectorise (the operators' branches
/// stop it). Same result bit for bit: NaN a, else NaN b, else the extremum.
template <class Op>
struct simd_op {
  using wrapped = Op;
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

/// Scratch for the generic path: the vector folds of one tile and the
/// half-size level beside them. On the stack while small; on the heap for
/// large accumulators (user operators on big structs), to stay well inside
/// thread stacks.
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

/// Subtrees of at least this many vectors (4 MB) are evaluated by the SIMD
/// evaluator's far kernel.
inline constexpr std::int64_t kFarVectors = std::int64_t{1} << 18;

/// Evaluates aligned subtrees of one source's tree. One per thread (it holds
/// the generic path's scratch).
template <class Source, class Op>
class subtree_evaluator {
  using Acc = typename Source::acc_type;
  static constexpr bool kSimd = cpu_simd::supported<Source, typename Op::wrapped>;

 public:
  /// Pre: src.n > 0.
  subtree_evaluator(const Source& src, const Op& op)
      : src_(src), op_(op), full_(src.n / Source::V), vectors_(tree::vector_count(src.n, Source::V)) {
    if constexpr (kSimd) {
      simd_ = cpu_simd::evaluator<Source, typename Op::wrapped>::for_this_cpu();
      // At most 4 KB of each lane's stream per SIMD subtree, so that its
      // streams stay close together in memory; larger subtrees are halved.
      // Streams 4 KB apart all fall in one set of the L1 cache, which has 8
      // or 12 ways: more than 8 lanes (floats in 64-byte registers) get 2 KB
      // each, so that at most 8 streams share a set (float sums: about 15%
      // faster from 2^14 elements on).
      const std::int64_t lanes = simd_.min_vectors / cpu_simd::kStepVectors;
      simd_max_ = lanes * (lanes > 8 ? 128 : 256);
    }
  }

  std::int64_t vectors() const { return vectors_; }

  /// The value of the aligned subtree of `size` vectors from `first` on
  /// (node(log2 size, first / size) of the tree); empty when it starts past
  /// the last vector. Pre: size is a power of two, first a multiple of it.
  tree::maybe<Acc> node(std::int64_t first, std::int64_t size) {
    if (first >= vectors_) return {Acc{}, false};
    if (first + size <= full_) return {complete(first, size), true};
    if (size == 1) return {fold_vector(src_, op_, first * Source::V, src_.n), true};  // the short last vector
    // The left half holds vector `first`; the right one may be all padding.
    const std::int64_t half = size / 2;
    const tree::maybe<Acc> left = node(first, half), right = node(first + half, half);
    return right.has ? tree::maybe<Acc>{op_(left.value, right.value), true} : left;
  }

 private:
  /// A subtree of complete vectors only.
  Acc complete(std::int64_t first, std::int64_t size) {
    if constexpr (kSimd) {
      // Past the L2 size, one far kernel call per subtree: its lanes read
      // streams far apart, which keeps more lines in flight from memory
      // than one stream does (a read probe of 8 streams a core reads up to
      // 1.6× one `parallel for simd` loop's bandwidth).
      if (size >= kFarVectors) return simd_.far(src_, first, size);
      if (size >= simd_.min_vectors && size <= simd_max_) return simd_.run(src_, first, size);
      if (size > simd_max_) return op_(complete(first, size / 2), complete(first + size / 2, size / 2));
    }
    if (size > tree::kTileVectors) return op_(complete(first, size / 2), complete(first + size / 2, size / 2));
    return generic(first, size);
  }

  /// Each vector folded into scratch (one SIMD lane per vector where the
  /// compiler can, its leaves folded in order within the lane), then halved.
  /// Pre: size <= kTileVectors, all vectors complete.
  Acc generic(std::int64_t first, std::int64_t size) {
    constexpr int V = Source::V;
    Acc* folds = scratch_.folds();
    const std::int64_t base = first * V;
#pragma omp simd
    for (std::int64_t j = 0; j < size; ++j) {
      Acc acc = src_.leaf_at(base + j * V);
      for (int k = 1; k < V; ++k) acc = op_(acc, src_.leaf_at(base + j * V + k));
      folds[j] = acc;
    }
    return reduce_levels(folds, scratch_.level(), size, op_);
  }

  const Source& src_;
  const Op& op_;
  std::int64_t full_;     // complete vectors
  std::int64_t vectors_;  // all vectors: full_, or full_ + 1 with a short last one
  tile_scratch<Acc> scratch_;
  cpu_simd::evaluator<Source, typename Op::wrapped> simd_{};
  std::int64_t simd_max_ = 0;
};

/// An aligned subtree's value, for merging.
template <class Acc>
struct subtree_value {
  std::int64_t first, size;
  Acc value;
};

/// The root from aligned subtrees that cover the vectors in order: siblings
/// are combined as they meet; what is left is the tree's spine over a count
/// that is not a power of two, combined from the right (the padding's empty
/// leaves pass values up unchanged). Uses `parts` as its stack.
/// Pre: count >= 1; parts[0..count) cover consecutive ranges from vector 0 on.
template <class Acc, class Op>
Acc merge_subtrees(subtree_value<Acc>* parts, std::int64_t count, const Op& op) {
  std::int64_t top = 0;  // the stack is parts[0..top)
  for (std::int64_t i = 0; i < count; ++i) {
    parts[top++] = parts[i];
    while (top >= 2) {
      auto& left = parts[top - 2];
      const auto& right = parts[top - 1];
      if (left.size != right.size || left.first % (2 * left.size) != 0) break;
      left.value = op(left.value, right.value);
      left.size *= 2;
      --top;
    }
  }
  Acc root = parts[top - 1].value;
  for (std::int64_t i = top - 1; i-- > 0;) root = op(parts[i].value, root);
  return root;
}

/// An array of at least n T's for one call, kept per calling thread and
/// reused by its later calls so that repeated calls do not allocate (elements
/// keep whatever was left in them). A call made while the thread's array is in
/// use (an operator that itself reduces) gets an array of its own.
template <class T>
class call_scratch {
 public:
  explicit call_scratch(std::size_t n) {
    kept& k = thread_kept();
    if (k.in_use) {
      own_.resize(n);
      data_ = own_.data();
      return;
    }
    k.in_use = true;
    held_ = &k;
    if (k.values.size() < n) k.values.resize(n);
    data_ = k.values.data();
  }
  ~call_scratch() {
    if (held_ != nullptr) held_->in_use = false;
  }
  call_scratch(const call_scratch&) = delete;
  call_scratch& operator=(const call_scratch&) = delete;
  T* data() const { return data_; }

 private:
  struct kept {
    std::vector<T> values;
    bool in_use = false;
  };
  static kept& thread_kept() {
    static thread_local kept k;
    return k;
  }
  std::vector<T> own_;
  kept* held_ = nullptr;
  T* data_ = nullptr;
};

/// Inputs of at least this many bytes (16-byte vectors) are shared among
/// threads: below, waking the team costs more than it saves.
inline constexpr std::int64_t kParallelBytes = std::int64_t{1} << 17;

/// The tree's root over all of src's leaves; empty when src.n == 0.
template <class Source, class Op>
tree::maybe<typename Source::acc_type> reduce_root(const cpu_backend& backend, const Source& src, const Op& op) {
  using Acc = typename Source::acc_type;
  if (src.n <= 0) return {Acc{}, false};
  const std::int64_t vectors = tree::vector_count(src.n, Source::V);
  const std::int64_t tiles = (vectors + tree::kTileVectors - 1) / tree::kTileVectors;
  const int threads = vectors * tree::kVectorBytes < kParallelBytes
                          ? 1
                          : static_cast<int>(std::min<std::int64_t>(tiles, thread_count(backend)));
  if (threads <= 1) {
    subtree_evaluator<Source, Op> eval(src, op);
    return eval.node(0, static_cast<std::int64_t>(tree::bit_ceil(static_cast<std::uint64_t>(vectors))));
  }
  // Thread t takes tiles [tiles·t/T, tiles·(t+1)/T) and cuts them into the
  // largest aligned subtrees that fit, left to right: fewer than two per bit
  // of the vector count. Their values go to scratch kept by the calling
  // thread, so that repeated calls do not allocate.
  const std::int64_t slots = 2 * tree::bit_width(static_cast<std::uint64_t>(vectors)) + 2;
  call_scratch<subtree_value<Acc>> part_scratch(static_cast<std::size_t>(threads * slots));
  call_scratch<std::int64_t> count_scratch(static_cast<std::size_t>(threads));
  subtree_value<Acc>* parts = part_scratch.data();
  std::int64_t* counts = count_scratch.data();
  std::fill(counts, counts + threads, 0);
#pragma omp parallel num_threads(threads)
  {
#if defined(_OPENMP)
    const int t = omp_get_thread_num(), team = omp_get_num_threads();
#else
    const int t = 0, team = 1;
#endif
    subtree_evaluator<Source, Op> eval(src, op);
    std::int64_t first = tiles * t / team * tree::kTileVectors;
    const std::int64_t end = std::min(vectors, tiles * (t + 1) / team * tree::kTileVectors);
    subtree_value<Acc>* mine = parts + t * slots;
    std::int64_t count = 0;
    while (first < end) {
      // The largest power of two that divides `first` (any, for 0) and fits.
      std::int64_t size = static_cast<std::int64_t>(tree::bit_ceil(static_cast<std::uint64_t>(end - first) + 1) / 2);
      while (first % size != 0) size /= 2;
      mine[count++] = {first, size, eval.node(first, size).value};
      first += size;
    }
    counts[t] = count;
  }
  std::int64_t total = 0;  // gather the threads' parts in order
  for (int t = 0; t < threads; ++t)
    for (std::int64_t i = 0; i < counts[t]; ++i) parts[total++] = parts[t * slots + i];
  return {merge_subtrees(parts, total, op), true};
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
