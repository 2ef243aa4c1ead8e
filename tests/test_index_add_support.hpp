// Helpers of the index_add tests: row-scatter cases (indices, a strided
// source with NaN in its gaps, a poisoned strided output), references in
// long double written here (no library code), and correct rounding to each
// value type for the deterministic mode's reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "backends.hpp"
#include "random.hpp"
#include "tally/cpu/index_add.hpp"
#include "tally/index_add.hpp"
#include "test_errors_support.hpp"
#if defined(__CUDACC__)
#include "tally/cuda/index_add.cuh"
#endif

namespace tally::testing {

/// The strategies of index_add's non-deterministic calls, every one forced
/// and the automatic choice.
inline constexpr histogram_strategy kIndexAddStrategies[] = {
    histogram_strategy::automatic, histogram_strategy::aggregated_atomics, histogram_strategy::plain_atomics,
    histogram_strategy::sorted_rows};

template <class V>
long double to_long_double(const V& v) {
  return static_cast<long double>(convert<double>(v));
}

/// Significand bits (with the implicit one) and the smallest normal exponent of V.
template <class V>
constexpr int significand_bits() {
  if constexpr (std::is_same_v<V, bfloat16>) return 8;
  else if constexpr (std::is_same_v<V, half>) return 11;
  else if constexpr (std::is_same_v<V, float>) return 24;
  else return 53;
}
template <class V>
constexpr int min_normal_exponent() {  // 2^e is the smallest normal
  if constexpr (std::is_same_v<V, half>) return -14;
  else if constexpr (std::is_same_v<V, double>) return -1022;
  else return -126;  // float, bfloat16
}

/// x rounded to nearest (ties to even) to V's precision and range (normal
/// and subnormal; no overflow handling: callers stay in range), as a long
/// double. Written here from frexp and nearbyint, independent of the
/// conversions of CUDA's types.
template <class V>
long double round_to(long double x) {
  if (x == 0 || !std::isfinite(x)) return x;
  int e = 0;
  (void)std::frexp(x, &e);  // x = m·2^e, 0.5 <= |m| < 1
  // The unit of the last place: 2^(e - p), but never below the subnormal unit.
  const int unit = std::max(e - significand_bits<V>(), min_normal_exponent<V>() - significand_bits<V>() + 1);
  return std::ldexp(std::nearbyint(std::ldexp(x, -unit)), unit);
}

/// The V holding x (x representable in V).
template <class V>
V exactly(long double x) {
  if constexpr (std::is_same_v<V, double>) return static_cast<double>(x);
  else return convert<V>(static_cast<float>(x));  // representable in float too: exact
}

/// Random values v·2^k, v uniform in (−1, 1), k in [lo, hi], as V: float
/// sums of them depend on the order of the additions.
template <class V>
V scaled_value(random_source& rng, int lo, int hi) {
  return convert<V>(std::ldexp(static_cast<double>(random_value<float>(rng)), static_cast<int>(rng.integer(lo, hi))));
}

/// The bits of a vector of V, for bitwise comparisons.
template <class V>
std::vector<unsigned char> bits_of(const std::vector<V>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(V));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

/// Index patterns: keys spread uniformly, half of them on one key, all on one key.
enum class keys { uniform, half_on_one, all_on_one };
inline const char* to_string(keys k) {
  return k == keys::uniform ? "uniform keys" : k == keys::half_on_one ? "50% on one key" : "all on one key";
}

template <class I>
std::vector<I> make_index(random_source& rng, std::int64_t rows, std::int64_t out_rows, keys pattern) {
  std::vector<I> index(static_cast<std::size_t>(rows));
  const std::int64_t hot = rng.integer(0, out_rows - 1);
  for (auto& k : index) {
    const bool on_hot = pattern == keys::all_on_one || (pattern == keys::half_on_one && rng.integer(0, 1) == 0);
    k = static_cast<I>(on_hot ? hot : rng.integer(0, out_rows - 1));
  }
  return index;
}

/// The poison pattern of guarded buffers (0xA5 bytes) as a V.
template <class V>
V poison() {
  V v;
  std::memset(static_cast<void*>(&v), 0xA5, sizeof(V));
  return v;
}

/// One row scatter on the host: the index, src (rows of src_stride, NaN in
/// the gaps so that a read of a gap shows), out's starting values (rows of
/// out_stride, the gaps poisoned), and where src starts in its buffer
/// (shift 1: not 16-byte aligned).
template <class I, class V>
struct row_case {
  std::int64_t rows = 0, cols = 0, out_rows = 0, src_stride = 0, out_stride = 0, shift = 0;
  std::vector<I> index;
  std::vector<V> src;  // rows · src_stride (at least one element)
  std::vector<V> out;  // out_rows · out_stride

