// CUDA graphs for every algorithm: a call either replays correctly from a
// captured graph, checked against a host reference (not another GPU call),
// or is refused at capture with a clear error -- never a graph that records
// an allocation it cannot replay. Covered: the first call on a fresh
// workspace, a call that must grow it, a call on the stream's own pool, the
// checked scatter_reduce (refused unless options.errors takes the report),
// and the value-returning sum.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_errors_support.hpp"
#include "test_histogram_support.hpp"

namespace tally::testing {
namespace {

// GPU only: typed over gpu_only so the names are "GraphGpu/gpu.*" (backends.hpp),
// which the sanitizer stage of scripts/gpu-check selects.
template <class Side>
class GraphGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    TALLY_REQUIRE_GPU_OR_SKIP();  // fails instead under TALLY_REQUIRE_GPU=1
    TALLY_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream) cudaStreamDestroy(stream);
  }
  /// Captures record() on the stream; returns the executable graph.
  template <class Record>
  cudaGraphExec_t capture(const Record& record) {
    return capture_graph(stream, record);
  }
  /// Expects record() to be refused at capture with a tally::error holding
  /// `words`, and the stream usable afterwards.
  template <class Record>
  void expect_refused(const Record& record, std::initializer_list<std::string> words) {
    TALLY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    try {
      record();
      ADD_FAILURE() << "captured without an error";
    } catch (const tally::error& e) {
      const std::string what = e.what();
      for (const auto& w : words) EXPECT_NE(what.find(w), std::string::npos) << "'" << w << "' missing from: " << what;
    }
    cudaGraph_t graph = nullptr;
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
  }
  cudaStream_t stream = nullptr;
  random_source rng;
};
TYPED_TEST_SUITE(GraphGpu, gpu_only, backend_names);

TYPED_TEST(GraphGpu, ReduceOnAFreshOrTooSmallWorkspaceIsRefusedAndReplaysOnceReserved) {
  auto& stream = this->stream;
  auto& rng = this->rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t n = 3000000;
  std::vector<float> host(n);
  double exact = 0;
  for (auto& v : host) v = static_cast<float>(rng.integer(-8, 8)), exact += v;  // exact in float
  guarded<float> x(true, n), out(true, 1);
  x.write(host);
  workspace ws;
  const auto gpu = tally::gpu.on(stream).with(ws);
  this->expect_refused([&] { tally::reduce(gpu, static_cast<const float*>(x.data()), n, out.data()); },
                 {"workspace", "captured", "reserve"});
  // Sized by a small call: the larger one must grow it, which is refused too.
  tally::reduce(gpu, static_cast<const float*>(x.data()), 1000, out.data());
  TALLY_CUDA(cudaStreamSynchronize(stream));
  this->expect_refused([&] { tally::reduce(gpu, static_cast<const float*>(x.data()), n, out.data()); },
                 {"workspace", "reserve"});
  ws.reserve(std::size_t(1) << 24, stream);
  const cudaGraphExec_t exec = this->capture([&] { tally::reduce(gpu, static_cast<const float*>(x.data()), n, out.data()); });
  for (int replay = 0; replay < 3; ++replay) {
    TALLY_CUDA(cudaGraphLaunch(exec, stream));
    TALLY_CUDA(cudaStreamSynchronize(stream));
    EXPECT_EQ(out.read()[0], static_cast<float>(exact)) << "replay " << replay;
  }
  EXPECT_TRUE(out.guards_intact());
  TALLY_CUDA(cudaGraphExecDestroy(exec));
  // The value-returning form waits: refused with a clear message.
  this->expect_refused([&] { (void)tally::sum(gpu, static_cast<const float*>(x.data()), n); }, {"sum", "reduce()"});
}

