#include "core/rewrite.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/parallel_for.h"

namespace yirage::core {
namespace rewrite_util {

yirage::v1::OpNode MakeOp(const std::string& name, const std::string& op,
                          const std::vector<std::string>& inputs) {
  yirage::v1::OpNode n;
  n.set_name(name);
  n.set_op(op);
  for (const std::string& s : inputs) n.add_inputs(s);
  return n;
}
void SetInt(yirage::v1::OpNode* op, const std::string& key, int64_t v) {
  (*op->mutable_attrs())[key].set_i(v);
}
void SetFloat(yirage::v1::OpNode* op, const std::string& key, double v) {
  (*op->mutable_attrs())[key].set_f(v);
}
void SetBool(yirage::v1::OpNode* op, const std::string& key, bool v) {
  (*op->mutable_attrs())[key].set_b(v);
}

std::string FreshName(const Graph& graph, const std::string& base,
                      std::vector<std::string>* taken) {
  auto used = [&](const std::string& n) {
    return graph.FindTensor(n) >= 0 || std::find(taken->begin(), taken->end(), n) != taken->end();
  };
  std::string name = base;
  for (int i = 1; used(name); ++i) name = absl::StrCat(base, "_", i);
  taken->push_back(name);
  return name;
}

yirage::v1::Graph ReplaceOps(const Graph& graph, const std::vector<int>& op_indices,
                             const std::vector<yirage::v1::OpNode>& replacement) {
  const yirage::v1::Graph& src = graph.proto();
  yirage::v1::Graph out = src;
  out.clear_ops();
  const int first = *std::min_element(op_indices.begin(), op_indices.end());
  std::vector<yirage::v1::OpNode> ops;
  for (int j = 0; j < src.ops_size(); ++j) {
    if (j == first) ops.insert(ops.end(), replacement.begin(), replacement.end());
    if (std::find(op_indices.begin(), op_indices.end(), j) != op_indices.end()) continue;
    ops.push_back(src.ops(j));
  }
  // Dead code elimination: drop ops whose results nothing reads.
  bool changed = true;
  while (changed) {
    changed = false;
    std::set<std::string> read(src.outputs().begin(), src.outputs().end());
    for (const auto& op : ops) read.insert(op.inputs().begin(), op.inputs().end());
    std::vector<yirage::v1::OpNode> kept;
    for (auto& op : ops) {
      if (read.contains(op.name())) {
        kept.push_back(std::move(op));
      } else {
        changed = true;
      }
    }
    ops = std::move(kept);
  }
  for (auto& op : ops) *out.add_ops() = std::move(op);
  // Inputs that no op reads any more (the outputs proved not to depend on
  // them) are listed, so that the graph still validates.
  std::set<std::string> read(out.outputs().begin(), out.outputs().end());
  for (const auto& op : out.ops()) read.insert(op.inputs().begin(), op.inputs().end());
  for (const yirage::v1::TensorSpec& in : src.inputs()) {
    if (!read.contains(in.name()) &&
        std::find(out.unread_inputs().begin(), out.unread_inputs().end(), in.name()) ==
            out.unread_inputs().end()) {
      out.add_unread_inputs(in.name());
    }
  }
  return out;
}

}  // namespace rewrite_util

namespace {

using namespace rewrite_util;  // NOLINT: the rules below are written in its terms
using yirage::v1::OpNode;
using Protos = std::vector<yirage::v1::Graph>;

const std::string& TName(const Graph& g, int t) { return g.tensor(t).name; }

// The op producing tensor t when t is an op result read only by one op and not
// a graph output; -1 otherwise.
int SingleUseProducer(const Graph& g, int t) {
  const TensorInfo& info = g.tensor(t);
  if (info.producer < 0 || info.is_graph_output || info.consumers.size() != 1) return -1;
  return info.producer;
}

// A copy of op j's node with a new name and inputs (attrs kept).
OpNode Retarget(const Graph& g, int j, const std::string& name,
                const std::vector<std::string>& inputs) {
  OpNode n = g.proto().ops(j);
  n.set_name(name);
  n.clear_inputs();
  for (const std::string& s : inputs) n.add_inputs(s);
  return n;
}

// ---- expansions ----

Protos ExpandRmsNorm(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& op = g.op(j);
    if (op.type != OpType::kRmsNorm) continue;
    std::vector<std::string> taken;
    const std::string x = TName(g, op.inputs[0]);
    const std::string sq = FreshName(g, op.name + "_sq", &taken);
    const std::string ms = FreshName(g, op.name + "_ms", &taken);
    const std::string me = FreshName(g, op.name + "_mse", &taken);
    const std::string r = FreshName(g, op.name + "_rs", &taken);
    std::vector<OpNode> rep = {MakeOp(sq, "square", {x}), MakeOp(ms, "reduce_mean", {sq}),
                               MakeOp(me, "add", {ms}), MakeOp(r, "rsqrt", {me})};
    SetInt(&rep[1], "axis", op.axis);
    SetFloat(&rep[2], "scalar", op.eps);
    if (op.inputs.size() > 1) {
      const std::string xn = FreshName(g, op.name + "_xn", &taken);
      rep.push_back(MakeOp(xn, "mul", {x, r}));
      rep.push_back(MakeOp(op.name, "mul", {xn, TName(g, op.inputs[1])}));
    } else {
      rep.push_back(MakeOp(op.name, "mul", {x, r}));
    }
    out.push_back(ReplaceOps(g, {j}, rep));
  }
  return out;
}

Protos ExpandLayerNorm(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& op = g.op(j);
    if (op.type != OpType::kLayerNorm) continue;
    std::vector<std::string> taken;
    const std::string x = TName(g, op.inputs[0]);
    const std::string mu = FreshName(g, op.name + "_mean", &taken);
    const std::string d = FreshName(g, op.name + "_d", &taken);
    const std::string d2 = FreshName(g, op.name + "_d2", &taken);
    const std::string v = FreshName(g, op.name + "_var", &taken);
    const std::string ve = FreshName(g, op.name + "_vare", &taken);
    const std::string r = FreshName(g, op.name + "_rs", &taken);
    std::vector<OpNode> rep = {MakeOp(mu, "reduce_mean", {x}), MakeOp(d, "sub", {x, mu}),
                               MakeOp(d2, "square", {d}),      MakeOp(v, "reduce_mean", {d2}),
                               MakeOp(ve, "add", {v}),         MakeOp(r, "rsqrt", {ve})};
    SetInt(&rep[0], "axis", op.axis);
    SetInt(&rep[3], "axis", op.axis);
    SetFloat(&rep[4], "scalar", op.eps);
    std::string last = d;
    std::vector<std::string> factors = {r};
    if (op.inputs.size() > 1) factors.push_back(TName(g, op.inputs[1]));
    for (size_t f = 0; f < factors.size(); ++f) {
      const bool final_op = f + 1 == factors.size() && op.inputs.size() < 3;
      const std::string name = final_op ? op.name : FreshName(g, op.name + "_y", &taken);
      rep.push_back(MakeOp(name, "mul", {last, factors[f]}));
      last = name;
    }
    if (op.inputs.size() > 2) rep.push_back(MakeOp(op.name, "add", {last, TName(g, op.inputs[2])}));
    out.push_back(ReplaceOps(g, {j}, rep));
  }
  return out;
}

