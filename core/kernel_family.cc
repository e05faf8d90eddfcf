#include "core/kernel_family.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/fused_pattern.h"

namespace yirage::core {

using yirage::v1::FamilyPattern;

bool MatchesPattern(FamilyPattern pattern, const Graph& graph, const std::vector<int>& ops) {
  switch (pattern) {
    case yirage::v1::STREAMED_MATMUL:
      return MatchStreamedMatmul(graph, ops).has_value();
    case yirage::v1::ATTENTION:
      return MatchAttention(graph, ops).has_value();
    case yirage::v1::GEMM:
      return MatchGemm(graph, ops).has_value();
    default:
      return false;
  }
}

int MatchFamily(const yirage::v1::BackendKernels& kernels, const Graph& graph,
                const std::vector<int>& ops) {
  for (int f = 0; f < kernels.families_size(); ++f) {
    const yirage::v1::KernelFamily& family = kernels.families(f);
    if (MatchesPattern(family.pattern(), graph, ops) &&
        WithinLimits(family.limits(), family.pattern(), graph, ops)) {
      return f;
    }
  }
  return -1;
}

namespace {

bool Multiple(int64_t value, int64_t of) { return of <= 0 || value % of == 0; }

// The dtype and origin limits over `inputs`.
bool InputsWithin(const yirage::v1::MatchLimits& limits, const Graph& graph,
                  const std::vector<int>& inputs) {
  for (int t : inputs) {
    const TensorInfo& info = graph.tensor(t);
    if (limits.inputs_from_graph() && info.producer >= 0) return false;
    if (limits.dtypes_size() > 0) {
      if (info.dtype != graph.tensor(inputs.front()).dtype) return false;
      if (std::find(limits.dtypes().begin(), limits.dtypes().end(), info.dtype) ==
          limits.dtypes().end()) {
        return false;
      }
    }
  }
  return true;
}

bool StreamedWithin(const yirage::v1::MatchLimits& limits, const Graph& graph,
                    const StreamedMatmulMatch& m) {
  const std::vector<int64_t>& x = graph.tensor(m.x).shape;
  const std::vector<int64_t>& w1 = graph.tensor(m.w1).shape;
  if (limits.two_dimensional()) {
    if (x.size() != 2 || w1.size() != 2) return false;
    for (int t : {m.w2, m.a, m.b}) {
      if (t >= 0 && graph.tensor(t).shape.size() != 2) return false;
    }
  }
  if (x.empty() || w1.empty()) return false;
  int64_t rows = 1;  // M: every dim of X but the last
  for (size_t i = 0; i + 1 < x.size(); ++i) rows *= x[i];
  if (limits.max_rows() > 0 && rows > limits.max_rows()) return false;
  if (!Multiple(x.back(), limits.k_multiple()) || !Multiple(w1.back(), limits.n_multiple())) {
    return false;
  }
  if (m.b >= 0) {
    if (limits.no_low_rank()) return false;
    const int64_t rank = graph.tensor(m.a).shape.back();
    if (!Multiple(rank, limits.rank_multiple())) return false;
    if (limits.max_rank() > 0 && rank > limits.max_rank()) return false;
  }
  if (limits.no_prologue() && (m.rms || !m.col_scales.empty())) return false;
  std::vector<int> inputs = {m.x, m.w1};
  for (int t : {m.w2, m.a, m.b}) {
    if (t >= 0) inputs.push_back(t);
  }
  inputs.insert(inputs.end(), m.col_scales.begin(), m.col_scales.end());
  return InputsWithin(limits, graph, inputs);
}

bool AttentionWithin(const yirage::v1::MatchLimits& limits, const Graph& graph,
                     const AttentionMatch& a) {
  if (limits.head_dim() > 0 && (a.d != limits.head_dim() || a.dv != limits.head_dim())) {
    return false;
  }
  if (!Multiple(a.d, limits.head_dim_multiple()) || !Multiple(a.dv, limits.head_dim_multiple())) {
    return false;
  }
  if (limits.max_head_dim() > 0 && (a.d > limits.max_head_dim() || a.dv > limits.max_head_dim())) {
    return false;
  }
  if (!Multiple(a.n, limits.keys_multiple())) return false;
  if (!a.transpose_k && !Multiple(a.n, limits.keys_by_columns_multiple())) return false;
  if (limits.max_query_rows() > 0 && a.m > limits.max_query_rows()) return false;
  if (a.m < limits.min_query_rows()) return false;
  if (limits.keys_by_rows() && !a.transpose_k) return false;
  if (limits.equal_head_dims() && a.d != a.dv) return false;
  return InputsWithin(limits, graph, {a.q, a.k, a.v});
}

bool GemmWithin(const yirage::v1::MatchLimits& limits, const Graph& graph, const GemmMatch& m) {
  if (m.m < limits.min_rows()) return false;
  if (limits.max_rows() > 0 && m.m > limits.max_rows()) return false;
  if (!Multiple(m.k, limits.k_multiple()) || !Multiple(m.n, limits.n_multiple())) return false;
  if (!m.transpose_b && !Multiple(m.n, limits.b_kn_n_multiple())) return false;
  if (limits.b_by_rows() && !m.transpose_b) return false;
  if (m.batch > 1 && limits.no_batch()) return false;
  if (m.batch > 1 && !m.transpose_b && !Multiple(m.k, limits.batch_kn_k_multiple())) return false;
  if (m.b2 >= 0 && limits.no_gate()) return false;
  if (graph.proto().tolerance().rtol() < limits.min_rtol()) return false;
  std::vector<int> inputs = {m.a, m.b};
  if (m.b2 >= 0) inputs.push_back(m.b2);
  for (const GemmMatch::Step& step : m.epilogue) {
    if (step.tensor >= 0) inputs.push_back(step.tensor);
  }
  return InputsWithin(limits, graph, inputs);
}

}  // namespace

bool WithinLimits(const yirage::v1::MatchLimits& limits, FamilyPattern pattern, const Graph& graph,
                  const std::vector<int>& ops) {
  if (pattern == yirage::v1::STREAMED_MATMUL) {
    const std::optional<StreamedMatmulMatch> m = MatchStreamedMatmul(graph, ops);
    return m.has_value() && StreamedWithin(limits, graph, *m);
  }
  if (pattern == yirage::v1::ATTENTION) {
    const std::optional<AttentionMatch> a = MatchAttention(graph, ops);
    return a.has_value() && AttentionWithin(limits, graph, *a);
  }
  if (pattern == yirage::v1::GEMM) {
    const std::optional<GemmMatch> m = MatchGemm(graph, ops);
    return m.has_value() && GemmWithin(limits, graph, *m);
  }
  return false;
}

FamilyPattern ScheduleFamily(const yirage::v1::Schedule& schedule) {
  switch (schedule.family_case()) {
    case yirage::v1::Schedule::kStreamedMatmul:
      return yirage::v1::STREAMED_MATMUL;
    case yirage::v1::Schedule::kAttention:
      return yirage::v1::ATTENTION;
    case yirage::v1::Schedule::kGemm:
      return yirage::v1::GEMM;
    default:
      return yirage::v1::FAMILY_PATTERN_UNSPECIFIED;
  }
}

void SetFamilyDefault(FamilyPattern pattern, yirage::v1::Schedule* schedule) {
  if (pattern == yirage::v1::STREAMED_MATMUL) schedule->mutable_streamed_matmul();
  if (pattern == yirage::v1::ATTENTION) schedule->mutable_attention();
  if (pattern == yirage::v1::GEMM) schedule->mutable_gemm();
}

absl::Status CheckFamilySchedule(const Graph& graph, const std::vector<int>& ops,
                                 const std::string& kernel_name,
                                 const yirage::v1::Schedule& schedule) {
  if (schedule.has_library()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel ", kernel_name, ": schedule.library is for KERNEL_LIBRARY kernels only"));
  }
  const FamilyPattern pattern = ScheduleFamily(schedule);
  if (pattern == yirage::v1::FAMILY_PATTERN_UNSPECIFIED) return absl::OkStatus();
  if (!MatchesPattern(pattern, graph, ops)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", kernel_name, ": schedule.", PatternName(pattern),
                     " is set but its ops are not a ", PatternName(pattern), " chain"));
  }
  return absl::OkStatus();
}

std::string PatternName(FamilyPattern pattern) {
  switch (pattern) {
    case yirage::v1::STREAMED_MATMUL:
      return "streamed_matmul";
    case yirage::v1::ATTENTION:
      return "attention";
    case yirage::v1::GEMM:
      return "gemm";
    default:
      return "unspecified";
  }
}

}  // namespace yirage::core
