// The Himeno benchmark (apps/himeno, issue 9): the sweeps on both backends
// against a double-precision reference written here from the definition, the
// GPU against the original loop bit for bit, the deterministic gosa across
// runs and launch shapes, every gosa pattern, device-side convergence, and
// the argument checks.
//
// The backends: the CPU side runs the OpenMP loop (the paper's pattern 6),
// the GPU side the fused sweep with the deterministic gosa. Both must leave
// p bit-equal to the original sequential loop (pattern 5): every operation is
// rounded on its own, in the original's order, on both.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>
#include <vector>

#include <gtest/gtest.h>

#include "backends.hpp"
#include "cpu.hpp"
#include "gpu.hpp"
#include "problem.hpp"
#include "random.hpp"
#include "row_tiling.hpp"
#include "tally/core/tree.hpp"
#include "tiling.hpp"

namespace {

using namespace tally::himeno;
using tally::testing::random_source;

// Tolerances against the double reference after kSweeps sweeps. ss is a
// small difference of O(1) values (about 1/(3·(imax−1)²) at the benchmark's
// start), so float cancellation leaves it a relative error of ~1e-4 at S;
// gosa sums its squares. p itself is O(1) and keeps ~1e-6.
// The CPU side sums gosa in OpenMP chains of n/threads float additions (an
// error up to ~1e-3 of the sum in practice at S with 2 threads).
constexpr int kSweeps = 4;
constexpr double kGosaRelative = 5e-3;
constexpr double kPAbsolute = 1e-5;
// A float sum of non-negative terms whose longest chain of additions is L
// lies within γ_L = L·u/(1 − L·u) (u = 2^-24) of the exact sum, relatively.
double chain_bound(double chain) {
  const double lu = chain * std::ldexp(1.0, -24);
  return lu / (1 - lu);
}
// Small fields (<= 11 000 points): any order is within γ_11000 = 6.6e-4.
constexpr double kOrderRelative = 1e-3;
// A float sum of the benchmark's squares by a chain of L additions, against
// the deterministic gosa (a tree: within γ_64 of the exact sum). The squares
// are nearly equal (the first sweep's are one value up to rounding), so the
// rounding errors do not cancel as a random walk's would (sqrt(L)·u): each
// addition moves the running sum by at most half an ulp, with a sign that
// holds while the sum stays in one binade, up to 3/8·L·u for equal terms.
// Measured on the squares of sweeps 1-4 at XS, S and M (serial, shuffled and
// block-interleaved orders, OpenMP splits of 2-256 threads): up to 0.17·L·u,
// 30-75 times sqrt(L)·u. So L·u/2 + γ_64, for L·u <= 1/2 (past it the sum
// stalls). One plane of S is 0.8-1.6 % of gosa: the bounds of (1) (L about
// n/32) and (4) (n/threads + threads) are far below it, that of (2) (L = n:
// 1.5 %) is not; the integer fields below give every pattern an exact sum,
// where a single lost point shows.
double near_deterministic_bound(double chain) {
  const double u = std::ldexp(1.0, -24);
  return chain * u / 2 + chain_bound(64);
}

/// p after `sweeps` sweeps and the last sweep's gosa, in double, from f's
/// initial fields; written from the definition, sharing no code with the app.
struct reference_result {
  std::vector<double> p;
  double gosa = 0;
};
reference_result reference_sweeps(const host_fields& f, int sweeps) {
  const int mi = f.size.mi, mj = f.size.mj, mk = f.size.mk;
  const std::size_t n = f.p.size();
  auto at = [&](int i, int j, int k) { return (static_cast<std::size_t>(i) * mj + j) * mk + k; };
  std::vector<double> p(f.p.begin(), f.p.end()), next(n);
  std::vector<std::vector<double>> c(kCoefficients);
  for (int q = 0; q < kCoefficients; ++q) c[q].assign(f.coef[q].begin(), f.coef[q].end());
  reference_result r;
  for (int s = 0; s < sweeps; ++s) {
    next = p;
    double gosa = 0;
    for (int i = 1; i < mi - 1; ++i)
      for (int j = 1; j < mj - 1; ++j)
        for (int k = 1; k < mk - 1; ++k) {
          const std::size_t x = at(i, j, k);
          auto P = [&](int di, int dj, int dk) { return p[at(i + di, j + dj, k + dk)]; };
          const double s0 = c[0][x] * P(1, 0, 0) + c[1][x] * P(0, 1, 0) + c[2][x] * P(0, 0, 1) +
                            c[4][x] * (P(1, 1, 0) - P(1, -1, 0) - P(-1, 1, 0) + P(-1, -1, 0)) +
                            c[5][x] * (P(0, 1, 1) - P(0, -1, 1) - P(0, 1, -1) + P(0, -1, -1)) +
                            c[6][x] * (P(1, 0, 1) - P(-1, 0, 1) - P(1, 0, -1) + P(-1, 0, -1)) +
                            c[7][x] * P(-1, 0, 0) + c[8][x] * P(0, -1, 0) + c[9][x] * P(0, 0, -1) + c[11][x];
          const double ss = (s0 * c[3][x] - P(0, 0, 0)) * c[10][x];
          gosa += ss * ss;
          next[x] = P(0, 0, 0) + 0.8 * ss;
        }
    p.swap(next);
    r.gosa = gosa;
  }
  r.p = std::move(p);
  return r;
}

/// Fields with every coefficient random (b ≠ 0, so the cross terms count)
/// and p varying along i, j and k, so that a wrong neighbour shows.
host_fields random_fields(const grid_size& g, random_source& rng) {
  host_fields f = make_host_fields(g);
  for (auto& v : f.p) v = static_cast<float>(rng.real(0.5, 1.5));
  for (int c = 0; c < kCoefficients; ++c)
    for (auto& v : f.coef[c]) v = static_cast<float>(c == a3 ? rng.real(0.1, 0.2) : rng.real(-1.0, 1.0));
  f.wrk2 = f.p;
  return f;
}

/// Fields whose every interior point has ss = wrk1 ∈ {1, 2, 3} exactly (p =
/// 0, a3 = bnd = 1, the other coefficients 0): one sweep's squares are small
/// integers whose partial sums stay below 2^24 (9 · n at S is 4.5 M), so every
/// summation order gives the same, exact gosa, returned in `exact`.
/// Pre: 9 · g.interior() < 2^24.
host_fields integer_square_fields(const grid_size& g, double& exact) {
  host_fields f = make_host_fields(g);
  std::fill(f.p.begin(), f.p.end(), 0.0f);
  f.wrk2 = f.p;
  for (int c = 0; c < kCoefficients; ++c)
    std::fill(f.coef[c].begin(), f.coef[c].end(), c == a3 || c == bnd ? 1.0f : 0.0f);
  exact = 0;
  for (int i = 1; i < g.mi - 1; ++i)
    for (int j = 1; j < g.mj - 1; ++j)
      for (int k = 1; k < g.mk - 1; ++k) {
        const int w = 1 + (i + 2 * j + 3 * k) % 3;
        f.coef[wrk1][static_cast<std::size_t>(f.at(i, j, k))] = static_cast<float>(w);
        exact += w * w;
      }
  return f;
}

struct sweep_result {
  std::vector<float> p;
  float gosa = 0;
};

/// The CPU backend: the OpenMP loop (pattern 6).
sweep_result run_on(tally::testing::cpu_side, const host_fields& start, int sweeps) {
  host_fields f = start;
  const float gosa = sweep_openmp(f, sweeps);
  return {f.p, gosa};
}

/// The GPU backend: the fused sweep (the default variant), deterministic gosa.
sweep_result run_on(tally::testing::gpu_side, const host_fields& start, int sweeps) {
  gpu_problem problem(start.size);
  problem.load(start);
  problem.run(gpu_pattern::deterministic, sweeps);
  const float gosa = problem.gosa();
  return {problem.read_p(), gosa};
}

/// The original sequential loop (pattern 5).
sweep_result run_original(const host_fields& start, int sweeps) {
  host_fields f = start;
  const float gosa = sweep_original(f, sweeps);
  return {f.p, gosa};
}

void expect_near_reference(const sweep_result& got, const reference_result& want) {
  EXPECT_NEAR(got.gosa, want.gosa, kGosaRelative * std::abs(want.gosa)) << "gosa";
  EXPECT_GT(want.gosa, 0.0) << "the reference gosa must not be zero";
  double worst = 0;
  std::size_t where = 0;
  for (std::size_t x = 0; x < want.p.size(); ++x) {
    const double d = std::abs(got.p[x] - want.p[x]);
    if (!(d <= worst)) worst = d, where = x;
  }
  EXPECT_LE(worst, kPAbsolute) << "p differs most at flat index " << where;
}

/// Index of the first differing float (bits), or -1.
std::int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t x = 0; x < a.size(); ++x)
    if (std::memcmp(&a[x], &b[x], sizeof(float)) != 0) return static_cast<std::int64_t>(x);
  return -1;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// Odd shapes: partial tiles along j and k, one interior plane, one column.
