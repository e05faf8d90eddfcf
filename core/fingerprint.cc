#include "core/fingerprint.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/graph_hash.h"
#include "core/parallel_for.h"

namespace yirage::core {
namespace fingerprint_internal {

using u128 = unsigned __int128;

// Montgomery arithmetic modulo an odd m < 2^62 (R = 2^64). Values are kept in
// Montgomery form; equality of forms is equality of values.
struct Mont {
  uint64_t m = 0;
  uint64_t minv = 0;  // -m^-1 mod 2^64
  uint64_t r2 = 0;    // R^2 mod m
  uint64_t one = 0;   // R mod m
  u128 mr = 0;        // m * R, for lazy accumulation

  explicit Mont(uint64_t mod) : m(mod) {
    uint64_t inv = mod;
    for (int i = 0; i < 6; ++i) inv *= 2 - mod * inv;
    minv = ~inv + 1;
    const uint64_t r = static_cast<uint64_t>((static_cast<u128>(1) << 64) % mod);
    one = r;
    r2 = static_cast<uint64_t>(static_cast<u128>(r) * r % mod);
    mr = static_cast<u128>(mod) << 64;
  }
  uint64_t Redc(u128 t) const {
    const uint64_t k = static_cast<uint64_t>(t) * minv;
    uint64_t r = static_cast<uint64_t>((t + static_cast<u128>(k) * m) >> 64);
    return r >= m ? r - m : r;
  }
  uint64_t Mul(uint64_t a, uint64_t b) const { return Redc(static_cast<u128>(a) * b); }
  uint64_t Add(uint64_t a, uint64_t b) const {
    const uint64_t s = a + b;
    return s >= m ? s - m : s;
  }
  uint64_t Sub(uint64_t a, uint64_t b) const { return a >= b ? a - b : a + m - b; }
  uint64_t To(uint64_t x) const { return Mul(x % m, r2); }
  uint64_t From(uint64_t a) const { return Redc(a); }
  uint64_t Pow(uint64_t a, uint64_t e) const {
    uint64_t r = one;
    while (e != 0) {
      if (e & 1) r = Mul(r, a);
      a = Mul(a, a);
      e >>= 1;
    }
    return r;
  }
  uint64_t Inv(uint64_t a) const { return a == 0 ? 0 : Pow(a, m - 2); }
  // An exact dyadic double as a field element.
  uint64_t Const(double v) const {
    if (v == 0) return 0;
    int e = 0;
    const double frac = std::frexp(std::fabs(v), &e);
    const uint64_t mant = static_cast<uint64_t>(std::ldexp(frac, 53));  // exact
    e -= 53;
    uint64_t x = To(mant);
    const uint64_t two = To(2);
    if (e > 0) x = Mul(x, Pow(two, static_cast<uint64_t>(e)));
    if (e < 0) x = Mul(x, Inv(Pow(two, static_cast<uint64_t>(-e))));
    return v < 0 ? Sub(0, x) : x;
  }
};

const Mont& FP() {
  static const Mont m(kFingerprintP);
  return m;
}
const Mont& FQ() {
  static const Mont m(kFingerprintQ);
  return m;
}

uint64_t Mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct FieldTensor {
  std::vector<int64_t> shape;
  std::vector<uint64_t> p;
  std::vector<uint64_t> q;  // empty when not computed
  int64_t size() const { return static_cast<int64_t>(p.size()); }
};
using FT = std::shared_ptr<const FieldTensor>;

int64_t Numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Strides of `in` broadcast to the 4-d padded `out`.
std::array<int64_t, 4> Strides4(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::array<int64_t, 4> st = {0, 0, 0, 0};
  int64_t s = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    const size_t d = in.size() - 1 - i;
    if (in[d] != 1) st[3 - i] = s;
    s *= in[d];
  }
  (void)out;
  return st;
}
std::array<int64_t, 4> Pad4(const std::vector<int64_t>& s) {
  std::array<int64_t, 4> d = {1, 1, 1, 1};
  for (size_t i = 0; i < s.size(); ++i) d[4 - s.size() + i] = s[i];
  return d;
}

// Calls f(out_index, a_index, b_index) over the broadcast output.
template <typename F>
void ForBroadcast(const std::vector<int64_t>& out, const std::vector<int64_t>& a,
                  const std::vector<int64_t>& b, F f) {
  if (a == out && b == out) {
    const int64_t n = Numel(out);
    for (int64_t i = 0; i < n; ++i) f(i, i, i);
    return;
  }
  const auto d = Pad4(out);
  const auto sa = Strides4(a, out);
  const auto sb = Strides4(b, out);
  int64_t o = 0;
  for (int64_t i0 = 0; i0 < d[0]; ++i0)
    for (int64_t i1 = 0; i1 < d[1]; ++i1)
      for (int64_t i2 = 0; i2 < d[2]; ++i2)
        for (int64_t i3 = 0; i3 < d[3]; ++i3) {
          f(o++, i0 * sa[0] + i1 * sa[1] + i2 * sa[2] + i3 * sa[3],
            i0 * sb[0] + i1 * sb[1] + i2 * sb[2] + i3 * sb[3]);
        }
}

// Calls f(i) for i in [0, n), on more threads when the work (n *
// work_per_item modular operations) is large enough to pay for starting them.
template <typename F>
void ParallelRows(int64_t n, int64_t work_per_item, F f) {
  constexpr double kMinWorkPerThread = 1 << 21;
  ParallelFor(n, ThreadsForWork(n, static_cast<double>(work_per_item), kMinWorkPerThread), f);
}

// Degree bounds of one tensor (see the header).
struct Degree {
  double num = 1;
  double den = 0;
};

struct GraphAnalysis {
  std::vector<Degree> degree;  // per tensor
  std::vector<bool> needs_q;   // per tensor
  double applications = 0;     // exp/sqrt/uninterpreted element applications
  double max_arg_degree = 0;
  double den_sum = 0;  // sum of d(t) * elements(t)
};

bool IsUninterpretedUnary(OpType t) {
  return t == OpType::kLog || t == OpType::kAbs || t == OpType::kRelu || t == OpType::kSigmoid ||
         t == OpType::kTanh || t == OpType::kSilu || t == OpType::kGelu;
}

bool IntegerPow(const OpInfo& op, int64_t* k) {
  if (op.type != OpType::kPow || !op.has_scalar) return false;
  if (op.scalar != std::floor(op.scalar) || std::fabs(op.scalar) > 64) return false;
  *k = static_cast<int64_t>(op.scalar);
  return true;
}

GraphAnalysis Analyze(const Graph& g) {
  GraphAnalysis a;
  a.degree.assign(g.num_tensors(), Degree{});
  a.needs_q.assign(g.num_tensors(), false);
  auto add = [](Degree x, Degree y) {
    if (x.den == 0 && y.den == 0) return Degree{std::max(x.num, y.num), 0};
    return Degree{std::max(x.num + y.den, y.num + x.den), x.den + y.den};
  };
  auto sum_k = [](Degree x, double k) {
    if (x.den == 0) return x;
    return Degree{x.num + (k - 1) * x.den, k * x.den};
  };
  auto fresh = [&](const Degree& arg, double elements) {
    a.applications += elements;
    a.max_arg_degree = std::max(a.max_arg_degree, arg.num + arg.den);
    return Degree{1, 0};
  };
  for (const OpInfo& op : g.ops()) {
    const double n_out = static_cast<double>(g.tensor(op.output).num_elements());
    std::vector<Degree> in;
    for (int t : op.inputs) in.push_back(a.degree[t]);
    Degree d;
    int64_t k = 0;
    switch (op.type) {
      case OpType::kAdd:
      case OpType::kSub:
        d = op.has_scalar ? in[0] : add(in[0], in[1]);
        break;
      case OpType::kMul:
        d = op.has_scalar ? in[0] : Degree{in[0].num + in[1].num, in[0].den + in[1].den};
        break;
      case OpType::kDiv:
        d = op.has_scalar ? in[0] : Degree{in[0].num + in[1].den, in[0].den + in[1].num};
        break;
      case OpType::kNeg:
        d = in[0];
        break;
      case OpType::kSquare:
        d = {2 * in[0].num, 2 * in[0].den};
        break;
      case OpType::kPow:
        if (IntegerPow(op, &k)) {
          const double m = static_cast<double>(k < 0 ? -k : k);
          d = k >= 0 ? Degree{m * in[0].num, m * in[0].den} : Degree{m * in[0].den, m * in[0].num};
        } else {
          d = fresh(in.size() > 1 ? add(in[0], in[1]) : in[0], n_out);
        }
        break;
      case OpType::kMaximum:
      case OpType::kMinimum:
        d = fresh(op.has_scalar ? in[0] : add(in[0], in[1]), n_out);
        break;
      case OpType::kExp:
      case OpType::kSqrt:
        d = fresh(in[0], n_out);
        break;
      case OpType::kRsqrt:
        fresh(in[0], n_out);
        d = {0, 1};
        break;
      case OpType::kMatmul: {
        const double kk = static_cast<double>(g.tensor(op.inputs[0]).shape.back());
        d = sum_k({in[0].num + in[1].num, in[0].den + in[1].den}, kk);
        break;
      }
      case OpType::kReduceSum:
      case OpType::kReduceMean:
        d = sum_k(in[0], static_cast<double>(g.tensor(op.inputs[0]).shape[op.axis]));
        break;
      case OpType::kReduceMax:
        d = fresh(in[0], n_out);
        break;
      case OpType::kRmsNorm:
      case OpType::kLayerNorm: {
        const double len = static_cast<double>(g.tensor(op.inputs[0]).shape[op.axis]);
        Degree x = in[0];
        if (op.type == OpType::kLayerNorm) x = add(x, sum_k(x, len));
        const Degree ms = sum_k({2 * x.num, 2 * x.den}, len);
        fresh(ms, n_out / len);
        d = {x.num, x.den + 1};
        for (size_t s = 1; s < in.size(); ++s) {
          d = s == 1 ? Degree{d.num + in[s].num, d.den + in[s].den} : add(d, in[s]);
        }
        break;
      }
      case OpType::kSoftmax: {
        const double len = static_cast<double>(g.tensor(op.inputs[0]).shape[op.axis]);
        fresh(in[0], n_out / len);  // the row max
        fresh(add(in[0], {1, 0}), n_out);
        d = {1 + len, len};  // e / sum(e)
        break;
      }
      case OpType::kConcat:
        d = in[0];
        for (const Degree& x : in) d = {std::max(d.num, x.num), std::max(d.den, x.den)};
        break;
      case OpType::kSlice:
        d = in[0];
        break;
      default:  // uninterpreted unary
        d = fresh(in[0], n_out);
        break;
    }
    a.degree[op.output] = d;
    a.den_sum += d.den * n_out;
  }
  // Which tensors need their q-components: exponents of exp (and softmax),
  // and the operands of ring ops producing such tensors.
  for (int j = static_cast<int>(g.ops().size()) - 1; j >= 0; --j) {
    const OpInfo& op = g.op(j);
    int64_t k = 0;
    if (op.type == OpType::kExp || op.type == OpType::kSoftmax) {
      a.needs_q[op.inputs[0]] = true;
      continue;
    }
    if (!a.needs_q[op.output]) continue;
    const bool ring =
        op.type == OpType::kAdd || op.type == OpType::kSub || op.type == OpType::kMul ||
        op.type == OpType::kDiv || op.type == OpType::kNeg || op.type == OpType::kSquare ||
        op.type == OpType::kMatmul || op.type == OpType::kReduceSum ||
        op.type == OpType::kReduceMean || op.type == OpType::kConcat || op.type == OpType::kSlice ||
        op.type == OpType::kRmsNorm || op.type == OpType::kLayerNorm || IntegerPow(op, &k);
    if (!ring) continue;
    for (int t : op.inputs) a.needs_q[t] = true;
  }
  return a;
}

}  // namespace fingerprint_internal

