#include "gpu.hpp"

#include <cstdio>
#include <string>

#include "cpu.hpp"
#include "row_tiling.hpp"
#include "rows_kernel.cuh"
#include "sweep_kernel.cuh"
#include "tally/core/error.hpp"
#include "tally/cuda/check.cuh"
#include "tally/cuda/graph_while.cuh"
#include "tiling.hpp"

namespace tally::himeno {

using kernels::gosa_sink;
using kernels::sweep_state;

std::string_view name_of(gpu_pattern pattern) {
  switch (pattern) {
    case gpu_pattern::deterministic: return "deterministic";
    case gpu_pattern::warp_aggregated: return "warp-aggregated";
    case gpu_pattern::atomic: return "atomic";
    case gpu_pattern::host_serial: return "host";
    case gpu_pattern::host_openmp: return "host-openmp";
    case gpu_pattern::none: return "none";
    case gpu_pattern::baseline: return "baseline";
  }
  return "?";
}

gpu_pattern gpu_pattern_by_name(std::string_view name) {
  std::string names;
  for (gpu_pattern p : kGpuPatterns) {
    if (name == name_of(p)) return p;
    names += (names.empty() ? "" : ", ") + std::string(name_of(p));
  }
  detail::throw_invalid_argument("himeno", "gosa", "is '" + std::string(name) + "'; the GPU patterns are " + names);
}

std::string_view name_of(sweep_variant variant) {
  switch (variant) {
    case sweep_variant::tile: return "tile";
    case sweep_variant::rows1: return "rows-1";
    case sweep_variant::rows2: return "rows-2";
    case sweep_variant::rows3: return "rows-3";
    case sweep_variant::automatic: return "automatic";
  }
  return "?";
}

sweep_variant sweep_variant_by_name(std::string_view name) {
  std::string names;
  for (sweep_variant v : kSweepVariants) {
    if (name == name_of(v)) return v;
    names += (names.empty() ? "" : ", ") + std::string(name_of(v));
  }
  detail::throw_invalid_argument("himeno", "variant", "is '" + std::string(name) + "'; the variants are " + names);
}

sweep_variant default_variant(const grid_size& g) {
  constexpr std::int64_t kRows3From = 255LL * 255 * 511;  // L's interior points
  return g.interior() >= kRows3From ? sweep_variant::rows3 : sweep_variant::rows2;
}

sweep_variant gpu_problem::resolved(sweep_variant variant) const {
  return variant == sweep_variant::automatic ? default_variant(size_) : variant;
}

gosa_tree tree_of(sweep_variant variant) {
  if (variant == sweep_variant::automatic)
    detail::throw_invalid_argument("himeno", "variant", "automatic has no tree of its own: resolve it first");
  return variant == sweep_variant::tile ? gosa_tree::tiles : gosa_tree::rows;
}

namespace {

/// Floats a field is allocated with: points() rounded up to 4, so that the
/// row sweeps' copies, widened to 16 bytes, stay inside it.
std::int64_t padded_points(const grid_size& g) { return (g.points() + 3) & ~std::int64_t{3}; }

/// Length of the partials buffer: the tile tree's units, or the row tree's
/// at one plane a unit (the most any D needs).
std::int64_t partials_needed(const grid_size& g, std::int64_t max_units) {
  const std::int64_t tiles = tiling_of(g, max_units).units();
  const std::int64_t rows = row_units_of(row_tiling_of(g), 1).partials;
  return tiles > rows ? tiles : rows;
}

}  // namespace

std::int64_t device_bytes_needed(const grid_size& g, bool host_patterns) {
  const std::int64_t squares = host_patterns ? g.interior() * std::int64_t{sizeof(float)} : 0;
  return 14 * padded_points(g) * std::int64_t{sizeof(float)} + partials_needed(g, kMaxUnits) * std::int64_t{sizeof(float)} +
         std::int64_t{sizeof(sweep_state)} + squares;
}

namespace {

gosa_sink sink_of(gpu_pattern pattern) {
  switch (pattern) {
    case gpu_pattern::deterministic: return gosa_sink::deterministic;
    case gpu_pattern::warp_aggregated: return gosa_sink::warp_aggregated;
    case gpu_pattern::atomic: return gosa_sink::atomic;
    case gpu_pattern::host_serial:
    case gpu_pattern::host_openmp: return gosa_sink::squares;
    case gpu_pattern::none: return gosa_sink::none;
    case gpu_pattern::baseline: break;
  }
  throw invalid_argument("tally::himeno: the baseline pattern has no fused sweep kernel");
}

template <int Ahead, int Points = kRowPoints>
const void* rows_kernel_of(gosa_sink sink) {
  switch (sink) {
    case gosa_sink::deterministic: return reinterpret_cast<const void*>(&kernels::rows_kernel<gosa_sink::deterministic, Ahead, Points>);
    case gosa_sink::warp_aggregated: return reinterpret_cast<const void*>(&kernels::rows_kernel<gosa_sink::warp_aggregated, Ahead, Points>);
    case gosa_sink::atomic: return reinterpret_cast<const void*>(&kernels::rows_kernel<gosa_sink::atomic, Ahead, Points>);
    case gosa_sink::squares: return reinterpret_cast<const void*>(&kernels::rows_kernel<gosa_sink::squares, Ahead, Points>);
    case gosa_sink::none: break;
  }
  return reinterpret_cast<const void*>(&kernels::rows_kernel<gosa_sink::none, Ahead, Points>);
}

/// The kernels below take a concrete variant: gpu_problem resolves automatic
/// (default_variant) before it asks for one.
[[noreturn]] void unresolved() {
  detail::throw_invalid_argument("himeno", "variant", "automatic reached a kernel unresolved (a bug in gpu_problem)");
}

/// The sweep kernel of a pattern that runs the fused sweep, in `variant`, for grids of size g.
const void* kernel_of(gpu_pattern pattern, sweep_variant variant, const grid_size& g) {
  const gosa_sink sink = sink_of(pattern);
  switch (variant) {
    case sweep_variant::rows1: return rows_kernel_of<1>(sink);
    // Rows that fit the block's threads (M): one point a thread, not a second one always skipped.
    case sweep_variant::rows2: return g.mk - 2 <= kRowThreads ? rows_kernel_of<2, 1>(sink) : rows_kernel_of<2>(sink);
    case sweep_variant::rows3: return rows_kernel_of<3>(sink);
    case sweep_variant::tile: break;
    case sweep_variant::automatic: unresolved();
  }
  switch (sink) {
    case gosa_sink::deterministic: return reinterpret_cast<const void*>(&kernels::sweep_kernel<gosa_sink::deterministic>);
    case gosa_sink::warp_aggregated: return reinterpret_cast<const void*>(&kernels::sweep_kernel<gosa_sink::warp_aggregated>);
    case gosa_sink::atomic: return reinterpret_cast<const void*>(&kernels::sweep_kernel<gosa_sink::atomic>);
    case gosa_sink::squares: return reinterpret_cast<const void*>(&kernels::sweep_kernel<gosa_sink::squares>);
    case gosa_sink::none: break;
  }
  return reinterpret_cast<const void*>(&kernels::sweep_kernel<gosa_sink::none>);
}

/// Dynamic shared memory of a variant's kernels with shared row buffers of
/// `row_floats` floats (row_floats_of the variant and the grid).
std::size_t dynamic_bytes_of(sweep_variant variant, int row_floats) {
  switch (variant) {
    case sweep_variant::rows1: return kernels::rows_layout<1>::dynamic_bytes(row_floats);
    case sweep_variant::rows2: return kernels::rows_layout<2>::dynamic_bytes(row_floats);
    case sweep_variant::rows3: return kernels::rows_layout<3>::dynamic_bytes(row_floats);
    case sweep_variant::tile: break;
    case sweep_variant::automatic: unresolved();
  }
  return 0;
}

/// The row buffer width of a row variant's kernels on grids of size g (0 for the tile sweep).
int row_floats_of(sweep_variant variant, const grid_size& g) {
  switch (variant) {
    case sweep_variant::rows1: return kernels::row_floats_for<1>(g.mk);
    case sweep_variant::rows2: return kernels::row_floats_for<2>(g.mk);
    case sweep_variant::rows3: return kernels::row_floats_for<3>(g.mk);
    case sweep_variant::tile: return 0;
    case sweep_variant::automatic: unresolved();
  }
  return 0;
}

/// Row buffers of the longest rows (whole segments): the opt-in every problem
/// sets is what they need (a process may hold problems of several sizes; none
/// may lower the opt-in below what another's launches need).
constexpr int kMaxRowFloats = kernels::kFullRowFloats;

/// Threads a block of a variant's kernels.
int threads_of(sweep_variant variant) { return variant == sweep_variant::tile ? kTileThreads : kRowThreads; }

/// Lets the kernel use its dynamic shared memory (over 48 KB needs the opt-in).
void allow_dynamic_shared(const void* kernel, std::size_t bytes) {
  if (bytes > 0) TALLY_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

void check_shape(const launch_shape& shape) {
  if (shape.blocks < 0) detail::throw_invalid_argument("himeno", "blocks", "must be >= 0");
  const int d = shape.planes_per_unit;
  if (d < 0 || d > kMaxRowPlanesPerUnit || (d & (d - 1)) != 0)
    detail::throw_invalid_argument("himeno", "planes_per_unit", "must be 0 or a power of two up to 32");
}

}  // namespace

gpu_problem::gpu_problem(const grid_size& g, bool host_patterns, cudaStream_t stream, std::int64_t max_units)
    : size_(g), stream_(stream), max_units_(max_units) {
  static_assert(kMaxUnits == 65536, "the max_units defaults in gpu.hpp and cpu.hpp say 65536");
  if (max_units < 1) detail::throw_invalid_argument("himeno", "max_units", "must be at least 1");
  std::size_t free_bytes = 0, total_bytes = 0;
  TALLY_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::int64_t needed = device_bytes_needed(g, host_patterns);
  if (needed > static_cast<std::int64_t>(free_bytes)) {
    char text[200];
    std::snprintf(text, sizeof text, "%dx%dx%d needs %.2f GiB of device memory; %.2f GiB are free", g.mi, g.mj, g.mk,
                  gib(needed), gib(static_cast<std::int64_t>(free_bytes)));
    detail::throw_invalid_argument("himeno", "size", text);
  }
  const std::size_t bytes = static_cast<std::size_t>(padded_points(g)) * sizeof(float);
  const std::size_t used = static_cast<std::size_t>(g.points()) * sizeof(float);
  try {
    // The padding past points() is only ever read (by widened copies); zero it once.
    for (auto& f : fields_) {
      TALLY_CUDA(cudaMalloc(&f, bytes));
      TALLY_CUDA(cudaMemsetAsync(reinterpret_cast<char*>(f) + used, 0, bytes - used, stream_));
    }
    for (auto& c : coef_) {
      TALLY_CUDA(cudaMalloc(&c, bytes));
      TALLY_CUDA(cudaMemsetAsync(reinterpret_cast<char*>(c) + used, 0, bytes - used, stream_));
    }
    TALLY_CUDA(cudaMalloc(&partials_, static_cast<std::size_t>(partials_needed(g, max_units)) * sizeof(float)));
    TALLY_CUDA(cudaMalloc(&state_, sizeof(sweep_state)));
    if (host_patterns) {
      const std::size_t squares = static_cast<std::size_t>(g.interior()) * sizeof(float);
      TALLY_CUDA(cudaMalloc(&squares_, squares));
      TALLY_CUDA(cudaMallocHost(&host_squares_, squares));
    }
    reset();
  } catch (...) {
    release();
    throw;
  }
}

gpu_problem::~gpu_problem() { release(); }

void gpu_problem::release() {
  // Frees wait for the device; errors here cannot be reported.
  for (auto& f : fields_) cudaFree(f), f = nullptr;
  for (auto& c : coef_) cudaFree(c), c = nullptr;
  cudaFree(partials_), partials_ = nullptr;
  cudaFree(state_), state_ = nullptr;
  cudaFree(squares_), squares_ = nullptr;
  cudaFreeHost(host_squares_), host_squares_ = nullptr;
}

void gpu_problem::reset() {
  const std::int64_t n = size_.points();
  const std::int64_t plane = std::int64_t{size_.mj} * size_.mk;
  constexpr int kFillBlocks = 1024, kFillThreads = 256;
  current_ = 0;
  kernels::fill_initial_p<<<kFillBlocks, kFillThreads, 0, stream_>>>(fields_[0], fields_[1], size_.mi, plane);
  TALLY_CUDA_LAUNCHED("fill_initial_p");
  for (int c = 0; c < kCoefficients; ++c) {
    kernels::fill<<<kFillBlocks, kFillThreads, 0, stream_>>>(coef_[c], n, initial_coefficient(c));
    TALLY_CUDA_LAUNCHED("fill");
  }
  TALLY_CUDA(cudaMemsetAsync(state_, 0, sizeof(sweep_state), stream_));
  sweeps_run_ = 0;
  converged_gosa_ = false;
  next_slot_zero_ = true;  // all slots zero
}

void gpu_problem::load(const host_fields& f) {
  if (f.size.mi != size_.mi || f.size.mj != size_.mj || f.size.mk != size_.mk)
    detail::throw_invalid_argument("himeno", "fields", "have another grid size than the problem");
  const std::size_t bytes = static_cast<std::size_t>(size_.points()) * sizeof(float);
  current_ = 0;
  for (float* field : fields_) TALLY_CUDA(cudaMemcpyAsync(field, f.p.data(), bytes, cudaMemcpyHostToDevice, stream_));
  for (int c = 0; c < kCoefficients; ++c)
    TALLY_CUDA(cudaMemcpyAsync(coef_[c], f.coef[static_cast<std::size_t>(c)].data(), bytes, cudaMemcpyHostToDevice, stream_));
  TALLY_CUDA(cudaMemsetAsync(state_, 0, sizeof(sweep_state), stream_));
  TALLY_CUDA(cudaStreamSynchronize(stream_));
  sweeps_run_ = 0;
  converged_gosa_ = false;
  next_slot_zero_ = true;  // all slots zero
}

int gpu_problem::default_blocks(gpu_pattern pattern, sweep_variant variant) const {
  variant = resolved(variant);
  // Also the first use of the kernel by this problem: its shared-memory opt-in is set here.
  int& cached = default_blocks_[static_cast<int>(variant)][static_cast<int>(pattern)];
  if (cached > 0) return cached;
  const void* kernel = kernel_of(pattern, variant, size_);
  const std::size_t shared = dynamic_bytes_of(variant, row_floats_of(variant, size_));
  allow_dynamic_shared(kernel, dynamic_bytes_of(variant, kMaxRowFloats));
  int device = 0, sms = 0, per_sm = 0;
  TALLY_CUDA(cudaGetDevice(&device));
  TALLY_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  TALLY_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads_of(variant), shared));
  cached = sms * (per_sm > 0 ? per_sm : 1);
  return cached;
}

