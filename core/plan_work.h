// What a plan computes and moves: the two figures of a roofline (arithmetic
// intensity = flops / bytes; achieved rate = flops / measured time), counted
// as the cost model counts them (core/cost_model.h), so that clients need no
// copy of it. The server computes them on read for ListCandidates
// (Candidate.work in proto/yirage/v1/job.proto).
#ifndef YIRAGE_CORE_PLAN_WORK_H_
#define YIRAGE_CORE_PLAN_WORK_H_

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {

struct PlanWork {
  // Floating-point operations of the plan's graph: OpFlops (the op table's
  // count: a matmul 2*M*N*K, ...) summed over its ops.
  double flops = 0;
  // Bytes the plan's kernels move to and from memory at the least: each
  // kernel's inputs read once and its outputs written once, TensorBytes each
  // (graph inputs and outputs at their dtype, tensors passed between kernels
  // as float32 scratch). What a fused kernel keeps on chip is not counted.
  double bytes = 0;
  // The dtype of the graph's (first) output: the one whose peak bounds it.
  yirage::v1::DType dtype = yirage::v1::FLOAT32;
};

// The work of `plan` on `graph` (the job's graph), or on the plan's own
// graph where it has one (a rewritten plan: Plan.graph). InvalidArgument
// when that graph is invalid or the plan does not fit it (ResolvePlan).
absl::StatusOr<PlanWork> ComputePlanWork(const Graph& graph, const yirage::v1::Plan& plan);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_PLAN_WORK_H_
