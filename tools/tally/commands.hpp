// The subcommands of the tally tool. Each lives in its own source file and
// adds itself to its parent with add_<name>(parent); main.cu creates the app
// and the `bench` subcommand and calls these. A subcommand's callback
// signals a non-zero exit by printing its own message and then
// `throw CLI::RuntimeError(code)`.
#pragma once

#include <CLI/CLI.hpp>

namespace tally::cli {

/// `tally info`: the GPU (or the CPU without one) and its measured bandwidth.
void add_info(CLI::App& app);

/// `tally bench reduce`: sums and dot products against CUB, Thrust, cuBLAS,
/// seeds 000 and 002's kernels and a read probe (GPU), or against Eigen,
/// OpenMP and a host read probe (CPU backend).
void add_bench_reduce(CLI::App& bench);
/// `tally bench histogram`: histograms and scatter-adds against CUB, plain
/// atomics and the paper's warp aggregation (seed 003).
void add_bench_histogram(CLI::App& bench);
/// `tally bench copy`: seed 001's vector-width study (copies with scalar,
/// 32-, 64- and 128-bit accesses, for half and float).
void add_bench_copy(CLI::App& bench);
/// `tally bench scatter`: the row scatter (index_add) with hot keys: tally's
/// strategies and deterministic mode on PyTorch's index_add_ problem.
void add_bench_scatter(CLI::App& bench);

/// `tally bench cg`: seed 004's CG ladder (cuSPARSE + cuBLAS, Eigen) against
/// tally's CG on the CPU and in every GPU mode.
void add_bench_cg(CLI::App& bench);
/// `tally solve cg`: tally::cg on a Matrix Market file or a Poisson problem.
void add_solve_cg(CLI::App& solve);
/// `tally bench himeno`: seed 003's Himeno study (every gosa pattern, XS ... XL).
void add_bench_himeno(CLI::App& bench);
/// `tally himeno`: the Himeno benchmark (RIKEN's himenoBMTxpa) on the GPU or the CPU.
void add_himeno(CLI::App& app);

}  // namespace tally::cli
