// CG's checks of its inputs: a CSR matrix's structure (validate_csr, and cg
// with options.check_matrix), its null arrays, a stencil whose fields
// disagree and, on the GPU, host memory where device memory belongs. Each
// is an invalid_argument naming the function and the argument, raised before
// any kernel reads the bad input. Option values: test_cg.cu.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "test_cg_support.hpp"

namespace tally::testing {
namespace {

using csr32 = sv::host_csr<float, std::int32_t>;

/// A CSR matrix's arrays copied as they are into a backend's memory (a
/// device_csr would refuse a malformed one).
template <class Side>
struct raw_csr {
  explicit raw_csr(const csr32& a)
      : rows(a.rows),
        cols(a.cols),
        offsets(Side::on_gpu, a.offsets.size()),
        columns(Side::on_gpu, a.columns.size()),
        values(Side::on_gpu, a.values.size()) {
    offsets.write(a.offsets);
    columns.write(a.columns);
    values.write(a.values);
  }
  sv::csr_view<float, std::int32_t> view() {
    return {rows, cols, static_cast<std::int64_t>(values.size()), offsets.data(), columns.data(), values.data()};
  }
  std::int64_t rows, cols;
  buffer<std::int32_t> offsets, columns;
  buffer<float> values;
};

/// One way to break a valid matrix, and words its message must hold.
struct defect {
  const char* what;
  std::function<void(csr32&)> apply;
  const char* words;
};

/// The 27 x 27 matrix the cases break: every row holds entries, so the
/// offsets increase strictly.
csr32 valid_matrix() { return sv::poisson3d_7pt<float, std::int32_t>(3); }

const std::vector<defect>& structure_defects() {
  static const std::vector<defect> cases{
      {"offsets start at 1", [](csr32& a) { a.offsets[0] = 1; }, "row offsets starting at 1, not 0"},
      {"offsets end short", [](csr32& a) { a.offsets.back() -= 1; }, "row offsets ending at"},
      {"offsets decrease", [](csr32& a) { std::swap(a.offsets[5], a.offsets[6]); },
       "row offsets that decrease (1 rows"},
      {"column -1", [](csr32& a) { a.columns[5] = -1; }, "1 column indices outside [0, 27)"},
      {"column = cols", [](csr32& a) { a.columns[7] = a.columns[9] = 27; }, "2 column indices outside [0, 27)"},
  };
  return cases;
}

template <class Side>
class CgChecks : public on_backend<Side> {};
TYPED_TEST_SUITE(CgChecks, backends, backend_names);

// validate_csr, and cg with check_matrix = always, refuse each broken
// structure, naming it, before the solve reads it.
TYPED_TEST(CgChecks, MalformedCsrStructureIsRejected) {
  auto b = this->template make<float>(27);
  auto x = this->template make<float>(27);
  sv::cg_options o;
  o.check_matrix = sv::cg_matrix_check::always;
  for (const auto& c : structure_defects()) {
    SCOPED_TRACE(c.what);
    auto host = valid_matrix();
    c.apply(host);
    raw_csr<TypeParam> a(host);
    expect_invalid([&] { sv::validate_csr(TypeParam::backend(), a.view()); }, {"tally::validate_csr", "'a'", c.words});
    expect_invalid([&] { sv::cg(TypeParam::backend(), a.view(), b.data(), x.data(), o); },
                   {"tally::cg", "'A'", c.words});
  }
}

// The sizes and pointers, checked on every call whatever check_matrix says.
TYPED_TEST(CgChecks, NullArraysAndImpossibleSizesAreRejected) {
  auto b = this->template make<float>(27);
  auto x = this->template make<float>(27);
  raw_csr<TypeParam> good(valid_matrix());
  struct layout {
    const char* what;
    std::function<void(sv::csr_view<float, std::int32_t>&)> apply;
    std::vector<std::string> words;
  };
  const layout cases[] = {
      {"null offsets", [](auto& v) { v.offsets = nullptr; }, {"'A.offsets'", "is null"}},
      {"null columns", [](auto& v) { v.columns = nullptr; }, {"'A.columns'", "is null"}},
      {"null values", [](auto& v) { v.values = nullptr; }, {"'A.values'", "is null"}},
      {"negative nnz", [](auto& v) { v.nnz = -1; }, {"'A'", "negative size"}},
      {"nnz past the index type", [](auto& v) { v.nnz = std::int64_t{1} << 31; }, {"'A'", "index type"}},
      {"entries without rows", [](auto& v) { v.rows = v.cols = 0; }, {"'A'", "entries but no rows"}},
  };
  sv::cg_options o;
  o.check_matrix = sv::cg_matrix_check::never;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto view = good.view();
    c.apply(view);
    try {
      sv::cg(TypeParam::backend(), view, b.data(), x.data(), o);
      ADD_FAILURE() << "no exception";
    } catch (const tally::invalid_argument& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("tally::cg: argument ", 0), 0u) << what;
      for (const auto& w : c.words) EXPECT_NE(what.find(w), std::string::npos) << "'" << w << "' missing: " << what;
    }
  }
}

