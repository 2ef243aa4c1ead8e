// Host side of the bench inputs: references and host fills, with OpenMP.
#include "reduce_inputs.hpp"

namespace tally::cli {

template <class T>
reference sum_reference(std::uint64_t seed, std::int64_t n) {
  long double sum = 0, magnitude = 0;
#pragma omp parallel for reduction(+ : sum, magnitude) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const long double v = input_value<T>(seed, i);
    sum += v;
    magnitude += v < 0 ? -v : v;
  }
  return {static_cast<double>(sum), static_cast<double>(magnitude)};
}

template <class T>
reference dot_reference(std::uint64_t seed_x, std::uint64_t seed_y, std::int64_t n) {
  long double sum = 0, magnitude = 0;
#pragma omp parallel for reduction(+ : sum, magnitude) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) {
    const long double v =
        static_cast<long double>(input_value<T>(seed_x, i)) * static_cast<long double>(input_value<T>(seed_y, i));
    sum += v;
    magnitude += v < 0 ? -v : v;
  }
  return {static_cast<double>(sum), static_cast<double>(magnitude)};
}

template <class T>
void fill_host(T* x, std::int64_t n, std::uint64_t seed) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) x[i] = input_value<T>(seed, i);
}

template reference sum_reference<float>(std::uint64_t, std::int64_t);
template reference sum_reference<double>(std::uint64_t, std::int64_t);
template reference sum_reference<int>(std::uint64_t, std::int64_t);
template reference dot_reference<float>(std::uint64_t, std::uint64_t, std::int64_t);
template reference dot_reference<double>(std::uint64_t, std::uint64_t, std::int64_t);
template void fill_host<float>(float*, std::int64_t, std::uint64_t);
template void fill_host<double>(double*, std::int64_t, std::uint64_t);
template void fill_host<int>(int*, std::int64_t, std::uint64_t);

}  // namespace tally::cli