Protos ExpandSoftmax(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& op = g.op(j);
    if (op.type != OpType::kSoftmax) continue;
    std::vector<std::string> taken;
    const std::string s = TName(g, op.inputs[0]);
    const std::string m = FreshName(g, op.name + "_max", &taken);
    const std::string z = FreshName(g, op.name + "_z", &taken);
    const std::string e = FreshName(g, op.name + "_exp", &taken);
    const std::string sum = FreshName(g, op.name + "_sum", &taken);
    std::vector<OpNode> rep = {MakeOp(m, "reduce_max", {s}), MakeOp(z, "sub", {s, m}),
                               MakeOp(e, "exp", {z}), MakeOp(sum, "reduce_sum", {e}),
                               MakeOp(op.name, "div", {e, sum})};
    SetInt(&rep[0], "axis", op.axis);
    SetInt(&rep[3], "axis", op.axis);
    out.push_back(ReplaceOps(g, {j}, rep));
  }
  return out;
}

// ---- elementwise chains ----

bool IsMulDiv(OpType t) { return t == OpType::kMul || t == OpType::kDiv; }

// Second operand of a mul/div op: a tensor name, or the scalar attr.
struct Operand {
  bool scalar = false;
  double value = 0;
  std::string name;
};
Operand SecondOperand(const Graph& g, const OpInfo& op) {
  if (op.has_scalar) return {true, op.scalar, ""};
  return {false, 0, TName(g, op.inputs[1])};
}
OpNode MulDiv(const std::string& name, OpType type, const std::string& a, const Operand& b) {
  OpNode n = MakeOp(name, type == OpType::kMul ? "mul" : "div", {a});
  if (b.scalar) {
    SetFloat(&n, "scalar", b.value);
  } else {
    n.add_inputs(b.name);
  }
  return n;
}

Protos ReorderMulChain(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& outer = g.op(j);
    if (!IsMulDiv(outer.type)) continue;
    // The inner op is the first operand (and, for mul, also the second).
    for (int slot = 0; slot < (outer.type == OpType::kMul && !outer.has_scalar ? 2 : 1); ++slot) {
      const int i = SingleUseProducer(g, outer.inputs[slot]);
      if (i < 0 || !IsMulDiv(g.op(i).type)) continue;
      const OpInfo& inner = g.op(i);
      Operand c =
          slot == 0 ? SecondOperand(g, outer) : Operand{false, 0, TName(g, outer.inputs[0])};
      const Operand b = SecondOperand(g, inner);
      if (!c.scalar && !b.scalar && c.name == b.name) continue;  // a no-op swap
      std::vector<std::string> taken;
      const std::string t = FreshName(g, inner.name + "_r", &taken);
      out.push_back(ReplaceOps(g, {i, j},
                               {MulDiv(t, outer.type, TName(g, inner.inputs[0]), c),
                                MulDiv(outer.name, inner.type, t, b)}));
    }
  }
  return out;
}

// ---- matmul rewrites ----

Protos ScaleThroughMatmul(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& mm = g.op(j);
    if (mm.type != OpType::kMatmul) continue;
    std::vector<std::string> taken;
    // A side: (A * r) @ B, r scalar or [..., M, 1].
    if (int s = SingleUseProducer(g, mm.inputs[0]); s >= 0 && IsMulDiv(g.op(s).type)) {
      const OpInfo& sc = g.op(s);
      const std::vector<int64_t>& a_shape = g.tensor(mm.inputs[0]).shape;
      for (int slot = 0; slot < (sc.has_scalar ? 1 : 2); ++slot) {
        if (slot == 1 && sc.type == OpType::kDiv) break;
        const int x = sc.inputs[slot];
        if (g.tensor(x).shape != a_shape) continue;
        Operand r =
            sc.has_scalar ? SecondOperand(g, sc) : Operand{false, 0, TName(g, sc.inputs[1 - slot])};
        if (!r.scalar) {
          const std::vector<int64_t>& rs = g.tensor(sc.inputs[1 - slot]).shape;
          if (rs.back() != 1 || rs.size() > g.tensor(mm.output).shape.size()) continue;
        }
        const std::string t = FreshName(g, mm.name + "_mm", &taken);
        out.push_back(ReplaceOps(g, {s, j},
                                 {Retarget(g, j, t, {TName(g, x), TName(g, mm.inputs[1])}),
                                  MulDiv(mm.name, sc.type, t, r)}));
      }
    }
    // B side: A @ (B * c), c scalar or a per-column [N] / [1, N].
    if (int s = SingleUseProducer(g, mm.inputs[1]);
        s >= 0 && !mm.transpose_b && IsMulDiv(g.op(s).type)) {
      const OpInfo& sc = g.op(s);
      const std::vector<int64_t>& b_shape = g.tensor(mm.inputs[1]).shape;
      for (int slot = 0; slot < (sc.has_scalar ? 1 : 2); ++slot) {
        if (slot == 1 && sc.type == OpType::kDiv) break;
        const int x = sc.inputs[slot];
        if (g.tensor(x).shape != b_shape) continue;
        Operand c =
            sc.has_scalar ? SecondOperand(g, sc) : Operand{false, 0, TName(g, sc.inputs[1 - slot])};
        if (!c.scalar) {
          const std::vector<int64_t>& cs = g.tensor(sc.inputs[1 - slot]).shape;
          if (cs.size() > 2 || (cs.size() == 2 && cs[0] != 1)) continue;
        }
        const std::string t = FreshName(g, mm.name + "_mm", &taken);
        out.push_back(ReplaceOps(g, {s, j},
                                 {Retarget(g, j, t, {TName(g, mm.inputs[0]), TName(g, x)}),
                                  MulDiv(mm.name, sc.type, t, c)}));
      }
    }
  }
  return out;
}

Protos SharedOperandMatmul(const Graph& g) {
  Protos out;
  const int n = static_cast<int>(g.ops().size());
  for (int j1 = 0; j1 < n; ++j1) {
    const OpInfo& m1 = g.op(j1);
    if (m1.type != OpType::kMatmul || m1.transpose_b) continue;
    for (int j2 = j1 + 1; j2 < n; ++j2) {
      const OpInfo& m2 = g.op(j2);
      if (m2.type != OpType::kMatmul || m2.transpose_b || m2.inputs[0] != m1.inputs[0]) continue;
      const std::vector<int64_t>& b1 = g.tensor(m1.inputs[1]).shape;
      const std::vector<int64_t>& b2 = g.tensor(m2.inputs[1]).shape;
      if (b1.size() != 2 || b2.size() != 2 || b1[0] != b2[0]) continue;
      // m2 must not depend on m1 (its B operand is produced before either).
      const int p2 = g.tensor(m2.inputs[1]).producer;
      if (p2 >= j1) continue;
      std::vector<std::string> taken;
      const std::string cat = FreshName(g, m1.name + "_" + m2.name + "_w", &taken);
      const std::string z = FreshName(g, m1.name + "_" + m2.name, &taken);
      const int axis = static_cast<int>(g.tensor(m1.output).shape.size()) - 1;
      OpNode c = MakeOp(cat, "concat", {TName(g, m1.inputs[1]), TName(g, m2.inputs[1])});
      SetInt(&c, "axis", 1);
      OpNode s1 = MakeOp(m1.name, "slice", {z});
      SetInt(&s1, "axis", axis);
      SetInt(&s1, "start", 0);
      SetInt(&s1, "end", b1[1]);
      OpNode s2 = MakeOp(m2.name, "slice", {z});
      SetInt(&s2, "axis", axis);
      SetInt(&s2, "start", b1[1]);
      SetInt(&s2, "end", b1[1] + b2[1]);
      out.push_back(
          ReplaceOps(g, {j1, j2}, {c, MakeOp(z, "matmul", {TName(g, m1.inputs[0]), cat}), s1, s2}));
    }
  }
  return out;
}

