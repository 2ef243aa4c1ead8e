// The scratch of one histogram or scatter call on the GPU, laid out once
// (as CUB's alias_temporaries does): every region's size is known before the
// call draws from the workspace, all offsets are computed here, and the call
// carves them from one draw. (Drawing twice is never safe: a workspace that
// grows frees its old block, which earlier pointers still address.)
//
//   [zeroed words: error_words] [partial rows] [int64 sums] [hot-key table] [staged levels]
//    workspace::kZeroedBytes     256-aligned regions, each only when needed
#pragma once

#include <cstddef>
#include <cstdint>

#include "tally/cuda/kernels/histogram_errors.cuh"
#include "tally/cuda/workspace.hpp"

namespace tally::detail {

/// What a call needs, in bytes (0: not needed).
struct scatter_scratch_needs {
  bool words = false;       ///< error words (checked reports, deterministic calls, an errors record)
  std::size_t rows = 0;     ///< partial rows of the shared_memory kernel (histogram_shapes.cuh)
  std::size_t sums = 0;     ///< int64 sums of a deterministic call whose bins do not fit a block
  std::size_t hot = 0;      ///< hot_keys: the table of hot keys and the sample (kernels/histogram_hot_keys.cuh)
  std::size_t levels = 0;   ///< histogram_range's levels, copied from the host
};

/// Offsets past the zeroed bytes, and the bytes to draw.
struct scatter_scratch_layout {
  static constexpr std::size_t kAlignment = 256;
  std::size_t rows = 0, sums = 0, hot = 0, levels = 0;
  std::size_t rows_bytes = 0;
  std::size_t bytes = 0;  ///< past workspace::kZeroedBytes
  bool draws = false;     ///< whether the call touches the workspace at all

  static constexpr std::size_t aligned(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

  static scatter_scratch_layout of(const scatter_scratch_needs& needs) {
    scatter_scratch_layout layout;
    layout.rows = 0;
    layout.rows_bytes = needs.rows;
    layout.sums = layout.rows + aligned(needs.rows);
    layout.hot = layout.sums + aligned(needs.sums);
    layout.levels = layout.hot + aligned(needs.hot);
    layout.bytes = layout.levels + needs.levels;
    layout.draws = needs.words || layout.bytes > 0;
    return layout;
  }
};

/// The regions of one call's scratch.
struct scatter_scratch {
  kernels::histogram::error_words* words = nullptr;
  void* rows = nullptr;  ///< 256-byte aligned
  std::size_t rows_bytes = 0;
  long long* sums = nullptr;
  unsigned* hot = nullptr;
  void* levels = nullptr;
};

/// Draws the call's scratch from `ws` once and carves it as `layout` says
/// (nothing is drawn when the layout needs nothing).
inline scatter_scratch carve_scatter_scratch(workspace& ws, const scatter_scratch_layout& layout,
                                             cudaStream_t stream) {
  scatter_scratch scratch;
  if (!layout.draws) return scratch;
  auto* base = static_cast<char*>(ws.get(layout.bytes, stream));
  char* after_words = base + workspace::kZeroedBytes;  // 256-aligned: the workspace block is
  scratch.words = reinterpret_cast<kernels::histogram::error_words*>(base);
  scratch.rows = after_words + layout.rows;
  scratch.rows_bytes = layout.rows_bytes;
  scratch.sums = reinterpret_cast<long long*>(after_words + layout.sums);
  scratch.hot = reinterpret_cast<unsigned*>(after_words + layout.hot);
  scratch.levels = after_words + layout.levels;
  return scratch;
}

}  // namespace tally::detail
