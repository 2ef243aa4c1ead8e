// The sorted_rows strategy of index_add: the rows' keys are radix-sorted with
// their row numbers (CUB, dispatch in cuda/index_add.cuh), so that each key's
// rows form one run of sorted positions. A warp takes kSortedChunk positions
// and, lanes over columns (16 bytes each; narrow rows: several tasks a warp),
// sums each run in registers in row order. A run that no other chunk shares updates its output row with a plain
// read-modify-write; the pieces of a run cut by a chunk boundary go through
// the sink's atomics. Each output row is thus read and written about once,
// where atomics from rows in random order re-fetch rows that L2 cannot hold
// (7.77 M rows of 128 floats into 1.72 M: 880 MB of output; measured 4.7 ms
// with warp-aggregated atomics against a 1.9 ms floor).
#pragma once

#include <cstdint>
#include <cstring>

#include "tally/core/fixed_point_rounding.hpp"
#include "tally/core/index_add_sums.hpp"
#include "tally/core/row_scatter.hpp"
#include "tally/cuda/kernels/histogram_common.cuh"
#include "tally/cuda/kernels/index_add_common.cuh"

namespace tally::kernels::index_add {

/// Sorted positions a warp takes at a time. Larger: fewer atomics on the
/// pieces of long runs (a key that takes half of 7.77 M rows is cut into
/// 15 000 pieces); smaller: more warps on short inputs. Ordered sums
/// (index_add_sums::ordered) define their pieces by it.
inline constexpr int kSortedChunk = static_cast<int>(::tally::detail::kOrderedPieceRows);
/// Rows of a run whose loads a lane issues together (memory-level parallelism).
/// 8 was slower for bfloat16 (3.7 against 2.3 ms at 128 wide: more registers).
inline constexpr int kSortedUnroll = 4;
/// What 2-byte values in groups of 8 lanes or more take instead (sorted_unroll).
inline constexpr int kSortedUnrollNarrowValues = 2;
/// Blocks an SM runs at least: 64 registers a thread. The kernel is latency-
/// bound (a lane waits on its keys, then on kSortedUnroll rows at a time), so
/// warps in flight set its speed. Left free, bfloat16 rows took 128 registers
/// and 2 blocks an SM (ncu: 24 % occupancy, DRAM 40 % of peak); on the H100,
/// 7.77 M rows of 128 bfloat16 into 1.72 M, half to one row: 2272 µs with 2
/// blocks, 1802 with 3 (80 registers), 1754 with 4 (64, 144 bytes spilled);
/// float (62 registers at 4, none spilled) and double (64 either way) the same.
inline constexpr int kSortedMinBlocks = 4;

/// Tasks of kSortedChunk sorted positions over `rows` rows (one slot each in
/// deterministic calls).
__host__ __device__ constexpr std::int64_t sorted_tasks(std::int64_t rows) {
  return (rows + kSortedChunk - 1) / kSortedChunk;
}

/// Lanes that share a task: enough 16-byte chunks to cover a row, as a power
/// of two from 4 (kSortedUnroll rows broadcast at a time) to 32. A warp runs
/// 32 / group tasks side by side, so narrow rows keep every lane busy (a
/// 128-wide bfloat16 row is 16 chunks: one task per warp would leave half the
/// lanes idle).
template <class V>
__host__ __device__ constexpr int sorted_group(std::int64_t cols) {
  const std::int64_t chunks = (cols + kChunk<V> - 1) / kChunk<V>;
  int group = 4;
  while (group < 32 && group < chunks) group *= 2;
  return group;
}

/// Rows a lane loads together in sorted_rows_kernel for values V in groups of
/// `group` lanes. At 4, 2-byte values spilled at the 64-register cap (bfloat16:
/// 118/128 bytes; at 2, 12/16); on the H100, 7.77 M rows of 128 bfloat16 into
/// 1.72 M, half to one row, took 1676 µs at 4 and 1569 at 2. Groups of 4 lanes
/// (rows of at most 32 bfloat16) keep 4: a batch there covers the whole group,
/// and 2 would double the waits a group; not measured at 2.
template <class V>
__host__ __device__ constexpr int sorted_unroll(int group) {
  return sizeof(V) == 2 && group >= 8 ? kSortedUnrollNarrowValues : kSortedUnroll;
}

/// Column tiles of a task: `group` lanes of kChunk<V> values each.
template <class V>
__host__ __device__ constexpr std::int64_t sorted_tiles(std::int64_t cols, int group) {
  return (cols + group * kChunk<V> - 1) / (group * kChunk<V>);
}

/// keys[i] = index[i] where it lies in [0, out_rows), else out_rows (which
/// sorts after every valid key and is never summed; recorded in `report`);
/// rows_of[i] = i. Pre: out_rows < 2^32 − 1, rows < 2^32 (sorted_rows_fit).
template <class I>
__global__ void __launch_bounds__(kThreads)
    sort_keys_kernel(const I* index, std::int64_t rows, std::int64_t out_rows, unsigned* keys, unsigned* rows_of,
                     histogram::out_of_range_report report) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < rows; i += step) {
    const auto k = static_cast<std::int64_t>(index[i]);
    const bool valid = k >= 0 && k < out_rows;
    if (!valid) report.record(i);
    keys[i] = static_cast<unsigned>(valid ? k : out_rows);
    rows_of[i] = static_cast<unsigned>(i);
  }
}

