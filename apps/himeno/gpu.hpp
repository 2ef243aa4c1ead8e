// The benchmark on the GPU: the fields in device memory, sweeps by every
// gosa pattern, the paper's straightforward port, and device-side convergence.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime.h>

#include "problem.hpp"
#include "tiling.hpp"

namespace tally::himeno::kernels {
struct sweep_params;
}

namespace tally::himeno {

/// How gosa is obtained on the GPU (the paper's numbering in brackets).
enum class gpu_pattern {
  deterministic,    ///< block partials, fixed tree, last block combines (the default)
  warp_aggregated,  ///< (1) tally::device::atomic_add of each point's ss²
  atomic,           ///< (2) atomicAdd of each point's ss²
  host_serial,      ///< (3) each ss² copied to the host, summed on one core
  host_openmp,      ///< (4) the same, summed with OpenMP
  none,             ///< no gosa: the cost of the sweep alone
  baseline,         ///< the paper's straightforward port: two kernels a sweep, pattern (2)
};

/// The CLI name of a pattern ("deterministic", "warp-aggregated", ...).
std::string_view name_of(gpu_pattern pattern);

/// Every GPU pattern, in the paper's order, then ours.
inline constexpr gpu_pattern kGpuPatterns[] = {gpu_pattern::warp_aggregated, gpu_pattern::atomic,
                                               gpu_pattern::host_serial,     gpu_pattern::host_openmp,
                                               gpu_pattern::baseline,        gpu_pattern::none,
                                               gpu_pattern::deterministic};

/// The pattern named `name` (as name_of writes it). Throws
/// tally::invalid_argument listing the names otherwise.
gpu_pattern gpu_pattern_by_name(std::string_view name);

/// The fused sweep's kernels. default_variant picks rows-2 or rows-3; tile
/// and rows-1 stay as tune.sh's candidates and comparisons (the hidden
/// `tally himeno --variant`). tile sums the deterministic gosa by another
/// tree than the row variants (tree_of), so its bits differ from theirs.
enum class sweep_variant {
  tile,   ///< 8 x 64 tiles along i, register prefetch one plane ahead, 2 blocks/SM
  rows1,  ///< row segments by bulk copies 1 plane ahead, 2 blocks/SM (87 KB shared each at L, 45 at M)
  rows2,  ///< the same 2 planes ahead: 1 block/SM at L (119 KB), 2 at M (60 KB)
  rows3,  ///< the same 3 planes ahead: 1 block/SM at L (150 KB), 2 at M (77 KB)
  automatic,  ///< default_variant(size): what a launch uses unless told
};

/// Every variant a kernel implements (automatic is none of them).
inline constexpr sweep_variant kSweepVariants[] = {sweep_variant::tile, sweep_variant::rows1, sweep_variant::rows2,
                                                   sweep_variant::rows3};

/// The variant that ran fastest at this size on the H100 (deterministic gosa,
/// GFLOPS, apps/himeno/tune.sh): at L rows-3 1453, rows-2 1446; at XL rows-3
/// 1471, rows-2 1450 (2026-11-23); at M, with row buffers sized to its rows
/// (2026-11-26), rows-2 1470, rows-3 1460, rows-1 1447. So rows-2 below L's
/// 33 M interior points (XS and S were not tuned), rows-3 from there on.
sweep_variant default_variant(const grid_size& g);

/// The CLI name of a variant ("tile", "rows-1", ...).
std::string_view name_of(sweep_variant variant);

/// The variant named `name`. Throws tally::invalid_argument listing the names otherwise.
sweep_variant sweep_variant_by_name(std::string_view name);

/// The order in which a variant sums the deterministic gosa. Pre: variant is
/// not automatic (resolve it with default_variant first).
gosa_tree tree_of(sweep_variant variant);

/// Launch shape of the fused sweep. blocks = 0: as many as fit on the device
/// at once (from the occupancy calculator). programmatic: launch each sweep
/// as a programmatic dependent of the previous one (PDL). planes_per_unit
/// (row variants): D, a power of two <= 32; 0 chooses it from the grid and
/// the block count (it never changes gosa's bits, only the work's cut).
struct launch_shape {
  int blocks = 0;
  bool programmatic = true;
  sweep_variant variant = sweep_variant::automatic;
  int planes_per_unit = 0;
};

/// Device bytes a problem of size g needs (fields, scratch, and the squares
/// buffer of patterns 3 and 4 when host_patterns).
std::int64_t device_bytes_needed(const grid_size& g, bool host_patterns);

/// How converge() repeats the sweeps on the device.
enum class converge_loop {
  conditional,  ///< a conditional while node around two sweeps
  /// max_sweeps sweeps chained in a plain graph, each a no-op once the test
  /// has stopped (for tools that cannot follow conditional nodes, such as
  /// compute-sanitizer racecheck); at most kMaxReplayedSweeps
  replayed,
};

/// Most sweeps converge_loop::replayed chains into one graph.
inline constexpr int kMaxReplayedSweeps = 4096;

/// What converge() ran.
struct convergence {
  int sweeps = 0;
  float gosa = 0;
  bool converged = false;  ///< gosa < tolerance (else max_sweeps ran)
};

/// The fields of one problem on the current device, set to the initial values.
class gpu_problem {
 public:
  /// Checks that the problem fits in free device memory (throws
  /// tally::invalid_argument naming the size and both amounts otherwise,
  /// before allocating anything), allocates and initialises the fields.
  /// host_patterns: also allocate the ss² buffers of patterns 3 and 4.
  /// max_units: the most units of the deterministic tree (tiling_of); only
  /// tests change it, to reach several planes a unit on small grids.
  explicit gpu_problem(const grid_size& g, bool host_patterns = false, cudaStream_t stream = nullptr,
                       std::int64_t max_units = 65536);
  ~gpu_problem();
  gpu_problem(const gpu_problem&) = delete;
  gpu_problem& operator=(const gpu_problem&) = delete;

