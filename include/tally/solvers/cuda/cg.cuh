// The GPU backend of cg(): scratch, the choice between the persistent and the
// graph mode, and the device-side loop (a conditional while node, CUDA 12.4+).
// No host synchronisation inside the solve: cg_async() only enqueues (it can
// be captured into the caller's graph); cg() waits once, for the result.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "tally/core/backend.hpp"
#include "tally/core/error.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/device_info.hpp"
#include "tally/cuda/workspace.hpp"
#include "tally/solvers/cg.hpp"
#include "tally/solvers/cuda/cg_kernels.cuh"
#include "tally/solvers/detail/cg_checks.hpp"

namespace tally::solvers {

using kernels::cg_device_result;

namespace detail {

/// Up to this many rows, `automatic` picks the persistent kernel (the vectors
/// and a 27-point CSR matrix of 2^19 rows are about 100 MB; the H100 timings
/// decide the cut: see docs).
inline constexpr std::int64_t kPersistentMaxRows = std::int64_t{1} << 19;
/// Graph mode: at most about this many chunks (the last block reduces them).
inline constexpr std::int64_t kGraphTargetChunks = 2048;
/// Persistent mode: at most about this many chunks (every block reduces them
/// after each barrier, so fewer keeps that cheap).
inline constexpr std::int64_t kPersistentTargetChunks = 1024;

/// kThreads-row passes per chunk so that there are at most about `target`
/// chunks (a power of two, at most 64).
inline int passes_for(std::int64_t blocks_of_rows, std::int64_t target) {
  int passes = 1;
  while (passes < 64 && (blocks_of_rows + passes - 1) / passes > target) passes *= 2;
  return passes;
}

/// Where a solve's scratch lives, carved from one workspace draw.
template <class T>
struct gpu_cg_layout {
  kernels::cg_scratch<T> scratch;
  cg_vectors<T> vectors;
  cg_device_result* result;  ///< for cg()'s own copy back
};

inline std::size_t align_up(std::size_t x, std::size_t a = 256) { return (x + a - 1) / a * a; }

template <class T>
gpu_cg_layout<T> carve(const gpu_backend& gpu, const T* b, T* x, std::int64_t n, std::int64_t chunks, int passes,
                       bool pipelined) {
  const std::size_t vec = align_up(static_cast<std::size_t>(n) * sizeof(T));
  const int vector_count = pipelined ? 11 : 6;
  const std::size_t sizes[] = {align_up(sizeof(cg_control<T>)),
                               align_up(sizeof(cg_device_result)),
                               align_up(chunks * sizeof(residual_sums<T>)),
                               align_up(chunks * sizeof(search_sums<T>)),
                               align_up(chunks * sizeof(update_sums<T>)),
                               align_up(chunks * sizeof(pipelined_sums<T>)),
                               vector_count * vec};
  std::size_t total = 0;
  for (const std::size_t s : sizes) total += s;
  auto* base = static_cast<unsigned char*>(tally::detail::scratch_for(gpu).get(total + 256, gpu.stream));
  gpu_cg_layout<T> l{};
  l.scratch.arrivals = reinterpret_cast<unsigned*>(base);  // the zeroed region's first word
  auto* p = reinterpret_cast<unsigned char*>(align_up(reinterpret_cast<std::uintptr_t>(base + workspace::kZeroedBytes)));
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

template <class T>
__global__ void cg_empty_result_kernel(cg_device_result* result) {
  *result = {0, static_cast<int>(cg_status::converged), 0.0, 0.0};
}

/// Blocks of the persistent kernel that fit on the device at once.
template <class T, class Op>
int persistent_capacity() {
  int per_sm = 0;
  TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernels::cg_persistent_kernel<T, Op>,
                                                           kernels::kThreads, 0));
  return per_sm * current_device_info().sm_count;
}

template <class T, class Op>
void launch_persistent(const gpu_backend& gpu, const Op& A, const cg_options& o, int grid,
                       const gpu_cg_layout<T>& l, cg_device_result* result) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(kernels::kThreads);
  config.stream = gpu.stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  TALLY_CUDA(cudaLaunchKernelEx(&config, kernels::cg_persistent_kernel<T, Op>, A, l.vectors,
                                cg_control<T>::make(o), l.scratch, result));
}

