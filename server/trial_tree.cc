#include "server/trial_tree.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace yirage::server {
namespace {

using yirage::v1::Candidate;
using yirage::v1::TrialNode;

std::string KindSuffix(yirage::v1::KernelKind kind) {
  if (kind == yirage::v1::KERNEL_ROW || kind == yirage::v1::KERNEL_KIND_UNSPECIFIED) return "";
  absl::string_view name = yirage::v1::KernelKind_Name(kind);
  absl::ConsumePrefix(&name, "KERNEL_");
  return absl::StrCat(":", absl::AsciiStrToLower(name));
}

}  // namespace

std::string PartitionLabel(const yirage::v1::Plan& plan) {
  std::string out;
  for (const yirage::v1::KernelPlan& k : plan.kernels()) {
    absl::StrAppend(&out, "[", absl::StrJoin(k.ops(), "+"), KindSuffix(k.kind()), "]");
  }
  return out;
}

std::string ScheduleLabel(const yirage::v1::Plan& plan) {
  absl::string_view d = plan.description();
  // "rw:a+b " names the rewrites, which the tree shows as levels.
  if (absl::StartsWith(d, "rw:")) {
    const size_t space = d.find(' ');
    d = space == absl::string_view::npos ? absl::string_view() : d.substr(space + 1);
  }
  // Then the partition's bracket groups.
  while (!d.empty() && d.front() == '[') {
    const size_t close = d.find(']');
    if (close == absl::string_view::npos) break;
    d.remove_prefix(close + 1);
  }
  d = absl::StripAsciiWhitespace(d);
  return d.empty() ? std::string("(one schedule)") : std::string(d);
}

yirage::v1::TrialTree BuildTrialTree(const yirage::v1::Job& job,
                                     const std::vector<Candidate>& candidates) {
  yirage::v1::TrialTree tree;
  tree.set_job_id(job.job_id());
  // The nodes are built first (parents before children, as the candidates
  // introduce them), then laid out depth first so that a node's children
  // follow it.
  struct Node {
    TrialNode proto;
    std::vector<int> children;
  };
  std::vector<Node> nodes;
  auto add = [&](int parent, TrialNode::Kind kind, std::string label) {
    Node n;
    n.proto.set_parent_id(parent);
    n.proto.set_kind(kind);
    n.proto.set_label(std::move(label));
    if (parent >= 0) {
      *n.proto.mutable_rewrites() = nodes[parent].proto.rewrites();
      nodes[parent].children.push_back(static_cast<int>(nodes.size()));
    }
    nodes.push_back(std::move(n));
    return static_cast<int>(nodes.size()) - 1;
  };
  add(-1, TrialNode::GRAPH, "original graph");
  std::map<std::vector<std::string>, int> graphs = {{{}, 0}};
  std::map<std::pair<int, std::string>, int> partitions;  // (graph node, label)
  const int64_t best_id = job.has_best() ? job.best().candidate_id() : 0;
  for (const Candidate& c : candidates) {
    if (c.confirms() != 0) continue;
    // The graph: one level a rewrite.
    int graph = 0;
    std::vector<std::string> chain;
    for (const std::string& rule : c.plan().rewrites()) {
      chain.push_back(rule);
      auto [it, inserted] = graphs.try_emplace(chain, -1);
      if (inserted) {
        it->second = add(graph, TrialNode::GRAPH, rule);
        nodes[it->second].proto.add_rewrites(rule);
      }
      graph = it->second;
    }
    const std::string partition_label = PartitionLabel(c.plan());
    auto [pit, inserted] = partitions.try_emplace({graph, partition_label}, -1);
    if (inserted) pit->second = add(graph, TrialNode::PARTITION, partition_label);
    std::string label = ScheduleLabel(c.plan());
    if (c.final_of() != 0) absl::StrAppend(&label, " (final round of #", c.final_of(), ")");
    const int leaf = add(pit->second, TrialNode::CANDIDATE, std::move(label));
    TrialNode& p = nodes[leaf].proto;
    p.set_candidate_id(c.candidate_id());
    p.set_status(c.status());
    p.set_time_us(c.time_us());
    p.set_baseline(c.plan().baseline());
    p.set_best(c.candidate_id() == best_id);
    p.set_error(c.error());
    const bool verified = c.status() == yirage::v1::VERIFIED && c.time_us() > 0;
    if (verified) p.set_speedup(c.baseline_time_us() / c.time_us());
    // Counts and the best speedup up the path.
    for (int n = leaf; n >= 0; n = nodes[n].proto.parent_id()) {
      TrialNode& up = nodes[n].proto;
      up.set_candidates(up.candidates() + 1);
      if (verified) {
        up.set_verified(up.verified() + 1);
        up.set_best_speedup(std::max(up.best_speedup(), p.speedup()));
      }
    }
  }
  // Depth first from the root; ids are positions in that order.
  std::vector<int> order;
  std::vector<int> stack = {0};
  while (!stack.empty()) {
    const int n = stack.back();
    stack.pop_back();
    order.push_back(n);
    const std::vector<int>& ch = nodes[n].children;
    for (auto it = ch.rbegin(); it != ch.rend(); ++it) stack.push_back(*it);
  }
  std::vector<int> id(nodes.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) id[order[i]] = static_cast<int>(i);
  for (int n : order) {
    TrialNode* out = tree.add_nodes();
    *out = nodes[n].proto;
    out->set_node_id(id[n]);
    out->set_parent_id(out->parent_id() < 0 ? -1 : id[out->parent_id()]);
  }
  tree.set_text(DrawTrialTree(tree));
  return tree;
}

