// The graph the plan fuzzer checks plans against (fuzz/plan_fuzz.cc), and
// whose candidates seed its corpus (fuzz/plan_fuzz_seeds.cc).
#ifndef YIRAGE_FUZZ_FUZZ_GRAPH_H_
#define YIRAGE_FUZZ_FUZZ_GRAPH_H_

#include <cstdlib>
#include <utility>

#include "core/graph.h"
#include "core/graph_json.h"

namespace yirage::fuzz {

// rms_norm -> matmul -> gated MLP -> matmul, and a row sum: row kernels,
// matmuls, slices, elementwise chains and a reduction in one graph.
inline constexpr char kPlanFuzzGraph[] = R"({
  "name": "fuzz",
  "inputs": [{"name": "X", "shape": [4, 32], "dtype": "float32"},
             {"name": "G", "shape": [32], "dtype": "float32"},
             {"name": "W", "shape": [32, 64], "dtype": "float32"},
             {"name": "U", "shape": [32, 32], "dtype": "float32"}],
  "ops": [
    {"name": "N", "op": "rms_norm", "inputs": ["X"], "attrs": {"eps": 1e-6}},
    {"name": "S", "op": "mul", "inputs": ["N", "G"]},
    {"name": "H", "op": "matmul", "inputs": ["S", "W"]},
    {"name": "A", "op": "slice", "inputs": ["H"], "attrs": {"axis": 1, "start": 0, "end": 32}},
    {"name": "B", "op": "slice", "inputs": ["H"], "attrs": {"axis": 1, "start": 32, "end": 64}},
    {"name": "Z", "op": "silu", "inputs": ["A"]},
    {"name": "M", "op": "mul", "inputs": ["Z", "B"]},
    {"name": "Y", "op": "matmul", "inputs": ["M", "U"]},
    {"name": "R", "op": "reduce_sum", "inputs": ["Y"]}
  ],
  "outputs": ["Y", "R"]
})";

// The graph of kPlanFuzzGraph (aborts if it does not build: a bug here).
inline const core::Graph& PlanFuzzGraph() {
  static const core::Graph* graph = [] {
    absl::StatusOr<yirage::v1::Graph> proto = core::ParseGraphJson(kPlanFuzzGraph);
    if (!proto.ok()) std::abort();
    absl::StatusOr<core::Graph> g = core::Graph::FromProto(*proto);
    if (!g.ok()) std::abort();
    return new core::Graph(*std::move(g));
  }();
  return *graph;
}

}  // namespace yirage::fuzz

#endif  // YIRAGE_FUZZ_FUZZ_GRAPH_H_
