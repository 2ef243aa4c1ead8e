// The scratch of one index_add call on the GPU, laid out once and drawn from
// the workspace once (as histogram_scratch.hpp does for the histograms):
//
//   [zeroed words: error_words] [int64 sums] [row marks or first rows]
//    workspace::kZeroedBytes     256-aligned, deterministic calls only
//
// A sorted_rows call instead draws
//
//   [zeroed words] [keys] [keys, sorted] [row numbers] [row numbers, sorted] [CUB's temporary storage]
//   [deterministic calls: int64 sums, one per task of kSortedChunk sorted rows and column]
//
// A deterministic call keeps one int64 sum per element its rows can reach,
// in one of two layouts, whichever is smaller:
//   - per output row (slot = index): out_rows × cols sums, and a 32-bit mark
//     per output row saying whether any row reached it;
//   - per source row (slot = the first row naming that index): rows × cols
//     sums, and the first row of every output row (8 bytes each).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "tally/core/error.hpp"
#include "tally/cuda/kernels/histogram_errors.cuh"
#include "tally/cuda/workspace.hpp"

namespace tally::detail {

/// Where a deterministic index_add keeps its sums.
struct index_add_slots {
  bool per_source_row = false;  ///< slots are first rows (else output rows)
  std::int64_t slots = 0;       ///< rows of sums
  std::size_t sums_bytes = 0;
  std::size_t marks_bytes = 0;  ///< touched marks (per output row) or first rows (per source row)
};

/// a·b + c, or SIZE_MAX when it overflows.
inline std::size_t checked_bytes(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  constexpr auto kMax = std::numeric_limits<std::size_t>::max();
  if (b != 0 && a > (kMax - c) / b) return kMax;
  return static_cast<std::size_t>(a * b + c);
}

/// The smaller layout for a call of rows × cols into out_rows rows; throws
/// (naming out_rows) when neither is addressable.
inline index_add_slots choose_index_add_slots(std::int64_t rows, std::int64_t cols, std::int64_t out_rows) {
  index_add_slots per_output, per_source;
  per_output.slots = out_rows;
  per_output.sums_bytes = checked_bytes(static_cast<std::uint64_t>(out_rows), static_cast<std::uint64_t>(cols) * 8, 0);
  per_output.marks_bytes = static_cast<std::size_t>(out_rows) * sizeof(unsigned);
  per_source.per_source_row = true;
  per_source.slots = rows;
  per_source.sums_bytes = checked_bytes(static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols) * 8, 0);
  per_source.marks_bytes = static_cast<std::size_t>(out_rows) * sizeof(unsigned long long);
  const auto total = [](const index_add_slots& s) { return checked_bytes(1, s.sums_bytes, s.marks_bytes); };
  const index_add_slots& best = total(per_source) < total(per_output) ? per_source : per_output;
  if (total(best) >= std::numeric_limits<std::size_t>::max() / 2)
    throw_invalid_argument(
        "index_add", "out_rows",
        "and rows = " + std::to_string(rows) + " need more deterministic scratch than is addressable");
  return best;
}

/// The regions of one call's scratch.
struct index_add_scratch {
  kernels::histogram::error_words* words = nullptr;
  unsigned long long* sums = nullptr;
  void* marks = nullptr;
};

/// Draws the call's scratch from `ws` once: the words when `words`, and the
/// sums and marks of `slots` when it has any.
inline index_add_scratch carve_index_add_scratch(workspace& ws, bool words, const index_add_slots& slots,
                                                 cudaStream_t stream) {
  constexpr std::size_t kAlignment = 256;
  const std::size_t sums_span = (slots.sums_bytes + kAlignment - 1) / kAlignment * kAlignment;
  const std::size_t bytes = sums_span + slots.marks_bytes;
  index_add_scratch scratch;
  if (!words && bytes == 0) return scratch;
  auto* base = static_cast<char*>(ws.get(bytes, stream));
  char* after_words = base + workspace::kZeroedBytes;  // 256-aligned: the workspace block is
  scratch.words = reinterpret_cast<kernels::histogram::error_words*>(base);
  scratch.sums = reinterpret_cast<unsigned long long*>(after_words);
  scratch.marks = after_words + sums_span;
  return scratch;
}

/// The regions of a sorted_rows call: the error words, the keys and row
/// numbers before and after the sort (rows 32-bit entries each), and the
/// sort's temporary storage.
struct sorted_rows_scratch {
  kernels::histogram::error_words* words = nullptr;
  unsigned* keys[2] = {};
  unsigned* rows_of[2] = {};
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
  unsigned long long* sums = nullptr;  ///< deterministic calls: one int64 sum per task and column
};

/// Draws a sorted_rows call's scratch from `ws` once: `temp_bytes` for the
/// sort and `sums_bytes` (0 unless deterministic). Pre: rows > 0.
inline sorted_rows_scratch carve_sorted_rows_scratch(workspace& ws, std::int64_t rows, std::size_t temp_bytes,
                                                     std::size_t sums_bytes, cudaStream_t stream) {
  constexpr std::size_t kAlignment = 256;
  const std::size_t span = (static_cast<std::size_t>(rows) * sizeof(unsigned) + kAlignment - 1) / kAlignment * kAlignment;
  const std::size_t temp_span = (temp_bytes + kAlignment - 1) / kAlignment * kAlignment;
  auto* base = static_cast<char*>(ws.get(4 * span + temp_span + sums_bytes, stream));
  char* p = base + workspace::kZeroedBytes;  // 256-aligned, as in carve_index_add_scratch
  sorted_rows_scratch scratch;
  scratch.words = reinterpret_cast<kernels::histogram::error_words*>(base);
  auto next = [&] {
    auto* region = reinterpret_cast<unsigned*>(p);
    p += span;
    return region;
  };
  scratch.keys[0] = next();
  scratch.keys[1] = next();
  scratch.rows_of[0] = next();
  scratch.rows_of[1] = next();
  scratch.temp = p;
  scratch.temp_bytes = temp_bytes;
  scratch.sums = reinterpret_cast<unsigned long long*>(p + temp_span);
  return scratch;
}

}  // namespace tally::detail
