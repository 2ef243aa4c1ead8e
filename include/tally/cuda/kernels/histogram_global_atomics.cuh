// The aggregated_atomics and plain_atomics strategies: the scatter kernel
// that updates the output in global memory directly: one
// atomic per element (aggregation::never), one per distinct key per warp
// step (always), or aggregated only while sampled steps keep finding equal
// keys in the warp (sampled: skewed inputs aggregate, uniform ones over many
// bins pay one match in kSampleQuiet steps, see histogram_sinks.cuh).
#pragma once

#include <cstdint>

#include "tally/cuda/kernels/histogram_common.cuh"
#include "tally/cuda/kernels/histogram_elements.cuh"
#include "tally/cuda/kernels/histogram_sinks.cuh"

namespace tally::kernels::histogram {

template <class Items, class Out, class Op>
__global__ void __launch_bounds__(256) global_atomics_kernel(Items items, Out* out, Op op, std::int64_t bins,
                                                      aggregation mode, out_of_range_report report) {
  atomic_sink<Out, Op, Items::unit, locate_direct<Out>> sink{{out}, op, mode, bins <= 0xffffffffLL};
  for_each_element(items, [&](bool has, std::int64_t i, std::int64_t key, const auto& b) {
    const bool valid = has && key >= 0 && key < bins;
    if (has && !valid) report.record(i);
    typename Items::value_type v{};
    if constexpr (!Items::unit) {
      if (valid) v = items.value(b);
    }
    sink.add(valid, key, v);
  });
}

}  // namespace tally::kernels::histogram
