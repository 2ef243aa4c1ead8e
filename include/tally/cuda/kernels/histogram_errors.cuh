// The words in which scatter kernels record errors found in the data, and
// the kernel that hands them to the caller (histogram_options::errors)
// without a host round trip.
#pragma once

#include <cstdint>

#include "tally/core/histogram_options.hpp"
#include "tally/cuda/kernels/histogram_fixed_point.cuh"

namespace tally::kernels::histogram {

/// A call's error words, at the start of the workspace's zeroed bytes (zero at rest).
struct error_words {
  unsigned long long bad_position;  ///< total - i of the first out-of-range element (out_of_range_report)
  fixed_point_words fixed;
};

/// One thread: *errors = what `words` recorded for a call of n elements (no
/// words: nothing recorded), and the words back to zero.
template <class Unused = void>  // a template, so the header may be included by many sources
__global__ void publish_errors_kernel(error_words* words, std::int64_t n, scatter_errors* errors) {
  std::int64_t first = -1;
  std::int32_t bad = 0;
  if (words) {
    if (words->bad_position != 0) first = n - static_cast<std::int64_t>(words->bad_position);
    bad = words->fixed.bad != 0 ? 1 : 0;
    words->bad_position = 0;
    words->fixed.largest_bits = 0;
    words->fixed.scale = 0;
    words->fixed.bad = 0;
    words->fixed.bits = 0;
  }
  errors->first_bad_index = first;
  errors->bad_value = bad;
}

}  // namespace tally::kernels::histogram
