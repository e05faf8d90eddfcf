#include "server/job_store.h"

#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/rpc_util.h"
#include "core/chip.h"
#include "core/graph.h"
#include "core/graph_hash.h"
#include "core/plan_work.h"
#include "core/status_macros.h"
#include "server/schema.h"
#include "spdlog/spdlog.h"

namespace yirage::server {
namespace {

using yirage::v1::Candidate;
using yirage::v1::CandidateStatus;
using yirage::v1::Job;
using yirage::v1::JobState;

constexpr char kJobColumns[] =
    "job_id, graph_name, backend, state, rtol, atol, budget_candidates, budget_seconds, "
    "created, started, finished, message, search, chip_id, owner, chip_bound, cached_from";

constexpr char kCandidateColumns[] =
    "candidate_id, job_id, plan, status, time_us, baseline_time_us, max_abs_error, "
    "max_rel_error, error, attempts, worker_id, same_kernel_as, confirms, time_iqr_us, final_of";
// How many columns kCandidateColumns names (ReadCandidate reads them all).
constexpr int kCandidateColumnCount = 15;

Candidate ReadCandidate(const Statement& s) {
  Candidate c;
  c.set_candidate_id(s.ColumnInt(0));
  c.set_job_id(s.ColumnText(1));
  c.mutable_plan()->ParseFromString(s.ColumnBlob(2));
  c.set_status(static_cast<CandidateStatus>(s.ColumnInt(3)));
  c.set_time_us(s.ColumnDouble(4));
  c.set_baseline_time_us(s.ColumnDouble(5));
  c.set_max_abs_error(s.ColumnDouble(6));
  c.set_max_rel_error(s.ColumnDouble(7));
  c.set_error(s.ColumnText(8));
  c.set_attempts(static_cast<int32_t>(s.ColumnInt(9)));
  c.set_worker_id(s.ColumnText(10));
  c.set_same_kernel_as(s.ColumnInt(11));
  c.set_confirms(s.ColumnInt(12));
  c.set_time_iqr_us(s.ColumnDouble(13));
  c.set_final_of(s.ColumnInt(14));
  return c;
}

// A speedup over the baseline timed beside it; 0 when that baseline did not
// verify (its time is 0).
double Speedup(double time_us, double baseline_time_us) {
  return time_us > 0 && baseline_time_us > 0 ? baseline_time_us / time_us : 0;
}

// Why a second worker's VERIFIED result does not confirm the reported one;
// "" when it does. Workers differ and timings are noisy, so a speedup of at
// least half the reported one confirms it (where the reported result has no
// speedup, its baseline not having verified: a time at most twice the
// reported one). A false report is off by far more: that is what it buys.
std::string Disagreement(double time_us, double baseline_time_us, const Candidate& second) {
  const double reported = Speedup(time_us, baseline_time_us);
  const double measured = Speedup(second.time_us(), second.baseline_time_us());
  if (reported > 0 ? measured >= reported / 2 : second.time_us() <= 2 * time_us) return "";
  if (reported > 0 && second.baseline_time_us() <= 0) {
    return absl::StrCat("timed at ", second.time_us(),
                        " µs, but the baseline did not verify beside it, against the reported ",
                        time_us, " µs (speedup ", reported, ")");
  }
  return absl::StrCat("timed at ", second.time_us(), " µs (speedup ", measured,
                      ") against the reported ", time_us, " µs (speedup ", reported, ")");
}

bool IsFinal(JobState state) {
  return state == yirage::v1::SUCCEEDED || state == yirage::v1::FAILED ||
         state == yirage::v1::CANCELLED;
}

// A job's own columns (kJobColumns, from column `first` on).
Job ReadJob(const Statement& s, int first = 0) {
  Job job;
  job.set_job_id(s.ColumnText(first + 0));
  job.set_graph_name(s.ColumnText(first + 1));
  job.set_backend(s.ColumnText(first + 2));
  job.set_state(static_cast<JobState>(s.ColumnInt(first + 3)));
  job.mutable_tolerance()->set_rtol(s.ColumnDouble(first + 4));
  job.mutable_tolerance()->set_atol(s.ColumnDouble(first + 5));
  job.set_budget_candidates(static_cast<int32_t>(s.ColumnInt(first + 6)));
  job.set_budget_seconds(s.ColumnDouble(first + 7));
  job.set_created_unix(s.ColumnDouble(first + 8));
  job.set_started_unix(s.ColumnDouble(first + 9));
  job.set_finished_unix(s.ColumnDouble(first + 10));
  job.set_message(s.ColumnText(first + 11));
  job.mutable_search()->ParseFromString(s.ColumnBlob(first + 12));
  job.set_chip_id(s.ColumnText(first + 13));
  job.set_owner(s.ColumnText(first + 14));
  job.set_chip_bound(s.ColumnInt(first + 15) != 0);
  job.set_cached_from(s.ColumnText(first + 16));
  return job;
}

// Adds `n` candidate rows of `status` to the job's counts. Confirmation
// rows are not candidates of the job: they are left out of the counts,
// except that a pending one keeps the job from being done.
// `extra`: confirmation and final-round rows, which run the plan of a
// counted candidate again.
void AddCandidateCount(Job* job, CandidateStatus status, bool extra, int n) {
  if (status == yirage::v1::PENDING || status == yirage::v1::LEASED) {
    job->set_candidates_pending(job->candidates_pending() + n);
  }
  if (extra) return;
  job->set_candidates_generated(job->candidates_generated() + n);
  if (status == yirage::v1::VERIFIED || status == yirage::v1::MISMATCH ||
      status == yirage::v1::ERROR) {
    job->set_candidates_evaluated(job->candidates_evaluated() + n);
  }
  if (status == yirage::v1::MISMATCH || status == yirage::v1::ERROR) {
    job->set_candidates_failed(job->candidates_failed() + n);
  }
}

// The best candidate is the one with the highest speedup over the baseline
// timed beside it: on a shared, noisy machine that ratio is far steadier
// than absolute times taken minutes apart. This is the search's order (it
// picks the final round's finalists).
constexpr char kSearchOrder[] =
    "CASE WHEN baseline_time_us > 0 THEN baseline_time_us / time_us ELSE 0 END DESC, "
    "time_us ASC, ordinal ASC";
// A job's best: the search's until its final round is whole, so that the
// best speedup never drops while the round runs (each of its rows is one
// finalist's median, and the round decides only all together); then the
// final round, where the job has one, decides: its rows come first.
constexpr char kFinalRowsFirst[] = "final_of <> 0 DESC, ";
// An SQL condition on a candidate row of job `job` (an SQL expression): it
// may be the job's best (a search row, or a final-round row once no row of
// that round is left to run).
std::string BestRowFilter(const std::string& job) {
  return absl::StrCat(
      "(final_of = 0 OR NOT EXISTS (SELECT 1 FROM candidates AS f WHERE f.job_id = ", job,
      " AND f.final_of <> 0 AND f.status IN (", yirage::v1::PENDING, ", ", yirage::v1::LEASED,
      ")))");
}
// kBestColumns's values, from column `first` on.
constexpr char kBestColumns[] =
    "candidate_id, time_us, baseline_time_us, max_abs_error, max_rel_error, worker_id, "
    "description, final_of, time_iqr_us";

void SetBest(Job* job, const Statement& s, int first = 0) {
  auto* b = job->mutable_best();
  b->set_candidate_id(s.ColumnInt(first + 0));
  b->set_time_us(s.ColumnDouble(first + 1));
  b->set_baseline_time_us(s.ColumnDouble(first + 2));
  b->set_speedup(b->time_us() > 0 ? b->baseline_time_us() / b->time_us() : 0);
  b->set_max_abs_error(s.ColumnDouble(first + 3));
  b->set_max_rel_error(s.ColumnDouble(first + 4));
  b->set_verified(true);
  b->set_worker_id(s.ColumnText(first + 5));
  b->set_description(s.ColumnText(first + 6));
  b->set_final_of(s.ColumnInt(first + 7));
  b->set_time_iqr_us(s.ColumnDouble(first + 8));
}

// The best result's confirmation, where `second` (the latest confirmation
// row of it) verified and agrees.
void SetConfirmation(Job* job, const Candidate& second) {
  yirage::v1::BestResult* b = job->mutable_best();
  if (second.status() != yirage::v1::VERIFIED ||
      !Disagreement(b->time_us(), b->baseline_time_us(), second).empty()) {
    return;
  }
  auto* c = b->mutable_confirmation();
  c->set_worker_id(second.worker_id());
  c->set_time_us(second.time_us());
  c->set_baseline_time_us(second.baseline_time_us());
  c->set_speedup(Speedup(second.time_us(), second.baseline_time_us()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(const std::string& path,
                                                         WorkerStore* workers, bool confirm_winners,
                                                         int finalists) {
  if (workers != nullptr) {
    return OnConnection(workers->connection(), workers, confirm_winners, finalists);
  }
  YIRAGE_ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection, Connection::Open(path, "jobs"));
  return OnConnection(std::move(connection), workers, confirm_winners, finalists);
}

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::OnConnection(
    std::shared_ptr<Connection> connection, WorkerStore* workers, bool confirm_winners,
    int finalists) {
  if (workers != nullptr && workers->connection() != connection) {
    return absl::FailedPreconditionError(
        "a JobStore's WorkerStore must be on the JobStore's connection");
  }
  YIRAGE_ASSIGN_OR_RETURN(std::unique_ptr<Database> reads,
                          Database::Open(connection->path, SchemaMigrations(), "job reads"));
  return std::unique_ptr<JobStore>(
      new JobStore(std::move(connection), std::move(reads), workers, confirm_winners, finalists));
}

std::string GraphCacheKey(const yirage::v1::Graph& graph) {
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(graph);
  return g.ok() ? GraphCacheKey(*g) : std::string();
}

std::string GraphCacheKey(const core::Graph& graph) {
  core::Hash128 h = core::CanonicalGraphHash(graph);
  auto mix = [&](const std::string& name) {
    h = core::MixHash(h, name.size());
    for (size_t i = 0; i < name.size(); i += 8) {
      uint64_t word = 0;
      for (size_t k = 0; k < 8 && i + k < name.size(); ++k) {
        word |= static_cast<uint64_t>(static_cast<unsigned char>(name[i + k])) << (8 * k);
      }
      h = core::MixHash(h, word);
    }
  };
  for (int t = 0; t < graph.num_tensors(); ++t) mix(graph.tensor(t).name);
  for (const core::OpInfo& op : graph.ops()) mix(op.name);
  return core::HashToString(h);
}

absl::StatusOr<std::string> JobStore::InsertJobLocked(
    const yirage::v1::SubmitJobRequest& request, const core::Tolerance& tolerance, JobState state,
    const yirage::v1::SearchSummary& search, double now, const std::string& owner, bool* existing,
    const std::string& cached_from) {
  if (!request.request_id().empty()) {
    // Checked and inserted under the store's lock: a racing retry of the
    // same submission finds this one's job.
    YIRAGE_ASSIGN_OR_RETURN(std::optional<std::string> earlier,
                            FindSubmissionLocked(owner, request.request_id()));
    if (earlier.has_value()) {
      if (existing != nullptr) *existing = true;
      return *earlier;
    }
  }
  std::string job_id = "job-" + RandomHex(10);
  std::string graph_bytes;
  request.graph().SerializeToString(&graph_bytes);
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  int64_t seed = static_cast<int64_t>(rng() >> 1);
  YIRAGE_ASSIGN_OR_RETURN(
      Statement insert,
      db_->Prepare("INSERT INTO jobs (job_id, graph_name, graph, backend, chip_id, state, rtol, "
                   "atol, budget_candidates, budget_seconds, created, seed, search, owner, "
                   "request_id, chip_bound, cache_key, cached_from) VALUES "
                   "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  insert.Bind(1, job_id)
      .Bind(2, request.graph().name())
      .BindBlob(3, graph_bytes)
      .Bind(4, request.backend())
      .Bind(5, request.chip_id())
      .Bind(6, static_cast<int64_t>(state))
      .Bind(7, tolerance.rtol)
      .Bind(8, tolerance.atol)
      .Bind(9, static_cast<int64_t>(request.budget_candidates()))
      .Bind(10, request.budget_seconds())
      .Bind(11, now)
      .Bind(12, seed)
      .BindBlob(13, search.SerializeAsString())
      .Bind(14, owner)
      .Bind(15, request.request_id())
      .Bind(16, int64_t{!request.chip_id().empty() && !request.any_chip()})
      .Bind(17, GraphCacheKey(request.graph()))
      .Bind(18, cached_from);
  YIRAGE_RETURN_IF_ERROR(insert.Run());
  return job_id;
}

absl::StatusOr<std::optional<std::string>> JobStore::FindSubmissionLocked(
    const std::string& owner, const std::string& request_id) {
  YIRAGE_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("SELECT job_id FROM jobs WHERE owner=? AND request_id=?"));
  s.Bind(1, owner).Bind(2, request_id);
  YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(s.ColumnText(0));
}

absl::StatusOr<std::optional<std::string>> JobStore::FindSubmission(const std::string& owner,
                                                                    const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  return FindSubmissionLocked(owner, request_id);
}

absl::Status JobStore::InsertCandidatesLocked(const std::string& job_id,
                                              const std::vector<yirage::v1::Plan>& plans) {
  if (plans.empty() || !plans[0].baseline()) {
    return absl::InternalError("the first plan of a job must be the baseline");
  }
  YIRAGE_ASSIGN_OR_RETURN(
      Statement insert_candidate,
      db_->Prepare("INSERT INTO candidates (job_id, ordinal, plan, description, is_baseline, "
                   "status) VALUES (?,?,?,?,?,?)"));
  int64_t baseline_id = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    std::string plan_bytes;
    plans[i].SerializeToString(&plan_bytes);
    Statement& s = insert_candidate;
    s.Bind(1, job_id)
        .Bind(2, static_cast<int64_t>(i))
        .BindBlob(3, plan_bytes)
        .Bind(4, plans[i].description())
        .Bind(5, static_cast<int64_t>(plans[i].baseline() ? 1 : 0))
        .Bind(6, static_cast<int64_t>(yirage::v1::PENDING));
    YIRAGE_RETURN_IF_ERROR(s.Run());
    if (i == 0) baseline_id = db_->LastInsertRowId();
    s.Reset();
  }
  YIRAGE_ASSIGN_OR_RETURN(
      Statement update, db_->Prepare("UPDATE jobs SET baseline_candidate_id = ? WHERE job_id = ?"));
  update.Bind(1, baseline_id).Bind(2, job_id);
  return update.Run();
}

absl::StatusOr<std::string> JobStore::CreateJob(const yirage::v1::SubmitJobRequest& request,
                                                const core::Tolerance& tolerance,
                                                const std::vector<yirage::v1::Plan>& plans,
                                                const yirage::v1::SearchSummary& search, double now,
                                                const std::string& owner, bool* existing,
                                                const std::string& cached_from) {
  if (plans.empty() || !plans[0].baseline()) {
    return absl::InternalError("CreateJob: the first plan must be the baseline");
  }
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  YIRAGE_RETURN_IF_ERROR(tx.status());
  bool earlier = false;
  YIRAGE_ASSIGN_OR_RETURN(std::string job_id,
                          InsertJobLocked(request, tolerance, yirage::v1::QUEUED, search, now,
                                          owner, &earlier, cached_from));
  if (existing != nullptr) *existing = earlier;
  if (earlier) return job_id;
  YIRAGE_RETURN_IF_ERROR(InsertCandidatesLocked(job_id, plans));
  YIRAGE_RETURN_IF_ERROR(tx.Commit());
  return job_id;
}

absl::StatusOr<std::string> JobStore::CreateSearchingJob(
    const yirage::v1::SubmitJobRequest& request, const core::Tolerance& tolerance, double now,
    const std::string& owner, bool* existing) {
  absl::MutexLock lock(&mu_);
  if (existing != nullptr) *existing = false;
  return InsertJobLocked(request, tolerance, yirage::v1::SEARCHING, yirage::v1::SearchSummary(),
                         now, owner, existing);
}

absl::Status JobStore::AddCandidates(const std::string& job_id,
                                     const std::vector<yirage::v1::Plan>& plans,
                                     const yirage::v1::SearchSummary& search) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  YIRAGE_RETURN_IF_ERROR(tx.status());
  YIRAGE_ASSIGN_OR_RETURN(Job job, LoadJobLocked(job_id));
  if (job.state() != yirage::v1::SEARCHING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", job_id, "' is ", yirage::v1::JobState_Name(job.state()), ", no longer searching"));
  }
  YIRAGE_RETURN_IF_ERROR(InsertCandidatesLocked(job_id, plans));
  YIRAGE_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("UPDATE jobs SET state=?, search=? WHERE job_id=?"));
  s.Bind(1, static_cast<int64_t>(yirage::v1::QUEUED))
      .BindBlob(2, search.SerializeAsString())
      .Bind(3, job_id);
  YIRAGE_RETURN_IF_ERROR(s.Run());
  return tx.Commit();
}

absl::Status JobStore::FailSearch(const std::string& job_id, const std::string& message,
                                  double now) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("UPDATE jobs SET state=?, finished=?, message=? WHERE job_id=? AND "
                                "state=?"));
  s.Bind(1, static_cast<int64_t>(yirage::v1::FAILED))
      .Bind(2, now)
      .Bind(3, message)
      .Bind(4, job_id)
      .Bind(5, static_cast<int64_t>(yirage::v1::SEARCHING));
  return s.Run();
}

