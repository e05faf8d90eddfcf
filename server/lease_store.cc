#include "server/lease_store.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc_util.h"
#include "core/status_macros.h"
#include "server/schema.h"

namespace yirage::server {

using yirage::v1::CandidateStatus;

namespace {

// How a lease token is drawn: 128 bits from the system's random source.
constexpr int kLeaseTokenHexDigits = 32;

}  // namespace

absl::StatusOr<LeaseStore::Holder> LeaseStore::BatchHolderLocked(const std::string& batch_id,
                                                                 const std::string& worker_id,
                                                                 const std::string& lease_token) {
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT worker_id, lease_token FROM batches WHERE batch_id=?"));
  s.Bind(1, batch_id);
  YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return Holder::kGone;
  const bool token_ok = ConstantTimeEquals(s.ColumnText(1), lease_token);
  return token_ok && s.ColumnText(0) == worker_id ? Holder::kThisWorker : Holder::kSomeoneElse;
}

absl::StatusOr<std::unique_ptr<LeaseStore>> LeaseStore::Open(const std::string& path,
                                                             const LeaseStoreOptions& options) {
  YIRAGE_ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection, Connection::Open(path, "leases"));
  return OnConnection(std::move(connection), options);
}

absl::StatusOr<std::unique_ptr<LeaseStore>> LeaseStore::OnConnection(
    std::shared_ptr<Connection> connection, const LeaseStoreOptions& options) {
  YIRAGE_ASSIGN_OR_RETURN(auto checkpoints,
                          Database::Open(connection->path, SchemaMigrations(), "checkpoints"));
  return std::unique_ptr<LeaseStore>(
      new LeaseStore(std::move(connection), std::move(checkpoints), options));
}

absl::Status LeaseStore::Checkpoint() {
  absl::MutexLock lock(&checkpoint_mu_);
  return checkpoint_db_->Exec("PRAGMA wal_checkpoint(PASSIVE)");
}

absl::StatusOr<RecordReport> LeaseStore::RecordResults(
    const std::string& worker_id, const std::string& batch_id, const std::string& lease_token,
    int64_t current_candidate,
    const google::protobuf::RepeatedPtrField<yirage::v1::CandidateResult>& results, double now) {
  RecordReport report;
  if (results.empty()) return report;
  // The results themselves first: each candidate once, verified times
  // finite and positive.
  std::set<int64_t> seen;
  for (int i = 0; i < results.size(); ++i) {
    const yirage::v1::CandidateResult& r = results[i];
    const std::string where = absl::StrCat("completed[", i, "] (candidate ", r.candidate_id(), ")");
    if (!seen.insert(r.candidate_id()).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": reported twice in one call"));
    }
    if (r.status() != yirage::v1::VERIFIED) continue;
    // baseline_time_us 0 means the batch's baseline did not verify, so
    // the speedup is unknown.
    if (!(r.time_us() > 0) || !std::isfinite(r.time_us())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": time_us is ", r.time_us(),
                       "; a verified result's time must be finite and > 0"));
    }
    if (!(r.baseline_time_us() >= 0) || !std::isfinite(r.baseline_time_us())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": baseline_time_us is ", r.baseline_time_us(),
                       "; it must be finite and >= 0 (0: the baseline did not verify)"));
    }
  }
  // With the reports and leases of other workers in one transaction.
  YIRAGE_RETURN_IF_ERROR(group_.Run(&mu_, db_, [&]() -> absl::Status {
    mu_.AssertHeld();
    report = RecordReport();  // nothing of a failed attempt
    return RecordResultsLocked(worker_id, batch_id, lease_token, current_candidate, results, now,
                               &report);
  }));
  return report;
}