const grid_size kOddSizes[] = {{4, 11, 70}, {3, 3, 3}, {7, 19, 131}, {5, 10, 66}};
/// Rows of several segments: exactly one full, a full one and one point, three with a short last;
/// 37 planes (D = 32 leaves a unit of 5).
const grid_size kRowSizes[] = {{5, 4, 514}, {4, 4, 515}, {6, 5, 1100}, {39, 4, 70}};

/// The benchmark's sizes the tests run: XS and S; XS alone under compute-sanitizer
/// (S adds volume, not code paths: the odd and row sizes keep every partial tile).
std::vector<const char*> benchmark_sizes() {
  if (tally::testing::under_sanitizer()) return {"XS"};
  return {"XS", "S"};
}

template <class Side>
class himeno_backends : public tally::testing::on_backend<Side> {};
TYPED_TEST_SUITE(himeno_backends, tally::testing::backends, tally::testing::backend_names);

TYPED_TEST(himeno_backends, BenchmarkFieldsAgreeWithDoubleReferenceAtXsAndS) {
  for (const char* name : benchmark_sizes()) {
    SCOPED_TRACE(name);
    const host_fields start = make_host_fields(size_by_name(name));
    expect_near_reference(run_on(TypeParam{}, start, kSweeps), reference_sweeps(start, kSweeps));
  }
}

