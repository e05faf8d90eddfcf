#include "core/plan_resolution.h"

#include <string>

#include "core/candidate_test_graphs.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

Graph RmsNormLinear() {
  absl::StatusOr<Graph> g = Graph::FromProto(testing::RmsNormLinearProto());
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

yirage::v1::KernelPlan* AddKernel(yirage::v1::Plan* plan, const std::string& name,
                                  std::initializer_list<const char*> ops,
                                  std::initializer_list<const char*> inputs,
                                  std::initializer_list<const char*> outputs) {
  yirage::v1::KernelPlan* k = plan->add_kernels();
  k->set_name(name);
  k->set_kind(yirage::v1::KERNEL_ROW);
  for (const char* op : ops) k->add_ops(op);
  for (const char* in : inputs) k->add_inputs(in);
  for (const char* out : outputs) k->add_outputs(out);
  return k;
}

TEST(ResolvePlanTest, MapsOpsKernelsAndTheTensorsPassedBetweenThem) {
  const Graph g = RmsNormLinear();  // N = rms_norm(X); S = N * G; Y = S @ W
  yirage::v1::Plan plan;
  AddKernel(&plan, "norm", {"N", "S"}, {"X", "G"}, {"S"});
  AddKernel(&plan, "mm", {"Y"}, {"S", "W"}, {"Y"});
  absl::StatusOr<ResolvedPlan> r = ResolvePlan(g, plan);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->kernel_ops.size(), 2u);
  EXPECT_EQ(r->kernel_ops[0], (std::vector<int>{g.FindOp("N"), g.FindOp("S")}));
  EXPECT_EQ(r->op_kernel[g.FindOp("Y")], 1);
  EXPECT_EQ(r->kernel_outputs[0], std::vector<int>{g.FindTensor("S")});
  EXPECT_TRUE(r->read_by_kernel[g.FindTensor("S")]);
  EXPECT_FALSE(r->read_by_kernel[g.FindTensor("N")]);
}

TEST(ResolvePlanTest, BadPlansAreRefusedNamingTheKernelAndTheProblem) {
  const Graph g = RmsNormLinear();
  struct Case {
    const char* what;
    yirage::v1::Plan plan;
    std::string message;
  };
  std::vector<Case> cases;
  {
    Case c{"op in no kernel", {}, "op 'Y' is in no kernel of the plan"};
    AddKernel(&c.plan, "norm", {"N", "S"}, {"X", "G"}, {"S"});
    cases.push_back(c);
  }
  {
    Case c{"unknown op", {}, "kernel 0 ('k'): unknown op 'Z'"};
    AddKernel(&c.plan, "k", {"Z"}, {}, {});
    cases.push_back(c);
  }
  {
    Case c{"input not yet produced", {}, "kernel 0 ('mm'): input 'S' is neither a graph input"};
    AddKernel(&c.plan, "mm", {"Y"}, {"S", "W"}, {"Y"});
    AddKernel(&c.plan, "norm", {"N", "S"}, {"X", "G"}, {"S"});
    cases.push_back(c);
  }
  {
    Case c{"input listed twice", {}, "kernel 0 ('all'): input 'X' is listed twice"};
    AddKernel(&c.plan, "all", {"N", "S", "Y"}, {"X", "X", "G", "W"}, {"Y"});
    cases.push_back(c);
  }
  {
    Case c{"op twice", {}, "kernel 1 ('again'): op 'N' is already in kernel 0 ('all')"};
    AddKernel(&c.plan, "all", {"N", "S", "Y"}, {"X", "G", "W"}, {"Y"});
    AddKernel(&c.plan, "again", {"N"}, {"X"}, {"N"});
    cases.push_back(c);
  }
  {
    Case c{"missing input", {}, "kernel 0 ('all'): op 'Y' reads 'W', which is not in the kernel's"};
    AddKernel(&c.plan, "all", {"N", "S", "Y"}, {"X", "G"}, {"Y"});
    cases.push_back(c);
  }
  {
    Case c{"graph output unwritten", {}, "graph output 'Y' is not in any kernel's outputs"};
    AddKernel(&c.plan, "all", {"N", "S", "Y"}, {"X", "G", "W"}, {});
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<ResolvedPlan> r = ResolvePlan(g, c.plan);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(r.status().message()).find(c.message), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace yirage::core