absl::Status LeaseStore::RecordResultsLocked(
    const std::string& worker_id, const std::string& batch_id, const std::string& lease_token,
    int64_t current_candidate,
    const google::protobuf::RepeatedPtrField<yirage::v1::CandidateResult>& results, double now,
    RecordReport* out) {
  RecordReport& report = *out;
  std::string job_id;
  {
    Transaction tx(db_);
    YIRAGE_RETURN_IF_ERROR(tx.status());
    YIRAGE_ASSIGN_OR_RETURN(Holder holder, BatchHolderLocked(batch_id, worker_id, lease_token));
    if (holder == Holder::kSomeoneElse) {
      return absl::InvalidArgumentError(
          absl::StrCat("executing.batch_id: batch ", batch_id,
                       " is not leased to this worker under this lease token; nothing stored"));
    }
    if (holder == Holder::kGone) {
      // Expired, finished or cancelled: acknowledged, so that the worker
      // stops resending them, and dropped.
      for (const auto& r : results) report.acknowledged.push_back(r.candidate_id());
      return absl::OkStatus();
    }
    for (const auto& r : results) {
      CandidateStatus status = r.status();
      if (status != yirage::v1::VERIFIED && status != yirage::v1::MISMATCH &&
          status != yirage::v1::ERROR) {
        status = yirage::v1::ERROR;  // a worker may only report final outcomes
      }
      YIRAGE_ASSIGN_OR_RETURN(
          Statement s,
          db_->Prepare("UPDATE candidates SET status=?, time_us=?, baseline_time_us=?, "
                       "max_abs_error=?, max_rel_error=?, error=?, source=?, worker_id=?, "
                       "finished=?, same_kernel_as=?, launch=?, batch_id=NULL, time_iqr_us=? "
                       "WHERE candidate_id=? AND batch_id=? AND status=?"));
      s.Bind(1, static_cast<int64_t>(status))
          .Bind(2, r.time_us())
          .Bind(3, r.baseline_time_us())
          .Bind(4, r.max_abs_error())
          .Bind(5, r.max_rel_error())
          .Bind(6, r.error())
          .Bind(7, r.source())
          .Bind(8, worker_id)
          .Bind(9, now)
          .Bind(10, r.same_kernel_as())
          .Bind(12, std::isfinite(r.time_iqr_us()) ? std::max(0.0, r.time_iqr_us()) : 0.0)
          .Bind(13, r.candidate_id())
          .Bind(14, batch_id)
          .Bind(15, static_cast<int64_t>(yirage::v1::LEASED));
      if (r.has_launch()) {
        s.BindBlob(11, r.launch().SerializeAsString());
      } else {
        s.BindNull(11);
      }
      YIRAGE_RETURN_IF_ERROR(s.Run());
      if (db_->Changes() > 0) report.newly_stored[status]++;
      report.acknowledged.push_back(r.candidate_id());
    }
    YIRAGE_ASSIGN_OR_RETURN(Statement b,
                            db_->Prepare("SELECT job_id, created FROM batches WHERE batch_id=?"));
    b.Bind(1, batch_id);
    YIRAGE_ASSIGN_OR_RETURN(bool has_batch, b.Step());
    if (has_batch) {
      job_id = b.ColumnText(0);
      const double leased_at = b.ColumnDouble(1);
      // A batch whose candidates all reached a final status is done.
      YIRAGE_ASSIGN_OR_RETURN(Statement left,
                              db_->Prepare("SELECT COUNT(*) FROM candidates WHERE batch_id=?"));
      left.Bind(1, batch_id);
      YIRAGE_ASSIGN_OR_RETURN(bool row, left.Step());
      if (row && left.ColumnInt(0) == 0) {
        YIRAGE_ASSIGN_OR_RETURN(Statement del,
                                db_->Prepare("DELETE FROM batches WHERE batch_id=?"));
        del.Bind(1, batch_id);
        YIRAGE_RETURN_IF_ERROR(del.Run());
        report.batch_completed = true;
        report.batch_held_seconds = std::max(0.0, now - leased_at);
      } else {
        YIRAGE_ASSIGN_OR_RETURN(report.still_leased,
                                RenewLocked(batch_id, worker_id, current_candidate, now));
      }
    }
    YIRAGE_RETURN_IF_ERROR(tx.Commit());
  }
  report.job_id = std::move(job_id);
  return absl::OkStatus();
}

