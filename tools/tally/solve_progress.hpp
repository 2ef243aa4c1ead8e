// The progress line of `tally solve cg`: while a solve runs, a second thread
// reads the residual history the solver writes (cg_options::history: entry 0
// is the initial true relative residual, entry k the recurrence's ‖r_k‖/‖b‖
// after iteration k) and prints its latest entry on stderr about once a
// second, the first after a second: short solves print nothing, and stdout
// (and --json) stay clean. For the GPU the history lives in mapped pinned
// host memory, which the solve writes directly: the host reads it without a
// copy and the solve keeps its one host wait, at its end.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace tally::cli {

/// The doubles a solver writes its residual history to, NaN until written.
class residual_history {
 public:
  /// `entries` doubles (cg_options::max_iterations + 1), in mapped pinned host
  /// memory when `mapped` (the GPU writes them), else in plain host memory
  /// (the CPU backend). Pre: entries >= 1. Throws tally::cuda_error when the
  /// pinned allocation fails.
  residual_history(std::int64_t entries, bool mapped);
  ~residual_history();
  residual_history(const residual_history&) = delete;
  residual_history& operator=(const residual_history&) = delete;

  /// What to pass as cg_options::history: the device's address of the mapped
  /// memory, or the host memory itself.
  double* for_solver() const { return mapped_ ? device_ : host_; }

  /// Sets every entry to NaN and forgets what latest() has read.
  /// Pre: no solve writes to it now.
  void poison();

  /// Post: returns the highest k such that entries 0..k are written (scanning
  /// on from the previous call's answer; a NaN the solver wrote stops the scan
  /// as an unwritten entry does) and sets `value` to entry k; returns -1 and
  /// leaves `value` alone when entry 0 is not written yet. Call from one
  /// thread at a time.
  std::int64_t latest(double& value);

 private:
  double* host_ = nullptr;
  double* device_ = nullptr;  // mapped only
  std::int64_t entries_ = 0;
  bool mapped_ = false;
  std::int64_t seen_ = -1;  // latest()'s last answer
  double seen_value_ = 0;
};

/// Prints "<command>: iteration k: relative residual r (t s<context>)" on
/// stderr every `every` seconds while it lives, the first after `every`
/// seconds, from history->latest(). Construct it just before a solve (it
/// poisons the history; pre: no solve writes to it yet) and destroy it just
/// after the solve returns (or throws): that stops and joins its thread.
/// A null history makes it do nothing.
class progress_line {
 public:
  progress_line(residual_history* history, std::string command, std::string context, double every);
  ~progress_line();
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;

 private:
  void run();

  residual_history* history_;
  std::string command_, context_;
  std::chrono::duration<double> every_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace tally::cli
