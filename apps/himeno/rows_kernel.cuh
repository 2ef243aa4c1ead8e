// The row-streaming fused sweep (variants rows-1, rows-2, rows-3): whole row
// segments of up to 512 points, fed to shared memory by the copy engine
// (cp.async.bulk), Ahead planes ahead of the computation.
//
// Why: the tile sweep (sweep_kernel.cuh) reads 8 x 64 tiles. Its rows of 64
// floats start anywhere in a 32-byte sector (mk is odd), so each row touches
// 9 sectors for 8 sectors of data, and the neighbouring tile that shares the
// edge sectors runs ~8 planes apart (tens of MB later, evicted); p's halo rows
// of the j-neighbour tile come from DRAM too. And its register prefetch waits
// for every coefficient load at the end of each plane (the copy into the
// current registers), so only one plane of loads is ever in flight.
//
// Here a block streams a unit: one row segment (row j, points k_lo..k_hi−1)
// on D consecutive planes. A unit's data per plane are 12 coefficient row
// segments and p's rows j−1, j, j+1 (with one halo point each side): 15
// contiguous ranges, each copied whole (widened to 16-byte bounds) by one
// cp.async.bulk into shared memory. The copies of a plane complete on one
// mbarrier; the block computes plane n while planes n+1 .. n+Ahead are in
// flight. Work items are taken round-robin in chunk-major order (block b:
// items b, b + G, ...), so blocks at any moment work on consecutive row
// segments of one chunk, at about the same plane: the p rows a segment
// shares with its j-neighbours are read from DRAM once and from L2 after.
//
// Shared memory: kCoefSlots = Ahead + 1 slots of 12 coefficient rows, and a
// ring of kPSlots = Ahead + 5 p entries (one entry = rows j−1..j+1 of one
// plane), every row buffer row_floats_for<Ahead>(mk) floats. Step n reads p
// entries P−2, P−1, P (planes i−1, i, i+1); a unit's first step brings three
// entries, the others one. One __syncthreads a step:
// after it, step n−1's reads are done, so the producer (warp 0) may refill
// coefficient slot (n−1) % kCoefSlots and every p entry below P(n) − 2.
// It issues batches up to n + Ahead as long as their p entries stay below
// P(n) − 2 + kPSlots (with units of at least Ahead planes that never binds).
//
// gosa (deterministic), two ways to the same bits, picked per variant by
// measurement:
//   - lane parts (rows-1 and rows-2): each thread stores its share of a step
//     in shared memory; in the next step lane L of the fold warp (the last
//     one: warp 0 issues the copies) folds shares 8L .. 8L + 7 and keeps that
//     as its part of plane d = i − i0 of the unit. At the unit's end lane d
//     folds the 32 parts of plane d (the plane value: tree over the 256
//     threads) and the warp its 32 planes (zeros past D).
//   - warp trees (rows-3): every warp reduces its 32 shares by shuffles and
//     stores the warp value; in the next step warp 0, before it issues the
//     copies, folds the 8 warp values into the plane value, kept by lane d;
//     at the unit's end it reduces its 32 lanes (zeros past D).
// Either way the unit's value goes to partials[r · (P2/D) + c], and the last
// block to finish sums the partials by the balanced tree: row_tiling.hpp's
// order, independent of D and of the launch. Measured on the H100 (GFLOPS,
// deterministic against none): at M (rows-1) warp trees cost 14 % (1311
// against 1490), lane parts 3 % (1444 against 1489); at L and XL (rows-3)
// warp trees ran faster than no gosa at all (1453 / 1471 against 1427 /
// 1392), lane parts at the speed of none (1420 / 1394). Why the warp trees'
// delay of the copy issue helps there is not understood yet. At M with row
// buffers sized to its 255-point rows (two blocks of rows-2 an SM): rows-2
// with warp trees 1357 against 1524 with none, with lane parts 1470 (256-point
// segments); this kernel with lane parts 1462 against 1516, compiled for one
// point a thread there (1449 against 1512 with a second, always-skipped one).

#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "row_tiling.hpp"
#include "stencil.hpp"
#include "sweep_kernel.cuh"
#include "tally/core/operators.hpp"
#include "tally/core/tree.hpp"
#include "tally/cuda/device/warp_aggregated.cuh"
#include "tally/cuda/device/warp_reduce.cuh"

