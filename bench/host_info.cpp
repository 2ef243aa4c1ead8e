// The host CPU, as the CLI reports it.
#include "host_info.hpp"

#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

namespace tally::bench {

host_info read_host_info() {
  host_info host;
  host.cpu_model = "unknown CPU";
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) host.cpu_model = line.substr(line.find_first_not_of(' ', colon + 1));
      break;
    }
  }
  host.hardware_threads = static_cast<int>(std::thread::hardware_concurrency());
  host.openmp_threads = omp_get_max_threads();
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) host.memory_gib = static_cast<double>(pages) * page / (1024.0 * 1024 * 1024);
  std::ifstream("/proc/loadavg") >> host.load_average;
  return host;
}

std::string describe(const host_info& host) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s, %d hardware threads, %d OpenMP threads, %.1f GiB memory",
                host.cpu_model.c_str(), host.hardware_threads, host.openmp_threads, host.memory_gib);
  return buf;
}

}  // namespace tally::bench
