// The CPU backend of histograms and scatter-reduce (histogram.hpp, hooks
// described in core/scatter_calls.hpp).
//
// Each OpenMP thread scatters its share of the elements into a private copy
// of the bins, and the copies are merged bin by bin in thread order. When the
// copies would not fit (threads × bins × value size above kPrivateBudget)
// threads update the output directly with atomics (std::atomic_ref).
// Counting histograms count privately in int64, so float/double counts are
// exact integers converted once, as on the GPU.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

#include <omp.h>

#include "tally/core/fixed_point_rounding.hpp"
#include "tally/core/scatter_calls.hpp"

namespace tally::detail {

namespace cpu_histogram {

/// Largest total size of the threads' private copies of the bins.
inline constexpr std::size_t kPrivateBudget = std::size_t(256) << 20;

inline int thread_count(const cpu_backend& cpu) { return cpu.threads > 0 ? cpu.threads : omp_get_max_threads(); }

/// Locks for values too wide for lock-free atomics (16-byte complex), striped by address.
inline std::mutex& lock_for(const void* p) {
  static std::mutex locks[64];
  return locks[(reinterpret_cast<std::uintptr_t>(p) >> 4) % 64];
}

/// out = op(out, v) as one atomic step (a compare-exchange loop; a striped
/// lock for 16-byte values, which would need libatomic otherwise).
template <class T, class Op>
void atomic_combine(T& out, const T& v, const Op& op) {
  if constexpr (sizeof(T) > 8) {
    std::lock_guard<std::mutex> hold(lock_for(&out));
    out = op(out, v);
  } else {
    std::atomic_ref<T> ref(out);
    T seen = ref.load(std::memory_order_relaxed);
    while (!ref.compare_exchange_weak(seen, op(seen, v), std::memory_order_relaxed)) {
    }
  }
}

/// The first i whose key lies outside [0, bins), or -1.
template <class Items>
std::int64_t first_out_of_range(const cpu_backend& cpu, const Items& items, std::int64_t bins) {
  std::int64_t first = std::numeric_limits<std::int64_t>::max();
#pragma omp parallel for num_threads(thread_count(cpu)) reduction(min : first) schedule(static)
  for (std::int64_t i = 0; i < items.n; ++i) {
    const std::int64_t k = items.key(items.a[i]);
    if ((k < 0 || k >= bins) && i < first) first = i;
  }
  return first == std::numeric_limits<std::int64_t>::max() ? -1 : first;
}

/// out[key] = op(out[key], value) for every element whose key lies in [0, bins).
template <class Items, class Out, class Op>
void scatter(const cpu_backend& cpu, const Items& items, std::int64_t bins, Out* out, const Op& op) {
  // Counting accumulates int64 counts; otherwise the value type itself.
  using Acc = std::conditional_t<Items::unit, std::int64_t, typename Items::value_type>;
  const auto value_of = [&](std::int64_t i) -> Acc {
    if constexpr (Items::unit) return 1;
    else return items.value(items.b[i]);
  };
  const auto merge = [&](Out& o, const Acc& v) {
    if constexpr (Items::unit) o = static_cast<Out>(o + static_cast<Out>(v));
    else o = op(o, static_cast<Out>(v));
  };
  const auto identity = [&] {
    if constexpr (Items::unit) return Acc(0);
    else return op.template identity<Acc>();
  };
  const int threads = std::max<std::int64_t>(1, std::min<std::int64_t>(thread_count(cpu), items.n));

  // Each thread's copy starts on its own cache line: copies of a few bins
  // packed side by side would share lines between threads (false sharing).
  constexpr std::size_t kLine = 64;
  static_assert(kLine % sizeof(Acc) == 0, "bins tile a cache line");
  const std::size_t stride = (static_cast<std::size_t>(bins) * sizeof(Acc) + kLine - 1) / kLine * kLine / sizeof(Acc);
  if (stride * threads * sizeof(Acc) <= kPrivateBudget) {
    std::vector<Acc> storage(stride * threads + kLine / sizeof(Acc));
    Acc* copies = storage.data();
    while (reinterpret_cast<std::uintptr_t>(copies) % kLine != 0) ++copies;  // sizeof(Acc) divides 64
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      Acc* mine = copies + static_cast<std::size_t>(t) * stride;
      std::fill(mine, mine + bins, identity());
#pragma omp for schedule(static)
      for (std::int64_t i = 0; i < items.n; ++i) {
        const std::int64_t k = items.key(items.a[i]);
        if (k < 0 || k >= bins) continue;
        if constexpr (Items::unit) ++mine[k];
        else mine[k] = op(mine[k], value_of(i));
      }
      // Implicit barrier above; now merge bin ranges in thread order.
#pragma omp for schedule(static)
      for (std::int64_t k = 0; k < bins; ++k)
        for (int s = 0; s < threads; ++s) merge(out[k], copies[static_cast<std::size_t>(s) * stride + k]);
    }
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < items.n; ++i) {
    const std::int64_t k = items.key(items.a[i]);
    if (k < 0 || k >= bins) continue;
    if constexpr (Items::unit) atomic_combine(out[k], Out(1), plus{});
    else atomic_combine(out[k], static_cast<Out>(value_of(i)), op);
  }
}

/// After the elements were applied: the data errors of a checked call go to
/// opts.errors, or are thrown (a bad value named `values`).
template <class Items>
void report(const cpu_backend& cpu, const Items& items, std::int64_t bins, bool bad_value,
            const histogram_options& opts, const char* function, const char* values) {
  if (opts.checks != check_mode::checked) return;
  const std::int64_t position = items.report_out_of_range ? first_out_of_range(cpu, items, bins) : -1;
  if (opts.errors) {
    opts.errors->first_bad_index = position;
    opts.errors->bad_value = bad_value ? 1 : 0;
    return;
  }
  const long long index = position >= 0 ? static_cast<long long>(items.a[position]) : 0;
  throw_data_errors(function, values, opts, position, index, bins, bad_value, items.n);
}

}  // namespace cpu_histogram

