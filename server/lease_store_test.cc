#include "server/lease_store.h"

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/store_test_util.h"

namespace yirage::server::testing {
namespace {

using LeaseStoreTest = StoreTest;

TEST_F(LeaseStoreTest, LeaseRecordAndFinish) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(3), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = leases_->LeaseBatch("w1", "cpu", 1001);
  ASSERT_TRUE(batch.ok() && batch->has_value());
  const auto& b = **batch;
  EXPECT_EQ(b.candidates_size(), 2);
  EXPECT_TRUE(b.baseline().baseline());
  EXPECT_EQ(b.baseline_candidate_id(), b.candidates(0).candidate_id());
  // Another backend gets nothing.
  auto none = leases_->LeaseBatch("w2", "cuda", 1001);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(store_->GetJob(*id)->state(), yirage::v1::RUNNING);

  // The second candidate's result was taken from the first's (the same
  // kernel): stored with it and listed.
  CandidateResult twin = Verified(b.candidates(1).candidate_id(), 40);
  twin.set_same_kernel_as(b.candidates(0).candidate_id());
  twin.mutable_launch()->add_launches()->set_name("yr_p1_k0");  // how its source is run
  auto report =
      leases_->RecordResults("w1", b.batch_id(), b.lease_token(), 0,
                             Results({Verified(b.candidates(0).candidate_id(), 100), twin}), 1002);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->acknowledged.size(), 2u);
  EXPECT_EQ(report->newly_stored[yirage::v1::VERIFIED], 2);
  auto listed = store_->ListCandidates(*id);
  ASSERT_TRUE(listed.ok());
  for (const auto& c : *listed) {
    EXPECT_EQ(c.same_kernel_as(), c.candidate_id() == b.candidates(1).candidate_id()
                                      ? b.candidates(0).candidate_id()
                                      : 0);
  }
  // Recording again (a retry after a lost reply) is acknowledged, not double counted.
  auto again =
      leases_->RecordResults("w1", b.batch_id(), b.lease_token(), 0,
                             Results({Verified(b.candidates(1).candidate_id(), 40)}), 1003);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->acknowledged.size(), 1u);
  EXPECT_EQ(again->newly_stored[yirage::v1::VERIFIED], 0);

  auto batch2 = leases_->LeaseBatch("w1", "cpu", 1004);
  ASSERT_TRUE(batch2.ok() && batch2->has_value());
  EXPECT_EQ((*batch2)->candidates_size(), 1);
  CandidateResult mismatch;
  mismatch.set_candidate_id((*batch2)->candidates(0).candidate_id());
  mismatch.set_status(yirage::v1::MISMATCH);
  mismatch.set_error("Y[3]: got 1, expected 2");
  auto r2 = leases_->RecordResults("w1", (*batch2)->batch_id(), (*batch2)->lease_token(), 0,
                                   Results({mismatch}), 1005);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->job_id, *id) << "the batch's job, for the job store to finish";
  auto finished = store_->FinishIfDone(*id, 1005);
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_TRUE(*finished);

  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::SUCCEEDED);
  EXPECT_EQ(job->candidates_evaluated(), 3);
  EXPECT_EQ(job->candidates_failed(), 1);
  ASSERT_TRUE(job->has_best());
  EXPECT_DOUBLE_EQ(job->best().time_us(), 40);
  EXPECT_DOUBLE_EQ(job->best().speedup(), 2.5);
  auto best = store_->GetBestKernel(*id);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_NE(best->source.find("yirage_plan_0"), std::string::npos);
  ASSERT_TRUE(best->launch.has_value()) << "the launch manifest is stored with the result";
  EXPECT_EQ(best->launch->launches(0).name(), "yr_p1_k0");
  // Any verified candidate exports; a mismatched one, another job's or an
  // unknown one does not, and says why.
  const int64_t first = b.candidates(0).candidate_id();
  auto other = store_->GetKernel(*id, first);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->candidate.candidate_id(), first);
  EXPECT_FALSE(other->source.empty());
  auto bad = store_->GetKernel(*id, (*batch2)->candidates(0).candidate_id());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition) << bad.status();
  EXPECT_NE(bad.status().message().find("MISMATCH"), absl::string_view::npos);
  EXPECT_EQ(store_->GetKernel(*id, 999999).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetKernel("job-none", first).status().code(), absl::StatusCode::kNotFound);
}

// ListWorkers' current batch is the lease table's: the batch leased to the
// worker until its last result is in.
TEST_F(LeaseStoreTest, ListedWorkersShowTheBatchLeasedToThem) {
  yirage::v1::SynchronizeRequest w1;
  w1.set_worker_id("w1");
  w1.set_backend("cpu");
  ASSERT_TRUE(workers_->Upsert(w1, 1000).ok());
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(1), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = leases_->LeaseBatch("w1", "cpu", 1001);
  ASSERT_TRUE(batch.ok() && batch->has_value());
  const yirage::v1::Batch& b = **batch;
  auto listed = workers_->List(1001);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].current_batch(), b.batch_id());
  google::protobuf::RepeatedPtrField<CandidateResult> all;
  for (const auto& c : b.candidates()) *all.Add() = Verified(c.candidate_id(), 50);
  ASSERT_TRUE(leases_->RecordResults("w1", b.batch_id(), b.lease_token(), 0, all, 1002).ok());
  listed = workers_->List(1002);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ((*listed)[0].current_batch(), "") << "every result in: the batch is done";
}

