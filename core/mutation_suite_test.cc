// The mutation suite: deliberately wrong rewrites of small graphs. Every one
// must be rejected by the finite-field fingerprint; the test also reports
// whether the numeric check (float64 reference vs float64 reference at the
// graph's tolerance) would have caught it on its own. Rewrites that are exact
// but numerically unstable pass the fingerprint and are caught by the numeric
// check on the device: backends/cpu/rewrite_e2e_test.cc.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "core/fingerprint.h"
#include "core/graph.h"
#include "core/tensor.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

// A graph in a compact text form, one statement per line:
//   in X 8 64             (a float32 input and its shape)
//   N = rms_norm X eps=1e-6 axis=-1
//   out Y
yirage::v1::Graph Parse(const std::string& text) {
  yirage::v1::Graph g;
  g.set_name("mutation");
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    std::vector<std::string> tok = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (tok.empty()) continue;
    if (tok[0] == "in") {
      auto* spec = g.add_inputs();
      spec->set_name(tok[1]);
      spec->set_dtype(yirage::v1::FLOAT32);
      for (size_t i = 2; i < tok.size(); ++i) spec->add_shape(std::stoll(tok[i]));
    } else if (tok[0] == "out") {
      g.add_outputs(tok[1]);
    } else {
      auto* op = g.add_ops();
      op->set_name(tok[0]);
      op->set_op(tok[2]);
      for (size_t i = 3; i < tok.size(); ++i) {
        const size_t eq = tok[i].find('=');
        if (eq == std::string::npos) {
          op->add_inputs(tok[i]);
          continue;
        }
        const std::string key = tok[i].substr(0, eq);
        const std::string v = tok[i].substr(eq + 1);
        auto& attr = (*op->mutable_attrs())[key];
        int64_t iv;
        double dv;
        if (v == "true" || v == "false") {
          attr.set_b(v == "true");
        } else if (absl::SimpleAtoi(v, &iv)) {
          attr.set_i(iv);
        } else if (absl::SimpleAtod(v, &dv)) {
          attr.set_f(dv);
        } else {
          attr.set_s(v);
        }
      }
    }
  }
  return g;
}

Graph FromText(const std::string& text) {
  absl::StatusOr<Graph> g = Graph::FromProto(Parse(text));
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << text;
  return *g;
}

// Whether the float64 reference of `b` matches `a`'s at a's tolerance.
bool NumericMatch(const Graph& a, const Graph& b) {
  const std::vector<HostTensor> inputs = MakeRandomInputs(a, 11);
  absl::StatusOr<std::vector<HostTensor>> ra = EvaluateReference(a, inputs);
  absl::StatusOr<std::vector<HostTensor>> rb = EvaluateReference(b, inputs);
  if (!ra.ok() || !rb.ok()) return false;
  return CompareOutputs(a, *ra, *rb, DefaultTolerance(a)).ok;
}

const char kRmsNormLinear[] = R"(
  in X 8 64
  in G 64
  in W 64 64
  N = rms_norm X eps=1e-6
  S = mul N G
  Y = matmul S W
  out Y)";
// Deferred normalization, then each wrong variant.
std::string Deferred(const std::string& ms_op, const std::string& eps, const std::string& r_op,
                     const std::string& tail) {
  return "in X 8 64\nin G 64\nin W 64 64\nsq = square X\nms = " + ms_op +
         " sq\nme = add ms scalar=" + eps + "\nr = " + r_op + " me\n" + tail + "\nout Y";
}

const char kAttention[] = R"(
  in S 8 16
  in V 16 8
  Ss = mul S scalar=4.0
  P = softmax Ss
  Y = matmul P V
  out Y)";

const char kGatedMlp[] = R"(
  in X 8 16
  in W1 16 32
  in W2 16 32
  A = matmul X W1
  G = silu A
  B = matmul X W2
  Y = mul G B
  out Y)";