int gpu_problem::blocks_of(gpu_pattern pattern, const launch_shape& shape) const {
  const int fitting = default_blocks(pattern, shape.variant);  // sets the shared-memory opt-in
  return shape.blocks > 0 ? shape.blocks : fitting;
}

kernels::sweep_params gpu_problem::params(sweep_variant variant, int blocks, int planes_per_unit) const {
  kernels::sweep_params prm{};
  for (int c = 0; c < kCoefficients; ++c) prm.coef[c] = coef_[c];
  prm.mi = size_.mi, prm.mj = size_.mj, prm.mk = size_.mk;
  prm.plane = std::int64_t{size_.mj} * size_.mk;
  if (variant == sweep_variant::tile) {
    const tiling t = tiling_of(size_, max_units_);
    prm.tiles_k = t.tiles_k;
    prm.planes_per_unit = t.planes_per_unit;
    prm.chunks = t.chunks();
    prm.units = t.units();
  } else {
    const row_tiling t = row_tiling_of(size_);
    int d = planes_per_unit > 0 ? planes_per_unit : choose_planes_per_unit(t, blocks);
    if (d > t.padded_planes) d = t.padded_planes;  // a unit of all the planes: the same tree
    const row_units u = row_units_of(t, d);
    if (u.items >= (std::int64_t{1} << 31))  // the kernel indexes items in 32 bits
      detail::throw_invalid_argument("himeno", "size", "has too many row segments for the row sweeps");
    prm.planes_per_unit = d;
    prm.chunks = u.chunks;
    prm.units = u.padded_units;
    prm.segments = t.segments;
    prm.chunks_padded = u.chunks_padded;
    prm.items = u.items;
    prm.row_segments = t.row_segments();
    prm.row_floats = row_floats_of(variant, size_);
  }
  prm.omega = kOmega;
  prm.partials = partials_;
  prm.squares = squares_;
  prm.state = static_cast<sweep_state*>(state_);
  return prm;
}

