// The Matrix Market writer's fields (real, integer, pattern) and symmetries
// (general, symmetric): round trips through the reader, the lines it writes,
// and the matrices a file of the asked kind cannot hold, refused before the
// file is created.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "random.hpp"
#include "tally/solvers/matrix_market.hpp"
#include "tally/solvers/poisson.hpp"

namespace tally::testing {
namespace {

namespace sv = tally::solvers;

using sv::matrix_market_field;
using sv::matrix_market_symmetry;

std::string written_path(const std::string& name) {
  return ::testing::TempDir() + "tally_mm_write_" + name + "_" + std::to_string(::getpid()) + ".mtx";
}

/// The file's lines up to the first entry: banner, comment, size line.
std::vector<std::string> head_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines(3);
  for (auto& line : lines) std::getline(in, line);
  return lines;
}

/// Writes `a` with `options`, returns the file's head and the matrix read back.
template <class V, class I>
std::pair<std::vector<std::string>, sv::host_csr<V, I>> round_trip(const sv::host_csr<V, I>& a,
                                                                   sv::matrix_market_write_options options,
                                                                   const std::string& name) {
  const std::string path = written_path(name);
  sv::write_matrix_market(path, a.view(), options);
  auto head = head_of(path);
  auto back = sv::to_csr<V, I>(sv::read_matrix_market(path));
  std::remove(path.c_str());
  return {head, back};
}

/// a with random values, equal at (i, j) and (j, i), of every magnitude.
template <class V, class I>
sv::host_csr<V, I> random_symmetric(const sv::host_csr<V, I>& a, random_source& rng) {
  auto out = a;
  std::map<std::pair<std::int64_t, std::int64_t>, V> chosen;
  for (std::int64_t i = 0; i < a.rows; ++i)
    for (auto k = a.offsets[i]; k < a.offsets[i + 1]; ++k) {
      const std::pair<std::int64_t, std::int64_t> key{std::min<std::int64_t>(i, a.columns[k]),
                                                      std::max<std::int64_t>(i, a.columns[k])};
      if (!chosen.count(key)) chosen[key] = static_cast<V>(rng.real(-1e6, 1e6) * std::pow(10.0, rng.integer(-30, 30)));
      out.values[k] = chosen[key];
    }
  return out;
}

template <class V, class I>
void expect_same_matrix(const sv::host_csr<V, I>& want, const sv::host_csr<V, I>& got, const std::string& what) {
  EXPECT_EQ(got.rows, want.rows) << what;
  EXPECT_EQ(got.cols, want.cols) << what;
  EXPECT_EQ(got.offsets, want.offsets) << what;
  EXPECT_EQ(got.columns, want.columns) << what;
  ASSERT_EQ(got.values.size(), want.values.size()) << what;
  EXPECT_EQ(0, std::memcmp(got.values.data(), want.values.data(), want.values.size() * sizeof(V)))
      << what << ": values differ in their bits";
}

// Symmetric real files hold the lower triangle and read back as the whole
// matrix, every value's bits kept; in f32 and f64, 32- and 64-bit indices.
TEST(MatrixMarketWrite, SymmetricRealRoundTripKeepsEveryBit) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto check = [&](auto value_zero, auto index_zero) {
    using V = decltype(value_zero);
    using I = decltype(index_zero);
    const auto a = random_symmetric(sv::poisson3d_27pt<V, I>(4), rng);
    const std::string what = std::string(sizeof(V) == 4 ? "f32" : "f64") + (sizeof(I) == 4 ? " i32" : " i64");
    const auto [head, back] = round_trip(a, {matrix_market_field::real, matrix_market_symmetry::symmetric}, "sym");
    EXPECT_EQ(head[0], "%%MatrixMarket matrix coordinate real symmetric") << what;
    // 64 diagonal entries and half of the 1000 - 64 others.
    EXPECT_EQ(head[2], "64 64 532") << what;
    expect_same_matrix(a, back, what);
  };
  check(float{}, std::int32_t{});
  check(double{}, std::int64_t{});
  check(float{}, std::int64_t{});
  check(double{}, std::int32_t{});
}

