// One GPU CG solve configuration, timed: what scripts/gpu-cg-probe compiles
// once against each variant of the CG headers, so that variants are compared
// from one small compile each (tens of seconds, against minutes for the
// tally tool) and in interleaved runs on one machine.
//
//   cg_variant_probe G MODE TYPE OP TRIALS
//     G      the 27-point Poisson grid (b as `tally bench cg` makes it)
//     MODE   graph | persistent | replayed
//     TYPE   f32 | f64
//     OP     mf (the matrix-free stencil) | csr (32-bit indices)
//     TRIALS timed solves after one warm-up solve (>= 1)
//
// Prints one line: the median, minimum and maximum µs an iteration (CUDA
// events around each whole solve from x = 0), the iterations, the true
// relative residual of the last solution on the host in double, and an
// FNV-1a hash of its bytes: variants whose hashes agree produced the same
// iterates. Exits 1 (FAIL on the line) when the residual exceeds 1.5·rtol,
// the iterations differ between solves, or the last solve's x differs in a
// bit from the warm-up's (checked before the timed solves); 2 on bad
// arguments or a type or operator left out of the build (-DCG_PROBE_F64=0,
// -DCG_PROBE_CSR=0: each left out saves about a quarter of the compile).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "solve_cg_problem.hpp"
#include "tally/cuda/check.cuh"
#include "tally/solvers/solvers.hpp"

#ifndef CG_PROBE_F64
#define CG_PROBE_F64 1
#endif
#ifndef CG_PROBE_CSR
#define CG_PROBE_CSR 1
#endif

namespace {

constexpr double kRtol = 1e-6;

struct probe_case {
  std::int64_t g = 0;
  tally::solvers::cg_mode mode = tally::solvers::cg_mode::graph;
  const char* mode_name = "";
  bool csr = false;
  int trials = 0;
};

/// FNV-1a over the bytes of x.
template <class T>
std::uint64_t bytes_hash(const std::vector<T>& x) {
  std::uint64_t hash = 1469598103934665603ull;
  for (const T value : x) {
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    for (const unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ull;
  }
  return hash;
}

/// The solves of one case with operator `op`; returns the exit status.
template <class T, class Op>
int time_solves(const probe_case& c, const tally::cli::cg_problem<T>& p, const Op& op) {
  namespace solvers = tally::solvers;
  const std::size_t bytes = p.b.size() * sizeof(T);
  T *b = nullptr, *x = nullptr;
  TALLY_CUDA(cudaMalloc(&b, bytes));
  TALLY_CUDA(cudaMalloc(&x, bytes));
  TALLY_CUDA(cudaMemcpy(b, p.b.data(), bytes, cudaMemcpyHostToDevice));
  solvers::cg_options o;
  o.rtol = kRtol;
  o.mode = c.mode;
  cudaEvent_t start, stop;
  TALLY_CUDA(cudaEventCreate(&start));
  TALLY_CUDA(cudaEventCreate(&stop));
  std::vector<double> us;
  std::int64_t iterations = -1;
  bool same_iterations = true;
  std::vector<T> host(p.b.size());
  const auto download = [&] { TALLY_CUDA(cudaMemcpy(host.data(), x, bytes, cudaMemcpyDeviceToHost)); };
  std::uint64_t warm_up_hash = 0;  // the warm-up's x: checked before the timed solves
  for (int trial = -1; trial < c.trials; ++trial) {  // trial −1: the warm-up
    TALLY_CUDA(cudaMemset(x, 0, bytes));
    TALLY_CUDA(cudaDeviceSynchronize());
    TALLY_CUDA(cudaEventRecord(start));
    const auto r = solvers::cg(tally::gpu, op, static_cast<const T*>(b), x, o);
    TALLY_CUDA(cudaEventRecord(stop));
    TALLY_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    TALLY_CUDA(cudaEventElapsedTime(&ms, start, stop));
    if (iterations >= 0 && r.iterations != iterations) same_iterations = false;
    iterations = r.iterations;
    if (trial >= 0) us.push_back(1000.0 * ms / static_cast<double>(std::max<std::int64_t>(r.iterations, 1)));
    if (trial == -1) {
      download();
      warm_up_hash = bytes_hash(host);
    }
  }
  download();
  TALLY_CUDA(cudaEventDestroy(start));
  TALLY_CUDA(cudaEventDestroy(stop));
  TALLY_CUDA(cudaFree(b));
  TALLY_CUDA(cudaFree(x));
  const double relres = tally::cli::verify_relative_residual(p, host);
  const std::uint64_t hash = bytes_hash(host);
  // The true residual of the last solution, and the same bits and iterations in every solve.
  const bool pass = relres <= 1.5 * kRtol && same_iterations && hash == warm_up_hash;
  std::sort(us.begin(), us.end());
  std::printf("g=%lld mode=%s type=%s op=%s iterations=%lld median_us=%.2f min_us=%.2f max_us=%.2f relres=%.3g "
              "x_hash=%016llx %s\n",
              static_cast<long long>(c.g), c.mode_name, sizeof(T) == 4 ? "f32" : "f64", c.csr ? "csr" : "mf",
              static_cast<long long>(iterations), us[us.size() / 2], us.front(), us.back(), relres,
              static_cast<unsigned long long>(hash), pass ? "pass" : "FAIL");
  return pass ? 0 : 1;
}

template <class T>
int run(const probe_case& c) {
  const auto p = tally::cli::poisson_problem<T>(c.g, 27, c.csr);
  if (!c.csr) return time_solves(c, p, p.stencil());
#if CG_PROBE_CSR
  const tally::solvers::device_csr<T, std::int32_t> a(p.a);
  return time_solves(c, p, a.view());
#else
  std::fputs("cg_variant_probe: built without CSR (CG_PROBE_CSR=0)\n", stderr);
  return 2;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const char* usage = "usage: cg_variant_probe G graph|persistent|replayed f32|f64 mf|csr TRIALS\n";
  if (argc != 6) {
    std::fputs(usage, stderr);
    return 2;
  }
  probe_case c;
  c.g = std::atoll(argv[1]);
  c.mode_name = argv[2];
  const std::string mode = argv[2], type = argv[3], op = argv[4];
  c.trials = std::atoi(argv[5]);
  c.csr = op == "csr";
  if (mode == "graph") c.mode = tally::solvers::cg_mode::graph;
  else if (mode == "persistent") c.mode = tally::solvers::cg_mode::persistent;
  else if (mode == "replayed") c.mode = tally::solvers::cg_mode::replayed;
  else c.g = 0;
  if (c.g < 1 || c.trials < 1 || (type != "f32" && type != "f64") || (op != "mf" && op != "csr")) {
    std::fputs(usage, stderr);
    return 2;
  }
  try {
    if (type == "f32") return run<float>(c);
#if CG_PROBE_F64
    return run<double>(c);
#else
    std::fputs("cg_variant_probe: built without f64 (CG_PROBE_F64=0)\n", stderr);
    return 2;
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cg_variant_probe: %s\n", e.what());
    return 1;
  }
}
