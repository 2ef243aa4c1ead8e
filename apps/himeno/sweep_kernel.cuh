// The fused Jacobi sweep: one kernel a sweep, every array streamed once,
// gosa reduced inside the same kernel.
//
// A block owns a contiguous range of units (tiling.hpp: one 8 x 64 tile of
// the (j, k) plane on D consecutive i planes) and walks it along i. Warp w computes row
// j0+w of the tile, each lane two points 32 apart along k (coalesced, k is
// contiguous). p's planes i−1, i, i+1 with a one-point halo sit in a ring of
// four shared-memory slots: each step stores plane i+1 (loaded a step
// earlier), synchronises once, issues the loads of plane i+2 and of the next
// plane's 12 coefficients, then computes plane i. So p is read once (plus
// halo, which neighbouring blocks read at about the same time, from L2), the
// 12 coefficient arrays once, wrk2 written once, and a step's loads are in
// flight while the previous step computes. With four slots, the slot a step
// overwrites was last read two steps before, on the other side of the
// previous step's barrier: one barrier a step.
//
// gosa, by sink:
//   deterministic   each thread sums its points over the unit's planes; at
//                   the unit's last plane each warp reduces its lanes
//                   (balanced tree), and warp 0 combines the 8 warp values
//                   after the next barrier into partials[unit]. The last
//                   block to finish (a counter in zero-at-rest state, reset by
//                   that block) sums the partials by the balanced tree over
//                   unit indices. No atomics on values; the bits depend on the
//                   grid size only, not on the number of blocks.
//   warp_aggregated tally::device::atomic_add of each point's ss² (seed 003)
//   atomic          atomicAdd of each point's ss²
//   squares         each point's ss² stored for the host to sum
//   none            nothing: the cost of gosa itself
// Atomic sinks accumulate into state->gosa[slot]; block 0 zeroes
// gosa[zero_slot], the slot the next sweep will use.
//
// Launched as a programmatic dependent (PDL): everything touching global
// memory happens after griddepcontrol.wait, so the next sweep may launch
// while this one drains.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "stencil.hpp"
#include "tally/core/operators.hpp"
#include "tally/core/tree.hpp"
#include "tally/cuda/device/warp_aggregated.cuh"
#include "tally/cuda/device/warp_reduce.cuh"
#include "tiling.hpp"

