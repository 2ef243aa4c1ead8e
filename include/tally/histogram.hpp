// Histograms and scatter-reduce: out[k] ⊕= value for destinations k known
// only at run time. One set of functions; the backend argument (tally::cpu or
// tally::gpu) picks where they run.
//
//   histogram_even(backend, samples, n, bins, lo, hi, counts)        equal-width bins
//   histogram_range(backend, samples, n, levels, num_levels, counts) sorted boundaries
//   histogram_custom(backend, samples, n, bins, bin_of, counts)      user bin function
//   histogram_*_weighted(...)                                        weights instead of 1
//   scatter_reduce(backend, index, value, n, out, out_size, op)      out[index[i]] ⊕= value[i]
//
// On the GPU the strategy is chosen from the bin count, the value size and
// the device (cuda/dispatch/histogram_strategy.hpp): shared-memory bins per
// block (up to ~57K 32-bit bins, ~114K when counting with 16-bit counters),
// bins spread over a Hopper cluster's shared memories (forced only),
// warp-aggregated global atomics under contention, plain global atomics
// otherwise. histogram_options::strategy forces one, and
// histogram_options::chosen reports the one taken.
// Scratch: GPU calls draw it from the workspace (gpu.with(ws), else the
// stream's): the error words, and for counting beyond 32-bit bins in a block
// or deterministic calls one row of bins per block, up to 32 MB (kept by the
// workspace for later calls).
//
// Each backend provides detail::execute_scatter(backend, items, bins, out, op,
// options, function), which performs out[items.key(a[i])] ⊕= items.value(b[i])
// for every i whose key lies in [0, bins).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "tally/core/backend.hpp"
#include "tally/core/error.hpp"
#include "tally/core/operators.hpp"
#include "tally/core/options.hpp"
#include "tally/core/types.hpp"
#include "tally/core/validate.hpp"

