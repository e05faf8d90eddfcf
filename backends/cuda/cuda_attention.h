// Fused attention for the CUDA backend: a kernel whose ops are
//   S = Q @ K [* scale]; P = softmax(S, last axis); O = P @ V
// (16-bit Q, K, V graph inputs) becomes a flash-attention kernel on tensor
// cores with the keys split across blocks ("split-KV" decode). Block (q tile
// of 16 rows per warp, batch, split): warp w owns 16 query rows; S, P and O
// stay in registers in the mma.m16n8k16 layouts (fp32 accumulation,
// operands loaded with ldmatrix, P packed to 16-bit straight from S's
// registers); K and V tiles of 64 keys stream through a multi-stage cp.async
// pipeline. The softmax is online: a running row max m and sum l, O
// rescaled by exp(m_old - m_new) per tile. The splits' unnormalized O with
// m and l merge as
//   O = sum_s e^(m_s - m*) O_s / sum_s e^(m_s - m*) l_s,
// inside a thread-block cluster through distributed shared memory (sm_90+),
// or through a global workspace and a merge kernel. With one split the
// kernel normalizes and stores O itself. S and P never reach memory.
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_ATTENTION_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_ATTENTION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_codegen.h"
#include "core/fused_pattern.h"
#include "core/graph.h"