namespace tally::himeno::kernels {

enum class gosa_sink { deterministic, warp_aggregated, atomic, squares, none };

/// Device state shared by the sweeps of a run. The host zeroes it once;
/// blocks_done is zero whenever no sweep runs.
struct sweep_state {
  float gosa[3];         ///< each sweep's gosa lands in gosa[slot]
  unsigned blocks_done;  ///< deterministic: blocks finished in the running sweep
  unsigned stop;         ///< converge mode: set once gosa < tolerance or max sweeps ran
  unsigned sweeps_done;  ///< converge mode: sweeps that ran
};

struct sweep_params {
  const float* coef[kCoefficients];  ///< a0..a3, b0..b2, c0..c2, bnd, wrk1
  int mi, mj, mk;
  int tiles_k;
  std::int64_t plane;   ///< mj·mk
  int planes_per_unit;  ///< tiling_of(size).planes_per_unit (D)
  std::int64_t chunks;  ///< tiling_of(size).chunks(): units along i
  std::int64_t units;   ///< tiling_of(size).units()
  float omega;
  float* partials;      ///< deterministic: [units]
  float* squares;       ///< squares sink: [interior points], the original loop's order
  sweep_state* state;
  int converge;         ///< 1: no-op once state->stop is set (deterministic sink only)
  float tolerance;      ///< converge: stop once gosa < tolerance
  unsigned max_sweeps;  ///< converge: stop after this many sweeps
  cudaGraphConditionalHandle loop;  ///< converge in a graph: the while node's handle, else 0
  // Row-streaming sweeps (rows_kernel.cuh, row_tiling.hpp) only; there
  // planes_per_unit is D, chunks is row_units::chunks and units is
  // row_units::padded_units.
  int segments;          ///< row segments a row
  int chunks_padded;     ///< P2 / D
  std::int64_t items;    ///< units that hold planes, R · chunks
  std::int64_t row_segments;  ///< R
  int row_floats;             ///< row_floats_for<Ahead>(mk) of the row kernel: floats of a shared row buffer
};

inline constexpr int kHaloRows = kTileJ + 2;
inline constexpr int kHaloCols = kTileK + 2;
inline constexpr int kHaloElements = kHaloRows * kHaloCols;
inline constexpr int kHaloLoads = (kHaloElements + kTileThreads - 1) / kTileThreads;
inline constexpr int kPlaneSlots = 4;
/// Blocks per SM the sweep is compiled for: caps registers at 128 a thread.
/// Two blocks (16 warps) keep about 2 x 27 KB of loads in flight per SM, well
/// above the ~14 KB Little's law asks at 3 TB/s; three blocks (80 registers)
/// spill the prefetched coefficients.
inline constexpr int kSweepMinBlocks = 2;

namespace detail {

/// Balanced tree over K values (K a power of two), in place.
template <int K>
__device__ __forceinline__ float balanced(float (&v)[K]) {
#pragma unroll
  for (int stride = 1; stride < K; stride <<= 1)
#pragma unroll
    for (int t = 0; t + stride < K; t += 2 * stride) v[t] = v[t] + v[t + stride];
  return v[0];
}

/// Leaves a thread loads at once (one round trip to L2 for all of them).
inline constexpr int kRunLeaves = 32;

/// Balanced tree over leaves [first, first+size), size a power of two; leaf(x)
/// gives leaf x (zero for padding). Leaves are read through L2 (values
/// written by other blocks).
template <class Leaf>
__device__ float subtree(const Leaf& leaf, std::int64_t first, std::int64_t size) {
  float v[kRunLeaves];
  if (size <= kRunLeaves) {
#pragma unroll
    for (int t = 0; t < kRunLeaves; ++t) v[t] = t < size ? leaf(first + t) : 0.0f;
    return balanced(v);
  }
  // Runs of 32 leaves are aligned subtrees; a binary counter combines them.
  float stack[40];
  for (std::int64_t run = 0; run * kRunLeaves < size; ++run) {
#pragma unroll
    for (int t = 0; t < kRunLeaves; ++t) v[t] = leaf(first + run * kRunLeaves + t);
    float node = balanced(v);
    int level = 0;
    for (std::int64_t bits = run; bits & 1; bits >>= 1, ++level) node = stack[level] + node;
    stack[level] = node;
  }
  return stack[tree::bit_width(static_cast<std::uint64_t>(size / kRunLeaves)) - 1];
}

/// The balanced tree over `padded` leaves (a power of two), leaf(x) each, in
/// thread 0. Pre: the whole block (8 warps) calls it; scratch holds kTileJ
/// floats of shared memory.
template <class Leaf>
__device__ float block_tree_of(const Leaf& leaf, std::int64_t padded, float* scratch) {
  if (padded < kTileThreads) padded = kTileThreads;
  const std::int64_t per = padded / kTileThreads;
  float mine = subtree(leaf, threadIdx.x * per, per);
  mine = device::warp_reduce(mine, plus{});
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = mine;
  __syncthreads();
  float total = 0;
  if (threadIdx.x == 0) {
    float w[kTileJ];
#pragma unroll
    for (int t = 0; t < kTileJ; ++t) w[t] = scratch[t];
    total = balanced(w);
  }
  return total;
}

/// The balanced tree over values[0, count), zero-padded, in thread 0.
/// Pre: the whole block calls it; scratch holds kTileJ floats of shared memory.
__device__ float block_tree(const float* values, std::int64_t count, float* scratch) {
  auto leaf = [=](std::int64_t x) { return x < count ? __ldcg(values + x) : 0.0f; };
  return block_tree_of(leaf, static_cast<std::int64_t>(tree::bit_ceil(static_cast<std::uint64_t>(count))), scratch);
}

/// What every fused sweep kernel does first: waits for the previous sweep
/// (PDL), and in converge mode ends the whole block once the stop flag is
/// set (the flag is read once per block and shared, so every thread of the
/// block takes the same branch: threads that read it apart could leave the
/// block's barriers divergent, as compute-sanitizer synccheck flagged); then
/// zeroes the next atomic sink's slot and lets the next sweep launch. Returns
/// false when the block must return at once. Pre: the whole block calls it.
template <gosa_sink Sink>
__device__ bool begin_sweep(const sweep_params& prm, int zero_slot) {
  const int tid = threadIdx.x;
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (prm.converge) {
    __shared__ unsigned stopped;
    if (tid == 0) stopped = *reinterpret_cast<volatile unsigned*>(&prm.state->stop);
    __syncthreads();
    if (stopped != 0) {
      if (blockIdx.x == 0 && tid == 0 && prm.loop != 0) cudaGraphSetConditional(prm.loop, 0);
      return false;
    }
  }
  if constexpr (Sink == gosa_sink::warp_aggregated || Sink == gosa_sink::atomic) {
    if (blockIdx.x == 0 && tid == 0) prm.state->gosa[zero_slot] = 0.0f;
  }
  asm volatile("griddepcontrol.launch_dependents;");
  return true;
}

/// Deterministic sink: counts this block as finished and tells whether it
/// was the last one, which then combines every block's units. Pre: the whole
/// block calls it; a thread other than thread 0 that stored unit values of
/// this block has fenced them (__threadfence); thread 0's own are fenced here.
__device__ bool last_block_to_finish(const sweep_params& prm) {
  __shared__ int is_last;
  // The barrier orders every warp's stores before thread 0's count: without
  // it the rows-1 sweep's fold warp (not warp 0) could store its last unit
  // after the last block had read the units (gosa short of that unit, seen
  // under compute-sanitizer racecheck, which reorders the warps).
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    const unsigned done = atomicAdd(&prm.state->blocks_done, 1u);
    is_last = done == gridDim.x - 1;
  }
  __syncthreads();
  if (!is_last) return false;
  __threadfence();  // the other blocks' counts before their units
  return true;
}

/// The last block's thread 0: gosa into its slot, the count reset for the
/// next sweep, and in converge mode the stop test (flag and graph condition).
__device__ void publish_gosa(const sweep_params& prm, int slot, float total) {
  prm.state->blocks_done = 0;
  prm.state->gosa[slot] = total;
  if (prm.converge) {
    const unsigned done = prm.state->sweeps_done + 1;
    prm.state->sweeps_done = done;
    const bool stop = total < prm.tolerance || done >= prm.max_sweeps;
    if (stop) prm.state->stop = 1;
    if (prm.loop != 0) cudaGraphSetConditional(prm.loop, stop ? 0 : 1);
  }
}

}  // namespace detail

