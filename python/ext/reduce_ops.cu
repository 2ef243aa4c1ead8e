// reduce, dot and the timing helper: tally's reduce templates for the
// package's dtypes.
#include <cuda_runtime.h>

#include "dispatch.cuh"

namespace tally_py {

namespace {

bool is_integer(dtype t) { return t == dtype::i32 || t == dtype::i64; }

// Sums and products of integers widen to int64 (as NumPy and PyTorch do);
// every other result keeps the input's dtype.
dtype widened(dtype t, reduce_op op) {
  return (is_integer(t) && (op == reduce_op::sum || op == reduce_op::prod)) ? dtype::i64 : t;
}

// Widen: write int64 (integer sums and products), else T.
template <class T, bool Widen, class Op>
void reduce_typed(const place& where, const view& x, void* out, Op op, const tally::options& o) {
  using Out = std::conditional_t<tally::indexed_operator<Op>, tally::value_index<T>,
                                 std::conditional_t<Widen, std::int64_t, T>>;
  on_backend(where, [&](const auto& backend) {
    tally::reduce(backend, static_cast<const T*>(x.data), x.n, static_cast<Out*>(out), op, o);
  });
}

/// The smallest and largest of some values; its layout is two T's, as the
/// caller's two-element output holds them.
template <class T>
struct bounds {
  T lo, hi;
};

/// A value as the bounds of itself.
struct value_as_bounds {
  template <class T>
  TALLY_HD_INLINE bounds<T> operator()(T value) const {
    return {value, value};
  }
};

/// The bounds of two sets of values by tally::minimum and tally::maximum
/// (a NaN wins, as in tally.reduce's min and max): associative and commutative.
struct widen_bounds {
  template <class B>
  TALLY_HD_INLINE B operator()(const B& a, const B& b) const {
    return {tally::minimum{}(a.lo, b.lo), tally::maximum{}(a.hi, b.hi)};
  }
  template <class B>
  TALLY_HD_INLINE B identity() const {
    using T = decltype(B::lo);
    return {tally::minimum{}.identity<T>(), tally::maximum{}.identity<T>()};
  }
};

}  // namespace

void extrema(const place& where, const view& x, void* out, const char* function) {
  visit_numeric(x.type, function, "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    static_assert(sizeof(bounds<T>) == 2 * sizeof(T), "bounds is two T's");
    on_backend(where, [&](const auto& backend) {
      tally::transform_reduce(backend, static_cast<const T*>(x.data), x.n, static_cast<bounds<T>*>(out),
                              value_as_bounds{}, widen_bounds{}, options_for(!where.gpu), function);
    });
  });
}

dtype reduce_out_type(dtype x, reduce_op op, bool compensated, const char* function) {
  if (compensated && !(op == reduce_op::sum && (x == dtype::f32 || x == dtype::f64)))
    throw unsupported_dtype(std::string("tally.") + function +
                            ": argument 'compensated' needs a sum of float32 or float64 (x has dtype " + name_of(x) +
                            ")");
  switch (op) {
    case reduce_op::sum: return widened(x, op);
    case reduce_op::bit_and:
    case reduce_op::bit_or:
    case reduce_op::bit_xor:
      if (!is_integer(x)) throw_unsupported(function, "x", x, "int32, int64 (bitwise operators)");
      return x;
    case reduce_op::argmin:
    case reduce_op::argmax:
    default:
      if (x == dtype::f16 || x == dtype::bf16)
        throw_unsupported(function, "x", x, "float32, float64, int32, int64 (float16/bfloat16: sum only)");
      return (op == reduce_op::argmin || op == reduce_op::argmax) ? dtype::i64 : widened(x, op);
  }
}

void reduce(const place& where, const view& x, void* out, reduce_op op, bool compensated, bool checked,
            const char* function) {
  reduce_out_type(x.type, op, compensated, function);  // rejects what is not instantiated
  tally::options o = options_for(checked);
  if (compensated) o.sum = tally::summation::compensated;
  if (op == reduce_op::sum && (x.type == dtype::f16 || x.type == dtype::bf16)) {
    // Narrow inputs: stored narrow, accumulated in float (tally's rule).
    on_backend(where, [&](const auto& backend) {
      if (x.type == dtype::f16)
        tally::reduce(backend, static_cast<const tally::half*>(x.data), x.n, static_cast<tally::half*>(out),
                      tally::plus{}, o);
      else
        tally::reduce(backend, static_cast<const tally::bfloat16*>(x.data), x.n,
                      static_cast<tally::bfloat16*>(out), tally::plus{}, o);
    });
    return;
  }
  const auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr bool widen = std::is_integral_v<T>;
    switch (op) {
      case reduce_op::sum: return reduce_typed<T, widen>(where, x, out, tally::plus{}, o);
      case reduce_op::prod: return reduce_typed<T, widen>(where, x, out, tally::multiplies{}, o);
      case reduce_op::min: return reduce_typed<T, false>(where, x, out, tally::minimum{}, o);
      case reduce_op::max: return reduce_typed<T, false>(where, x, out, tally::maximum{}, o);
      case reduce_op::argmin: return reduce_typed<T, false>(where, x, out, tally::arg_min{}, o);
      case reduce_op::argmax: return reduce_typed<T, false>(where, x, out, tally::arg_max{}, o);
      default:
        if constexpr (std::is_integral_v<T>) {
          if (op == reduce_op::bit_and) return reduce_typed<T, false>(where, x, out, tally::bit_and{}, o);
          if (op == reduce_op::bit_or) return reduce_typed<T, false>(where, x, out, tally::bit_or{}, o);
          return reduce_typed<T, false>(where, x, out, tally::bit_xor{}, o);
        }
    }
  };
  if (compensated) visit_float(x.type, function, "x", run);
  else visit_numeric(x.type, function, "x", run);
}

void dot(const place& where, const view& x, const view& y, void* out, bool compensated, bool checked) {
  if (x.type != y.type)
    throw unsupported_dtype(std::string("tally.dot: argument 'y' has dtype ") + name_of(y.type) + " but 'x' has " +
                            name_of(x.type));
  tally::options o = options_for(checked);
  if (compensated) o.sum = tally::summation::compensated;
  visit_float(x.type, "dot", "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    on_backend(where, [&](const auto& backend) {
      tally::dot(backend, static_cast<const T*>(x.data), static_cast<const T*>(y.data), x.n, static_cast<T*>(out), o);
    });
  });
}

void sum_cpp_calls(const view& x, void* out, int calls, bool checked, CUstream_st* stream) {
  if (x.type != dtype::f32) throw_unsupported("_sum_cpp_calls", "x", x.type, "float32");
  const auto gpu = tally::gpu.on(stream);
  const tally::options o = options_for(checked);
  const auto* data = static_cast<const float*>(x.data);
  auto* result = static_cast<float*>(out);
  for (int i = 0; i < calls; ++i) tally::reduce(gpu, data, x.n, result, tally::plus{}, o);
}

}  // namespace tally_py
