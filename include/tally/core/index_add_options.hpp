// Options of index_add (index_add.hpp): those of the histograms and
// scatters, plus the row strides of its two matrices.
#pragma once

#include <cstdint>

#include "tally/core/histogram_options.hpp"

namespace tally {

/// How a deterministic index_add (histogram_options::deterministic, op =
/// plus) sums. Either way the bits are the same on every run, for any grid,
/// and on both backends.
enum class index_add_sums {
  /// ordered where the GPU's sort pays for itself -- rows of 32 bytes or
  /// more, 16 MB of src or more, rows < 2^32 and out_rows < 2^32 - 1 -- when
  /// the scale is derived and the strategy is automatic or sorted_rows;
  /// fixed_point otherwise. Decided from sizes and options alone, the same
  /// way on both backends.
  automatic,
  /// int64 fixed point (histogram_options::deterministic's contract): exact
  /// sums, rounded once; the bits do not depend on the order of the rows.
  fixed_point,
  /// Sums in the accumulator type (float; double for double) in row order:
  /// each index's rows, in row order, are cut into pieces at every multiple
  /// of 256 of their positions among all rows sorted by (index, row); each
  /// piece is summed left to right, the pieces are combined by the fixed
  /// balanced tree (tree::balanced_fold), and out + that total is rounded
  /// once to V. No range contract and no value errors (NaN and ±inf
  /// propagate as in any float sum); the bits depend on the order of the
  /// rows. Needs rows < 2^32 and out_rows < 2^32 - 1.
  ordered,
};

/// The name as error messages and `tally bench` print it.
constexpr const char* to_string(index_add_sums s) {
  switch (s) {
    case index_add_sums::automatic: return "automatic";
    case index_add_sums::fixed_point: return "fixed_point";
    case index_add_sums::ordered: return "ordered";
  }
  return "?";
}

/// Options of index_add. From histogram_options: checks, errors, strategy
/// (automatic, aggregated_atomics, plain_atomics or sorted_rows; the GPU
/// backend's choice is reported through `chosen`, which for a single-column
/// sum may also be shared_memory or hot_keys: index_add.hpp),
/// deterministic and fixed_point_bits, grid_blocks.
struct index_add_options : histogram_options {
  /// Elements between the starts of consecutive rows of src; 0 means cols.
  std::int64_t src_stride = 0;
  /// Elements between the starts of consecutive rows of out; 0 means cols.
  std::int64_t out_stride = 0;
  /// How deterministic calls sum (see index_add_sums); only with deterministic.
  index_add_sums deterministic_sums = index_add_sums::automatic;
};

}  // namespace tally