  row_case(std::int64_t rows_, std::int64_t cols_, std::int64_t out_rows_, std::int64_t src_gap, std::int64_t out_gap,
           std::int64_t shift_)
      : rows(rows_),
        cols(cols_),
        out_rows(out_rows_),
        src_stride(cols_ + src_gap),
        out_stride(cols_ + out_gap),
        shift(shift_),
        src(static_cast<std::size_t>(std::max<std::int64_t>(1, rows_ * (cols_ + src_gap))),
            convert<V>(std::numeric_limits<float>::quiet_NaN())),
        out(static_cast<std::size_t>(out_rows_ * (cols_ + out_gap)), poison<V>()) {}

  V& at(std::int64_t i, std::int64_t j) { return src[static_cast<std::size_t>(i * src_stride + j)]; }
  V& out_at(std::int64_t k, std::int64_t j) { return out[static_cast<std::size_t>(k * out_stride + j)]; }

  /// Fills src and out's columns with f(), gaps left as they are.
  template <class F>
  void fill(F f) {
    for (std::int64_t i = 0; i < rows; ++i)
      for (std::int64_t j = 0; j < cols; ++j) at(i, j) = f();
    for (std::int64_t k = 0; k < out_rows; ++k)
      for (std::int64_t j = 0; j < cols; ++j) out_at(k, j) = f();
  }

  /// The options carrying the strides (0 when they equal cols: the default).
  index_add_options options() const {
    index_add_options o;
    o.src_stride = src_stride == cols ? 0 : src_stride;
    o.out_stride = out_stride == cols ? 0 : out_stride;
    return o;
  }

  std::string describe() const {
    return "rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + " out_rows=" + std::to_string(out_rows) +
           " src_stride=" + std::to_string(src_stride) + " out_stride=" + std::to_string(out_stride) +
           (shift ? " (src unaligned)" : "");
  }
};

/// The case's arrays in the backend's memory, guarded before and after;
/// src starts `shift` elements into its buffer.
template <class I, class V>
struct device_case {
  guarded<I> index;
  guarded<V> src;
  guarded<V> out;
  std::int64_t shift;

