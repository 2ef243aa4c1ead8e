// tally._core: the nanobind module under the Python package. Each function
// takes arrays that speak DLPack or the buffer protocol (NumPy, PyTorch,
// CuPy, ...), checks them (dtype, shape, contiguity, device, overlap) with
// errors naming the argument, and calls ops.hpp on the CPU backend (host
// arrays) or the GPU backend (CUDA arrays, on the stream given). Outputs are
// preallocated by the Python layer (src/tally/*.py), in the caller's library.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <tally/core/error.hpp>

#include "dlpack_exchange.hpp"
#include "ops.hpp"
#include "torch_tensor.hpp"

namespace nb = nanobind;
using namespace tally_py;

namespace {

using input_array = nb::ndarray<nb::ro>;
using output_array = nb::ndarray<>;

/// Where the arrays of one call live; the first array sets it, the others must agree.
struct call_site {
  explicit call_site(const char* f) : function(f) {}
  /// The core's name for an argument and the Python caller's (see run).
  struct rename {
    const char* core;
    const char* python;
  };
  call_site(const char* f, std::span<const rename> r) : function(f), renamed(r) {}
  const char* function;
  std::span<const rename> renamed;  ///< static tables below
  bool known = false;
  bool gpu = false;
  int device = 0;
  const char* first_argument = nullptr;
  std::vector<input_array> keep_inputs;  // alive until the call returns
  std::vector<output_array> keep_outputs;
};

/// The core names a deterministic sum's bad value 'value' (scatter_reduce's
/// argument, which bincount calls) or 'weights', and a histogram's samples
/// 'samples'; the Python functions call them as below.
constexpr call_site::rename kHistogramNames[] = {{"value", "weights"}, {"samples", "x"}};
constexpr call_site::rename kScatterNames[] = {{"value", "src"}};

std::string device_name(bool gpu, int device) { return gpu ? "cuda:" + std::to_string(device) : "cpu"; }

std::string prefix(const call_site& site, const char* argument) {
  return std::string("tally.") + site.function + ": argument '" + argument + "' ";
}

/// Every dtype the package knows.
constexpr dtype kDtypes[] = {dtype::f16, dtype::bf16, dtype::f32, dtype::f64, dtype::i32, dtype::i64};

/// The DLPack dtype of a package dtype.
nb::dlpack::dtype dlpack_of(dtype t) {
  using code = nb::dlpack::dtype_code;
  switch (t) {
    case dtype::f16: return {(uint8_t)code::Float, 16, 1};
    case dtype::bf16: return {(uint8_t)code::Bfloat, 16, 1};
    case dtype::f32: return {(uint8_t)code::Float, 32, 1};
    case dtype::f64: return {(uint8_t)code::Float, 64, 1};
    case dtype::i32: return {(uint8_t)code::Int, 32, 1};
    case dtype::i64: return {(uint8_t)code::Int, 64, 1};
  }
  return {};
}

/// The package dtype of DLPack dtype t, if the package takes it.
std::optional<dtype> package_dtype(nb::dlpack::dtype t) {
  for (dtype d : kDtypes)
    if (dlpack_of(d) == t) return d;
  return std::nullopt;
}

/// The package dtype named `name` ("float32", ...; name_of's names), if any.
std::optional<dtype> dtype_named(const std::string& name) {
  for (dtype d : kDtypes)
    if (name == name_of(d)) return d;
  return std::nullopt;
}

dtype to_dtype(const call_site& site, const char* argument, nb::dlpack::dtype t) {
  if (const std::optional<dtype> d = package_dtype(t)) return *d;
  static const char* names[] = {"int", "uint", "float", "?", "bfloat", "complex", "bool"};
  const std::string kind = t.code <= 6 ? names[t.code] : "code " + std::to_string(t.code);
  throw nb::type_error((prefix(site, argument) + "has an unsupported dtype (" + kind + std::to_string(t.bits) +
                        "); tally takes float16, bfloat16, float32, float64, int32 and int64 arrays")
                           .c_str());
}

/// The array's dtype, after checking that it lives where the call's other
/// arrays do (the first array of a call sets the place).
template <class Array>
dtype locate(call_site& site, const char* argument, const Array& a) {
  const dtype type = to_dtype(site, argument, a.dtype());

  const int device_type = a.device_type();
  bool gpu = false;
  if (device_type == nb::device::cuda::value || device_type == nb::device::cuda_managed::value) gpu = true;
  else if (device_type != nb::device::cpu::value && device_type != nb::device::cuda_host::value)
    throw nb::value_error((prefix(site, argument) + "lives on DLPack device type " + std::to_string(device_type) +
                           "; tally runs host (CPU) and CUDA arrays")
                              .c_str());
  const int device = gpu ? a.device_id() : 0;
  if (!site.known) {
    if (gpu) {
      std::string why;
      if (!gpu_available(&why))
        throw nb::value_error((prefix(site, argument) + "is a CUDA array, but " + why +
                               "; only host (NumPy) arrays can be used here")
                                  .c_str());
    }
    site.known = true;
    site.gpu = gpu;
    site.device = device;
    site.first_argument = argument;
  } else if (gpu != site.gpu || device != site.device) {
    throw nb::value_error((prefix(site, argument) + "is on " + device_name(gpu, device) + " but '" +
                           site.first_argument + "' is on " + device_name(site.gpu, site.device) +
                           "; all arrays of a call must live on one device")
                              .c_str());
  }
  return type;
}

/// The array's elements as one contiguous run (C order), or a ValueError.
template <class Array>
view checked_view(call_site& site, const char* argument, const Array& a, int max_ndim) {
  if (max_ndim >= 0 && a.ndim() > static_cast<size_t>(max_ndim))
    throw nb::value_error((prefix(site, argument) + "must be " + (max_ndim == 0 ? "a scalar" : "one-dimensional") +
                           " (got " + std::to_string(a.ndim()) + " dimensions)")
                              .c_str());
  std::int64_t expected = 1;
  for (size_t i = a.ndim(); a.size() > 0 && i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected)
      throw nb::value_error((prefix(site, argument) +
                             "must be contiguous (C order); make a contiguous copy first (e.g. .contiguous() in "
                             "PyTorch, numpy.ascontiguousarray)")
                                .c_str());
    expected *= static_cast<std::int64_t>(a.shape(i));
  }
  const dtype type = locate(site, argument, a);
  return {const_cast<void*>(static_cast<const void*>(a.data())), static_cast<std::int64_t>(a.size()), type};
}

