// Runs independent work items on a few threads, for the CPU-heavy loops of
// the core (the float64 reference, fingerprints, the search over rewritten
// graphs). Threads are started per call: callers use it for work that takes
// milliseconds or more, where that cost does not show.
#ifndef YIRAGE_CORE_PARALLEL_FOR_H_
#define YIRAGE_CORE_PARALLEL_FOR_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace yirage::core {

// Threads worth starting for `n` items of `work_per_item` operations each:
// one per `min_work_per_thread` operations of the total, at most one per
// item and per hardware thread, at least 1.
inline int64_t ThreadsForWork(int64_t n, double work_per_item, double min_work_per_thread) {
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const double wanted = static_cast<double>(n) * work_per_item / min_work_per_thread;
  return std::max<int64_t>(1, std::min<int64_t>({hw, n, static_cast<int64_t>(wanted)}));
}

// Calls f(i) for every i in [0, n), on up to `threads` threads (the calling
// one included); items are handed out one at a time, in increasing order.
// REQUIRES: f is safe to call concurrently for different i.
template <typename F>
void ParallelFor(int64_t n, int64_t threads, F f) {
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i = next++; i < n; i = next++) f(i);
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < std::min(threads, n); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

}  // namespace yirage::core

#endif  // YIRAGE_CORE_PARALLEL_FOR_H_