double MatmulFlops(int64_t m, int64_t k, int64_t n) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n);
}

Protos AssociateMatmul(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& outer = g.op(j);
    if (outer.type != OpType::kMatmul || outer.transpose_b) continue;
    std::vector<std::string> taken;
    // (X @ A) @ B -> X @ (A @ B)
    if (int i = SingleUseProducer(g, outer.inputs[0]);
        i >= 0 && g.op(i).type == OpType::kMatmul && !g.op(i).transpose_b) {
      const OpInfo& inner = g.op(i);
      const std::vector<int64_t>& x = g.tensor(inner.inputs[0]).shape;
      const std::vector<int64_t>& a = g.tensor(inner.inputs[1]).shape;
      const std::vector<int64_t>& b = g.tensor(outer.inputs[1]).shape;
      if (a.size() == 2 && b.size() == 2) {
        int64_t rows = 1;
        for (size_t d = 0; d + 1 < x.size(); ++d) rows *= x[d];
        const double before = MatmulFlops(rows, a[0], a[1]) + MatmulFlops(rows, a[1], b[1]);
        const double after = MatmulFlops(a[0], a[1], b[1]) + MatmulFlops(rows, a[0], b[1]);
        if (after < before) {
          const std::string ab = FreshName(g, inner.name + "_assoc", &taken);
          out.push_back(ReplaceOps(
              g, {i, j},
              {MakeOp(ab, "matmul", {TName(g, inner.inputs[1]), TName(g, outer.inputs[1])}),
               MakeOp(outer.name, "matmul", {TName(g, inner.inputs[0]), ab})}));
        }
      }
    }
    // X @ (A @ B) -> (X @ A) @ B
    if (int i = SingleUseProducer(g, outer.inputs[1]);
        i >= 0 && g.op(i).type == OpType::kMatmul && !g.op(i).transpose_b) {
      const OpInfo& inner = g.op(i);
      const std::vector<int64_t>& x = g.tensor(outer.inputs[0]).shape;
      const std::vector<int64_t>& a = g.tensor(inner.inputs[0]).shape;
      const std::vector<int64_t>& b = g.tensor(inner.inputs[1]).shape;
      if (a.size() == 2 && b.size() == 2) {
        int64_t rows = 1;
        for (size_t d = 0; d + 1 < x.size(); ++d) rows *= x[d];
        const double before = MatmulFlops(a[0], a[1], b[1]) + MatmulFlops(rows, a[0], b[1]);
        const double after = MatmulFlops(rows, a[0], a[1]) + MatmulFlops(rows, a[1], b[1]);
        if (after < before) {
          const std::string xa = FreshName(g, outer.name + "_xa", &taken);
          out.push_back(ReplaceOps(
              g, {i, j},
              {MakeOp(xa, "matmul", {TName(g, outer.inputs[0]), TName(g, inner.inputs[0])}),
               MakeOp(outer.name, "matmul", {xa, TName(g, inner.inputs[1])})}));
        }
      }
    }
  }
  return out;
}

Protos FactorMatmulAdd(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& op = g.op(j);
    if ((op.type != OpType::kAdd && op.type != OpType::kSub) || op.has_scalar) continue;
    const int i1 = SingleUseProducer(g, op.inputs[0]);
    const int i2 = SingleUseProducer(g, op.inputs[1]);
    if (i1 < 0 || i2 < 0 || i1 == i2) continue;
    const OpInfo& m1 = g.op(i1);
    const OpInfo& m2 = g.op(i2);
    if (m1.type != OpType::kMatmul || m2.type != OpType::kMatmul) continue;
    if (m1.inputs[0] != m2.inputs[0] || m1.transpose_b != m2.transpose_b) continue;
    if (g.tensor(m1.inputs[1]).shape != g.tensor(m2.inputs[1]).shape) continue;
    if (g.tensor(m1.output).shape != g.tensor(op.output).shape) continue;
    std::vector<std::string> taken;
    const std::string w = FreshName(g, op.name + "_w", &taken);
    out.push_back(ReplaceOps(g, {i1, i2, j},
                             {MakeOp(w, std::string(OpTypeName(op.type)),
                                     {TName(g, m1.inputs[1]), TName(g, m2.inputs[1])}),
                              Retarget(g, i1, op.name, {TName(g, m1.inputs[0]), w})}));
  }
  return out;
}

Protos OnePassVariance(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& v = g.op(j);
    if (v.type != OpType::kReduceMean || !v.keepdim) continue;
    const int sq = g.tensor(v.inputs[0]).producer;
    if (sq < 0 || g.op(sq).type != OpType::kSquare) continue;
    const int d = g.tensor(g.op(sq).inputs[0]).producer;
    if (d < 0 || g.op(d).type != OpType::kSub || g.op(d).has_scalar) continue;
    const int mu = g.tensor(g.op(d).inputs[1]).producer;
    if (mu < 0 || g.op(mu).type != OpType::kReduceMean || !g.op(mu).keepdim ||
        g.op(mu).axis != v.axis || g.op(mu).inputs[0] != g.op(d).inputs[0]) {
      continue;
    }
    std::vector<std::string> taken;
    const std::string x = TName(g, g.op(d).inputs[0]);
    const std::string x2 = FreshName(g, v.name + "_x2", &taken);
    const std::string ex2 = FreshName(g, v.name + "_ex2", &taken);
    const std::string mu2 = FreshName(g, v.name + "_mu2", &taken);
    OpNode mean = MakeOp(ex2, "reduce_mean", {x2});
    SetInt(&mean, "axis", v.axis);
    out.push_back(ReplaceOps(
        g, {j},
        {MakeOp(x2, "square", {x}), mean, MakeOp(mu2, "square", {TName(g, g.op(d).inputs[1])}),
         MakeOp(v.name, "sub", {ex2, mu2})}));
  }
  return out;
}

// ---- attention split over the key axis ----

// The producer of t when it is an op of type `type` whose result is read only
// once (and is not a graph output); -1 otherwise.
int SingleUseProducerOf(const Graph& g, int t, OpType type) {
  const int p = SingleUseProducer(g, t);
  return p >= 0 && g.op(p).type == type ? p : -1;
}

OpNode Slice(const std::string& name, const std::string& x, int axis, int64_t start, int64_t end) {
  OpNode n = MakeOp(name, "slice", {x});
  SetInt(&n, "axis", axis);
  SetInt(&n, "start", start);
  SetInt(&n, "end", end);
  return n;
}

OpNode Reduce(const std::string& name, const std::string& op, const std::string& x, int axis) {
  OpNode n = MakeOp(name, op, {x});
  SetInt(&n, "axis", axis);
  return n;
}