static_assert(kTileJ == 8 && kTileThreads == 256, "the warp-value combine below is written for 8 warps");

/// One sweep: out = relaxed p on the interior, gosa by Sink. Pre: blockDim.x
/// == kTileThreads; p and out are distinct grids whose boundaries hold the
/// same values; state->blocks_done is 0.
template <gosa_sink Sink>
__global__ void __launch_bounds__(kTileThreads, kSweepMinBlocks)
    sweep_kernel(const sweep_params prm, const float* __restrict__ p, float* __restrict__ out, int slot,
                 int zero_slot) {
  __shared__ float planes[kPlaneSlots][kHaloElements];
  __shared__ float warp_values[2][kTileJ];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (!detail::begin_sweep<Sink>(prm, zero_slot)) return;

  const int planes_n = prm.mi - 2;
  const int mk = prm.mk;
  const std::int64_t S = prm.plane;
  float* gosa_sum = prm.state->gosa + slot;

  const int D = prm.planes_per_unit;
  // Warp 0 combines a unit's warp values and stores the unit's value.
  auto store_unit = [&](std::int64_t unit) {
    float x = lane < kTileJ ? warp_values[unit & 1][lane] : 0.0f;
#pragma unroll
    for (int delta = 1; delta < kTileJ; delta <<= 1) x = x + __shfl_down_sync(0xffffffffu, x, delta);
    if (lane == 0) prm.partials[unit] = x;
  };

  std::int64_t u = static_cast<std::int64_t>(blockIdx.x) * prm.units / gridDim.x;
  const std::int64_t u_end = (static_cast<std::int64_t>(blockIdx.x) + 1) * prm.units / gridDim.x;
  while (u < u_end) {
    // This segment: tile `tile`, units [tile·chunks + c_begin, tile·chunks + c_end): planes [i_begin, i_end).
    const std::int64_t tile = u / prm.chunks;
    const std::int64_t c_begin = u - tile * prm.chunks;
    const std::int64_t column_end = (tile + 1) * prm.chunks;
    const std::int64_t c_end = (u_end < column_end ? u_end : column_end) - tile * prm.chunks;
    const int i_begin = 1 + static_cast<int>(c_begin) * D;
    const int i_end = c_end * D < planes_n ? 1 + static_cast<int>(c_end) * D : planes_n + 1;
    const int tj = static_cast<int>(tile / prm.tiles_k), tk = static_cast<int>(tile % prm.tiles_k);
    const int j0 = 1 + tj * kTileJ, k0 = 1 + tk * kTileK;

    // The halo'd tile of a p plane: element e is (j0−1 + e / kHaloCols, k0−1 + e % kHaloCols).
    int halo_offset[kHaloLoads];
    bool halo_valid[kHaloLoads];
#pragma unroll
    for (int m = 0; m < kHaloLoads; ++m) {
      const int e = tid + m * kTileThreads;
      const int row = e / kHaloCols, col = e - row * kHaloCols;
      const int j = j0 - 1 + row, k = k0 - 1 + col;
      halo_valid[m] = e < kHaloElements && j < prm.mj && k < prm.mk;
      halo_offset[m] = j * mk + k;
    }
    // This thread's two points: (j0 + warp, k0 + lane) and (j0 + warp, k0 + lane + 32).
    const int j = j0 + warp;
    int offset[2];
    bool valid[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int k = k0 + lane + 32 * h;
      valid[h] = j < prm.mj - 1 && k < prm.mk - 1;
      offset[h] = j * mk + k;
    }

    auto load_p = [&](int i, float (&v)[kHaloLoads]) {
      const float* base = p + i * S;
#pragma unroll
      for (int m = 0; m < kHaloLoads; ++m) v[m] = halo_valid[m] ? __ldg(base + halo_offset[m]) : 0.0f;
    };
    auto store_p = [&](int i, const float (&v)[kHaloLoads]) {
      float* slot_plane = planes[i & (kPlaneSlots - 1)];
#pragma unroll
      for (int m = 0; m < kHaloLoads; ++m)
        if (tid + m * kTileThreads < kHaloElements) slot_plane[tid + m * kTileThreads] = v[m];
    };
    // Coefficients are read once a sweep: streaming loads, evicted first from L2.
    auto load_coefficients = [&](int i, float (&c)[kCoefficients][2]) {
      const std::int64_t base = i * S;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int f = 0; f < kCoefficients; ++f) c[f][h] = valid[h] ? __ldcs(prm.coef[f] + base + offset[h]) : 0.0f;
    };

    float coef[kCoefficients][2], next_coef[kCoefficients][2], next_p[kHaloLoads];
    {
      float below[kHaloLoads], here[kHaloLoads];
      load_p(i_begin - 1, below);
      load_p(i_begin, here);
      load_p(i_begin + 1, next_p);
      load_coefficients(i_begin, coef);
      store_p(i_begin - 1, below);
      store_p(i_begin, here);
    }

    std::int64_t pending = -1;  // deterministic: a unit whose warp values wait for warp 0
    float acc = 0.0f;           // deterministic: this thread's share of the current unit
    for (int i = i_begin; i < i_end; ++i) {
      store_p(i + 1, next_p);
      __syncthreads();  // planes i−1..i+1 stored; slot (i+2)&3 no longer read
      const bool more = i + 1 < i_end;
      if (more) {
        load_p(i + 2, next_p);  // i + 2 <= mi − 1: i + 1 < i_end <= mi − 1
        load_coefficients(i + 1, next_coef);
      }
      if constexpr (Sink == gosa_sink::deterministic) {
        if (warp == 0 && pending >= 0) store_unit(pending);
        pending = -1;
      }

      const float* P0 = planes[(i - 1) & (kPlaneSlots - 1)];
      const float* P1 = planes[i & (kPlaneSlots - 1)];
      const float* P2 = planes[(i + 1) & (kPlaneSlots - 1)];
      float v = 0.0f;  // deterministic: this thread's share of the unit
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (!valid[h]) continue;
        constexpr int R = kHaloCols;
        const int r = (warp + 1) * R + 1 + lane + 32 * h;
        neighbourhood n;
        n.centre = P1[r];
        n.ip1 = P2[r], n.jp1 = P1[r + R], n.kp1 = P1[r + 1];
        n.im1 = P0[r], n.jm1 = P1[r - R], n.km1 = P1[r - 1];
        n.ip1_jp1 = P2[r + R], n.ip1_jm1 = P2[r - R], n.im1_jp1 = P0[r + R], n.im1_jm1 = P0[r - R];
        n.jp1_kp1 = P1[r + R + 1], n.jm1_kp1 = P1[r - R + 1], n.jp1_km1 = P1[r + R - 1], n.jm1_km1 = P1[r - R - 1];
        n.ip1_kp1 = P2[r + 1], n.im1_kp1 = P0[r + 1], n.ip1_km1 = P2[r - 1], n.im1_km1 = P0[r - 1];
        const point_coefficients c{coef[0][h], coef[1][h], coef[2][h], coef[3][h],  coef[4][h],  coef[5][h],
                                   coef[6][h], coef[7][h], coef[8][h], coef[9][h], coef[10][h], coef[11][h]};
        const relaxed x = relax(c, n, prm.omega);
        out[i * S + offset[h]] = x.next;
        const float sq = square(x.ss);
        if constexpr (Sink == gosa_sink::deterministic) {
          v = rounded::add(v, sq);
        } else if constexpr (Sink == gosa_sink::warp_aggregated) {
          device::atomic_add(gosa_sum, sq);
        } else if constexpr (Sink == gosa_sink::atomic) {
          atomicAdd(gosa_sum, sq);
        } else if constexpr (Sink == gosa_sink::squares) {
          const std::int64_t q = (std::int64_t{i - 1} * (prm.mj - 2) + (j - 1)) * (prm.mk - 2) + (k0 + lane + 32 * h - 1);
          prm.squares[q] = sq;
        }
      }
      if constexpr (Sink == gosa_sink::deterministic) {
        const int within = (i - 1) % D;
        acc = within == 0 ? v : rounded::add(acc, v);
        if (within == D - 1 || i == planes_n) {  // the unit's last plane
          const std::int64_t unit = tile * prm.chunks + (i - 1) / D;
          const float w = device::warp_reduce(acc, plus{});
          if (lane == 0) warp_values[unit & 1][warp] = w;
          pending = unit;
        }
      }
      if (more) {
#pragma unroll
        for (int f = 0; f < kCoefficients; ++f) coef[f][0] = next_coef[f][0], coef[f][1] = next_coef[f][1];
      }
    }
    __syncthreads();  // the last unit's warp values are stored; every slot may be rewritten
    if constexpr (Sink == gosa_sink::deterministic)
      if (warp == 0 && pending >= 0) store_unit(pending);
    u = tile * prm.chunks + c_end;
  }

  if constexpr (Sink == gosa_sink::deterministic) {
    if (!detail::last_block_to_finish(prm)) return;
    const float total = detail::block_tree(prm.partials, prm.units, &warp_values[0][0]);
    if (tid == 0) detail::publish_gosa(prm, slot, total);
  }
}

