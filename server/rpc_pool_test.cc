#include "server/rpc_pool.h"

#include <atomic>
#include <memory>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace yirage::server {
namespace {

// Work runs on the pool's threads, several at once (one blocked piece of
// work does not hold up the next), and what is queued when the pool is
// destroyed still runs.
TEST(RpcPoolTest, RunsWorkConcurrentlyAndDrainsOnDestruction) {
  std::atomic<int> ran{0};
  {
    RpcPool pool(2);
    absl::Notification release;
    absl::Notification second_ran;
    pool.Run([&] {
      release.WaitForNotification();  // blocks one thread
      ++ran;
    });
    pool.Run([&] {
      ++ran;
      second_ran.Notify();
    });
    second_ran.WaitForNotification();  // the other thread ran it meanwhile
    for (int i = 0; i < 100; ++i) pool.Run([&] { ++ran; });
    release.Notify();
  }
  EXPECT_EQ(ran.load(), 102);
}

}  // namespace
}  // namespace yirage::server
