#include "server/scheduler.h"

#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/rpc_util.h"
#include "core/graph_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/test_dir.h"

namespace yirage::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using yirage::v1::CandidateResult;
using yirage::v1::SubmitJobRequest;
using yirage::v1::SynchronizeRequest;
using yirage::v1::SynchronizeResponse;

constexpr char kGraph[] = R"({"name": "sched", "inputs": [
    {"name": "X", "shape": [64, 128], "dtype": "float32"},
    {"name": "W", "shape": [128, 32], "dtype": "float32"}],
  "ops": [{"name": "M", "op": "matmul", "inputs": ["X", "W"]},
          {"name": "Y", "op": "relu", "inputs": ["M"]}],
  "outputs": ["Y"]})";

// The scheduler against a real store and chip registry on a fresh database;
// the tests play the worker side of worker.proto by hand.
class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("yirage_scheduler_test");
    options_.db_path = (dir_ / "yirage.db").string();
    options_.leases.batch_size = 2;
    options_.leases.lease_seconds = 30;
    options_.leases.max_attempts = 2;
  }
  void Start() {
    auto workers = WorkerStore::Open(options_.db_path, options_.workers);
    ASSERT_TRUE(workers.ok()) << workers.status();
    workers_ = std::move(*workers);
    auto store = JobStore::Open(options_.db_path, workers_.get());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto leases = LeaseStore::Open(options_.db_path, options_.leases);
    ASSERT_TRUE(leases.ok()) << leases.status();
    leases_ = std::move(*leases);
    auto chips = ChipStore::Open(options_.db_path);
    ASSERT_TRUE(chips.ok()) << chips.status();
    chips_ = std::move(*chips);
    auto metrics = Metrics::Start("127.0.0.1:0");
    ASSERT_TRUE(metrics.ok()) << metrics.status();
    metrics_ = std::move(*metrics);
    scheduler_ = std::make_unique<Scheduler>(options_, store_.get(), leases_.get(), workers_.get(),
                                             metrics_.get(), chips_.get());
  }
  void TearDown() override {
    scheduler_.reset();
    metrics_.reset();
    chips_.reset();
    leases_.reset();
    store_.reset();
    workers_.reset();
    std::filesystem::remove_all(dir_);
  }

  yirage::v1::SubmitJobRequest Request(int budget) {
    yirage::v1::SubmitJobRequest request;
    auto graph = core::ParseGraphJson(kGraph);
    EXPECT_TRUE(graph.ok()) << graph.status();
    *request.mutable_graph() = *graph;
    request.set_backend("cpu");
    request.set_budget_candidates(budget);
    return request;
  }
  SynchronizeResponse Sync(const std::string& worker, const std::string& backend,
                           const yirage::v1::WorkerStatus& status) {
    SynchronizeRequest request;
    request.set_worker_id(worker);
    request.set_backend(backend);
    request.set_hostname("test");
    request.set_pid(1);
    *request.mutable_status() = status;
    auto response = scheduler_->Synchronize(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : SynchronizeResponse();
  }
  static yirage::v1::WorkerStatus Idle() {
    yirage::v1::WorkerStatus s;
    s.mutable_idle();
    return s;
  }
  static yirage::v1::WorkerStatus Executing(const yirage::v1::Batch& batch,
                                            const std::vector<CandidateResult>& done) {
    yirage::v1::WorkerStatus s;
    s.mutable_executing()->set_batch_id(batch.batch_id());
    s.mutable_executing()->set_lease_token(batch.lease_token());
    for (const CandidateResult& r : done) *s.mutable_executing()->add_completed() = r;
    return s;
  }
  static CandidateResult Verified(int64_t id, double time_us, double baseline_us) {
    CandidateResult r;
    r.set_candidate_id(id);
    r.set_status(yirage::v1::VERIFIED);
    r.set_time_us(time_us);
    r.set_baseline_time_us(baseline_us);
    r.set_source("// source of " + std::to_string(id));
    return r;
  }

  std::filesystem::path dir_;
  ServerOptions options_;
  std::unique_ptr<WorkerStore> workers_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<LeaseStore> leases_;
  std::unique_ptr<ChipStore> chips_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Scheduler> scheduler_;
};