  device_case(bool on_gpu, const row_case<I, V>& c)
      : index(on_gpu, std::max<std::size_t>(1, c.index.size())),
        src(on_gpu, c.src.size() + 1),
        out(on_gpu, std::max<std::size_t>(1, c.out.size())),
        shift(c.shift) {
    if (!c.index.empty()) {
      std::vector<I> all = c.index;
      index.write(all);
    }
    std::vector<V> shifted(c.src.size() + 1, poison<V>());
    std::copy(c.src.begin(), c.src.end(), shifted.begin() + shift);
    src.write(shifted);
    reset(c);
  }
  void reset(const row_case<I, V>& c) {
    if (!c.out.empty()) out.write(c.out);
  }
  const I* index_data() { return index.data(); }
  const V* src_data() { return src.data() + shift; }
  V* out_data() { return out.data(); }
};

/// Runs index_add on the case's device copy.
template <class Side, class I, class V, class Op = plus>
void run_case(device_case<I, V>& d, const row_case<I, V>& c, Op op = {}, index_add_options opts = {}) {
  const index_add_options strides = c.options();
  opts.src_stride = strides.src_stride;
  opts.out_stride = strides.out_stride;
  tally::index_add(Side::backend(), d.index_data(), d.src_data(), c.rows, c.cols, d.out_data(), c.out_rows, op, opts);
}

/// Calls f(e, v) for every value v of a row whose index lies in [0, out_rows),
/// e being the out element it lands on (rows in order, then columns).
template <class I, class V, class F>
void for_each_landing(row_case<I, V>& c, const F& f) {
  for (std::int64_t i = 0; i < c.rows; ++i) {
    const auto k = static_cast<std::int64_t>(c.index[static_cast<std::size_t>(i)]);
    if (k < 0 || k >= c.out_rows) continue;
    for (std::int64_t j = 0; j < c.cols; ++j)
      f(static_cast<std::size_t>(k * c.out_stride + j), to_long_double(c.at(i, j)));
  }
}

/// What index_add must leave in out: each reached element combined in long
/// double with its rows (plus: the sum; minimum/maximum: NaN if any is NaN,
/// else the extremum); unreached elements and gaps as they were. Also the
/// number of rows and Σ|value| per element, for error bounds.
template <class I, class V, class Op>
struct reference {
  std::vector<long double> value;  // out_rows · out_stride
  std::vector<long double> magnitude;
  std::vector<std::int64_t> count;
  std::vector<bool> reached;

  explicit reference(row_case<I, V>& c, Op = {}) {
    const auto n = c.out.size();
    value.resize(n);
    magnitude.resize(n);
    count.assign(n, 0);
    reached.assign(n, false);
    for (std::size_t e = 0; e < n; ++e) {
      value[e] = to_long_double(c.out[e]);
      magnitude[e] = std::fabs(value[e]);
    }
    for_each_landing(c, [&](std::size_t e, long double v) {
      reached[e] = true;
      ++count[e];
      magnitude[e] += std::fabs(v);
      if constexpr (std::is_same_v<Op, plus>) {
        value[e] += v;
      } else {
        long double& r = value[e];
        if (std::isnan(r) || std::isnan(v)) r = std::numeric_limits<long double>::quiet_NaN();
        else if constexpr (std::is_same_v<Op, minimum>) r = std::min(r, v);
        else r = std::max(r, v);
      }
    });
  }
};

/// Every gap between out's rows still holds the poison (bytes 0xA5).
template <class I, class V>
::testing::AssertionResult gaps_intact(const row_case<I, V>& c, const std::vector<V>& got) {
  const V p = poison<V>();
  for (std::int64_t k = 0; k < c.out_rows; ++k)
    for (std::int64_t j = c.cols; j < c.out_stride; ++j)
      if (std::memcmp(&got[static_cast<std::size_t>(k * c.out_stride + j)], &p, sizeof(V)) != 0)
        return ::testing::AssertionFailure() << "gap element (" << k << ", " << j << ") of out was written";
  return ::testing::AssertionSuccess();
}

/// Elements no row reaches are bit for bit what they were.
template <class I, class V, class Op>
::testing::AssertionResult unreached_intact(const row_case<I, V>& c, const reference<I, V, Op>& ref,
                                            const std::vector<V>& got) {
  for (std::size_t e = 0; e < got.size(); ++e)
    if (!ref.reached[e] && std::memcmp(&got[e], &c.out[e], sizeof(V)) != 0)
      return ::testing::AssertionFailure() << "out element " << e << ", reached by no row, changed";
  return ::testing::AssertionSuccess();
}

/// Resets d's output to the case's, runs the case on it, and returns the
/// output read back, having checked that the guards around it and the gaps
/// between its rows are intact.
template <class Side, class I, class V, class Op>
std::vector<V> run_and_read(device_case<I, V>& d, const row_case<I, V>& c, Op op, const index_add_options& opts) {
  d.reset(c);
  run_case<Side>(d, c, op, opts);
  std::vector<V> got = d.out.read();
  EXPECT_TRUE(d.out.guards_intact());
  EXPECT_TRUE(gaps_intact(c, got));
  return got;
}

}  // namespace tally::testing
