// The CPU side of the benchmark: the original sequential loop (the paper's
// pattern 5), its OpenMP parallelisation (pattern 6), and the host sums of
// the per-point squares the GPU hands over (patterns 3 and 4).
#pragma once

#include <cstdint>

#include "problem.hpp"
#include "tiling.hpp"

namespace tally::himeno {

/// Pattern (5): `sweeps` sweeps of the original loop, one core: wrk2 from p
/// at every interior point, gosa += ss² in loop order, then p = wrk2 on the
/// interior. Returns the last sweep's gosa.
/// Pre: sweeps >= 1; f from make_host_fields (or an earlier sweep).
float sweep_original(host_fields& f, int sweeps);

/// Pattern (6): the same with OpenMP, collapse(2) over i and j and a
/// reduction for gosa (its summation order depends on the thread count).
/// threads = 0: OpenMP's default. p ends bit-equal to sweep_original's.
float sweep_openmp(host_fields& f, int sweeps, int threads = 0);

/// One sweep that also stores each interior point's ss² at
/// squares[((i−1)(mj−2) + j−1)(mk−2) + k−1] (the original loop's order).
/// Returns that sweep's gosa summed as the original does.
/// Pre: squares holds size.interior() floats.
float sweep_recording_squares(host_fields& f, float* squares);

/// Pattern (3): Σ squares[0..n) in index order on one core (the original's gosa).
float sum_serial(const float* squares, std::int64_t n);

/// Pattern (4): Σ squares[0..n) with an OpenMP reduction over `threads`
/// threads (0: OpenMP's default).
float sum_openmp(const float* squares, std::int64_t n, int threads = 0);

/// The deterministic gosa the GPU computes from the squares of one sweep,
/// laid out as sweep_recording_squares stores them: by the tile sweep's tree
/// (tiling.hpp; max_units as given to the gpu_problem) or the row sweeps'
/// (row_tiling.hpp; max_units unused).
float deterministic_gosa(const float* squares, const grid_size& g, std::int64_t max_units = 65536,
                         gosa_tree tree = gosa_tree::tiles);

}  // namespace tally::himeno