void gpu_problem::launch_sweep(gpu_pattern pattern, launch_shape shape) {
  shape.variant = resolved(shape.variant);
  const int blocks = blocks_of(pattern, shape);
  const kernels::sweep_params prm = params(shape.variant, blocks, shape.planes_per_unit);
  const float* in = current();
  float* out = other();
  const int slot = static_cast<int>(sweeps_run_ % 3), zero_slot = static_cast<int>((sweeps_run_ + 1) % 3);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads_of(shape.variant)));
  config.dynamicSmemBytes = dynamic_bytes_of(shape.variant, prm.row_floats);
  config.stream = stream_;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = shape.programmatic ? 1 : 0;
  void* args[] = {const_cast<kernels::sweep_params*>(&prm), &in, &out, const_cast<int*>(&slot), const_cast<int*>(&zero_slot)};
  TALLY_CUDA(cudaLaunchKernelExC(&config, kernel_of(pattern, shape.variant, size_), args));
  current_ = 1 - current_;
  ++sweeps_run_;
}

void gpu_problem::launch_baseline() {
  const kernels::sweep_params prm = params(sweep_variant::tile, 1, 0);
  const int slot = static_cast<int>(sweeps_run_ % 3);
  float* gosa = static_cast<sweep_state*>(state_)->gosa + slot;
  TALLY_CUDA(cudaMemsetAsync(gosa, 0, sizeof(float), stream_));
  const dim3 grid(static_cast<unsigned>((size_.mk - 2 + 127) / 128), static_cast<unsigned>(size_.mj - 2),
                  static_cast<unsigned>(size_.mi - 2));
  kernels::baseline_jacobi<<<grid, 128, 0, stream_>>>(prm, current(), other(), gosa);
  TALLY_CUDA_LAUNCHED("baseline_jacobi");
  kernels::baseline_copy<<<grid, 128, 0, stream_>>>(prm, current(), other());
  TALLY_CUDA_LAUNCHED("baseline_copy");
  ++sweeps_run_;
}