// The search plans what the backend's workers said they run: until one has,
// generic row kernels (and the summary says so); after a worker sent its
// BackendKernels (asked for until then), its library kernels too. The
// kernels survive the worker's later calls without them.
TEST_F(SchedulerTest, TheSearchPlansWhatTheWorkersSaidTheyRun) {
  Start();
  auto before = scheduler_->Submit(Request(0));
  ASSERT_TRUE(before.ok()) << before.status();
  auto job = store_->GetJob(before->job_id());
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->search().baseline_kind(), "generated");
  EXPECT_THAT(job->search().note(), HasSubstr("no worker of backend 'cpu' has said what it runs"));

  EXPECT_TRUE(Sync("w1", "cpu", Idle()).send_kernels()) << "the scheduler asks for the kernels";
  SynchronizeRequest with_kernels;
  with_kernels.set_worker_id("w1");
  with_kernels.set_backend("cpu");
  with_kernels.mutable_status()->mutable_idle();
  with_kernels.mutable_kernels()->set_backend("cpu");
  with_kernels.mutable_kernels()->mutable_library()->set_algorithms(1);
  auto answered = scheduler_->Synchronize(with_kernels);
  ASSERT_TRUE(answered.ok()) << answered.status();
  EXPECT_FALSE(answered->send_kernels());
  EXPECT_FALSE(Sync("w1", "cpu", Idle()).send_kernels()) << "kept without being sent again";

  auto after = scheduler_->Submit(Request(0));
  ASSERT_TRUE(after.ok()) << after.status();
  job = store_->GetJob(after->job_id());
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->search().baseline_kind(), "library");
  EXPECT_THAT(job->search().note(), ::testing::Not(HasSubstr("has said what it runs")));

  // Kernels of another backend than the worker's are refused.
  with_kernels.mutable_kernels()->set_backend("cuda");
  auto refused = scheduler_->Synchronize(with_kernels);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("kernels.backend"));
}

TEST_F(SchedulerTest, ABadGraphIsRefusedNamingTheOpAndNothingIsStored) {
  Start();
  yirage::v1::SubmitJobRequest request = Request(4);
  request.mutable_graph()->mutable_ops(1)->set_op("frobnicate");
  auto refused = scheduler_->Submit(request);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("frobnicate"));
  // unread_inputs belongs to plan graphs; a submitted graph reads every input.
  yirage::v1::SubmitJobRequest unread = Request(4);
  unread.mutable_graph()->add_unread_inputs(unread.graph().inputs(0).name());
  auto refused_unread = scheduler_->Submit(unread);
  EXPECT_EQ(refused_unread.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused_unread.status().message()), HasSubstr("unread_inputs"));
  yirage::v1::SubmitJobRequest no_chip = Request(4);
  no_chip.set_chip_id("no_such_chip");
  EXPECT_FALSE(scheduler_->Submit(no_chip).ok());
  // Numbers that are not finite, or negative, name their field.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (auto [field, set] : std::vector<std::pair<std::string, void (*)(SubmitJobRequest*, double)>>{
           {"budget_seconds", [](SubmitJobRequest*r, double v) { r->set_budget_seconds(v); }},
           {"tolerance.rtol",
            [](SubmitJobRequest*r, double v) { r->mutable_tolerance()->set_rtol(v); }},
           {"tolerance.atol",
            [](SubmitJobRequest*r, double v) { r->mutable_tolerance()->set_atol(v); }}}) {
    for (double bad : {nan, std::numeric_limits<double>::infinity(), -1.0}) {
      SubmitJobRequest r = Request(4);
      set(&r, bad);
      auto refused_number = scheduler_->Submit(r);
      EXPECT_EQ(refused_number.status().code(), absl::StatusCode::kInvalidArgument)
          << field << " " << bad;
      EXPECT_THAT(std::string(refused_number.status().message()), HasSubstr(field));
    }
  }
  // A 50 MB graph name is refused without echoing it.
  SubmitJobRequest long_name = Request(4);
  long_name.mutable_graph()->set_name(std::string(50 << 20, 'n'));
  auto refused_name = scheduler_->Submit(long_name);
  EXPECT_EQ(refused_name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(refused_name.status().message().size(), 1000u);
  EXPECT_THAT(std::string(refused_name.status().message()), HasSubstr("the limit is 128"));
  // The server's graph limits apply.
  options_.graph_limits.max_ops = 1;
  scheduler_ = std::make_unique<Scheduler>(options_, store_.get(), leases_.get(), workers_.get(),
                                           metrics_.get(), chips_.get());
  auto too_many = scheduler_->Submit(Request(4));
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_many.status().message()), HasSubstr("the limit is 1"));
  auto jobs = store_->ListJobs(10);
  ASSERT_TRUE(jobs.ok());
  EXPECT_TRUE(jobs->empty());
}