/// *o = op(*o, acc) for `count` elements (a run no other warp touches).
template <class V, class Acc, class Op>
__device__ __forceinline__ void update_owned(V* o, const Acc (&acc)[kChunk<V>], int count, const Op& op) {
  constexpr int W = kChunk<V>;
  if (count == W && aligned_to(o, 16)) {
    int4 raw = *reinterpret_cast<const int4*>(o);
    V current[W];
    memcpy(current, &raw, 16);
#pragma unroll
    for (int e = 0; e < W; ++e) current[e] = convert<V>(op(convert<Acc>(current[e]), acc[e]));
    memcpy(&raw, current, 16);
    *reinterpret_cast<int4*>(o) = raw;
  } else {
#pragma unroll
    for (int e = 0; e < W; ++e)
      if (e < count) o[e] = convert<V>(op(convert<Acc>(o[e]), acc[e]));
  }
}

/// The first sorted position of `key` in keys[0, end) (keys sorted).
__device__ __forceinline__ std::int64_t first_position(const unsigned* keys, std::int64_t end, unsigned key) {
  std::int64_t lo = 0, hi = end;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// Where a piece of a run that several tasks share lies: in task `task`
/// (positions s0 .. s0 + kSortedChunk), as its first run, which began in an
/// earlier task (`head`), or as its last, which begins in it and goes on past
/// it. A run that covers the whole task is its head.
struct piece_at {
  std::int64_t task;
  bool head;
  const unsigned* keys;
  std::int64_t s0;
  unsigned run;
  /// The task that holds the run's first position.
  __device__ __forceinline__ std::int64_t first_task() const {
    return head ? first_position(keys, s0, run) / kSortedChunk : task;
  }
};

/// How sorted_rows_kernel sums and applies runs, plain: values in the
/// accumulator type; a run no other task shares updates its output row in
/// place (update_owned), a piece of a shared run goes through the sink's
/// atomics.
template <class V, class Op>
struct plain_runs {
  using acc_type = default_accumulator_t<V>;
  Op op;
  V* out;
  std::int64_t out_stride;
  out_sink<V, Op> sink;
  /// The batch of kSortedUnroll rows summed unrolled (flush inlined at each
  /// row): rolled, this kernel ran 2298 against 1732 µs (bfloat16, 7.77 M rows
  /// of 128 into 1.72 M, half to one row).
  static constexpr bool kRolled = false;
  __device__ __forceinline__ plain_runs resolved() const { return *this; }
  __device__ __forceinline__ acc_type value(const V& v) const { return convert<acc_type>(v); }
  __device__ __forceinline__ acc_type combine(acc_type a, acc_type b) const { return op(a, b); }
  __device__ __forceinline__ void owned(std::int64_t key, std::int64_t c, const acc_type (&acc)[kChunk<V>],
                                        int count) const {
    update_owned(out + key * out_stride + c, acc, count, op);
  }
  __device__ __forceinline__ void piece(std::int64_t key, std::int64_t c, const acc_type (&acc)[kChunk<V>], int count,
                                        const piece_at&) const {
    sink.add(key, c, acc, count);
  }
};

/// Deterministic runs (histogram_options::deterministic): values as int64
/// fixed point, summed exactly; an owned run's sum is rounded once into its
/// output element (as fixed_point_rows_finish_kernel does); the pieces of a
/// shared run are added (exactly, int64 atomics) to the sums of its slot --
/// the task holding the run's first position -- which
/// sorted_pieces_finish_kernel applies afterwards.
template <class V>
struct fixed_point_runs {
  using acc_type = long long;
  fixed_point_values values;
  V* out;
  std::int64_t out_stride;
  unsigned long long* sums;  ///< tasks' slots × cols
  std::int64_t cols;
  const int* bits_on_device;  ///< derived scale, or null: `bits`
  int bits;
  /// The batch summed by a rolled loop with one call site of flush: unrolled,
  /// the kernel's code outgrew the instruction cache (ncu: 67 % of the stalls
  /// waiting for an instruction fetch); rolled, 6552 → 4212 µs for bfloat16
  /// (the problem of plain_runs::kRolled), 4439 → 4337 for float.
  static constexpr bool kRolled = true;
  /// A copy with the derived scale read from the device once (it is written
  /// before the kernel starts).
  __device__ __forceinline__ fixed_point_runs resolved() const {
    fixed_point_runs r = *this;
    r.values = values.resolved();
    if (bits_on_device) {
      r.bits = *bits_on_device;
      r.bits_on_device = nullptr;
    }
    return r;
  }
  __device__ __forceinline__ acc_type value(const V& v) const { return values(v); }
  __device__ __forceinline__ acc_type combine(acc_type a, acc_type b) const {
    return static_cast<long long>(static_cast<unsigned long long>(a) + static_cast<unsigned long long>(b));
  }
  __device__ __forceinline__ void owned(std::int64_t key, std::int64_t c, const acc_type (&acc)[kChunk<V>],
                                        int count) const {
    const int s = bits_on_device ? *bits_on_device : bits;
    V* o = out + key * out_stride + c;
#pragma unroll
    for (int e = 0; e < kChunk<V>; ++e)
      if (e < count) o[e] = ::tally::detail::add_fixed_point(o[e], acc[e], s);
  }
  __device__ __forceinline__ void piece(std::int64_t, std::int64_t c, const acc_type (&acc)[kChunk<V>], int count,
                                        const piece_at& at) const {
    unsigned long long* p = sums + at.first_task() * cols + c;
#pragma unroll
    for (int e = 0; e < kChunk<V>; ++e)
      if (e < count && acc[e] != 0) atomicAdd(p + e, static_cast<unsigned long long>(acc[e]));
  }
};

/// Ordered runs (index_add_sums::ordered): values in the accumulator type,
/// summed left to right; an owned run is added to its output row in place
/// (its one piece is the whole tree), and a piece of a shared run is stored
/// in its task's head or tail slot, which the ordered finishing kernels
/// (index_add_ordered.cuh) combine by the fixed tree. Unrolled, as plain_runs.
template <class V>
struct ordered_runs {
  using acc_type = default_accumulator_t<V>;
  V* out;
  std::int64_t out_stride;
  acc_type* heads;  ///< tasks × cols: the piece of the run each task continues
  acc_type* tails;  ///< tasks × cols: the piece of the run that begins in a task and goes on past it
  std::int64_t cols;
  static constexpr bool kRolled = false;
  __device__ __forceinline__ ordered_runs resolved() const { return *this; }
  __device__ __forceinline__ acc_type value(const V& v) const { return convert<acc_type>(v); }
  __device__ __forceinline__ acc_type combine(acc_type a, acc_type b) const { return plus{}(a, b); }
  __device__ __forceinline__ void owned(std::int64_t key, std::int64_t c, const acc_type (&acc)[kChunk<V>],
                                        int count) const {
    update_owned(out + key * out_stride + c, acc, count, plus{});
  }
  __device__ __forceinline__ void piece(std::int64_t, std::int64_t c, const acc_type (&acc)[kChunk<V>], int count,
                                        const piece_at& at) const {
    acc_type* slot = (at.head ? heads : tails) + at.task * cols + c;
#pragma unroll
    for (int e = 0; e < kChunk<V>; ++e)
      if (e < count) slot[e] = acc[e];
  }
};

/// out[key] ⊕= src rows, for the sorted positions of p's rows: keys (sorted,
/// out_rows for rows out of range, which sort last) and rows_of (each
/// position's row). Grid-stride over the tasks (kSortedChunk positions × a
/// tile of group·kChunk<V> columns), 32 / group tasks a warp at a time; the
/// loops are warp-uniform (every lane of a warp goes round them together, so
/// the groups' broadcasts may use the full mask) and each group's state
/// (run, flags) is uniform within the group; U rows a lane are loaded
/// together. Pre: blockDim.x == kThreads, p.rows and p.cols > 0,
/// group == sorted_group<V>(p.cols), U == sorted_unroll<V>(group).
template <class I, class V, class Runs, int U>
__global__ void __launch_bounds__(kThreads, kSortedMinBlocks)
    sorted_rows_kernel(::tally::detail::row_scatter<I, V> p, const unsigned* keys, const unsigned* rows_of,
                       Runs given_runs, int group) {
  const Runs runs = given_runs.resolved();
  using Acc = typename Runs::acc_type;
  constexpr int W = kChunk<V>;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int member = lane & (group - 1);
  const int per_warp = 32 / group;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (kThreads / 32);
  const std::int64_t warp = static_cast<std::int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  const std::int64_t tile = static_cast<std::int64_t>(group) * W;
  const std::int64_t tiles = sorted_tiles<V>(p.cols, group);
  const std::int64_t tasks = sorted_tasks(p.rows) * tiles;
  const auto none = static_cast<unsigned>(p.out_rows);  // never a valid key
  for (std::int64_t first_task = warp * per_warp; first_task < tasks; first_task += warps * per_warp) {
    const std::int64_t task = first_task + lane / group;
    const bool live = task < tasks;
    const std::int64_t chunk = live ? task / tiles : 0;
    const std::int64_t c = (task - chunk * tiles) * tile + static_cast<std::int64_t>(member) * W;
    const int count = live && c < p.cols ? static_cast<int>(p.cols - c < W ? p.cols - c : W) : 0;
    const std::int64_t s0 = chunk * kSortedChunk;
    const std::int64_t s1 = !live ? s0 : s0 + kSortedChunk < p.rows ? s0 + kSortedChunk : p.rows;
    const unsigned before = live && s0 > 0 ? keys[s0 - 1] : none, after = live && s1 < p.rows ? keys[s1] : none;
    unsigned run = live ? keys[s0] : none;
    // A task whose first key is none holds only rows out of range: nothing to sum.
    const bool any = run != none;
    bool ended = !any;
    bool shared = run == before;
    // A run's sum starts at its first row's values (not at the identity:
    // 0 + (−0) would lose the sign of an all −0 sum).
    bool first = true;
    Acc acc[W];
    bool first_run = true;  // the run at s0, which may continue one from earlier tasks
    auto flush = [&](bool shared_run) {
      if (count == 0) return;
      const auto key = static_cast<std::int64_t>(run);
      if (!shared_run) return runs.owned(key, c, acc, count);
      runs.piece(key, c, acc, count, piece_at{chunk, first_run && run == before, keys, s0, run});
    };
    // One row of the run's positions: key (none: the rest of the task is rows
    // out of range or past s1, group-uniform) and its values.
    auto take = [&](unsigned key, const V(&row)[W]) {
      ended = ended || key == none;
      if (ended) return;
      if (key != run) {
        flush(shared);
        run = key;
        shared = false;
        first = true;
        first_run = false;
      }
#pragma unroll
      for (int e = 0; e < W; ++e)
        if (e < count) acc[e] = first ? runs.value(row[e]) : runs.combine(acc[e], runs.value(row[e]));
      first = false;
    };
    for (int offset = 0; offset < kSortedChunk; offset += group) {
      if (__all_sync(kFull, ended)) break;
      const std::int64_t s = s0 + offset + member;
      const unsigned my_key = !ended && s < s1 ? keys[s] : none;
      const unsigned my_row = !ended && s < s1 ? rows_of[s] : 0u;
      for (int j = 0; j < group; j += U) {
        unsigned k[U];
        V v[U][W];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          k[u] = __shfl_sync(kFull, my_key, j + u, group);
          const auto r = static_cast<std::int64_t>(__shfl_sync(kFull, my_row, j + u, group));
          if (k[u] != none && count > 0) load_chunk(p.src + r * p.src_stride + c, count, v[u]);
        }
        if constexpr (Runs::kRolled) {
          // One call site of take: row 0 of the batch, the batch rotated after each.
#pragma unroll 1
          for (int u = 0; u < U; ++u) {
            take(k[0], v[0]);
#pragma unroll
            for (int i = 0; i + 1 < U; ++i) {
              k[i] = k[i + 1];
#pragma unroll
              for (int e = 0; e < W; ++e) v[i][e] = v[i + 1][e];
            }
          }
        } else {
#pragma unroll
          for (int u = 0; u < U; ++u) take(k[u], v[u]);
        }
      }
    }
    if (any) flush(shared || run == after);
  }
}

