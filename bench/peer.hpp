// The peer interface: tally and every implementation it is compared with go
// through the same path (measure.hpp): reset → run → check, time run, then
// reset → run → check again. A peer is bound to its buffers when it is made
// (a factory function of the benchmark takes the buffers and the stream and
// returns a peer); nothing here knows about CUDA.
#pragma once

#include <functional>
#include <string>

#include "report.hpp"

namespace tally::bench {

/// One implementation bound to its inputs, outputs and stream.
struct peer {
  /// The row's implementation name: "tally", "tally (no PDL)", "cub", ...
  std::string name;
  /// What one call includes beyond the work itself ("returns to the host",
  /// "includes a memset"), printed in the row's note.
  std::string note;
  /// Optional, untimed, called once before the first reset: allocates
  /// scratch, creates handles, sizes temporary storage.
  std::function<void()> setup;
  /// Optional, untimed: poisons or clears the outputs, so that a call that
  /// writes nothing cannot pass the check with a stale correct result.
  std::function<void()> reset;
  /// Required, timed: queues one call on the stream (GPU) or runs it (CPU).
  /// Must give the same result every time it is called on unchanged inputs.
  std::function<void()> run;
  /// Required unless the row needs no check (a bandwidth probe: return
  /// check::none(...)): waits for the work, reads the result back and
  /// compares it with the benchmark's reference.
  std::function<check()> verify;
};

}  // namespace tally::bench
