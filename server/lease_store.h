// Leased batches: the worker protocol's half of the scheduler's durable
// state (server/job_store.h holds the jobs and their candidates,
// server/worker_store.h the workers). A batch is a few PENDING candidates of
// one job handed to one worker until its lease expires; the worker renews
// the lease as it goes and reports each result, which is stored only while
// the candidate is still in that batch. Every change is one transaction (or
// a savepoint of a group commit) on the store's connection, in the server
// the one it shares with the worker and job stores (server/connection.h),
// so a result is acknowledged only once it is durable and leases survive
// restarts (they expire if their worker is gone).
#ifndef YIRAGE_SERVER_LEASE_STORE_H_
#define YIRAGE_SERVER_LEASE_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/connection.h"
#include "server/database.h"
#include "server/group_commit.h"
#include "yirage/v1/job.pb.h"
#include "yirage/v1/worker.pb.h"

namespace yirage::server {

struct LeaseStoreOptions {
  int batch_size = 4;         // candidates per leased batch
  double lease_seconds = 30;  // a batch not heard of for this long is taken back
  int max_attempts = 3;       // a candidate that killed this many workers fails
};

struct RecordReport {
  std::vector<int64_t> acknowledged;  // stored now or earlier
  std::map<yirage::v1::CandidateStatus, int> newly_stored;
  std::string job_id;  // the batch's job ("" when the batch is gone): may be done now
  // The batch is still this worker's, its lease renewed (false: it is
  // finished, expired or cancelled, or there were no results).
  bool still_leased = false;
  // These results completed the batch (it is gone now), which its worker
  // held for this long.
  bool batch_completed = false;
  double batch_held_seconds = 0;
};

// What one pass of lease expiry did (for logs and metrics).
struct ExpiryReport {
  int leases_expired = 0;
  int candidates_requeued = 0;
  int candidates_failed = 0;      // killed their worker too often
  std::vector<std::string> jobs;  // whose candidates changed: may be done now
  // Each expired lease (for metrics).
  struct Lease {
    std::string backend;  // its job's
    std::string worker_id;
    double held_seconds = 0;  // from the lease's start to `now`
    int candidates_failed = 0;
  };
  std::vector<Lease> leases;
};

// Thread-safe: every method takes the mutex of the store's connection.
class LeaseStore {
 public:
  // Opens (creating or migrating) the database at `path` on a connection of
  // its own.
  static absl::StatusOr<std::unique_ptr<LeaseStore>> Open(const std::string& path,
                                                          const LeaseStoreOptions& options);
  // The same on `connection`, which other stores may share
  // (server/connection.h); its checkpoints run on a connection of their own
  // to the same file.
  static absl::StatusOr<std::unique_ptr<LeaseStore>> OnConnection(
      std::shared_ptr<Connection> connection, const LeaseStoreOptions& options);

