// Options common to every algorithm and both backends.
#pragma once

namespace tally {

/// Whether arguments are validated before the work starts. Checked (the
/// default) rejects null, host-side or overlapping pointers and overflowing
/// sizes with tally::invalid_argument. Unchecked skips the checks that cost
/// time (on the GPU backend a driver query per pointer, about a microsecond);
/// bad arguments are then undefined behaviour.
enum class check_mode { checked, unchecked };

/// Plain or compensated (Kahan–Babuška–Neumaier) summation. Compensated is
/// for sums of float and double only.
enum class summation { plain, compensated };

struct options {
  check_mode checks = check_mode::checked;
  summation sum = summation::plain;
  /// GPU backend: blocks to launch; 0 picks them from the device's occupancy.
  /// Kernels with a grid-wide barrier (the shared-memory histogram) launch at
  /// most as many blocks as the device holds at once. The result does not
  /// depend on it (tests force several values to prove so).
  int grid_blocks = 0;
  /// GPU backend, reductions (reduce, sum, dot, transform_reduce): launch as
  /// a programmatic dependent (PDL), so the launch overlaps the previous
  /// kernel's tail in the stream (about 0.6 µs a call on the H100). Peers such
  /// as CUB launch plainly; `tally bench reduce` times tally both ways. Never
  /// changes the result. The histogram, scatter_reduce and index_add kernels
  /// always launch plainly and ignore it.
  bool programmatic_launch = true;
};

}  // namespace tally
