// libFuzzer target: the plans a worker decodes from a batch (serialized
// yirage.v1.Plan messages, as a backend receives them in a CompileRequest),
// checked against a small graph of every kind of op the search fuses. Any
// plan may be refused; none may crash, hang or leak, and a plan that
// ValidatePlan accepts must resolve.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/candidate_generator.h"
#include "core/graph.h"
#include "core/plan_resolution.h"
#include "fuzz/fuzz_graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  yirage::v1::Plan plan;
  if (!plan.ParseFromArray(data, static_cast<int>(size))) return 0;
  const yirage::core::Graph& graph = yirage::fuzz::PlanFuzzGraph();
  if (!yirage::core::ValidatePlan(graph, plan).ok()) return 0;
  // As a backend does: a rewritten plan runs on its own graph.
  absl::StatusOr<yirage::core::Graph> own = graph;
  if (plan.has_graph()) own = yirage::core::Graph::FromProto(plan.graph());
  if (!own.ok()) std::abort();  // ValidatePlan accepted a graph that does not build
  if (absl::StatusOr<yirage::core::ResolvedPlan> r = yirage::core::ResolvePlan(*own, plan);
      !r.ok()) {
    std::fprintf(stderr, "a valid plan does not resolve: %s\n",
                 std::string(r.status().message()).c_str());
    std::abort();
  }
  return 0;
}