// A worker's calls that change nothing but the time are written once a
// second: last_seen moves on after a second, and any other change (its
// state) is written at once.
TEST_F(LeaseStoreTest, UnchangedWorkerCallsAreWrittenOnceASecond) {
  yirage::v1::SynchronizeRequest w1;
  w1.set_worker_id("w1");
  w1.set_backend("cpu");
  ASSERT_TRUE(workers_->Upsert(w1, 1000).ok());
  ASSERT_TRUE(workers_->Upsert(w1, 1000.5).ok());
  EXPECT_EQ((*workers_->List(1001))[0].last_seen_unix(), 1000);
  ASSERT_TRUE(workers_->Upsert(w1, 1001.25).ok());
  EXPECT_EQ((*workers_->List(1002))[0].last_seen_unix(), 1001.25);
  w1.mutable_status()->mutable_idle()->set_stopping(true);
  ASSERT_TRUE(workers_->Upsert(w1, 1001.5).ok());
  EXPECT_EQ((*workers_->List(1002))[0].state(), "stopping");
  EXPECT_EQ((*workers_->List(1002))[0].last_seen_unix(), 1001.5);
}

// (frames in the log, frames copied into the database) of a passive
// checkpoint run on a connection of the test's own.
std::pair<int, int> WalFrames(const std::filesystem::path& db) {
  sqlite3* raw = nullptr;
  EXPECT_EQ(sqlite3_open(db.string().c_str(), &raw), SQLITE_OK);
  // Reading the schema first opens the log (a fresh connection is not yet
  // in WAL mode).
  EXPECT_EQ(sqlite3_exec(raw, "SELECT COUNT(*) FROM sqlite_master", nullptr, nullptr, nullptr),
            SQLITE_OK);
  int log = -1, done = -1;
  sqlite3_wal_checkpoint_v2(raw, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
  sqlite3_close(raw);
  return {log, done};
}

// Commits never checkpoint: the log grows past SQLite's own threshold
// (1000 pages, when a commit would copy it and start it over; 1200 jobs
// write about 9000 here) until
// Checkpoint (the scheduler's maintenance) copies it into the database.
TEST_F(LeaseStoreTest, CommitsLeaveTheCheckpointToMaintenance) {
  for (int i = 0; i < 1200; ++i) {
    ASSERT_TRUE(store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(1), {}, 1000).ok());
  }
  const std::filesystem::path wal = dir_ / "yirage.db-wal";
  // With autocheckpoint the log would start over at about 1000 frames.
  EXPECT_GT(std::filesystem::file_size(wal), uintmax_t{3000} * 4096)
      << "more than 3000 pages of log: no commit checkpointed";
  ASSERT_TRUE(leases_->Checkpoint().ok());
  const auto [log, done] = WalFrames(dir_ / "yirage.db");
  EXPECT_GT(log, 3000);
  EXPECT_EQ(done, log) << "every frame copied by Checkpoint";
}

TEST_F(LeaseStoreTest, ExpiredLeaseBlamesRunningCandidateAndRequeuesOthers) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(2), {}, 1000);
  ASSERT_TRUE(id.ok());
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    double now = 1000 + attempt * 100;
    auto batch = leases_->LeaseBatch("w" + std::to_string(attempt), "cpu", now);
    ASSERT_TRUE(batch.ok() && batch->has_value()) << "attempt " << attempt;
    ASSERT_EQ((*batch)->candidates_size(), 2);
    int64_t killer = (*batch)->candidates(1).candidate_id();
    auto renewed = leases_->RenewLease("w" + std::to_string(attempt), (*batch)->batch_id(),
                                       (*batch)->lease_token(), killer, now + 1);
    ASSERT_TRUE(renewed.ok() && *renewed);
    // Someone else's worker id cannot renew it.
    auto foreign = leases_->RenewLease("intruder", (*batch)->batch_id(), (*batch)->lease_token(),
                                       killer, now + 1);
    ASSERT_TRUE(foreign.ok());
    EXPECT_FALSE(*foreign);
    auto report = leases_->ExpireLeases(now + 1 + options_.lease_seconds + 1);
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->leases_expired, 1);
    EXPECT_EQ(report->jobs, std::vector<std::string>{*id});
  }
  auto candidates = store_->ListCandidates(*id);
  ASSERT_TRUE(candidates.ok());
  ASSERT_EQ(candidates->size(), 2u);
  EXPECT_EQ((*candidates)[0].status(), yirage::v1::PENDING);  // never blamed, back in the queue
  EXPECT_EQ((*candidates)[0].attempts(), 0);
  EXPECT_EQ((*candidates)[1].status(), yirage::v1::ERROR);
  EXPECT_EQ((*candidates)[1].attempts(), options_.max_attempts);
  EXPECT_NE((*candidates)[1].error().find("killed its worker"), std::string::npos);
}