template <class T>
void check_backend_memory(const cpu_backend&, const char*, const char*, const T*, std::int64_t) {}

template <class Items, class Out, class Op>
void execute_scatter(const cpu_backend& cpu, const Items& items, std::int64_t bins, Out* out, const Op& op,
                     const histogram_options& opts, const char* function, bool clear) {
  if (clear) std::fill(out, out + bins, Out(0));
  if (items.n > 0) cpu_histogram::scatter(cpu, items, bins, out, op);
  cpu_histogram::report(cpu, items, bins, false, opts, function, nullptr);
}

template <class A, class B, class Key, class V>
void run_deterministic(const cpu_backend& cpu, const A* a, const B* b, std::int64_t n, std::int64_t bins, Key key,
                       V* out, bool report_out_of_range, const histogram_options& opts, const char* function,
                       const char* values, bool clear) {
  if (clear) std::fill(out, out + bins, V(0));
  const int headroom = fixed_point_headroom_bits(n);
  int bits = opts.fixed_point_bits;
  if (bits == kDeriveFixedPointScale) {
    // The largest finite |value| over all elements; NaN and inf are checked
    // (as every value) only where their element lands in a bin.
    double largest = 0;
#pragma omp parallel for num_threads(cpu_histogram::thread_count(cpu)) reduction(max : largest)
    for (std::int64_t i = 0; i < n; ++i) {
      const double v = std::fabs(static_cast<double>(b[i]));
      if (std::isfinite(v)) largest = std::max(largest, v);
    }
    bits = derived_fixed_point_bits(largest, headroom);
  }
  unsigned bad = 0;
  const auto quantize = fixed_point_value::with_bits(bits, headroom, &bad);
  scatter_items<A, B, Key, fixed_point_value> items{report_out_of_range, a, b, n, key, quantize};
  if (n > 0) {
    std::vector<long long> sums(static_cast<std::size_t>(bins), 0);
    cpu_histogram::scatter(cpu, items, bins, sums.data(), plus{});
    for (std::int64_t k = 0; k < bins; ++k)
      out[k] = add_fixed_point(out[k], sums[k], bits);
  }
  cpu_histogram::report(cpu, items, bins, bad != 0, opts, function, values);
}

}  // namespace tally::detail
