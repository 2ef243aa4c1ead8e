// DLPack's C exchange API (DLPack 1.2 on). A framework that implements it
// puts a PyCapsule named "dlpack_exchange_api" on its tensor type, as the
// class attribute __dlpack_c_exchange_api__ (PyTorch does from 2.11, on
// torch.Tensor). The capsule holds a table of C functions; tally calls three
// of them: a tensor read into a DLTensor without building any Python object
// (PyTorch's __dlpack__ is Python code that costs microseconds a tensor, and
// reading a tensor's attributes one by one costs ~1 µs), the framework's
// current stream of a device, and a new tensor from the framework's own
// allocator. The table's layout is DLPack's ABI; nanobind ships DLPack's
// tensor structs but not this table, so dlpack_exchange.cpp declares it.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <span>

namespace tally_py::dlpack_exchange {

/// A framework's exchange table (opaque outside dlpack_exchange.cpp).
struct table;

/// The exchange table of h's type, or nullptr where the type has none, has
/// one of another DLPack major version, or lacks a function tally calls.
/// Looked up once a type (the type is kept alive from then on).
const table* table_of(nanobind::handle h);

/// Reads h, an object of the type whose table `t` is, into `out` without a
/// copy. The data, shape and strides stay h's: valid while h is alive and
/// not resized. Returns false, with the framework's Python error cleared,
/// where the framework cannot describe h (a sparse tensor, ...): the caller
/// then takes the __dlpack__ path, whose errors say why.
/// Post on true: out.data includes out.byte_offset, and out.byte_offset is 0.
bool read(const table* t, nanobind::handle h, nanobind::dlpack::dltensor& out);

/// The framework's current stream on CUDA device `device` (0 where that is
/// the legacy default stream). Throws nanobind::python_error on failure.
std::uintptr_t current_stream(const table* t, int device);

/// A new, uninitialised tensor of `shape` and `type` from the framework's
/// allocator, on CUDA device `device`, or on the CPU for device < 0, as the
/// framework's Python object (needing no gradient). Throws
/// nanobind::python_error or std::runtime_error (with the framework's
/// message) on failure.
nanobind::object allocate(const table* t, std::span<const std::int64_t> shape, nanobind::dlpack::dtype type,
                          int device);

}  // namespace tally_py::dlpack_exchange
