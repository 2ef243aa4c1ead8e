// The host part of the run metadata.
#include "host_info.hpp"
#include "run_info.hpp"

#ifndef TALLY_VERSION_STRING
#define TALLY_VERSION_STRING "unknown"
#endif

namespace tally::bench {

json host_run_metadata() {
  const host_info host = read_host_info();
  return {{"tally", TALLY_VERSION_STRING},
          {"compiler", __VERSION__},
          {"host",
           {{"cpu", host.cpu_model},
            {"hardware_threads", host.hardware_threads},
            {"openmp_threads", host.openmp_threads},
            {"memory_gib", host.memory_gib},
            {"load_average", host.load_average}}}};
}

}  // namespace tally::bench
