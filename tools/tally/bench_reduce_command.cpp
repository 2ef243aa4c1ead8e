// `tally bench reduce`: its options, and the choice between the GPU and the
// CPU run.
#include <algorithm>
#include <memory>

#include "bench_reduce_args.hpp"
#include "commands.hpp"

namespace tally::cli {

bool reduce_settings::wants(const std::string& type) const {
  return types.empty() || std::find(types.begin(), types.end(), type) != types.end();
}

void add_bench_reduce(CLI::App& bench) {
  auto s = std::make_shared<reduce_settings>();
  CLI::App* cmd = bench.add_subcommand(
      "reduce", "sums and dot products against CUB, Thrust, cuBLAS, the seeds' kernels and a read probe");
  cmd->footer(
      "Sums (f32, f64, i32, compensated f32/f64) and dot products (f32dot, f64dot) of N = 2^min, 2^(min+step), ..., "
      "2^max elements. GPU: tally (with and without programmatic dependent launch) against CUB, Thrust, cuBLAS, "
      "seed 000's warp-atomic kernel, seed 002's shared-memory kernels and a 16-byte read probe, in one process on "
      "the same buffers. CPU backend: tally::cpu against Eigen (one thread), an OpenMP reduction and a host read "
      "probe. Every row is checked (exact integer references) before and after timing. Table on stdout, progress "
      "on stderr.");
  add_bench_options(*cmd, s->common);
  cmd->add_option("--min-log2", s->min_log2, "smallest N as log2")->check(CLI::Range(0, 34))->capture_default_str();
  auto* max = cmd->add_option("--max-log2", s->max_log2, "largest N as log2 (default 30; 26 on the CPU)")
                  ->check(CLI::Range(0, 34));
  cmd->add_option("--step-log2", s->step_log2, "step between sizes, in log2")
      ->check(CLI::Range(1, 34))
      ->capture_default_str();
  cmd->add_option("--types", s->types, "comma-separated subset of f32,f64,i32,f32dot,f64dot")
      ->delimiter(',')
      ->check(CLI::IsMember(reduce_bench_types()));
  cmd->add_flag("--unchecked", s->unchecked, "call tally with options.checks = unchecked (no pointer queries)");
  cmd->callback([s, max] {
    s->max_given = max->count() > 0;
    if (s->min_log2 > s->max_log2)
      throw CLI::ValidationError("--min-log2", "must not exceed --max-log2 (" + std::to_string(s->max_log2) + ")");
    if (use_gpu(s->common, "tally bench reduce"))
      run_reduce_gpu(*s);
    else
      run_reduce_cpu(*s);
  });
}

}  // namespace tally::cli
