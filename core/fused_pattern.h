// Op chains that GPU backends run as one hand-structured fused kernel rather
// than through the generic row-group emitter: the search must know them (to
// cost them and to keep one schedule per chain, since their only knobs are
// chosen by the backend), and the backends recognize them the same way.
// Structure only: a backend still checks shapes and dtypes and falls back to
// its generic kernels when they do not fit.
#ifndef YIRAGE_CORE_FUSED_PATTERN_H_
#define YIRAGE_CORE_FUSED_PATTERN_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "core/graph.h"

namespace yirage::core {

// matmul(Q, K) [-> mul(., scalar)] -> softmax(last axis) -> matmul(., V),
// each op feeding the next: fused attention.
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

// The most rows of X the GPU backends' weights-to-registers form of a
// streamed matmul takes (backends/cuda/cuda_streamed_matmul.h); the search
// only offers that form's variants to chains within it.
inline constexpr int64_t kStreamedRegistersMaxRows = 32;

// True when `ops` is one of the chains above.
bool IsFusedGpuChain(const Graph& graph, const std::vector<int>& ops);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_FUSED_PATTERN_H_
