// Parsing `tally bench reduce`'s options.
#include "bench_reduce_args.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace tally::cli {

bool reduce_bench_settings::wants(const std::string& type) const {
  return types.empty() || std::find(types.begin(), types.end(), type) != types.end();
}

const char* reduce_bench_usage() {
  return "usage: tally bench reduce [--json FILE] [--min-log2 10] [--max-log2 30] [--step-log2 2]\n"
         "                          [--trials 7] [--trial-ms 20] [--types f32,f64,i32,f32dot,f64dot]\n"
         "                          [--cpu] [--unchecked]\n"
         "\n"
         "Sums (f32, f64, i32, compensated f32/f64) and dot products (f32dot, f64dot) of\n"
         "N = 2^min, 2^(min+step), ..., 2^max elements: tally against CUB, Thrust, cuBLAS,\n"
         "seed 000's warp-atomic kernel and a 16-byte read probe (the bandwidth ceiling),\n"
         "in one process on the same buffers. Prints a table (stdout), progress (stderr).\n"
         "  --json FILE   also write every row, the device and the versions as JSON\n"
         "  --cpu         benchmark the CPU backend (the default when no GPU is found;\n"
         "                then --max-log2 defaults to 26)\n"
         "  --unchecked   call tally with options.checks = unchecked (no pointer queries)\n";
}

namespace {
bool parse_int(const char* text, int& value) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0') return false;
  value = static_cast<int>(v);
  return true;
}
}  // namespace

std::string parse_reduce_bench_args(int argc, char** argv, reduce_bench_settings& s) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char*& out) -> bool {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    };
    const char* v = nullptr;
    if (arg == "--help" || arg == "-h") {
      s.help = true;
    } else if (arg == "--cpu") {
      s.cpu = true;
    } else if (arg == "--unchecked") {
      s.unchecked = true;
    } else if (arg == "--json") {
      if (!value(v)) return "--json needs a file name";
      s.json_path = v;
    } else if (arg == "--min-log2" || arg == "--max-log2" || arg == "--step-log2" || arg == "--trials") {
      int number = 0;
      if (!value(v) || !parse_int(v, number)) return arg + " needs an integer";
      if (arg == "--min-log2") s.min_log2 = number;
      else if (arg == "--max-log2") s.max_log2 = number, s.max_given = true;
      else if (arg == "--step-log2") s.step_log2 = number;
      else s.trials = number;
    } else if (arg == "--trial-ms") {
      if (!value(v)) return "--trial-ms needs a number";
      s.trial_ms = std::atof(v);
    } else if (arg == "--types") {
      if (!value(v)) return "--types needs a list such as f32,f64dot";
      std::stringstream list(v);
      for (std::string t; std::getline(list, t, ',');) {
        const auto& all = reduce_bench_types();
        if (std::find(all.begin(), all.end(), t) == all.end()) return "unknown type '" + t + "' in --types";
        s.types.push_back(t);
      }
    } else {
      return "unknown option '" + arg + "'";
    }
  }
  if (s.min_log2 < 0 || s.max_log2 > 34 || s.min_log2 > s.max_log2) return "need 0 <= --min-log2 <= --max-log2 <= 34";
  if (s.step_log2 < 1) return "--step-log2 must be >= 1";
  if (s.trials < 1) return "--trials must be >= 1";
  if (!(s.trial_ms > 0)) return "--trial-ms must be > 0";
  return "";
}

}  // namespace tally::cli
