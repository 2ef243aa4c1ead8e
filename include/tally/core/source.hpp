// What a reduction reads: one or two input arrays and the transform that
// turns their elements (and index) into the tree's leaves.
//
// Backends load whole vectors of inputs (tree.hpp) and call leaf() on each
// element; they never look inside the transform.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tally/core/operators.hpp"
#include "tally/core/tree.hpp"

namespace tally {

/// The identity transform: leaves are the elements, converted to Acc.
struct identity_transform {
  template <class T>
  TALLY_HD_INLINE T operator()(const T& x) const { return x; }
};

/// Leaves from one array: leaf i = Acc(t(x[i])), or {t(x[i]), i} for an
/// indexed operator (arg_min, arg_max), where Acc is value_index<...>.
template <class T, class Acc, class Transform>
struct unary_source {
  using acc_type = Acc;
  static constexpr int inputs = 1;
  static constexpr int V = tree::vector_width<T>;
  using first_type = T;
  using second_type = T;

  const T* x;
  std::int64_t n;
  Transform transform;

  TALLY_HD_INLINE Acc leaf(const T& xi, std::int64_t i) const {
    if constexpr (requires { Acc::index; }) {
      return Acc{convert<decltype(Acc::value)>(transform(xi)), i};
    } else {
      (void)i;
      return convert<Acc>(transform(xi));
    }
  }
  /// Leaf i, read straight from memory this side can dereference.
  TALLY_HD_INLINE Acc leaf_at(std::int64_t i) const { return leaf(x[i], i); }
};

/// Leaves from two arrays of equal length: leaf i = Acc(t(x[i], y[i])).
template <class T, class U, class Acc, class Transform>
struct binary_source {
  using acc_type = Acc;
  static constexpr int inputs = 2;
  static constexpr int V = tree::vector_width<T, U>;
  using first_type = T;
  using second_type = U;

  const T* x;
  const U* y;
  std::int64_t n;
  Transform transform;

  TALLY_HD_INLINE Acc leaf(const T& xi, const U& yi, std::int64_t) const {
    return convert<Acc>(transform(xi, yi));
  }
  /// Leaf i, read straight from memory this side can dereference.
  TALLY_HD_INLINE Acc leaf_at(std::int64_t i) const { return leaf(x[i], y[i], i); }
};

/// Leaves wrapped for compensated summation: {leaf, 0}.
template <class Source>
struct compensated_source : Source {
  using plain_acc = typename Source::acc_type;
  using acc_type = compensated<plain_acc>;
  explicit compensated_source(const Source& s) : Source(s) {}

  template <class... Args>
  TALLY_HD_INLINE acc_type leaf(const Args&... args) const {
    return acc_type{Source::leaf(args...), plain_acc(0)};
  }
  TALLY_HD_INLINE acc_type leaf_at(std::int64_t i) const { return acc_type{Source::leaf_at(i), plain_acc(0)}; }
};

}  // namespace tally
