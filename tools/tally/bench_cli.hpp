// What every `tally bench <name>` shares: the common options (--json,
// --trials, --trial-ms, --warmup, --gpu, --cpu), the choice of backend, and
// how a command ends (table, JSON, exit code).
#pragma once

#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "report.hpp"
#include "timing.hpp"

namespace tally::cli {

/// Which backend the user asked for.
enum class backend_request {
  automatic,  ///< the GPU when one is usable, else the CPU backend (saying so)
  gpu,        ///< --gpu: the GPU or a clear error and exit code kNoGpuExit
  cpu,        ///< --cpu: the CPU backend even with a GPU
};

/// Exit code of `tally bench ... --gpu` when no GPU is usable.
inline constexpr int kNoGpuExit = 3;

/// The options every benchmark command takes.
struct bench_options {
  std::string json_path;                                 ///< --json FILE ("" = no JSON)
  bench::trial_settings trials;                          ///< --trials, --trial-ms, --warmup
  backend_request backend = backend_request::automatic;  ///< --gpu / --cpu
};

/// Adds --json, --trials, --trial-ms, --warmup, --gpu and --cpu to `cmd`,
/// bound to `o` (which must outlive the parse and the callback). The trial
/// defaults are o.trials as given. Bad numbers are refused by CLI11 with a
/// message naming the option.
void add_bench_options(CLI::App& cmd, bench_options& o);

/// The backend a command runs on: the GPU when one is usable (unless --cpu),
/// the CPU backend when not (printing why, on stdout and stderr), and with
/// --gpu but no usable GPU prints why and throws CLI::RuntimeError(kNoGpuExit).
/// `command` names the command in messages ("tally bench reduce").
bool use_gpu(const bench_options& o, const std::string& command);

/// A report of `command` on the GPU (`gpu`) or the CPU backend: its backend,
/// the run's metadata (gpu_run_metadata or host_run_metadata) and the trial
/// settings of `o` (trials, trial_ms, warmup). The caller adds its own
/// settings, check mode, header and rows.
bench::report start_report(const std::string& command, bool gpu, const bench_options& o);

/// Prints the report's table on stdout, writes its JSON when asked, and
/// throws CLI::RuntimeError(1) when a check failed, a row failed or the JSON
/// could not be written (after both were written).
void finish_command(const bench::report& r, const bench_options& o);

/// Runs `body` (a whole GPU sweep); a tally or CUDA error that escapes it is
/// printed as "<command>: <message>" and becomes CLI::RuntimeError(1).
template <class Body>
void run_reporting_errors(const std::string& command, const Body& body) {
  try {
    body();
  } catch (const CLI::Error&) {
    throw;
  } catch (const std::exception& e) {
    std::cerr << command << ": " << e.what() << "\n";
    throw CLI::RuntimeError(1);
  }
}

}  // namespace tally::cli
