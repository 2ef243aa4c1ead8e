// The operator interface the solvers take in place of a matrix: csr_view
// (csr.hpp) and stencil_operator (stencil.hpp) model it, and so can a user's
// type. cg() static_asserts it, so a type that misses a member is refused
// with this concept's name rather than deep inside a kernel.
#pragma once

#include <concepts>
#include <cstdint>
#include <type_traits>

#include "tally/core/config.hpp"

namespace tally::solvers {

namespace detail {
/// A vector as an operator reads it: v(j) returns element j (0 <= j < cols).
/// Only the concept below uses it, to spell row_product's argument.
template <class T>
struct vector_probe {
  TALLY_HD_INLINE T operator()(std::int64_t) const { return T(0); }
};
}  // namespace detail

/// A square or rectangular linear operator A, as the solvers read it:
///   - `value_type`: float or double, the type of its entries;
///   - `rows`, `cols`: std::int64_t data members, its size (>= 0);
///   - `row_product<Acc>(i, v)`: Σ_j a(i, j)·v(j) over row i's terms in a
///     fixed order, each product rounded to Acc on its own and added left to
///     right in Acc, for Acc = value_type and Acc = double (the true residual
///     sums rows in double); `v(j)` returns the vector's element j;
///   - `diagonal(i)`: a(i, i) as value_type (0 where the row has none).
/// Pre (of row_product and diagonal): 0 <= i < rows. Both must be callable
/// on the host and on the device (TALLY_HD_INLINE) with the same bits on
/// each: the CPU and GPU backends call the same member functions, and their
/// results agree bit for bit only if these compute the same bits.
/// The concept checks the signatures; the order, the rounding and the
/// host-and-device annotations are the operator's promise.
template <class Op>
concept linear_operator =
    (std::is_same_v<typename Op::value_type, float> || std::is_same_v<typename Op::value_type, double>)&&requires(
        const Op& a, std::int64_t i, detail::vector_probe<typename Op::value_type> v, detail::vector_probe<double> vd) {
  { a.rows } -> std::convertible_to<std::int64_t>;
  { a.cols } -> std::convertible_to<std::int64_t>;
  { a.diagonal(i) } -> std::same_as<typename Op::value_type>;
  { a.template row_product<typename Op::value_type>(i, v) } -> std::same_as<typename Op::value_type>;
  { a.template row_product<double>(i, vd) } -> std::same_as<double>;
};

}  // namespace tally::solvers