TEST_F(SchedulerTest, WorkersLeaseBatchesAndTheJobEndsWithTheFastestVerifiedCandidate) {
  Start();
  auto submitted = scheduler_->Submit(Request(5));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string job = submitted->job_id();
  ASSERT_GE(submitted->candidates_generated(), 2);

  // A worker of another backend gets nothing of a CPU job.
  EXPECT_TRUE(Sync("gpu-worker", "cuda", Idle()).has_idle());

  // The CPU worker takes batches until the queue is empty, reporting every
  // candidate; the candidate ids of the batches never repeat.
  std::map<int64_t, double> times;
  SynchronizeResponse r = Sync("w1", "cpu", Idle());
  int batches = 0;
  while (r.has_execute()) {
    const yirage::v1::Batch& batch = r.execute().batch();
    EXPECT_EQ(batch.job_id(), job);
    EXPECT_LE(batch.candidates_size(), options_.leases.batch_size);
    EXPECT_TRUE(batch.baseline().baseline());
    std::vector<CandidateResult> done;
    for (const auto& c : batch.candidates()) {
      EXPECT_FALSE(times.count(c.candidate_id())) << c.candidate_id();
      const double t = 100.0 - static_cast<double>(times.size());  // each faster than the last
      times[c.candidate_id()] = t;
      done.push_back(Verified(c.candidate_id(), t, 100.0));
    }
    r = Sync("w1", "cpu", Executing(batch, done));
    // Every reported result is acknowledged once stored.
    for (const CandidateResult& d : done) {
      EXPECT_THAT(r.acknowledged(), ::testing::Contains(d.candidate_id()));
    }
    if (!r.has_execute()) r = Sync("w1", "cpu", Idle());
    ASSERT_LT(++batches, 10);
  }
  EXPECT_EQ(static_cast<int>(times.size()), submitted->candidates_generated());
  ASSERT_TRUE(scheduler_->MaintainOnce().ok());
  auto finished = store_->GetJob(job);
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(finished->state(), yirage::v1::SUCCEEDED);
  EXPECT_EQ(finished->candidates_pending(), 0);
  const auto fastest = std::min_element(times.begin(), times.end(),
                                        [](auto& a, auto& b) { return a.second < b.second; });
  EXPECT_EQ(finished->best().candidate_id(), fastest->first);
  EXPECT_NEAR(finished->best().speedup(), 100.0 / fastest->second, 1e-9);
}

