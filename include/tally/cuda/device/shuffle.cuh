// Warp shuffles for any trivially copyable type, moved as 32-bit words.
#pragma once

#include <cstring>
#include <type_traits>

namespace tally::device {

inline constexpr unsigned kFullMask = 0xffffffffu;

/// The value `delta` lanes up (lane + delta), or the caller's own when that
/// lane is past the warp's end. All lanes in `mask` must call it.
/// Pre: T trivially copyable, at most 32 bytes.
template <class T>
__device__ __forceinline__ T shuffle_down(const T& value, int delta, unsigned mask = kFullMask) {
  static_assert(std::is_trivially_copyable_v<T>, "tally::device::shuffle_down needs a trivially copyable type");
  static_assert(sizeof(T) <= 32, "tally::device::shuffle_down moves at most 32 bytes");
  if constexpr (std::is_same_v<T, int> || std::is_same_v<T, unsigned> || std::is_same_v<T, float> ||
                std::is_same_v<T, double> || std::is_same_v<T, long long> ||
                std::is_same_v<T, unsigned long long>) {
    return __shfl_down_sync(mask, value, delta);
  } else {
    constexpr int kWords = (sizeof(T) + 3) / 4;
    unsigned words[kWords] = {};
    memcpy(words, &value, sizeof(T));
#pragma unroll
    for (int w = 0; w < kWords; ++w) words[w] = __shfl_down_sync(mask, words[w], delta);
    T result;
    memcpy(&result, words, sizeof(T));
    return result;
  }
}

/// The value held by lane `source`.
template <class T>
__device__ __forceinline__ T shuffle(const T& value, int source, unsigned mask = kFullMask) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 32, "tally::device::shuffle: see shuffle_down");
  constexpr int kWords = (sizeof(T) + 3) / 4;
  unsigned words[kWords] = {};
  memcpy(words, &value, sizeof(T));
#pragma unroll
  for (int w = 0; w < kWords; ++w) words[w] = __shfl_sync(mask, words[w], source);
  T result;
  memcpy(&result, words, sizeof(T));
  return result;
}

}  // namespace tally::device
