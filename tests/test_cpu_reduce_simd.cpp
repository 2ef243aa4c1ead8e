// The CPU backend's SIMD kernels (cpu/tree_simd.hpp) and its threaded split
// (cpu/reduce.hpp) against the fixed tree, bit for bit.
//
// The kernels are called directly for every register width this CPU runs
// (AVX-512, AVX2, SSE2), so that each is tested wherever the widest one is
// picked at run time. The reference is tree::reduce_reference (the tree's
// definition) over leaves computed here, not by the library's sources.
// Compiled as plain C++ (the CPU backend needs no CUDA).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "random.hpp"
#include "tally/tally.hpp"
#include "user_operators.hpp"

namespace {

using namespace tally;
namespace simd = tally::detail::cpu_simd;
using tally::testing::random_source;
namespace tt = tally::testing;

// ------------------------------------------------------------ the reference

/// The tree's root over leaves leaf(0..n) in vectors of V, combined with op.
template <class Acc, class Leaf, class Op>
tree::maybe<Acc> reference_root(std::int64_t n, int V, const Leaf& leaf, const Op& op) {
  const auto fold = [&](std::int64_t j) {
    const std::int64_t first = j * V, last = std::min<std::int64_t>(first + V, n);
    Acc acc = leaf(first);
    for (std::int64_t i = first + 1; i < last; ++i) acc = op(acc, leaf(i));
    return acc;
  };
  return tree::reduce_reference<Acc>(tree::vector_count(n, V), fold, op);
}

template <class T>
bool same_bits(const T& a, const T& b) {
  if constexpr (requires { a.error; }) return same_bits(a.sum, b.sum) && same_bits(a.error, b.error);
  else if constexpr (requires { a.index; }) return same_bits(a.value, b.value) && a.index == b.index;
  else return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
std::string show(const T& x) {
  if constexpr (requires { x.error; }) return "{" + show(x.sum) + ", " + show(x.error) + "}";
  else if constexpr (requires { x.index; }) return "{" + show(x.value) + " @" + std::to_string(x.index) + "}";
  else if constexpr (std::is_floating_point_v<T>) {
    char s[64];
    std::snprintf(s, sizeof s, "%a", static_cast<double>(x));
    return s;
  } else if constexpr (std::is_integral_v<T>) {
    return std::to_string(x);
  } else {
    return "(" + std::to_string(sizeof(T)) + " bytes)";
  }
}

// ------------------------------------------------------------ inputs

/// Which special values to mix in. `order` is for minimum and maximum, which
/// are commutative except on equal values (the left one is kept: +0 or −0)
/// and on two NaNs (the left payload is kept): only signed zeros and NaNs
/// with distinct payloads, so that any swapped operands show in the bits.
enum class specials { none, zeros_and_infinities, all, order };

/// Random T, magnitudes spread over 2^±12 so that the order of additions
/// shows, or near 1 for products. NaN inputs only where the operator picks
/// one of its operands (minimum, maximum): an addition of two NaNs may return
/// either's payload, as the compiler orders the operands of a commutative add.
template <class T>
std::vector<T> kernel_input(random_source& rng, std::size_t n, specials special, bool near_one) {
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_integral_v<T>) {
      x = static_cast<T>(rng.bits() | (near_one ? 1u : 0u));  // odd: products stay invertible
    } else {
      x = near_one ? static_cast<T>(1 + rng.real(-1.0 / 64, 1.0 / 64))
                   : static_cast<T>(std::ldexp(rng.real(-1, 1), static_cast<int>(rng.integer(-12, 12))));
      if (special == specials::order) {
        using bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
        const bits quiet_nan = std::bit_cast<bits>(std::numeric_limits<T>::quiet_NaN());
        const bits payload = static_cast<bits>(rng.bits()) & (quiet_nan >> 2);  // below the quiet bit
        x = rng.integer(0, 255) == 0 ? std::bit_cast<T>(static_cast<bits>(quiet_nan | payload))
                                     : (rng.integer(0, 1) ? T(0) : -T(0));
      } else if (special != specials::none) {
        // Zeros and NaNs one in 64 each, infinities one in 2048 each (so that
        // most sums of a few hundred elements stay finite).
        const std::int64_t r = rng.integer(0, 2047);
        if (r < 32) x = r < 16 ? T(0) : -T(0);
        else if (r < 64 && special == specials::all) x = std::numeric_limits<T>::quiet_NaN();
        else if (r == 64) x = std::numeric_limits<T>::infinity();
        else if (r == 65) x = -std::numeric_limits<T>::infinity();
      }
    }
  }
  return v;
}

