// Errors tally reports. Every message names the function and, for bad
// arguments, the argument.
#pragma once

#include <stdexcept>
#include <string>

namespace tally {

/// Base of every error tally throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A bad argument: null or host pointer, overlap, size overflow, bad range.
class invalid_argument : public error {
 public:
  using error::error;
};

/// A CUDA call failed; what() holds CUDA's own message.
class cuda_error : public error {
 public:
  cuda_error(int code, const std::string& what) : error(what), code_(code) {}
  /// The cudaError_t value.
  int code() const noexcept { return code_; }

 private:
  int code_;
};

namespace detail {
/// Throws invalid_argument("tally::<function>: argument '<argument>' <problem>").
[[noreturn]] void throw_invalid_argument(const char* function, const char* argument, const std::string& problem);
}  // namespace detail

}  // namespace tally
