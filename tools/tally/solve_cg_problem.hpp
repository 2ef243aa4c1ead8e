// The linear systems `tally solve cg` and `tally bench cg` solve: a Poisson
// matrix (or its matrix-free stencil) or a Matrix Market file, with b read
// from a file or made as A·x_true for a fixed pseudo-random x_true in
// [-1, 1) (every frequency present; a solution fp32 can hold), and the true
// residual of a solution checked on the host in double, independently of the
// library's solver.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tally/solvers/matrix_market.hpp"
#include "tally/solvers/poisson.hpp"
#include "tally/solvers/stencil.hpp"

namespace tally::cli {

template <class T>
struct cg_problem {
  std::string name;    ///< "poisson27 g=31", or the file
  std::int64_t grid = 0;
  int points = 0;      ///< 27 or 7 for Poisson problems, 0 for a file
  std::int64_t rows = 0, nnz = 0;
  bool has_csr = false;
  solvers::host_csr<T, std::int32_t> a;  ///< when has_csr
  std::vector<T> b;
  /// Whether the problem has a matrix-free operator: Poisson problems do, files do not.
  bool has_stencil() const { return points != 0; }
  /// The matrix-free operator. Pre: has_stencil() (a file problem throws tally::invalid_argument).
  solvers::stencil_operator<T> stencil() const { return solvers::stencil_operator<T>::make(grid, points); }
};

/// x_true for the generated right-hand sides: fixed seed, uniform in [-1, 1).
inline std::vector<double> solution_for_rhs(std::int64_t n) {
  std::mt19937_64 engine(20260422);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> x(static_cast<std::size_t>(n));
  for (auto& v : x) v = uniform(engine);
  return x;
}

/// A Poisson problem on a g-grid with `points` (7 or 27); the CSR matrix only
/// when `with_csr` (b comes from the stencil, which has the same entries).
template <class T>
cg_problem<T> poisson_problem(std::int64_t g, int points, bool with_csr) {
  cg_problem<T> p;
  p.name = "poisson" + std::to_string(points) + " g=" + std::to_string(g);
  p.grid = g;
  p.points = points;
  const auto s = p.stencil();
  p.rows = s.rows;
  p.nnz = points == 27 ? (3 * g - 2) * (3 * g - 2) * (3 * g - 2) : g * g * g + 6 * g * g * (g - 1);
  if (with_csr) {
    p.a = points == 27 ? solvers::poisson3d_27pt<T, std::int32_t>(g) : solvers::poisson3d_7pt<T, std::int32_t>(g);
    p.has_csr = true;
  }
  const auto xt = solution_for_rhs(p.rows);
  p.b.resize(static_cast<std::size_t>(p.rows));
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < p.rows; ++i)
    p.b[i] = static_cast<T>(s.template row_product<double>(i, [&](std::int64_t j) { return xt[j]; }));
  return p;
}

/// A problem from Matrix Market files (`rhs` may be empty: b = A·x_true).
template <class T>
cg_problem<T> file_problem(const std::string& matrix, const std::string& rhs) {
  cg_problem<T> p;
  p.name = matrix;
  p.a = solvers::to_csr<T, std::int32_t>(solvers::read_matrix_market(matrix));
  p.has_csr = true;
  p.rows = p.a.rows;
  p.nnz = p.a.nnz();
  if (p.a.rows != p.a.cols) throw std::runtime_error(matrix + ": the matrix is not square");
  if (!rhs.empty()) {
    const auto b = solvers::read_matrix_market_vector(rhs);
    if (static_cast<std::int64_t>(b.size()) != p.rows)
      throw std::runtime_error(rhs + ": " + std::to_string(b.size()) + " entries, the matrix has " +
                               std::to_string(p.rows) + " rows");
    p.b.assign(b.begin(), b.end());
  } else {
    const auto xt = solution_for_rhs(p.rows);
    p.b.resize(static_cast<std::size_t>(p.rows));
    for (std::int64_t i = 0; i < p.rows; ++i) {
      double s = 0;
      for (auto k = p.a.offsets[i]; k < p.a.offsets[i + 1]; ++k) s += static_cast<double>(p.a.values[k]) * xt[p.a.columns[k]];
      p.b[i] = static_cast<T>(s);
    }
  }
  return p;
}

/// ‖b − A·x‖ / ‖b‖ in double, straight from the CSR arrays (or, for a
/// matrix-free problem without them, from the grid's neighbours directly).
template <class T>
double verify_relative_residual(const cg_problem<T>& p, const std::vector<T>& x) {
  double rr = 0, bb = 0;
#pragma omp parallel for schedule(static) reduction(+ : rr, bb)
  for (std::int64_t i = 0; i < p.rows; ++i) {
    double s = 0;
    if (p.has_csr) {
      for (auto k = p.a.offsets[i]; k < p.a.offsets[i + 1]; ++k) s += static_cast<double>(p.a.values[k]) * x[p.a.columns[k]];
    } else {
      const std::int64_t g = p.grid, ix = i % g, iy = (i / g) % g, iz = i / (g * g);
      for (int dz = -1; dz <= 1; ++dz)
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            const int off = (dx != 0) + (dy != 0) + (dz != 0);
            if (p.points == 7 && off > 1) continue;
            if (ix + dx < 0 || ix + dx >= g || iy + dy < 0 || iy + dy >= g || iz + dz < 0 || iz + dz >= g) continue;
            const double a = off == 0 ? (p.points == 27 ? 26.0 : 6.0) : -1.0;
            s += a * x[i + (dz * g + dy) * g + dx];
          }
    }
    const double d = static_cast<double>(p.b[i]) - s;
    rr += d * d;
    bb += static_cast<double>(p.b[i]) * p.b[i];
  }
  return bb > 0 ? std::sqrt(rr / bb) : std::sqrt(rr);
}

}  // namespace tally::cli
