// Sizes around every boundary of the tree (vector, row, tile, group ±1),
// unaligned starting pointers, independence from the parallel decomposition
// (CPU threads, GPU grid sizes) and from the run, agreement of the GPU with
// the CPU bit for bit, and (GPU) more than 2^31 elements.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "reduce_fixture.hpp"
#include "user_operators.hpp"

namespace tally::testing {
namespace {

template <class Side>
class ReduceSizes : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceSizes, backends, backend_names);

/// Largest boundary size tried: past a group (1024 tiles) for every V here.
constexpr std::int64_t kLargestSize = 8 * 1024 * 1024 + 8;

/// For each boundary size (and a few random ones) and each starting offset
/// 0..3: reduce(x) equals the tree bit for bit; check_exact(x, result)
/// compares with an independent reference once per size.
template <class Side, class T, class Out, class Make, class Op, class CheckExact>
void check_boundaries(random_source& rng, const Make& make, Op op, const CheckExact& check_exact) {
  auto sizes = boundary_sizes(tree::vector_width<T>, kLargestSize);
  for (int k = 0; k < 3; ++k) sizes.push_back(rng.integer(34, 3 * tree::kTileVectors * tree::vector_width<T>));
  for (std::int64_t n : sizes) {
    const std::vector<T> x = make(static_cast<std::size_t>(n));
    const Out expected = reduce_expected<Out>(x.data(), n, op);
    for (std::size_t offset = 0; offset < 4; ++offset) {
      SCOPED_TRACE(type_name<T>() + " into " + type_name<Out>() + ", n = " + std::to_string(n) + ", offset " +
                   std::to_string(offset));
      const Out got = reduce_on<Side, Out>(x, offset, op);
      EXPECT_PRED_FORMAT2(bitwise_equal, got, expected);
      if (offset == 0) check_exact(x, got);
      if (n == 0) break;  // nothing to offset
    }
  }
}

TYPED_TEST(ReduceSizes, BoundarySizesAndUnalignedStarts) {
  using S = TypeParam;
  auto& rng = this->rng;
  const auto real_sum = [](auto x, auto got) {
    using T = typename decltype(x)::value_type;
    using Out = decltype(got);
    long_sum s;
    for (const T& v : x) s.add(convert<double>(v));
    const auto n = static_cast<std::int64_t>(x.size());
    EXPECT_TRUE(within<Out>(convert<double>(got), s.value,
                            sum_bound(n, tree::vector_width<T>, epsilon_of<accumulator_for_t<Out>>, s.magnitude)));
  };
  check_boundaries<S, float, float>(rng, [&](std::size_t n) { return random_values<float>(rng, n); }, plus{}, real_sum);
  check_boundaries<S, double, double>(rng, [&](std::size_t n) { return random_values<double>(rng, n); }, plus{}, real_sum);
  check_boundaries<S, half, float>(rng, [&](std::size_t n) { return random_values<half>(rng, n); }, plus{}, real_sum);
  check_boundaries<S, std::int64_t, std::int64_t>(
      rng, [&](std::size_t n) { return random_values<std::int64_t>(rng, n); }, plus{},
      [](const std::vector<std::int64_t>& x, std::int64_t got) { EXPECT_EQ(got, exact_sum<std::int64_t>(x)); });
  check_boundaries<S, float, value_index<float>>(
      rng, [&](std::size_t n) { return random_integers<float>(rng, n, -100000, 100000); }, arg_max{},
      [](const std::vector<float>& x, const value_index<float>& got) {
        if (x.empty()) return;
        std::size_t first = 0;
        for (std::size_t i = 1; i < x.size(); ++i)
          if (x[i] > x[first]) first = i;
        EXPECT_EQ(got.index, static_cast<std::int64_t>(first));
      });
  check_boundaries<S, mat2, mat2>(
      rng, [&](std::size_t n) { return random_matrices(rng, n); }, matrix_product(),
      [](const std::vector<mat2>& x, const mat2& got) { EXPECT_PRED_FORMAT2(bitwise_equal, got, ordered_product(x)); });
}

/// The ways a backend can split the same work: CPU thread counts, GPU grid
/// sizes (0 = the backend's own choice).
template <class Side>
std::vector<std::pair<decltype(Side::backend()), options>> decompositions() {
  std::vector<std::pair<decltype(Side::backend()), options>> ways;
  if constexpr (Side::on_gpu) {
    for (int blocks : {0, 1, 2, 3, 7, 64, 1000}) {
      options opts;
      opts.grid_blocks = blocks;
      ways.push_back({Side::backend(), opts});
    }
  } else {
    for (int threads : {0, 1, 2, 3, 7}) ways.push_back({tally::cpu.with_threads(threads), options{}});
  }
  return ways;
}

inline int threads_of(const cpu_backend& b) { return b.threads; }
inline int threads_of(const gpu_backend&) { return 0; }

/// Reduces the same input with every decomposition, twice each: all results
/// must have the same bits as the tree and as the CPU backend.
template <class Side, class T, class Out, class Op>
void check_same_bits_everywhere(const std::vector<T>& host, Op op, options base = {}) {
  const auto n = static_cast<std::int64_t>(host.size());
  SCOPED_TRACE(type_name<T>() + " into " + type_name<Out>() + ", n = " + std::to_string(n));
  Out on_cpu;
  tally::reduce(tally::cpu, host.data(), n, &on_cpu, op, base);
  if (base.sum == summation::plain) {
    EXPECT_PRED_FORMAT2(bitwise_equal, on_cpu, (reduce_expected<Out>(host.data(), n, op)));
  } else if constexpr (std::is_floating_point_v<Out>) {
    // Compensated: within two roundings of the exact sum (no bitwise reference).
    long_sum exact;
    for (const T& v : host) exact.add(convert<double>(v));
    const long double eps = epsilon_of<Out>;
    EXPECT_LE(std::fabs(static_cast<long double>(on_cpu) - exact.value),
              2 * eps * std::fabs(exact.value) + 64 * eps * eps * exact.magnitude);
  }

  buffer<T> x(Side::on_gpu, host.size(), 1);
  x.write(host);
  buffer<Out> out(Side::on_gpu, 1);
  for (auto [backend, opts] : decompositions<Side>()) {
    opts.sum = base.sum;
    for (int run = 0; run < 2; ++run) {
      SCOPED_TRACE((Side::on_gpu ? "grid_blocks " + std::to_string(opts.grid_blocks)
                                 : "threads " + std::to_string(threads_of(backend))) +
                   ", run " + std::to_string(run));
      out.poison();
      tally::reduce(backend, static_cast<const T*>(x.data()), n, out.data(), op, opts);
      EXPECT_PRED_FORMAT2(bitwise_equal, out.read()[0], on_cpu);
    }
  }
}

TYPED_TEST(ReduceSizes, SameBitsForAnyDecompositionAndRun) {
  using S = TypeParam;
  auto& rng = this->rng;
  const auto elements = [&](int v, std::int64_t groups) {
    const std::int64_t group = tree::kGroupTiles * tree::kTileVectors * v;
    return static_cast<std::size_t>(groups * group + rng.integer(1, 3 * tree::kTileVectors * v));
  };
  options compensated;
  compensated.sum = summation::compensated;
  check_same_bits_everywhere<S, float, float>(random_values<float>(rng, elements(4, 2)), plus{});
  check_same_bits_everywhere<S, double, double>(random_values<double>(rng, elements(2, 1)), plus{}, compensated);
  check_same_bits_everywhere<S, half, float>(random_values<half>(rng, elements(8, 0)), plus{});
  check_same_bits_everywhere<S, float, value_index<float>>(random_integers<float>(rng, elements(4, 1), -999, 999),
                                                           arg_min{});
  check_same_bits_everywhere<S, mat2, mat2>(random_matrices(rng, elements(1, 2)), matrix_product());
  check_same_bits_everywhere<S, complex<float>, complex<float>>(random_values<complex<float>>(rng, elements(2, 0)),
                                                                plus{});
}

}  // namespace

