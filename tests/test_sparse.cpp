// Sparse matrices: the Poisson generators' sizes, symmetry and values, the
// matrix-free stencil against the CSR matrix, row by row, bit for bit, the
// operator concept, and the owning container's conversions and views.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "random.hpp"
#include "tally/solvers/operator.hpp"
#include "tally/solvers/poisson.hpp"
#include "tally/solvers/stencil.hpp"

namespace tally::testing {
namespace {

namespace sv = tally::solvers;

// The library's operators model the concept; types that miss a member or
// return the wrong type do not (cg() static_asserts it).
static_assert(sv::linear_operator<sv::csr_view<float, std::int32_t>>);
static_assert(sv::linear_operator<sv::csr_view<double, std::int64_t>>);
static_assert(sv::linear_operator<sv::stencil_operator<float>>);
static_assert(sv::linear_operator<sv::stencil_operator<double>>);
static_assert(!sv::linear_operator<sv::host_csr<float, std::int32_t>>);  // owning: pass its view()
static_assert(!sv::linear_operator<int>);
struct no_diagonal {
  using value_type = float;
  std::int64_t rows = 0, cols = 0;
  template <class Acc, class Vector>
  Acc row_product(std::int64_t, const Vector&) const {
    return Acc(0);
  }
};
static_assert(!sv::linear_operator<no_diagonal>);
struct int_values {
  using value_type = int;
  std::int64_t rows = 0, cols = 0;
  template <class Acc, class Vector>
  Acc row_product(std::int64_t, const Vector&) const {
    return Acc(0);
  }
  int diagonal(std::int64_t) const { return 0; }
};
static_assert(!sv::linear_operator<int_values>);

template <class V, class I>
void expect_symmetric_with_sorted_rows(const sv::host_csr<V, I>& a) {
  std::map<std::pair<std::int64_t, std::int64_t>, V> seen;
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (auto k = a.offsets[i]; k < a.offsets[i + 1]; ++k) {
      if (k > a.offsets[i]) {
        ASSERT_LT(a.columns[k - 1], a.columns[k]) << "row " << i;
      }
      seen[{i, a.columns[k]}] = a.values[k];
    }
  for (const auto& [ij, v] : seen) ASSERT_EQ((seen[{ij.second, ij.first}]), v);
}

TEST(Poisson, SizesMatchHpcg) {
  const auto a = sv::poisson3d_27pt<float, std::int32_t>(31);
  EXPECT_EQ(a.rows, 29791);
  EXPECT_EQ(a.nnz(), 753571);
  // (3g − 2)^3 entries for the 27-point stencil, g^3 + 6 g^2 (g − 1) for 7, g^2 + 4 g (g − 1) for 5.
  for (std::int64_t g : {1, 2, 3, 6}) {
    EXPECT_EQ((sv::poisson3d_27pt<double, std::int64_t>(g).nnz()), (3 * g - 2) * (3 * g - 2) * (3 * g - 2)) << g;
    EXPECT_EQ((sv::poisson3d_7pt<double, std::int32_t>(g).nnz()), g * g * g + 6 * g * g * (g - 1)) << g;
    EXPECT_EQ((sv::poisson2d_5pt<float, std::int32_t>(g).nnz()), g * g + 4 * g * (g - 1)) << g;
  }
}

TEST(Poisson, ValuesAndSymmetry) {
  const auto a = sv::poisson3d_27pt<double, std::int32_t>(4);
  expect_symmetric_with_sorted_rows(a);
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (auto k = a.offsets[i]; k < a.offsets[i + 1]; ++k) ASSERT_EQ(a.values[k], a.columns[k] == i ? 26.0 : -1.0);
  // An interior point has all 26 neighbours: its row sums to 0.
  const std::int64_t center = (1 * 4 + 1) * 4 + 1;
  EXPECT_EQ(a.offsets[center + 1] - a.offsets[center], 27);
  expect_symmetric_with_sorted_rows(sv::poisson3d_7pt<float, std::int32_t>(5));
  expect_symmetric_with_sorted_rows(sv::poisson2d_5pt<float, std::int64_t>(6));
  EXPECT_EQ((sv::poisson2d_5pt<float, std::int64_t>(6).view().diagonal(7)), 4.0f);
}

TEST(Poisson, BadSizesAreRejected) {
  EXPECT_THROW((sv::poisson3d_27pt<float, std::int32_t>(0)), tally::invalid_argument);
  EXPECT_THROW((sv::poisson3d_27pt<float, std::int32_t>(2000)), tally::invalid_argument);  // > 2^31 entries
  EXPECT_THROW(sv::stencil_operator<float>::make(4, 9), tally::invalid_argument);
}

// The stencil's rows equal the CSR matrix's rows bit for bit, with products
// rounded on their own in the same order: every face, edge and corner of the
// grid (g = 5 has all of them and inner rows), on values whose sums depend on
// their order (magnitudes from 2^-20 to 2^20, so that most additions round),
// and on zeros: +0 everywhere but −0 at the row's own point, so that every
// term of the row is −0 and the row sums to −0, as a sum started with its
// first term does (one started from +0 would give +0).
TEST(Stencil, RowProductsEqualCsrBitForBit) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (int points : {7, 27})
    for (std::int64_t g : {1, 2, 3, 5})
      for (const bool zeros : {false, true}) {
        const auto a =
            points == 27 ? sv::poisson3d_27pt<float, std::int32_t>(g) : sv::poisson3d_7pt<float, std::int32_t>(g);
        const auto s = sv::stencil_operator<float>::make(g, points);
        auto x = random_values<float>(rng, static_cast<std::size_t>(a.rows), -1, 1);
        for (auto& e : x) e = zeros ? 0.0f : std::ldexp(e, static_cast<int>(rng.integer(-20, 20)));
        auto at = [&](std::int64_t j) { return x[j]; };
        for (std::int64_t i = 0; i < a.rows; ++i) {
          if (zeros) {
            if (i > 0) x[i - 1] = 0.0f;
            x[i] = -0.0f;
          }
          const float want = a.view().row_product(i, at), got = s.row_product(i, at);
          ASSERT_EQ(0, std::memcmp(&want, &got, sizeof want)) << "points " << points << " g " << g << " row " << i;
          const double wd = a.view().row_product<double>(i, at), gd = s.row_product<double>(i, at);
          ASSERT_EQ(0, std::memcmp(&wd, &gd, sizeof wd));
          ASSERT_EQ(a.view().diagonal(i), s.diagonal(i));
        }
      }
}

// row_product sums in stored order: a row whose order matters.
TEST(Csr, RowProductSumsInStoredOrder) {
  sv::host_csr<float, std::int32_t> a;
  a.rows = 1;
  a.cols = 3;
  a.offsets = {0, 3};
  a.columns = {0, 1, 2};
  a.values = {1.0f, 1.0f, 1.0f};
  const std::vector<float> x{1e8f, 1.0f, -1e8f};
  auto at = [&](std::int64_t j) { return x[j]; };
  EXPECT_EQ(a.view().row_product(0, at), 0.0f);  // (1e8 + 1) − 1e8 in float
  a.columns = {0, 2, 1};
  EXPECT_EQ(a.view().row_product(0, at), 1.0f);  // (1e8 − 1e8) + 1
}

/// Expects call() to throw tally::invalid_argument whose message holds `words`.
template <class Call>
void expect_invalid_with(const Call& call, const std::string& words) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one mentioning " << words;
  } catch (const tally::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

// Widening and rounding convert; narrowing that would change an index or
// turn a finite value into infinity is refused, naming it.
TEST(Csr, ConvertRefusesNarrowingThatLosesValues) {
  const auto a = sv::poisson3d_7pt<double, std::int32_t>(3);
  const auto wide = sv::convert_csr<double, std::int64_t>(a);
  EXPECT_EQ(wide.rows, a.rows);
  EXPECT_EQ(wide.cols, a.cols);
  EXPECT_EQ(wide.offsets, std::vector<std::int64_t>(a.offsets.begin(), a.offsets.end()));
  EXPECT_EQ(wide.columns, std::vector<std::int64_t>(a.columns.begin(), a.columns.end()));
  EXPECT_EQ(wide.values, a.values);

  sv::host_csr<double, std::int64_t> big;
  big.rows = 1;
  big.cols = std::int64_t{1} << 32;
  big.offsets = {0, 1};
  big.columns = {std::int64_t{1} << 31};
  big.values = {1.0};
  expect_invalid_with([&] { sv::convert_csr<double, std::int32_t>(big); }, "column index 2147483648");
  big.columns = {5};
  big.offsets = {0, -(std::int64_t{1} << 40)};
  expect_invalid_with([&] { sv::convert_csr<double, std::int32_t>(big); }, "offset -1099511627776");
  big.offsets = {0, 1};
  big.values = {1e300};
  expect_invalid_with([&] { sv::convert_csr<float, std::int64_t>(big); }, "value 1.0000000000000001e+300");
  // Rounding is not a loss the conversion refuses; nor are non-finite values.
  for (const double v : {1.0 / 3.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    big.values = {v};
    const auto f = sv::convert_csr<float, std::int32_t>(big);
    EXPECT_EQ(f.columns, std::vector<std::int32_t>{5});
    EXPECT_TRUE(f.values[0] == static_cast<float>(v) || (std::isnan(v) && std::isnan(f.values[0])));
  }
}

// view() refuses arrays whose lengths disagree with the sizes (a view of
// them would make every reader leave the arrays).
TEST(Csr, ViewRefusesArraysOfTheWrongLength) {
  auto a = sv::poisson2d_5pt<float, std::int32_t>(3);
  a.offsets.pop_back();
  expect_invalid_with([&] { (void)a.view(); }, "holds 9 entries for 9 rows (needs rows + 1)");
  a = sv::poisson2d_5pt<float, std::int32_t>(3);
  a.values.push_back(1.0f);
  expect_invalid_with([&] { (void)a.view(); }, "holds 33 entries but values holds 34");
  a = sv::poisson2d_5pt<float, std::int32_t>(3);
  a.rows = -1;
  expect_invalid_with([&] { (void)a.view(); }, "for -1 rows");
  EXPECT_EQ((sv::poisson2d_5pt<float, std::int32_t>(3).view().nnz), 33);
}

}  // namespace
}  // namespace tally::testing
