// Device-wide reductions: reduce, transform_reduce, dot, squared_norm, and the
// value-returning sum. One set of functions; the backend argument (tally::cpu
// or tally::gpu) picks where they run. Both evaluate the same fixed tree
// (core/tree.hpp), so their results are equal bit for bit.
//
// Each backend provides
//   detail::execute_reduce(backend, source, op, out, finalize, options, function_name)
// which evaluates the tree over `source`'s leaves with `op` and stores
// finalize(root) at *out; and detail::value_of<Out>(backend, run), which runs
// `run(out)` into a temporary and returns its value.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "tally/core/backend.hpp"
#include "tally/core/error.hpp"
#include "tally/core/operators.hpp"
#include "tally/core/options.hpp"
#include "tally/core/source.hpp"
#include "tally/core/tree.hpp"
#include "tally/core/types.hpp"
#include "tally/core/validate.hpp"

namespace tally {

/// The accumulator the tree uses for output type Out: float for half and
/// bfloat16 outputs, Out otherwise.
template <class Out>
using accumulator_for_t = default_accumulator_t<Out>;

namespace detail {

// Each backend defines these (cpu/reduce.hpp, cuda/reduce.cuh).
template <class Source, class Op, class Out, class Finalize>
void execute_reduce(const cpu_backend&, const Source&, const Op&, Out*, const Finalize&, const options&, const char*);
template <class Source, class Op, class Out, class Finalize>
void execute_reduce(const gpu_backend&, const Source&, const Op&, Out*, const Finalize&, const options&, const char*);
template <class Out, class Run>
Out value_of(const cpu_backend&, const Run& run);
template <class Out, class Run>
Out value_of(const gpu_backend&, const Run& run);

/// Turns the root (possibly empty) into the stored result: the identity for
/// an empty input, resolved compensation, conversion to the output type.
template <class Acc, class Out, class Op>
struct finalize {
  Op op;
  TALLY_HD_INLINE Out operator()(const tree::maybe<Acc>& root) const {
    if constexpr (requires { Acc::error; }) {
      using Plain = decltype(Acc::sum);
      return convert<Out>(root.has ? compensated_plus::resolve(root.value) : Plain(0));
    } else if constexpr (requires { Acc::index; }) {
      return root.has ? root.value : op.template identity<Acc>();
    } else {
      return convert<Out>(root.has ? root.value : op.template identity<Acc>());
    }
  }
};

template <class Backend, class Source, class Op, class Out>
void dispatch_reduce(const Backend& backend, const Source& source, const Op& op, Out* out, const options& opts,
                     const char* function) {
  using Acc = typename Source::acc_type;
  if (opts.sum == summation::compensated) {
    if constexpr (std::is_same_v<Op, plus> && std::is_floating_point_v<Acc>) {
      compensated_source<Source> wrapped(source);
      execute_reduce(backend, wrapped, compensated_plus{}, out,
                     finalize<compensated<Acc>, Out, compensated_plus>{{}}, opts, function);
      return;
    } else {
      throw_invalid_argument(function, "options.sum",
                             "is compensated, which needs tally::plus on a float or double accumulator");
    }
  }
  execute_reduce(backend, source, op, out, finalize<Acc, Out, Op>{op}, opts, function);
}

}  // namespace detail

/// *out = x[0] ⊕ x[1] ⊕ ... ⊕ x[n-1], combined in the fixed tree. The GPU
/// backend gives the same bits as the CPU backend for every result except
/// NaN, whose payload (and sign) may differ: the GPU's arithmetic returns a
/// canonical NaN, the host's propagates an operand's.
/// Pre: x holds n elements and out one, both in the backend's memory; out does
/// not overlap x. For arg_min/arg_max, Out is value_index<T>.
/// Post: *out holds the result (the operator's identity when n == 0); on the
/// GPU it is written in stream order, without waiting.
/// Accumulates in float when Out is half or bfloat16, in Out otherwise.
template <class Backend, class T, class Out, class Op = plus>
void reduce(const Backend& backend, const T* x, std::int64_t n, Out* out, Op op = {}, const options& opts = {}) {
  if (opts.checks == check_mode::checked) {
    detail::check_array("reduce", "x", x, n);
    detail::check_output("reduce", out, 1, x, n);
  }
  if constexpr (indexed_operator<Op>) {
    static_assert(requires { Out::index; }, "tally::reduce with arg_min/arg_max writes a tally::value_index<T>");
    using Source = unary_source<T, Out, identity_transform>;
    detail::dispatch_reduce(backend, Source{x, n, {}}, op, out, opts, "reduce");
  } else {
    using Source = unary_source<T, accumulator_for_t<Out>, identity_transform>;
    detail::dispatch_reduce(backend, Source{x, n, {}}, op, out, opts, "reduce");
  }
}

/// reduce() over a span.
template <class Backend, class T, std::size_t E, class Out, class Op = plus>
void reduce(const Backend& backend, std::span<T, E> x, Out* out, Op op = {}, const options& opts = {}) {
  reduce(backend, static_cast<const T*>(x.data()), static_cast<std::int64_t>(x.size()), out, op, opts);
}

/// *out = t(x[0]) ⊕ ... ⊕ t(x[n-1]). Same contract as reduce(); t must be
/// callable on the backend's side (a __host__ __device__ callable for the GPU).
/// For bit-equal backends, t must compute the same bits on host and device:
/// nvcc fuses a*b+c into an FMA by default where the host compiler does not,
/// so write products in t with tally::detail::multiply_rounded (or build with
/// --fmad=false). `function` names the caller in error messages.
template <class Backend, class T, class Out, class Transform, class Op>
void transform_reduce(const Backend& backend, const T* x, std::int64_t n, Out* out, Transform t, Op op,
                      const options& opts = {}, const char* function = "transform_reduce") {
  if (opts.checks == check_mode::checked) {
    detail::check_array(function, "x", x, n);
    detail::check_output(function, out, 1, x, n);
  }
  using Source = unary_source<T, accumulator_for_t<Out>, Transform>;
  detail::dispatch_reduce(backend, Source{x, n, t}, op, out, opts, function);
}

/// *out = t(x[0], y[0]) ⊕ ... ⊕ t(x[n-1], y[n-1]). Same contract as reduce(),
/// for two inputs of n elements each.
template <class Backend, class T, class U, class Out, class Transform, class Op>
void transform_reduce(const Backend& backend, const T* x, const U* y, std::int64_t n, Out* out, Transform t, Op op,
                      const options& opts = {}, const char* function = "transform_reduce") {
  if (opts.checks == check_mode::checked) {
    detail::check_array(function, "x", x, n);
    detail::check_array(function, "y", y, n);
    detail::check_output(function, out, 1, x, n);
    detail::check_output(function, out, 1, y, n);
  }
  using Source = binary_source<T, U, accumulator_for_t<Out>, Transform>;
  detail::dispatch_reduce(backend, Source{x, y, n, t}, op, out, opts, function);
}

namespace detail {
// Products are rounded on their own (multiply_rounded), never fused into the
// sum, so dot and squared_norm give the same bits on both backends.
struct product_transform {
  template <class T, class U>
  TALLY_HD_INLINE auto operator()(const T& a, const U& b) const {
    if constexpr (is_low_precision_v<T> || is_low_precision_v<U>)
      return multiply_rounded(convert<float>(a), convert<float>(b));
    else if constexpr (is_complex_v<T> && std::is_same_v<T, U>) return complex_multiply(a, b);
    else return multiply_rounded(a, b);
  }
};
struct squared_magnitude {
  template <class T>
  TALLY_HD_INLINE auto operator()(const T& a) const {
    if constexpr (is_complex_v<T>)
      return multiply_rounded(a.real(), a.real()) + multiply_rounded(a.imag(), a.imag());
    else if constexpr (is_low_precision_v<T>) return multiply_rounded(convert<float>(a), convert<float>(a));
    else return multiply_rounded(a, a);
  }
};
}  // namespace detail

/// *out = Σ x[i]·y[i] (complex numbers unconjugated, like BLAS dotu).
/// Same contract as reduce(); compensated summation available through opts.
template <class Backend, class T, class U, class Out>
void dot(const Backend& backend, const T* x, const U* y, std::int64_t n, Out* out, const options& opts = {}) {
  transform_reduce(backend, x, y, n, out, detail::product_transform{}, plus{}, opts, "dot");
}

/// *out = Σ |x[i]|² (a real number for complex x). Same contract as reduce().
template <class Backend, class T, class Out>
void squared_norm(const Backend& backend, const T* x, std::int64_t n, Out* out, const options& opts = {}) {
  transform_reduce(backend, x, n, out, detail::squared_magnitude{}, plus{}, opts, "squared_norm");
}

/// Returns x[0] + ... + x[n-1] as a value, accumulated in Acc (float for
/// half and bfloat16, the element type otherwise). On the GPU this allocates
/// a result slot (stream-ordered) and waits for the stream, so it cannot be
/// captured in a CUDA graph (tally::error if tried); use reduce() to keep the
/// result on the device.
template <class Acc = void, class Backend, class T>
auto sum(const Backend& backend, const T* x, std::int64_t n, const options& opts = {}) {
  using R = std::conditional_t<std::is_void_v<Acc>, default_accumulator_t<T>, Acc>;
  return detail::value_of<R>(backend, [&](R* out) { reduce(backend, x, n, out, plus{}, opts); });
}

/// sum() over a span.
template <class Acc = void, class Backend, class T, std::size_t E>
auto sum(const Backend& backend, std::span<T, E> x, const options& opts = {}) {
  return sum<Acc>(backend, static_cast<const T*>(x.data()), static_cast<std::int64_t>(x.size()), opts);
}

}  // namespace tally
