// CUDA graphs for every algorithm: a call either replays correctly from a
// captured graph, checked against a host reference (not another GPU call),
// or is refused at capture with a clear error -- never a graph that records
// an allocation it cannot replay. Covered: the first call on a fresh
// workspace, a call that must grow it (reduce, and the weighted histogram,
// scatter_reduce and index_add), a call on the stream's own pool, the
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

// The scatter family takes its scratch (the deterministic int64 sums, the
// error words) from the same workspace: on a fresh one, and on one sized by a
// smaller call, the capture is refused; once reserved, it replays.
TYPED_TEST(GraphGpu, ScatterFamilyOnAFreshOrTooSmallWorkspaceIsRefusedAndReplaysOnceReserved) {
  auto& stream = this->stream;
  auto& rng = this->rng;
  SCOPED_TRACE(rng.trace());
  const std::int64_t n = 1000003, bins = 100000, cols = 4, out_rows = 5000;
  const auto host = samples_with_outliers(rng, static_cast<std::size_t>(n), -1.0, 1.0);
  std::vector<double> weights(n);
  std::vector<std::int64_t> keys(n);
  for (auto& w : weights) w = static_cast<double>(rng.integer(-4, 4));
  for (auto& k : keys) k = rng.integer(0, bins - 1);
  std::vector<float> rows(static_cast<std::size_t>(n * cols));
  for (auto& v : rows) v = static_cast<float>(rng.integer(-4, 4));
  guarded<double> x(true, n), w(true, n), sums(true, bins), scattered(true, bins);
  guarded<std::int64_t> index(true, n);
  guarded<float> src(true, n * cols), out(true, out_rows * cols);
  guarded<tally::scatter_errors> record(true, 1);
  x.write(host);
  w.write(weights);
  index.write(keys);
  src.write(rows);
  // References, small integers throughout (every sum exact): the weighted
  // histogram by the test's own edges, the scatter-add, and index_add of the
  // rows whose key is below out_rows (the others are bad indices, reported).
  std::vector<double> want_sums(static_cast<std::size_t>(bins), 0.0), want_scattered(want_sums);
  std::vector<float> want_out(static_cast<std::size_t>(out_rows * cols), 0.0f);
  const auto edges = numpy_edges(bins, -1.0, 1.0);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = bin_between(edges, host[i]);
    if (k >= 0) want_sums[static_cast<std::size_t>(k)] += weights[i];
    want_scattered[static_cast<std::size_t>(keys[i])] += weights[i];
    if (keys[i] < out_rows)
      for (std::int64_t j = 0; j < cols; ++j)
        want_out[static_cast<std::size_t>(keys[i] * cols + j)] += rows[static_cast<std::size_t>(i * cols + j)];
  }
  std::int64_t first_bad = -1;
  for (std::int64_t i = 0; i < n && first_bad < 0; ++i)
    if (keys[i] >= out_rows) first_bad = i;
  tally::histogram_options opts;
  opts.deterministic = true;  // int64 sums in the workspace
  opts.errors = record.data();
  tally::index_add_options add_opts;
  add_opts.deterministic = true;
  add_opts.errors = record.data();
  // Call c (0 the weighted histogram, 1 scatter_reduce, 2 index_add) in
  // full, or small: 10 bins, 10 outputs, 1 output row -- less scratch, which
  // leaves the workspace too small for the full call.
  const auto call = [&](const auto& gpu, std::size_t c, bool small) {
    const std::int64_t b = small ? 10 : bins, rows_out = small ? 1 : out_rows;
    if (c == 0) tally::histogram_even_weighted(gpu, x.data(), w.data(), n, b, -1.0, 1.0, sums.data(), opts);
    if (c == 1) tally::scatter_reduce(gpu, index.data(), w.data(), n, scattered.data(), b, tally::plus{}, opts);
    if (c == 2)
      tally::index_add(gpu, index.data(), src.data(), n, cols, out.data(), rows_out, tally::plus{}, add_opts);
  };
  for (std::size_t c = 0; c < 3; ++c) {
    SCOPED_TRACE(c == 0 ? "histogram_even_weighted" : c == 1 ? "scatter_reduce" : "index_add");
    workspace ws;
    const auto gpu = tally::gpu.on(stream).with(ws);
    this->expect_refused([&] { call(gpu, c, false); }, {"workspace", "captured", "reserve"});
    call(gpu, c, true);
    TALLY_CUDA(cudaStreamSynchronize(stream));
    this->expect_refused([&] { call(gpu, c, false); }, {"workspace", "reserve"});
    ws.reserve(std::size_t(1) << 26, stream);
    const cudaGraphExec_t exec = this->capture([&] {
      TALLY_CUDA(cudaMemsetAsync(sums.data(), 0, bins * sizeof(double), stream));
      TALLY_CUDA(cudaMemsetAsync(scattered.data(), 0, bins * sizeof(double), stream));
      TALLY_CUDA(cudaMemsetAsync(out.data(), 0, out_rows * cols * sizeof(float), stream));
      call(gpu, c, false);
    });
    for (int replay = 0; replay < 2; ++replay) {
      TALLY_CUDA(cudaGraphLaunch(exec, stream));
      TALLY_CUDA(cudaStreamSynchronize(stream));
      if (c == 0) EXPECT_EQ(sums.read(), want_sums) << "replay " << replay;
      if (c == 1) EXPECT_EQ(scattered.read(), want_scattered) << "replay " << replay;
      if (c == 2) {
        EXPECT_EQ(out.read(), want_out) << "replay " << replay;
        EXPECT_EQ(record.read()[0].first_bad_index, first_bad) << "replay " << replay;
      }
    }
    TALLY_CUDA(cudaGraphExecDestroy(exec));
  }
  EXPECT_TRUE(sums.guards_intact() && scattered.guards_intact() && out.guards_intact() && record.guards_intact());
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
    const auto edges = numpy_edges(bins, -1.0, 1.0);
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = bin_between(edges, host[i]);
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