// slice(concat(A_1..A_n, a), b, s, e): along the concat's axis (b == a),
// the pieces of the inputs that [s, e) covers, concatenated when more than
// one; along another axis, concat(slice(A_1, b, s, e), ...). The slice then
// reads only what it keeps instead of the whole concat.
Protos SliceThroughConcat(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& sl = g.op(j);
    if (sl.type != OpType::kSlice) continue;
    const int c = g.tensor(sl.inputs[0]).producer;
    if (c < 0 || g.op(c).type != OpType::kConcat) continue;
    const OpInfo& cat = g.op(c);
    std::vector<std::string> taken;
    std::vector<OpNode> ops;
    std::vector<std::string> pieces;
    if (sl.axis == cat.axis) {
      int64_t off = 0;
      bool all_whole = true;
      for (int in : cat.inputs) {
        const int64_t w = g.tensor(in).shape[cat.axis];
        const int64_t b = std::max(sl.slice_start, off), e = std::min(sl.slice_end, off + w);
        if (b < e) {
          const bool whole = b == off && e == off + w;
          all_whole = all_whole && whole;
          if (whole) {
            pieces.push_back(TName(g, in));
          } else {
            const std::string p = FreshName(g, absl::StrCat(sl.name, "_p"), &taken);
            ops.push_back(Slice(p, TName(g, in), cat.axis, b - off, e - off));
            pieces.push_back(p);
          }
        }
        off += w;
      }
      if (pieces.empty() || (all_whole && pieces.size() == cat.inputs.size())) continue;
      if (pieces.size() == 1) {
        // One input covers the range: the slice reads it directly (inputs
        // of the graph no op reads any more are listed as unread).
        if (ops.empty()) {
          const int in = g.FindTensor(pieces[0]);
          ops.push_back(Slice(sl.name, pieces[0], cat.axis, 0, g.tensor(in).shape[cat.axis]));
        } else {
          ops.back().set_name(sl.name);
        }
        out.push_back(ReplaceOps(g, {j}, ops));
        continue;
      }
    } else {
      for (int in : cat.inputs) {
        const std::string p = FreshName(g, absl::StrCat(sl.name, "_p"), &taken);
        ops.push_back(Slice(p, TName(g, in), sl.axis, sl.slice_start, sl.slice_end));
        pieces.push_back(p);
      }
    }
    OpNode joined = MakeOp(sl.name, "concat", pieces);
    SetInt(&joined, "axis", cat.axis);
    ops.push_back(joined);
    out.push_back(ReplaceOps(g, {j}, ops));
  }
  return out;
}

// slice(f(X_1..X_n), a, s, e) for an elementwise f whose result only the
// slice reads -> f(X_1', ..., X_n') where X_i' is X_i sliced along its own
// axis for a (trailing alignment) when X_i spans a, and X_i itself where it
// broadcasts along a (size 1 there, or too few dims to reach it). f then
// runs on the window only, and a slice below it may meet a concat
// (slice_through_concat) or an input, which a kernel reads in part.
Protos SliceThroughElementwise(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& sl = g.op(j);
    if (sl.type != OpType::kSlice) continue;
    const int f = SingleUseProducer(g, sl.inputs[0]);
    if (f < 0 || !IsElementwise(g.op(f).type)) continue;
    const OpInfo& op = g.op(f);
    const std::vector<int64_t>& full = g.tensor(op.output).shape;
    const int rank = static_cast<int>(full.size());
    if (sl.axis < 0 || sl.axis >= rank) continue;
    std::vector<std::string> taken;
    std::vector<OpNode> ops;
    std::vector<std::string> inputs;
    std::vector<std::pair<int, std::string>> sliced;  // operand tensor, its slice
    for (int in : op.inputs) {
      const std::vector<int64_t>& shape = g.tensor(in).shape;
      const int axis = sl.axis - (rank - static_cast<int>(shape.size()));
      if (axis < 0 || (shape[axis] == 1 && full[sl.axis] != 1)) {
        inputs.push_back(TName(g, in));  // broadcast along the axis: whole
        continue;
      }
      auto done =
          std::find_if(sliced.begin(), sliced.end(), [&](const auto& p) { return p.first == in; });
      if (done == sliced.end()) {
        const std::string name = FreshName(g, absl::StrCat(sl.name, "_", op.name), &taken);
        ops.push_back(Slice(name, TName(g, in), axis, sl.slice_start, sl.slice_end));
        done = sliced.insert(sliced.end(), {in, name});
      }
      inputs.push_back(done->second);
    }
    if (sliced.empty()) continue;  // every operand broadcasts: nothing to narrow
    ops.push_back(Retarget(g, f, sl.name, inputs));
    out.push_back(ReplaceOps(g, {f, j}, ops));
  }
  return out;
}

// softmax(S) @ V with S = [scale *] (Q @ K) split into `parts` blocks of keys
// (see the header). One graph per part count in {2, 4} that divides the key
// length into blocks of at least kMinKeyBlock keys.
Protos SplitKeyAxis(const Graph& g) {
  constexpr int64_t kMinKeyLength = 64;
  constexpr int64_t kMinKeyBlock = 32;
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& pv = g.op(j);
    if (pv.type != OpType::kMatmul || pv.transpose_b) continue;
    const int sm = SingleUseProducerOf(g, pv.inputs[0], OpType::kSoftmax);
    if (sm < 0) continue;
    const OpInfo& softmax = g.op(sm);
    const std::vector<int64_t>& s_shape = g.tensor(softmax.inputs[0]).shape;
    const int s_rank = static_cast<int>(s_shape.size());
    if (softmax.axis != s_rank - 1) continue;
    // Optional scalar scale between the scores matmul and the softmax.
    int scale = SingleUseProducerOf(g, softmax.inputs[0], OpType::kMul);
    if (scale >= 0 && !g.op(scale).has_scalar) scale = -1;
    const int qk = SingleUseProducerOf(g, scale >= 0 ? g.op(scale).inputs[0] : softmax.inputs[0],
                                       OpType::kMatmul);
    if (qk < 0) continue;
    const OpInfo& scores = g.op(qk);
    const std::vector<int64_t>& k_shape = g.tensor(scores.inputs[1]).shape;
    const std::vector<int64_t>& v_shape = g.tensor(pv.inputs[1]).shape;
    const int k_axis = static_cast<int>(k_shape.size()) - (scores.transpose_b ? 2 : 1);
    const int v_axis = static_cast<int>(v_shape.size()) - 2;
    const int64_t n = s_shape.back();
    if (n < kMinKeyLength || n % 2 != 0 || k_shape[k_axis] != n || v_shape[v_axis] != n) continue;
    for (int parts : {2, 4}) {
      if (n % parts != 0 || n / parts < kMinKeyBlock) continue;
      const int64_t block = n / parts;
      std::vector<std::string> taken;
      std::vector<OpNode> rep;
      auto fresh = [&](const std::string& base) { return FreshName(g, pv.name + base, &taken); };
      std::vector<std::string> logits, maxima;
      for (int p = 0; p < parts; ++p) {
        const std::string kp = fresh(absl::StrCat("_k", p));
        rep.push_back(Slice(kp, TName(g, scores.inputs[1]), k_axis, p * block, (p + 1) * block));
        std::string sp = fresh(absl::StrCat("_s", p));
        rep.push_back(Retarget(g, qk, sp, {TName(g, scores.inputs[0]), kp}));
        if (scale >= 0) {
          const std::string scaled = fresh(absl::StrCat("_ss", p));
          rep.push_back(Retarget(g, scale, scaled, {sp}));
          sp = scaled;
        }
        const std::string mp = fresh(absl::StrCat("_m", p));
        rep.push_back(Reduce(mp, "reduce_max", sp, s_rank - 1));
        logits.push_back(sp);
        maxima.push_back(mp);
      }
      // m: the running row maximum over the blocks.
      std::string m = maxima[0];
      for (int p = 1; p < parts; ++p) {
        const std::string mm = fresh(absl::StrCat("_mx", p));
        rep.push_back(MakeOp(mm, "maximum", {m, maxima[p]}));
        m = mm;
      }
      std::string num, den;
      for (int p = 0; p < parts; ++p) {
        const std::string z = fresh(absl::StrCat("_z", p));
        const std::string e = fresh(absl::StrCat("_e", p));
        const std::string vp = fresh(absl::StrCat("_v", p));
        const std::string np = fresh(absl::StrCat("_n", p));
        const std::string dp = fresh(absl::StrCat("_d", p));
        rep.push_back(MakeOp(z, "sub", {logits[p], m}));
        rep.push_back(MakeOp(e, "exp", {z}));
        rep.push_back(Slice(vp, TName(g, pv.inputs[1]), v_axis, p * block, (p + 1) * block));
        rep.push_back(MakeOp(np, "matmul", {e, vp}));
        rep.push_back(Reduce(dp, "reduce_sum", e, s_rank - 1));
        if (p == 0) {
          num = np;
          den = dp;
          continue;
        }
        const std::string num2 = fresh(absl::StrCat("_num", p));
        const std::string den2 = fresh(absl::StrCat("_den", p));
        rep.push_back(MakeOp(num2, "add", {num, np}));
        rep.push_back(MakeOp(den2, "add", {den, dp}));
        num = num2;
        den = den2;
      }
      rep.push_back(MakeOp(pv.name, "div", {num, den}));
      std::vector<int> replaced = {qk, sm, j};
      if (scale >= 0) replaced.push_back(scale);
      out.push_back(ReplaceOps(g, replaced, rep));
    }
  }
  return out;
}

