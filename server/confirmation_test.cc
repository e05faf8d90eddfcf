// The winner of a job is run again by a second worker before the job
// succeeds (JobStore::FinishIfDone, LeaseStore::LeaseBatch, the security
// issue: a worker with a valid token may report any time for its batch).
#include <atomic>
#include <chrono>
#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/job_store.h"
#include "server/store_test_util.h"
#include "server/worker_store.h"

namespace yirage::server::testing {
namespace {

using yirage::v1::Candidate;

class ConfirmationTest : public StoreTest {
 protected:
  // A call from worker `id` of the cpu backend at `now`, matched to `chip`.
  void Connect(const std::string& id, double now, const std::string& chip = "") {
    yirage::v1::SynchronizeRequest r;
    r.set_worker_id(id);
    r.set_backend("cpu");
    r.mutable_status()->mutable_idle();
    ASSERT_TRUE(workers_->Upsert(r, now).ok());
    if (!chip.empty()) {
      ASSERT_TRUE(workers_->SetChip(id, chip).ok());
    }
  }
  std::string Create(int plans, const std::string& chip = "", double budget_seconds = 0) {
    yirage::v1::SubmitJobRequest request = MakeRequest();
    request.set_chip_id(chip);
    request.set_budget_seconds(budget_seconds);
    auto id = store_->CreateJob(request, {1e-2, 1e-2}, MakePlans(plans), {}, 1000);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }
  // The batch `worker` leases at `now`; an empty one when there is none.
  yirage::v1::Batch Lease(const std::string& worker, double now) {
    auto batch = leases_->LeaseBatch(worker, "cpu", now);
    EXPECT_TRUE(batch.ok()) << batch.status();
    return batch.ok() && batch->has_value() ? **batch : yirage::v1::Batch();
  }
  static CandidateResult At(int64_t id, double time_us, double baseline_time_us = 100) {
    CandidateResult r;
    r.set_candidate_id(id);
    r.set_status(yirage::v1::VERIFIED);
    r.set_time_us(time_us);
    r.set_baseline_time_us(baseline_time_us);
    return r;
  }
  // Reports `results` for `batch` as `worker` and finishes the job if it is
  // done, as Scheduler::Synchronize does.
  void Report(const std::string& worker, const yirage::v1::Batch& batch,
              std::initializer_list<CandidateResult> results, double now) {
    auto report = leases_->RecordResults(worker, batch.batch_id(), batch.lease_token(), 0,
                                         Results(results), now);
    ASSERT_TRUE(report.ok()) << report.status();
    ASSERT_TRUE(store_->FinishIfDone(batch.job_id(), now).ok());
  }
  yirage::v1::Job Get(const std::string& job_id) {
    auto job = store_->GetJob(job_id, 1000);
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? *job : yirage::v1::Job();
  }
  Candidate Row(const std::string& job_id, int64_t candidate_id) {
    auto all = store_->ListCandidates(job_id);
    EXPECT_TRUE(all.ok()) << all.status();
    for (const Candidate& c : *all) {
      if (c.candidate_id() == candidate_id) return c;
    }
    ADD_FAILURE() << "no candidate " << candidate_id;
    return Candidate();
  }
  std::vector<Candidate> Confirmations(const std::string& job_id) {
    std::vector<Candidate> out;
    auto all = store_->ListCandidates(job_id);
    EXPECT_TRUE(all.ok()) << all.status();
    for (const Candidate& c : *all) {
      if (c.confirms() != 0) out.push_back(c);
    }
    return out;
  }
  // Three candidates (baseline, c1, c2): w1 evaluates the baseline and c1
  // (speedup 2), w2 evaluates c2 (speedup 1.25). Returns {c1, c2}.
  std::pair<int64_t, int64_t> EvaluateOnTwoWorkers(const std::string& job_id) {
    yirage::v1::Batch first = Lease("w1", 1001);
    EXPECT_EQ(first.job_id(), job_id);
    EXPECT_EQ(first.candidates_size(), 2);
    const int64_t base = first.candidates(0).candidate_id();
    const int64_t c1 = first.candidates(1).candidate_id();
    Report("w1", first, {At(base, 100), At(c1, 50)}, 1002);
    yirage::v1::Batch second = Lease("w2", 1002);
    EXPECT_EQ(second.candidates_size(), 1);
    const int64_t c2 = second.candidates(0).candidate_id();
    Report("w2", second, {At(c2, 80)}, 1003);
    return {c1, c2};
  }
};

// The best candidate of w1 goes to w2 (never back to w1); w2's consistent
// time confirms it and the job succeeds with the confirmation. Confirmation
// rows leave the job's counts alone.
TEST_F(ConfirmationTest, TheBestIsConfirmedOnASecondWorker) {
  Connect("w1", 1000);
  Connect("w2", 1000);
  const std::string job_id = Create(3);
  const auto [c1, c2] = EvaluateOnTwoWorkers(job_id);
  yirage::v1::Job job = Get(job_id);
  EXPECT_EQ(job.state(), yirage::v1::RUNNING) << "not done while the winner is unconfirmed";
  EXPECT_EQ(job.candidates_generated(), 3);
  EXPECT_EQ(job.candidates_evaluated(), 3);
  EXPECT_EQ(job.candidates_pending(), 1);  // the confirmation
  EXPECT_FALSE(job.best().has_confirmation());
  std::vector<Candidate> rows = Confirmations(job_id);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].confirms(), c1);
  EXPECT_EQ(rows[0].status(), yirage::v1::PENDING);
  EXPECT_EQ(rows[0].plan().description(), Row(job_id, c1).plan().description());