using namespace fingerprint_internal;  // NOLINT: this file's own internals

struct Fingerprinter::GraphAnalysisHolder {
  GraphAnalysis analysis;
  void Set(GraphAnalysis a) { analysis = std::move(a); }
  const GraphAnalysis& get() const { return analysis; }
};

// One trial: random inputs, omega, hash key, and the cache of evaluated
// subexpressions (by structural hash).
struct Fingerprinter::Trial {
  uint64_t key = 0;
  uint64_t omega = 0;           // Montgomery form, order q
  std::vector<uint64_t> table;  // [w * 256 + j] = omega^(j * 256^w), 8 windows of 8 bits
  // Graph inputs: uniform p-components (counter-based, so any element can be
  // drawn independently); q-components only for inputs some evaluated graph
  // needs them of (exponents of exp), drawn on first use into inputs_q.
  uint64_t input_seed = 0;
  std::vector<FT> inputs;
  mutable std::vector<FT> inputs_q;
  std::vector<FT> reference_outputs;
  FT MakeInput(const std::vector<int64_t>& shape, int index, bool with_q) const;
  FT Input(int index, bool want_q) const;
  ~Trial();
  mutable std::mutex mu;
  mutable std::unordered_map<Hash128, FT, Hash128Hasher> cache;
  mutable int64_t cache_bytes = 0;