TYPED_TEST(GraphGpu, HistogramsReplayOnTheStreamsPoolForEveryStrategy) {
  auto& stream = this->stream;
  auto& rng = this->rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t n = 1000003;
  const auto host = samples_with_outliers(rng, static_cast<std::size_t>(n), -1.0, 1.0);
  std::vector<double> weights(n);
  for (auto& w : weights) w = static_cast<double>(rng.integer(-4, 4));
  guarded<double> x(true, n), w(true, n);
  x.write(host);
  w.write(weights);
  const auto gpu = tally::gpu.on(stream);  // the stream's own workspace
  for (std::int64_t bins : {5, 3000, 100000}) {
    const auto expected = reference_even<std::int32_t>(host, bins, -1.0, 1.0);
    std::vector<double> expected_weighted(static_cast<std::size_t>(bins), 0.0);
    const auto key = tally::detail::make_even_bins("reference", bins, -1.0, 1.0);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = key(host[i]);
      if (k >= 0) expected_weighted[static_cast<std::size_t>(k)] += weights[i];  // small integers: exact
    }
    guarded<std::int32_t> counts(true, bins);
    guarded<double> sums(true, bins);
    for (auto s : kAllStrategies) {
      if (!strategy_fits(s, bins, 8)) continue;
      for (bool deterministic : {false, true}) {
        SCOPED_TRACE(std::string(tally::to_string(s)) + " bins " + std::to_string(bins) +
                     (deterministic ? " deterministic" : ""));
        tally::histogram_options opts;
        opts.strategy = s;
        opts.deterministic = deterministic;
        scatter_errors* record = nullptr;
        TALLY_CUDA(cudaMalloc(&record, sizeof(scatter_errors)));
        opts.errors = record;  // deterministic calls report bad values without waiting
        const auto run = [&] {
          tally::histogram_even(gpu, x.data(), n, bins, -1.0, 1.0, counts.data(), opts);
          tally::histogram_even_weighted(gpu, x.data(), w.data(), n, bins, -1.0, 1.0, sums.data(), opts);
        };
        run();  // warm-up: sizes the stream's workspace
        TALLY_CUDA(cudaStreamSynchronize(stream));
        const cudaGraphExec_t exec = this->capture(run);
        for (int replay = 0; replay < 2; ++replay) {
          TALLY_CUDA(cudaMemsetAsync(counts.data(), 0x5A, bins * sizeof(std::int32_t), stream));
          TALLY_CUDA(cudaGraphLaunch(exec, stream));
          TALLY_CUDA(cudaStreamSynchronize(stream));
          EXPECT_EQ(counts.read(), expected) << "replay " << replay;
          EXPECT_EQ(sums.read(), expected_weighted) << "replay " << replay;
        }
        EXPECT_TRUE(counts.guards_intact());
        EXPECT_TRUE(sums.guards_intact());
        TALLY_CUDA(cudaGraphExecDestroy(exec));
        TALLY_CUDA(cudaFree(record));
      }
    }
  }
}

TYPED_TEST(GraphGpu, CheckedScatterReplaysWithTheErrorsRecordAndIsRefusedWithout) {
  auto& stream = this->stream;
  auto& rng = this->rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t n = 500009, size = 1000;
  std::vector<std::int64_t> index(n);
  std::vector<double> value(n);
  for (auto& k : index) k = rng.integer(0, size - 1);
  for (auto& v : value) v = static_cast<double>(rng.integer(-9, 9));
  guarded<std::int64_t> idx(true, n);
  guarded<double> val(true, n), out(true, size);
  guarded<tally::scatter_errors> record(true, 1);
  idx.write(index);
  val.write(value);
  const auto gpu = tally::gpu.on(stream);
  for (auto s : kAllStrategies) {
    if (!strategy_fits(s, size, 8)) continue;
    for (bool deterministic : {false, true}) {
      SCOPED_TRACE(std::string(tally::to_string(s)) + (deterministic ? " deterministic" : ""));
      tally::histogram_options opts;
      opts.strategy = s;
      opts.deterministic = deterministic;
      // Without a record, a checked call would wait: refused before anything is recorded.
      this->expect_refused([&] { tally::scatter_reduce(gpu, idx.data(), val.data(), n, out.data(), size, tally::plus{}, opts); },
                     {"tally::scatter_reduce", "'options.errors'"});
      opts.errors = record.data();
      const auto run = [&] {
        TALLY_CUDA(cudaMemsetAsync(out.data(), 0, size * sizeof(double), stream));
        tally::scatter_reduce(gpu, idx.data(), val.data(), n, out.data(), size, tally::plus{}, opts);
      };
      run();
      TALLY_CUDA(cudaStreamSynchronize(stream));
      const cudaGraphExec_t exec = this->capture(run);
      for (int bad : {0, 1}) {
        auto data = index;
        if (bad) data[4242] = size + 5;
        idx.write(data);
        std::vector<double> want(static_cast<std::size_t>(size), 0.0);
        for (std::int64_t i = 0; i < n; ++i)
          if (data[i] < size) want[static_cast<std::size_t>(data[i])] += value[i];
        TALLY_CUDA(cudaGraphLaunch(exec, stream));
        TALLY_CUDA(cudaStreamSynchronize(stream));
        EXPECT_EQ(out.read(), want) << "bad " << bad;
        const auto seen = record.read()[0];
        EXPECT_EQ(seen.first_bad_index, bad ? 4242 : -1);
        EXPECT_EQ(seen.bad_value, 0);
      }
      idx.write(index);
      EXPECT_TRUE(out.guards_intact());
      EXPECT_TRUE(record.guards_intact());
      TALLY_CUDA(cudaGraphExecDestroy(exec));
    }
  }
}

}  // namespace
}  // namespace tally::testing
