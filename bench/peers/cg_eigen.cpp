// Eigen's Jacobi-preconditioned CG, the seed's CPU reference (seed 004 used
// Eigen 3.3.4 on 12 threads). Lower|Upper with a row-major matrix is the
// combination Eigen runs its SpMV in parallel for.
#include <vector>

#include <Eigen/IterativeLinearSolvers>
#include <Eigen/Sparse>

#include "cg_peers.hpp"

namespace tally::bench::cg {

template <class T>
int eigen_cg(int n, const int* offsets, const int* columns, const T* values, const T* b, T* x, double rtol,
             int max_iterations, int threads) {
  using matrix = Eigen::SparseMatrix<T, Eigen::RowMajor, int>;
  const Eigen::Map<const matrix> a(n, n, offsets[n], offsets, columns, values);
  Eigen::setNbThreads(threads);
  Eigen::ConjugateGradient<matrix, Eigen::Lower | Eigen::Upper, Eigen::DiagonalPreconditioner<T>> solver;
  solver.setTolerance(static_cast<T>(rtol));
  solver.setMaxIterations(max_iterations);
  solver.compute(a);
  const Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>> rhs(b, n);
  Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> solution(x, n);
  solution = solver.solve(rhs);
  return static_cast<int>(solver.iterations());
}

template int eigen_cg<float>(int, const int*, const int*, const float*, const float*, float*, double, int, int);
template int eigen_cg<double>(int, const int*, const int*, const double*, const double*, double*, double, int, int);

}  // namespace tally::bench::cg
