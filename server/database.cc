#include "server/database.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "spdlog/spdlog.h"

namespace yirage::server {
namespace {

absl::Status SqliteError(sqlite3* db, std::string_view what) {
  return absl::InternalError(absl::StrCat("sqlite: ", std::string(what), ": ", sqlite3_errmsg(db)));
}

// Waits for another connection's write lock. SQLite's default handler
// sleeps in steps of milliseconds, far longer than our transactions hold
// the lock; this one yields, then sleeps briefly, and gives up after the
// same 5 s.
int BusyWait(void*, int count) {
  using Clock = std::chrono::steady_clock;
  thread_local Clock::time_point start;
  if (count == 0) start = Clock::now();
  if (Clock::now() - start > std::chrono::seconds(5)) return 0;
  if (count < 32) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(500, 10 * (count - 31))));
  }
  return 1;
}

// How long a writer waits for the gate before it goes on to SQLite's busy
// handler: the busy handler's own limit, so that a writer waiting on
// another store's lock while holding the gate (a bug) still fails in
// bounded time.
constexpr absl::Duration kWriteGateTimeout = absl::Seconds(5);

}  // namespace

bool WriteGate::Enter(absl::Duration timeout) {
  auto free = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !held_; };
  // The mutex is held on return either way; the gate only if it came free.
  const bool came = mu_.LockWhenWithTimeout(absl::Condition(&free), timeout);
  if (came) held_ = true;
  mu_.Unlock();
  return came;
}

void WriteGate::Leave() {
  absl::MutexLock lock(&mu_);
  held_ = false;
}

std::shared_ptr<WriteGate> WriteGate::ForFile(const std::string& path) {
  static absl::Mutex registry_mu(absl::kConstInit);
  static auto* registry = new std::map<std::string, std::weak_ptr<WriteGate>>();
  std::error_code error;
  std::string key = std::filesystem::weakly_canonical(path, error).string();
  if (error) key = path;
  absl::MutexLock lock(&registry_mu);
  std::shared_ptr<WriteGate> gate = (*registry)[key].lock();
  if (gate == nullptr) {
    gate = std::make_shared<WriteGate>();
    (*registry)[key] = gate;
  }
  return gate;
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(
    const std::string& path, const std::vector<std::vector<std::string>>& migrations,
    const std::string& name) {
  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = raw ? sqlite3_errmsg(raw) : "out of memory";
    if (raw) sqlite3_close(raw);
    return absl::UnavailableError(absl::StrCat("cannot open database '", path, "': ", message));
  }
  std::unique_ptr<Database> db(new Database(raw, name, WriteGate::ForFile(path)));
  sqlite3_busy_handler(raw, BusyWait, nullptr);
  // WAL: readers never block the writer; synchronous=NORMAL is durable
  // against process crashes, which is what we promise. No checkpoint
  // inside a commit (it would run under the write lock that every other
  // write waits for): the scheduler's maintenance runs them
  // (LeaseStore::Checkpoint), and SQLite when the last connection closes.
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
                             "PRAGMA foreign_keys=ON", "PRAGMA wal_autocheckpoint=0"}) {
    if (auto s = db->Exec(pragma); !s.ok()) return s;
  }
  int version = db->UserVersion();
  if (version > static_cast<int>(migrations.size())) {
    return absl::FailedPreconditionError(absl::StrCat("database '", path, "' has schema version ",
                                                      version, " but this build knows only ",
                                                      migrations.size(), "; refusing to touch it"));
  }
  for (int v = version; v < static_cast<int>(migrations.size()); ++v) {
    Transaction tx(db.get());
    if (!tx.status().ok()) return tx.status();
    for (const std::string& sql : migrations[v]) {
      if (auto s = db->Exec(sql); !s.ok()) {
        return absl::InternalError(
            absl::StrCat("migration to version ", v + 1, ": ", std::string(s.message())));
      }
    }
    if (auto s = db->Exec(absl::StrCat("PRAGMA user_version=", v + 1)); !s.ok()) return s;
    if (auto s = tx.Commit(); !s.ok()) return s;
  }
  return db;
}

Database::~Database() {
  for (auto& [sql, entry] : cache_) sqlite3_finalize(entry.stmt);
  sqlite3_close(db_);
}

