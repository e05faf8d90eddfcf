#include "core/generic_chain.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/candidate_generator.h"
#include "core/candidate_test_graphs.h"
#include "core/graph_test_util.h"
#include "core/partition_enumerator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

using testing::BoolAttr;
using testing::FloatAttr;
using testing::GraphProtoBuilder;
using ::testing::HasSubstr;
using testing::IntAttr;

// gelu(X), its maximum with W (broadcast along axis 0), then a max over
// axis 0: the shape of a reduction over the first axis after elementwise ops.
yirage::v1::Graph MaxOverFirstAxis(bool m_is_output = false, int axis = 0) {
  GraphProtoBuilder b("max_over_first_axis");
  b.Input("X", {5, 8, 16}).Input("W", {1, 8, 16});
  b.Op("G", "gelu", {"X"}).Op("M", "maximum", {"G", "W"});
  b.Op("R", "reduce_max", {"M"}, {{"axis", IntAttr(axis)}, {"keepdim", BoolAttr(true)}});
  b.Output("R");
  if (m_is_output) b.Output("M");
  return b.proto();
}

TEST(GenericChainTest, ElementwiseOpsBeforeAnAxisOp) {
  const Graph g = MustBuild(MaxOverFirstAxis());
  absl::StatusOr<GenericChain> chain = AnalyzeGenericChain(g, {0, 1, 2});
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->prologue, (std::vector<int>{0, 1}));
  EXPECT_EQ(chain->axis_op, 2);
  EXPECT_TRUE(AnalyzeGenericChain(g, {1, 2}).ok()) << "G read from memory";
}

TEST(GenericChainTest, EachRuleNamesTheOp) {
  const Graph g = MustBuild(MaxOverFirstAxis());
  EXPECT_THAT(AnalyzeGenericChain(g, {2}).status().message(),
              HasSubstr("needs an axis op and an elementwise op"));
  EXPECT_THAT(AnalyzeGenericChain(g, {0, 1}).status().message(),
              HasSubstr("breaks rule 1 (no reduction, norm or softmax among the ops)"));
  // A result read outside the chain (a graph output) stays in memory.
  const Graph out = MustBuild(MaxOverFirstAxis(true));
  EXPECT_THAT(AnalyzeGenericChain(out, {0, 1, 2}).status().message(),
              HasSubstr("op 'M' (maximum) breaks rule 2"));
  // A prologue op of another shape than the axis op's input.
  GraphProtoBuilder b("other_shape");
  b.Input("X", {5, 8}).Input("V", {8});
  b.Op("S", "exp", {"V"}).Op("M", "mul", {"X", "S"});
  b.Op("R", "reduce_sum", {"M"}, {{"axis", IntAttr(0)}}).Output("R");
  const Graph shapes = MustBuild(b.proto());
  EXPECT_THAT(AnalyzeGenericChain(shapes, {0, 1, 2}).status().message(),
              HasSubstr("op 'S' (exp) breaks rule 1 (its result has shape [8]"));
  EXPECT_TRUE(AnalyzeGenericChain(shapes, {1, 2}).ok());
  // A matmul is not elementwise.
  GraphProtoBuilder mm("matmul_first");
  mm.Input("A", {8, 8}).Input("B", {8, 8});
  mm.Op("C", "matmul", {"A", "B"});
  mm.Op("P", "softmax", {"C"}, {{"axis", IntAttr(0)}}).Output("P");
  EXPECT_THAT(AnalyzeGenericChain(MustBuild(mm.proto()), {0, 1}).status().message(),
              HasSubstr("op 'C' (matmul) breaks rule 1 (ops are elementwise but one "
                        "reduction, norm or softmax)"));
}

// A mean over the first axis, then tanh of it plus a row, then the
// prologue's result read after the reduction (not allowed).
TEST(GenericChainTest, ElementwiseOpsAfterTheAxisOp) {
  GraphProtoBuilder b("mean_then_tanh");
  b.Input("X", {7, 12}).Input("B", {12});
  b.Op("E", "exp", {"X"});
  b.Op("R", "reduce_mean", {"E"}, {{"axis", IntAttr(0)}});
  b.Op("T", "tanh", {"R"}).Op("Y", "add", {"T", "B"}).Output("Y");
  const Graph g = MustBuild(b.proto());
  absl::StatusOr<GenericChain> chain = AnalyzeGenericChain(g, {0, 1, 2, 3});
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->prologue, (std::vector<int>{0}));
  EXPECT_EQ(chain->axis_op, 1);
  EXPECT_EQ(chain->epilogue, (std::vector<int>{2, 3}));
  EXPECT_TRUE(AnalyzeGenericChain(g, {1, 2}).ok()) << "no prologue";
  EXPECT_TRUE(AnalyzeGenericChain(g, {1, 2, 3}).ok());
  // The last op's result may be read outside (it is the kernel's output).
  EXPECT_TRUE(AnalyzeGenericChain(g, {0, 1}).ok());
  EXPECT_TRUE(AnalyzeGenericChain(g, {0, 1, 2}).ok());

  GraphProtoBuilder bad("reads_prologue");
  bad.Input("X", {7, 12});
  bad.Op("E", "exp", {"X"});
  bad.Op("P", "softmax", {"E"}, {{"axis", IntAttr(0)}});
  bad.Op("Y", "mul", {"P", "E"}).Output("Y");
  EXPECT_THAT(AnalyzeGenericChain(MustBuild(bad.proto()), {0, 1, 2}).status().message(),
              HasSubstr("op 'Y' (mul) breaks rule 2 (an op after the axis op reads a prologue "
                        "result)"));
  GraphProtoBuilder two("two_axis_ops");
  two.Input("X", {7, 12});
  two.Op("A", "softmax", {"X"}, {{"axis", IntAttr(0)}});
  two.Op("R", "reduce_sum", {"A"}, {{"axis", IntAttr(0)}}).Output("R");
  EXPECT_THAT(AnalyzeGenericChain(MustBuild(two.proto()), {0, 1}).status().message(),
              HasSubstr("op 'R' (reduce_sum) breaks rule 1 (a second axis op"));
}

