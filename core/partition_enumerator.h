// Enumerates partitions of a graph's ops into kernels: segmentations of the
// topological order into contiguous groups where every multi-op group is a
// legal KERNEL_ROW group (AnalyzeRowGroup decides) or, where the backend runs
// them, a generic chain (AnalyzeGenericChain: a reduction, norm or softmax
// over another axis than the last with elementwise ops before and after it)
// whose prologue is whole (not one that could take the op before it), and every
// single op is KERNEL_ROW when legal alone, KERNEL_GENERIC otherwise.
#ifndef YIRAGE_CORE_PARTITION_ENUMERATOR_H_
#define YIRAGE_CORE_PARTITION_ENUMERATOR_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/graph.h"
#include "core/row_group.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {

// The ops [begin, end) of the graph's topological order, run as one kernel.
struct KernelGroup {
  int begin = 0;
  int end = 0;  // one past the last op
  yirage::v1::KernelKind kind = yirage::v1::KERNEL_ROW;

  int size() const { return end - begin; }
  bool operator==(const KernelGroup&) const = default;
};

// Groups in execution order; together they cover every op exactly once.
using Partition = std::vector<KernelGroup>;

class PartitionEnumerator {
 public:
  // Graphs with at most this many ops get every legal segmentation (at most
  // 2^(n-1)); larger graphs get the bounded set described at Enumerate().
  static constexpr int kMaxExhaustiveOps = 14;

  // REQUIRES: `graph` outlives the enumerator. `generic_chains`: the
  // backend runs generic chains (BackendKernels.generic_prologue).
  explicit PartitionEnumerator(const Graph& graph, bool generic_chains = false);

  PartitionEnumerator(const PartitionEnumerator&) = delete;
  PartitionEnumerator& operator=(const PartitionEnumerator&) = delete;

  int num_ops() const { return num_ops_; }

  // AnalyzeRowGroup of ops [begin, end) as one KERNEL_ROW group, memoized;
  // nullptr when it is not a legal row group.
  // REQUIRES: 0 <= begin < end <= num_ops().
  const RowGroupInfo* RowGroup(int begin, int end);

  // Every op its own kernel: KERNEL_ROW if legal alone, else KERNEL_GENERIC.
  Partition Baseline();

  // Largest legal groups, left to right: each group starts at the first op
  // not yet placed and grows while ops [begin, end + 1) stay a legal row group.
  Partition GreedyMaximal();

  // The partitions, baseline first, without duplicates, in a deterministic
  // order. num_ops() <= kMaxExhaustiveOps: every segmentation whose multi-op
  // groups are legal row groups or generic chains (in lexicographic order of group sizes,
  // smallest first). Larger graphs: the baseline, the greedy maximal fusion,
  // and the baseline with each legal adjacent pair of ops merged.
  std::vector<Partition> Enumerate();

 private:
  // True if ops [begin, end) may form one kernel of a partition.
  bool GroupAllowed(int begin, int end);
  KernelGroup MakeGroup(int begin, int end);
  void EnumerateFrom(int begin, Partition* prefix, std::vector<Partition>* out);

  const Graph& graph_;
  int num_ops_ = 0;
  bool generic_chains_ = false;
  // (begin, end) -> analysis, nullptr when illegal.
  std::map<std::pair<int, int>, std::unique_ptr<RowGroupInfo>> memo_;
  // (begin, end) -> whether the ops are a generic chain.
  std::map<std::pair<int, int>, bool> chain_memo_;
};

// "[N+S][Y]": the op names of each group joined by '+', one bracket per
// kernel; a KERNEL_GENERIC group is written "[R:generic]" ("[E+R:generic]"
// for a chain).
std::string PartitionToString(const Graph& graph, const Partition& partition);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_PARTITION_ENUMERATOR_H_
