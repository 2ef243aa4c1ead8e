// The aggregated_atomics strategy of index_add: each warp takes 32 rows at
// a time, one index per lane, groups the lanes with equal indices
// (__match_any_sync), combines each group's rows in registers and sends one
// atomic per (index, column) to the output. A key that takes half of the
// rows thus costs about one atomic per 16 of its rows.
//
// Two ways to combine a group, chosen per launch by the row width:
//   - wide rows (cols >= 16 chunks of 16 bytes): the warp visits the groups
//     one after another, lanes over columns (16 bytes each), each lane
//     summing the group's rows column by column -- no shuffles, loads of 16
//     bytes, one vector atomic per lane per chunk;
//   - narrow rows: every lane loads its own row 16 bytes at a time and the
//     groups are combined across lanes by a segmented scan (pointer jumping
//     over the group's members, ceil(log2 size) shuffle steps, the jumps
//     computed once per 32 rows); the group's last lane adds the result.
// Wide rows are also cut into tiles of tile_cols columns, each (32 rows,
// tile) a task of its own, so that a few very long rows still spread over
// the whole grid.
#pragma once

#include <cstdint>

#include "tally/core/row_scatter.hpp"
#include "tally/cuda/kernels/histogram_common.cuh"
#include "tally/cuda/kernels/index_add_common.cuh"

namespace tally::kernels::index_add {

/// Lanes below this one.
__device__ __forceinline__ unsigned lanes_below() {
  unsigned mask;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(mask));
  return mask;
}

/// Whether the aggregated kernel takes rows of `cols` values of `bytes`
/// bytes lanes-over-columns (wide) rather than lane-per-row (narrow).
constexpr bool wide_rows(std::int64_t cols, int bytes) { return cols >= 16 * (16 / bytes); }

/// Columns per task of wide rows: 256 chunks of 16 bytes (1024 floats).
template <class V>
constexpr std::int64_t tile_columns(std::int64_t cols) {
  return wide_rows(cols, sizeof(V)) ? 256 * kChunk<V> : cols;
}

/// The groups of one warp step, wide rows: the warp visits each group, lanes
/// over the columns [c0, c1) (c0 a multiple of kChunk<V>).
template <class I, class V, class Op, class Values, class Sink>
__device__ __forceinline__ void combine_wide(const ::tally::detail::row_scatter<I, V>& p, std::int64_t base,
                                             std::int64_t c0, std::int64_t c1, unsigned members, std::int64_t key,
                                             bool valid, int lane, const Op& op, const Values& values,
                                             const Sink& sink) {
  using Acc = typename Sink::acc_type;
  constexpr int W = kChunk<V>;
  const bool leader = valid && __ffs(members) - 1 == lane;
  unsigned leaders = __ballot_sync(kFull, leader);
  while (leaders != 0) {  // warp-uniform
    const int first = __ffs(leaders) - 1;
    leaders &= leaders - 1;
    const unsigned group = __shfl_sync(kFull, members, first);
    const auto k = static_cast<std::int64_t>(__shfl_sync(kFull, static_cast<long long>(key), first));
    if (lane == 0) sink.touch(k);
    for (std::int64_t c = c0 + static_cast<std::int64_t>(lane) * W; c < c1; c += 32 * W) {
      const int count = c1 - c < W ? static_cast<int>(c1 - c) : W;
      Acc acc[W];
#pragma unroll
      for (int e = 0; e < W; ++e) acc[e] = op.template identity<Acc>();
      for (unsigned m = group; m != 0; m &= m - 1) {
        const V* row = p.src + (base + __ffs(m) - 1) * p.src_stride + c;
        V v[W];
        load_chunk(row, count, v);
#pragma unroll
        for (int e = 0; e < W; ++e)
          if (e < count) acc[e] = op(acc[e], values(v[e]));
      }
      sink.add(k, c, acc, count);
    }
  }
}