absl::Status Database::Exec(std::string_view sql) {
  std::string text(sql);
  char* error = nullptr;
  if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return absl::InternalError(absl::StrCat("sqlite: ", message, " in: ", text.substr(0, 120)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Statement> Database::Prepare(std::string_view sql) {
  auto it = cache_.find(std::string(sql));
  if (it != cache_.end() && !it->second.in_use) {
    it->second.in_use = true;
    return Statement(this, it->second.stmt, &it->second);
  }
  const bool cache = it == cache_.end() && cache_.size() < kMaxCachedStatements;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                         cache ? SQLITE_PREPARE_PERSISTENT : 0, &stmt, nullptr) != SQLITE_OK) {
    return SqliteError(db_, absl::StrCat("prepare ", std::string(sql.substr(0, 120))));
  }
  if (!cache) return Statement(db_, stmt, gate_.get());
  Cached& entry = cache_[std::string(sql)];
  entry.stmt = stmt;
  entry.in_use = true;
  return Statement(this, stmt, &entry);
}

void Database::Return(sqlite3_stmt* stmt, Cached* entry) {
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  entry->in_use = false;
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Database::Changes() const { return sqlite3_changes(db_); }

int Database::UserVersion() {
  auto stmt = Prepare("PRAGMA user_version");
  if (!stmt.ok()) return 0;
  auto row = stmt->Step();
  return (row.ok() && *row) ? static_cast<int>(stmt->ColumnInt(0)) : 0;
}

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_),
      stmt_(other.stmt_),
      owner_(other.owner_),
      entry_(other.entry_),
      gate_(other.gate_) {
  other.stmt_ = nullptr;
}

Statement::~Statement() {
  if (stmt_ == nullptr) return;
  if (owner_ != nullptr) {
    owner_->Return(stmt_, static_cast<Database::Cached*>(entry_));
  } else {
    sqlite3_finalize(stmt_);
  }
}

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Statement& Statement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Statement& Statement::Bind(int index, std::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindBlob(int index, std::string_view bytes) {
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

absl::StatusOr<int> Statement::Count() {
  YIRAGE_ASSIGN_OR_RETURN(bool row, Step());
  return row ? static_cast<int>(ColumnInt(0)) : 0;
}

absl::StatusOr<std::map<std::string, int>> Statement::CountsByKey() {
  std::map<std::string, int> out;
  for (;;) {
    YIRAGE_ASSIGN_OR_RETURN(bool row, Step());
    if (!row) return out;
    out[ColumnText(0)] = static_cast<int>(ColumnInt(1));
  }
}

namespace {

// The SQL of a statement of `db` other than `except` that is part-way
// through its rows (stepped, not yet reset), or nullptr.
const char* OpenReadOf(sqlite3* db, sqlite3_stmt* except) {
  for (sqlite3_stmt* s = sqlite3_next_stmt(db, nullptr); s != nullptr;
       s = sqlite3_next_stmt(db, s)) {
    if (s != except && sqlite3_stmt_busy(s)) return sqlite3_sql(s);
  }
  return nullptr;
}

absl::Status OpenReadError(const char* open_sql, const std::string& what) {
  return absl::InternalError(
      absl::StrCat("sqlite: ", what, " while a read of this connection is open (",
                   std::string(open_sql).substr(0, 80),
                   " ...): SQLite cannot wait for the write lock from an open read and fails at "
                   "once when another connection holds it; reset the read first"));
}

}  // namespace

absl::StatusOr<bool> Statement::Step() {
  // A write outside a transaction takes SQLite's write lock in its first
  // step. From an open read on the same connection it cannot wait for it
  // (busy handlers are not called for a lock upgrade) and fails with
  // "database is locked" whenever another connection writes: a rule every
  // caller must keep, checked here so that tests catch who breaks it.
  if (!sqlite3_stmt_busy(stmt_) && !sqlite3_stmt_readonly(stmt_) && sqlite3_get_autocommit(db_)) {
    if (const char* open = OpenReadOf(db_, stmt_); open != nullptr) {
      const char* sql = sqlite3_sql(stmt_);
      return OpenReadError(
          open, absl::StrCat("write (", std::string(sql ? sql : "").substr(0, 60), " ...)"));
    }
  }
  // An autocommit write takes and releases SQLite's write lock within its
  // first step: the file's gate queues it with the other writers.
  WriteGate* gate = nullptr;
  if (gate_ != nullptr && !sqlite3_stmt_busy(stmt_) && !sqlite3_stmt_readonly(stmt_) &&
      sqlite3_get_autocommit(db_) && gate_->Enter(kWriteGateTimeout)) {
    gate = gate_;
  }
  int rc = sqlite3_step(stmt_);
  if (gate != nullptr) gate->Leave();
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  const char* sql = sqlite3_sql(stmt_);
  return SqliteError(db_,
                     absl::StrCat("step (", std::string(sql ? sql : "").substr(0, 80), " ...)"));
}

absl::Status Statement::Run() {
  for (;;) {
    auto row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::ColumnInt(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::ColumnDouble(int column) const { return sqlite3_column_double(stmt_, column); }
std::string Statement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return text
             ? std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_, column))
             : std::string();
}
std::string Statement::ColumnBlob(int column) const {
  const void* blob = sqlite3_column_blob(stmt_, column);
  return blob ? std::string(static_cast<const char*>(blob), sqlite3_column_bytes(stmt_, column))
              : std::string();
}
bool Statement::ColumnIsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

namespace {

absl::Mutex transaction_observer_mu(absl::kConstInit);
TransactionObserver* transaction_observer ABSL_GUARDED_BY(transaction_observer_mu) = nullptr;

}  // namespace

void SetTransactionObserver(TransactionObserver observer) {
  absl::MutexLock lock(&transaction_observer_mu);
  delete transaction_observer;
  transaction_observer = observer ? new TransactionObserver(std::move(observer)) : nullptr;
}

Transaction::Transaction(Database* db) : db_(db), start_(std::chrono::steady_clock::now()) {
  if (!sqlite3_get_autocommit(db_->db_)) {
    // Inside another transaction (a GroupCommit's): a savepoint, which
    // rolls back alone and commits with the outer transaction.
    nested_ = true;
    begin_status_ = db_->Exec("SAVEPOINT nested");
    return;
  }
  // BEGIN IMMEDIATE from an open read is a lock upgrade (see Step).
  if (const char* open = OpenReadOf(db_->db_, nullptr); open != nullptr) {
    begin_status_ = OpenReadError(open, "BEGIN IMMEDIATE");
    return;
  }
  gated_ = db_->gate_->Enter(kWriteGateTimeout);
  begin_status_ = db_->Exec("BEGIN IMMEDIATE");
  if (!begin_status_.ok() && gated_) {
    db_->gate_->Leave();
    gated_ = false;
  }
}

Transaction::~Transaction() {
  if (begin_status_.ok() && !done_) {
    if (nested_) {
      db_->Exec("ROLLBACK TO nested").IgnoreError();
      db_->Exec("RELEASE nested").IgnoreError();
    } else {
      db_->Exec("ROLLBACK").IgnoreError();
    }
  }
  Finish();
}

absl::Status Transaction::Commit() {
  if (!begin_status_.ok()) return begin_status_;
  done_ = true;
  absl::Status status = db_->Exec(nested_ ? "RELEASE nested" : "COMMIT");
  if (!status.ok() && !nested_) db_->Exec("ROLLBACK").IgnoreError();  // none left open
  Finish();
  return status;
}

void Transaction::Finish() {
  if (gated_) {
    db_->gate_->Leave();
    gated_ = false;
  }
  if (reported_ || !begin_status_.ok() || nested_) return;
  reported_ = true;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  absl::MutexLock lock(&transaction_observer_mu);
  if (transaction_observer != nullptr) (*transaction_observer)(db_->name(), seconds);
}

ReadTransaction::ReadTransaction(Database* db) : db_(db), begin_status_(db->Exec("BEGIN")) {}

ReadTransaction::~ReadTransaction() {
  // Ending a read transaction cannot lose anything; its error (none
  // expected) is only logged.
  if (!begin_status_.ok()) return;
  if (absl::Status s = db_->Exec("COMMIT"); !s.ok()) {
    spdlog::warn("ending a read transaction: {}", std::string(s.message()));
  }
}

}  // namespace yirage::server
