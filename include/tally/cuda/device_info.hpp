// What the algorithms need to know about the current GPU, read once per device.
#pragma once

#include <cstddef>
#include <string>

namespace tally {

struct device_info {
  int device = 0;
  std::string name;
  int major = 0, minor = 0;
  int sm_count = 0;
  int max_threads_per_sm = 0;
  std::size_t shared_memory_per_block_optin = 0;  ///< bytes a block may use after opting in
  std::size_t shared_memory_per_sm = 0;
  std::size_t l2_bytes = 0;
  bool cooperative_launch = false;  ///< grids may synchronise (all blocks resident)
  std::size_t global_memory_bytes = 0;
  int memory_clock_khz = 0;
  int memory_bus_bits = 0;
  /// Datasheet bandwidth: 2 × clock × bus width (bytes/s).
  double theoretical_bandwidth() const { return 2.0 * memory_clock_khz * 1e3 * (memory_bus_bits / 8.0); }
};

/// The current device's properties (cached; throws cuda_error without a GPU).
const device_info& current_device_info();

}  // namespace tally