  EXPECT_EQ(Lease("w1", 1004).candidates_size(), 0) << "w1 reported c1: it may not confirm it";
  yirage::v1::Batch check = Lease("w2", 1004);
  ASSERT_EQ(check.candidates_size(), 1);
  EXPECT_EQ(check.candidates(0).candidate_id(), rows[0].candidate_id());
  Report("w2", check, {At(rows[0].candidate_id(), 60)}, 1005);  // speedup 1.67 of 2

  job = Get(job_id);
  EXPECT_EQ(job.state(), yirage::v1::SUCCEEDED) << job.message();
  EXPECT_EQ(job.message(), "");
  EXPECT_EQ(job.best().candidate_id(), c1);
  EXPECT_EQ(job.best().worker_id(), "w1");
  ASSERT_TRUE(job.best().has_confirmation());
  EXPECT_EQ(job.best().confirmation().worker_id(), "w2");
  EXPECT_DOUBLE_EQ(job.best().confirmation().time_us(), 60);
  EXPECT_DOUBLE_EQ(job.best().confirmation().baseline_time_us(), 100);
  EXPECT_DOUBLE_EQ(job.best().confirmation().speedup(), 100.0 / 60);
  EXPECT_EQ(job.candidates_generated(), 3);
  EXPECT_EQ(job.candidates_evaluated(), 3);
  EXPECT_EQ(job.candidates_failed(), 0);
  EXPECT_EQ(job.candidates_pending(), 0);
  EXPECT_EQ(Row(job_id, c2).status(), yirage::v1::VERIFIED);
}

// A MISMATCH on the second worker refutes the best; the next best (w2's)
// is confirmed on w1 and wins.
TEST_F(ConfirmationTest, AMismatchRefutesTheBestAndTheNextBestIsConfirmed) {
  Connect("w1", 1000);
  Connect("w2", 1000);
  const std::string job_id = Create(3);
  const auto [c1, c2] = EvaluateOnTwoWorkers(job_id);
  yirage::v1::Batch check = Lease("w2", 1004);
  ASSERT_EQ(check.candidates_size(), 1);
  CandidateResult mismatch;
  mismatch.set_candidate_id(check.candidates(0).candidate_id());
  mismatch.set_status(yirage::v1::MISMATCH);
  mismatch.set_error("output Y: max abs error 3 at [0, 1]");
  Report("w2", check, {mismatch}, 1005);

  Candidate refuted = Row(job_id, c1);
  EXPECT_EQ(refuted.status(), yirage::v1::ERROR);
  EXPECT_EQ(refuted.error(),
            "not confirmed by worker w2: mismatch: output Y: max abs error 3 at [0, 1]");
  yirage::v1::Job job = Get(job_id);
  EXPECT_EQ(job.state(), yirage::v1::RUNNING);
  EXPECT_EQ(job.best().candidate_id(), c2);
  std::vector<Candidate> rows = Confirmations(job_id);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].confirms(), c2);
  EXPECT_EQ(Lease("w2", 1006).candidates_size(), 0);
  yirage::v1::Batch again = Lease("w1", 1006);
  ASSERT_EQ(again.candidates_size(), 1);
  Report("w1", again, {At(again.candidates(0).candidate_id(), 85)}, 1007);

  job = Get(job_id);
  EXPECT_EQ(job.state(), yirage::v1::SUCCEEDED) << job.message();
  EXPECT_EQ(job.best().candidate_id(), c2);
  EXPECT_EQ(job.best().confirmation().worker_id(), "w1");
  EXPECT_EQ(job.candidates_generated(), 3);
  EXPECT_EQ(job.candidates_evaluated(), 3);
  EXPECT_EQ(job.candidates_failed(), 1);  // the refuted one
}