/// The groups of one warp step, narrow rows: each lane loads its own row and
/// the groups are combined across lanes by pointer jumping.
template <class I, class V, class Op, class Values, class Sink>
__device__ __forceinline__ void combine_narrow(const ::tally::detail::row_scatter<I, V>& p, std::int64_t i,
                                               unsigned members, std::int64_t key, bool valid, int lane, const Op& op,
                                               const Values& values, const Sink& sink) {
  using Acc = typename Sink::acc_type;
  constexpr int W = kChunk<V>;
  constexpr int kLevels = 5;  // groups of at most 32 lanes
  // The jumps of an inclusive scan over each group in lane order: at level l
  // a lane combines the value of lane source[l] (2^l members back) when
  // take[l]. Invalid lanes take nothing and lend their identity.
  const unsigned largest = __reduce_max_sync(kFull, valid ? static_cast<unsigned>(__popc(members)) : 0u);
  int back = valid ? 31 - __clz(members & lanes_below()) : -1;  // the member just below, or -1
  int source[kLevels];
  bool take[kLevels];
#pragma unroll
  for (int l = 0; l < kLevels; ++l) {
    source[l] = back < 0 ? lane : back;
    take[l] = back >= 0;
    if ((1u << l) < largest) {  // warp-uniform
      const int further = __shfl_sync(kFull, back, source[l]);
      if (take[l]) back = further;
    }
  }
  const bool writer = valid && lane == 31 - __clz(members);
  if (writer) sink.touch(key);
  const V* row = p.src + (valid ? i : 0) * p.src_stride;
  for (std::int64_t c = 0; c < p.cols; c += W) {  // warp-uniform
    const int count = p.cols - c < W ? static_cast<int>(p.cols - c) : W;
    Acc acc[W];
    if (valid) {
      V v[W];
      load_chunk(row + c, count, v);
#pragma unroll
      for (int e = 0; e < W; ++e) acc[e] = e < count ? values(v[e]) : op.template identity<Acc>();
    } else {
#pragma unroll
      for (int e = 0; e < W; ++e) acc[e] = op.template identity<Acc>();
    }
#pragma unroll
    for (int l = 0; l < kLevels; ++l) {
      if ((1u << l) < largest) {
#pragma unroll
        for (int e = 0; e < W; ++e) {
          const Acc earlier = __shfl_sync(kFull, acc[e], source[l]);
          if (take[l]) acc[e] = op(earlier, acc[e]);
        }
      }
    }
    if (writer) sink.add(key, c, acc, count);
  }
}

/// out[index[i]] ⊕= src[i] for the rows of `p`, 32 rows per warp step,
/// grid-stride over the tasks (32 rows × a tile of columns). Rows whose
/// index lies outside [0, out_rows) are recorded in `report` (when it
/// reports) and skipped. Pre: blockDim.x == kThreads, p.rows and p.cols > 0.
template <class I, class V, class Op, class Values, class Sink>
__global__ void __launch_bounds__(kThreads)
    aggregated_rows_kernel(::tally::detail::row_scatter<I, V> p, Op op, Values values, Sink sink,
                           histogram::out_of_range_report report) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (kThreads / 32);
  const std::int64_t warp = static_cast<std::int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  const bool wide = wide_rows(p.cols, sizeof(V));
  const std::int64_t tile = tile_columns<V>(p.cols);
  const std::int64_t tiles = (p.cols + tile - 1) / tile;
  const std::int64_t tasks = (p.rows + 31) / 32 * tiles;
  const bool narrow_keys = p.out_rows <= 0xffffffffLL;           // every valid key fits 32 bits
  for (std::int64_t task = warp; task < tasks; task += warps) {  // warp-uniform
    const std::int64_t step = task / tiles;
    const std::int64_t c0 = (task - step * tiles) * tile;
    const std::int64_t base = step * 32;
    const std::int64_t i = base + lane;
    const bool has = i < p.rows;
    const std::int64_t key = has ? static_cast<std::int64_t>(p.index[i]) : -1;
    const bool valid = has && key >= 0 && key < p.out_rows;
    if (has && !valid && c0 == 0) report.record(i);
    const unsigned active = __ballot_sync(kFull, valid);
    if (active == 0) continue;
    unsigned members = 0;
    if (valid)
      members = narrow_keys ? __match_any_sync(active, static_cast<unsigned>(key))
                            : __match_any_sync(active, static_cast<unsigned long long>(key));
    if (wide)
      combine_wide(p, base, c0, c0 + tile < p.cols ? c0 + tile : p.cols, members, key, valid, lane, op, values, sink);
    else combine_narrow(p, i, members, key, valid, lane, op, values, sink);
  }
}

}  // namespace tally::kernels::index_add