namespace yirage::backends::cuda {

// The chain's tensors and shapes (Q, K and V graph inputs here).
using AttentionPattern = core::AttentionMatch;

// The attention shape `ops` (op ids of one kernel, in graph order) computes,
// or nullopt when it is not exactly that chain, when S or P is needed outside
// the kernel (`outputs`: the tensors the kernel must write), or when the
// shapes don't fit the kernel (16-bit inputs of equal dtype, identical lead
// dims, D and DV multiples of 16 up to 128; K given as [.., D, N]: N a
// multiple of 8).
std::optional<AttentionPattern> MatchAttention(const core::Graph& graph,
                                               const std::vector<int>& ops,
                                               const std::vector<int>& outputs);

// How one fused attention kernel runs: query rows per block (warp_rows per
// row warp), key groups (warps that split the block's keys; their partial
// rows merge in shared memory), the depth of the K/V copy pipeline, and the
// key splits across blocks with how their partial results merge.
struct AttentionConfig {
  int warp_rows = 16;  // 16 or 32 (two 16-row tiles sharing each K / V fragment)
  int row_warps = 4;   // 1 to 16: 32 to 256 query rows per block
  int key_groups = 1;  // 1, 2 or 4: warps per block = row_warps * key_groups <= 16 (8 for 32 rows)
  int stages = 4;      // pipeline steps of key_groups 64-key tiles (2..8)
  int splits = 1;      // key splits (blocks along grid z)
  // Splits merge inside a thread-block cluster of the `splits` blocks of
  // one query tile (sm_90+, at most 8 splits, block rows a multiple of the
  // splits). Otherwise (splits > 1) they go through a global workspace and a
  // merge kernel.
  bool cluster_merge = false;
  // In the cluster merge, every warp pushes its partial rows (each key
  // group's) into the shared memory of the block that merges them, past
  // the ring, and one cluster barrier follows; otherwise the key groups
  // merge in shared memory first and each block reads the other blocks'
  // partial rows after the barrier, with a second barrier before exit.
  bool push_merge = false;
  // Splits merge inside the kernel through the workspace: each block
  // leaves its partial rows there, waits at its query tile's counter for the
  // other splits (the launch is cooperative, so they are co-resident) and
  // merges its share of the rows. At most 16 splits.
  bool spin_merge = false;
  // One warpgroup (4 row warps of 16 rows, one key group) multiplies with
  // wgmma (sm_90, D = DV = 64): S = Q K from shared memory, O += P V with P
  // from the S registers; Q, K and V tiles 128-byte swizzled.
  bool wgmma = false;
  // The decode form's K and V tiles arrive by TMA (sm_90, D and DV
  // multiples of 64): 64 x 64 boxes, 128-byte swizzled, that one thread
  // requests a step on the stage's mbarrier.
  bool tma = false;
  // The prefill form (attention_prefill.cuh): row_warps / 4 warpgroups of
  // wgmma (sm_90), each 64 query rows, over every key (one split) in tiles
  // of key_tile keys through a `stages`-deep ring; `overlap` (three or more
  // stages) issues each step's S behind the last step's O += P V.
  bool prefill = false;
  int key_tile = 64;
  bool overlap = false;
  // The warp-specialized prefill form (attention_prefill_ws.cuh): a producer
  // warpgroup and two consumer warpgroups (row_warps 8: 128 query rows a
  // tile), persistent: `blocks` = min(sm_count, tiles) blocks, each over
  // tiles blockIdx.x, + gridDim.x, ...
  bool warp_specialized = false;
  int64_t blocks = 0;
};

// The configuration of `pattern`'s kernel on `target` under `schedule`
// (the kernel's AttentionSchedule):
// warp_rows() (32; else 16), block_rows() (16, 32, 64, 128 or 256, at least the
// warp's rows; else 64), warps() (row warps times 1, 2 or 4 key groups, at
// most 16, 8 with 32-row warps; else one key group), stages() (2..8; else
// 4), split_k() (0 = automatic: the fewest splits, powers of two, that fill
// the SMs once at the kernel's occupancy; at most 8, merged in a cluster,
// where the grid then stays within one block per SM), merge()
// (MERGE_WORKSPACE; MERGE_CLUSTER_PULL: a cluster merge that pulls rows, not
// pushes them; MERGE_IN_KERNEL: the in-kernel merge, where the grid fits the chip at once; the
// automatic splits take it where a cluster would merge fewer splits than
// fill the chip). warp_rows() 64 asks for the warpgroup (wgmma) form where
// it applies (sm_90, D = DV = 64): 64-row blocks of 4 warps, one key group;
// elsewhere it is 16 (the caller refuses that request). tma() asks for the
// TMA copies where they apply (sm_90, D and DV multiples of 64); elsewhere
// the result's `tma` is false and the caller refuses the request. A requested split that does not
// leave whole pipeline steps becomes
// 1. The pipeline gets shallower where the chip's shared memory per block
// cannot hold it; the cluster merge pushes rows where the shared memory
// holds the receiving rows beside the ring.
// prefill() asks for the prefill form: block_rows() 64, 128 or 192 (else
// 128), key_tile() 64 or 128 (else 64), stages() 2..8 (else 2, fewer where
// shared memory runs out), overlap(). warp_specialized() asks for the
// warp-specialized prefill form (128 rows a tile; block_rows() and overlap()
// do not apply; stages() 2..8, else 2, fewer where shared memory runs out).
// Where the form does not apply (not
// sm_90, K not given as [.., N, D], D or DV not a multiple of 64 up to 128,
// keys not whole tiles) the result's `prefill` is false and the caller
// refuses the request.
AttentionConfig PlanAttention(const AttentionPattern& pattern, const CudaTarget& target,
                              const yirage::v1::AttentionSchedule& schedule);

// Emits the kernel (named `name`; with a workspace merge also `name`_merge)
// into `source` and its launches. Arguments are buffer ids (see
// cuda_codegen.h): the three inputs, the output (`out_type` is its C type:
// the graph output's dtype, or float for a plan buffer) and, when
// AttentionWorkspaceBytes() > 0, a float workspace of that size.
void EmitAttention(const AttentionPattern& pattern, const AttentionConfig& config,
                   const std::string& name, int q_arg, int k_arg, int v_arg, int out_arg,
                   const std::string& out_type, int workspace_arg, std::string* source,
                   std::vector<KernelLaunch>* launches);

int64_t AttentionWorkspaceBytes(const AttentionPattern& pattern, const AttentionConfig& config);

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_ATTENTION_H_
