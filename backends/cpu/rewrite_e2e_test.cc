// End to end on the CPU backend: plans of fingerprint-verified rewritten
// graphs compile, run and match the float64 reference of the job's graph
// (which of them runs faster is measured in bench/, not here); and rewrites that are exact
// identities but numerically unstable pass the fingerprint yet fail the numeric check.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_test_util.h"
#include "core/candidate_generator.h"
#include "core/candidate_test_graphs.h"
#include "core/cost_model.h"
#include "core/fingerprint.h"
#include "core/graph_json.h"
#include "core/rewrite.h"

namespace yirage::backends::cpu::testing {
namespace {

yirage::v1::Graph LoadExample(const std::string& name) {
  std::ifstream in(std::string(YIRAGE_SOURCE_DIR) + "/examples/graphs/" + name + ".json");
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<yirage::v1::Graph> proto = core::ParseGraphJson(ss.str());
  EXPECT_TRUE(proto.ok()) << proto.status();
  return *proto;
}

// Runs plan `index` and compares with the reference; returns whether it matched.
bool RunMatches(const core::Graph& g, Compiled& c, int index, std::string* why) {
  const yirage::v1::CompiledPlan& cp = c.response.plans(index);
  if (!cp.ok()) {
    *why = cp.error();
    return false;
  }
  const std::vector<core::HostTensor> inputs = core::MakeRandomInputs(g, 42);
  absl::StatusOr<std::vector<core::HostTensor>> ref = core::EvaluateReference(g, inputs);
  Buffers b = MakeBuffers(g, inputs);
  char* error = nullptr;
  if (Backend()->run(c.module, index, b.in_ptrs.data(), b.out_ptrs.data(), &error) != YIRAGE_OK) {
    *why = error != nullptr ? error : "run failed";
    return false;
  }
  std::vector<core::HostTensor> got;
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const core::TensorInfo& t = g.tensor(g.outputs()[k]);
    got.push_back(core::DecodeTensor(b.out[k].data(), t.shape, t.dtype));
  }
  const core::CompareResult r = core::CompareOutputs(g, *ref, got, core::ResolveTolerance(g, {}));
  *why = r.message;
  return r.ok;
}

class RewriteEndToEnd : public ::testing::TestWithParam<std::string> {};

TEST_P(RewriteEndToEnd, RewrittenPlansRunAndAreTimed) {
  ASSERT_NE(Backend(), nullptr);
  const yirage::v1::Graph proto = LoadExample(GetParam());
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok()) << g.status();
  core::SearchOptions options;
  core::SearchStats stats;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans =
      core::GenerateCandidatesWithStats(*g, options, &stats);
  ASSERT_TRUE(plans.ok()) << plans.status();
  // The cheapest few plans of each kind (by the cost model), as a job with a
  // small budget would time them.
  constexpr int kPerKind = 6;
  std::vector<yirage::v1::Plan> chosen;
  std::vector<bool> rewritten;
  int n_orig = 0, n_rw = 0;
  for (const yirage::v1::Plan& p : *plans) {
    if (p.baseline()) continue;
    int& n = p.has_graph() ? n_rw : n_orig;
    if (n >= kPerKind) continue;
    ++n;
    chosen.push_back(p);
    rewritten.push_back(p.has_graph());
  }
  ASSERT_GT(n_rw, 0) << "no rewritten plan for " << GetParam();
  Compiled c;
  CompileThroughAbi(proto, chosen, &c);
  int verified_orig = 0, verified_rw = 0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    std::string why;
    const bool ok = RunMatches(*g, c, static_cast<int>(i), &why);
    EXPECT_TRUE(ok) << chosen[i].description() << ": " << why;
    if (ok) ++(rewritten[i] ? verified_rw : verified_orig);
  }
  EXPECT_GT(verified_orig, 0);
  EXPECT_GT(verified_rw, 0);
  if (GetParam() == "low_rank_projection") {
    // X @ (U @ P) does 4x fewer flops than (X @ U) @ P at these shapes; the
    // rewritten graph the search ranks first must be that one. (How much
    // faster it runs is a benchmark's question: bench/cpu_bench.sh.)
    double orig_flops = 0;
    for (int op = 0; op < static_cast<int>(g->ops().size()); ++op)
      orig_flops += core::OpFlops(*g, op);
    double best_rw_flops = 1e300;
    for (size_t i = 0; i < chosen.size(); ++i) {
      if (!rewritten[i]) continue;
      absl::StatusOr<core::Graph> rg = core::Graph::FromProto(chosen[i].graph());
      ASSERT_TRUE(rg.ok()) << rg.status();
      double flops = 0;
      for (int op = 0; op < static_cast<int>(rg->ops().size()); ++op)
        flops += core::OpFlops(*rg, op);
      best_rw_flops = std::min(best_rw_flops, flops);
    }
    EXPECT_LT(best_rw_flops * 3, orig_flops);
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, RewriteEndToEnd,
                         ::testing::Values("low_rank_projection", "rms_norm_linear", "gated_mlp",
                                           "lora", "attention", "norm_transformer", "softmax"));