// Valid matrices pass: sorted and shuffled rows, empty rows, 64-bit indices,
// the empty matrix; and a checked solve converges.
TYPED_TEST(CgChecks, ValidMatricesPass) {
  const auto backend = TypeParam::backend();
  auto shuffled = valid_matrix();
  std::swap(shuffled.columns[3], shuffled.columns[4]);  // any order within a row is valid CSR
  std::swap(shuffled.values[3], shuffled.values[4]);
  csr32 empty_rows;
  empty_rows.rows = 4;
  empty_rows.cols = 2;
  empty_rows.offsets = {0, 0, 2, 2, 3};
  empty_rows.columns = {1, 0, 1};
  empty_rows.values = {1, 2, 3};
  for (const auto* host : {&shuffled, &empty_rows}) {
    raw_csr<TypeParam> a(*host);
    EXPECT_NO_THROW(sv::validate_csr(backend, a.view()));
  }
  EXPECT_NO_THROW(sv::validate_csr(backend, sv::csr_view<float, std::int32_t>{}));  // 0 x 0, no arrays
  const auto wide = sv::convert_csr<double, std::int64_t>(valid_matrix());
  buffer<std::int64_t> offsets(TypeParam::on_gpu, wide.offsets.size()), columns(TypeParam::on_gpu, wide.columns.size());
  buffer<double> values(TypeParam::on_gpu, wide.values.size());
  offsets.write(wide.offsets);
  columns.write(wide.columns);
  values.write(wide.values);
  EXPECT_NO_THROW(
      sv::validate_csr(backend, sv::csr_view<double, std::int64_t>{wide.rows, wide.cols, wide.nnz(), offsets.data(),
                                                                   columns.data(), values.data()}));
  const auto a = valid_matrix();
  sv::cg_options o;
  o.check_matrix = sv::cg_matrix_check::always;
  const auto out = solve_on<TypeParam>(a, std::vector<float>(a.rows, 1.0f), std::vector<float>(a.rows, 0.0f), o);
  EXPECT_EQ(out.result.status, sv::cg_status::converged) << sv::describe(out.result.status);
}

// A hand-filled stencil whose fields disagree (the solve would index b and x
// by g³ rows while they hold `rows`).
TYPED_TEST(CgChecks, InconsistentStencilIsRejected) {
  auto b = this->template make<float>(30);
  auto x = this->template make<float>(30);
  auto s = sv::stencil_operator<float>::make(3, 27);
  s.rows = s.cols = 30;
  expect_invalid([&] { sv::cg(TypeParam::backend(), s, b.data(), x.data()); }, {"tally::cg", "'A'", "g = 3"});
  s = sv::stencil_operator<float>::make(3, 27);
  s.points = 9;
  expect_invalid([&] { sv::cg(TypeParam::backend(), s, b.data(), x.data()); }, {"tally::cg", "'A.points'", "7 or 27"});
}

// On the CPU, the default (automatic) checks the structure.
TEST(CgMatrixCheck, CpuChecksByDefault) {
  auto host = valid_matrix();
  host.columns[11] = 40;
  std::vector<float> b(27, 1.0f), x(27, 0.0f);
  expect_invalid([&] { sv::cg(tally::cpu, host.view(), b.data(), x.data()); }, {"tally::cg", "'A'", "outside [0, 27)"});
  EXPECT_EQ(x, std::vector<float>(27, 0.0f)) << "x written before the check";
}

// device_csr checks the host matrix before copying it (so its views need no
// check on the GPU): a bad one throws before any CUDA call.
TEST(DeviceCsr, RefusesAnInvalidHostMatrix) {
  auto host = valid_matrix();
  host.offsets[3] = host.offsets[2] - 1;
  expect_invalid([&] { sv::device_csr<float, std::int32_t> d(host); }, {"tally::validate_csr", "'a'", "decrease"});
  host = valid_matrix();
  host.columns.pop_back();
  expect_invalid([&] { sv::device_csr<float, std::int32_t> d(host); }, {"host_csr::view", "'columns'"});
}

