#include "core/rewrite.h"

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/candidate_generator.h"
#include "core/candidate_test_graphs.h"
#include "core/fingerprint.h"
#include "core/graph_hash.h"
#include "core/graph_json.h"
#include "core/tensor.h"
#include "gmock/gmock.h"
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

// The rule named `name` of DefaultRewriteRules() applied to g, as graphs.
std::vector<Graph> ApplyRule(const Graph& g, const std::string& name) {
  std::vector<Graph> out;
  for (const RewriteRule& rule : DefaultRewriteRules()) {
    if (rule.name != name) continue;
    for (const yirage::v1::Graph& proto : rule.apply(g)) {
      absl::StatusOr<Graph> r = Graph::FromProto(proto);
      EXPECT_TRUE(r.ok()) << r.status();
      if (r.ok()) out.push_back(*std::move(r));
    }
  }
  return out;
}

int CountOps(const Graph& g, OpType type) {
  int n = 0;
  for (const OpInfo& op : g.ops()) n += op.type == type ? 1 : 0;
  return n;
}

Graph AttentionGraph(int64_t keys) {
  absl::StatusOr<Graph> g = Graph::FromProto(testing::GraphProtoBuilder("attention")
                                                 .Input("Q", {2, 16, 8})
                                                 .Input("K", {2, keys, 8})
                                                 .Input("V", {2, keys, 8})
                                                 .Op("O", "self_attention", {"Q", "K", "V"})
                                                 .Output("O")
                                                 .proto());
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

// The attention example splits over its 512 keys into 2 and 4 blocks; both
// are fingerprint-verified (the block maxima cancel, see core/rewrite.h),
// agree with the original in float64, and are found within the search.
TEST(SplitKeyAxis, AttentionExampleSplitsIntoTwoAndFourBlocks) {
  const Graph g = LoadExample("attention");
  const std::vector<Graph> split = ApplyRule(g, "split_key_axis");
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(CountOps(split[0], OpType::kSlice), 4);  // K and V, 2 blocks each
  EXPECT_EQ(CountOps(split[1], OpType::kSlice), 8);
  for (const Graph& s : split) {
    EXPECT_EQ(CountOps(s, OpType::kSoftmax), 0);
    const FingerprintResult fp = CheckFingerprintEquivalent(g, s);
    EXPECT_TRUE(fp.equivalent) << fp.message;
    EXPECT_LT(fp.false_pass_bound, 1e-15);
    EXPECT_LT(ReferenceDistance(g, s, 3), 1e-9);
  }
  RewriteOptions options;
  options.time_budget_seconds = 0;
  RewriteStats stats;
  absl::StatusOr<std::vector<RewrittenGraph>> found = ExploreRewrites(g, options, &stats);
  ASSERT_TRUE(found.ok()) << found.status();
  int splits = 0;
  for (const RewrittenGraph& r : *found) {
    splits += r.rewrites == std::vector<std::string>{"split_key_axis"} ? 1 : 0;
  }
  EXPECT_EQ(splits, 2);
  EXPECT_EQ(stats.rewrites_rejected, 0);
}

// Only key lengths >= 64 split, and only into blocks of >= 32 keys.
TEST(SplitKeyAxis, BoundedToLongKeyAxes) {
  EXPECT_TRUE(ApplyRule(AttentionGraph(48), "split_key_axis").empty());
  EXPECT_TRUE(ApplyRule(AttentionGraph(63), "split_key_axis").empty());
  const Graph g96 = AttentionGraph(96);
  const std::vector<Graph> split = ApplyRule(g96, "split_key_axis");
  ASSERT_EQ(split.size(), 1u);  // 4 blocks of 24 keys are too small
  EXPECT_TRUE(CheckFingerprintEquivalent(g96, split[0]).equivalent);
  const Graph g128 = AttentionGraph(128);
  for (const Graph& s : ApplyRule(g128, "split_key_axis")) {
    const FingerprintResult fp = CheckFingerprintEquivalent(g128, s);
    EXPECT_TRUE(fp.equivalent) << fp.message;
    EXPECT_LT(ReferenceDistance(g128, s, 5), 1e-9);
  }
}

// slice(concat(A, B)) along the concat's axis and across it: the slice
// reads only the pieces it keeps; every form fingerprint-verified and
// float64-equal; a slice keeping every input whole is left alone.
Graph SliceOfConcat(int cat_axis, int slice_axis, int64_t start, int64_t end, bool cat_used) {
  using testing::IntAttr;
  testing::GraphProtoBuilder b("slice_of_concat");
  b.Input("A", {8, 4})
      .Input("B", cat_axis == 0 ? std::vector<int64_t>{6, 4} : std::vector<int64_t>{8, 6});
  b.Op("C", "concat", {"A", "B"}, {{"axis", IntAttr(cat_axis)}});
  b.Op("S", "slice", {"C"},
       {{"axis", IntAttr(slice_axis)}, {"start", IntAttr(start)}, {"end", IntAttr(end)}});
  b.Op("Y", "exp", {"S"}).Output("Y");
  if (cat_used) b.Output("C");
  absl::StatusOr<Graph> g = Graph::FromProto(b.proto());
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

// `rewritten` (a layout-keeping reshape of `g`) gives `g`'s float64 outputs
// exactly on the same data under its own dims.
void ExpectSameOutputsOnTheSameData(const Graph& g, const Graph& rewritten, int seed) {
  const std::vector<HostTensor> inputs = MakeRandomInputs(g, seed);
  std::vector<HostTensor> reshaped = inputs;
  for (int i = 0; i < rewritten.num_inputs(); ++i) reshaped[i].shape = rewritten.tensor(i).shape;
  absl::StatusOr<std::vector<HostTensor>> a = EvaluateReference(g, inputs);
  absl::StatusOr<std::vector<HostTensor>> b = EvaluateReference(rewritten, reshaped);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t o = 0; o < a->size(); ++o) EXPECT_EQ((*a)[o].data, (*b)[o].data);
}

// The whole search (fingerprint-checked) admits `rule` applied alone to `g`.
void ExpectTheSearchFinds(const Graph& g, const std::string& rule) {
  RewriteOptions options;
  options.time_budget_seconds = 0;
  RewriteStats stats;
  absl::StatusOr<std::vector<RewrittenGraph>> found = ExploreRewrites(g, options, &stats);
  ASSERT_TRUE(found.ok()) << found.status();
  bool alone = false;
  for (const RewrittenGraph& rg : *found) alone |= rg.rewrites == std::vector<std::string>{rule};
  EXPECT_TRUE(alone) << absl::StrJoin(stats.rejections, "; ");
}

// Graphs whose every tensor ends in size-1 dims: the same graph without
// them, fingerprint-equal and float64-equal on the same data (the layouts
// are the same); an axis followed by size-1 dims becomes the last.
Graph TrailingOnes(bool matmul, int reduce_axis, bool odd_one_out) {
  using testing::IntAttr;
  testing::GraphProtoBuilder b("trailing_ones");
  b.Input("X", {4, 6, 5, 1}).Input("c", {1}).Input("S", {2, 7, 1, 1});
  if (odd_one_out) b.Input("Z", {4, 6, 5});
  b.Op("A", "abs", {"X"}).Op("M", "maximum", {"A", "c"});
  b.Op("R", "reduce_sum", {"M"},
       {{"axis", IntAttr(reduce_axis)}, {"keepdim", testing::BoolAttr(true)}});
  b.Output("R");
  b.Op("T", "mul", {"S"}, {{"scalar", testing::FloatAttr(0.125)}});
  b.Op("P", "softmax", {"T"}, {{"axis", IntAttr(1)}}).Output("P");
  if (matmul) {
    b.Input("W", {1, 1});
    b.Op("Q", "matmul", {"X", "W"}).Output("Q");
  }
  if (odd_one_out) b.Op("Y", "exp", {"Z"}).Output("Y");
  absl::StatusOr<Graph> g = Graph::FromProto(b.proto());
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(SqueezeUnitDims, DropsTheSizeOneTailEverywhere) {
  const Graph g = TrailingOnes(false, -2, false);
  const std::vector<Graph> r = ApplyRule(g, "squeeze_unit_dims");
  ASSERT_EQ(r.size(), 1u);
  const Graph& s = r[0];
  EXPECT_EQ(s.tensor(s.FindTensor("X")).shape, (std::vector<int64_t>{4, 6, 5}));
  EXPECT_EQ(s.tensor(s.FindTensor("c")).shape, (std::vector<int64_t>{1}));
  EXPECT_EQ(s.tensor(s.FindTensor("S")).shape, (std::vector<int64_t>{2, 7, 1}));
  EXPECT_EQ(s.tensor(s.FindTensor("R")).shape, (std::vector<int64_t>{4, 6, 1}));
  EXPECT_EQ(s.op(2).axis, 2) << "the reduction is over the last axis now";
  EXPECT_TRUE(CheckSameSignature(g, s).ok());
  const FingerprintResult fp = CheckFingerprintEquivalent(g, s);
  EXPECT_TRUE(fp.equivalent) << fp.message;
  // The same data under the squeezed shapes.
  ExpectSameOutputsOnTheSameData(g, s, 3);
  ExpectTheSearchFinds(g, "squeeze_unit_dims");
  // A matmul, a reduction over the size-1 tail itself, a tensor without
  // the tail: left alone.
  EXPECT_TRUE(ApplyRule(TrailingOnes(true, -2, false), "squeeze_unit_dims").empty());
  EXPECT_TRUE(ApplyRule(TrailingOnes(false, -1, false), "squeeze_unit_dims").empty());
  EXPECT_TRUE(ApplyRule(TrailingOnes(false, -2, true), "squeeze_unit_dims").empty());
}

// Concat and slice over rows of [n, k] tensors (random_013's shape): the
// same graph over [n k] (the slice's bounds times k), fingerprint-equal and
// float64-equal on the same data; row kernels then take the copies.
TEST(MergeTrailingAxes, CopiesOverRowsBecomeCopiesOverTheLastAxis) {
  const Graph g = SliceOfConcat(0, 0, 5, 11, false);
  const std::vector<Graph> r = ApplyRule(g, "merge_trailing_axes");
  ASSERT_EQ(r.size(), 1u);
  const Graph& m = r[0];
  EXPECT_EQ(m.tensor(m.FindTensor("A")).shape, (std::vector<int64_t>{32}));
  EXPECT_EQ(m.tensor(m.FindTensor("B")).shape, (std::vector<int64_t>{24}));
  EXPECT_EQ(m.tensor(m.FindTensor("C")).shape, (std::vector<int64_t>{56}));
  EXPECT_EQ(m.tensor(m.FindTensor("Y")).shape, (std::vector<int64_t>{24}));
  const OpInfo& slice = m.op(1);
  EXPECT_EQ(slice.slice_start, 20);
  EXPECT_EQ(slice.slice_end, 44);
  EXPECT_TRUE(CheckSameSignature(g, m).ok());
  const FingerprintResult fp = CheckFingerprintEquivalent(g, m);
  EXPECT_TRUE(fp.equivalent) << fp.message;
  ExpectSameOutputsOnTheSameData(g, m, 5);
  ExpectTheSearchFinds(g, "merge_trailing_axes");
  // Concat over the last axis already; concat and slice over other axes;
  // an operand that broadcasts along the axis: left alone.
  EXPECT_TRUE(ApplyRule(SliceOfConcat(1, 1, 2, 7, false), "merge_trailing_axes").empty());
  EXPECT_TRUE(ApplyRule(SliceOfConcat(0, 1, 1, 3, false), "merge_trailing_axes").empty());
  using testing::IntAttr;
  testing::GraphProtoBuilder row("broadcast_row");
  row.Input("A", {8, 4}).Input("B", {6, 4}).Input("w", {1, 4});
  row.Op("C", "concat", {"A", "B"}, {{"axis", IntAttr(0)}}).Op("Y", "mul", {"C", "w"}).Output("Y");
  absl::StatusOr<Graph> bw = Graph::FromProto(row.proto());
  ASSERT_TRUE(bw.ok()) << bw.status();
  EXPECT_TRUE(ApplyRule(*bw, "merge_trailing_axes").empty());
}

// reduce(x op w) with w constant along the reduced axis: w applies to the
// reduction's result (random_022's mul by a [C] row, then a column sum).
Graph ReductionOfElementwise(const std::string& reduce, const std::string& op,
                             std::vector<int64_t> w_shape, bool w_first, bool keepdim,
                             int axis = 1) {
  testing::GraphProtoBuilder b("reduce_of_elementwise");
  b.Input("X", {6, 5, 4}).Input("W", std::move(w_shape));
  b.Op("P", op, w_first ? std::vector<std::string>{"W", "X"} : std::vector<std::string>{"X", "W"});
  b.Op("R", reduce, {"P"},
       {{"axis", testing::IntAttr(axis)}, {"keepdim", testing::BoolAttr(keepdim)}});
  b.Op("Y", "sigmoid", {"R"}).Output("Y");
  absl::StatusOr<Graph> g = Graph::FromProto(b.proto());
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(FactorOutOfReduction, TheOperandAppliesToTheResult) {
  struct Case {
    const char* reduce;
    const char* op;
    std::vector<int64_t> w;
    bool w_first, keepdim;
  };
  for (const Case& c :
       {Case{"reduce_sum", "mul", {4}, true, false}, Case{"reduce_sum", "div", {1, 4}, false, true},
        Case{"reduce_mean", "mul", {4}, false, false}, Case{"reduce_mean", "sub", {4}, false, true},
        Case{"reduce_mean", "add", {1, 4}, true, false},
        Case{"reduce_mean", "add", {4}, false, false}}) {
    SCOPED_TRACE(absl::StrCat(c.reduce, " of ", c.op, c.w_first ? " (w first)" : ""));
    const Graph g = ReductionOfElementwise(c.reduce, c.op, c.w, c.w_first, c.keepdim);
    const std::vector<Graph> r = ApplyRule(g, "factor_out_of_reduction");
    ASSERT_EQ(r.size(), 1u);
    const Graph& f = r[0];
    // The reduction reads X; R is the elementwise op of its result.
    const OpInfo& red = f.op(0);
    EXPECT_EQ(f.tensor(red.inputs[0]).name, "X");
    EXPECT_EQ(f.op(1).name, "R");
    EXPECT_EQ(f.tensor(f.FindTensor("R")).shape, g.tensor(g.FindTensor("R")).shape);
    EXPECT_TRUE(CheckSameSignature(g, f).ok());
    const FingerprintResult fp = CheckFingerprintEquivalent(g, f);
    EXPECT_TRUE(fp.equivalent) << fp.message;
    const std::vector<HostTensor> inputs = MakeRandomInputs(g, 5);
    absl::StatusOr<std::vector<HostTensor>> a = EvaluateReference(g, inputs);
    absl::StatusOr<std::vector<HostTensor>> b = EvaluateReference(f, inputs);
    ASSERT_TRUE(a.ok() && b.ok());
    for (size_t i = 0; i < (*a)[0].data.size(); ++i) {
      EXPECT_NEAR((*a)[0].data[i], (*b)[0].data[i], 1e-12);
    }
  }
  // Not where w varies along the reduced axis, nor for an op the reduction
  // does not commute with (a sum of x + w, a max of x * w), nor w - x, nor
  // a max of x + w (true, but the fingerprint cannot prove it).
  EXPECT_TRUE(ApplyRule(ReductionOfElementwise("reduce_sum", "mul", {5, 4}, false, false),
                        "factor_out_of_reduction")
                  .empty());
  EXPECT_TRUE(ApplyRule(ReductionOfElementwise("reduce_sum", "mul", {6, 1, 4}, false, false),
                        "factor_out_of_reduction")
                  .empty())
      << "its 6 would land on the result's 4 once the axis is dropped";
  EXPECT_EQ(ApplyRule(ReductionOfElementwise("reduce_sum", "mul", {6, 1, 4}, false, true),
                      "factor_out_of_reduction")
                .size(),
            1u)
      << "keepdim: the same frame";
  EXPECT_TRUE(ApplyRule(ReductionOfElementwise("reduce_sum", "mul", {4}, false, false, 2),
                        "factor_out_of_reduction")
                  .empty())
      << "the last axis, which W covers";
  EXPECT_TRUE(ApplyRule(ReductionOfElementwise("reduce_sum", "add", {4}, false, false),
                        "factor_out_of_reduction")
                  .empty());
  EXPECT_TRUE(ApplyRule(ReductionOfElementwise("reduce_max", "mul", {4}, false, false),
                        "factor_out_of_reduction")
                  .empty());
  EXPECT_TRUE(ApplyRule(ReductionOfElementwise("reduce_max", "add", {4}, false, false),
                        "factor_out_of_reduction")
                  .empty());
  EXPECT_TRUE(ApplyRule(ReductionOfElementwise("reduce_mean", "sub", {4}, true, false),
                        "factor_out_of_reduction")
                  .empty());
}

TEST(SliceThroughConcat, ReadsOnlyThePiecesKept) {
  struct Case {
    int cat_axis, slice_axis;
    int64_t start, end;
    bool cat_used;
    int concats, slices;  // in the rewritten graph
  };
  for (const Case& c : {Case{0, 0, 9, 12, true, 1, 1},    // inside B; C kept
                        Case{0, 0, 8, 14, true, 1, 1},    // B whole; C kept
                        Case{0, 0, 1, 7, true, 1, 1},     // inside A; C kept
                        Case{0, 0, 5, 10, false, 1, 2},   // across both
                        Case{0, 1, 1, 3, false, 1, 2},    // another axis
                        Case{1, 1, 2, 9, false, 1, 2},    // axis 1, across
                        Case{1, 0, 3, 5, true, 2, 2}}) {  // axis 0 of an axis-1 concat
    SCOPED_TRACE(absl::StrCat(c.cat_axis, " ", c.slice_axis, " ", c.start, " ", c.end));
    const Graph g = SliceOfConcat(c.cat_axis, c.slice_axis, c.start, c.end, c.cat_used);
    const std::vector<Graph> r = ApplyRule(g, "slice_through_concat");
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(CountOps(r[0], OpType::kConcat), c.concats);
    EXPECT_EQ(CountOps(r[0], OpType::kSlice), c.slices);
    const FingerprintResult fp = CheckFingerprintEquivalent(g, r[0]);
    EXPECT_TRUE(fp.equivalent) << fp.message;
    EXPECT_EQ(ReferenceDistance(g, r[0], 17), 0.0);
  }
  EXPECT_TRUE(ApplyRule(SliceOfConcat(0, 0, 0, 14, false), "slice_through_concat").empty());
  // Inside B with nothing else reading C: A goes unread, and the graph says so.
  {
    const Graph g = SliceOfConcat(0, 0, 9, 12, false);
    const std::vector<Graph> r = ApplyRule(g, "slice_through_concat");
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(CountOps(r[0], OpType::kConcat), 0);
    EXPECT_THAT(r[0].proto().unread_inputs(), ::testing::ElementsAre("A"));
    EXPECT_TRUE(r[0].tensor(r[0].FindTensor("A")).consumers.empty());
    const FingerprintResult fp = CheckFingerprintEquivalent(g, r[0]);
    EXPECT_TRUE(fp.equivalent) << fp.message;
    EXPECT_EQ(ReferenceDistance(g, r[0], 17), 0.0);
  }
  // A wrong piece (B's range shifted by one) is rejected.
  const Graph g = SliceOfConcat(0, 0, 9, 12, true);
  testing::GraphProtoBuilder wrong("slice_of_concat");
  wrong.Input("A", {8, 4}).Input("B", {6, 4});
  wrong.Op("C", "concat", {"A", "B"}, {{"axis", testing::IntAttr(0)}});
  wrong.Op("S", "slice", {"B"},
           {{"axis", testing::IntAttr(0)},
            {"start", testing::IntAttr(2)},
            {"end", testing::IntAttr(5)}});
  wrong.Op("Y", "exp", {"S"}).Output("Y").Output("C");
  absl::StatusOr<Graph> w = Graph::FromProto(wrong.proto());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(CheckFingerprintEquivalent(g, *w).equivalent);
}

// slice(f(X, W), a, s, e) -> f(slice(X), W or slice(W)): W stays whole where
// it broadcasts along a.
Graph SliceOfElementwise(const std::vector<int64_t>& w_shape, int axis, int64_t start, int64_t end,
                         bool square) {
  using testing::IntAttr;
  testing::GraphProtoBuilder b("slice_of_elementwise");
  b.Input("X", {8, 6, 4}).Input("W", w_shape);
  b.Op("M", "minimum", {"W", "X"});
  if (square) {
    b.Op("E", "mul", {"M", "M"});
  } else {
    b.Op("E", "sub", {"M"}, {{"scalar", testing::FloatAttr(1.5)}});
  }
  b.Op("S", "slice", {"E"},
       {{"axis", IntAttr(axis)}, {"start", IntAttr(start)}, {"end", IntAttr(end)}});
  b.Output("S");
  absl::StatusOr<Graph> g = Graph::FromProto(b.proto());
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(SliceThroughElementwise, SlicesTheOperandsThatSpanTheAxis) {
  struct Case {
    std::vector<int64_t> w_shape;
    int axis;
    int64_t start, end;
    bool square;
    int w_sliced;  // 1 where W is sliced too
  };
  for (const Case& c : {Case{{1, 6, 4}, 0, 2, 5, false, 0},  // W broadcasts along axis 0
                        Case{{6, 4}, 0, 2, 5, false, 0},     // W does not reach axis 0
                        Case{{6, 4}, 1, 1, 4, false, 1},     // W's axis 0 is X's axis 1
                        Case{{8, 6, 4}, 2, 0, 3, true, 1},   // same shapes; M read twice
                        Case{{4}, 2, 1, 2, true, 1}}) {
    SCOPED_TRACE(absl::StrCat(absl::StrJoin(c.w_shape, "x"), " axis ", c.axis));
    const Graph g = SliceOfElementwise(c.w_shape, c.axis, c.start, c.end, c.square);
    // The slice moves below E, then (a second application) below M.
    const std::vector<Graph> once = ApplyRule(g, "slice_through_elementwise");
    ASSERT_EQ(once.size(), 1u);
    EXPECT_EQ(CountOps(once[0], OpType::kSlice), 1) << "M read twice: one slice of it";
    const std::vector<Graph> twice = ApplyRule(once[0], "slice_through_elementwise");
    ASSERT_EQ(twice.size(), 1u);
    EXPECT_EQ(CountOps(twice[0], OpType::kSlice), 1 + c.w_sliced);
    for (const Graph& r : {once[0], twice[0]}) {
      const FingerprintResult fp = CheckFingerprintEquivalent(g, r);
      EXPECT_TRUE(fp.equivalent) << fp.message;
      EXPECT_EQ(ReferenceDistance(g, r, 17), 0.0);
    }
    // Every op of the result runs on the window: no tensor is larger than X's slice.
    const int64_t window = 8 * 6 * 4 / std::vector<int64_t>{8, 6, 4}[c.axis] * (c.end - c.start);
    for (const OpInfo& op : twice[0].ops()) {
      EXPECT_LE(twice[0].tensor(op.output).num_elements(), window) << op.name;
    }
    // Slices of inputs only: nothing is left to move.
    EXPECT_TRUE(ApplyRule(twice[0], "slice_through_elementwise").empty());
  }
  // A wrong rewrite (W sliced at the wrong offset) is rejected.
  const Graph g = SliceOfElementwise({6, 4}, 1, 1, 4, false);
  testing::GraphProtoBuilder wrong("slice_of_elementwise");
  wrong.Input("X", {8, 6, 4}).Input("W", {6, 4});
  wrong.Op("XS", "slice", {"X"},
           {{"axis", testing::IntAttr(1)},
            {"start", testing::IntAttr(1)},
            {"end", testing::IntAttr(4)}});
  wrong.Op("WS", "slice", {"W"},
           {{"axis", testing::IntAttr(0)},
            {"start", testing::IntAttr(2)},
            {"end", testing::IntAttr(5)}});
  wrong.Op("M", "minimum", {"WS", "XS"});
  wrong.Op("S", "sub", {"M"}, {{"scalar", testing::FloatAttr(1.5)}}).Output("S");
  absl::StatusOr<Graph> w = Graph::FromProto(wrong.proto());
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(CheckFingerprintEquivalent(g, *w).equivalent);
}

TEST(SliceThroughElementwise, LeavesSharedResultsAndGraphOutputs) {
  using testing::IntAttr;
  testing::GraphProtoBuilder b("slice_of_shared");
  b.Input("X", {8, 4});
  b.Op("E", "exp", {"X"});
  b.Op("S", "slice", {"E"}, {{"axis", IntAttr(0)}, {"start", IntAttr(1)}, {"end", IntAttr(3)}});
  b.Output("S").Output("E");
  absl::StatusOr<Graph> g = Graph::FromProto(b.proto());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(ApplyRule(*g, "slice_through_elementwise").empty()) << "E is computed whole anyway";
}

struct LayerNormCase {
  bool weight, bias, row_vectors;
};
class DeferLayerNorm : public ::testing::TestWithParam<LayerNormCase> {};

// layer_norm -> matmul: the deferred form is found, fingerprint-verified and
// float64-equal, with weight and bias as [K] or [1, K], or absent.
TEST_P(DeferLayerNorm, FiresOnLayerNormLinear) {
  const LayerNormCase c = GetParam();
  absl::StatusOr<Graph> g =
      Graph::FromProto(testing::LayerNormLinearProto(c.weight, c.bias, c.row_vectors));
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<Graph> deferred = ApplyRule(*g, "defer_layer_norm");
  ASSERT_EQ(deferred.size(), 1u);
  EXPECT_EQ(CountOps(deferred[0], OpType::kLayerNorm), 0);
  const FingerprintResult fp = CheckFingerprintEquivalent(*g, deferred[0]);
  EXPECT_TRUE(fp.equivalent) << fp.message;
  EXPECT_LT(ReferenceDistance(*g, deferred[0], 9), 1e-9);
  RewriteOptions options;
  options.time_budget_seconds = 0;
  RewriteStats stats;
  absl::StatusOr<std::vector<RewrittenGraph>> found = ExploreRewrites(*g, options, &stats);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(stats.rewrites_rejected, 0);
  bool fired = false;
  for (const RewrittenGraph& r : *found) {
    fired |= !r.rewrites.empty() && r.rewrites[0] == "defer_layer_norm";
    EXPECT_LT(ReferenceDistance(*g, *r.graph, 13), 1e-9) << absl::StrJoin(r.rewrites, "+");
  }
  EXPECT_TRUE(fired);
}

INSTANTIATE_TEST_SUITE_P(Variants, DeferLayerNorm,
                         ::testing::Values(LayerNormCase{true, true, false},
                                           LayerNormCase{true, true, true},
                                           LayerNormCase{true, false, false},
                                           LayerNormCase{false, false, false}));

// Several reductions over the same rows in one pass: norm_transformer's two
// rms_norms (and, once expanded, their two reduce_means) land in one
// KERNEL_ROW kernel of some plan, so no dedicated multi-reduction rule is
// needed (core/rewrite.h).
TEST(MultiReduction, PartitionerFusesNormTransformersTwoNorms) {
  const Graph g = LoadExample("norm_transformer");
  SearchOptions options;
  SearchStats stats;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans =
      GenerateCandidatesWithStats(g, options, &stats);
  ASSERT_TRUE(plans.ok()) << plans.status();
  bool original_fused = false;
  bool expanded_fused = false;
  for (const yirage::v1::Plan& plan : *plans) {
    absl::StatusOr<Graph> pg = plan.has_graph() ? Graph::FromProto(plan.graph()) : g;
    ASSERT_TRUE(pg.ok()) << pg.status();
    for (const yirage::v1::KernelPlan& k : plan.kernels()) {
      if (k.kind() != yirage::v1::KERNEL_ROW) continue;
      int norms = 0;
      int means = 0;
      for (const std::string& name : k.ops()) {
        const OpType t = pg->op(pg->FindOp(name)).type;
        norms += t == OpType::kRmsNorm ? 1 : 0;
        means += t == OpType::kReduceMean ? 1 : 0;
      }
      original_fused |= !plan.has_graph() && norms == 2;
      expanded_fused |= plan.has_graph() && means == 2;
    }
  }
  EXPECT_TRUE(original_fused);
  EXPECT_TRUE(expanded_fused);
}

Graph LoadBench(const std::string& name) { return LoadExample("bench/" + name); }

// The GPU bench shapes (fingerprints above 1e8 modular operations per trial)
// are fingerprinted with their dimensions divided consistently, and so get
// verified rewritten graphs. How long that takes is bench/search_time.cc's
// to measure: a wall-clock bound here failed under CI's parallel load.
TEST(LargeGraphs, BenchShapesGetVerifiedRewrites) {
  for (const std::string name : {"gated_mlp_b1", "rms_norm_linear_b8"}) {
    SCOPED_TRACE(name);
    const Graph g = LoadBench(name);
    EXPECT_GT(FingerprintWork(g), 1e8);
    SearchOptions options;
    options.max_candidates = 64;
    SearchStats stats;
    absl::StatusOr<std::vector<yirage::v1::Plan>> plans =
        GenerateCandidatesWithStats(g, options, &stats);
    ASSERT_TRUE(plans.ok()) << plans.status();
    EXPECT_TRUE(stats.rewrites_skipped.empty()) << stats.rewrites_skipped;
    EXPECT_GT(stats.fingerprint_shape_reduction, 1);
    EXPECT_GE(stats.rewrites_verified, 1);
    EXPECT_EQ(stats.rewrites_rejected, 0);
    std::printf("[large] %s: %d verified, dims / %lld, %d plans (%d rewritten), %.3f s\n",
                name.c_str(), stats.rewrites_verified,
                static_cast<long long>(stats.fingerprint_shape_reduction), stats.plans,
                stats.rewritten_plans, stats.seconds);
  }
}

// A softmax's fingerprint counts its expansion (a hashed row max, an
// exponential and a division an element), not just its tensors' elements:
// 4096 x 8192 (67 M elements in its two tensors, under 1e8) costs far more
// than 1e8 and is fingerprinted on a reduced instance, where its rewrites
// verify.
TEST(LargeGraphs, SoftmaxWorkCountsItsExpansion) {
  const Graph g = LoadExample("suite/kb1_softmax_fp16_4096x8192");
  EXPECT_GT(FingerprintWork(g), 4 * 1e8);
  RewriteStats stats;
  absl::StatusOr<std::vector<RewrittenGraph>> found = ExploreRewrites(g, RewriteOptions{}, &stats);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_GT(stats.shape_reduction, 1);
  EXPECT_GE(stats.rewrites_verified, 1);
  EXPECT_EQ(stats.rewrites_rejected, 0);
}

// The fingerprinter (which evaluates the reference in every trial as it is
// made) is made only once a rewritten graph needs a check: a graph no rule
// rewrites never makes it, so options it would refuse do not matter there.
TEST(ExploreRewritesTest, NoRewriteMakesNoFingerprinter) {
  RewriteOptions bad;
  bad.fingerprint.trials = 0;  // Fingerprinter::Create refuses this
  testing::GraphProtoBuilder plain("plain");
  plain.Input("X", {64, 64}).Op("Y", "relu", {"X"}).Output("Y");
  absl::StatusOr<Graph> g = Graph::FromProto(plain.proto());
  ASSERT_TRUE(g.ok()) << g.status();
  RewriteStats stats;
  absl::StatusOr<std::vector<RewrittenGraph>> found = ExploreRewrites(*g, bad, &stats);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(found->empty());
  EXPECT_EQ(stats.rewrites_generated, 0);
  EXPECT_EQ(stats.fingerprint_checks, 0);
  // A graph with rewrites needs it, and gets the refusal.
  EXPECT_FALSE(ExploreRewrites(LoadExample("softmax"), bad, nullptr).ok());
}

// What was verified at reduced size is also equivalent at full size (one
// full-size fingerprint, about a second).
TEST(LargeGraphs, ReducedVerdictHoldsAtFullSize) {
  const Graph g = LoadBench("rms_norm_linear_b1");
  RewriteOptions options;
  options.time_budget_seconds = 0;
  options.reduce_shapes_above_work = 5e7;  // 7.5e7 at full size: reduce it here
  RewriteStats stats;
  absl::StatusOr<std::vector<RewrittenGraph>> found = ExploreRewrites(g, options, &stats);
  ASSERT_TRUE(found.ok()) << found.status();
  ASSERT_FALSE(found->empty());
  EXPECT_GT(stats.shape_reduction, 1);
  const RewrittenGraph& deepest = found->back();
  ASSERT_NE(deepest.checked_graph, nullptr);
  EXPECT_LT(FingerprintWork(*deepest.checked_graph), FingerprintWork(*deepest.graph));
  FingerprintOptions one;
  one.trials = 1;
  const FingerprintResult full = CheckFingerprintEquivalent(g, *deepest.graph, one);
  EXPECT_TRUE(full.equivalent) << absl::StrJoin(deepest.rewrites, "+") << ": " << full.message;
}

// A wrong rewrite of a large graph is still rejected at the reduced size.
TEST(LargeGraphs, WrongRewriteRejectedAtReducedSize) {
  const Graph g = LoadBench("gated_mlp_b1");
  absl::StatusOr<Graph> reduced = ReduceShapes(g, 8);
  ASSERT_TRUE(reduced.ok()) << reduced.status();
  EXPECT_EQ(reduced->tensor(reduced->FindTensor("X")).shape, (std::vector<int64_t>{8, 512}));
  std::vector<Graph> fused = ApplyRule(g, "shared_operand_matmul");
  ASSERT_EQ(fused.size(), 1u);
  // Swap the two slices' bounds: the activation now reads the up projection.
  yirage::v1::Graph wrong = fused[0].proto();
  for (yirage::v1::OpNode& op : *wrong.mutable_ops()) {
    if (op.op() != "slice") continue;
    const int64_t start = op.attrs().at("start").i();
    (*op.mutable_attrs())["start"].set_i(start == 0 ? 4096 : 0);
    (*op.mutable_attrs())["end"].set_i(start == 0 ? 8192 : 4096);
  }
  absl::StatusOr<Graph> wrong_graph = Graph::FromProto(wrong);
  ASSERT_TRUE(wrong_graph.ok()) << wrong_graph.status();
  absl::StatusOr<Graph> right_small = ReduceShapes(fused[0], 8);
  absl::StatusOr<Graph> wrong_small = ReduceShapes(*wrong_graph, 8);
  ASSERT_TRUE(right_small.ok() && wrong_small.ok());
  EXPECT_TRUE(CheckFingerprintEquivalent(*reduced, *right_small).equivalent);
  EXPECT_FALSE(CheckFingerprintEquivalent(*reduced, *wrong_small).equivalent);
}

// Shapes that cannot be reduced consistently: slice bounds off the grid, a
// dimension that would become 1, or nothing to divide; above the work limit
// such graphs are skipped, saying why.
TEST(LargeGraphs, InconsistentReductionsFallBack) {
  absl::StatusOr<Graph> sliced = Graph::FromProto(testing::GraphProtoBuilder("sliced")
                                                      .Input("X", {64, 256})
                                                      .Op("S", "slice", {"X"},
                                                          {{"axis", testing::IntAttr(1)},
                                                           {"start", testing::IntAttr(4)},
                                                           {"end", testing::IntAttr(132)}})
                                                      .Op("Y", "exp", {"S"})
                                                      .Output("Y")
                                                      .proto());
  ASSERT_TRUE(sliced.ok()) << sliced.status();
  EXPECT_TRUE(ReduceShapes(*sliced, 4).ok());   // 4 and 132 are multiples of 4
  EXPECT_FALSE(ReduceShapes(*sliced, 8).ok());  // 4 is not a multiple of 8
  // A 32-wide slice of a 256 axis by 32 would become 1 wide: refused.
  absl::StatusOr<Graph> narrow = Graph::FromProto(testing::GraphProtoBuilder("narrow")
                                                      .Input("X", {64, 256})
                                                      .Op("S", "slice", {"X"},
                                                          {{"axis", testing::IntAttr(1)},
                                                           {"start", testing::IntAttr(0)},
                                                           {"end", testing::IntAttr(32)}})
                                                      .Op("Y", "exp", {"S"})
                                                      .Output("Y")
                                                      .proto());
  ASSERT_TRUE(narrow.ok());
  EXPECT_TRUE(ReduceShapes(*narrow, 16).ok());
  absl::Status one = ReduceShapes(*narrow, 32).status();
  EXPECT_FALSE(one.ok());
  EXPECT_NE(std::string(one.message()).find("'S'"), std::string::npos) << one;
  // Odd dimensions: nothing shrinks; 2e9 operations per trial: skipped.
  absl::StatusOr<Graph> odd = Graph::FromProto(testing::GraphProtoBuilder("odd")
                                                   .Input("X", {127, 4099})
                                                   .Input("W", {4099, 4099})
                                                   .Op("Y", "matmul", {"X", "W"})
                                                   .Op("Z", "relu", {"Y"})
                                                   .Output("Z")
                                                   .proto());
  ASSERT_TRUE(odd.ok());
  RewriteStats stats;
  absl::StatusOr<std::vector<RewrittenGraph>> found = ExploreRewrites(*odd, {}, &stats);
  ASSERT_TRUE(found.ok());
  EXPECT_TRUE(found->empty());
  EXPECT_NE(stats.skipped.find("cannot be reduced consistently"), std::string::npos)
      << stats.skipped;
}

}  // namespace
}  // namespace yirage::core