std::string Fused(const std::string& cat, const std::string& a, const std::string& b,
                  const std::string& y) {
  return "in X 8 16\nin W1 16 32\nin W2 16 32\nC = concat " + cat +
         " axis=1\nZ = matmul X C\nA = slice Z axis=1 " + a + "\nB = slice Z axis=1 " + b + "\n" +
         y + "\nout Y";
}

const char kLayerNorm[] = R"(
  in X 8 16
  Y = layer_norm X eps=1e-5
  out Y)";

const char kChain[] = R"(
  in X 8 16
  in U 16 16
  in P 16 16
  H = matmul X U
  Y = matmul H P
  out Y)";

const char kTwoMatmuls[] = R"(
  in X 8 16
  in W1 16 16
  in W2 16 16
  A = matmul X W1
  B = matmul X W2
  Y = add A B
  out Y)";

// Attention over 64 keys and its split into two key blocks (split_key_axis):
// SplitAttention(tail) is the shared prefix (key and value slices, the
// blocks' scaled scores) followed by `tail`, which merges them into Y.
const char kSplitAttention[] = R"(
  in Q 4 8
  in K 64 8
  in V 64 8
  S = matmul Q K transpose_b=true
  Ss = mul S scalar=0.25
  P = softmax Ss
  Y = matmul P V
  out Y)";
std::string SplitAttention(const std::string& tail) {
  return "in Q 4 8\nin K 64 8\nin V 64 8\n"
         "K0 = slice K axis=0 start=0 end=32\nK1 = slice K axis=0 start=32 end=64\n"
         "S0 = matmul Q K0 transpose_b=true\nS1 = matmul Q K1 transpose_b=true\n"
         "Ss0 = mul S0 scalar=0.25\nSs1 = mul S1 scalar=0.25\n"
         "V0 = slice V axis=0 start=0 end=32\nV1 = slice V axis=0 start=32 end=64\n" +
         tail + "\nout Y";
}
// exp(Ss_b - shift_b), then the numerators and denominators merged by `merge`.
std::string SplitTail(const std::string& shifts, const std::string& merge) {
  return shifts +
         "\ne0 = exp z0\ne1 = exp z1\nn0 = matmul e0 V0\nn1 = matmul e1 V1\n"
         "d0 = reduce_sum e0\nd1 = reduce_sum e1\nnum = add n0 n1\n" +
         merge;
}
const char kSharedMax[] =
    "m0 = reduce_max Ss0\nm1 = reduce_max Ss1\nm = maximum m0 m1\nz0 = sub Ss0 m\n"
    "z1 = sub Ss1 m";
const char kMerge[] = "den = add d0 d1\nY = div num den";

// layer_norm(X, G, B) @ W and its deferred forms (defer_layer_norm).
const char kLayerNormLinear[] = R"(
  in X 8 16
  in G 1 16
  in B 1 16
  in W 16 8
  N = layer_norm X G B eps=1e-5
  Y = matmul N W
  out Y)";
std::string DeferredLayerNorm(const std::string& tail) {
  return "in X 8 16\nin G 1 16\nin B 1 16\nin W 16 8\nmu = reduce_mean X\nd = sub X mu\n"
         "d2 = square d\nv = reduce_mean d2\nve = add v scalar=1e-5\nr = rsqrt ve\n"
         "XG = mul X G\nT = matmul XG W\nBW = matmul B W\n" +
         tail + "\nout Y";
}

struct Mutation {
  const char* name;
  std::string original;
  std::string mutated;
};