// Integer files write integers (to 2^63) and read back equal, general or
// symmetric; pattern files write the structure, which reads back with 1 for
// every value, and a symmetric pattern needs only a symmetric structure.
TEST(MatrixMarketWrite, IntegerAndPatternFilesRoundTrip) {
  auto a = sv::poisson3d_7pt<double, std::int32_t>(3);
  const auto [sym_head, sym_back] =
      round_trip(a, {matrix_market_field::integer, matrix_market_symmetry::symmetric}, "int_sym");
  EXPECT_EQ(sym_head[0], "%%MatrixMarket matrix coordinate integer symmetric");
  expect_same_matrix(a, sym_back, "integer symmetric");

  a.values[0] = -9007199254740992.0;    // -2^53
  a.values[1] = 4611686018427387904.0;  // 2^62
  a.values[2] = -0.0;                   // an integer; reads back as +0
  const auto [gen_head, gen_back] =
      round_trip(a, {matrix_market_field::integer, matrix_market_symmetry::general}, "int_gen");
  EXPECT_EQ(gen_head[0], "%%MatrixMarket matrix coordinate integer general");
  EXPECT_EQ(gen_back.values, a.values);  // -0 == +0
  EXPECT_EQ(gen_back.offsets, a.offsets);

  auto ones = a;
  for (auto& v : ones.values) v = 1.0;
  for (const auto symmetry : {matrix_market_symmetry::general, matrix_market_symmetry::symmetric}) {
    const auto [head, back] = round_trip(a, {matrix_market_field::pattern, symmetry}, "pattern");
    EXPECT_EQ(head[0], std::string("%%MatrixMarket matrix coordinate pattern ") +
                           (symmetry == matrix_market_symmetry::general ? "general" : "symmetric"));
    expect_same_matrix(ones, back, "pattern");
  }
}

// What the asked kind of file cannot hold is invalid_argument naming 'a'
// and the entry, and no file is created.
TEST(MatrixMarketWrite, RefusesWhatTheFileCannotHold) {
  const std::string path = written_path("refused");
  std::remove(path.c_str());
  auto expect_refused = [&](const sv::host_csr<double, std::int32_t>& a, sv::matrix_market_write_options o,
                            const std::string& words) {
    try {
      sv::write_matrix_market(path, a.view(), o);
      ADD_FAILURE() << "no exception for " << words;
    } catch (const tally::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("tally::write_matrix_market: argument 'a' ", 0), 0u) << what;
      EXPECT_NE(what.find(words), std::string::npos) << what;
    }
    EXPECT_FALSE(std::filesystem::exists(path)) << words;
  };
  const sv::matrix_market_write_options symmetric{matrix_market_field::real, matrix_market_symmetry::symmetric};
  const sv::matrix_market_write_options integer{matrix_market_field::integer, matrix_market_symmetry::general};
  const auto base = sv::poisson2d_5pt<double, std::int32_t>(3);  // row 0: columns 0, 1, 3

  auto a = base;
  a.values[1] = -1.5;  // (0, 1) no longer equals (1, 0)
  expect_refused(a, symmetric, "is not symmetric: the entries at (0, 1) and (1, 0) differ");
  a = base;
  a.values[1] = -0.0;  // equal to +0, but not the same bits
  a.values[a.offsets[1]] = 0.0;
  expect_refused(a, symmetric, "values compared bit for bit");
  a = base;
  a.columns[2] = 2;  // (0, 2) stored, (2, 0) not: the structure is not symmetric
  expect_refused(a, {matrix_market_field::pattern, matrix_market_symmetry::symmetric}, "is not symmetric");
  sv::host_csr<double, std::int32_t> wide;
  wide.rows = 1;
  wide.cols = 2;
  wide.offsets = {0, 1};
  wide.columns = {1};
  wide.values = {1.0};
  expect_refused(wide, symmetric, "is 1 x 2: a symmetric file needs a square matrix");

  for (const double v : {2.5, 9223372036854775808.0, std::nan("")}) {
    a = base;
    a.values[4] = v;
    expect_refused(a, integer, "which an integer file cannot hold");
  }
  a = base;
  a.values[4] = 0.25;
  expect_refused(a, integer, "has value 0.25 at (1, 1)");

  a = base;
  a.columns[3] = 9;  // 9 columns: indices 0..8
  expect_refused(a, {}, "1 column indices outside [0, 9)");
}

}  // namespace
}  // namespace tally::testing