absl::StatusOr<bool> LeaseStore::RenewLease(const std::string& worker_id,
                                            const std::string& batch_id,
                                            const std::string& lease_token,
                                            int64_t current_candidate, double now) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(Holder holder, BatchHolderLocked(batch_id, worker_id, lease_token));
  if (holder != Holder::kThisWorker) return false;
  return RenewLocked(batch_id, worker_id, current_candidate, now);
}

absl::StatusOr<bool> LeaseStore::RenewLocked(const std::string& batch_id,
                                             const std::string& worker_id,
                                             int64_t current_candidate, double now) {
  YIRAGE_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("UPDATE batches SET lease_expires=?, current_candidate=? "
                                       "WHERE batch_id=? AND worker_id=?"));
  s.Bind(1, now + options_.lease_seconds)
      .Bind(2, current_candidate)
      .Bind(3, batch_id)
      .Bind(4, worker_id);
  YIRAGE_RETURN_IF_ERROR(s.Run());
  return db_->Changes() > 0;
}

absl::StatusOr<int> LeaseStore::ReleaseWorkerBatches(const std::string& worker_id, double now,
                                                     double* held_seconds) {
  absl::MutexLock lock(&mu_);
  Transaction tx(db_);
  YIRAGE_RETURN_IF_ERROR(tx.status());
  if (held_seconds != nullptr) {
    YIRAGE_ASSIGN_OR_RETURN(Statement held,
                            db_->Prepare("SELECT created FROM batches WHERE worker_id=?"));
    held.Bind(1, worker_id);
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, held.Step());
      if (!row) break;
      *held_seconds += std::max(0.0, now - held.ColumnDouble(0));
    }
  }
  YIRAGE_ASSIGN_OR_RETURN(
      Statement requeue,
      db_->Prepare("UPDATE candidates SET status=?, batch_id=NULL WHERE status=? AND batch_id IN "
                   "(SELECT batch_id FROM batches WHERE worker_id=?)"));
  requeue.Bind(1, static_cast<int64_t>(yirage::v1::PENDING))
      .Bind(2, static_cast<int64_t>(yirage::v1::LEASED))
      .Bind(3, worker_id);
  YIRAGE_RETURN_IF_ERROR(requeue.Run());
  int released = db_->Changes();
  YIRAGE_ASSIGN_OR_RETURN(Statement del, db_->Prepare("DELETE FROM batches WHERE worker_id=?"));
  del.Bind(1, worker_id);
  YIRAGE_RETURN_IF_ERROR(del.Run());
  YIRAGE_RETURN_IF_ERROR(tx.Commit());
  return released;
}

absl::StatusOr<std::optional<yirage::v1::Batch>> LeaseStore::LeaseBatch(
    const std::string& worker_id, const std::string& backend, double now) {
  std::optional<LeasedBlobs> leased;
  // With the reports and leases of other workers in one transaction.
  YIRAGE_RETURN_IF_ERROR(group_.Run(&mu_, db_, [&]() -> absl::Status {
    mu_.AssertHeld();
    YIRAGE_ASSIGN_OR_RETURN(leased, LeaseBatchLocked(worker_id, backend, now));
    return absl::OkStatus();
  }));
  if (!leased.has_value()) return std::optional<yirage::v1::Batch>();
  // Parsed outside the store's lock and SQLite's write lock, which every
  // other report and lease waits for. Unreadable blobs were written by no
  // build of ours: the batch stays leased and expires like a crashed
  // worker's, with the error here.
  yirage::v1::Batch& batch = leased->batch;
  if (!batch.mutable_graph()->ParseFromString(leased->graph)) {
    return absl::InternalError("stored graph unreadable for " + batch.job_id());
  }
  if (!batch.mutable_baseline()->ParseFromString(leased->baseline)) {
    return absl::InternalError("baseline plan unreadable for " + batch.job_id());
  }
  for (int i = 0; i < batch.candidates_size(); ++i) {
    if (!batch.mutable_candidates(i)->mutable_plan()->ParseFromString(leased->plans[i])) {
      return absl::InternalError(absl::StrCat("stored plan of candidate ",
                                              batch.candidates(i).candidate_id(),
                                              " unreadable for ", batch.job_id()));
    }
  }
  return std::optional<yirage::v1::Batch>(std::move(batch));
}