namespace tally {

/// How the GPU backend combines updates (the CPU backend ignores it).
enum class histogram_strategy {
  automatic,           ///< chosen from bins, value size, n and the device
  shared_memory,       ///< a private copy of the bins in each block's shared memory
  cluster_memory,      ///< the bins spread over the shared memories of a thread-block cluster
  aggregated_atomics,  ///< warp-aggregated atomics on the output in global memory
  plain_atomics,       ///< one global atomic per element
};

/// The strategy's name as `tally bench` prints it.
constexpr const char* to_string(histogram_strategy s) {
  switch (s) {
    case histogram_strategy::automatic: return "automatic";
    case histogram_strategy::shared_memory: return "shared_memory";
    case histogram_strategy::cluster_memory: return "cluster_memory";
    case histogram_strategy::aggregated_atomics: return "aggregated_atomics";
    case histogram_strategy::plain_atomics: return "plain_atomics";
  }
  return "?";
}

/// Sentinel for histogram_options::fixed_point_bits: derive the scale.
inline constexpr int kDeriveFixedPointScale = std::numeric_limits<int>::min();

/// Options of the histogram and scatter functions.
struct histogram_options : options {
  histogram_strategy strategy = histogram_strategy::automatic;
  /// Where to report the strategy the GPU backend ran (benchmarks, tests).
  histogram_strategy* chosen = nullptr;
  /// Float/double sums in fixed point, so results are bitwise identical run
  /// to run, for any grid and strategy, and on both backends. Each value v is
  /// rounded to q = round(v·2^s) (an int64) and the q are summed exactly as
  /// integers; out[k] receives the sum times 2^-s, rounded once.
  ///   - s derived (the default): s = 61 - e - ceil(log2 n), e the exponent
  ///     of max|v|, so no sum can overflow; every value is kept to about
  ///     61 - ceil(log2 n) bits below the largest (39 bits for n = 10^7).
  ///     Costs one extra read of the values.
  ///   - s given (fixed_point_bits = s, -1022 <= s <= 1023, else
  ///     invalid_argument): one pass; every |v|·2^s must stay below
  ///     2^(62 - ceil(log2 n)) so that no sum can overflow.
  /// A value outside the contract (or NaN/inf) is an error: tally::
  /// invalid_argument naming 'value'. The GPU backend reads an error flag
  /// back to report it, which waits for the stream (checked mode only; in
  /// unchecked mode such values are silently counted as 0).
  bool deterministic = false;
  int fixed_point_bits = kDeriveFixedPointScale;
};

namespace detail {

/// Marks unweighted items: every sample counts one.
struct unit_weight {};

/// Equal-width bins over [lo, hi): bin = floor((x - lo) · bins/(hi - lo)),
/// computed in double on both backends. NaN and samples outside [lo, hi) give -1.
struct even_bins {
  double lo, hi, scale;
  std::int64_t bins;
  template <class T>
  TALLY_HD_INLINE std::int64_t operator()(const T& x) const {
    const double v = convert<double>(x);
    if (!(v >= lo && v < hi)) return -1;
    const auto b = static_cast<std::int64_t>((v - lo) * scale);
    return b < bins ? b : bins - 1;  // (v - lo)·scale may round up to bins
  }
};

/// Bins between sorted boundaries: bin k is [levels[k], levels[k+1]).
/// `levels` lives in the backend's memory.
template <class L>
struct range_bins {
  const L* levels;
  std::int64_t num_levels;
  template <class T>
  TALLY_HD_INLINE std::int64_t operator()(const T& x) const {
    const double v = convert<double>(x);
    if (!(v >= convert<double>(levels[0]) && v < convert<double>(levels[num_levels - 1]))) return -1;
    std::int64_t first = 0, count = num_levels;  // upper_bound
    while (count > 0) {
      const std::int64_t step = count / 2;
      if (!(v < convert<double>(levels[first + step]))) {
        first += step + 1;
        count -= step + 1;
      } else {
        count = step;
      }
    }
    return first - 1;
  }
};

/// A user bin function: bin_of(x) returns the bin, anything outside [0, bins) is ignored.
template <class F>
struct custom_bins {
  F bin_of;
  template <class T>
  TALLY_HD_INLINE std::int64_t operator()(const T& x) const { return static_cast<std::int64_t>(bin_of(x)); }
};

/// scatter_reduce: the key is the index itself.
struct index_key {
  template <class I>
  TALLY_HD_INLINE std::int64_t operator()(const I& i) const { return static_cast<std::int64_t>(i); }
};

/// Values as they are (converted to V).
template <class V>
struct plain_value {
  using type = V;
  template <class B>
  TALLY_HD_INLINE V operator()(const B& b) const {
    if constexpr (std::is_same_v<B, unit_weight>) return V(1);
    else return convert<V>(b);
  }
};

/// 62 - ceil(log2 n): the largest |q| (as a power of two) that n values may
/// each reach without their sum overflowing an int64.
/// A plain loop, not std::countl_zero/bit_width: with nvcc 13 and
/// libstdc++ 12 those fold to constants in device code (bit_width(n) == 0),
/// and this function is also evaluated on the device.
constexpr int fixed_point_headroom_bits(std::int64_t n) {
  int log2n = 0;  // ceil(log2 n)
  while (log2n < 63 && (std::int64_t(1) << log2n) < n) ++log2n;
  return 62 - log2n;
}

/// Scales s for which 2^s is a normal double: v·2^s is then one correctly
/// rounded multiplication (the same on every backend and compiler).
inline constexpr int kMinFixedPointBits = -1022;
inline constexpr int kMaxFixedPointBits = 1023;

/// The derived scale for values whose largest magnitude has exponent `e`
/// (max|v| in [2^e, 2^(e+1))): s = 61 - e - ceil(log2 n), kept within
/// [kMinFixedPointBits, kMaxFixedPointBits] (only data below ~2^-985 lose
/// precision to that bound).
constexpr int derived_fixed_point_bits(int e, std::int64_t n) {
  const int s = fixed_point_headroom_bits(n) - 1 - e;
  return s < kMinFixedPointBits ? kMinFixedPointBits : (s > kMaxFixedPointBits ? kMaxFixedPointBits : s);
}

/// Values rounded to int64 fixed point q = round(v·2^s), with the
/// multiplier 2^s computed once per call (not per value: the quantisation
/// runs once per element and must stay cheaper than the loads). A value
/// whose |q| would reach `limit` = 2^limit_bits (or NaN/inf) gives 0 and
/// raises *bad.
struct fixed_point_value {
  using type = long long;
  double scale;                   ///< 2^s, when scale_on_device is null
  const double* scale_on_device;  ///< 2^s computed on the device (derived scale)
  double limit;                   ///< 2^limit_bits
  unsigned* bad;                  ///< set to 1 on a value outside the contract

