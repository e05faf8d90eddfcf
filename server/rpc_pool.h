// Threads that serve RPCs whose work blocks (SQLite's write lock, disk).
#ifndef YIRAGE_SERVER_RPC_POOL_H_
#define YIRAGE_SERVER_RPC_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace yirage::server {

// A fixed set of threads running queued work in order. gRPC's callback
// threads (as many as cores) must not block: a handler that waits for
// SQLite's write lock there holds up every other call, and no more calls
// are in flight than there are cores, so writers cannot be grouped
// (GroupCommit). Handlers hand such work here instead.
// Thread-safe.
class RpcPool {
 public:
  // REQUIRES: threads >= 1.
  explicit RpcPool(int threads);
  // Runs what is queued, then joins the threads.
  ~RpcPool();
  RpcPool(const RpcPool&) = delete;
  RpcPool& operator=(const RpcPool&) = delete;

  void Run(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_RPC_POOL_H_
