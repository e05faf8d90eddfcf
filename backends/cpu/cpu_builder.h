// Turns a CompileRequest into a loaded CpuModule: generates one translation
// unit for all plans, compiles it once, and falls back to one compile per plan
// when the combined compile fails, so a bad plan fails only itself.
#ifndef YIRAGE_BACKENDS_CPU_CPU_BUILDER_H_
#define YIRAGE_BACKENDS_CPU_CPU_BUILDER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "backends/cpu/cpu_compiler.h"
#include "backends/cpu/cpu_module.h"
#include "yirage/v1/backend.pb.h"

namespace yirage::backends::cpu {

// Diagnostics kept per failed plan.
inline constexpr size_t kMaxDiagnosticBytes = 4096;

// Builds the request's plans. Fills `response` with one CompiledPlan per plan
// (same order) and the compile time. Returns InvalidArgument when the request
// itself is bad (its graph does not validate) and an error when no module can
// be created; a plan that fails code generation or compilation is only
// reported in `response`. Thread-safe.
absl::StatusOr<std::unique_ptr<CpuModule>> BuildModule(const yirage::v1::CompileRequest& request,
                                                       const CpuCompiler& compiler,
                                                       yirage::v1::CompileResponse* response);

// Test hook: the generated source of plan `plan_index` of every later request
// gets an #error line (-1 turns it off). Thread-safe.
void SetInjectedCompileError(int plan_index);

}  // namespace yirage::backends::cpu

#endif  // YIRAGE_BACKENDS_CPU_CPU_BUILDER_H_