  /// The value for scale s (in [kMinFixedPointBits, kMaxFixedPointBits]),
  /// `limit_bits` = fixed_point_headroom_bits(n).
  static fixed_point_value with_bits(int s, int limit_bits, unsigned* bad) {
    return {std::ldexp(1.0, s), nullptr, std::ldexp(1.0, limit_bits), bad};
  }

  template <class B>
  TALLY_HD_INLINE long long operator()(const B& b) const {
    const double scaled = static_cast<double>(b) * (scale_on_device ? *scale_on_device : scale);
    if (!(scaled > -limit && scaled < limit)) {
#if defined(__CUDA_ARCH__)
      atomicOr(bad, 1u);
#else
      __atomic_fetch_or(bad, 1u, __ATOMIC_RELAXED);
#endif
      return 0;
    }
    return static_cast<long long>(std::nearbyint(scaled));
  }
};

/// What an algorithm scatters: element i goes to key(a[i]) with value(b[i])
/// (b is absent, unit_weight, for plain counting).
template <class A, class B, class Key, class Value>
struct scatter_items {
  using first_type = A;
  using second_type = B;
  using value_type = typename Value::type;
  static constexpr bool unit = std::is_same_v<B, unit_weight>;
  /// Out-of-range keys are an error (scatter_reduce, checked) rather than ignored.
  bool report_out_of_range;
  const A* a;
  const B* b;
  std::int64_t n;
  Key key;
  Value value;
};

// Scratch one algorithm call has drawn from its backend, passed down so that
// a call draws it at most once (GPU: growing the workspace frees the old
// block, so a second draw would leave earlier pointers dangling). Null: not
// drawn yet, the callee draws it. The CPU backend ignores it.
using call_scratch = void*;

// Each backend defines this (cpu/histogram.hpp, cuda/histogram.cuh): for every
// i with 0 <= key < bins, out[key] = op(out[key], value); out must hold
// `bins` elements of Out. When items.report_out_of_range and opts.checks is
// checked, the first i with a key outside [0, bins) is reported as
// invalid_argument and nothing is written outside out.
template <class Items, class Out, class Op>
void execute_scatter(const cpu_backend&, const Items&, std::int64_t bins, Out* out, const Op&,
                     const histogram_options&, const char* function, call_scratch scratch);
template <class Items, class Out, class Op>
void execute_scatter(const gpu_backend&, const Items&, std::int64_t bins, Out* out, const Op&,
                     const histogram_options&, const char* function, call_scratch scratch);
// Sets n elements of out to zero in the backend's memory.
template <class Out>
void fill_zero(const cpu_backend&, Out* out, std::int64_t n);
template <class Out>
void fill_zero(const gpu_backend&, Out* out, std::int64_t n);
// A copy of the host levels in the backend's memory for range_bins (the CPU
// backend returns the host pointer itself; the GPU backend copies them into
// scratch, drawing the whole call's scratch at once: see call_scratch).
template <class L>
struct staged_levels {
  const L* levels;
  call_scratch scratch;
};
template <class L>
staged_levels<L> stage_levels(const cpu_backend&, const L* levels, std::int64_t num_levels,
                              const histogram_options&);
template <class L>
staged_levels<L> stage_levels(const gpu_backend&, const L* levels, std::int64_t num_levels,
                              const histogram_options&);

// Deterministic fixed-point scatter-add (histogram_options::deterministic):
// out[key(a[i])] += Σ round(b[i]·2^s)·2^-s, summed exactly in int64.
template <class A, class B, class Key, class V>
void run_deterministic(const cpu_backend&, const A* a, const B* b, std::int64_t n, std::int64_t bins, Key key,
                       V* out, bool report_out_of_range, const histogram_options&, const char* function,
                       call_scratch scratch);
template <class A, class B, class Key, class V>
void run_deterministic(const gpu_backend&, const A* a, const B* b, std::int64_t n, std::int64_t bins, Key key,
                       V* out, bool report_out_of_range, const histogram_options&, const char* function,
                       call_scratch scratch);

/// The error for a value outside the fixed-point contract.
[[noreturn]] inline void throw_fixed_point_range(const char* function, int bits, std::int64_t n) {
  throw_invalid_argument(function, "value",
                         "holds NaN, inf, or a value whose |v|*2^" + std::to_string(bits) + " reaches 2^" +
                             std::to_string(fixed_point_headroom_bits(n)) +
                             " (deterministic mode could overflow; give a smaller fixed_point_bits)");
}

/// Rejects a given fixed-point scale outside [kMinFixedPointBits, kMaxFixedPointBits].
inline void check_fixed_point_bits(const char* function, const histogram_options& opts) {
  const int s = opts.fixed_point_bits;
  if (opts.deterministic && s != kDeriveFixedPointScale && (s < kMinFixedPointBits || s > kMaxFixedPointBits))
    throw_invalid_argument(function, "options.fixed_point_bits",
                           "must lie in [-1022, 1023] (got " + std::to_string(s) + ")");
}

/// The error for a scatter index out of range.
[[noreturn]] inline void throw_bad_index(const char* function, std::int64_t position, long long index,
                                         std::int64_t size) {
  throw_invalid_argument(function, "index",
                         "[" + std::to_string(position) + "] = " + std::to_string(index) +
                             " is outside [0, out_size = " + std::to_string(size) + ")");
}

template <class Count>
constexpr bool is_count_type_v = std::is_same_v<Count, std::int32_t> || std::is_same_v<Count, std::int64_t> ||
                                 std::is_same_v<Count, float> || std::is_same_v<Count, double>;

inline void check_bins(const char* function, std::int64_t bins) {
  if (bins <= 0) throw_invalid_argument(function, "bins", "must be positive (got " + std::to_string(bins) + ")");
}

inline even_bins make_even_bins(const char* function, std::int64_t bins, double lo, double hi) {
  check_bins(function, bins);
  if (!(lo < hi))
    throw_invalid_argument(function, "lo", "must be below hi (lo = " + std::to_string(lo) +
                                               ", hi = " + std::to_string(hi) + ")");
  return {lo, hi, static_cast<double>(bins) / (hi - lo), bins};
}

template <class L>
void check_levels(const char* function, const L* levels, std::int64_t num_levels) {
  if (num_levels < 2)
    throw_invalid_argument(function, "num_levels", "must be at least 2 (got " + std::to_string(num_levels) + ")");
  if (levels == nullptr) throw_invalid_argument(function, "levels", "is null");
  for (std::int64_t k = 0; k + 1 < num_levels; ++k)
    if (!(convert<double>(levels[k]) < convert<double>(levels[k + 1])))
      throw_invalid_argument(function, "levels", "must be strictly increasing (levels[" + std::to_string(k) +
                                                     "] >= levels[" + std::to_string(k + 1) + "], or NaN)");
}

template <class Backend, class A, class B, class Key, class Count>
void run_histogram(const Backend& backend, const A* samples, const B* weights, std::int64_t n, std::int64_t bins,
                   Key key, Count* counts, const histogram_options& opts, const char* function,
                   call_scratch scratch = nullptr) {
  static_assert(is_count_type_v<Count>, "tally histograms count in int32, int64, float or double");
  if constexpr (!std::is_same_v<B, unit_weight>)
    static_assert(std::is_floating_point_v<Count>, "weighted histograms accumulate in float or double");
  if (opts.checks == check_mode::checked) {
    check_array(function, "samples", samples, n);
    if constexpr (!std::is_same_v<B, unit_weight>) check_array(function, "weights", weights, n);
    check_output(function, counts, bins, samples, n);
  }
  fill_zero(backend, counts, bins);
  if (n == 0) return;
  if constexpr (!std::is_same_v<B, unit_weight>) {
    if (opts.deterministic) {
      check_fixed_point_bits(function, opts);
      run_deterministic(backend, samples, weights, n, bins, key, counts, false, opts, function, scratch);
      return;
    }
  }
  scatter_items<A, B, Key, plain_value<Count>> items{false, samples, weights, n, key, {}};
  execute_scatter(backend, items, bins, counts, plus{}, opts, function, scratch);
}

}  // namespace detail

/// counts[k] = number of samples in [lo + k·w, lo + (k+1)·w), w = (hi-lo)/bins.
/// Pre: samples holds n values (float, double, or integers), counts `bins`
/// elements (int32, int64, float or double), both in the backend's memory,
/// not overlapping; bins > 0 and lo < hi (else invalid_argument).
/// Post: counts is overwritten; NaN samples and samples outside [lo, hi) are
/// ignored (as CUB does). On the GPU, queued on the stream without waiting.
/// Float counts are exact below 2^24 per bin.
template <class Backend, class T, class Count>
void histogram_even(const Backend& backend, const T* samples, std::int64_t n, std::int64_t bins, double lo,
                    double hi, Count* counts, const histogram_options& opts = {}) {
  const auto key = detail::make_even_bins("histogram_even", bins, lo, hi);
  detail::run_histogram(backend, samples, static_cast<const detail::unit_weight*>(nullptr), n, bins, key, counts,
                        opts, "histogram_even");
}

/// histogram_even() where sample i adds weights[i] instead of 1.
/// Pre: as histogram_even; weights holds n values; Count is float or double.
/// Post: counts[k] = Σ weights[i] over the samples in bin k (rounding order
/// unspecified unless opts.deterministic).
template <class Backend, class T, class W, class Count>
void histogram_even_weighted(const Backend& backend, const T* samples, const W* weights, std::int64_t n,
                             std::int64_t bins, double lo, double hi, Count* counts,
                             const histogram_options& opts = {}) {
  const auto key = detail::make_even_bins("histogram_even_weighted", bins, lo, hi);
  detail::run_histogram(backend, samples, weights, n, bins, key, counts, opts, "histogram_even_weighted");
}

/// counts[k] = number of samples in [levels[k], levels[k+1]), for
/// k < num_levels - 1. `levels` is HOST memory on both backends (validated
/// there; the GPU backend copies it to scratch in stream order).
/// Pre: levels strictly increasing, num_levels >= 2 (else invalid_argument);
/// samples/counts as histogram_even, counts holds num_levels - 1 elements.
/// Post: counts overwritten; NaN and samples outside [levels[0], levels[last]) ignored.
template <class Backend, class T, class L, class Count>
void histogram_range(const Backend& backend, const T* samples, std::int64_t n, const L* levels,
                     std::int64_t num_levels, Count* counts, const histogram_options& opts = {}) {
  detail::check_levels("histogram_range", levels, num_levels);
  const auto staged = detail::stage_levels(backend, levels, num_levels, opts);
  detail::run_histogram(backend, samples, static_cast<const detail::unit_weight*>(nullptr), n, num_levels - 1,
                        detail::range_bins<L>{staged.levels, num_levels}, counts, opts, "histogram_range",
                        staged.scratch);
}

/// histogram_range() where sample i adds weights[i] (Count float or double).
template <class Backend, class T, class W, class L, class Count>
void histogram_range_weighted(const Backend& backend, const T* samples, const W* weights, std::int64_t n,
                              const L* levels, std::int64_t num_levels, Count* counts,
                              const histogram_options& opts = {}) {
  detail::check_levels("histogram_range_weighted", levels, num_levels);
  const auto staged = detail::stage_levels(backend, levels, num_levels, opts);
  detail::run_histogram(backend, samples, weights, n, num_levels - 1,
                        detail::range_bins<L>{staged.levels, num_levels}, counts, opts, "histogram_range_weighted",
                        staged.scratch);
}

/// counts[k] = number of samples with bin_of(sample) == k, k < bins. bin_of
/// returns any integer; results outside [0, bins) are ignored. For the GPU
/// it must be a __host__ __device__ callable (or an extended lambda).
template <class Backend, class T, class BinOf, class Count>
void histogram_custom(const Backend& backend, const T* samples, std::int64_t n, std::int64_t bins, BinOf bin_of,
                      Count* counts, const histogram_options& opts = {}) {
  detail::check_bins("histogram_custom", bins);
  detail::run_histogram(backend, samples, static_cast<const detail::unit_weight*>(nullptr), n, bins,
                        detail::custom_bins<BinOf>{bin_of}, counts, opts, "histogram_custom");
}

/// histogram_custom() where sample i adds weights[i] (Count float or double).
template <class Backend, class T, class W, class BinOf, class Count>
void histogram_custom_weighted(const Backend& backend, const T* samples, const W* weights, std::int64_t n,
                               std::int64_t bins, BinOf bin_of, Count* counts, const histogram_options& opts = {}) {
  detail::check_bins("histogram_custom_weighted", bins);
  detail::run_histogram(backend, samples, weights, n, bins, detail::custom_bins<BinOf>{bin_of}, counts, opts,
                        "histogram_custom_weighted");
}

/// out[index[i]] = op(out[index[i]], value[i]) for i < n; out is accumulated
/// into, not cleared. index: any integer type; V: int32/uint32/int64/uint64,
/// float, double, complex<float>, complex<double>; op associative and
/// commutative with an identity (tally::plus, minimum, maximum, bit ops,
/// make_op(...)).
/// Checked mode (default): an index outside [0, out_size) is an error
/// (invalid_argument naming the first such position i and its index); nothing
/// is written out of bounds, the in-range elements are applied. On the GPU
/// this reads a flag back, so the checked call waits for the stream; the
/// unchecked mode never waits (out-of-range indices are then skipped silently).
/// opts.deterministic (op = plus, V = float/double): fixed-point sums, see
/// histogram_options.
template <class Backend, class I, class V, class Op = plus>
void scatter_reduce(const Backend& backend, const I* index, const V* value, std::int64_t n, V* out,
                    std::int64_t out_size, Op op = {}, const histogram_options& opts = {}) {
  static_assert(std::is_integral_v<I>, "tally::scatter_reduce: index must be an integer type");
  if (opts.checks == check_mode::checked) {
    detail::check_array("scatter_reduce", "index", index, n);
    detail::check_array("scatter_reduce", "value", value, n);
    if (out_size < 0) detail::throw_invalid_argument("scatter_reduce", "out_size", "is negative");
    if (n > 0) {
      detail::check_output("scatter_reduce", out, out_size, index, n);
      detail::check_output("scatter_reduce", out, out_size, value, n);
    }
  }
  if (n == 0) return;
  if (opts.deterministic) {
    if constexpr (std::is_same_v<Op, plus> && std::is_floating_point_v<V>) {
      detail::check_fixed_point_bits("scatter_reduce", opts);
      detail::run_deterministic(backend, index, value, n, out_size, detail::index_key{}, out,
                                opts.checks == check_mode::checked, opts, "scatter_reduce", nullptr);
      return;
    } else {
      detail::throw_invalid_argument("scatter_reduce", "options.deterministic",
                                     "needs tally::plus on float or double values");
    }
  }
  detail::scatter_items<I, V, detail::index_key, detail::plain_value<V>> items{
      opts.checks == check_mode::checked, index, value, n, {}, {}};
  execute_scatter(backend, items, out_size, out, op, opts, "scatter_reduce", nullptr);
}

}  // namespace tally
