// Warp shuffles for any trivially copyable type, moved as 32-bit words.
#pragma once

#include <cstring>
#include <type_traits>

namespace tally::device {

inline constexpr unsigned kFullMask = 0xffffffffu;

namespace detail {
/// Moves `value` through a warp shuffle as 32-bit words; shuffle_word(w)
/// performs the shuffle of one word.
template <class T, class ShuffleWord>
__device__ __forceinline__ T shuffle_words(const T& value, const ShuffleWord& shuffle_word) {
  static_assert(std::is_trivially_copyable_v<T>, "tally::device shuffles need a trivially copyable type");
  static_assert(sizeof(T) <= 32, "tally::device shuffles move at most 32 bytes");
  constexpr int kWords = (sizeof(T) + 3) / 4;
  unsigned words[kWords] = {};
  memcpy(words, &value, sizeof(T));
#pragma unroll
  for (int w = 0; w < kWords; ++w) words[w] = shuffle_word(words[w]);
  T result;
  memcpy(&result, words, sizeof(T));
  return result;
}
}  // namespace detail

/// The value `delta` lanes up (lane + delta), or the caller's own when that
/// lane is past the warp's end. All lanes in `mask` must call it.
/// Pre: T trivially copyable, at most 32 bytes.
template <class T>
__device__ __forceinline__ T shuffle_down(const T& value, int delta, unsigned mask = kFullMask) {
  if constexpr (std::is_same_v<T, int> || std::is_same_v<T, unsigned> || std::is_same_v<T, float> ||
                std::is_same_v<T, double> || std::is_same_v<T, long long> ||
                std::is_same_v<T, unsigned long long>) {
    return __shfl_down_sync(mask, value, delta);
  } else {
    return detail::shuffle_words(value, [&](unsigned word) { return __shfl_down_sync(mask, word, delta); });
  }
}

/// The value held by lane `source`. Pre: as shuffle_down.
template <class T>
__device__ __forceinline__ T shuffle(const T& value, int source, unsigned mask = kFullMask) {
  return detail::shuffle_words(value, [&](unsigned word) { return __shfl_sync(mask, word, source); });
}

/// The value held by lane (lane ^ lane_mask): a butterfly step.
/// Pre: as shuffle_down.
template <class T>
__device__ __forceinline__ T shuffle_xor(const T& value, int lane_mask, unsigned mask = kFullMask) {
  return detail::shuffle_words(value, [&](unsigned word) { return __shfl_xor_sync(mask, word, lane_mask); });
}

}  // namespace tally::device
