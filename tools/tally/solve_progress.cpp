// The residual history `tally solve cg` gives the solver and the thread that
// prints its progress (solve_progress.hpp).
#include "solve_progress.hpp"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <utility>

#include <cuda_runtime.h>

#include "tally/cuda/check.cuh"

namespace tally::cli {

// The reader loads each entry atomically while the solver stores it: the GPU
// through the mapped memory (outside the C++ memory model: a fresh load each
// time is what matters), the CPU backend with plain stores of aligned doubles
// from the solving thread, which are single 8-byte stores on the targets we
// build for (x86-64, AArch64). So an entry reads as NaN or as the solver's
// value, never torn. A lock-free atomic_ref keeps the load a plain load.
static_assert(std::atomic_ref<double>::is_always_lock_free);

residual_history::residual_history(std::int64_t entries, bool mapped) : entries_(entries), mapped_(mapped) {
  const std::size_t bytes = static_cast<std::size_t>(entries) * sizeof(double);
  if (!mapped) {
    host_ = new double[static_cast<std::size_t>(entries)];
  } else {
    TALLY_CUDA(cudaHostAlloc(reinterpret_cast<void**>(&host_), bytes, cudaHostAllocMapped));
    const cudaError_t got = cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0);
    if (got != cudaSuccess) cudaFreeHost(host_);
    TALLY_CUDA(got);
  }
  poison();
}

residual_history::~residual_history() {
  if (mapped_) cudaFreeHost(host_);
  else delete[] host_;
}

void residual_history::poison() {
  for (std::int64_t k = 0; k < entries_; ++k) host_[k] = std::numeric_limits<double>::quiet_NaN();
  seen_ = -1;
}

std::int64_t residual_history::latest(double& value) {
  while (seen_ + 1 < entries_) {
    const double next = std::atomic_ref<double>(host_[seen_ + 1]).load(std::memory_order_relaxed);
    if (std::isnan(next)) break;
    ++seen_;
    seen_value_ = next;
  }
  if (seen_ >= 0) value = seen_value_;
  return seen_;
}

progress_line::progress_line(residual_history* history, std::string command, std::string context, double every)
    : history_(history), command_(std::move(command)), context_(std::move(context)), every_(every) {
  if (!history_) return;
  history_->poison();
  thread_ = std::thread([this] { run(); });
}

progress_line::~progress_line() {
  if (!thread_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void progress_line::run() {
  using clock = std::chrono::steady_clock;
  const clock::time_point start = clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  for (int line = 1;; ++line) {
    const auto due = start + std::chrono::duration_cast<clock::duration>(line * every_);
    if (wake_.wait_until(lock, due, [this] { return stop_; })) return;
    const double seconds = std::chrono::duration<double>(clock::now() - start).count();
    double value = 0;
    const std::int64_t k = history_->latest(value);
    char text[200];
    if (k < 0)
      std::snprintf(text, sizeof text, "%s: setting up, no residual yet (%.1f s%s)\n", command_.c_str(), seconds,
                    context_.c_str());
    else
      std::snprintf(text, sizeof text, "%s: iteration %lld: relative residual %.3e (%.1f s%s)\n", command_.c_str(),
                    static_cast<long long>(k), value, seconds, context_.c_str());
    std::cerr << text << std::flush;
  }
}

}  // namespace tally::cli
