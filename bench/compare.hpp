// Comparing a result with its reference, for a peer's verify(): exact
// comparisons (integers, and floats on inputs whose sums are exact in any
// order) and comparisons within a derived bound. Plain C++.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "report.hpp"

namespace tally::bench {

/// A value no correct scalar result of the benchmarks equals (NaN, or the
/// most negative integer): what a peer's reset() leaves in its result, so a
/// call that writes nothing cannot pass its check.
template <class T>
T poisoned() {
  if constexpr (std::is_floating_point_v<T>)
    return std::numeric_limits<T>::quiet_NaN();
  else
    return std::numeric_limits<T>::min();
}

/// Passes when got == expected (NaN never equals anything; -0.0 == +0.0).
template <class T>
check compare_exact(T got, T expected) {
  if (got == expected) return check::pass("exact", 0.0, 0.0);
  std::ostringstream text;
  text.precision(17);
  text << "got " << got << ", expected " << expected << " exactly";
  return check::fail(text.str(), std::fabs(static_cast<double>(got) - static_cast<double>(expected)), 0.0);
}

/// Passes when |got − expected| <= bound (and got is not NaN).
inline check compare_within(double got, long double expected, double bound) {
  const double error = static_cast<double>(std::fabs(static_cast<long double>(got) - expected));
  char text[160];
  std::snprintf(text, sizeof text, "|got %.17g - expected %.17Lg| = %.3g %s bound %.3g", got, expected, error,
                error <= bound ? "<=" : ">", bound);
  if (error <= bound) return check::pass(text, error, bound);
  return check::fail(text, std::isnan(error) ? INFINITY : error, bound);
}

/// Element-wise exact comparison; the detail names the number of
/// differences and the first one. Pre: equal sizes (else a failed check).
template <class T>
check compare_arrays(const std::vector<T>& got, const std::vector<T>& expected) {
  if (got.size() != expected.size())
    return check::fail("size " + std::to_string(got.size()) + ", expected " + std::to_string(expected.size()));
  std::int64_t wrong = 0, first = -1;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == expected[i])) {
      if (first < 0) first = static_cast<std::int64_t>(i);
      ++wrong;
    }
  if (wrong == 0) return check::pass("exact, " + std::to_string(got.size()) + " elements", 0.0, 0.0);
  std::ostringstream text;
  text.precision(17);
  text << wrong << " of " << got.size() << " elements differ; first [" << first << "]: got " << got[first]
       << ", expected " << expected[first];
  return check::fail(text.str(), static_cast<double>(wrong), 0.0);
}

}  // namespace tally::bench