// Exact rewrites that lose precision: the fingerprint proves them (they are
// identities over the rationals), the numeric check on the device rejects them.
yirage::v1::Plan OneKernelPerOp(const core::Graph& g) {
  std::vector<KernelSpec> specs;
  for (const core::OpInfo& op : g.ops()) specs.push_back(Row({op.name}, Rows(4, 64, 256, 8, 1)));
  return MakePlan(g, specs, "mutation");
}

void ExpectFingerprintPassNumericFail(const GraphBuilder& original, const GraphBuilder& mutated) {
  absl::StatusOr<core::Graph> a = core::Graph::FromProto(original.proto());
  absl::StatusOr<core::Graph> b = core::Graph::FromProto(mutated.proto());
  ASSERT_TRUE(a.ok() && b.ok());
  const core::FingerprintResult fp = core::CheckFingerprintEquivalent(*a, *b);
  EXPECT_TRUE(fp.equivalent) << fp.message;
  yirage::v1::Plan plan = OneKernelPerOp(*b);
  *plan.mutable_graph() = b->proto();
  plan.set_fingerprint_verified(fp.equivalent);
  plan.set_fingerprint_trials(fp.trials);
  ASSERT_TRUE(core::ValidatePlan(*a, plan).ok()) << core::ValidatePlan(*a, plan);
  Compiled c;
  CompileThroughAbi(original.proto(), {plan}, &c);
  std::string why;
  EXPECT_FALSE(RunMatches(*a, c, 0, &why)) << "the numeric check missed an unstable rewrite";
  std::printf("[mutation] %s: fingerprint passed, numeric check rejected: %s\n",
              mutated.proto().name().c_str(), why.substr(0, 160).c_str());
}

// A window (rows 1468..1927) of two [1000, 40] tensors joined over rows,
// after an elementwise op with a row that broadcasts over them: the window
// lies inside B, so slice_through_elementwise then slice_through_concat
// leave A unread.
yirage::v1::Graph WindowOfJoinedRows() {
  using core::testing::FloatAttr;
  using core::testing::IntAttr;
  return core::testing::GraphProtoBuilder("window_of_joined_rows")
      .Input("A", {1000, 40})
      .Input("B", {1000, 40})
      .Input("W", {1, 40})
      .Op("C", "concat", {"A", "B"}, {{"axis", IntAttr(0)}})
      .Op("M", "minimum", {"W", "C"})
      .Op("S", "sub", {"M"}, {{"scalar", FloatAttr(1.444)}})
      .Op("Y", "slice", {"S"},
          {{"axis", IntAttr(0)}, {"start", IntAttr(1468)}, {"end", IntAttr(1927)}})
      .Output("Y")
      .proto();
}