/// Enqueues the graph mode on `stream`, which must be capturing: the set-up
/// kernel, a conditional while node whose body runs `unroll` iterations'
/// kernels, the final residual and the result.
template <class T, class Op>
void capture_graph_mode(cudaStream_t stream, const Op& A, const cg_options& o, const gpu_cg_layout<T>& l,
                        cg_device_result* result) {
  const unsigned grid = static_cast<unsigned>(l.scratch.chunks);
  const cudaGraphConditionalHandle none{};
  kernels::cg_setup_kernel<T, Op><<<grid, kernels::kThreads, 0, stream>>>(A, l.vectors, cg_control<T>::make(o), l.scratch);
  TALLY_CUDA_LAUNCHED("tally::solvers::kernels::cg_setup_kernel");

  cudaStreamCaptureStatus status;
  cudaGraph_t graph;
  const cudaGraphNode_t* dependencies = nullptr;
  std::size_t dependency_count = 0;
  TALLY_CUDA(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &dependencies, nullptr, &dependency_count));
  cudaGraphConditionalHandle handle;
  TALLY_CUDA(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = cudaGraphCondTypeWhile;
  params.conditional.size = 1;
  cudaGraphNode_t loop;
  TALLY_CUDA(cudaGraphAddNode(&loop, graph, dependencies, nullptr, dependency_count, &params));
  cudaGraph_t body = params.conditional.phGraph_out[0];

  // The body, captured from a stream of our own into the node's graph.
  // Creating and destroying a stream is not allowed under a caller's global
  // capture mode unless this thread relaxes it for the call.
  auto relaxed = [](auto&& call) {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    TALLY_CUDA(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t status = call();
    TALLY_CUDA(cudaThreadExchangeStreamCaptureMode(&mode));
    TALLY_CUDA(status);
  };
  cudaStream_t side;
  relaxed([&] { return cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking); });
  try {
    TALLY_CUDA(cudaStreamBeginCaptureToGraph(side, body, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal));
    // One iteration's kernels, unrolled; the true-residual kernel ends each
    // group and the last one sets the loop's condition.
    for (int u = 0; u < o.graph_unroll; ++u) {
      const bool last = u + 1 == o.graph_unroll;
      if (o.pipelined) {
        kernels::cg_phase_kernel<cg_phase::restart, false, T, Op><<<grid, kernels::kThreads, 0, side>>>(A, l.vectors, l.scratch, none, false);
        kernels::cg_phase_kernel<cg_phase::gather, false, T, Op><<<grid, kernels::kThreads, 0, side>>>(A, l.vectors, l.scratch, none, false);
        kernels::cg_phase_kernel<cg_phase::vectors, false, T, Op><<<grid, kernels::kThreads, 0, side>>>(A, l.vectors, l.scratch, none, false);
      } else {
        kernels::cg_phase_kernel<cg_phase::search, false, T, Op><<<grid, kernels::kThreads, 0, side>>>(A, l.vectors, l.scratch, none, false);
        kernels::cg_phase_kernel<cg_phase::update, false, T, Op><<<grid, kernels::kThreads, 0, side>>>(A, l.vectors, l.scratch, none, false);
      }
      kernels::cg_phase_kernel<cg_phase::true_residual, false, T, Op><<<grid, kernels::kThreads, 0, side>>>(A, l.vectors, l.scratch, handle, last);
    }
    TALLY_CUDA_LAUNCHED("tally::solvers::kernels::cg_phase_kernel");
    cudaGraph_t captured;
    TALLY_CUDA(cudaStreamEndCapture(side, &captured));
  } catch (...) {
    cudaGraph_t ignored;
    cudaStreamEndCapture(side, &ignored);
    relaxed([&] { return cudaStreamDestroy(side); });
    throw;
  }
  relaxed([&] { return cudaStreamDestroy(side); });
  TALLY_CUDA(cudaStreamUpdateCaptureDependencies(stream, &loop, nullptr, 1, cudaStreamSetCaptureDependencies));

  kernels::cg_phase_kernel<cg_phase::true_residual, true, T, Op><<<grid, kernels::kThreads, 0, stream>>>(A, l.vectors, l.scratch, none, false);
  TALLY_CUDA_LAUNCHED("tally::solvers::kernels::cg_phase_kernel (final residual)");
  kernels::cg_result_kernel<T><<<grid, kernels::kThreads, 0, stream>>>(l.vectors, l.scratch, result);
  TALLY_CUDA_LAUNCHED("tally::solvers::kernels::cg_result_kernel");
}