namespace tally::himeno::kernels {

/// Floats of one row buffer for rows of mk points: a segment (at most
/// kRowSegment interior points), its two halo points, widened to 16-byte
/// bounds on both sides, rounded up to whole 16-byte vectors.
constexpr int row_buffer_floats(int mk) {
  const int segment = mk - 2 < kRowSegment ? mk - 2 : kRowSegment;
  return (segment + 8 + 3) / 4 * 4;
}

/// Row buffers of whole segments: what rows-3 (Ahead > 2, the L and XL
/// sweep) always takes, as a compile-time width. Measured on one H100 (tune.sh,
/// deterministic gosa): the run-time width read L 1433 / XL 1459 GFLOPS, this
/// one 1462 / 1471.
inline constexpr int kFullRowFloats = row_buffer_floats(kRowSegment + 2);

/// Whether the variant that copies Ahead planes ahead takes kFullRowFloats
/// whatever the grid (rows-3), rather than its rows' width.
template <int Ahead>
inline constexpr bool kFullRowsAlways = Ahead > 2;

/// The row buffer width a variant that copies Ahead planes ahead uses for rows of mk points.
template <int Ahead>
constexpr int row_floats_for(int mk) {
  return kFullRowsAlways<Ahead> ? kFullRowFloats : row_buffer_floats(mk);
}

/// Shared-memory layout of the row-streaming sweep that copies Ahead planes
/// ahead. Row buffers are sized to the grid's rows: at M (255 interior
/// points a row) half of what L's need, so that two blocks of rows-2 fit on an SM.
template <int Ahead>
struct rows_layout {
  static constexpr int kCoefSlots = Ahead + 1;
  static constexpr int kPSlots = Ahead + 5;
  /// Floats of the coefficient slots before the p ring, with row buffers of `rb` floats.
  static constexpr int coef_floats(int rb) { return kCoefSlots * kCoefficients * rb; }
  /// Dynamic shared memory with row buffers of `rb` floats.
  static constexpr std::size_t dynamic_bytes(int rb) {
    return static_cast<std::size_t>(coef_floats(rb) + kPSlots * 3 * rb) * sizeof(float);
  }
  /// Blocks an SM runs at least: rows-1 two at every size (87 KB at most),
  /// rows-2 two where its rows are narrow (M: 60 KB; 128 registers a thread
  /// at most then), rows-3 one (150 KB at L).
  static constexpr int kMinBlocks = Ahead <= 2 ? 2 : 1;
};

namespace detail {

__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(count) : "memory");
}

/// One arrival that also expects `bytes` more of asynchronous copies in this phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

/// Waits until the phase of parity `parity` of `bar` has completed. A copy
/// that never lands would hang the GPU: after ~2^32 cycles (seconds) this traps.
__device__ __forceinline__ void mbarrier_wait(unsigned long long* bar, unsigned parity) {
  const unsigned address = smem_address(bar);
  const long long start = clock64();
  while (true) {
    unsigned done = 0;
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(address), "r"(parity)
        : "memory");
    if (done) return;
    if (clock64() - start > (1ll << 32)) __trap();
  }
}

/// Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) from
/// global to shared memory on the copy engine; completes on `bar`.
__device__ __forceinline__ void bulk_copy(float* dst, const float* src, unsigned bytes, unsigned long long* bar,
                                          unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar)), "l"(policy)
      : "memory");
}