  uint64_t Hash(uint64_t tag, uint64_t x) const { return Mix(Mix(key ^ tag) ^ x); }
  // Uninterpreted value in [0, m).
  static uint64_t Reduce(uint64_t h, uint64_t m) { return h % m; }

  uint64_t ExpP(uint64_t xq_mont) const {
    const Mont& f = FP();
    uint64_t e = FQ().From(xq_mont);
    uint64_t r = f.one;
    for (int w = 0; w < 8 && e != 0; ++w, e >>= 8) {
      if ((e & 255) != 0) r = f.Mul(r, table[w * 256 + (e & 255)]);
    }
    return r;
  }

  // Canonical sqrt of a p-element, or an uninterpreted value for non-residues.
  uint64_t SqrtP(uint64_t x) const {
    const Mont& f = FP();
    const uint64_t r = f.Pow(x, (kFingerprintP + 1) / 4);
    if (f.Mul(r, r) != x) return Reduce(Hash(0x5157, x), kFingerprintP);
    const uint64_t neg = f.Sub(0, r);
    return std::min(r, neg);
  }
  uint64_t SqrtQ(uint64_t xp) const { return Reduce(Hash(0x5158, xp), kFingerprintQ); }

  std::vector<FT> Evaluate(const Graph& g, const GraphAnalysis& a,
                           const std::vector<Hash128>& hashes) const;
  FT EvalOp(const Graph& g, const OpInfo& op, const std::vector<FT>& in, bool want_q) const;
};

Fingerprinter::Trial::~Trial() = default;

FT Fingerprinter::Trial::MakeInput(const std::vector<int64_t>& shape, int index,
                                   bool with_q) const {
  auto in = std::make_shared<FieldTensor>();
  in->shape = shape;
  const int64_t n = Numel(shape);
  const uint64_t sp = Mix(input_seed ^ (0x100000001ull * static_cast<uint64_t>(2 * index + 1)));
  const uint64_t sq = Mix(input_seed ^ (0x100000001ull * static_cast<uint64_t>(2 * index + 2)));
  in->p.resize(n);
  for (int64_t e = 0; e < n; ++e) in->p[e] = Mix(sp + static_cast<uint64_t>(e)) % kFingerprintP;
  if (with_q) {
    in->q.resize(n);
    for (int64_t e = 0; e < n; ++e) in->q[e] = Mix(sq + static_cast<uint64_t>(e)) % kFingerprintQ;
  }
  return in;
}

FT Fingerprinter::Trial::Input(int index, bool want_q) const {
  if (!want_q) return inputs[index];
  std::lock_guard<std::mutex> lock(mu);
  if (inputs_q[index] == nullptr) {
    auto in = std::make_shared<FieldTensor>(*inputs[index]);
    const uint64_t sq = Mix(input_seed ^ (0x100000001ull * static_cast<uint64_t>(2 * index + 2)));
    in->q.resize(in->p.size());
    for (size_t e = 0; e < in->q.size(); ++e) {
      in->q[e] = Mix(sq + static_cast<uint64_t>(e)) % kFingerprintQ;
    }
    inputs_q[index] = std::move(in);
  }
  return inputs_q[index];
}

namespace {

void Init(Fingerprinter::Trial* t, uint64_t seed) {
  t->key = Mix(seed ^ 0x7e57);
  uint64_t s = Mix(t->key + 1);
  const Mont& f = FP();
  while (true) {
    s = Mix(s);
    const uint64_t h = f.To(2 + s % (kFingerprintP - 4));
    const uint64_t w = f.Mul(h, h);  // a quadratic residue: order q or 1
    if (w != f.one) {
      t->omega = w;
      break;
    }
  }
  t->table.assign(8 * 256, 0);
  uint64_t base = t->omega;  // omega^(256^w)
  for (int w = 0; w < 8; ++w) {
    t->table[w * 256] = f.one;
    for (int j = 1; j < 256; ++j) t->table[w * 256 + j] = f.Mul(t->table[w * 256 + j - 1], base);
    base = f.Mul(t->table[w * 256 + 255], base);
  }
}

}  // namespace

