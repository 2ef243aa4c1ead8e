// Vectorised loads and stores: V consecutive elements in one (or two)
// 16-byte, 8-byte or 4-byte transactions when the address allows, element by
// element otherwise.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tally::device {

/// V elements held in registers.
template <class T, int V>
struct vector_of {
  T v[V];
};

/// The widest power-of-two load width, at most 16 bytes, that divides `bytes`.
constexpr int load_width(int bytes) { return bytes % 16 == 0 ? 16 : bytes % 8 == 0 ? 8 : bytes % 4 == 0 ? 4 : bytes % 2 == 0 ? 2 : 1; }

/// True when p is aligned for load_vector<T, V, true>.
template <class T, int V>
__host__ __device__ inline bool vector_aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % load_width(static_cast<int>(sizeof(T)) * V) == 0;
}

/// The word a vector of `bytes` bytes moves in (load_width(bytes) wide).
template <int Bytes>
using vector_word = std::conditional_t<load_width(Bytes) == 16, uint4,
                                       std::conditional_t<load_width(Bytes) == 8, uint2, unsigned>>;

/// Loads p[0..V). Aligned: p is aligned to load_width(sizeof(T)·V) (see
/// vector_aligned), and the load is as wide as that allows (LDG.128 for 16
/// bytes). Unaligned: element by element, needing only T's own alignment.
/// ReadOnly (the default): through the read-only data path, so the data must
/// not change during the kernel; otherwise plain loads, which see what other
/// blocks wrote before a grid-wide barrier.
template <class T, int V, bool Aligned, bool ReadOnly = true>
__device__ __forceinline__ vector_of<T, V> load_vector(const T* p) {
  vector_of<T, V> out;
  constexpr int kBytes = static_cast<int>(sizeof(T)) * V;
  if constexpr (Aligned && load_width(kBytes) >= 4) {
    using word = vector_word<kBytes>;
    constexpr int kWords = kBytes / static_cast<int>(sizeof(word));
    word words[kWords];
    const word* src = reinterpret_cast<const word*>(p);
#pragma unroll
    for (int w = 0; w < kWords; ++w) {
      if constexpr (ReadOnly) words[w] = __ldg(src + w);
      else words[w] = src[w];
    }
    memcpy(&out, words, kBytes);
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) out.v[e] = p[e];
  }
  return out;
}

/// Stores value into p[0..V): as wide as load_vector when Aligned (same
/// precondition), element by element otherwise.
template <class T, int V, bool Aligned>
__device__ __forceinline__ void store_vector(T* p, const vector_of<T, V>& value) {
  constexpr int kBytes = static_cast<int>(sizeof(T)) * V;
  if constexpr (Aligned && load_width(kBytes) >= 4) {
    using word = vector_word<kBytes>;
    constexpr int kWords = kBytes / static_cast<int>(sizeof(word));
    word words[kWords];
    memcpy(words, &value, kBytes);
    word* dst = reinterpret_cast<word*>(p);
#pragma unroll
    for (int w = 0; w < kWords; ++w) dst[w] = words[w];
  } else {
#pragma unroll
    for (int e = 0; e < V; ++e) p[e] = value.v[e];
  }
}

}  // namespace tally::device
