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
    return absl::InvalidArgumentError("generic chain: needs a prologue op and an axis op");
  }
  GenericChain chain;
  chain.axis_op = op_ids.back();
  const OpInfo& axis = graph.op(chain.axis_op);
  if (!IsReduction(axis.type) && !IsNormOrSoftmax(axis.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("generic chain: ", Label(graph, chain.axis_op),
                     " breaks rule 1 (the last op must be a reduction, a norm or softmax)"));
  }
  const std::vector<int64_t>& shape = graph.tensor(axis.inputs[0]).shape;
  auto in_chain = [&](int op) {
    return op >= 0 && std::find(op_ids.begin(), op_ids.end(), op) != op_ids.end();
  };
  for (size_t i = 0; i + 1 < op_ids.size(); ++i) {
    const int id = op_ids[i];
    const OpInfo& op = graph.op(id);
    if (!IsElementwise(op.type)) {
      return absl::InvalidArgumentError(
          absl::StrCat("generic chain: ", Label(graph, id),
                       " breaks rule 1 (every op before the last must be elementwise)"));
    }
    const TensorInfo& result = graph.tensor(op.output);
    if (result.shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "generic chain: ", Label(graph, id), " breaks rule 1 (its result has shape ",
          ShapeToString(result.shape), ", the axis op's input ", ShapeToString(shape), ")"));
    }
    if (result.is_graph_output ||
        !std::all_of(result.consumers.begin(), result.consumers.end(), in_chain)) {
      return absl::InvalidArgumentError(
          absl::StrCat("generic chain: ", Label(graph, id),
                       " breaks rule 2 (its result is read outside the chain)"));
    }
    chain.prologue.push_back(id);
  }
  if (!in_chain(graph.tensor(axis.inputs[0]).producer)) {
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
