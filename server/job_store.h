// Durable state of the scheduler's jobs: jobs and their candidates, in
// SQLite (leased batches are server/lease_store.h's, the workers
// server/worker_store.h's). Every state change is one transaction, so a crash
// of the server at any point loses nothing that was acknowledged.
#ifndef YIRAGE_SERVER_JOB_STORE_H_
#define YIRAGE_SERVER_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/graph.h"
#include "core/tensor.h"
#include "server/connection.h"
#include "server/database.h"
#include "server/worker_store.h"
#include "yirage/v1/job.pb.h"

namespace yirage::server {

// What one maintenance pass did (for logs and metrics).
struct MaintenanceReport {
  int candidates_skipped = 0;                                // time budget ran out
  std::map<std::string, int> candidates_skipped_by_backend;  // the same, by the jobs' backend
  std::vector<std::string> jobs_finished;
};

// The result cache's name for a graph: its canonical hash and every name
// in it (a cached plan names the graph's ops and tensors); "" for a graph
// that does not validate.
std::string GraphCacheKey(const yirage::v1::Graph& graph);
// The same, of a graph already validated.
std::string GraphCacheKey(const core::Graph& graph);

// Thread-safe: every method takes the mutex of the store's connection
// (SQLite has one writer); ListJobs reads on a connection of its own first.
class JobStore {
 public:
  // `workers` (may be null: no job is then said to be waiting, nor its
  // winner confirmed) answers whether a job's backend has connected workers;
  // it must outlive the store. `confirm_winners` false: a job succeeds with
  // its best candidate as reported, no second worker asked.
  // `finalists` > 1: once a job's search candidates are done, its best
  // `finalists` verified ones are timed again, interleaved with the baseline
  // on one worker (the final round, Candidate.final_of), and the best
  // median speedup of that round is the job's best; 0 or 1: no final round.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& path,
                                                        WorkerStore* workers = nullptr,
                                                        bool confirm_winners = true,
                                                        int finalists = 0);
  // The same on `connection`, which other stores may share
  // (server/connection.h). `workers`, where given, must be on it too (the
  // job store asks it with the connection's mutex held): FailedPrecondition
  // otherwise. Open with `workers` takes their connection.
  static absl::StatusOr<std::unique_ptr<JobStore>> OnConnection(
      std::shared_ptr<Connection> connection, WorkerStore* workers = nullptr,
      bool confirm_winners = true, int finalists = 0);

  // Stores a new QUEUED job and its candidates in one transaction; `owner`
  // is the name of the token that submitted it ("" without tokens). Where
  // `owner` already submitted request.request_id (non-empty), stores
  // nothing and returns that job's id, with `*existing` set.
  // REQUIRES: plans non-empty, plans[0] is the baseline.
  absl::StatusOr<std::string> CreateJob(const yirage::v1::SubmitJobRequest& request,
                                        const core::Tolerance& tolerance,
                                        const std::vector<yirage::v1::Plan>& plans,
                                        const yirage::v1::SearchSummary& search, double now,
                                        const std::string& owner = "", bool* existing = nullptr,
                                        const std::string& cached_from = "");

  // The result cache: of the latest 8 SUCCEEDED jobs whose graph has `cache_key`
  // (GraphCacheKey), of `backend` and `chip_id`, with `tolerance`, whose
  // winner's toolkit and driver are known (software), the one whose winner
  // had the best speedup: its baseline plan and its winner's plan (none when
  // the baseline won). nullopt when none.
  struct CacheSource {
    std::string job_id;
    std::string software;
    std::vector<yirage::v1::Plan> plans;  // the baseline, then the winner
  };
  absl::StatusOr<std::optional<CacheSource>> FindCacheSource(const std::string& cache_key,
                                                             const std::string& backend,
                                                             const std::string& chip_id,
                                                             const core::Tolerance& tolerance);

  // Stores a new SEARCHING job without candidates (the search runs later,
  // off the RPC thread); AddCandidates or FailSearch ends that state. A
  // repeated request_id as CreateJob says.
  absl::StatusOr<std::string> CreateSearchingJob(const yirage::v1::SubmitJobRequest& request,
                                                 const core::Tolerance& tolerance, double now,
                                                 const std::string& owner = "",
                                                 bool* existing = nullptr);
  // The job `owner` submitted under `request_id`, if any.
  absl::StatusOr<std::optional<std::string>> FindSubmission(const std::string& owner,
                                                            const std::string& request_id);
  // Stores a SEARCHING job's candidates and search summary and queues it, in
  // one transaction. FailedPrecondition (changing nothing) when the job is
  // no longer SEARCHING (cancelled meanwhile).
  // REQUIRES: plans non-empty, plans[0] is the baseline.
  absl::Status AddCandidates(const std::string& job_id, const std::vector<yirage::v1::Plan>& plans,
                             const yirage::v1::SearchSummary& search);
  // Fails a SEARCHING job with `message`; nothing for a job in another state.
  absl::Status FailSearch(const std::string& job_id, const std::string& message, double now);
  // The SEARCHING jobs, oldest first (a restarted server searches them).
  absl::StatusOr<std::vector<std::string>> SearchingJobs();
  // What a SEARCHING job's search needs: its graph, backend, chip, budgets
  // and (resolved) tolerance, as a request. FailedPrecondition for a job in
  // another state.
  absl::StatusOr<yirage::v1::SubmitJobRequest> SearchRequest(const std::string& job_id);

