#include "server/database.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/test_dir.h"

namespace yirage::server {
namespace {

std::unique_ptr<Database> OpenTestDatabase(const std::string& file) {
  auto db = Database::Open((FreshTestDir("yirage_db") / file).string(),
                           {{"CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"}});
  EXPECT_TRUE(db.ok()) << db.status();
  return db.ok() ? std::move(*db) : nullptr;
}

// A cached statement comes back reset, without the last use's bindings or
// row, and a nested use of the same SQL gets its own statement.
TEST(DatabaseTest, CachedStatementsAreResetAndNestedUsesAreSeparate) {
  auto db = OpenTestDatabase("cache.db");
  ASSERT_NE(db, nullptr);
  const char* insert = "INSERT INTO t (k, v) VALUES (?, ?)";
  for (int k = 1; k <= 3; ++k) {
    auto s = db->Prepare(insert);
    ASSERT_TRUE(s.ok()) << s.status();
    s->Bind(1, static_cast<int64_t>(k)).Bind(2, "v" + std::to_string(k));
    ASSERT_TRUE(s->Run().ok());
  }
  const char* select = "SELECT v FROM t WHERE k >= ? ORDER BY k";
  {
    auto outer = db->Prepare(select);
    ASSERT_TRUE(outer.ok());
    outer->Bind(1, int64_t{2});
    auto row = outer->Step();
    ASSERT_TRUE(row.ok() && *row);
    EXPECT_EQ(outer->ColumnText(0), "v2");
    {
      // The same SQL while `outer` is in the middle of its rows.
      auto inner = db->Prepare(select);
      ASSERT_TRUE(inner.ok());
      inner->Bind(1, int64_t{1});
      auto r = inner->Step();
      ASSERT_TRUE(r.ok() && *r);
      EXPECT_EQ(inner->ColumnText(0), "v1");
    }
    row = outer->Step();
    ASSERT_TRUE(row.ok() && *row);
    EXPECT_EQ(outer->ColumnText(0), "v3") << "the nested use did not disturb the outer one";
  }  // gives the cached SELECT back
  auto again = db->Prepare(select);
  ASSERT_TRUE(again.ok());
  // Unbound: NULL, so no row matches; a statement left with the old binding
  // would return v2 and v3.
  auto none = again->Step();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
}

// Two connections writing at once: the busy handler waits for the other's
// write lock instead of failing with SQLITE_BUSY.
TEST(DatabaseTest, ConcurrentWritersOnTwoConnectionsBothSucceed) {
  const std::string path = (FreshTestDir("yirage_db") / "busy.db").string();
  const std::vector<std::vector<std::string>> schema = {
      {"CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"}};
  auto a = Database::Open(path, schema);
  auto b = Database::Open(path, schema);
  ASSERT_TRUE(a.ok() && b.ok());
  auto write = [](Database* db, int first) {
    for (int k = first; k < first + 200; ++k) {
      Transaction tx(db);
      ASSERT_TRUE(tx.status().ok()) << tx.status();
      auto s = db->Prepare("INSERT INTO t (k, v) VALUES (?, 'x')");
      ASSERT_TRUE(s.ok());
      s->Bind(1, static_cast<int64_t>(k));
      ASSERT_TRUE(s->Run().ok());
      ASSERT_TRUE(tx.Commit().ok());
    }
  };
  std::thread ta(write, a->get(), 0), tb(write, b->get(), 1000);
  ta.join();
  tb.join();
  auto count = (*a)->Prepare("SELECT COUNT(*) FROM t");
  ASSERT_TRUE(count.ok());
  ASSERT_TRUE(*count->Step());
  EXPECT_EQ(count->ColumnInt(0), 400);
}

// A write outside a transaction, or BEGIN IMMEDIATE, from a read left
// open on the same connection is refused by name: SQLite could not wait
// for the write lock there and would fail whenever another connection
// writes. Once the read is reset, both go through.
TEST(DatabaseTest, WritesFromAnOpenReadAreRefused) {
  auto db = OpenTestDatabase("open_read.db");
  ASSERT_NE(db, nullptr);
  ASSERT_TRUE(db->Exec("INSERT INTO t (k, v) VALUES (1, 'a'), (2, 'b')").ok());
  auto read = db->Prepare("SELECT v FROM t ORDER BY k");
  ASSERT_TRUE(read.ok());
  auto row = read->Step();
  ASSERT_TRUE(row.ok() && *row);
  {
    auto write = db->Prepare("UPDATE t SET v='c' WHERE k=2");
    ASSERT_TRUE(write.ok());
    absl::Status s = write->Run();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("while a read of this connection is open (SELECT v FROM t"),
              std::string::npos)
        << s;
    Transaction tx(db.get());
    EXPECT_FALSE(tx.status().ok());
    EXPECT_NE(tx.status().message().find("BEGIN IMMEDIATE while a read"), std::string::npos)
        << tx.status();
  }
  // A read of its own (the statement mid-rows) and reads from an open read
  // are fine.
  auto other = db->Prepare("SELECT COUNT(*) FROM t");
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(*other->Step());
  EXPECT_EQ(other->ColumnInt(0), 2);
  other->Reset();
  read->Reset();
  auto write = db->Prepare("UPDATE t SET v='c' WHERE k=2");
  ASSERT_TRUE(write.ok());
  EXPECT_TRUE(write->Run().ok());
  Transaction tx(db.get());
  ASSERT_TRUE(tx.status().ok()) << tx.status();
  // Inside a transaction the write lock is held: reads may stay open.
  auto in_tx = db->Prepare("SELECT v FROM t ORDER BY k");
  ASSERT_TRUE(in_tx.ok());
  ASSERT_TRUE(*in_tx->Step());
  auto insert = db->Prepare("INSERT INTO t (k, v) VALUES (3, 'd')");
  ASSERT_TRUE(insert.ok());
  EXPECT_TRUE(insert->Run().ok());
  in_tx->Reset();
  EXPECT_TRUE(tx.Commit().ok());
}

// One gate a file: the same for two spellings of one path, another for
// another file; a held gate keeps a second writer out until it is left,
// and a writer that waits past its timeout is told so.
TEST(DatabaseTest, WriteGatesAreOneAFileAndQueueWriters) {
  const auto dir = FreshTestDir("yirage_db");
  const std::shared_ptr<WriteGate> a = WriteGate::ForFile((dir / "g.db").string());
  EXPECT_EQ(a, WriteGate::ForFile((dir / "." / "g.db").string()));
  EXPECT_NE(a, WriteGate::ForFile((dir / "other.db").string()));
  ASSERT_TRUE(a->Enter(absl::Seconds(1)));
  EXPECT_FALSE(a->Enter(absl::Milliseconds(20))) << "entered a held gate";
  std::atomic<bool> entered{false};
  std::thread second([&] {
    entered = a->Enter(absl::Seconds(30));
    if (entered) a->Leave();
  });
  a->Leave();
  second.join();
  EXPECT_TRUE(entered) << "a writer waiting for the gate got it when it was left";
}

// A ReadTransaction reads one snapshot: another connection's write
// committed meanwhile goes through (the reader holds no write lock) and is
// seen only once the read transaction is over.
TEST(DatabaseTest, AReadTransactionReadsOneSnapshot) {
  const std::string path = (FreshTestDir("yirage_db") / "snapshot.db").string();
  const std::vector<std::vector<std::string>> schema = {
      {"CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT NOT NULL)"}};
  auto writer = Database::Open(path, schema);
  auto reader = Database::Open(path, schema);
  ASSERT_TRUE(writer.ok() && reader.ok());
  auto count = [&]() -> int64_t {
    auto s = (*reader)->Prepare("SELECT COUNT(*) FROM t");
    EXPECT_TRUE(s.ok()) << s.status();
    auto row = s->Step();
    EXPECT_TRUE(row.ok() && *row);
    return s->ColumnInt(0);
  };
  ASSERT_TRUE((*writer)->Exec("INSERT INTO t (k, v) VALUES (1, 'a')").ok());
  {
    ReadTransaction snapshot(reader->get());
    ASSERT_TRUE(snapshot.status().ok()) << snapshot.status();
    EXPECT_EQ(count(), 1);
    ASSERT_TRUE((*writer)->Exec("INSERT INTO t (k, v) VALUES (2, 'b')").ok());
    EXPECT_EQ(count(), 1) << "the snapshot of the transaction's first read";
  }
  EXPECT_EQ(count(), 2);
}

}  // namespace
}  // namespace yirage::server
