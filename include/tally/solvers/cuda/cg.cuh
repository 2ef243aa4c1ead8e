// The GPU backend of cg(): scratch, the choice between the persistent and the
// graph mode, and the device-side loop (a conditional while node, CUDA 12.4+,
// or, in the replayed mode, the body chained max_iterations / unroll times;
// built with the graph API rather than by stream capture, so that it runs on
// any stream, the legacy default stream included).
// No host synchronisation inside the solve: cg_async() only enqueues (it can
// be captured into the caller's graph); cg() waits once, for the result.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "tally/core/backend.hpp"
#include "tally/core/error.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
#include "tally/cuda/dispatch/pointer_checks.hpp"
#include "tally/cuda/graph_while.cuh"
#include "tally/cuda/launch.cuh"
#include "tally/cuda/workspace.hpp"
#include "tally/solvers/cg.hpp"
#include "tally/solvers/cuda/cg_kernels.cuh"
#include "tally/solvers/cuda/cg_stencil_march.cuh"
#include "tally/solvers/cuda/validate_csr.cuh"
#include "tally/solvers/detail/cg_checks.hpp"
#include "tally/solvers/operator.hpp"

namespace tally::solvers {

using kernels::cg_device_result;

namespace detail {

/// Up to this many rows, `automatic` picks the persistent kernel for a
/// stencil. The H100 timings decide the cut (27-point Poisson, f32, µs an
/// iteration, persistent against graph; bench/results/h100-2026-11-27-cg.json):
/// g = 128 (2^21 rows) 49.1 / 81.8, g = 200 (8·10^6 rows) 313.7 / 207.7.
inline constexpr std::int64_t kPersistentMaxRows = std::int64_t{1} << 22;
/// The same cut for a CSR matrix: persistent at every size measured. g = 128
/// 262.6 / 316.5, g = 200 1059 / 1096 (h100-2026-11-27-cg.json; three A/B runs
/// of the same day read 1055–1058 / 1070–1092 at g = 200). Above 2^23 rows
/// nothing was measured, so the graph mode, which needs no co-resident grid.
inline constexpr std::int64_t kCsrPersistentMaxRows = std::int64_t{1} << 23;
/// The same cut for pipelined CG, which was measured apart: at g = 128 its
/// persistent kernel is the slower one (CSR 376 against 357 µs in the graph
/// mode, matrix-free 156 against 123; bench/results/h100-2026-11-24-cg-rows-
/// per-lane.json and the run before it).
inline constexpr std::int64_t kPipelinedPersistentMaxRows = std::int64_t{1} << 19;

/// Vectors an iteration of the graph mode's marching search moves (x, r, the
/// two directions and Ap), against the L2 size: the measure of lags_x and of
/// the automatic mode's stencil cut.
inline constexpr std::int64_t kMarchVectors = 5;

/// Whether kMarchVectors vectors of n `bytes`-byte values pass `l2_bytes`.
constexpr bool vectors_pass_l2(std::int64_t n, std::size_t bytes, std::size_t l2_bytes) {
  return static_cast<std::size_t>(n) * bytes * kMarchVectors > l2_bytes;
}

/// Whether a standard stencil solve of n rows of `bytes`-byte values runs
/// faster in the graph mode than in the persistent one below the row cut: its
/// kMarchVectors vectors pass L2 (float), or half of it (double: the
/// persistent kernel holds 2 blocks an SM instead of 3 and turns latency-bound
/// sooner). H100, matrix-free, µs an iteration persistent / graph
/// (h100-2026-11-27-cg-automatic-cut-probe.txt, -automatic-sweep.txt): f32
/// g = 112 (28 MB of vectors) 34.1 / 39.8, g = 120 (35 MB) 52.5 / 47.6, g =
/// 128 (42 MB) 46.0 / 48.0, g = 136 (50 MB) 110–115 / 72.7, g = 140 (55 MB)
/// 112.9 / 70.3, g = 160 118.4 / 78.3; f64 g = 80 (20 MB) 37.3 / 45.9, g = 88
/// (27 MB) 50.4 / 42.3, g = 96 (35 MB) 60.0 / 55.1, g = 100 (40 MB) 71.0 /
/// 58.0, g = 108 (50 MB) 97.0 / 72.7, g = 128 129.6 / 91.4. (f32 g = 120 is
/// the one measured miss: g = 128, a power of two, runs its persistent kernel
/// faster than its neighbours.)
constexpr bool stencil_prefers_graph(std::int64_t n, std::size_t bytes, std::size_t l2_bytes) {
  return vectors_pass_l2(n, bytes, bytes >= 8 ? l2_bytes / 2 : l2_bytes);
}

/// What cg_mode::automatic runs for n rows (pipelined CG or not, a stencil
/// or a CSR matrix; `prefers_graph`: stencil_prefers_graph for the solve's
/// values). A standard stencil solve that prefers the graph mode runs it
/// below the row cut too.
constexpr cg_mode automatic_mode(std::int64_t n, bool pipelined, bool stencil, bool prefers_graph = false) {
  const std::int64_t cut = pipelined ? kPipelinedPersistentMaxRows
                           : stencil ? kPersistentMaxRows
                                     : kCsrPersistentMaxRows;
  const bool graph_first = stencil && !pipelined && prefers_graph;
  return n <= cut && !graph_first ? cg_mode::persistent : cg_mode::graph;
}

/// Graph mode: at most about this many chunks (the last block reduces them).
/// H100, 27-point, f32, matrix-free, µs an iteration for 1024 / 2048 / 4096 /
/// 8192: g = 128 103 / 108 / 147 / 224, g = 200 343 / 319 / 320 / 340 (fewer
/// than 4 passes a chunk lose the several-rows-a-lane leaves); measured before
/// the search's window (fit_window may take a stencil's passes lower).
inline constexpr std::int64_t kGraphTargetChunks = 2048;
/// Persistent mode: at most about this many chunks (every block reduces them
/// after each barrier). H100, g = 128, f32, 256 / 512 / 1024 chunks (32 / 16 /
/// 8 passes): matrix-free 50.9 / 55.6 / 49.1 µs an iteration, CSR 263.4 /
/// 305.3 / 261.2 (2026-11-27).
inline constexpr std::int64_t kPersistentTargetChunks = 1024;

/// kThreads-row passes per chunk so that there are at most about `target`
/// chunks (a power of two, at most 32: a warp keeps its passes' values one a
/// lane, see chunk_tree).
inline int passes_for(std::int64_t blocks_of_rows, std::int64_t target) {
  int passes = 1;
  while (passes < 32 && (blocks_of_rows + passes - 1) / passes > target) passes *= 2;
  return passes;
}

/// The persistent mode's cost of `passes` a chunk on `slots` co-resident
/// blocks: the rounds of chunks its busiest block takes (chunk c runs on block
/// c mod grid) times the passes of each. A block's round takes about as long
/// with its SM's other blocks idle as with them busy (the kernel is latency-
/// bound), so this is the iteration's length in passes.
inline std::int64_t persistent_rounds(std::int64_t blocks_of_rows, int passes, int slots) {
  const std::int64_t chunks = (blocks_of_rows + passes - 1) / passes;
  const std::int64_t grid = std::min<std::int64_t>(slots, chunks);
  return (chunks + grid - 1) / grid * passes;
}

/// The persistent mode's passes per chunk on a grid of at most `slots` blocks
/// (slots ≥ 1): passes_for(kPersistentTargetChunks), raised to kV<T> where
/// that still leaves a chunk for every SM, then halved once (not below that)
/// where that shortens persistent_rounds by an eighth or more.
/// - Fewer than kV passes a chunk take the row-by-row update and search (no
///   vector leaves); H100, 27-point g = 64, f32, µs an iteration, 1024 chunks
///   of 1 pass / 256 of 4: matrix-free 17.8 / 10.9, CSR 52.1 / 46.1 (512 of
///   2: 18.6 / 53.4; 128 of 8: 12.7 / 58.3). Below kV × sm_count blocks of
///   rows (g = 31: 117) the chunks would leave SMs idle.
/// - The halving: g = 200 on 396 slots, 977 chunks of 32 passes (3 rounds, the
///   third on 185 blocks) / 1954 of 16 (5 rounds): CSR 1054 / 977.5,
///   matrix-free 309.2 / 246.8 µs (2026-11-27). At g = 128 the 2048 chunks of
///   4 tie with 1024 of 8 (24 passes) and lose (CSR 272.7 against 261.1,
///   matrix-free 53.1 against 48.7): a chunk has its own cost, hence the
///   eighth; and every block reduces all the chunks' partials after each
///   barrier, hence once (at most about 2 × the target's chunks).
/// Like every chunking, it does not change the bits (see chunk_tree).
template <class T>
int persistent_passes(std::int64_t blocks_of_rows, int sm_count, int slots) {
  constexpr int kV = kernels::kV<T>;
  const int least = (blocks_of_rows + kV - 1) / kV >= sm_count ? kV : 1;
  const int passes = std::max(passes_for(blocks_of_rows, kPersistentTargetChunks), least);
  const int half = passes / 2;
  if (half >= least &&
      8 * persistent_rounds(blocks_of_rows, half, slots) <= 7 * persistent_rounds(blocks_of_rows, passes, slots))
    return half;
  return passes;
}

/// Chunks a block of the graph mode's update (cg_update_groups_kernel) takes
/// for `chunks` chunks when `resident` of its blocks fit on the device: 1 up
/// to two waves of chunks, else the smallest power of two (at most
/// kernels::kMaxUpdateGroup) whose groups fit one wave. H100, graph-mode
/// stencil, f32: 4 at g = 200 (1954 chunks, 489 blocks; the update had taken
/// four waves and its last block's root read all 1954 partials); 4 at g = 128
/// (512 chunks, 128 blocks) and at g = 132 was slower than 1.
constexpr int update_group(std::int64_t chunks, std::int64_t resident) {
  if (chunks <= 2 * resident) return 1;
  int group = 2;
  while (group < kernels::kMaxUpdateGroup && (chunks + group - 1) / group > resident) group *= 2;
  return group;
}

/// Where a solve's scratch lives, carved from one workspace draw.
template <class T>
struct gpu_cg_layout {
  kernels::cg_scratch<T> scratch;
  cg_vectors<T> vectors;
  cg_device_result* result;  ///< for cg()'s own copy back
};

inline std::size_t align_up(std::size_t x, std::size_t a = 256) { return (x + a - 1) / a * a; }

/// Whether the graph mode's search of A marches (cg_stencil_march.cuh).
template <class T, class Op>
bool graph_marches(const Op& A, const cg_options& o) {
  if constexpr (kernels::is_stencil<Op>) return !o.pipelined && kernels::marches<T>(A);
  else return false;
}

/// Whether x lags one search behind (cg_control::lag_x) in the graph mode of
/// a solve whose search marches (`marches`), of n rows of `bytes`-byte
/// values, on a device with `l2_bytes` of L2: where the iteration's vectors
/// do not fit in L2, so that the read of p it saves is a DRAM read. H100
/// (50 MB of L2), matrix-free, µs an iteration without / with the lag
/// (h100-2026-11-27-cg-lag-x-pdl-probe.txt): f32 g = 200 160.4 / 156.8,
/// g = 156 (76 MB of vectors) 89.2 / 84.2, g = 128 (42 MB) 52.4 / 55.2,
/// g = 64 28.8 / 31.1; f64 g = 200 330.4 / 310.2.
constexpr bool lags_x(bool marches, std::int64_t n, std::size_t bytes, std::size_t l2_bytes) {
  return marches && vectors_pass_l2(n, bytes, l2_bytes);
}

/// The solve's device memory from the workspace: control block, result,
/// partials, the march's leaves where `leaves` (and its groups' leaves where
/// the chunks have at least kV passes), and the vectors.
template <class T>
gpu_cg_layout<T> carve(const gpu_backend& gpu, const T* b, T* x, std::int64_t n, std::int64_t chunks, int passes,
                       bool pipelined, bool leaves) {
  const bool groups = leaves && passes >= kernels::kV<T>;
  const std::size_t vec = align_up(static_cast<std::size_t>(n) * sizeof(T));
  const int vector_count = pipelined ? 11 : 6;
  const std::size_t sizes[] = {
      align_up(sizeof(cg_control<T>)),
      align_up(sizeof(cg_device_result)),
      align_up(chunks * sizeof(residual_sums<T>)),
      align_up(chunks * sizeof(search_sums<T>)),
      align_up(chunks * sizeof(update_sums<T>)),
      align_up(chunks * sizeof(pipelined_sums<T>)),
      leaves ? align_up((n + kernels::kV<T> - 1) / kernels::kV<T> * sizeof(search_sums<T>)) : 0,
      groups ? align_up((n / kernels::kV<T> / kernels::kMarchGroup + 1) * sizeof(search_sums<T>)) : 0,
      vector_count * vec};
  std::size_t total = 0;
  for (const std::size_t s : sizes) total += s;
  auto* base = static_cast<unsigned char*>(tally::detail::scratch_for(gpu).get(total + 256, gpu.stream));
  gpu_cg_layout<T> l{};
  l.scratch.arrivals = reinterpret_cast<unsigned*>(base);  // the zeroed region's first word
  auto* p =
      reinterpret_cast<unsigned char*>(align_up(reinterpret_cast<std::uintptr_t>(base + workspace::kZeroedBytes)));
  l.scratch.control = reinterpret_cast<cg_control<T>*>(p);
  p += sizes[0];
  l.result = reinterpret_cast<cg_device_result*>(p);
  p += sizes[1];
  l.scratch.residual_partials = reinterpret_cast<residual_sums<T>*>(p);
  p += sizes[2];
  l.scratch.search_partials = reinterpret_cast<search_sums<T>*>(p);
  p += sizes[3];
  l.scratch.update_partials = reinterpret_cast<update_sums<T>*>(p);
  p += sizes[4];
  l.scratch.pipelined_partials = reinterpret_cast<pipelined_sums<T>*>(p);
  p += sizes[5];
  l.scratch.search_leaves = leaves ? reinterpret_cast<search_sums<T>*>(p) : nullptr;
  p += sizes[6];
  l.scratch.search_groups = groups ? reinterpret_cast<search_sums<T>*>(p) : nullptr;
  p += sizes[7];
  l.scratch.chunks = chunks;
  l.scratch.passes = passes;
  T* vectors[11] = {};
  for (int k = 0; k < vector_count; ++k) {
    vectors[k] = reinterpret_cast<T*>(p);
    p += vec;
  }
  l.vectors = {b,          x,          vectors[0], vectors[1], {vectors[2], vectors[3]}, vectors[4], vectors[5], n,
               vectors[6], vectors[7], vectors[8], vectors[9], vectors[10]};
  return l;
}

/// The outcome of the empty system (n = 0, so b = 0): converged at once,
/// history[0] = 0 as the CPU backend writes it.
template <class T>
__global__ void cg_empty_result_kernel(cg_device_result* result, double* history) {
  *result = {0, static_cast<int>(cg_status::converged), 0.0, 0.0};
  if (history != nullptr) history[0] = 0.0;
}

/// The GPU's checks of cg_async's arguments beyond check_cg_arguments: every
/// array is memory the device can read (a host pointer would crash the
/// context), and a CSR matrix's entries when options.check_matrix asks
/// (validate_csr; not while `stream` is captured, as it waits for the
/// counts). Throws invalid_argument naming the argument.
template <class Op, class T>
void check_gpu_arguments(const gpu_backend& gpu, const Op& A, const T* b, const T* x, const cg_options& o) {
  using tally::detail::check_device_pointer;
  check_device_pointer("cg", "b", b, A.rows);
  check_device_pointer("cg", "x", x, A.rows);
  check_device_pointer("cg", "options.history", o.history, 1);  // entry 0 at least (null: no history)
  if constexpr (is_csr_view<Op>) {
    check_csr_device_pointers("cg", "A", A);
    if (checks_matrix(o, true)) {
      if (tally::detail::stream_is_captured(gpu.stream))
        tally::detail::throw_invalid_argument("cg", "options.check_matrix",
                                              "is always, which waits for the device: not possible while the "
                                              "stream is captured (validate_csr the matrix before the capture)");
      check_csr_entries(gpu, A, "cg", "A");
    }
  }
}

/// Runs call() (a CUDA call returning cudaError_t) with this thread's capture
/// mode relaxed, then checks it: loading a kernel's module (lazy loading makes
/// the first use of a kernel do that) is not allowed while a stream of the
/// caller is being captured in the global or thread-local mode.
template <class Call>
void relaxed(const char* what, Call&& call) {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  TALLY_CUDA(cudaThreadExchangeStreamCaptureMode(&mode));
  const cudaError_t status = call();
  TALLY_CUDA(cudaThreadExchangeStreamCaptureMode(&mode));
  tally::detail::check_cuda(status, what);
}

/// Dynamic shared memory of a CG kernel for Op (the CSR stagers' buffers).
template <class Op>
constexpr std::size_t kStagingBytes = kernels::staging_bytes<Op>(kernels::kThreads);

/// Dynamic shared memory of the graph mode's search phase for chunks of
/// `passes` x kThreads rows: a stencil's window of directions, a CSR
/// matrix's stagers.
template <class T, class Op>
constexpr std::size_t search_shared_bytes(const Op& A, int passes) {
  if constexpr (kernels::is_stencil<Op>)
    return kernels::stencil_window_bytes<T>(A.g, static_cast<std::int64_t>(kernels::kThreads) * passes);
  else return kStagingBytes<Op>;
}

/// Lets `kernel` launch with `bytes` of dynamic shared memory (above the
/// default 48 KiB the kernel must opt in).
template <class Kernel>
void allow_shared_memory(Kernel kernel, std::size_t bytes) {
  if (bytes == 0) return;
  relaxed("cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) of a CG kernel", [&] {
    return cudaFuncSetAttribute(reinterpret_cast<const void*>(kernel), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                static_cast<int>(bytes));
  });
}

/// `passes`, halved (for a stencil) until the graph-mode search's window
/// leaves room for kPhaseBlocksPerSm blocks an SM, each of which also takes
/// ~1 KiB the device reserves and its static shared memory. The chunks only
/// split the GPU's work: the tree, and so the bits, do not depend on them.
template <class T, class Op>
int fit_window(const Op& A, int passes) {
  if constexpr (kernels::is_stencil<Op>) {
    const std::size_t budget = current_device_info().shared_memory_per_sm / kernels::kPhaseBlocksPerSm<Op> - 2048;
    while (passes > 1 && search_shared_bytes<T>(A, passes) > budget) passes /= 2;
  }
  return passes;
}

/// Blocks of `kernel` (kThreads threads, `shared_bytes` of dynamic shared
/// memory) that fit on one SM at once (0 if none does).
template <class Kernel>
int blocks_per_sm(Kernel kernel, std::size_t shared_bytes) {
  allow_shared_memory(kernel, shared_bytes);
  int per_sm = 0;
  relaxed("cudaOccupancyMaxActiveBlocksPerMultiprocessor of a CG kernel", [&] {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kernels::kThreads, shared_bytes);
  });
  return per_sm;
}

/// Blocks of `kernel` that fit on the device at once; at least one an SM.
template <class Kernel>
std::int64_t resident_blocks(Kernel kernel, std::size_t shared_bytes) {
  return static_cast<std::int64_t>(std::max(blocks_per_sm(kernel, shared_bytes), 1)) * current_device_info().sm_count;
}

/// Blocks of the persistent kernel that fit on the device at once (0 if none).
template <class T, class Op>
int persistent_capacity() {
  return blocks_per_sm(kernels::cg_persistent_kernel<T, Op>, kStagingBytes<Op>) * current_device_info().sm_count;
}

/// The control block a solve starts from: cg_control::make, and for a
/// stencil its constant M⁻¹ (see cg_control::constant_dinv; divide rounds as
/// the device's does).
template <class T, class Op>
cg_control<T> initial_control(const Op& A, const cg_options& o) {
  cg_control<T> c = cg_control<T>::make(o);
  if constexpr (kernels::is_stencil<Op>)
    c.constant_dinv = c.jacobi ? inverse_diagonal<T>(static_cast<T>(A.center())) : T(1);
  return c;
}

template <class T, class Op>
void launch_persistent(const gpu_backend& gpu, const Op& A, const cg_options& o, int grid,
                       const gpu_cg_layout<T>& l, cg_device_result* result) {
  allow_shared_memory(kernels::cg_persistent_kernel<T, Op>, kStagingBytes<Op>);
  cudaLaunchConfig_t config =
      tally::detail::launch_config(dim3(grid), dim3(kernels::kThreads), kStagingBytes<Op>, gpu.stream);
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  tally::detail::launch("launch of tally::solvers::kernels::cg_persistent_kernel", config,
                        kernels::cg_persistent_kernel<T, Op>, A, l.vectors, initial_control<T>(A, o), l.scratch, result);
}

/// Adds kernel(args...) on `grid` blocks of kThreads with `shared_bytes` of
/// dynamic shared memory to `graph`, after the `count` nodes at
/// `dependencies`; returns the node. The arguments are copied into the node.
template <class... Params, class... Args>
cudaGraphNode_t add_kernel_node(cudaGraph_t graph, const cudaGraphNode_t* dependencies, std::size_t count,
                                void (*kernel)(Params...), unsigned grid, std::size_t shared_bytes,
                                const Args&... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "one argument per kernel parameter");
  // Loaded now, outside any capture rule (see relaxed()).
  cudaFuncAttributes attributes{};
  relaxed("cudaFuncGetAttributes (loading a CG kernel)",
          [&] { return cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)); });
  std::tuple<std::decay_t<Params>...> values(args...);
  void* pointers[sizeof...(Params)];
  std::apply(
      [&](auto&... value) {
        int k = 0;
        ((pointers[k++] = static_cast<void*>(&value)), ...);
      },
      values);
  cudaKernelNodeParams params{};
  params.func = reinterpret_cast<void*>(kernel);
  params.gridDim = dim3(grid);
  params.blockDim = dim3(kernels::kThreads);
  allow_shared_memory(kernel, shared_bytes);
  params.sharedMemBytes = static_cast<unsigned>(shared_bytes);
  params.kernelParams = pointers;
  params.extra = nullptr;
  cudaGraphNode_t node;
  TALLY_CUDA(cudaGraphAddKernelNode(&node, graph, dependencies, count, &params));
  return node;
}

