// The options of `tally bench reduce`, shared by its GPU and CPU runs.
#pragma once

#include <string>
#include <vector>

namespace tally::cli {

struct reduce_bench_settings {
  std::string json_path;          ///< --json FILE ("" = no JSON)
  int min_log2 = 10;              ///< --min-log2
  int max_log2 = 30;              ///< --max-log2 (26 on the CPU unless given)
  bool max_given = false;
  int step_log2 = 2;              ///< --step-log2: N = 2^min, 2^(min+step), ...
  int trials = 7;                 ///< --trials
  double trial_ms = 20;           ///< --trial-ms: length of one timed trial
  bool cpu = false;               ///< --cpu: the CPU backend even with a GPU
  bool unchecked = false;         ///< --unchecked: tally without argument checks
  std::vector<std::string> types; ///< --types f32,f64,...; empty = all
  bool help = false;

  /// True when `type` was asked for (or no --types was given).
  bool wants(const std::string& type) const;
};

/// The benchmark types, in table order.
inline const std::vector<std::string>& reduce_bench_types() {
  static const std::vector<std::string> all = {"f32", "f64", "i32", "f32dot", "f64dot"};
  return all;
}

/// Parses argv[1..argc) (argv[0] is the subcommand's name). Returns "" or an error message.
std::string parse_reduce_bench_args(int argc, char** argv, reduce_bench_settings& settings);

/// The usage text of `tally bench reduce`.
const char* reduce_bench_usage();

/// The CPU run of `tally bench reduce` (bench_reduce_cpu.cpp).
int run_bench_reduce_cpu(const reduce_bench_settings& settings);

}  // namespace tally::cli
