// Where a scatter's updates land, for every strategy: one `add` per element
// slot, called by all 32 lanes together (for_each_element guarantees it).
//
// A sink maps a key to an address (a private shared-memory copy, a cluster
// peer's shared memory, or the output in global memory) and updates it
// atomically, either lane by lane or warp-aggregated: lanes with equal keys
// combine first (one __match_any_sync) and one lane per key does the atomic.
// Counting (unit) sinks add the group's size, found with a popcount.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tally/core/operators.hpp"
#include "tally/cuda/device/atomic.cuh"
#include "tally/cuda/device/warp_aggregated.cuh"

namespace tally::kernels::histogram {

/// When a sink aggregates a warp's equal keys before its atomics.
enum class aggregation : int {
  never,    ///< one atomic per element
  always,   ///< match every step
  sampled,  ///< match on sampled steps; aggregate the steps after a sample only if it found equal keys
};
/// Sampled mode: a warp measures its first step; while samples find equal
/// keys it aggregates every step and measures again every kSampleEvery
/// steps; after a sample without equal keys it does plain atomics and
/// measures again only after kSampleQuiet steps. A warp of a 10^7-element
/// launch makes ~40 steps, so uniform keys pay about one match per warp
/// (three with a fixed interval of 16 cost 1-4% over plain atomics on H100).
inline constexpr unsigned kSampleEvery = 16;
inline constexpr unsigned kSampleQuiet = 256;

/// *p = op(*p, v) atomically; plus goes to the hardware add (complex: per
/// component), other operators to atomic_update.
template <class T, class Op>
__device__ __forceinline__ void combine_atomically(T* p, const T& v, const Op& op) {
  if constexpr (std::is_same_v<Op, plus>) device::atomic_add_per_thread(p, v);
  else device::atomic_accumulate(p, v, op);
}

/// *p += v for a 64-bit integer in shared memory as two native 32-bit atomic
/// adds with the carry taken from the low word's old value: sm_90 has no
/// 64-bit shared-memory atomic add (it compiles to a CAS loop, ATOMS.CAST.SPIN.64,
/// which under contention retries). Exact modulo 2^64; the pair of words is
/// consistent once every add has landed (read after a barrier).
template <class T>
__device__ __forceinline__ void shared_add_64(T* p, T v) {
  static_assert(sizeof(T) == 8 && std::is_integral_v<T>);
  auto* word = reinterpret_cast<unsigned*>(p);  // little-endian: low word first
  const auto bits = static_cast<unsigned long long>(v);
  const auto low = static_cast<unsigned>(bits);
  const auto high = static_cast<unsigned>(bits >> 32);
  const unsigned old = atomicAdd(word, low);
  const unsigned carry = old + low < old ? 1u : 0u;
  if (high + carry != 0) atomicAdd(word + 1, high + carry);
}

/// *p = op(*p, v) on shared memory (64-bit integer sums split in two).
template <class T, class Op>
__device__ __forceinline__ void combine_in_shared(T* p, const T& v, const Op& op) {
  if constexpr (std::is_same_v<Op, plus> && std::is_integral_v<T> && sizeof(T) == 8) shared_add_64(p, v);
  else combine_atomically(p, v, op);
}

/// True when v is bit for bit the operator's identity: such partials are not flushed.
template <class T>
__device__ __forceinline__ bool same_bits(const T& a, const T& b) {
  static_assert(sizeof(T) % 4 == 0);
  unsigned wa[sizeof(T) / 4], wb[sizeof(T) / 4];
  std::memcpy(wa, &a, sizeof(T));
  std::memcpy(wb, &b, sizeof(T));
  bool same = true;
#pragma unroll
  for (unsigned w = 0; w < sizeof(T) / 4; ++w) same = same && wa[w] == wb[w];
  return same;
}

/// The update part shared by every sink. S: the stored type (unsigned counts
/// for counting in shared memory, else the value type); Locate: key -> S*.
template <class S, class Op, bool Unit, class Locate>
struct atomic_sink {
  Locate locate;
  Op op;
  aggregation mode;
  bool narrow_keys;  ///< every key fits 32 bits: match on 32 bits (cheaper)
  unsigned until_sample = 0;  ///< sampled: steps before the next measuring step (warp-uniform)
  bool hot = false;           ///< sampled: the last sample found equal keys

  template <class O>
  static __device__ __forceinline__ void update(S* p, const S& v, const O& o) {
    if constexpr (Locate::shared) combine_in_shared(p, v, o);
    else combine_atomically(p, v, o);
  }

  template <class V>
  __device__ __forceinline__ void add(bool valid, std::int64_t key, const V& value) {
    bool aggregate = mode == aggregation::always;
    bool measuring = false;
    if (mode == aggregation::sampled) {
      measuring = until_sample == 0;
      aggregate = measuring || hot;
      if (!measuring) --until_sample;
    }
    if (!aggregate) {
      if (valid) {
        if constexpr (Unit) update(locate(key), S(1), plus{});
        else update(locate(key), static_cast<S>(value), op);
      }
      return;
    }
    const unsigned active = __ballot_sync(0xffffffffu, valid);
    bool shared_key = false;
    if (valid) {
      const device::warp_group g = narrow_keys ? device::group_by_key(active, static_cast<unsigned>(key))
                                               : device::group_by_key(active, key);
      shared_key = g.size() > 1;
      if constexpr (Unit) {
        if (__ffs(g.members) - 1 == g.lane) update(locate(key), static_cast<S>(g.size()), plus{});
      } else {
        const S total = device::group_inclusive_scan(g, static_cast<S>(value), op);
        if (g.is_writer()) update(locate(key), total, op);
      }
    }
    if (measuring) {
      hot = __any_sync(0xffffffffu, shared_key);
      until_sample = (hot ? kSampleEvery : kSampleQuiet) - 1;
    }
  }
};

/// Keys index an array directly: the output in global memory, or (Shared) a
/// private copy in the block's shared memory.
template <class S, bool Shared = false>
struct locate_direct {
  static constexpr bool shared = Shared;
  S* base;
  __device__ __forceinline__ S* operator()(std::int64_t key) const { return base + key; }
};

}  // namespace tally::kernels::histogram