absl::StatusOr<std::vector<std::string>> JobStore::SearchingJobs() {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT job_id FROM jobs WHERE state=? ORDER BY created, job_id"));
  s.Bind(1, static_cast<int64_t>(yirage::v1::SEARCHING));
  std::vector<std::string> ids;
  for (;;) {
    YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    ids.push_back(s.ColumnText(0));
  }
  return ids;
}

absl::StatusOr<yirage::v1::SubmitJobRequest> JobStore::SearchRequest(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("SELECT state, graph, backend, chip_id, rtol, atol, budget_candidates, "
                   "budget_seconds, chip_bound FROM jobs WHERE job_id=?"));
  s.Bind(1, job_id);
  YIRAGE_ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  if (s.ColumnInt(0) != yirage::v1::SEARCHING) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' is not searching"));
  }
  yirage::v1::SubmitJobRequest request;
  if (!request.mutable_graph()->ParseFromString(s.ColumnBlob(1))) {
    return absl::DataLossError(absl::StrCat("job '", job_id, "': stored graph unreadable"));
  }
  request.set_backend(s.ColumnText(2));
  request.set_chip_id(s.ColumnText(3));
  request.set_any_chip(s.ColumnInt(8) == 0);
  request.mutable_tolerance()->set_rtol(s.ColumnDouble(4));
  request.mutable_tolerance()->set_atol(s.ColumnDouble(5));
  request.set_budget_candidates(static_cast<int32_t>(s.ColumnInt(6)));
  request.set_budget_seconds(s.ColumnDouble(7));
  return request;
}

