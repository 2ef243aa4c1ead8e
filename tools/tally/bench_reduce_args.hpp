// The options of `tally bench reduce`, shared by its GPU and CPU runs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_cli.hpp"

namespace tally::cli {

struct reduce_settings {
  bench_options common;  ///< --json, --trials, --trial-ms, --warmup, --gpu, --cpu
  int min_log2 = 10;     ///< --min-log2
  int max_log2 = 30;     ///< --max-log2 (26 on the CPU unless given)
  bool max_given = false;
  int step_log2 = 2;               ///< --step-log2: N = 2^min, 2^(min+step), ...
  bool unchecked = false;          ///< --unchecked: tally without argument checks
  std::vector<std::string> types;  ///< --types f32,f64,...; empty = all

  /// True when `type` was asked for (or no --types was given).
  bool wants(const std::string& type) const;
  /// The largest log2(N) of this run on the given backend.
  int largest_log2(bool gpu) const { return gpu || max_given ? max_log2 : std::min(max_log2, 26); }
};

/// The benchmark types, in table order.
inline const std::vector<std::string>& reduce_bench_types() {
  static const std::vector<std::string> all = {"f32", "f64", "i32", "f32dot", "f64dot"};
  return all;
}

/// Input bytes one call reads for `type` and n elements.
inline double reduce_input_bytes(const std::string& type, std::int64_t n) {
  const double element = type == "f64" || type == "f64dot" ? 8 : 4;
  return static_cast<double>(n) * element * (type.find("dot") != std::string::npos ? 2 : 1);
}

/// The GPU run (bench_reduce.cu) and the CPU run (bench_reduce_cpu.cpp).
/// Both print the table, write the JSON and throw CLI::RuntimeError on a
/// mismatch or failure.
void run_reduce_gpu(const reduce_settings& settings);
void run_reduce_cpu(const reduce_settings& settings);

}  // namespace tally::cli