/// Adds one body of `unroll` iterations' kernels to the empty graph
/// `body`, in a chain; the last kernel sets `handle` (the while node's
/// condition) when `sets_handle` (the graph mode; else a replayed body). Each
/// kernel does nothing once the solve has finished.
template <class T, class Op>
void add_iterations(cudaGraph_t body, const Op& A, const cg_options& o, int unroll, const gpu_cg_layout<T>& l,
                    cudaGraphConditionalHandle handle, bool sets_handle) {
  const std::int64_t chunks = l.scratch.chunks;
  const cudaGraphConditionalHandle none{};
  const std::size_t shared = kStagingBytes<Op>;
  cudaGraphNode_t previous{};
  std::size_t previous_count = 0;
  // Kernels that do not stage A's rows (update, vectors, the pipelined
  // restart, which runs rarely and reads A as it is) need no staging memory;
  // the search takes its own (a stencil's window). `extra`: the kernel's
  // parameters after sets_handle.
  auto phase = [&](auto kernel, std::int64_t blocks, std::size_t shared_bytes, bool last, auto... extra) {
    const bool sets = sets_handle && last;
    previous = add_kernel_node(body, previous_count ? &previous : nullptr, previous_count, kernel,
                               static_cast<unsigned>(blocks), shared_bytes, A, l.vectors, l.scratch,
                               sets ? handle : none, sets, extra...);
    previous_count = 1;
  };
  // A 27-point stencil's search marches through planes (cg_stencil_march.cuh)
  // and leaves p·Ap to a kernel of its own.
  kernels::march_shape march{};
  if constexpr (kernels::is_stencil<Op>) {
    if (graph_marches<T>(A, o))
      march = kernels::make_march_shape<T>(
          A.g, static_cast<std::int64_t>(current_device_info().sm_count) * kernels::kPhaseBlocksPerSm<Op>);
  }
  // The update a group of chunks a block where the chunks are many
  // (update_group); the true residual, which runs once in many iterations, on
  // at most a wave of blocks (it strides over the chunks).
  const auto update = kernels::cg_update_groups_kernel<T, Op>;
  const int group = o.pipelined ? 1 : detail::update_group(chunks, resident_blocks(update, 0));
  const auto residual = kernels::cg_phase_kernel<cg_phase::true_residual, false, T, Op>;
  const std::int64_t residual_blocks = std::min(chunks, resident_blocks(residual, shared));
  for (int u = 0; u < unroll; ++u) {
    if (o.pipelined) {
      phase(kernels::cg_phase_kernel<cg_phase::restart, false, T, Op>, chunks, 0, false);
      phase(kernels::cg_phase_kernel<cg_phase::gather, false, T, Op>, chunks, shared, false);
      phase(kernels::cg_phase_kernel<cg_phase::vectors, false, T, Op>, chunks, 0, false);
    } else {
      bool marched = false;
      std::int64_t sums_partials = 0;  // the search's partials the update reduces (after the march's sums kernel)
      if constexpr (kernels::is_stencil<Op>) {
        if (march.blocks > 0) {
          previous =
              add_kernel_node(body, previous_count ? &previous : nullptr, previous_count,
                              kernels::cg_march_kernel<T, typename Op::value_type>, static_cast<unsigned>(march.blocks),
                              kernels::march_bytes<T>(A.g, march), A, l.vectors, l.scratch, march);
          previous_count = 1;
          sums_partials = kernels::search_sums_blocks<T>(chunks, l.scratch.passes);
          phase(kernels::cg_search_sums_kernel<T, Op>, sums_partials, 0, false, march.lines);
          marched = true;
        }
      }
      if (!marched)
        phase(kernels::cg_phase_kernel<cg_phase::search, false, T, Op>, chunks,
              search_shared_bytes<T>(A, l.scratch.passes), false);
      phase(update, (chunks + group - 1) / group, 0, false, group, sums_partials);
    }
    // In the while node's body one true-residual slot, at its end: when an
    // update asks for a true residual mid-body, the body's later kernels find
    // it next and do nothing, so the iterates are the same; an idle slot
    // every iteration cost ~2 µs (kernel and gap) where the check runs once
    // in many. The replayed mode's bodies, a fixed number of them counted
    // from the iteration limit, keep one every iteration: idle iterations
    // would end their chain before the limit.
    if (u + 1 == unroll || !sets_handle) phase(residual, residual_blocks, shared, u + 1 == unroll);
  }
}