// ------------------------------------------------------------ the kernels

/// The kernel entry for registers of `bytes` bytes, far (prefetching) or not.
template <class Source, class Op>
typename Source::acc_type run_kernel(int bytes, bool far, const Source& src, std::int64_t first,
                                     std::int64_t size) {
#if defined(__x86_64__)
  if (bytes == 64)
    return far ? simd::subtree_avx512<Source, Op, true>(src, first, size)
               : simd::subtree_avx512<Source, Op, false>(src, first, size);
  if (bytes == 32)
    return far ? simd::subtree_avx2<Source, Op, true>(src, first, size)
               : simd::subtree_avx2<Source, Op, false>(src, first, size);
#endif
  return far ? simd::subtree_sse2<Source, Op, true>(src, first, size)
             : simd::subtree_sse2<Source, Op, false>(src, first, size);
}

/// Register widths to test: every one this CPU runs.
std::vector<int> widths() {
  std::vector<int> w;
  for (int bytes : {64, 32, 16})
    if (bytes <= simd::register_bytes()) w.push_back(bytes);
  return w;
}

/// Every kernel width, far and not, on aligned subtrees of `Source` (leaves
/// leaf(i)) of each size from the smallest the kernel takes up to 2^6 times
/// that, at several positions, against the reference.
template <class Source, class Op, class Leaf>
void expect_kernels_match(const Source& src, const Op& op, const Leaf& leaf) {
  using Acc = typename Source::acc_type;
  static_assert(simd::supported<Source, Op>);
  constexpr int V = Source::V;
  for (int bytes : widths()) {
    const std::int64_t min_vectors = std::int64_t{bytes / static_cast<int>(sizeof(typename simd::pack<Acc, 16>::elem))} *
                                     simd::kStepVectors;
    for (std::int64_t size = min_vectors; size <= 64 * min_vectors && size * V <= src.n; size *= 2) {
      for (std::int64_t first = 0; (first + size) * V <= src.n; first += (first == 0 ? size : 3 * size)) {
        const auto want = reference_root<Acc>(size * V, V, [&](std::int64_t i) { return leaf(first * V + i); }, op);
        for (const bool far : {false, true}) {
          SCOPED_TRACE(std::to_string(bytes) + "-byte registers" + (far ? " (far)" : "") + ", vectors [" +
                       std::to_string(first) + ", " + std::to_string(first + size) + ")");
          const Acc got = run_kernel<Source, Op>(bytes, far, src, first, size);
          ASSERT_TRUE(same_bits(got, want.value)) << "got " << show(got) << ", want " << show(want.value);
        }
      }
    }
  }
}

/// Vectors of the longest kernel input below, plus one element of slack so
/// that the data can start off its alignment.
constexpr std::size_t kKernelElements = 16 * 4 * 64 * 4 + 1;

template <class T, class Op>
void expect_plain_kernels(Op op, specials special, bool near_one = false) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::vector<T> data = kernel_input<T>(rng, kKernelElements, special, near_one);
  for (int offset : {0, 1}) {  // 16-byte aligned or not
    const T* x = data.data() + offset;
    const std::int64_t n = static_cast<std::int64_t>(data.size()) - 1;
    expect_kernels_match(unary_source<T, T, identity_transform>{x, n, {}}, op, [&](std::int64_t i) { return x[i]; });
  }
}

