#include "core/rewrite.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "core/candidate_generator.h"
#include "core/fingerprint.h"
#include "core/graph_hash.h"
#include "core/graph_json.h"
#include "core/tensor.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

Graph LoadExample(const std::string& name) {
  std::ifstream in(std::string(YIRAGE_SOURCE_DIR) + "/examples/graphs/" + name + ".json");
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<yirage::v1::Graph> proto = ParseGraphJson(ss.str());
  EXPECT_TRUE(proto.ok()) << proto.status();
  absl::StatusOr<Graph> g = Graph::FromProto(*proto);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

// Max |a - b| / (1 + |b|) over the float64 reference outputs of two graphs.
double ReferenceDistance(const Graph& a, const Graph& b, uint64_t seed) {
  const std::vector<HostTensor> inputs = MakeRandomInputs(a, seed);
  absl::StatusOr<std::vector<HostTensor>> ra = EvaluateReference(a, inputs);
  absl::StatusOr<std::vector<HostTensor>> rb = EvaluateReference(b, inputs);
  EXPECT_TRUE(ra.ok() && rb.ok());
  double worst = 0;
  for (size_t o = 0; o < ra->size(); ++o) {
    for (size_t i = 0; i < (*ra)[o].data.size(); ++i) {
      worst = std::max(worst, std::fabs((*ra)[o].data[i] - (*rb)[o].data[i]) /
                                  (1 + std::fabs((*rb)[o].data[i])));
    }
  }
  return worst;
}

class ExampleRewrites : public ::testing::TestWithParam<std::string> {};

// Every rewrite found on every example graph: fingerprint-equal to the
// original under fresh seeds, float64-equal up to rounding, and distinct.
TEST_P(ExampleRewrites, EveryRewriteIsEquivalent) {
  const Graph g = LoadExample(GetParam());
  RewriteOptions options;
  options.time_budget_seconds = 0;
  RewriteStats stats;
  absl::StatusOr<std::vector<RewrittenGraph>> found = ExploreRewrites(g, options, &stats);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(stats.rewrites_rejected, 0);
  for (const std::string& r : stats.rejections) ADD_FAILURE() << r;
  std::set<Hash128> hashes = {CanonicalGraphHash(g)};
  FingerprintOptions fresh;
  fresh.seed = 0xfeedbeef;
  for (const RewrittenGraph& r : *found) {
    SCOPED_TRACE(absl::StrJoin(r.rewrites, "+"));
    EXPECT_TRUE(r.fingerprint.equivalent);
    EXPECT_LT(r.fingerprint.false_pass_bound, 1e-15);
    EXPECT_TRUE(hashes.insert(r.hash).second);
    const FingerprintResult again = CheckFingerprintEquivalent(g, *r.graph, fresh);
    EXPECT_TRUE(again.equivalent) << again.message;
    EXPECT_LT(ReferenceDistance(g, *r.graph, 7), 1e-9);
  }
  std::printf(
      "[rewrites] %s: %zu verified rewritten graphs, %d explored, %d duplicates, %lld "
      "fingerprint checks, %.3f s\n",
      GetParam().c_str(), found->size(), stats.graphs_explored, stats.duplicates,
      static_cast<long long>(stats.fingerprint_checks), stats.seconds);
  for (const RewrittenGraph& r : *found) {
    std::printf("    %s (bound %.2g)\n", absl::StrJoin(r.rewrites, "+").c_str(),
                r.fingerprint.false_pass_bound);
  }
}

// The whole search per example graph: counts and wall time.
TEST_P(ExampleRewrites, SearchCountsAndTime) {
  const Graph g = LoadExample(GetParam());
  SearchOptions options;
  SearchStats stats;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans =
      GenerateCandidatesWithStats(g, options, &stats);
  ASSERT_TRUE(plans.ok()) << plans.status();
  EXPECT_TRUE((*plans)[0].baseline());
  EXPECT_FALSE((*plans)[0].has_graph());
  for (const auto& p : *plans) EXPECT_TRUE(ValidatePlan(g, p).ok()) << p.description();
  std::printf(
      "[search] %s: %d rewritten graphs verified, %d rejected, %d explored, %d "
      "duplicates, %lld fingerprint checks, %d plans (%d rewritten), rewrite search "
      "%.3f s, total %.3f s\n",
      GetParam().c_str(), stats.rewrites_verified, stats.rewrites_rejected, stats.graphs_explored,
      stats.duplicates, static_cast<long long>(stats.fingerprint_checks), stats.plans,
      stats.rewritten_plans, stats.rewrite_seconds, stats.seconds);
  std::printf("    best ranked: %s\n", (*plans)[1].description().c_str());
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleRewrites,
                         ::testing::Values("rms_norm_linear", "gated_mlp", "lora", "attention",
                                           "low_rank_projection", "norm_transformer", "softmax"));

}  // namespace
}  // namespace yirage::core