void gpu_problem::run(gpu_pattern pattern, int sweeps, launch_shape shape) {
  if (sweeps < 1) detail::throw_invalid_argument("himeno", "sweeps", "must be at least 1");
  const bool host = pattern == gpu_pattern::host_serial || pattern == gpu_pattern::host_openmp;
  if (host && squares_ == nullptr)
    detail::throw_invalid_argument("himeno", "pattern", "host patterns need gpu_problem(size, host_patterns = true)");
  check_shape(shape);
  converged_gosa_ = false;
  const bool atomic_sink = pattern == gpu_pattern::warp_aggregated || pattern == gpu_pattern::atomic;
  if (atomic_sink && !next_slot_zero_) {
    // The first sweep's slot may hold another pattern's gosa; each atomic
    // sweep then zeroes the next one's.
    float* first = static_cast<sweep_state*>(state_)->gosa + sweeps_run_ % 3;
    TALLY_CUDA(cudaMemsetAsync(first, 0, sizeof(float), stream_));
  }
  for (int s = 0; s < sweeps; ++s) {
    if (pattern == gpu_pattern::baseline) {
      launch_baseline();
      continue;
    }
    launch_sweep(pattern, shape);
    if (host) {
      const std::size_t bytes = static_cast<std::size_t>(size_.interior()) * sizeof(float);
      TALLY_CUDA(cudaMemcpyAsync(host_squares_, squares_, bytes, cudaMemcpyDeviceToHost, stream_));
      TALLY_CUDA(cudaStreamSynchronize(stream_));
      host_gosa_ = pattern == gpu_pattern::host_serial ? sum_serial(host_squares_, size_.interior())
                                                        : sum_openmp(host_squares_, size_.interior());
    }
  }
  last_pattern_ = pattern;
  next_slot_zero_ = atomic_sink;
}