// GPU only: host memory where the device must read or write is refused
// (a kernel touching it would end the CUDA context), and managed memory is
// accepted.
template <class Side>
class CgChecksGpu : public on_backend<Side> {};
TYPED_TEST_SUITE(CgChecksGpu, gpu_only, backend_names);

TYPED_TEST(CgChecksGpu, HostMemoryIsRejected) {
  const auto host = valid_matrix();
  const sv::device_csr<float, std::int32_t> A(host);
  buffer<float> b(true, 27), x(true, 27);
  buffer<double> history(true, 1001);
  buffer<sv::cg_device_result> result(true, 1);
  std::vector<float> host_vector(27, 1.0f);
  std::vector<double> host_history(1001);
  sv::cg_device_result host_result{};
  const sv::cg_options plain;
  sv::cg_options with_history;
  with_history.history = history.data();
  auto solve = [&](const sv::csr_view<float, std::int32_t>& a, const float* bp, float* xp, const sv::cg_options& o) {
    sv::cg(tally::gpu, a, bp, xp, o);
  };
  const auto expect_host_memory = [](const auto& call, const std::string& argument) {
    expect_invalid(call, {"tally::cg", argument, "is host memory"});
  };
  expect_host_memory([&] { solve(A.view(), host_vector.data(), x.data(), plain); }, "'b'");
  expect_host_memory([&] { solve(A.view(), b.data(), host_vector.data(), plain); }, "'x'");
  sv::cg_options host_hist = plain;
  host_hist.history = host_history.data();
  expect_host_memory([&] { solve(A.view(), b.data(), x.data(), host_hist); }, "'options.history'");
  auto with = [&](auto change) {
    auto v = A.view();
    change(v);
    return v;
  };
  expect_host_memory([&] { solve(with([&](auto& v) { v.offsets = host.offsets.data(); }), b.data(), x.data(), plain); },
                     "'A.offsets'");
  expect_host_memory([&] { solve(with([&](auto& v) { v.columns = host.columns.data(); }), b.data(), x.data(), plain); },
                     "'A.columns'");
  expect_host_memory([&] { solve(with([&](auto& v) { v.values = host.values.data(); }), b.data(), x.data(), plain); },
                     "'A.values'");
  expect_invalid(
      [&] { sv::cg_async(tally::gpu, A.view(), static_cast<const float*>(b.data()), x.data(), plain, &host_result); },
      {"tally::cg_async", "'result'", "is host memory"});
  expect_invalid([&] { sv::validate_csr(tally::gpu, host.view()); },
                 {"tally::validate_csr", "'a.offsets'", "is host memory"});
  // Managed memory is readable by the device: accepted, and the solve runs.
  float* managed = nullptr;
  TALLY_CUDA(cudaMallocManaged(&managed, 2 * 27 * sizeof(float)));
  for (int i = 0; i < 27; ++i) managed[i] = 1.0f, managed[27 + i] = 0.0f;
  const auto r = sv::cg(tally::gpu, A.view(), static_cast<const float*>(managed), managed + 27, with_history);
  TALLY_CUDA(cudaFree(managed));
  EXPECT_EQ(r.status, sv::cg_status::converged) << sv::describe(r.status);
}

// check_matrix = always waits for the device, which a stream being captured
// cannot: refused, naming the option (the capture is then ended cleanly).
TYPED_TEST(CgChecksGpu, MatrixCheckIsRefusedUnderCapture) {
  const sv::device_csr<float, std::int32_t> A(valid_matrix());
  buffer<float> b(true, 27), x(true, 27);
  buffer<sv::cg_device_result> result(true, 1);
  sv::cg_options o;
  o.check_matrix = sv::cg_matrix_check::always;
  cudaStream_t stream;
  TALLY_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  TALLY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  expect_invalid(
      [&] {
        sv::cg_async(tally::gpu.on(stream), A.view(), static_cast<const float*>(b.data()), x.data(), o, result.data());
      },
      {"tally::cg", "'options.check_matrix'", "captured"});
  cudaGraph_t graph = nullptr;
  TALLY_CUDA(cudaStreamEndCapture(stream, &graph));
  TALLY_CUDA(cudaGraphDestroy(graph));
  TALLY_CUDA(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace tally::testing