/// A two-dimensional array whose columns are contiguous and whose rows may be
/// any number of elements >= the column count apart, or a ValueError.
template <class Array>
matrix checked_matrix(call_site& site, const char* argument, const Array& a) {
  if (a.ndim() != 2)
    throw nb::value_error((prefix(site, argument) + "must be two-dimensional (rows, columns) (got " +
                           std::to_string(a.ndim()) + " dimensions)")
                              .c_str());
  const auto rows = static_cast<std::int64_t>(a.shape(0)), cols = static_cast<std::int64_t>(a.shape(1));
  if (rows > 0 && cols > 1 && a.stride(1) != 1)
    throw nb::value_error((prefix(site, argument) +
                           "must have contiguous columns (a row stride is fine); make a contiguous copy first "
                           "(e.g. .contiguous() in PyTorch, numpy.ascontiguousarray)")
                              .c_str());
  std::int64_t stride = cols;
  if (rows > 1 && cols > 0) {
    stride = static_cast<std::int64_t>(a.stride(0));
    if (stride < cols)
      throw nb::value_error((prefix(site, argument) + "has rows " + std::to_string(stride) +
                             " elements apart, fewer than its " + std::to_string(cols) +
                             " columns (overlapping or reversed rows); make a contiguous copy first")
                                .c_str());
  }
  const dtype type = locate(site, argument, a);
  return {const_cast<void*>(static_cast<const void*>(a.data())), rows, cols, stride, type};
}

/// h as an array tally reads (kept alive by the call site), else a TypeError naming the argument.
input_array cast_input(call_site& site, const char* argument, nb::handle h) {
  input_array a;
  if (auto tensor = torch_tensor_array(h, false, site.function, argument)) a = input_array(*tensor);
  else if (!nb::try_cast(h, a, false))
    throw nb::type_error((prefix(site, argument) + "must be an array (NumPy, PyTorch, CuPy, or any object with "
                                                   "__dlpack__ or the buffer protocol), got " +
                          std::string(nb::type_name(h.type()).c_str()))
                             .c_str());
  site.keep_inputs.push_back(a);
  return a;
}

/// h as an array tally writes (kept alive by the call site), else a
/// ValueError (read-only) or TypeError naming the argument.
output_array cast_output(call_site& site, const char* argument, nb::handle h) {
  output_array a;
  if (auto tensor = torch_tensor_array(h, true, site.function, argument)) a = *tensor;
  else if (!nb::try_cast(h, a, false)) {
    input_array readonly;
    if (nb::try_cast(h, readonly, false))
      throw nb::value_error((prefix(site, argument) + "is read-only; tally writes into it").c_str());
    throw nb::type_error((prefix(site, argument) + "must be a writable array, got " +
                          std::string(nb::type_name(h.type()).c_str()))
                             .c_str());
  }
  site.keep_outputs.push_back(a);
  return a;
}

view input(call_site& site, const char* argument, nb::handle h, int max_ndim = -1) {
  return checked_view(site, argument, cast_input(site, argument, h), max_ndim);
}

view output(call_site& site, const char* argument, nb::handle h, int max_ndim = -1) {
  return checked_view(site, argument, cast_output(site, argument, h), max_ndim);
}

matrix input_matrix(call_site& site, const char* argument, nb::handle h) {
  return checked_matrix(site, argument, cast_input(site, argument, h));
}

matrix output_matrix(call_site& site, const char* argument, nb::handle h) {
  return checked_matrix(site, argument, cast_output(site, argument, h));
}