// ListJobs (set-based, for dashboards) says of every job what GetJob says:
// counts, the best result and its confirmation after a refuted one, a job
// mid-way, an untouched one, and one waiting for a worker of its backend.
TEST_F(ConfirmationTest, ListJobsSaysWhatGetJobSays) {
  Connect("w1", 1000);
  Connect("w2", 1000);
  const std::string refuted = Create(3);
  EvaluateOnTwoWorkers(refuted);
  yirage::v1::Batch check = Lease("w2", 1004);
  ASSERT_EQ(check.candidates_size(), 1);
  Report("w2", check, {At(check.candidates(0).candidate_id(), 500)}, 1005);  // refutes c1
  yirage::v1::Batch again = Lease("w1", 1006);
  ASSERT_EQ(again.candidates_size(), 1);
  Report("w1", again, {At(again.candidates(0).candidate_id(), 85)}, 1007);
  const std::string midway = Create(3);
  yirage::v1::Batch first = Lease("w1", 1008);
  ASSERT_EQ(first.job_id(), midway);
  Report("w1", first, {At(first.candidates(0).candidate_id(), 100)}, 1009);
  const std::string untouched = Create(2);
  yirage::v1::SubmitJobRequest cuda = MakeRequest();
  cuda.set_backend("cuda");
  auto waiting = store_->CreateJob(cuda, {1e-2, 1e-2}, MakePlans(2), {}, 1000);
  ASSERT_TRUE(waiting.ok()) << waiting.status();

  auto listed = store_->ListJobs(10, 1000);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 4u);
  for (const yirage::v1::Job& job : *listed) {
    SCOPED_TRACE(job.job_id());
    EXPECT_EQ(job.DebugString(), Get(job.job_id()).DebugString());
  }
  EXPECT_EQ(Get(refuted).state(), yirage::v1::SUCCEEDED);
  EXPECT_TRUE(Get(refuted).best().has_confirmation());
  EXPECT_EQ(Get(refuted).candidates_failed(), 1);
  EXPECT_EQ(Get(midway).candidates_evaluated(), 1);
  EXPECT_TRUE(Get(midway).has_best());
  EXPECT_EQ(Get(untouched).candidates_pending(), 2);
  EXPECT_EQ(Get(*waiting).message(), "waiting: no connected worker for backend 'cuda'");
  auto two = store_->ListJobs(2, 1000);
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->size(), 2u) << "the limit";
}

// A speedup under half the reported one refutes it, saying both.
TEST_F(ConfirmationTest, ASpeedupUnderHalfTheReportedOneRefutesIt) {
  Connect("w1", 1000);
  Connect("w2", 1000);
  const std::string job_id = Create(3);
  const auto [c1, c2] = EvaluateOnTwoWorkers(job_id);
  yirage::v1::Batch check = Lease("w2", 1004);
  ASSERT_EQ(check.candidates_size(), 1);
  Report("w2", check, {At(check.candidates(0).candidate_id(), 125)}, 1005);  // speedup 0.8 of 2
  Candidate refuted = Row(job_id, c1);
  EXPECT_EQ(refuted.status(), yirage::v1::ERROR);
  EXPECT_EQ(refuted.error(),
            "not confirmed by worker w2: timed at 125 µs (speedup 0.8) against the reported "
            "50 µs (speedup 2)");
  EXPECT_EQ(Get(job_id).best().candidate_id(), c2);
}

// A forged baseline (the first batch's) is refuted like any candidate; that
// does not fail the job as a broken baseline would.
TEST_F(ConfirmationTest, ARefutedBaselineDoesNotFailTheJob) {
  Connect("w1", 1000);
  Connect("w2", 1000);
  const std::string job_id = Create(3);
  yirage::v1::Batch forged = Lease("w1", 1001);
  ASSERT_EQ(forged.candidates_size(), 2);
  const int64_t base = forged.candidates(0).candidate_id();
  const int64_t c1 = forged.candidates(1).candidate_id();
  Report("w1", forged, {At(base, 0.001, 1e6), At(c1, 0.001, 1e6)}, 1002);
  yirage::v1::Batch honest = Lease("w2", 1002);
  ASSERT_EQ(honest.candidates_size(), 1);
  const int64_t c2 = honest.candidates(0).candidate_id();
  Report("w2", honest, {At(c2, 80)}, 1003);

  // The baseline, then c1: each refuted by w2, which times them honestly.
  for (const int64_t forged_id : {base, c1}) {
    yirage::v1::Batch check = Lease("w2", 1004);
    ASSERT_EQ(check.candidates_size(), 1) << forged_id;
    Report("w2", check, {At(check.candidates(0).candidate_id(), 100)}, 1004);
    ASSERT_TRUE(store_->Maintain(1004).ok());
    EXPECT_EQ(Get(job_id).state(), yirage::v1::RUNNING);
    EXPECT_EQ(Row(job_id, forged_id).status(), yirage::v1::ERROR);
    EXPECT_NE(Row(job_id, forged_id).error().find("not confirmed by worker w2: timed at 100 µs"),
              std::string::npos)
        << Row(job_id, forged_id).error();
  }
  // c2 is confirmed by w1 (whatever w1 says, it cannot promote a candidate
  // of its own).
  yirage::v1::Batch check = Lease("w1", 1005);
  ASSERT_EQ(check.candidates_size(), 1);
  Report("w1", check, {At(check.candidates(0).candidate_id(), 0.001, 1e6)}, 1005);
  yirage::v1::Job job = Get(job_id);
  EXPECT_EQ(job.state(), yirage::v1::SUCCEEDED) << job.message();
  EXPECT_EQ(job.best().candidate_id(), c2);
  EXPECT_EQ(job.best().worker_id(), "w2");
}