TYPED_TEST(himeno_backends, RandomFieldsAgreeWithDoubleReference) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (const grid_size& g : kOddSizes) {
    SCOPED_TRACE(::testing::Message() << g.mi << "x" << g.mj << "x" << g.mk);
    const host_fields start = random_fields(g, rng);
    const sweep_result got = run_on(TypeParam{}, start, 2);
    const reference_result want = reference_sweeps(start, 2);
    // Random coefficients make p O(1) and ss O(1): float keeps ~1e-6 relative.
    EXPECT_NEAR(got.gosa, want.gosa, kOrderRelative * want.gosa);
    for (std::size_t x = 0; x < want.p.size(); ++x)
      ASSERT_NEAR(got.p[x], want.p[x], 1e-5 * (1 + std::abs(want.p[x]))) << "flat index " << x;
  }
}

TYPED_TEST(himeno_backends, PEqualsTheOriginalLoopBitForBit) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (const grid_size& g : {kOddSizes[0], kOddSizes[2], size_by_name("XS")}) {
    const host_fields start = random_fields(g, rng);
    for (int sweeps : {1, 3}) {
      SCOPED_TRACE(::testing::Message() << g.mi << "x" << g.mj << "x" << g.mk << ", " << sweeps << " sweeps");
      const sweep_result got = run_on(TypeParam{}, start, sweeps), want = run_original(start, sweeps);
      EXPECT_EQ(first_difference(got.p, want.p), -1);
      // Summed in another order; each within γ_n of the exact sum.
      EXPECT_NEAR(got.gosa, want.gosa, 2 * chain_bound(static_cast<double>(g.interior())) * want.gosa);
    }
  }
}

// ---- CPU only -------------------------------------------------------------

TEST(himeno_cpu, SquaresAreTheOriginalLoopsAndTheirSumsAgree) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (bool random : {false, true}) {
    const grid_size g = size_by_name("XS");
    const host_fields start = random ? random_fields(g, rng) : make_host_fields(g);
    host_fields original = start, recorded = start;
    const float want = sweep_original(original, 1);
    std::vector<float> squares(static_cast<std::size_t>(g.interior()), -1.0f);
    const float got = sweep_recording_squares(recorded, squares.data());
    EXPECT_TRUE(same_bits(got, want)) << got << " vs " << want;
    EXPECT_EQ(first_difference(recorded.p, original.p), -1);
    EXPECT_TRUE(same_bits(sum_serial(squares.data(), g.interior()), want));
    double exact = 0;
    for (float v : squares) {
      ASSERT_GE(v, 0.0f);
      exact += v;
    }
    EXPECT_NEAR(sum_openmp(squares.data(), g.interior()), exact,
                chain_bound(static_cast<double>(g.interior())) * exact);
    EXPECT_NEAR(deterministic_gosa(squares.data(), g), exact, 1e-6 * exact);
  }
}