absl::StatusOr<Job> JobStore::LoadJobLocked(const std::string& job_id, bool counts) {
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE job_id=?")));
  s.Bind(1, job_id);
  YIRAGE_ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  Job job = ReadJob(s);

  // One pass over the job's rows of its index.
  if (counts) {
    YIRAGE_ASSIGN_OR_RETURN(Statement c,
                            db_->Prepare("SELECT status, confirms <> 0 OR final_of <> 0, COUNT(*) "
                                         "FROM candidates WHERE job_id=? GROUP BY status, "
                                         "confirms <> 0 OR final_of <> 0"));
    c.Bind(1, job_id);
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, c.Step());
      if (!row) break;
      AddCandidateCount(&job, static_cast<CandidateStatus>(c.ColumnInt(0)), c.ColumnInt(1) != 0,
                        static_cast<int>(c.ColumnInt(2)));
    }
  }

  YIRAGE_ASSIGN_OR_RETURN(Statement best, db_->Prepare(absl::StrCat(
                                              "SELECT ", kBestColumns,
                                              " FROM candidates WHERE job_id=?1 AND status=?2 AND "
                                              "confirms = 0 AND ",
                                              BestRowFilter("?1"), " ORDER BY ", kFinalRowsFirst,
                                              kSearchOrder, " LIMIT 1")));
  best.Bind(1, job_id).Bind(2, static_cast<int64_t>(yirage::v1::VERIFIED));
  YIRAGE_ASSIGN_OR_RETURN(bool has_best, best.Step());
  if (has_best) {
    SetBest(&job, best);
    YIRAGE_ASSIGN_OR_RETURN(std::optional<Candidate> second,
                            ConfirmationLocked(job_id, job.best().candidate_id()));
    if (second.has_value()) SetConfirmation(&job, *second);
  }
  return job;
}

absl::StatusOr<std::optional<Candidate>> JobStore::ConfirmationLocked(const std::string& job_id,
                                                                      int64_t candidate_id) {
  // "confirms <> 0" lets SQLite use the partial index of confirmation rows.
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare(absl::StrCat("SELECT ", kCandidateColumns,
                                             " FROM candidates WHERE job_id=? AND confirms=? AND "
                                             "confirms <> 0 ORDER BY candidate_id DESC LIMIT 1")));
  s.Bind(1, job_id).Bind(2, candidate_id);
  YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<Candidate>();
  return std::optional<Candidate>(ReadCandidate(s));
}

absl::Status JobStore::InsertConfirmationLocked(const std::string& job_id, int64_t candidate_id) {
  // After every other candidate of the job (ListCandidates's order), with
  // the original's plan; it must not go back to the original's worker.
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("INSERT INTO candidates (job_id, ordinal, plan, description, is_baseline, "
                   "status, confirms, exclude_worker) SELECT job_id, (SELECT MAX(ordinal) + 1 "
                   "FROM candidates WHERE job_id=?1), plan, description, 0, ?2, candidate_id, "
                   "worker_id FROM candidates WHERE candidate_id=?3 AND job_id=?1"));
  s.Bind(1, job_id).Bind(2, static_cast<int64_t>(yirage::v1::PENDING)).Bind(3, candidate_id);
  YIRAGE_RETURN_IF_ERROR(s.Run());
  if (db_->Changes() != 1) {
    return absl::InternalError(
        absl::StrCat("job '", job_id, "': candidate ", candidate_id, " to confirm vanished"));
  }
  return absl::OkStatus();
}