/// The graph mode on any stream: into the caller's capture when there is one,
/// else captured, instantiated and launched here (the executable graph is
/// released once it has run).
template <class T, class Op>
void run_graph_mode(cudaStream_t stream, const Op& A, const cg_options& o, const gpu_cg_layout<T>& l,
                    cg_device_result* result) {
  cudaStreamCaptureStatus status;
  TALLY_CUDA(cudaStreamIsCapturing(stream, &status));
  if (status == cudaStreamCaptureStatusActive) {
    capture_graph_mode(stream, A, o, l, result);
    return;
  }
  TALLY_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    capture_graph_mode(stream, A, o, l, result);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  TALLY_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  TALLY_CUDA(instantiated);
  const cudaError_t launched = cudaGraphLaunch(exec, stream);
  cudaGraphExecDestroy(exec);  // freed once the launched work is done
  TALLY_CUDA(launched);
}

}  // namespace detail

/// Enqueues the whole solve of A·x = b on gpu.stream and writes its outcome to
/// *result (device memory); never waits for the device, never allocates
/// outside the backend's workspace, so it can be captured into a CUDA graph
/// (warm the workspace with one solve of the same size first). A is a
/// csr_view of device memory or a stencil_operator; b, x (the initial guess)
/// and options.history are device memory. Returns the mode it enqueued;
/// `note` (if given) says why the persistent mode fell back, if it did.
/// Pre and post as cg() on the CPU (cpu/cg.hpp); same bits.
template <class Op, class T>
cg_mode cg_async(const gpu_backend& gpu, const Op& A, const T* b, T* x, const cg_options& options,
                 cg_device_result* result, std::string* note = nullptr) {
  detail::check_cg_arguments(A, b, x, options);
  if (result == nullptr) tally::detail::throw_invalid_argument("cg_async", "result", "is null");
  const std::int64_t n = A.rows;
  if (n == 0) {
    detail::cg_empty_result_kernel<T><<<1, 1, 0, gpu.stream>>>(result);
    TALLY_CUDA_LAUNCHED("tally::solvers::detail::cg_empty_result_kernel");
    return options.mode;
  }
  const std::int64_t blocks_of_rows = (n + kernels::kThreads - 1) / kernels::kThreads;
  cg_mode mode = options.mode;
  if (mode == cg_mode::automatic) mode = n <= detail::kPersistentMaxRows ? cg_mode::persistent : cg_mode::graph;
  if (mode == cg_mode::persistent) {
    const int capacity = detail::persistent_capacity<T, Op>();
    const int passes = detail::passes_for(blocks_of_rows, detail::kPersistentTargetChunks);
    const std::int64_t chunks = (blocks_of_rows + passes - 1) / passes;
    const int grid = options.grid_blocks > 0 ? options.grid_blocks
                                             : static_cast<int>(std::min<std::int64_t>(capacity, chunks));
    std::string why;
    if (!current_device_info().cooperative_launch) why = "the device cannot launch cooperative kernels";
    else if (grid > capacity)
      why = std::to_string(grid) + " blocks requested, only " + std::to_string(capacity) + " fit on the device at once";
    if (why.empty()) {
      const auto layout = detail::carve(gpu, b, x, n, chunks, passes, options.pipelined);
      detail::launch_persistent(gpu, A, options, grid, layout, result);
      return cg_mode::persistent;
    }
    if (note) *note = "persistent mode not possible (" + why + "): ran the graph mode";
    mode = cg_mode::graph;
  }
  // Graph mode: chunks of `passes` x kThreads rows, about kGraphTargetChunks of them.
  const int passes = detail::passes_for(blocks_of_rows, detail::kGraphTargetChunks);
  const std::int64_t chunks = (blocks_of_rows + passes - 1) / passes;
  const auto layout = detail::carve(gpu, b, x, n, chunks, passes, options.pipelined);
  detail::run_graph_mode(gpu.stream, A, options, layout, result);
  return cg_mode::graph;
}

/// Solves A·x = b on the GPU (see cg_async) and waits for the result: the one
/// host synchronisation of the solve.
template <class Op, class T>
cg_result cg(const gpu_backend& gpu, const Op& A, const T* b, T* x, const cg_options& options = {}) {
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
  return out;
}

}  // namespace tally::solvers