FT Fingerprinter::Trial::EvalOp(const Graph& g, const OpInfo& op, const std::vector<FT>& in,
                                bool want_q) const {
  const Mont& P = FP();
  const Mont& Q = FQ();
  auto out = std::make_shared<FieldTensor>();
  out->shape = g.tensor(op.output).shape;
  const int64_t n = Numel(out->shape);
  out->p.assign(n, 0);
  if (want_q) out->q.assign(n, 0);
  const uint64_t tag = static_cast<uint64_t>(op.type) * 1000003 + (op.gelu_tanh ? 7 : 0);
  // Uninterpreted: p and q both keyed hashes of the argument's p-component.
  auto set_uninterpreted = [&](int64_t i, uint64_t h) {
    out->p[i] = Reduce(Hash(tag, h), kFingerprintP);
    if (want_q) out->q[i] = Reduce(Hash(tag + 1, h), kFingerprintQ);
  };

  if (IsBinaryElementwise(op.type)) {
    const FieldTensor& a = *in[0];
    int64_t k = 0;
    if (op.has_scalar) {
      const uint64_t cp = P.Const(op.scalar);
      const uint64_t cq = Q.Const(op.scalar);
      // Division by the constant: a multiplication by its inverse, taken once.
      const bool div = op.type == OpType::kDiv;
      const uint64_t inv_cp = div ? P.Inv(cp) : 0;
      const uint64_t inv_cq = div && want_q ? Q.Inv(cq) : 0;
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t x = a.p[i];
        switch (op.type) {
          case OpType::kAdd:
            out->p[i] = P.Add(x, cp);
            if (want_q) out->q[i] = Q.Add(a.q[i], cq);
            break;
          case OpType::kSub:
            out->p[i] = P.Sub(x, cp);
            if (want_q) out->q[i] = Q.Sub(a.q[i], cq);
            break;
          case OpType::kMul:
            out->p[i] = P.Mul(x, cp);
            if (want_q) out->q[i] = Q.Mul(a.q[i], cq);
            break;
          case OpType::kDiv:
            out->p[i] = P.Mul(x, inv_cp);
            if (want_q) out->q[i] = Q.Mul(a.q[i], inv_cq);
            break;
          case OpType::kPow:
            if (IntegerPow(op, &k)) {
              const uint64_t e = static_cast<uint64_t>(k < 0 ? -k : k);
              out->p[i] = P.Pow(x, e);
              if (k < 0) out->p[i] = P.Inv(out->p[i]);
              if (want_q) {
                out->q[i] = Q.Pow(a.q[i], e);
                if (k < 0) out->q[i] = Q.Inv(out->q[i]);
              }
            } else {
              set_uninterpreted(i, Mix(x) ^ cp);
            }
            break;
          default:  // maximum, minimum with a constant
            set_uninterpreted(i, Mix(std::min(x, cp)) ^ std::max(x, cp));
            break;
        }
      }
      return out;
    }
    const FieldTensor& b = *in[1];
    if (op.type == OpType::kDiv) {
      // Invert the divisor once per element of its own shape.
      std::vector<uint64_t> ip(b.p.size()), iq(want_q ? b.q.size() : 0);
      for (size_t i = 0; i < b.p.size(); ++i) ip[i] = P.Inv(b.p[i]);
      for (size_t i = 0; i < iq.size(); ++i) iq[i] = Q.Inv(b.q[i]);
      ForBroadcast(out->shape, a.shape, b.shape, [&](int64_t o, int64_t x, int64_t y) {
        out->p[o] = P.Mul(a.p[x], ip[y]);
        if (want_q) out->q[o] = Q.Mul(a.q[x], iq[y]);
      });
      return out;
    }
    // One loop per op (the op's switch outside the element loop).
    auto ring = [&](auto fp, auto fq) {
      ForBroadcast(out->shape, a.shape, b.shape, [&](int64_t o, int64_t x, int64_t y) {
        out->p[o] = fp(a.p[x], b.p[y]);
        if (want_q) out->q[o] = fq(a.q[x], b.q[y]);
      });
    };
    switch (op.type) {
      case OpType::kAdd:
        ring([&](uint64_t u, uint64_t v) { return P.Add(u, v); },
             [&](uint64_t u, uint64_t v) { return Q.Add(u, v); });
        break;
      case OpType::kSub:
        ring([&](uint64_t u, uint64_t v) { return P.Sub(u, v); },
             [&](uint64_t u, uint64_t v) { return Q.Sub(u, v); });
        break;
      case OpType::kMul:
        ring([&](uint64_t u, uint64_t v) { return P.Mul(u, v); },
             [&](uint64_t u, uint64_t v) { return Q.Mul(u, v); });
        break;
      case OpType::kPow:
        ForBroadcast(out->shape, a.shape, b.shape, [&](int64_t o, int64_t x, int64_t y) {
          set_uninterpreted(o, Mix(a.p[x]) ^ Mix(b.p[y] + 1));
        });
        break;
      default:  // maximum, minimum: symmetric
        ForBroadcast(out->shape, a.shape, b.shape, [&](int64_t o, int64_t x, int64_t y) {
          set_uninterpreted(o,
                            Mix(std::min(a.p[x], b.p[y])) ^ Mix(std::max(a.p[x], b.p[y]) + 0x51));
        });
        break;
    }
    return out;
  }

  if (IsUnaryElementwise(op.type)) {
    const FieldTensor& a = *in[0];
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t x = a.p[i];
      switch (op.type) {
        case OpType::kNeg:
          out->p[i] = P.Sub(0, x);
          if (want_q) out->q[i] = Q.Sub(0, a.q[i]);
          break;
        case OpType::kSquare:
          out->p[i] = P.Mul(x, x);
          if (want_q) out->q[i] = Q.Mul(a.q[i], a.q[i]);
          break;
        case OpType::kExp:
          out->p[i] = ExpP(a.q[i]);
          if (want_q) out->q[i] = Reduce(Hash(0xe4, out->p[i]), kFingerprintQ);
          break;
        case OpType::kSqrt:
          out->p[i] = SqrtP(x);
          if (want_q) out->q[i] = SqrtQ(x);
          break;
        case OpType::kRsqrt:
          out->p[i] = P.Inv(SqrtP(x));
          if (want_q) out->q[i] = Q.Inv(SqrtQ(x));
          break;
        default:
          set_uninterpreted(i, x);
          break;
      }
    }
    return out;
  }

  if (op.type == OpType::kMatmul) {
    const FieldTensor& a = *in[0];
    const FieldTensor& b = *in[1];
    const std::vector<int64_t>& as = a.shape;
    const int64_t m = as[as.size() - 2];
    const int64_t kk = as.back();
    const int64_t nn = out->shape.back();
    const std::vector<int64_t> batch(out->shape.begin(), out->shape.end() - 2);
    const std::vector<int64_t> ab(as.begin(), as.end() - 2);
    const std::vector<int64_t> bb(b.shape.begin(), b.shape.end() - 2);
    std::vector<int64_t> boff, aoff;
    ForBroadcast(batch.empty() ? std::vector<int64_t>{1} : batch,
                 ab.empty() ? std::vector<int64_t>{1} : ab,
                 bb.empty() ? std::vector<int64_t>{1} : bb, [&](int64_t, int64_t x, int64_t y) {
                   aoff.push_back(x);
                   boff.push_back(y);
                 });
    // Row-times-column dot products over contiguous memory: B is used as
    // [N, K] (transposed once per distinct batch unless transpose_b), and
    // products are summed four at a time before one Montgomery reduction
    // (four products of values < m < 2^62 stay below m * 2^64, REDC's bound).
    auto run = [&](const Mont& F, const std::vector<uint64_t>& A, const std::vector<uint64_t>& B,
                   std::vector<uint64_t>* O) {
      if (!op.transpose_b && m <= 32) {
        // Few rows: transposing B would cost as much as the product. Rows of
        // B are streamed instead (axpy form), in blocks of columns.
        constexpr int64_t kCols = 512;
        const int64_t blocks = (nn + kCols - 1) / kCols;
        for (size_t bi = 0; bi < aoff.size(); ++bi) {
          const uint64_t* pa = A.data() + aoff[bi] * m * kk;
          const uint64_t* pb = B.data() + boff[bi] * kk * nn;
          uint64_t* po = O->data() + bi * m * nn;
          ParallelRows(m * blocks, kk * std::min(nn, kCols), [&](int64_t item) {
            const int64_t i = item / blocks;
            const int64_t j0 = (item % blocks) * kCols;
            const int64_t j1 = std::min(nn, j0 + kCols);
            const uint64_t* row = pa + i * kk;
            uint64_t* dst = po + i * nn;
            std::fill(dst + j0, dst + j1, 0);
            int64_t p = 0;
            for (; p + 4 <= kk; p += 4) {
              const uint64_t a0 = row[p], a1 = row[p + 1], a2 = row[p + 2], a3 = row[p + 3];
              const uint64_t* b0 = pb + p * nn;
              for (int64_t j = j0; j < j1; ++j) {
                const u128 t = static_cast<u128>(a0) * b0[j] + static_cast<u128>(a1) * b0[nn + j] +
                               static_cast<u128>(a2) * b0[2 * nn + j] +
                               static_cast<u128>(a3) * b0[3 * nn + j];
                dst[j] = F.Add(dst[j], F.Redc(t));
              }
            }
            for (; p < kk; ++p) {
              const uint64_t a0 = row[p];
              const uint64_t* b0 = pb + p * nn;
              for (int64_t j = j0; j < j1; ++j) {
                dst[j] = F.Add(dst[j], F.Redc(static_cast<u128>(a0) * b0[j]));
              }
            }
          });
        }
        return;
      }
      std::vector<uint64_t> bt;
      int64_t bt_batch = -1;
      for (size_t bi = 0; bi < aoff.size(); ++bi) {
        const uint64_t* pa = A.data() + aoff[bi] * m * kk;
        const uint64_t* pb = B.data() + boff[bi] * kk * nn;
        if (!op.transpose_b) {
          if (bt_batch != boff[bi]) {
            bt.resize(static_cast<size_t>(kk * nn));
            for (int64_t p = 0; p < kk; ++p) {
              for (int64_t j = 0; j < nn; ++j) bt[j * kk + p] = pb[p * nn + j];
            }
            bt_batch = boff[bi];
          }
          pb = bt.data();
        }
        uint64_t* po = O->data() + bi * m * nn;
        ParallelRows(m, nn * kk, [&](int64_t i) {
          const uint64_t* row = pa + i * kk;
          for (int64_t j = 0; j < nn; ++j) {
            const uint64_t* col = pb + j * kk;
            uint64_t acc = 0;
            int64_t p = 0;
            for (; p + 4 <= kk; p += 4) {
              const u128 s = static_cast<u128>(row[p]) * col[p] +
                             static_cast<u128>(row[p + 1]) * col[p + 1] +
                             static_cast<u128>(row[p + 2]) * col[p + 2] +
                             static_cast<u128>(row[p + 3]) * col[p + 3];
              acc = F.Add(acc, F.Redc(s));
            }
            u128 s = 0;
            for (; p < kk; ++p) s += static_cast<u128>(row[p]) * col[p];
            po[i * nn + j] = F.Add(acc, F.Redc(s));
          }
        });
      }
    };
    run(P, a.p, b.p, &out->p);
    if (want_q) run(Q, a.q, b.q, &out->q);
    return out;
  }

  if (op.type == OpType::kConcat || op.type == OpType::kSlice) {
    const std::vector<int64_t>& os = out->shape;
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < op.axis; ++d) outer *= os[d];
    for (size_t d = op.axis + 1; d < os.size(); ++d) inner *= os[d];
    auto copy = [&](auto member, std::vector<uint64_t>* dst) {
      int64_t pos = 0;
      for (int64_t o = 0; o < outer; ++o) {
        if (op.type == OpType::kSlice) {
          const FieldTensor& x = *in[0];
          const int64_t len = x.shape[op.axis];
          const auto& src = x.*member;
          const auto begin = src.begin() + (o * len + op.slice_start) * inner;
          std::copy(begin, begin + (op.slice_end - op.slice_start) * inner, dst->begin() + pos);
          pos += (op.slice_end - op.slice_start) * inner;
          continue;
        }
        for (const FT& t : in) {
          const int64_t chunk = t->shape[op.axis] * inner;
          const auto& src = (*t).*member;
          std::copy(src.begin() + o * chunk, src.begin() + (o + 1) * chunk, dst->begin() + pos);
          pos += chunk;
        }
      }
    };
    copy(&FieldTensor::p, &out->p);
    if (want_q) copy(&FieldTensor::q, &out->q);
    return out;
  }

  // Reductions, norms and softmax: rows along op.axis.
  const FieldTensor& x = *in[0];
  const std::vector<int64_t>& xs = x.shape;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < op.axis; ++d) outer *= xs[d];
  for (size_t d = op.axis + 1; d < xs.size(); ++d) inner *= xs[d];
  const int64_t len = xs[op.axis];
  const uint64_t inv_len_p = P.Inv(P.To(static_cast<uint64_t>(len)));
  const uint64_t inv_len_q = Q.Inv(Q.To(static_cast<uint64_t>(len)));
  std::vector<uint64_t> w_p, w_q, b_p, b_q;  // broadcast weight and bias
  auto expand = [&](const FieldTensor& t, std::vector<uint64_t>* vp, std::vector<uint64_t>* vq) {
    vp->assign(n, 0);
    if (want_q) vq->assign(n, 0);
    ForBroadcast(out->shape, t.shape, t.shape, [&](int64_t o, int64_t y, int64_t) {
      (*vp)[o] = t.p[y];
      if (want_q) (*vq)[o] = t.q[y];
    });
  };
  if (in.size() > 1) expand(*in[1], &w_p, &w_q);
  if (in.size() > 2) expand(*in[2], &b_p, &b_q);
  const bool need_xq = want_q || op.type == OpType::kSoftmax;
  const uint64_t eps_p = P.Const(op.eps);
  const uint64_t eps_q = Q.Const(op.eps);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t ii = 0; ii < inner; ++ii) {
      auto at = [&](int64_t c) { return (o * len + c) * inner + ii; };
      if (IsReduction(op.type)) {
        const int64_t dst = o * inner + ii;
        if (op.type == OpType::kReduceMax) {
          uint64_t h = Hash(0x3a, static_cast<uint64_t>(len));
          for (int64_t c = 0; c < len; ++c) h = Mix(h ^ x.p[at(c)]);
          set_uninterpreted(dst, h);
          continue;
        }
        uint64_t sp = 0, sq = 0;
        for (int64_t c = 0; c < len; ++c) {
          sp = P.Add(sp, x.p[at(c)]);
          if (want_q) sq = Q.Add(sq, x.q[at(c)]);
        }
        if (op.type == OpType::kReduceMean) {
          sp = P.Mul(sp, inv_len_p);
          sq = Q.Mul(sq, inv_len_q);
        }
        out->p[dst] = sp;
        if (want_q) out->q[dst] = sq;
        continue;
      }
      if (op.type == OpType::kSoftmax) {
        // m = reduce_max (uninterpreted), e = exp(x - m), y = e / sum(e).
        uint64_t h = Hash(0x3a, static_cast<uint64_t>(len));
        for (int64_t c = 0; c < len; ++c) h = Mix(h ^ x.p[at(c)]);
        const uint64_t mq =
            Reduce(Hash(static_cast<uint64_t>(OpType::kReduceMax) * 1000003 + 1, h), kFingerprintQ);
        uint64_t sp = 0, sq = 0;
        for (int64_t c = 0; c < len; ++c) {
          const uint64_t e = ExpP(Q.Sub(x.q[at(c)], mq));
          out->p[at(c)] = e;
          sp = P.Add(sp, e);
          if (want_q) {
            out->q[at(c)] = Reduce(Hash(0xe4, e), kFingerprintQ);
            sq = Q.Add(sq, out->q[at(c)]);
          }
        }
        const uint64_t ip = P.Inv(sp);
        const uint64_t iq = want_q ? Q.Inv(sq) : 0;
        for (int64_t c = 0; c < len; ++c) {
          out->p[at(c)] = P.Mul(out->p[at(c)], ip);
          if (want_q) out->q[at(c)] = Q.Mul(out->q[at(c)], iq);
        }
        continue;
      }
      // rms_norm / layer_norm, as their expansions.
      const bool layer = op.type == OpType::kLayerNorm;
      uint64_t mean_p = 0, mean_q = 0;
      if (layer) {
        for (int64_t c = 0; c < len; ++c) {
          mean_p = P.Add(mean_p, x.p[at(c)]);
          if (want_q) mean_q = Q.Add(mean_q, x.q[at(c)]);
        }
        mean_p = P.Mul(mean_p, inv_len_p);
        mean_q = Q.Mul(mean_q, inv_len_q);
      }
      uint64_t ss = 0;
      for (int64_t c = 0; c < len; ++c) {
        const uint64_t d = P.Sub(x.p[at(c)], mean_p);
        ss = P.Add(ss, P.Mul(d, d));
      }
      const uint64_t var = P.Add(P.Mul(ss, inv_len_p), eps_p);
      (void)eps_q;
      const uint64_t r_p = P.Inv(SqrtP(var));
      const uint64_t r_q = want_q ? Q.Inv(SqrtQ(var)) : 0;
      for (int64_t c = 0; c < len; ++c) {
        const int64_t e = at(c);
        uint64_t yp = P.Mul(P.Sub(x.p[e], mean_p), r_p);
        uint64_t yq = 0;
        if (want_q) yq = Q.Mul(Q.Sub(x.q[e], mean_q), r_q);
        if (!w_p.empty()) {
          yp = P.Mul(yp, w_p[e]);
          if (want_q) yq = Q.Mul(yq, w_q[e]);
        }
        if (!b_p.empty()) {
          yp = P.Add(yp, b_p[e]);
          if (want_q) yq = Q.Add(yq, b_q[e]);
        }
        out->p[e] = yp;
        if (want_q) out->q[e] = yq;
      }
    }
  }
  (void)need_xq;
  return out;
}

