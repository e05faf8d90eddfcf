#include "core/fused_pattern.h"

#include <algorithm>

namespace yirage::core {
namespace {

// The op of `ops` of type `type` (exactly one), or -1.
int Only(const Graph& g, const std::vector<int>& ops, OpType type) {
  int found = -1;
  for (int op : ops) {
    if (g.op(op).type != type) continue;
    if (found >= 0) return -1;
    found = op;
  }
  return found;
}

int Count(const Graph& g, const std::vector<int>& ops, OpType type) {
  return static_cast<int>(
      std::count_if(ops.begin(), ops.end(), [&](int op) { return g.op(op).type == type; }));
}

// True when tensor `t` is read only by ops of `ops`.
bool Internal(const Graph& g, const std::vector<int>& ops, int t) {
  for (int c : g.tensor(t).consumers) {
    if (std::find(ops.begin(), ops.end(), c) == ops.end()) return false;
  }
  return true;
}

bool PlainMatmul(const OpInfo& op) { return op.type == OpType::kMatmul && !op.transpose_b; }

}  // namespace

std::optional<AttentionMatch> MatchAttention(const Graph& g, const std::vector<int>& ops) {
  if (ops.size() != 3 && ops.size() != 4) return std::nullopt;
  const OpInfo& s = g.op(ops[0]);
  if (s.type != OpType::kMatmul) return std::nullopt;
  size_t next = 1;
  double scale = 1.0;
  int s_out = s.output;
  if (ops.size() == 4) {
    const OpInfo& mul = g.op(ops[1]);
    if (mul.type != OpType::kMul || !mul.has_scalar || mul.inputs[0] != s_out) return std::nullopt;
    scale = mul.scalar;
    s_out = mul.output;
    next = 2;
  }
  const OpInfo& p = g.op(ops[next]);
  const OpInfo& o = g.op(ops[next + 1]);
  if (p.type != OpType::kSoftmax || p.inputs[0] != s_out) return std::nullopt;
  if (o.type != OpType::kMatmul || o.transpose_b || o.inputs[0] != p.output) return std::nullopt;
  if (p.axis != static_cast<int>(g.tensor(s_out).shape.size()) - 1) return std::nullopt;
  // S and P stay inside the kernel.
  for (int t : {s.output, s_out, p.output}) {
    if (!Internal(g, ops, t) || g.tensor(t).is_graph_output) return std::nullopt;
  }
  AttentionMatch a;
  a.q = s.inputs[0];
  a.k = s.inputs[1];
  a.v = o.inputs[1];
  a.out = o.output;
  a.transpose_k = s.transpose_b;
  a.scale = scale;
  const TensorInfo& q = g.tensor(a.q);
  const TensorInfo& k = g.tensor(a.k);
  const TensorInfo& v = g.tensor(a.v);
  for (const TensorInfo* t : {&q, &k, &v}) {
    if (t->shape.size() < 2) return std::nullopt;
  }
  // K and V share their lead dims; grouped queries ([.., Hkv, G, M, D]
  // against [.., Hkv, 1, N, D]) fold into the query rows.
  if (std::vector<int64_t>(k.shape.begin(), k.shape.end() - 2) !=
      std::vector<int64_t>(v.shape.begin(), v.shape.end() - 2)) {
    return std::nullopt;
  }
  const std::optional<FoldedBatch> folded = FoldSharedLeadDims(q.shape, k.shape);
  if (!folded.has_value()) return std::nullopt;
  a.dtype = q.dtype;
  a.batch = folded->batch;
  a.m = folded->m;
  a.d = q.shape.back();
  a.n = a.transpose_k ? k.shape[k.shape.size() - 2] : k.shape.back();
  a.dv = v.shape.back();
  return a;
}

bool IsAttentionChain(const Graph& graph, const std::vector<int>& ops) {
  return MatchAttention(graph, ops).has_value();
}

std::optional<StreamedMatmulMatch> MatchStreamedMatmul(const Graph& g,
                                                       const std::vector<int>& ops) {
  StreamedMatmulMatch m;
  const int matmuls = Count(g, ops, OpType::kMatmul);
  // The prologue: X -> rms_norm(X [, w]) -> [* G] feeding the (first) matmul.
  auto prologue = [&](int a_operand, std::vector<int>* used) -> int {
    int t = a_operand;
    for (;;) {
      const int producer = g.tensor(t).producer;
      if (producer < 0 || std::find(ops.begin(), ops.end(), producer) == ops.end()) return t;
      const OpInfo& p = g.op(producer);
      used->push_back(producer);
      if (p.type == OpType::kMul && !p.has_scalar) {
        // One operand continues the chain, the other is a column vector (a
        // graph input of rank 1).
        const int lhs = p.inputs[0], rhs = p.inputs[1];
        auto is_vec = [&](int v) {
          return g.tensor(v).producer < 0 && g.tensor(v).shape.size() == 1;
        };
        const bool rhs_vec = is_vec(rhs);
        if (!rhs_vec && !is_vec(lhs)) return -1;
        m.col_scales.push_back(rhs_vec ? rhs : lhs);
        t = rhs_vec ? lhs : rhs;
      } else if (p.type == OpType::kRmsNorm && !m.rms) {
        if (p.axis != static_cast<int>(g.tensor(p.inputs[0]).shape.size()) - 1) return -1;
        m.rms = true;
        m.eps = p.eps;
        if (p.inputs.size() > 1) {
          if (g.tensor(p.inputs[1]).producer >= 0 || p.inputs.size() > 2) return -1;
          m.col_scales.push_back(p.inputs[1]);
        }
        t = p.inputs[0];
      } else {
        return -1;
      }
      if (!Internal(g, ops, g.op(producer).output)) return -1;
    }
  };
  std::vector<int> used;
  if (matmuls == 1 && (ops.size() == 1 || Count(g, ops, OpType::kRmsNorm) == 1)) {
    const int mm = Only(g, ops, OpType::kMatmul);
    if (mm != ops.back() || !PlainMatmul(g.op(mm))) return std::nullopt;
    m.x = prologue(g.op(mm).inputs[0], &used);
    m.w1 = g.op(mm).inputs[1];
    m.out = g.op(mm).output;
    m.epilogue = StreamedMatmulMatch::Epilogue::kPlain;
    used.push_back(mm);
  } else if (matmuls == 2 && ops.size() == 4 && Count(g, ops, OpType::kSilu) == 1 &&
             Count(g, ops, OpType::kMul) == 1) {
    const int silu = Only(g, ops, OpType::kSilu);
    const int mul = Only(g, ops, OpType::kMul);
    const int gate = g.tensor(g.op(silu).inputs[0]).producer;
    if (gate < 0 || g.op(mul).has_scalar) return std::nullopt;
    int up = -1;
    for (int op : ops) {
      if (g.op(op).type == OpType::kMatmul && op != gate) up = op;
    }
    if (up < 0 || !PlainMatmul(g.op(gate)) || !PlainMatmul(g.op(up))) return std::nullopt;
    const std::vector<int>& mi = g.op(mul).inputs;
    const int s = g.op(silu).output, u = g.op(up).output;
    if (!((mi[0] == s && mi[1] == u) || (mi[0] == u && mi[1] == s))) return std::nullopt;
    if (g.op(gate).inputs[0] != g.op(up).inputs[0]) return std::nullopt;
    if (g.tensor(g.op(gate).inputs[0]).producer >= 0) return std::nullopt;  // X itself
    m.x = g.op(gate).inputs[0];
    m.w1 = g.op(gate).inputs[1];
    m.w2 = g.op(up).inputs[1];
    m.out = g.op(mul).output;
    m.epilogue = StreamedMatmulMatch::Epilogue::kSiluMul;
    used = ops;
  } else if (matmuls == 3 && ops.size() == 4 && Count(g, ops, OpType::kAdd) == 1) {
    const int add = Only(g, ops, OpType::kAdd);
    if (g.op(add).has_scalar) return std::nullopt;
    // The add's operands: X @ W and (X @ A) @ B.
    int xw = -1, xab = -1;
    for (int t : g.op(add).inputs) {
      const int p = g.tensor(t).producer;
      if (p < 0 || g.op(p).type != OpType::kMatmul) return std::nullopt;
      const int inner = g.tensor(g.op(p).inputs[0]).producer;
      if (inner >= 0 && g.op(inner).type == OpType::kMatmul) {
        xab = p;
      } else {
        xw = p;
      }
    }
    if (xw < 0 || xab < 0) return std::nullopt;
    const int xa = g.tensor(g.op(xab).inputs[0]).producer;
    for (int op : {xw, xa, xab}) {
      if (!PlainMatmul(g.op(op))) return std::nullopt;
    }
    if (g.op(xa).inputs[0] != g.op(xw).inputs[0]) return std::nullopt;
    if (g.tensor(g.op(xw).inputs[0]).producer >= 0) return std::nullopt;
    m.x = g.op(xw).inputs[0];
    m.w1 = g.op(xw).inputs[1];
    m.a = g.op(xa).inputs[1];
    m.b = g.op(xab).inputs[1];
    m.out = g.op(add).output;
    m.epilogue = StreamedMatmulMatch::Epilogue::kLowRankAdd;
    used = ops;
  } else {
    return std::nullopt;
  }
  if (m.x < 0 || g.tensor(m.x).producer >= 0) return std::nullopt;
  std::sort(used.begin(), used.end());
  std::vector<int> sorted = ops;
  std::sort(sorted.begin(), sorted.end());
  if (used != sorted) return std::nullopt;  // an op outside the chain
  for (int op : ops) {
    if (g.op(op).output != m.out && !Internal(g, ops, g.op(op).output)) return std::nullopt;
  }
  for (int t : {m.w1, m.w2, m.a, m.b}) {
    if (t >= 0 && g.tensor(t).producer >= 0) return std::nullopt;
  }
  return m;
}

namespace {

// The epilogue step op `op` makes of the running value `value` (kept in a
// kernel computing `ops` with output shape `out_shape`, `n` columns), or
// nullopt. `operands`: whether a binary op may read a tensor (a row vector
// or one of the output's shape) rather than only a constant.
std::optional<GemmMatch::Step> EpilogueStep(const Graph& g, const std::vector<int>& ops, int value,
                                            const OpInfo& op, const std::vector<int64_t>& out_shape,
                                            int64_t n, bool operands) {
  if (g.tensor(op.output).shape != out_shape) return std::nullopt;
  GemmMatch::Step step;
  step.type = op.type;
  step.gelu_tanh = op.gelu_tanh;
  if (IsUnaryElementwise(op.type)) {
    if (op.inputs.size() != 1 || op.inputs[0] != value) return std::nullopt;
    return step;
  }
  if (!IsBinaryElementwise(op.type)) return std::nullopt;
  if (op.has_scalar) {
    if (op.inputs.size() != 1 || op.inputs[0] != value) return std::nullopt;
    step.operand = GemmMatch::Step::Operand::kScalar;
    step.scalar = op.scalar;
    return step;
  }
  if (!operands) return std::nullopt;
  if (op.inputs.size() != 2 || (op.inputs[0] == value) == (op.inputs[1] == value)) {
    return std::nullopt;
  }
  step.value_first = op.inputs[0] == value;
  step.tensor = step.value_first ? op.inputs[1] : op.inputs[0];
  const TensorInfo& other = g.tensor(step.tensor);
  // Read from memory: not computed in this chain.
  if (std::find(ops.begin(), ops.end(), other.producer) != ops.end()) return std::nullopt;
  if (other.shape == out_shape) {
    step.operand = GemmMatch::Step::Operand::kFull;
  } else if (other.shape == std::vector<int64_t>{n} || other.shape == std::vector<int64_t>{1, n}) {
    step.operand = GemmMatch::Step::Operand::kRow;
  } else {
    return std::nullopt;
  }
  return step;
}

// True when the running value `value` feeds op `next` only and stays
// inside the kernel.
bool FeedsOnly(const Graph& g, int value, int next) {
  const TensorInfo& v = g.tensor(value);
  return !v.is_graph_output && v.consumers.size() == 1 && v.consumers[0] == next;
}

}  // namespace

std::optional<GemmMatch> MatchGemm(const Graph& g, const std::vector<int>& ops) {
  if (ops.empty()) return std::nullopt;
  const OpInfo& mm = g.op(ops[0]);
  if (mm.type != OpType::kMatmul) return std::nullopt;
  const std::vector<int64_t>& a = g.tensor(mm.inputs[0]).shape;
  const std::vector<int64_t>& b = g.tensor(mm.inputs[1]).shape;
  if (a.size() < 2 || b.size() < 2) return std::nullopt;
  GemmMatch match;
  match.a = mm.inputs[0];
  match.b = mm.inputs[1];
  match.transpose_b = mm.transpose_b;
  match.k = a.back();
  match.n = mm.transpose_b ? b[b.size() - 2] : b.back();
  if (b.size() == 2) {
    // A's lead dims are rows of one matmul.
    match.m = 1;
    for (size_t d = 0; d + 1 < a.size(); ++d) match.m *= a[d];
  } else {
    // A batch: the same lead dims (no broadcast), each matrix consecutive.
    if (a.size() != b.size() || !std::equal(a.begin(), a.end() - 2, b.begin())) {
      return std::nullopt;
    }
    match.m = a[a.size() - 2];
    for (size_t d = 0; d + 2 < a.size(); ++d) match.batch *= a[d];
  }
  const std::vector<int64_t>& out_shape = g.tensor(mm.output).shape;
  int value = mm.output;
  std::vector<int> used = {ops[0]};
  // The gated form: a second matmul of the same A and B's shape, each
  // product through its own chain of unary (or constant) steps, the two
  // joined by one binary op, which the rest of the chain follows.
  if (Count(g, ops, OpType::kMatmul) == 2) {
    const int mm2_id = *std::find_if(ops.begin() + 1, ops.end(),
                                     [&](int op) { return g.op(op).type == OpType::kMatmul; });
    const OpInfo& mm2 = g.op(mm2_id);
    if (mm2.inputs[0] != match.a || mm2.transpose_b != mm.transpose_b ||
        g.tensor(mm2.inputs[1]).shape != b) {
      return std::nullopt;
    }
    match.b2 = mm2.inputs[1];
    used.push_back(mm2_id);
    int ends[2] = {mm.output, mm2.output};
    std::vector<GemmMatch::Step>* chains[2] = {&match.gate, &match.up};
    int joins[2] = {-1, -1};
    for (int side = 0; side < 2; ++side) {
      while (true) {
        const TensorInfo& v = g.tensor(ends[side]);
        if (v.is_graph_output || v.consumers.size() != 1) return std::nullopt;
        const int next = v.consumers[0];
        if (std::find(ops.begin(), ops.end(), next) == ops.end()) return std::nullopt;
        const OpInfo& op = g.op(next);
        if (IsBinaryElementwise(op.type) && !op.has_scalar) {
          joins[side] = next;
          break;
        }
        std::optional<GemmMatch::Step> step =
            EpilogueStep(g, ops, ends[side], op, out_shape, match.n, /*operands=*/false);
        if (!step.has_value()) return std::nullopt;
        chains[side]->push_back(*step);
        used.push_back(next);
        ends[side] = op.output;
      }
    }
    const int join = joins[0];
    if (join != joins[1]) return std::nullopt;
    const OpInfo& j = g.op(join);
    if (j.inputs.size() != 2 || j.inputs[0] == j.inputs[1] ||
        g.tensor(j.output).shape != out_shape) {
      return std::nullopt;
    }
    match.join = j.type;
    match.join_gate_first = j.inputs[0] == ends[0];
    used.push_back(join);
    value = j.output;
  } else if (Count(g, ops, OpType::kMatmul) != 1) {
    return std::nullopt;
  }
  // The rest: a chain from the running value, each op fed by the one before.
  std::vector<int> rest;
  for (int op : ops) {
    if (std::find(used.begin(), used.end(), op) == used.end()) rest.push_back(op);
  }
  for (int next : rest) {
    if (!FeedsOnly(g, value, next)) return std::nullopt;
    std::optional<GemmMatch::Step> step =
        EpilogueStep(g, ops, value, g.op(next), out_shape, match.n, /*operands=*/true);
    if (!step.has_value()) return std::nullopt;
    match.epilogue.push_back(*step);
    value = g.op(next).output;
  }
  match.out = value;
  return match;
}

}  // namespace yirage::core
