// The fixed tree (core/tree.hpp) evaluated on the host over values the caller
// lays out: the leaves of one aligned chunk, then the chunks' values. The CPU
// CG uses it for its fused loops; tests hold it to tally::dot bit for bit.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace tally::solvers::detail {

/// One tree level: to[k] = from[2k] + from[2k+1], an odd last value carried
/// up unchanged (it pairs with empty padding). Returns ceil(m / 2).
template <class S, class Add>
inline std::int64_t halve_level(const S* from, std::int64_t m, S* to, const Add& add) {
  const std::int64_t pairs = m / 2;
  for (std::int64_t k = 0; k < pairs; ++k) to[k] = add(from[2 * k], from[2 * k + 1]);
  if (m % 2 != 0) to[pairs] = from[m - 1];
  return pairs + m % 2;
}

/// The tree's value over m values that start an aligned subtree (empties
/// after them), halving between a and b. Pre: m >= 1; b holds ceil(m / 2).
template <class S, class Add>
inline S halve_to_root(S* a, S* b, std::int64_t m, const Add& add) {
  while (m > 1) {
    m = halve_level(a, m, b, add);
    std::swap(a, b);
  }
  return a[0];
}

/// The value of a chunk: `count` leaves (count >= 1) starting at an element
/// index that is a multiple of the chunk's power-of-two size, V leaves to a
/// vector folded left to right, vectors combined by the balanced tree.
/// Overwrites leaves; scratch holds ceil(count / V / 2) values.
template <int V, class S, class Add>
inline S chunk_value(S* leaves, std::int64_t count, S* scratch, const Add& add) {
  const std::int64_t vectors = (count + V - 1) / V;
  for (std::int64_t j = 0; j < vectors; ++j) {
    const std::int64_t first = j * V, last = first + V < count ? first + V : count;
    S acc = leaves[first];
    for (std::int64_t i = first + 1; i < last; ++i) acc = add(acc, leaves[i]);
    leaves[j] = acc;
  }
  return halve_to_root(leaves, scratch, vectors, add);
}

/// The root over chunk values (each an aligned subtree of equal size, in
/// index order). Pre: values is not empty; it is overwritten.
template <class S, class Add>
inline S root_value(std::vector<S>& values, const Add& add) {
  std::vector<S> other((values.size() + 1) / 2);
  return halve_to_root(values.data(), other.data(), static_cast<std::int64_t>(values.size()), add);
}

}  // namespace tally::solvers::detail
