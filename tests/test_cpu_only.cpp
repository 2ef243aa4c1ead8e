// tally.hpp from plain C++ (g++, no nvcc): the CPU backend must be usable
// without CUDA code. This file is compiled as C++, not CUDA.
#include <cstdint>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "tally/tally.hpp"

#if defined(__CUDACC__)
#error "test_cpu_only.cpp must be compiled by the host C++ compiler"
#endif

namespace {

TEST(CpuOnly, SumAndMaximumCompileAndRunFromPlainCxx) {
  std::vector<std::int64_t> x(100003);
  std::iota(x.begin(), x.end(), std::int64_t{1});
  const std::int64_t n = static_cast<std::int64_t>(x.size());
  EXPECT_EQ(tally::sum(tally::cpu, x.data(), n), n * (n + 1) / 2);

  std::int64_t largest = -1;
  tally::reduce(tally::cpu, x.data(), n, &largest, tally::maximum{});
  EXPECT_EQ(largest, n);

  std::vector<float> f(4099, 0.5f);
  EXPECT_EQ(tally::sum(tally::cpu.with_threads(2), std::span<const float>(f)), 0.5f * 4099);
}

}  // namespace