// With one worker there is no one to confirm: the job succeeds as before,
// saying the winner is unconfirmed.
TEST_F(ConfirmationTest, ASingleWorkerSucceedsUnconfirmed) {
  Connect("w1", 1000);
  // A worker of another backend does not count.
  ASSERT_TRUE(workers_
                  ->Upsert(
                      [] {
                        yirage::v1::SynchronizeRequest r;
                        r.set_worker_id("w-hip");
                        r.set_backend("hip");
                        return r;
                      }(),
                      1000)
                  .ok());
  const std::string job_id = Create(2);
  yirage::v1::Batch batch = Lease("w1", 1001);
  ASSERT_EQ(batch.candidates_size(), 2);
  Report("w1", batch,
         {At(batch.candidates(0).candidate_id(), 100), At(batch.candidates(1).candidate_id(), 50)},
         1002);
  yirage::v1::Job job = Get(job_id);
  EXPECT_EQ(job.state(), yirage::v1::SUCCEEDED);
  EXPECT_EQ(job.message(),
            "the winner was not confirmed: no second connected worker of backend 'cpu' besides w1");
  EXPECT_FALSE(job.best().has_confirmation());
  EXPECT_TRUE(Confirmations(job_id).empty());
}

// The second worker left before it took the confirmation: maintenance skips
// it once that worker is no longer connected, and the job succeeds.
TEST_F(ConfirmationTest, AConfirmationWhoseWorkerIsGoneIsSkipped) {
  Connect("w1", 1000);
  Connect("w2", 1000);
  const std::string job_id = Create(3);
  yirage::v1::Batch first = Lease("w1", 1001);
  Report("w1", first,
         {At(first.candidates(0).candidate_id(), 100), At(first.candidates(1).candidate_id(), 50)},
         1002);
  yirage::v1::Batch second = Lease("w1", 1002);
  Report("w1", second, {At(second.candidates(0).candidate_id(), 70)}, 1003);
  ASSERT_EQ(Confirmations(job_id).size(), 1u);

  auto report = store_->Maintain(1005);  // w2 still counts as connected
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(Get(job_id).state(), yirage::v1::RUNNING);
  const double gone = 1000 + worker_options_.worker_timeout_seconds + 1;
  report = store_->Maintain(gone);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->jobs_finished, std::vector<std::string>{job_id});
  yirage::v1::Job job = Get(job_id);
  EXPECT_EQ(job.state(), yirage::v1::SUCCEEDED);
  EXPECT_EQ(job.message(), "the winner was not confirmed: no second worker connected");
  EXPECT_EQ(job.best().candidate_id(), first.candidates(1).candidate_id());
  EXPECT_FALSE(job.best().has_confirmation());
  std::vector<Candidate> rows = Confirmations(job_id);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status(), yirage::v1::SKIPPED);
  EXPECT_EQ(rows[0].error(), "no second worker connected");
  EXPECT_EQ(job.candidates_generated(), 3);
  EXPECT_EQ(job.candidates_evaluated(), 3);
}

// A worker that said it is stopping will not confirm anything.
TEST_F(ConfirmationTest, AStoppingWorkerDoesNotCount) {
  Connect("w1", 1000);
  yirage::v1::SynchronizeRequest bye;
  bye.set_worker_id("w2");
  bye.set_backend("cpu");
  bye.mutable_status()->mutable_idle()->set_stopping(true);
  ASSERT_TRUE(workers_->Upsert(bye, 1000).ok());
  const std::string job_id = Create(2);
  yirage::v1::Batch batch = Lease("w1", 1001);
  Report("w1", batch,
         {At(batch.candidates(0).candidate_id(), 100), At(batch.candidates(1).candidate_id(), 50)},
         1002);
  EXPECT_EQ(Get(job_id).state(), yirage::v1::SUCCEEDED);
  EXPECT_TRUE(Confirmations(job_id).empty());
}

// Where the job and the workers have registry chips, only a worker of the
// job's chip confirms.
TEST_F(ConfirmationTest, OnlyAWorkerOfTheJobsChipConfirms) {
  Connect("w1", 1000, "chip-a");
  Connect("w2", 1000, "chip-b");
  const std::string job_id = Create(2, "chip-a");
  yirage::v1::Batch batch = Lease("w1", 1001);
  Report("w1", batch,
         {At(batch.candidates(0).candidate_id(), 100), At(batch.candidates(1).candidate_id(), 50)},
         1002);
  yirage::v1::Job job = Get(job_id);
  EXPECT_EQ(job.state(), yirage::v1::SUCCEEDED);
  EXPECT_EQ(job.message(),
            "the winner was not confirmed: no second connected worker of backend 'cpu' and chip "
            "'chip-a' besides w1");

  const std::string next = Create(2, "chip-a");
  Connect("w3", 1002, "chip-a");
  batch = Lease("w1", 1003);
  ASSERT_EQ(batch.job_id(), next);
  Report("w1", batch,
         {At(batch.candidates(0).candidate_id(), 100), At(batch.candidates(1).candidate_id(), 50)},
         1003);
  EXPECT_EQ(Get(next).state(), yirage::v1::RUNNING);
  EXPECT_EQ(Lease("w2", 1004).candidates_size(), 0) << "w2 is of another chip";
  yirage::v1::Batch check = Lease("w3", 1004);
  ASSERT_EQ(check.candidates_size(), 1);
  Report("w3", check, {At(check.candidates(0).candidate_id(), 55)}, 1005);
  EXPECT_EQ(Get(next).state(), yirage::v1::SUCCEEDED);
  EXPECT_EQ(Get(next).best().confirmation().worker_id(), "w3");
}

