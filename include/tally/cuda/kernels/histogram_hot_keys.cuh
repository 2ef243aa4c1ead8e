// The hot_keys strategy: skewed keys over more bins than a block holds.
//
// Global atomics collapse on skewed keys: with Zipf-like keys over 10^6 bins
// the first bin takes ~9 % of the elements and its neighbours the next few
// percent, and every warp that holds one of them queues an atomic on the same
// few L2 lines (H100: 1.4 ms for 10^7 samples, against 0.13 ms for uniform
// keys). The keys that carry most of the traffic are few, and fit shared
// memory. So, per slice:
//
//   1. sample_keys_kernel gathers the keys of kHotSample evenly spaced
//      elements (spread over 64 blocks), and find_hot_keys_kernel (one
//      block) counts them in a shared-memory sketch (kSketchSlots counters,
//      each key adds to the counter its hash picks); every sampled key whose
//      counter reaches kHotThreshold (~1/2048 of the elements) goes into an
//      open-addressing table of kHotSlots slots in global memory, at most
//      kMostHotKeys of them, and the table's last word says how many. A
//      counter shared by several keys can only add keys, never lose a
//      frequent one.
//   2. hot_keys_kernel: each block copies the table into shared memory with a
//      private sum per slot; an element whose key is in the table adds to
//      that sum (warp-aggregated shared atomics), any other goes to global
//      memory (warp-aggregated on sampled evidence, as aggregated_atomics).
//      At the end each block flushes its non-empty sums with one global
//      atomic per hot key. A table without keys (uniform keys) skips the
//      lookups: the kernel is then aggregated_atomics' loop.
//
// Which keys are hot changes only where the work goes, never the result:
// counts and the deterministic mode's int64 sums are exact either way.
#pragma once

#include <cstdint>

#include "tally/cuda/kernels/histogram_common.cuh"
#include "tally/cuda/kernels/histogram_elements.cuh"
#include "tally/cuda/kernels/histogram_sinks.cuh"

namespace tally::kernels::histogram {

/// Elements sampled to find the hot keys: counted 16 a thread by one 1024-thread block.
inline constexpr int kHotSampleThreads = 1024;
inline constexpr int kHotSamplePerThread = 16;
inline constexpr int kHotSample = kHotSampleThreads * kHotSamplePerThread;
/// Sampled occurrences that make a key hot (a frequency of ~1/2048).
inline constexpr int kHotThreshold = 8;
/// Keys the table takes at most (kHotSample / kHotThreshold counters can
/// reach the threshold), and its slots: twice as many, so probes stay short.
inline constexpr int kMostHotKeys = kHotSample / kHotThreshold;
inline constexpr int kHotSlots = 2 * kMostHotKeys;
/// The table in global memory: kHotSlots keys, then the number of hot keys.
inline constexpr int kHotTableWords = kHotSlots + 1;
/// Counters of the sample's sketch (32-bit, 64 KB of dynamic shared memory):
/// uniform keys put ~1 sampled key on a counter, so reaching 8 by chance is
/// rare (~0.2 counters a call), and costs only a needless table entry.
inline constexpr int kSketchSlots = 16384;
inline constexpr int kSketchBits = 14;
inline constexpr std::size_t kSketchBytes = kSketchSlots * sizeof(unsigned);
/// An empty slot (keys are below bins < 2^32 - 1).
inline constexpr unsigned kNoHotKey = 0xffffffffu;

/// Fibonacci hashing of a key onto 2^Bits slots.
template <int Bits>
__device__ __forceinline__ unsigned hash_slot(unsigned key) {
  return (key * 2654435769u) >> (32 - Bits);
}
inline constexpr int kHotSlotBits = 12;
static_assert(kHotSlots == 1 << kHotSlotBits && kSketchSlots == 1 << kSketchBits);

/// Threads a block of sample_keys_kernel: kHotSample / kSampleBlockThreads
/// blocks, so that the sample's scattered loads spread over many SMs (one SM
/// gathers 16384 sectors at ~25 GB/s: ~20 µs; 64 SMs: well under 1 µs).
inline constexpr int kSampleBlockThreads = 256;

/// sample[j] = the key of element j·n/kHotSample (evenly spaced), or
/// kNoHotKey when it lands in no bin. Pre: kHotSample threads in all, in
/// blocks of kSampleBlockThreads; 0 < n < 2^32; 0 < bins < 2^32 - 1.
template <class Items>
__global__ void __launch_bounds__(kSampleBlockThreads) sample_keys_kernel(Items items, std::int64_t bins,
                                                                          unsigned* sample) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * kSampleBlockThreads + threadIdx.x;
  const std::int64_t key = items.key(items.a[j * items.n / kHotSample]);
  sample[j] = key >= 0 && key < bins ? static_cast<unsigned>(key) : kNoHotKey;
}