std::vector<Mutation> Mutations() {
  const std::string ok_tail = "XG = mul X G\nT = matmul XG W\nY = mul T r";
  return {
      {"deferred norm: dropped epsilon", kRmsNormLinear,
       "in X 8 64\nin G 64\nin W 64 64\nsq = square X\nms = reduce_mean sq\nr = rsqrt ms\n"
       "XG = mul X G\nT = matmul XG W\nY = mul T r\nout Y"},
      {"deferred norm: eps 1e-5 instead of 1e-6", kRmsNormLinear,
       Deferred("reduce_mean", "1e-5", "rsqrt", ok_tail)},
      {"deferred norm: sum instead of mean (missing 1/K)", kRmsNormLinear,
       Deferred("reduce_sum", "1e-6", "rsqrt", ok_tail)},
      {"deferred norm: wrong reduction axis", kRmsNormLinear,
       "in X 8 64\nin G 64\nin W 64 64\nsq = square X\nms = reduce_mean sq axis=0\n"
       "me = add ms scalar=1e-6\nr = rsqrt me\nN = mul X r\nS = mul N G\nY = matmul S W\n"
       "out Y"},
      {"deferred norm: missing row scale", kRmsNormLinear,
       "in X 8 64\nin G 64\nin W 64 64\nXG = mul X G\nY = matmul XG W\nout Y"},
      {"deferred norm: sqrt instead of rsqrt", kRmsNormLinear,
       Deferred("reduce_mean", "1e-6", "sqrt", ok_tail)},
      {"deferred norm: weight moved to the output columns", kRmsNormLinear,
       Deferred("reduce_mean", "1e-6", "rsqrt", "Xr = mul X r\nT = matmul Xr W\nY = mul T G")},
      {"transposed operand of the same shape", kRmsNormLinear,
       "in X 8 64\nin G 64\nin W 64 64\nN = rms_norm X eps=1e-6\nS = mul N G\n"
       "Y = matmul S W transpose_b=true\nout Y"},
      {"softmax without its division", kAttention,
       "in S 8 16\nin V 16 8\nSs = mul S scalar=4.0\nm = reduce_max Ss\nz = sub Ss m\n"
       "e = exp z\nY = matmul e V\nout Y"},
      {"deferred softmax divided by the column sum", kAttention,
       "in S 8 16\nin V 16 8\nSs = mul S scalar=4.0\nm = reduce_max Ss\nz = sub Ss m\n"
       "e = exp z\nT = matmul e V\ns = reduce_sum e axis=0\ns1 = reduce_sum s\n"
       "Y = div T s1\nout Y"},
      {"deferred softmax divided by the rowsum of the logits", kAttention,
       "in S 8 16\nin V 16 8\nSs = mul S scalar=4.0\nm = reduce_max Ss\nz = sub Ss m\n"
       "e = exp z\nT = matmul e V\ns = reduce_sum Ss\nY = div T s\nout Y"},
      {"softmax shifted by a column constant (not a row constant)", kAttention,
       "in S 8 16\nin V 16 8\nSs = mul S scalar=4.0\nm = reduce_max Ss axis=0\nz = sub Ss m\n"
       "e = exp z\ns = reduce_sum e\nP = div e s\nY = matmul P V\nout Y"},
      {"softmax scale 4.0000001 instead of 4", kAttention,
       "in S 8 16\nin V 16 8\nSs = mul S scalar=4.0000001\nP = softmax Ss\nY = matmul P V\n"
       "out Y"},
      {"shared operand: slices swapped", kGatedMlp,
       Fused("W1 W2", "start=32 end=64", "start=0 end=32", "G = silu A\nY = mul G B")},
      {"shared operand: off-by-one slice edge", kGatedMlp,
       Fused("W1 W2", "start=1 end=33", "start=32 end=64", "G = silu A\nY = mul G B")},
      {"shared operand: weights concatenated in the wrong order", kGatedMlp,
       Fused("W2 W1", "start=0 end=32", "start=32 end=64", "G = silu A\nY = mul G B")},
      {"gated mlp: activation on the wrong branch", kGatedMlp,
       Fused("W1 W2", "start=0 end=32", "start=32 end=64", "G = silu B\nY = mul G A")},
      {"gated mlp: gelu instead of silu", kGatedMlp,
       Fused("W1 W2", "start=0 end=32", "start=32 end=64", "G = gelu A\nY = mul G B")},
      {"one-pass variance: wrong sign", kLayerNorm,
       "in X 8 16\nmu = reduce_mean X\nd = sub X mu\nx2 = square X\nex2 = reduce_mean x2\n"
       "mu2 = square mu\nv = add ex2 mu2\nve = add v scalar=1e-5\nr = rsqrt ve\nY = mul d r\n"
       "out Y"},
      {"layer norm: add instead of sub of the mean", kLayerNorm,
       "in X 8 16\nmu = reduce_mean X\nd = add X mu\nd2 = square d\nv = reduce_mean d2\n"
       "ve = add v scalar=1e-5\nr = rsqrt ve\nY = mul d r\nout Y"},
      {"layer norm: variance over the wrong axis", kLayerNorm,
       "in X 8 16\nmu = reduce_mean X\nd = sub X mu\nd2 = square d\nv = reduce_mean d2 axis=0\n"
       "ve = add v scalar=1e-5\nr = rsqrt ve\nY = mul d r\nout Y"},
      {"association in the wrong order", kChain,
       "in X 8 16\nin U 16 16\nin P 16 16\nPU = matmul P U\nY = matmul X PU\nout Y"},
      {"factoring a sum of matmuls into a difference", kTwoMatmuls,
       "in X 8 16\nin W1 16 16\nin W2 16 16\nW = sub W1 W2\nY = matmul X W\nout Y"},
      {"split attention: blocks shifted by their own maxima", kSplitAttention,
       SplitAttention(SplitTail(
           "m0 = reduce_max Ss0\nm1 = reduce_max Ss1\nz0 = sub Ss0 m0\nz1 = sub Ss1 m1", kMerge))},
      {"split attention: merge drops one block's denominator", kSplitAttention,
       [] {
         std::string t = SplitAttention(SplitTail(kSharedMax, "Y = div num d0"));
         t.erase(t.find("d1 = reduce_sum e1\n"), std::string("d1 = reduce_sum e1\n").size());
         return t;
       }()},
      {"split attention: value blocks swapped", kSplitAttention,
       absl::StrReplaceAll(
           SplitAttention(SplitTail(kSharedMax, kMerge)),
           {{"n0 = matmul e0 V0\nn1 = matmul e1 V1", "n0 = matmul e0 V1\nn1 = matmul e1 V0"}})},
      {"split attention: first value block off by one", kSplitAttention,
       absl::StrReplaceAll(SplitAttention(SplitTail(kSharedMax, kMerge)),
                           {{"n0 = matmul e0 V0\nn1 = matmul e1 V1",
                             "V0b = slice V axis=0 start=1 end=33\nn0 = matmul e0 V0b\n"
                             "V1b = concat V1 V0 axis=0\nV1c = slice V1b axis=0 start=0 end=32\n"
                             "n1 = matmul e1 V1c"}})},
      {"deferred layer norm: mean correction forgotten", kLayerNormLinear,
       DeferredLayerNorm("U = mul T r\nY = add U BW")},
      {"deferred layer norm: bias projection scaled by the row scale", kLayerNormLinear,
       DeferredLayerNorm("GW = matmul G W\nC = mul mu GW\nU = sub T C\nU2 = add U BW\n"
                         "Y = mul U2 r")},
      {"deferred layer norm: mean corrected with the unweighted column sums", kLayerNormLinear,
       DeferredLayerNorm("SW = reduce_sum W axis=0\nC = mul mu SW\nU = sub T C\nYr = mul U r\n"
                         "Y = add Yr BW")},
      {"scalar merged inexactly (0.1 * 0.3 rounded)",
       "in X 8 16\nA = mul X scalar=0.1\nY = mul A scalar=0.3\nout Y",
       "in X 8 16\nY = mul X scalar=0.03\nout Y"},
  };
}