absl::Status JobStore::AnnotateWaitingLocked(Job* job, double now,
                                             absl::flat_hash_map<std::string, int>* connected) {
  if (workers_ == nullptr || IsFinal(job->state()) || job->candidates_pending() == 0 ||
      !job->message().empty()) {
    return absl::OkStatus();
  }
  int workers = 0;
  // A chip-bound job waits for a worker of its chip.
  const std::string chip = job->chip_bound() ? job->chip_id() : "";
  const std::string key = absl::StrCat(job->backend(), "/", chip);
  const auto known = connected != nullptr ? connected->find(key)
                                          : absl::flat_hash_map<std::string, int>::iterator();
  if (connected != nullptr && known != connected->end()) {
    workers = known->second;
  } else {
    // The WorkerStore is on this connection: its ...Locked methods, mu_ held.
    YIRAGE_ASSIGN_OR_RETURN(workers, workers_->CountConnectedLocked(now, job->backend(), chip));
    if (connected != nullptr) (*connected)[key] = workers;
  }
  if (workers == 0) {
    job->set_message(absl::StrCat(
        "waiting: no connected worker for backend '", job->backend(), "'",
        chip.empty() ? "" : absl::StrCat(" and chip '", chip, "' (the job is bound to its chip)")));
  }
  return absl::OkStatus();
}

absl::StatusOr<Job> JobStore::GetJob(const std::string& job_id) {
  return GetJob(job_id, UnixNow());
}

absl::StatusOr<Job> JobStore::GetJob(const std::string& job_id, double now) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(Job job, LoadJobLocked(job_id));
  YIRAGE_RETURN_IF_ERROR(AnnotateWaitingLocked(&job, now));
  return job;
}

absl::StatusOr<std::vector<Job>> JobStore::ListJobs(int limit) {
  return ListJobs(limit, UnixNow());
}

absl::StatusOr<std::vector<Job>> JobStore::ListJobs(int limit, double now) {
  std::vector<Job> jobs;
  {
    absl::MutexLock lock(&read_mu_);
    YIRAGE_ASSIGN_OR_RETURN(jobs, ListJobsOn(read_db_.get(), limit));
  }
  absl::MutexLock lock(&mu_);
  // The connected workers counted once a backend.
  absl::flat_hash_map<std::string, int> connected;
  for (Job& job : jobs) YIRAGE_RETURN_IF_ERROR(AnnotateWaitingLocked(&job, now, &connected));
  return jobs;
}

absl::StatusOr<std::vector<Job>> JobStore::ListJobsOn(Database* db, int limit) {
  // One snapshot for the four queries.
  ReadTransaction snapshot(db);
  YIRAGE_RETURN_IF_ERROR(snapshot.status());
  // Set-based: four queries over the listed jobs, whatever their number
  // (a dashboard polls this list), rather than LoadJobLocked's for each.
  constexpr char kListed[] =
      "job_id IN (SELECT job_id FROM jobs ORDER BY created DESC, job_id LIMIT ?1)";
  const int64_t n = limit > 0 ? limit : 1000;
  std::vector<Job> jobs;
  absl::flat_hash_map<std::string, size_t> index;
  {
    YIRAGE_ASSIGN_OR_RETURN(Statement s,
                            db->Prepare(absl::StrCat("SELECT ", kJobColumns,
                                                     " FROM jobs ORDER BY created DESC, "
                                                     "job_id LIMIT ?1")));
    s.Bind(1, n);
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      index[s.ColumnText(0)] = jobs.size();
      jobs.push_back(ReadJob(s));
    }
  }
  auto find = [&](const std::string& job_id) -> Job* {
    auto it = index.find(job_id);
    return it == index.end() ? nullptr : &jobs[it->second];
  };
  {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s, db->Prepare(absl::StrCat(
                         "SELECT job_id, status, confirms <> 0 OR final_of <> 0, "
                         "COUNT(*) FROM candidates WHERE ",
                         kListed, " GROUP BY job_id, status, confirms <> 0 OR final_of <> 0")));
    s.Bind(1, n);
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      if (Job* job = find(s.ColumnText(0))) {
        AddCandidateCount(job, static_cast<CandidateStatus>(s.ColumnInt(1)), s.ColumnInt(2) != 0,
                          static_cast<int>(s.ColumnInt(3)));
      }
    }
  }
  {
    // Each listed job's best through candidates_by_job, a short sort of its
    // own verified rows, rather than one window sort over all their candidates.
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db->Prepare(absl::StrCat(
            "SELECT j.job_id, ", kBestColumns,
            " FROM (SELECT job_id FROM jobs ORDER BY created DESC, job_id LIMIT ?1) AS j "
            "JOIN candidates AS c ON c.rowid = (SELECT rowid FROM candidates WHERE "
            "candidates.job_id = j.job_id AND status=?2 AND confirms = 0 AND ",
            BestRowFilter("j.job_id"), " ORDER BY ", kFinalRowsFirst, kSearchOrder, " LIMIT 1)")));
    s.Bind(1, n).Bind(2, static_cast<int64_t>(yirage::v1::VERIFIED));
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      if (Job* job = find(s.ColumnText(0))) SetBest(job, s, 1);
    }
  }
  {
    // Each best result's latest confirmation row (ConfirmationLocked's).
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s, db->Prepare(absl::StrCat("SELECT ", kCandidateColumns,
                                              " FROM candidates WHERE confirms <> 0 AND ", kListed,
                                              " ORDER BY candidate_id DESC")));
    s.Bind(1, n);
    absl::flat_hash_set<std::string> confirmed;
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      Job* job = find(s.ColumnText(1));
      if (job == nullptr || !job->has_best() || s.ColumnInt(12) != job->best().candidate_id() ||
          !confirmed.insert(job->job_id()).second) {
        continue;
      }
      SetConfirmation(job, ReadCandidate(s));
    }
  }
  return jobs;
}

absl::StatusOr<std::vector<Candidate>> JobStore::ListCandidates(const std::string& job_id,
                                                                bool with_work) {
  std::vector<Candidate> out;
  yirage::v1::Graph graph_proto;
  {
    absl::MutexLock lock(&mu_);
    YIRAGE_RETURN_IF_ERROR(LoadJobLocked(job_id).status());
    YIRAGE_ASSIGN_OR_RETURN(Statement s,
                            db_->Prepare(absl::StrCat("SELECT ", kCandidateColumns,
                                                      " FROM candidates WHERE job_id=? "
                                                      "ORDER BY ordinal")));
    s.Bind(1, job_id);
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back(ReadCandidate(s));
    }
    if (!with_work || out.empty()) return out;
    YIRAGE_ASSIGN_OR_RETURN(Statement g, db_->Prepare("SELECT graph FROM jobs WHERE job_id=?"));
    g.Bind(1, job_id);
    YIRAGE_ASSIGN_OR_RETURN(bool row, g.Step());
    if (!row || !graph_proto.ParseFromString(g.ColumnBlob(0))) {
      return absl::DataLossError(absl::StrCat("job '", job_id, "': stored graph unreadable"));
    }
  }
  // Outside the lock: parsing graphs and resolving plans is the caller's
  // time, not the store's.
  absl::StatusOr<core::Graph> graph = core::Graph::FromProto(graph_proto);
  if (!graph.ok()) {
    spdlog::warn("job {}: no plan work: its graph: {}", job_id,
                 std::string(graph.status().message()));
    return out;
  }
  for (Candidate& c : out) {
    absl::StatusOr<core::PlanWork> work = core::ComputePlanWork(*graph, c.plan());
    if (!work.ok()) {
      spdlog::warn("job {} candidate {}: no plan work: {}", job_id, c.candidate_id(),
                   std::string(work.status().message()));
      continue;
    }
    c.mutable_work()->set_flops(work->flops);
    c.mutable_work()->set_bytes(work->bytes);
    c.mutable_work()->set_dtype(work->dtype);
  }
  return out;
}

