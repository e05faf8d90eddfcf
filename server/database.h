// A thin SQLite wrapper: one connection, WAL mode, schema migrations keyed on
// PRAGMA user_version, prepared statements with typed binds.
#ifndef YIRAGE_SERVER_DATABASE_H_
#define YIRAGE_SERVER_DATABASE_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace yirage::server {

class Statement;

// Not thread-safe: callers serialize access (JobStore holds a mutex).
class Database {
 public:
  // Opens (creating if needed) the database at `path`, turns on WAL and
  // foreign keys, and applies every migration newer than its user_version.
  // Each migration is a list of SQL statements run in one transaction.
  static absl::StatusOr<std::unique_ptr<Database>> Open(
      const std::string& path, const std::vector<std::vector<std::string>>& migrations);
  ~Database();

  absl::Status Exec(std::string_view sql);
  absl::StatusOr<Statement> Prepare(std::string_view sql);
  int64_t LastInsertRowId() const;
  int Changes() const;
  int UserVersion();

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

// A prepared statement. Bind indices are 1-based as in SQLite.
class Statement {
 public:
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
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
};

// Scoped transaction: BEGIN IMMEDIATE on construction, ROLLBACK unless
// Commit() succeeded.
class Transaction {
 public:
  explicit Transaction(Database* db);
  ~Transaction();
  absl::Status status() const { return begin_status_; }
  absl::Status Commit();

 private:
  Database* db_;
  absl::Status begin_status_;
  bool done_ = false;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_DATABASE_H_
