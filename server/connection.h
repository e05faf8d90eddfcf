// One SQLite connection that several stores of a database file use in turn.
#ifndef YIRAGE_SERVER_CONNECTION_H_
#define YIRAGE_SERVER_CONNECTION_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/database.h"
#include "server/group_commit.h"

namespace yirage::server {

// A connection, the lock that guards it, and the group commit of its
// writes. The stores that write on every worker call (WorkerStore,
// JobStore, LeaseStore) share one in the server: in WAL mode SQLite empties a connection's whole
// page cache whenever another connection has committed, so two connections writing in turn each
// read every page again from the file, inside their write transactions; on one connection the pages
// stay cached, and the stores' writes can share one group commit. The cost is that the stores'
// calls no longer run at the same time (they would mostly wait for SQLite's one writer anyway).
// Thread-safe: `mu` guards `db`.
struct Connection {
  // Opens the database at `path` (Database::Open, the schema's migrations);
  // `name` labels its transactions (the `store` of the transaction metric).
  static absl::StatusOr<std::shared_ptr<Connection>> Open(const std::string& path,
                                                          const std::string& name);

  std::string path;  // the database file's
  absl::Mutex mu;
  std::unique_ptr<Database> db ABSL_GUARDED_BY(mu);
  GroupCommit group;
};

// The connection's database, for a store's constructor to keep (the store
// then uses it only with `connection.mu` held). The pointer stays valid as
// long as the connection.
inline Database* DatabaseOf(Connection& connection) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  return connection.db.get();
}

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_CONNECTION_H_
