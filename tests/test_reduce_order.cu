// Order-sensitive data across the levels of the tree and the GPU's paths:
// random floats (whose sums depend on the order of every addition) and the
// non-commutative 2×2 matrix product (exact, so any change of order shows),
// past one group of tiles, past 32 groups (the root's one-warp path ends) and
// past 1024 groups (each of the root's slots holds several groups), on several
// forced grid sizes; dot, transform_reduce and compensated sums across groups
// and past 2^31 elements. A group is 1024 tiles of 1024 vectors of 16 bytes:
// 4M floats, 1M matrices.
//
// References: the tree written in reference.hpp (bitwise), exact integer sums
// (values that are multiples of 2^-23) and the ordered product.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "reduce_fixture.hpp"
#include "user_operators.hpp"

namespace tally::testing {
namespace order_tests {

/// |x| as a transform for transform_reduce.
struct absolute_value {
  TALLY_HD_INLINE float operator()(float v) const { return v < 0 ? -v : v; }
};

/// splitmix64: a counter-based generator the device and the host both
/// evaluate, so a huge input is made on the GPU and its reference computed
/// on the host without a copy of it.
TALLY_HD_INLINE std::uint64_t mix(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Element i of a hashed float input: k·2^-23 with k in [-2^23, 2^23), so
/// sums of any length are exact in int64 units of 2^-23.
TALLY_HD_INLINE std::int64_t units_at(std::uint64_t seed, std::int64_t i) {
  return static_cast<std::int64_t>(mix(seed, static_cast<std::uint64_t>(i)) >> 40) - (std::int64_t{1} << 23);
}
TALLY_HD_INLINE float float_at(std::uint64_t seed, std::int64_t i) {
  return static_cast<float>(units_at(seed, i)) * 0x1p-23f;
}

/// Matrix i of a hashed input, invertible modulo 2^32 as random_matrices'.
TALLY_HD_INLINE mat2 matrix_at(std::uint64_t seed, std::int64_t i) {
  const std::uint64_t r0 = mix(seed, 2 * static_cast<std::uint64_t>(i)), r1 = mix(seed, 2 * static_cast<std::uint64_t>(i) + 1);
  return {static_cast<std::uint32_t>(r0) | 1u, static_cast<std::uint32_t>(r0 >> 32) & ~1u, static_cast<std::uint32_t>(r1),
          static_cast<std::uint32_t>(r1 >> 32) | 1u};
}

__global__ void fill_floats(float* x, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x)
    x[i] = float_at(seed, i);
}

__global__ void fill_matrices(mat2* x, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n; i += std::int64_t{gridDim.x} * blockDim.x)
    x[i] = matrix_at(seed, i);
}

/// The ordered product of matrix_at(seed, 0..n), in parallel chunks
/// multiplied in order (exact: the ring is associative).
inline mat2 hashed_ordered_product(std::uint64_t seed, std::int64_t n) {
  constexpr std::int64_t kChunks = 512;
  std::vector<mat2> part(kChunks, mat2_identity);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t c = 0; c < kChunks; ++c) {
    mat2 p = mat2_identity;
    for (std::int64_t i = n * c / kChunks; i < n * (c + 1) / kChunks; ++i) p = multiply(p, matrix_at(seed, i));
    part[static_cast<std::size_t>(c)] = p;
  }
  mat2 p = mat2_identity;
  for (const mat2& m : part) p = multiply(p, m);
  return p;
}

/// Σ f(units_at(seed, i)) over i < n exactly, in parallel chunks.
template <class F>
__int128 hashed_exact_sum(std::int64_t n, const F& f) {
  constexpr std::int64_t kChunks = 512;
  std::vector<__int128> part(kChunks, 0);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t c = 0; c < kChunks; ++c) {
    __int128 s = 0;
    for (std::int64_t i = n * c / kChunks; i < n * (c + 1) / kChunks; ++i) s += f(i);
    part[static_cast<std::size_t>(c)] = s;
  }
  __int128 s = 0;
  for (__int128 p : part) s += p;
  return s;
}

}  // namespace order_tests