std::size_t item_size(dtype t) {
  switch (t) {
    case dtype::f16:
    case dtype::bf16: return 2;
    case dtype::f32:
    case dtype::i32: return 4;
    default: return 8;
  }
}

bool overlaps(const view& a, const view& b) {
  const auto a0 = reinterpret_cast<std::uintptr_t>(a.data), b0 = reinterpret_cast<std::uintptr_t>(b.data);
  const auto a1 = a0 + a.n * item_size(a.type), b1 = b0 + b.n * item_size(b.type);
  return a.n > 0 && b.n > 0 && a0 < b1 && b0 < a1;
}

/// The elements a matrix spans, as a view (for overlap checks).
view span_of(const matrix& m) {
  const std::int64_t n = m.rows > 0 && m.cols > 0 ? (m.rows - 1) * m.stride + m.cols : 0;
  return {m.data, n, m.type};
}

void check_no_overlap(const call_site& site, const char* out_name, const view& out, const char* in_name,
                      const view& in) {
  if (overlaps(out, in))
    throw nb::value_error((prefix(site, out_name) + "overlaps '" + in_name + "'; tally needs separate memory").c_str());
}

void check_size(const call_site& site, const char* argument, const view& v, std::int64_t n, const char* what) {
  if (v.n != n)
    throw nb::value_error((prefix(site, argument) + "has " + std::to_string(v.n) + " elements; " + what + " (" +
                           std::to_string(n) + ")")
                              .c_str());
}

/// The optional weights of a histogram or bincount, one per sample of x
/// (None: unweighted).
std::optional<view> weights_of(call_site& site, nb::handle weights, const view& xv, int max_ndim = -1) {
  if (weights.is_none()) return std::nullopt;
  const view wv = input(site, "weights", weights, max_ndim);
  check_size(site, "weights", wv, xv.n, "it must match 'x'");
  return wv;
}

/// The core's error about an argument, as the Python caller knows the call:
/// "tally::<C++ function>: argument '<core name>' <problem>" becomes
/// "tally.<function>: argument '<Python name>' <problem>" (site.renamed maps
/// the names that differ, e.g. the core's 'value' to a histogram's 'weights').
/// Other messages pass unchanged.
[[noreturn]] void throw_for_python(const call_site& site, const tally::invalid_argument& e) {
  const std::string what = e.what();
  static constexpr char kMarker[] = ": argument '";
  const std::size_t at = what.find(kMarker);
  const std::size_t name = at + sizeof(kMarker) - 1;
  const std::size_t name_end = at == std::string::npos ? at : what.find("' ", name);
  if (what.rfind("tally::", 0) != 0 || name_end == std::string::npos) throw nb::value_error(what.c_str());
  std::string argument = what.substr(name, name_end - name);
  for (const call_site::rename& r : site.renamed)
    if (argument == r.core) argument = r.python;
  throw nb::value_error((prefix(site, argument.c_str()) + what.substr(name_end + 2)).c_str());
}

/// Runs `f(place)` on the call's backend: the GPU's device made current, the
/// GIL released. The core's invalid_argument errors come out named for Python.
template <class F>
void run(const call_site& site, std::uintptr_t stream, F&& f) {
  const place where{site.gpu, reinterpret_cast<CUstream_st*>(stream)};
  try {
    nb::gil_scoped_release release;
    if (site.gpu) {
      device_guard guard(site.device);
      f(where);
    } else {
      f(where);
    }
  } catch (const tally::invalid_argument& e) {
    throw_for_python(site, e);
  }
}

/// Whether a histogram or bincount call runs checked: never when the caller
/// passed check_weights=False (bad weights then count as 0 on both
/// backends, silently); else on the CPU always (the core's pointer checks
/// cost nothing there), on the GPU only where a deterministic weighted call
/// has bad weights (NaN, ±inf, beyond the fixed-point range) to report --
/// which reads a flag back and waits for the stream. Unweighted counts have
/// nothing to check.
bool reports_bad_weights(const place& p, bool deterministic, const std::optional<view>& weights, bool check_weights) {
  return check_weights && (!p.gpu || (deterministic && weights.has_value()));
}

/// The fixed-point mode of a call: off, or on with the scale the Python layer
/// gave (checked there: -1022 ... 1023) or, for None, derived from the values.
fixed_point fixed_point_of(bool deterministic, const std::optional<int>& bits) {
  return deterministic ? fixed_point{true, bits.value_or(fixed_point::kDerived)} : fixed_point{};
}

reduce_op parse_reduce_op(const call_site& site, const std::string& name) {
  if (name == "sum" || name == "plus") return reduce_op::sum;
  if (name == "prod") return reduce_op::prod;
  if (name == "min") return reduce_op::min;
  if (name == "max") return reduce_op::max;
  if (name == "argmin") return reduce_op::argmin;
  if (name == "argmax") return reduce_op::argmax;
  if (name == "and") return reduce_op::bit_and;
  if (name == "or") return reduce_op::bit_or;
  if (name == "xor") return reduce_op::bit_xor;
  throw nb::value_error((prefix(site, "op") + "is '" + name +
                         "'; one of 'sum' ('plus'), 'prod', 'min', 'max', 'argmin', 'argmax', 'and', 'or', 'xor'")
                            .c_str());
}