// The deterministic gosa's tree, evaluated here with tally's reference tree
// (core/tree.hpp) over units and over each unit's 256 thread values.
TEST(himeno_cpu, DeterministicGosaIsTheTileTree) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  for (const grid_size& g : {kOddSizes[0], kOddSizes[3], size_by_name("XS")}) {
    // Order-sensitive squares: magnitudes from 1e-8 to 1e4.
    std::vector<float> squares(static_cast<std::size_t>(g.interior()));
    for (auto& v : squares) v = static_cast<float>(std::pow(10.0, rng.real(-8, 4)));
    for (std::int64_t max_units : {std::int64_t{65536}, std::int64_t{7}}) {  // 1 plane a unit, and several
      const tiling t = tiling_of(g, max_units);
      const int J = g.mj - 2, K = g.mk - 2, D = t.planes_per_unit;
      SCOPED_TRACE(::testing::Message() << D << " planes a unit");
      auto unit_value = [&](std::int64_t unit) {
        const std::int64_t tile = unit / t.chunks();
        const int chunk = static_cast<int>(unit % t.chunks());
        const int tj = static_cast<int>(tile / t.tiles_k), tk = static_cast<int>(tile % t.tiles_k);
        auto thread = [&](std::int64_t tid) {
          const int j = tj * kTileJ + static_cast<int>(tid / 32), k = tk * kTileK + static_cast<int>(tid % 32);
          float acc = 0.0f;
          for (int plane = chunk * D; plane < std::min(t.planes, (chunk + 1) * D); ++plane) {
            float v = 0.0f;
            if (j < J && k < K) v = v + squares[(std::int64_t{plane} * J + j) * K + k];
            if (j < J && k + 32 < K) v = v + squares[(std::int64_t{plane} * J + j) * K + k + 32];
            acc = plane == chunk * D ? v : acc + v;
          }
          return acc;
        };
        return tally::tree::reduce_reference<float>(kTileThreads, thread, std::plus<float>{}).value;
      };
      const float want = tally::tree::reduce_reference<float>(t.units(), unit_value, std::plus<float>{}).value;
      EXPECT_TRUE(same_bits(deterministic_gosa(squares.data(), g, max_units), want));
    }
  }
}

// The row sweeps' tree, evaluated here with tally's reference tree over the
// (row segment, plane) leaves and over each leaf's 256 thread values.
TEST(himeno_cpu, DeterministicGosaIsTheRowTree) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  // One segment, an exactly full one, a full one and a single point, three with a short last one.
  for (const grid_size& g : {kOddSizes[0], grid_size{5, 4, 514}, grid_size{4, 4, 515}, grid_size{6, 5, 1100}}) {
    SCOPED_TRACE(::testing::Message() << g.mi << "x" << g.mj << "x" << g.mk);
    std::vector<float> squares(static_cast<std::size_t>(g.interior()));
    for (auto& v : squares) v = static_cast<float>(std::pow(10.0, rng.real(-8, 4)));
    const row_tiling t = row_tiling_of(g);
    const int J = g.mj - 2, K = g.mk - 2;
    auto leaf = [&](std::int64_t x) {
      const std::int64_t r = x / t.padded_planes;
      const int plane = static_cast<int>(x % t.padded_planes);
      if (plane >= t.planes) return 0.0f;
      const int j = static_cast<int>(r / t.segments), k_lo = static_cast<int>(r % t.segments) * kRowSegment;
      auto thread = [&](std::int64_t tid) {
        float v = 0.0f;
        for (int k = k_lo + static_cast<int>(tid); k < std::min(K, k_lo + kRowSegment); k += kRowThreads)
          v = v + squares[(std::int64_t{plane} * J + j) * K + k];
        return v;
      };
      return tally::tree::reduce_reference<float>(kRowThreads, thread, std::plus<float>{}).value;
    };
    const float want =
        tally::tree::reduce_reference<float>(t.row_segments() * t.padded_planes, leaf, std::plus<float>{}).value;
    EXPECT_TRUE(same_bits(deterministic_gosa(squares.data(), g, kMaxUnits, gosa_tree::rows), want));
  }
}

