// tally: reductions on the GPU and the CPU, one API.
//
//   #include <tally/tally.hpp>
//   tally::reduce(tally::gpu.on(stream), x, n, out);                  // sum into device memory
//   tally::reduce(tally::gpu, x, n, out, tally::maximum{});
//   tally::dot(tally::gpu, x, y, n, out);
//   double s = tally::sum(tally::cpu, host_x, n);                     // value-returning form
//
// The GPU backend's templates are CUDA code: include this header from a .cu
// file compiled by nvcc (with --extended-lambda for lambda operators). From
// plain C++ files, only the CPU backend is available.
#pragma once

#include "tally/core/backend.hpp"
#include "tally/core/error.hpp"
#include "tally/core/operators.hpp"
#include "tally/core/options.hpp"
#include "tally/core/tree.hpp"
#include "tally/core/types.hpp"
#include "tally/reduce.hpp"
#include "tally/cpu/reduce.hpp"
#include "tally/histogram.hpp"
#include "tally/cpu/histogram.hpp"
#include "tally/index_add.hpp"
#include "tally/cpu/index_add.hpp"

#if defined(__CUDACC__)
#include "tally/cuda/reduce.cuh"
#include "tally/cuda/histogram.cuh"
#include "tally/cuda/index_add.cuh"
#endif