  // Leases the next batch of pending candidates for a worker of `backend`
  // from the runnable job leased from least recently (then the oldest), so
  // that jobs take turns; the job becomes RUNNING. The batch carries a new
  // secret Batch.lease_token. A job bound to its chip (Job.chip_bound) goes
  // only to workers of that registry chip. A confirmation candidate (JobStore) is never
  // leased to the worker it excludes, nor to a worker of another registry
  // chip than its job's (where both have one), and it is leased past the
  // job's time budget. nullopt when there is no work.
  absl::StatusOr<std::optional<yirage::v1::Batch>> LeaseBatch(const std::string& worker_id,
                                                              const std::string& backend,
                                                              double now);
  // Renews the batch's lease and notes the candidate being evaluated. Returns
  // false when the batch is not (or no longer) this worker's under
  // `lease_token`.
  absl::StatusOr<bool> RenewLease(const std::string& worker_id, const std::string& batch_id,
                                  const std::string& lease_token, int64_t current_candidate,
                                  double now);
  // Stores results of candidates still leased to `batch_id`, each once;
  // results for candidates no longer in that batch are acknowledged but
  // dropped (a retry after a lost reply, or a lease that expired). A batch
  // left with candidates to run has its lease renewed, with
  // `current_candidate` noted, in the same transaction (as RenewLease; the
  // report says so in still_leased). The caller asks the JobStore whether
  // the report's job is done.
  // InvalidArgument, storing nothing, when the batch exists but is not
  // `worker_id`'s under `lease_token`, when a candidate is reported twice,
  // or when a VERIFIED result's time is not finite and positive (its
  // baseline time finite and not negative; 0 when the baseline did not
  // verify).
  absl::StatusOr<RecordReport> RecordResults(
      const std::string& worker_id, const std::string& batch_id, const std::string& lease_token,
      int64_t current_candidate,
      const google::protobuf::RepeatedPtrField<yirage::v1::CandidateResult>& results, double now);
  // Puts the candidates of every batch leased to `worker_id` back in the
  // queue, without blame (the worker says it holds none). Returns how many.
  // With `held_seconds`, adds how long the worker held those batches, up to
  // `now`.
  absl::StatusOr<int> ReleaseWorkerBatches(const std::string& worker_id, double now = 0,
                                           double* held_seconds = nullptr);
  // Expired leases: the candidate that was running when the worker went
  // silent is blamed; if none had started (the worker died computing inputs,
  // the reference or compiling), every candidate of the batch is. A
  // candidate blamed max_attempts times fails; the rest of the batch goes
  // back to the queue.
  absl::StatusOr<ExpiryReport> ExpireLeases(double now);
  // Copies the write-ahead log into the database (a passive checkpoint:
  // it waits for no reader or writer) on a connection of its own, so that
  // no store's work waits for it. The stores' commits never checkpoint
  // (Database::Open); the scheduler's maintenance calls this.
  absl::Status Checkpoint();

 private:
  // A leased batch with its graph, baseline plan and candidates' plans
  // still serialized, as stored.
  struct LeasedBlobs {
    yirage::v1::Batch batch;
    std::string graph, baseline;
    std::vector<std::string> plans;  // one a batch candidate
  };
  // RecordResults' writes, its results checked.
  absl::Status RecordResultsLocked(
      const std::string& worker_id, const std::string& batch_id, const std::string& lease_token,
      int64_t current_candidate,
      const google::protobuf::RepeatedPtrField<yirage::v1::CandidateResult>& results, double now,
      RecordReport* report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<LeasedBlobs>> LeaseBatchLocked(const std::string& worker_id,
                                                              const std::string& backend,
                                                              double now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  enum class Holder { kGone, kThisWorker, kSomeoneElse };
  // Whether `batch_id` is leased to `worker_id` under `lease_token` (the
  // token compared in constant time), to someone else, or gone.
  absl::StatusOr<Holder> BatchHolderLocked(const std::string& batch_id,
                                           const std::string& worker_id,
                                           const std::string& lease_token)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Extends `batch_id`'s lease held by `worker_id` and notes the candidate
  // it runs; false when no such lease exists.
  absl::StatusOr<bool> RenewLocked(const std::string& batch_id, const std::string& worker_id,
                                   int64_t current_candidate, double now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  LeaseStore(std::shared_ptr<Connection> connection, std::unique_ptr<Database> checkpoints,
             const LeaseStoreOptions& options)
      : connection_(std::move(connection)),
        mu_(connection_->mu),
        db_(DatabaseOf(*connection_)),
        group_(connection_->group),
        checkpoint_db_(std::move(checkpoints)),
        options_(options) {}

  const std::shared_ptr<Connection> connection_;
  absl::Mutex& mu_;  // connection_->mu
  Database* const db_ ABSL_GUARDED_BY(mu_);
  GroupCommit& group_;  // RecordResults' and LeaseBatch's writes (connection_->group)
  absl::Mutex checkpoint_mu_;
  std::unique_ptr<Database> checkpoint_db_ ABSL_GUARDED_BY(checkpoint_mu_);
  const LeaseStoreOptions options_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_LEASE_STORE_H_
