// index_add's ordered sums (index_add_sums::ordered) on both backends: each
// reached element is out + the tree of its rows' pieces, rounded once, where
// the rows of an index, in row order, are cut at every multiple of 256 of
// their positions among all rows sorted by (index, row), each piece is summed
// left to right in float (double for double), and the pieces are combined by
// the balanced tree over the padded power of two. The reference below is
// written from that definition alone (its own sort, its own recursive tree);
// the values span many exponents, so any other order or cut shows in the bits.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "test_index_add_support.hpp"

namespace tally::testing {
namespace {

template <class Side>
class IndexAddOrdered : public on_backend<Side> {};
TYPED_TEST_SUITE(IndexAddOrdered, backends, backend_names);

/// The accumulator of the definition: float, double for double.
template <class V>
using acc_of = std::conditional_t<std::is_same_v<V, double>, double, float>;

/// The balanced tree over x, padded to a power of two with empty leaves.
template <class A>
A tree_of(const std::vector<A>& x) {
  std::size_t padded = 1;
  while (padded < x.size()) padded *= 2;
  std::function<std::optional<A>(std::size_t, std::size_t)> node = [&](std::size_t first, std::size_t size) {
    if (first >= x.size()) return std::optional<A>{};
    if (size == 1) return std::optional<A>{x[first]};
    const std::optional<A> left = node(first, size / 2), right = node(first + size / 2, size / 2);
    return right ? std::optional<A>{*left + *right} : left;
  };
  return *node(0, padded);
}

/// out as ordered sums must leave it (see the top of this file).
template <class I, class V>
std::vector<V> ordered_reference(row_case<I, V>& c) {
  using A = acc_of<V>;
  constexpr std::int64_t kPiece = 256;
  std::vector<std::vector<std::int64_t>> rows_of(static_cast<std::size_t>(c.out_rows));
  for (std::int64_t i = 0; i < c.rows; ++i) {
    const auto k = static_cast<std::int64_t>(c.index[static_cast<std::size_t>(i)]);
    if (k >= 0 && k < c.out_rows) rows_of[static_cast<std::size_t>(k)].push_back(i);
  }
  std::vector<V> out = c.out;
  std::int64_t position = 0;  // of the index's first row among all rows sorted by (index, row)
  for (std::int64_t k = 0; k < c.out_rows; ++k) {
    const std::vector<std::int64_t>& rows = rows_of[static_cast<std::size_t>(k)];
    if (rows.empty()) continue;
    for (std::int64_t j = 0; j < c.cols; ++j) {
      std::vector<A> pieces;
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const A v = static_cast<A>(to_long_double(c.at(rows[r], j)));  // exact: V widens to A
        if (r == 0 || (position + static_cast<std::int64_t>(r)) % kPiece == 0) pieces.push_back(v);
        else pieces.back() = pieces.back() + v;
      }
      V& o = out[static_cast<std::size_t>(k * c.out_stride + j)];
      const A sum = static_cast<A>(to_long_double(o)) + tree_of(pieces);
      o = std::isfinite(sum) ? exactly<V>(round_to<V>(sum)) : convert<V>(sum);
    }
    position += static_cast<std::int64_t>(rows.size());
  }
  return out;
}

/// Largest exponent that keeps half's sums of a few thousand rows in range.
template <class V>
constexpr int top_exponent() {
  return std::is_same_v<V, half> ? 2 : 16;
}

/// Equal bits, except that a NaN may be any NaN (NaN payloads differ between
/// the CPU's and the GPU's arithmetic).
template <class V>
::testing::AssertionResult same_sums(const std::vector<V>& got, const std::vector<V>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t e = 0; e < got.size(); ++e) {
    const long double g = to_long_double(got[e]), w = to_long_double(want[e]);
    if (std::isnan(w) ? !std::isnan(g) : std::memcmp(&got[e], &want[e], sizeof(V)) != 0)
      return ::testing::AssertionFailure() << "element " << e << ": " << static_cast<double>(g) << ", want "
                                           << static_cast<double>(w);
  }
  return ::testing::AssertionSuccess();
}

index_add_options ordered_options() {
  index_add_options o;
  o.deterministic = true;
  o.deterministic_sums = index_add_sums::ordered;
  return o;
}

