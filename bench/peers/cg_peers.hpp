// The peers of `tally bench cg`: seed 004's ladder of CUDA CG implementations
// (cuSPARSE SpMV + cuBLAS, then step by step its own kernels), rewritten on
// today's cuSPARSE generic API, and Eigen's ConjugateGradient on the host.
// Every peer solves A·x = b from x = 0 and stops on its own recurrence
// residual ‖r‖ < rtol·‖b‖; the benchmark verifies each x independently.
#pragma once

#include <cstdint>

namespace tally::bench::cg {

/// A CSR matrix in device memory with its inverse diagonal (32-bit indices,
/// as the seed's cuSPARSE calls).
template <class T>
struct device_matrix {
  int n = 0;
  int nnz = 0;
  const int* offsets = nullptr;
  const int* columns = nullptr;
  const T* values = nullptr;
  const T* inverse_diagonal = nullptr;  ///< for the Jacobi rungs
};

/// The rungs of seed 004's ladder.
enum class rung {
  sample,        ///< (i) the CUDA sample: no preconditioner, host pointer mode, a host sync every iteration
  jacobi,        ///< (ii) impl 1: Eigen's order, Jacobi
  device_scalars,///< (iii) impl 2: device pointer mode, convergence checked every 20 iterations
  own_dot,       ///< (iv) impl 3: its own dot kernel in place of cublas<t>dot
  fused,         ///< (v) impl 4: fused kernels, checked every 20 iterations
  mapped_flag,   ///< (vi) impl 5: fused kernels, a mapped pinned flag read every iteration
};
inline constexpr rung kRungs[] = {rung::sample, rung::jacobi, rung::device_scalars, rung::own_dot, rung::fused,
                                  rung::mapped_flag};
const char* rung_name(rung r);

/// Scratch and library handles for the ladder, made once per problem.
template <class T>
class ladder {
 public:
  explicit ladder(const device_matrix<T>& a);
  ~ladder();
  ladder(const ladder&) = delete;
  ladder& operator=(const ladder&) = delete;
  /// Solves with rung r on the legacy default stream, x (device) starting at
  /// zero; returns the iterations run. Blocks the host as the seed's code does.
  int solve(rung r, const T* b, T* x, double rtol, int max_iterations);

 private:
  struct state;
  state* s_;
};

/// Eigen's ConjugateGradient<SparseMatrix<T, RowMajor>, Lower|Upper,
/// DiagonalPreconditioner<T>> on `threads` OpenMP threads (host memory).
/// Returns the iterations Eigen reports.
template <class T>
int eigen_cg(int n, const int* offsets, const int* columns, const T* values, const T* b, T* x, double rtol,
             int max_iterations, int threads);

}  // namespace tally::bench::cg
