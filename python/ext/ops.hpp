// The calls the Python bindings make into tally, in plain C++ (no nanobind,
// no CUDA headers): bindings.cpp validates the arrays and builds these views;
// the *_ops.cu files instantiate tally's templates for the dtypes the package
// supports. Splitting them keeps nanobind out of nvcc and lets the .cu files
// compile in parallel.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

struct CUstream_st;

namespace tally_py {

/// Element types the package knows (others are rejected in bindings.cpp).
enum class dtype { f16, bf16, f32, f64, i32, i64 };

/// The dtype's NumPy-style name, for error messages.
const char* name_of(dtype t);

/// A contiguous 1-D array of n elements (validated by the bindings).
struct view {
  void* data;
  std::int64_t n;
  dtype type;
};

/// A two-dimensional array: rows of `cols` contiguous elements, `stride`
/// elements apart (>= cols; validated by the bindings).
struct matrix {
  void* data;
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t stride;
  dtype type;
};

/// Deterministic sums: off, or in fixed point with the scale 2^bits, given
/// or (bits == kDerived) derived from the values: tally's
/// histogram_options::deterministic and fixed_point_bits.
struct fixed_point {
  static constexpr int kDerived = std::numeric_limits<int>::min();
  bool on = false;
  int bits = kDerived;
};

/// Where a call runs: the CPU backend, or the GPU backend on `stream` (the
/// caller has made the array's device current).
struct place {
  bool gpu;
  CUstream_st* stream;
};

/// A dtype this function does not support: the bindings raise TypeError.
struct unsupported_dtype : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class reduce_op { sum, prod, min, max, argmin, argmax, bit_and, bit_or, bit_xor };
enum class scatter_op { sum, prod, min, max };

/// The dtype reduce() writes for input `x` and `op` (argmin/argmax: i64, see reduce).
/// Throws unsupported_dtype naming `argument` for combinations not instantiated.
dtype reduce_out_type(dtype x, reduce_op op, bool compensated, const char* function);

/// out[0] = x[0] ⊕ ... ⊕ x[n-1] (tally::reduce). out has reduce_out_type's
/// dtype; for argmin/argmax it is two int64 slots holding tally::value_index<T>
/// (value bits in slot 0, index in slot 1). `checked`: tally's pointer checks.
void reduce(const place& where, const view& x, void* out, reduce_op op, bool compensated, bool checked,
            const char* function);

/// out[0] = min x[i], out[1] = max x[i], in one pass (tally::transform_reduce
/// over (min, max) pairs; a NaN wins both, as in reduce's min and max):
/// bincount's length and negative check, histogram's automatic range.
/// x float32, float64, int32 or int64 with n >= 1; out two elements of x's dtype.
void extrema(const place& where, const view& x, void* out, const char* function);

/// out[0] = Σ x[i]·y[i] (tally::dot); x, y and out share one float dtype.
void dot(const place& where, const view& x, const view& y, void* out, bool compensated, bool checked);

/// NumPy's equal-width bins: counts[k] = Σ w over samples in [edge_k, edge_k+1)
/// (the last bin closed), edges = numpy.linspace(lo, hi, bins + 1) in float64.
/// weights null: counts are int64 ones; else counts has the weights' dtype.
void histogram_even(const place& where, const view& x, const view* weights, const view& counts, double lo,
                    double hi, fixed_point deterministic, bool checked);

/// Bins between explicit float64 edges (in the backend's memory), NumPy's
/// rules: [e_k, e_k+1), the last bin closed, samples outside ignored.
void histogram_edges(const place& where, const view& x, const view* weights, const double* edges,
                     std::int64_t num_edges, const view& counts, fixed_point deterministic, bool checked);

/// counts[index[i]] += (weights ? weights[i] : 1); indices outside
/// [0, counts.n) are ignored (the Python layer has checked them).
void bincount(const place& where, const view& index, const view* weights, const view& counts,
              fixed_point deterministic, bool checked);

/// out[index[i]] = op(out[index[i]], src[i]) (tally::scatter_reduce), int32
/// or int64 indices for every op. `checked`: indices outside [0, out.n), and
/// deterministic values outside the fixed-point contract, raise
/// tally::invalid_argument (on the GPU this waits for the stream); unchecked
/// skips such indices and counts such values as 0, silently, never waiting.
void scatter(const place& where, const view& out, const view& index, const view& src, scatter_op op,
             fixed_point deterministic, bool checked);

/// out[index[i], :] = op(out[index[i], :], src[i, :]) (tally::index_add) for
/// out and src of one dtype (float16, bfloat16, float32, float64), an int32
/// or int64 index; op sum, prod, min or max (`deterministic` and `sums`
/// apply to sum only; the Python layer refuses them for prod). `checked`:
/// indices outside [0, out.rows), and fixed-point values outside the
/// contract, raise tally::invalid_argument after the rest was applied (on
/// the GPU this waits for the stream); unchecked skips such rows and counts
/// such values as 0, silently, never waiting. `deterministic` (sum):
/// deterministic sums, as `sums` says (tally::index_add_sums, validated by
/// the bindings).
enum class index_add_sums { automatic, fixed_point, ordered };
void index_add(const place& where, const matrix& out, const view& index, const matrix& src, scatter_op op,
               fixed_point deterministic, index_add_sums sums, bool checked);

/// A square or rectangular CSR matrix: row `offsets` (rows + 1 entries) and
/// `columns` of one integer dtype, `values` (columns.n entries) float32 or
/// float64 (shapes and dtypes validated by the bindings, the structure by cg).
struct csr_matrix {
  std::int64_t rows;
  std::int64_t cols;
  view offsets;
  view columns;
  view values;
};

/// The g×g×g Poisson stencil (tally::solvers::stencil_operator): 7 or 27
/// points, g >= 1 (validated by cg).
struct stencil {
  std::int64_t g;
  int points;
};

/// tally::solvers::cg_options as the Python layer sets them.
struct cg_settings {
  double rtol;
  double atol;
  std::int64_t max_iterations;
  std::int64_t true_residual_interval;
  bool jacobi;
  bool pipelined;
};

/// What tally::solvers::cg reported.
struct cg_report {
  std::int64_t iterations;
  const char* status;   ///< "converged", "iteration_limit", "breakdown", "bad_diagonal", "non_finite"
  const char* message;  ///< tally::solvers::describe(status)
  double relative_residual;
  double rhs_norm;
  const char* mode;  ///< what the GPU ran: "persistent" or "graph" ("auto" on the CPU)
  std::string note;
};

/// Solves A·x = b (tally::solvers::cg) after checking A's structure (offsets
/// from 0 to columns.n, never decreasing; every column in [0, cols)), which
/// throws tally::invalid_argument naming tally.cg's argument 'A'. x starts as
/// a copy of *x0, or zeros when x0 is null. history: null or
/// max_iterations + 1 float64 of the backend's memory. On the GPU the call
/// waits for the stream (the checks, then the result). A square, b, x and x0
/// of A.rows elements of the values' dtype, x overlapping nothing.
cg_report cg(const place& where, const csr_matrix& A, const view& b, const view* x0, const view& x, double* history,
             const cg_settings& settings);

/// Solves A·x = b for the stencil operator A (no matrix stored), as the CSR
/// overload does; g or points out of range throw tally::invalid_argument.
cg_report cg(const place& where, const stencil& A, const view& b, const view* x0, const view& x, double* history,
             const cg_settings& settings);

/// Queues `calls` calls of tally::reduce(gpu.on(stream), x, n, out) (f32 sum)
/// back to back from C++: the C++ side of the Python overhead benchmark.
void sum_cpp_calls(const view& x, void* out, int calls, bool checked, CUstream_st* stream);

/// True when a CUDA device is usable; otherwise *why says what failed.
bool gpu_available(std::string* why);

/// Makes `consumer` wait (in stream order) for the work queued on `producer` so far.
void stream_wait(CUstream_st* consumer, CUstream_st* producer);

/// The CUDA device that owns `pointer`.
int device_of(const void* pointer);

/// Makes `device` current for the lifetime of the guard (restores the old one).
class device_guard {
 public:
  explicit device_guard(int device);
  ~device_guard();
  device_guard(const device_guard&) = delete;
  device_guard& operator=(const device_guard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace tally_py
