#include "problem.hpp"

#include <cctype>
#include <string>

#include "tally/core/error.hpp"

namespace tally::himeno {

namespace {
constexpr grid_size kSizes[] = {{33, 33, 65}, {65, 65, 129}, {129, 129, 257}, {257, 257, 513}, {513, 513, 1025}};
}

grid_size size_by_name(std::string_view name) {
  std::string upper(name);
  for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (std::size_t s = 0; s < kSizeNames.size(); ++s)
    if (upper == kSizeNames[s]) return kSizes[s];
  detail::throw_invalid_argument("himeno", "size",
                                 "is '" + std::string(name) + "'; the sizes are XS, S, M, L and XL");
}

grid_size custom_size(int mi, int mj, int mk) {
  if (mi < 3 || mj < 3 || mk < 3)
    detail::throw_invalid_argument("himeno", "size", "needs at least 3 points along each axis");
  return {mi, mj, mk};
}

float initial_coefficient(int c) {
  switch (c) {
    case a0: case a1: case a2: return 1.0f;
    case a3: return static_cast<float>(1.0 / 6.0);
    case b0: case b1: case b2: return 0.0f;
    case c0: case c1: case c2: return 1.0f;
    case bnd: return 1.0f;
    default: return 0.0f;  // wrk1
  }
}

host_fields make_host_fields(const grid_size& g) {
  host_fields f;
  f.size = g;
  const auto n = static_cast<std::size_t>(g.points());
  f.p.resize(n);
  for (int i = 0; i < g.mi; ++i) {
    const float value = initial_p(i, g);
    for (int j = 0; j < g.mj; ++j)
      for (int k = 0; k < g.mk; ++k) f.p[static_cast<std::size_t>(f.at(i, j, k))] = value;
  }
  f.wrk2 = f.p;
  for (int c = 0; c < kCoefficients; ++c) f.coef[static_cast<std::size_t>(c)].assign(n, initial_coefficient(c));
  return f;
}

}  // namespace tally::himeno
