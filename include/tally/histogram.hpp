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
// block (up to ~57K 32-bit bins, ~114K when counting with 16-bit counters);
// beyond that, from 2^20 elements, hot_keys: a sample of 16384 keys finds
// the frequent ones (~1/2048 of the elements or more), which each block sums
// in shared memory, while the others go to global atomics -- skewed keys
// (Zipf-like) no longer queue on a few L2 lines, and uniform keys, whose
// sample finds none, pay only the sample; bins spread over a Hopper
// cluster's shared memories (forced only); warp-aggregated global atomics
// under contention, plain global atomics otherwise. histogram_options::strategy forces one, and
// histogram_options::chosen reports the one taken.
// Scratch: GPU calls draw it from the workspace (gpu.with(ws), else the
// stream's), once per call: the error words, and for counting beyond 32-bit
// bins in a block or deterministic calls one row of bins per block, up to
// 32 MB (kept by the workspace for later calls); histogram_range's levels;
// hot_keys' table of 16 KB.
//
// Errors: every argument is checked before anything is written (checked
// mode, the default): null, overlapping or (GPU) host pointers, bad ranges,
// a forced strategy the device cannot run. Each is a tally::invalid_argument
// naming the function and the argument, and leaves every output as it was.
// Errors in the data found while the call runs (bad scatter indices, values
// outside the deterministic mode's contract) are reported after the elements
// that were fine have been applied, on both backends and every strategy.
//
// The bin functors, scatter items and checks behind these functions live in
// core/ (bins.hpp, scatter.hpp, scatter_validate.hpp, scatter_calls.hpp).
#pragma once

#include <cstdint>
#include <type_traits>

#include "tally/core/backend.hpp"
#include "tally/core/bins.hpp"
#include "tally/core/error.hpp"
#include "tally/core/histogram_options.hpp"
#include "tally/core/operators.hpp"
#include "tally/core/scatter.hpp"
#include "tally/core/scatter_calls.hpp"
#include "tally/core/scatter_validate.hpp"

namespace tally {

/// counts[k] = number of samples x with edge k <= x < edge k+1, where edge k
/// = lo + k·w, w = (hi - lo)/bins, is evaluated in double as NumPy's
/// linspace does (k·w rounded, then lo added; edge bins = hi): the same bins
/// as numpy.histogram(samples, bins, (lo, hi)), except that x == hi is
/// outside (as in CUB), where NumPy counts it in the last bin.
/// Pre: samples holds n values (float, double, or integers), counts `bins`
/// elements (int32, int64, float or double), both in the backend's memory,
/// not overlapping; bins > 0, lo < hi, both finite, with hi - lo and
/// bins/(hi - lo) finite (else invalid_argument, naming the argument).
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
/// unspecified unless opts.deterministic). The weights of ignored samples
/// are never added (a NaN weight there changes nothing).
template <class Backend, class T, class W, class Count>
void histogram_even_weighted(const Backend& backend, const T* samples, const W* weights, std::int64_t n,
                             std::int64_t bins, double lo, double hi, Count* counts,
                             const histogram_options& opts = {}) {
  const auto key = detail::make_even_bins("histogram_even_weighted", bins, lo, hi);
  detail::run_histogram(backend, samples, weights, n, bins, key, counts, opts, "histogram_even_weighted");
}

/// counts[k] = number of samples in [levels[k], levels[k+1]), for
/// k < num_levels - 1. `levels` is HOST memory on both backends (validated
/// there; the GPU backend copies it to scratch in stream order -- to capture
/// the call in a CUDA graph, the levels must be pinned host memory, as CUDA
/// cannot capture a copy from pageable memory).
/// Pre: levels strictly increasing, num_levels >= 2 (else invalid_argument);
/// samples/counts as histogram_even, counts holds num_levels - 1 elements.
/// Post: counts overwritten; NaN and samples outside [levels[0], levels[last]) ignored.
template <class Backend, class T, class L, class Count>
void histogram_range(const Backend& backend, const T* samples, std::int64_t n, const L* levels,
                     std::int64_t num_levels, Count* counts, const histogram_options& opts = {}) {
  detail::check_levels("histogram_range", levels, num_levels);
  detail::run_histogram(backend, samples, static_cast<const detail::unit_weight*>(nullptr), n, num_levels - 1,
                        detail::range_bins<L>{levels, num_levels}, counts, opts, "histogram_range");
}

/// histogram_range() where sample i adds weights[i] (Count float or double).
template <class Backend, class T, class W, class L, class Count>
void histogram_range_weighted(const Backend& backend, const T* samples, const W* weights, std::int64_t n,
                              const L* levels, std::int64_t num_levels, Count* counts,
                              const histogram_options& opts = {}) {
  detail::check_levels("histogram_range_weighted", levels, num_levels);
  detail::run_histogram(backend, samples, weights, n, num_levels - 1, detail::range_bins<L>{levels, num_levels},
                        counts, opts, "histogram_range_weighted");
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
/// Checked mode (default): an index outside [0, out_size) is an error. The
/// call applies every element whose index is in range, skips the others
/// (nothing is written out of bounds), and then reports invalid_argument
/// naming the first bad position i and its index -- on both backends, every
/// strategy and in deterministic mode. On the GPU the report reads a flag
/// back, so a checked call waits for the stream, unless opts.errors is given:
/// then the first bad position is left in *opts.errors (device memory) and
/// the call never waits, so it can be captured in a CUDA graph. The
/// unchecked mode never waits (out-of-range indices are skipped silently).
/// opts.deterministic (op = plus, V = float/double): fixed-point sums, see
/// histogram_options.
template <class Backend, class I, class V, class Op = plus>
void scatter_reduce(const Backend& backend, const I* index, const V* value, std::int64_t n, V* out,
                    std::int64_t out_size, Op op = {}, const histogram_options& opts = {}) {
  static_assert(std::is_integral_v<I>, "tally::scatter_reduce: index must be an integer type");
  detail::run_scatter_reduce(backend, index, value, n, out, out_size, op, opts);
}

}  // namespace tally