/// Adds the graph mode (`looped` = graph: a conditional while node around the
/// body) or the replayed mode (`looped` = replayed: replayed_bodies(o) copies of
/// the body as child graphs in a chain) to `graph` after the `count` nodes at
/// `dependencies`, with the graph API (no stream capture, so it works for any
/// stream of the caller, the legacy default stream included): the set-up
/// kernel, the loop, the final true residual and the result. Returns the last
/// node.
template <class T, class Op>
cudaGraphNode_t add_graph_mode(cudaGraph_t graph, const cudaGraphNode_t* dependencies, std::size_t count, const Op& A,
                               const cg_options& o, const gpu_cg_layout<T>& l, cg_device_result* result,
                               cg_mode looped) {
  const unsigned grid = static_cast<unsigned>(l.scratch.chunks);
  const cudaGraphConditionalHandle none{};
  const std::size_t shared = kStagingBytes<Op>;
  // Where the search marches through vectors larger than L2, x lags one
  // search behind (cg_control::lag_x).
  cg_control<T> initial = initial_control<T>(A, o);
  initial.lag_x = lags_x(graph_marches<T>(A, o), l.vectors.n, sizeof(T), current_device_info().l2_bytes);
  const cudaGraphNode_t setup = add_kernel_node(graph, dependencies, count, kernels::cg_setup_kernel<T, Op>, grid,
                                                shared, A, l.vectors, initial, l.scratch);
  cudaGraphNode_t loop{};
  if (looped == cg_mode::graph) {
    // The loop is always entered (the body's kernels do nothing when the
    // set-up already ended the solve), and every replay of a caller's graph
    // starts it afresh.
    cudaGraphConditionalHandle handle;
    const cudaGraph_t body = tally::detail::add_while_node(graph, &setup, 1, &handle, &loop);
    add_iterations(body, A, o, graph_unroll_in(o, looped), l, handle, true);
  } else {
    cudaGraph_t body = nullptr;
    TALLY_CUDA(cudaGraphCreate(&body, 0));
    try {
      add_iterations(body, A, o, graph_unroll_in(o, looped), l, none, false);
      loop = setup;
      for (std::int64_t r = replayed_bodies(o); r > 0; --r) {
        const cudaGraphNode_t after = loop;
        TALLY_CUDA(cudaGraphAddChildGraphNode(&loop, graph, &after, 1, body));  // copies the body
      }
    } catch (...) {
      cudaGraphDestroy(body);
      throw;
    }
    TALLY_CUDA(cudaGraphDestroy(body));
  }
  const cudaGraphNode_t final_residual =
      add_kernel_node(graph, &loop, 1, kernels::cg_phase_kernel<cg_phase::true_residual, true, T, Op>, grid, shared, A,
                      l.vectors, l.scratch, none, false);
  return add_kernel_node(graph, &final_residual, 1, kernels::cg_result_kernel<T>, grid, 0, l.vectors, l.scratch,
                         result);
}