template <class Side, class I, class V>
void check_ordered_sums() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 5000;
  for (const std::int64_t out_rows : {std::int64_t{7}, std::int64_t{20000}}) {
    for (const std::int64_t cols : {std::int64_t{1}, std::int64_t{5}, std::int64_t{8}, std::int64_t{33},
                                    std::int64_t{128}}) {
      const int layout = static_cast<int>(cols % 2);  // odd widths: strides and an unaligned src
      const keys pattern = cols == 8 ? keys::uniform : cols == 33 ? keys::all_on_one : keys::half_on_one;
      row_case<I, V> c(rows, cols, out_rows, layout ? 2 : 0, layout ? 3 : 0, layout);
      c.index = make_index<I>(rng, rows, out_rows, pattern);
      c.fill([&] { return scaled_value<V>(rng, -10, top_exponent<V>()); });
      const auto want = ordered_reference(c);
      device_case<I, V> d(Side::on_gpu, c);
      for (const int grid : {0, 1, 7, 300}) {
        SCOPED_TRACE(c.describe() + ", " + to_string(pattern) + ", grid " + std::to_string(grid));
        index_add_options opts = ordered_options();
        opts.grid_blocks = grid;
        histogram_strategy chosen = histogram_strategy::automatic;
        opts.chosen = &chosen;
        const auto got = run_and_read<Side>(d, c, plus{}, opts);
        EXPECT_TRUE(same_sums(got, want));
        if (Side::on_gpu) EXPECT_EQ(chosen, histogram_strategy::sorted_rows);
      }
    }
  }
}

TYPED_TEST(IndexAddOrdered, SumsAreTheTreeOfTheRowOrderPieces) {
  check_ordered_sums<TypeParam, std::int32_t, float>();
  check_ordered_sums<TypeParam, std::int64_t, float>();
  check_ordered_sums<TypeParam, std::int64_t, double>();
  check_ordered_sums<TypeParam, std::int32_t, half>();
  check_ordered_sums<TypeParam, std::int32_t, bfloat16>();
}

/// Indices whose rows span more than 1024 pieces (the GPU folds those in
/// two passes), beside short runs, rows out of range (skipped in unchecked
/// mode, never counted in the positions) and, on the long run, NaN and ±inf
/// in some columns: no error, and they propagate as in any float sum.
template <class Side, class V>
void check_long_runs() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t rows = 300000, cols = 3, out_rows = 6;
  row_case<std::int64_t, V> c(rows, cols, out_rows, 0, 0, 0);
  c.index.resize(static_cast<std::size_t>(rows));
  for (auto& k : c.index) {
    const std::int64_t draw = rng.integer(0, 99);
    k = draw < 95 ? 2 : draw < 98 ? rng.integer(0, out_rows - 1) : (draw == 98 ? -1 : out_rows);
  }
  c.fill([&] { return scaled_value<V>(rng, -10, 12); });
  // On rows of index 2: NaN in column 1 of one row, +inf in column 2 of one.
  std::int64_t marked = 0;
  for (std::int64_t i = rows / 2; i < rows && marked < 2; ++i)
    if (c.index[static_cast<std::size_t>(i)] == 2) {
      c.at(i, marked + 1) = convert<V>(marked == 0 ? std::numeric_limits<float>::quiet_NaN()
                                                   : std::numeric_limits<float>::infinity());
      ++marked;
    }
  const auto want = ordered_reference(c);
  EXPECT_TRUE(std::isnan(to_long_double(want[2 * cols + 1])));
  EXPECT_TRUE(std::isinf(to_long_double(want[2 * cols + 2])));
  device_case<std::int64_t, V> d(Side::on_gpu, c);
  index_add_options opts = ordered_options();
  opts.checks = check_mode::unchecked;
  EXPECT_TRUE(same_sums(run_and_read<Side>(d, c, plus{}, opts), want));
}

TYPED_TEST(IndexAddOrdered, LongRunsNaNAndInfinity) {
  check_long_runs<TypeParam, float>();
  check_long_runs<TypeParam, double>();
  check_long_runs<TypeParam, bfloat16>();
}

/// Runs at the edges of the GPU's two finishing passes, in sorted positions:
/// one that starts at a task boundary and spans exactly 1024 pieces (the
/// first pass alone), 1025 (the second pass, two subtrees), 2049 (three, the
/// last of one leaf), one that starts mid-task, and one ending at a task end;
/// rows shuffled, rows out of range among them (never counted in the
/// positions). Checked mode: the rows in range are all applied, then the
/// first bad row is reported.
template <class Side>
void check_runs_at_the_pass_edges() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  constexpr std::int64_t P = 256;
  // Rows of keys 0..4 (sorted positions: key 1 starts at 3·P, key 2 at 1027·P, ...).
  const std::int64_t lengths[] = {3 * P, 1024 * P, 1024 * P + 1, 2048 * P + 10, 3 * P - 11};
  const std::int64_t bad = 37, out_rows = 6, cols = 2;
  std::vector<std::int64_t> keys;
  for (std::int64_t k = 0; k < 5; ++k) keys.insert(keys.end(), static_cast<std::size_t>(lengths[k]), k);
  for (std::int64_t i = 0; i < bad; ++i) keys.push_back(i % 2 ? -1 : out_rows);
  for (std::size_t i = keys.size() - 1; i > 0; --i)
    std::swap(keys[i], keys[static_cast<std::size_t>(rng.integer(0, static_cast<std::int64_t>(i)))]);
  const auto rows = static_cast<std::int64_t>(keys.size());
  row_case<std::int64_t, float> c(rows, cols, out_rows, 0, 0, 0);
  c.index = keys;
  c.fill([&] { return scaled_value<float>(rng, -10, 12); });
  const auto want = ordered_reference(c);
  device_case<std::int64_t, float> d(Side::on_gpu, c);
  std::int64_t first_bad = 0;
  while (c.index[static_cast<std::size_t>(first_bad)] >= 0 && c.index[static_cast<std::size_t>(first_bad)] < out_rows)
    ++first_bad;
  d.reset(c);
  expect_invalid([&] { run_case<Side>(d, c, plus{}, ordered_options()); },
                 {"tally::index_add", "'index'", "[" + std::to_string(first_bad) + "]"});
  const auto got = d.out.read();
  EXPECT_TRUE(d.out.guards_intact());
  EXPECT_TRUE(same_sums(got, want));
}

