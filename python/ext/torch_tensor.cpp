// See torch_tensor.hpp: torch tensors read through their attributes.
#include "torch_tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

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

}  // namespace

std::optional<nb::ndarray<>> torch_tensor_array(nb::handle h, bool writable, const char* function,
                                                const char* argument) {
  const torch_objects* torch = torch_loaded();
  // Exact types only: a subclass may override what the attributes report.
  if (torch == nullptr || !(h.type().is(torch->tensor) || h.type().is(torch->parameter))) return std::nullopt;
  if (!nb::object(h.attr("layout")).is(torch->strided) || nb::cast<bool>(h.attr("requires_grad"))) return std::nullopt;
  if (nb::cast<bool>(h.attr("is_neg")())) {
    // A lazily negated view (torch._neg_view): its memory holds -x. DLPack
    // would export that memory as it is, so read the negation materialised,
    // and refuse to write into it.
    if (writable)
      throw nb::value_error((std::string("tally.") + function + ": argument '" + argument +
                             "' is a negated view (negative bit set); call .resolve_neg() on it first")
                                .c_str());
    nb::object resolved = h.attr("resolve_neg")();
    return torch_tensor_array(resolved, false, function, argument);  // the array keeps `resolved` alive
  }

  const nb::object type = h.attr("dtype");
  const torch_objects::entry* dtype = nullptr;
  for (const auto& e : torch->dtypes)
    if (type.is(e.type)) {
      dtype = &e;
      break;
    }
  if (dtype == nullptr) return std::nullopt;

  int device_type = nb::device::cpu::value, device_id = 0;
  if (nb::cast<bool>(h.attr("is_cuda"))) {
    device_type = nb::device::cuda::value;
    device_id = nb::cast<int>(h.attr("get_device")());
  } else if (!nb::cast<bool>(h.attr("is_cpu"))) {
    return std::nullopt;  // other devices: DLPack reports what they are
  }

  const nb::tuple shape = nb::borrow<nb::tuple>(h.attr("shape"));
  const nb::tuple stride = nb::borrow<nb::tuple>(h.attr("stride")());
  const std::size_t ndim = nb::len(shape);
  if (ndim > 32 || nb::len(stride) != ndim) return std::nullopt;
  std::size_t sizes[32];
  std::int64_t strides[32];
  for (std::size_t i = 0; i < ndim; ++i) {
    sizes[i] = nb::cast<std::size_t>(shape[i]);
    strides[i] = nb::cast<std::int64_t>(stride[i]);
  }
  auto* data = reinterpret_cast<void*>(nb::cast<std::uintptr_t>(h.attr("data_ptr")()));
  return nb::ndarray<>(data, ndim, sizes, h, strides, dtype->dlpack, device_type, device_id);
}

}  // namespace tally_py