TEST(himeno_cpu, PlanesPerUnitIsAPowerOfTwoThatFits) {
  for (const char* name : {"XS", "M", "L", "XL"}) {
    const row_tiling t = row_tiling_of(size_by_name(name));
    for (int blocks : {1, 132, 264}) {
      const int d = choose_planes_per_unit(t, blocks);
      EXPECT_GE(d, 1);
      EXPECT_LE(d, std::min(kMaxRowPlanesPerUnit, t.padded_planes));
      EXPECT_EQ(d & (d - 1), 0) << d;
    }
  }
  // XL on 132 blocks: 1022 segments x 16 chunks of 32 planes, 124 units the busiest block.
  EXPECT_EQ(choose_planes_per_unit(row_tiling_of(size_by_name("XL")), 132), 32);
}

TEST(himeno_cpu, VariantsByName) {
  for (sweep_variant v : kSweepVariants) EXPECT_EQ(sweep_variant_by_name(name_of(v)), v);
  EXPECT_EQ(tree_of(sweep_variant::tile), gosa_tree::tiles);
  EXPECT_EQ(tree_of(sweep_variant::rows3), gosa_tree::rows);
  tally::testing::expect_invalid([] { sweep_variant_by_name("rows-9"); }, {"himeno", "variant", "rows-9", "tile, rows-1"});
}

TEST(himeno_cpu, GosaPatternsByName) {
  for (gpu_pattern p : kGpuPatterns) EXPECT_EQ(gpu_pattern_by_name(name_of(p)), p) << name_of(p);
  EXPECT_EQ(std::size(kGpuPatterns), 7u);  // every enumerator: a pattern left out would not round-trip here
  EXPECT_EQ(name_of(gpu_pattern::warp_aggregated), "warp-aggregated");
  tally::testing::expect_invalid([] { gpu_pattern_by_name("bogus"); },
                                 {"himeno", "gosa", "'bogus'", "warp-aggregated, atomic, host, host-openmp, baseline, "
                                                               "none, deterministic"});
  tally::testing::expect_invalid([] { gpu_pattern_by_name(""); }, {"himeno", "gosa", "''"});
}

TEST(himeno_cpu, IntegerSquaresSumExactlyInEveryOrder) {
  for (const char* name : {"XS", "S"}) {
    SCOPED_TRACE(name);
    const grid_size g = size_by_name(name);
    double exact = 0;
    const host_fields start = integer_square_fields(g, exact);
    ASSERT_LT(exact, 0x1p24);
    host_fields serial = start, parallel = start, recorded = start;
    EXPECT_EQ(sweep_original(serial, 1), exact);
    EXPECT_EQ(sweep_openmp(parallel, 1, 3), exact);
    std::vector<float> squares(static_cast<std::size_t>(g.interior()));
    EXPECT_EQ(sweep_recording_squares(recorded, squares.data()), exact);
    EXPECT_EQ(sum_openmp(squares.data(), g.interior()), exact);
    EXPECT_EQ(deterministic_gosa(squares.data(), g, kMaxUnits, gosa_tree::tiles), exact);
    EXPECT_EQ(deterministic_gosa(squares.data(), g, kMaxUnits, gosa_tree::rows), exact);
  }
}

TEST(himeno_cpu, SizesByNameAndBadSizes) {
  EXPECT_EQ(size_by_name("xl").mk, 1025);
  EXPECT_EQ(size_by_name("M").mi, 129);
  EXPECT_EQ(size_by_name("XS").interior(), 31 * 31 * 63);
  tally::testing::expect_invalid([] { size_by_name("XXL"); }, {"himeno", "size", "XXL", "XS, S, M, L and XL"});
  tally::testing::expect_invalid([] { size_by_name(""); }, {"himeno", "size"});
  tally::testing::expect_invalid([] { custom_size(2, 5, 5); }, {"himeno", "size", "3 points"});
}

// ---- GPU only -------------------------------------------------------------

// Typed over gpu_only (instance "gpu"), as tests/backends.hpp's naming
// convention asks: skips without a GPU, fails under TALLY_REQUIRE_GPU=1.
template <class Side>
class himeno_gpu : public tally::testing::on_backend<Side> {};
TYPED_TEST_SUITE(himeno_gpu, tally::testing::gpu_only, tally::testing::backend_names);

