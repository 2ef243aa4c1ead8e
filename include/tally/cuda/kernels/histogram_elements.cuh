// Walking a scatter's elements on the GPU: 16-byte loads of the keys' array
// (and of the values' array where it is aligned alike), several loads in
// flight per thread, and every lane of a warp visiting the same number of
// times so that visitors may use warp intrinsics (match, ballot, shuffles).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda/annotated_ptr>

#include "tally/core/scatter.hpp"

namespace tally::kernels::histogram {

template <class T>
__device__ __forceinline__ bool is_aligned16(const T* p) {
  return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0;
}

/// Loads N consecutive elements at p: 16-byte loads when `vectorised` (p
/// 16-aligned) and the run is whole vectors, element loads otherwise.
/// EvictFirst: with the L2 evict-first hint (data read for the last time).
template <bool EvictFirst = false, class T, int N>
__device__ __forceinline__ void load_run(const T* p, T (&out)[N], bool vectorised) {
  if constexpr (std::is_same_v<T, ::tally::detail::unit_weight>) {
    return;
  } else {
    if constexpr ((N * sizeof(T)) % 16 == 0) {
      if (vectorised) {
        constexpr int kVectors = static_cast<int>(N * sizeof(T) / 16);
        uint4 raw[kVectors];
        const auto* vectors = reinterpret_cast<const uint4*>(p);
        if constexpr (EvictFirst) {
          const cuda::annotated_ptr<const uint4, cuda::access_property::streaming> last_use(vectors);
#pragma unroll
          for (int v = 0; v < kVectors; ++v) raw[v] = last_use[v];
        } else {
#pragma unroll
          for (int v = 0; v < kVectors; ++v) raw[v] = __ldg(vectors + v);
        }
        std::memcpy(static_cast<void*>(out), raw, sizeof(out));
        return;
      }
    }
    if constexpr (EvictFirst) {
      const cuda::annotated_ptr<const T, cuda::access_property::streaming> last_use(p);
#pragma unroll
      for (int j = 0; j < N; ++j) out[j] = last_use[j];
    } else {
#pragma unroll
      for (int j = 0; j < N; ++j) out[j] = p[j];
    }
  }
}

/// Elements per 16-byte load of the key array.
template <class A>
inline constexpr int kRun = sizeof(A) >= 16 ? 1 : static_cast<int>(16 / sizeof(A));

/// n elements at p cut at p's 16-byte boundaries: the `head` elements before
/// the first one (all n when p is not even element-aligned: then every load
/// is an element load), `runs` whole runs of kRun<T> elements after them, and
/// the index `tail` where the elements after the last whole run start.
struct vector_split {
  std::int64_t head, runs, tail;
  /// The index of the e-th of the head + (n - tail) elements outside the runs.
  __device__ __forceinline__ std::int64_t extra(std::int64_t e) const { return e < head ? e : tail + (e - head); }
};

template <class T>
__device__ __forceinline__ vector_split split_vectors(const T* p, std::int64_t n) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::int64_t head = address % alignof(T) == 0 ? ((16 - address % 16) % 16) / sizeof(T) : n;
  head = head < n ? head : n;
  const std::int64_t runs = (n - head) / kRun<T>;
  return {head, runs, head + runs * kRun<T>};
}

/// Calls visit(in_range, element, key, value_source) for every element of
/// items, where in_range tells whether the lane holds an element this call.
/// Every lane of every warp calls visit the same number of times (lanes
/// without an element pass in_range = false), so visit may use warp-wide
/// intrinsics over the full mask.
/// Revisit: a second pass over values that a first forward pass loaded with
/// the L2 evict-last hint (histogram_shared_memory.cuh, phase 0): walk the grid's
/// strides backward, so that the values read last, still in L2, come first,
/// and load everything evict-first, so that neither the keys nor the values
/// already used displace the ones still to come (and none stay behind).
/// Pre: blockDim.x is a multiple of 32.
template <bool Revisit = false, class Items, class Visit>
__device__ __forceinline__ void for_each_element(const Items& items, Visit&& visit) {
  using A = typename Items::first_type;
  using B = typename Items::second_type;
  constexpr int N = kRun<A>;
  constexpr int U = Items::unit ? 4 : 2;  // loads in flight per thread
  const std::int64_t n = items.n;
  const vector_split split = split_vectors(items.a, n);
  const std::int64_t head = split.head, runs = split.runs, tail = split.tail;
  bool vector_b = false;
  if constexpr (!Items::unit) vector_b = is_aligned16(items.b + head);

  const int lane = threadIdx.x & 31;
  const std::int64_t warp = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const std::int64_t warps = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;

  const std::int64_t start = warp * 32 * U;
  const std::int64_t step = warps * 32 * U;
  const std::int64_t steps = runs > start ? (runs - start + step - 1) / step : 0;
  for (std::int64_t t = 0; t < steps; ++t) {
    const std::int64_t r0 = start + (Revisit ? steps - 1 - t : t) * step;
    A a[U][N];
    B b[U][N];
    bool has[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const std::int64_t r = r0 + u * 32 + lane;
      has[u] = r < runs;
      if (has[u]) {
        load_run<Revisit>(items.a + head + r * N, a[u], true);
        if constexpr (!Items::unit) load_run<Revisit>(items.b + head + r * N, b[u], vector_b);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int j = 0; j < N; ++j) {
        const std::int64_t i = head + (r0 + u * 32 + lane) * N + j;
        visit(has[u], i, has[u] ? items.key(a[u][j]) : std::int64_t(-1), b[u][j]);
      }
  }
  // The elements before the first boundary and after the last whole run.
  const std::int64_t extras = head + (n - tail);
  for (std::int64_t e0 = warp * 32; e0 < extras; e0 += warps * 32) {
    const std::int64_t e = e0 + lane;
    const bool has = e < extras;
    const std::int64_t i = split.extra(e);
    B b{};
    std::int64_t key = -1;
    if (has) {
      key = items.key(items.a[i]);
      if constexpr (!Items::unit) b = items.b[i];
    }
    visit(has, i, key, b);
  }
}

}  // namespace tally::kernels::histogram
