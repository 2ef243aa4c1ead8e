// The device atomics (GPU only; their CPU counterpart is the histogram
// backend): warp-aggregated atomic_add and aggregated_atomic_update return
// values consistent with one serial order (lane order within a warp), with
// divergent lanes, partial warps and blocks that are not a multiple of 32;
// the CAS-loop atomic_update for 4-, 8- and 16-byte types; the block variant.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "test_histogram_support.hpp"
#include "tally/cuda/device/atomic.cuh"
#include "tally/cuda/device/warp_aggregated.cuh"

namespace tally::testing {
namespace {

// GPU only: typed over gpu_only so the names are "DeviceAtomic/gpu.*" (backends.hpp).
template <class Side>
class DeviceAtomic : public on_backend<Side> {};
TYPED_TEST_SUITE(DeviceAtomic, gpu_only, backend_names);

/// Threads that take part: all, or a divergent subset.
__host__ __device__ inline bool takes_part(int t, bool divergent) { return !divergent || (t * 7) % 5 != 0; }
__host__ __device__ inline int destination_of(int t, int k) { return (t / 3 + t % 2) % k; }

template <class T>
__global__ void add_kernel(T* dest, int k, const T* value, T* seen, int n, bool divergent, bool block_level) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (block_level) {
    __shared__ tally::device::block_atomic_storage<T, 1024> storage;
    const bool part = t < n && takes_part(t, divergent);
    T* addr = part ? dest + destination_of(t, k) : nullptr;
    const T old = tally::device::block_aggregated_atomic_update(addr, part ? value[t] : T{}, tally::plus{}, storage);
    if (part) seen[t] = old;
    return;
  }
  if (t >= n || !takes_part(t, divergent)) return;
  seen[t] = tally::device::atomic_add(dest + destination_of(t, k), value[t]);
}

template <class T>
void check_serial_consistency(int n, int k, int block, bool divergent, bool block_level) {
  SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) + " block=" + std::to_string(block) +
               " divergent=" + std::to_string(divergent) + " block_level=" + std::to_string(block_level));
  std::vector<T> value(n), start(k);
  for (int i = 0; i < n; ++i) value[i] = static_cast<T>(1 + (i * 2654435761u) % 1000);
  for (int j = 0; j < k; ++j) start[j] = static_cast<T>(j * 5);
  buffer<T> dest(true, k), val(true, n), seen(true, n);
  dest.write(start);
  val.write(value);
  add_kernel<T><<<(n + block - 1) / block, block>>>(dest.data(), k, val.data(), seen.data(), n, divergent, block_level);
  TALLY_CUDA_LAUNCHED("add_kernel");
  const auto got = seen.read();
  const auto final_values = dest.read();
  // Per destination, the returns sorted must chain: start, start+v, ... (values are positive).
  std::vector<std::vector<int>> by_dest(k);
  for (int t = 0; t < n; ++t)
    if (takes_part(t, divergent)) by_dest[destination_of(t, k)].push_back(t);
  for (int j = 0; j < k; ++j) {
    auto& ts = by_dest[j];
    std::sort(ts.begin(), ts.end(), [&](int a, int b) { return got[a] < got[b]; });
    T expect = start[j];
    for (int t : ts) {
      ASSERT_EQ(got[t], expect) << "destination " << j << ", thread " << t;
      expect = static_cast<T>(expect + value[t]);
    }
    EXPECT_EQ(final_values[j], expect) << "destination " << j;
    // Within one warp (or block, block_level), lower threads see earlier values.
    const auto same_group = [&](int a, int b) {
      return a / block == b / block && (block_level || (a % block) / 32 == (b % block) / 32);
    };
    for (std::size_t a = 0; a + 1 < ts.size(); ++a)
      for (std::size_t b = a + 1; b < ts.size(); ++b)
        if (same_group(ts[a], ts[b])) ASSERT_LT(ts[a], ts[b]) << "thread order broken at destination " << j;
  }
}

template <class T>
class DeviceAtomicTyped : public on_backend<gpu_side> {};
using integer_types = ::testing::Types<std::int32_t, std::uint32_t, std::int64_t, std::uint64_t>;
/// "DeviceAtomicTyped/gpu_int32.*" and so on.
struct gpu_integer_names {
  template <class T>
  static std::string GetName(int) {
    return std::string("gpu_") + (std::is_signed_v<T> ? "int" : "uint") + std::to_string(8 * sizeof(T));
  }
};
TYPED_TEST_SUITE(DeviceAtomicTyped, integer_types, gpu_integer_names);

TYPED_TEST(DeviceAtomicTyped, ReturnsAreConsistentWithOneSerialOrder) {
  for (int block : {32, 100, 256, 33})
    for (int k : {1, 3, 40})
      for (bool divergent : {false, true}) check_serial_consistency<TypeParam>(1000, k, block, divergent, false);
}

TYPED_TEST(DeviceAtomicTyped, BlockVariantReturnsAreConsistent) {
  for (int block : {96, 100, 1024})
    for (int k : {1, 5})
      for (bool divergent : {false, true}) check_serial_consistency<TypeParam>(2500, k, block, divergent, true);
}