/// The CPU's deterministic gosa of the last of `sweeps` sweeps, and p after
/// them; `exact` (when given) gets the same squares summed in double.
sweep_result cpu_deterministic(const host_fields& start, int sweeps, double* exact = nullptr,
                               std::int64_t max_units = kMaxUnits, gosa_tree tree = gosa_tree::tiles) {
  host_fields f = start;
  std::vector<float> squares(static_cast<std::size_t>(f.size.interior()));
  for (int s = 0; s < sweeps; ++s) sweep_recording_squares(f, squares.data());
  if (exact) {
    *exact = 0;
    for (float v : squares) *exact += v;
  }
  return {f.p, deterministic_gosa(squares.data(), f.size, max_units, tree)};
}

/// Shapes of a variant: the default and 3 blocks (several units a block); for
/// the row variants also one, two and 32 planes a unit.
std::vector<launch_shape> shapes_of(sweep_variant variant) {
  std::vector<launch_shape> shapes = {{0, true, variant, 0}, {3, true, variant, 0}};
  if (variant != sweep_variant::tile)
    for (int d : {1, 2, 32}) shapes.push_back({d == 2 ? 1 : 0, true, variant, d});
  return shapes;
}

TYPED_TEST(himeno_gpu, DeterministicGosaEqualsTheCpuTreeBitForBit) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  std::vector<host_fields> cases;
  for (const char* name : benchmark_sizes()) cases.push_back(make_host_fields(size_by_name(name)));
  for (const grid_size& g : kOddSizes) cases.push_back(random_fields(g, rng));
  for (const grid_size& g : kRowSizes) cases.push_back(random_fields(g, rng));
  for (sweep_variant variant : kSweepVariants)
    for (const host_fields& start : cases)
      for (std::int64_t max_units : {kMaxUnits, std::int64_t{7}}) {  // tile: one plane a unit, and several
        if (variant != sweep_variant::tile && max_units != kMaxUnits) continue;
        SCOPED_TRACE(::testing::Message() << name_of(variant) << ", " << start.size.mi << "x" << start.size.mj << "x"
                                          << start.size.mk << ", at most " << max_units << " units");
        const sweep_result want = cpu_deterministic(start, 3, nullptr, max_units, tree_of(variant));
        gpu_problem problem(start.size, false, nullptr, max_units);
        for (const launch_shape& shape : shapes_of(variant)) {
          SCOPED_TRACE(::testing::Message() << "blocks " << shape.blocks << ", D " << shape.planes_per_unit);
          problem.load(start);
          problem.run(gpu_pattern::deterministic, 3, shape);
          const float gosa = problem.gosa();
          EXPECT_TRUE(same_bits(gosa, want.gosa)) << gosa << " vs " << want.gosa;
          EXPECT_EQ(first_difference(problem.read_p(), want.p), -1);
        }
      }
}

TYPED_TEST(himeno_gpu, DeterministicGosaIsIdenticalAcrossRunsAndLaunchShapes) {
  for (sweep_variant variant : kSweepVariants)
    for (const char* name : benchmark_sizes()) {
      SCOPED_TRACE(::testing::Message() << name_of(variant) << ", " << name);
      const grid_size g = size_by_name(name);
      gpu_problem problem(g);
      const int units = static_cast<int>(std::max(tiling_of(g).units(), row_units_of(row_tiling_of(g), 1).items));
      std::vector<launch_shape> shapes = {{0, true}, {0, false}, {1, true}, {2, false}, {7, true}, {100, true},
                                          {units + 5, true}};
      if (variant != sweep_variant::tile) shapes.push_back({5, true, variant, 4}), shapes.push_back({0, true, variant, 16});
      for (auto& shape : shapes) shape.variant = variant;
      problem.run(gpu_pattern::deterministic, 5, shapes[0]);
      const float want = problem.gosa();
      const std::vector<float> want_p = problem.read_p();
      for (int repeat = 0; repeat < 2; ++repeat)
        for (const launch_shape& shape : shapes) {
          SCOPED_TRACE(::testing::Message() << "blocks " << shape.blocks << ", pdl " << shape.programmatic << ", D "
                                            << shape.planes_per_unit);
          problem.reset();
          problem.run(gpu_pattern::deterministic, 5, shape);
          EXPECT_TRUE(same_bits(problem.gosa(), want));
          EXPECT_EQ(first_difference(problem.read_p(), want_p), -1);
        }
    }
}