// The scheduler's metrics follow a job from submission to success: queued
// candidates, batches leased, results by backend with the worker's phase
// times, the worker's busy time, the job's duration and time to its best;
// then an expired lease and a cancelled job.
TEST_F(SchedulerTest, MetricsFollowTheJobsBatchesAndLeases) {
  options_.leases.lease_seconds = 0.2;
  Start();
  auto submitted = scheduler_->Submit(Request(4));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(scheduler_->MaintainOnce().ok());
  std::string text = metrics_->Render();
  EXPECT_THAT(text, HasSubstr("yirage_search_duration_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("yirage_candidates_queued{backend=\"cpu\"} ",
                                           submitted->candidates_generated())));

  SynchronizeResponse r = Sync("w1", "cpu", Idle());
  for (int batches = 0; r.has_execute(); ++batches) {
    ASSERT_LT(batches, 10);
    std::vector<CandidateResult> done;
    for (const auto& c : r.execute().batch().candidates()) {
      CandidateResult result = Verified(c.candidate_id(), 50, 100);
      result.set_compile_seconds(0.5);
      result.set_verify_seconds(0.01);
      result.set_time_seconds(0.2);
      done.push_back(result);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // busy for a while
    r = Sync("w1", "cpu", Executing(r.execute().batch(), done));
    if (!r.has_execute()) r = Sync("w1", "cpu", Idle());
  }
  ASSERT_TRUE(scheduler_->MaintainOnce().ok());
  auto job = store_->GetJob(submitted->job_id());
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->state(), yirage::v1::SUCCEEDED);
  text = metrics_->Render();
  EXPECT_THAT(text, HasSubstr("yirage_candidates_queued{backend=\"cpu\"} 0"));
  EXPECT_THAT(text, HasSubstr("yirage_workers_connected{backend=\"cpu\"} 1"));
  EXPECT_THAT(text, HasSubstr("yirage_batches_leased_total{backend=\"cpu\"} "));
  EXPECT_THAT(text, Not(HasSubstr("yirage_batches_leased_total{backend=\"cpu\"} 0")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat(
                        "yirage_candidates_evaluated_total{backend=\"cpu\",outcome=\"verified\"} ",
                        submitted->candidates_generated())));
  EXPECT_THAT(text, HasSubstr(absl::StrCat(
                        "yirage_candidate_phase_seconds_count{backend=\"cpu\",phase=\"compile\"} ",
                        submitted->candidates_generated())));
  EXPECT_THAT(text, HasSubstr("yirage_worker_busy_seconds_total{backend=\"cpu\",worker=\"w1\"}"));
  EXPECT_THAT(text, HasSubstr("yirage_job_duration_seconds_count{state=\"succeeded\"} 1"));
  EXPECT_THAT(text, HasSubstr("yirage_job_time_to_best_seconds_count 1"));

  // A batch whose worker goes silent expires.
  auto second = scheduler_->Submit(Request(2));
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(Sync("w2", "cpu", Idle()).has_execute());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(scheduler_->MaintainOnce().ok());
  text = metrics_->Render();
  EXPECT_THAT(text, HasSubstr("yirage_lease_expiries_total{backend=\"cpu\"} 1"));
  EXPECT_THAT(text, HasSubstr("yirage_worker_busy_seconds_total{backend=\"cpu\",worker=\"w2\"}"));
  EXPECT_THAT(text, Not(HasSubstr("yirage_candidates_requeued_total 0")));

  // Cancelled through the job service's path.
  auto cancelled = store_->CancelJob(second->job_id(), UnixNow());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  scheduler_->JobEnded(*cancelled);
  EXPECT_THAT(metrics_->Render(),
              HasSubstr("yirage_job_duration_seconds_count{state=\"cancelled\"} 1"));
}

TEST_F(SchedulerTest, AnExpiredLeaseBlamesTheRunningCandidateAndRequeuesTheRest) {
  options_.leases.lease_seconds = 0.2;
  Start();
  auto submitted = scheduler_->Submit(Request(5));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  SynchronizeResponse first = Sync("w1", "cpu", Idle());
  ASSERT_TRUE(first.has_execute());
  const yirage::v1::Batch batch = first.execute().batch();
  ASSERT_EQ(batch.candidates_size(), 2);
  // w1 says it is running the first candidate, then is never heard of again.
  yirage::v1::WorkerStatus running = Executing(batch, {});
  running.mutable_executing()->set_current_candidate_id(batch.candidates(0).candidate_id());
  Sync("w1", "cpu", running);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  ASSERT_TRUE(scheduler_->MaintainOnce().ok());
  // Another worker gets both candidates back; the one that was running has
  // one attempt against it.
  std::map<int64_t, int> leased;
  for (int i = 0; i < 6; ++i) {
    SynchronizeResponse r = Sync("w2", "cpu", Idle());
    if (!r.has_execute()) break;
    std::vector<CandidateResult> done;
    for (const auto& c : r.execute().batch().candidates()) {
      ++leased[c.candidate_id()];
      done.push_back(Verified(c.candidate_id(), 50, 100));
    }
    Sync("w2", "cpu", Executing(r.execute().batch(), done));
  }
  EXPECT_EQ(leased[batch.candidates(0).candidate_id()], 1);
  EXPECT_EQ(leased[batch.candidates(1).candidate_id()], 1);
  auto candidates = store_->ListCandidates(submitted->job_id());
  ASSERT_TRUE(candidates.ok());
  for (const auto& c : *candidates) {
    if (c.candidate_id() == batch.candidates(0).candidate_id()) {
      EXPECT_EQ(c.attempts(), 1);
    } else if (c.candidate_id() == batch.candidates(1).candidate_id()) {
      EXPECT_EQ(c.attempts(), 0);
    }
  }
}

