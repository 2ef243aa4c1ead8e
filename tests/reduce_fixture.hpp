// Shared shape of the reduce tests: a fixture with a fresh random seed (traced
// on every failure), helpers that copy host inputs to the backend's memory,
// run one call into a poisoned output and read the result back, and the
// sizes around every boundary of the tree.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends.hpp"
#include "random.hpp"
#include "reference.hpp"

namespace tally::testing {

/// Fixture of every reduce test: skips GPU instances without a GPU and
/// prints the random seed beside any failure.
template <class Side>
class reduce_test : public on_backend<Side> {
 protected:
  random_source rng;

 private:
  ::testing::ScopedTrace seed_trace_{__FILE__, __LINE__, rng.trace()};
};

/// Copies `host` to Side's memory, starting `offset` elements past an aligned
/// address, runs call(x, n, out) with out poisoned, and returns *out.
template <class Side, class Out, class T, class Call>
Out run_unary(const std::vector<T>& host, std::size_t offset, const Call& call) {
  buffer<T> x(Side::on_gpu, host.size(), offset);
  x.write(host);
  buffer<Out> out(Side::on_gpu, 1);
  call(static_cast<const T*>(x.data()), static_cast<std::int64_t>(host.size()), out.data());
  return out.read()[0];
}

/// run_unary for two inputs of equal length: call(x, y, n, out).
template <class Side, class Out, class T, class U, class Call>
Out run_binary(const std::vector<T>& host_x, const std::vector<U>& host_y, std::size_t offset, const Call& call) {
  buffer<T> x(Side::on_gpu, host_x.size(), offset);
  buffer<U> y(Side::on_gpu, host_y.size(), offset);
  x.write(host_x);
  y.write(host_y);
  buffer<Out> out(Side::on_gpu, 1);
  call(static_cast<const T*>(x.data()), static_cast<const U*>(y.data()), static_cast<std::int64_t>(host_x.size()),
       out.data());
  return out.read()[0];
}

/// reduce(Side's backend, x, n, out, op, opts) on a copy of `host`.
template <class Side, class Out, class T, class Op = plus>
Out reduce_on(const std::vector<T>& host, std::size_t offset = 0, Op op = {}, const options& opts = {}) {
  return run_unary<Side, Out>(host, offset, [&](const T* x, std::int64_t n, Out* out) {
    tally::reduce(Side::backend(), x, n, out, op, opts);
  });
}

/// The special values of T (through float, which every T holds them as).
template <class T>
T infinity() {
  return convert<T>(std::numeric_limits<float>::infinity());
}
template <class T>
T quiet_nan() {
  return convert<T>(std::numeric_limits<float>::quiet_NaN());
}
/// NaN results are compared as "is NaN", not bit for bit: which NaN payload
/// an operation returns differs between x86 and CUDA.
template <class T>
bool is_nan_value(const T& v) {
  return std::isnan(convert<double>(v));
}

/// Reduces an empty input (a valid pointer, then a null one) into a poisoned
/// output and expects `identity`. Each test file checks the empty input for
/// the instantiations it already has (a new one costs seconds of build).
template <class Side, class T, class Out, class Op>
void expect_empty_gives(Op op, const Out& identity, const options& opts = {}) {
  SCOPED_TRACE("empty " + type_name<T>() + " into " + type_name<Out>());
  const std::vector<T> none;
  EXPECT_PRED_FORMAT2(bitwise_equal, (reduce_on<Side, Out>(none, 1, op, opts)), identity);
  buffer<Out> out(Side::on_gpu, 1);
  tally::reduce(Side::backend(), static_cast<const T*>(nullptr), 0, out.data(), op, opts);
  EXPECT_PRED_FORMAT2(bitwise_equal, out.read()[0], identity);
}

/// Sizes around every boundary of the tree for vectors of V elements:
/// 0, 1, a warp, V, a row, a tile, a group (each ±1). `largest` caps them.
inline std::vector<std::int64_t> boundary_sizes(int v, std::int64_t largest) {
  const std::int64_t row = std::int64_t{tree::kRowVectors} * v, tile = std::int64_t{tree::kTileVectors} * v;
  const std::int64_t group = tree::kGroupTiles * tile;
  std::vector<std::int64_t> sizes = {0, 1, 2, 3, 31, 32, 33};
  for (std::int64_t b : {std::int64_t{v}, row, tile, 2 * tile, group})
    for (std::int64_t d : {-1, 0, 1})
      if (b + d >= 0 && b + d <= largest) sizes.push_back(b + d);
  return sizes;
}

/// The SCOPED_TRACE text of one call: what, its size and the input's offset.
inline std::string trace_of(const std::string& what, std::int64_t n, std::size_t offset) {
  return what + ", n = " + std::to_string(n) + ", offset " + std::to_string(offset);
}

}  // namespace tally::testing
