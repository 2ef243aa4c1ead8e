// Host side of the reduce inputs: the laws, exact references and host fills.
#include "reduce_inputs.hpp"

#include <algorithm>
#include <cmath>

namespace tally::cli {

namespace {

/// A law for n nonnegative integers whose total stays within `budget`:
/// magnitudes up to min(cap, budget / n) when n <= budget, else one 1 per
/// window of ceil(n / budget) elements (ceil(n / period) <= budget ones).
input_law budgeted_law(std::uint64_t seed, std::int64_t n, std::int64_t budget, std::int64_t cap) {
  input_law law;
  law.seed = seed;
  if (n <= budget) {
    law.max_magnitude = std::clamp<std::int64_t>(budget / std::max<std::int64_t>(n, 1), 1, cap);
  } else {
    law.period = (n + budget - 1) / budget;
  }
  return law;
}

constexpr std::int64_t kFloatExact = std::int64_t{1} << 24;   // every integer up to 2^24 is a float
constexpr std::int64_t kDoubleExact = std::int64_t{1} << 53;  // and up to 2^53 a double

}  // namespace

template <>
input_law sum_law<float>(std::uint64_t seed, std::int64_t n) {
  return budgeted_law(seed, n, kFloatExact, 8);
}
template <>
input_law sum_law<double>(std::uint64_t seed, std::int64_t n) {
  // Signed magnitudes up to 2^20 (fewer past 2^33 elements): Σ|x| <= 2^53.
  input_law law{seed, 1, std::clamp<std::int64_t>(kDoubleExact / std::max<std::int64_t>(n, 1), 1, 1 << 20), true};
  return law;
}
template <>
input_law sum_law<int>(std::uint64_t seed, std::int64_t n) {
  (void)n;  // ±1 … ±8: the total is exact modulo 2^32 in any order
  return {seed, 1, 8, true};
}

template <>
input_law dot_law_x<float>(std::uint64_t seed, std::int64_t n) {
  return budgeted_law(seed, n, kFloatExact / 2, 8);  // y <= 2: Σ|x·y| <= 2^24
}
template <>
input_law dot_law_y<float>(std::uint64_t seed, std::int64_t n) {
  (void)n;
  return {seed, 1, 2, false};
}
template <>
input_law dot_law_x<double>(std::uint64_t seed, std::int64_t n) {
  // Magnitudes m with n·m² <= 2^53.
  const auto m = static_cast<std::int64_t>(std::sqrt(static_cast<double>(kDoubleExact) / std::max<std::int64_t>(n, 1)));
  return {seed, 1, std::clamp<std::int64_t>(m, 1, 1 << 10), true};
}
template <>
input_law dot_law_y<double>(std::uint64_t seed, std::int64_t n) {
  return dot_law_x<double>(seed, n);
}

std::int64_t sum_reference(const input_law& law, std::int64_t n, bool is_int) {
  std::int64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) sum += input_value<std::int64_t>(law, i);
  if (is_int) return static_cast<std::int32_t>(static_cast<std::uint32_t>(static_cast<std::uint64_t>(sum)));
  return sum;
}

std::int64_t dot_reference(const input_law& x, const input_law& y, std::int64_t n) {
  std::int64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) sum += input_value<std::int64_t>(x, i) * input_value<std::int64_t>(y, i);
  return sum;
}

template <class T>
void fill_host(T* x, std::int64_t n, const input_law& law) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) x[i] = input_value<T>(law, i);
}

template void fill_host<float>(float*, std::int64_t, const input_law&);
template void fill_host<double>(double*, std::int64_t, const input_law&);
template void fill_host<int>(int*, std::int64_t, const input_law&);

const char* reduce_check_mode() {
  return "exact: integer inputs whose every partial sum is exact in any order (f32: sum of |x| <= 2^24, "
         "f64: <= 2^53; i32 modulo 2^32); each result must equal the integer reference, before and after timing";
}

}  // namespace tally::cli
