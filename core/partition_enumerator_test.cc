#include "core/partition_enumerator.h"

#include <set>
#include <string>
#include <vector>

#include "core/candidate_test_graphs.h"
#include "core/graph.h"
#include "core/graph_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

// Every op exactly once, in order, groups non-empty.
void ExpectCoversOps(const Partition& partition, int num_ops) {
  int next = 0;
  for (const KernelGroup& group : partition) {
    EXPECT_EQ(group.begin, next);
    EXPECT_GT(group.end, group.begin);
    next = group.end;
  }
  EXPECT_EQ(next, num_ops);
}

TEST(PartitionEnumeratorTest, AllSegmentationsOfAFusableChain) {
  Graph graph = MustBuild(testing::ElementwiseChainProto(4));
  PartitionEnumerator enumerator(graph);
  std::vector<Partition> partitions = enumerator.Enumerate();
  ASSERT_EQ(partitions.size(), 8u);  // 2^(4-1)
  EXPECT_EQ(partitions[0], enumerator.Baseline());
  std::set<std::string> names;
  for (const Partition& partition : partitions) {
    ExpectCoversOps(partition, 4);
    names.insert(PartitionToString(graph, partition));
    for (const KernelGroup& group : partition) EXPECT_EQ(group.kind, yirage::v1::KERNEL_ROW);
  }
  EXPECT_EQ(names.size(), 8u);
  EXPECT_TRUE(names.contains("[E0+E1+E2+E3]"));
  EXPECT_TRUE(names.contains("[E0][E1+E2][E3]"));
}

TEST(PartitionEnumeratorTest, RmsNormLinearHasFourPartitions) {
  Graph graph = MustBuild(testing::RmsNormLinearProto());
  PartitionEnumerator enumerator(graph);
  std::vector<std::string> names;
  for (const Partition& p : enumerator.Enumerate()) names.push_back(PartitionToString(graph, p));
  EXPECT_THAT(names, ::testing::ElementsAre("[N][S][Y]", "[N][S+Y]", "[N+S][Y]", "[N+S+Y]"));
  ASSERT_NE(enumerator.RowGroup(0, 3), nullptr);
  EXPECT_EQ(enumerator.RowGroup(0, 3)->num_rows, 16);
}

TEST(PartitionEnumeratorTest, IllegalOpStaysAloneAndGeneric) {
  Graph graph = MustBuild(testing::ColumnReductionProto());
  PartitionEnumerator enumerator(graph);
  EXPECT_EQ(enumerator.RowGroup(1, 2), nullptr);
  EXPECT_EQ(enumerator.RowGroup(0, 2), nullptr);
  EXPECT_EQ(enumerator.RowGroup(1, 3), nullptr);
  std::vector<Partition> partitions = enumerator.Enumerate();
  ASSERT_EQ(partitions.size(), 1u);  // nothing can fuse across the reduction
  EXPECT_EQ(PartitionToString(graph, partitions[0]), "[A][R:generic][Y]");
  EXPECT_EQ(partitions[0][1].kind, yirage::v1::KERNEL_GENERIC);
}

TEST(PartitionEnumeratorTest, GreedyMaximalStopsAtIllegalGroups) {
  Graph graph = MustBuild(testing::ColumnReductionProto());
  PartitionEnumerator enumerator(graph);
  EXPECT_EQ(PartitionToString(graph, enumerator.GreedyMaximal()), "[A][R:generic][Y]");
  Graph lora = MustBuild(testing::LoraProto());
  PartitionEnumerator lora_enumerator(lora);
  EXPECT_EQ(PartitionToString(lora, lora_enumerator.GreedyMaximal()), "[XW+XA+XAB+Y]");
}

TEST(PartitionEnumeratorTest, LargeGraphsGetTheBoundedSet) {
  const int n = PartitionEnumerator::kMaxExhaustiveOps + 2;
  Graph graph = MustBuild(testing::ElementwiseChainProto(n));
  PartitionEnumerator enumerator(graph);
  std::vector<Partition> partitions = enumerator.Enumerate();
  // Baseline, greedy (one kernel), and one merged pair per adjacent pair.
  ASSERT_EQ(partitions.size(), static_cast<size_t>(2 + (n - 1)));
  EXPECT_EQ(partitions[0], enumerator.Baseline());
  EXPECT_EQ(partitions[1].size(), 1u);
  std::set<std::string> names;
  for (const Partition& partition : partitions) {
    ExpectCoversOps(partition, n);
    names.insert(PartitionToString(graph, partition));
  }
  EXPECT_EQ(names.size(), partitions.size());
}

}  // namespace
}  // namespace yirage::core
