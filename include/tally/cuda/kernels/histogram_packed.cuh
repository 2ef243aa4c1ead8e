// Counting into 16-bit counters, two per 32-bit shared-memory word, so that
// twice as many bins fit a block (H100: 10^5 int32 bins need 400 KB as
// 32-bit counters, 200 KB as 16-bit ones).
//
// Bin 2w is the low half of word w, bin 2w+1 the high half. There is no
// 16-bit atomic add, so a count goes in with a 32-bit atomicAdd of c (low)
// or c << 16 (high), and a counter may wrap. Every wrap is accounted for
// exactly, from the old word each atomic returns, so the counts are exact
// whatever the input (all 10^7 samples in one bin included):
//   - low half: only `add` changes it, by +c; a wrap (old + c > 0xFFFF) is
//     65536 counts the half no longer holds: add them to the output. The
//     wrap also carries 1 into the high half, which the same thread takes
//     back at once with a second atomic (+0xFFFF0000: high half - 1, low
//     half untouched).
//   - high half: it moves by +c (adds), +1 (carries) and -1 (take-backs),
//     each step made by one atomic whose old value its thread sees. Other
//     threads may observe the half between a carry and its take-back, so
//     instead of trusting any one observation, each thread accounts for
//     the wraps its own step makes: +65536 to the output when its step
//     crosses 0xFFFF -> 0 upwards, -65536 when a take-back crosses 0 -> 0xFFFF
//     downwards. Carries and take-backs cancel, so the output receives
//     65536 × (net wraps), and the half ends at the true count mod 65536.
// Wraps need 65536 counts of one bin in one block: on uniform data they
// never happen, on skewed data one extra atomic per 65536 counts.
#pragma once

#include <cstdint>

#include "tally/core/operators.hpp"
#include "tally/cuda/kernels/histogram_sinks.cuh"

namespace tally::kernels::histogram {

/// Packed 16-bit counters in shared memory; wraps go to `out` (the output,
/// in global memory) with global atomics. Pre: bins <= 2 × words.
template <class Out>
struct packed_counters {
  unsigned* words;
  Out* out;
  std::int64_t bins;

  /// Counts c (1 <= c <= 65535) more samples in bin `key` (0 <= key < bins).
  __device__ __forceinline__ void add(std::int64_t key, unsigned c) const {
    unsigned* word = words + (key >> 1);
    if (key & 1) {
      const unsigned old = atomicAdd(word, c << 16);
      if ((old >> 16) + c > 0xFFFFu) wrapped(key, +1);
      return;
    }
    const unsigned old = atomicAdd(word, c);
    if ((old & 0xFFFFu) + c <= 0xFFFFu) return;
    wrapped(key, +1);
    // The carry into the high half, and its take-back.
    if ((old >> 16) == 0xFFFFu) wrapped(key + 1, +1);
    const unsigned before = atomicAdd(word, 0xFFFF0000u);
    if ((before >> 16) == 0u) wrapped(key + 1, -1);
  }

 private:
  __device__ __forceinline__ void wrapped(std::int64_t bin, int direction) const {
    // A half past the last bin only sees carries and their take-backs, so
    // its value (carries not yet taken back) stays small and never wraps;
    // the guard only keeps that argument out of the memory-safety proof.
    if (bin < bins) combine_atomically(out + bin, static_cast<Out>(direction * 65536), plus{});
  }
};

/// A sink (histogram_sinks.cuh) over packed counters: one add per valid element.
template <class Out>
struct packed_sink {
  packed_counters<Out> counters;
  template <class V>
  __device__ __forceinline__ void add(bool valid, std::int64_t key, const V&) {
    if (valid) counters.add(key, 1u);
  }
};

}  // namespace tally::kernels::histogram
