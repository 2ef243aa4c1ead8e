// Bad input to scatter_reduce on both backends, with 32- and 64-bit indices:
// rejected arguments are named and leave `out` and its guard zones untouched;
// bad indices found while running are reported after every in-range element
// was applied (the documented rule), on every strategy and in deterministic
// mode, or left in options.errors without throwing (the form that never waits).
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "test_errors_support.hpp"
#include "test_histogram_support.hpp"

namespace tally::testing {
namespace {

template <class Side>
class ScatterErrors : public on_backend<Side> {};
TYPED_TEST_SUITE(ScatterErrors, backends, backend_names);

constexpr std::int64_t kSize = 37;
constexpr std::int64_t kN = 20011;

/// Indices in [0, kSize) with three bad ones; values small integers (every
/// sum exact in double, in any order and in fixed point).
template <class I>
struct scatter_case {
  std::vector<I> index;
  std::vector<double> value, start, expected;
  explicit scatter_case(random_source& rng) : index(kN), value(kN), start(kSize) {
    for (auto& k : index) k = static_cast<I>(rng.integer(0, kSize - 1));
    for (auto& v : value) v = static_cast<double>(rng.integer(-50, 50));
    for (auto& v : start) v = static_cast<double>(rng.integer(-5, 5));
    index[777] = static_cast<I>(kSize);
    index[5000] = static_cast<I>(-3);
    index[15000] = static_cast<I>(sizeof(I) == 8 ? (std::int64_t(1) << 40) : (std::int64_t(1) << 30));
    expected = start;
    for (std::int64_t i = 0; i < kN; ++i)
      if (index[i] >= 0 && index[i] < kSize) expected[static_cast<std::size_t>(index[i])] += value[i];
  }
};

template <class Side, class I>
void check_bad_indices_apply_the_rest() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const scatter_case<I> c(rng);
  guarded<I> index(Side::on_gpu, kN);
  guarded<double> value(Side::on_gpu, kN), out(Side::on_gpu, kSize);
  index.write(c.index);
  value.write(c.value);
  for (const auto& opts : every_mode()) {
    if (Side::on_gpu && !strategy_fits(opts.strategy, kSize, 8)) continue;
    SCOPED_TRACE(describe(opts) + (sizeof(I) == 8 ? " int64 index" : " int32 index"));
    out.write(c.start);
    expect_invalid(
        [&] {
          tally::scatter_reduce(Side::backend(), index.data(), value.data(), kN, out.data(), kSize, tally::plus{},
                                opts);
        },
        {"tally::scatter_reduce", "'index'", "[777]", "= 37"});
    EXPECT_EQ(out.read(), c.expected);
    EXPECT_TRUE(out.guards_intact());
    // The error left nothing behind: the same call on good indices works.
    auto good = c.index;
    good[777] = good[5000] = good[15000] = 0;
    auto want = c.start;
    for (std::int64_t i = 0; i < kN; ++i) want[static_cast<std::size_t>(good[i])] += c.value[i];
    index.write(good);
    out.write(c.start);
    tally::scatter_reduce(Side::backend(), index.data(), value.data(), kN, out.data(), kSize, tally::plus{}, opts);
    EXPECT_EQ(out.read(), want);
    index.write(c.index);
  }
}

TYPED_TEST(ScatterErrors, BadIndicesAreReportedAfterTheOthersWereApplied) {
  check_bad_indices_apply_the_rest<TypeParam, std::int32_t>();
  check_bad_indices_apply_the_rest<TypeParam, std::int64_t>();
}

template <class Side, class I>
void check_errors_record() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const scatter_case<I> c(rng);
  guarded<I> index(Side::on_gpu, kN);
  guarded<double> value(Side::on_gpu, kN), out(Side::on_gpu, kSize);
  guarded<tally::scatter_errors> record(Side::on_gpu, 1);
  index.write(c.index);
  value.write(c.value);
  for (auto opts : every_mode()) {
    if (Side::on_gpu && !strategy_fits(opts.strategy, kSize, 8)) continue;
    SCOPED_TRACE(describe(opts) + (sizeof(I) == 8 ? " int64 index" : " int32 index"));
    opts.errors = record.data();
    out.write(c.start);
    tally::scatter_reduce(Side::backend(), index.data(), value.data(), kN, out.data(), kSize, tally::plus{}, opts);
    EXPECT_EQ(out.read(), c.expected);
    auto seen = record.read()[0];
    EXPECT_EQ(seen.first_bad_index, 777);
    EXPECT_EQ(seen.bad_value, 0);
    EXPECT_TRUE(record.guards_intact());
    EXPECT_TRUE(out.guards_intact());
    // Good data: the record says so (it is overwritten by every call).
    tally::scatter_reduce(Side::backend(), index.data(), value.data(), 777, out.data(), kSize, tally::plus{}, opts);
    seen = record.read()[0];
    EXPECT_EQ(seen.first_bad_index, -1);
    EXPECT_EQ(seen.bad_value, 0);
    if (opts.deterministic) {
      auto values = c.value;
      values[3] = std::nan("");
      value.write(values);
      tally::scatter_reduce(Side::backend(), index.data(), value.data(), 777, out.data(), kSize, tally::plus{}, opts);
      seen = record.read()[0];
      EXPECT_EQ(seen.first_bad_index, -1);
      EXPECT_EQ(seen.bad_value, 1);
      value.write(c.value);
    }
  }
}