absl::Status JobStore::EndJobLocked(const std::string& job_id, JobState state,
                                    const std::string& message, const std::string& reason,
                                    double now) {
  {
    YIRAGE_ASSIGN_OR_RETURN(Statement s,
                            db_->Prepare("UPDATE candidates SET status=?, batch_id=NULL, error=? "
                                         "WHERE job_id=? AND status IN (?,?)"));
    s.Bind(1, static_cast<int64_t>(yirage::v1::SKIPPED))
        .Bind(2, reason)
        .Bind(3, job_id)
        .Bind(4, static_cast<int64_t>(yirage::v1::PENDING))
        .Bind(5, static_cast<int64_t>(yirage::v1::LEASED));
    YIRAGE_RETURN_IF_ERROR(s.Run());
  }
  {
    YIRAGE_ASSIGN_OR_RETURN(Statement s, db_->Prepare("DELETE FROM batches WHERE job_id=?"));
    s.Bind(1, job_id);
    YIRAGE_RETURN_IF_ERROR(s.Run());
  }
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("UPDATE jobs SET state=?, finished=?, message=? WHERE job_id=?"));
  s.Bind(1, static_cast<int64_t>(state)).Bind(2, now).Bind(3, message).Bind(4, job_id);
  return s.Run();
}

absl::StatusOr<Job> JobStore::CancelJob(const std::string& job_id, double now,
                                        const std::string* owner) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(Job job, LoadJobLocked(job_id));
  if (owner != nullptr && job.owner() != *owner) {
    return absl::PermissionDeniedError(
        absl::StrCat("job ", job_id, " was submitted by '", job.owner(),
                     "'; cancelling another token's job needs the admin role"));
  }
  if (IsFinal(job.state())) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' already ended as ",
                                                      yirage::v1::JobState_Name(job.state())));
  }
  Transaction tx(db_);
  YIRAGE_RETURN_IF_ERROR(tx.status());
  YIRAGE_RETURN_IF_ERROR(
      EndJobLocked(job_id, yirage::v1::CANCELLED, "cancelled by a client", "job cancelled", now));
  YIRAGE_RETURN_IF_ERROR(tx.Commit());
  return LoadJobLocked(job_id);
}

absl::StatusOr<JobStore::BestKernel> JobStore::GetBestKernel(const std::string& job_id) {
  return GetKernel(job_id, 0);
}

absl::StatusOr<JobStore::BestKernel> JobStore::GetKernel(const std::string& job_id,
                                                         int64_t candidate_id) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(Job job, LoadJobLocked(job_id));
  if (candidate_id == 0) {
    if (!job.has_best()) {
      return absl::NotFoundError(absl::StrCat("job '", job_id, "' (",
                                              yirage::v1::JobState_Name(job.state()),
                                              ") has no verified candidate yet"));
    }
    candidate_id = job.best().candidate_id();
  }
  auto load = [&](int64_t id) -> absl::StatusOr<Statement> {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare(absl::StrCat("SELECT ", kCandidateColumns,
                                  ", source, launch FROM candidates WHERE candidate_id=? AND "
                                  "job_id=?")));
    s.Bind(1, id).Bind(2, job_id);
    YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) {
      return absl::NotFoundError(
          absl::StrCat("job '", job_id, "' has no candidate ", id, " (see `candidates JOB`)"));
    }
    return s;
  };
  YIRAGE_ASSIGN_OR_RETURN(Statement s, load(candidate_id));
  BestKernel best;
  best.candidate = ReadCandidate(s);
  if (best.candidate.confirms() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "candidate ", candidate_id, " of job '", job_id, "' is a confirmation run of candidate ",
        best.candidate.confirms(), "; export that one"));
  }
  if (best.candidate.status() != yirage::v1::VERIFIED) {
    return absl::FailedPreconditionError(
        absl::StrCat("candidate ", candidate_id, " of job '", job_id, "' is ",
                     yirage::v1::CandidateStatus_Name(best.candidate.status()),
                     "; only VERIFIED candidates are exported"));
  }
  // A candidate that ran another's kernel may have stored no source of its
  // own (its worker's choice): then the other's source and launches.
  std::optional<Statement> origin;
  if (s.ColumnText(kCandidateColumnCount).empty() && best.candidate.same_kernel_as() != 0) {
    YIRAGE_ASSIGN_OR_RETURN(Statement o, load(best.candidate.same_kernel_as()));
    origin.emplace(std::move(o));
  }
  const Statement& k = origin.has_value() ? *origin : s;
  best.source = k.ColumnText(kCandidateColumnCount);
  if (!k.ColumnIsNull(kCandidateColumnCount + 1)) {
    best.launch.emplace();
    if (!best.launch->ParseFromString(k.ColumnBlob(kCandidateColumnCount + 1))) {
      return absl::DataLossError("the candidate's stored launch manifest is unreadable");
    }
  }
  best.backend = job.backend();
  YIRAGE_ASSIGN_OR_RETURN(Statement g, db_->Prepare("SELECT graph FROM jobs WHERE job_id=?"));
  g.Bind(1, job_id);
  YIRAGE_ASSIGN_OR_RETURN(bool grow, g.Step());
  if (!grow || !best.graph.ParseFromString(g.ColumnBlob(0))) {
    return absl::InternalError("stored graph unreadable");
  }
  return best;
}

absl::StatusOr<bool> JobStore::HasRunnableLocked(const std::string& job_id) {
  // Most reports leave candidates of the job to run: one index probe
  // answers that without loading the job.
  YIRAGE_ASSIGN_OR_RETURN(Statement left,
                          db_->Prepare("SELECT 1 FROM candidates WHERE job_id=? AND status IN "
                                       "(?,?) LIMIT 1"));
  left.Bind(1, job_id)
      .Bind(2, static_cast<int64_t>(yirage::v1::PENDING))
      .Bind(3, static_cast<int64_t>(yirage::v1::LEASED));
  YIRAGE_ASSIGN_OR_RETURN(bool pending, left.Step());
  left.Reset();
  return pending;
}

