#include "server/trial_tree.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace yirage::server {
namespace {

using yirage::v1::Candidate;
using yirage::v1::TrialNode;

yirage::v1::KernelPlan Kernel(std::vector<std::string> ops,
                              yirage::v1::KernelKind kind = yirage::v1::KERNEL_ROW) {
  yirage::v1::KernelPlan k;
  for (const std::string& op : ops) k.add_ops(op);
  k.set_kind(kind);
  return k;
}

Candidate Make(int64_t id, std::vector<std::string> rewrites,
               std::vector<yirage::v1::KernelPlan> kernels, const std::string& description,
               double time_us, yirage::v1::CandidateStatus status = yirage::v1::VERIFIED) {
  Candidate c;
  c.set_candidate_id(id);
  for (const std::string& r : rewrites) c.mutable_plan()->add_rewrites(r);
  for (const auto& k : kernels) *c.mutable_plan()->add_kernels() = k;
  c.mutable_plan()->set_description(description);
  c.set_status(status);
  c.set_time_us(time_us);
  c.set_baseline_time_us(100);
  return c;
}

TEST(TrialTreeTest, LabelsComeFromThePlan) {
  Candidate c = Make(1, {"expand_softmax"},
                     {Kernel({"x", "m"}), Kernel({"s"}, yirage::v1::KERNEL_GENERIC),
                      Kernel({"y"}, yirage::v1::KERNEL_LIBRARY)},
                     "rw:expand_softmax [x+m][s:generic][y] library + rows b4 n64", 10);
  EXPECT_EQ(PartitionLabel(c.plan()), "[x+m][s:generic][y:library]");
  EXPECT_EQ(ScheduleLabel(c.plan()), "library + rows b4 n64");
  c.mutable_plan()->set_description("[x][y] baseline (library matmuls)");
  EXPECT_EQ(ScheduleLabel(c.plan()), "baseline (library matmuls)");
  c.mutable_plan()->set_description("[x][y]");
  EXPECT_EQ(ScheduleLabel(c.plan()), "(one schedule)");
}

// Graph levels per rewrite, partitions under their graph, candidates under
// their partition; counts and best speedups up every path; confirmation
// rows left out; parents before children, a node's subtree right after it.
TEST(TrialTreeTest, EveryCandidateUnderItsGraphAndPartition) {
  yirage::v1::Job job;
  job.set_job_id("job-1");
  job.mutable_best()->set_candidate_id(5);
  std::vector<Candidate> cands = {
      Make(1, {}, {Kernel({"a"}), Kernel({"b"})}, "[a][b] baseline", 100),
      Make(2, {}, {Kernel({"a", "b"})}, "[a+b] rows b1", 50),
      Make(3, {}, {Kernel({"a", "b"})}, "[a+b] rows b4", 0, yirage::v1::MISMATCH),
      Make(4, {"r1"}, {Kernel({"a1", "b"})}, "rw:r1 [a1+b] rows b1", 40),
      Make(5, {"r1", "r2"}, {Kernel({"a2", "b"})}, "rw:r1+r2 [a2+b] rows b1", 20),
      Make(6, {"r2"}, {Kernel({"a3"}), Kernel({"b"})}, "rw:r2 [a3][b] rows b1", 80),
  };
  cands[0].mutable_plan()->set_baseline(true);
  Candidate confirmation = cands[4];
  confirmation.set_candidate_id(7);
  confirmation.set_confirms(5);
  cands.push_back(confirmation);

  const yirage::v1::TrialTree tree = BuildTrialTree(job, cands);
  EXPECT_EQ(tree.job_id(), "job-1");
  std::vector<std::string> shape;
  for (int i = 0; i < tree.nodes_size(); ++i) {
    const TrialNode& n = tree.nodes(i);
    ASSERT_EQ(n.node_id(), i);
    ASSERT_LT(n.parent_id(), n.node_id());
    int depth = 0;
    for (int p = n.parent_id(); p >= 0; p = tree.nodes(p).parent_id()) ++depth;
    std::string line = std::string(2 * depth, ' ') + n.label();
    if (n.kind() == TrialNode::CANDIDATE) line += " #" + std::to_string(n.candidate_id());
    shape.push_back(line);
  }
  const std::vector<std::string> expected = {
      "original graph", "  [a][b]",       "    baseline #1",
      "  [a+b]",        "    rows b1 #2", "    rows b4 #3",
      "  r1",           "    [a1+b]",     "      rows b1 #4",
      "    r2",         "      [a2+b]",   "        rows b1 #5",
      "  r2",           "    [a3][b]",    "      rows b1 #6",
  };
  EXPECT_EQ(shape, expected);

  const TrialNode& root = tree.nodes(0);
  EXPECT_EQ(root.kind(), TrialNode::GRAPH);
  EXPECT_EQ(root.candidates(), 6);
  EXPECT_EQ(root.verified(), 5);
  EXPECT_DOUBLE_EQ(root.best_speedup(), 5.0);
  const TrialNode& r1 = tree.nodes(6);
  EXPECT_EQ(r1.label(), "r1");
  EXPECT_EQ(r1.candidates(), 2);
  EXPECT_DOUBLE_EQ(r1.best_speedup(), 5.0);
  const TrialNode& r1r2 = tree.nodes(9);
  ASSERT_EQ(r1r2.rewrites_size(), 2);
  EXPECT_EQ(r1r2.rewrites(1), "r2");
  const TrialNode& best = tree.nodes(11);
  EXPECT_TRUE(best.best());
  EXPECT_DOUBLE_EQ(best.speedup(), 5.0);
  EXPECT_EQ(best.rewrites_size(), 2);
  const TrialNode& mismatch = tree.nodes(5);
  EXPECT_EQ(mismatch.status(), yirage::v1::MISMATCH);
  EXPECT_EQ(mismatch.speedup(), 0);
  EXPECT_EQ(mismatch.verified(), 0);
  EXPECT_EQ(tree.nodes(3).verified(), 1);  // [a+b]: one of two verified
  EXPECT_TRUE(tree.nodes(2).baseline());
  EXPECT_DOUBLE_EQ(tree.nodes(2).speedup(), 1.0);

  // The drawing every client shows: a line a node, in the nodes' order.
  EXPECT_EQ(tree.text(), DrawTrialTree(tree));
  const std::vector<std::string> lines = absl::StrSplit(tree.text(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), expected.size()) << tree.text();
  EXPECT_EQ(lines[0], "original graph  (6 candidates, 5 verified, best 5.00x)");
  EXPECT_EQ(lines[1], "├─ [a][b]  (1 candidate, 1 verified, best 1.00x)");
  EXPECT_EQ(lines[2], "│  └─ #1 baseline  VERIFIED  100.00 us  1.00x  (baseline)");
  EXPECT_EQ(lines[5], "│  └─ #3 rows b4  MISMATCH");
  EXPECT_EQ(lines[6], "├─ rewrite r1  (2 candidates, 2 verified, best 5.00x)");
  EXPECT_EQ(lines[11], "│        └─ #5 rows b1  VERIFIED  20.00 us  5.00x  <- best");
  EXPECT_EQ(lines[14], "      └─ #6 rows b1  VERIFIED  80.00 us  1.25x");
}

TEST(TrialTreeTest, AJobWithoutCandidatesIsItsRoot) {
  yirage::v1::Job job;
  job.set_job_id("job-2");
  const yirage::v1::TrialTree tree = BuildTrialTree(job, {});
  ASSERT_EQ(tree.nodes_size(), 1);
  EXPECT_EQ(tree.nodes(0).parent_id(), -1);
  EXPECT_EQ(tree.nodes(0).candidates(), 0);
}

}  // namespace
}  // namespace yirage::server