/// Writes the hot keys of a sample (sample_keys_kernel's) into `table`
/// (kHotTableWords words: the keys or kNoHotKey, then their number). Pre: one
/// block of kHotSampleThreads threads with kSketchBytes of dynamic shared
/// memory.
template <int = 0>  // a template, so that every translation unit may hold it
__global__ void __launch_bounds__(kHotSampleThreads) find_hot_keys_kernel(const unsigned* sample, unsigned* table) {
  extern __shared__ unsigned sketch[];
  __shared__ unsigned found[kHotSlots];
  __shared__ unsigned found_count;
  unsigned keys[kHotSamplePerThread];
  bool valid[kHotSamplePerThread];
#pragma unroll
  for (int k = 0; k < kHotSamplePerThread; ++k) {  // coalesced, from L2
    keys[k] = sample[k * kHotSampleThreads + threadIdx.x];
    valid[k] = keys[k] != kNoHotKey;
  }
  for (int s = threadIdx.x; s < kSketchSlots; s += blockDim.x) sketch[s] = 0;
  for (int s = threadIdx.x; s < kHotSlots; s += blockDim.x) found[s] = kNoHotKey;
  if (threadIdx.x == 0) found_count = 0;
  __syncthreads();
  // Plain shared atomics: grouping equal counters first (__match_any_sync)
  // made this kernel take ~18 µs on the H100, most of the sample's cost.
#pragma unroll
  for (int k = 0; k < kHotSamplePerThread; ++k)
    if (valid[k]) atomicAdd(&sketch[hash_slot<kSketchBits>(keys[k])], 1u);
  __syncthreads();
  for (int k = 0; k < kHotSamplePerThread; ++k) {
    if (!valid[k] || sketch[hash_slot<kSketchBits>(keys[k])] < kHotThreshold) continue;
    // Insert unless present; a key seen by several threads lands once.
    for (unsigned s = hash_slot<kHotSlotBits>(keys[k]);; s = (s + 1) & (kHotSlots - 1)) {
      const unsigned held = found[s];
      if (held == keys[k]) break;
      if (held != kNoHotKey) continue;
      if (atomicAdd(&found_count, 1u) >= kMostHotKeys) {  // full (counters shared by several keys)
        atomicSub(&found_count, 1u);
        break;
      }
      const unsigned seen = atomicCAS(&found[s], kNoHotKey, keys[k]);
      if (seen == kNoHotKey) break;
      atomicSub(&found_count, 1u);  // another thread took the slot first
      if (seen == keys[k]) break;
    }
  }
  __syncthreads();
  for (int s = threadIdx.x; s < kHotSlots; s += blockDim.x) table[s] = found[s];
  if (threadIdx.x == 0) table[kHotSlots] = found_count;
}

/// Launch parameters of hot_keys_kernel.
struct hot_keys_params {
  std::int64_t bins;
  const unsigned* table;  ///< find_hot_keys_kernel's table for these items
  out_of_range_report report;
};

/// out[key] ⊕= value for every element: hot keys through the block's shared
/// sums, the others through global atomics (see the top of this file).
/// Pre: 0 < bins < 2^32 - 1; blockDim.x a multiple of 32; dynamic shared
/// memory of kHotSlots stored values; the stored type has shared-memory
/// atomics for Op.
template <class Items, class Out, class Op>
__global__ void __launch_bounds__(256) hot_keys_kernel(Items items, Out* out, Op op, hot_keys_params p) {
  using S = stored_t<Items>;
  extern __shared__ __align__(16) unsigned char sums_raw[];
  S* sums = reinterpret_cast<S*>(sums_raw);
  __shared__ unsigned keys[kHotSlots];
  const auto visit_with = [&](auto&& route) {
    for_each_element(items, [&](bool has, std::int64_t i, std::int64_t key, const auto& b) {
      const bool valid = has && key >= 0 && key < p.bins;
      if (has && !valid) p.report.record(i);
      typename Items::value_type v{};
      if constexpr (!Items::unit) {
        if (valid) v = items.value(b);
      }
      route(valid, key, v);
    });
  };
  atomic_sink<Out, Op, Items::unit, locate_direct<Out>> cold{{out}, op, aggregation::sampled, true};
  if (__ldg(p.table + kHotSlots) == 0) {  // no hot keys: global atomics only
    visit_with([&](bool valid, std::int64_t key, const auto& v) { cold.add(valid, key, v); });
    return;
  }
  const S identity = stored_identity<Items>(op);
  for (int s = threadIdx.x; s < kHotSlots; s += blockDim.x) {
    keys[s] = __ldg(p.table + s);
    sums[s] = identity;
  }
  __syncthreads();
  // Hot keys collide within warps all the time: always aggregate them.
  atomic_sink<S, Op, Items::unit, locate_direct<S, true>> hot{{sums}, op, aggregation::always, true};
  visit_with([&](bool valid, std::int64_t key, const auto& v) {
    // The table is at most half full: a probe ends at the key or at an empty slot.
    unsigned slot = valid ? hash_slot<kHotSlotBits>(static_cast<unsigned>(key)) : 0;
    bool is_hot = false;
    if (valid) {
      for (unsigned held = keys[slot]; held != kNoHotKey; held = keys[slot]) {
        if (held == static_cast<unsigned>(key)) {
          is_hot = true;
          break;
        }
        slot = (slot + 1) & (kHotSlots - 1);
      }
    }
    hot.add(valid && is_hot, slot, v);
    cold.add(valid && !is_hot, key, v);
  });
  __syncthreads();
  for (int s = threadIdx.x; s < kHotSlots; s += blockDim.x)
    if (keys[s] != kNoHotKey) flush_bin<Items>(out + keys[s], sums[s], op);
}

}  // namespace tally::kernels::histogram
