#include "server/job_store.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/store_test_util.h"

namespace yirage::server::testing {
namespace {

using JobStoreTest = StoreTest;

TEST_F(JobStoreTest, CreateAndGetJob) {
  auto id = store_->CreateJob(MakeRequest(), {1e-3, 1e-4}, MakePlans(5), {}, 1000);
  ASSERT_TRUE(id.ok()) << id.status();
  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::QUEUED);
  EXPECT_EQ(job->candidates_generated(), 5);
  EXPECT_EQ(job->candidates_pending(), 5);
  EXPECT_DOUBLE_EQ(job->tolerance().rtol(), 1e-3);
  EXPECT_FALSE(job->has_best());
  EXPECT_EQ(store_->GetJob("job-missing").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoreTest, RejectsPlansWithoutBaselineFirst) {
  std::vector<yirage::v1::Plan> plans = {MakePlan("x", false)};
  EXPECT_FALSE(store_->CreateJob(MakeRequest(), {1, 1}, plans, {}, 1).ok());
}

TEST_F(JobStoreTest, CancelSkipsRemainingWork) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(4), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = leases_->LeaseBatch("w1", "cpu", 1001);
  ASSERT_TRUE(batch.ok() && batch->has_value());
  auto job = store_->CancelJob(*id, 1002);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::CANCELLED);
  EXPECT_EQ(job->candidates_pending(), 0);
  auto renewed = leases_->RenewLease("w1", (*batch)->batch_id(), (*batch)->lease_token(), 0, 1003);
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed);  // the worker is told to abandon the batch
  EXPECT_EQ(store_->CancelJob(*id, 1004).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A job records its owner; a cancel on behalf of another owner is refused
// and changes nothing.
TEST_F(JobStoreTest, CancelForAnotherOwnerIsRefused) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(2), {}, 1000, "alice");
  ASSERT_TRUE(id.ok());
  const std::string bob = "bob", alice = "alice";
  auto refused = store_->CancelJob(*id, 1001, &bob);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("'alice'"), std::string::npos) << refused.status();
  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::QUEUED);
  EXPECT_EQ(job->owner(), "alice");
  auto cancelled = store_->CancelJob(*id, 1002, &alice);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), yirage::v1::CANCELLED);
}

TEST_F(JobStoreTest, TimeBudgetSkipsPendingCandidates) {
  auto request = MakeRequest();
  request.set_budget_seconds(5);
  auto id = store_->CreateJob(request, {1e-2, 1e-2}, MakePlans(5), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = leases_->LeaseBatch("w1", "cpu", 1001);  // starts the clock
  ASSERT_TRUE(batch.ok() && batch->has_value());
  ASSERT_TRUE(leases_
                  ->RecordResults("w1", (*batch)->batch_id(), (*batch)->lease_token(), 0,
                                  Results({Verified((*batch)->candidates(0).candidate_id(), 50),
                                           Verified((*batch)->candidates(1).candidate_id(), 60)}),
                                  1002)
                  .ok());
  auto late = leases_->LeaseBatch("w1", "cpu", 1007);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->has_value());  // out of time: no more leases
  auto report = store_->Maintain(1007);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->candidates_skipped, 3);
  auto job = store_->GetJob(*id);
  EXPECT_EQ(job->state(), yirage::v1::SUCCEEDED);
  EXPECT_DOUBLE_EQ(job->best().time_us(), 50);
}

TEST_F(JobStoreTest, RefusesNewerSchemaVersion) {
  leases_.reset();
  store_.reset();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "yirage.db").string().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = JobStore::Open((dir_ / "yirage.db").string());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(LeaseStore::Open((dir_ / "yirage.db").string(), options_).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobStoreTest, UnfinishedJobWithoutAWorkerOfItsBackendSaysItIsWaiting) {
  yirage::v1::SubmitJobRequest request = MakeRequest();
  request.set_backend("hip");
  auto id = store_->CreateJob(request, {1e-2, 1e-2}, MakePlans(3), {}, 1000);
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string waiting = "waiting: no connected worker for backend 'hip'";
  auto job = store_->GetJob(*id, 1000);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), yirage::v1::QUEUED);
  EXPECT_EQ(job->message(), waiting);
  auto jobs = store_->ListJobs(10, 1000);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].message(), waiting);

  // A worker of another backend changes nothing.
  yirage::v1::SynchronizeRequest cpu;
  cpu.set_worker_id("w-cpu");
  cpu.set_backend("cpu");
  ASSERT_TRUE(workers_->Upsert(cpu, 1000).ok());
  EXPECT_EQ(store_->GetJob(*id, 1001)->message(), waiting);

  // A connected hip worker clears it; once that worker is silent for longer
  // than worker_timeout_seconds, the job is waiting again.
  yirage::v1::SynchronizeRequest hip;
  hip.set_worker_id("w-hip");
  hip.set_backend("hip");
  ASSERT_TRUE(workers_->Upsert(hip, 1000).ok());
  EXPECT_EQ(store_->GetJob(*id, 1001)->message(), "");
  EXPECT_EQ(store_->GetJob(*id, 1000 + worker_options_.worker_timeout_seconds + 1)->message(),
            waiting);

  // A finished job never says it is waiting.
  ASSERT_TRUE(store_->CancelJob(*id, 1002).ok());
  EXPECT_EQ(store_->GetJob(*id, 5000)->message(), "cancelled by a client");
}

// A baseline that did not run (here: it failed to compile) fails the job
// with its reason; the rest of the job's work is skipped.
TEST_F(JobStoreTest, AFailedBaselineFailsTheJobSayingWhy) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(5), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = leases_->LeaseBatch("w1", "cpu", 1001);
  ASSERT_TRUE(batch.ok() && batch->has_value());
  CandidateResult broken;
  broken.set_candidate_id((*batch)->baseline_candidate_id());
  broken.set_status(yirage::v1::ERROR);
  broken.set_error("compile: no such function");
  ASSERT_TRUE(leases_
                  ->RecordResults("w1", (*batch)->batch_id(), (*batch)->lease_token(), 0,
                                  Results({broken}), 1002)
                  .ok());
  auto report = store_->Maintain(1003);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->jobs_finished, std::vector<std::string>{*id});
  auto job = store_->GetJob(*id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::FAILED);
  EXPECT_EQ(job->message(), "the baseline failed: compile: no such function");
  EXPECT_EQ(job->candidates_pending(), 0);
  auto renewed = leases_->RenewLease("w1", (*batch)->batch_id(), (*batch)->lease_token(), 0, 1004);
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed) << "its batch was withdrawn";
}

}  // namespace
}  // namespace yirage::server::testing