float gpu_problem::gosa() {
  if (converged_gosa_) return host_gosa_;
  if (sweeps_run_ == 0) throw invalid_argument("tally::himeno: gosa() before any sweep");
  if (last_pattern_ == gpu_pattern::host_serial || last_pattern_ == gpu_pattern::host_openmp) return host_gosa_;
  float value = 0;
  const auto* gosa = static_cast<sweep_state*>(state_)->gosa + (sweeps_run_ - 1) % 3;
  TALLY_CUDA(cudaMemcpyAsync(&value, gosa, sizeof(float), cudaMemcpyDeviceToHost, stream_));
  TALLY_CUDA(cudaStreamSynchronize(stream_));
  return value;
}

std::vector<float> gpu_problem::read_p() {
  std::vector<float> p(static_cast<std::size_t>(size_.points()));
  TALLY_CUDA(cudaMemcpyAsync(p.data(), current(), p.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_));
  TALLY_CUDA(cudaStreamSynchronize(stream_));
  return p;
}

convergence gpu_problem::converge(float tolerance, int max_sweeps, launch_shape shape, converge_loop loop) {
  if (max_sweeps < 1) detail::throw_invalid_argument("himeno", "max_sweeps", "must be at least 1");
  if (loop == converge_loop::replayed && max_sweeps > kMaxReplayedSweeps)
    detail::throw_invalid_argument("himeno", "max_sweeps",
                                   "must be at most " + std::to_string(kMaxReplayedSweeps) + " in the replayed loop");
  check_shape(shape);
  shape.variant = resolved(shape.variant);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  convergence result;
  try {
    TALLY_CUDA(cudaGraphCreate(&graph, 0));
    const unsigned blocks = static_cast<unsigned>(blocks_of(gpu_pattern::deterministic, shape));
    kernels::sweep_params prm = params(shape.variant, static_cast<int>(blocks), shape.planes_per_unit);
    prm.converge = 1;
    prm.tolerance = tolerance;
    prm.max_sweeps = static_cast<unsigned>(max_sweeps);
    // The sweeps' graph: a conditional while node whose body is two sweeps,
    // or max_sweeps sweeps chained in the graph itself.
    cudaGraph_t sweeps_graph = graph;
    int chained = max_sweeps;
    if (loop == converge_loop::conditional) {
      cudaGraphNode_t node = nullptr;
      sweeps_graph = tally::detail::add_while_node(graph, nullptr, 0, &prm.loop, &node);
      chained = 2;
    }
    // Sweep s reads p (s even) or wrk2 and writes the other, gosa into slot
    // s % 2, so each pair leaves p where it started; a sweep after the stop
    // is a no-op (and ends the while loop).
    const float* in[2] = {current(), other()};
    float* out[2] = {other(), current()};
    int slot[2] = {0, 1}, zero_slot = 2;
    cudaGraphNode_t previous = nullptr;
    for (int s = 0; s < chained; ++s) {
      void* args[] = {&prm, &in[s % 2], &out[s % 2], &slot[s % 2], &zero_slot};
      cudaKernelNodeParams kp{};
      kp.func = const_cast<void*>(kernel_of(gpu_pattern::deterministic, shape.variant, size_));
      kp.gridDim = dim3(blocks);
      kp.blockDim = dim3(static_cast<unsigned>(threads_of(shape.variant)));
      kp.sharedMemBytes = static_cast<unsigned>(dynamic_bytes_of(shape.variant, prm.row_floats));
      kp.kernelParams = args;
      const cudaGraphNode_t after = previous;
      TALLY_CUDA(cudaGraphAddKernelNode(&previous, sweeps_graph, s == 0 ? nullptr : &after, s == 0 ? 0 : 1, &kp));
    }
    TALLY_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    TALLY_CUDA(cudaMemsetAsync(state_, 0, sizeof(sweep_state), stream_));
    TALLY_CUDA(cudaGraphLaunch(exec, stream_));
    sweep_state state{};
    TALLY_CUDA(cudaMemcpyAsync(&state, state_, sizeof state, cudaMemcpyDeviceToHost, stream_));
    TALLY_CUDA(cudaStreamSynchronize(stream_));
    result.sweeps = static_cast<int>(state.sweeps_done);
    result.gosa = state.gosa[(state.sweeps_done + 1) % 2];  // sweep q (1-based) wrote slot (q − 1) % 2
    result.converged = result.gosa < tolerance;
  } catch (...) {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  TALLY_CUDA(cudaGraphExecDestroy(exec));
  TALLY_CUDA(cudaGraphDestroy(graph));
  if (result.sweeps % 2 == 1) current_ = 1 - current_;
  sweeps_run_ += result.sweeps;
  host_gosa_ = result.gosa;
  converged_gosa_ = true;
  next_slot_zero_ = false;
  last_pattern_ = gpu_pattern::deterministic;
  return result;
}

}  // namespace tally::himeno