TEST(CpuReduceSimd, KernelsMatchTheTreeForFloatOperators) {
  expect_plain_kernels<float>(plus{}, specials::none);
  expect_plain_kernels<float>(plus{}, specials::zeros_and_infinities);
  expect_plain_kernels<float>(multiplies{}, specials::none, true);
  expect_plain_kernels<float>(minimum{}, specials::all);
  expect_plain_kernels<float>(maximum{}, specials::all);
  expect_plain_kernels<float>(minimum{}, specials::order);
  expect_plain_kernels<float>(maximum{}, specials::order);
  expect_plain_kernels<double>(plus{}, specials::none);
  expect_plain_kernels<double>(multiplies{}, specials::none, true);
  expect_plain_kernels<double>(minimum{}, specials::all);
  expect_plain_kernels<double>(maximum{}, specials::all);
  expect_plain_kernels<double>(minimum{}, specials::order);
  expect_plain_kernels<double>(maximum{}, specials::order);
}

TEST(CpuReduceSimd, KernelsMatchTheTreeForIntegerOperators) {
  expect_plain_kernels<std::int32_t>(plus{}, specials::none);
  expect_plain_kernels<std::int32_t>(multiplies{}, specials::none, true);
  expect_plain_kernels<std::int32_t>(minimum{}, specials::none);
  expect_plain_kernels<std::int32_t>(bit_xor{}, specials::none);
  expect_plain_kernels<std::uint32_t>(maximum{}, specials::none);
  expect_plain_kernels<std::uint32_t>(bit_and{}, specials::none, true);
  expect_plain_kernels<std::int64_t>(plus{}, specials::none);
  expect_plain_kernels<std::int64_t>(maximum{}, specials::none);
  expect_plain_kernels<std::int64_t>(bit_or{}, specials::none);
  expect_plain_kernels<std::uint64_t>(multiplies{}, specials::none, true);
  expect_plain_kernels<std::uint64_t>(minimum{}, specials::none);
}

template <class T>
void expect_compensated_and_product_kernels() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  std::vector<T> xs = kernel_input<T>(rng, kKernelElements, specials::none, false);
  const std::vector<T> ys = kernel_input<T>(rng, kKernelElements, specials::none, false);
  // Cancellation, so that the compensation terms matter, and signed zeros.
  for (std::size_t i = 0; i + 1 < xs.size(); i += 5) xs[i + 1] = -xs[i] * T(1 + 0x1p-20);
  for (std::size_t i = 3; i < xs.size(); i += 97) xs[i] = -T(0);
  for (int offset : {0, 1}) {
    const T *x = xs.data() + offset, *y = ys.data() + offset;
    const std::int64_t n = static_cast<std::int64_t>(xs.size()) - 1;
    using plain = unary_source<T, T, identity_transform>;
    using product = binary_source<T, T, T, detail::product_transform>;
    using square = unary_source<T, T, detail::squared_magnitude>;
    const auto leaf_x = [&](std::int64_t i) { return compensated<T>{x[i], T(0)}; };
    expect_kernels_match(compensated_source<plain>(plain{x, n, {}}), compensated_plus{}, leaf_x);
    expect_kernels_match(product{x, y, n, {}}, plus{}, [&](std::int64_t i) { return T(x[i] * y[i]); });
    expect_kernels_match(square{x, n, {}}, plus{}, [&](std::int64_t i) { return T(x[i] * x[i]); });
    expect_kernels_match(compensated_source<product>(product{x, y, n, {}}), compensated_plus{},
                         [&](std::int64_t i) { return compensated<T>{T(x[i] * y[i]), T(0)}; });
  }
}

TEST(CpuReduceSimd, KernelsMatchTheTreeForCompensatedSumsDotsAndNorms) {
  expect_compensated_and_product_kernels<float>();
  expect_compensated_and_product_kernels<double>();
}

/// Inputs for compensated sums whose bits depend on the order of every
/// addition, or on the sign of zero errors: the SIMD leaf fold leaves the
/// leaves' zero errors out, which must not change a bit.
enum class compensated_data {
  cancelling,     // magnitudes over 2^±12, neighbours cancelling, some −0
  negative_zero,  // all −0: the sum stays −0, every error is +0
  exact,          // small integers and ±0: every error is exactly zero
  infinities,     // cancelling, with ±0 and ±inf mixed in (errors become NaN)
};

