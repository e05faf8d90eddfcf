#include "server/chip_store.h"

#include <filesystem>

#include "core/builtin_chips.h"
#include "core/chip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/database.h"
#include "server/job_store.h"
#include "server/schema.h"
#include "server/test_dir.h"
#include "server/worker_store.h"

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
    dir_ = FreshTestDir("yirage_chip_store_test");
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

// The seed project's ids name their catalog chips; a chip registered
// under such an id is its own.
TEST_F(ChipStoreTest, SeedIdsAreAliasesOfCatalogChips) {
  auto h100 = store_->Get("nvidia_h100");
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_EQ(h100->chip_id(), "h100_sxm");
  auto pvc = store_->Get("intel_pvc");
  ASSERT_TRUE(pvc.ok()) << pvc.status();
  EXPECT_EQ(pvc->chip_id(), "max_1550");
  EXPECT_TRUE(absl::IsNotFound(store_->Get("nvidia_h999").status()));
  Chip own = *h100;
  own.set_chip_id("nvidia_h100");
  own.set_chip_name("a user's H100");
  own.mutable_metadata()->erase("builtin");
  bool created = false;
  ASSERT_TRUE(store_->Register(own, false, 2e9, &created).ok());
  EXPECT_EQ(store_->Get("nvidia_h100")->chip_name(), "a user's H100");
}

// Start-up keeps the catalog's chips current and leaves users' chips alone.
class ChipCatalogTest : public ChipStoreTest {
 protected:
  std::unique_ptr<ChipStore> OpenWith(const std::vector<Chip>& catalog, double now) {
    store_.reset();
    auto store = ChipStore::Open((dir_ / "yirage.db").string(), catalog, now);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
};

TEST_F(ChipCatalogTest, ACatalogChangeReachesTheDatabaseAtTheNextStart) {
  auto first = OpenWith({MakeChip("acme_x1"), MakeChip("acme_x2")}, 100);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->catalog_report().added, 2);
  first.reset();
  auto second = OpenWith({MakeChip("acme_x1", 2000), MakeChip("acme_x2")}, 200);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->catalog_report().updated, 1);
  EXPECT_EQ(second->catalog_report().unchanged, 1);
  auto x1 = second->Get("acme_x1");
  ASSERT_TRUE(x1.ok()) << x1.status();
  EXPECT_DOUBLE_EQ(x1->memory().bandwidth_gbps(), 2000);
  EXPECT_DOUBLE_EQ(x1->created_unix(), 100);
  EXPECT_DOUBLE_EQ(x1->updated_unix(), 200);
  // A chip the catalog drops stays (a worker may name it).
  second.reset();
  auto third = OpenWith({MakeChip("acme_x1", 2000)}, 300);
  ASSERT_NE(third, nullptr);
  EXPECT_TRUE(third->Get("acme_x2").ok());
}

TEST_F(ChipCatalogTest, AUsersChipOfACatalogIdIsNeverOverwritten) {
  auto store = OpenWith({MakeChip("acme_x1")}, 100);
  ASSERT_NE(store, nullptr);
  bool created = true;
  ASSERT_TRUE(store->Register(MakeChip("acme_x1", 3000), true, 110, &created).ok());
  EXPECT_FALSE(created);
  store.reset();
  store = OpenWith({MakeChip("acme_x1", 2000)}, 200);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->catalog_report().user_kept, 1);
  EXPECT_DOUBLE_EQ(store->Get("acme_x1")->memory().bandwidth_gbps(), 3000);
}

TEST_F(ChipCatalogTest, ADeletedCatalogChipStaysDeletedUntilRegisteredAgain) {
  auto store = OpenWith({MakeChip("acme_x1")}, 100);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Delete("acme_x1", 110).ok());
  store.reset();
  store = OpenWith({MakeChip("acme_x1")}, 200);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->catalog_report().deleted_kept, 1);
  EXPECT_EQ(store->Get("acme_x1").status().code(), absl::StatusCode::kNotFound);
  // Registering the id again ends the deletion: the chip is the user's now,
  // and deleting that one lets the catalog's come back.
  bool created = false;
  ASSERT_TRUE(store->Register(MakeChip("acme_x1", 4000), false, 210, &created).ok());
  EXPECT_TRUE(created);
  store.reset();
  store = OpenWith({MakeChip("acme_x1")}, 300);
  ASSERT_NE(store, nullptr);
  EXPECT_DOUBLE_EQ(store->Get("acme_x1")->memory().bandwidth_gbps(), 4000);
  ASSERT_TRUE(store->Delete("acme_x1", 310).ok());
  store.reset();
  store = OpenWith({MakeChip("acme_x1")}, 400);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->catalog_report().added, 1);
  EXPECT_DOUBLE_EQ(store->Get("acme_x1")->memory().bandwidth_gbps(), 1000);
}

TEST_F(ChipCatalogTest, ADatabaseSeededByVersionTwoKnowsWhichChipsAreTheCatalogs) {
  store_.reset();
  const std::string path = (dir_ / "old.db").string();
  {
    // A database at version 4, its chips written as version 2 used to:
    // the catalog's marked metadata.builtin, and one a user registered.
    auto migrations = SchemaMigrations();
    migrations.resize(4);
    auto db = Database::Open(path, migrations);
    ASSERT_TRUE(db.ok()) << db.status();
    Chip old_builtin = MakeChip("acme_x1");
    (*old_builtin.mutable_metadata())["builtin"] = "true";
    for (const Chip& chip : {old_builtin, MakeChip("acme_x2")}) {
      auto s = (*db)->Prepare(
          "INSERT INTO chips (chip_id, vendor, backend, category, body, created, updated) "
          "VALUES (?, 'other', 'mlir', 'dsa', ?, 50, 50)");
      ASSERT_TRUE(s.ok()) << s.status();
      s->Bind(1, chip.chip_id()).Bind(2, core::ChipToJson(chip).dump());
      ASSERT_TRUE(s->Run().ok());
    }
  }
  auto store = ChipStore::Open(path, {MakeChip("acme_x1", 2000), MakeChip("acme_x2", 2000)}, 100);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->catalog_report().updated, 1);
  EXPECT_EQ((*store)->catalog_report().user_kept, 1);
  EXPECT_DOUBLE_EQ((*store)->Get("acme_x1")->memory().bandwidth_gbps(), 2000);
  EXPECT_DOUBLE_EQ((*store)->Get("acme_x2")->memory().bandwidth_gbps(), 1000);
}

TEST_F(ChipCatalogTest, AnInvalidCatalogChipOpensNothing) {
  Chip bad = MakeChip("acme_bad");
  bad.mutable_memory()->set_bandwidth_gbps(-1);
  store_.reset();
  auto store = ChipStore::Open((dir_ / "yirage.db").string(), {MakeChip("acme_x1"), bad}, 100);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("acme_bad"));
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
  // A WorkerStore on the same file sees the same schema (workers.chip_id).
  auto jobs = WorkerStore::Open((dir_ / "yirage.db").string(), WorkerStoreOptions());
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  yirage::v1::SynchronizeRequest sync;
  sync.set_worker_id("w1");
  sync.set_backend("cpu");
  ASSERT_TRUE((*jobs)->Upsert(sync, 200).ok());
  ASSERT_TRUE((*jobs)->SetChip("w1", "acme_x1").ok());
  auto workers = (*jobs)->List(200);
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
