// A GPU reduce is stream-ordered with no host synchronisation or allocation
// inside, so it can be captured in a CUDA graph and replayed; replays must give
// the bits of the fixed tree (the kernel's counters reset themselves).
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "reduce_fixture.hpp"

namespace tally::testing {
namespace {

// GPU only: "ReduceGraph/gpu.*" (backends.hpp).
template <class Side>
class ReduceGraph : public reduce_test<Side> {};
TYPED_TEST_SUITE(ReduceGraph, gpu_only, backend_names);

TYPED_TEST(ReduceGraph, CapturedReduceReplaysToTheDirectResult) {
  auto& rng = this->rng;
  // One tile, several tiles, and more than one group of tiles (two levels of counters).
  for (std::int64_t n : {std::int64_t{1000}, std::int64_t{300000}, std::int64_t{4096} * 1024 * 2 + 77}) {
    const auto host = random_values<float>(rng, static_cast<std::size_t>(n));
    buffer<float> x(true, host.size());
    x.write(host);
    buffer<float> direct(true, 1), replayed(true, 1);
    cudaStream_t stream;
    TALLY_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    workspace ws;
    const auto gpu = tally::gpu.on(stream).with(ws);
    // The reference, not another GPU call: the tree evaluated on the host.
    const float expected = reduce_expected<float>(host.data(), n);
    tally::reduce(gpu, static_cast<const float*>(x.data()), n, direct.data());  // sizes the workspace
    TALLY_CUDA(cudaStreamSynchronize(stream));
    EXPECT_PRED_FORMAT2(bitwise_equal, direct.read()[0], expected) << "direct call, n=" << n;

    cudaGraph_t graph;
    TALLY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    tally::reduce(gpu, static_cast<const float*>(x.data()), n, replayed.data());
    TALLY_CUDA(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    TALLY_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 3; ++replay) {
      replayed.poison();
      TALLY_CUDA(cudaGraphLaunch(exec, stream));
      TALLY_CUDA(cudaStreamSynchronize(stream));
      EXPECT_PRED_FORMAT2(bitwise_equal, replayed.read()[0], expected) << "n=" << n << " replay " << replay;
    }
    TALLY_CUDA(cudaGraphExecDestroy(exec));
    TALLY_CUDA(cudaGraphDestroy(graph));
    TALLY_CUDA(cudaStreamDestroy(stream));
  }
}

// A growth the device cannot hold fails with the CUDA error, and leaves the
// workspace empty and usable: the next, valid call allocates what it needs
// (before, the failed block's size stayed as the capacity to grow from, so
// every later call asked for even more and failed too: 38 tests on the
// H100 after one index_add of 2^31 rows ran out of memory).
TYPED_TEST(ReduceGraph, ProvokedCudaErrorOfAFailedGrowthLeavesTheWorkspaceUsable) {
  auto& rng = this->rng;
  workspace ws;
  EXPECT_THROW(ws.get(std::size_t{1} << 60, nullptr), cuda_error);
  const auto host = random_values<float>(rng, 300000);
  buffer<float> x(true, host.size()), sum(true, 1);
  x.write(host);
  tally::reduce(tally::gpu.with(ws), static_cast<const float*>(x.data()), static_cast<std::int64_t>(host.size()),
                sum.data());
  TALLY_CUDA(cudaDeviceSynchronize());
  EXPECT_PRED_FORMAT2(bitwise_equal, sum.read()[0], reduce_expected<float>(host.data(), 300000));
}

}  // namespace
}  // namespace tally::testing
