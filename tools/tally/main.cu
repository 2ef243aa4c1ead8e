// The tally command-line tool: dispatches to one subcommand per source file
// (commands.hpp). Each subcommand gets argv starting at its own name, so it
// parses its options from argv[1] on, like a program of its own.
#include <cstring>
#include <iostream>
#include <string>

#include "commands.hpp"

namespace {

const char* kUsage =
    "usage: tally <command> [options]\n"
    "\n"
    "commands:\n"
    "  info                the GPU (or the CPU without one) and its measured bandwidth\n"
    "  bench reduce        sums and dot products: tally against CUB, Thrust, cuBLAS,\n"
    "                      seed 000's kernel and a read probe (--help for options)\n"
    "  bench histogram     histograms and scatter-adds against their peers\n"
    "  bench               bench reduce, then bench histogram, on their defaults\n"
    "\n"
    "Without a GPU, the benchmarks run the CPU backend and say so.\n";

bool is_help(const char* arg) {
  return std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0 || std::strcmp(arg, "help") == 0;
}

/// `tally bench [reduce|histogram] ...`; argv[0] is "bench".
int run_bench(int argc, char** argv) {
  if (argc < 2) {
    // The main job on its defaults: every reduction, then every histogram.
    char reduce_name[] = "reduce", histogram_name[] = "histogram";
    char* reduce_argv[] = {reduce_name, nullptr};
    char* histogram_argv[] = {histogram_name, nullptr};
    const int reduce_status = tally::cli::run_bench_reduce(1, reduce_argv);
    std::cout << std::endl;
    const int histogram_status = tally::cli::run_bench_histogram(1, histogram_argv);
    return reduce_status != 0 ? reduce_status : histogram_status;
  }
  const std::string what = argv[1];
  if (what == "reduce") return tally::cli::run_bench_reduce(argc - 1, argv + 1);
  if (what == "histogram") return tally::cli::run_bench_histogram(argc - 1, argv + 1);
  if (is_help(argv[1])) {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "tally bench: unknown benchmark '" << what << "'\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || is_help(argv[1])) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  try {
    if (command == "info") return tally::cli::run_info(argc - 1, argv + 1);
    if (command == "bench") return run_bench(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::cerr << "tally " << command << ": " << e.what() << "\n";
    return 1;
  }
  std::cerr << "tally: unknown command '" << command << "'\n" << kUsage;
  return 2;
}
