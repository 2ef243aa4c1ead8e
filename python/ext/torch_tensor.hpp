// torch.Tensor arguments read through the tensor's own attributes rather
// than its __dlpack__. PyTorch writes __dlpack__ in Python and builds stream
// objects on every call (several microseconds a tensor: most of the time of
// a small call such as a 2^10-element sum). The fast path takes only what
// DLPack would export unchanged; everything else returns no array and goes
// through DLPack, whose errors the bindings already turn into messages.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <optional>

namespace tally_py {

/// The tensor `h` as an array (no copy; `h` kept alive as its owner) when h
/// is exactly a torch.Tensor or torch.nn.Parameter that is strided, needs no
/// gradient, lives on the CPU or a CUDA device and has one of the package's
/// dtypes (float16, bfloat16, float32, float64, int32, int64).
/// std::nullopt for anything else, including every non-torch object, and
/// while torch has not been imported. A negated view (torch's negative bit)
/// is read as a resolved copy; as a `writable` argument it is a ValueError
/// naming tally.`function` and `argument`.
std::optional<nanobind::ndarray<>> torch_tensor_array(nanobind::handle h, bool writable, const char* function,
                                                      const char* argument);

}  // namespace tally_py