absl::StatusOr<bool> JobStore::FinishIfDoneLocked(const std::string& job_id, double now) {
  {
    YIRAGE_ASSIGN_OR_RETURN(bool pending, HasRunnableLocked(job_id));
    if (pending) return false;
  }
  // FinishIfDone runs this in a group commit (one transaction with other
  // reports); the maintenance pass, write by write. Either way a crash
  // leaves what the next pass takes up from. Each pass confirms the best
  // candidate or refutes it (it becomes ERROR and the next best is the
  // best), so this ends.
  for (;;) {
    // Nothing is left to run (the probe above; refuting a result adds
    // nothing): the counts are needed only for a job without a best.
    YIRAGE_ASSIGN_OR_RETURN(Job job, LoadJobLocked(job_id, /*counts=*/false));
    if (!job.has_best()) {
      YIRAGE_ASSIGN_OR_RETURN(job, LoadJobLocked(job_id));
    }
    // A SEARCHING job has no candidates yet, none pending among them.
    if (IsFinal(job.state()) || job.state() == yirage::v1::SEARCHING ||
        job.candidates_pending() > 0) {
      return false;
    }
    if (!job.cached_from().empty()) {
      YIRAGE_ASSIGN_OR_RETURN(bool searching, CachedWinnerFailedLocked(job));
      if (searching) return false;
    }
    if (finalists_ > 1 && job.has_best() && job.cached_from().empty()) {
      YIRAGE_ASSIGN_OR_RETURN(FinalRoundStep step, FinalRoundLocked(job_id));
      if (step == FinalRoundStep::kStarted) return false;
      if (step == FinalRoundStep::kRefuted) continue;
    }
    std::string message = job.message();
    if (!job.has_best()) {
      message = absl::StrCat("no candidate verified: ", job.candidates_failed(), " of ",
                             job.candidates_generated(), " failed",
                             job.candidates_generated() > job.candidates_evaluated()
                                 ? " (the rest were skipped: budget exhausted)"
                                 : "");
    } else if (!job.best().has_confirmation()) {
      const yirage::v1::BestResult& best = job.best();
      YIRAGE_ASSIGN_OR_RETURN(std::optional<Candidate> second,
                              ConfirmationLocked(job_id, best.candidate_id()));
      if (!second.has_value()) {
        int confirmers = 0;
        if (!confirm_winners_) {
          message = "the winner was not confirmed: confirmation is off (--confirm-winners=false)";
        } else if (workers_ != nullptr) {
          // The WorkerStore is on this connection: its ...Locked methods, mu_ held.
          YIRAGE_ASSIGN_OR_RETURN(
              confirmers,
              workers_->CountConfirmersLocked(now, job.backend(), job.chip_id(), best.worker_id()));
        }
        if (confirmers > 0) {
          YIRAGE_RETURN_IF_ERROR(InsertConfirmationLocked(job_id, best.candidate_id()));
          return false;
        }
        if (confirm_winners_) {
          message = absl::StrCat(
              "the winner was not confirmed: no second connected worker of backend '",
              job.backend(), "'",
              job.chip_id().empty() ? "" : absl::StrCat(" and chip '", job.chip_id(), "'"),
              " besides ", best.worker_id());
        }
      } else if (second->status() == yirage::v1::SKIPPED) {
        message = absl::StrCat("the winner was not confirmed: ", second->error());
      } else {
        // VERIFIED but inconsistent (a consistent one is best.confirmation),
        // MISMATCH or ERROR: the reported result stands refuted.
        std::string why;
        if (second->status() == yirage::v1::VERIFIED) {
          why = Disagreement(best.time_us(), best.baseline_time_us(), *second);
        } else if (second->status() == yirage::v1::MISMATCH) {
          why = absl::StrCat("mismatch: ",
                             second->error().empty()
                                 ? absl::StrCat("max abs error ", second->max_abs_error())
                                 : second->error());
        } else {
          why = absl::StrCat("error: ", second->error());
        }
        const std::string by = second->worker_id().empty()
                                   ? std::string("not confirmed")
                                   : absl::StrCat("not confirmed by worker ", second->worker_id());
        YIRAGE_ASSIGN_OR_RETURN(
            Statement refute,
            db_->Prepare("UPDATE candidates SET status=?, error=? WHERE candidate_id=?"));
        refute.Bind(1, static_cast<int64_t>(yirage::v1::ERROR))
            .Bind(2, absl::StrCat(by, ": ", why))
            .Bind(3, best.candidate_id());
        YIRAGE_RETURN_IF_ERROR(refute.Run());
        continue;
      }
    }
    JobState state = job.has_best() ? yirage::v1::SUCCEEDED : yirage::v1::FAILED;
    // A job whose cached winner failed says so whatever else it says.
    constexpr char kCacheFailed[] = "the cached winner of job ";
    if (absl::StartsWith(job.message(), kCacheFailed) && message != job.message()) {
      message = message.empty() ? job.message() : absl::StrCat(job.message(), "; ", message);
    }
    // The toolkit and driver its winner was timed under: the result cache
    // answers a later job only where a worker has the same.
    std::string software;
    if (job.has_best() && workers_ != nullptr) {
      // The WorkerStore is on this connection: its ...Locked methods, mu_ held.
      YIRAGE_ASSIGN_OR_RETURN(software, workers_->WorkerSoftwareLocked(job.best().worker_id()));
    }
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s, db_->Prepare("UPDATE jobs SET state=?, finished=?, message=?, software=? "
                                  "WHERE job_id=?"));
    s.Bind(1, static_cast<int64_t>(state))
        .Bind(2, now)
        .Bind(3, message)
        .Bind(4, software)
        .Bind(5, job_id);
    YIRAGE_RETURN_IF_ERROR(s.Run());
    return true;
  }
}

absl::StatusOr<std::optional<JobStore::CacheSource>> JobStore::FindCacheSource(
    const std::string& cache_key, const std::string& backend, const std::string& chip_id,
    const core::Tolerance& tolerance) {
  absl::MutexLock lock(&mu_);
  if (cache_key.empty()) return std::optional<CacheSource>();
  // A candidate's plan; nullopt where the row is gone or unreadable.
  auto load_plan = [&](int64_t candidate_id) -> absl::StatusOr<std::optional<yirage::v1::Plan>> {
    YIRAGE_ASSIGN_OR_RETURN(Statement p,
                            db_->Prepare("SELECT plan FROM candidates WHERE candidate_id=?"));
    p.Bind(1, candidate_id);
    YIRAGE_ASSIGN_OR_RETURN(bool row, p.Step());
    yirage::v1::Plan plan;
    if (!row || !plan.ParseFromString(p.ColumnBlob(0))) return std::optional<yirage::v1::Plan>();
    return std::optional<yirage::v1::Plan>(std::move(plan));
  };
  CacheSource source;
  int64_t baseline_id = 0;
  std::optional<yirage::v1::Plan> winner;
  {
    // Of the latest few that answer, the one whose winner had the best
    // speedup (a run whose winner was the baseline answers only alone).
    static_assert(yirage::v1::SUCCEEDED == 3);  // the jobs_cache index's WHERE clause
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("SELECT job_id, software, baseline_candidate_id FROM jobs INDEXED BY "
                     "jobs_cache WHERE cache_key=? AND backend=? AND chip_id=? AND state = 3 AND "
                     "rtol=? AND atol=? AND software <> '' ORDER BY finished DESC LIMIT 8"));
    s.Bind(1, cache_key)
        .Bind(2, backend)
        .Bind(3, chip_id)
        .Bind(4, tolerance.rtol)
        .Bind(5, tolerance.atol);
    // Ranked by (a kernel of our own won, its speedup).
    std::pair<bool, double> best = {false, -1};
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      YIRAGE_ASSIGN_OR_RETURN(Job found, LoadJobLocked(s.ColumnText(0), /*counts=*/false));
      if (!found.has_best()) continue;
      YIRAGE_ASSIGN_OR_RETURN(std::optional<yirage::v1::Plan> plan,
                              load_plan(found.best().candidate_id()));
      if (!plan.has_value()) continue;
      const std::pair<bool, double> rank = {!plan->baseline(), found.best().speedup()};
      if (rank <= best) continue;
      best = rank;
      winner = std::move(plan);
      source.job_id = s.ColumnText(0);
      source.software = s.ColumnText(1);
      baseline_id = s.ColumnInt(2);
    }
  }
  if (source.job_id.empty()) return std::optional<CacheSource>();
  YIRAGE_ASSIGN_OR_RETURN(std::optional<yirage::v1::Plan> baseline, load_plan(baseline_id));
  if (!baseline.has_value()) {
    return absl::DataLossError(absl::StrCat("job '", source.job_id, "': candidate ", baseline_id,
                                            "'s plan is unreadable"));
  }
  source.plans.push_back(*std::move(baseline));
  if (!winner->baseline()) {  // where the baseline won, it alone answers
    winner->set_description(
        absl::StrCat(winner->description(), " (cached from ", source.job_id, ")"));
    source.plans.push_back(*std::move(winner));
  }
  return std::optional<CacheSource>(std::move(source));
}

