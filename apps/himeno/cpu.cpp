#include "cpu.hpp"

#include <omp.h>

#include <algorithm>

#include <vector>

#include "stencil.hpp"
#include "row_tiling.hpp"
#include "tiling.hpp"

namespace tally::himeno {

namespace {

/// Raw pointers and strides of the fields, as the original's MR() macro sees them.
struct view {
  const float *a0, *a1, *a2, *a3, *b0, *b1, *b2, *c0, *c1, *c2, *bnd, *wrk1;
  float *p, *wrk2;
  std::int64_t plane, row;
  explicit view(host_fields& f)
      : a0(f.coef[0].data()), a1(f.coef[1].data()), a2(f.coef[2].data()), a3(f.coef[3].data()),
        b0(f.coef[4].data()), b1(f.coef[5].data()), b2(f.coef[6].data()), c0(f.coef[7].data()),
        c1(f.coef[8].data()), c2(f.coef[9].data()), bnd(f.coef[10].data()), wrk1(f.coef[11].data()),
        p(f.p.data()), wrk2(f.wrk2.data()), plane(std::int64_t{f.size.mj} * f.size.mk), row(f.size.mk) {}
};

/// The original's loop body at flat index x: writes wrk2[x], returns ss.
inline float original_point(const view& v, std::int64_t x) {
  const std::int64_t I = v.plane, J = v.row;
  const float* p = v.p;
  const float s0 = v.a0[x] * p[x + I] + v.a1[x] * p[x + J] + v.a2[x] * p[x + 1] +
                   v.b0[x] * (p[x + I + J] - p[x + I - J] - p[x - I + J] + p[x - I - J]) +
                   v.b1[x] * (p[x + J + 1] - p[x - J + 1] - p[x + J - 1] + p[x - J - 1]) +
                   v.b2[x] * (p[x + I + 1] - p[x - I + 1] - p[x + I - 1] + p[x - I - 1]) + v.c0[x] * p[x - I] +
                   v.c1[x] * p[x - J] + v.c2[x] * p[x - 1] + v.wrk1[x];
  const float ss = (s0 * v.a3[x] - p[x]) * v.bnd[x];
  v.wrk2[x] = p[x] + kOmega * ss;
  return ss;
}

}  // namespace

float sweep_original(host_fields& f, int sweeps) {
  const view v(f);
  const int imax = f.size.mi - 1, jmax = f.size.mj - 1, kmax = f.size.mk - 1;
  float gosa = 0;
  for (int n = 0; n < sweeps; ++n) {
    gosa = 0.0f;
    for (int i = 1; i < imax; i++)
      for (int j = 1; j < jmax; j++)
        for (int k = 1; k < kmax; k++) {
          const float ss = original_point(v, f.at(i, j, k));
          gosa += ss * ss;
        }
    for (int i = 1; i < imax; i++)
      for (int j = 1; j < jmax; j++)
        for (int k = 1; k < kmax; k++) v.p[f.at(i, j, k)] = v.wrk2[f.at(i, j, k)];
  }
  return gosa;
}

float sweep_openmp(host_fields& f, int sweeps, int threads) {
  const view v(f);
  const int imax = f.size.mi - 1, jmax = f.size.mj - 1, kmax = f.size.mk - 1;
  const int team = threads > 0 ? threads : omp_get_max_threads();
  float gosa = 0;
  for (int n = 0; n < sweeps; ++n) {
    gosa = 0.0f;
#pragma omp parallel for collapse(2) reduction(+ : gosa) num_threads(team)
    for (int i = 1; i < imax; i++)
      for (int j = 1; j < jmax; j++)
        for (int k = 1; k < kmax; k++) {
          const float ss = original_point(v, f.at(i, j, k));
          gosa += ss * ss;
        }
#pragma omp parallel for collapse(2) num_threads(team)
    for (int i = 1; i < imax; i++)
      for (int j = 1; j < jmax; j++)
        for (int k = 1; k < kmax; k++) v.p[f.at(i, j, k)] = v.wrk2[f.at(i, j, k)];
  }
  return gosa;
}

float sweep_recording_squares(host_fields& f, float* squares) {
  const view v(f);
  const grid_size& g = f.size;
  float gosa = 0;
  std::int64_t q = 0;
  for (int i = 1; i < g.mi - 1; i++)
    for (int j = 1; j < g.mj - 1; j++)
      for (int k = 1; k < g.mk - 1; k++, q++) {
        const std::int64_t x = f.at(i, j, k);
        const float* p = v.p;
        const std::int64_t I = v.plane, J = v.row;
        const point_coefficients c{v.a0[x], v.a1[x], v.a2[x], v.a3[x], v.b0[x],  v.b1[x],
                                   v.b2[x], v.c0[x], v.c1[x], v.c2[x], v.bnd[x], v.wrk1[x]};
        const neighbourhood n{p[x],
                              p[x + I], p[x + J], p[x + 1], p[x - I], p[x - J], p[x - 1],
                              p[x + I + J], p[x + I - J], p[x - I + J], p[x - I - J],
                              p[x + J + 1], p[x - J + 1], p[x + J - 1], p[x - J - 1],
                              p[x + I + 1], p[x - I + 1], p[x + I - 1], p[x - I - 1]};
        const relaxed r = relax(c, n, kOmega);
        v.wrk2[x] = r.next;
        squares[q] = square(r.ss);
        gosa += squares[q];
      }
  for (int i = 1; i < g.mi - 1; i++)
    for (int j = 1; j < g.mj - 1; j++)
      for (int k = 1; k < g.mk - 1; k++) v.p[f.at(i, j, k)] = v.wrk2[f.at(i, j, k)];
  return gosa;
}

float sum_serial(const float* squares, std::int64_t n) {
  float gosa = 0.0f;
  for (std::int64_t q = 0; q < n; ++q) gosa += squares[q];
  return gosa;
}

float sum_openmp(const float* squares, std::int64_t n, int threads) {
  const int team = threads > 0 ? threads : omp_get_max_threads();
  float gosa = 0.0f;
#pragma omp parallel for reduction(+ : gosa) num_threads(team)
  for (std::int64_t q = 0; q < n; ++q) gosa += squares[q];
  return gosa;
}

namespace {

/// Balanced tree over values[first, first+size) (size a power of two), zeros past `count`.
float balanced(const std::vector<float>& values, std::int64_t first, std::int64_t size) {
  if (size == 1) return first < static_cast<std::int64_t>(values.size()) ? values[static_cast<std::size_t>(first)] : 0.0f;
  const std::int64_t half = size / 2;
  return balanced(values, first, half) + balanced(values, first + half, half);
}

std::int64_t power_of_two_at_least(std::int64_t n) {
  std::int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

/// The row sweeps' tree (row_tiling.hpp): leaf (r, plane) = the balanced tree
/// over 256 thread values, thread t holding points k_lo + t and k_lo + t + 256.
float rows_gosa(const float* squares, const grid_size& g) {
  const row_tiling t = row_tiling_of(g);
  const int J = g.mj - 2, K = g.mk - 2;
  std::vector<float> leaves(static_cast<std::size_t>(t.row_segments() * t.padded_planes), 0.0f);
  std::vector<float> threads(kRowThreads);
  for (int plane = 0; plane < t.planes; ++plane)
    for (int j = 0; j < J; ++j)
      for (int seg = 0; seg < t.segments; ++seg) {
        const int k_lo = seg * kRowSegment, k_hi = std::min(K, k_lo + kRowSegment);  // interior-relative
        for (int thread = 0; thread < kRowThreads; ++thread) {
          float v = 0.0f;
          for (int h = 0; h < kRowPoints; ++h) {
            const int k = k_lo + thread + kRowThreads * h;
            if (k < k_hi) v = v + squares[(std::int64_t{plane} * J + j) * K + k];
          }
          threads[static_cast<std::size_t>(thread)] = v;
        }
        const std::int64_t r = std::int64_t{j} * t.segments + seg;
        leaves[static_cast<std::size_t>(r * t.padded_planes + plane)] = balanced(threads, 0, kRowThreads);
      }
  return balanced(leaves, 0, t.padded_leaves());
}

}  // namespace

float deterministic_gosa(const float* squares, const grid_size& g, std::int64_t max_units, gosa_tree tree) {
  if (tree == gosa_tree::rows) return rows_gosa(squares, g);
  const tiling t = tiling_of(g, max_units);
  const int J = g.mj - 2, K = g.mk - 2, D = t.planes_per_unit;
  std::vector<float> units(static_cast<std::size_t>(t.units()));
  std::vector<float> threads(kTileThreads);
  for (int tj = 0; tj < t.tiles_j; ++tj)
    for (int tk = 0; tk < t.tiles_k; ++tk)
      for (std::int64_t chunk = 0; chunk < t.chunks(); ++chunk) {
        // Thread 32w + l holds the squares of (j0+w, k0+l) and (j0+w, k0+l+32),
        // summed over the unit's planes in order.
        for (int w = 0; w < kTileJ; ++w)
          for (int l = 0; l < 32; ++l) {
            float acc = 0.0f;
            for (int plane = static_cast<int>(chunk) * D; plane < std::min<int>(t.planes, (static_cast<int>(chunk) + 1) * D); ++plane) {
              float v = 0.0f;
              for (int h = 0; h < 2; ++h) {
                const int j = tj * kTileJ + w, k = tk * kTileK + l + 32 * h;  // interior-relative
                if (j < J && k < K) v = v + squares[(std::int64_t{plane} * J + j) * K + k];
              }
              acc = plane == chunk * D ? v : acc + v;
            }
            threads[static_cast<std::size_t>(32 * w + l)] = acc;
          }
        const std::int64_t unit = (std::int64_t{tj} * t.tiles_k + tk) * t.chunks() + chunk;
        units[static_cast<std::size_t>(unit)] = balanced(threads, 0, kTileThreads);
      }
  return balanced(units, 0, power_of_two_at_least(t.units()));
}

}  // namespace tally::himeno
