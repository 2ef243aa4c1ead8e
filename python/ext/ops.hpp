// The calls the Python bindings make into tally, in plain C++ (no nanobind,
// no CUDA headers): bindings.cpp validates the arrays and builds these views;
// the *_ops.cu files instantiate tally's templates for the dtypes the package
// supports. Splitting them keeps nanobind out of nvcc and lets the .cu files
// compile in parallel.
#pragma once

#include <cstdint>
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

/// out[0] = Σ x[i]·y[i] (tally::dot); x, y and out share one float dtype.
void dot(const place& where, const view& x, const view& y, void* out, bool compensated, bool checked);

/// NumPy's equal-width bins: counts[k] = Σ w over samples in [edge_k, edge_k+1)
/// (the last bin closed), edges = numpy.linspace(lo, hi, bins + 1) in float64.
/// weights null: counts are int64 ones; else counts has the weights' dtype.
void histogram_even(const place& where, const view& x, const view* weights, const view& counts, double lo,
                    double hi, bool deterministic, bool checked);

/// Bins between explicit float64 edges (in the backend's memory), NumPy's
/// rules: [e_k, e_k+1), the last bin closed, samples outside ignored.
void histogram_edges(const place& where, const view& x, const view* weights, const double* edges,
                     std::int64_t num_edges, const view& counts, bool deterministic, bool checked);

/// counts[index[i]] += (weights ? weights[i] : 1); indices outside
/// [0, counts.n) are ignored (the Python layer has checked them).
void bincount(const place& where, const view& index, const view* weights, const view& counts, bool deterministic,
              bool checked);

/// out[index[i]] = op(out[index[i]], src[i]) (tally::scatter_reduce).
/// `checked`: indices outside [0, out.n) raise tally::invalid_argument (on
/// the GPU this waits for the stream); unchecked skips them silently.
void scatter(const place& where, const view& out, const view& index, const view& src, scatter_op op,
             bool deterministic, bool checked);

/// out[index[i], :] = op(out[index[i], :], src[i, :]) (tally::index_add) for
/// out and src of one dtype (float16, bfloat16, float32, float64); op sum
/// (int32 or int64 index), min or max (int64 index). `checked`: indices
/// outside [0, out.rows) raise tally::invalid_argument after the rows in
/// range were applied (on the GPU this waits for the stream); unchecked
/// skips them silently. `deterministic` (sum): fixed-point sums.
void index_add(const place& where, const matrix& out, const view& index, const matrix& src, scatter_op op,
               bool deterministic, bool checked);

/// Microseconds per call of tally::reduce(gpu.on(stream), x, n, out) (f32),
/// `calls` calls back to back between two CUDA events, after a warm-up.
double time_sum_cpp(const view& x, void* out, int calls, bool checked, CUstream_st* stream);

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
