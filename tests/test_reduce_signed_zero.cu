// Compensated summation keeps the sign of a zero sum as plain summation does
// (a sum of -0.0 values is -0.0), on both backends; NaN results are NaN on
// both (their payloads may differ, as reduce() documents).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends.hpp"

namespace tally::testing {
namespace {

template <class Side>
class SignedZero : public on_backend<Side> {};
TYPED_TEST_SUITE(SignedZero, backends, backend_names);

template <class Side, class T>
void check_negative_zero_sums() {
  for (std::int64_t n : {std::int64_t{1}, std::int64_t{33}, std::int64_t{5000}, std::int64_t{300000}}) {
    buffer<T> x(Side::on_gpu, static_cast<std::size_t>(n));
    x.write(std::vector<T>(static_cast<std::size_t>(n), T(-0.0)));
    for (auto sum : {summation::plain, summation::compensated}) {
      options opts;
      opts.sum = sum;
      buffer<T> out(Side::on_gpu, 1);
      tally::reduce(Side::backend(), static_cast<const T*>(x.data()), n, out.data(), plus{}, opts);
      const T got = out.read()[0];
      EXPECT_EQ(got, T(0)) << "n=" << n;
      EXPECT_TRUE(std::signbit(got)) << "n=" << n << (sum == summation::compensated ? " compensated" : " plain");
    }
  }
}

TYPED_TEST(SignedZero, SumsOfNegativeZeroAreNegativeZero) {
  check_negative_zero_sums<TypeParam, float>();
  check_negative_zero_sums<TypeParam, double>();
}

TYPED_TEST(SignedZero, NaNStaysNaNInEitherSummation) {
  using S = TypeParam;
  const std::int64_t n = 70001;
  std::vector<double> host(static_cast<std::size_t>(n), 1.5);
  host[4321] = std::nan("");
  buffer<double> x(S::on_gpu, host.size());
  x.write(host);
  for (auto sum : {summation::plain, summation::compensated}) {
    options opts;
    opts.sum = sum;
    buffer<double> out(S::on_gpu, 1);
    tally::reduce(S::backend(), static_cast<const double*>(x.data()), n, out.data(), plus{}, opts);
    EXPECT_TRUE(std::isnan(out.read()[0]));
  }
}

}  // namespace
}  // namespace tally::testing