/// The graph or the replayed mode (`looped`) on any stream. When `stream` is
/// being captured, its nodes join the caller's graph (after the capture's
/// current dependencies, which then become the last node); else a graph is
/// built, instantiated and launched on `stream` (legal on the legacy default
/// stream too), and the executable graph is released once it has run.
template <class T, class Op>
void run_graph_mode(cudaStream_t stream, const Op& A, const cg_options& o, const gpu_cg_layout<T>& l,
                    cg_device_result* result, cg_mode looped) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TALLY_CUDA(cudaStreamIsCapturing(stream, &status));
  if (status == cudaStreamCaptureStatusActive) {
    cudaGraph_t graph = nullptr;
    const cudaGraphNode_t* dependencies = nullptr;
    std::size_t count = 0;
    TALLY_CUDA(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &dependencies, nullptr, &count));
    const std::vector<cudaGraphNode_t> after(dependencies, dependencies + count);  // valid until the next stream call
    cudaGraphNode_t last = add_graph_mode(graph, after.data(), after.size(), A, o, l, result, looped);
    TALLY_CUDA(cudaStreamUpdateCaptureDependencies(stream, &last, nullptr, 1, cudaStreamSetCaptureDependencies));
    return;
  }
  if (status != cudaStreamCaptureStatusNone)
    throw cuda_error(static_cast<int>(cudaErrorStreamCaptureInvalidated),
                     "tally: cg: the stream's capture has been invalidated");
  cudaGraph_t graph = nullptr;
  TALLY_CUDA(cudaGraphCreate(&graph, 0));
  cudaGraphExec_t exec = nullptr;
  try {
    add_graph_mode(graph, nullptr, 0, A, o, l, result, looped);
    TALLY_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  } catch (...) {
    cudaGraphDestroy(graph);
    throw;
  }
  cudaGraphDestroy(graph);
  const cudaError_t launched = cudaGraphLaunch(exec, stream);
  cudaGraphExecDestroy(exec);  // freed once the launched work is done
  TALLY_CUDA(launched);
}

}  // namespace detail

