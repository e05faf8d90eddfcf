#include "core/partition_enumerator.h"

#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/generic_chain.h"

namespace yirage::core {

PartitionEnumerator::PartitionEnumerator(const Graph& graph, bool generic_chains)
    : graph_(graph),
      num_ops_(static_cast<int>(graph.ops().size())),
      generic_chains_(generic_chains) {}

const RowGroupInfo* PartitionEnumerator::RowGroup(int begin, int end) {
  auto [it, inserted] = memo_.try_emplace({begin, end});
  if (inserted) {
    std::vector<int> ops(end - begin);
    std::iota(ops.begin(), ops.end(), begin);
    absl::StatusOr<RowGroupInfo> info = AnalyzeRowGroup(graph_, ops);
    if (info.ok()) it->second = std::make_unique<RowGroupInfo>(*std::move(info));
  }
  return it->second.get();
}

bool PartitionEnumerator::GroupAllowed(int begin, int end) {
  if (end - begin == 1 || RowGroup(begin, end) != nullptr) return true;
  if (!generic_chains_) return false;
  // Memoized: the exhaustive enumeration asks for the same ranges often.
  auto chain = [&](int b, int e) {
    auto [it, inserted] = chain_memo_.try_emplace({b, e}, false);
    if (inserted) {
      std::vector<int> ops(e - b);
      std::iota(ops.begin(), ops.end(), b);
      it->second = AnalyzeGenericChain(graph_, ops).ok();
    }
    return it->second;
  };
  // Whole prologues only: a chain that could take the op before it as well
  // is not offered (it would leave that op's full-size result to memory),
  // which keeps partial prologues from crowding the candidates. Chains with
  // and without the ops after the axis op (on its smaller result) both are.
  return chain(begin, end) && (begin == 0 || !chain(begin - 1, end));
}

KernelGroup PartitionEnumerator::MakeGroup(int begin, int end) {
  KernelGroup group{begin, end, yirage::v1::KERNEL_ROW};
  if (RowGroup(begin, end) == nullptr) group.kind = yirage::v1::KERNEL_GENERIC;
  return group;
}

Partition PartitionEnumerator::Baseline() {
  Partition partition;
  for (int i = 0; i < num_ops_; ++i) partition.push_back(MakeGroup(i, i + 1));
  return partition;
}

Partition PartitionEnumerator::GreedyMaximal() {
  Partition partition;
  int begin = 0;
  while (begin < num_ops_) {
    int end = begin + 1;
    while (end < num_ops_ && RowGroup(begin, end + 1) != nullptr) ++end;
    partition.push_back(MakeGroup(begin, end));
    begin = end;
  }
  return partition;
}

void PartitionEnumerator::EnumerateFrom(int begin, Partition* prefix, std::vector<Partition>* out) {
  if (begin == num_ops_) {
    out->push_back(*prefix);
    return;
  }
  for (int end = begin + 1; end <= num_ops_; ++end) {
    // Every range is checked on its own: no assumption that an illegal range
    // stays illegal when it grows (AnalyzeRowGroup owns the rules).
    if (!GroupAllowed(begin, end)) continue;
    prefix->push_back(MakeGroup(begin, end));
    EnumerateFrom(end, prefix, out);
    prefix->pop_back();
  }
}

std::vector<Partition> PartitionEnumerator::Enumerate() {
  std::vector<Partition> out;
  if (num_ops_ == 0) return out;
  if (num_ops_ <= kMaxExhaustiveOps) {
    Partition prefix;
    EnumerateFrom(0, &prefix, &out);  // singletons first: out[0] is the baseline
    return out;
  }
  out.push_back(Baseline());
  Partition greedy = GreedyMaximal();
  if (greedy != out[0]) out.push_back(greedy);
  for (int i = 0; i + 1 < num_ops_; ++i) {
    if (RowGroup(i, i + 2) == nullptr) continue;
    Partition merged;
    for (int j = 0; j < num_ops_; ++j) {
      if (j == i) {
        merged.push_back(MakeGroup(i, i + 2));
        ++j;
      } else {
        merged.push_back(MakeGroup(j, j + 1));
      }
    }
    // Pair merges differ from each other and from the baseline; only the
    // greedy partition can coincide with one.
    if (merged != greedy) out.push_back(std::move(merged));
  }
  return out;
}

std::string PartitionToString(const Graph& graph, const Partition& partition) {
  std::string out;
  for (const KernelGroup& group : partition) {
    absl::StrAppend(&out, "[");
    for (int i = group.begin; i < group.end; ++i) {
      absl::StrAppend(&out, i == group.begin ? "" : "+", graph.op(i).name);
    }
    absl::StrAppend(&out, group.kind == yirage::v1::KERNEL_GENERIC ? ":generic]" : "]");
  }
  return out;
}

}  // namespace yirage::core
