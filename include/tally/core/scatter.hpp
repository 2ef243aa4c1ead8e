// What a histogram or scatter hands a backend: the items to scatter (keys
// from one array, values from another or a unit weight) and how each value
// is turned into what is accumulated.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tally/core/config.hpp"
#include "tally/core/fixed_point.hpp"
#include "tally/core/types.hpp"

namespace tally::detail {

/// Marks unweighted items: every sample counts one.
struct unit_weight {};

/// Values as they are (converted to V).
template <class V>
struct plain_value {
  using type = V;
  template <class B>
  TALLY_HD_INLINE V operator()(const B& b) const {
    if constexpr (std::is_same_v<B, unit_weight>) return V(1);
    else return convert<V>(b);
  }
};

/// What an algorithm scatters: element i goes to key(a[i]) with value(b[i])
/// (b is absent, unit_weight, for plain counting).
template <class A, class B, class Key, class Value>
struct scatter_items {
  using first_type = A;
  using second_type = B;
  using value_type = typename Value::type;
  static constexpr bool unit = std::is_same_v<B, unit_weight>;
  /// Out-of-range keys are an error (scatter_reduce, checked) rather than ignored.
  bool report_out_of_range;
  const A* a;
  const B* b;
  std::int64_t n;
  Key key;
  Value value;
};

/// True for the items of a deterministic (fixed-point) scatter.
template <class Items>
inline constexpr bool is_fixed_point_v =
    std::is_same_v<std::remove_cv_t<decltype(Items::value)>, fixed_point_value>;

}  // namespace tally::detail