// ---- layer_norm deferred through a matmul ----

// (layer_norm(X, g, b)) @ W -> ((X * g) @ W - mean(X) * (g @ W)) * r + b @ W
// with r = rsqrt(mean((X - mean(X))^2) + eps) (see the header).
Protos DeferLayerNorm(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& mm = g.op(j);
    if (mm.type != OpType::kMatmul) continue;
    const int l = SingleUseProducerOf(g, mm.inputs[0], OpType::kLayerNorm);
    if (l < 0) continue;
    const OpInfo& ln = g.op(l);
    const std::vector<int64_t>& x_shape = g.tensor(ln.inputs[0]).shape;
    const std::vector<int64_t>& w_shape = g.tensor(mm.inputs[1]).shape;
    if (ln.axis != static_cast<int>(x_shape.size()) - 1 || w_shape.size() != 2) continue;
    const bool has_g = ln.inputs.size() > 1;
    const bool has_b = ln.inputs.size() > 2;
    // Weight and bias must be vectors over the normalized axis ([K] or [1, K]).
    bool vectors = true;
    for (size_t s = 1; s < ln.inputs.size(); ++s) {
      const std::vector<int64_t>& v = g.tensor(ln.inputs[s]).shape;
      vectors &= (v.size() == 1 || (v.size() == 2 && v[0] == 1)) && v.back() == x_shape.back();
    }
    if (!vectors || (!has_g && mm.transpose_b)) continue;
    std::vector<std::string> taken;
    auto fresh = [&](const std::string& base) { return FreshName(g, ln.name + base, &taken); };
    const std::string x = TName(g, ln.inputs[0]);
    const std::string w = TName(g, mm.inputs[1]);
    const int axis = ln.axis;
    const std::string mu = fresh("_mean");
    const std::string d = fresh("_d");
    const std::string d2 = fresh("_d2");
    const std::string var = fresh("_var");
    const std::string ve = fresh("_vare");
    const std::string r = fresh("_rs");
    std::vector<OpNode> rep = {
        Reduce(mu, "reduce_mean", x, axis),   MakeOp(d, "sub", {x, mu}), MakeOp(d2, "square", {d}),
        Reduce(var, "reduce_mean", d2, axis), MakeOp(ve, "add", {var}),  MakeOp(r, "rsqrt", {ve})};
    SetFloat(&rep[4], "scalar", ln.eps);
    // A [1, 1] zero, to lift a [K] vector to a [1, K] matmul operand by
    // broadcasting (graphs have no reshape). It reads W[0, 0], which is finite
    // for any weight the original graph gives a finite result with.
    std::string zero;
    auto row = [&](int input) {
      const std::string v = TName(g, ln.inputs[input]);
      if (g.tensor(ln.inputs[input]).shape.size() == 2) return v;
      if (zero.empty()) {
        const std::string w0 = fresh("_w0");
        const std::string w00 = fresh("_w00");
        zero = fresh("_zero");
        rep.push_back(Slice(w0, w, 0, 0, 1));
        rep.push_back(Slice(w00, w0, 1, 0, 1));
        OpNode z = MakeOp(zero, "mul", {w00});
        SetFloat(&z, "scalar", 0.0);
        rep.push_back(z);
      }
      const std::string lifted = fresh(absl::StrCat("_row", input));
      rep.push_back(MakeOp(lifted, "add", {v, zero}));
      return lifted;
    };
    std::string xg = x;
    std::string gw;
    if (has_g) {
      xg = fresh("_xg");
      rep.push_back(MakeOp(xg, "mul", {x, TName(g, ln.inputs[1])}));
      gw = fresh("_gw");
      rep.push_back(Retarget(g, j, gw, {row(1), w}));
    } else {
      gw = fresh("_gw");
      rep.push_back(Reduce(gw, "reduce_sum", w, 0));  // ones @ W
    }
    const std::string t = fresh("_t");
    const std::string c = fresh("_c");
    const std::string u = fresh("_u");
    rep.push_back(Retarget(g, j, t, {xg, w}));
    rep.push_back(MakeOp(c, "mul", {mu, gw}));
    rep.push_back(MakeOp(u, "sub", {t, c}));
    if (has_b) {
      const std::string y = fresh("_y");
      const std::string bw = fresh("_bw");
      rep.push_back(MakeOp(y, "mul", {u, r}));
      rep.push_back(Retarget(g, j, bw, {row(2), w}));
      rep.push_back(MakeOp(mm.name, "add", {y, bw}));
    } else {
      rep.push_back(MakeOp(mm.name, "mul", {u, r}));
    }
    out.push_back(ReplaceOps(g, {l, j}, rep));
  }
  return out;
}

}  // namespace

