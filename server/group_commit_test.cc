#include "server/group_commit.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/test_dir.h"

namespace yirage::server {
namespace {

int64_t CountRows(Database* db, const std::string& where) {
  auto s = db->Prepare("SELECT COUNT(*) FROM t WHERE " + where);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok() || !*s->Step()) return -1;
  return s->ColumnInt(0);
}

// Many threads at once: every operation that succeeds is stored, each one
// that fails (after a write of its own, inside a Transaction of its own or
// not) leaves nothing, the others of its group keep theirs, and every
// caller gets its own operation's status.
TEST(GroupCommitTest, EachOperationStandsOrFallsAlone) {
  auto db = Database::Open((FreshTestDir("yirage_group") / "g.db").string(),
                           {{"CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"}});
  ASSERT_TRUE(db.ok()) << db.status();
  absl::Mutex mu;
  GroupCommit group;
  constexpr int kThreads = 8, kEach = 50;
  std::atomic<int> wrong_status{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const int64_t k = t * 1000 + i;
        const bool fail = i % 5 == 0;
        const bool own_transaction = i % 2 == 0;
        absl::Status s = group.Run(&mu, db->get(), [&]() -> absl::Status {
          std::unique_ptr<Transaction> tx;
          if (own_transaction) tx = std::make_unique<Transaction>(db->get());
          auto insert = (*db)->Prepare("INSERT INTO t (k, v) VALUES (?, ?)");
          if (!insert.ok()) return insert.status();
          insert->Bind(1, k).Bind(2, fail ? "failed" : "ok");
          if (absl::Status r = insert->Run(); !r.ok()) return r;
          if (fail) return absl::AbortedError(absl::StrCat("op ", k));
          return tx != nullptr ? tx->Commit() : absl::OkStatus();
        });
        if (fail ? s.message() != absl::StrCat("op ", k) : !s.ok()) ++wrong_status;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong_status.load(), 0);
  EXPECT_EQ(CountRows(db->get(), "v = 'ok'"), kThreads * kEach * 4 / 5);
  EXPECT_EQ(CountRows(db->get(), "v = 'failed'"), 0);
}

// A group that cannot begin (here: a read left open on the connection
// refuses BEGIN) fails its operation with that error and runs nothing; the
// next group, once the read is reset, goes through.
TEST(GroupCommitTest, AGroupThatCannotBeginFailsItsOperations) {
  auto db = Database::Open((FreshTestDir("yirage_group") / "b.db").string(),
                           {{"CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"}});
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Exec("INSERT INTO t (k, v) VALUES (1, 'a')").ok());
  auto open_read = (*db)->Prepare("SELECT v FROM t");
  ASSERT_TRUE(open_read.ok());
  ASSERT_TRUE(*open_read->Step());
  absl::Mutex mu;
  GroupCommit group;
  bool ran = false;
  absl::Status s = group.Run(&mu, db->get(), [&] {
    ran = true;
    return absl::OkStatus();
  });
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("BEGIN IMMEDIATE while a read"), std::string::npos) << s;
  EXPECT_FALSE(ran);
  open_read->Reset();
  EXPECT_TRUE(group.Run(&mu, db->get(), [] { return absl::OkStatus(); }).ok());
}

}  // namespace
}  // namespace yirage::server
