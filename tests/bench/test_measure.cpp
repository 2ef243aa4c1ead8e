// The benchmark library's check → time → check path on the host: trials of
// a group interleaved, and a failing peer of a group failing alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "host_timing.hpp"
#include "measure.hpp"

namespace tally::bench {
namespace {

/// A call that appends `id` to `log` and spins a little, so that batches
/// are short but measurable.
std::function<void()> logging_call(std::vector<int>& log, int id) {
  return [&log, id] {
    log.push_back(id);
    volatile int spin = 0;
    for (int i = 0; i < 200; ++i) spin = spin + i;
  };
}

TEST(BenchHostTiming, InterleavedTrialsAlternateBetweenTheCalls) {
  std::vector<int> log;
  const trial_settings settings{.trials = 5, .trial_ms = 0.05, .warmup = 2};
  const std::vector<timing> t =
      time_host_interleaved({logging_call(log, 0), logging_call(log, 1), logging_call(log, 2)}, settings);
  ASSERT_EQ(t.size(), 3u);
  std::size_t trial_calls = 0;
  for (const timing& each : t) {
    EXPECT_EQ(each.trials, settings.trials);
    EXPECT_GE(each.calls_per_trial, 1);
    EXPECT_GT(each.median_us, 0);
    EXPECT_LE(each.min_us, each.median_us);
    EXPECT_LE(each.median_us, each.max_us);
    trial_calls += static_cast<std::size_t>(each.calls_per_trial);
  }
  // The log ends with the trials: per trial, a batch of each call in order.
  ASSERT_GE(log.size(), trial_calls * settings.trials);
  std::size_t at = log.size() - trial_calls * settings.trials;
  for (int trial = 0; trial < settings.trials; ++trial)
    for (int id = 0; id < 3; ++id)
      for (int c = 0; c < t[static_cast<std::size_t>(id)].calls_per_trial; ++c, ++at)
        ASSERT_EQ(log[at], id) << "trial " << trial << ", call " << id << ", position " << c;
}

/// A peer whose result is `value` after a run and poisoned after reset; it
/// passes when the result equals `expected`.
peer counting_peer(const std::string& name, std::vector<int>& runs, int id, int value, int expected) {
  auto result = std::make_shared<int>(-1);
  peer p;
  p.name = name;
  p.reset = [result] { *result = -1; };
  p.run = [result, &runs, id, value] {
    runs.push_back(id);
    *result = value;
  };
  p.verify = [result, expected] {
    return *result == expected ? check::pass() : check::fail("got " + std::to_string(*result));
  };
  return p;
}

TEST(BenchMeasure, InterleavedGroupTimesThePeersThatPassAndFailsTheOthersAlone) {
  report out;
  harness h = host_harness(out, trial_settings{.trials = 3, .trial_ms = 0.05, .warmup = 1});
  h.progress = false;
  std::vector<int> runs;
  std::vector<peer> peers = {counting_peer("good", runs, 0, 7, 7), counting_peer("wrong", runs, 1, 6, 7),
                             counting_peer("also good", runs, 2, 7, 7)};
  peer throws;
  throws.name = "throws";
  throws.run = [] { throw std::runtime_error("no device"); };
  throws.verify = [] { return check::pass(); };
  peers.insert(peers.begin() + 2, throws);
  row proto;
  proto.benchmark = "test";
  proto.params = {{"n", 4}};
  proto.bytes = 16;
  const std::vector<std::size_t> rows = measure_interleaved(h, peers, proto);

  ASSERT_EQ(rows.size(), 4u);
  ASSERT_EQ(out.rows.size(), 4u);
  const std::vector<std::string> names = {"good", "wrong", "throws", "also good"};
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(out.rows[rows[i]].impl, names[i]);
  const row &good = out.rows[rows[0]], &wrong = out.rows[rows[1]], &failed = out.rows[rows[2]],
            &also = out.rows[rows[3]];
  for (const row* r : {&good, &also}) {
    EXPECT_EQ(r->before.status, check_status::passed);
    EXPECT_EQ(r->after.status, check_status::passed);
    EXPECT_TRUE(r->time.measured());
    EXPECT_EQ(r->time.trials, 3);
  }
  EXPECT_EQ(wrong.before.status, check_status::failed);
  EXPECT_EQ(wrong.after.status, check_status::not_run);
  EXPECT_FALSE(wrong.time.measured());
  EXPECT_FALSE(failed.time.measured());
  EXPECT_NE(failed.note.find("no device"), std::string::npos);
  EXPECT_EQ(out.mismatches, 1);
  EXPECT_EQ(out.failures, 1);
  // The peer whose check failed ran once (its check), never in the trials.
  EXPECT_EQ(std::count(runs.begin(), runs.end(), 1), 1);
}

}  // namespace
}  // namespace tally::bench