namespace {

using order_tests::absolute_value;

/// Grids to force: the backend's own, one block, a few, more blocks than
/// tiles in a group, more than the device holds at once (GPU); thread counts
/// (CPU). The result must have the same bits for each.
template <class Side>
std::vector<std::pair<decltype(Side::backend()), options>> forced_splits() {
  std::vector<std::pair<decltype(Side::backend()), options>> ways;
  if constexpr (Side::on_gpu) {
    for (int blocks : {0, 1, 7, 1000, 5000}) {
      options opts;
      opts.grid_blocks = blocks;
      ways.push_back({Side::backend(), opts});
    }
  } else {
    for (int threads : {0, 1, 3, 7}) ways.push_back({tally::cpu.with_threads(threads), options{}});
  }
  return ways;
}

std::string split_name(const cpu_backend& b, const options&) { return "threads " + std::to_string(b.threads); }
std::string split_name(const gpu_backend&, const options& o) { return "grid_blocks " + std::to_string(o.grid_blocks); }

constexpr std::int64_t kFloatGroup = tree::kGroupTiles * tree::kTileVectors * 4;  // 4M floats
constexpr std::int64_t kMatrixGroup = tree::kGroupTiles * tree::kTileVectors;     // 1M matrices

template <class Side>
class ReduceOrder : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceOrder, backends, backend_names);

/// For 1 group + a partial tile and 2 groups + a few tiles: float sums,
/// dot, transform_reduce and matrix products equal the tree's bits for every
/// forced split, and compensated sums lie within two roundings of the exact
/// sum (random multiples of 2^-23: exact in int64 units).
TYPED_TEST(ReduceOrder, RandomFloatsAndMatrixProductsOnEveryForcedGrid) {
  using S = TypeParam;
  auto& rng = this->rng;
  for (const std::int64_t groups : {1, 2}) {
    const std::int64_t n = groups * kFloatGroup + rng.integer(1, 3 * tree::kTileVectors * 4);
    SCOPED_TRACE("floats, n = " + std::to_string(n));
    std::vector<float> x(static_cast<std::size_t>(n)), y(x.size());
    std::int64_t units = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::int64_t k = rng.integer(-(std::int64_t{1} << 23), (std::int64_t{1} << 23) - 1);
      units += k;
      x[i] = static_cast<float>(k) * 0x1p-23f;
      y[i] = static_cast<float>(rng.real(-1.0, 1.0));
    }
    const float sum = reduce_expected<float>(x.data(), n);
    const float dot = transform_reduce_expected<float>(x.data(), y.data(), n, reference_product{}, plus{});
    const double magnitude = transform_reduce_expected<double>(x.data(), n, absolute_value{}, plus{});
    const long double exact = static_cast<long double>(units) * 0x1p-23L;

    buffer<float> dx(S::on_gpu, x.size(), 1), dy(S::on_gpu, y.size(), 1), out(S::on_gpu, 1);
    buffer<double> out_d(S::on_gpu, 1);
    dx.write(x);
    dy.write(y);
    const float* px = dx.data();
    const float* py = dy.data();
    for (auto [backend, opts] : forced_splits<S>()) {
      SCOPED_TRACE(split_name(backend, opts));
      out.poison();
      tally::reduce(backend, px, n, out.data(), plus{}, opts);
      EXPECT_PRED_FORMAT2(bitwise_equal, out.read()[0], sum);
      out.poison();
      tally::dot(backend, px, py, n, out.data(), opts);
      EXPECT_PRED_FORMAT2(bitwise_equal, out.read()[0], dot);
      out_d.poison();
      tally::transform_reduce(backend, px, n, out_d.data(), absolute_value{}, plus{}, opts);
      EXPECT_PRED_FORMAT2(bitwise_equal, out_d.read()[0], magnitude);
      options compensated = opts;
      compensated.sum = summation::compensated;
      out.poison();
      tally::reduce(backend, px, n, out.data(), plus{}, compensated);
      const long double eps = epsilon_of<float>;
      // Two roundings of the exact sum, plus second-order terms; a lost tile
      // (4096 values of about 0.5) moves the sum by ~30 times more.
      EXPECT_LE(std::fabs(out.read()[0] - exact), 2 * eps * std::fabs(exact) + 40 * eps * eps * magnitude)
          << "compensated float sum, exact " << static_cast<double>(exact);
    }
    // The plain sum is close to the exact one too (the tree computes the right thing).
    EXPECT_TRUE(within<float>(sum, exact, sum_bound(n, 4, epsilon_of<float>, magnitude)));
  }
  for (const std::int64_t groups : {1, 2}) {
    const std::int64_t n = groups * kMatrixGroup + rng.integer(1, 3 * tree::kTileVectors);
    SCOPED_TRACE("matrices, n = " + std::to_string(n));
    const auto m = random_matrices(rng, static_cast<std::size_t>(n));
    const mat2 expected = ordered_product(m);
    buffer<mat2> dm(S::on_gpu, m.size()), out(S::on_gpu, 1);
    dm.write(m);
    for (auto [backend, opts] : forced_splits<S>()) {
      SCOPED_TRACE(split_name(backend, opts));
      out.poison();
      tally::reduce(backend, static_cast<const mat2*>(dm.data()), n, out.data(), matrix_product(), opts);
      EXPECT_PRED_FORMAT2(bitwise_equal, out.read()[0], expected);
    }
  }
}