TYPED_TEST(himeno_gpu, EveryPatternLeavesTheSamePAndAgreesOnGosa) {
  for (const char* name : benchmark_sizes())
    for (sweep_variant variant : kSweepVariants) {
      SCOPED_TRACE(::testing::Message() << name << ", " << name_of(variant));
      const launch_shape shape{0, true, variant, 0};
      const grid_size g = size_by_name(name);
      const host_fields start = make_host_fields(g);
      const sweep_result original = run_original(start, 4);
      const sweep_result deterministic = cpu_deterministic(start, 4, nullptr, kMaxUnits, tree_of(variant));
      const double n = static_cast<double>(g.interior());
      // atomic_add calls a sweep: two a warp on every tile plane, or on every row segment's plane.
      const double warp_calls =
          variant == sweep_variant::tile
              ? 2.0 * kTileJ * static_cast<double>(tiling_of(g).tiles()) * (g.mi - 2)
              : kRowPoints * (kRowThreads / 32.0) * static_cast<double>(row_tiling_of(g).row_segments()) * (g.mi - 2);
      gpu_problem problem(g, /*host_patterns=*/true);
      for (gpu_pattern pattern : {gpu_pattern::warp_aggregated, gpu_pattern::atomic, gpu_pattern::host_serial,
                                  gpu_pattern::host_openmp, gpu_pattern::none, gpu_pattern::deterministic}) {
        SCOPED_TRACE(std::string(name_of(pattern)));
        // Two sweeps of another pattern first: the gosa slots must not leak.
        problem.reset();
        problem.run(gpu_pattern::deterministic, 1, shape);
        problem.run(gpu_pattern::none, 1, shape);
        problem.run(pattern, 2, shape);
        EXPECT_EQ(first_difference(problem.read_p(), original.p), -1);
        if (pattern == gpu_pattern::none) continue;
        const float gosa = problem.gosa(), want = deterministic.gosa;
        if (pattern == gpu_pattern::host_serial) EXPECT_TRUE(same_bits(gosa, original.gosa)) << gosa;
        else if (pattern == gpu_pattern::deterministic) EXPECT_TRUE(same_bits(gosa, want)) << gosa;
        else if (pattern == gpu_pattern::warp_aggregated)  // one atomic a warp call, each of a 32-lane tree
          EXPECT_NEAR(gosa, want, near_deterministic_bound(warp_calls + 5) * want);
        else  // one atomic a point, or OpenMP chains: at most n + 1 additions in a row
          EXPECT_NEAR(gosa, want, near_deterministic_bound(n + 1) * want);
      }
    }
}

// Every pattern's gosa of one sweep of integer squares is the exact sum, bit
// for bit, whatever its order: a point dropped or counted twice shows.
TYPED_TEST(himeno_gpu, EveryPatternSumsIntegerSquaresExactly) {
  for (const char* name : benchmark_sizes()) {
    double exact = 0;
    const host_fields start = integer_square_fields(size_by_name(name), exact);
    gpu_problem problem(start.size, /*host_patterns=*/true);
    for (sweep_variant variant : kSweepVariants)
      for (gpu_pattern pattern : kGpuPatterns) {
        if (pattern == gpu_pattern::none) continue;
        if (pattern == gpu_pattern::baseline && variant != sweep_variant::tile) continue;  // no variants: once
        SCOPED_TRACE(::testing::Message() << name << ", " << name_of(variant) << ", " << name_of(pattern));
        problem.load(start);
        problem.run(pattern, 1, {0, true, variant, 0});
        EXPECT_EQ(problem.gosa(), exact);
      }
  }
}

TYPED_TEST(himeno_gpu, StraightforwardPortAgreesWithReference) {
  for (const char* name : benchmark_sizes()) {
    SCOPED_TRACE(name);
    const host_fields start = make_host_fields(size_by_name(name));
    gpu_problem problem(start.size);
    problem.run(gpu_pattern::baseline, kSweeps);
    const float gosa = problem.gosa();
    expect_near_reference({problem.read_p(), gosa}, reference_sweeps(start, kSweeps));
  }
}

