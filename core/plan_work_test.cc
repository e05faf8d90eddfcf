#include "core/plan_work.h"

#include <string>
#include <vector>

#include "core/candidate_generator.h"
#include "core/candidate_test_graphs.h"
#include "core/cost_model.h"
#include "core/graph_test_util.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

using testing::GraphProtoBuilder;
using yirage::v1::KernelPlan;
using yirage::v1::Plan;

KernelPlan* AddKernel(Plan* plan, yirage::v1::KernelKind kind, std::vector<std::string> ops,
                      std::vector<std::string> inputs, std::vector<std::string> outputs) {
  KernelPlan* k = plan->add_kernels();
  k->set_name("k" + std::to_string(plan->kernels_size() - 1));
  k->set_kind(kind);
  for (auto& op : ops) k->add_ops(op);
  for (auto& t : inputs) k->add_inputs(t);
  for (auto& t : outputs) k->add_outputs(t);
  return k;
}

constexpr double kX = 2.0 * 16 * 4096;        // float16 graph input
constexpr double kG = 2.0 * 4096;             // float16 graph input
constexpr double kW = 2.0 * 4096 * 6144;      // float16 graph input
constexpr double kY = 2.0 * 16 * 6144;        // float16 graph output
constexpr double kScratch = 4.0 * 16 * 4096;  // N or S between kernels: float32

class PlanWorkTest : public ::testing::Test {
 protected:
  Graph graph_ = MustBuild(testing::RmsNormLinearProto());  // Y = (rms_norm(X) * G) @ W
  double GraphFlops() {
    return OpFlops(graph_, graph_.FindOp("N")) + OpFlops(graph_, graph_.FindOp("S")) +
           OpFlops(graph_, graph_.FindOp("Y"));
  }
};

TEST_F(PlanWorkTest, OneKernelAnOpWritesAndReadsEveryIntermediate) {
  Plan plan;
  AddKernel(&plan, yirage::v1::KERNEL_ROW, {"N"}, {"X"}, {"N"});
  AddKernel(&plan, yirage::v1::KERNEL_ROW, {"S"}, {"N", "G"}, {"S"});
  AddKernel(&plan, yirage::v1::KERNEL_LIBRARY, {"Y"}, {"S", "W"}, {"Y"});
  absl::StatusOr<PlanWork> work = ComputePlanWork(graph_, plan);
  ASSERT_TRUE(work.ok()) << work.status();
  EXPECT_DOUBLE_EQ(work->bytes, kX + kScratch + kScratch + kG + kScratch + kScratch + kW + kY);
  EXPECT_DOUBLE_EQ(work->flops, GraphFlops());
  EXPECT_GE(work->flops, 2.0 * 16 * 6144 * 4096);  // the matmul alone
  EXPECT_EQ(work->dtype, yirage::v1::FLOAT16);
}

TEST_F(PlanWorkTest, AFusedKernelMovesOnlyItsInputsAndOutputs) {
  Plan plan;
  AddKernel(&plan, yirage::v1::KERNEL_ROW, {"N", "S", "Y"}, {"X", "G", "W"}, {"Y"});
  absl::StatusOr<PlanWork> work = ComputePlanWork(graph_, plan);
  ASSERT_TRUE(work.ok()) << work.status();
  EXPECT_DOUBLE_EQ(work->bytes, kX + kG + kW + kY);
  EXPECT_DOUBLE_EQ(work->flops, GraphFlops());  // the same work, fewer bytes
}

TEST_F(PlanWorkTest, ARewrittenPlanIsMeasuredOnItsOwnGraph) {
  // Y = X @ W planned on a graph that scales after the matmul: its flops
  // and tensors are the rewritten graph's.
  Graph original = MustBuild(GraphProtoBuilder("g")
                                 .Input("X", {8, 64})
                                 .Input("W", {64, 32})
                                 .Op("Y", "matmul", {"X", "W"})
                                 .Output("Y")
                                 .proto());
  Plan plan;
  *plan.mutable_graph() = GraphProtoBuilder("g")
                              .Input("X", {8, 64})
                              .Input("W", {64, 32})
                              .Op("A", "matmul", {"X", "W"})
                              .Op("Y", "mul", {"A"}, {{"scalar", testing::FloatAttr(1.0)}})
                              .Output("Y")
                              .proto();
  AddKernel(&plan, yirage::v1::KERNEL_ROW, {"A"}, {"X", "W"}, {"A"});
  AddKernel(&plan, yirage::v1::KERNEL_ROW, {"Y"}, {"A"}, {"Y"});
  absl::StatusOr<PlanWork> work = ComputePlanWork(original, plan);
  ASSERT_TRUE(work.ok()) << work.status();
  const Graph rewritten = MustBuild(plan.graph());
  EXPECT_DOUBLE_EQ(work->flops, 2.0 * 8 * 32 * 64 + OpFlops(rewritten, rewritten.FindOp("Y")));
  EXPECT_GT(work->flops, 2.0 * 8 * 32 * 64);
  EXPECT_DOUBLE_EQ(work->bytes, 4.0 * (8 * 64 + 64 * 32) + 4.0 * 8 * 32 * 3);
  EXPECT_EQ(work->dtype, yirage::v1::FLOAT32);
}

TEST_F(PlanWorkTest, APlanThatDoesNotFitItsGraphIsRefused) {
  Plan plan;
  AddKernel(&plan, yirage::v1::KERNEL_ROW, {"N", "S", "Y"}, {"X", "G", "Q"}, {"Y"});
  absl::StatusOr<PlanWork> work = ComputePlanWork(graph_, plan);
  EXPECT_EQ(work.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(work.status().message().find("'Q'"), std::string::npos) << work.status();

  Plan missing_op;  // Y is computed by no kernel
  AddKernel(&missing_op, yirage::v1::KERNEL_ROW, {"N", "S"}, {"X", "G"}, {"S"});
  EXPECT_FALSE(ComputePlanWork(graph_, missing_op).ok());

  Plan bad_graph;
  bad_graph.mutable_graph()->set_name("empty");
  EXPECT_FALSE(ComputePlanWork(graph_, bad_graph).ok());
}

TEST_F(PlanWorkTest, EveryGeneratedPlanHasWorkAndTheBaselineMovesTheMost) {
  const Graph graph = MustBuild(testing::GatedMlpProto());
  SearchOptions options;
  options.max_candidates = 40;
  absl::StatusOr<std::vector<Plan>> plans = GenerateCandidates(graph, options);
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_GT(plans->size(), 2u);
  ASSERT_TRUE((*plans)[0].baseline());
  absl::StatusOr<PlanWork> baseline = ComputePlanWork(graph, (*plans)[0]);
  ASSERT_TRUE(baseline.ok()) << baseline.status();
  // Inputs read and the output written once: the least any plan moves.
  const double floor = 4.0 * (32 * 512 + 2 * 512 * 1408 + 32 * 1408);
  for (const Plan& plan : *plans) {
    absl::StatusOr<PlanWork> work = ComputePlanWork(graph, plan);
    ASSERT_TRUE(work.ok()) << plan.description() << ": " << work.status();
    EXPECT_GE(work->bytes, floor) << plan.description();
    EXPECT_LE(work->bytes, baseline->bytes) << plan.description();
    if (!plan.has_graph()) {
      EXPECT_DOUBLE_EQ(work->flops, baseline->flops) << plan.description();
    }
    EXPECT_GT(work->flops, 0) << plan.description();
  }
}

}  // namespace
}  // namespace yirage::core
