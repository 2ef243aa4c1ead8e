// The bandwidth ceiling: a kernel that only reads. Every thread streams
// 16-byte loads, four in flight per loop trip, and folds them with XOR; the
// only write is conditional on an improbable value, which keeps the loads
// alive without adding traffic. The best of a few grid sizes, each no larger
// than the input needs, is the number every reduction's time is compared with.
#include <algorithm>

#include "peers/reduce_peer_util.cuh"
#include "peers/reduce_peers.hpp"
#include "timing.cuh"

namespace tally::bench {

namespace {

constexpr unsigned kImprobable = 0x9E3779B9u;

__device__ __forceinline__ unsigned fold(int4 v) { return static_cast<unsigned>(v.x ^ v.y ^ v.z ^ v.w); }

__global__ void read_probe_kernel(const int4* __restrict__ data, std::int64_t count, unsigned* sink) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const int4 a = data[i], b = data[i + stride], c = data[i + 2 * stride], d = data[i + 3 * stride];
    acc ^= fold(a) ^ fold(b) ^ fold(c) ^ fold(d);
  }
  for (; i < count; i += stride) acc ^= fold(data[i]);
  if (acc == kImprobable) *sink = acc;
}

int sm_count_of_current_device() {
  int device = 0, sm_count = 0;
  TALLY_CUDA(cudaGetDevice(&device));
  TALLY_CUDA(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  return sm_count;
}

}  // namespace

peer read_probe(const void* data, std::size_t bytes, int blocks, unsigned* sink, cudaStream_t stream) {
  const auto* vectors = static_cast<const int4*>(data);
  const auto count = static_cast<std::int64_t>(bytes / sizeof(int4));
  peer p;
  p.name = "probe";
  p.note = "16-byte loads, reads only, " + std::to_string(blocks) + " blocks";
  p.run = [=] {
    read_probe_kernel<<<blocks, kProbeThreads, 0, stream>>>(vectors, count, sink);
    detail::check_launch("read_probe_kernel");
  };
  p.verify = [=] {
    TALLY_CUDA(cudaStreamSynchronize(stream));
    return check::none("a read probe has no result");
  };
  return p;
}

std::vector<int> probe_grids(std::size_t bytes, int sm_count) {
  const std::int64_t vectors = static_cast<std::int64_t>(bytes / sizeof(int4));
  const std::int64_t cap = std::max<std::int64_t>(1, (vectors + kProbeThreads - 1) / kProbeThreads);
  std::vector<int> grids;
  for (int per_sm : {4, 8, 16, 32}) grids.push_back(static_cast<int>(std::min<std::int64_t>(cap, per_sm * sm_count)));
  std::sort(grids.begin(), grids.end());
  grids.erase(std::unique(grids.begin(), grids.end()), grids.end());
  return grids;
}

int best_probe_grid(const void* data, std::size_t bytes, unsigned* sink, cudaStream_t stream, double trial_ms) {
  int best_blocks = 0;
  double best_us = 0;
  for (const int blocks : probe_grids(bytes, sm_count_of_current_device())) {
    const timing t =
        time_calls(stream, read_probe(data, bytes, blocks, sink, stream).run, trial_settings{3, trial_ms, 2});
    if (best_blocks == 0 || t.median_us < best_us) best_blocks = blocks, best_us = t.median_us;
  }
  return best_blocks;
}

probe_result measure_read_probe(const void* data, std::size_t bytes, unsigned* sink, cudaStream_t stream, int trials,
                                double trial_ms) {
  const int blocks = best_probe_grid(data, bytes, sink, stream, trial_ms / 4);
  const timing t =
      time_calls(stream, read_probe(data, bytes, blocks, sink, stream).run, trial_settings{trials, trial_ms, 3});
  return {blocks, t.median_us, bytes / (t.median_us * 1e3)};
}

}  // namespace tally::bench