__device__ __forceinline__ unsigned long long l2_policy_evict_first() {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

__device__ __forceinline__ unsigned long long l2_policy_evict_normal() {
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

/// A work item: row segment r on the planes of chunk c.
struct row_item {
  int j, k_lo, k_hi;  ///< row, points [k_lo, k_hi)
  int i0, i1;         ///< planes [i0, i1)
  std::int64_t unit;  ///< its index in partials: r · chunks_padded + c
};

/// Item w (< 2^31: the host checks items): 32-bit divisions, far cheaper than 64-bit ones.
__device__ __forceinline__ row_item item_of(const sweep_params& prm, std::int64_t w) {
  const unsigned segments_all = static_cast<unsigned>(prm.row_segments), segments = static_cast<unsigned>(prm.segments);
  const unsigned c = static_cast<unsigned>(w) / segments_all, r = static_cast<unsigned>(w) - c * segments_all;
  const unsigned row = r / segments;
  const int j = 1 + static_cast<int>(row), g = static_cast<int>(r - row * segments);
  row_item it;
  it.j = j;
  it.k_lo = 1 + g * kRowSegment;
  it.k_hi = min(it.k_lo + kRowSegment, prm.mk - 1);
  it.i0 = 1 + static_cast<int>(c) * prm.planes_per_unit;
  it.i1 = min(it.i0 + prm.planes_per_unit, prm.mi - 1);
  it.unit = static_cast<std::int64_t>(r) * prm.chunks_padded + c;
  return it;
}

/// Index of point (i, j, k) in a field.
__device__ __forceinline__ std::int64_t flat(const sweep_params& prm, int i, int j, int k) {
  return (static_cast<std::int64_t>(i) * prm.mj + j) * prm.mk + k;
}

}  // namespace detail

/// One sweep, streaming row segments, Points points a thread of each row
/// segment. Pre: blockDim.x == kRowThreads; Points == kRowPoints, or 1 where
/// prm.mk − 2 <= kRowThreads (one segment of at most one point a thread);
/// prm.row_floats == row_floats_for<Ahead>(prm.mk); the dynamic shared memory is
/// rows_layout<Ahead>::dynamic_bytes(prm.row_floats); every field
/// is readable up to points() rounded up to 4 floats (the copies widen to 16
/// bytes); p and out as for sweep_kernel; state->blocks_done is 0.
template <gosa_sink Sink, int Ahead, int Points = kRowPoints>
__global__ void __launch_bounds__(kRowThreads, rows_layout<Ahead>::kMinBlocks)
    rows_kernel(const sweep_params prm, const float* __restrict__ p, float* __restrict__ out, int slot,
                int zero_slot) {
  using layout = rows_layout<Ahead>;
  constexpr int CS = layout::kCoefSlots, PS = layout::kPSlots;
  const int RB = kFullRowsAlways<Ahead> ? kFullRowFloats : prm.row_floats;  // a constant where it can be
  extern __shared__ __align__(128) float rows_smem[];
  float* const coef_s = rows_smem;                          // [CS][12][RB]
  float* const p_s = rows_smem + layout::coef_floats(RB);   // [PS][3][RB]
  __shared__ __align__(8) unsigned long long full[CS];  // batch n completes on full[n % CS]
  // Deterministic (see the top of the file): the threads' shares of step n
  // (at n & 1; warp trees: the 8 warp values), and with lane parts the parts
  // of the planes of the unit the fold warp is on.
  constexpr bool kWarpTrees = Ahead > 2;
  constexpr int kFoldWarp = kWarpTrees ? 0 : kRowThreads / 32 - 1;
  __shared__ __align__(16) float shares[2][kRowThreads];
  __shared__ float plane_parts[kWarpTrees ? 1 : kMaxRowPlanesPerUnit][33];  // [plane d][lane], padded: lane d reads row d

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (!detail::begin_sweep<Sink>(prm, zero_slot)) return;

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < CS; ++s) detail::mbarrier_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  // (The first step's __syncthreads publishes the initialised barriers.)

  const std::int64_t G = gridDim.x;
  float* const gosa_sum = prm.state->gosa + slot;

  // Producer cursor (warp 0 only): the next batch to issue.
  std::int64_t pw = blockIdx.x;  // its item
  detail::row_item pit{};
  if (pw < prm.items) pit = detail::item_of(prm, pw);
  int pi = pit.i0;   // its plane
  int pq = -1;       // the last p entry issued
  int issued = 0;    // batches issued
  unsigned long long evict_first = 0, evict_normal = 0;
  if (warp == 0) evict_first = detail::l2_policy_evict_first(), evict_normal = detail::l2_policy_evict_normal();

  // Issues the producer cursor's batch: its plane's 12 coefficient rows and
  // the p entries it brings (planes i0−1, i0, i0+1 at a unit's start, else i+1).
  auto issue = [&]() {
    const int b = issued % CS;
    const bool start = pi == pit.i0;
    const int entries = start ? 3 : 1;
    const int copies = kCoefficients + 3 * entries;
    unsigned bytes = 0;
    const float* src = nullptr;
    float* dst = nullptr;
    if (lane < kCoefficients) {
      const std::int64_t first = detail::flat(prm, pi, pit.j, pit.k_lo), last = first + (pit.k_hi - pit.k_lo);
      const std::int64_t lo = first & ~std::int64_t{3}, hi = (last + 3) & ~std::int64_t{3};
      src = prm.coef[lane] + lo;
      dst = coef_s + (b * kCoefficients + lane) * RB;
      bytes = static_cast<unsigned>(hi - lo) * 4u;
    } else if (lane < copies) {
      const int e = (lane - kCoefficients) / 3, row = (lane - kCoefficients) % 3;
      const int plane = (start ? pi - 1 : pi + 1) + e;
      const std::int64_t first = detail::flat(prm, plane, pit.j - 1 + row, pit.k_lo - 1);
      const std::int64_t last = first + (pit.k_hi - pit.k_lo) + 2;
      const std::int64_t lo = first & ~std::int64_t{3}, hi = (last + 3) & ~std::int64_t{3};
      src = p + lo;
      dst = p_s + (((pq + 1 + e) % PS) * 3 + row) * RB;
      bytes = static_cast<unsigned>(hi - lo) * 4u;
    }
    const unsigned total = __reduce_add_sync(0xffffffffu, bytes);
    if (lane == 0) detail::mbarrier_arrive_expect_tx(&full[b], total);
    if (lane < copies) detail::bulk_copy(dst, src, bytes, &full[b], lane < kCoefficients ? evict_first : evict_normal);
    // Advance the cursor.
    pq += entries;
    ++issued;
    if (++pi == pit.i1) {
      pw += G;
      if (pw < prm.items) pit = detail::item_of(prm, pw), pi = pit.i0;
    }
  };

  // Consumer cursor: step n on item w, plane i; P = the entry of plane i+1.
  std::int64_t w = blockIdx.x;
  detail::row_item it{};
  if (w < prm.items) it = detail::item_of(prm, w);
  int i = it.i0;
  int P = -1;
  // Deterministic: the step whose shares wait for the fold warp.
  bool pending = false, pending_last = false;
  int pending_lane = 0, pending_planes = 0;
  std::int64_t pending_unit = 0;
  int n = 0;

  float plane_value = 0.0f;  // warp trees: the fold warp's lane d holds plane i0 + d of the unit

  // The fold warp folds the previous step's shares into its plane and, at a
  // unit's end, the unit's planes into partials[unit]. The pairs are those
  // of a warp tree in each warp and a tree over the 8 warps, then a tree
  // over the unit's planes: row_tiling.hpp's bits.
  auto fold_pending = [&](int parity) {
    if constexpr (kWarpTrees) {
      float x = lane < kRowThreads / 32 ? shares[parity][lane] : 0.0f;
#pragma unroll
      for (int delta = 1; delta < kRowThreads / 32; delta <<= 1) x = x + __shfl_down_sync(0xffffffffu, x, delta);
      x = __shfl_sync(0xffffffffu, x, 0);
      if (lane == pending_lane) plane_value = x;
      if (pending_last) {
        const float u = device::warp_reduce(plane_value, plus{});
        if (lane == 0) prm.partials[pending_unit] = u;
        plane_value = 0.0f;
      }
    } else {
      const float4* const four = reinterpret_cast<const float4*>(&shares[parity][8 * lane]);
      const float4 lo = four[0], hi = four[1];
      float leaves[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      plane_parts[pending_lane][lane] = tree::balanced(leaves, plus{});
      if (pending_last) {
        __syncwarp();
        float plane = 0.0f;
        if (lane < pending_planes) {
          float parts[32];
#pragma unroll
          for (int l = 0; l < 32; ++l) parts[l] = plane_parts[lane][l];
          plane = tree::balanced(parts, plus{});
        }
        const float u = device::warp_reduce(plane, plus{});
        if (lane == 0) prm.partials[pending_unit] = u;
        __syncwarp();  // the parts are read before the next unit's overwrite them
      }
    }
  };

  while (w < prm.items) {
    P += i == it.i0 ? 3 : 1;
    __syncthreads();  // step n−1's shared reads are done; its shares are stored
    if constexpr (Sink == gosa_sink::deterministic)
      if (warp == kFoldWarp && pending) fold_pending((n - 1) & 1);
    if (warp == 0) {
      // Batches up to n + Ahead whose p entries land at or below P − 3 + PS (free slots).
      while (issued <= n + Ahead && pw < prm.items && pq + (pi == pit.i0 ? 3 : 1) < P - 2 + PS) issue();
    }
    pending = false;
    const int b = n % CS;
    detail::mbarrier_wait(&full[b], static_cast<unsigned>((n / CS) & 1));

    // Shared rows of this step: p planes i−1, i, i+1 (entries P−2, P−1, P), rows j−1, j, j+1.
    const float* rows[3][3];
#pragma unroll
    for (int q = 0; q < 3; ++q)
#pragma unroll
      for (int row = 0; row < 3; ++row) {
        const unsigned shift =
            static_cast<unsigned>(detail::flat(prm, i - 1 + q, it.j - 1 + row, it.k_lo - 1)) & 3u;
        rows[q][row] = p_s + (((P - 2 + q) % PS) * 3 + row) * RB + shift + 1 + tid;  // [0]: point k_lo + tid
      }
    const unsigned coef_shift = static_cast<unsigned>(detail::flat(prm, i, it.j, it.k_lo)) & 3u;
    const float* coef_row = coef_s + b * kCoefficients * RB + coef_shift + tid;

    float v = 0.0f;  // deterministic: this thread's share of the plane
#pragma unroll
    for (int h = 0; h < Points; ++h) {
      const int k = it.k_lo + tid + kRowThreads * h;
      if (k >= it.k_hi) continue;
      const int x = kRowThreads * h;
      const float* const* A = rows[0];
      const float* const* B = rows[1];
      const float* const* C = rows[2];
      neighbourhood nb;
      nb.centre = B[1][x];
      nb.ip1 = C[1][x], nb.jp1 = B[2][x], nb.kp1 = B[1][x + 1];
      nb.im1 = A[1][x], nb.jm1 = B[0][x], nb.km1 = B[1][x - 1];
      nb.ip1_jp1 = C[2][x], nb.ip1_jm1 = C[0][x], nb.im1_jp1 = A[2][x], nb.im1_jm1 = A[0][x];
      nb.jp1_kp1 = B[2][x + 1], nb.jm1_kp1 = B[0][x + 1], nb.jp1_km1 = B[2][x - 1], nb.jm1_km1 = B[0][x - 1];
      nb.ip1_kp1 = C[1][x + 1], nb.im1_kp1 = A[1][x + 1], nb.ip1_km1 = C[1][x - 1], nb.im1_km1 = A[1][x - 1];
      point_coefficients c;
      c.a0 = coef_row[0 * RB + x], c.a1 = coef_row[1 * RB + x], c.a2 = coef_row[2 * RB + x];
      c.a3 = coef_row[3 * RB + x], c.b0 = coef_row[4 * RB + x], c.b1 = coef_row[5 * RB + x];
      c.b2 = coef_row[6 * RB + x], c.c0 = coef_row[7 * RB + x], c.c1 = coef_row[8 * RB + x];
      c.c2 = coef_row[9 * RB + x], c.bnd = coef_row[10 * RB + x], c.wrk1 = coef_row[11 * RB + x];
      const relaxed r = relax(c, nb, prm.omega);
      out[detail::flat(prm, i, it.j, k)] = r.next;
      const float sq = square(r.ss);
      if constexpr (Sink == gosa_sink::deterministic) {
        v = rounded::add(v, sq);
      } else if constexpr (Sink == gosa_sink::warp_aggregated) {
        device::atomic_add(gosa_sum, sq);
      } else if constexpr (Sink == gosa_sink::atomic) {
        atomicAdd(gosa_sum, sq);
      } else if constexpr (Sink == gosa_sink::squares) {
        const std::int64_t q = (std::int64_t{i - 1} * (prm.mj - 2) + (it.j - 1)) * (prm.mk - 2) + (k - 1);
        prm.squares[q] = sq;
      }
    }
    if constexpr (Sink == gosa_sink::deterministic) {
      if constexpr (kWarpTrees) {
        const float wv = device::warp_reduce(v, plus{});
        if (lane == 0) shares[n & 1][warp] = wv;
      } else {
        shares[n & 1][tid] = v;
      }
      pending = true;
      pending_lane = i - it.i0;
      pending_planes = it.i1 - it.i0;
      pending_last = i + 1 == it.i1;
      pending_unit = it.unit;
    }

    // Advance the consumer cursor.
    ++n;
    if (++i == it.i1) {
      w += G;
      if (w < prm.items) it = detail::item_of(prm, w), i = it.i0;
    }
  }
  __syncthreads();  // the last step's shares are stored
  if constexpr (Sink == gosa_sink::deterministic) {
    if (warp == kFoldWarp) {
      if (pending) fold_pending((n - 1) & 1);
      // Lane parts: the fold warp's partials fenced before the barrier in
      // last_block_to_finish, after which thread 0 counts the block done.
      if constexpr (!kWarpTrees) __threadfence();
    }
    if (!detail::last_block_to_finish(prm)) return;
    // Unit u = r · chunks_padded + c (chunks_padded a power of two) holds planes when r < R and c < chunks.
    const int shift = __ffs(prm.chunks_padded) - 1;
    const std::int64_t mask = prm.chunks_padded - 1, segments = prm.row_segments, chunks = prm.chunks;
    const float* partials = prm.partials;
    auto leaf = [=](std::int64_t u) {
      return (u >> shift) < segments && (u & mask) < chunks ? __ldcg(partials + u) : 0.0f;
    };
    const float total = detail::block_tree_of(leaf, prm.units, &shares[0][0]);
    if (tid == 0) detail::publish_gosa(prm, slot, total);
  }
}

}  // namespace tally::himeno::kernels