template <class T>
std::vector<T> compensated_input(random_source& rng, std::size_t n, compensated_data kind) {
  std::vector<T> v;
  if (kind == compensated_data::negative_zero) return std::vector<T>(n, -T(0));
  if (kind == compensated_data::exact) {
    v.resize(n);
    for (auto& x : v) x = rng.integer(0, 7) == 0 ? (rng.integer(0, 1) ? T(0) : -T(0)) : T(rng.integer(-8, 8));
    return v;
  }
  v = kernel_input<T>(rng, n, kind == compensated_data::infinities ? specials::zeros_and_infinities : specials::none,
                      false);
  for (std::size_t i = 0; i + 1 < n; i += 3) v[i + 1] = -v[i] * T(1 + 0x1p-20);
  for (std::size_t i = 5; i < n; i += 61) v[i] = -T(0);
  return v;
}

constexpr compensated_data kCompensatedData[] = {compensated_data::cancelling, compensated_data::negative_zero,
                                                 compensated_data::exact, compensated_data::infinities};

/// Every kernel width on every power-of-two subtree it takes (up to 2^6 times
/// its smallest), compensated sums of each kind of data, against the tree
/// evaluated with the scalar compensated_plus: sums and errors bit for bit.
template <class T>
void expect_compensated_kernels_on_order_sensitive_data() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  using plain = unary_source<T, T, identity_transform>;
  for (const compensated_data kind : kCompensatedData) {
    SCOPED_TRACE("data kind " + std::to_string(static_cast<int>(kind)));
    const std::vector<T> xs = compensated_input<T>(rng, kKernelElements, kind);
    for (int offset : {0, 1}) {
      const T* x = xs.data() + offset;
      const std::int64_t n = static_cast<std::int64_t>(xs.size()) - 1;
      expect_kernels_match(compensated_source<plain>(plain{x, n, {}}), compensated_plus{}, [&](std::int64_t i) {
        return compensated<T>{x[i], T(0)};
      });
    }
  }
}

TEST(CpuReduceSimd, CompensatedKernelsMatchTheScalarOperatorOnOrderSensitiveData) {
  expect_compensated_kernels_on_order_sensitive_data<float>();
  expect_compensated_kernels_on_order_sensitive_data<double>();
}

// ------------------------------------------------------------ whole reductions

/// Sizes around every threshold: the kernels' smallest subtrees, tiles, the
/// threading threshold (128 KB), with short last vectors.
std::vector<std::int64_t> sizes_for(int element_bytes) {
  const std::int64_t per_vector = 16 / element_bytes;
  std::vector<std::int64_t> sizes = {1, 2, 3, 5, 17};
  for (std::int64_t vectors : {16, 32, 64, 128, 1024, 4096, 8192, 3 * 8192 + 40, 65536})
    for (std::int64_t d : {-per_vector - 1, std::int64_t{-1}, std::int64_t{0}, std::int64_t{1}, per_vector + 3}) sizes.push_back(vectors * per_vector + d);
  return sizes;
}

constexpr int kThreadCounts[] = {1, 2, 3, 16};

/// Sizes around the far kernel's threshold (subtrees of 2^18 vectors), for
/// 1 to 3 threads: below, at and past it, and with a short last vector.
std::vector<std::int64_t> far_sizes_for(int element_bytes) {
  const std::int64_t per_vector = 16 / element_bytes;
  const std::int64_t far = detail::cpu_reduce::kFarVectors;
  return {(far - 1) * per_vector, far * per_vector, far * per_vector + 1, (2 * far + 5) * per_vector - 1,
          (3 * far + 40) * per_vector};
}

