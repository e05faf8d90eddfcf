#include "core/row_group.h"

#include <algorithm>
#include <set>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace yirage::core {
namespace {

std::string OpLabel(const OpInfo& op) {
  return absl::StrCat("op '", op.name, "' (", std::string(OpTypeName(op.type)), ")");
}

bool IsLastAxisOp(OpType type) {
  return IsReduction(type) || type == OpType::kRmsNorm || type == OpType::kLayerNorm ||
         type == OpType::kSoftmax || type == OpType::kConcat || type == OpType::kSlice;
}

}  // namespace

absl::StatusOr<RowGroupInfo> AnalyzeRowGroup(const Graph& graph, absl::Span<const int> op_ids) {
  if (op_ids.empty()) {
    return absl::InvalidArgumentError("row group: the group has no ops");
  }
  RowGroupInfo info;
  // Op index -> position in the span, for ops already visited.
  std::unordered_map<int, int> position;
  // Kernel inputs read by per-row ops and by other ops (rule 5).
  std::set<int> per_row_readers, other_readers;
  const int num_ops = static_cast<int>(graph.ops().size());
  for (int pos = 0; pos < static_cast<int>(op_ids.size()); ++pos) {
    const int id = op_ids[pos];
    if (id < 0 || id >= num_ops) {
      return absl::InvalidArgumentError(absl::StrCat(
          "row group: op index ", id, " is out of range (the graph has ", num_ops, " ops)"));
    }
    const OpInfo& op = graph.op(id);
    if (position.count(id) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("row group: ", OpLabel(op), " appears more than once"));
    }
    const std::vector<int64_t>& out_shape = graph.tensor(op.output).shape;

    // Rule 2: allowed ops.
    if (IsLastAxisOp(op.type)) {
      const std::vector<int64_t>& in_shape = graph.tensor(op.inputs[0]).shape;
      const int rank = static_cast<int>(in_shape.size());
      if (op.axis != rank - 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "row group: ", OpLabel(op),
            " breaks rule 2 (reductions, norms, softmax and concat "
            "must work over the last axis): axis is ",
            op.axis, ", the last axis of ", ShapeToString(in_shape), " is ", rank - 1));
      }
    } else if (!IsElementwise(op.type) && op.type != OpType::kMatmul) {
      return absl::InvalidArgumentError(absl::StrCat(
          "row group: ", OpLabel(op), " breaks rule 2 (op type not allowed in a row group)"));
    }

    // Rule 1: lead dims and row width (rule 5: per-row ops).
    std::vector<int64_t> lead;
    int64_t width = 1;
    const bool per_row = pos > 0 && IsElementwise(op.type) && out_shape == info.lead_dims;
    if (per_row) {
      lead = out_shape;
    } else if (IsReduction(op.type)) {
      const std::vector<int64_t>& in_shape = graph.tensor(op.inputs[0]).shape;
      if (!in_shape.empty()) lead.assign(in_shape.begin(), in_shape.end() - 1);
      width = 1;
    } else if (!out_shape.empty()) {
      lead.assign(out_shape.begin(), out_shape.end() - 1);
      width = out_shape.back();
    }
    if (pos == 0) {
      info.lead_dims = lead;
      info.num_rows = 1;
      for (int64_t d : lead) info.num_rows *= d;
    } else if (lead != info.lead_dims) {
      return absl::InvalidArgumentError(
          absl::StrCat("row group: ", OpLabel(op),
                       " breaks rule 1 (every op shares the group's lead dims): "
                       "its lead dims are ",
                       ShapeToString(lead), ", the group's are ", ShapeToString(info.lead_dims)));
    }

    // Rule 3: in-group operands.
    std::vector<bool> in_group(op.inputs.size(), false);
    for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
      const TensorInfo& operand = graph.tensor(op.inputs[slot]);
      const int producer = operand.producer;
      if (producer < 0) continue;
      bool produced_here = position.count(producer) != 0;
      if (!produced_here) {
        for (size_t later = pos + 1; later < op_ids.size(); ++later) {
          if (op_ids[later] == producer) {
            return absl::InvalidArgumentError(absl::StrCat(
                "row group: ", OpLabel(op), " reads '", operand.name,
                "', which is produced by a later op of the group (ops must be in topological "
                "order)"));
          }
        }
        continue;  // a kernel input (rule 4)
      }
      in_group[slot] = true;
      const std::vector<int64_t>& shape = operand.shape;
      if (per_row) {
        if (shape != info.lead_dims) {
          return absl::InvalidArgumentError(absl::StrCat(
              "row group: ", OpLabel(op),
              " breaks rule 5 (an in-group operand of a per-row op must have the lead dims' "
              "shape): '",
              operand.name, "' has shape ", ShapeToString(shape), ", lead dims are ",
              ShapeToString(info.lead_dims)));
        }
        continue;
      }
      const bool lead_ok = shape.size() == info.lead_dims.size() + 1 &&
                           std::equal(info.lead_dims.begin(), info.lead_dims.end(), shape.begin());
      if (op.type == OpType::kMatmul) {
        if (slot == 1) {
          return absl::InvalidArgumentError(
              absl::StrCat("row group: ", OpLabel(op),
                           " breaks rule 3 (a matmul's B operand must be read "
                           "from memory): B = '",
                           operand.name, "' is produced inside the group"));
        }
        if (!lead_ok) {
          return absl::InvalidArgumentError(
              absl::StrCat("row group: ", OpLabel(op),
                           " breaks rule 3 (an in-group matmul A must be "
                           "[lead..., K]): A = '",
                           operand.name, "' has shape ", ShapeToString(shape), ", lead dims are ",
                           ShapeToString(info.lead_dims)));
        }
        continue;
      }
      if (!lead_ok) {
        return absl::InvalidArgumentError(
            absl::StrCat("row group: ", OpLabel(op),
                         " breaks rule 3 (an in-group operand must be "
                         "[lead..., w]): '",
                         operand.name, "' has shape ", ShapeToString(shape), ", lead dims are ",
                         ShapeToString(info.lead_dims)));
      }
      // The row a reduction or concat reads is the operand itself; every other
      // op broadcasts its operands along its own row width.
      const bool own_width = IsReduction(op.type) || op.type == OpType::kConcat ||
                             op.type == OpType::kSlice ||
                             ((op.type == OpType::kRmsNorm || op.type == OpType::kLayerNorm ||
                               op.type == OpType::kSoftmax) &&
                              slot == 0);
      if (!own_width && shape.back() != width && shape.back() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "row group: ", OpLabel(op),
            " breaks rule 3 (an in-group operand's row width must "
            "equal the op's row width or be 1): '",
            operand.name, "' has width ", shape.back(), ", the op's row width is ", width));
      }
    }

    // Rule 5: a kernel input has one meaning in the group.
    for (size_t slot = 0; slot < op.inputs.size(); ++slot) {
      if (in_group[slot]) continue;
      const int t = op.inputs[slot];
      if (per_row) {
        per_row_readers.insert(t);
      } else {
        other_readers.insert(t);
      }
      if (per_row_readers.count(t) != 0 && other_readers.count(t) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "row group: ", OpLabel(op), " breaks rule 5 (a kernel input read by a per-row op ",
            "must not be read by other ops of the group): '", graph.tensor(t).name,
            "' is read by both"));
      }
    }

    position[id] = pos;
    info.row_width.push_back(width);
    info.in_group.push_back(std::move(in_group));
    info.per_row.push_back(per_row);
  }
  info.per_row_inputs.assign(per_row_readers.begin(), per_row_readers.end());
  return info;
}

std::vector<int64_t> RowSpaceShape(const Graph& graph, const RowGroupInfo& info, int t) {
  std::vector<int64_t> shape = graph.tensor(t).shape;
  if (std::binary_search(info.per_row_inputs.begin(), info.per_row_inputs.end(), t)) {
    shape.push_back(1);
  }
  return shape;
}

}  // namespace yirage::core