std::string DrawTrialTree(const yirage::v1::TrialTree& tree) {
  // Box-drawing prefixes: a node's ancestors say whether more of their
  // siblings follow (a bar) or not (blank).
  const int count = tree.nodes_size();
  std::vector<int> last_child(count, -1);
  for (const TrialNode& n : tree.nodes()) {
    if (n.parent_id() >= 0) last_child[n.parent_id()] = n.node_id();
  }
  std::vector<std::string> child_prefix(count);
  std::string text;
  for (const TrialNode& n : tree.nodes()) {
    std::string line;
    if (n.parent_id() >= 0) {
      const bool last = last_child[n.parent_id()] == n.node_id();
      line = child_prefix[n.parent_id()] + (last ? "└─ " : "├─ ");
      child_prefix[n.node_id()] = child_prefix[n.parent_id()] + (last ? "   " : "│  ");
    }
    if (n.kind() == TrialNode::CANDIDATE) {
      absl::StrAppend(&line, "#", n.candidate_id(), " ", n.label(), "  ",
                      yirage::v1::CandidateStatus_Name(n.status()));
      if (n.status() == yirage::v1::VERIFIED) {
        absl::StrAppend(&line, absl::StrFormat("  %.2f us  %.2fx", n.time_us(), n.speedup()));
      }
      if (n.baseline()) absl::StrAppend(&line, "  (baseline)");
      if (n.best()) absl::StrAppend(&line, "  <- best");
      if (!n.error().empty()) absl::StrAppend(&line, "  ! ", n.error().substr(0, 120));
    } else {
      if (n.kind() == TrialNode::GRAPH && n.parent_id() >= 0) absl::StrAppend(&line, "rewrite ");
      absl::StrAppend(&line, n.label(), "  (", n.candidates(), " candidate",
                      n.candidates() == 1 ? "" : "s", ", ", n.verified(), " verified");
      if (n.verified() > 0)
        absl::StrAppend(&line, absl::StrFormat(", best %.2fx", n.best_speedup()));
      absl::StrAppend(&line, ")");
    }
    absl::StrAppend(&text, line, "\n");
  }
  return text;
}

}  // namespace yirage::server