// ------------------------------------------------------------- GPU, huge

/// GPU only, too large for compute-sanitizer: "ReduceOrderHuge/gpu.Huge*".
template <class Side>
class ReduceOrderHuge : public reduce_test<Side> {
 protected:
  /// Ends the test (skip, or failure under TALLY_REQUIRE_GPU=1) unless
  /// `bytes` of GPU memory are free, with 256 MiB to spare.
  bool have_memory(std::size_t bytes) {
    std::size_t free_bytes = 0, total_bytes = 0;
    EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
    return free_bytes >= bytes + (std::size_t{256} << 20);
  }
  static std::string memory_message(std::size_t bytes) {
    return "needs " + std::to_string(bytes >> 20) + " MiB of free GPU memory";
  }
  const std::uint64_t seed = this->rng.bits();
};
TYPED_TEST_SUITE(ReduceOrderHuge, gpu_only, backend_names);

/// 33 groups and a few tiles: the root combines more than 32 group values
/// (the block-wide path, one group per slot), for several grids.
TYPED_TEST(ReduceOrderHuge, HugeMoreThan32Groups) {
  using S = TypeParam;
  const std::int64_t n = 33 * kFloatGroup + this->rng.integer(1, 5 * tree::kTileVectors * 4);
  if (!this->have_memory(static_cast<std::size_t>(n) * 4))
    TALLY_GPU_TEST_CANNOT_RUN(this->memory_message(static_cast<std::size_t>(n) * 4));
  SCOPED_TRACE("n = " + std::to_string(n) + ", seed " + std::to_string(this->seed));
  buffer<float> x(true, static_cast<std::size_t>(n));
  order_tests::fill_floats<<<1024, 256>>>(x.data(), n, this->seed);
  TALLY_CUDA_LAUNCHED("fill_floats");
  const float expected =
      *tree_of<float>(n, 4, [&](std::int64_t i) { return order_tests::float_at(this->seed, i); }, plus{}, 8);
  buffer<float> out(true, 1);
  for (int blocks : {0, 3, 1000}) {
    options opts;
    opts.grid_blocks = blocks;
    out.poison();
    tally::reduce(S::backend(), static_cast<const float*>(x.data()), n, out.data(), plus{}, opts);
    EXPECT_PRED_FORMAT2(bitwise_equal, out.read()[0], expected) << "grid_blocks " << blocks;
  }
}

