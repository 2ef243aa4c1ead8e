// Argument checks shared by both backends. Each throws invalid_argument
// naming the function and the argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "tally/core/error.hpp"

namespace tally::detail {

/// x must hold n elements: n >= 0, x non-null when n > 0, and n elements of
/// T must be addressable without overflow.
template <class T>
void check_array(const char* function, const char* argument, const T* x, std::int64_t n) {
  if (n < 0) throw_invalid_argument(function, "n", "is negative (" + std::to_string(n) + ")");
  if (n == 0) return;
  if (x == nullptr) throw_invalid_argument(function, argument, "is null but n = " + std::to_string(n));
  const auto max_elements = static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) / sizeof(T);
  const auto address = reinterpret_cast<std::uintptr_t>(x);
  if (static_cast<std::uint64_t>(n) > max_elements ||
      address > std::numeric_limits<std::uintptr_t>::max() - static_cast<std::uint64_t>(n) * sizeof(T))
    throw_invalid_argument(function, "n", "= " + std::to_string(n) + " elements of " + std::to_string(sizeof(T)) +
                                              " bytes overflows the address space");
}

/// out (count elements) must be non-null and must not overlap x[0..n).
/// `argument` names out in the message.
template <class Out, class T>
void check_output(const char* function, const Out* out, std::int64_t count, const T* x, std::int64_t n,
                  const char* argument = "out") {
  if (out == nullptr) throw_invalid_argument(function, argument, "is null");
  if (n == 0 || x == nullptr) return;
  const auto o0 = reinterpret_cast<std::uintptr_t>(out), o1 = o0 + static_cast<std::uint64_t>(count) * sizeof(Out);
  const auto x0 = reinterpret_cast<std::uintptr_t>(x), x1 = x0 + static_cast<std::uint64_t>(n) * sizeof(T);
  if (o0 < x1 && x0 < o1) throw_invalid_argument(function, argument, "overlaps the input");
}

}  // namespace tally::detail
