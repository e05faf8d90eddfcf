// Plan -> C++ (OpenMP) source for the CPU backend.
//
// Every plan becomes three extern "C" functions in one translation unit:
//   int  yirage_plan_<i>(const void* const* inputs, void* const* outputs);
//   int  yirage_plan_<i>_init(void);  // allocates scratch; 0 on success
//   void yirage_plan_<i>_fini(void);  // frees it
// inputs are the graph inputs in declaration order and outputs the graph
// outputs in graph output order, raw buffers in each tensor's dtype. Tensors
// passed between kernels live in float32 scratch buffers allocated by _init
// (once per loaded module), as do the per-thread block buffers of KERNEL_ROW
// kernels, so the entry point never allocates. The entry point returns 0, or
// 1 when _init has not succeeded. A module's plan functions are not reentrant:
// callers serialize calls into one loaded module.
#ifndef YIRAGE_BACKENDS_CPU_CPU_CODEGEN_H_
#define YIRAGE_BACKENDS_CPU_CPU_CODEGEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::backends::cpu {

// Names of the generated functions of plan `index`.
std::string PlanEntryName(int index);  // "yirage_plan_<index>"
std::string PlanInitName(int index);   // "yirage_plan_<index>_init"
std::string PlanFiniName(int index);   // "yirage_plan_<index>_fini"

// Generates C++17 source from a graph and its plans. Thread-safe (const).
class CpuCodegen {
 public:
  // REQUIRES: `graph` outlives the codegen.
  explicit CpuCodegen(const core::Graph& graph) : graph_(graph) {}

  // Includes, dtype helpers and allocation helpers shared by every plan of a
  // translation unit; emit once, before the plans.
  static std::string Prelude();

  // The functions of plan `index` (see the file comment). Returns
  // InvalidArgument naming the kernel and the problem when the plan does not
  // fit the graph (unknown or repeated op, op missing from every kernel, input
  // read before it is written, a needed tensor missing from a kernel's inputs
  // or outputs, illegal row group, GENERIC kernel with more than one op).
  absl::StatusOr<std::string> GeneratePlan(const yirage::v1::Plan& plan, int index) const;

 private:
  const core::Graph& graph_;
};

}  // namespace yirage::backends::cpu

#endif  // YIRAGE_BACKENDS_CPU_CPU_CODEGEN_H_
