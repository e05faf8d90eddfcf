// AnalyzeRowGroup (core/row_group.h): legal groups and each rule's violation.
#include "core/row_group.h"

#include <string>
#include <vector>

#include "backends/cpu/cpu_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace yirage::backends::cpu::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RowGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GraphBuilder b("rg");
    b.Input("x", {3, 3, 8}).Input("w", {8, 5}).Input("v", {8}).Input("y", {3, 8});
    b.Input("q", {3, 3, 3});
    b.Op("n", "rms_norm", {"x", "v"});                                      // 0 [3,3,8]
    b.Op("r", "reduce_sum", {"n"}, {I("axis", -1), B("keepdim", true)});    // 1 [3,3,1]
    b.Op("d", "div", {"n", "r"});                                           // 2 [3,3,8]
    b.Op("m", "matmul", {"d", "w"});                                        // 3 [3,3,5]
    b.Op("s", "silu", {"m"});                                               // 4 [3,3,5]
    b.Op("rn", "reduce_max", {"n"}, {I("axis", -1), B("keepdim", false)});  // 5 [3,3]
    b.Op("e", "exp", {"rn"});                                               // 6 [3,3]
    b.Op("r0", "reduce_sum", {"x"}, {I("axis", 0), B("keepdim", true)});    // 7 [1,3,8]
    b.Op("ynorm", "layer_norm", {"y"});                                     // 8 [3,8]
    b.Op("wt", "exp", {"w"});                                               // 9 [8,5]
    b.Op("mb", "matmul", {"d", "wt"});                                      // 10 B in-group?
    b.Op("c", "concat", {"n", "d"}, {I("axis", -1)});                       // 11 [3,3,16]
    b.Op("sm", "softmax", {"x"}, {I("axis", 1)});                           // 12 axis 1
    b.Op("big", "mul", {"m", "s"});                                         // 13 [3,3,5]
    b.Op("kf", "add", {"rn", "q"});                                         // 14 [3,3,3]
    b.Input("pv", {3});
    b.Op("pr", "mul", {"rn", "pv"});  // 15 [3,3], pv along the last lead dim
    b.Op("qp", "add", {"q", "pv"});   // 16 [3,3,3], pv along the row
    for (const char* o : {"s", "e", "r0", "ynorm", "mb", "sm", "big", "c", "kf", "pr", "qp"})
      b.Output(o);
    absl::StatusOr<core::Graph> g = core::Graph::FromProto(b.proto());
    ASSERT_TRUE(g.ok()) << g.status();
    graph_ = std::make_unique<core::Graph>(*std::move(g));
  }
  int Op(const std::string& name) const { return graph_->FindOp(name); }
  absl::StatusOr<core::RowGroupInfo> Analyze(const std::vector<std::string>& names) const {
    std::vector<int> ids;
    for (const std::string& n : names) ids.push_back(Op(n));
    return core::AnalyzeRowGroup(*graph_, ids);
  }
  std::unique_ptr<core::Graph> graph_;
};

TEST_F(RowGroupTest, LegalFusedGroup) {
  absl::StatusOr<core::RowGroupInfo> info = Analyze({"n", "r", "d", "m", "s", "big"});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->lead_dims, ElementsAre(3, 3));
  EXPECT_EQ(info->num_rows, 9);
  EXPECT_THAT(info->row_width, ElementsAre(8, 1, 8, 5, 5, 5));
  EXPECT_THAT(info->in_group[0], ElementsAre(false, false));  // x, v from memory
  EXPECT_THAT(info->in_group[2], ElementsAre(true, true));    // n and r (width 1)
  EXPECT_THAT(info->in_group[3], ElementsAre(true, false));   // A in-group, B memory
  EXPECT_THAT(info->in_group[5], ElementsAre(true, true));
}

TEST_F(RowGroupTest, KeepdimFalseReductionAlone) {
  absl::StatusOr<core::RowGroupInfo> info = Analyze({"n", "rn"});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->row_width, ElementsAre(8, 1));
}

TEST_F(RowGroupTest, ConcatOfInGroupOperands) {
  absl::StatusOr<core::RowGroupInfo> info = Analyze({"n", "r", "d", "c"});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->row_width.back(), 16);
}

TEST_F(RowGroupTest, Rule1LeadDimsDiffer) {
  const absl::Status s = Analyze({"n", "ynorm"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("'ynorm'"), HasSubstr("rule 1"), HasSubstr("[3]"),
                                 HasSubstr("[3, 3]")));
}