TEST(GenericChainTest, PartitionsOfferChainsOnlyWhereTheBackendRunsThem) {
  const Graph g = MustBuild(MaxOverFirstAxis());
  auto names = [&](bool chains) {
    PartitionEnumerator enumerator(g, chains);
    std::set<std::string> out;
    for (const Partition& p : enumerator.Enumerate()) out.insert(PartitionToString(g, p));
    return out;
  };
  EXPECT_FALSE(names(false).contains("[G+M+R:generic]"));
  EXPECT_TRUE(names(true).contains("[G+M+R:generic]"));
  EXPECT_TRUE(names(true).contains("[G+M][R:generic]"));
  // Whole prologues only: M + R could take G as well.
  EXPECT_FALSE(names(true).contains("[G][M+R:generic]"));
  // Over the last axis the group is a row group, not a chain.
  const Graph last = MustBuild(MaxOverFirstAxis(false, 2));
  EXPECT_THAT(AnalyzeGenericChain(last, {0, 1, 2}).status().message(),
              HasSubstr("op 'R' (reduce_max) breaks rule 1 (it works over the last axis"));
  PartitionEnumerator rows(last, true);
  for (const Partition& p : rows.Enumerate()) {
    for (const KernelGroup& group : p) {
      if (group.size() > 1) {
        EXPECT_EQ(group.kind, yirage::v1::KERNEL_ROW);
      }
    }
  }
}

TEST(GenericChainTest, PlansValidateChainsAndRefuseOtherGenericGroups) {
  const Graph g = MustBuild(MaxOverFirstAxis());
  SearchOptions options;
  options.kernels.set_backend("test");
  options.kernels.set_gpu(true);
  options.kernels.set_generic_prologue(true);
  options.max_candidates = 64;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans = GenerateCandidates(g, options);
  ASSERT_TRUE(plans.ok()) << plans.status();
  const yirage::v1::Plan* chain = nullptr;
  for (const yirage::v1::Plan& p : *plans) {
    if (p.kernels_size() == 1 && p.kernels(0).ops_size() == 3) chain = &p;
  }
  ASSERT_NE(chain, nullptr) << "the whole chain as one kernel";
  EXPECT_EQ(chain->kernels(0).kind(), yirage::v1::KERNEL_GENERIC);
  EXPECT_THAT(chain->kernels(0).inputs(), ::testing::ElementsAre("X", "W"));
  EXPECT_TRUE(ValidatePlan(g, *chain).ok()) << ValidatePlan(g, *chain);
  // Two elementwise ops in a row kernel, then the reduction alone.
  std::optional<yirage::v1::Plan> split;
  for (const yirage::v1::Plan& p : *plans) {
    if (p.kernels_size() == 2 && p.kernels(0).ops_size() == 2 &&
        p.kernels(0).kind() == yirage::v1::KERNEL_ROW) {
      split = p;
    }
  }
  ASSERT_TRUE(split.has_value());
  // Without the backend's word, no plan holds a chain.
  options.kernels.set_generic_prologue(false);
  plans = GenerateCandidates(g, options);
  ASSERT_TRUE(plans.ok()) << plans.status();
  for (const yirage::v1::Plan& p : *plans) {
    for (const auto& k : p.kernels()) {
      if (k.kind() == yirage::v1::KERNEL_GENERIC) {
        EXPECT_EQ(k.ops_size(), 1) << p.description();
      }
    }
  }
  // Two elementwise ops are no chain: the validation says what a
  // KERNEL_GENERIC kernel may hold.
  yirage::v1::Plan bad = *split;
  bad.mutable_kernels(0)->set_kind(yirage::v1::KERNEL_GENERIC);
  const absl::Status s = ValidatePlan(g, bad);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("KERNEL_GENERIC holds 2 ops"));
}

}  // namespace
}  // namespace yirage::core