/// 1025 groups and a partial tile (16 GiB per input): each slot of the
/// root's block tree holds two groups, so the root walks subtrees serially.
/// Float sums (the tree's bits) and matrix products (the ordered product).
TYPED_TEST(ReduceOrderHuge, HugeMoreThan1024Groups) {
  using S = TypeParam;
  const std::uint64_t seed = this->seed;
  const std::int64_t n = 1025 * kFloatGroup + this->rng.integer(1, 4095);
  if (!this->have_memory(static_cast<std::size_t>(n) * 4))
    TALLY_GPU_TEST_CANNOT_RUN(this->memory_message(static_cast<std::size_t>(n) * 4));
  SCOPED_TRACE("seed " + std::to_string(seed));
  {
    SCOPED_TRACE("floats, n = " + std::to_string(n));
    buffer<float> x(true, static_cast<std::size_t>(n));
    order_tests::fill_floats<<<4096, 256>>>(x.data(), n, seed);
    TALLY_CUDA_LAUNCHED("fill_floats");
    const float expected =
        *tree_of<float>(n, 4, [&](std::int64_t i) { return order_tests::float_at(seed, i); }, plus{}, 10);
    const __int128 units = order_tests::hashed_exact_sum(n, [&](std::int64_t i) { return order_tests::units_at(seed, i); });
    buffer<float> out(true, 1);
    buffer<double> out_d(true, 1);
    for (int blocks : {0, 5}) {
      options opts;
      opts.grid_blocks = blocks;
      out.poison();
      tally::reduce(S::backend(), static_cast<const float*>(x.data()), n, out.data(), plus{}, opts);
      EXPECT_PRED_FORMAT2(bitwise_equal, out.read()[0], expected) << "grid_blocks " << blocks;
    }
    // Into double: within a bound far below one lost tile, of the exact sum.
    const __int128 abs_units = order_tests::hashed_exact_sum(n, [&](std::int64_t i) {
      const std::int64_t k = order_tests::units_at(seed, i);
      return static_cast<__int128>(k < 0 ? -k : k);
    });
    tally::reduce(S::backend(), static_cast<const float*>(x.data()), n, out_d.data());
    const long double exact = static_cast<long double>(units) * 0x1p-23L;
    EXPECT_TRUE(within<double>(out_d.read()[0], exact,
                               sum_bound(n, 4, epsilon_of<double>, static_cast<long double>(abs_units) * 0x1p-23L)));
  }
  {
    const std::int64_t m = 1025 * kMatrixGroup + this->rng.integer(1, 1023);
    SCOPED_TRACE("matrices, n = " + std::to_string(m));
    buffer<mat2> x(true, static_cast<std::size_t>(m));
    order_tests::fill_matrices<<<4096, 256>>>(x.data(), m, seed);
    TALLY_CUDA_LAUNCHED("fill_matrices");
    const mat2 expected = order_tests::hashed_ordered_product(seed, m);
    buffer<mat2> out(true, 1);
    for (int blocks : {0, 9}) {
      options opts;
      opts.grid_blocks = blocks;
      out.poison();
      tally::reduce(S::backend(), static_cast<const mat2*>(x.data()), m, out.data(), matrix_product(), opts);
      EXPECT_PRED_FORMAT2(bitwise_equal, out.read()[0], expected) << "grid_blocks " << blocks;
    }
  }
}

