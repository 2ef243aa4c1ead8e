// The host CPU, for `tally info` and the run metadata of every report.
#pragma once

#include <string>

namespace tally::bench {

struct host_info {
  std::string cpu_model;  ///< /proc/cpuinfo's "model name", or "unknown CPU"
  int hardware_threads = 0;
  int openmp_threads = 0;  ///< what the CPU backend uses by default
  double memory_gib = 0;   ///< physical memory
  double load_average = 0; ///< 1-minute load average (other processes' demand for the cores)
};

/// Reads the host's CPU model, thread counts and memory.
host_info read_host_info();

/// True when other work already keeps about half the hardware threads busy:
/// then OpenMP threads wait for time slices and multi-threaded timings are noise.
inline bool host_is_busy(const host_info& host) {
  return host.load_average > 0.5 * (host.hardware_threads > 0 ? host.hardware_threads : 1);
}

/// One line: "<model>, <k> hardware threads, <t> OpenMP threads, <m> GiB".
std::string describe(const host_info& host);

}  // namespace tally::bench