/// The paper's straightforward port, first kernel: one thread a point, 128
/// threads along k, blockIdx.y = j − 1, blockIdx.z = i − 1; wrk2 from p,
/// gosa by plain atomicAdd. Written as a direct port would be (nvcc may fuse
/// multiply-adds, so p may differ from the original in the last bits).
__global__ void __launch_bounds__(128) baseline_jacobi(const sweep_params prm, const float* __restrict__ p,
                                                       float* __restrict__ wrk2, float* gosa) {
  const int k = blockIdx.x * 128 + threadIdx.x + 1, j = blockIdx.y + 1, i = blockIdx.z + 1;
  if (k >= prm.mk - 1) return;
  const std::int64_t I = prm.plane, J = prm.mk;
  const std::int64_t x = i * I + j * J + k;
  const float* const* c = prm.coef;
  const float s0 = c[0][x] * p[x + I] + c[1][x] * p[x + J] + c[2][x] * p[x + 1] +
                   c[4][x] * (p[x + I + J] - p[x + I - J] - p[x - I + J] + p[x - I - J]) +
                   c[5][x] * (p[x + J + 1] - p[x - J + 1] - p[x + J - 1] + p[x - J - 1]) +
                   c[6][x] * (p[x + I + 1] - p[x - I + 1] - p[x + I - 1] + p[x - I - 1]) + c[7][x] * p[x - I] +
                   c[8][x] * p[x - J] + c[9][x] * p[x - 1] + c[11][x];
  const float ss = (s0 * c[3][x] - p[x]) * c[10][x];
  atomicAdd(gosa, ss * ss);
  wrk2[x] = p[x] + prm.omega * ss;
}