scatter_op parse_scatter_op(const call_site& site, const std::string& name) {
  if (name == "sum") return scatter_op::sum;
  if (name == "prod") return scatter_op::prod;
  if (name == "amin") return scatter_op::min;
  if (name == "amax") return scatter_op::max;
  throw nb::value_error(
      (prefix(site, "reduce") + "is '" + name + "'; one of 'sum', 'prod', 'amin', 'amax'").c_str());
}

/// out[...] = the reduction of xv with o, run on `stream`, after checking
/// out's dtype and size against xv and o (tally.reduce's rules).
void run_reduce(call_site& site, const view& xv, nb::handle out, reduce_op o, bool compensated, std::uintptr_t stream,
                bool checked) {
  const view ov = output(site, "out", out);
  const dtype expected = reduce_out_type(xv.type, o, compensated, site.function);
  const bool indexed = o == reduce_op::argmin || o == reduce_op::argmax;
  if (ov.type != expected || ov.n != (indexed ? 2 : 1))
    throw nb::value_error((prefix(site, "out") + "must hold " + (indexed ? "2 elements" : "1 element") +
                           " of dtype " + name_of(expected) + " (got " + std::to_string(ov.n) + " of " +
                           name_of(ov.type) + ")")
                              .c_str());
  check_no_overlap(site, "out", ov, "x", xv);
  run(site, stream, [&](const place& p) {
    reduce(p, xv, ov.data, o, compensated, checked || !p.gpu, site.function);
  });
}

/// The vectors of a cg call.
struct cg_vectors {
  view b;
  std::optional<view> x0;
  view x;
  double* history;  ///< null, or max_iterations + 1 float64
};

/// b (already read), x0, the output x and the optional history, checked
/// against n rows and b's dtype; x and history overlap nothing else.
cg_vectors checked_cg_vectors(call_site& site, const view& b, nb::handle x0, nb::handle x, nb::handle history,
                              std::int64_t n, std::int64_t max_iterations) {
  cg_vectors v{b, std::nullopt, {}, nullptr};
  check_size(site, "b", b, n, "it must match A's rows");
  if (!x0.is_none()) {
    v.x0 = input(site, "x0", x0, 1);
    check_size(site, "x0", *v.x0, n, "it must match A's rows");
    if (v.x0->type != b.type)
      throw nb::type_error(
          (prefix(site, "x0") + "has dtype " + name_of(v.x0->type) + " but 'b' has " + name_of(b.type)).c_str());
  }
  v.x = output(site, "x", x, 1);
  check_size(site, "x", v.x, n, "it must match A's rows");
  if (v.x.type != b.type) throw nb::type_error((prefix(site, "x") + "must have b's dtype").c_str());
  check_no_overlap(site, "x", v.x, "b", b);
  if (v.x0) check_no_overlap(site, "x", v.x, "x0", *v.x0);
  if (!history.is_none()) {
    const view h = output(site, "history", history, 1);
    check_size(site, "history", h, max_iterations + 1, "it holds max_iterations + 1 entries");
    if (h.type != dtype::f64) throw nb::type_error((prefix(site, "history") + "must be float64").c_str());
    check_no_overlap(site, "history", h, "x", v.x);
    v.history = static_cast<double*>(h.data);
  }
  return v;
}

