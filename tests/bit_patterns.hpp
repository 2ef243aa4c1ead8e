// Values built from their bits, for tests that check bits are kept: NaNs
// whose payload is not the default one.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tally/core/types.hpp"

namespace tally::testing {

/// The V whose bits are `bits`.
template <class V, class Bits>
V from_bits(Bits bits) {
  static_assert(sizeof(V) == sizeof(Bits));
  V v;
  std::memcpy(static_cast<void*>(&v), &bits, sizeof(V));
  return v;
}

/// A quiet NaN of V whose payload is not the default one.
template <class V>
V odd_nan() {
  if constexpr (std::is_same_v<V, double>) return from_bits<V>(std::uint64_t{0x7ff8'0000'dead'beefull});
  else if constexpr (std::is_same_v<V, float>) return from_bits<V>(std::uint32_t{0x7fc0'1234u});
  else if constexpr (std::is_same_v<V, half>) return from_bits<V>(std::uint16_t{0x7e05u});
  else return from_bits<V>(std::uint16_t{0x7fc5u});
}

}  // namespace tally::testing
