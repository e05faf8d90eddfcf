#include "server/group_commit.h"

#include <vector>

namespace yirage::server {

absl::Status GroupCommit::Run(absl::Mutex* db_mu, Database* db,
                              absl::FunctionRef<absl::Status()> op) {
  Operation operation{op, absl::OkStatus(), false};
  absl::MutexLock lock(&mu_);
  queue_.push_back(&operation);
  for (;;) {
    if (operation.done) return operation.status;
    if (!leading_) {
      leading_ = true;
      mu_.Unlock();
      Lead(db_mu, db);
      mu_.Lock();
      leading_ = false;
      continue;
    }
    // Woken when the leader marks this operation done or stops leading
    // (then this caller leads the rest).
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return operation.done || !leading_; };
    mu_.Await(absl::Condition(&ready));
  }
}

void GroupCommit::Lead(absl::Mutex* db_mu, Database* db) {
  for (;;) {
    std::vector<Operation*> group;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty()) return;
    }
    absl::Status commit;
    {
      absl::MutexLock db_lock(db_mu);
      Transaction tx(db);
      commit = tx.status();
      for (;;) {
        Operation* next = nullptr;
        {
          absl::MutexLock lock(&mu_);
          if (queue_.empty() || static_cast<int>(group.size()) >= kMaxOperations) break;
          next = queue_.front();
          queue_.pop_front();
        }
        group.push_back(next);
        if (!commit.ok()) continue;  // BEGIN failed: each fails with it
        // Its own savepoint: an operation that fails half-way leaves the
        // group's other writes as they were.
        Transaction savepoint(db);
        next->status = savepoint.status();
        if (next->status.ok()) next->status = next->op();
        if (next->status.ok()) next->status = savepoint.Commit();
      }
      if (commit.ok()) commit = tx.Commit();
    }
    absl::MutexLock lock(&mu_);
    for (Operation* o : group) {
      if (!commit.ok()) o->status = commit;
      o->done = true;
    }
  }
}

}  // namespace yirage::server