/// reduce(cpu.with_threads(t), x + offset, n) for every size (sizes_for by
/// default), thread count and alignment, against the reference.
template <class Out, class T, class Op, class Leaf>
void expect_reduce_matches(const std::vector<T>& data, Op op, const Leaf& leaf, int element_bytes,
                           const options& opts = {}, const std::vector<std::int64_t>& sizes = {}) {
  for (const std::int64_t n : sizes.empty() ? sizes_for(element_bytes) : sizes) {
    for (int offset : {0, 1}) {
      ASSERT_LE(static_cast<std::size_t>(n + offset), data.size());
      const T* x = data.data() + offset;
      const auto root = reference_root<decltype(leaf(x, 0))>(
          n, tree::vector_width<T>, [&](std::int64_t i) { return leaf(x, i); },
          [&](const auto& a, const auto& b) {
            if constexpr (requires { a.error; }) return compensated_plus{}(a, b);
            else return op(a, b);
          });
      Out want;
      if constexpr (requires { Out::index; }) want = root.value;
      else if constexpr (requires { root.value.error; }) want = convert<Out>(compensated_plus::resolve(root.value));
      else want = convert<Out>(root.value);
      for (int threads : kThreadCounts) {
        SCOPED_TRACE("n = " + std::to_string(n) + ", offset " + std::to_string(offset) + ", " +
                     std::to_string(threads) + " threads");
        Out got[3];
        std::memset(static_cast<void*>(got), 0x5a, sizeof got);  // poison, and guards on both sides
        const Out guard = got[0];
        reduce(cpu.with_threads(threads), x, n, &got[1], op, opts);
        ASSERT_TRUE(same_bits(got[1], want)) << "got " << show(got[1]) << ", want " << show(want);
        ASSERT_TRUE(same_bits(got[0], guard) && same_bits(got[2], guard)) << "wrote outside the output";
      }
    }
  }
}

std::int64_t longest(int element_bytes) { return sizes_for(element_bytes).back() + 2; }

TEST(CpuReduceSimd, SumsMatchTheTreeAtEveryThresholdAndThreadCount) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const auto f = kernel_input<float>(rng, longest(4), specials::zeros_and_infinities, false);
  expect_reduce_matches<float>(f, plus{}, [](const float* x, std::int64_t i) { return x[i]; }, 4);
  expect_reduce_matches<float>(f, plus{}, [](const float* x, std::int64_t i) { return compensated<float>{x[i], 0.f}; },
                               4, options{.sum = summation::compensated});
  const auto d = kernel_input<double>(rng, longest(8), specials::all, false);
  expect_reduce_matches<double>(d, maximum{}, [](const double* x, std::int64_t i) { return x[i]; }, 8);
  const auto k = kernel_input<std::int32_t>(rng, longest(4), specials::none, false);
  expect_reduce_matches<std::int32_t>(k, plus{}, [](const std::int32_t* x, std::int64_t i) { return x[i]; }, 4);
  // Finite data too: past a few thousand elements, the infinities of both
  // signs above make every sum NaN, whatever the order.
  const auto g = kernel_input<float>(rng, longest(4), specials::none, false);
  expect_reduce_matches<float>(g, plus{}, [](const float* x, std::int64_t i) { return x[i]; }, 4);
  const auto e = kernel_input<double>(rng, longest(8), specials::none, false);
  expect_reduce_matches<double>(e, plus{}, [](const double* x, std::int64_t i) { return x[i]; }, 8);
}

TEST(CpuReduceSimd, SumsMatchTheTreeAcrossTheFarKernelThreshold) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::vector<std::int64_t> f_sizes = far_sizes_for(4), d_sizes = far_sizes_for(8);
  // No infinities or NaNs: over millions of elements they would make every
  // sum NaN, whatever the order.
  const auto f = kernel_input<float>(rng, static_cast<std::size_t>(f_sizes.back() + 2), specials::none, false);
  expect_reduce_matches<float>(f, plus{}, [](const float* x, std::int64_t i) { return x[i]; }, 4, {}, f_sizes);
  expect_reduce_matches<float>(f, plus{}, [](const float* x, std::int64_t i) { return compensated<float>{x[i], 0.f}; },
                               4, options{.sum = summation::compensated}, f_sizes);
  const auto d = kernel_input<double>(rng, static_cast<std::size_t>(d_sizes.back() + 2), specials::none, false);
  expect_reduce_matches<double>(d, plus{}, [](const double* x, std::int64_t i) { return x[i]; }, 8, {}, d_sizes);
  expect_reduce_matches<double>(d, minimum{}, [](const double* x, std::int64_t i) { return x[i]; }, 8, {}, d_sizes);
  expect_reduce_matches<double>(
      d, plus{}, [](const double* x, std::int64_t i) { return compensated<double>{x[i], 0.0}; }, 8,
      options{.sum = summation::compensated}, d_sizes);
}