// Device-side convergence through `loop`: stops after the first sweep whose
// gosa is below the tolerance, or at the limit, with the CPU tree's bits.
void expect_device_convergence(converge_loop loop) {
  const host_fields start = make_host_fields(size_by_name("XS"));
  gpu_problem problem(start.size);
  for (sweep_variant variant : kSweepVariants) {
  SCOPED_TRACE(std::string(name_of(variant)));
  const launch_shape shape{0, true, variant, 0};
  // The CPU's deterministic gosa after each sweep, by this variant's tree.
  std::vector<float> gosa;
  std::vector<std::vector<float>> p;
  {
    host_fields f = start;
    std::vector<float> squares(static_cast<std::size_t>(f.size.interior()));
    for (int s = 0; s < 12; ++s) {
      sweep_recording_squares(f, squares.data());
      gosa.push_back(deterministic_gosa(squares.data(), f.size, kMaxUnits, tree_of(variant)));
      p.push_back(f.p);
    }
  }
  // A tolerance just above sweep q's gosa: the solve stops after the first sweep below it.
  for (int q : {4, 7}) {
    const float tolerance = std::nextafter(gosa[q], 1.0f);
    int expected = 0;
    while (!(gosa[expected] < tolerance)) ++expected;
    problem.reset();
    // 12 sweeps at most: the solve stops before (expected + 1 <= 8); the
    // replayed loop chains all 12, the last ones no-ops.
    const convergence c = problem.converge(tolerance, 12, shape, loop);
    EXPECT_TRUE(c.converged);
    EXPECT_EQ(c.sweeps, expected + 1);
    EXPECT_TRUE(same_bits(c.gosa, gosa[expected]));
    EXPECT_TRUE(same_bits(problem.gosa(), gosa[expected]));
    EXPECT_EQ(first_difference(problem.read_p(), p[expected]), -1);
  }
  for (int max_sweeps : {1, 3, 4}) {  // tolerance 0: never below, stops at the limit (odd and even)
    problem.reset();
    const convergence c = problem.converge(0.0f, max_sweeps, shape, loop);
    EXPECT_FALSE(c.converged);
    EXPECT_EQ(c.sweeps, max_sweeps);
    EXPECT_TRUE(same_bits(c.gosa, gosa[max_sweeps - 1]));
    EXPECT_EQ(first_difference(problem.read_p(), p[max_sweeps - 1]), -1);
  }
  }
}

// The conditional while node (left out of racecheck: scripts/gpu-check).
TYPED_TEST(himeno_gpu, ConvergesOnTheDevice) { expect_device_convergence(converge_loop::conditional); }

// The same kernels chained in a plain graph: what racecheck can run.
TYPED_TEST(himeno_gpu, ConvergesInReplayedSweeps) { expect_device_convergence(converge_loop::replayed); }

TYPED_TEST(himeno_gpu, BadArgumentsAreErrorsBeforeAllocation) {
  std::size_t free_before = 0, free_after = 0, total = 0;
  TALLY_CUDA(cudaMemGetInfo(&free_before, &total));
  tally::testing::expect_invalid([] { gpu_problem huge(custom_size(2049, 2049, 4097)); },
                                 {"himeno", "size", "GiB of device memory"});
  TALLY_CUDA(cudaMemGetInfo(&free_after, &total));
  EXPECT_EQ(free_before, free_after);
  gpu_problem problem(size_by_name("XS"));
  tally::testing::expect_invalid([&] { problem.run(gpu_pattern::deterministic, 0); }, {"himeno", "sweeps"});
  tally::testing::expect_invalid([&] { problem.run(gpu_pattern::host_serial, 1); }, {"himeno", "host patterns"});
  tally::testing::expect_invalid([&] { problem.converge(1e-3f, 0); }, {"himeno", "max_sweeps"});
  tally::testing::expect_invalid(
      [&] { problem.converge(1e-3f, kMaxReplayedSweeps + 1, {}, converge_loop::replayed); },
      {"himeno", "max_sweeps", "replayed"});
  tally::testing::expect_invalid([&] { problem.run(gpu_pattern::deterministic, 1, {0, true, sweep_variant::rows2, 3}); },
                                 {"himeno", "planes_per_unit", "power of two"});
  tally::testing::expect_invalid([&] { problem.run(gpu_pattern::deterministic, 1, {0, true, sweep_variant::rows1, 64}); },
                                 {"himeno", "planes_per_unit"});
}

}  // namespace
