// The tally command-line tool: a thin layer on CLI11. Each subcommand adds
// itself (commands.hpp); `tally bench` without a subcommand runs the default
// set one after the other.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_cli.hpp"
#include "commands.hpp"

namespace {

/// A benchmark of the default set: its subcommand name and how it adds itself.
struct default_bench {
  const char* name;
  void (*add)(CLI::App&);
};

/// What plain `tally bench` runs, in order.
constexpr default_bench kDefaultSet[] = {
    {"reduce", tally::cli::add_bench_reduce},
    {"histogram", tally::cli::add_bench_histogram},
    {"copy", tally::cli::add_bench_copy},
    {"scatter", tally::cli::add_bench_scatter},
    {"cg", tally::cli::add_bench_cg},
    {"himeno", tally::cli::add_bench_himeno},
};

/// Runs `tally bench <name> <args...>` through its own parser, as if it had
/// been typed. Returns its exit code.
int run_one(const default_bench& b, std::vector<std::string> args) {
  CLI::App bench{"tally bench", "tally bench"};
  b.add(bench);
  args.insert(args.begin(), b.name);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  try {
    bench.parse(args);
  } catch (const CLI::Error& e) {
    return bench.exit(e);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tally: GPU reductions, histograms and scatter-adds, and benchmarks of them against their peers.\n"
      "Without a GPU the benchmarks run the CPU backend and say so.",
      "tally"};
  app.require_subcommand(1);
  tally::cli::add_info(app);

  CLI::App* bench = app.add_subcommand("bench", "benchmarks against the peers; without a subcommand: the default set");
  bool gpu = false, cpu = false;
  std::string json_dir;
  auto* gpu_flag = bench->add_flag("--gpu", gpu, "default set: fail instead of falling back to the CPU");
  bench->add_flag("--cpu", cpu, "default set: the CPU backend")->excludes(gpu_flag);
  bench->add_option("--json-dir", json_dir, "default set: write bench-<name>.json for each benchmark into DIR")
      ->check(CLI::ExistingDirectory);
  for (const auto& b : kDefaultSet) b.add(*bench);
  bench->require_subcommand(0, 1);
  bench->callback([&] {
    if (!bench->get_subcommands().empty()) return;
    int status = 0;
    for (const auto& b : kDefaultSet) {
      std::vector<std::string> args;
      if (gpu) args.push_back("--gpu");
      if (cpu) args.push_back("--cpu");
      if (!json_dir.empty()) args.insert(args.end(), {"--json", json_dir + "/bench-" + b.name + ".json"});
      const int code = run_one(b, args);
      std::cout << std::endl;
      if (code != 0 && status == 0) status = code;
      if (code == tally::cli::kNoGpuExit) break;  // --gpu without a GPU: the others would say the same
    }
    if (status != 0) throw CLI::RuntimeError(status);
  });
  CLI::App* solve = app.add_subcommand("solve", "sparse solvers on tally's reductions");
  solve->require_subcommand(1);
  tally::cli::add_solve_cg(*solve);
  tally::cli::add_himeno(app);

  CLI11_PARSE(app, argc, argv);
  return 0;
}
