// The Matrix Market reader and writer: the formats it accepts, round trips
// that keep every bit, and each kind of malformed file reported with its
// file name and line number.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
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

struct entry {
  std::int64_t i, j;
  double v;
};
std::vector<entry> entries_of(const sv::coordinate_matrix& m) {
  std::vector<entry> out;
  for (std::size_t k = 0; k < m.value.size(); ++k) out.push_back({m.row[k], m.col[k], m.value[k]});
  return out;
}

TEST(MatrixMarket, ReadsGeneralRealWithCommentsAndBlankLines) {
  const auto m = sv::parse_matrix_market(
      "%%MatrixMarket matrix coordinate real general\n% a comment\n\n  % indented comment\n3 4 3\n1 1 2.5\n"
      "3 4 -1e-3\n\n2 2 +7\n",
      "t.mtx");
  EXPECT_EQ(m.rows, 3);
  EXPECT_EQ(m.cols, 4);
  const auto e = entries_of(m);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].i, 0);
  EXPECT_EQ(e[0].j, 0);
  EXPECT_EQ(e[0].v, 2.5);
  EXPECT_EQ(e[1].i, 2);
  EXPECT_EQ(e[1].j, 3);
  EXPECT_EQ(e[1].v, -1e-3);
  EXPECT_EQ(e[2].i, 1);
  EXPECT_EQ(e[2].j, 1);
  EXPECT_EQ(e[2].v, 7.0);
}

TEST(MatrixMarket, ExpandsSymmetricFiles) {
  const auto m = sv::parse_matrix_market(
      "%%MatrixMarket matrix coordinate real symmetric\n3 3 3\n1 1 4\n3 1 -2\n2 2 5\n", "s.mtx");
  const auto a = sv::to_csr<double, std::int32_t>(m);
  EXPECT_EQ(a.nnz(), 4);
  EXPECT_EQ(a.offsets, (std::vector<std::int32_t>{0, 2, 3, 4}));
  EXPECT_EQ(a.columns, (std::vector<std::int32_t>{0, 2, 1, 0}));
  EXPECT_EQ(a.values, (std::vector<double>{4, -2, 5, -2}));
}

TEST(MatrixMarket, ReadsPatternIntegerAndArrayFiles) {
  const auto p = sv::parse_matrix_market("%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 2\n2 1\n", "p");
  EXPECT_EQ(p.value, (std::vector<double>{1, 1}));
  const auto i = sv::parse_matrix_market("%%matrixmarket MATRIX Coordinate Integer General\n2 3 1\n2 3 -42\n", "i");
  EXPECT_EQ(i.value, (std::vector<double>{-42}));
  EXPECT_EQ(i.row[0], 1);
  EXPECT_EQ(i.col[0], 2);
  const auto a = sv::parse_matrix_market("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", "a");
  EXPECT_EQ(a.value, (std::vector<double>{1, 2, 3, 4}));
  EXPECT_EQ(a.row, (std::vector<std::int64_t>{0, 1, 0, 1}));  // column-major
  EXPECT_EQ(a.col, (std::vector<std::int64_t>{0, 0, 1, 1}));
  const auto empty = sv::parse_matrix_market("%%MatrixMarket matrix coordinate real general\n0 0 0\n", "e");
  EXPECT_EQ(empty.rows, 0);
  EXPECT_TRUE(empty.value.empty());
}

TEST(MatrixMarket, CsrKeepsDuplicatesInFileOrderWithinARow) {
  const auto m = sv::parse_matrix_market(
      "%%MatrixMarket matrix coordinate real general\n2 3 4\n2 3 1\n1 2 5\n2 1 2\n2 3 -1\n", "d");
  const auto a = sv::to_csr<float, std::int64_t>(m);
  EXPECT_EQ(a.offsets, (std::vector<std::int64_t>{0, 1, 4}));
  EXPECT_EQ(a.columns, (std::vector<std::int64_t>{1, 0, 2, 2}));
  EXPECT_EQ(a.values, (std::vector<float>{5, 2, 1, -1}));
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "tally_mm_" + name + "_" + std::to_string(::getpid()) + ".mtx";
}