// Storing results renews the lease of a batch that has candidates left,
// and says so; the last result ends the batch.
TEST_F(LeaseStoreTest, ResultsRenewTheLeaseOfABatchWithCandidatesLeft) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(2), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = leases_->LeaseBatch("w1", "cpu", 1000);
  ASSERT_TRUE(batch.ok() && batch->has_value());
  const auto& b = **batch;
  ASSERT_EQ(b.candidates_size(), 2);
  const double late = 1000 + options_.lease_seconds - 1;
  auto first =
      leases_->RecordResults("w1", b.batch_id(), b.lease_token(), b.candidates(1).candidate_id(),
                             Results({Verified(b.candidates(0).candidate_id(), 5)}), late);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->still_leased);
  // Past the first lease's end, not past the renewed one's.
  auto expiry = leases_->ExpireLeases(1000 + options_.lease_seconds + 1);
  ASSERT_TRUE(expiry.ok());
  EXPECT_EQ(expiry->leases_expired, 0);
  auto last =
      leases_->RecordResults("w1", b.batch_id(), b.lease_token(), 0,
                             Results({Verified(b.candidates(1).candidate_id(), 6)}), late + 2);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_FALSE(last->still_leased) << "every candidate reported: the batch is done";
  EXPECT_EQ(last->job_id, *id);
  auto renewed = leases_->RenewLease("w1", b.batch_id(), b.lease_token(), 0, late + 3);
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed);
}

TEST_F(LeaseStoreTest, StateSurvivesReopen) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(2), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = leases_->LeaseBatch("w1", "cpu", 1001);
  ASSERT_TRUE(batch.ok() && batch->has_value());
  ASSERT_TRUE(leases_
                  ->RecordResults("w1", (*batch)->batch_id(), (*batch)->lease_token(), 0,
                                  Results({Verified((*batch)->candidates(0).candidate_id(), 77)}),
                                  1002)
                  .ok());
  Reopen();
  auto candidates = store_->ListCandidates(*id);
  ASSERT_TRUE(candidates.ok());
  EXPECT_EQ((*candidates)[0].status(), yirage::v1::VERIFIED);
  EXPECT_DOUBLE_EQ((*candidates)[0].time_us(), 77);
  EXPECT_EQ((*candidates)[1].status(), yirage::v1::LEASED);
  // The lease itself survived: the same worker can still deliver.
  auto renewed = leases_->RenewLease("w1", (*batch)->batch_id(), (*batch)->lease_token(), 0, 1003);
  ASSERT_TRUE(renewed.ok());
  EXPECT_TRUE(*renewed);
}

// A worker that dies before any candidate of its batch starts (computing
// the inputs, the reference or compiling) names none: every candidate of the
// batch counts the delivery, and fails after max_attempts.
TEST_F(LeaseStoreTest, ADeathBeforeAnyCandidateStartsCountsForEveryCandidate) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(2), {}, 1000);
  ASSERT_TRUE(id.ok());
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    const double now = 1000 + attempt * 100;
    auto batch = leases_->LeaseBatch("w" + std::to_string(attempt), "cpu", now);
    ASSERT_TRUE(batch.ok() && batch->has_value()) << "attempt " << attempt;
    ASSERT_EQ((*batch)->candidates_size(), 2);
    auto report = leases_->ExpireLeases(now + options_.lease_seconds + 1);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->candidates_failed, attempt == options_.max_attempts ? 2 : 0);
  }
  auto candidates = store_->ListCandidates(*id);
  ASSERT_TRUE(candidates.ok());
  for (const auto& c : *candidates) {
    EXPECT_EQ(c.status(), yirage::v1::ERROR);
    EXPECT_EQ(c.attempts(), options_.max_attempts);
    EXPECT_NE(c.error().find("before any candidate of the batch started"), std::string::npos)
        << c.error();
  }
  // The baseline was among them: the job fails saying so, not "no
  // candidate verified".
  auto maintained = store_->Maintain(2000);
  ASSERT_TRUE(maintained.ok()) << maintained.status();
  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::FAILED);
  EXPECT_NE(job->message().find("the baseline failed: its worker died"), std::string::npos)
      << job->message();
}

// Jobs take turns: a worker asking again gets the job leased from least
// recently, not always the oldest (whose redeliveries would starve the rest).
TEST_F(LeaseStoreTest, JobsTakeTurns) {
  auto older = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(6), {}, 1000);
  auto newer = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(6), {}, 1001);
  ASSERT_TRUE(older.ok() && newer.ok());
  std::vector<std::string> order;
  for (int i = 0; i < 4; ++i) {
    auto batch = leases_->LeaseBatch("w" + std::to_string(i), "cpu", 1010 + i);
    ASSERT_TRUE(batch.ok() && batch->has_value());
    order.push_back((*batch)->job_id());
  }
  EXPECT_EQ(order, (std::vector<std::string>{*older, *newer, *older, *newer}));
}

}  // namespace
}  // namespace yirage::server::testing
