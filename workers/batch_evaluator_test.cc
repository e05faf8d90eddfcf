#include "workers/batch_evaluator.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/candidate_generator.h"
#include "core/graph.h"
#include "core/graph_json.h"
#include "gtest/gtest.h"
#include "workers/backend_library.h"

namespace yirage::worker {
namespace {

constexpr char kGraph[] = R"({
  "name": "small_mlp",
  "inputs": [{"name": "X", "shape": [4, 64], "dtype": "float32"},
             {"name": "W", "shape": [64, 32], "dtype": "float32"}],
  "ops": [{"name": "M", "op": "matmul", "inputs": ["X", "W"]},
          {"name": "Y", "op": "silu", "inputs": ["M"]}],
  "outputs": ["Y"]
})";

// A batch of the graph's first `n` candidates, with `seed`.
yirage::v1::Batch MakeBatch(uint64_t seed, int n) {
  absl::StatusOr<yirage::v1::Graph> proto = core::ParseGraphJson(kGraph);
  EXPECT_TRUE(proto.ok()) << proto.status();
  absl::StatusOr<core::Graph> graph = core::Graph::FromProto(*proto);
  EXPECT_TRUE(graph.ok()) << graph.status();
  core::SearchOptions options;
  options.backend = "cpu";
  options.max_candidates = n + 1;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans = core::GenerateCandidates(*graph, options);
  EXPECT_TRUE(plans.ok()) << plans.status();
  yirage::v1::Batch batch;
  batch.set_batch_id("b");
  batch.set_job_id("j");
  *batch.mutable_graph() = *proto;
  batch.mutable_tolerance()->set_rtol(1e-3);
  batch.mutable_tolerance()->set_atol(1e-4);
  *batch.mutable_baseline() = (*plans)[0];
  for (int i = 1; i < static_cast<int>(plans->size()); ++i) {
    yirage::v1::BatchCandidate* c = batch.add_candidates();
    c->set_candidate_id(i);
    *c->mutable_plan() = (*plans)[i];
  }
  batch.set_seed(seed);
  return batch;
}

// A few short timing runs: these tests check what is evaluated, not times.
YirageTimingOptions QuickTiming() {
  YirageTimingOptions timing{};
  timing.warmup_runs = 1;
  timing.max_runs = 3;
  timing.min_runs = 1;
  timing.target_seconds = 0.01;
  return timing;
}

// Evaluates `batch`; returns how many candidates were verified.
int Verified(BatchEvaluator& evaluator, const yirage::v1::Batch& batch) {
  int verified = 0, results = 0;
  BatchEvaluator::Callbacks callbacks;
  callbacks.on_start = [](int64_t) {};
  callbacks.on_result = [&](const yirage::v1::CandidateResult& r) {
    ++results;
    verified += r.status() == yirage::v1::VERIFIED ? 1 : 0;
    EXPECT_EQ(r.status(), yirage::v1::VERIFIED) << r.error();
  };
  callbacks.should_stop = [] { return false; };
  EXPECT_TRUE(evaluator.Evaluate(batch, callbacks).ok());
  EXPECT_EQ(results, batch.candidates_size());
  return verified;
}

// A job's batches share its graph and seed: the inputs and the float64
// reference are computed once and reused; another seed computes them anew.
TEST(BatchEvaluatorTest, ReusesTheReferenceAcrossBatchesOfOneJob) {
  absl::StatusOr<std::unique_ptr<BackendLibrary>> backend =
      BackendLibrary::Load("cpu", YIRAGE_BIN_DIR);
  ASSERT_TRUE(backend.ok()) << backend.status();
  BatchEvaluator evaluator(backend->get(), QuickTiming());
  const yirage::v1::Batch first = MakeBatch(7, 2);
  ASSERT_GT(first.candidates_size(), 0);
  EXPECT_EQ(Verified(evaluator, first), first.candidates_size());
  EXPECT_EQ(evaluator.references_computed(), 1);
  EXPECT_EQ(Verified(evaluator, first), first.candidates_size());
  EXPECT_EQ(evaluator.references_computed(), 1);
  const yirage::v1::Batch reseeded = MakeBatch(8, 2);
  EXPECT_EQ(Verified(evaluator, reseeded), reseeded.candidates_size());
  EXPECT_EQ(evaluator.references_computed(), 2);
  // Two jobs' batches interleaved: neither reference is computed again.
  EXPECT_EQ(Verified(evaluator, first), first.candidates_size());
  EXPECT_EQ(Verified(evaluator, reseeded), reseeded.candidates_size());
  EXPECT_EQ(evaluator.references_computed(), 2);
}