// Write then read: the same matrix, every value's bits.
TEST(MatrixMarket, RoundTripKeepsEveryBit) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto check = [&](auto value_zero, auto index_zero) {
    using V = decltype(value_zero);
    using I = decltype(index_zero);
    auto a = sv::poisson3d_7pt<V, I>(5);
    for (auto& v : a.values) v = static_cast<V>(rng.real(-1e6, 1e6) * std::pow(10.0, rng.integer(-30, 30)));
    const std::string path = temp_path(sizeof(V) == 4 ? "f32" : "f64");
    sv::write_matrix_market(path, a.view());
    const auto back = sv::to_csr<V, I>(sv::read_matrix_market(path));
    std::remove(path.c_str());
    EXPECT_EQ(back.rows, a.rows);
    EXPECT_EQ(back.cols, a.cols);
    EXPECT_EQ(back.offsets, a.offsets);
    EXPECT_EQ(back.columns, a.columns);
    ASSERT_EQ(back.values.size(), a.values.size());
    EXPECT_EQ(0, std::memcmp(back.values.data(), a.values.data(), a.values.size() * sizeof(V)));
  };
  check(float{}, std::int32_t{});
  check(double{}, std::int64_t{});
  check(float{}, std::int64_t{});
  check(double{}, std::int32_t{});
}

TEST(MatrixMarket, ReadsVectors) {
  const std::string path = temp_path("vec");
  std::ofstream(path) << "%%MatrixMarket matrix array real general\n3 1\n1.5\n-2\n0.25\n";
  EXPECT_EQ(sv::read_matrix_market_vector(path), (std::vector<double>{1.5, -2, 0.25}));
  std::ofstream(path) << "%%MatrixMarket matrix coordinate real general\n1 4 2\n1 4 3\n1 2 -1\n";
  EXPECT_EQ(sv::read_matrix_market_vector(path), (std::vector<double>{0, -1, 0, 3}));
  std::remove(path.c_str());
}

TEST(MatrixMarket, MissingFileIsAnError) {
  EXPECT_THROW(sv::read_matrix_market("/nonexistent/tally.mtx"), tally::error);
}

// Each malformed file: a matrix_market_error naming the file and the line.
struct malformed {
  const char* what;
  const char* text;
  std::int64_t line;
  const char* words;
};