TEST(MutationSuite, EveryWrongRewriteIsRejected) {
  const std::vector<Mutation> mutations = Mutations();
  ASSERT_GE(mutations.size(), 20u);
  int numeric_also = 0;
  for (const Mutation& m : mutations) {
    SCOPED_TRACE(m.name);
    const Graph original = FromText(m.original);
    const Graph mutated = FromText(m.mutated);
    const FingerprintResult fp = CheckFingerprintEquivalent(original, mutated);
    EXPECT_FALSE(fp.equivalent) << "the fingerprint accepted a wrong rewrite";
    const bool numeric_match = NumericMatch(original, mutated);
    numeric_also += numeric_match ? 0 : 1;
    std::printf("[mutation] %-60s rejected by: fingerprint%s (%s)\n", m.name,
                numeric_match ? " only (numerically within tolerance)" : " and numeric check",
                fp.message.c_str());
  }
  std::printf("[mutation] %zu mutations: %zu rejected by the fingerprint, %d also numerically\n",
              mutations.size(), mutations.size(), numeric_also);
}

// Positive controls: correct rewrites the fingerprint must accept, including
// softmax shifted by ANY row constant (the max, the row sum, or nothing).
TEST(MutationSuite, CorrectRewritesAreAccepted) {
  const std::vector<std::pair<std::string, std::string>> correct = {
      {kAttention,
       "in S 8 16\nin V 16 8\nSs = mul S scalar=4.0\nm = reduce_max Ss\nz = sub Ss m\n"
       "e = exp z\nT = matmul e V\ns = reduce_sum e\nY = div T s\nout Y"},
      {kAttention,
       "in S 8 16\nin V 16 8\nSs = mul S scalar=4.0\nm = reduce_sum Ss\nz = sub Ss m\n"
       "e = exp z\nT = matmul e V\ns = reduce_sum e\nY = div T s\nout Y"},
      {kAttention,
       "in S 8 16\nin V 16 8\nSs = mul S scalar=4.0\ne = exp Ss\nT = matmul e V\n"
       "s = reduce_sum e\nY = div T s\nout Y"},
      {kRmsNormLinear,
       Deferred("reduce_mean", "1e-6", "rsqrt", "XG = mul X G\nT = matmul XG W\nY = mul T r")},
      {kChain, "in X 8 16\nin U 16 16\nin P 16 16\nUP = matmul U P\nY = matmul X UP\nout Y"},
      {kGatedMlp, Fused("W1 W2", "start=0 end=32", "start=32 end=64", "G = silu A\nY = mul G B")},
      {kLayerNorm,
       "in X 8 16\nmu = reduce_mean X\nd = sub X mu\nx2 = square X\nex2 = reduce_mean x2\n"
       "mu2 = square mu\nv = sub ex2 mu2\nve = add v scalar=1e-5\nr = rsqrt ve\nY = mul d r\n"
       "out Y"},
      {kTwoMatmuls, "in X 8 16\nin W1 16 16\nin W2 16 16\nW = add W1 W2\nY = matmul X W\nout Y"},
      // Attention split over its keys, merged with the shared maximum (what
      // split_key_axis emits), with an arbitrary row constant instead of a
      // maximum, and with no shift at all: the shift cancels in the field.
      {kSplitAttention, SplitAttention(SplitTail(kSharedMax, kMerge))},
      {kSplitAttention,
       SplitAttention(SplitTail("m = reduce_mean Ss0\nz0 = sub Ss0 m\nz1 = sub Ss1 m", kMerge))},
      {kSplitAttention,
       SplitAttention(SplitTail("z0 = mul Ss0 scalar=1.0\nz1 = mul Ss1 scalar=1.0", kMerge))},
      {kLayerNormLinear, DeferredLayerNorm("GW = matmul G W\nC = mul mu GW\nU = sub T C\n"
                                           "Yr = mul U r\nY = add Yr BW")},
  };
  for (const auto& [a, b] : correct) {
    const FingerprintResult fp = CheckFingerprintEquivalent(FromText(a), FromText(b));
    EXPECT_TRUE(fp.equivalent) << fp.message << "\n" << b;
    EXPECT_LT(fp.false_pass_bound, 1e-20);
  }
}

}  // namespace
}  // namespace yirage::core