/// Calls f(task, col) for this thread's share of the tasks × columns of a
/// sorted_rows call, grid-stride, the column fastest (a warp's reads of a
/// task's keys are then one address): the finishing passes' loop.
template <class I, class V, class F>
__device__ __forceinline__ void for_each_task_column(const ::tally::detail::row_scatter<I, V>& p, const F& f) {
  const std::int64_t total = sorted_tasks(p.rows) * p.cols;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= total) return;
  for (element_walk at(e, step, p.cols); e < total; e += step, at.advance()) f(at.row, at.col);
}

/// Deterministic sorted_rows, after sorted_rows_kernel: for every task whose
/// last run starts in it and goes on into the next task, out[key] = out +
/// (the run's int64 sum, in the task's slot, ·2^-s rounded once to V),
/// rounded once more. Grid-stride over tasks × cols.
template <class I, class V>
__global__ void __launch_bounds__(kThreads)
    sorted_pieces_finish_kernel(::tally::detail::row_scatter<I, V> p, const unsigned* keys, const long long* sums,
                                const int* bits_on_device, int bits, V* out) {
  const int s = bits_on_device ? *bits_on_device : bits;
  const auto none = static_cast<unsigned>(p.out_rows);
  for_each_task_column(p, [&](std::int64_t task, std::int64_t col) {
    const std::int64_t s0 = task * kSortedChunk, s1 = s0 + kSortedChunk;
    if (s1 >= p.rows) return;  // the last task: nothing goes on past it
    const unsigned key = keys[s1 - 1];
    if (key == none || keys[s1] != key) return;
    if (s0 > 0 && keys[s0] == key && keys[s0 - 1] == key) return;  // the run started in an earlier task
    V* o = out + static_cast<std::int64_t>(key) * p.out_stride + col;
    *o = ::tally::detail::add_fixed_point(*o, sums[task * p.cols + col], s);
  });
}

}  // namespace tally::kernels::index_add
