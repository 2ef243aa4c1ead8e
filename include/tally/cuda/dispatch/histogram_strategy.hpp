// Choosing how the GPU backend runs a histogram or scatter (plain host code,
// no CUDA needed, so the choice can be tested anywhere).
//
// The costs the choice weighs, for n elements into `bins` bins of `slot`
// bytes on a device with P SMs:
//   - reading the input: the floor for every strategy;
//   - per-element atomics: cheap in shared memory, dear in global memory
//     (H100: ~73 G random global atomics/s, and one address serialises:
//     plain int32 atomics take 7.3 ms for 10^7 elements into 1 bin);
//   - privatised bins cost zeroing plus a flush: one coalesced global
//     atomic per bin per block (cheap: 2.6 M of them for 10^4 bins on 264
//     blocks cost ~4 µs on H100), or, for packed 16-bit counters and the
//     deterministic kernel, one row per block summed after a grid barrier
//     (kernels/histogram_shared_memory.cuh).
// Hence, in order:
//   1. shared_memory while the bins fit one block's shared memory (up to
//      kMaxSharedBytes: 57K int32 bins; counting falls back to packed
//      16-bit counters up to 114K bins); counting into at most
//      kRegisterBins bins keeps per-thread counters in registers instead
//      (no shared-memory atomic, no match per element);
//   2. beyond, on inputs of kHotKeysElements or more: hot_keys -- a sample
//      of the keys finds the frequent ones, which each block sums in shared
//      memory, and the rest go to global atomics (kernels/histogram_hot_keys.cuh;
//      H100, 10^7 Zipf-like samples over 10^6 bins: aggregated global atomics
//      alone took 1.43 ms against 0.13 ms for uniform keys);
//   3. global atomics otherwise, warp-aggregated on sampled evidence of equal
//      keys (skewed inputs), plain otherwise.
// cluster_memory (bins spread over a cluster's shared memories through
// DSMEM) stays available when forced, but automatic never picks it. Measured
// on H100 (10^7 uniform doubles, 10^5 bins): cluster_memory 159 µs (int32
// counts) and 311 µs (f64 scatter-add) against 141 / 141 µs for plain
// global atomics and 144 / 147 µs for aggregated ones: remote DSMEM atomics
// cost more than L2 atomics when keys are spread out. On Zipf-skewed keys
// at 10^5 bins it is the other way round (cluster 634 µs, aggregated global
// 1461 µs), yet CUB (426 µs) beats both there, so cluster_memory is not
// the answer for skewed data either; automatic takes the uniform case.
// Warp aggregation in shared memory pays only when a warp's 32 lanes often
// share bins: up to kAggregateBins bins, for weighted scatters only
// (counting up to kRegisterBins uses registers, and above that uniform
// counts lose more to __match_any_sync than they gain).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tally/core/error.hpp"
#include "tally/core/histogram_options.hpp"

