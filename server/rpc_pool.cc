#include "server/rpc_pool.h"

#include <utility>

namespace yirage::server {

RpcPool::RpcPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

RpcPool::~RpcPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

void RpcPool::Run(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(work));
}

void RpcPool::Loop() {
  for (;;) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace yirage::server