namespace {

// Where a tensor's value is a slice [start, end) along `axis` of a tensor
// whose structural hash is `full`.
struct SliceOrigin {
  bool valid = false;
  Hash128 full;
  int axis = 0;
  int64_t start = 0;
  int64_t end = 0;
};

// x[..., start:end, ...] along `axis` (with q when x has it and want_q).
FT SliceOf(const FieldTensor& x, int axis, int64_t start, int64_t end, bool want_q) {
  auto out = std::make_shared<FieldTensor>();
  out->shape = x.shape;
  out->shape[axis] = end - start;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape[d];
  for (size_t d = axis + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t len = x.shape[axis];
  const int64_t chunk = (end - start) * inner;
  auto copy = [&](const std::vector<uint64_t>& src, std::vector<uint64_t>* dst) {
    dst->resize(outer * chunk);
    for (int64_t o = 0; o < outer; ++o) {
      std::copy(src.begin() + (o * len + start) * inner,
                src.begin() + (o * len + start) * inner + chunk, dst->begin() + o * chunk);
    }
  };
  copy(x.p, &out->p);
  if (want_q) copy(x.q, &out->q);
  return out;
}

}  // namespace

std::vector<FT> Fingerprinter::Trial::Evaluate(const Graph& g, const GraphAnalysis& a,
                                               const std::vector<Hash128>& hashes) const {
  constexpr int64_t kMaxCacheBytes = int64_t{64} << 20;
  std::vector<FT> values(g.num_tensors());
  std::vector<SliceOrigin> origins(g.num_tensors());
  for (int i = 0; i < g.num_inputs(); ++i) {
    values[i] = Input(i, a.needs_q[i]);
    // The same elements under the graph's own dims (a rewrite may merge or
    // squeeze them; CheckSameSignature kept the element count).
    if (values[i]->shape != g.tensor(i).shape) {
      auto view = std::make_shared<FieldTensor>(*values[i]);
      view->shape = g.tensor(i).shape;
      values[i] = std::move(view);
    }
  }
  auto lookup = [&](const Hash128& key, bool want_q) -> FT {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end() && (!want_q || !it->second->q.empty())) return it->second;
    return nullptr;
  };
  for (const OpInfo& op : g.ops()) {
    const Hash128& key = hashes[op.output];
    const bool want_q = a.needs_q[op.output];
    if (op.type == OpType::kSlice) {
      origins[op.output] = {true, hashes[op.inputs[0]], op.axis, op.slice_start, op.slice_end};
    }
    // Slices commute with elementwise ops and with a matmul's row (A) and
    // column (B) axes, exactly: op(slice(x)) is evaluated as slice(op(x))
    // when op(x) was evaluated already (e.g. the scores of attention split
    // over its keys, Q @ K_b, as a slice of the original graph's Q @ K).
    const bool elementwise =
        IsUnaryElementwise(op.type) || (IsBinaryElementwise(op.type) && op.has_scalar);
    if (elementwise && origins[op.inputs[0]].valid) {
      const SliceOrigin& o = origins[op.inputs[0]];
      origins[op.output] = {true, OpHash(op, {o.full}), o.axis, o.start, o.end};
    } else if (op.type == OpType::kMatmul) {
      const int out_rank = static_cast<int>(g.tensor(op.output).shape.size());
      const int a_rank = static_cast<int>(g.tensor(op.inputs[0]).shape.size());
      const int b_rank = static_cast<int>(g.tensor(op.inputs[1]).shape.size());
      const SliceOrigin& oa = origins[op.inputs[0]];
      const SliceOrigin& ob = origins[op.inputs[1]];
      if (ob.valid && ob.axis == b_rank - (op.transpose_b ? 2 : 1)) {
        origins[op.output] = {true, OpHash(op, {hashes[op.inputs[0]], ob.full}), out_rank - 1,
                              ob.start, ob.end};
      } else if (oa.valid && oa.axis == a_rank - 2 && a_rank == out_rank) {
        origins[op.output] = {true, OpHash(op, {oa.full, hashes[op.inputs[1]]}), out_rank - 2,
                              oa.start, oa.end};
      }
    }
    if (FT hit = lookup(key, want_q); hit != nullptr) {
      values[op.output] = std::move(hit);
      continue;
    }
    FT v;
    if (const SliceOrigin& o = origins[op.output]; o.valid && op.type != OpType::kSlice) {
      if (FT f = lookup(o.full, want_q); f != nullptr) {
        v = SliceOf(*f, o.axis, o.start, o.end, want_q);
      }
    }
    if (v == nullptr) {
      std::vector<FT> in;
      for (int t : op.inputs) in.push_back(values[t]);
      v = EvalOp(g, op, in, want_q);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      const int64_t bytes = 8 * static_cast<int64_t>(v->p.size() + v->q.size());
      if (cache_bytes + bytes <= kMaxCacheBytes) {
        auto [it, inserted] = cache.try_emplace(key, v);
        if (!inserted && it->second->q.empty() && !v->q.empty()) it->second = v;
        cache_bytes += bytes;
      }
    }
    values[op.output] = std::move(v);
  }
  std::vector<FT> outputs;
  for (int t : g.outputs()) outputs.push_back(values[t]);
  return outputs;
}