TEST_F(RowGroupTest, Rule5PerRowOpsAfterAKeepdimFalseReduction) {
  absl::StatusOr<core::RowGroupInfo> info = Analyze({"n", "rn", "e", "pr"});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->lead_dims, ElementsAre(3, 3));
  EXPECT_THAT(info->row_width, ElementsAre(8, 1, 1, 1));
  EXPECT_THAT(info->per_row, ElementsAre(false, false, true, true));
  EXPECT_THAT(info->in_group[3], ElementsAre(true, false));
  // pv [3] broadcasts against the lead dims [3, 3]: in the row space
  // [3, 3, 1] it is [3, 1], indexed by the last lead dim.
  const int pv = graph_->op(Op("pr")).inputs[1];
  EXPECT_THAT(core::RowSpaceShape(*graph_, *info, pv), ElementsAre(3, 1));
  const int x = graph_->op(Op("n")).inputs[0];
  EXPECT_THAT(core::RowSpaceShape(*graph_, *info, x), ElementsAre(3, 3, 8));
  // pv along the rows of qp and per row in pr: two meanings.
  const absl::Status both = Analyze({"n", "rn", "pr", "qp"}).status();
  EXPECT_EQ(both.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(both.message(), AllOf(HasSubstr("'qp'"), HasSubstr("rule 5"), HasSubstr("'pv'")));
  // The first op of a group sets the lead dims: e alone is a row of 3.
  info = Analyze({"e"});
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(info->lead_dims, ElementsAre(3));
  EXPECT_THAT(info->per_row, ElementsAre(false));
}

TEST_F(RowGroupTest, Rule2NonLastAxis) {
  const absl::Status s = Analyze({"r0"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("'r0'"), HasSubstr("reduce_sum"), HasSubstr("rule 2")));
  EXPECT_THAT(Analyze({"sm"}).status().message(),
              AllOf(HasSubstr("'sm'"), HasSubstr("softmax"), HasSubstr("rule 2")));
}

TEST_F(RowGroupTest, Rule3KeepdimFalseReductionHasNoInGroupConsumer) {
  // kf = add(rn [3,3], q [3,3,3]) has the group's lead dims, but rn is not
  // [lead..., w].
  const absl::Status s = Analyze({"n", "rn", "kf"}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("'kf'"), HasSubstr("rule 3"), HasSubstr("'rn'")));
  EXPECT_TRUE(Analyze({"kf"}).ok());  // rn read from memory is fine (rule 4)
}

TEST_F(RowGroupTest, Rule3MatmulBInGroup) {
  GraphBuilder b("w");
  b.Input("x", {6, 6}).Input("z", {6, 3});
  b.Op("e", "exp", {"x"});                           // [6,6]
  b.Op("u", "matmul", {"x", "e"});                   // B = e, same lead dims
  b.Op("a", "matmul", {"e", "x"});                   // A = e: legal
  b.Op("sl", "concat", {"e", "z"}, {I("axis", 1)});  // [6,9]
  b.Output("u").Output("a").Output("sl");
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(b.proto());
  ASSERT_TRUE(g.ok()) << g.status();
  auto ids = [&](std::vector<std::string> names) {
    std::vector<int> out;
    for (const auto& n : names) out.push_back(g->FindOp(n));
    return out;
  };
  const absl::Status bmat = core::AnalyzeRowGroup(*g, ids({"e", "u"})).status();
  EXPECT_EQ(bmat.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bmat.message(), AllOf(HasSubstr("'u'"), HasSubstr("rule 3"), HasSubstr("B")));
  EXPECT_TRUE(core::AnalyzeRowGroup(*g, ids({"e", "a", "sl"})).ok());
  EXPECT_TRUE(core::AnalyzeRowGroup(*g, ids({"u"})).ok());
}

TEST_F(RowGroupTest, TwoMatmulsAndWidthOneOperand) {
  GraphBuilder b("bw");
  b.Input("x", {4, 6}).Input("a", {4, 1}).Input("w", {6, 12});
  b.Op("m", "matmul", {"x", "w"});                                     // [4,12]
  b.Op("r", "reduce_max", {"x"}, {I("axis", 1), B("keepdim", true)});  // [4,1]
  b.Op("p", "mul", {"r", "x"});     // [4,6], width-1 in-group operand
  b.Op("q", "add", {"m", "a"});     // [4,12]
  b.Op("t", "matmul", {"p", "w"});  // [4,12]
  b.Op("z", "add", {"t", "q"});
  b.Output("z");
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(b.proto());
  ASSERT_TRUE(g.ok()) << g.status();
  // A legal group with both matmuls.
  std::vector<int> all = {g->FindOp("m"), g->FindOp("r"), g->FindOp("p"),
                          g->FindOp("q"), g->FindOp("t"), g->FindOp("z")};
  EXPECT_TRUE(core::AnalyzeRowGroup(*g, all).ok());
}

TEST_F(RowGroupTest, OrderAndDuplicates) {
  EXPECT_THAT(Analyze({"d", "n", "r"}).status().message(),
              AllOf(HasSubstr("'d'"), HasSubstr("later op")));
  EXPECT_THAT(Analyze({"n", "n"}).status().message(), HasSubstr("more than once"));
  EXPECT_FALSE(core::AnalyzeRowGroup(*graph_, {}).ok());
  EXPECT_THAT(core::AnalyzeRowGroup(*graph_, {999}).status().message(), HasSubstr("out of range"));
}

}  // namespace
}  // namespace yirage::backends::cpu::testing