// A job that names its chip is leased only to workers of that chip (not to
// one of another chip, nor to one whose chip is unknown) and waits saying
// so; with any_chip any worker of the backend takes it.
TEST_F(ConfirmationTest, AJobBoundToItsChipIsLeasedOnlyToWorkersOfIt) {
  Connect("w1", 1000, "chip-b");
  Connect("w2", 1000);
  const std::string bound = Create(1, "chip-a");
  EXPECT_TRUE(Get(bound).chip_bound());
  EXPECT_EQ(Lease("w1", 1001).candidates_size(), 0);
  EXPECT_EQ(Lease("w2", 1001).candidates_size(), 0);
  EXPECT_EQ(Get(bound).message(),
            "waiting: no connected worker for backend 'cpu' and chip 'chip-a' (the job is bound "
            "to its chip)");
  yirage::v1::SubmitJobRequest request = MakeRequest();
  request.set_chip_id("chip-a");
  request.set_any_chip(true);
  auto free = store_->CreateJob(request, {1e-2, 1e-2}, MakePlans(1), {}, 1001);
  ASSERT_TRUE(free.ok()) << free.status();
  EXPECT_FALSE(Get(*free).chip_bound());
  EXPECT_EQ(Lease("w1", 1002).job_id(), *free);
  Connect("w3", 1003, "chip-a");
  EXPECT_EQ(Get(bound).message(), "");
  EXPECT_EQ(Lease("w3", 1003).job_id(), bound);
}

// The final round (JobStore::Open's finalists): once the search's
// candidates are done, the best three are copied as final-round rows,
// leased together in one batch marked final_round (past the batch size),
// and the best median speedup of that round is the job's best, whatever
// the search's ratios said; a finalist that fails there refutes the search's
// row of its plan. The rows are not counted among the job's candidates.
TEST_F(ConfirmationTest, TheFinalRoundChoosesTheWinner) {
  auto final_store = JobStore::Open((dir_ / "yirage.db").string(), workers_.get(),
                                    /*confirm_winners=*/false,
                                    /*finalists=*/3);
  ASSERT_TRUE(final_store.ok()) << final_store.status();
  JobStore& store = **final_store;
  Connect("w1", 1000);
  yirage::v1::SubmitJobRequest request = MakeRequest();
  auto created = store.CreateJob(request, {1e-2, 1e-2}, MakePlans(5), {}, 1000);
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string job_id = *created;
  // The search: the baseline (100 us) and four candidates, one lucky (10x).
  std::vector<int64_t> ids;
  for (double now = 1001; ids.size() < 5; now += 1) {
    yirage::v1::Batch batch = Lease("w1", now);
    ASSERT_GT(batch.candidates_size(), 0);
    EXPECT_FALSE(batch.final_round());
    google::protobuf::RepeatedPtrField<CandidateResult> results;
    for (const auto& c : batch.candidates()) {
      const double times[] = {100, 10, 50, 60, 90};
      *results.Add() = At(c.candidate_id(), times[ids.size()]);
      ids.push_back(c.candidate_id());
    }
    ASSERT_TRUE(
        leases_->RecordResults("w1", batch.batch_id(), batch.lease_token(), 0, results, now).ok());
    ASSERT_TRUE(store.FinishIfDone(job_id, now).ok());
  }
  auto job = store.GetJob(job_id, 1010);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::RUNNING) << "the final round is to run";
  EXPECT_EQ(job->candidates_generated(), 5);
  EXPECT_EQ(job->candidates_pending(), 3);
  EXPECT_EQ(job->best().candidate_id(), ids[1]) << "the search's best, until the round ends";
  // One batch of the three finalists, though batches hold two here.
  yirage::v1::Batch final_batch = Lease("w1", 1011);
  EXPECT_TRUE(final_batch.final_round());
  ASSERT_EQ(final_batch.candidates_size(), 3);
  std::map<int64_t, int64_t> original;
  auto listed = store.ListCandidates(job_id);
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const Candidate& c : *listed) {
    if (c.final_of() != 0) original[c.candidate_id()] = c.final_of();
  }
  ASSERT_EQ(original.size(), 3u);
  std::set<int64_t> finalists;
  for (const auto& [row, of] : original) finalists.insert(of);
  EXPECT_EQ(finalists, (std::set<int64_t>{ids[1], ids[2], ids[3]}));
  // Side by side the lucky one is slow, the 50 us one fails to verify,
  // and the 60 us one is the fastest.
  google::protobuf::RepeatedPtrField<CandidateResult> results;
  int64_t winner = 0;
  CandidateResult last;
  for (const auto& c : final_batch.candidates()) {
    const int64_t of = original[c.candidate_id()];
    if (of == ids[2]) {
      CandidateResult r;
      r.set_candidate_id(c.candidate_id());
      r.set_status(yirage::v1::MISMATCH);
      r.set_error("max abs error 3");
      *results.Add() = r;
      continue;
    }
    CandidateResult r = At(c.candidate_id(), of == ids[1] ? 95 : 58, 100);
    r.set_time_iqr_us(of == ids[1] ? 40 : 2);
    if (of == ids[3]) {
      winner = c.candidate_id();
      last = r;
    } else {
      *results.Add() = r;
    }
  }
  // Two of the three rows first: the round is not whole, and the job's
  // best stays the search's (the lucky one's final row, 95 us, would make
  // the best time shown worse and then better again).
  ASSERT_TRUE(
      leases_
          ->RecordResults("w1", final_batch.batch_id(), final_batch.lease_token(), 0, results, 1012)
          .ok());
  ASSERT_TRUE(store.FinishIfDone(job_id, 1012).ok());
  job = store.GetJob(job_id, 1012);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::RUNNING);
  EXPECT_EQ(job->best().candidate_id(), ids[1]) << "the search's best while the round runs";
  auto jobs = store.ListJobs(10, 1012);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u);
  EXPECT_EQ((*jobs)[0].best().candidate_id(), ids[1]) << "ListJobs says what GetJob says";
  results.Clear();
  *results.Add() = last;
  ASSERT_TRUE(
      leases_
          ->RecordResults("w1", final_batch.batch_id(), final_batch.lease_token(), 0, results, 1012)
          .ok());
  ASSERT_TRUE(store.FinishIfDone(job_id, 1012).ok());
  job = store.GetJob(job_id, 1013);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::SUCCEEDED);
  EXPECT_EQ(job->best().candidate_id(), winner);
  EXPECT_EQ(job->best().final_of(), ids[3]);
  EXPECT_DOUBLE_EQ(job->best().time_us(), 58);
  EXPECT_DOUBLE_EQ(job->best().time_iqr_us(), 2);
  EXPECT_EQ(job->candidates_generated(), 5);
  EXPECT_EQ(job->candidates_pending(), 0);
  listed = store.ListCandidates(job_id);
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const Candidate& c : *listed) {
    if (c.candidate_id() == ids[2]) {
      EXPECT_EQ(c.status(), yirage::v1::ERROR);
      EXPECT_EQ(c.error(), "refuted in the final round: max abs error 3");
    }
    if (c.candidate_id() == ids[1]) {
      EXPECT_EQ(c.status(), yirage::v1::VERIFIED);
    }
  }
  // Once over, no second round.
  EXPECT_EQ(Lease("w1", 1014).candidates_size(), 0);
}

