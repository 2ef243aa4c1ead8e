// A harness for GPU rows: CUDA-event timing on one stream, recovery after a
// failed row, and a clock warm-up before the first timed row.
#pragma once

#include <cuda_runtime.h>

#include "measure.hpp"
#include "timing.cuh"

namespace tally::bench {

/// A harness timing with time_calls(stream, ..., settings). After a row
/// throws, recover() clears a non-sticky CUDA error and throws device_lost
/// when the context is gone (every later call would fail).
harness gpu_harness(report& out, cudaStream_t stream, const trial_settings& settings);

/// Keeps every SM busy for about `seconds`: an idle GPU runs at low clocks
/// and takes a while to raise them (seen: 15 µs instead of 4 µs for the
/// first rows). Call once before the first timed row.
void warm_up_clocks(double seconds = 0.2);

}  // namespace tally::bench