// Plans the backend runs as the same code (its CompiledPlan.kernel_key: here
// one plan under two descriptions) are evaluated once per job: the second
// takes the first's result and says whose it is; another job evaluates its
// own.
TEST(BatchEvaluatorTest, EvaluatesTheSameKernelOncePerJob) {
  absl::StatusOr<std::unique_ptr<BackendLibrary>> backend =
      BackendLibrary::Load("cpu", YIRAGE_BIN_DIR);
  ASSERT_TRUE(backend.ok()) << backend.status();
  BatchEvaluator evaluator(backend->get(), QuickTiming());
  yirage::v1::Batch batch = MakeBatch(7, 1);
  ASSERT_EQ(batch.candidates_size(), 1);
  yirage::v1::BatchCandidate twin = batch.candidates(0);
  twin.set_candidate_id(20);
  twin.mutable_plan()->set_description("the same plan, described otherwise");
  *batch.add_candidates() = twin;
  std::vector<yirage::v1::CandidateResult> results;
  BatchEvaluator::Callbacks callbacks;
  callbacks.on_start = [](int64_t) {};
  callbacks.on_result = [&](const yirage::v1::CandidateResult& r) { results.push_back(r); };
  callbacks.should_stop = [] { return false; };
  ASSERT_TRUE(evaluator.Evaluate(batch, callbacks).ok());
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].status(), yirage::v1::VERIFIED) << results[0].error();
  EXPECT_EQ(results[0].same_kernel_as(), 0);
  EXPECT_EQ(results[1].candidate_id(), 20);
  EXPECT_EQ(results[1].status(), yirage::v1::VERIFIED);
  EXPECT_EQ(results[1].same_kernel_as(), results[0].candidate_id());
  EXPECT_EQ(results[1].time_us(), results[0].time_us());
  EXPECT_FALSE(results[1].source().empty());
  EXPECT_EQ(evaluator.results_reused(), 1);
  // Another job: evaluated anew.
  batch.set_job_id("another job");
  results.clear();
  ASSERT_TRUE(evaluator.Evaluate(batch, callbacks).ok());
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].same_kernel_as(), 0);
  EXPECT_EQ(results[1].same_kernel_as(), results[0].candidate_id());
  EXPECT_EQ(evaluator.results_reused(), 2);
}

// A final-round batch: every candidate verified, then all of them and the
// baseline timed round after round (each plan once a round), nothing taken
// from an earlier result of the same code; each result carries its median,
// the spread of its rounds and the baseline's median, the same for all.
TEST(BatchEvaluatorTest, AFinalRoundTimesEveryFinalistBesideTheOthers) {
  absl::StatusOr<std::unique_ptr<BackendLibrary>> backend =
      BackendLibrary::Load("cpu", YIRAGE_BIN_DIR);
  ASSERT_TRUE(backend.ok()) << backend.status();
  BatchEvaluator evaluator(backend->get(), QuickTiming());
  yirage::v1::Batch batch = MakeBatch(7, 3);
  ASSERT_GE(batch.candidates_size(), 2);
  // Evaluated once in the search: the final round runs them again.
  ASSERT_EQ(Verified(evaluator, batch), batch.candidates_size());
  const int64_t reused = evaluator.results_reused();
  batch.set_final_round(true);
  std::vector<yirage::v1::CandidateResult> results;
  std::vector<int64_t> started;
  BatchEvaluator::Callbacks callbacks;
  callbacks.on_start = [&](int64_t id) { started.push_back(id); };
  callbacks.on_result = [&](const yirage::v1::CandidateResult& r) { results.push_back(r); };
  callbacks.should_stop = [] { return false; };
  ASSERT_TRUE(evaluator.Evaluate(batch, callbacks).ok());
  ASSERT_EQ(results.size(), static_cast<size_t>(batch.candidates_size()));
  for (const auto& r : results) {
    EXPECT_EQ(r.status(), yirage::v1::VERIFIED) << r.error();
    EXPECT_GT(r.time_us(), 0);
    EXPECT_GE(r.time_iqr_us(), 0);
    EXPECT_GT(r.baseline_time_us(), 0);
    EXPECT_EQ(r.baseline_time_us(), results[0].baseline_time_us());
    EXPECT_EQ(r.same_kernel_as(), 0);
    EXPECT_FALSE(r.source().empty());
  }
  EXPECT_EQ(evaluator.results_reused(), reused);
  // The baseline and each finalist verified, then 7 rounds of all of them.
  const size_t plans = batch.candidates_size() + 1;
  EXPECT_EQ(started.size(), plans + 7 * plans);
}

}  // namespace
}  // namespace yirage::worker