namespace sizes_tests {

/// x[i] = (i % 7) - 3, then x[planted] = 1000: every partial sum of the tree
/// is a small integer, so the float sum is exact and known in closed form.
__global__ void fill_pattern(float* x, std::int64_t n, std::int64_t planted) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    x[i] = i == planted ? 1000.0f : static_cast<float>(i % 7 - 3);
}

}  // namespace sizes_tests

namespace {

// GPU only, and too large for compute-sanitizer: "ReduceSizesHuge/gpu.Huge*".
template <class Side>
class ReduceSizesHuge : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceSizesHuge, gpu_only, backend_names);

TYPED_TEST(ReduceSizesHuge, HugeMoreThan2To31Elements) {
  using S = TypeParam;
  {
    const std::int64_t n = (std::int64_t{1} << 31) + 5;
    const std::int64_t planted = n - 2;  // an index past 2^31
    std::size_t free_bytes = 0, total_bytes = 0;
    ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
    const std::size_t needed = static_cast<std::size_t>(n) * sizeof(float) + (std::size_t{256} << 20);
    if (free_bytes < needed)
      TALLY_GPU_TEST_CANNOT_RUN("needs " + std::to_string(needed >> 20) + " MiB of GPU memory, " +
                                std::to_string(free_bytes >> 20) + " MiB free");

    buffer<float> x(true, static_cast<std::size_t>(n), 1);
    sizes_tests::fill_pattern<<<1024, 256>>>(x.data(), n, planted);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

    // Σ (i % 7 - 3) over full periods is 0; the remainder r = n % 7 adds
    // Σ_{k<r} (k - 3); the planted element replaces its pattern value by 1000.
    const std::int64_t r = n % 7;
    double exact = 0;
    for (std::int64_t k = 0; k < r; ++k) exact += static_cast<double>(k - 3);
    exact += 1000.0 - static_cast<double>(planted % 7 - 3);

    const float* p = x.data();
    EXPECT_EQ(tally::sum(S::backend(), p, n), static_cast<float>(exact));
    EXPECT_EQ(tally::sum<double>(S::backend(), p, n), exact);
    buffer<value_index<float>> where(true, 1);
    tally::reduce(S::backend(), p, n, where.data(), arg_max{});
    const auto found = where.read()[0];
    EXPECT_EQ(found.index, planted);
    EXPECT_EQ(found.value, 1000.0f);
    // And the grid does not matter at this size either.
    options opts;
    opts.grid_blocks = 3;
    buffer<float> out(true, 1);
    tally::reduce(S::backend(), p, n, out.data(), plus{}, opts);
    EXPECT_EQ(out.read()[0], static_cast<float>(exact));
  }
}

}  // namespace
}  // namespace tally::testing