  // A job read here that still has candidates to evaluate while no worker of
  // its backend is connected (none heard of within worker_timeout_seconds of
  // `now`) carries the message "waiting: no connected worker for backend
  // 'B'". It is computed on every read, never stored, so it clears itself
  // once such a worker connects. The overloads without `now` use the clock.
  absl::StatusOr<yirage::v1::Job> GetJob(const std::string& job_id);
  absl::StatusOr<yirage::v1::Job> GetJob(const std::string& job_id, double now);
  absl::StatusOr<std::vector<yirage::v1::Job>> ListJobs(int limit);
  absl::StatusOr<std::vector<yirage::v1::Job>> ListJobs(int limit, double now);
  // The job's candidates in order. `with_work`: each with its plan's work
  // (Candidate.work: flops, bytes, dtype; core/plan_work.h), computed from
  // the stored plan and the job's graph after the store's lock is released;
  // a plan that does not fit its graph is left without (and logged).
  absl::StatusOr<std::vector<yirage::v1::Candidate>> ListCandidates(const std::string& job_id,
                                                                    bool with_work = false);
  // Cancels a QUEUED or RUNNING job: its pending and leased candidates are
  // SKIPPED and its batches withdrawn. FailedPrecondition for a finished job;
  // with `owner`, PermissionDenied (changing nothing) for a job another
  // token submitted.
  absl::StatusOr<yirage::v1::Job> CancelJob(const std::string& job_id, double now,
                                            const std::string* owner = nullptr);

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
  // The same for any VERIFIED candidate of the job (`candidate_id` 0: the
  // best). NotFound when the job has no such candidate; FailedPrecondition
  // (saying why) when it is not VERIFIED or is a confirmation run. A
  // candidate that ran another's kernel (same_kernel_as) and stored no
  // source exports that one's source under its own id.
  absl::StatusOr<BestKernel> GetKernel(const std::string& job_id, int64_t candidate_id);

  // Finishes the job (SUCCEEDED with a verified candidate, else FAILED) if
  // none of its candidates is PENDING or LEASED. Returns true if it finished
  // now.
  //
  // With finalists (Open), the job's best few verified candidates are first
  // timed again in a final round (rows with Candidate.final_of, leased
  // together to one worker, which times them interleaved with the
  // baseline); the best median speedup of that round is the job's best,
  // and a finalist that fails there refutes the search's result of its
  // plan.
  //
  // Before a job succeeds its best candidate is confirmed: where another
  // connected worker of the job's backend (and chip, where both have one)
  // could run it, a confirmation row (Candidate.confirms) copies its plan,
  // PENDING and never leased to the original's worker, and the job stays
  // RUNNING. A confirmation VERIFIED with a speedup at least half the
  // reported one confirms the best (BestResult.confirmation); anything else
  // refutes it (ERROR, "not confirmed by worker W: ...") and the next best
  // is confirmed the same way. With no such worker, or a confirmation
  // skipped, the job succeeds unconfirmed and its message says why.
  absl::StatusOr<bool> FinishIfDone(const std::string& job_id, double now);
  // Fails the jobs whose baseline failed, enforces time budgets (pending
  // candidates of jobs out of time are skipped), skips the pending
  // confirmations no connected worker may run ("no second worker
  // connected") and finishes the jobs with
  // nothing left to evaluate: those in
  // `touched_jobs` (whose candidates another store changed) and any a crash
  // left unfinished.
  absl::StatusOr<MaintenanceReport> Maintain(double now,
                                             const std::vector<std::string>& touched_jobs = {});

  absl::StatusOr<std::map<yirage::v1::JobState, int>> CountJobsByState();
  // PENDING candidates of QUEUED and RUNNING jobs, by the jobs' backend
  // (backends with none are left out).
  absl::StatusOr<std::map<std::string, int>> CountQueuedCandidatesByBackend();
  // When candidate `candidate_id`'s result was stored (unix seconds; 0 when
  // it has none). NotFound for no such candidate.
  absl::StatusOr<double> ResultStoredUnix(int64_t candidate_id);

 private:
  JobStore(std::shared_ptr<Connection> connection, std::unique_ptr<Database> reads,
           WorkerStore* workers, bool confirm_winners, int finalists)
      : connection_(std::move(connection)),
        mu_(connection_->mu),
        db_(DatabaseOf(*connection_)),
        read_db_(std::move(reads)),
        workers_(workers),
        confirm_winners_(confirm_winners),
        finalists_(finalists) {}

