#include "core/parallel_for.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace yirage::core {
namespace {

// Every item runs exactly once, however many threads are asked for.
TEST(ParallelForTest, EveryItemRunsOnce) {
  for (int64_t threads : {1, 2, 7, 64}) {
    std::vector<std::atomic<int>> runs(1000);
    ParallelFor(1000, threads, [&](int64_t i) { ++runs[i]; });
    for (size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 1) << i;
  }
  EXPECT_EQ(ParallelForHelpers().load(), 0) << "every helper is given back";
}

// Nested calls, each asking for many threads, keep the process's helper
// threads within ParallelForMaxHelpers, and still run every item.
TEST(ParallelForTest, NestedCallsShareOneBudget) {
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> items{0};
  auto note_peak = [&] {
    const int64_t now = ParallelForHelpers().load();
    for (int64_t p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
    }
  };
  ParallelFor(32, 32, [&](int64_t) {
    ParallelFor(32, 32, [&](int64_t) {
      ParallelFor(8, 8, [&](int64_t) {
        note_peak();
        ++items;
      });
    });
  });
  EXPECT_EQ(items.load(), 32 * 32 * 8);
  EXPECT_LE(peak.load(), ParallelForMaxHelpers());
  EXPECT_GT(peak.load(), 0) << "helpers ran at all";
  EXPECT_EQ(ParallelForHelpers().load(), 0);
}

}  // namespace
}  // namespace yirage::core
