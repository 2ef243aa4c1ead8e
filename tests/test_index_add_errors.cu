// Bad input to index_add on both backends, with 32- and 64-bit indices:
// rejected arguments are named and leave out and its guard zones untouched;
// bad indices found while running are reported (first position and value)
// after every row in range was applied, for both strategies and in
// deterministic mode, or left in options.errors without throwing; unchecked
// calls skip them silently. GPU only: the call with an errors record
// replays from a CUDA graph, the one without is refused at capture; rows
// beyond 2^31 (Huge).
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "test_errors_support.hpp"
#include "test_index_add_support.hpp"

namespace tally::testing {
namespace {

template <class Side>
class IndexAddErrors : public on_backend<Side> {};
TYPED_TEST_SUITE(IndexAddErrors, backends, backend_names);

/// Every mode a rejection must hold for: each strategy index_add has, plain and deterministic.
std::vector<index_add_options> every_index_add_mode() {
  std::vector<index_add_options> modes;
  for (auto s :
       {histogram_strategy::automatic, histogram_strategy::aggregated_atomics, histogram_strategy::plain_atomics,
        histogram_strategy::sorted_rows})
    for (bool deterministic : {false, true}) {
      index_add_options o;
      o.strategy = s;
      o.deterministic = deterministic;
      modes.push_back(o);
    }
  return modes;
}

std::string describe(const index_add_options& o) {
  return std::string(tally::to_string(o.strategy)) + (o.deterministic ? " deterministic" : "");
}

constexpr std::int64_t kRows = 20011, kOutRows = 37;

/// Rows of small integers (every sum exact, in any order and in fixed point)
/// with three bad indices: 777 (= out_rows), 5000 (negative), 15000 (huge).
template <class I>
row_case<I, double> bad_index_case(random_source& rng, std::int64_t cols) {
  row_case<I, double> c(kRows, cols, kOutRows, cols > 1 ? 1 : 0, 0, 0);
  c.index = make_index<I>(rng, kRows, kOutRows, keys::half_on_one);
  c.fill([&] { return static_cast<double>(rng.integer(-50, 50)); });
  c.index[777] = static_cast<I>(kOutRows);
  c.index[5000] = static_cast<I>(-3);
  c.index[15000] = static_cast<I>(sizeof(I) == 8 ? (std::int64_t{1} << 40) : (std::int64_t{1} << 30));
  return c;
}

template <class Side, class I>
void check_bad_indices_apply_the_rest() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (const std::int64_t cols : {std::int64_t{3}, std::int64_t{70}}) {
    auto c = bad_index_case<I>(rng, cols);
    const reference<I, double, plus> ref(c);
    device_case<I, double> d(Side::on_gpu, c);
    auto good = c;
    good.index[777] = good.index[5000] = good.index[15000] = 0;
    const reference<I, double, plus> good_ref(good);
    device_case<I, double> dg(Side::on_gpu, good);
    for (const auto& opts : every_index_add_mode()) {
      SCOPED_TRACE(describe(opts) + (sizeof(I) == 8 ? " int64 index" : " int32 index") + " " + c.describe());
      d.reset(c);
      expect_invalid([&] { run_case<Side>(d, c, plus{}, opts); },
                     {"tally::index_add", "'index'", "[777] = 37", "out_rows = 37", "applied"});
      auto got = d.out.read();
      for (std::size_t e = 0; e < got.size(); ++e) ASSERT_EQ(got[e], ref.value[e]) << "out element " << e;
      EXPECT_TRUE(d.out.guards_intact());
      // The error left nothing behind: the same call on good indices works.
      dg.reset(good);
      run_case<Side>(dg, good, plus{}, opts);
      got = dg.out.read();
      for (std::size_t e = 0; e < got.size(); ++e) ASSERT_EQ(got[e], good_ref.value[e]) << "out element " << e;
    }
    // Unchecked: the bad rows are skipped silently, the others applied.
    index_add_options unchecked;
    unchecked.checks = check_mode::unchecked;
    d.reset(c);
    run_case<Side>(d, c, plus{}, unchecked);
    const auto got = d.out.read();
    for (std::size_t e = 0; e < got.size(); ++e) ASSERT_EQ(got[e], ref.value[e]) << "unchecked, out element " << e;
    EXPECT_TRUE(d.out.guards_intact());
  }
}

TYPED_TEST(IndexAddErrors, BadIndicesAreReportedAfterTheOthersWereApplied) {
  check_bad_indices_apply_the_rest<TypeParam, std::int32_t>();
  check_bad_indices_apply_the_rest<TypeParam, std::int64_t>();
}

template <class Side, class I>
void check_errors_record() {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  auto c = bad_index_case<I>(rng, 5);
  const reference<I, double, plus> ref(c);
  device_case<I, double> d(Side::on_gpu, c);
  guarded<scatter_errors> record(Side::on_gpu, 1);
  for (auto opts : every_index_add_mode()) {
    SCOPED_TRACE(describe(opts) + (sizeof(I) == 8 ? " int64 index" : " int32 index"));
    opts.errors = record.data();
    d.reset(c);
    run_case<Side>(d, c, plus{}, opts);
    auto got = d.out.read();
    for (std::size_t e = 0; e < got.size(); ++e) ASSERT_EQ(got[e], ref.value[e]) << "out element " << e;
    auto seen = record.read()[0];
    EXPECT_EQ(seen.first_bad_index, 777);
    EXPECT_EQ(seen.bad_value, 0);
    EXPECT_TRUE(record.guards_intact());
    EXPECT_TRUE(d.out.guards_intact());
    // Good rows only (the first 777): the record says so (every call overwrites it).
    auto head = c;
    head.rows = 777;
    run_case<Side>(d, head, plus{}, opts);
    seen = record.read()[0];
    EXPECT_EQ(seen.first_bad_index, -1);
    EXPECT_EQ(seen.bad_value, 0);
    // No rows at all: the record is still written.
    record.write({scatter_errors{123, 7}});
    head.rows = 0;
    run_case<Side>(d, head, plus{}, opts);
    seen = record.read()[0];
    EXPECT_EQ(seen.first_bad_index, -1);
    EXPECT_EQ(seen.bad_value, 0);
    if (opts.deterministic) {
      auto with_nan = c;
      with_nan.rows = 777;
      with_nan.at(3, 2) = std::numeric_limits<double>::quiet_NaN();
      device_case<I, double> dn(Side::on_gpu, with_nan);
      run_case<Side>(dn, with_nan, plus{}, opts);
      seen = record.read()[0];
      EXPECT_EQ(seen.first_bad_index, -1);
      EXPECT_EQ(seen.bad_value, 1);
    }
  }
}

TYPED_TEST(IndexAddErrors, TheErrorsRecordTakesTheReportInsteadOfAThrow) {
  check_errors_record<TypeParam, std::int32_t>();
  check_errors_record<TypeParam, std::int64_t>();
}

/// Every rejected argument, in every mode: named, and out (guards included) untouched.
TYPED_TEST(IndexAddErrors, EveryBadArgumentIsNamedAndLeavesOutUntouched) {
  using S = TypeParam;
  const auto b = S::backend();
  constexpr std::int64_t rows = 100, cols = 4, out_rows = 10;
  guarded<std::int64_t> index(S::on_gpu, rows);
  guarded<double> src(S::on_gpu, rows * cols), out(S::on_gpu, out_rows * cols);
  index.write(std::vector<std::int64_t>(rows, 3));
  src.write(std::vector<double>(rows * cols, 1.5));
  out.write(std::vector<double>(out_rows * cols, 9.0));
  const std::int64_t* i = index.data();
  const double* s = src.data();
  double* o = out.data();
  const auto rejected = [&](const auto& call, const char* argument, const std::string& mode) {
    SCOPED_TRACE(mode + ": argument " + argument);
    const auto before = out.bytes();
    expect_invalid(call, {"tally::index_add", std::string("'") + argument + "'"});
    EXPECT_TRUE(unchanged(out, before));
  };
  for (const auto& opts : every_index_add_mode()) {
    const std::string mode = describe(opts);
    const auto call = [&](const std::int64_t* ii, const double* ss, std::int64_t r, std::int64_t c, double* oo,
                          std::int64_t orows, index_add_options op) {
      return [=] { tally::index_add(b, ii, ss, r, c, oo, orows, plus{}, op); };
    };
    rejected(call(nullptr, s, rows, cols, o, out_rows, opts), "index", mode);
    rejected(call(i, nullptr, rows, cols, o, out_rows, opts), "src", mode);
    rejected(call(i, s, rows, cols, nullptr, out_rows, opts), "out", mode);
    rejected(call(i, s, -1, cols, o, out_rows, opts), "rows", mode);
    rejected(call(i, s, rows, -1, o, out_rows, opts), "cols", mode);
    rejected(call(i, s, rows, cols, o, -1, opts), "out_rows", mode);
    rejected(call(i, s, std::int64_t{1} << 62, cols, o, out_rows, opts), "rows", mode);         // overflows
    rejected(call(i, s, rows, cols, o, std::int64_t{1} << 61, opts), "out_rows", mode);         // overflows
    rejected(call(i, s, rows, cols, const_cast<double*>(s) + 8, out_rows, opts), "out", mode);  // overlaps src
    rejected(call(i, s, rows, cols, reinterpret_cast<double*>(const_cast<std::int64_t*>(i)) + 2, out_rows, opts), "out",
             mode);  // overlaps index
    index_add_options strided = opts;
    strided.src_stride = cols - 1;
    rejected(call(i, s, rows, cols, o, out_rows, strided), "options.src_stride", mode);
    strided.src_stride = -4;
    rejected(call(i, s, rows, cols, o, out_rows, strided), "options.src_stride", mode);
    strided.src_stride = 0;
    strided.out_stride = 2;
    rejected(call(i, s, rows, cols, o, out_rows, strided), "options.out_stride", mode);
    index_add_options forced = opts;
    forced.strategy = histogram_strategy::shared_memory;
    rejected(call(i, s, rows, cols, o, out_rows, forced), "options.strategy", mode);
    forced.strategy = histogram_strategy::cluster_memory;
    rejected(call(i, s, rows, cols, o, out_rows, forced), "options.strategy", mode);
    forced.strategy = histogram_strategy::hot_keys;
    rejected(call(i, s, rows, cols, o, out_rows, forced), "options.strategy", mode);
    index_add_options det = opts;
    det.deterministic = true;
    rejected([&] { tally::index_add(b, i, s, rows, cols, o, out_rows, maximum{}, det); }, "options.deterministic",
             mode);
    det.fixed_point_bits = -5000;
    rejected(call(i, s, rows, cols, o, out_rows, det), "options.fixed_point_bits", mode);
    index_add_options unchecked = opts;
    unchecked.checks = check_mode::unchecked;
    scatter_errors* record = nullptr;
    if (S::on_gpu) TALLY_CUDA(cudaMalloc(&record, sizeof(scatter_errors)));
    scatter_errors host_record;
    unchecked.errors = S::on_gpu ? record : &host_record;
    rejected(call(i, s, rows, cols, o, out_rows, unchecked), "options.errors", mode);
    if (S::on_gpu) {
      TALLY_CUDA(cudaFree(record));
      std::vector<std::int64_t> host_index(rows, 3);
      std::vector<double> host_src(rows * cols, 1.5), host_out(out_rows * cols, 0.0);
      rejected(call(host_index.data(), s, rows, cols, o, out_rows, opts), "index", mode);
      rejected(call(i, host_src.data(), rows, cols, o, out_rows, opts), "src", mode);
      expect_invalid(call(i, s, rows, cols, host_out.data(), out_rows, opts), {"tally::index_add", "'out'"});
      EXPECT_EQ(host_out, std::vector<double>(out_rows * cols, 0.0));
      index_add_options host_errors = opts;
      host_errors.errors = &host_record;
      rejected(call(i, s, rows, cols, o, out_rows, host_errors), "options.errors", mode);
    }
  }
  // A valid call right after all of that: row 3 of out gets 100 rows of 1.5.
  tally::index_add(b, i, s, rows, cols, o, out_rows);
  const auto got = out.read();
  EXPECT_EQ(got[3 * cols], 9.0 + 1.5 * rows);
  EXPECT_EQ(got[4 * cols], 9.0);
}

// ---- GPU only ---------------------------------------------------------------

template <class Side>
class IndexAddGpu : public on_backend<Side> {};
TYPED_TEST_SUITE(IndexAddGpu, gpu_only, backend_names);

TYPED_TEST(IndexAddGpu, ReplaysWithAnErrorsRecordAndIsRefusedWithout) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  cudaStream_t stream;
  TALLY_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  auto c = bad_index_case<std::int64_t>(rng, 6);
  c.index[777] = c.index[5000] = c.index[15000] = 1;
  device_case<std::int64_t, double> d(true, c);
  guarded<scatter_errors> record(true, 1);
  guarded<double> start(true, c.out.size());  // out's starting values (a pageable copy cannot be captured)
  start.write(c.out);
  workspace ws;
  const auto gpu = tally::gpu.on(stream).with(ws);
  for (const auto& mode : every_index_add_mode()) {
    SCOPED_TRACE(describe(mode));
    index_add_options opts = mode;
    // Without a record a checked call would wait: refused before anything is recorded.
    TALLY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    try {
      tally::index_add(gpu, d.index_data(), d.src_data(), c.rows, c.cols, d.out_data(), c.out_rows, plus{}, [&] {
        auto o = c.options();
        o.strategy = opts.strategy;
        o.deterministic = opts.deterministic;
        return o;
      }());
      ADD_FAILURE() << "captured without an error";
    } catch (const tally::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'options.errors'"), std::string::npos) << e.what();
    }
    cudaGraph_t abandoned = nullptr;
    (void)cudaStreamEndCapture(stream, &abandoned);
    if (abandoned) cudaGraphDestroy(abandoned);
    (void)cudaGetLastError();
    opts.errors = record.data();
    const auto run = [&] {
      TALLY_CUDA(
          cudaMemcpyAsync(d.out_data(), start.data(), c.out.size() * sizeof(double), cudaMemcpyDeviceToDevice, stream));
      auto o = c.options();
      o.strategy = opts.strategy;
      o.deterministic = opts.deterministic;
      o.errors = opts.errors;
      tally::index_add(gpu, d.index_data(), d.src_data(), c.rows, c.cols, d.out_data(), c.out_rows, plus{}, o);
    };
    run();  // sizes the workspace
    TALLY_CUDA(cudaStreamSynchronize(stream));
    const cudaGraphExec_t exec = capture_graph(stream, run);
    for (const int bad : {0, 1}) {
      auto data = c;
      if (bad) data.index[4242] = -1;
      d.index.write(data.index);
      const reference<std::int64_t, double, plus> ref(data);
      TALLY_CUDA(cudaGraphLaunch(exec, stream));
      TALLY_CUDA(cudaStreamSynchronize(stream));
      const auto got = d.out.read();
      for (std::size_t e = 0; e < got.size(); ++e)
        ASSERT_EQ(got[e], ref.value[e]) << "bad " << bad << ", element " << e;
      const auto seen = record.read()[0];
      EXPECT_EQ(seen.first_bad_index, bad ? 4242 : -1);
      EXPECT_EQ(seen.bad_value, 0);
    }
    d.index.write(c.index);
    EXPECT_TRUE(d.out.guards_intact());
    TALLY_CUDA(cudaGraphExecDestroy(exec));
  }
  TALLY_CUDA(cudaStreamDestroy(stream));
}

