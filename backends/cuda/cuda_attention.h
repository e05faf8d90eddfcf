// Fused attention for the CUDA backend: a kernel whose ops are
//   S = Q @ K [* scale]; P = softmax(S, last axis); O = P @ V
// (16-bit Q, K, V graph inputs) becomes a flash-attention kernel on tensor
// cores with the keys split across blocks ("split-KV" decode). Block (q tile
// of 64 rows, batch, split): warp w owns 16 query rows; S, P and O stay in
// registers in the mma.m16n8k16 layouts (fp32 accumulation, operands loaded
// with ldmatrix, P packed to 16-bit straight from S's registers); K and V
// tiles of 64 keys stream through a two-stage cp.async pipeline. The softmax
// is online: a running row max m and sum l, O rescaled by exp(m_old - m_new)
// per tile. Each split writes its unnormalized O with m and l to a
// workspace, and a merge kernel combines them:
//   O = sum_s e^(m_s - m*) O_s / sum_s e^(m_s - m*) l_s.
// With one split the kernel normalizes and stores O itself. S and P never
// reach memory.
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_ATTENTION_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_ATTENTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_codegen.h"
#include "core/graph.h"

namespace yirage::backends::cuda {

struct AttentionPattern {
  int q = -1, k = -1, v = -1;  // graph input tensor ids
  int out = -1;                // the tensor O
  bool transpose_k = false;    // K given as [..., N, D]
  double scale = 1.0;          // S's scalar factor (1 = none)
  int64_t batch = 1;           // product of the lead dims
  int64_t m = 0, n = 0, d = 0, dv = 0;
  yirage::v1::DType dtype = yirage::v1::FLOAT16;
};

// The attention shape `ops` (op ids of one kernel, in graph order) computes,
// or nullopt when it is not exactly that chain, when S or P is needed outside
// the kernel (`outputs`: the tensors the kernel must write), or when the
// shapes don't fit the kernel (16-bit inputs of equal dtype, identical lead
// dims, D and DV multiples of 16 up to 128, N a multiple of 64).
std::optional<AttentionPattern> MatchAttention(const core::Graph& graph,
                                               const std::vector<int>& ops,
                                               const std::vector<int>& outputs);

// Key splits for `pattern` on `target`: `requested` when it divides the keys
// into multiples of 64, else (0 = automatic) the smallest power of two that
// gives two blocks per SM, keeping at least two 64-key tiles per split.
int AttentionSplits(const AttentionPattern& pattern, const CudaTarget& target, int requested);

// Emits the kernels (named `name` and `name`_merge) into `source` and their
// launches. Arguments are buffer ids (see cuda_codegen.h): the three inputs,
// the output (`out_type` is its C type: the graph output's dtype, or float
// for a plan buffer) and, with splits > 1, a float workspace of
// AttentionWorkspaceBytes().
void EmitAttention(const AttentionPattern& pattern, int splits, const std::string& name, int q_arg,
                   int k_arg, int v_arg, int out_arg, const std::string& out_type,
                   int workspace_arg, std::string* source, std::vector<KernelLaunch>* launches);

int64_t AttentionWorkspaceBytes(const AttentionPattern& pattern, int splits);

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_ATTENTION_H_
