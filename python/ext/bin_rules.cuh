// NumPy's binning rules as tally bin functions (histogram_custom): NumPy
// closes the last bin ([e_{n-1}, e_n]) where tally's histogram_even/range
// leave it open, and NumPy defines equal-width bins by numpy.linspace edges.
#pragma once

#include <cstdint>

#include <tally/tally.hpp>

namespace tally_py {

/// Equal-width bins exactly as numpy.histogram(x, bins, range=(lo, hi))
/// assigns float64 values: edges e_k = k·step + lo (e_bins = hi), step =
/// (hi - lo)/bins, as numpy.linspace computes them; a first guess
/// ((v - lo)/(hi - lo))·bins, then NumPy's one-step correction against the
/// edges. Samples outside [lo, hi] and NaN give -1 (ignored).
struct numpy_even_bins {
  double lo, hi, width, step;
  std::int64_t bins;

  TALLY_HD_INLINE double edge(std::int64_t k) const {
    // Rounded product, never fused with the add: NumPy rounds twice.
    return k == bins ? hi : tally::detail::multiply_rounded(static_cast<double>(k), step) + lo;
  }
  template <class T>
  TALLY_HD_INLINE std::int64_t operator()(const T& x) const {
    const double v = tally::convert<double>(x);
    if (!(v >= lo && v <= hi)) return -1;
    std::int64_t k = static_cast<std::int64_t>(((v - lo) / width) * static_cast<double>(bins));
    if (k >= bins) k = bins - 1;
    if (v < edge(k)) --k;
    if (k != bins - 1 && v >= edge(k + 1)) ++k;
    return k;
  }
};

/// Bins between explicit edges (float64, in the backend's memory, non-
/// decreasing): the k with e_k <= v < e_{k+1}, where v == e_last falls in the
/// last bin, as numpy.histogram counts. Outside [e_0, e_last] and NaN: -1.
struct numpy_edge_bins {
  const double* edges;
  std::int64_t num_edges;

  template <class T>
  TALLY_HD_INLINE std::int64_t operator()(const T& x) const {
    const double v = tally::convert<double>(x);
    const double last = edges[num_edges - 1];
    if (!(v >= edges[0] && v <= last)) return -1;
    if (v == last) return num_edges - 2;
    std::int64_t first = 0, count = num_edges;  // upper_bound: first edge > v
    while (count > 0) {
      const std::int64_t step = count / 2;
      if (!(v < edges[first + step])) {
        first += step + 1;
        count -= step + 1;
      } else {
        count = step;
      }
    }
    return first - 1;
  }
};

/// bincount: the bin is the index itself.
struct index_bins {
  template <class I>
  TALLY_HD_INLINE std::int64_t operator()(const I& i) const { return static_cast<std::int64_t>(i); }
};

}  // namespace tally_py
