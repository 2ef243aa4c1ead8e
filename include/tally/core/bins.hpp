// Bin functors: what a histogram or scatter computes from an element to find
// its destination. Each returns the bin as an int64; anything outside
// [0, bins) means "no bin" and the element is ignored (or, for checked
// scatter_reduce, reported). Host and device share them, so both backends
// bin every sample alike.
#pragma once

#include <cstdint>

#include "tally/core/config.hpp"
#include "tally/core/operators.hpp"
#include "tally/core/types.hpp"

namespace tally::detail {

/// a + b rounded once (the add that follows multiply_rounded: never fused).
TALLY_HD_INLINE double add_rounded(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

/// Equal-width bins over [lo, hi), with the edges NumPy uses: w = (hi - lo) /
/// bins, edge k = lo + k·w evaluated as np.linspace does (k·w rounded, then
/// lo added and rounded; edge `bins` is hi itself), and x in bin k iff
/// edge k <= x < edge k+1. NaN and samples outside [lo, hi) give -1 (unlike
/// NumPy, whose last bin also holds x == hi).
///
/// The bin is estimated as t = (x - lo)·bins/(hi - lo). Where t lies more
/// than `margin` from an integer, floor(t) is the bin; only the rare sample
/// nearer an edge than that is corrected against the edges themselves, as
/// numpy.histogram does (evaluating two edges for every sample cost 13 % of
/// the histogram's time on the H100). The margin bounds, in units of bins,
/// how far t and the rounded edges can sit from their exact values: t carries
/// three roundings (x - lo, the scale, the product), at most 3u·bins; edge k
/// carries the rounding of w, of k·w and of the add, at most 2u·k + u·|edge|·
/// scale (u = 2^-53). margin = 16u·(bins + max(|lo|, |hi|)·scale) covers both
/// with room to spare; a range for which it reaches 1/2 (bins of a few ulps)
/// takes the edge correction for every sample, and is still exact.
struct even_bins {
  double lo, hi;
  double width;   ///< (hi - lo) / bins: NumPy's linspace step
  double scale;   ///< bins / (hi - lo): the estimate's factor
  double margin;  ///< distance from an integer beyond which floor(t) is exact
  std::int64_t bins;

  /// Edge k (0 <= k < bins), rounded as NumPy rounds it.
  TALLY_HD_INLINE double edge(std::int64_t k) const {
    return add_rounded(multiply_rounded(static_cast<double>(k), width), lo);
  }

  template <class T>
  TALLY_HD_INLINE std::int64_t operator()(const T& x) const {
    const double v = convert<double>(x);
    if (!(v >= lo && v < hi)) return -1;
    const double t = multiply_rounded(v - lo, scale);  // >= 0: v >= lo
    auto b = static_cast<std::int64_t>(t);              // floor(t)
    const double above = t - static_cast<double>(b);    // exact: t < 2^53 once b < bins
    if (b < bins && above > margin && 1.0 - above > margin) return b;
    if (b > bins - 1) b = bins - 1;  // (v - lo)·scale may round up to bins
    if (v < edge(b)) --b;            // b >= 1 here: edge 0 is lo <= v
    else if (b + 1 < bins && v >= edge(b + 1)) ++b;
    return b;
  }
};

/// Bins between sorted boundaries: bin k is [levels[k], levels[k+1]).
/// `levels` lives in the backend's memory when the functor runs; the GPU
/// backend copies host levels to its scratch first (staged_bytes, staged_at).
template <class L>
struct range_bins {
  const L* levels;
  std::int64_t num_levels;

  /// Bytes of the levels, for a backend that copies them.
  std::int64_t staged_bytes() const { return num_levels * static_cast<std::int64_t>(sizeof(L)); }
  /// The same bins reading a copy of the levels at `copy`.
  range_bins staged_at(const L* copy) const { return {copy, num_levels}; }

  template <class T>
  TALLY_HD_INLINE std::int64_t operator()(const T& x) const {
    const double v = convert<double>(x);
    if (!(v >= convert<double>(levels[0]) && v < convert<double>(levels[num_levels - 1]))) return -1;
    std::int64_t first = 0, count = num_levels;  // upper_bound
    while (count > 0) {
      const std::int64_t step = count / 2;
      if (!(v < convert<double>(levels[first + step]))) {
        first += step + 1;
        count -= step + 1;
      } else {
        count = step;
      }
    }
    return first - 1;
  }
};

/// A user bin function: bin_of(x) returns the bin, anything outside [0, bins) is ignored.
template <class F>
struct custom_bins {
  F bin_of;
  template <class T>
  TALLY_HD_INLINE std::int64_t operator()(const T& x) const { return static_cast<std::int64_t>(bin_of(x)); }
};

/// scatter_reduce: the key is the index itself.
struct index_key {
  template <class I>
  TALLY_HD_INLINE std::int64_t operator()(const I& i) const { return static_cast<std::int64_t>(i); }
};

/// True for keys whose tables live in host memory until a backend stages them (range_bins).
template <class Key>
inline constexpr bool is_staged_key_v = requires(const Key& k) { k.staged_bytes(); };

}  // namespace tally::detail