  // The job row (state `state`, no candidates); its id. Or the earlier
  // job of the request's request_id (see CreateJob), `*existing` set.
  absl::StatusOr<std::string> InsertJobLocked(const yirage::v1::SubmitJobRequest& request,
                                              const core::Tolerance& tolerance,
                                              yirage::v1::JobState state,
                                              const yirage::v1::SearchSummary& search, double now,
                                              const std::string& owner, bool* existing,
                                              const std::string& cached_from = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<std::string>> FindSubmissionLocked(const std::string& owner,
                                                                  const std::string& request_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The candidates of `plans` (PENDING) and the job's baseline_candidate_id.
  absl::Status InsertCandidatesLocked(const std::string& job_id,
                                      const std::vector<yirage::v1::Plan>& plans)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job; its counts leave confirmation rows out (but a pending one
  // counts as pending), and its best carries a consistent confirmation.
  // Without `counts`, the job's candidate counts stay 0 (FinishIfDone knows
  // there is nothing left to run and needs them only without a best).
  absl::StatusOr<yirage::v1::Job> LoadJobLocked(const std::string& job_id, bool counts = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The latest confirmation row of candidate `candidate_id`, if any.
  absl::StatusOr<std::optional<yirage::v1::Candidate>> ConfirmationLocked(const std::string& job_id,
                                                                          int64_t candidate_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A PENDING confirmation row of `candidate_id`: its plan, after the job's
  // other candidates, excluding the worker that reported it.
  absl::Status InsertConfirmationLocked(const std::string& job_id, int64_t candidate_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the "waiting: no connected worker ..." message (see GetJob) on an
  // unfinished job with work left and no connected worker of its backend;
  // `connected`, where given, keeps the counts by backend across calls.
  absl::Status AnnotateWaitingLocked(yirage::v1::Job* job, double now,
                                     absl::flat_hash_map<std::string, int>* connected = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Maintain's passes, which add the jobs they change to *touched_jobs.
  // Jobs whose baseline candidate failed end FAILED, saying why (their
  // pending and leased candidates skipped).
  absl::Status FailOnBaselineErrorLocked(double now, MaintenanceReport* report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends an unfinished job as `state` with `message`: its pending and leased
  // candidates are SKIPPED with `reason`, its batches withdrawn.
  absl::Status EndJobLocked(const std::string& job_id, yirage::v1::JobState state,
                            const std::string& message, const std::string& reason, double now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Jobs past their time budget: pending candidates are skipped.
  absl::Status SkipOverBudgetLocked(double now, MaintenanceReport* report,
                                    std::vector<std::string>* touched_jobs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pending confirmations with no connected worker that may run them are
  // SKIPPED, so that their jobs succeed unconfirmed instead of waiting.
  absl::Status SkipUnconfirmableLocked(double now, std::vector<std::string>* touched_jobs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unfinished jobs with nothing pending or leased (also those a crash left).
  absl::Status FindDoneJobsLocked(std::vector<std::string>* touched_jobs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> FinishIfDoneLocked(const std::string& job_id, double now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ListJobs' rows and candidates (not AnnotateWaitingLocked's part), read
  // on `db` in one read transaction.
  static absl::StatusOr<std::vector<yirage::v1::Job>> ListJobsOn(Database* db, int limit);
  // Whether job `job_id` has a candidate PENDING or LEASED.
  absl::StatusOr<bool> HasRunnableLocked(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The final round of a job whose search candidates are done (none
  // pending): kStarted when it inserted the finalists (PENDING rows with
  // final_of, leased together); kRefuted when a finalist that failed made
  // the search's row of its plan ERROR (the best changes); kDone when the
  // round is over or there is none (fewer than two verified candidates).
  enum class FinalRoundStep { kStarted, kRefuted, kDone };
  // A job answered from the cache (Job.cached_from) whose cached winner did
  // not verify here: its source answers no more, its candidates go, and it
  // becomes SEARCHING (true). False when the winner verified.
  absl::StatusOr<bool> CachedWinnerFailedLocked(const yirage::v1::Job& job)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<FinalRoundStep> FinalRoundLocked(const std::string& job_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<Connection> connection_;
  absl::Mutex& mu_;  // connection_->mu
  Database* const db_ ABSL_GUARDED_BY(mu_);
  // A connection of its own for ListJobs, the read a dashboard polls: a
  // list of a thousand jobs reads its snapshot there, beside the workers'
  // writes, instead of holding mu_ (which every worker call takes) for the
  // whole list.
  absl::Mutex read_mu_;  // never held with mu_
  std::unique_ptr<Database> read_db_ ABSL_GUARDED_BY(read_mu_);
  WorkerStore* const workers_;
  const bool confirm_winners_;
  const int finalists_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_JOB_STORE_H_