double FingerprintWork(const Graph& graph) {
  // Modular multiplications (or as costly steps) per element, as
  // core/fingerprint.cc evaluates each op: a ring op one; exp a table
  // lookup per byte of its exponent; a square root or an inverse an
  // exponentiation (about 100); an uninterpreted op a keyed hash; norms and
  // softmax their primitive expansions, with a root or an inverse per row.
  constexpr double kExp = 10, kPow = 100, kHash = 3;
  auto elems = [&](int t) { return static_cast<double>(graph.tensor(t).num_elements()); };
  double work = 0;
  for (int t = 0; t < graph.num_inputs(); ++t) work += elems(t);  // the inputs
  for (const OpInfo& op : graph.ops()) {
    const double out = elems(op.output);
    const double in = elems(op.inputs[0]);
    auto rows = [&] { return in / static_cast<double>(graph.tensor(op.inputs[0]).shape[op.axis]); };
    switch (op.type) {
      case OpType::kMatmul:
        work += out * (1 + static_cast<double>(graph.tensor(op.inputs[0]).shape.back()));
        break;
      case OpType::kDiv:
        work += out + (op.inputs.size() > 1 ? kPow * elems(op.inputs[1]) : 0);
        break;
      case OpType::kExp:
        work += kExp * out;
        break;
      case OpType::kSqrt:
        work += kPow * out;
        break;
      case OpType::kRsqrt:
        work += 2 * kPow * out;
        break;
      case OpType::kLog:
      case OpType::kAbs:
      case OpType::kRelu:
      case OpType::kSigmoid:
      case OpType::kTanh:
      case OpType::kSilu:
      case OpType::kGelu:
      case OpType::kMaximum:
      case OpType::kMinimum:
        work += kHash * out;
        break;
      case OpType::kPow: {
        // Hashed, or by a small integer a few products; a negative integer
        // adds an inverse an element.
        const bool inverse = op.has_scalar && op.scalar < 0 && op.scalar == std::floor(op.scalar);
        work += (inverse ? kPow : kHash) * out;
        break;
      }
      case OpType::kReduceMax:
        work += kHash * in + out;
        break;
      case OpType::kReduceSum:
      case OpType::kReduceMean:
        work += in + out;
        break;
      case OpType::kRmsNorm:
      case OpType::kLayerNorm:
        work += 4 * in + 2 * kPow * rows();
        break;
      case OpType::kSoftmax:  // max (hashed), subtract, exp, sum, scale
        work += (kHash + 2 + kExp + 2) * in + kPow * rows();
        break;
      default:  // ring ops, concat, slice: one step an element
        work += out;
        break;
    }
  }
  return work;
}

absl::StatusOr<Graph> ReduceShapes(const Graph& graph, int64_t factor) {
  if (factor < 2) return graph;
  auto f = [factor](int64_t d) { return d % factor == 0 && d / factor >= 2 ? d / factor : d; };
  yirage::v1::Graph proto = graph.proto();
  for (yirage::v1::TensorSpec& in : *proto.mutable_inputs()) {
    for (int d = 0; d < in.shape_size(); ++d) in.set_shape(d, f(in.shape(d)));
  }
  for (int j = 0; j < proto.ops_size(); ++j) {
    const OpInfo& op = graph.op(j);
    if (op.type != OpType::kSlice) continue;
    const int64_t len = graph.tensor(op.inputs[0]).shape[op.axis];
    if (f(len) == len) continue;
    if (op.slice_start % factor != 0 || op.slice_end % factor != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("slice '", op.name, "' bounds [", op.slice_start, ", ", op.slice_end,
                       ") of an axis of ", len, " are not multiples of ", factor));
    }
    yirage::v1::OpNode* node = proto.mutable_ops(j);
    SetInt(node, "axis", op.axis);
    SetInt(node, "start", op.slice_start / factor);
    SetInt(node, "end", op.slice_end / factor);
  }
  absl::StatusOr<Graph> reduced = Graph::FromProto(proto);
  if (!reduced.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the graph with dimensions divided by ",
                                                      factor,
                                                      " is invalid: ", reduced.status().message()));
  }
  // Every dimension of every tensor must be f of the original one: this is
  // what makes the reduced graph the same symbolic expression (no dimension
  // becomes 1, equal dimensions stay equal, slices and concats line up).
  for (int t = 0; t < graph.num_tensors(); ++t) {
    const TensorInfo& orig = graph.tensor(t);
    const int r = reduced->FindTensor(orig.name);
    const std::vector<int64_t>* shape = r >= 0 ? &reduced->tensor(r).shape : nullptr;
    bool consistent = shape != nullptr && shape->size() == orig.shape.size();
    for (size_t d = 0; consistent && d < orig.shape.size(); ++d) {
      consistent = (*shape)[d] == f(orig.shape[d]);
    }
    if (!consistent) {
      return absl::FailedPreconditionError(
          absl::StrCat("tensor '", orig.name, "' ", ShapeToString(orig.shape),
                       " does not reduce to ", "its dimensions divided by ", factor, " (got ",
                       shape != nullptr ? ShapeToString(*shape) : std::string("nothing"), ")"));
    }
  }
  return reduced;
}

// `g`'s proto with each input's dims replaced by `dims(old dims)` (the
// layout-keeping reshapes of squeeze_unit_dims and merge_trailing_axes).
template <typename DimsFn>
yirage::v1::Graph WithInputDims(const Graph& g, const DimsFn& dims) {
  yirage::v1::Graph proto = g.proto();
  for (int i = 0; i < g.num_inputs(); ++i) {
    auto* in = proto.mutable_inputs(i);
    in->clear_shape();
    for (int64_t d : dims(g.tensor(i).shape)) in->add_shape(d);
  }
  return proto;
}

// Every tensor of the graph ends in t >= 1 size-1 dims (a tensor of one
// element may end in fewer, down to rank 1): the same graph without them
// keeps every tensor's memory layout, and an axis followed only by size-1
// dims becomes the last one, which row kernels take (a keepdim reduction's
// output reduced again over the axis before it, a softmax over axis 2 of
// [b, h, n, 1]). Matmuls and attention contract their last dims and take no
// such squeeze; an op over a dropped dim stops it.
Protos SqueezeUnitDims(const Graph& g) {
  for (const OpInfo& op : g.ops()) {
    if (!IsElementwise(op.type) && !IsReduction(op.type) && !IsNormOrSoftmax(op.type) &&
        op.type != OpType::kConcat && op.type != OpType::kSlice) {
      return {};
    }
  }
  auto trailing_ones = [](const std::vector<int64_t>& shape) {
    int n = 0;
    for (auto it = shape.rbegin(); it != shape.rend() && *it == 1; ++it) ++n;
    return n;
  };
  int t = 1 << 20;
  for (int i = 0; i < g.num_tensors(); ++i) {
    const std::vector<int64_t>& shape = g.tensor(i).shape;
    if (NumElements(shape) == 1) continue;
    t = std::min(t, trailing_ones(shape));
  }
  if (t == 0 || t == 1 << 20) return {};
  auto squeezed = [&](const std::vector<int64_t>& shape) {
    const int drop = std::min<int>(t, static_cast<int>(shape.size()) - 1);
    return std::vector<int64_t>(shape.begin(), shape.end() - std::max(0, drop));
  };
  for (const OpInfo& op : g.ops()) {
    if (!IsReduction(op.type) && !IsNormOrSoftmax(op.type) && op.type != OpType::kConcat &&
        op.type != OpType::kSlice) {
      continue;
    }
    if (op.axis >= static_cast<int>(squeezed(g.tensor(op.inputs[0]).shape).size())) return {};
  }
  yirage::v1::Graph proto = WithInputDims(g, squeezed);
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& op = g.op(j);
    if (IsReduction(op.type) || IsNormOrSoftmax(op.type) || op.type == OpType::kConcat ||
        op.type == OpType::kSlice) {
      SetInt(proto.mutable_ops(j), "axis", op.axis);  // from the front: unchanged
    }
  }
  // Every tensor must come out as the original without its size-1 tail.
  absl::StatusOr<Graph> check = Graph::FromProto(proto);
  if (!check.ok()) return {};
  for (int i = 0; i < g.num_tensors(); ++i) {
    const int k = check->FindTensor(g.tensor(i).name);
    if (k < 0) return {};
    const std::vector<int64_t>& got = check->tensor(k).shape;
    if (NumElements(got) != NumElements(g.tensor(i).shape)) return {};
    if (NumElements(got) > 1 && got != squeezed(g.tensor(i).shape)) return {};
  }
  return {proto};
}