/// Enqueues the whole solve of A·x = b on gpu.stream and writes its outcome to
/// *result (device memory); never waits for the device, never allocates
/// outside the backend's workspace, so it can be captured into a CUDA graph
/// (warm the workspace with one solve of the same size first): the persistent
/// mode becomes a cooperative kernel node, the graph mode adds its nodes and
/// its conditional loop to the caller's graph (the replayed mode its chain of
/// bodies), and each replay solves afresh.
/// Any stream works, the legacy default stream included (which cannot be
/// captured, but can run the graph mode's own graph). A is a
/// csr_view of device memory or a stencil_operator (a linear_operator,
/// operator.hpp); b, x (the initial guess), options.history and *result are
/// memory the device can read and write (checked: invalid_argument for host
/// memory). Returns the mode it enqueued; `note` (if given) says why the
/// persistent mode fell back, if it did.
/// Pre and post as cg() on the CPU (cpu/cg.hpp); same bits. A CSR matrix's
/// structure is checked only with options.check_matrix = always (see
/// cg_matrix_check), which makes this wait for the device once, before the
/// solve is enqueued.
template <class Op, class T>
cg_mode cg_async(const gpu_backend& gpu, const Op& A, const T* b, T* x, const cg_options& options,
                 cg_device_result* result, std::string* note = nullptr) {
  static_assert(linear_operator<Op>, "tally::solvers::cg: A must model tally::solvers::linear_operator");
  detail::check_cg_arguments(A, b, x, options);
  if (result == nullptr) tally::detail::throw_invalid_argument("cg_async", "result", "is null");
  tally::detail::check_device_pointer("cg_async", "result", result, 1);
  detail::check_gpu_arguments(gpu, A, b, x, options);
  const std::int64_t n = A.rows;
  if (n == 0) {
    tally::detail::launch("launch of tally::solvers::detail::cg_empty_result_kernel",
                          tally::detail::launch_config(dim3(1), dim3(1), 0, gpu.stream),
                          detail::cg_empty_result_kernel<T>, result, options.history);
    return options.mode;
  }
  const std::int64_t blocks_of_rows = (n + kernels::kThreads - 1) / kernels::kThreads;
  cg_mode mode = options.mode;
  if (mode == cg_mode::automatic)
    mode = detail::automatic_mode(n, options.pipelined, kernels::is_stencil<Op>,
                                  detail::stencil_prefers_graph(n, sizeof(T), current_device_info().l2_bytes));
  if (mode == cg_mode::persistent) {
    const int capacity = detail::persistent_capacity<T, Op>();
    const int passes = detail::persistent_passes<T>(blocks_of_rows, current_device_info().sm_count,
                                                    options.grid_blocks > 0 ? options.grid_blocks : capacity);
    const std::int64_t chunks = (blocks_of_rows + passes - 1) / passes;
    const int grid = options.grid_blocks > 0 ? options.grid_blocks
                                             : static_cast<int>(std::min<std::int64_t>(capacity, chunks));
    std::string why;
    if (!current_device_info().cooperative_launch) why = "the device cannot launch cooperative kernels";
    else if (grid > capacity)
      why = std::to_string(grid) + " blocks requested, only " + std::to_string(capacity) + " fit on the device at once";
    if (why.empty()) {
      const auto layout = detail::carve(gpu, b, x, n, chunks, passes, options.pipelined, false);
      detail::launch_persistent(gpu, A, options, grid, layout, result);
      return cg_mode::persistent;
    }
    if (note) *note = "persistent mode not possible (" + why + "): ran the graph mode";
    mode = cg_mode::graph;
  }
  // Graph and replayed modes: chunks of `passes` x kThreads rows, about kGraphTargetChunks of them.
  const int passes = detail::fit_window<T>(A, detail::passes_for(blocks_of_rows, detail::kGraphTargetChunks));
  const std::int64_t chunks = (blocks_of_rows + passes - 1) / passes;
  const auto layout = detail::carve(gpu, b, x, n, chunks, passes, options.pipelined,
                                    detail::graph_marches<T>(A, options));
  detail::run_graph_mode(gpu.stream, A, options, layout, result, mode);
  return mode;
}