absl::StatusOr<bool> JobStore::CachedWinnerFailedLocked(const Job& job) {
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("SELECT status, error FROM candidates WHERE job_id=? AND is_baseline = 0 AND "
                   "final_of = 0 AND confirms = 0 ORDER BY ordinal LIMIT 1"));
  s.Bind(1, job.job_id());
  YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row || s.ColumnInt(0) == yirage::v1::VERIFIED) return false;
  const std::string why =
      absl::StrCat(yirage::v1::CandidateStatus_Name(static_cast<CandidateStatus>(s.ColumnInt(0))),
                   s.ColumnText(1).empty() ? "" : absl::StrCat(": ", s.ColumnText(1)));
  s.Reset();  // no read left open under the transaction below
  // Its source answers no more; this job searches as if it had not been
  // answered (the scheduler's maintenance starts searches of SEARCHING jobs).
  Transaction tx(db_);
  YIRAGE_RETURN_IF_ERROR(tx.status());
  YIRAGE_ASSIGN_OR_RETURN(Statement stale,
                          db_->Prepare("UPDATE jobs SET software='' WHERE job_id=?"));
  stale.Bind(1, job.cached_from());
  YIRAGE_RETURN_IF_ERROR(stale.Run());
  YIRAGE_ASSIGN_OR_RETURN(Statement drop, db_->Prepare("DELETE FROM candidates WHERE job_id=?"));
  drop.Bind(1, job.job_id());
  YIRAGE_RETURN_IF_ERROR(drop.Run());
  YIRAGE_ASSIGN_OR_RETURN(
      Statement search,
      db_->Prepare("UPDATE jobs SET state=?, message=?, baseline_candidate_id=0 WHERE job_id=?"));
  search.Bind(1, static_cast<int64_t>(yirage::v1::SEARCHING))
      .Bind(2, absl::StrCat("the cached winner of job ", job.cached_from(), " failed here (",
                            why.substr(0, 300), "); searched afresh"))
      .Bind(3, job.job_id());
  YIRAGE_RETURN_IF_ERROR(search.Run());
  YIRAGE_RETURN_IF_ERROR(tx.Commit());
  spdlog::info("job {}: the cached winner of job {} failed here ({}); searching", job.job_id(),
               job.cached_from(), why.substr(0, 200));
  return true;
}

absl::StatusOr<JobStore::FinalRoundStep> JobStore::FinalRoundLocked(const std::string& job_id) {
  {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("SELECT 1 FROM candidates WHERE job_id=? AND final_of <> 0 LIMIT 1"));
    s.Bind(1, job_id);
    YIRAGE_ASSIGN_OR_RETURN(bool started, s.Step());
    s.Reset();  // no read left open under the writes below
    if (started) {
      // A finalist that no longer verifies, or failed to compile or run,
      // refutes the search's result of its plan; a round that could not
      // time (its baseline failed, timing failed: errors "final round: ...")
      // says nothing of the finalists, and the search's results stand.
      constexpr char kFailed[] =
          "(f.status = ?3 OR (f.status = ?4 AND f.error NOT LIKE 'final round: %'))";
      // The candidate whose kernel a row runs (its twins, same_kernel_as,
      // fall with it: they are the same code).
      constexpr char kKernelOf[] =
          "(CASE WHEN candidates.same_kernel_as <> 0 THEN candidates.same_kernel_as "
          "ELSE candidates.candidate_id END)";
      YIRAGE_ASSIGN_OR_RETURN(
          Statement refute,
          db_->Prepare(absl::StrCat(
              "UPDATE candidates SET status=?1, error='refuted in the final round: ' || "
              "(SELECT f.error FROM candidates f WHERE f.job_id=?2 AND f.final_of = ",
              kKernelOf, " AND ", kFailed,
              " LIMIT 1) WHERE job_id=?2 AND status=?5 AND final_of = 0 AND confirms = 0 AND ",
              kKernelOf,
              " IN "
              "(SELECT f.final_of FROM candidates f WHERE f.job_id=?2 AND f.final_of <> 0 AND ",
              kFailed, ")")));
      refute.Bind(1, static_cast<int64_t>(yirage::v1::ERROR))
          .Bind(2, job_id)
          .Bind(3, static_cast<int64_t>(yirage::v1::MISMATCH))
          .Bind(4, static_cast<int64_t>(yirage::v1::ERROR))
          .Bind(5, static_cast<int64_t>(yirage::v1::VERIFIED));
      YIRAGE_RETURN_IF_ERROR(refute.Run());
      return db_->Changes() > 0 ? FinalRoundStep::kRefuted : FinalRoundStep::kDone;
    }
  }
  std::vector<int64_t> finalists;
  {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        // Distinct kernels only: a candidate whose kernel is another's
        // (same_kernel_as, its result copied) would be a finalist twice.
        db_->Prepare(absl::StrCat("SELECT candidate_id FROM candidates WHERE job_id=? AND "
                                  "status=? AND confirms = 0 AND final_of = 0 AND "
                                  "same_kernel_as = 0 ORDER BY ",
                                  kSearchOrder, " LIMIT ?")));
    s.Bind(1, job_id)
        .Bind(2, static_cast<int64_t>(yirage::v1::VERIFIED))
        .Bind(3, static_cast<int64_t>(finalists_));
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      finalists.push_back(s.ColumnInt(0));
    }
  }
  // One verified candidate has nothing to be compared with.
  if (finalists.size() < 2) return FinalRoundStep::kDone;
  Transaction tx(db_);
  YIRAGE_RETURN_IF_ERROR(tx.status());
  for (int64_t id : finalists) {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("INSERT INTO candidates (job_id, ordinal, plan, description, is_baseline, "
                     "status, final_of) SELECT job_id, (SELECT MAX(ordinal) + 1 FROM candidates "
                     "WHERE job_id=?1), plan, description, 0, ?2, candidate_id FROM candidates "
                     "WHERE candidate_id=?3 AND job_id=?1"));
    s.Bind(1, job_id).Bind(2, static_cast<int64_t>(yirage::v1::PENDING)).Bind(3, id);
    YIRAGE_RETURN_IF_ERROR(s.Run());
  }
  YIRAGE_RETURN_IF_ERROR(tx.Commit());
  return FinalRoundStep::kStarted;
}

absl::StatusOr<bool> JobStore::FinishIfDone(const std::string& job_id, double now) {
  // In the connection's group commit: its writes (a final round, a
  // confirmation, the job's end) share the transaction of the reports that
  // led to them.
  {
    absl::MutexLock lock(&mu_);
    YIRAGE_ASSIGN_OR_RETURN(bool pending, HasRunnableLocked(job_id));
    if (pending) return false;  // most reports: no write, no group
  }
  bool finished = false;
  YIRAGE_RETURN_IF_ERROR(connection_->group.Run(&mu_, db_, [&]() -> absl::Status {
    YIRAGE_ASSIGN_OR_RETURN(finished, FinishIfDoneLocked(job_id, now));
    return absl::OkStatus();
  }));
  return finished;
}

absl::StatusOr<MaintenanceReport> JobStore::Maintain(double now,
                                                     const std::vector<std::string>& touched) {
  absl::MutexLock lock(&mu_);
  MaintenanceReport report;
  std::vector<std::string> touched_jobs = touched;
  {
    Transaction tx(db_);
    YIRAGE_RETURN_IF_ERROR(tx.status());
    YIRAGE_RETURN_IF_ERROR(FailOnBaselineErrorLocked(now, &report));
    YIRAGE_RETURN_IF_ERROR(SkipOverBudgetLocked(now, &report, &touched_jobs));
    YIRAGE_RETURN_IF_ERROR(tx.Commit());
  }
  // Outside the transaction: it asks the WorkerStore (see FinishIfDoneLocked).
  YIRAGE_RETURN_IF_ERROR(SkipUnconfirmableLocked(now, &touched_jobs));
  YIRAGE_RETURN_IF_ERROR(FindDoneJobsLocked(&touched_jobs));
  for (const std::string& job_id : touched_jobs) {
    YIRAGE_ASSIGN_OR_RETURN(bool finished, FinishIfDoneLocked(job_id, now));
    if (finished) report.jobs_finished.push_back(job_id);
  }
  return report;
}