TYPED_TEST(ScatterErrors, TheErrorsRecordTakesTheReportInsteadOfAThrow) {
  check_errors_record<TypeParam, std::int32_t>();
  check_errors_record<TypeParam, std::int64_t>();
}

template <class Call>
void expect_rejected(const Call& call, guarded<double>& out, const char* argument, const std::string& context) {
  SCOPED_TRACE(context);
  const auto before = out.bytes();
  expect_invalid(call, {"tally::scatter_reduce", std::string("'") + argument + "'"});
  EXPECT_TRUE(unchanged(out, before));
}

TYPED_TEST(ScatterErrors, EveryBadArgumentIsNamedAndLeavesOutUntouched) {
  using S = TypeParam;
  const auto b = S::backend();
  guarded<std::int32_t> index(S::on_gpu, kN);
  guarded<double> value(S::on_gpu, kN), out(S::on_gpu, kSize);
  index.write(std::vector<std::int32_t>(kN, 3));
  value.write(std::vector<double>(kN, 1.5));
  out.write(std::vector<double>(kSize, 9.0));
  const std::int32_t* i = index.data();
  const double* v = value.data();
  for (const auto& opts : every_mode()) {
    const std::string mode = describe(opts);
    expect_rejected(
        [&] {
          tally::scatter_reduce(b, static_cast<const std::int32_t*>(nullptr), v, kN, out.data(), kSize, tally::plus{},
                                opts);
        },
        out, "index", mode);
    expect_rejected(
        [&] {
          tally::scatter_reduce(b, i, static_cast<const double*>(nullptr), kN, out.data(), kSize, tally::plus{}, opts);
        },
        out, "value", mode);
    expect_rejected(
        [&] { tally::scatter_reduce(b, i, v, kN, static_cast<double*>(nullptr), kSize, tally::plus{}, opts); }, out,
        "out", mode);
    expect_rejected([&] { tally::scatter_reduce(b, i, v, kN, out.data(), -1, tally::plus{}, opts); }, out, "out_size",
                    mode);
    expect_rejected([&] { tally::scatter_reduce(b, i, v, kN, value.data() + 10, kSize, tally::plus{}, opts); }, out,
                    "out", mode);
    tally::histogram_options det = opts;
    det.deterministic = true;
    expect_rejected([&] { tally::scatter_reduce(b, i, v, kN, out.data(), kSize, tally::maximum{}, det); }, out,
                    "options.deterministic", mode);
    det.fixed_point_bits = -5000;
    expect_rejected([&] { tally::scatter_reduce(b, i, v, kN, out.data(), kSize, tally::plus{}, det); }, out,
                    "options.fixed_point_bits", mode);
    tally::histogram_options unchecked = opts;
    unchecked.checks = tally::check_mode::unchecked;
    unchecked.errors = reinterpret_cast<tally::scatter_errors*>(out.data());
    expect_rejected([&] { tally::scatter_reduce(b, i, v, kN, out.data(), kSize, tally::plus{}, unchecked); }, out,
                    "options.errors", mode);
    if (S::on_gpu) {
      std::vector<std::int32_t> host_index(kN, 3);
      std::vector<double> host_value(kN, 1.5), host_out(kSize, 0.0);
      expect_rejected(
          [&] { tally::scatter_reduce(b, host_index.data(), v, kN, out.data(), kSize, tally::plus{}, opts); }, out,
          "index", mode);
      expect_rejected(
          [&] { tally::scatter_reduce(b, i, host_value.data(), kN, out.data(), kSize, tally::plus{}, opts); }, out,
          "value", mode);
      expect_invalid([&] { tally::scatter_reduce(b, i, v, kN, host_out.data(), kSize, tally::plus{}, opts); },
                     {"tally::scatter_reduce", "'out'"});
      EXPECT_EQ(host_out, std::vector<double>(kSize, 0.0));
    }
  }
  // A valid call right after all of that.
  tally::scatter_reduce(b, i, v, kN, out.data(), kSize);
  const auto got = out.read();
  EXPECT_EQ(got[3], 9.0 + 1.5 * kN);
  EXPECT_EQ(got[4], 9.0);
}

}  // namespace
}  // namespace tally::testing
