// CG's determinism: the same bits on every run, at every CPU thread count,
// in every GPU mode and grid, and between the CPU and the GPU; the host tree
// the CPU CG uses equals tally::dot; capture into a caller's CUDA graph.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "test_cg_support.hpp"

namespace tally::testing {
namespace {

class CgBits : public ::testing::Test {
 protected:
  random_source rng;
};

// The chunked host tree (one aligned chunk after another, then the chunk
// values) is tally::dot's tree, for sizes around every chunk boundary.
TEST_F(CgBits, HostChunkTreeEqualsTallyDot) {
  SCOPED_TRACE(rng.trace());
  auto check = [&](auto zero, std::int64_t n, std::int64_t chunk) {
    using T = decltype(zero);
    constexpr int V = tree::vector_width<T>;
    const auto x = random_values<T>(rng, n), y = random_values<T>(rng, n);
    std::vector<T> values, leaves(chunk), scratch(chunk);
    for (std::int64_t first = 0; first < n; first += chunk) {
      const std::int64_t count = std::min(chunk, n - first);
      for (std::int64_t k = 0; k < count; ++k) leaves[k] = tally::detail::multiply_rounded(x[first + k], y[first + k]);
      values.push_back(sv::detail::chunk_value<V>(leaves.data(), count, scratch.data(), sv::detail::add_sums{}));
    }
    const T mine = sv::detail::root_value(values, sv::detail::add_sums{});
    T want;
    tally::dot(tally::cpu, x.data(), y.data(), n, &want);
    EXPECT_EQ(0, std::memcmp(&mine, &want, sizeof(T))) << "n=" << n << " chunk=" << chunk << " " << mine << " vs " << want;
  };
  for (std::int64_t n : {1, 3, 4, 5, 255, 256, 257, 4095, 4096, 4097, 70001, 300000})
    for (std::int64_t chunk : {256, 4096, 32768}) {
      check(float{}, n, chunk);
      check(double{}, n, chunk);
    }
}

// The CPU solve gives the same bits at 1, 2, 3 and 27 threads and on a
// rerun, and so with every chunk size: 13 824 rows are 4 chunks of 4096 at 1
// and 2 threads, 7 of 2048 at 3, 54 of 256 at 27 (host_chunk_rows: at least
// 2 chunks a thread, chunks of at least 256 rows).
TEST_F(CgBits, CpuSameBitsAtEveryThreadCount) {
  SCOPED_TRACE(rng.trace());
  ASSERT_EQ(sv::detail::host_chunk_rows(13824, 2), 4096);
  ASSERT_EQ(sv::detail::host_chunk_rows(13824, 3), 2048);
  ASSERT_EQ(sv::detail::host_chunk_rows(13824, 27), 256);  // the smallest chunk (the H100 host's g = 31)
  const auto a = sv::poisson3d_27pt<float, std::int32_t>(24);
  const auto b = random_rhs(a, rng);
  const std::vector<float> x0(b.size(), 0.0f);
  const auto one = solve_on<cpu_side>(a, b, x0, {}, 0, 0, tally::cpu.with_threads(1));
  ASSERT_EQ(one.result.status, sv::cg_status::converged);
  for (int threads : {2, 3, 27, 2}) {
    const auto other = solve_on<cpu_side>(a, b, x0, {}, 0, 0, tally::cpu.with_threads(threads));
    EXPECT_EQ(other.result.iterations, one.result.iterations) << threads;
    EXPECT_TRUE(same_bits(other.x, one.x)) << threads;
    EXPECT_TRUE(same_bits(other.history, one.history)) << threads;
    EXPECT_EQ(other.result.relative_residual, one.result.relative_residual);
  }
  sv::cg_options pipelined;
  pipelined.pipelined = true;
  const auto p1 = solve_on<cpu_side>(a, b, x0, pipelined, 0, 0, tally::cpu.with_threads(1));
  const auto p3 = solve_on<cpu_side>(a, b, x0, pipelined, 0, 0, tally::cpu.with_threads(3));
  ASSERT_EQ(p1.result.status, sv::cg_status::converged);
  EXPECT_EQ(p1.result.iterations, p3.result.iterations);
  EXPECT_TRUE(same_bits(p1.x, p3.x));
  EXPECT_TRUE(same_bits(p1.history, p3.history));
}

// GPU-only behaviours: typed over gpu_only, so the names are "CgBitsGpu/gpu.*"
// and a missing GPU fails them under TALLY_REQUIRE_GPU=1 (backends.hpp).
// CgBitsGpu runs the modes without conditional graph nodes (persistent and
// replayed), CgGraphGpu the graph mode's conditional while node: the same
// kernels, but compute-sanitizer's racecheck and synccheck cannot run that
// node (tests/repro/sanitizer_conditional_while.cu), so scripts/gpu-check
// leaves CgGraphGpu out of those two tools.
template <class Side>
class CgBitsGpu : public on_backend<Side> {
 protected:
  random_source rng;
};
TYPED_TEST_SUITE(CgBitsGpu, gpu_only, backend_names);
template <class Side>
class CgGraphGpu : public on_backend<Side> {
 protected:
  random_source rng;
};
TYPED_TEST_SUITE(CgGraphGpu, gpu_only, backend_names);

/// True when every entry of v from `first` on is NaN (never written).
bool unwritten_from(const std::vector<double>& v, std::size_t first) {
  for (std::size_t k = first; k < v.size(); ++k)
    if (!std::isnan(v[k])) return false;
  return true;
}

template <class T>
void expect_same_solve(const solve_output<T>& want, const solve_output<T>& got, const std::string& what) {
  EXPECT_EQ(got.result.status, want.result.status) << what;
  EXPECT_EQ(got.result.iterations, want.result.iterations) << what;
  EXPECT_TRUE(same_bits(got.x, want.x)) << what << ": iterates differ";
  // The histories' lengths follow each solve's max_iterations: the written
  // entries equal, the rest untouched.
  const auto written = static_cast<std::size_t>(want.result.iterations + 1);
  ASSERT_GE(got.history.size(), written) << what;
  ASSERT_GE(want.history.size(), written) << what;
  EXPECT_EQ(0, std::memcmp(got.history.data(), want.history.data(), written * sizeof(double)))
      << what << ": residual histories differ";
  EXPECT_TRUE(unwritten_from(got.history, written)) << what << ": history written past the last iteration";
  EXPECT_EQ(got.result.relative_residual, want.result.relative_residual) << what;
}

/// A GPU execution to compare with the CPU: mode, persistent grid, unroll.
struct gpu_variant {
  sv::cg_mode mode;
  int grid, unroll;
};

/// The replayed mode's iteration limit in these tests: a few past the CPU's
/// count, so that the last body is partly and the next wholly a no-op, and
/// few bodies (each launches its kernels, slow under the sanitizers).
std::int64_t replayed_limit(std::int64_t iterations) { return iterations + 5; }

// CPU and GPU: the same iterates, counts and histories, in each GPU variant
// given, f32 and f64, CSR and matrix-free, Jacobi and none, with periodic
// true residuals (sizes that are not multiples of a block or a chunk).
void expect_cpu_bits_in(random_source& rng, std::initializer_list<gpu_variant> variants) {
  auto run = [&](auto zero, std::int64_t g, int matrix_free, sv::cg_preconditioner pre, bool pipelined = false,
                 std::size_t x_offset = 0) {
    using T = decltype(zero);
    const auto a = matrix_free == 7 ? sv::poisson3d_7pt<T, std::int32_t>(g) : sv::poisson3d_27pt<T, std::int32_t>(g);
    const auto b = random_rhs(a, rng);
    const std::vector<T> x0(b.size(), T(0.25));
    sv::cg_options o;
    o.preconditioner = pre;
    o.true_residual_interval = 7;
    o.rtol = sizeof(T) == 4 ? 1e-6 : 1e-12;
    o.pipelined = pipelined;
    // Under the sanitizers (10-100x slower), the large grids run a few
    // iterations: the same kernels in the same launch shapes, compared with
    // the CPU at the same limit.
    const bool short_run = under_sanitizer() && g >= 58;
    if (short_run) o.max_iterations = 4;
    const auto cpu = solve_on<cpu_side>(a, b, x0, o, matrix_free, g);
    ASSERT_EQ(cpu.result.status, short_run ? sv::cg_status::iteration_limit : sv::cg_status::converged);
    for (const gpu_variant v : variants) {
      o.mode = v.mode;
      o.grid_blocks = v.grid;
      o.graph_unroll = v.unroll;
      if (!short_run)
        o.max_iterations = v.mode == sv::cg_mode::replayed ? replayed_limit(cpu.result.iterations) : 1000;
      const auto gpu = solve_on<gpu_side>(a, b, x0, o, matrix_free, g, tally::cpu, x_offset);
      EXPECT_EQ(gpu.result.mode, v.mode);
      expect_same_solve(cpu, gpu,
                        std::string(pipelined ? "pipelined " : "") + sv::mode_name(v.mode) + " grid " + std::to_string(v.grid) + " unroll " +
                            std::to_string(v.unroll) + " g=" + std::to_string(g) + " T=" + (sizeof(T) == 4 ? "f32" : "f64"));
    }
  };
  run(float{}, 13, 0, sv::cg_preconditioner::jacobi);
  run(double{}, 11, 0, sv::cg_preconditioner::none);
  run(float{}, 17, 27, sv::cg_preconditioner::jacobi);
  run(float{}, 15, 7, sv::cg_preconditioner::none);
  run(float{}, 12, 0, sv::cg_preconditioner::jacobi, true);
  run(double{}, 9, 0, sv::cg_preconditioner::none, true);
  // Graph mode with several passes per chunk (more than 2048 blocks of rows).
  run(float{}, 83, 7, sv::cg_preconditioner::jacobi);
  // Chunks of at least kV passes (in the persistent mode from kV × 132
  // blocks of rows on an H100, in the graph mode above kV/2 × 2048): kV rows
  // a lane in the update (vectors moved whole; x read element by element
  // when the caller's x is not aligned, as here) and, for the 27-point
  // stencil, in the search: g = 84 reads each line's window as
  // vectors and shuffles; g = 83 reads it element by element and puts many
  // lanes' rows across two grid lines, which take the row-by-row way.
  // Double: kV = 2.
  run(float{}, 84, 27, sv::cg_preconditioner::jacobi);
  run(float{}, 83, 27, sv::cg_preconditioner::jacobi, false, 1);
  run(double{}, 65, 0, sv::cg_preconditioner::none);
  // The persistent mode raises fewer than kV passes to kV where that leaves
  // a chunk an SM (persistent_passes): g = 60 (844 blocks of rows, the last
  // partly filled: 211 chunks) and a CSR g = 58 (763: 191, the last of 3),
  // where the target alone gives chunks of 1 pass.
  run(float{}, 60, 27, sv::cg_preconditioner::jacobi);
  run(float{}, 58, 0, sv::cg_preconditioner::none);
  // The graph mode's marching search (cg_stencil_march.cuh; shapes for the
  // H100's 132 SMs): g = 84 f32 in tiles of 12 lines through slabs of 2
  // planes (above), g = 36 in a tile of 28 lines and one of 8 (the last one
  // partly outside the grid), and f64 (two rows a thread) at g = 20.
  run(float{}, 36, 27, sv::cg_preconditioner::none);
  run(double{}, 20, 27, sv::cg_preconditioner::jacobi);
  // g = 132 (2 299 968 rows, a multiple of kV a line, so it marches): 8
  // passes a chunk in the graph mode, so the march's p·Ap sums kernel takes
  // 2 vector leaves a lane (the sizes above have fewer than kV passes and
  // take its row-by-row way). In the persistent mode 8 as well: on an H100's
  // 396 slots persistent_passes halves the target's 16 (562 chunks, 2 rounds
  // of 16 passes) to 8 (1124 chunks, 3 rounds of 8).
  run(float{}, 132, 27, sv::cg_preconditioner::jacobi);
  // g = 156 (3 796 416 rows, 1854 chunks of 8 passes in the graph mode, the
  // last not full): more than two waves of the update's blocks on an H100, so
  // it takes 4 chunks a block (update_group; 464 blocks, the last of 2), and
  // the p·Ap sums' last block holds 6 chunks, the last by the whole block.
  // Its 5 vectors (76 MB) do not fit in an H100's L2, so in the graph and
  // replayed modes x lags one search behind (lags_x): the march brings it up
  // to date, the periodic true residuals read it advanced, the result kernel
  // completes it. Again with an x that is not aligned to a vector (the march
  // reads and writes it element by element), and in f64 at g = 112 (56 MB).
  run(float{}, 156, 27, sv::cg_preconditioner::jacobi);
  run(float{}, 156, 27, sv::cg_preconditioner::none, false, 1);
  run(double{}, 112, 27, sv::cg_preconditioner::jacobi);
  // A CSR problem of at least kStoredDirectionsRows rows (1 061 208): the
  // persistent search stores its new directions before the product.
  run(float{}, 102, 0, sv::cg_preconditioner::jacobi);
}

TYPED_TEST(CgBitsGpu, CpuAndGpuAgreeBitForBitInEveryMode) {
  SCOPED_TRACE(this->rng.trace());
  expect_cpu_bits_in(this->rng, {gpu_variant{sv::cg_mode::persistent, 0, 1}, gpu_variant{sv::cg_mode::persistent, 3, 1},
                                 gpu_variant{sv::cg_mode::replayed, 0, 1}, gpu_variant{sv::cg_mode::replayed, 0, 4}});
}

TYPED_TEST(CgGraphGpu, CpuAndGpuAgreeBitForBitInTheGraphMode) {
  SCOPED_TRACE(this->rng.trace());
  expect_cpu_bits_in(this->rng, {gpu_variant{sv::cg_mode::graph, 0, 1}, gpu_variant{sv::cg_mode::graph, 0, 4}});
}

// The replayed mode stops at its iteration limit with the CPU's bits, the
// limit a multiple of the unroll or not, 0 included (one body, all no-ops);
// pipelined with a true residual after every iteration, the most bodies a
// solve can need (each check takes one of its own).
TYPED_TEST(CgBitsGpu, ReplayedModeStopsAtItsIterationLimit) {
  SCOPED_TRACE(this->rng.trace());
  const auto a = sv::poisson3d_27pt<double, std::int32_t>(8);
  const auto b = random_rhs(a, this->rng);
  const std::vector<double> x0(b.size(), 0.0);
  for (const bool pipelined : {false, true})
  for (const int unroll : {1, 3})
    for (const std::int64_t limit : {0, 1, 5, 6}) {
      sv::cg_options o;
      o.max_iterations = limit;
      o.rtol = 1e-14;
      o.pipelined = pipelined;
      o.true_residual_interval = pipelined ? 1 : 0;
      const auto cpu = solve_on<cpu_side>(a, b, x0, o);
      ASSERT_EQ(cpu.result.status, sv::cg_status::iteration_limit);
      o.mode = sv::cg_mode::replayed;
      o.graph_unroll = unroll;
      const auto gpu = solve_on<gpu_side>(a, b, x0, o);
      EXPECT_EQ(gpu.result.mode, sv::cg_mode::replayed);
      expect_same_solve(cpu, gpu, std::string(pipelined ? "pipelined " : "") + "limit " + std::to_string(limit) +
                                      " unroll " + std::to_string(unroll));
    }
}

// A symmetric, diagonally dominant CSR matrix whose rows hold their entries
// in a random order: a path graph's Laplacian plus a few hub rows joined to
// every third row. The GPU stages a warp's 32 rows in shared memory when
// they hold at most 1024 entries (cg_staging.cuh) and reads the matrix as it
// is otherwise; the hubs' warps take the second way, the rest the first.
sv::host_csr<float, std::int32_t> shuffled_hub_matrix(std::int64_t n, random_source& rng) {
  std::vector<std::vector<std::pair<std::int32_t, float>>> rows(n);
  auto join = [&](std::int64_t i, std::int64_t j, float w) {
    rows[i].push_back({static_cast<std::int32_t>(j), -w});
    rows[j].push_back({static_cast<std::int32_t>(i), -w});
  };
  for (std::int64_t i = 0; i + 1 < n; ++i) join(i, i + 1, 1.0f);
  for (const std::int64_t hub : {std::int64_t{40}, std::int64_t{41}, n - 7})
    for (std::int64_t j = 2; j < n; j += 3)
      if (j != hub && j != hub - 1 && j != hub + 1) join(hub, j, static_cast<float>(rng.real(0.001, 0.01)));
  sv::host_csr<float, std::int32_t> a;
  a.rows = a.cols = n;
  for (std::int64_t i = 0; i < n; ++i) {
    float off = 0;
    for (const auto& e : rows[i]) off += -e.second;
    rows[i].push_back({static_cast<std::int32_t>(i), off + 0.5f});
    for (std::size_t k = rows[i].size() - 1; k > 0; --k)  // Fisher-Yates: any stored order is valid CSR
      std::swap(rows[i][k], rows[i][static_cast<std::size_t>(rng.integer(0, static_cast<std::int64_t>(k)))]);
    for (const auto& e : rows[i]) {
      a.columns.push_back(e.first);
      a.values.push_back(e.second);
    }
    a.offsets.push_back(static_cast<std::int32_t>(a.values.size()));
  }
  return a;
}

// Staged and unstaged CSR rows, in stored (not column) order, give the CPU's
// bits in each of the modes given.
void expect_staging_bits_in(random_source& rng, std::initializer_list<sv::cg_mode> modes) {
  const auto a = shuffled_hub_matrix(3001, rng);
  ASSERT_GT(a.offsets[64] - a.offsets[32], 1024);  // the hubs' warp cannot stage
  const auto b = random_rhs(a, rng);
  const std::vector<float> x0(b.size(), 0.0f);
  sv::cg_options o;
  o.true_residual_interval = 5;
  const auto cpu = solve_on<cpu_side>(a, b, x0, o);
  ASSERT_EQ(cpu.result.status, sv::cg_status::converged);
  for (const auto mode : modes) {
    o.mode = mode;
    o.max_iterations = mode == sv::cg_mode::replayed ? replayed_limit(cpu.result.iterations) : 1000;
    expect_same_solve(cpu, solve_on<gpu_side>(a, b, x0, o), sv::mode_name(mode));
  }
}

TYPED_TEST(CgBitsGpu, StagedAndUnstagedCsrRowsGiveTheCpusBits) {
  SCOPED_TRACE(this->rng.trace());
  expect_staging_bits_in(this->rng, {sv::cg_mode::persistent, sv::cg_mode::replayed});
}

TYPED_TEST(CgGraphGpu, StagedAndUnstagedCsrRowsGiveTheCpusBits) {
  SCOPED_TRACE(this->rng.trace());
  expect_staging_bits_in(this->rng, {sv::cg_mode::graph});
}

// A persistent grid that cannot be co-resident falls back to the graph mode,
// says so, and still gives the CPU's bits.
TYPED_TEST(CgGraphGpu, PersistentFallsBackWhenTheGridCannotBeResident) {
  SCOPED_TRACE(this->rng.trace());
  const auto a = sv::poisson3d_27pt<float, std::int32_t>(9);
  const auto b = random_rhs(a, this->rng);
  const std::vector<float> x0(b.size(), 0.0f);
  sv::cg_options o;
  o.mode = sv::cg_mode::persistent;
  o.grid_blocks = 1 << 20;
  const auto gpu = solve_on<gpu_side>(a, b, x0, o);
  EXPECT_EQ(gpu.result.mode, sv::cg_mode::graph);
  EXPECT_NE(gpu.result.note.find("persistent mode not possible"), std::string::npos) << gpu.result.note;
  expect_same_solve(solve_on<cpu_side>(a, b, x0, {}), gpu, "fallback");
}

// The whole solve captured into the caller's graph and replayed, in each of
// the modes given, standard and pipelined CG: each replay gives the direct
// solve's bits (x reset before each).
void expect_capture_replays_in(random_source& rng, std::initializer_list<sv::cg_mode> modes) {
  const auto a = sv::poisson3d_27pt<float, std::int32_t>(10);
  const auto b = random_rhs(a, rng);
  const std::int64_t n = a.rows;
  const sv::device_csr<float, std::int32_t> A(a);
  buffer<float> db(true, n), dx(true, n), dx0(true, n);
  buffer<sv::cg_device_result> result(true, 1);
  db.write(b);
  dx0.write(std::vector<float>(n, 0.0f));
  cudaStream_t stream;
  TALLY_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  workspace ws;
  const auto gpu = tally::gpu.on(stream).with(ws);
  for (const bool pipelined : {false, true})
    for (const auto mode : modes) {
      const std::string what = std::string(pipelined ? "pipelined " : "") + sv::mode_name(mode);
      sv::cg_options o;
      o.mode = mode;
      o.pipelined = pipelined;
      // Converges in fewer: at most 19 iterations (pipelined 22) for 200 random
      // right-hand sides on the CPU backend, whose bits are the GPU's.
      if (mode == sv::cg_mode::replayed) o.max_iterations = 40;
      dx.write(std::vector<float>(n, 0.0f));
      const auto direct = sv::cg(gpu, A.view(), static_cast<const float*>(db.data()), dx.data(), o);  // also sizes ws
      ASSERT_EQ(direct.status, sv::cg_status::converged) << what;
      const auto want = dx.read();

      cudaGraph_t graph;
      TALLY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
      TALLY_CUDA(cudaMemcpyAsync(dx.data(), dx0.data(), n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      const auto enqueued =
          sv::cg_async(gpu, A.view(), static_cast<const float*>(db.data()), dx.data(), o, result.data());
      TALLY_CUDA(cudaStreamEndCapture(stream, &graph));
      EXPECT_EQ(enqueued, mode) << what;
      cudaGraphExec_t exec;
      TALLY_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      for (int replay = 0; replay < 2; ++replay) {
        dx.poison();
        result.poison();
        TALLY_CUDA(cudaGraphLaunch(exec, stream));
        TALLY_CUDA(cudaStreamSynchronize(stream));
        EXPECT_TRUE(same_bits(dx.read(), want)) << what << " replay " << replay;
        const auto r = result.read()[0];
        EXPECT_EQ(r.iterations, direct.iterations) << what;
        EXPECT_EQ(r.status, static_cast<int>(sv::cg_status::converged)) << what;
        EXPECT_EQ(r.relative_residual, direct.relative_residual) << what;
      }
      TALLY_CUDA(cudaGraphExecDestroy(exec));
      TALLY_CUDA(cudaGraphDestroy(graph));
    }
  TALLY_CUDA(cudaStreamDestroy(stream));
}

TYPED_TEST(CgBitsGpu, SolveCapturesIntoTheCallersGraph) {
  SCOPED_TRACE(this->rng.trace());
  expect_capture_replays_in(this->rng, {sv::cg_mode::persistent, sv::cg_mode::replayed});
}

TYPED_TEST(CgGraphGpu, SolveCapturesIntoTheCallersGraph) {
  SCOPED_TRACE(this->rng.trace());
  expect_capture_replays_in(this->rng, {sv::cg_mode::graph});
}

}  // namespace
}  // namespace tally::testing
