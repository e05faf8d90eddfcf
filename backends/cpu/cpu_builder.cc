#include "backends/cpu/cpu_builder.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_codegen.h"
#include "core/graph.h"

namespace yirage::backends::cpu {
namespace {

std::atomic<int> injected_error_plan{-1};

std::string Truncate(std::string text) {
  if (text.size() > kMaxDiagnosticBytes) {
    text.resize(kMaxDiagnosticBytes);
    text += "\n... (diagnostics truncated)";
  }
  return text;
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Compiles `source` to <dir>/<stem>.so and loads plans `plans` from it.
// Returns per-plan statuses, or the compile/load error shared by all.
absl::StatusOr<std::vector<absl::Status>> CompileAndLoad(const CpuCompiler& compiler,
                                                         CpuModule& module, const std::string& stem,
                                                         const std::string& source,
                                                         const std::vector<int>& plans,
                                                         double timeout) {
  const std::string base = absl::StrCat(module.dir(), "/", stem);
  if (absl::Status s = WriteFile(base + ".cc", source); !s.ok()) return s;
  absl::StatusOr<CompilerRun> run =
      compiler.CompileShared(base + ".cc", base + ".so", base + ".log", timeout);
  if (!run.ok()) return run.status();
  if (!run->ok) {
    return absl::InvalidArgumentError(Truncate(
        absl::StrCat("compilation failed (",
                     run->timed_out ? "timeout" : absl::StrCat("status ", run->exit_status), "):\n",
                     run->diagnostics)));
  }
  return module.Load(base + ".so", plans);
}

// CompiledPlan.kernel_key: the plan's code generated as plan 0, without the
// line naming the plan. Two plans whose schedules this backend runs alike
// get the same.
std::string KernelKey(const CpuCodegen& codegen, const yirage::v1::Plan& plan) {
  absl::StatusOr<std::string> canonical = codegen.GeneratePlan(plan, 0);
  if (!canonical.ok()) return "";
  std::string key = *std::move(canonical);
  if (absl::StartsWith(key, "// ---- plan ")) key.erase(0, key.find('\n') + 1);
  return key;
}

}  // namespace

void SetInjectedCompileError(int plan_index) { injected_error_plan.store(plan_index); }

absl::StatusOr<std::unique_ptr<CpuModule>> BuildModule(const yirage::v1::CompileRequest& request,
                                                       const CpuCompiler& compiler,
                                                       yirage::v1::CompileResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<core::Graph> graph = core::Graph::FromProto(request.graph());
  if (!graph.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CompileRequest.graph is invalid: ", graph.status().message()));
  }
  const int num_plans = request.plans_size();
  absl::StatusOr<std::unique_ptr<CpuModule>> module = CpuModule::Create(num_plans);
  if (!module.ok()) return module.status();

  response->Clear();
  const std::string prelude = CpuCodegen::Prelude();
  const CpuCodegen codegen(*graph);
  std::vector<std::string> code(num_plans);
  std::vector<int> pending;
  for (int i = 0; i < num_plans; ++i) {
    yirage::v1::CompiledPlan* out = response->add_plans();
    absl::StatusOr<std::string> src = codegen.GeneratePlan(request.plans(i), i);
    if (!src.ok()) {
      out->set_ok(false);
      out->set_error(Truncate(absl::StrCat("code generation failed: ", src.status().message())));
      continue;
    }
    code[i] = *std::move(src);
    if (injected_error_plan.load() == i) code[i] += "\n#error \"injected by the test hook\"\n";
    out->set_source(prelude + code[i]);
    if (injected_error_plan.load() != i) out->set_kernel_key(KernelKey(codegen, request.plans(i)));
    pending.push_back(i);
  }

  const double timeout = request.timeout_seconds();
  auto record = [&](const std::vector<int>& plans, const std::vector<absl::Status>& statuses) {
    for (size_t k = 0; k < plans.size(); ++k) {
      yirage::v1::CompiledPlan* out = response->mutable_plans(plans[k]);
      out->set_ok(statuses[k].ok());
      if (!statuses[k].ok()) out->set_error(Truncate(std::string(statuses[k].message())));
    }
  };
  if (!pending.empty()) {
    std::string all = prelude;
    for (int i : pending) all += code[i];
    absl::StatusOr<std::vector<absl::Status>> combined =
        CompileAndLoad(compiler, **module, "plans", all, pending, timeout);
    if (combined.ok()) {
      record(pending, *combined);
    } else if (pending.size() == 1) {
      record(pending, {combined.status()});
    } else {
      // One compile per plan so a bad plan fails only itself.
      for (int i : pending) {
        absl::StatusOr<std::vector<absl::Status>> alone = CompileAndLoad(
            compiler, **module, absl::StrCat("plan_", i), prelude + code[i], {i}, timeout);
        record({i}, alone.ok() ? *alone : std::vector<absl::Status>{alone.status()});
      }
    }
  }
  response->set_compile_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return module;
}

}  // namespace yirage::backends::cpu
