// See dlpack_exchange.hpp: DLPack's C exchange API, as a consumer.
#include "dlpack_exchange.hpp"

#include <cstddef>
#include <stdexcept>
#include <string>

namespace nb = nanobind;

namespace tally_py::dlpack_exchange {

namespace {

// DLPack's ABI (dlpack.h, DLPack 1.2 on), for the structures the exchange
// table passes: DLTensor is nanobind's dltensor (the same layout).
struct version {
  std::uint32_t major, minor;
};

struct managed_tensor_versioned {
  version dlpack_version;
  void* manager_ctx;
  void (*deleter)(managed_tensor_versioned* self);
  std::uint64_t flags;
  nb::dlpack::dltensor dl_tensor;
};

struct table_header {
  version dlpack_version;
  table_header* prev_api;  // an older table, for consumers of an older major version
};

constexpr std::uint32_t kMajorVersion = 1;
constexpr std::int32_t kDLCPU = 1, kDLCUDA = 2;

using set_error_function = void (*)(void* error_ctx, const char* kind, const char* message);

/// Raises the framework's Python error, or `what` where it set none.
[[noreturn]] void fail(const std::string& what) {
  if (PyErr_Occurred()) throw nb::python_error();
  throw std::runtime_error(what);
}

}  // namespace

// DLPackExchangeAPI: the header, then five function pointers in this order.
struct table {
  table_header header;
  int (*managed_tensor_allocator)(nb::dlpack::dltensor* prototype, managed_tensor_versioned** out, void* error_ctx,
                                  set_error_function set_error);
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, managed_tensor_versioned** out);
  int (*managed_tensor_to_py_object_no_sync)(managed_tensor_versioned* tensor, void** out_py_object);
  int (*dltensor_from_py_object_no_sync)(void* py_object, nb::dlpack::dltensor* out);  // may be null
  int (*current_work_stream)(std::int32_t device_type, std::int32_t device_id, void** out_current_stream);
};

namespace {

/// The table behind `type`'s __dlpack_c_exchange_api__ capsule, walking to
/// an older table where the newest is of a later major version.
const table* look_up(PyObject* type) {
  PyObject* capsule = PyObject_GetAttrString(type, "__dlpack_c_exchange_api__");
  if (capsule == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  const table_header* header = nullptr;
  if (PyCapsule_IsValid(capsule, "dlpack_exchange_api"))
    header = static_cast<const table_header*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
  Py_DECREF(capsule);  // the table itself lives as long as the process (DLPack's rule)
  while (header != nullptr && header->dlpack_version.major > kMajorVersion) header = header->prev_api;
  if (header == nullptr || header->dlpack_version.major != kMajorVersion) return nullptr;
  const auto* t = reinterpret_cast<const table*>(header);
  if (t->managed_tensor_allocator == nullptr || t->managed_tensor_to_py_object_no_sync == nullptr ||
      t->dltensor_from_py_object_no_sync == nullptr || t->current_work_stream == nullptr)
    return nullptr;
  return t;
}

}  // namespace

const table* table_of(nb::handle h) {
  // A handful of types ever reach here (torch.Tensor, nn.Parameter); each is
  // looked up once. The cache holds a reference to each type, so that a
  // freed type's address cannot come back as another type.
  struct entry {
    PyObject* type;
    const table* found;
  };
  static entry cache[16];
  static int used = 0;
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(h.ptr()));
  for (int i = 0; i < used; ++i)
    if (cache[i].type == type) return cache[i].found;
  const table* found = look_up(type);
  if (used < 16) {
    Py_INCREF(type);
    cache[used++] = {type, found};
  }
  return found;
}

bool read(const table* t, nb::handle h, nb::dlpack::dltensor& out) {
  if (t->dltensor_from_py_object_no_sync(h.ptr(), &out) != 0) {
    PyErr_Clear();
    return false;
  }
  if (out.byte_offset != 0) {
    out.data = static_cast<char*>(out.data) + out.byte_offset;
    out.byte_offset = 0;
  }
  return true;
}

std::uintptr_t current_stream(const table* t, int device) {
  void* stream = nullptr;
  if (t->current_work_stream(kDLCUDA, device, &stream) != 0)
    fail("the array library could not say its current stream on cuda:" + std::to_string(device));
  return reinterpret_cast<std::uintptr_t>(stream);
}

nb::object allocate(const table* t, std::span<const std::int64_t> shape, nb::dlpack::dtype type, int device) {
  nb::dlpack::dltensor prototype{};
  prototype.ndim = static_cast<std::int32_t>(shape.size());
  prototype.shape = const_cast<std::int64_t*>(shape.data());  // only read
  prototype.dtype = type;
  prototype.device = device < 0 ? nb::dlpack::device{kDLCPU, 0} : nb::dlpack::device{kDLCUDA, device};

  struct failure {
    std::string what;
  } error;
  const set_error_function set_error = [](void* context, const char* kind, const char* message) {
    static_cast<failure*>(context)->what = std::string(kind ? kind : "error") + ": " + (message ? message : "");
  };
  managed_tensor_versioned* tensor = nullptr;
  if (t->managed_tensor_allocator(&prototype, &tensor, &error, set_error) != 0 || tensor == nullptr)
    fail("the array library could not allocate an output (" + error.what + ")");
  // The call takes the tensor's ownership, also when it fails (DLPack's
  // "stolen"), so the tensor is not deleted here either way.
  void* object = nullptr;
  if (t->managed_tensor_to_py_object_no_sync(tensor, &object) != 0 || object == nullptr)
    fail("the array library could not wrap its new output");
  return nb::steal(static_cast<PyObject*>(object));
}

}  // namespace tally_py::dlpack_exchange
