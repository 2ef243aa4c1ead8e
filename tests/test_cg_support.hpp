// Shared pieces of the CG tests: model problems with a known solution, a
// solve on either backend's memory, and the true residual computed
// independently of the library (long double, straight from the CSR arrays).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends.hpp"
#include "random.hpp"
#include "tally/solvers/solvers.hpp"

// The GPU solves the CG tests use are instantiated once, in test_cg.cu, so
// that the other test files do not compile the kernels again.
#define TALLY_TEST_CG_GPU_INSTANCES(PREFIX, OP, T)                                                                    \
  PREFIX template tally::solvers::cg_result tally::solvers::cg<OP, T>(const tally::gpu_backend&, const OP&, const T*, \
                                                                     T*, const tally::solvers::cg_options&);         \
  PREFIX template tally::solvers::cg_mode tally::solvers::cg_async<OP, T>(                                           \
      const tally::gpu_backend&, const OP&, const T*, T*, const tally::solvers::cg_options&,                          \
      tally::solvers::cg_device_result*, std::string*);
namespace tally::testing {
using csr_f32 = tally::solvers::csr_view<float, std::int32_t>;
using csr_f64 = tally::solvers::csr_view<double, std::int32_t>;
using csr_f32_i64 = tally::solvers::csr_view<float, std::int64_t>;
using stencil_f32 = tally::solvers::stencil_operator<float>;
using stencil_f64 = tally::solvers::stencil_operator<double>;
}  // namespace tally::testing
#define TALLY_TEST_CG_ALL_GPU_INSTANCES(PREFIX)                           \
  TALLY_TEST_CG_GPU_INSTANCES(PREFIX, tally::testing::csr_f32, float)     \
  TALLY_TEST_CG_GPU_INSTANCES(PREFIX, tally::testing::csr_f64, double)    \
  TALLY_TEST_CG_GPU_INSTANCES(PREFIX, tally::testing::csr_f32_i64, float) \
  TALLY_TEST_CG_GPU_INSTANCES(PREFIX, tally::testing::stencil_f32, float) \
  TALLY_TEST_CG_GPU_INSTANCES(PREFIX, tally::testing::stencil_f64, double)
TALLY_TEST_CG_ALL_GPU_INSTANCES(extern)

namespace tally::testing {

namespace sv = tally::solvers;

/// ‖b − A·x‖ / ‖b‖ in long double, from the CSR arrays.
template <class T, class I>
long double reference_relative_residual(const sv::host_csr<T, I>& a, const std::vector<T>& b, const std::vector<T>& x) {
  long double rr = 0, bb = 0;
  for (std::int64_t i = 0; i < a.rows; ++i) {
    long double s = 0;
    for (auto k = a.offsets[i]; k < a.offsets[i + 1]; ++k)
      s += static_cast<long double>(a.values[k]) * static_cast<long double>(x[a.columns[k]]);
    const long double d = static_cast<long double>(b[i]) - s;
    rr += d * d;
    bb += static_cast<long double>(b[i]) * b[i];
  }
  return bb == 0 ? std::sqrt(rr) : std::sqrt(rr / bb);
}

/// b = A·x_true for x_true uniform in [-1, 1), rounded to T: a right-hand side
/// with every frequency, whose solution T can hold well.
template <class T, class I>
std::vector<T> random_rhs(const sv::host_csr<T, I>& a, random_source& rng) {
  std::vector<long double> xt(static_cast<std::size_t>(a.rows));
  for (auto& v : xt) v = rng.real(-1.0, 1.0);
  std::vector<T> b(static_cast<std::size_t>(a.rows));
  for (std::int64_t i = 0; i < a.rows; ++i) {
    long double s = 0;
    for (auto k = a.offsets[i]; k < a.offsets[i + 1]; ++k) s += static_cast<long double>(a.values[k]) * xt[a.columns[k]];
    b[i] = static_cast<T>(s);
  }
  return b;
}

template <class T>
struct solve_output {
  sv::cg_result result;
  std::vector<T> x;
  std::vector<double> history;  ///< max_iterations + 1 entries, NaN where not written
};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// Runs cg on Side's memory. `matrix_free` > 0 solves with the stencil
/// operator of that many points (A must then be the matching Poisson
/// matrix of grid g). History is requested and poisoned with NaN first.
/// The GPU instances are those of TALLY_TEST_CG_ALL_GPU_INSTANCES: CSR f32
/// and f64 with 32-bit indices, f32 with 64-bit ones, stencils f32 and f64.
template <class Side, class T, class I>
solve_output<T> solve_on(const sv::host_csr<T, I>& a, const std::vector<T>& b, const std::vector<T>& x0,
                         sv::cg_options options, int matrix_free = 0, std::int64_t g = 0,
                         cpu_backend cpu = tally::cpu, std::size_t x_offset = 0) {
  const std::size_t n = static_cast<std::size_t>(a.rows);
  const std::size_t hn = static_cast<std::size_t>(options.max_iterations + 1);
  solve_output<T> out;
  buffer<T> db(Side::on_gpu, n), dx(Side::on_gpu, n, x_offset);
  buffer<double> dh(Side::on_gpu, hn);
  if (n > 0) {
    db.write(b);
    dx.write(x0);
  }
  dh.write(std::vector<double>(hn, std::nan("")));
  options.history = dh.data();
  const T* bp = n > 0 ? db.data() : nullptr;
  T* xp = n > 0 ? dx.data() : nullptr;
  auto run = [&](const auto& backend) {
    if (matrix_free) return sv::cg(backend, sv::stencil_operator<T>::make(g, matrix_free), bp, xp, options);
    if constexpr (Side::on_gpu) {
      const sv::device_csr<T, I> device(a);
      return sv::cg(backend, device.view(), bp, xp, options);
    } else {
      return sv::cg(backend, a.view(), bp, xp, options);
    }
  };
  if constexpr (Side::on_gpu) out.result = run(tally::gpu);
  else out.result = run(cpu);
  out.x = n > 0 ? dx.read() : std::vector<T>{};
  out.history = dh.read();
  return out;
}

}  // namespace tally::testing