// A final round that could not time (its baseline failed there) says
// nothing of the finalists: the search's best stands.
TEST_F(ConfirmationTest, AFinalRoundThatCouldNotTimeLeavesTheSearchsBest) {
  auto final_store = JobStore::Open((dir_ / "yirage.db").string(), workers_.get(),
                                    /*confirm_winners=*/false, /*finalists=*/3);
  ASSERT_TRUE(final_store.ok()) << final_store.status();
  JobStore& store = **final_store;
  Connect("w1", 1000);
  auto created = store.CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(3), {}, 1000);
  ASSERT_TRUE(created.ok()) << created.status();
  yirage::v1::Batch batch = Lease("w1", 1001);
  ASSERT_EQ(batch.candidates_size(), 2);
  ASSERT_TRUE(leases_
                  ->RecordResults("w1", batch.batch_id(), batch.lease_token(), 0,
                                  Results({At(batch.candidates(0).candidate_id(), 100),
                                           At(batch.candidates(1).candidate_id(), 50)}),
                                  1002)
                  .ok());
  ASSERT_TRUE(store.FinishIfDone(*created, 1002).ok());
  yirage::v1::Batch rest = Lease("w1", 1003);
  ASSERT_EQ(rest.candidates_size(), 1);
  const int64_t best = rest.candidates(0).candidate_id();
  ASSERT_TRUE(leases_
                  ->RecordResults("w1", rest.batch_id(), rest.lease_token(), 0,
                                  Results({At(best, 25)}), 1004)
                  .ok());
  ASSERT_TRUE(store.FinishIfDone(*created, 1004).ok());
  yirage::v1::Batch round = Lease("w1", 1005);
  ASSERT_TRUE(round.final_round());
  google::protobuf::RepeatedPtrField<CandidateResult> failed;
  for (const auto& c : round.candidates()) {
    CandidateResult r;
    r.set_candidate_id(c.candidate_id());
    r.set_status(yirage::v1::ERROR);
    r.set_error("final round: the baseline did not verify: run failed");
    *failed.Add() = r;
  }
  ASSERT_TRUE(
      leases_->RecordResults("w1", round.batch_id(), round.lease_token(), 0, failed, 1006).ok());
  ASSERT_TRUE(store.FinishIfDone(*created, 1006).ok());
  auto job = store.GetJob(*created, 1007);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::SUCCEEDED);
  EXPECT_EQ(job->best().candidate_id(), best);
  EXPECT_EQ(job->best().final_of(), 0);
  EXPECT_EQ(job->candidates_failed(), 0);
}