__global__ void fill_huge_case(std::int32_t* index, double* src, std::int64_t rows, std::int64_t out_rows) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < rows;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    index[i] = static_cast<std::int32_t>(i % out_rows);
    src[i] = static_cast<double>(1 + i % 4);
  }
}

// Rows beyond 2^31 (64-bit row numbers in every kernel): 2^31 + 33 rows of
// one column into 1000003 rows, every strategy and the deterministic mode
// (about 26 GB of GPU memory).
TYPED_TEST(IndexAddGpu, HugeRowsBeyondTwoToThe31) {
  const std::int64_t rows = (std::int64_t{1} << 31) + 33, out_rows = 1000003;
  std::int32_t* index = nullptr;
  double* src = nullptr;
  TALLY_CUDA(cudaMalloc(&index, static_cast<std::size_t>(rows) * sizeof(std::int32_t)));
  TALLY_CUDA(cudaMalloc(&src, static_cast<std::size_t>(rows) * sizeof(double)));
  fill_huge_case<<<1024, 256>>>(index, src, rows, out_rows);
  TALLY_CUDA_LAUNCHED("fill_huge_case");
  std::vector<double> want(static_cast<std::size_t>(out_rows), 0.5);
  for (std::int64_t i = 0; i < rows; ++i)
    want[static_cast<std::size_t>(i % out_rows)] += static_cast<double>(1 + i % 4);
  guarded<double> out(true, static_cast<std::size_t>(out_rows));
  for (const auto& opts : every_index_add_mode()) {
    SCOPED_TRACE(describe(opts));
    out.write(std::vector<double>(static_cast<std::size_t>(out_rows), 0.5));
    tally::index_add(tally::gpu, index, src, rows, 1, out.data(), out_rows, plus{}, opts);
    EXPECT_EQ(out.read(), want);
    EXPECT_TRUE(out.guards_intact());
  }
  TALLY_CUDA(cudaFree(index));
  TALLY_CUDA(cudaFree(src));
}

}  // namespace
}  // namespace tally::testing
