// A thin SQLite wrapper: one connection, WAL mode, schema migrations keyed on
// PRAGMA user_version, prepared statements with typed binds.
#ifndef YIRAGE_SERVER_DATABASE_H_
#define YIRAGE_SERVER_DATABASE_H_

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace yirage::server {

class Statement;

// Queues the writers of one database file in this process: the stores'
// connections take it before SQLite's write lock, so that a writer waits
// on a futex and is woken when the last one commits, instead of polling
// the file lock (polling leaves the cores idle between writers and lets
// one connection starve another). Thread-safe.
class WriteGate {
 public:
  // Waits up to `timeout` for the gate; false if it did not come (the
  // caller goes on to SQLite's own busy handling, as without a gate).
  bool Enter(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // REQUIRES: Enter returned true on this gate.
  void Leave() ABSL_LOCKS_EXCLUDED(mu_);

  // The gate of the file at `path` (one a file a process, shared by every
  // connection to it while any holds it).
  static std::shared_ptr<WriteGate> ForFile(const std::string& path);

 private:
  absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
};

// Not thread-safe: callers serialize access (JobStore holds a mutex).
class Database {
 public:
  // Opens (creating if needed) the database at `path`, turns on WAL and
  // foreign keys, and applies every migration newer than its user_version.
  // Each migration is a list of SQL statements run in one transaction.
  // `name` names the store that uses the connection in transaction timings
  // (SetTransactionObserver).
  static absl::StatusOr<std::unique_ptr<Database>> Open(
      const std::string& path, const std::vector<std::vector<std::string>>& migrations,
      const std::string& name = "db");
  ~Database();

  absl::Status Exec(std::string_view sql);
  // Prepared statements are cached by their SQL text (up to
  // kMaxCachedStatements texts) and reset when the Statement is destroyed,
  // so a hot path parses its SQL once. A text already in use (a nested
  // use of the same SQL) gets a fresh, uncached statement.
  absl::StatusOr<Statement> Prepare(std::string_view sql);
  int64_t LastInsertRowId() const;
  int Changes() const;
  int UserVersion();
  const std::string& name() const { return name_; }

 private:
  friend class Statement;
  friend class Transaction;
  static constexpr size_t kMaxCachedStatements = 256;
  struct Cached {
    sqlite3_stmt* stmt = nullptr;
    bool in_use = false;
  };
  Database(sqlite3* db, std::string name, std::shared_ptr<WriteGate> gate)
      : db_(db), name_(std::move(name)), gate_(std::move(gate)) {}
  // Called by a cached Statement's destructor.
  void Return(sqlite3_stmt* stmt, Cached* entry);

  sqlite3* db_;
  const std::string name_;
  const std::shared_ptr<WriteGate> gate_;
  std::unordered_map<std::string, Cached> cache_;
};

// Called with the database's name and the seconds of each write
// transaction (Transaction: from before BEGIN IMMEDIATE, so with the wait
// for SQLite's write lock, to the end of its COMMIT or ROLLBACK). One
// observer a process (the server's metrics); an empty function removes it.
// Thread-safe; the observer is called on the transaction's thread.
using TransactionObserver = std::function<void(const std::string& name, double seconds)>;
void SetTransactionObserver(TransactionObserver observer);

// A prepared statement. Bind indices are 1-based as in SQLite.
class Statement {
 public:
  // `gate`, where given, queues the statement's autocommit writes.
  Statement(sqlite3* db, sqlite3_stmt* stmt, WriteGate* gate = nullptr)
      : db_(db), stmt_(stmt), gate_(gate) {}
  // A statement of `owner`'s cache: given back (reset) instead of finalized.
  Statement(Database* owner, sqlite3_stmt* stmt, void* entry)
      : db_(owner->db_), stmt_(stmt), owner_(owner), entry_(entry), gate_(owner->gate_.get()) {}
  Statement(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view text);
  Statement& BindBlob(int index, std::string_view bytes);
  Statement& BindNull(int index);

  // Advances; returns true while a row is available.
  absl::StatusOr<bool> Step();
  // Steps to the end of a query whose rows are (key text, count), as a
  // GROUP BY gives them: the counts by key.
  absl::StatusOr<std::map<std::string, int>> CountsByKey();
  // The first row's first column of a query such as SELECT COUNT(*), as an
  // int; 0 where there is no row.
  absl::StatusOr<int> Count();
  // Runs to completion (for statements returning no rows).
  absl::Status Run();
  // Makes the statement runnable again with fresh bindings.
  void Reset();

  int64_t ColumnInt(int column) const;
  double ColumnDouble(int column) const;
  std::string ColumnText(int column) const;
  std::string ColumnBlob(int column) const;
  bool ColumnIsNull(int column) const;

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  Database* owner_ = nullptr;  // set for cached statements
  void* entry_ = nullptr;      // the owner's cache entry
  WriteGate* gate_ = nullptr;  // the file's, outliving the statement
};

// Scoped transaction: BEGIN IMMEDIATE on construction, ROLLBACK unless
// Commit() succeeded. Inside another transaction of the connection (a
// GroupCommit's) it is a savepoint: it rolls back alone, and its Commit
// makes its writes part of the outer transaction, durable when that one
// commits.
class Transaction {
 public:
  explicit Transaction(Database* db);
  ~Transaction();
  absl::Status status() const { return begin_status_; }
  absl::Status Commit();

 private:
  // Reports the transaction's time to the observer, once.
  void Finish();

  Database* db_;
  std::chrono::steady_clock::time_point start_;
  absl::Status begin_status_;
  bool done_ = false;
  bool reported_ = false;
  bool gated_ = false;   // holds the file's WriteGate
  bool nested_ = false;  // a savepoint in another transaction
};

// Scoped read transaction: BEGIN (deferred) on construction, COMMIT when it
// goes, so that several queries read one snapshot of the database. For a
// connection that only reads (it takes no write lock, and another
// connection's writes go on meanwhile).
// REQUIRES: no transaction open on the connection; the statements read in
// it are reset (gone) before it goes.
class ReadTransaction {
 public:
  explicit ReadTransaction(Database* db);
  ~ReadTransaction();
  absl::Status status() const { return begin_status_; }

 private:
  Database* db_;
  absl::Status begin_status_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_DATABASE_H_