// A graph of copies (concat and slice over one axis `a`, with elementwise
// ops) whose every tensor shares the dims after `a`: the same graph with
// those dims merged into `a`, which is then the last axis. A concat or
// slice over `a` copies whole runs of the merged dims, so it is the same
// copy over the merged axis (slice bounds scaled by the run); the layouts
// are unchanged. Row kernels take concat and slice over the last axis only,
// so a concat of [n, k] tensors over rows (axis 0) and the slice of it
// become one row kernel instead of a generic kernel each. A tensor of one
// element keeps its shape; an operand that broadcasts along `a` stops it.
Protos MergeTrailingAxes(const Graph& g) {
  int axis = -1;
  for (const OpInfo& op : g.ops()) {
    if (op.type == OpType::kConcat || op.type == OpType::kSlice) {
      if (axis >= 0 && op.axis != axis) return {};
      axis = op.axis;
    } else if (!IsElementwise(op.type)) {
      return {};
    }
  }
  if (axis < 0) return {};
  std::vector<int64_t> tail;  // the dims after `axis`, the same in every tensor
  bool first = true;
  for (int i = 0; i < g.num_tensors(); ++i) {
    const std::vector<int64_t>& shape = g.tensor(i).shape;
    if (NumElements(shape) == 1) continue;
    if (static_cast<int>(shape.size()) <= axis) return {};
    const std::vector<int64_t> t(shape.begin() + axis + 1, shape.end());
    if (first) tail = t;
    if (t != tail) return {};
    first = false;
  }
  if (tail.empty()) return {};  // the axis is already the last
  const int64_t run = NumElements(tail);
  auto merged = [&](const std::vector<int64_t>& shape) {
    if (NumElements(shape) == 1) return shape;
    std::vector<int64_t> m(shape.begin(), shape.begin() + axis + 1);
    m.back() *= run;
    return m;
  };
  yirage::v1::Graph proto = WithInputDims(g, merged);
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& op = g.op(j);
    if (op.type == OpType::kConcat || op.type == OpType::kSlice) {
      SetInt(proto.mutable_ops(j), "axis", axis);
    }
    if (op.type == OpType::kSlice) {
      SetInt(proto.mutable_ops(j), "start", op.slice_start * run);
      SetInt(proto.mutable_ops(j), "end", op.slice_end * run);
    }
  }
  // Every tensor must come out as the original with its tail merged.
  absl::StatusOr<Graph> check = Graph::FromProto(proto);
  if (!check.ok()) return {};
  for (int i = 0; i < g.num_tensors(); ++i) {
    const int k = check->FindTensor(g.tensor(i).name);
    if (k < 0 || check->tensor(k).shape != merged(g.tensor(i).shape)) return {};
  }
  return {proto};
}

// ---- reductions ----

// A reduction of an elementwise op whose second operand is constant along
// the reduced axis: that operand applies after the reduction instead, to
// its (smaller) result.
//   reduce_sum / reduce_mean (x * w), (w * x), (x / w) -> reduce(x) * w ...
//   reduce_mean (x + w), (w + x), (x - w) -> reduce_mean(x) + w ...
// w is a scalar attribute or a tensor that broadcasts to x with size 1
// (or nothing) along the reduced axis, and broadcasts to the result the
// same way (keepdim, or every dim of w up to the axis 1). The reduction
// then reads x where it read the elementwise op's result: that op's pass
// over the whole tensor goes (a bias or a scale before a pooling or a
// column sum).
Protos FactorOutOfReduction(const Graph& g) {
  Protos out;
  for (int j = 0; j < static_cast<int>(g.ops().size()); ++j) {
    const OpInfo& red = g.op(j);
    // (reduce_max(x + w) = reduce_max(x) + w holds too, but the fingerprint
    // takes max as an uninterpreted function and could not prove it.)
    const bool mean = red.type == OpType::kReduceMean;
    if (red.type != OpType::kReduceSum && !mean) continue;
    const int p = SingleUseProducer(g, red.inputs[0]);
    if (p < 0) continue;
    const OpInfo& op = g.op(p);
    const bool scales = op.type == OpType::kMul || op.type == OpType::kDiv;
    const bool shifts = op.type == OpType::kAdd || op.type == OpType::kSub;
    if (!scales && !(shifts && mean)) continue;
    const std::vector<int64_t>& shape = g.tensor(red.inputs[0]).shape;
    const int rank = static_cast<int>(shape.size());
    const int axis = red.axis < 0 ? red.axis + rank : red.axis;
    const yirage::v1::DType dtype = g.tensor(red.inputs[0]).dtype;
    // The operand slots that may be x: the first always, the second for
    // the commutative ops only.
    const bool commutative = op.type == OpType::kMul || op.type == OpType::kAdd;
    for (int slot = 0; slot < (op.has_scalar ? 1 : (commutative ? 2 : 1)); ++slot) {
      const int x = op.inputs[slot];
      if (g.tensor(x).shape != shape || g.tensor(x).dtype != dtype) continue;
      std::vector<std::string> inputs, taken;
      const std::string fresh = FreshName(g, red.name + "_r", &taken);
      if (!op.has_scalar) {
        const int w = op.inputs[1 - slot];
        const TensorInfo& wt = g.tensor(w);
        // w's dim along the reduced axis (in x's frame), if it reaches it:
        // 1, and with the axis dropped from the result every dim of w up to
        // it 1 too (they shift onto the result's dims), w no wider than it.
        const int w_rank = static_cast<int>(wt.shape.size());
        const int at = w_rank - (rank - axis);
        bool constant = wt.dtype == dtype;
        if (at >= 0) {
          for (int d = red.keepdim ? at : 0; d <= at; ++d) constant = constant && wt.shape[d] == 1;
          constant = constant && (red.keepdim || w_rank <= rank - 1);
        }
        if (!constant) continue;
        inputs = slot == 0 ? std::vector<std::string>{fresh, wt.name}
                           : std::vector<std::string>{wt.name, fresh};
      } else {
        inputs = {fresh};
      }
      out.push_back(ReplaceOps(
          g, {p, j}, {Retarget(g, j, fresh, {TName(g, x)}), Retarget(g, p, red.name, inputs)}));
    }
  }
  return out;
}