/// dot, transform_reduce and compensated sums over 2^31 + k elements (two
/// 8.6 GB inputs): exact integer references (products of multiples of 2^-23
/// rounded to float are multiples of 2^-46), bitwise trees for float dots.
TYPED_TEST(ReduceOrderHuge, HugeDotTransformAndCompensatedPast2To31) {
  using S = TypeParam;
  const std::uint64_t sx = this->seed, sy = this->seed ^ 0x5555555555555555ull;
  const std::int64_t n = (std::int64_t{1} << 31) + this->rng.integer(1, 9999);
  const std::size_t bytes = 2 * static_cast<std::size_t>(n) * 4;
  if (!this->have_memory(bytes)) TALLY_GPU_TEST_CANNOT_RUN(this->memory_message(bytes));
  SCOPED_TRACE("n = " + std::to_string(n) + ", seed " + std::to_string(sx));
  buffer<float> x(true, static_cast<std::size_t>(n)), y(true, static_cast<std::size_t>(n));
  order_tests::fill_floats<<<4096, 256>>>(x.data(), n, sx);
  order_tests::fill_floats<<<4096, 256>>>(y.data(), n, sy);
  TALLY_CUDA_LAUNCHED("fill_floats");
  const float* px = x.data();
  const float* py = y.data();
  const auto product = [&](std::int64_t i) { return rounded_product(order_tests::float_at(sx, i), order_tests::float_at(sy, i)); };

  // dot into double: the float products summed in double; exact reference in units of 2^-46.
  const __int128 product_units = order_tests::hashed_exact_sum(
      n, [&](std::int64_t i) { return static_cast<__int128>(std::ldexp(static_cast<double>(product(i)), 46)); });
  const __int128 product_magnitude = order_tests::hashed_exact_sum(
      n, [&](std::int64_t i) { return static_cast<__int128>(std::fabs(std::ldexp(static_cast<double>(product(i)), 46))); });
  buffer<double> out_d(true, 1);
  tally::dot(S::backend(), px, py, n, out_d.data());
  EXPECT_TRUE(within<double>(out_d.read()[0], static_cast<long double>(product_units) * 0x1p-46L,
                             sum_bound(n, 4, epsilon_of<double>, static_cast<long double>(product_magnitude) * 0x1p-46L)))
      << "dot into double";

  // dot into float: the tree's bits, on two grids.
  const float dot = *tree_of<float>(n, 4, product, plus{}, 10);
  buffer<float> out(true, 1);
  for (int blocks : {0, 11}) {
    options opts;
    opts.grid_blocks = blocks;
    out.poison();
    tally::dot(S::backend(), px, py, n, out.data(), opts);
    EXPECT_PRED_FORMAT2(bitwise_equal, out.read()[0], dot) << "dot into float, grid_blocks " << blocks;
  }

  // transform_reduce Σ|x| into double: exact in units of 2^-23.
  const __int128 abs_units = order_tests::hashed_exact_sum(n, [&](std::int64_t i) {
    const std::int64_t k = order_tests::units_at(sx, i);
    return static_cast<__int128>(k < 0 ? -k : k);
  });
  const long double abs_exact = static_cast<long double>(abs_units) * 0x1p-23L;
  out_d.poison();
  tally::transform_reduce(S::backend(), px, n, out_d.data(), absolute_value{}, plus{});
  EXPECT_TRUE(within<double>(out_d.read()[0], abs_exact, sum_bound(n, 4, epsilon_of<double>, abs_exact)))
      << "transform_reduce |x| into double";

  // Compensated float sum: within two roundings of the exact sum (a lost
  // tile of 4096 values moves it by ~30 000 times the bound).
  const __int128 units = order_tests::hashed_exact_sum(n, [&](std::int64_t i) { return order_tests::units_at(sx, i); });
  const long double exact = static_cast<long double>(units) * 0x1p-23L;
  const long double eps = epsilon_of<float>;
  for (int blocks : {0, 13}) {
    options opts;
    opts.grid_blocks = blocks;
    opts.sum = summation::compensated;
    out.poison();
    tally::reduce(S::backend(), px, n, out.data(), plus{}, opts);
    EXPECT_LE(std::fabs(out.read()[0] - exact), 2 * eps * std::fabs(exact) + 40 * eps * eps * abs_exact)
        << "compensated float sum, grid_blocks " << blocks << ", exact " << static_cast<double>(exact);
    opts.sum = summation::plain;
  }
}

}  // namespace
}  // namespace tally::testing
