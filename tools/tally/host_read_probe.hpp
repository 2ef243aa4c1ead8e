// The host read probe: every OpenMP thread XOR-reads its contiguous share of
// 8-byte words as kProbeStreams far-apart streams of 64-byte lines. `tally
// bench reduce --cpu` times it as a row (the bandwidth its reductions are
// read against); `tally himeno --cpu` measures the 56 B/point floor at it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tally::cli {

/// Below this many elements the OpenMP loops (the probe's among them) run on
/// one thread, as a careful OpenMP user would write them: waking threads
/// costs more than the work.
inline constexpr std::int64_t kParallelFrom = 32768;

/// Sequential streams each thread reads at once, far apart (one per eighth
/// of its share): one stream a core leaves the prefetchers short of lines in
/// flight. On a 2-core Xeon (AVX-512), 2^25 words: one `parallel for simd`
/// stream 20 GB/s, 8 streams of scalar words 30, 8 streams of 64-byte lines
/// 38. The probe must read at least as fast as any reduction does.
inline constexpr std::int64_t kProbeStreams = 8;

/// The probe over bytes / 8 words of `data` (a trailing partial word is not
/// read). Returns the XOR of those words, whatever the thread count (XOR is
/// order-free), so that it can be checked. Pre: data is 8-byte aligned.
std::uint64_t read_probe_host(const void* data, std::size_t bytes);

/// The probe's bandwidth in GB/s over a fresh buffer of `bytes` (first
/// touched by the threads that read it), the median of `trials` trials.
/// Throws std::runtime_error when a pass's XOR is wrong.
/// Pre: bytes >= 8 and a multiple of 8; trials >= 1.
double host_read_probe_gbps(std::size_t bytes, int trials);

}  // namespace tally::cli