/// Compensated sums through reduce(), 1 and 2 threads, for n = 2^k − 1, 2^k
/// and 2^k + 1 (k = 0 ... 17: every SIMD subtree size, tiles and the threaded
/// split), against the scalar tree.
template <class T>
void expect_compensated_sums_around_powers_of_two() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  constexpr int kMaxLog = 17;
  const options compensated_sum{.sum = summation::compensated};
  for (const compensated_data kind : kCompensatedData) {
    const std::vector<T> xs = compensated_input<T>(rng, (std::size_t{1} << kMaxLog) + 2, kind);
    for (int k = 0; k <= kMaxLog; ++k) {
      for (std::int64_t d : {-1, 0, 1}) {
        const std::int64_t n = (std::int64_t{1} << k) + d;
        if (n <= 0) continue;
        for (int offset : {0, 1}) {
          const T* x = xs.data() + offset;
          const auto root = reference_root<compensated<T>>(
              n, tree::vector_width<T>,
              [&](std::int64_t i) {
                return compensated<T>{x[i], T(0)};
              },
              compensated_plus{});
          const T want = compensated_plus::resolve(root.value);
          for (int threads : {1, 2}) {
            SCOPED_TRACE("data kind " + std::to_string(static_cast<int>(kind)) + ", n = " + std::to_string(n) +
                         ", offset " + std::to_string(offset) + ", " + std::to_string(threads) + " threads");
            T got;
            reduce(cpu.with_threads(threads), x, n, &got, plus{}, compensated_sum);
            ASSERT_TRUE(same_bits(got, want)) << "got " << show(got) << ", want " << show(want);
          }
        }
      }
    }
  }
}

TEST(CpuReduceSimd, CompensatedSumsMatchTheTreeAroundEveryPowerOfTwo) {
  expect_compensated_sums_around_powers_of_two<float>();
  expect_compensated_sums_around_powers_of_two<double>();
}

TEST(CpuReduceSimd, GenericPathsMatchTheTreeAtEveryThresholdAndThreadCount) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  // Non-commutative: 2x2 matrix products (16-byte elements, one per vector).
  const auto m = tt::random_matrices(rng, static_cast<std::size_t>(longest(16)));
  expect_reduce_matches<tt::mat2>(m, tt::matrix_product(),
                                       [](const tt::mat2* x, std::int64_t i) { return x[i]; }, 16);
  // Narrow inputs accumulated in float.
  std::vector<half> h(static_cast<std::size_t>(longest(2)));
  for (auto& v : h) v = convert<half>(rng.real(-1, 1));
  expect_reduce_matches<half>(h, plus{}, [](const half* x, std::int64_t i) { return convert<float>(x[i]); }, 2);
  // The first index of the minimum, with NaNs and ties.
  auto a = kernel_input<float>(rng, static_cast<std::size_t>(longest(4)), specials::all, false);
  for (std::size_t i = 0; i < a.size(); i += 7) a[i] = 0.25f;
  expect_reduce_matches<value_index<float>>(
      a, arg_min{}, [](const float* x, std::int64_t i) { return value_index<float>{x[i], i}; }, 4);
  // Complex sums.
  std::vector<complex<double>> c(static_cast<std::size_t>(longest(16)));
  for (auto& v : c) v = complex<double>(rng.real(-1, 1), rng.real(-1, 1));
  expect_reduce_matches<complex<double>>(
      c, plus{}, [](const complex<double>* x, std::int64_t i) { return x[i]; }, 16);
}

}  // namespace
