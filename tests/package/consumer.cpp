// Sums 1..1000 with the installed library's CPU backend; exits 0 when right.
#include <cstdio>
#include <vector>

#include <tally/tally.hpp>

int main() {
  std::vector<double> x(1000);
  for (int i = 0; i < 1000; ++i) x[i] = i + 1;
  const double s = tally::sum(tally::cpu, x.data(), static_cast<std::int64_t>(x.size()));
  std::printf("installed tally: sum 1..1000 = %.0f\n", s);
  return s == 500500.0 ? 0 : 1;
}
