#include "core/graph.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/op_table.h"

namespace yirage::core {
namespace {

using yirage::v1::AttrValue;
using yirage::v1::DType;

// This absl build's string_view is not std::string_view; StrCat needs its own.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string KnownOpList() {
  std::vector<absl::string_view> names;
  for (const OpSpec& spec : AllOpSpecs()) names.push_back(Sv(spec.name));
  return absl::StrJoin(names, ", ");
}

bool IsValidDType(int dtype) {
  return dtype == yirage::v1::FLOAT16 || dtype == yirage::v1::BFLOAT16 ||
         dtype == yirage::v1::FLOAT32;
}

// "input 'X' (inputs[0])".
std::string InputPrefix(int index, const std::string& name) {
  return absl::StrCat("input '", name, "' (inputs[", index, "])");
}

// "op 'Y' (ops[2], matmul)"; the type is omitted when it is not known yet.
std::string OpPrefix(int file_index, const std::string& name, std::string_view type = {}) {
  if (type.empty()) return absl::StrCat("op '", name, "' (ops[", file_index, "])");
  return absl::StrCat("op '", name, "' (ops[", file_index, "], ", Sv(type), ")");
}

void Formatter(std::string* out, std::string_view s) { out->append(s.data(), s.size()); }

std::string DescribeAttr(const AttrValue& value) {
  switch (value.value_case()) {
    case AttrValue::kF:
      return absl::StrCat("float ", value.f());
    case AttrValue::kI:
      return absl::StrCat("integer ", value.i());
    case AttrValue::kS:
      return absl::StrCat("string \"", value.s(), "\"");
    case AttrValue::kB:
      return absl::StrCat("bool ", value.b() ? "true" : "false");
    case AttrValue::VALUE_NOT_SET:
      break;
  }
  return "no value";
}

// The attributes an op type accepts (core/op_table.h).
std::vector<std::string_view> AllowedAttrs(OpType type) {
  std::vector<std::string_view> allowed;
  for (std::string_view attr : SpecOf(type).attrs) {
    if (!attr.empty()) allowed.push_back(attr);
  }
  return allowed;
}

// Typed access to one op's attributes; every error starts with `prefix`.
class AttrReader {
 public:
  AttrReader(const yirage::v1::OpNode& node, const std::string& prefix)
      : node_(node), prefix_(prefix) {}

  absl::Status CheckKnown(OpType type) const {
    std::vector<std::string_view> allowed = AllowedAttrs(type);
    std::vector<std::string> keys;
    for (const auto& [key, value] : node_.attrs()) keys.push_back(key);
    std::sort(keys.begin(), keys.end());  // map order is unspecified
    for (const std::string& key : keys) {
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      std::string accepted =
          allowed.empty() ? absl::StrCat(Sv(OpTypeName(type)), " accepts no attrs")
                          : absl::StrCat(Sv(OpTypeName(type)),
                                         " accepts: ", absl::StrJoin(allowed, ", ", Formatter));
      return absl::InvalidArgumentError(
          absl::StrCat(prefix_, ": unknown attr '", key, "' (", accepted, ")"));
    }
    return absl::OkStatus();
  }

  bool Has(const std::string& key) const { return node_.attrs().contains(key); }

  absl::Status GetInt(const std::string& key, int64_t* value) const {
    const AttrValue* attr = Find(key);
    if (attr == nullptr) return absl::OkStatus();
    if (attr->value_case() != AttrValue::kI) return TypeError(key, "an integer", *attr);
    *value = attr->i();
    return absl::OkStatus();
  }

  // Accepts integer values too.
  absl::Status GetFloat(const std::string& key, double* value) const {
    const AttrValue* attr = Find(key);
    if (attr == nullptr) return absl::OkStatus();
    if (attr->value_case() == AttrValue::kI) {
      *value = static_cast<double>(attr->i());
    } else if (attr->value_case() == AttrValue::kF) {
      *value = attr->f();
    } else {
      return TypeError(key, "a number", *attr);
    }
    if (!std::isfinite(*value)) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix_, ": attrs.", key, " must be finite (got ", *value, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status GetBool(const std::string& key, bool* value) const {
    const AttrValue* attr = Find(key);
    if (attr == nullptr) return absl::OkStatus();
    if (attr->value_case() != AttrValue::kB) return TypeError(key, "a bool", *attr);
    *value = attr->b();
    return absl::OkStatus();
  }

  absl::Status GetString(const std::string& key, std::string* value) const {
    const AttrValue* attr = Find(key);
    if (attr == nullptr) return absl::OkStatus();
    if (attr->value_case() != AttrValue::kS) return TypeError(key, "a string", *attr);
    *value = attr->s();
    return absl::OkStatus();
  }

 private:
  const AttrValue* Find(const std::string& key) const {
    auto it = node_.attrs().find(key);
    return it == node_.attrs().end() ? nullptr : &it->second;
  }

  absl::Status TypeError(const std::string& key, const char* expected, const AttrValue& got) const {
    return absl::InvalidArgumentError(absl::StrCat(prefix_, ": attrs.", key, " must be ", expected,
                                                   " (got ", DescribeAttr(got), ")"));
  }

  const yirage::v1::OpNode& node_;
  const std::string& prefix_;
};

// Context for inferring one op: its node, its error prefix and its operands.
struct OpContext {
  const yirage::v1::OpNode& node;
  const std::string& prefix;
  std::vector<const TensorInfo*> in;

