#include "server/chip_store.h"

#include <unistd.h>

#include <filesystem>

#include "core/builtin_chips.h"
#include "core/chip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/job_store.h"

namespace yirage::server {
namespace {

using ::testing::HasSubstr;
using yirage::v1::Chip;
using yirage::v1::ChipEvent;

Chip MakeChip(const std::string& id, double bandwidth = 1000) {
  auto chip = core::ParseChipJson(R"({"chip_id": ")" + id + R"(", "chip_name": "Test )" + id +
                                  R"(", "vendor": "other", "category": "dsa", "backend": "mlir",
      "memory": {"capacity_gb": 16, "bandwidth_gbps": )" +
                                  std::to_string(bandwidth) + R"(},
      "compute": {"num_compute_units": 8}, "metadata": {"source": "test"}})");
  EXPECT_TRUE(chip.ok()) << chip.status();
  return *chip;
}

class ChipStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("yirage_chip_store_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    auto store = ChipStore::Open((dir_ / "yirage.db").string());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    store_->SetListener([this](const ChipEvent& e) { events_.push_back(e); });
  }
  int Count() {
    auto all = store_->List({});
    EXPECT_TRUE(all.ok());
    return all.ok() ? static_cast<int>(all->size()) : -1;
  }

  std::filesystem::path dir_;
  std::unique_ptr<ChipStore> store_;
  std::vector<ChipEvent> events_;
};

TEST_F(ChipStoreTest, NewDatabaseHoldsTheBuiltinCatalogOnce) {
  auto builtin = core::BuiltinChips();
  ASSERT_TRUE(builtin.ok());
  EXPECT_EQ(Count(), static_cast<int>(builtin->size()));
  auto h200 = store_->Get("h200");
  ASSERT_TRUE(h200.ok()) << h200.status();
  EXPECT_DOUBLE_EQ(h200->memory().capacity_gb(), 141);
  EXPECT_GT(h200->created_unix(), 1.6e9);
  auto nvidia = store_->List({"nvidia", "", ""});
  ASSERT_TRUE(nvidia.ok());
  for (const Chip& c : *nvidia) EXPECT_EQ(c.vendor(), "nvidia");
  auto cpus = store_->List({"", "cpu", "cpu"});
  ASSERT_TRUE(cpus.ok());
  EXPECT_GE(cpus->size(), 2u);
  Reopen();
  EXPECT_EQ(Count(), static_cast<int>(builtin->size()));
}

TEST_F(ChipStoreTest, RegisteredChipSurvivesReopenAndTheJobStoreSharesTheSchema) {
  bool created = false;
  auto stored = store_->Register(MakeChip("acme_x1"), false, 100, &created);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_TRUE(created);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind(), ChipEvent::REGISTERED);
  EXPECT_EQ(events_[0].chip_id(), "acme_x1");
  Reopen();
  auto again = store_->Get("acme_x1");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(core::SameChip(*again, MakeChip("acme_x1")));
  EXPECT_DOUBLE_EQ(again->created_unix(), 100);
  // A JobStore on the same file sees the same schema (workers.chip_id).
  auto jobs = JobStore::Open((dir_ / "yirage.db").string(), JobStoreOptions());
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  yirage::v1::SynchronizeRequest sync;
  sync.set_worker_id("w1");
  sync.set_backend("cpu");
  ASSERT_TRUE((*jobs)->UpsertWorker(sync, 200).ok());
  ASSERT_TRUE((*jobs)->SetWorkerChip("w1", "acme_x1").ok());
  auto workers = (*jobs)->ListWorkers(200);
  ASSERT_TRUE(workers.ok());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].chip_id(), "acme_x1");
}

TEST_F(ChipStoreTest, RegisterRefusesAnExistingIdUnlessOverwrite) {
  bool created = false;
  ASSERT_TRUE(store_->Register(MakeChip("acme_x1"), false, 100, &created).ok());
  auto again = store_->Register(MakeChip("acme_x1", 2000), false, 110, &created);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("chip 'acme_x1'"));
  EXPECT_DOUBLE_EQ(store_->Get("acme_x1")->memory().bandwidth_gbps(), 1000);
  auto replaced = store_->Register(MakeChip("acme_x1", 2000), true, 120, &created);
  ASSERT_TRUE(replaced.ok());
  EXPECT_FALSE(created);
  EXPECT_DOUBLE_EQ(replaced->created_unix(), 100);
  EXPECT_DOUBLE_EQ(replaced->updated_unix(), 120);
  EXPECT_DOUBLE_EQ(store_->Get("acme_x1")->memory().bandwidth_gbps(), 2000);
  EXPECT_EQ(events_.back().kind(), ChipEvent::UPDATED);
  // Invalid chips are refused before anything is written.
  Chip bad = MakeChip("acme_bad");
  bad.set_vendor("acme");
  EXPECT_EQ(store_->Register(bad, true, 130, &created).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Get("acme_bad").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ChipStoreTest, DeleteAndNotFound) {
  bool created = false;
  ASSERT_TRUE(store_->Register(MakeChip("acme_x1"), false, 100, &created).ok());
  ASSERT_TRUE(store_->Delete("acme_x1", 101).ok());
  EXPECT_EQ(events_.back().kind(), ChipEvent::DELETED);
  EXPECT_EQ(events_.back().chip_id(), "acme_x1");
  EXPECT_EQ(store_->Get("acme_x1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Delete("acme_x1", 102).code(), absl::StatusCode::kNotFound);
}

TEST_F(ChipStoreTest, ImportIsAllOrNothing) {
  const int before = Count();
  bool created = false;
  ASSERT_TRUE(store_->Register(MakeChip("acme_x1"), false, 100, &created).ok());
  events_.clear();
  // acme_x2 is new, acme_x1 conflicts: nothing is stored.
  auto conflict = store_->Import({MakeChip("acme_x2"), MakeChip("acme_x1", 5000)}, false, 110);
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(conflict.status().message()), HasSubstr("chip 'acme_x1'"));
  EXPECT_EQ(store_->Get("acme_x2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(events_.empty());
  // An invalid chip anywhere fails the import too.
  Chip bad = MakeChip("acme_x3");
  bad.mutable_memory()->set_capacity_gb(0);
  auto invalid = store_->Import({MakeChip("acme_x2"), bad}, true, 110);
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(invalid.status().message()),
              HasSubstr("chip 'acme_x3': memory.capacity_gb"));
  EXPECT_EQ(Count(), before + 1);
  // Identical chips are unchanged; with overwrite the different one updates.
  auto ok =
      store_->Import({MakeChip("acme_x2"), MakeChip("acme_x1"), MakeChip("acme_x4")}, false, 120);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->added, 2);
  EXPECT_EQ(ok->unchanged, 1);
  EXPECT_EQ(ok->updated, 0);
  EXPECT_EQ(events_.size(), 2u);
  auto over = store_->Import({MakeChip("acme_x1", 5000)}, true, 130);
  ASSERT_TRUE(over.ok());
  EXPECT_EQ(over->updated, 1);
  EXPECT_DOUBLE_EQ(store_->Get("acme_x1")->memory().bandwidth_gbps(), 5000);
  EXPECT_EQ(Count(), before + 3);
}

}  // namespace
}  // namespace yirage::server
