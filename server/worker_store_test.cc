#include "server/worker_store.h"

#include <filesystem>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "server/test_dir.h"

namespace yirage::server {
namespace {

class WorkerStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("yirage_worker_store_test");
    auto store = WorkerStore::Open((dir_ / "yirage.db").string(), options_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  WorkerStoreOptions options_;
  std::unique_ptr<WorkerStore> store_;
};

// A worker id stays with the first identity that used it; calls without an
// identity (no tokens, no certificates) are not checked.
TEST_F(WorkerStoreTest, AWorkerIdStaysWithItsIdentity) {
  yirage::v1::SynchronizeRequest w;
  w.set_worker_id("w1");
  w.set_backend("cpu");
  ASSERT_TRUE(store_->Upsert(w, 1000).ok());
  ASSERT_TRUE(store_->Upsert(w, 1001, "token:pool-a").ok());  // bound now
  ASSERT_TRUE(store_->Upsert(w, 1002, "token:pool-a").ok());
  absl::StatusOr<bool> other = store_->Upsert(w, 1003, "token:pool-b");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(other.status().message().find("belongs to 'token:pool-a'"), std::string::npos)
      << other.status();
  auto workers = store_->List(1003);
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].last_seen_unix(), 1002) << "the refused call changed nothing";
  EXPECT_TRUE(store_->Upsert(w, 1004).ok());
}

// Workers are listed oldest first, connected while heard of within the
// timeout, and counted per backend.
TEST_F(WorkerStoreTest, ListsAndCountsConnectedWorkers) {
  yirage::v1::SynchronizeRequest cpu;
  cpu.set_worker_id("w-cpu");
  cpu.set_backend("cpu");
  cpu.set_hostname("h1");
  ASSERT_TRUE(store_->Upsert(cpu, 1000).ok());
  yirage::v1::SynchronizeRequest cuda = cpu;
  cuda.set_worker_id("w-cuda");
  cuda.set_backend("cuda");
  cuda.mutable_status()->mutable_executing()->set_batch_id("batch-1");
  ASSERT_TRUE(store_->Upsert(cuda, 1005).ok());
  auto workers = store_->List(1012);
  ASSERT_TRUE(workers.ok()) << workers.status();
  ASSERT_EQ(workers->size(), 2u);
  EXPECT_EQ((*workers)[0].worker_id(), "w-cpu");
  EXPECT_FALSE((*workers)[0].connected()) << "12 s silent, timeout 10";
  EXPECT_TRUE((*workers)[1].connected());
  EXPECT_EQ((*workers)[1].state(), "executing");
  EXPECT_EQ((*workers)[1].current_batch(), "")
      << "the batch it names was never leased to it (the lease table says what it holds)";
  EXPECT_EQ(*store_->CountConnected(1012), 1);
  EXPECT_EQ(*store_->CountConnected(1012, "cpu"), 0);
  EXPECT_EQ(*store_->CountConnected(1006, "cpu"), 1);
}

// The kernels a backend's jobs are searched with: the job's chip's worker
// first, then a connected one, then the most recent; none for a backend no
// worker described.
TEST_F(WorkerStoreTest, KernelsForPrefersTheChipThenConnectedWorkers) {
  auto sync = [&](const std::string& id, const std::string& chip, int families, double now) {
    yirage::v1::SynchronizeRequest r;
    r.set_worker_id(id);
    r.set_backend("cuda");
    r.mutable_kernels()->set_backend("cuda");
    for (int i = 0; i < families; ++i) r.mutable_kernels()->add_families()->set_name(id);
    auto stored = store_->Upsert(r, now);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_TRUE(*stored);
    ASSERT_TRUE(store_->SetChip(id, chip).ok());
  };
  sync("old-h100", "h100_sxm", 1, 1000);
  sync("new-a100", "a100_sxm4_80gb", 2, 2000);
  auto k = store_->KernelsFor("cuda", "h100_sxm", 2001);
  ASSERT_TRUE(k.ok() && k->has_value());
  EXPECT_EQ((*k)->families(0).name(), "old-h100") << "the job's chip first";
  k = store_->KernelsFor("cuda", "", 2001);
  ASSERT_TRUE(k.ok() && k->has_value());
  EXPECT_EQ((*k)->families(0).name(), "new-a100") << "then the connected worker";
  k = store_->KernelsFor("hip", "", 2001);
  ASSERT_TRUE(k.ok());
  EXPECT_FALSE(k->has_value());
  // A call without kernels keeps the stored ones.
  yirage::v1::SynchronizeRequest bare;
  bare.set_worker_id("new-a100");
  bare.set_backend("cuda");
  auto kept = store_->Upsert(bare, 2002);
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(*kept);
}

// The software identity is kept with each worker's row: the workers that
// could answer from a cached winner are the connected ones of its backend
// and chip with the same toolkit, and a worker whose device changes counts
// under its new one.
TEST_F(WorkerStoreTest, WorkersAreCountedBySoftware) {
  const std::string gcc12 = R"({"compiler": {"version": "gcc 12", "march": "znver4"}})";
  const std::string gcc13 = R"({"compiler": {"version": "gcc 13", "march": "znver4"}})";
  auto call = [&](const std::string& id, const std::string& device, double now) {
    yirage::v1::SynchronizeRequest r;
    r.set_worker_id(id);
    r.set_backend("cpu");
    r.set_device_description(device);
    r.mutable_status()->mutable_idle();
    ASSERT_TRUE(store_->Upsert(r, now).ok());
  };
  call("a", gcc12, 1000);
  call("b", gcc12, 1000);
  call("c", gcc13, 1000);
  ASSERT_TRUE(store_->SetChip("b", "epyc_9654").ok());
  const std::string v12 = SoftwareIdentity(gcc12);
  ASSERT_FALSE(v12.empty());
  EXPECT_EQ(*store_->CountWithSoftware(1001, "cpu", "", v12), 2);
  EXPECT_EQ(*store_->CountWithSoftware(1001, "cpu", "epyc_9654", v12), 1);
  EXPECT_EQ(*store_->CountWithSoftware(1001, "cuda", "", v12), 0);
  EXPECT_EQ(*store_->CountWithSoftware(1001, "cpu", "", SoftwareIdentity(gcc13)), 1);
  EXPECT_EQ(*store_->WorkerSoftware("c"), SoftwareIdentity(gcc13));
  EXPECT_EQ(*store_->WorkerSoftware("nobody"), "");
  call("c", gcc12, 1002);  // upgraded: written at once (the device changed)
  EXPECT_EQ(*store_->CountWithSoftware(1002, "cpu", "", v12), 3);
  EXPECT_EQ(*store_->CountWithSoftware(1002, "cpu", "", SoftwareIdentity(gcc13)), 0);
  // Not heard of for longer than the timeout: not counted.
  EXPECT_EQ(*store_->CountWithSoftware(1002 + options_.worker_timeout_seconds + 1, "cpu", "", v12),
            0);
}

}  // namespace
}  // namespace yirage::server
