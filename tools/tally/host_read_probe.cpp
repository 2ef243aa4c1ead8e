// The host read probe (host_read_probe.hpp): the XOR of every OpenMP thread's
// share, and its bandwidth over a buffer of its own.
#include "host_read_probe.hpp"

#include <memory>
#include <stdexcept>

#include <omp.h>

#include "host_timing.hpp"

namespace tally::cli {

namespace {

constexpr std::int64_t kLineWords = 8;  // 64 bytes

/// XOR of words [lo, hi): kProbeStreams streams, one 64-byte line of each per
/// step (each line XORed in a vector register: cloned for AVX-512 and AVX2,
/// picked at load time), then the words left over.
__attribute__((target_clones("avx512f", "avx2", "default"))) std::uint64_t xor_streams(const std::uint64_t* words,
                                                                                      std::int64_t lo,
                                                                                      std::int64_t hi) {
  const std::int64_t lines = (hi - lo) / (kLineWords * kProbeStreams);  // per stream
  std::uint64_t part[kProbeStreams][kLineWords] = {};
  for (std::int64_t i = 0; i < lines; ++i)
    for (std::int64_t k = 0; k < kProbeStreams; ++k)
      for (std::int64_t j = 0; j < kLineWords; ++j) part[k][j] ^= words[lo + (k * lines + i) * kLineWords + j];
  std::uint64_t acc = 0;
  for (std::int64_t i = lo + kProbeStreams * lines * kLineWords; i < hi; ++i) acc ^= words[i];
  for (const auto& stream : part)
    for (const std::uint64_t w : stream) acc ^= w;
  return acc;
}

}  // namespace

std::uint64_t read_probe_host(const void* data, std::size_t bytes) {
  const auto* words = static_cast<const std::uint64_t*>(data);
  const auto count = static_cast<std::int64_t>(bytes / 8);
  std::uint64_t acc = 0;
#pragma omp parallel reduction(^ : acc) if (count >= kParallelFrom)
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    acc ^= xor_streams(words, count * t / threads, count * (t + 1) / threads);
  }
  return acc;
}

double host_read_probe_gbps(std::size_t bytes, int trials) {
  const auto count = static_cast<std::int64_t>(bytes / 8);
  const std::unique_ptr<std::uint64_t[]> words(new std::uint64_t[static_cast<std::size_t>(count)]);
  // Each thread writes the share it will read (the probe's split), so its
  // pages sit on its own memory node; the words differ, so that a pass that
  // skips or repeats a line shows in the XOR.
  std::uint64_t expected = 0;
#pragma omp parallel reduction(^ : expected) if (count >= kParallelFrom)
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    for (std::int64_t i = count * t / threads; i < count * (t + 1) / threads; ++i) {
      words[i] = 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(i + 1);
      expected ^= words[i];
    }
  }
  const bench::timing time = bench::time_host_calls(
      [&] {
        if (read_probe_host(words.get(), bytes) != expected)
          throw std::runtime_error("the host read probe read a wrong XOR");
      },
      bench::trial_settings{trials, 20.0, 1});
  return static_cast<double>(bytes) / (time.median_us * 1e3);
}

}  // namespace tally::cli