/// The straightforward port's second kernel: p = wrk2 on the interior.
__global__ void __launch_bounds__(128) baseline_copy(const sweep_params prm, float* __restrict__ p,
                                                     const float* __restrict__ wrk2) {
  const int k = blockIdx.x * 128 + threadIdx.x + 1, j = blockIdx.y + 1, i = blockIdx.z + 1;
  if (k >= prm.mk - 1) return;
  const std::int64_t x = i * prm.plane + std::int64_t{j} * prm.mk + k;
  p[x] = wrk2[x];
}

/// Fills a[0..n) with `value`.
__global__ void fill(float* a, std::int64_t n, float value) {
  for (std::int64_t x = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; x < n; x += std::int64_t{gridDim.x} * blockDim.x)
    a[x] = value;
}

/// p's initial values: plane i holds i² / (imax−1)², rounded as on the host.
__global__ void fill_initial_p(float* p, float* wrk2, int mi, std::int64_t plane) {
  const std::int64_t n = mi * plane;
  const int imax = mi - 1;
  for (std::int64_t x = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; x < n; x += std::int64_t{gridDim.x} * blockDim.x) {
    const int i = static_cast<int>(x / plane);
    const float value = static_cast<float>(i * i) / static_cast<float>((imax - 1) * (imax - 1));
    p[x] = value;
    wrk2[x] = value;
  }
}

}  // namespace tally::himeno::kernels
