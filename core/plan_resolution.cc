#include "core/plan_resolution.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/generic_chain.h"

namespace yirage::core {

absl::StatusOr<ResolvedPlan> ResolvePlan(const Graph& g, const yirage::v1::Plan& plan) {
  const int num_ops = static_cast<int>(g.ops().size());
  const int num_tensors = g.num_tensors();
  ResolvedPlan r;
  auto kernel_label = [&](int k) {
    return absl::StrCat("kernel ", k, " ('", plan.kernels(k).name(), "')");
  };

  std::vector<int>& op_kernel = r.op_kernel;
  op_kernel.assign(num_ops, -1);
  std::vector<std::vector<int>>& kernel_ops = r.kernel_ops;
  kernel_ops.assign(plan.kernels_size(), {});
  std::vector<std::vector<int>>& kernel_outputs = r.kernel_outputs;
  kernel_outputs.assign(plan.kernels_size(), {});
  std::vector<bool> available(num_tensors, false);
  std::vector<bool>& read_by_kernel = r.read_by_kernel;
  read_by_kernel.assign(num_tensors, false);
  for (int t = 0; t < g.num_inputs(); ++t) available[t] = true;
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const yirage::v1::KernelPlan& kernel = plan.kernels(k);
    if (kernel.kind() != yirage::v1::KERNEL_ROW && kernel.kind() != yirage::v1::KERNEL_GENERIC &&
        kernel.kind() != yirage::v1::KERNEL_LIBRARY) {
      return absl::InvalidArgumentError(absl::StrCat(
          kernel_label(k), ": kind must be KERNEL_ROW, KERNEL_GENERIC or KERNEL_LIBRARY"));
    }
    if (kernel.ops().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(kernel_label(k), ": has no ops"));
    }
    for (const std::string& name : kernel.ops()) {
      const int id = g.FindOp(name);
      if (id < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(kernel_label(k), ": unknown op '", name, "'"));
      }
      if (op_kernel[id] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            kernel_label(k), ": op '", name, "' is already in ", kernel_label(op_kernel[id])));
      }
      op_kernel[id] = k;
      kernel_ops[k].push_back(id);
    }
    if (kernel.kind() == yirage::v1::KERNEL_GENERIC && kernel_ops[k].size() != 1) {
      // A chain of elementwise ops around an axis op (core/generic_chain.h).
      const std::vector<int>& ops = kernel_ops[k];
      absl::StatusOr<GenericChain> chain =
          std::is_sorted(ops.begin(), ops.end())
              ? AnalyzeGenericChain(g, ops)
              : absl::StatusOr<GenericChain>(
                    absl::InvalidArgumentError("ops not in topological order"));
      if (!chain.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(kernel_label(k), ": KERNEL_GENERIC holds ", ops.size(),
                         " ops, must hold 1 or a chain of elementwise ops around an axis op (",
                         chain.status().message(), ")"));
      }
    }
    std::vector<bool> is_input(num_tensors, false);
    for (const std::string& name : kernel.inputs()) {
      const int t = g.FindTensor(name);
      if (t < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(kernel_label(k), ": unknown input tensor '", name, "'"));
      }
      if (!available[t]) {
        return absl::InvalidArgumentError(
            absl::StrCat(kernel_label(k), ": input '", name,
                         "' is neither a graph input nor an output of an earlier kernel"));
      }
      if (is_input[t]) {
        return absl::InvalidArgumentError(
            absl::StrCat(kernel_label(k), ": input '", name, "' is listed twice"));
      }
      is_input[t] = true;
      read_by_kernel[t] = true;
    }
    for (int id : kernel_ops[k]) {
      for (int t : g.op(id).inputs) {
        const int producer = g.tensor(t).producer;
        if (producer >= 0 && op_kernel[producer] == k) continue;  // in-kernel (ROW)
        if (!is_input[t]) {
          return absl::InvalidArgumentError(absl::StrCat(kernel_label(k), ": op '", g.op(id).name,
                                                         "' reads '", g.tensor(t).name,
                                                         "', which is not in the kernel's inputs"));
        }
      }
    }
    for (const std::string& name : kernel.outputs()) {
      const int t = g.FindTensor(name);
      if (t < 0 || g.tensor(t).producer < 0 || op_kernel[g.tensor(t).producer] != k) {
        return absl::InvalidArgumentError(absl::StrCat(
            kernel_label(k), ": output '", name, "' is not produced by an op of this kernel"));
      }
      if (std::find(kernel_outputs[k].begin(), kernel_outputs[k].end(), t) ==
          kernel_outputs[k].end()) {
        kernel_outputs[k].push_back(t);
      }
      available[t] = true;
    }
  }
  for (int id = 0; id < num_ops; ++id) {
    if (op_kernel[id] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", g.op(id).name, "' is in no kernel of the plan"));
    }
  }
  for (int t : g.outputs()) {
    if (!available[t]) {
      return absl::InvalidArgumentError(
          absl::StrCat("graph output '", g.tensor(t).name, "' is not in any kernel's outputs"));
    }
  }

  return r;
}

}  // namespace yirage::core