TEST_F(SchedulerTest, AStoppingWorkerIsLeasedNothing) {
  Start();
  ASSERT_TRUE(scheduler_->Submit(Request(3)).ok());
  yirage::v1::WorkerStatus stopping = Idle();
  stopping.mutable_idle()->set_stopping(true);
  EXPECT_FALSE(Sync("w1", "cpu", stopping).has_execute());
  EXPECT_TRUE(Sync("w2", "cpu", Idle()).has_execute());
}

// Results only from the lease holder: a caller without the batch's lease
// token (even under the worker's id) and a holder's impossible times are
// refused, and nothing is stored; the holder's real results then are.
TEST_F(SchedulerTest, ResultsComeOnlyFromTheLeaseHolder) {
  Start();
  ASSERT_TRUE(scheduler_->Submit(Request(3)).ok());
  SynchronizeResponse first = Sync("w1", "cpu", Idle());
  ASSERT_TRUE(first.has_execute());
  const yirage::v1::Batch batch = first.execute().batch();
  EXPECT_EQ(batch.lease_token().size(), 32u);
  const int64_t id = batch.candidates(0).candidate_id();
  auto send = [&](const std::string& worker, const yirage::v1::WorkerStatus& status) {
    SynchronizeRequest request;
    request.set_worker_id(worker);
    request.set_backend("cpu");
    *request.mutable_status() = status;
    return scheduler_->Synchronize(request);
  };
  yirage::v1::Batch forged = batch;
  forged.set_lease_token("");
  for (const auto& [who, as] : {std::pair<std::string, yirage::v1::Batch>{"w1", forged},
                                {"intruder", forged},
                                {"intruder", batch}}) {
    auto refused = send(who, Executing(as, {Verified(id, 0.001, 1e6)}));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << who;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("lease token")) << who;
  }
  for (double bad : {0.0, -5.0, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    auto refused = send("w1", Executing(batch, {Verified(id, bad, 100)}));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("time_us")) << bad;
  }
  for (double bad : {-1.0, std::numeric_limits<double>::quiet_NaN()}) {
    auto refused = send("w1", Executing(batch, {Verified(id, 5, bad)}));
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(refused.status().message()), HasSubstr("baseline_time_us")) << bad;
  }
  auto twice = send("w1", Executing(batch, {Verified(id, 5, 100), Verified(id, 4, 100)}));
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  auto candidates = store_->ListCandidates(batch.job_id());
  ASSERT_TRUE(candidates.ok());
  for (const auto& c : *candidates) {
    if (c.candidate_id() == id) {
      EXPECT_EQ(c.status(), yirage::v1::LEASED) << "nothing stored";
    }
  }
  // The holder's own result is stored, also when the batch's baseline did
  // not verify (baseline time 0: speedup unknown).
  SynchronizeResponse ok = Sync("w1", "cpu", Executing(batch, {Verified(id, 50, 0)}));
  ASSERT_EQ(ok.acknowledged_size(), 1);
  candidates = store_->ListCandidates(batch.job_id());
  for (const auto& c : *candidates) {
    if (c.candidate_id() == id) {
      EXPECT_EQ(c.status(), yirage::v1::VERIFIED);
    }
  }
}

// With search threads, SubmitJob stores the job SEARCHING and returns; a
// search thread stores its candidates and queues it, and workers lease it.
TEST_F(SchedulerTest, SearchThreadsQueueTheJobAfterSubmitReturns) {
  options_.search_threads = 1;
  Start();
  scheduler_->StartMaintenance();
  auto submitted = scheduler_->Submit(Request(3));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->candidates_generated(), 0) << "the search comes later";
  auto job = store_->GetJob(submitted->job_id());
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_TRUE(job->state() == yirage::v1::SEARCHING || job->state() == yirage::v1::QUEUED);
  for (int i = 0; i < 200 && job->state() == yirage::v1::SEARCHING; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    job = store_->GetJob(submitted->job_id());
    ASSERT_TRUE(job.ok()) << job.status();
  }
  ASSERT_EQ(job->state(), yirage::v1::QUEUED);
  EXPECT_EQ(job->candidates_generated(), 3);
  EXPECT_EQ(job->search().plans_generated(), 3);
  EXPECT_TRUE(Sync("w1", "cpu", Idle()).has_execute());
  scheduler_->StopMaintenance();
}

