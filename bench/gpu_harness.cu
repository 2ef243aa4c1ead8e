// The GPU harness and the clock warm-up.
#include "gpu_harness.cuh"

#include <string>

namespace tally::bench {

namespace {

__global__ void keep_busy(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

}  // namespace

harness gpu_harness(report& out, cudaStream_t stream, const trial_settings& settings) {
  harness h;
  h.out = &out;
  h.time = [stream, settings](const std::function<void()>& call) { return time_calls(stream, call, settings); };
  h.recover = [] {
    (void)cudaGetLastError();  // a non-sticky error is reported once; clear it
    if (cudaDeviceSynchronize() == cudaSuccess) return;
    (void)cudaGetLastError();
    const cudaError_t again = cudaDeviceSynchronize();
    if (again != cudaSuccess)
      throw device_lost(std::string("the CUDA context is lost (") + cudaGetErrorName(again) +
                        "): every later call would fail, so the sweep stops here");
  };
  return h;
}

void warm_up_clocks(double seconds) {
  int device = 0, sm_count = 0, clock_khz = 0;
  TALLY_CUDA(cudaGetDevice(&device));
  TALLY_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  TALLY_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  const long long cycles = static_cast<long long>(seconds * (clock_khz > 0 ? clock_khz : 2'000'000) * 1e3);
  keep_busy<<<sm_count * 4, 128>>>(cycles);
  TALLY_CUDA(cudaGetLastError());
  TALLY_CUDA(cudaDeviceSynchronize());
}

}  // namespace tally::bench