Fingerprinter::~Fingerprinter() = default;

absl::StatusOr<std::unique_ptr<Fingerprinter>> Fingerprinter::Create(
    const Graph& reference, const FingerprintOptions& options) {
  if (options.trials < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("fingerprint trials must be >= 1, got ", options.trials));
  }
  std::unique_ptr<Fingerprinter> f(new Fingerprinter());
  f->reference_ = std::make_shared<const Graph>(reference);
  f->options_ = options;
  f->analysis_ = std::make_shared<const GraphAnalysisHolder>();
  const_cast<GraphAnalysisHolder&>(*f->analysis_).Set(Analyze(reference));
  const std::vector<Hash128> hashes = TensorHashes(reference);
  f->trials_.resize(options.trials);
  ParallelFor(options.trials, options.trials, [&](int64_t t) {
    auto trial = std::make_unique<Trial>();
    Init(trial.get(), options.seed + 0x1000193ull * static_cast<uint64_t>(t + 1));
    trial->input_seed = Mix(trial->key ^ 0x1);
    for (int i = 0; i < reference.num_inputs(); ++i) {
      trial->inputs.push_back(trial->MakeInput(reference.tensor(i).shape, i, false));
    }
    trial->inputs_q.resize(reference.num_inputs());
    trial->reference_outputs = trial->Evaluate(reference, f->analysis_->get(), hashes);
    f->trials_[t] = std::move(trial);
  });
  return f;
}

