// torch.Tensor arguments read without __dlpack__. PyTorch writes __dlpack__
// in Python and builds stream objects on every call (several microseconds a
// tensor: most of the time of a small call such as a 2^10-element sum).
// From PyTorch 2.11 on a tensor is read through DLPack's C exchange table
// (dlpack_exchange.hpp), before that through its attributes. The fast path
// takes only what DLPack would export unchanged; everything else returns no
// array and goes through DLPack, whose errors the bindings already turn into
// messages.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>

namespace tally_py {

/// Whether h is exactly a torch.Tensor or torch.nn.Parameter (false for
/// subclasses, which may override what a tensor reports, and while torch has
/// not been imported: a tensor cannot exist before that; tally never imports
/// torch itself).
bool is_plain_torch_tensor(nanobind::handle h);

/// The tensor `h` as an array (no copy; `h` kept alive as its owner) when
/// is_plain_torch_tensor(h) and h is strided and lives on the CPU or a CUDA
/// device; std::nullopt for anything else. A tensor that requires grad is
/// taken as it is. A negated view (torch's negative bit) is read as a
/// resolved copy; as a `writable` argument it is a ValueError naming
/// tally.`function` and `argument`. The array's dtype may be one the package
/// does not support; the bindings reject those by name.
std::optional<nanobind::ndarray<>> torch_tensor_array(nanobind::handle h, bool writable, const char* function,
                                                      const char* argument);

}  // namespace tally_py