// A submit repeating an earlier one's request_id (a client's retry after a
// lost reply) returns that job and creates none, in both search modes; the
// id is its owner's, and bounded.
TEST_F(SchedulerTest, ARepeatedRequestIdReturnsTheFirstJob) {
  for (int threads : {0, 1}) {
    options_.search_threads = threads;
    Start();
    yirage::v1::SubmitJobRequest request = Request(2);
    request.set_request_id(absl::StrCat("retry-", threads));
    auto first = scheduler_->Submit(request, "alice");
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_FALSE(first->existing());
    auto again = scheduler_->Submit(request, "alice");
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(again->existing());
    EXPECT_EQ(again->job_id(), first->job_id());
    auto other_owner = scheduler_->Submit(request, "bob");
    ASSERT_TRUE(other_owner.ok()) << other_owner.status();
    EXPECT_FALSE(other_owner->existing()) << "request ids are their owner's";
    EXPECT_NE(other_owner->job_id(), first->job_id());
    auto listed = store_->ListJobs(100);
    ASSERT_TRUE(listed.ok());
    EXPECT_EQ(listed->size(), threads == 0 ? 2u : 4u) << "one job a submission, not a retry";
    request.set_request_id(std::string(129, 'x'));
    auto too_long = scheduler_->Submit(request, "alice");
    EXPECT_TRUE(absl::IsInvalidArgument(too_long.status())) << too_long.status();
    EXPECT_NE(too_long.status().message().find("request_id"), std::string::npos);
    request.set_request_id("a\nb");
    EXPECT_TRUE(absl::IsInvalidArgument(scheduler_->Submit(request, "alice").status()));
  }
}

// A job a stopped server left SEARCHING is searched when the next one
// starts; one cancelled while searching stays cancelled, without candidates.
TEST_F(SchedulerTest, SearchingJobsAreSearchedAfterARestartUnlessCancelled) {
  options_.search_threads = 1;
  Start();
  const core::Tolerance tolerance{1e-3, 1e-3};
  auto left = store_->CreateSearchingJob(Request(2), tolerance, 100.0);
  ASSERT_TRUE(left.ok()) << left.status();
  auto cancelled = store_->CreateSearchingJob(Request(2), tolerance, 101.0);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  ASSERT_TRUE(store_->CancelJob(*cancelled, 102.0).ok());
  // The maintenance pass does not end a job that has no candidates yet.
  ASSERT_TRUE(scheduler_->MaintainOnce().ok());
  EXPECT_EQ(store_->GetJob(*left)->state(), yirage::v1::SEARCHING);
  scheduler_->StartMaintenance();
  auto job = store_->GetJob(*left);
  for (int i = 0; i < 200 && job.ok() && job->state() == yirage::v1::SEARCHING; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    job = store_->GetJob(*left);
  }
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), yirage::v1::QUEUED);
  EXPECT_EQ(job->candidates_generated(), 2);
  scheduler_->StopMaintenance();
  auto gone = store_->GetJob(*cancelled);
  ASSERT_TRUE(gone.ok()) << gone.status();
  EXPECT_EQ(gone->state(), yirage::v1::CANCELLED);
  EXPECT_EQ(gone->candidates_generated(), 0);
  // Candidates for a job that left SEARCHING are refused, changing nothing.
  std::vector<yirage::v1::Plan> plans(1);
  plans[0].set_baseline(true);
  const absl::Status late = store_->AddCandidates(*cancelled, plans, yirage::v1::SearchSummary());
  EXPECT_TRUE(absl::IsFailedPrecondition(late)) << late;
  EXPECT_EQ(store_->GetJob(*cancelled)->candidates_generated(), 0);
  // FailSearch ends only a SEARCHING job.
  ASSERT_TRUE(store_->FailSearch(*left, "search: late", 104.0).ok());
  EXPECT_EQ(store_->GetJob(*left)->state(), yirage::v1::QUEUED);
  auto failing = store_->CreateSearchingJob(Request(2), tolerance, 105.0);
  ASSERT_TRUE(failing.ok()) << failing.status();
  ASSERT_TRUE(store_->FailSearch(*failing, "search: refused", 106.0).ok());
  EXPECT_EQ(store_->GetJob(*failing)->state(), yirage::v1::FAILED);
  EXPECT_EQ(store_->GetJob(*failing)->message(), "search: refused");
}

}  // namespace
}  // namespace yirage::server
