// The options and the ending shared by every benchmark command.
#include "bench_cli.hpp"

#include <iostream>

#include "output.hpp"
#include "run_info.hpp"

namespace tally::cli {

void add_bench_options(CLI::App& cmd, bench_options& o) {
  cmd.add_option("--json", o.json_path, "also write every row, the versions and the device as JSON to FILE")
      ->type_name("FILE");
  cmd.add_option("--trials", o.trials.trials, "timed trials per row (the median is reported)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd.add_option("--trial-ms", o.trials.trial_ms, "length of one trial in milliseconds")
      ->check(CLI::Range(0.01, 10000.0))
      ->capture_default_str();
  cmd.add_option("--warmup", o.trials.warmup, "untimed calls before the trials")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  auto* gpu = cmd.add_flag_callback(
      "--gpu", [&o] { o.backend = backend_request::gpu; },
      "run on the GPU; fail (exit code 3) when none is usable instead of falling back to the CPU");
  auto* cpu = cmd.add_flag_callback(
      "--cpu", [&o] { o.backend = backend_request::cpu; }, "benchmark the CPU backend even when a GPU is present");
  gpu->excludes(cpu);
}

bool use_gpu(const bench_options& o, const std::string& command) {
  if (o.backend == backend_request::cpu) return false;
  const std::string why = bench::gpu_unusable_reason();
  if (why.empty()) return true;
  if (o.backend == backend_request::gpu) {
    std::cerr << command << ": --gpu: no usable GPU (" << why << ")\n";
    throw CLI::RuntimeError(kNoGpuExit);
  }
  const std::string text = "no usable GPU (" + why + "): benchmarking the CPU backend instead";
  std::cout << command << ": " << text << "\n";
  std::cerr << command << ": " << text << "\n";
  return false;
}

bench::report start_report(const std::string& command, bool gpu, const bench_options& o) {
  bench::report r;
  r.command = command;
  r.backend = gpu ? "gpu" : "cpu";
  r.metadata = gpu ? bench::gpu_run_metadata() : bench::host_run_metadata();
  r.settings = {{"trials", o.trials.trials}, {"trial_ms", o.trials.trial_ms}, {"warmup", o.trials.warmup}};
  return r;
}

void finish_command(const bench::report& r, const bench_options& o) {
  const int code = bench::finish(r, o.json_path, std::cout);
  if (code != 0) {
    std::cerr << r.command << ": " << r.mismatches << " mismatches, " << r.failures << " failures: exit code " << code
              << "\n";
    throw CLI::RuntimeError(code);
  }
}

}  // namespace tally::cli