/// cg's report as the tuple the Python layer unpacks.
nb::tuple report_tuple(const cg_report& r) {
  return nb::make_tuple(r.iterations, r.status, r.message, r.relative_residual, r.rhs_norm, r.mode, r.note);
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "tally's compiled core; use the functions of the tally package instead.";

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const tally::invalid_argument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const unsupported_dtype& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const tally::error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  m.def("gpu_status", []() {
    std::string why;
    const bool ok = gpu_available(&why);
    return nb::make_tuple(ok, ok ? std::string("a CUDA device is usable") : why);
  }, "(available, reason): whether tally can run on a GPU here.");

  m.def(
      "describe",
      [](nb::handle x, const char* function, const char* argument) {
        call_site site(function);
        const input_array a = cast_input(site, argument, x);
        nb::list shape;
        for (size_t i = 0; i < a.ndim(); ++i) shape.append(a.shape(i));
        return nb::make_tuple(name_of(to_dtype(site, argument, a.dtype())), shape);
      },
      nb::arg("x"), nb::arg("function"), nb::arg("argument"),
      "(dtype name, shape) of an array read through DLPack or the buffer protocol, for a producer that has no "
      "dtype or shape attribute; TypeError naming the argument where it is no array or its dtype is not tally's.");

  m.def(
      "reduce_out_dtype",
      [](const std::string& x_dtype, const std::string& op, bool compensated, const char* function) {
        call_site site(function);
        if (const std::optional<dtype> t = dtype_named(x_dtype))
          return std::string(name_of(reduce_out_type(*t, parse_reduce_op(site, op), compensated, function)));
        throw nb::type_error((prefix(site, "x") + "has an unsupported dtype (" + x_dtype +
                              "); tally takes float16, bfloat16, float32, float64, int32 and int64 arrays")
                                 .c_str());
      },
      nb::arg("x_dtype"), nb::arg("op"), nb::arg("compensated"), nb::arg("function"),
      "The dtype reduce() writes for an input dtype and operator ('int64' for argmin/argmax).");

  m.def(
      "reduce",
      [](nb::handle x, nb::handle out, const std::string& op, bool compensated, std::uintptr_t stream,
         bool checked, const char* function) {
        call_site site(function);
        const view xv = input(site, "x", x);
        run_reduce(site, xv, out, parse_reduce_op(site, op), compensated, stream, checked);
      },
      nb::arg("x"), nb::arg("out"), nb::arg("op"), nb::arg("compensated"), nb::arg("stream"), nb::arg("checked"),
      nb::arg("function"), "out[...] = the reduction of x with `op` (see tally.reduce).");

  m.def(
      "reduce_current",
      [](nb::handle x, nb::handle out, const std::string& op, bool compensated, const char* function) -> nb::object {
        // A small call's whole overhead: here x, its stream and a new output
        // come from torch's DLPack exchange table, where the Python layer
        // would classify x, ask for the stream and allocate in Python.
        const dlpack_exchange::table* table = is_plain_torch_tensor(x) ? dlpack_exchange::table_of(x) : nullptr;
        if (table == nullptr) return nb::none();
        call_site site(function);
        const reduce_op o = parse_reduce_op(site, op);
        if (o == reduce_op::argmin || o == reduce_op::argmax) return nb::none();  // the result is a view of the output
        std::optional<nb::ndarray<>> tensor = torch_tensor_array(x, false, function, "x");
        if (!tensor || !package_dtype(tensor->dtype())) return nb::none();  // the general path says why
        site.keep_inputs.push_back(input_array(*tensor));
        const view xv = checked_view(site, "x", site.keep_inputs.back(), -1);
        nb::object result = nb::borrow(out);
        if (out.is_none())
          result = dlpack_exchange::allocate(table, {}, dlpack_of(reduce_out_type(xv.type, o, compensated, function)),
                                             site.gpu ? site.device : -1);
        const std::uintptr_t stream = site.gpu ? dlpack_exchange::current_stream(table, site.device) : 0;
        run_reduce(site, xv, result, o, compensated, stream, false);
        return result;
      },
      nb::arg("x"), nb::arg("out").none(), nb::arg("op"), nb::arg("compensated"), nb::arg("function"),
      "tally.reduce on torch's current stream for a torch tensor x read through torch's DLPack exchange table "
      "(PyTorch 2.11 on), into `out` or a new 0-d tensor, which it returns; None, having done nothing, where x "
      "is anything else or the op is argmin/argmax.");

  m.def(
      "extrema",
      [](nb::handle x, nb::handle out, std::uintptr_t stream, const char* function) {
        call_site site(function);
        const view xv = input(site, "x", x);
        const view ov = output(site, "out", out);
        if (xv.n < 1) throw nb::value_error((prefix(site, "x") + "must not be empty").c_str());
        if (ov.n != 2 || ov.type != xv.type)
          throw nb::value_error((prefix(site, "out") + "must hold 2 elements of x's dtype").c_str());
        check_no_overlap(site, "out", ov, "x", xv);
        run(site, stream, [&](const place& p) { extrema(p, xv, ov.data, function); });
      },
      nb::arg("x"), nb::arg("out"), nb::arg("stream"), nb::arg("function"),
      "out[0], out[1] = x.min(), x.max() in one pass (float32/float64/int32/int64; a NaN wins both).");

  m.def(
      "dot",
      [](nb::handle x, nb::handle y, nb::handle out, bool compensated, std::uintptr_t stream, bool checked) {
        call_site site("dot");
        const view xv = input(site, "x", x), yv = input(site, "y", y);
        const view ov = output(site, "out", out);
        check_size(site, "y", yv, xv.n, "it must match 'x'");
        if (ov.n != 1 || ov.type != xv.type)
          throw nb::value_error((prefix(site, "out") + "must hold 1 element of x's dtype").c_str());
        check_no_overlap(site, "out", ov, "x", xv);
        check_no_overlap(site, "out", ov, "y", yv);
        run(site, stream, [&](const place& p) { dot(p, xv, yv, ov.data, compensated, checked || !p.gpu); });
      },
      nb::arg("x"), nb::arg("y"), nb::arg("out"), nb::arg("compensated"), nb::arg("stream"), nb::arg("checked"),
      "out[0] = sum of x*y (see tally.dot).");

  m.def(
      "histogram_even",
      [](nb::handle x, nb::handle weights, nb::handle counts, double lo, double hi, bool deterministic,
         std::optional<int> fixed_point_bits, bool check_weights, std::uintptr_t stream) {
        call_site site("histogram", kHistogramNames);
        const view xv = input(site, "x", x);
        const std::optional<view> wv = weights_of(site, weights, xv);
        const view cv = output(site, "counts", counts, 1);
        check_no_overlap(site, "counts", cv, "x", xv);
        if (wv) check_no_overlap(site, "counts", cv, "weights", *wv);
        run(site, stream, [&](const place& p) {
          histogram_even(p, xv, wv ? &*wv : nullptr, cv, lo, hi, fixed_point_of(deterministic, fixed_point_bits),
                         reports_bad_weights(p, deterministic, wv, check_weights));
        });
      },
      nb::arg("x"), nb::arg("weights").none(), nb::arg("counts"), nb::arg("lo"), nb::arg("hi"),
      nb::arg("deterministic"), nb::arg("fixed_point_bits").none(), nb::arg("check_weights"), nb::arg("stream"),
      "Equal-width histogram (see tally.histogram).");

  m.def(
      "histogram_edges",
      [](nb::handle x, nb::handle weights, nb::handle edges, nb::handle counts, bool deterministic,
         std::optional<int> fixed_point_bits, bool check_weights, std::uintptr_t stream) {
        call_site site("histogram", kHistogramNames);
        const view xv = input(site, "x", x);
        const std::optional<view> wv = weights_of(site, weights, xv);
        const view ev = input(site, "bins", edges, 1);
        if (ev.type != dtype::f64) throw nb::type_error((prefix(site, "bins") + "must be float64 edges").c_str());
        const view cv = output(site, "counts", counts, 1);
        check_size(site, "counts", cv, ev.n - 1, "one fewer than the edges");
        check_no_overlap(site, "counts", cv, "x", xv);
        check_no_overlap(site, "counts", cv, "bins", ev);
        if (wv) check_no_overlap(site, "counts", cv, "weights", *wv);
        run(site, stream, [&](const place& p) {
          histogram_edges(p, xv, wv ? &*wv : nullptr, static_cast<const double*>(ev.data), ev.n, cv,
                          fixed_point_of(deterministic, fixed_point_bits),
                          reports_bad_weights(p, deterministic, wv, check_weights));
        });
      },
      nb::arg("x"), nb::arg("weights").none(), nb::arg("bins"), nb::arg("counts"), nb::arg("deterministic"),
      nb::arg("fixed_point_bits").none(), nb::arg("check_weights"), nb::arg("stream"),
      "Histogram over explicit edges (see tally.histogram).");

  m.def(
      "bincount",
      [](nb::handle x, nb::handle weights, nb::handle counts, bool deterministic, std::optional<int> fixed_point_bits,
         bool check_weights, std::uintptr_t stream) {
        call_site site("bincount", kHistogramNames);
        const view xv = input(site, "x", x, 1);
        const std::optional<view> wv = weights_of(site, weights, xv, 1);
        const view cv = output(site, "counts", counts, 1);
        check_no_overlap(site, "counts", cv, "x", xv);
        if (wv) check_no_overlap(site, "counts", cv, "weights", *wv);
        run(site, stream, [&](const place& p) {
          bincount(p, xv, wv ? &*wv : nullptr, cv, fixed_point_of(deterministic, fixed_point_bits),
                   reports_bad_weights(p, deterministic, wv, check_weights));
        });
      },
      nb::arg("x"), nb::arg("weights").none(), nb::arg("counts"), nb::arg("deterministic"),
      nb::arg("fixed_point_bits").none(), nb::arg("check_weights"), nb::arg("stream"),
      "counts[x[i]] += weights[i] or 1 (see tally.bincount).");

  m.def(
      "scatter",
      [](nb::handle out, nb::handle index, nb::handle src, const std::string& op, bool deterministic,
         std::optional<int> fixed_point_bits, bool check_indices, std::uintptr_t stream, const char* function) {
        call_site site(function, kScatterNames);
        const view ov = output(site, "out", out, 1);
        const view iv = input(site, "index", index, 1);
        const view sv = input(site, "src", src, 1);
        check_size(site, "src", sv, iv.n, "it must match 'index'");
        check_no_overlap(site, "out", ov, "index", iv);
        check_no_overlap(site, "out", ov, "src", sv);
        const scatter_op o = parse_scatter_op(site, op);
        run(site, stream, [&](const place& p) {
          scatter(p, ov, iv, sv, o, fixed_point_of(deterministic, fixed_point_bits), check_indices);
        });
      },
      nb::arg("out"), nb::arg("index"), nb::arg("src"), nb::arg("op"), nb::arg("deterministic"),
      nb::arg("fixed_point_bits").none(), nb::arg("check_indices"), nb::arg("stream"), nb::arg("function"),
      "out[index[i]] = op(out[index[i]], src[i]) (see tally.scatter_reduce).");

  m.def(
      "index_add",
      [](nb::handle out, nb::handle index, nb::handle src, const std::string& op, bool deterministic,
         const std::string& sums, std::optional<int> fixed_point_bits, bool check_indices, std::uintptr_t stream) {
        call_site site("index_add");
        index_add_sums how = index_add_sums::automatic;
        if (sums == "fixed_point") how = index_add_sums::fixed_point;
        else if (sums == "ordered") how = index_add_sums::ordered;
        else if (sums != "automatic")
          throw nb::value_error(
              (prefix(site, "sums") + "is '" + sums + "'; one of 'automatic', 'fixed_point', 'ordered'").c_str());
        const matrix om = output_matrix(site, "out", out);
        const view iv = input(site, "index", index, 1);
        const matrix sm = input_matrix(site, "src", src);
        if (sm.rows != iv.n)
          throw nb::value_error((prefix(site, "src") + "has " + std::to_string(sm.rows) +
                                 " rows; it must have one per index (" + std::to_string(iv.n) + ")")
                                    .c_str());
        if (sm.cols != om.cols)
          throw nb::value_error((prefix(site, "src") + "has " + std::to_string(sm.cols) +
                                 " columns; it must match 'out' (" + std::to_string(om.cols) + ")")
                                    .c_str());
        check_no_overlap(site, "out", span_of(om), "index", iv);
        check_no_overlap(site, "out", span_of(om), "src", span_of(sm));
        const scatter_op o = parse_scatter_op(site, op);
        run(site, stream, [&](const place& p) {
          index_add(p, om, iv, sm, o, fixed_point_of(deterministic, fixed_point_bits), how, check_indices);
        });
      },
      nb::arg("out"), nb::arg("index"), nb::arg("src"), nb::arg("op"), nb::arg("deterministic"), nb::arg("sums"),
      nb::arg("fixed_point_bits").none(), nb::arg("check_indices"), nb::arg("stream"),
      "out[index[i], :] = op(out[index[i], :], src[i, :]) (see tally.index_add).");

  m.def(
      "cg",
      [](nb::handle indptr, nb::handle indices, nb::handle data, std::int64_t rows, std::int64_t cols, nb::handle b,
         nb::handle x0, nb::handle x, nb::handle history, double rtol, double atol, std::int64_t max_iterations,
         std::int64_t true_residual_interval, bool jacobi, bool pipelined, std::uintptr_t stream) {
        call_site site("cg");
        const view bv = input(site, "b", b, 1);
        const csr_matrix A{rows, cols, input(site, "A", indptr, 1), input(site, "A", indices, 1),
                           input(site, "A", data, 1)};
        if (rows < 0 || rows != cols)
          throw nb::value_error((prefix(site, "A") + "must be square (got " + std::to_string(rows) + " x " +
                                 std::to_string(cols) + ")")
                                    .c_str());
        if (A.offsets.n != rows + 1)
          throw nb::value_error((prefix(site, "A") + "has " + std::to_string(A.offsets.n) +
                                 " row offsets; a matrix of " + std::to_string(rows) + " rows needs " +
                                 std::to_string(rows + 1))
                                    .c_str());
        if (A.values.n != A.columns.n)
          throw nb::value_error((prefix(site, "A") + "has " + std::to_string(A.values.n) + " values but " +
                                 std::to_string(A.columns.n) + " column indices")
                                    .c_str());
        if (A.offsets.type != A.columns.type || (A.offsets.type != dtype::i32 && A.offsets.type != dtype::i64))
          throw nb::type_error((prefix(site, "A") + "has row offsets of dtype " + name_of(A.offsets.type) +
                                " and column indices of dtype " + name_of(A.columns.type) +
                                "; tally takes int32 or int64 for both (one dtype)")
                                   .c_str());
        if (A.values.type != dtype::f32 && A.values.type != dtype::f64)
          throw nb::type_error((prefix(site, "A") + "has values of dtype " + name_of(A.values.type) +
                                "; tally takes float32 or float64")
                                   .c_str());
        if (bv.type != A.values.type)
          throw nb::type_error((prefix(site, "b") + "has dtype " + name_of(bv.type) + " but A's values have " +
                                name_of(A.values.type))
                                   .c_str());
        const cg_vectors v = checked_cg_vectors(site, bv, x0, x, history, rows, max_iterations);
        for (const view& part : {A.offsets, A.columns, A.values}) check_no_overlap(site, "x", v.x, "A", part);
        const cg_settings settings{rtol, atol, max_iterations, true_residual_interval, jacobi, pipelined};
        cg_report r{};
        run(site, stream, [&](const place& p) { r = cg(p, A, v.b, v.x0 ? &*v.x0 : nullptr, v.x, v.history, settings); });
        return report_tuple(r);
      },
      nb::arg("indptr"), nb::arg("indices"), nb::arg("data"), nb::arg("rows"), nb::arg("cols"), nb::arg("b"),
      nb::arg("x0").none(), nb::arg("x"), nb::arg("history").none(), nb::arg("rtol"), nb::arg("atol"),
      nb::arg("max_iterations"), nb::arg("true_residual_interval"), nb::arg("jacobi"), nb::arg("pipelined"),
      nb::arg("stream"),
      "Solves A x = b by conjugate gradient into x (see tally.cg); returns (iterations, status, message, "
      "relative_residual, rhs_norm, mode, note).");

  m.def(
      "cg_stencil",
      [](std::int64_t g, int points, nb::handle b, nb::handle x0, nb::handle x, nb::handle history, double rtol,
         double atol, std::int64_t max_iterations, std::int64_t true_residual_interval, bool jacobi, bool pipelined,
         std::uintptr_t stream) {
        call_site site("cg");
        const view bv = input(site, "b", b, 1);
        if (bv.type != dtype::f32 && bv.type != dtype::f64)
          throw nb::type_error(
              (prefix(site, "b") + "has dtype " + name_of(bv.type) + "; tally takes float32 or float64").c_str());
        if (g < 1 || g > (std::int64_t{1} << 20))
          throw nb::value_error((prefix(site, "A") + "has grid size " + std::to_string(g) + "; tally takes 1 to 2^20")
                                    .c_str());
        if (points != 7 && points != 27)
          throw nb::value_error((prefix(site, "A") + "has " + std::to_string(points) + " points; 7 or 27").c_str());
        const stencil A{g, points};
        const cg_vectors v = checked_cg_vectors(site, bv, x0, x, history, g * g * g, max_iterations);
        const cg_settings settings{rtol, atol, max_iterations, true_residual_interval, jacobi, pipelined};
        cg_report r{};
        run(site, stream, [&](const place& p) { r = cg(p, A, v.b, v.x0 ? &*v.x0 : nullptr, v.x, v.history, settings); });
        return report_tuple(r);
      },
      nb::arg("g"), nb::arg("points"), nb::arg("b"), nb::arg("x0").none(), nb::arg("x"), nb::arg("history").none(),
      nb::arg("rtol"), nb::arg("atol"), nb::arg("max_iterations"), nb::arg("true_residual_interval"),
      nb::arg("jacobi"), nb::arg("pipelined"), nb::arg("stream"),
      "Solves A x = b for the g^3-row Poisson stencil (7 or 27 points, tally.Poisson) into x; returns as cg.");

  m.def(
      "stream_wait",
      [](std::uintptr_t consumer, std::uintptr_t producer) {
        stream_wait(reinterpret_cast<CUstream_st*>(consumer), reinterpret_cast<CUstream_st*>(producer));
      },
      nb::arg("consumer"), nb::arg("producer"), "Makes stream `consumer` wait for the work queued on `producer`.");

  m.def(
      "wrap_cuda_array",
      [](std::uintptr_t pointer, std::vector<std::int64_t> shape, nb::handle strides, const std::string& dtype_name,
         nb::handle owner) {
        const std::optional<dtype> named = dtype_named(dtype_name);
        if (!named) throw nb::type_error(("tally: unsupported __cuda_array_interface__ dtype " + dtype_name).c_str());
        const nb::dlpack::dtype type = dlpack_of(*named);
        std::vector<std::int64_t> element_strides;
        if (!strides.is_none()) {
          for (nb::handle s : strides) {
            const auto bytes = nb::cast<std::int64_t>(s);
            if (bytes % static_cast<std::int64_t>(type.bits / 8) != 0)
              throw nb::value_error("tally: __cuda_array_interface__ strides are not whole elements");
            element_strides.push_back(bytes / (type.bits / 8));
          }
        }
        std::vector<size_t> sizes(shape.begin(), shape.end());
        void* data = reinterpret_cast<void*>(pointer);
        const int device = pointer != 0 ? device_of(data) : 0;
        return nb::ndarray<>(data, sizes.size(), sizes.data(), owner,
                             element_strides.empty() ? nullptr : element_strides.data(), type,
                             nb::device::cuda::value, device);
      },
      nb::arg("pointer"), nb::arg("shape"), nb::arg("strides").none(), nb::arg("dtype"), nb::arg("owner"),
      "A DLPack-capable view of device memory described by __cuda_array_interface__ (no copy; keeps `owner` alive).");

  m.def(
      "sum_cpp_calls",
      [](nb::handle x, nb::handle out, int calls, bool checked, std::uintptr_t stream) {
        call_site site("_sum_cpp_calls");
        const view xv = input(site, "x", x, 1);
        const view ov = output(site, "out", out);
        if (!site.gpu) throw nb::value_error("tally._sum_cpp_calls: argument 'x' must be a CUDA array");
        if (ov.n != 1 || ov.type != dtype::f32)
          throw nb::value_error("tally._sum_cpp_calls: argument 'out' must hold 1 float32");
        if (calls <= 0) throw nb::value_error("tally._sum_cpp_calls: argument 'calls' must be positive");
        run(site, stream, [&](const place& p) { sum_cpp_calls(xv, ov.data, calls, checked, p.stream); });
      },
      nb::arg("x"), nb::arg("out"), nb::arg("calls"), nb::arg("checked"), nb::arg("stream"),
      "Queues `calls` C++ tally::reduce calls (f32 sum of x into out) back to back on `stream`.");
}
