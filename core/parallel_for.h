// Runs independent work items on a few threads, for the CPU-heavy loops of
// the core (the float64 reference, fingerprints, the search over rewritten
// graphs). Threads are started per call: callers use it for work that takes
// milliseconds or more, where that cost does not show.
#ifndef YIRAGE_CORE_PARALLEL_FOR_H_
#define YIRAGE_CORE_PARALLEL_FOR_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <system_error>
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

// Helper threads that ParallelFor calls of this process have running, and
// the most they may have at once: calls nest (the candidate search runs
// graphs in parallel, each graph's fingerprint trials, each trial's large
// ops), and each level asking for a thread per core would start cores^3
// threads on a large server, past its thread limit. A call takes the
// helpers it asks for while the process has fewer than this, else fewer
// (none: its own thread does all its items).
inline std::atomic<int64_t>& ParallelForHelpers() {
  static std::atomic<int64_t> helpers{0};
  return helpers;
}
inline int64_t ParallelForMaxHelpers() {
  static const int64_t max_helpers = 2 * std::max<int64_t>(1, std::thread::hardware_concurrency());
  return max_helpers;
}

// Calls f(i) for every i in [0, n), on up to `threads` threads (the calling
// one included; fewer where the process's helper threads are at
// ParallelForMaxHelpers, or the system starts no more); items are handed
// out one at a time, in increasing order.
// REQUIRES: f is safe to call concurrently for different i.
// Thread-safe.
template <typename F>
void ParallelFor(int64_t n, int64_t threads, F f) {
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  // Reserve helpers within the process's budget.
  std::atomic<int64_t>& helpers = ParallelForHelpers();
  const int64_t want = std::min(threads, n) - 1;
  int64_t got = 0;
  for (int64_t cur = helpers.load(); got == 0 && cur < ParallelForMaxHelpers();) {
    const int64_t take = std::min(want, ParallelForMaxHelpers() - cur);
    if (helpers.compare_exchange_weak(cur, cur + take)) got = take;
  }
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t i = next++; i < n; i = next++) f(i);
  };
  std::vector<std::thread> pool;
  pool.reserve(got);
  for (int64_t t = 0; t < got; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {  // the system starts no more: fewer helpers
      break;
    }
  }
  helpers -= got - static_cast<int64_t>(pool.size());
  work();
  for (std::thread& t : pool) t.join();
  helpers -= static_cast<int64_t>(pool.size());
}

}  // namespace yirage::core

#endif  // YIRAGE_CORE_PARALLEL_FOR_H_
