// choose_histogram_plan as a table, on the host: the GPU backend's choice of
// strategy is plain host code (cuda/dispatch/histogram_strategy.hpp), so every
// rule its header states is checked here, with the numbers worked out by hand
// from those rules (not by calling the helpers the chooser uses).
// Compiled as C++ (no CUDA needed).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends.hpp"
#include "tally/cuda/dispatch/histogram_strategy.hpp"

namespace tally::testing {
namespace {

using tally::histogram_strategy;
using tally::detail::choose_histogram_plan;
using tally::detail::histogram_plan;
using tally::detail::histogram_problem;

/// An H100 as the chooser sees it: 132 SMs, 227 KB of opt-in shared memory
/// per block (of which the chooser keeps 224 KB = 229376 bytes), clusters and
/// cooperative launches.
histogram_problem h100(std::int64_t n, std::int64_t bins, std::size_t slot, bool counting) {
  histogram_problem p;
  p.n = n;
  p.bins = bins;
  p.slot_bytes = slot;
  p.counting = counting;
  p.sm_count = 132;
  p.shared_per_block = 227 * 1024;
  p.shared_per_sm = 228 * 1024;
  p.clusters = true;
  p.cooperative = true;
  return p;
}

/// One row: the problem, the forced strategy, and the plan expected.
struct row {
  const char* what;
  histogram_problem problem;
  histogram_strategy forced;
  histogram_plan expected;
};

histogram_plan shared(int registers, bool packed, std::int64_t stride, std::size_t row_bytes, int copies,
                      bool aggregate, bool thread_private, std::size_t shared_bytes) {
  histogram_plan p;
  p.strategy = histogram_strategy::shared_memory;
  p.registers = registers;
  p.packed = packed;
  p.stride = stride;
  p.row_bytes = row_bytes;
  p.copies = copies;
  p.aggregate = aggregate;
  p.thread_private = thread_private;
  p.shared_bytes = shared_bytes;
  return p;
}

/// hot_keys: a sample's frequent keys in shared memory, the others through
/// global atomics aggregated on sampled evidence.
histogram_plan hot_keys() {
  histogram_plan p;
  p.strategy = histogram_strategy::hot_keys;
  p.aggregate = true;
  p.sampled = true;
  return p;
}

histogram_plan global(bool aggregate, bool sampled) {
  histogram_plan p;
  p.strategy = aggregate ? histogram_strategy::aggregated_atomics : histogram_strategy::plain_atomics;
  p.aggregate = aggregate;
  p.sampled = sampled;
  return p;
}

histogram_plan cluster(int size, std::size_t shared_bytes) {
  histogram_plan p;
  p.strategy = histogram_strategy::cluster_memory;
  p.cluster = size;
  p.shared_bytes = shared_bytes;
  return p;
}

void expect_plan(const row& r) {
  SCOPED_TRACE(std::string(r.what) + " (bins " + std::to_string(r.problem.bins) + ", n " +
               std::to_string(r.problem.n) + ", slot " + std::to_string(r.problem.slot_bytes) + ", forced " +
               tally::to_string(r.forced) + ")");
  const histogram_plan got = choose_histogram_plan(r.problem, r.forced, "histogram_even");
  const histogram_plan& want = r.expected;
  EXPECT_EQ(tally::to_string(got.strategy), std::string(tally::to_string(want.strategy)));
  EXPECT_EQ(got.cluster, want.cluster);
  EXPECT_EQ(got.copies, want.copies);
  EXPECT_EQ(got.aggregate, want.aggregate);
  EXPECT_EQ(got.sampled, want.sampled);
  EXPECT_EQ(got.registers, want.registers);
  EXPECT_EQ(got.packed, want.packed);
  EXPECT_EQ(got.thread_private, want.thread_private);
  EXPECT_EQ(got.shared_bytes, want.shared_bytes);
  EXPECT_EQ(got.stride, want.stride);
  EXPECT_EQ(got.row_bytes, want.row_bytes);
}

constexpr auto kAuto = histogram_strategy::automatic;
constexpr std::int64_t kTenMillion = 10000000;

TEST(HistogramPlan, CountingOnAnH100) {
  const std::vector<row> table = {
      // Up to kRegisterBins (8) bins: per-thread counters in registers, rounded up to 1, 2, 4, 8.
      {"1 bin: one register", h100(kTenMillion, 1, 4, true), kAuto, shared(1, false, 0, 0, 1, false, false, 4)},
      {"3 bins: 4 registers", h100(kTenMillion, 3, 4, true), kAuto, shared(4, false, 0, 0, 1, false, false, 12)},
      {"5 bins: 8 registers", h100(kTenMillion, 5, 4, true), kAuto, shared(8, false, 0, 0, 1, false, false, 20)},
      {"8 bins: 8 registers", h100(kTenMillion, 8, 4, true), kAuto, shared(8, false, 0, 0, 1, false, false, 32)},
      // 9 bins: shared rows of 48 bytes (36 rounded up to 16), 16384 / 48 copies capped at 16.
      {"9 bins: copies in shared memory", h100(kTenMillion, 9, 4, true), kAuto,
       shared(0, false, 12, 48, 16, false, false, 768)},
      // 1000 int32 bins: 4000 bytes, 16384 / 4000 = 4 copies.
      {"1000 bins: 4 copies", h100(kTenMillion, 1000, 4, true), kAuto,
       shared(0, false, 1000, 4000, 4, false, false, 16000)},
      // 57000 int32 bins: 228000 bytes, within 229376: one copy, 32-bit counters.
      {"57000 bins: one 32-bit copy", h100(kTenMillion, 57000, 4, true), kAuto,
       shared(0, false, 57000, 228000, 1, false, false, 228000)},
      // 57400 bins: 229600 bytes do not fit; 16-bit counters (114800 bytes) do.
      {"57400 bins: packed", h100(kTenMillion, 57400, 4, true), kAuto,
       shared(0, true, 57400, 114800, 1, false, false, 114800)},
      // 114688 packed bins: exactly 229376 bytes, the budget.
      {"114688 bins: packed, exactly the budget", h100(kTenMillion, 114688, 4, true), kAuto,
       shared(0, true, 114688, 229376, 1, false, false, 229376)},
      // One more: 229392 bytes packed do not fit: global atomics, aggregated on sampled evidence.
      // Beyond a block, from 2^20 elements: hot keys sampled (below: global atomics).
      {"114689 bins: hot keys", h100(kTenMillion, 114689, 4, true), kAuto, hot_keys()},
      {"10^7 bins: hot keys", h100(kTenMillion, kTenMillion, 4, true), kAuto, hot_keys()},
      {"10^6 bins, 2^20 elements: hot keys", h100(1 << 20, 1000000, 4, true), kAuto, hot_keys()},
      {"10^6 bins, 2^20 - 1 elements: global", h100((1 << 20) - 1, 1000000, 4, true), kAuto, global(true, true)},
      {"2^32 - 2 bins: hot keys", h100(kTenMillion, 0xfffffffeLL, 4, true), kAuto, hot_keys()},
      {"2^32 - 1 bins: keys beyond 32 bits, global", h100(kTenMillion, 0xffffffffLL, 4, true), kAuto,
       global(true, true)},
      // Fewer elements than bins: privatising does not pay.
      {"n < bins: global", h100(999, 1000, 4, true), kAuto, global(true, true)},
      {"n == bins: shared", h100(1000, 1000, 4, true), kAuto, shared(0, false, 1000, 4000, 4, false, false, 16000)},
  };
  for (const row& r : table) expect_plan(r);
}

TEST(HistogramPlan, WeightedOnAnH100) {
  const std::vector<row> table = {
      // Up to 16 bins (and 512 threads x bins x slot <= 64 KB): bins per thread, no atomics.
      {"10 double bins: per thread", h100(kTenMillion, 10, 8, false), kAuto,
       shared(0, false, 10, 80, 1, false, true, 80 + 10 * 512 * 8)},
      {"16 double bins: per thread, exactly 64 KB", h100(kTenMillion, 16, 8, false), kAuto,
       shared(0, false, 16, 128, 1, false, true, 128 + 16 * 512 * 8)},
      // 17 bins: 136 bytes rounded to 144 (stride 18), 16 copies, warp-aggregated (<= 64 bins).
      {"17 double bins: aggregated copies", h100(kTenMillion, 17, 8, false), kAuto,
       shared(0, false, 18, 144, 16, true, false, 144 * 16)},
      {"64 double bins: aggregated", h100(kTenMillion, 64, 8, false), kAuto,
       shared(0, false, 64, 512, 16, true, false, 512 * 16)},
      // 65 bins: 520 bytes rounded to 528 (stride 66), 31 copies capped at 16, no aggregation.
      {"65 double bins: not aggregated", h100(kTenMillion, 65, 8, false), kAuto,
       shared(0, false, 66, 528, 16, false, false, 528 * 16)},
      // 16 float bins: 16 x 512 x 4 = 32 KB: per thread.
      {"16 float bins: per thread", h100(kTenMillion, 16, 4, false), kAuto,
       shared(0, false, 16, 64, 1, false, true, 64 + 16 * 512 * 4)},
      // Weighted sums are never packed: 28672 double bins (229376 bytes) fit, 28673 do not.
      {"28672 double bins: one copy", h100(kTenMillion, 28672, 8, false), kAuto,
       shared(0, false, 28672, 229376, 1, false, false, 229376)},
      {"28673 double bins: hot keys", h100(kTenMillion, 28673, 8, false), kAuto, hot_keys()},
  };
  for (const row& r : table) expect_plan(r);
}

TEST(HistogramPlan, DevicesWithoutWhatSharedMemoryNeeds) {
  auto no_shared_atomics = h100(kTenMillion, 100, 16, false);
  no_shared_atomics.shared_atomics = false;
  auto not_cooperative = h100(kTenMillion, 100, 4, true);
  not_cooperative.cooperative = false;
  // 48 KB per block: a budget of 47 KB (48128 bytes).
  auto small = h100(kTenMillion, 12032, 4, true);
  small.shared_per_block = 48 * 1024;
  auto small_packed = small;
  small_packed.bins = 12033;
  auto tiny = h100(kTenMillion, 1, 4, false);
  tiny.shared_per_block = 1024;  // nothing left after the runtime's reserve
  const std::vector<row> table = {
      {"no shared atomics for the value type", no_shared_atomics, kAuto, global(true, true)},
      {"no cooperative launch (no grid barrier): hot keys", not_cooperative, kAuto, hot_keys()},
      {"48 KB: 12032 bins exactly fit", small, kAuto, shared(0, false, 12032, 48128, 1, false, false, 48128)},
      {"48 KB: 12033 bins packed", small_packed, kAuto, shared(0, true, 12040, 24080, 1, false, false, 24080)},
      {"no shared memory at all", tiny, kAuto, global(true, true)},
  };
  for (const row& r : table) expect_plan(r);
}

TEST(HistogramPlan, ForcedStrategies) {
  const std::vector<row> table = {
      {"forced aggregated", h100(kTenMillion, 10, 4, true), histogram_strategy::aggregated_atomics, global(true, false)},
      {"forced plain", h100(kTenMillion, 10, 4, true), histogram_strategy::plain_atomics, global(false, false)},
      {"forced hot keys, few elements", h100(10, 10, 8, false), histogram_strategy::hot_keys, hot_keys()},
      // Forced shared even when n < bins (automatic would go global).
      {"forced shared, n < bins", h100(10, 1000, 4, true), histogram_strategy::shared_memory,
       shared(0, false, 1000, 4000, 4, false, false, 16000)},
      // Cluster: the smallest power of two >= 2 whose shared memories hold the
      // bins, then doubled while (132 / cluster) x bins > 4 x 2^18 flush atomics.
      {"forced cluster, 1000 bins", h100(kTenMillion, 1000, 4, true), histogram_strategy::cluster_memory,
       cluster(2, 2000)},
      {"forced cluster, 10^5 bins", h100(kTenMillion, 100000, 4, true), histogram_strategy::cluster_memory,
       cluster(16, 25000)},
      // 7000 bins: 66 x 7000 = 462000 <= 2^20: cluster 2, 3500 bins x 8 bytes each.
      {"forced cluster, 7000 double bins", h100(kTenMillion, 7000, 8, false), histogram_strategy::cluster_memory,
       cluster(2, 28000)},
      // 20000 bins: 66 x 20000 > 2^20, 33 x 20000 = 660000 <= 2^20: cluster 4.
      {"forced cluster, 20000 bins", h100(kTenMillion, 20000, 4, true), histogram_strategy::cluster_memory,
       cluster(4, 20000)},
  };
  for (const row& r : table) expect_plan(r);
}

TEST(HistogramPlan, ForcedStrategiesThatCannotRunAreRejected) {
  auto no_clusters = h100(kTenMillion, 100, 4, true);
  no_clusters.clusters = false;
  expect_invalid([&] { (void)choose_histogram_plan(no_clusters, histogram_strategy::cluster_memory, "histogram_even"); },
                 {"histogram_even", "'options.strategy'", "cluster_memory"});
  // 16 x 229376 bytes hold 917504 int32 bins; one more does not fit a cluster.
  expect_invalid(
      [&] {
        (void)choose_histogram_plan(h100(kTenMillion, 917505, 4, true), histogram_strategy::cluster_memory,
                                    "histogram_even");
      },
      {"histogram_even", "'options.strategy'", "917505"});
  EXPECT_NO_THROW((void)choose_histogram_plan(h100(kTenMillion, 917504, 4, true), histogram_strategy::cluster_memory,
                                              "histogram_even"));
  expect_invalid(
      [&] {
        (void)choose_histogram_plan(h100(kTenMillion, 114689, 4, true), histogram_strategy::shared_memory,
                                    "scatter_reduce");
      },
      {"scatter_reduce", "'options.strategy'", "shared_memory"});
  auto not_cooperative = h100(kTenMillion, 100, 4, true);
  not_cooperative.cooperative = false;
  expect_invalid([&] { (void)choose_histogram_plan(not_cooperative, histogram_strategy::shared_memory, "histogram_even"); },
                 {"histogram_even", "'options.strategy'"});
  // hot_keys: keys below 2^32 - 1, shared-memory atomics, 81 KB of shared memory a block.
  expect_invalid(
      [&] {
        (void)choose_histogram_plan(h100(kTenMillion, 0xffffffffLL, 4, true), histogram_strategy::hot_keys,
                                    "scatter_reduce");
      },
      {"scatter_reduce", "'options.strategy'", "hot_keys", "4294967295"});
  auto no_shared_atomics = h100(kTenMillion, 100, 16, false);
  no_shared_atomics.shared_atomics = false;
  expect_invalid([&] { (void)choose_histogram_plan(no_shared_atomics, histogram_strategy::hot_keys, "scatter_reduce"); },
                 {"scatter_reduce", "'options.strategy'", "hot_keys"});
  auto small = h100(kTenMillion, 100000, 4, true);
  small.shared_per_block = 81 * 1024 - 1;
  expect_invalid([&] { (void)choose_histogram_plan(small, histogram_strategy::hot_keys, "histogram_even"); },
                 {"histogram_even", "'options.strategy'", "hot_keys"});
}

}  // namespace
}  // namespace tally::testing
