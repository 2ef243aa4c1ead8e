// Bad arguments: every one throws tally::invalid_argument naming the function
// and the argument, before anything is written to the output.
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "reduce_fixture.hpp"

namespace tally::testing {
namespace {

template <class Side>
class ReduceErrors : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceErrors, backends, backend_names);

/// Expects `out` to still hold the poison it was created with.
template <class T>
void expect_untouched(buffer<T>& out) {
  buffer<T> fresh(false, 1);
  EXPECT_TRUE(same_bits(out.read()[0], fresh.read()[0])) << "the output was written despite the error";
}

TYPED_TEST(ReduceErrors, NullInputWithElements) {
  using S = TypeParam;
  buffer<float> out(S::on_gpu, 1);
  expect_invalid([&] { tally::reduce(S::backend(), static_cast<const float*>(nullptr), 10, out.data()); },
                 {"tally::reduce", "'x'", "null"});
  expect_invalid([&] { (void)tally::sum(S::backend(), static_cast<const double*>(nullptr), 3); },
                 {"tally::reduce", "'x'"});
  expect_untouched(out);
}

TYPED_TEST(ReduceErrors, NegativeCount) {
  using S = TypeParam;
  buffer<float> x(S::on_gpu, 16), out(S::on_gpu, 1);
  expect_invalid([&] { tally::reduce(S::backend(), static_cast<const float*>(x.data()), -1, out.data()); },
                 {"tally::reduce", "'n'", "negative"});
  expect_invalid([&] { tally::squared_norm(S::backend(), static_cast<const float*>(x.data()), -5, out.data()); },
                 {"tally::", "'n'"});
  expect_untouched(out);
}

TYPED_TEST(ReduceErrors, NullOutput) {
  using S = TypeParam;
  buffer<double> x(S::on_gpu, 16);
  expect_invalid(
      [&] { tally::reduce(S::backend(), static_cast<const double*>(x.data()), 16, static_cast<double*>(nullptr)); },
      {"tally::reduce", "'out'", "null"});
  expect_invalid(
      [&] { tally::reduce(S::backend(), static_cast<const double*>(x.data()), 0, static_cast<double*>(nullptr)); },
      {"tally::reduce", "'out'"});
}

TYPED_TEST(ReduceErrors, OutputOverlapsInput) {
  using S = TypeParam;
  buffer<float> x(S::on_gpu, 64);
  expect_invalid([&] { tally::reduce(S::backend(), static_cast<const float*>(x.data()), 64, x.data() + 63); },
                 {"tally::reduce", "'out'", "overlaps"});
  // A wider output whose last bytes reach into the input: out spans x[2..4),
  // the input starts at x[3].
  auto* wide = reinterpret_cast<double*>(x.data() + 2);
  expect_invalid([&] { tally::reduce(S::backend(), static_cast<const float*>(x.data() + 3), 8, wide); },
                 {"tally::reduce", "'out'", "overlaps"});
}

TYPED_TEST(ReduceErrors, OverflowingCount) {
  using S = TypeParam;
  buffer<float> x(S::on_gpu, 16), out(S::on_gpu, 1);
  const float* p = x.data();
  for (std::int64_t n : {std::numeric_limits<std::int64_t>::max(),
                         std::numeric_limits<std::int64_t>::max() / static_cast<std::int64_t>(sizeof(float)) + 1}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    expect_invalid([&] { tally::reduce(S::backend(), p, n, out.data()); }, {"tally::reduce", "'n'", "overflows"});
  }
  expect_untouched(out);
}

TYPED_TEST(ReduceErrors, SecondInputAndOptionsAreChecked) {
  using S = TypeParam;
  buffer<float> x(S::on_gpu, 16), out(S::on_gpu, 1);
  const float* p = x.data();
  expect_invalid([&] { tally::dot(S::backend(), p, static_cast<const float*>(nullptr), 16, out.data()); },
                 {"tally::", "'y'", "null"});
  expect_invalid(
      [&] {
        tally::transform_reduce(S::backend(), p, static_cast<const float*>(nullptr), 16, out.data(),
                                detail::product_transform{}, plus{});
      },
      {"tally::transform_reduce", "'y'"});
  options compensated;
  compensated.sum = summation::compensated;
  expect_invalid([&] { tally::reduce(S::backend(), p, 16, out.data(), maximum{}, compensated); },
                 {"tally::reduce", "'options.sum'"});
  buffer<std::int32_t> ints(S::on_gpu, 16), int_out(S::on_gpu, 1);
  expect_invalid(
      [&] {
        tally::reduce(S::backend(), static_cast<const std::int32_t*>(ints.data()), 16, int_out.data(), plus{},
                      compensated);
      },
      {"tally::reduce", "'options.sum'"});
  expect_untouched(out);
}

// GPU only (host memory is what the CPU backend reads): "ReduceHostMemory/gpu.*".
template <class Side>
class ReduceHostMemory : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceHostMemory, gpu_only, backend_names);

TYPED_TEST(ReduceHostMemory, HostPointersAreRejected) {
  using S = TypeParam;
  {
    std::vector<float> host_x(1000, 1.0f);
    void* malloced = std::malloc(1000 * sizeof(float));
    ASSERT_NE(malloced, nullptr);
    auto* host_p = static_cast<float*>(malloced);
    buffer<float> x(true, 1000), out(true, 1);
    expect_invalid([&] { tally::reduce(S::backend(), static_cast<const float*>(host_p), 1000, out.data()); },
                   {"tally::reduce", "'x'", "host"});
    expect_invalid([&] { tally::reduce(S::backend(), static_cast<const float*>(x.data()), 1000, host_p); },
                   {"tally::reduce", "'out'", "host"});
    expect_invalid(
        [&] { tally::dot(S::backend(), static_cast<const float*>(x.data()), host_x.data(), 1000, out.data()); },
        {"tally::", "'y'", "host"});
    std::free(malloced);
    expect_untouched(out);
  }
}

}  // namespace
}  // namespace tally::testing
