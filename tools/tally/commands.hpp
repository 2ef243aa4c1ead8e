// The subcommands of the tally tool, one source file each; main.cu dispatches.
#pragma once

namespace tally::cli {

/// `tally info`: the device (or the CPU) and its measured bandwidth.
int run_info(int argc, char** argv);
/// `tally bench reduce [--json FILE] [...]`: reduce against the peers.
int run_bench_reduce(int argc, char** argv);
/// `tally bench histogram [--json FILE] [...]`: histograms and scatter-adds against the peers.
int run_bench_histogram(int argc, char** argv);

}  // namespace tally::cli