namespace tally::detail {

/// Shared memory a privatised block may use (H100: 227 KB per block after
/// opting in, of which the runtime reserves 1 KB).
inline constexpr std::size_t kMaxSharedBytes = 224 * 1024;
/// Budget for several private copies of few bins (copies cut contention).
inline constexpr std::size_t kCopiesBytes = 16 * 1024;
inline constexpr int kMaxCopies = 16;
/// Bins up to which warps aggregate equal keys before shared-memory atomics
/// (weighted scatters; counting does not match in shared memory).
inline constexpr std::int64_t kAggregateBins = 64;
/// Bins up to which counting (shared_memory) keeps per-thread counters in
/// registers; the kernel is specialised for 1, 2, 4 and 8 counters.
// Measured on the H100 (10^7 doubles, int32 counts): 1 bin 31.5 µs with
// registers (CUB 33.6); 10 bins, rounded up to 16 counters, 40.7 µs: the 16
// compare-adds per sample cost more than they save there, so the bound is 8.
inline constexpr std::int64_t kRegisterBins = 8;
/// Weighted scatters into at most this many bins keep per-thread bins in
/// shared memory (kernels/histogram_shared_memory.cuh, thread_private), if they
/// take at most kThreadPrivateBytes per block.
// Measured on the H100 (10^7 doubles, int64 index): warp-aggregated shared
// atomics (CAS loops for double and int64) took 79.3 µs at 1 bin and 72.5 µs
// at 10 bins, 1.5× the 52 µs read.
inline constexpr std::int64_t kThreadPrivateBins = 16;
inline constexpr std::size_t kThreadPrivateBytes = 64 * 1024;
/// Flush atomics above which cluster_memory uses larger clusters.
inline constexpr std::int64_t kFlushAtomics = std::int64_t(1) << 18;
/// Most blocks per SM of a privatised launch.
inline constexpr int kMaxPrivatizedBlocksPerSm = 4;
/// Most bytes of partial rows (one row of bins per block) a call may use:
/// they should stay in L2 (50 MB on H100). One block per SM always fits.
inline constexpr std::size_t kPartialsCap = std::size_t(32) << 20;
/// Largest cluster tried (16 is Hopper's non-portable maximum).
inline constexpr int kMaxCluster = 16;
/// Rows of at least this many bytes: 1024-thread privatised blocks (fewer rows).
inline constexpr std::size_t kWideRowBytes = 16 * 1024;
/// Fewest elements for which automatic samples for hot keys (the sample and
/// its sort cost a few microseconds, as much as 10^5 elements' atomics).
inline constexpr std::int64_t kHotKeysElements = std::int64_t(1) << 20;
/// Threads per block of the privatised and of the global kernels.
inline constexpr int kPrivatizedThreads = 512;
inline constexpr int kGlobalThreads = 256;
inline constexpr int kHotKeysThreads = 256;
inline constexpr int kMaxHotKeysBlocksPerSm = 8;

/// What the chooser needs to know about the call and the device.
struct histogram_problem {
  std::int64_t n = 0;
  std::int64_t bins = 0;
  std::size_t slot_bytes = 4;         ///< bytes per privatised bin
  bool shared_atomics = true;         ///< the value type has shared-memory atomics for this operator
  int sm_count = 1;
  std::size_t shared_per_block = 48 * 1024;  ///< opt-in maximum
  std::size_t shared_per_sm = 100 * 1024;
  bool clusters = false;              ///< compute capability 9.0 or later
  bool cooperative = false;           ///< cooperative launches (a grid-wide barrier)
  bool counting = false;              ///< every element adds 1 (unweighted histogram)
};

/// How to run it. cluster and copies mean what the kernels say
/// (kernels/histogram_shared_memory.cuh, histogram_cluster_memory.cuh).
struct histogram_plan {
  histogram_strategy strategy = histogram_strategy::plain_atomics;
  int cluster = 1;
  int copies = 1;
  bool aggregate = false;  ///< warp-aggregate before each atomic (global: sampled when automatic)
  bool sampled = false;    ///< global strategies: aggregate on sampled evidence only
  int registers = 0;       ///< shared_memory counting: per-thread counters (1, 2, 4, 8), 0: none
  bool packed = false;     ///< shared_memory counting: 16-bit counters, two per word
  bool thread_private = false;  ///< shared_memory weighted, few bins: bins per thread, no atomics
  std::size_t shared_bytes = 0;
  /// shared_memory without registers (kernels/histogram_shared_memory.cuh): stored
  /// bins per row (bins rounded up to 16 bytes) and bytes per row.
  std::int64_t stride = 0;
  std::size_t row_bytes = 0;
};

inline std::size_t shared_budget(const histogram_problem& p) {
  const std::size_t reserve = 1024;
  return p.shared_per_block > reserve ? std::min(kMaxSharedBytes, p.shared_per_block - reserve) : 0;
}

inline std::int64_t bin_bytes(const histogram_problem& p) { return p.bins * static_cast<std::int64_t>(p.slot_bytes); }

/// Bytes of one copy of the bins stored `slot` bytes each, rounded up to 16.
inline std::int64_t padded_bytes(std::int64_t bins, std::size_t slot) {
  const auto per = static_cast<std::int64_t>(slot);
  const std::int64_t stride = (bins * per + 15) / 16 * 16 / per;
  return stride * per;
}

/// Counting that needs 16-bit counters to fit a block.
inline bool needs_packing(const histogram_problem& p) {
  return p.counting && padded_bytes(p.bins, p.slot_bytes) > static_cast<std::int64_t>(shared_budget(p));
}

inline bool fits_block(const histogram_problem& p) {
  const std::size_t slot = needs_packing(p) ? 2 : p.slot_bytes;
  return p.shared_atomics && p.cooperative &&
         padded_bytes(p.bins, slot) <= static_cast<std::int64_t>(shared_budget(p));
}

inline bool fits_cluster(const histogram_problem& p) {
  return p.shared_atomics && p.clusters &&
         bin_bytes(p) <= static_cast<std::int64_t>(shared_budget(p)) * kMaxCluster;
}

inline histogram_plan plan_shared(const histogram_problem& p) {
  histogram_plan plan;
  plan.strategy = histogram_strategy::shared_memory;
  if (p.counting && p.bins <= kRegisterBins) {
    int r = 1;
    while (r < p.bins) r *= 2;
    plan.registers = r;
    plan.shared_bytes = static_cast<std::size_t>(p.bins) * p.slot_bytes;
    return plan;
  }
  plan.packed = needs_packing(p);
  const std::size_t slot = plan.packed ? 2 : p.slot_bytes;
  const std::int64_t one = padded_bytes(p.bins, slot);
  plan.stride = one / static_cast<std::int64_t>(slot);
  plan.row_bytes = static_cast<std::size_t>(one);
  plan.copies = plan.packed ? 1
                            : static_cast<int>(std::clamp<std::int64_t>(
                                  static_cast<std::int64_t>(kCopiesBytes) / one, 1, kMaxCopies));
  plan.aggregate = !p.counting && p.bins <= kAggregateBins;
  plan.shared_bytes = static_cast<std::size_t>(one * plan.copies);
  const auto private_bytes = static_cast<std::size_t>(p.bins) * kPrivatizedThreads * slot;
  if (!p.counting && p.bins <= kThreadPrivateBins && private_bytes <= kThreadPrivateBytes) {
    plan.thread_private = true;
    plan.copies = 1;
    plan.aggregate = false;
    plan.shared_bytes = static_cast<std::size_t>(one) + private_bytes;
  }
  return plan;
}

/// Bytes of partial rows that any shared_memory plan of `bins` bins stored in
/// at most `slot` bytes may need on a device of `sm_count` SMs (callers that
/// draw a call's scratch before the plan is made reserve this much).
inline std::size_t partials_reserve(std::int64_t bins, std::size_t slot, int sm_count) {
  const auto bytes = static_cast<std::size_t>(padded_bytes(bins, slot)) * static_cast<std::size_t>(sm_count) *
                     kMaxPrivatizedBlocksPerSm;
  const auto one_per_sm = static_cast<std::size_t>(padded_bytes(bins, slot)) * static_cast<std::size_t>(sm_count);
  return bins * 2 <= static_cast<std::int64_t>(kMaxSharedBytes) ? std::min(bytes, std::max(kPartialsCap, one_per_sm))
                                                                 : 0;
}

inline histogram_plan plan_cluster(const histogram_problem& p) {
  histogram_plan plan;
  plan.strategy = histogram_strategy::cluster_memory;
  const std::int64_t budget = static_cast<std::int64_t>(shared_budget(p));
  int cluster = 2;
  while (cluster < kMaxCluster && bin_bytes(p) > budget * cluster) cluster *= 2;
  // Fewer, larger clusters mean fewer flush atomics (one per bin per cluster).
  while (cluster < kMaxCluster && (p.sm_count / cluster) * p.bins > 4 * kFlushAtomics) cluster *= 2;
  plan.cluster = cluster;
  const std::int64_t slice = (p.bins + cluster - 1) / cluster;
  plan.shared_bytes = static_cast<std::size_t>(std::max<std::int64_t>(slice * static_cast<std::int64_t>(p.slot_bytes), 16));
  return plan;
}

/// Shared memory a block of the hot_keys kernels takes at most
/// (kernels/histogram_hot_keys.cuh): the sample's 64 KB sketch and its 16 KB
/// table, or the table with 4096 sums of 16-byte values.
inline constexpr std::size_t kHotKeysSharedBytes = 81 * 1024;

/// hot_keys needs shared-memory atomics for the value, kHotKeysSharedBytes
/// of shared memory a block and keys that fit 32 bits with one value to
/// spare (the sample's out-of-range marker).
inline bool fits_hot_keys(const histogram_problem& p) {
  return p.shared_atomics && p.shared_per_block >= kHotKeysSharedBytes && p.bins < 0xffffffffLL;
}

inline histogram_plan plan_hot_keys() {
  histogram_plan plan;
  plan.strategy = histogram_strategy::hot_keys;
  plan.aggregate = true;
  plan.sampled = true;
  return plan;
}

inline histogram_plan plan_global(bool aggregate, bool sampled) {
  histogram_plan plan;
  plan.strategy = aggregate ? histogram_strategy::aggregated_atomics : histogram_strategy::plain_atomics;
  plan.aggregate = aggregate;
  plan.sampled = sampled;
  return plan;
}

/// The plan for `problem` under `forced` (automatic: the rules above).
/// Throws invalid_argument (naming options.strategy) when a forced strategy
/// cannot run this problem (bins too large for shared or cluster memory).
inline histogram_plan choose_histogram_plan(const histogram_problem& p, histogram_strategy forced,
                                            const char* function) {
  // No bins (scatter_reduce with out_size 0): every element is out of range;
  // the global kernel records them without touching memory.
  if (p.bins <= 0) return plan_global(false, false);
  switch (forced) {
    case histogram_strategy::shared_memory:
      if (!fits_block(p))
        throw_invalid_argument(function, "options.strategy",
                               "is shared_memory but " + std::to_string(p.bins) + " bins do not fit a block");
      return plan_shared(p);
    case histogram_strategy::cluster_memory:
      if (!fits_cluster(p))
        throw_invalid_argument(function, "options.strategy",
                               "is cluster_memory but " + std::to_string(p.bins) +
                                   " bins do not fit a cluster (or the GPU has no clusters)");
      return plan_cluster(p);
    case histogram_strategy::hot_keys:
      if (!fits_hot_keys(p))
        throw_invalid_argument(function, "options.strategy",
                               "is hot_keys but " + std::to_string(p.bins) +
                                   " bins need keys below 2^32 - 1, shared-memory atomics for the values under "
                                   "this operator and 81 KB of shared memory a block");
      return plan_hot_keys();
    case histogram_strategy::aggregated_atomics: return plan_global(true, false);
    case histogram_strategy::plain_atomics: return plan_global(false, false);
    case histogram_strategy::sorted_rows:  // rejected before (check_scatter_strategy); kept for the switch
      throw_invalid_argument(function, "options.strategy", "is sorted_rows, which only index_add has");
    case histogram_strategy::automatic: break;
  }
  // Privatising costs ~bins per block in zeroing and flushing: only with
  // enough elements to amortise it.
  const bool enough_elements = p.n >= p.bins;
  // Beyond one block's shared memory: global atomics (see the top of this
  // file for why not cluster_memory).
  if (enough_elements && fits_block(p)) return plan_shared(p);
  if (p.n >= kHotKeysElements && fits_hot_keys(p)) return plan_hot_keys();
  return plan_global(true, true);
}

}  // namespace tally::detail