absl::StatusOr<std::optional<LeaseStore::LeasedBlobs>> LeaseStore::LeaseBatchLocked(
    const std::string& worker_id, const std::string& backend, double now) {
  Transaction tx(db_);
  YIRAGE_RETURN_IF_ERROR(tx.status());
  // The registry chip of the worker's device ("" when unknown): a
  // confirmation is measured on the job's chip.
  std::string chip_id;
  {
    YIRAGE_ASSIGN_OR_RETURN(Statement s,
                            db_->Prepare("SELECT chip_id FROM workers WHERE worker_id=?"));
    s.Bind(1, worker_id);
    YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) chip_id = s.ColumnText(0);
  }
  // Oldest runnable job of this backend that still has a pending candidate
  // this worker may run: of the worker's chip where the job is bound to its
  // chip (a worker of no known chip takes none of those), time left in the
  // job's budget (confirmations and final rounds are
  // exempt: they are few and decide the answer), not excluded from it (a
  // confirmation never goes to the worker whose result it checks), and for
  // a confirmation the job's chip.
  // The states are literals so that SQLite walks the jobs_runnable index
  // (its WHERE clause must match) in leasing order.
  static_assert(yirage::v1::QUEUED == 1 && yirage::v1::RUNNING == 2);
  YIRAGE_ASSIGN_OR_RETURN(
      Statement pick,
      db_->Prepare("SELECT j.job_id, j.graph, j.rtol, j.atol, j.seed, j.baseline_candidate_id, "
                   "(j.budget_seconds <= 0 OR j.started = 0 OR j.started + j.budget_seconds > ?2), "
                   "(j.chip_id = '' OR ?5 = '' OR j.chip_id = ?5) "
                   "FROM jobs j INDEXED BY jobs_runnable WHERE j.state IN (1, 2) AND j.backend=?1 "
                   "AND (j.chip_bound = 0 OR j.chip_id = ?5) "
                   "AND EXISTS (SELECT 1 FROM candidates c WHERE c.job_id=j.job_id AND c.status=?3 "
                   "AND c.exclude_worker<>?4 "
                   "AND (c.confirms = 0 OR j.chip_id = '' OR ?5 = '' OR j.chip_id = ?5) "
                   "AND (c.confirms <> 0 OR c.final_of <> 0 OR j.budget_seconds <= 0 "
                   "OR j.started = 0 "
                   "OR j.started + j.budget_seconds > ?2)) "
                   "ORDER BY j.last_leased, j.created, j.job_id LIMIT 1"));
  pick.Bind(1, backend)
      .Bind(2, now)
      .Bind(3, static_cast<int64_t>(yirage::v1::PENDING))
      .Bind(4, worker_id)
      .Bind(5, chip_id);
  YIRAGE_ASSIGN_OR_RETURN(bool found, pick.Step());
  if (!found) return std::optional<LeasedBlobs>();
  const int64_t in_budget = pick.ColumnInt(6);
  const int64_t may_confirm = pick.ColumnInt(7);

  LeasedBlobs leased;
  yirage::v1::Batch& batch = leased.batch;
  batch.set_batch_id("batch-" + RandomHex(12));
  batch.set_job_id(pick.ColumnText(0));
  leased.graph = pick.ColumnBlob(1);
  batch.mutable_tolerance()->set_rtol(pick.ColumnDouble(2));
  batch.mutable_tolerance()->set_atol(pick.ColumnDouble(3));
  batch.set_seed(static_cast<uint64_t>(pick.ColumnInt(4)));
  int64_t baseline_id = pick.ColumnInt(5);
  batch.set_baseline_candidate_id(baseline_id);
  batch.set_lease_expires_unix(now + options_.lease_seconds);
  batch.set_lease_token(SecureRandomHex(kLeaseTokenHexDigits));

  // The job's final round, where its finalists wait: they are leased alone,
  // all together.
  bool final_round = false;
  {
    YIRAGE_ASSIGN_OR_RETURN(Statement s,
                            db_->Prepare("SELECT 1 FROM candidates WHERE job_id=? AND status=? AND "
                                         "final_of <> 0 LIMIT 1"));
    s.Bind(1, batch.job_id()).Bind(2, static_cast<int64_t>(yirage::v1::PENDING));
    YIRAGE_ASSIGN_OR_RETURN(final_round, s.Step());
  }
  batch.set_final_round(final_round);
  {
    YIRAGE_ASSIGN_OR_RETURN(Statement s,
                            db_->Prepare("SELECT plan FROM candidates WHERE candidate_id=?"));
    s.Bind(1, baseline_id);
    YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return absl::InternalError("baseline plan missing for " + batch.job_id());
    leased.baseline = s.ColumnBlob(0);
  }
  {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("SELECT candidate_id, plan FROM candidates WHERE job_id=?1 AND status=?2 "
                     "AND exclude_worker<>?3 AND (confirms = 0 OR ?4) AND "
                     "(confirms <> 0 OR final_of <> 0 OR ?5) AND (final_of <> 0) = ?7 "
                     "ORDER BY ordinal LIMIT ?6"));
    s.Bind(1, batch.job_id())
        .Bind(2, static_cast<int64_t>(yirage::v1::PENDING))
        .Bind(3, worker_id)
        .Bind(4, may_confirm)
        .Bind(5, in_budget)
        // A final round goes to one worker whole, however many finalists.
        .Bind(6, final_round ? int64_t{1} << 20 : static_cast<int64_t>(options_.batch_size))
        .Bind(7, int64_t{final_round});
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      batch.add_candidates()->set_candidate_id(s.ColumnInt(0));
      leased.plans.push_back(s.ColumnBlob(1));
    }
  }
  for (const auto& c : batch.candidates()) {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("UPDATE candidates SET status=?, batch_id=? WHERE candidate_id=?"));
    s.Bind(1, static_cast<int64_t>(yirage::v1::LEASED))
        .Bind(2, batch.batch_id())
        .Bind(3, c.candidate_id());
    YIRAGE_RETURN_IF_ERROR(s.Run());
  }
  {
    YIRAGE_ASSIGN_OR_RETURN(Statement s,
                            db_->Prepare("INSERT INTO batches (batch_id, job_id, worker_id, "
                                         "lease_expires, created, lease_token) VALUES "
                                         "(?,?,?,?,?,?)"));
    s.Bind(1, batch.batch_id())
        .Bind(2, batch.job_id())
        .Bind(3, worker_id)
        .Bind(4, now + options_.lease_seconds)
        .Bind(5, now)
        .Bind(6, batch.lease_token());
    YIRAGE_RETURN_IF_ERROR(s.Run());
  }
  {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("UPDATE jobs SET state=?, started=CASE WHEN started=0 THEN ? ELSE started "
                     "END, last_leased=? WHERE job_id=?"));
    s.Bind(1, static_cast<int64_t>(yirage::v1::RUNNING))
        .Bind(2, now)
        .Bind(3, now)
        .Bind(4, batch.job_id());
    YIRAGE_RETURN_IF_ERROR(s.Run());
  }
  YIRAGE_RETURN_IF_ERROR(tx.Commit());
  return std::optional<LeasedBlobs>(std::move(leased));
}

