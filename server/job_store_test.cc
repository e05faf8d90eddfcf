#include "server/job_store.h"

#include <filesystem>

#include "gtest/gtest.h"
#include "server/test_dir.h"

namespace yirage::server {
namespace {

using yirage::v1::CandidateResult;

yirage::v1::Plan MakePlan(const std::string& description, bool baseline) {
  yirage::v1::Plan plan;
  plan.set_description(description);
  plan.set_baseline(baseline);
  auto* k = plan.add_kernels();
  k->set_name("k0");
  k->add_ops("Y");
  return plan;
}

std::vector<yirage::v1::Plan> MakePlans(int n) {
  std::vector<yirage::v1::Plan> plans = {MakePlan("baseline", true)};
  for (int i = 1; i < n; ++i) plans.push_back(MakePlan("plan " + std::to_string(i), false));
  return plans;
}

yirage::v1::SubmitJobRequest MakeRequest() {
  yirage::v1::SubmitJobRequest request;
  request.mutable_graph()->set_name("g");
  request.set_backend("cpu");
  return request;
}

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("yirage_store_test");
    options_.batch_size = 2;
    options_.lease_seconds = 10;
    options_.max_attempts = 2;
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    workers_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    workers_.reset();
    auto workers = WorkerStore::Open((dir_ / "yirage.db").string(), worker_options_);
    ASSERT_TRUE(workers.ok()) << workers.status();
    workers_ = std::move(*workers);
    auto store = JobStore::Open((dir_ / "yirage.db").string(), options_, workers_.get());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  CandidateResult Verified(int64_t id, double time_us) {
    CandidateResult r;
    r.set_candidate_id(id);
    r.set_status(yirage::v1::VERIFIED);
    r.set_time_us(time_us);
    r.set_baseline_time_us(100);
    r.set_source("extern \"C\" int yirage_plan_0(const void* const*, void* const*) {}");
    return r;
  }
  google::protobuf::RepeatedPtrField<CandidateResult> Results(
      std::initializer_list<CandidateResult> rs) {
    google::protobuf::RepeatedPtrField<CandidateResult> out;
    for (const auto& r : rs) *out.Add() = r;
    return out;
  }

  std::filesystem::path dir_;
  JobStoreOptions options_;
  WorkerStoreOptions worker_options_;
  std::unique_ptr<WorkerStore> workers_;
  std::unique_ptr<JobStore> store_;
};

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

TEST_F(JobStoreTest, LeaseRecordAndFinish) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(3), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = store_->LeaseBatch("w1", "cpu", 1001);
  ASSERT_TRUE(batch.ok() && batch->has_value());
  const auto& b = **batch;
  EXPECT_EQ(b.candidates_size(), 2);
  EXPECT_TRUE(b.baseline().baseline());
  EXPECT_EQ(b.baseline_candidate_id(), b.candidates(0).candidate_id());
  // Another backend gets nothing.
  auto none = store_->LeaseBatch("w2", "cuda", 1001);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_EQ(store_->GetJob(*id)->state(), yirage::v1::RUNNING);

  // The second candidate's result was taken from the first's (the same
  // kernel): stored with it and listed.
  CandidateResult twin = Verified(b.candidates(1).candidate_id(), 40);
  twin.set_same_kernel_as(b.candidates(0).candidate_id());
  twin.mutable_launch()->add_launches()->set_name("yr_p1_k0");  // how its source is run
  auto report = store_->RecordResults(
      "w1", b.batch_id(), Results({Verified(b.candidates(0).candidate_id(), 100), twin}), 1002);
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
  auto again = store_->RecordResults("w1", b.batch_id(),
                                     Results({Verified(b.candidates(1).candidate_id(), 40)}), 1003);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->acknowledged.size(), 1u);
  EXPECT_EQ(again->newly_stored[yirage::v1::VERIFIED], 0);

  auto batch2 = store_->LeaseBatch("w1", "cpu", 1004);
  ASSERT_TRUE(batch2.ok() && batch2->has_value());
  EXPECT_EQ((*batch2)->candidates_size(), 1);
  CandidateResult mismatch;
  mismatch.set_candidate_id((*batch2)->candidates(0).candidate_id());
  mismatch.set_status(yirage::v1::MISMATCH);
  mismatch.set_error("Y[3]: got 1, expected 2");
  auto r2 = store_->RecordResults("w1", (*batch2)->batch_id(), Results({mismatch}), 1005);
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(r2->jobs_finished.size(), 1u);

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
}