// The graphs split_key_axis, defer_layer_norm and the slice rules produce
// compile and run on the CPU backend and match the float64 reference of the
// original graph (their plans may rank below the ones the test above times).
TEST(RewriteRulesEndToEnd, SplitKeyAxisDeferredLayerNormAndSlicesRun) {
  ASSERT_NE(Backend(), nullptr);
  const std::vector<std::pair<yirage::v1::Graph, std::string>> cases = {
      {LoadExample("attention"), "split_key_axis"},
      {core::testing::LayerNormLinearProto(), "defer_layer_norm"},
      {core::testing::LayerNormLinearProto(true, false, false), "defer_layer_norm"},
      {WindowOfJoinedRows(), "slice_through_elementwise"}};
  for (const auto& [proto, rule_name] : cases) {
    SCOPED_TRACE(rule_name);
    absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
    ASSERT_TRUE(g.ok()) << g.status();
    int graphs = 0;
    std::vector<yirage::v1::Graph> rewritten;
    for (const core::RewriteRule& rule : core::DefaultRewriteRules()) {
      if (rule.name == rule_name) rewritten = rule.apply(*g);
    }
    if (rule_name == "slice_through_elementwise") {
      // The whole chain: the slice above both elementwise ops, then inside B.
      core::RewriteOptions options;
      absl::StatusOr<std::vector<core::RewrittenGraph>> found =
          core::ExploreRewrites(*g, options, nullptr);
      ASSERT_TRUE(found.ok()) << found.status();
      bool unread = false;
      for (const core::RewrittenGraph& r : *found) {
        rewritten.push_back(r.graph->proto());
        unread = unread || r.graph->proto().unread_inputs_size() > 0;
      }
      EXPECT_TRUE(unread) << "a rewritten graph that reads only B";
    }
    for (const yirage::v1::Graph& rewritten_proto : rewritten) {
      absl::StatusOr<core::Graph> rg = core::Graph::FromProto(rewritten_proto);
      ASSERT_TRUE(rg.ok()) << rg.status();
      ++graphs;
      core::SearchOptions options;
      options.enable_rewrites = false;
      options.max_candidates = 4;  // the baseline and the 3 cheapest partitions
      absl::StatusOr<std::vector<yirage::v1::Plan>> plans = core::GenerateCandidates(*rg, options);
      ASSERT_TRUE(plans.ok()) << plans.status();
      Compiled c;
      CompileThroughAbi(rg->proto(), *plans, &c);
      for (size_t i = 0; i < plans->size(); ++i) {
        std::string why;
        EXPECT_TRUE(RunMatches(*g, c, static_cast<int>(i), &why))
            << (*plans)[i].description() << ": " << why;
      }
    }
    EXPECT_GT(graphs, 0);
  }
}

TEST(NumericMutations, OnePassVarianceCancelsCatastrophically) {
  // layer_norm(X + 3000): mean(x^2) - mean^2 loses every digit in float32.
  GraphBuilder original("layer_norm_offset");
  original.Input("X", {16, 256})
      .Op("Xo", "add", {"X"}, {F("scalar", 3000.0)})
      .Op("Y", "layer_norm", {"Xo"})
      .Output("Y");
  GraphBuilder mutated("one_pass_variance");
  mutated.Input("X", {16, 256})
      .Op("Xo", "add", {"X"}, {F("scalar", 3000.0)})
      .Op("mu", "reduce_mean", {"Xo"})
      .Op("d", "sub", {"Xo", "mu"})
      .Op("x2", "square", {"Xo"})
      .Op("ex2", "reduce_mean", {"x2"})
      .Op("mu2", "square", {"mu"})
      .Op("v", "sub", {"ex2", "mu2"})
      .Op("ve", "add", {"v"}, {F("scalar", 1e-5)})
      .Op("r", "rsqrt", {"ve"})
      .Op("Y", "mul", {"d", "r"})
      .Output("Y");
  ExpectFingerprintPassNumericFail(original, mutated);
}

TEST(NumericMutations, SoftmaxWithoutTheMaxOverflows) {
  // softmax(100 X) as exp(S) / rowsum(exp(S)): exact for any row constant,
  // including none, but exp overflows float32 to inf and inf / inf is NaN.
  GraphBuilder original("softmax_large");
  original.Input("X", {8, 64})
      .Op("S", "mul", {"X"}, {F("scalar", 100.0)})
      .Op("Y", "softmax", {"S"})
      .Output("Y");
  GraphBuilder mutated("softmax_without_max");
  mutated.Input("X", {8, 64})
      .Op("S", "mul", {"X"}, {F("scalar", 100.0)})
      .Op("e", "exp", {"S"})
      .Op("s", "reduce_sum", {"e"})
      .Op("Y", "div", {"e", "s"})
      .Output("Y");
  ExpectFingerprintPassNumericFail(original, mutated);
}

}  // namespace
}  // namespace yirage::backends::cpu::testing
