// tally's solvers: sparse matrices (CSR, its validation, Matrix Market,
// Poisson generators), the operator concept and the matrix-free stencil, and
// conjugate gradient on both backends.
//
//   #include <tally/solvers/solvers.hpp>
//   auto A = tally::solvers::poisson3d_27pt<float, std::int32_t>(31);
//   auto r = tally::solvers::cg(tally::cpu, A.view(), b, x, {});       // or tally::gpu with device memory
//
// The GPU backend is CUDA code: include this from a .cu file for it.
#pragma once

#include "tally/solvers/cg.hpp"
#include "tally/solvers/cpu/cg.hpp"
#include "tally/solvers/csr.hpp"
#include "tally/solvers/device_csr.hpp"
#include "tally/solvers/matrix_market.hpp"
#include "tally/solvers/operator.hpp"
#include "tally/solvers/poisson.hpp"
#include "tally/solvers/stencil.hpp"
#include "tally/solvers/validate_csr.hpp"

#if defined(__CUDACC__)
#include "tally/solvers/cuda/cg.cuh"
#include "tally/solvers/cuda/validate_csr.cuh"
#endif

namespace tally {
/// tally::cg(backend, A, b, x, options): the solvers' CG, beside the reductions.
using solvers::cg;
}  // namespace tally
