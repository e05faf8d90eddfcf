// Expansion of the graph builders' compound operations into primitive ops
// (see ExpandCompoundOps in core/graph.h and docs/graph-format.md).
#include <cmath>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/graph.h"

namespace yirage::core {
namespace {

using yirage::v1::AttrValue;
using yirage::v1::OpNode;

constexpr std::string_view kCompoundOps[] = {"gated_mlp", "rms_norm_linear", "gemm_softmax",
                                             "gemm_layernorm", "self_attention"};

std::string Prefix(int index, const OpNode& node) {
  return absl::StrCat("op '", node.name(), "' (ops[", index, "], ", node.op(), ")");
}

absl::Status CheckAttrs(int index, const OpNode& node, const std::vector<std::string>& allowed) {
  std::set<std::string> keys;
  for (const auto& [key, value] : node.attrs()) keys.insert(key);
  for (const std::string& key : keys) {
    bool ok = false;
    for (const std::string& a : allowed) ok = ok || a == key;
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(Prefix(index, node), ": unknown attr '", key, "' (", node.op(),
                       " accepts: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckInputs(int index, const OpNode& node, int lo, int hi) {
  if (node.inputs_size() >= lo && node.inputs_size() <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      Prefix(index, node), ": expects ", lo == hi ? absl::StrCat(lo) : absl::StrCat(lo, " to ", hi),
      " inputs, got ", node.inputs_size()));
}

OpNode Node(const std::string& name, const std::string& op, std::vector<std::string> inputs) {
  OpNode n;
  n.set_name(name);
  n.set_op(op);
  for (std::string& s : inputs) n.add_inputs(std::move(s));
  return n;
}

void CopyAttr(const OpNode& from, const std::string& key, OpNode* to) {
  auto it = from.attrs().find(key);
  if (it != from.attrs().end()) (*to->mutable_attrs())[key] = it->second;
}

absl::Status ExpandOne(const yirage::v1::Graph& proto, int index, const OpNode& node,
                       std::vector<OpNode>* out) {
  const std::string& n = node.name();
  const std::string& kind = node.op();
  auto in = [&](int k) { return node.inputs(k); };
  if (kind == "gated_mlp") {
    if (absl::Status s = CheckInputs(index, node, 3, 4); !s.ok()) return s;
    if (absl::Status s = CheckAttrs(index, node, {"activation"}); !s.ok()) return s;
    std::string act = "silu";
    if (auto it = node.attrs().find("activation"); it != node.attrs().end()) {
      if (it->second.value_case() != AttrValue::kS) {
        return absl::InvalidArgumentError(
            absl::StrCat(Prefix(index, node), ": attrs.activation must be a string"));
      }
      act = it->second.s();
    }
    const std::set<std::string> acts = {"silu", "gelu", "gelu_tanh", "relu", "sigmoid", "tanh"};
    if (!acts.contains(act)) {
      return absl::InvalidArgumentError(
          absl::StrCat(Prefix(index, node), ": attrs.activation '", act,
                       "' is not one of silu, gelu, gelu_tanh, relu, sigmoid, tanh"));
    }
    out->push_back(Node(n + "/gate", "matmul", {in(0), in(1)}));
    OpNode a = Node(n + "/act", act == "gelu_tanh" ? "gelu" : act, {n + "/gate"});
    if (act == "gelu_tanh") (*a.mutable_attrs())["approximate"].set_s("tanh");
    out->push_back(a);
    out->push_back(Node(n + "/up", "matmul", {in(0), in(2)}));
    if (node.inputs_size() == 4) {
      out->push_back(Node(n + "/hidden", "mul", {n + "/act", n + "/up"}));
      out->push_back(Node(n, "matmul", {n + "/hidden", in(3)}));
    } else {
      out->push_back(Node(n, "mul", {n + "/act", n + "/up"}));
    }
    return absl::OkStatus();
  }
  if (kind == "rms_norm_linear") {
    if (absl::Status s = CheckInputs(index, node, 2, 3); !s.ok()) return s;
    if (absl::Status s = CheckAttrs(index, node, {"eps", "transpose_b"}); !s.ok()) return s;
    OpNode norm = Node(n + "/norm", "rms_norm", {in(0)});
    if (node.inputs_size() == 3) norm.add_inputs(in(2));
    CopyAttr(node, "eps", &norm);
    out->push_back(norm);
    OpNode mm = Node(n, "matmul", {n + "/norm", in(1)});
    CopyAttr(node, "transpose_b", &mm);
    out->push_back(mm);
    return absl::OkStatus();
  }
  if (kind == "gemm_softmax") {
    if (absl::Status s = CheckInputs(index, node, 2, 2); !s.ok()) return s;
    if (absl::Status s = CheckAttrs(index, node, {"scale", "transpose_b"}); !s.ok()) return s;
    OpNode mm = Node(n + "/gemm", "matmul", {in(0), in(1)});
    CopyAttr(node, "transpose_b", &mm);
    out->push_back(mm);
    std::string last = n + "/gemm";
    if (node.attrs().contains("scale")) {
      OpNode sc = Node(n + "/scaled", "mul", {last});
      (*sc.mutable_attrs())["scalar"] = node.attrs().at("scale");
      out->push_back(sc);
      last = n + "/scaled";
    }
    out->push_back(Node(n, "softmax", {last}));
    return absl::OkStatus();
  }
  if (kind == "gemm_layernorm") {
    if (absl::Status s = CheckInputs(index, node, 2, 4); !s.ok()) return s;
    if (absl::Status s = CheckAttrs(index, node, {"eps", "transpose_b"}); !s.ok()) return s;
    OpNode mm = Node(n + "/gemm", "matmul", {in(0), in(1)});
    CopyAttr(node, "transpose_b", &mm);
    out->push_back(mm);
    OpNode ln = Node(n, "layer_norm", {n + "/gemm"});
    for (int k = 2; k < node.inputs_size(); ++k) ln.add_inputs(in(k));
    CopyAttr(node, "eps", &ln);
    out->push_back(ln);
    return absl::OkStatus();
  }
  // self_attention
  if (absl::Status s = CheckInputs(index, node, 3, 3); !s.ok()) return s;
  if (absl::Status s = CheckAttrs(index, node, {"scale"}); !s.ok()) return s;
  AttrValue scale;
  if (node.attrs().contains("scale")) {
    scale = node.attrs().at("scale");
  } else {
    int64_t d = 0;
    for (const yirage::v1::TensorSpec& spec : proto.inputs()) {
      if (spec.name() == in(0) && spec.shape_size() > 0) d = spec.shape(spec.shape_size() - 1);
    }
    if (d <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(Prefix(index, node), ": attrs.scale is required when Q ('", in(0),
                       "') is not a graph input (the default 1/sqrt(head dim) needs its shape)"));
    }
    scale.set_f(1.0 / std::sqrt(static_cast<double>(d)));
  }
  OpNode scores = Node(n + "/scores", "matmul", {in(0), in(1)});
  (*scores.mutable_attrs())["transpose_b"].set_b(true);
  out->push_back(scores);
  OpNode scaled = Node(n + "/scaled", "mul", {n + "/scores"});
  (*scaled.mutable_attrs())["scalar"] = scale;
  out->push_back(scaled);
  out->push_back(Node(n + "/probs", "softmax", {n + "/scaled"}));
  out->push_back(Node(n, "matmul", {n + "/probs", in(2)}));
  return absl::OkStatus();
}

}  // namespace

bool IsCompoundOp(std::string_view name) {
  for (std::string_view c : kCompoundOps) {
    if (c == name) return true;
  }
  return false;
}

absl::StatusOr<yirage::v1::Graph> ExpandCompoundOps(const yirage::v1::Graph& proto) {
  bool any = false;
  for (const OpNode& node : proto.ops()) any = any || IsCompoundOp(node.op());
  if (!any) return proto;
  yirage::v1::Graph out = proto;
  out.clear_ops();
  for (int j = 0; j < proto.ops_size(); ++j) {
    const OpNode& node = proto.ops(j);
    if (!IsCompoundOp(node.op())) {
      *out.add_ops() = node;
      continue;
    }
    if (node.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("ops[", j, "]: name is empty"));
    }
    std::vector<OpNode> parts;
    if (absl::Status s = ExpandOne(proto, j, node, &parts); !s.ok()) return s;
    for (OpNode& part : parts) *out.add_ops() = std::move(part);
  }
  return out;
}

}  // namespace yirage::core