template <class T>
__global__ void float_sum_kernel(T* dest, int k, const T* value, int n) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n && takes_part(t, true)) (void)tally::device::atomic_add(dest + destination_of(t, k), value[t]);
}

TYPED_TEST(DeviceAtomic, FloatingAndComplexSumsMatchAReference) {
  random_source rng;
  SCOPED_TRACE(rng.trace());
  const int n = 100000, k = 7;
  std::vector<double> v(n);
  std::vector<tally::complex<float>> z(n);
  std::vector<long double> exact(k, 0), mag(k, 0), exact_re(k, 0), exact_im(k, 0);
  for (int t = 0; t < n; ++t) {
    v[t] = rng.real(-1, 1);
    // Multiples of 2^-10 in [-1, 1): every partial sum (below 2^14) is exact
    // in float, so the complex sums are compared exactly, in any order.
    z[t] = {static_cast<float>(rng.integer(-1024, 1023)) / 1024.0f, static_cast<float>(rng.integer(-1024, 1023)) / 1024.0f};
    if (!takes_part(t, true)) continue;
    exact[destination_of(t, k)] += v[t];
    mag[destination_of(t, k)] += std::fabs(v[t]);
    exact_re[destination_of(t, k)] += z[t].real();
    exact_im[destination_of(t, k)] += z[t].imag();
  }
  buffer<double> dv(true, n), dd(true, k);
  buffer<tally::complex<float>> zv(true, n), zd(true, k);
  dv.write(v);
  zv.write(z);
  dd.write(std::vector<double>(k, 0.0));
  zd.write(std::vector<tally::complex<float>>(k, {0.f, 0.f}));
  float_sum_kernel<<<(n + 99) / 100, 100>>>(dd.data(), k, dv.data(), n);
  float_sum_kernel<<<(n + 99) / 100, 100>>>(zd.data(), k, zv.data(), n);
  TALLY_CUDA_LAUNCHED("float_sum_kernel");
  const auto d = dd.read();
  const auto zz = zd.read();
  for (int j = 0; j < k; ++j) {
    EXPECT_NEAR(d[j], static_cast<double>(exact[j]), 1e-12 * static_cast<double>(mag[j]));
    EXPECT_EQ(zz[j].real(), static_cast<float>(exact_re[j]));
    EXPECT_EQ(zz[j].imag(), static_cast<float>(exact_im[j]));
  }
}

struct keep_larger_magnitude {  // a user operator for the CAS path
  __host__ __device__ tally::complex<double> operator()(const tally::complex<double>& a,
                                                        const tally::complex<double>& b) const {
    const double ma = a.real() * a.real() + a.imag() * a.imag(), mb = b.real() * b.real() + b.imag() * b.imag();
    return mb > ma || (mb == ma && b.real() > a.real()) ? b : a;
  }
};

__global__ void cas_kernel(double* dmax, float* fmin, tally::complex<double>* zsum, tally::complex<double>* zbig,
                           int* imax, int n) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= n) return;
  const double x = static_cast<double>((t * 7919) % 10007) - 5000.0;
  tally::device::atomic_update(dmax, x, tally::maximum{});
  tally::device::aggregated_atomic_update(fmin, static_cast<float>(x), tally::minimum{});
  tally::device::atomic_update(zsum, tally::complex<double>(1.0, x), tally::plus{});  // 128-bit CAS
  tally::device::aggregated_atomic_update(zbig, tally::complex<double>(x, 1.0), keep_larger_magnitude{});
  tally::device::aggregated_atomic_update(imax, static_cast<int>(x), tally::maximum{});
}

TYPED_TEST(DeviceAtomic, CompareAndSwapUpdatesFor4_8And16Bytes) {
  const int n = 50000;
  double max_x = -1e300, sum_im = 0;
  for (int t = 0; t < n; ++t) {
    const double x = static_cast<double>((t * 7919) % 10007) - 5000.0;
    max_x = std::max(max_x, x);
    sum_im += x;
  }
  buffer<double> dmax(true, 1);
  buffer<float> fmin(true, 1);
  buffer<tally::complex<double>> zsum(true, 1), zbig(true, 1);
  buffer<int> imax(true, 1);
  dmax.write({-1e300});
  fmin.write({1e30f});
  zsum.write({{0.0, 0.0}});
  zbig.write({{0.0, 0.0}});
  imax.write({-1 << 30});
  cas_kernel<<<(n + 127) / 128, 128>>>(dmax.data(), fmin.data(), zsum.data(), zbig.data(), imax.data(), n);
  TALLY_CUDA_LAUNCHED("cas_kernel");
  EXPECT_EQ(dmax.read()[0], max_x);
  EXPECT_EQ(fmin.read()[0], -5000.0f);
  EXPECT_EQ(zsum.read()[0].real(), static_cast<double>(n));
  EXPECT_EQ(zsum.read()[0].imag(), sum_im);  // integers: exact in any order
  EXPECT_EQ(zbig.read()[0].real(), 5006.0);
  EXPECT_EQ(imax.read()[0], static_cast<int>(max_x));
}

}  // namespace
}  // namespace tally::testing