// Candidates whose kernel is another's (same_kernel_as: the worker copied
// its result) are not finalists of their own; a finalist that fails takes
// its twins with it.
TEST_F(ConfirmationTest, TheFinalRoundTakesDistinctKernels) {
  auto final_store = JobStore::Open((dir_ / "yirage.db").string(), workers_.get(),
                                    /*confirm_winners=*/false, /*finalists=*/3);
  ASSERT_TRUE(final_store.ok()) << final_store.status();
  JobStore& store = **final_store;
  Connect("w1", 1000);
  auto created = store.CreateJob(MakeRequest(), {1e-2, 1e-2}, MakePlans(5), {}, 1000);
  ASSERT_TRUE(created.ok()) << created.status();
  // The baseline 100 us; A 10 us and its twin; B 50 us; C 60 us.
  std::vector<int64_t> ids;
  for (double now = 1001; ids.size() < 5; now += 1) {
    yirage::v1::Batch batch = Lease("w1", now);
    ASSERT_GT(batch.candidates_size(), 0);
    google::protobuf::RepeatedPtrField<CandidateResult> results;
    for (const auto& c : batch.candidates()) {
      const double times[] = {100, 10, 10, 50, 60};
      CandidateResult r = At(c.candidate_id(), times[ids.size()]);
      if (ids.size() == 2) r.set_same_kernel_as(ids[1]);
      *results.Add() = r;
      ids.push_back(c.candidate_id());
    }
    ASSERT_TRUE(
        leases_->RecordResults("w1", batch.batch_id(), batch.lease_token(), 0, results, now).ok());
    ASSERT_TRUE(store.FinishIfDone(*created, now).ok());
  }
  yirage::v1::Batch round = Lease("w1", 1010);
  ASSERT_TRUE(round.final_round());
  auto listed = store.ListCandidates(*created);
  ASSERT_TRUE(listed.ok());
  std::map<int64_t, int64_t> of;  // final row -> its finalist
  for (const Candidate& c : *listed) {
    if (c.final_of() != 0) of[c.candidate_id()] = c.final_of();
  }
  std::set<int64_t> finalists;
  for (const auto& [row, finalist] : of) finalists.insert(finalist);
  EXPECT_EQ(finalists, (std::set<int64_t>{ids[1], ids[3], ids[4]})) << "A, B and C, not A's twin";
  // A fails to verify there: A and its twin are refuted, B wins.
  google::protobuf::RepeatedPtrField<CandidateResult> results;
  for (const auto& c : round.candidates()) {
    if (of[c.candidate_id()] == ids[1]) {
      CandidateResult r;
      r.set_candidate_id(c.candidate_id());
      r.set_status(yirage::v1::MISMATCH);
      r.set_error("max abs error 2");
      *results.Add() = r;
    } else {
      *results.Add() = At(c.candidate_id(), of[c.candidate_id()] == ids[3] ? 50 : 60);
    }
  }
  ASSERT_TRUE(
      leases_->RecordResults("w1", round.batch_id(), round.lease_token(), 0, results, 1011).ok());
  ASSERT_TRUE(store.FinishIfDone(*created, 1011).ok());
  auto job = store.GetJob(*created, 1012);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state(), yirage::v1::SUCCEEDED);
  EXPECT_EQ(job->best().final_of(), ids[3]) << "B";
  listed = store.ListCandidates(*created);
  ASSERT_TRUE(listed.ok());
  for (const Candidate& c : *listed) {
    if (c.candidate_id() == ids[1] || c.candidate_id() == ids[2]) {
      EXPECT_EQ(c.status(), yirage::v1::ERROR) << c.candidate_id();
      EXPECT_EQ(c.error(), "refuted in the final round: max abs error 2");
    }
  }
}

