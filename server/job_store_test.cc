#include "server/job_store.h"

#include <string>
#include <vector>

#include "core/candidate_test_graphs.h"
#include "core/graph.h"
#include "core/plan_work.h"
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

// A JobStore asks its WorkerStore with the connection's mutex held: the two
// must be on one connection.
TEST_F(JobStoreTest, ItsWorkerStoreMustBeOnItsConnection) {
  auto other = Connection::Open((dir_ / "yirage.db").string(), "other");
  ASSERT_TRUE(other.ok()) << other.status();
  auto refused = JobStore::OnConnection(*other, workers_.get());
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("connection"), std::string::npos);
  auto shared = JobStore::OnConnection(workers_->connection(), workers_.get());
  EXPECT_TRUE(shared.ok()) << shared.status();
  auto alone = JobStore::OnConnection(*other);
  EXPECT_TRUE(alone.ok()) << alone.status();
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

// ListCandidates with_work: each candidate's flops and bytes (core's count,
// from the stored plan and the job's graph); without it, none. A plan that
// does not fit its graph is listed without work.
TEST_F(JobStoreTest, ListCandidatesWithWorkCountsEachPlansFlopsAndBytes) {
  yirage::v1::SubmitJobRequest request = MakeRequest();
  *request.mutable_graph() = core::testing::RmsNormLinearProto();  // Y = (rms_norm(X) * G) @ W
  auto kernel = [](yirage::v1::Plan* plan, std::vector<std::string> ops,
                   std::vector<std::string> in, std::vector<std::string> out) {
    auto* k = plan->add_kernels();
    k->set_name("k" + std::to_string(plan->kernels_size()));
    k->set_kind(yirage::v1::KERNEL_ROW);
    for (auto& o : ops) k->add_ops(o);
    for (auto& t : in) k->add_inputs(t);
    for (auto& t : out) k->add_outputs(t);
  };
  yirage::v1::Plan baseline, fused, broken;
  baseline.set_baseline(true);
  kernel(&baseline, {"N"}, {"X"}, {"N"});
  kernel(&baseline, {"S"}, {"N", "G"}, {"S"});
  kernel(&baseline, {"Y"}, {"S", "W"}, {"Y"});
  kernel(&fused, {"N", "S", "Y"}, {"X", "G", "W"}, {"Y"});
  kernel(&broken, {"Y"}, {"S", "W"}, {"Y"});  // N and S computed nowhere
  auto id = store_->CreateJob(request, {1e-2, 1e-2}, {baseline, fused, broken}, {}, 1000);
  ASSERT_TRUE(id.ok()) << id.status();

  auto plain = store_->ListCandidates(*id);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(plain->size(), 3u);
  for (const auto& c : *plain) EXPECT_FALSE(c.has_work());

  auto listed = store_->ListCandidates(*id, /*with_work=*/true);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 3u);
  auto graph = core::Graph::FromProto(request.graph());
  ASSERT_TRUE(graph.ok());
  for (int i = 0; i < 2; ++i) {
    const yirage::v1::Candidate& c = (*listed)[i];
    ASSERT_TRUE(c.has_work()) << i;
    auto expected = core::ComputePlanWork(*graph, c.plan());
    ASSERT_TRUE(expected.ok()) << expected.status();
    EXPECT_DOUBLE_EQ(c.work().flops(), expected->flops);
    EXPECT_DOUBLE_EQ(c.work().bytes(), expected->bytes);
    EXPECT_EQ(c.work().dtype(), yirage::v1::FLOAT16);
    EXPECT_GT(c.work().flops(), 2.0 * 16 * 6144 * 4096 - 1);
  }
  // Fusing keeps the flops and drops the intermediates' traffic.
  EXPECT_DOUBLE_EQ((*listed)[0].work().flops(), (*listed)[1].work().flops());
  EXPECT_DOUBLE_EQ((*listed)[1].work().bytes(), 2.0 * (16 * 4096 + 4096 + 4096 * 6144 + 16 * 6144));
  EXPECT_GT((*listed)[0].work().bytes(), (*listed)[1].work().bytes());
  EXPECT_FALSE((*listed)[2].has_work());

  // A job whose stored graph does not build lists its candidates without.
  auto other = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(2), {}, 1000);
  ASSERT_TRUE(other.ok());
  auto without = store_->ListCandidates(*other, /*with_work=*/true);
  ASSERT_TRUE(without.ok()) << without.status();
  ASSERT_EQ(without->size(), 2u);
  EXPECT_FALSE((*without)[0].has_work());
  EXPECT_EQ(store_->ListCandidates("job-missing", true).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace yirage::server::testing