absl::Status JobStore::FailOnBaselineErrorLocked(double now, MaintenanceReport* report) {
  // Speedups are against the baseline: a job whose baseline failed (it
  // killed its workers, or did not compile or run) cannot report one. A
  // baseline refuted by a second worker (it had a confirmation row) ran
  // fine; only its reported time was false, and every batch times the
  // baseline afresh, so the job goes on.
  std::vector<std::pair<std::string, std::string>> failed;  // job, the baseline's error
  {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("SELECT j.job_id, c.error FROM jobs j JOIN candidates c ON "
                     "c.candidate_id = j.baseline_candidate_id WHERE j.state IN (?,?) AND "
                     "c.status = ? AND NOT EXISTS (SELECT 1 FROM candidates r WHERE "
                     "r.job_id = j.job_id AND r.confirms = c.candidate_id AND r.confirms <> 0)"));
    s.Bind(1, static_cast<int64_t>(yirage::v1::QUEUED))
        .Bind(2, static_cast<int64_t>(yirage::v1::RUNNING))
        .Bind(3, static_cast<int64_t>(yirage::v1::ERROR));
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      failed.emplace_back(s.ColumnText(0), s.ColumnText(1));
    }
  }
  for (const auto& [job_id, error] : failed) {
    YIRAGE_RETURN_IF_ERROR(EndJobLocked(job_id, yirage::v1::FAILED,
                                        absl::StrCat("the baseline failed: ", error),
                                        "the job's baseline failed", now));
    report->jobs_finished.push_back(job_id);
  }
  return absl::OkStatus();
}

absl::Status JobStore::SkipOverBudgetLocked(double now, MaintenanceReport* report,
                                            std::vector<std::string>* touched_jobs) {
  // Time budgets: pending candidates of jobs out of time are skipped;
  // leased ones finish their evaluation, and confirmations run all the same
  // (one or two a job, and they decide its answer).
  {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("SELECT job_id, backend FROM jobs WHERE state=? AND budget_seconds > 0 AND "
                     "started > 0 AND started + budget_seconds <= ?"));
    s.Bind(1, static_cast<int64_t>(yirage::v1::RUNNING)).Bind(2, now);
    std::vector<std::pair<std::string, std::string>> over;  // job, backend
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      over.emplace_back(s.ColumnText(0), s.ColumnText(1));
    }
    for (const auto& [job_id, backend] : over) {
      YIRAGE_ASSIGN_OR_RETURN(Statement skip,
                              db_->Prepare("UPDATE candidates SET status=?, error=?, finished=? "
                                           "WHERE job_id=? AND status=? AND confirms = 0 AND "
                                           "final_of = 0"));
      skip.Bind(1, static_cast<int64_t>(yirage::v1::SKIPPED))
          .Bind(2, "time budget exhausted")
          .Bind(3, now)
          .Bind(4, job_id)
          .Bind(5, static_cast<int64_t>(yirage::v1::PENDING));
      YIRAGE_RETURN_IF_ERROR(skip.Run());
      report->candidates_skipped += db_->Changes();
      if (db_->Changes() > 0) report->candidates_skipped_by_backend[backend] += db_->Changes();
      touched_jobs->push_back(job_id);
    }
  }
  return absl::OkStatus();
}

absl::Status JobStore::SkipUnconfirmableLocked(double now, std::vector<std::string>* touched_jobs) {
  if (workers_ == nullptr) return absl::OkStatus();
  // Pending confirmations (the literals match the partial index's WHERE).
  static_assert(yirage::v1::PENDING == 1);
  struct Pending {
    int64_t candidate_id;
    std::string job_id, exclude_worker, backend, chip_id;
  };
  std::vector<Pending> pending;
  {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("SELECT c.candidate_id, c.job_id, c.exclude_worker, j.backend, j.chip_id "
                     "FROM candidates c INDEXED BY candidates_pending_confirmations JOIN jobs j "
                     "ON j.job_id = c.job_id WHERE c.confirms <> 0 AND c.status = 1"));
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      pending.push_back(
          {s.ColumnInt(0), s.ColumnText(1), s.ColumnText(2), s.ColumnText(3), s.ColumnText(4)});
    }
  }
  for (const Pending& p : pending) {
    // The WorkerStore is on this connection: its ...Locked methods, mu_ held.
    YIRAGE_ASSIGN_OR_RETURN(int confirmers, workers_->CountConfirmersLocked(
                                                now, p.backend, p.chip_id, p.exclude_worker));
    if (confirmers > 0) continue;
    // Its only workers left: the job must not wait for them forever.
    YIRAGE_ASSIGN_OR_RETURN(Statement skip,
                            db_->Prepare("UPDATE candidates SET status=?, error=?, finished=? "
                                         "WHERE candidate_id=? AND status=?"));
    skip.Bind(1, static_cast<int64_t>(yirage::v1::SKIPPED))
        .Bind(2, "no second worker connected")
        .Bind(3, now)
        .Bind(4, p.candidate_id)
        .Bind(5, static_cast<int64_t>(yirage::v1::PENDING));
    YIRAGE_RETURN_IF_ERROR(skip.Run());
    touched_jobs->push_back(p.job_id);
  }
  return absl::OkStatus();
}

absl::Status JobStore::FindDoneJobsLocked(std::vector<std::string>* touched_jobs) {
  // Jobs with nothing left (also catches jobs left unfinished by a crash).
  {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("SELECT job_id FROM jobs j WHERE state IN (?,?) AND NOT EXISTS (SELECT 1 "
                     "FROM candidates c WHERE c.job_id=j.job_id AND c.status IN (?,?))"));
    s.Bind(1, static_cast<int64_t>(yirage::v1::QUEUED))
        .Bind(2, static_cast<int64_t>(yirage::v1::RUNNING))
        .Bind(3, static_cast<int64_t>(yirage::v1::PENDING))
        .Bind(4, static_cast<int64_t>(yirage::v1::LEASED));
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      touched_jobs->push_back(s.ColumnText(0));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<JobState, int>> JobStore::CountJobsByState() {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("SELECT state, COUNT(*) FROM jobs GROUP BY state"));
  std::map<JobState, int> out;
  for (;;) {
    YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out[static_cast<JobState>(s.ColumnInt(0))] = static_cast<int>(s.ColumnInt(1));
  }
  return out;
}

absl::StatusOr<std::map<std::string, int>> JobStore::CountQueuedCandidatesByBackend() {
  absl::MutexLock lock(&mu_);
  // The runnable jobs through their partial index (the literal states match
  // its WHERE), then each job's pending rows through candidates_by_job.
  static_assert(yirage::v1::QUEUED == 1 && yirage::v1::RUNNING == 2);
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("SELECT j.backend, COUNT(*) FROM jobs j INDEXED BY jobs_runnable JOIN "
                   "candidates c ON c.job_id = j.job_id AND c.status = ? WHERE j.state IN (1, 2) "
                   "GROUP BY j.backend"));
  s.Bind(1, static_cast<int64_t>(yirage::v1::PENDING));
  return s.CountsByKey();
}

absl::StatusOr<double> JobStore::ResultStoredUnix(int64_t candidate_id) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("SELECT finished FROM candidates WHERE candidate_id=?"));
  s.Bind(1, candidate_id);
  YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return absl::NotFoundError(absl::StrCat("no candidate ", candidate_id));
  return s.ColumnDouble(0);
}

}  // namespace yirage::server
