// See torch_tensor.hpp: torch tensors read without __dlpack__.
#include "torch_tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

#include "dlpack_exchange.hpp"

namespace nb = nanobind;

namespace tally_py {

namespace {

/// torch's objects that the fast path compares against, looked up once torch
/// is imported. The references are kept for the life of the process (they
/// are never released: releasing them after the interpreter has shut down
/// would crash).
struct torch_objects {
  nb::handle tensor, parameter, strided;
  struct entry {
    nb::handle type;
    nb::dlpack::dtype dlpack;
  };
  entry dtypes[6];
};

/// torch's objects, or nullptr while the caller has not imported torch (a
/// tensor cannot exist before that; tally never imports torch itself).
const torch_objects* torch_loaded() {
  static torch_objects objects;
  static bool ready = false;
  if (ready) return &objects;
  static const nb::handle modules = nb::object(nb::module_::import_("sys").attr("modules")).release();
  const nb::dict loaded = nb::borrow<nb::dict>(modules);
  if (!loaded.contains("torch")) return nullptr;
  nb::object torch = loaded["torch"];
  const auto keep = [&](const char* name) { return nb::object(torch.attr(name)).release(); };
  using code = nb::dlpack::dtype_code;
  objects.tensor = keep("Tensor");
  objects.parameter = nb::object(torch.attr("nn").attr("Parameter")).release();
  objects.strided = keep("strided");
  objects.dtypes[0] = {keep("float16"), {(uint8_t)code::Float, 16, 1}};
  objects.dtypes[1] = {keep("bfloat16"), {(uint8_t)code::Bfloat, 16, 1}};
  objects.dtypes[2] = {keep("float32"), {(uint8_t)code::Float, 32, 1}};
  objects.dtypes[3] = {keep("float64"), {(uint8_t)code::Float, 64, 1}};
  objects.dtypes[4] = {keep("int32"), {(uint8_t)code::Int, 32, 1}};
  objects.dtypes[5] = {keep("int64"), {(uint8_t)code::Int, 64, 1}};
  ready = true;
  return &objects;
}

/// Interned attribute names: nb::handle::attr(const char*) would build a
/// Python string on every call.
struct names {
  nb::handle layout, is_neg, resolve_neg, dtype, is_cuda, is_cpu, get_device, shape, stride, data_ptr;
};

const names& name() {
  static const names n = [] {
    // New references, kept for the process.
    const auto intern = [](const char* s) { return nb::handle(PyUnicode_InternFromString(s)); };
    return names{intern("layout"), intern("is_neg"),     intern("resolve_neg"), intern("dtype"),  intern("is_cuda"),
                 intern("is_cpu"), intern("get_device"), intern("shape"),       intern("stride"), intern("data_ptr")};
  }();
  return n;
}

/// h.is_neg(), called without making a bound method (twice on a small
/// call's path: its input and its output).
bool negated(nb::handle h) {
  PyObject* args[2] = {nullptr, h.ptr()};  // args[0]: the slot PY_VECTORCALL_ARGUMENTS_OFFSET lends the callee
  nb::object result = nb::steal(
      PyObject_VectorcallMethod(name().is_neg.ptr(), args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr));
  if (!result.is_valid()) throw nb::python_error();
  const int truth = PyObject_IsTrue(result.ptr());
  if (truth < 0) throw nb::python_error();
  return truth != 0;
}

/// h read through the attributes tensors have had since long before the
/// exchange table (PyTorch before 2.11).
std::optional<nb::ndarray<>> attribute_array(const torch_objects& torch, nb::handle h) {
  const names& n = name();
  if (!nb::object(h.attr(n.layout)).is(torch.strided)) return std::nullopt;
  const nb::object type = h.attr(n.dtype);
  const torch_objects::entry* dtype = nullptr;
  for (const auto& e : torch.dtypes)
    if (type.is(e.type)) {
      dtype = &e;
      break;
    }
  if (dtype == nullptr) return std::nullopt;

  int device_type = nb::device::cpu::value, device_id = 0;
  if (nb::cast<bool>(h.attr(n.is_cuda))) {
    device_type = nb::device::cuda::value;
    device_id = nb::cast<int>(h.attr(n.get_device)());
  } else if (!nb::cast<bool>(h.attr(n.is_cpu))) {
    return std::nullopt;  // other devices: DLPack reports what they are
  }

  const nb::tuple shape = nb::borrow<nb::tuple>(h.attr(n.shape));
  const nb::tuple stride = nb::borrow<nb::tuple>(h.attr(n.stride)());
  const std::size_t ndim = nb::len(shape);
  if (ndim > 32 || nb::len(stride) != ndim) return std::nullopt;
  std::size_t sizes[32];
  std::int64_t strides[32];
  for (std::size_t i = 0; i < ndim; ++i) {
    sizes[i] = nb::cast<std::size_t>(shape[i]);
    strides[i] = nb::cast<std::int64_t>(stride[i]);
  }
  auto* data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(h.attr(n.data_ptr)()));
  return nb::ndarray<>(data, ndim, sizes, h, strides, dtype->dlpack, device_type, device_id);
}

/// h read through its type's DLPack exchange table: one C call.
std::optional<nb::ndarray<>> exchanged_array(const dlpack_exchange::table* table, nb::handle h) {
  nb::dlpack::dltensor t;
  if (!dlpack_exchange::read(table, h, t) || t.ndim < 0 || t.ndim > 32) return std::nullopt;
  std::size_t sizes[32];
  for (int i = 0; i < t.ndim; ++i) sizes[i] = static_cast<std::size_t>(t.shape[i]);
  return nb::ndarray<>(t.data, static_cast<std::size_t>(t.ndim), sizes, h, t.strides, t.dtype, t.device.device_type,
                       t.device.device_id);
}

}  // namespace

bool is_plain_torch_tensor(nb::handle h) {
  const torch_objects* torch = torch_loaded();
  // Exact types only: a subclass may override what the attributes report.
  return torch != nullptr && (h.type().is(torch->tensor) || h.type().is(torch->parameter));
}

std::optional<nb::ndarray<>> torch_tensor_array(nb::handle h, bool writable, const char* function,
                                                const char* argument) {
  if (!is_plain_torch_tensor(h)) return std::nullopt;
  const names& n = name();
  // A tensor that requires grad is read and written as it is: tally works
  // outside autograd (the Python layer detaches such arguments, as DLPack
  // export needs).
  if (negated(h)) {
    // A lazily negated view (torch._neg_view): its memory holds -x. Neither
    // DLPack nor the exchange table says so, so read the negation
    // materialised, and refuse to write into it.
    if (writable)
      throw nb::value_error((std::string("tally.") + function + ": argument '" + argument +
                             "' is a negated view (negative bit set); call .resolve_neg() on it first")
                                .c_str());
    nb::object resolved = h.attr(n.resolve_neg)();
    return torch_tensor_array(resolved, false, function, argument);  // the array keeps `resolved` alive
  }
  if (const dlpack_exchange::table* table = dlpack_exchange::table_of(h)) return exchanged_array(table, h);
  return attribute_array(*torch_loaded(), h);
}

}  // namespace tally_py