// The result cache's source: a SUCCEEDED job of the same graph (names
// included), backend, chip and tolerance whose winner's worker named its
// toolkit; its baseline and winner plans, the winner's marked as cached.
TEST_F(ConfirmationTest, TheCacheAnswersOnlyTheSameQuestion) {
  yirage::v1::SynchronizeRequest r;
  r.set_worker_id("w1");
  r.set_backend("cpu");
  r.set_device_description(R"({"compiler": {"version": "gcc 12", "march": "znver4"}})");
  r.mutable_status()->mutable_idle();
  ASSERT_TRUE(workers_->Upsert(r, 1000).ok());
  EXPECT_EQ(SoftwareIdentity(r.device_description()),
            R"({"compiler":{"march":"znver4","version":"gcc 12"}})");
  EXPECT_EQ(SoftwareIdentity("{}"), "");
  yirage::v1::SubmitJobRequest request = MakeRequest();
  auto* in = request.mutable_graph()->add_inputs();
  in->set_name("X");
  in->add_shape(4);
  in->set_dtype(yirage::v1::FLOAT32);
  auto* op = request.mutable_graph()->add_ops();
  op->set_name("Y");
  op->set_op("exp");
  op->add_inputs("X");
  request.mutable_graph()->add_outputs("Y");
  const std::string key = GraphCacheKey(request.graph());
  ASSERT_FALSE(key.empty());
  auto created = store_->CreateJob(request, {1e-2, 1e-2}, MakePlans(2), {}, 1000);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_FALSE(store_->FindCacheSource(key, "cpu", "", {1e-2, 1e-2})->has_value())
      << "not finished";
  yirage::v1::Batch batch = Lease("w1", 1001);
  Report("w1", batch,
         {At(batch.candidates(0).candidate_id(), 100), At(batch.candidates(1).candidate_id(), 50)},
         1002);
  auto source = store_->FindCacheSource(key, "cpu", "", {1e-2, 1e-2});
  ASSERT_TRUE(source.ok() && source->has_value()) << source.status();
  EXPECT_EQ((*source)->job_id, *created);
  EXPECT_EQ((*source)->software, SoftwareIdentity(r.device_description()));
  ASSERT_EQ((*source)->plans.size(), 2u);
  EXPECT_TRUE((*source)->plans[0].baseline());
  EXPECT_EQ((*source)->plans[1].description(), "plan 1 (cached from " + *created + ")");
  EXPECT_FALSE(store_->FindCacheSource(key, "cuda", "", {1e-2, 1e-2})->has_value());
  EXPECT_FALSE(store_->FindCacheSource(key, "cpu", "h100", {1e-2, 1e-2})->has_value());
  EXPECT_FALSE(store_->FindCacheSource(key, "cpu", "", {1e-3, 1e-2})->has_value());
  // Another name for the output: another question (a plan names the ops).
  request.mutable_graph()->mutable_ops(0)->set_name("Z");
  request.mutable_graph()->set_outputs(0, "Z");
  EXPECT_NE(GraphCacheKey(request.graph()), key);
}

// A job out of time still runs its confirmation: the budget skips only
// ordinary candidates.
TEST_F(ConfirmationTest, TheTimeBudgetDoesNotSkipAConfirmation) {
  Connect("w1", 1000);
  Connect("w2", 1000);
  const std::string job_id = Create(2, "", /*budget_seconds=*/3);
  yirage::v1::Batch batch = Lease("w1", 1001);
  Report("w1", batch,
         {At(batch.candidates(0).candidate_id(), 100), At(batch.candidates(1).candidate_id(), 50)},
         1002);
  auto report = store_->Maintain(1006);  // out of time
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->candidates_skipped, 0);
  yirage::v1::Batch check = Lease("w2", 1006);
  ASSERT_EQ(check.candidates_size(), 1);
  Report("w2", check, {At(check.candidates(0).candidate_id(), 45)}, 1007);
  EXPECT_EQ(Get(job_id).state(), yirage::v1::SUCCEEDED);
  EXPECT_TRUE(Get(job_id).best().has_confirmation());
}

// The stores share one connection, and FinishIfDone writes inside the group
// commit while asking the WorkerStore: workers' calls that write their rows
// (each call a new state) and reports that finish jobs, from many threads at
// once, all go through, and every job ends confirmed.
TEST_F(ConfirmationTest, WorkerWritesAndJobCompletionsInterleaveOnOneConnection) {
  Connect("w1", 1000);
  Connect("w2", 1000);
  constexpr int kJobs = 12;
  std::vector<std::string> jobs;
  for (int i = 0; i < kJobs; ++i) jobs.push_back(Create(2));
  std::vector<std::thread> threads;
  std::atomic<bool> stop{false};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        yirage::v1::SynchronizeRequest r;
        r.set_worker_id("idle-" + std::to_string(t));
        r.set_backend("cpu");
        r.set_hostname("h" + std::to_string(i));  // a change: the row is written
        r.mutable_status()->mutable_idle();
        EXPECT_TRUE(workers_->Upsert(r, 1000).ok());
      }
    });
  }
  // Each worker runs batches until nothing is left to lease: it reports the
  // baseline 100 us and anything else 50 us.
  std::vector<std::thread> runners;
  for (const std::string w : {"w1", "w2"}) {
    runners.emplace_back([&, w] {
      for (int idle = 0; idle < 50;) {
        auto batch = leases_->LeaseBatch(w, "cpu", 1001);
        ASSERT_TRUE(batch.ok()) << batch.status();
        if (!batch->has_value()) {
          ++idle;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          continue;
        }
        google::protobuf::RepeatedPtrField<CandidateResult> results;
        for (const auto& c : (*batch)->candidates()) {
          *results.Add() = At(c.candidate_id(), c.plan().baseline() ? 100 : 50);
        }
        auto report = leases_->RecordResults(w, (*batch)->batch_id(), (*batch)->lease_token(), 0,
                                             results, 1002);
        ASSERT_TRUE(report.ok()) << report.status();
        ASSERT_TRUE(store_->FinishIfDone((*batch)->job_id(), 1002).ok());
      }
    });
  }
  for (std::thread& r : runners) r.join();
  stop = true;
  for (std::thread& t : threads) t.join();
  for (const std::string& job_id : jobs) {
    const yirage::v1::Job job = Get(job_id);
    EXPECT_EQ(job.state(), yirage::v1::SUCCEEDED) << job_id << ": " << job.message();
    EXPECT_TRUE(job.best().has_confirmation()) << job_id << ": " << job.message();
  }
}

}  // namespace
}  // namespace yirage::server::testing
