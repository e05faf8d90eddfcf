// Group commit: the writes of concurrent callers in one SQLite transaction.
#ifndef YIRAGE_SERVER_GROUP_COMMIT_H_
#define YIRAGE_SERVER_GROUP_COMMIT_H_

#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "server/database.h"

namespace yirage::server {

// Runs the write operations that threads hand in at the same time in one
// write transaction, so that a busy store pays for one BEGIN, one COMMIT
// and one write of each changed page for many operations. The first caller
// to find no group under way leads: it takes the store's lock, begins the
// transaction, runs its own operation and every one queued meanwhile (up to
// kMaxOperations), each in a savepoint of its own, commits, and wakes their
// callers. An operation that fails rolls back its savepoint alone; a
// failed commit fails every operation of its group. Each caller returns
// only once its writes are durable (or have failed), as with a transaction
// of its own.
// Thread-safe.
class GroupCommit {
 public:
  static constexpr int kMaxOperations = 64;

  // Runs `op` with `*db_mu` held, inside a transaction of `db` (a
  // Transaction that `op` opens is a savepoint in it), and returns `op`'s
  // status, or the commit's error when the group could not commit.
  // `op` runs on this thread or on the leading caller's; it must not take
  // `*db_mu`.
  // REQUIRES: `*db_mu` guards `db`, and every caller of this GroupCommit
  // passes the same two; `*db_mu` not held by the caller.
  absl::Status Run(absl::Mutex* db_mu, Database* db, absl::FunctionRef<absl::Status()> op)
      ABSL_LOCKS_EXCLUDED(mu_, db_mu);

 private:
  struct Operation {
    absl::FunctionRef<absl::Status()> op;
    absl::Status status;
    bool done = false;
  };
  // Runs groups until the queue is empty.
  void Lead(absl::Mutex* db_mu, Database* db) ABSL_LOCKS_EXCLUDED(mu_, db_mu);

  absl::Mutex mu_;
  std::deque<Operation*> queue_ ABSL_GUARDED_BY(mu_);
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_GROUP_COMMIT_H_