  /// The grid the problem was built for.
  const grid_size& size() const { return size_; }
  /// The stream every call queues its work on (as given to the constructor;
  /// null: the legacy default stream).
  cudaStream_t stream() const { return stream_; }

  /// Sets every field back to its initial value (stream-ordered).
  void reset();

  /// Replaces the fields with f's (p into both p and wrk2, so boundaries
  /// match; f.wrk2 is not used). Waits for the copies. Pre: f.size == size().
  void load(const host_fields& f);

  /// Queues `sweeps` sweeps with `pattern`. GPU-side patterns return without
  /// waiting; host patterns (3, 4) wait for every sweep, as they must.
  /// Pre: sweeps >= 1; host patterns need host_patterns at construction.
  void run(gpu_pattern pattern, int sweeps, launch_shape shape = {});

  /// The last sweep's gosa (waits for the stream). Pre: run() ran since the
  /// last reset(), with a pattern other than none.
  float gosa();

  /// Sweeps until gosa < tolerance or max_sweeps sweeps ran, testing on the
  /// device after every sweep (deterministic gosa): one CUDA graph whose
  /// while-loop node repeats two sweeps (or, replayed, max_sweeps sweeps in
  /// a chain); the host waits once. Pre: max_sweeps >= 1 (replayed: at most
  /// kMaxReplayedSweeps), else tally::invalid_argument.
  convergence converge(float tolerance, int max_sweeps, launch_shape shape = {},
                       converge_loop loop = converge_loop::conditional);

  /// p as it is now, [i][j][k] (waits for the stream).
  std::vector<float> read_p();

  /// The block count the fused sweep uses for `pattern` and `variant` when
  /// shape.blocks = 0 (automatic: this size's default_variant).
  int default_blocks(gpu_pattern pattern, sweep_variant variant = sweep_variant::automatic) const;

  /// `variant`, or this size's default_variant when it is automatic.
  sweep_variant resolved(sweep_variant variant) const;

 private:
  void release();
  kernels::sweep_params params(sweep_variant variant, int blocks, int planes_per_unit) const;
  int blocks_of(gpu_pattern pattern, const launch_shape& shape) const;
  void launch_sweep(gpu_pattern pattern, launch_shape shape);
  void launch_baseline();
  float* current() { return fields_[current_]; }
  float* other() { return fields_[1 - current_]; }

  grid_size size_;
  cudaStream_t stream_;
  std::int64_t max_units_;
  float* fields_[2] = {nullptr, nullptr};  // p and wrk2; current_ holds p
  int current_ = 0;
  float* coef_[kCoefficients] = {};
  float* partials_ = nullptr;
  void* state_ = nullptr;
  float* squares_ = nullptr;  // device, patterns 3 and 4
  float* host_squares_ = nullptr;  // pinned
  std::int64_t sweeps_run_ = 0;  // since reset(): which gosa slot is the last
  gpu_pattern last_pattern_ = gpu_pattern::none;
  float host_gosa_ = 0;       // patterns 3 and 4, and converge(): the last gosa
  bool converged_gosa_ = false;  // gosa() returns host_gosa_ after converge()
  mutable int default_blocks_[4][8] = {};  // per variant and pattern, from the occupancy calculator (0: not asked yet)
  bool next_slot_zero_ = true;   // gosa[sweeps_run_ % 3] is zero (after reset or an atomic sweep)
};

}  // namespace tally::himeno
