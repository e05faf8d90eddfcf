// Op chains that backends run as one hand-structured fused kernel rather
// than through the generic row-group emitter: the patterns of backend kernel
// families (yirage.v1.FamilyPattern; core/kernel_family.h matches a family
// through them). Structure only: a backend still checks shapes and dtypes,
// and under its default knobs runs its generic kernels when they do not fit.
#ifndef YIRAGE_CORE_FUSED_PATTERN_H_
#define YIRAGE_CORE_FUSED_PATTERN_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "core/graph.h"

namespace yirage::core {

// S = Q @ K [* scalar]; P = softmax(S, last axis); O = P @ V (V not
// transposed), each op feeding the next, S and P read only inside the chain,
// Q, K and V of rank >= 2 with equal lead dims, or K and V (equal to each
// other) 1 or missing in Q's innermost lead dims (grouped queries: those
// dims fold into the query rows, `m`): fused attention.
struct AttentionMatch {
  int q = -1, k = -1, v = -1;                     // tensor ids
  int out = -1;                                   // the tensor O
  bool transpose_k = false;                       // K given as [..., N, D]
  double scale = 1.0;                             // S's scalar factor (1 = none)
  int64_t batch = 1;                              // product of K's lead dims
  int64_t m = 0, n = 0, d = 0, dv = 0;            // m: Q's rows, times its grouped lead dims
  yirage::v1::DType dtype = yirage::v1::FLOAT16;  // Q's
};

// The match for `ops` (op ids of one kernel, in graph order), or nullopt.
std::optional<AttentionMatch> MatchAttention(const Graph& graph, const std::vector<int>& ops);
bool IsAttentionChain(const Graph& graph, const std::vector<int>& ops);

// A matmul whose weights stream from memory once, with its prologue and
// epilogue fused (the decode-shaped GEMMs of LLM layers):
//   plain:     Y = X' @ W
//   gated:     Y = silu(X' @ W1) * (X' @ W2)
//   low rank:  Y = X @ W + (X @ A) @ B
// where X' is X, or rms_norm(X [, g]) [* G] (the norm's row scale applied
// after the matmul, its weight and G as column scales of X).
struct StreamedMatmulMatch {
  enum class Epilogue { kPlain, kSiluMul, kLowRankAdd };
  Epilogue epilogue = Epilogue::kPlain;
  int x = -1;                   // tensor ids
  int w1 = -1, w2 = -1;         // w2: gated only
  int a = -1, b = -1;           // low rank only
  std::vector<int> col_scales;  // multiply X's columns (rms_norm weight, G)
  bool rms = false;             // X's rows are rms-normalized
  double eps = 0;
  int out = -1;
};

// The match for `ops` (op ids of one kernel, in graph order), or nullopt.
// Every intermediate must be consumed only inside the chain.
std::optional<StreamedMatmulMatch> MatchStreamedMatmul(const Graph& graph,
                                                       const std::vector<int>& ops);

// A GEMM with its elementwise epilogue (the KernelBench level-2 shape):
//   C = e_n(... e_1(A @ B))
// A [..., M, K], B [K, N] or (transpose_b) [N, K], or both with the same
// lead dims (a batch), every e_i one elementwise op
// of the previous value and, for a binary op, a constant, a row vector
// ([N] or [1, N], broadcast over the rows) or a tensor of C's shape.
// The gated form (SwiGLU, GEGLU and their kin) has two products of the same
// A, each through its own chain of unary or constant steps, joined by one
// binary op before the epilogue:
//   C = e_n(... e_1(join(g_k(... g_1(A @ B)), u_l(... u_1(A @ B2)))))
// Either operand tensor may be an earlier kernel's output.
struct GemmMatch {
  struct Step {
    enum class Operand { kNone, kScalar, kRow, kFull };
    OpType type = OpType::kAdd;
    Operand operand = Operand::kNone;
    int tensor = -1;          // kRow / kFull: the tensor id
    double scalar = 0;        // kScalar
    bool value_first = true;  // binary: the running value is the first operand
    bool gelu_tanh = false;
  };
  int a = -1, b = -1;  // tensor ids
  bool transpose_b = false;
  // A batch of `batch` matmuls of M x K times K x N, each operand's
  // matrices consecutive. A [..., M, K] with a 2-D B is one matmul whose M
  // is the product of A's dims but the last.
  int64_t batch = 1;
  int64_t m = 0, n = 0, k = 0;
  int b2 = -1;                  // gated: the second B (B's shape), else -1
  std::vector<Step> gate, up;   // gated: the steps on A @ B and on A @ B2
  OpType join = OpType::kMul;   // gated: the binary op joining the two
  bool join_gate_first = true;  // gated: A @ B's side is its first operand
  std::vector<Step> epilogue;
  int out = -1;
};

// The match for `ops` (op ids of one kernel, in graph order), or nullopt.
// Every intermediate must be consumed only by the next op of the chain.
std::optional<GemmMatch> MatchGemm(const Graph& graph, const std::vector<int>& ops);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_FUSED_PATTERN_H_
