// Options of index_add (index_add.hpp): those of the histograms and
// scatters, plus the row strides of its two matrices.
#pragma once

#include <cstdint>

#include "tally/core/histogram_options.hpp"

namespace tally {

/// Options of index_add. From histogram_options: checks, errors, strategy
/// (automatic, aggregated_atomics, plain_atomics or sorted_rows; the GPU
/// backend's choice is reported through `chosen`), deterministic and
/// fixed_point_bits, grid_blocks.
struct index_add_options : histogram_options {
  /// Elements between the starts of consecutive rows of src; 0 means cols.
  std::int64_t src_stride = 0;
  /// Elements between the starts of consecutive rows of out; 0 means cols.
  std::int64_t out_stride = 0;
};

}  // namespace tally