TEST(MatrixMarket, MalformedFilesNameFileAndLine) {
  const malformed cases[] = {
      {"empty file", "", 1, "empty file"},
      {"no banner", "3 3 1\n1 1 1\n", 1, "bad banner"},
      {"banner object", "%%MatrixMarket vector coordinate real general\n", 1, "object"},
      {"banner format", "%%MatrixMarket matrix dense real general\n", 1, "format"},
      {"banner field", "%%MatrixMarket matrix coordinate complex general\n", 1, "field"},
      {"banner symmetry", "%%MatrixMarket matrix coordinate real hermitian\n", 1, "symmetry"},
      {"banner too short", "%%MatrixMarket matrix coordinate real\n", 1, "bad banner"},
      {"no size line", "%%MatrixMarket matrix coordinate real general\n% only comments\n", 3, "no size line"},
      {"size line fields", "%%MatrixMarket matrix coordinate real general\n3 3\n", 2, "size line"},
      {"size not a number", "%%MatrixMarket matrix coordinate real general\n3 x 1\n", 2, "not an integer"},
      {"negative size", "%%MatrixMarket matrix coordinate real general\n-3 3 1\n", 2, "negative"},
      {"too many entries declared", "%%MatrixMarket matrix coordinate real general\n2 2 5\n", 2, "exceeds"},
      {"symmetric not square", "%%MatrixMarket matrix coordinate real symmetric\n2 3 1\n", 2, "square"},
      {"row out of range", "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n4 1 1\n", 4, "row index 4"},
      {"column zero", "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n2 0 1\n", 4, "column index 0"},
      {"value not a number", "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n%c\n2 2 abc\n", 5,
       "not a number"},
      {"value out of range", "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1e999\n", 3, "out of range"},
      {"index not an integer", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1.5 1 1\n", 3, "not an integer"},
      {"integer value", "%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 2.5\n", 3, "not an integer"},
      {"missing value", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1\n", 3, "expected 3 fields"},
      {"extra field", "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 1 1\n", 3, "expected 2 fields"},
      {"truncated", "%%MatrixMarket matrix coordinate real general\n3 3 3\n1 1 1\n2 2 2\n", 5, "truncated"},
      {"truncated array", "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n", 6, "truncated"},
      {"too many entries", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 1\n2 2 2\n", 4, "more entries"},
      {"upper triangle in symmetric", "%%MatrixMarket matrix coordinate real symmetric\n3 3 1\n1 2 1\n", 3,
       "above the diagonal"},
      {"huge index", "%%MatrixMarket matrix coordinate real general\n3 3 1\n99999999999999999999 1 1\n", 3,
       "out of range"},
      // '+' then '-': not a number (from_chars would read the '-' once the '+' is dropped).
      {"plus-minus index", "%%MatrixMarket matrix coordinate real general\n3 3 1\n+-1 1 1\n", 3,
       "row index '+-1' is not an integer"},
      {"plus-minus value", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 +-2.5\n", 3,
       "value '+-2.5' is not a number"},
      {"plus-minus integer value", "%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 +-5\n", 3,
       "value '+-5' is not an integer"},
      {"plus-minus size", "%%MatrixMarket matrix coordinate real general\n+-3 3 1\n", 2, "not an integer"},
      {"double plus", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 ++2\n", 3, "not a number"},
      {"lone plus", "%%MatrixMarket matrix coordinate real general\n3 3 1\n1 + 2\n", 3,
       "column index '+' is not an integer"},
      // Sizes that would make to_csr or the vector reader allocate for rows no entry fills.
      {"huge empty matrix", "%%MatrixMarket matrix coordinate real general\n2000000000 2000000000 0\n", 2,
       "would hold none"},
      {"huge empty array", "%%MatrixMarket matrix array real general\n0 2000000000\n", 2, "would hold none"},
  };
  for (const auto& c : cases) {
    try {
      sv::parse_matrix_market(c.text, "bad.mtx");
      ADD_FAILURE() << c.what << ": no error";
    } catch (const sv::matrix_market_error& e) {
      const std::string what = e.what();
      EXPECT_EQ(e.line(), c.line) << c.what << ": " << what;
      EXPECT_EQ(what.rfind("bad.mtx:" + std::to_string(c.line) + ": ", 0), 0u) << c.what << ": " << what;
      EXPECT_NE(what.find(c.words), std::string::npos) << c.what << ": " << what;
    }
  }
}

// The bound on rows without entries (kMaxEmptyRows), at its edge: a file may
// leave that many more rows than it lists entries, not one more (symmetric
// files too: their mirrored entries do not count).
TEST(MatrixMarket, EmptyRowsAreBoundedAtTheLimit) {
  const std::int64_t most = sv::kMaxEmptyRows;
  for (const char* symmetry : {"general", "symmetric"}) {
    const auto text = [&](std::int64_t rows) {
      return "%%MatrixMarket matrix coordinate real " + std::string(symmetry) + "\n" + std::to_string(rows) + " " +
             std::to_string(rows) + " 1\n2 1 1\n";
    };
    EXPECT_EQ(sv::parse_matrix_market(text(most + 1), "edge").rows, most + 1) << symmetry;
    try {
      sv::parse_matrix_market(text(most + 2), "over");
      ADD_FAILURE() << symmetry << ": no error";
    } catch (const sv::matrix_market_error& e) {
      EXPECT_EQ(e.line(), 2) << e.what();
      EXPECT_NE(std::string(e.what()).find("would hold none"), std::string::npos) << e.what();
    }
  }
}

// to_csr checks a coordinate_matrix built by hand: lengths, indices, sizes
// for the index type and for memory, values for the value type.
TEST(MatrixMarket, ToCsrChecksAHandBuiltMatrix) {
  auto expect_refused = [](const sv::coordinate_matrix& m, const std::string& words, bool to_float = false) {
    try {
      if (to_float)
        sv::to_csr<float, std::int32_t>(m);
      else
        sv::to_csr<double, std::int32_t>(m);
      ADD_FAILURE() << "no exception for " << words;
    } catch (const tally::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("tally::to_csr: argument 'm' ", 0), 0u) << what;
      EXPECT_NE(what.find(words), std::string::npos) << what;
    }
  };
  sv::coordinate_matrix good;
  good.rows = good.cols = 3;
  good.row = {0, 2, 1};
  good.col = {1, 2, 0};
  good.value = {1.0, 2.0, 3.0};
  const auto a = sv::to_csr<double, std::int32_t>(good);
  EXPECT_EQ(a.offsets, (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(a.columns, (std::vector<std::int32_t>{1, 0, 2}));

  auto m = good;
  m.col.pop_back();
  expect_refused(m, "has 3 row indices, 2 column indices and 3 values");
  m = good;
  m.row[1] = 3;
  expect_refused(m, "has entry 1 at (3, 2), outside its 3 x 3 size");
  m = good;
  m.col[2] = -1;
  expect_refused(m, "has entry 2 at (1, -1), outside");
  m = good;
  m.cols = -3;
  expect_refused(m, "negative size");
  m = good;
  m.rows = std::int64_t{3} << 30;
  expect_refused(m, "more rows, columns or entries than the index type holds");
  m = good;
  m.rows = sv::kMaxEmptyRows + 4;  // 3 entries: one row more than the bound leaves empty
  expect_refused(m, "rows would be empty");
  m.rows = sv::kMaxEmptyRows + 3;
  EXPECT_EQ((sv::to_csr<float, std::int32_t>(m).offsets.size()), static_cast<std::size_t>(sv::kMaxEmptyRows + 4));
  m = good;
  m.value[1] = -1e300;
  expect_refused(m, "has entry 1 of value -1.0000000000000001e+300, which overflows the value type", true);
  EXPECT_EQ((sv::to_csr<double, std::int32_t>(m).values[2]), -1e300);  // fits a double
}

TEST(MatrixMarket, ErrorFromAFileNamesThePath) {
  const std::string path = temp_path("bad");
  std::ofstream(path) << "%%MatrixMarket matrix coordinate real general\n2 2 1\n3 1 1\n";
  try {
    sv::read_matrix_market(path);
    ADD_FAILURE() << "no error";
  } catch (const sv::matrix_market_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ":3: ", 0), 0u) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace tally::testing

namespace tally::testing {
namespace {

// The fuzzer's corpus (fuzz/corpus, kept from libFuzzer runs) replayed: every
// input parses or is a matrix_market_error, never anything else.
TEST(MatrixMarket, FuzzCorpusParsesOrFailsCleanly) {
  const auto corpus = std::filesystem::path(__FILE__).parent_path().parent_path() / "fuzz" / "corpus";
  if (!std::filesystem::exists(corpus)) GTEST_SKIP() << "no corpus at " << corpus;
  int inputs = 0, parsed = 0;
  for (const auto& file : std::filesystem::directory_iterator(corpus)) {
    std::ifstream in(file.path(), std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ++inputs;
    try {
      const auto m = sv::parse_matrix_market(text, file.path().filename().string());
      for (std::size_t k = 0; k < m.value.size(); ++k) {
        ASSERT_TRUE(m.row[k] >= 0 && m.row[k] < m.rows && m.col[k] >= 0 && m.col[k] < m.cols) << file.path();
      }
      ++parsed;
    } catch (const sv::matrix_market_error&) {
    }
  }
  EXPECT_GT(inputs, 100);
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace tally::testing
