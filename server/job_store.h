// Durable state of the scheduler's jobs: jobs, candidates and leased
// batches, in SQLite (the workers are server/worker_store.h's). Every state change is one
// transaction, so a crash of the server at any point loses nothing that was acknowledged: a result
// is acknowledged to a worker only after its transaction committed, and leases survive restarts
// (they simply expire if their worker is gone).
#ifndef YIRAGE_SERVER_JOB_STORE_H_
#define YIRAGE_SERVER_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/tensor.h"
#include "server/database.h"
#include "server/worker_store.h"
#include "yirage/v1/job.pb.h"
#include "yirage/v1/worker.pb.h"

namespace yirage::server {

struct JobStoreOptions {
  int batch_size = 4;         // candidates per leased batch
  double lease_seconds = 30;  // a batch not heard of for this long is taken back
  int max_attempts = 3;       // a candidate that killed this many workers fails
};

// What one maintenance pass did (for logs and metrics).
struct MaintenanceReport {
  int leases_expired = 0;
  int candidates_requeued = 0;
  int candidates_failed = 0;   // killed their worker too often
  int candidates_skipped = 0;  // time budget ran out
  std::vector<std::string> jobs_finished;
};

struct RecordReport {
  std::vector<int64_t> acknowledged;  // stored now or earlier
  std::map<yirage::v1::CandidateStatus, int> newly_stored;
  std::vector<std::string> jobs_finished;
};

// Thread-safe: every method takes the store's mutex (SQLite has one writer).
class JobStore {
 public:
  // `workers` (may be null: no job is then said to be waiting) answers
  // whether a job's backend has connected workers; it must outlive the store.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path,
                                                        const JobStoreOptions& options,
                                                        WorkerStore* workers = nullptr);

  // Stores a new QUEUED job and its candidates in one transaction.
  // REQUIRES: plans non-empty, plans[0] is the baseline.
  absl::StatusOr<std::string> CreateJob(const yirage::v1::SubmitJobRequest& request,
                                        const core::Tolerance& tolerance,
                                        const std::vector<yirage::v1::Plan>& plans,
                                        const yirage::v1::SearchSummary& search, double now);

  // A job read here that still has candidates to evaluate while no worker of
  // its backend is connected (none heard of within worker_timeout_seconds of
  // `now`) carries the message "waiting: no connected worker for backend
  // 'B'". It is computed on every read, never stored, so it clears itself
  // once such a worker connects. The overloads without `now` use the clock.
  absl::StatusOr<yirage::v1::Job> GetJob(const std::string& job_id);
  absl::StatusOr<yirage::v1::Job> GetJob(const std::string& job_id, double now);
  absl::StatusOr<std::vector<yirage::v1::Job>> ListJobs(int limit);
  absl::StatusOr<std::vector<yirage::v1::Job>> ListJobs(int limit, double now);
  absl::StatusOr<std::vector<yirage::v1::Candidate>> ListCandidates(const std::string& job_id);
  // Cancels a QUEUED or RUNNING job: its pending and leased candidates are
  // SKIPPED and its batches withdrawn. FailedPrecondition for a finished job.
  absl::StatusOr<yirage::v1::Job> CancelJob(const std::string& job_id, double now);

  // The fastest VERIFIED candidate of a job, with its generated source, and
  // the job's graph. NotFound if there is none.
  struct BestKernel {
    yirage::v1::Candidate candidate;
    std::string source;
    std::optional<yirage::v1::LaunchManifest> launch;  // as the worker reported it
    yirage::v1::Graph graph;
    std::string backend;
  };
  absl::StatusOr<BestKernel> GetBestKernel(const std::string& job_id);

  // ---- Worker protocol ----
  // Stores results of candidates still leased to `batch_id`; results for
  // candidates no longer in that batch are acknowledged but dropped.
  absl::StatusOr<RecordReport> RecordResults(
      const std::string& worker_id, const std::string& batch_id,
      const google::protobuf::RepeatedPtrField<yirage::v1::CandidateResult>& results, double now);
  // Renews the batch's lease and notes the candidate being evaluated. Returns
  // false when the batch is not (or no longer) this worker's.
  absl::StatusOr<bool> RenewLease(const std::string& worker_id, const std::string& batch_id,
                                  int64_t current_candidate, double now);
  // Leases the next batch of pending candidates for a worker of `backend`,
  // oldest job first. nullopt when there is no work.
  absl::StatusOr<std::optional<yirage::v1::Batch>> LeaseBatch(const std::string& worker_id,
                                                              const std::string& backend,
                                                              double now);
  // Puts the candidates of every batch leased to `worker_id` back in the
  // queue, without blame (the worker says it holds none). Returns how many.
  absl::StatusOr<int> ReleaseWorkerBatches(const std::string& worker_id);
  // Expires leases (blaming the candidate that was running), enforces time
  // budgets and finishes jobs with nothing left to evaluate.
  absl::StatusOr<MaintenanceReport> Maintain(double now);

  absl::StatusOr<std::map<yirage::v1::JobState, int>> CountJobsByState();

 private:
  JobStore(std::unique_ptr<Database> db, const JobStoreOptions& options, WorkerStore* workers)
      : db_(std::move(db)), options_(options), workers_(workers) {}

  absl::StatusOr<yirage::v1::Job> LoadJobLocked(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the "waiting: no connected worker ..." message (see GetJob) on an
  // unfinished job with work left and no connected worker of its backend.
  absl::Status AnnotateWaitingLocked(yirage::v1::Job* job, double now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Maintain's passes. The first two run in Maintain's transaction and add
  // the jobs they change to *touched_jobs.
  // Expired leases: the candidate that was running is blamed (failed after
  // max_attempts), the rest of the batch goes back to the queue.
  absl::Status ExpireLeasesLocked(double now, MaintenanceReport* report,
                                  std::vector<std::string>* touched_jobs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Jobs past their time budget: pending candidates are skipped.
  absl::Status SkipOverBudgetLocked(double now, MaintenanceReport* report,
                                    std::vector<std::string>* touched_jobs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unfinished jobs with nothing pending or leased (also those a crash left).
  absl::Status FindDoneJobsLocked(std::vector<std::string>* touched_jobs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finishes the job if no candidate is PENDING or LEASED. Returns true if it
  // finished now.
  absl::StatusOr<bool> FinishIfDoneLocked(const std::string& job_id, double now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  std::unique_ptr<Database> db_ ABSL_GUARDED_BY(mu_);
  const JobStoreOptions options_;
  WorkerStore* const workers_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_JOB_STORE_H_