const std::vector<RewriteRule>& DefaultRewriteRules() {
  static const std::vector<RewriteRule>* rules = new std::vector<RewriteRule>{
      {"expand_rms_norm", ExpandRmsNorm},
      {"expand_layer_norm", ExpandLayerNorm},
      {"expand_softmax", ExpandSoftmax},
      {"reorder_mul_chain", ReorderMulChain},
      {"scale_through_matmul", ScaleThroughMatmul},
      {"shared_operand_matmul", SharedOperandMatmul},
      {"associate_matmul", AssociateMatmul},
      {"factor_matmul_add", FactorMatmulAdd},
      {"one_pass_variance", OnePassVariance},
      {"split_key_axis", SplitKeyAxis},
      {"defer_layer_norm", DeferLayerNorm},
      {"slice_through_concat", SliceThroughConcat},
      {"slice_through_elementwise", SliceThroughElementwise},
      {"squeeze_unit_dims", SqueezeUnitDims},
      {"merge_trailing_axes", MergeTrailingAxes},
      {"factor_out_of_reduction", FactorOutOfReduction},
  };
  return *rules;
}

absl::StatusOr<std::vector<RewrittenGraph>> ExploreRewrites(const Graph& graph,
                                                            const RewriteOptions& options,
                                                            RewriteStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  RewriteStats local;
  RewriteStats& st = stats != nullptr ? *stats : local;
  st = RewriteStats{};
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const std::vector<RewriteRule>& rules =
      options.rules.empty() ? DefaultRewriteRules() : options.rules;
  // Large graphs are fingerprinted on a shape-reduced instance (see the
  // header for when that is sound): the least reduction that fits.
  int64_t factor = 1;
  std::string no_reduction;
  const double work = FingerprintWork(graph);
  std::shared_ptr<const Graph> reference = std::make_shared<const Graph>(graph);
  if (options.reduce_shapes_above_work > 0 && work > options.reduce_shapes_above_work) {
    for (int64_t s = 2; s <= 4096; s *= 2) {
      absl::StatusOr<Graph> r = ReduceShapes(graph, s);
      if (!r.ok()) {
        no_reduction = std::string(r.status().message());
        break;  // a larger factor divides fewer dimensions: no better
      }
      if (FingerprintWork(*r) <= options.reduce_shapes_above_work) {
        factor = s;
        reference = std::make_shared<const Graph>(*std::move(r));
        break;
      }
      if (s == 4096) no_reduction = "dimensions do not shrink enough";
    }
  }
  st.shape_reduction = factor;
  if (factor == 1 && options.max_fingerprint_work > 0 && work > options.max_fingerprint_work) {
    st.budget_exhausted = true;
    st.skipped = absl::StrCat(
        "the graph's fingerprint would cost ", work,
        " modular operations per trial, above the limit ", options.max_fingerprint_work,
        options.reduce_shapes_above_work > 0 ? ", and its shapes cannot be reduced consistently"
                                             : " (shape reduction is off)",
        no_reduction.empty() ? "" : ": ", no_reduction);
    st.seconds = elapsed();
    return std::vector<RewrittenGraph>{};
  }
  // Made when the first rewritten graph needs a check: creating it evaluates
  // the reference in every trial, work wasted on the many graphs that no
  // rule rewrites.
  std::unique_ptr<Fingerprinter> fp;
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, threads);

  std::vector<RewrittenGraph> verified;
  std::unordered_set<Hash128, Hash128Hasher> seen = {CanonicalGraphHash(graph)};
  struct Node {
    std::shared_ptr<const Graph> graph;
    std::vector<std::string> rewrites;
  };
  std::vector<Node> frontier = {{std::make_shared<const Graph>(graph), {}}};
  while (!frontier.empty()) {
    // Expand the frontier: every rule at every site.
    std::vector<RewrittenGraph> pending;
    for (const Node& node : frontier) {
      for (const RewriteRule& rule : rules) {
        for (const yirage::v1::Graph& proto : rule.apply(*node.graph)) {
          absl::StatusOr<Graph> g = Graph::FromProto(proto);
          if (!g.ok() || !CheckSameSignature(graph, *g).ok()) continue;
          ++st.rewrites_generated;
          const Hash128 h = CanonicalGraphHash(*g);
          if (!seen.insert(h).second) {
            ++st.duplicates;
            continue;
          }
          if (st.graphs_explored + static_cast<int>(pending.size()) >= options.max_graphs) {
            st.budget_exhausted = true;
            continue;
          }
          std::shared_ptr<const Graph> checked;
          if (factor > 1) {
            absl::StatusOr<Graph> reduced = ReduceShapes(*g, factor);
            if (!reduced.ok()) {  // not a proof either way: not checked
              st.budget_exhausted = true;
              if (st.rejections.size() < 16) {
                st.rejections.push_back(absl::StrCat(
                    absl::StrJoin(node.rewrites, "+"), node.rewrites.empty() ? "" : "+", rule.name,
                    ": not checked: ", reduced.status().message()));
              }
              continue;
            }
            checked = std::make_shared<const Graph>(*std::move(reduced));
          }
          const double check_work = FingerprintWork(checked != nullptr ? *checked : *g);
          if (options.max_fingerprint_work > 0 && check_work > 2 * options.max_fingerprint_work) {
            st.budget_exhausted = true;
            continue;
          }
          RewrittenGraph r;
          r.checked_graph = checked;
          r.graph = std::make_shared<const Graph>(*std::move(g));
          r.rewrites = node.rewrites;
          r.rewrites.push_back(rule.name);
          r.hash = h;
          pending.push_back(std::move(r));
        }
      }
    }
    if (fp == nullptr && !pending.empty()) {
      absl::StatusOr<std::unique_ptr<Fingerprinter>> made =
          Fingerprinter::Create(*reference, options.fingerprint);
      if (!made.ok()) return made.status();
      fp = *std::move(made);
    }
    // Fingerprint the new graphs in parallel.
    ParallelFor(static_cast<int64_t>(pending.size()), threads, [&](int64_t i) {
      if (options.time_budget_seconds > 0 && elapsed() > options.time_budget_seconds) {
        pending[i].fingerprint.message = "not checked: time budget spent";
        return;
      }
      const RewrittenGraph& r = pending[i];
      pending[i].fingerprint = fp->Check(r.checked_graph != nullptr ? *r.checked_graph : *r.graph);
    });
    frontier.clear();
    for (RewrittenGraph& r : pending) {
      if (r.fingerprint.trials == 0 && !r.fingerprint.equivalent &&
          r.fingerprint.message.starts_with("not checked")) {
        st.budget_exhausted = true;
        continue;
      }
      ++st.graphs_explored;
      if (!r.fingerprint.equivalent) {
        ++st.rewrites_rejected;
        if (st.rejections.size() < 16) {
          st.rejections.push_back(
              absl::StrCat(absl::StrJoin(r.rewrites, "+"), ": ", r.fingerprint.message));
        }
        continue;
      }
      ++st.rewrites_verified;
      frontier.push_back({r.graph, r.rewrites});
      verified.push_back(std::move(r));
    }
    if (options.time_budget_seconds > 0 && elapsed() > options.time_budget_seconds) {
      st.budget_exhausted = st.budget_exhausted || !frontier.empty();
      break;
    }
  }
  st.fingerprint_checks = fp != nullptr ? fp->checks() : 0;
  st.seconds = elapsed();
  return verified;
}

}  // namespace yirage::core