/// Solves A·x = b on the GPU (see cg_async) and waits for the result: the one
/// host synchronisation of the solve.
template <class Op, class T>
cg_result cg(const gpu_backend& gpu, const Op& A, const T* b, T* x, const cg_options& options = {}) {
  static_assert(linear_operator<Op>, "tally::solvers::cg: A must model tally::solvers::linear_operator");
  cg_device_result* device_result = nullptr;
  TALLY_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&device_result), sizeof(cg_device_result), gpu.stream));
  cg_result out;
  try {
    out.mode = cg_async(gpu, A, b, x, options, device_result, &out.note);
  } catch (...) {
    cudaFreeAsync(device_result, gpu.stream);
    throw;
  }
  cg_device_result r{};
  TALLY_CUDA(cudaMemcpyAsync(&r, device_result, sizeof r, cudaMemcpyDeviceToHost, gpu.stream));
  TALLY_CUDA(cudaFreeAsync(device_result, gpu.stream));
  TALLY_CUDA(cudaStreamSynchronize(gpu.stream));
  out.iterations = r.iterations;
  out.status = static_cast<cg_status>(r.status);
  out.relative_residual = r.relative_residual;
  out.rhs_norm = r.rhs_norm;
  detail::note_overflow<T>(out);
  return out;
}

}  // namespace tally::solvers