TEST_F(JobStoreTest, ExpiredLeaseBlamesRunningCandidateAndRequeuesOthers) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(2), {}, 1000);
  ASSERT_TRUE(id.ok());
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    double now = 1000 + attempt * 100;
    auto batch = store_->LeaseBatch("w" + std::to_string(attempt), "cpu", now);
    ASSERT_TRUE(batch.ok() && batch->has_value()) << "attempt " << attempt;
    ASSERT_EQ((*batch)->candidates_size(), 2);
    int64_t killer = (*batch)->candidates(1).candidate_id();
    auto renewed =
        store_->RenewLease("w" + std::to_string(attempt), (*batch)->batch_id(), killer, now + 1);
    ASSERT_TRUE(renewed.ok() && *renewed);
    // Someone else's worker id cannot renew it.
    auto foreign = store_->RenewLease("intruder", (*batch)->batch_id(), killer, now + 1);
    ASSERT_TRUE(foreign.ok());
    EXPECT_FALSE(*foreign);
    auto report = store_->Maintain(now + 1 + options_.lease_seconds + 1);
    ASSERT_TRUE(report.ok());
    EXPECT_EQ(report->leases_expired, 1);
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

TEST_F(JobStoreTest, StateSurvivesReopen) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(2), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = store_->LeaseBatch("w1", "cpu", 1001);
  ASSERT_TRUE(batch.ok() && batch->has_value());
  ASSERT_TRUE(store_
                  ->RecordResults("w1", (*batch)->batch_id(),
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
  auto renewed = store_->RenewLease("w1", (*batch)->batch_id(), 0, 1003);
  ASSERT_TRUE(renewed.ok());
  EXPECT_TRUE(*renewed);
}

TEST_F(JobStoreTest, CancelSkipsRemainingWork) {
  auto id = store_->CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(4), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = store_->LeaseBatch("w1", "cpu", 1001);
  ASSERT_TRUE(batch.ok() && batch->has_value());
  auto job = store_->CancelJob(*id, 1002);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::CANCELLED);
  EXPECT_EQ(job->candidates_pending(), 0);
  auto renewed = store_->RenewLease("w1", (*batch)->batch_id(), 0, 1003);
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed);  // the worker is told to abandon the batch
  EXPECT_EQ(store_->CancelJob(*id, 1004).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobStoreTest, TimeBudgetSkipsPendingCandidates) {
  auto request = MakeRequest();
  request.set_budget_seconds(5);
  auto id = store_->CreateJob(request, {1e-2, 1e-2}, MakePlans(5), {}, 1000);
  ASSERT_TRUE(id.ok());
  auto batch = store_->LeaseBatch("w1", "cpu", 1001);  // starts the clock
  ASSERT_TRUE(batch.ok() && batch->has_value());
  ASSERT_TRUE(store_
                  ->RecordResults("w1", (*batch)->batch_id(),
                                  Results({Verified((*batch)->candidates(0).candidate_id(), 50),
                                           Verified((*batch)->candidates(1).candidate_id(), 60)}),
                                  1002)
                  .ok());
  auto late = store_->LeaseBatch("w1", "cpu", 1007);
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
  store_.reset();
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "yirage.db").string().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = JobStore::Open((dir_ / "yirage.db").string(), options_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
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

}  // namespace
}  // namespace yirage::server