  std::string Operand(int k) const { return absl::StrCat("inputs[", k, "] '", in[k]->name, "'"); }
  std::string OperandWithShape(int k) const {
    return absl::StrCat(Operand(k), " has shape ", ShapeToString(in[k]->shape));
  }
  absl::Status Error(const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat(prefix, ": ", message));
  }
};

// Reads attr `axis` (default `fallback`) and normalizes it against `rank`.
absl::Status ReadAxis(const OpContext& ctx, const AttrReader& attrs, int rank, bool required,
                      int64_t fallback, int* axis) {
  if (required && !attrs.Has("axis")) {
    return ctx.Error("attrs.axis is required (an integer)");
  }
  int64_t value = fallback;
  if (absl::Status s = attrs.GetInt("axis", &value); !s.ok()) return s;
  if (value < -rank || value >= rank) {
    return ctx.Error(absl::StrCat("attrs.axis is ", value, " but ", ctx.Operand(0), " has rank ",
                                  rank, " (shape ", ShapeToString(ctx.in[0]->shape),
                                  "); axis must be in [", -rank, ", ", rank - 1, "]"));
  }
  *axis = static_cast<int>(value < 0 ? value + rank : value);
  return absl::OkStatus();
}

absl::Status CheckInputCount(const OpContext& ctx, int min_count, int max_count) {
  const int n = static_cast<int>(ctx.in.size());
  if (n >= min_count && n <= max_count) return absl::OkStatus();
  std::string expected;
  if (min_count == max_count) {
    expected = absl::StrCat(min_count);
  } else if (max_count == kAnyInputs) {
    expected = absl::StrCat("at least ", min_count);
  } else {
    expected = absl::StrCat(min_count, " to ", max_count);
  }
  return ctx.Error(
      absl::StrCat("expects ", expected, " input", (max_count == 1 ? "" : "s"), ", got ", n));
}

absl::Status InferMatmul(const OpContext& ctx, const AttrReader& attrs, OpInfo* op,
                         std::vector<int64_t>* shape) {
  if (absl::Status s = attrs.GetBool("transpose_b", &op->transpose_b); !s.ok()) return s;
  for (int k = 0; k < 2; ++k) {
    if (ctx.in[k]->shape.size() < 2) {
      return ctx.Error(absl::StrCat(ctx.OperandWithShape(k), " of rank ", ctx.in[k]->shape.size(),
                                    "; matmul needs rank >= 2"));
    }
  }
  const std::vector<int64_t>& a = ctx.in[0]->shape;
  const std::vector<int64_t>& b = ctx.in[1]->shape;
  const int64_t m = a[a.size() - 2];
  const int64_t ka = a[a.size() - 1];
  const int64_t kb = op->transpose_b ? b[b.size() - 1] : b[b.size() - 2];
  const int64_t n = op->transpose_b ? b[b.size() - 2] : b[b.size() - 1];
  if (ka != kb) {
    return ctx.Error(absl::StrCat(ctx.OperandWithShape(1), " but ", ctx.OperandWithShape(0),
                                  ": the contracted dims differ (", ka, " vs ", kb, ")",
                                  op->transpose_b ? " (transpose_b: B is [..., N, K])" : ""));
  }
  std::vector<int64_t> batch_a(a.begin(), a.end() - 2);
  std::vector<int64_t> batch_b(b.begin(), b.end() - 2);
  absl::StatusOr<std::vector<int64_t>> batch = BroadcastShapes(batch_a, batch_b);
  if (!batch.ok()) {
    return ctx.Error(absl::StrCat(ctx.OperandWithShape(1), " but ", ctx.OperandWithShape(0),
                                  ": the batch dims do not broadcast: ", batch.status().message()));
  }
  *shape = *batch;
  shape->push_back(m);
  shape->push_back(n);
  return absl::OkStatus();
}

absl::Status InferBinary(const OpContext& ctx, const AttrReader& attrs, OpInfo* op,
                         std::vector<int64_t>* shape) {
  op->has_scalar = attrs.Has("scalar");
  const int n = static_cast<int>(ctx.in.size());
  if (op->has_scalar && n != 1) {
    return ctx.Error(
        absl::StrCat("attrs.scalar is only allowed with exactly 1 input, got ", n, " inputs"));
  }
  if (!op->has_scalar && n != 2) {
    return ctx.Error(absl::StrCat("expects 2 inputs (or 1 input and attrs.scalar), got ", n));
  }
  if (op->has_scalar) {
    if (absl::Status s = attrs.GetFloat("scalar", &op->scalar); !s.ok()) return s;
    *shape = ctx.in[0]->shape;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int64_t>> out = BroadcastShapes(ctx.in[0]->shape, ctx.in[1]->shape);
  if (!out.ok()) {
    return ctx.Error(absl::StrCat(ctx.OperandWithShape(0), " and ", ctx.OperandWithShape(1),
                                  ": they do not broadcast: ", out.status().message()));
  }
  *shape = *out;
  return absl::OkStatus();
}

absl::Status InferUnary(const OpContext& ctx, const AttrReader& attrs, OpInfo* op,
                        std::vector<int64_t>* shape) {
  if (op->type == OpType::kGelu) {
    std::string approximate = "none";
    if (absl::Status s = attrs.GetString("approximate", &approximate); !s.ok()) return s;
    if (approximate != "none" && approximate != "tanh") {
      return ctx.Error(absl::StrCat("attrs.approximate must be \"none\" or \"tanh\" (got \"",
                                    approximate, "\")"));
    }
    op->gelu_tanh = approximate == "tanh";
  }
  *shape = ctx.in[0]->shape;
  return absl::OkStatus();
}

absl::Status InferReduction(const OpContext& ctx, const AttrReader& attrs, OpInfo* op,
                            std::vector<int64_t>* shape) {
  const int rank = static_cast<int>(ctx.in[0]->shape.size());
  if (absl::Status s = ReadAxis(ctx, attrs, rank, false, -1, &op->axis); !s.ok()) return s;
  if (absl::Status s = attrs.GetBool("keepdim", &op->keepdim); !s.ok()) return s;
  *shape = ctx.in[0]->shape;
  if (op->keepdim) {
    (*shape)[op->axis] = 1;
  } else {
    if (rank == 1) {
      return ctx.Error(absl::StrCat("attrs.keepdim is false but ", ctx.OperandWithShape(0),
                                    ": the result would be a scalar (rank 0); ranks must be 1 to "
                                    "4, use keepdim true"));
    }
    shape->erase(shape->begin() + op->axis);
  }
  return absl::OkStatus();
}

absl::Status InferNorm(const OpContext& ctx, const AttrReader& attrs, OpInfo* op,
                       std::vector<int64_t>* shape) {
  const bool layer = op->type == OpType::kLayerNorm;
  const int rank = static_cast<int>(ctx.in[0]->shape.size());
  if (absl::Status s = ReadAxis(ctx, attrs, rank, false, -1, &op->axis); !s.ok()) return s;
  op->eps = layer ? 1e-5 : 1e-6;
  if (absl::Status s = attrs.GetFloat("eps", &op->eps); !s.ok()) return s;
  if (op->eps < 0) {
    return ctx.Error(absl::StrCat("attrs.eps must be >= 0 (got ", op->eps, ")"));
  }
  const std::vector<int64_t>& x = ctx.in[0]->shape;
  for (int k = 1; k < static_cast<int>(ctx.in.size()); ++k) {
    const std::string role = k == 1 ? "weight" : "bias";
    absl::StatusOr<std::vector<int64_t>> out = BroadcastShapes(x, ctx.in[k]->shape);
    if (!out.ok() || *out != x) {
      return ctx.Error(
          absl::StrCat(ctx.OperandWithShape(k), " (", role, ") but ", ctx.OperandWithShape(0),
                       ": the ", role, " must broadcast to ", ShapeToString(x), " exactly",
                       out.ok() ? absl::StrCat(" (broadcasting gives ", ShapeToString(*out), ")")
                                : absl::StrCat(" (", out.status().message(), ")")));
    }
  }
  *shape = x;
  return absl::OkStatus();
}

absl::Status InferSoftmax(const OpContext& ctx, const AttrReader& attrs, OpInfo* op,
                          std::vector<int64_t>* shape) {
  const int rank = static_cast<int>(ctx.in[0]->shape.size());
  if (absl::Status s = ReadAxis(ctx, attrs, rank, false, -1, &op->axis); !s.ok()) return s;
  *shape = ctx.in[0]->shape;
  return absl::OkStatus();
}

absl::Status InferConcat(const OpContext& ctx, const AttrReader& attrs, OpInfo* op,
                         std::vector<int64_t>* shape) {
  const std::vector<int64_t>& first = ctx.in[0]->shape;
  const int rank = static_cast<int>(first.size());
  if (absl::Status s = ReadAxis(ctx, attrs, rank, true, -1, &op->axis); !s.ok()) return s;
  *shape = first;
  for (int k = 1; k < static_cast<int>(ctx.in.size()); ++k) {
    const std::vector<int64_t>& other = ctx.in[k]->shape;
    if (static_cast<int>(other.size()) != rank) {
      return ctx.Error(absl::StrCat(ctx.OperandWithShape(k), " but ", ctx.OperandWithShape(0),
                                    ": concat inputs must have the same rank (", other.size(),
                                    " vs ", rank, ")"));
    }
    for (int d = 0; d < rank; ++d) {
      if (d == op->axis || other[d] == first[d]) continue;
      return ctx.Error(absl::StrCat(ctx.OperandWithShape(k), " but ", ctx.OperandWithShape(0),
                                    ": all dims except the concat axis ", op->axis,
                                    " must match (dim ", d, ": ", other[d], " vs ", first[d], ")"));
    }
    (*shape)[op->axis] += other[op->axis];
  }
  return absl::OkStatus();
}

absl::Status InferSlice(const OpContext& ctx, const AttrReader& attrs, OpInfo* op,
                        std::vector<int64_t>* shape) {
  const int rank = static_cast<int>(ctx.in[0]->shape.size());
  if (absl::Status s = ReadAxis(ctx, attrs, rank, true, -1, &op->axis); !s.ok()) return s;
  if (!attrs.Has("end")) return ctx.Error("attrs.end is required (an integer)");
  op->slice_start = 0;
  if (absl::Status s = attrs.GetInt("start", &op->slice_start); !s.ok()) return s;
  if (absl::Status s = attrs.GetInt("end", &op->slice_end); !s.ok()) return s;
  const int64_t dim = ctx.in[0]->shape[op->axis];
  if (op->slice_start < 0 || op->slice_end > dim || op->slice_start >= op->slice_end) {
    return ctx.Error(absl::StrCat("attrs.start ", op->slice_start, " and attrs.end ", op->slice_end,
                                  " must satisfy 0 <= start < end <= ", dim, " (dim ", op->axis,
                                  " of ", ctx.OperandWithShape(0), ")"));
  }
  *shape = ctx.in[0]->shape;
  (*shape)[op->axis] = op->slice_end - op->slice_start;
  return absl::OkStatus();
}

// Finds one cycle among the ops not emitted by the topological sort and
// describes it as "'A' (ops[0]) -> 'B' (ops[1]) -> 'A' (ops[0])", in data-flow
// order. `deps[j]` are the file indices of the ops op j reads from.
std::string DescribeCycle(const yirage::v1::Graph& proto, const std::vector<std::vector<int>>& deps,
                          const std::vector<bool>& emitted) {
  // Every unemitted op reads from at least one unemitted op, so walking
  // backwards along such edges must revisit an op.
  int start = 0;
  while (emitted[start]) ++start;
  std::vector<int> position(proto.ops_size(), -1);
  std::vector<int> path;
  int current = start;
  while (position[current] < 0) {
    position[current] = static_cast<int>(path.size());
    path.push_back(current);
    int next = -1;
    for (int d : deps[current]) {
      if (!emitted[d]) {
        next = d;
        break;
      }
    }
    current = next;
  }
  std::vector<int> cycle(path.begin() + position[current], path.end());
  std::reverse(cycle.begin(), cycle.end());  // producer before consumer
  // Start at the lowest file index so the text does not depend on the walk.
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  cycle.push_back(cycle.front());
  std::vector<std::string> parts;
  for (int j : cycle) parts.push_back(absl::StrCat("'", proto.ops(j).name(), "' (ops[", j, "])"));
  return absl::StrJoin(parts, " -> ");
}

}  // namespace

bool ParseOpType(std::string_view name, OpType* type) {
  const OpSpec* spec = FindOpSpec(name);
  if (spec == nullptr) return false;
  *type = spec->type;
  return true;
}

std::string_view OpTypeName(OpType type) { return SpecOf(type).name; }

bool IsUnaryElementwise(OpType type) { return SpecOf(type).kind == OpKind::kUnary; }

bool IsBinaryElementwise(OpType type) { return SpecOf(type).kind == OpKind::kBinary; }

bool IsElementwise(OpType type) { return IsUnaryElementwise(type) || IsBinaryElementwise(type); }

bool IsReduction(OpType type) { return SpecOf(type).kind == OpKind::kReduction; }

bool IsNormOrSoftmax(OpType type) {
  return SpecOf(type).kind == OpKind::kNorm || SpecOf(type).kind == OpKind::kSoftmax;
}

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                     const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {  // i counts dims from the right
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(absl::StrCat("shapes ", ShapeToString(a), " and ",
                                                     ShapeToString(b), " do not broadcast (", da,
                                                     " vs ", db, " at dim -", i + 1, ")"));
    }
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

std::optional<FoldedBatch> FoldSharedLeadDims(const std::vector<int64_t>& a_shape,
                                              const std::vector<int64_t>& b_shape) {
  if (a_shape.size() < 2 || b_shape.size() < 2 || b_shape.size() > a_shape.size()) {
    return std::nullopt;
  }
  const size_t lead = a_shape.size() - 2;
  std::vector<int64_t> lb(a_shape.size() - b_shape.size(), 1);
  lb.insert(lb.end(), b_shape.begin(), b_shape.end() - 2);
  size_t fold = lead;
  while (fold > 0 && lb[fold - 1] == 1) --fold;
  FoldedBatch f;
  f.m = a_shape[lead];
  for (size_t i = 0; i < lead; ++i) {
    if (i < fold && lb[i] != a_shape[i]) return std::nullopt;
    (i < fold ? f.batch : f.m) *= a_shape[i];
  }
  return f;
}

std::string ShapeToString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string_view DTypeName(yirage::v1::DType dtype) {
  switch (dtype) {
    case yirage::v1::FLOAT16:
      return "float16";
    case yirage::v1::BFLOAT16:
      return "bfloat16";
    case yirage::v1::FLOAT32:
      return "float32";
    default:
      return "unspecified";
  }
}

bool ParseDType(std::string_view name, yirage::v1::DType* dtype) {
  if (name == "float16") {
    *dtype = yirage::v1::FLOAT16;
  } else if (name == "bfloat16") {
    *dtype = yirage::v1::BFLOAT16;
  } else if (name == "float32") {
    *dtype = yirage::v1::FLOAT32;
  } else {
    return false;
  }
  return true;
}

int DTypeSize(yirage::v1::DType dtype) {
  switch (dtype) {
    case yirage::v1::FLOAT16:
    case yirage::v1::BFLOAT16:
      return 2;
    case yirage::v1::FLOAT32:
      return 4;
    default:
      return 0;
  }
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status CheckSameSignature(const Graph& reference, const Graph& other) {
  // The same memory layout: a dense row-major tensor is its elements in
  // order whatever its dims, so the same element count (a rewrite may drop
  // a size-1 tail or merge dims, core/rewrite.h squeeze_unit_dims and
  // merge_trailing_axes). That the elements mean the same is the
  // fingerprint's check, not this one.
  auto same = [&](const TensorInfo& a, const TensorInfo& b) {
    return a.name == b.name && NumElements(a.shape) == NumElements(b.shape) && a.dtype == b.dtype;
  };
  auto describe = [](const TensorInfo& t) {
    return absl::StrCat("'", t.name, "' ", ShapeToString(t.shape), " ", Sv(DTypeName(t.dtype)));
  };
  if (reference.num_inputs() != other.num_inputs()) {
    return absl::InvalidArgumentError(absl::StrCat("the graph has ", other.num_inputs(),
                                                   " inputs, expected ", reference.num_inputs()));
  }
  for (int i = 0; i < reference.num_inputs(); ++i) {
    if (!same(reference.tensor(i), other.tensor(i))) {
      return absl::InvalidArgumentError(absl::StrCat("inputs[", i, "] is ",
                                                     describe(other.tensor(i)), ", expected ",
                                                     describe(reference.tensor(i))));
    }
  }
  if (reference.outputs().size() != other.outputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("the graph has ", other.outputs().size(),
                                                   " outputs, expected ",
                                                   reference.outputs().size()));
  }
  for (size_t o = 0; o < reference.outputs().size(); ++o) {
    const TensorInfo& a = reference.tensor(reference.outputs()[o]);
    const TensorInfo& b = other.tensor(other.outputs()[o]);
    if (!same(a, b)) {
      return absl::InvalidArgumentError(
          absl::StrCat("outputs[", o, "] is ", describe(b), ", expected ", describe(a)));
    }
  }
  return absl::OkStatus();
}

int Graph::FindTensor(std::string_view name) const {
  for (int i = 0; i < num_tensors(); ++i) {
    if (tensors_[i].name == name) return i;
  }
  return -1;
}

int Graph::FindOp(std::string_view name) const {
  for (int i = 0; i < static_cast<int>(ops_.size()); ++i) {
    if (ops_[i].name == name) return i;
  }
  return -1;
}

absl::Status CheckName(std::string_view name, int max_length) {
  if (static_cast<int64_t>(name.size()) > max_length) {
    return absl::InvalidArgumentError(
        absl::StrCat("name is ", name.size(), " characters long; the limit is ", max_length));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    const bool word = std::isalnum(c) != 0 || c == '_';
    if (word || (i > 0 && (c == '.' || c == ':' || c == '/' || c == '-'))) continue;
    return absl::InvalidArgumentError(absl::StrCat(
        "name '", absl::CHexEscape(absl::string_view(name.data(), name.size())), "' has ",
        std::isprint(c) != 0 ? absl::StrCat("'", std::string(1, static_cast<char>(c)), "'")
                             : absl::StrCat("byte ", static_cast<int>(c)),
        " at position ", i,
        "; names are letters, digits and _ . : / - (starting with a letter, digit or _)"));
  }
  return absl::OkStatus();
}

namespace {

// Elements of `shape`, or nullopt past INT64_MAX.
std::optional<int64_t> CheckedElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}

// Adds the tensor's elements and bytes to *total_bytes, or says which limit
// it passes (`what` names the tensor).
absl::Status CountTensor(const std::string& what, const std::vector<int64_t>& shape,
                         yirage::v1::DType dtype, const GraphLimits& limits, int64_t* total_bytes) {
  const std::optional<int64_t> elements = CheckedElements(shape);
  if (!elements.has_value() || *elements > limits.max_tensor_elements) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": shape ", ShapeToString(shape), " has ",
                     elements.has_value() ? absl::StrCat(*elements) : std::string("more than 2^63"),
                     " elements; the limit is ", limits.max_tensor_elements, " a tensor"));
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(*elements, static_cast<int64_t>(DTypeSize(dtype)), &bytes) ||
      __builtin_add_overflow(*total_bytes, bytes, total_bytes) ||
      *total_bytes > limits.max_total_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what,
        ": with it the graph's tensors (inputs, intermediates and outputs at their dtypes) "
        "take more than ",
        limits.max_total_bytes, " bytes, the limit"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Graph> Graph::FromProto(const yirage::v1::Graph& original,
                                       const GraphLimits& limits) {
  if (original.ops_size() > limits.max_ops) {
    return absl::InvalidArgumentError(absl::StrCat("ops: the graph has ", original.ops_size(),
                                                   " ops; the limit is ", limits.max_ops));
  }
  if (!original.name().empty()) {
    if (absl::Status s = CheckName(original.name(), limits.max_name_length); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("graph name: ", s.message()));
    }
  }
  absl::StatusOr<yirage::v1::Graph> expanded = ExpandCompoundOps(original);
  if (!expanded.ok()) return expanded.status();
  const yirage::v1::Graph& proto = *expanded;
  const int num_inputs = proto.inputs_size();
  const int num_ops = proto.ops_size();
  if (num_ops > limits.max_ops) {
    return absl::InvalidArgumentError(
        absl::StrCat("ops: the graph has ", num_ops,
                     " ops once its compound ops expand; the limit is ", limits.max_ops));
  }
  int64_t total_bytes = 0;

  // 1. Names (inputs and ops share one namespace) and graph input specs.
  // Value: i for inputs[i], num_inputs + j for ops[j].
  std::map<std::string, int, std::less<>> slots;
  auto describe_slot = [&](int slot) {
    return slot < num_inputs ? absl::StrCat("inputs[", slot, "]")
                             : absl::StrCat("ops[", slot - num_inputs, "]");
  };
  for (int i = 0; i < num_inputs; ++i) {
    const yirage::v1::TensorSpec& spec = proto.inputs(i);
    if (spec.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("inputs[", i, "]: name is empty"));
    }
    const std::string prefix = InputPrefix(i, spec.name());
    if (absl::Status s = CheckName(spec.name(), limits.max_name_length); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("inputs[", i, "]: ", s.message()));
    }
    if (auto [it, inserted] = slots.emplace(spec.name(), i); !inserted) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, ": name '", spec.name(), "' is already used by ", describe_slot(it->second)));
    }
    if (!IsValidDType(spec.dtype())) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, ": dtype must be float16, bfloat16 or float32 (got enum value ",
                       static_cast<int>(spec.dtype()), ")"));
    }
    if (spec.shape_size() < 1 || spec.shape_size() > 4) {
      return absl::InvalidArgumentError(absl::StrCat(
          prefix, ": shape ", ShapeToString({spec.shape().begin(), spec.shape().end()}),
          " has rank ", spec.shape_size(), "; rank must be 1 to 4"));
    }
    for (int d = 0; d < spec.shape_size(); ++d) {
      if (spec.shape(d) < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            prefix, ": shape[", d, "] is ", spec.shape(d), " in shape ",
            ShapeToString({spec.shape().begin(), spec.shape().end()}), "; dims must be >= 1"));
      }
    }
    if (absl::Status s = CountTensor(prefix, {spec.shape().begin(), spec.shape().end()},
                                     spec.dtype(), limits, &total_bytes);
        !s.ok()) {
      return s;
    }
  }
  for (int j = 0; j < num_ops; ++j) {
    const yirage::v1::OpNode& node = proto.ops(j);
    if (node.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("ops[", j, "]: name is empty"));
    }
    if (absl::Status s = CheckName(node.name(), limits.max_name_length); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("ops[", j, "]: ", s.message()));
    }
    if (auto [it, inserted] = slots.emplace(node.name(), num_inputs + j); !inserted) {
      return absl::InvalidArgumentError(absl::StrCat(OpPrefix(j, node.name()), ": name '",
                                                     node.name(), "' is already used by ",
                                                     describe_slot(it->second)));
    }
  }

  // 2. Op types and input references.
  std::vector<OpType> types(num_ops);
  std::vector<std::vector<int>> deps(num_ops);   // producer op file indices
  std::vector<std::vector<int>> users(num_ops);  // consumer op file indices
  for (int j = 0; j < num_ops; ++j) {
    const yirage::v1::OpNode& node = proto.ops(j);
    if (!ParseOpType(node.op(), &types[j])) {
      return absl::InvalidArgumentError(absl::StrCat(OpPrefix(j, node.name()), ": unknown op '",
                                                     node.op(), "'; known ops: ", KnownOpList()));
    }
    const std::string prefix = OpPrefix(j, node.name(), node.op());
    if (node.inputs_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(prefix, ": inputs is empty"));
    }
    for (int k = 0; k < node.inputs_size(); ++k) {
      const std::string& input = node.inputs(k);
      auto it = slots.find(input);
      if (it == slots.end()) {
        return absl::InvalidArgumentError(
            input.empty() ? absl::StrCat(prefix, ": inputs[", k, "] is an empty name")
                          : absl::StrCat(prefix, ": inputs[", k, "] '", input,
                                         "' is not a graph input or op name"));
      }
      if (it->second >= num_inputs) {
        const int producer = it->second - num_inputs;
        if (std::find(deps[j].begin(), deps[j].end(), producer) == deps[j].end()) {
          deps[j].push_back(producer);
          users[producer].push_back(j);
        }
      }
    }
  }

  // 3. Stable topological sort (Kahn, lowest file index first among ready ops).
  std::vector<int> pending(num_ops);
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int j = 0; j < num_ops; ++j) {
    pending[j] = static_cast<int>(deps[j].size());
    if (pending[j] == 0) ready.push(j);
  }
  std::vector<int> order;  // file indices in topological order
  std::vector<bool> emitted(num_ops, false);
  while (!ready.empty()) {
    const int j = ready.top();
    ready.pop();
    order.push_back(j);
    emitted[j] = true;
    for (int user : users[j]) {
      if (--pending[user] == 0) ready.push(user);
    }
  }
  if (static_cast<int>(order.size()) != num_ops) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ops form a cycle: ", DescribeCycle(proto, deps, emitted)));
  }

  // 4. Build the IR in topological order, inferring shapes and dtypes.
  Graph graph;
  graph.proto_.set_name(proto.name());
  *graph.proto_.mutable_inputs() = proto.inputs();
  *graph.proto_.mutable_outputs() = proto.outputs();
  *graph.proto_.mutable_tolerance() = proto.tolerance();
  *graph.proto_.mutable_unread_inputs() = proto.unread_inputs();
  graph.num_inputs_ = num_inputs;
  for (int i = 0; i < num_inputs; ++i) {
    TensorInfo info;
    info.name = proto.inputs(i).name();
    info.shape.assign(proto.inputs(i).shape().begin(), proto.inputs(i).shape().end());
    info.dtype = proto.inputs(i).dtype();
    graph.tensors_.push_back(std::move(info));
  }
  std::vector<int> topo_index(num_ops);
  for (int t = 0; t < num_ops; ++t) topo_index[order[t]] = t;
  auto tensor_id = [&](const std::string& name) {
    const int slot = slots.find(name)->second;
    return slot < num_inputs ? slot : num_inputs + topo_index[slot - num_inputs];
  };
  for (int t = 0; t < num_ops; ++t) {
    const int j = order[t];
    const yirage::v1::OpNode& node = proto.ops(j);
    *graph.proto_.add_ops() = node;
    const std::string prefix = OpPrefix(j, node.name(), node.op());
    OpInfo op;
    op.name = node.name();
    op.type = types[j];
    op.output = num_inputs + t;
    OpContext ctx{node, prefix, {}};
    for (const std::string& input : node.inputs()) {
      op.inputs.push_back(tensor_id(input));
      ctx.in.push_back(&graph.tensors_[op.inputs.back()]);
    }
    for (int k = 1; k < static_cast<int>(ctx.in.size()); ++k) {
      if (ctx.in[k]->dtype != ctx.in[0]->dtype) {
        return ctx.Error(absl::StrCat(ctx.Operand(k), " has dtype ",
                                      Sv(DTypeName(ctx.in[k]->dtype)), " but ", ctx.Operand(0),
                                      " has dtype ", Sv(DTypeName(ctx.in[0]->dtype)),
                                      "; all inputs of an op must have the same dtype"));
      }
    }
    AttrReader attrs(node, prefix);
    if (absl::Status s = attrs.CheckKnown(op.type); !s.ok()) return s;
    std::vector<int64_t> shape;
    absl::Status status;
    const OpSpec& spec = SpecOf(op.type);
    // Binary ops count their inputs with attrs.scalar (InferBinary).
    if (spec.kind != OpKind::kBinary) {
      if (absl::Status s = CheckInputCount(ctx, spec.min_inputs, spec.max_inputs); !s.ok()) {
        return s;
      }
    }
    switch (spec.kind) {  // the kind's shape rule
      case OpKind::kMatmul:
        status = InferMatmul(ctx, attrs, &op, &shape);
        break;
      case OpKind::kBinary:
        status = InferBinary(ctx, attrs, &op, &shape);
        break;
      case OpKind::kUnary:
        status = InferUnary(ctx, attrs, &op, &shape);
        break;
      case OpKind::kReduction:
        status = InferReduction(ctx, attrs, &op, &shape);
        break;
      case OpKind::kNorm:
        status = InferNorm(ctx, attrs, &op, &shape);
        break;
      case OpKind::kSoftmax:
        status = InferSoftmax(ctx, attrs, &op, &shape);
        break;
      case OpKind::kSlice:
        status = InferSlice(ctx, attrs, &op, &shape);
        break;
      case OpKind::kConcat:
        status = InferConcat(ctx, attrs, &op, &shape);
        break;
    }
    if (!status.ok()) return status;
    if (absl::Status s = CountTensor(prefix, shape, ctx.in[0]->dtype, limits, &total_bytes);
        !s.ok()) {
      return s;
    }

    TensorInfo info;
    info.name = node.name();
    info.shape = std::move(shape);
    info.dtype = ctx.in[0]->dtype;
    info.producer = t;
    for (int input : op.inputs) {
      std::vector<int>& consumers = graph.tensors_[input].consumers;
      if (consumers.empty() || consumers.back() != t) consumers.push_back(t);
    }
    graph.tensors_.push_back(std::move(info));  // invalidates ctx.in
    graph.ops_.push_back(std::move(op));
  }

  // 5. Outputs.
  if (proto.outputs_size() == 0) {
    return absl::InvalidArgumentError("outputs: the graph has no outputs; list at least one op");
  }
  for (int o = 0; o < proto.outputs_size(); ++o) {
    const std::string& name = proto.outputs(o);
    auto it = slots.find(name);
    if (it == slots.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("outputs[", o, "] '", name, "' is not an op name (no op produces it)"));
    }
    if (it->second < num_inputs) {
      return absl::InvalidArgumentError(absl::StrCat("outputs[", o, "] '", name,
                                                     "' is a graph input; outputs must be op "
                                                     "results"));
    }
    const int id = tensor_id(name);
    if (graph.tensors_[id].is_graph_output) {
      const int first = static_cast<int>(
          std::find(graph.outputs_.begin(), graph.outputs_.end(), id) - graph.outputs_.begin());
      return absl::InvalidArgumentError(absl::StrCat(
          "outputs[", o, "] '", name, "' is listed twice (also outputs[", first, "])"));
    }
    graph.tensors_[id].is_graph_output = true;
    graph.outputs_.push_back(id);
  }

  // 6. Everything must be used, but the inputs a rewrite left unread.
  for (int u = 0; u < proto.unread_inputs_size(); ++u) {
    const std::string& name = proto.unread_inputs(u);
    const int id = graph.FindTensor(name);
    if (id < 0 || id >= num_inputs) {
      return absl::InvalidArgumentError(
          absl::StrCat("unread_inputs[", u, "] '", name, "' is not an input of the graph"));
    }
  }
  for (int i = 0; i < num_inputs; ++i) {
    const bool may_go_unread = std::find(proto.unread_inputs().begin(), proto.unread_inputs().end(),
                                         proto.inputs(i).name()) != proto.unread_inputs().end();
    if (graph.tensors_[i].consumers.empty() && !may_go_unread) {
      return absl::InvalidArgumentError(
          absl::StrCat(InputPrefix(i, proto.inputs(i).name()), ": never used (no op reads it)"));
    }
  }
  for (int j = 0; j < num_ops; ++j) {
    const TensorInfo& info = graph.tensors_[num_inputs + topo_index[j]];
    if (info.consumers.empty() && !info.is_graph_output) {
      return absl::InvalidArgumentError(
          absl::StrCat(OpPrefix(j, proto.ops(j).name(), proto.ops(j).op()),
                       ": its result is never used (it is neither a graph output nor an input "
                       "of another op)"));
    }
  }

  // 7. Tolerance.
  const double rtol = proto.tolerance().rtol();
  const double atol = proto.tolerance().atol();
  if (!std::isfinite(rtol) || rtol < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tolerance.rtol must be finite and >= 0 (got ", rtol, ")"));
  }
  if (!std::isfinite(atol) || atol < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tolerance.atol must be finite and >= 0 (got ", atol, ")"));
  }
  return graph;
}

}  // namespace yirage::core