FingerprintResult Fingerprinter::Check(const Graph& candidate) const {
  checks_.fetch_add(1);
  FingerprintResult result;
  if (absl::Status s = CheckSameSignature(*reference_, candidate); !s.ok()) {
    result.message = absl::StrCat("signature differs: ", s.message());
    return result;
  }
  const GraphAnalysis a = Analyze(candidate);
  const GraphAnalysis& r = analysis_->get();
  double d_out = 0;
  for (size_t o = 0; o < candidate.outputs().size(); ++o) {
    const Degree& x = a.degree[candidate.outputs()[o]];
    const Degree& y = r.degree[reference_->outputs()[o]];
    d_out = std::max(d_out, x.num + x.den + y.num + y.den);
  }
  const double apps = a.applications + r.applications;
  const double eps =
      std::min(1.0, (d_out + a.den_sum + r.den_sum +
                     apps * apps * std::max({1.0, a.max_arg_degree, r.max_arg_degree}) / 2) /
                        static_cast<double>(kFingerprintQ));
  result.per_trial_bound = eps;
  const std::vector<Hash128> hashes = TensorHashes(candidate);
  // Trials are independent: evaluate them on up to hardware_concurrency()
  // threads; the first failing trial (by index) is reported.
  const int num_trials = static_cast<int>(trials_.size());
  std::vector<std::string> failures(num_trials);
  auto run_trial = [&](int t) {
    const Trial& trial = *trials_[t];
    const std::vector<FT> got = trial.Evaluate(candidate, a, hashes);
    for (size_t o = 0; o < got.size(); ++o) {
      const FieldTensor& x = *got[o];
      const FieldTensor& y = *trial.reference_outputs[o];
      for (int64_t e = 0; e < x.size(); ++e) {
        if (x.p[e] == y.p[e]) continue;
        failures[t] = absl::StrCat("trial ", t + 1, ": output '",
                                   candidate.tensor(candidate.outputs()[o]).name, "' (outputs[", o,
                                   "]) element ", e, " differs from the reference graph's");
        return;
      }
    }
  };
  ParallelFor(num_trials, std::thread::hardware_concurrency(),
              [&](int64_t t) { run_trial(static_cast<int>(t)); });
  result.trials = num_trials;
  for (int t = 0; t < num_trials; ++t) {
    if (failures[t].empty()) continue;
    result.trials = t + 1;
    result.message = failures[t];
    return result;
  }
  result.equivalent = true;
  result.false_pass_bound = std::pow(eps, static_cast<double>(result.trials));
  return result;
}

FingerprintResult CheckFingerprintEquivalent(const Graph& a, const Graph& b,
                                             const FingerprintOptions& options) {
  absl::StatusOr<std::unique_ptr<Fingerprinter>> f = Fingerprinter::Create(a, options);
  if (!f.ok()) {
    FingerprintResult r;
    r.message = std::string(f.status().message());
    return r;
  }
  return (*f)->Check(b);
}

}  // namespace yirage::core