TYPED_TEST(IndexAddOrdered, RunsAtTheEdgesOfTheFinishingPasses) { check_runs_at_the_pass_edges<TypeParam>(); }

/// deterministic_sums = automatic: ordered where the sort pays (rows of 32
/// bytes or more, 16 MB of src or more) with a derived scale, fixed point
/// otherwise -- the same choice on both backends, so the same bits.
TYPED_TEST(IndexAddOrdered, AutomaticSumsAreOrderedWhereTheSortPays) {
  using S = TypeParam;
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t cols = 128, out_rows = 3000;
  for (const std::int64_t rows : {std::int64_t{33000}, std::int64_t{3000}}) {  // 16.9 MB and 1.5 MB of src
    row_case<std::int32_t, float> c(rows, cols, out_rows, 0, 0, 0);
    c.index = make_index<std::int32_t>(rng, rows, out_rows, keys::half_on_one);
    c.fill([&] { return scaled_value<float>(rng, -10, 16); });
    device_case<std::int32_t, float> d(S::on_gpu, c);
    index_add_options automatic;
    automatic.deterministic = true;
    const auto got = run_and_read<S>(d, c, plus{}, automatic);
    index_add_options fixed = automatic;
    fixed.deterministic_sums = index_add_sums::fixed_point;
    const auto fixed_sums = run_and_read<S>(d, c, plus{}, fixed);
    const bool large = rows * cols * 4 >= (std::int64_t{1} << 24);
    SCOPED_TRACE(c.describe());
    EXPECT_TRUE(same_sums(got, large ? ordered_reference(c) : fixed_sums));
    EXPECT_NE(bits_of(ordered_reference(c)), bits_of(fixed_sums));  // the two differ on these values
    if (large) {  // a given scale means fixed point
      index_add_options given = automatic;
      given.fixed_point_bits = 20;
      index_add_options fixed_given = given;
      fixed_given.deterministic_sums = index_add_sums::fixed_point;
      EXPECT_EQ(bits_of(run_and_read<S>(d, c, plus{}, given)), bits_of(run_and_read<S>(d, c, plus{}, fixed_given)));
    }
  }
}

/// Options ordered sums cannot take are refused before anything is written.
TYPED_TEST(IndexAddOrdered, OptionsOrderedSumsCannotTakeAreRefused) {
  using S = TypeParam;
  random_source rng;
  row_case<std::int32_t, float> c(100, 4, 10, 0, 0, 0);
  c.index = make_index<std::int32_t>(rng, 100, 10, keys::uniform);
  c.fill([&] { return scaled_value<float>(rng, -4, 4); });
  device_case<std::int32_t, float> d(S::on_gpu, c);
  const auto refused = [&](index_add_options opts, std::initializer_list<std::string> words) {
    d.reset(c);
    expect_invalid([&] { run_case<S>(d, c, plus{}, opts); }, words);
    EXPECT_EQ(bits_of(d.out.read()), bits_of(c.out));
  };
  index_add_options scaled = ordered_options();
  scaled.fixed_point_bits = 20;
  refused(scaled, {"tally::index_add", "'options.fixed_point_bits'", "ordered"});
  for (const auto strategy : {histogram_strategy::aggregated_atomics, histogram_strategy::plain_atomics}) {
    index_add_options forced = ordered_options();
    forced.strategy = strategy;
    refused(forced, {"tally::index_add", "'options.strategy'", tally::to_string(strategy), "sorts the rows"});
  }
  index_add_options not_deterministic;
  not_deterministic.deterministic_sums = index_add_sums::ordered;
  refused(not_deterministic, {"tally::index_add", "'options.deterministic_sums'", "options.deterministic"});
  index_add_options extremum = ordered_options();
  d.reset(c);
  expect_invalid([&] { run_case<S>(d, c, maximum{}, extremum); }, {"tally::index_add", "'options.deterministic'"});
}

}  // namespace
}  // namespace tally::testing
