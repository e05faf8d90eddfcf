#include "core/plan_work.h"

#include <optional>
#include <utility>

#include "core/cost_model.h"
#include "core/plan_resolution.h"
#include "core/status_macros.h"

namespace yirage::core {

absl::StatusOr<PlanWork> ComputePlanWork(const Graph& job_graph, const yirage::v1::Plan& plan) {
  std::optional<Graph> rewritten;
  if (plan.has_graph()) {
    YIRAGE_ASSIGN_OR_RETURN(rewritten, Graph::FromProto(plan.graph()));
  }
  const Graph& graph = rewritten.has_value() ? *rewritten : job_graph;
  YIRAGE_RETURN_IF_ERROR(ResolvePlan(graph, plan).status());
  PlanWork work;
  for (int op = 0; op < static_cast<int>(graph.ops().size()); ++op) {
    work.flops += OpFlops(graph, op);
  }
  // ResolvePlan found every name: FindTensor is not -1 below.
  for (const yirage::v1::KernelPlan& kernel : plan.kernels()) {
    for (const std::string& name : kernel.inputs()) {
      work.bytes += TensorBytes(graph, graph.FindTensor(name));
    }
    for (const std::string& name : kernel.outputs()) {
      work.bytes += TensorBytes(graph, graph.FindTensor(name));
    }
  }
  if (!graph.outputs().empty()) work.dtype = graph.tensor(graph.outputs().front()).dtype;
  return work;
}

}  // namespace yirage::core
