// Helpers of the *_ops.cu files: from runtime dtypes and places to tally's
// template arguments. Each visit_* lists exactly the dtypes a function
// supports, so only those are instantiated (compile time matters in CI).
#pragma once

#include <string>
#include <type_traits>

#include <tally/tally.hpp>

#include "ops.hpp"

namespace tally_py {

/// Calls f(backend) with tally::cpu or tally::gpu on the place's stream.
template <class F>
void on_backend(const place& where, F&& f) {
  if (where.gpu) f(tally::gpu.on(where.stream));
  else f(tally::cpu);
}

template <class T>
struct type_tag {
  using type = T;
};

[[noreturn]] inline void throw_unsupported(const char* function, const char* argument, dtype t,
                                           const char* supported) {
  throw unsupported_dtype(std::string("tally.") + function + ": argument '" + argument + "' has dtype " +
                          name_of(t) + "; supported: " + supported);
}

/// f(type_tag<T>) for T in f32, f64, i32, i64.
template <class F>
void visit_numeric(dtype t, const char* function, const char* argument, F&& f) {
  switch (t) {
    case dtype::f32: return f(type_tag<float>{});
    case dtype::f64: return f(type_tag<double>{});
    case dtype::i32: return f(type_tag<std::int32_t>{});
    case dtype::i64: return f(type_tag<std::int64_t>{});
    default: throw_unsupported(function, argument, t, "float32, float64, int32, int64");
  }
}

/// f(type_tag<T>) for T in f32, f64.
template <class F>
void visit_float(dtype t, const char* function, const char* argument, F&& f) {
  switch (t) {
    case dtype::f32: return f(type_tag<float>{});
    case dtype::f64: return f(type_tag<double>{});
    default: throw_unsupported(function, argument, t, "float32, float64");
  }
}

/// f(type_tag<T>) for T in i32, i64.
template <class F>
void visit_integer(dtype t, const char* function, const char* argument, F&& f) {
  switch (t) {
    case dtype::i32: return f(type_tag<std::int32_t>{});
    case dtype::i64: return f(type_tag<std::int64_t>{});
    default: throw_unsupported(function, argument, t, "int32, int64");
  }
}

/// Options for a call: tally's argument checks on or off (the bindings have
/// already checked devices and overlaps when off).
inline tally::histogram_options options_for(bool checked, fixed_point deterministic = {}) {
  static_assert(fixed_point::kDerived == tally::kDeriveFixedPointScale);
  tally::histogram_options o;
  o.checks = checked ? tally::check_mode::checked : tally::check_mode::unchecked;
  o.deterministic = deterministic.on;
  o.fixed_point_bits = deterministic.bits;
  return o;
}

}  // namespace tally_py
