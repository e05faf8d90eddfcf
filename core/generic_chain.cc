#include "core/generic_chain.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace yirage::core {
namespace {

std::string Label(const Graph& graph, int op) {
  return absl::StrCat("op '", graph.op(op).name, "' (", std::string(OpTypeName(graph.op(op).type)),
                      ")");
}

}  // namespace

absl::StatusOr<GenericChain> AnalyzeGenericChain(const Graph& graph, absl::Span<const int> op_ids) {
  if (op_ids.size() < 2) {
    return absl::InvalidArgumentError(
        "generic chain: needs an axis op and an elementwise op before or after it");
  }
  GenericChain chain;
  for (int id : op_ids) {
    if (IsElementwise(graph.op(id).type)) continue;
    if (!IsReduction(graph.op(id).type) && !IsNormOrSoftmax(graph.op(id).type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("generic chain: ", Label(graph, id),
                       " breaks rule 1 (ops are elementwise but one reduction, norm or softmax)"));
    }
    if (chain.axis_op >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("generic chain: ", Label(graph, id),
                                                     " breaks rule 1 (a second axis op after ",
                                                     Label(graph, chain.axis_op), ")"));
    }
    chain.axis_op = id;
  }
  if (chain.axis_op < 0) {
    return absl::InvalidArgumentError(
        "generic chain: breaks rule 1 (no reduction, norm or softmax among the ops)");
  }
  const OpInfo& axis = graph.op(chain.axis_op);
  const std::vector<int64_t>& in_shape = graph.tensor(axis.inputs[0]).shape;
  if (axis.axis == static_cast<int>(in_shape.size()) - 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("generic chain: ", Label(graph, chain.axis_op),
                     " breaks rule 1 (it works over the last axis, which row kernels take)"));
  }
  const std::vector<int64_t>& out_shape = graph.tensor(axis.output).shape;
  auto in_chain = [&](int op) {
    return op >= 0 && std::find(op_ids.begin(), op_ids.end(), op) != op_ids.end();
  };
  auto read_inside = [&](int id) -> absl::Status {
    const TensorInfo& result = graph.tensor(graph.op(id).output);
    if (result.is_graph_output ||
        !std::all_of(result.consumers.begin(), result.consumers.end(), in_chain)) {
      return absl::InvalidArgumentError(
          absl::StrCat("generic chain: ", Label(graph, id),
                       " breaks rule 2 (its result is read outside the chain)"));
    }
    return absl::OkStatus();
  };
  bool after = false;
  for (int id : op_ids) {
    if (id == chain.axis_op) {
      after = true;
      if (id != op_ids.back()) {
        if (absl::Status s = read_inside(id); !s.ok()) return s;
      }
      continue;
    }
    const OpInfo& op = graph.op(id);
    const std::vector<int64_t>& shape = after ? out_shape : in_shape;
    if (graph.tensor(op.output).shape != shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("generic chain: ", Label(graph, id), " breaks rule 1 (its result has shape ",
                       ShapeToString(graph.tensor(op.output).shape), ", the axis op's ",
                       after ? "output " : "input ", ShapeToString(shape), ")"));
    }
    if (!after || id != op_ids.back()) {
      if (absl::Status s = read_inside(id); !s.ok()) return s;
    }
    if (after) {
      // An epilogue op reads the axis op's result or an epilogue result,
      // never a prologue result.
      bool reads_chain = false;
      for (int t : op.inputs) {
        const int producer = graph.tensor(t).producer;
        if (!in_chain(producer)) continue;
        if (std::find(chain.prologue.begin(), chain.prologue.end(), producer) !=
            chain.prologue.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat("generic chain: ", Label(graph, id),
                           " breaks rule 2 (an op after the axis op reads a prologue result)"));
        }
        reads_chain = true;
      }
      if (!reads_chain) {
        return absl::InvalidArgumentError(
            absl::StrCat("generic chain: ", Label(graph, id),
                         " breaks rule 2 (an op after the axis op reads no chain result)"));
      }
      chain.epilogue.push_back(id);
    } else {
      chain.prologue.push_back(id);
    }
  }
  if (!chain.prologue.empty() && !in_chain(graph.tensor(axis.inputs[0]).producer)) {
    return absl::InvalidArgumentError(absl::StrCat("generic chain: ", Label(graph, chain.axis_op),
                                                   " breaks rule 2 (its input 0 must be a "
                                                   "prologue result)"));
  }
  for (size_t k = 1; k < axis.inputs.size(); ++k) {
    if (in_chain(graph.tensor(axis.inputs[k]).producer)) {
      return absl::InvalidArgumentError(absl::StrCat("generic chain: ", Label(graph, chain.axis_op),
                                                     " breaks rule 2 (input ", k,
                                                     " is a prologue result)"));
    }
  }
  return chain;
}

}  // namespace yirage::core