absl::StatusOr<ExpiryReport> LeaseStore::ExpireLeases(double now) {
  absl::MutexLock lock(&mu_);
  ExpiryReport report;
  Transaction tx(db_);
  YIRAGE_RETURN_IF_ERROR(tx.status());
  // Expired leases: the candidate that was running when the worker went
  // silent is blamed; the others go back to the queue untouched.
  struct Expired {
    std::string batch_id, job_id, worker_id;
    int64_t current;
    double created;
    std::string backend;
  };
  std::vector<Expired> expired;
  {
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s,
        db_->Prepare("SELECT b.batch_id, b.job_id, b.worker_id, b.current_candidate, b.created, "
                     "COALESCE(j.backend, '') FROM batches b LEFT JOIN jobs j ON "
                     "j.job_id = b.job_id WHERE b.lease_expires < ?"));
    s.Bind(1, now);
    for (;;) {
      YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      expired.push_back({s.ColumnText(0), s.ColumnText(1), s.ColumnText(2), s.ColumnInt(3),
                         s.ColumnDouble(4), s.ColumnText(5)});
    }
  }
  for (const Expired& e : expired) {
    report.leases_expired++;
    report.jobs.push_back(e.job_id);
    ExpiryReport::Lease& lease = report.leases.emplace_back();
    lease.backend = e.backend;
    lease.worker_id = e.worker_id;
    lease.held_seconds = std::max(0.0, now - e.created);
    // Blamed: the candidate that was running, or, when the worker died
    // before any candidate of the batch started (inputs, the reference or
    // the compile), every candidate still in the batch, since each was
    // delivered and never reported.
    const std::string blamed = "batch_id=? AND (?=0 OR candidate_id=?)";
    YIRAGE_ASSIGN_OR_RETURN(
        Statement s, db_->Prepare("UPDATE candidates SET attempts=attempts+1 WHERE " + blamed));
    s.Bind(1, e.batch_id).Bind(2, e.current).Bind(3, e.current);
    YIRAGE_RETURN_IF_ERROR(s.Run());
    YIRAGE_ASSIGN_OR_RETURN(
        Statement f, db_->Prepare("UPDATE candidates SET status=?, batch_id=NULL, finished=?, "
                                  "error=? || attempts || ? WHERE attempts >= ? AND " +
                                  blamed));
    const std::string after_count =
        e.current != 0 ? absl::StrCat(" times (last: ", e.worker_id, "); not handed out again")
                       : absl::StrCat(" times before it reported (last: ", e.worker_id,
                                      ", before any candidate of the batch started: inputs, "
                                      "reference or compile); not handed out again");
    f.Bind(1, static_cast<int64_t>(yirage::v1::ERROR))
        .Bind(2, now)
        .Bind(3, e.current != 0 ? "killed its worker " : "its worker died ")
        .Bind(4, after_count)
        .Bind(5, static_cast<int64_t>(options_.max_attempts))
        .Bind(6, e.batch_id)
        .Bind(7, e.current)
        .Bind(8, e.current);
    YIRAGE_RETURN_IF_ERROR(f.Run());
    report.candidates_failed += db_->Changes();
    lease.candidates_failed = db_->Changes();
    YIRAGE_ASSIGN_OR_RETURN(
        Statement requeue,
        db_->Prepare("UPDATE candidates SET status=?, batch_id=NULL WHERE batch_id=?"));
    requeue.Bind(1, static_cast<int64_t>(yirage::v1::PENDING)).Bind(2, e.batch_id);
    YIRAGE_RETURN_IF_ERROR(requeue.Run());
    report.candidates_requeued += db_->Changes();
    YIRAGE_ASSIGN_OR_RETURN(Statement del, db_->Prepare("DELETE FROM batches WHERE batch_id=?"));
    del.Bind(1, e.batch_id);
    YIRAGE_RETURN_IF_ERROR(del.Run());
  }
  YIRAGE_RETURN_IF_ERROR(tx.Commit());
  return report;
}

}  // namespace yirage::server
