// Streamed matmuls for the CUDA backend (core/fused_pattern.h
// StreamedMatmulMatch): decode-shaped GEMMs (M <= 64 rows) whose weights are
// read from memory exactly once, with the prologue (rms_norm row scale,
// column scales) and epilogue (silu(X W1) * (X W2), the low-rank branch
// (X A) B) fused.
//
// Block: 4 warps along its 64 output columns (16 each) of every weight,
// times 1, 2 or 4 along its rows; grid (N / 64, splits), each split a K
// range. The block streams 64-row chunks of
// X and of every weight through a `stages`-deep cp.async pipeline in shared
// memory and multiplies them with mma.m16n8k16 (float accumulation, operands
// by ldmatrix). Column scales multiply the staged X chunk; the rms row
// scale, 1 / sqrt(mean(X^2) + eps), is applied after the matmul (deferred
// normalization: the norm's reduction runs in the matmul's pass). The
// low-rank T = X A (rank <= 64) is accumulated in the same pass and
// multiplied by the block's B columns at the end. With one split the block
// applies the epilogue and stores Y; with more, the splits of a column tile
// are one thread-block cluster (sm_90) that adds its partial tiles through
// distributed shared memory, or each writes float partial sums (and its
// sums of squares) and a combine kernel adds the splits. Weights stream
// under an L2 evict-first policy (read once). The kWgmma form (sm_90, X
// padded to 64 rows, no low-rank branch, no prologue) keeps that pipeline but has one
// warpgroup multiply each staged chunk with wgmma.mma_async, X and the
// weights read by the tensor cores from shared memory (no ldmatrix, no
// operand registers), W1 and W2 as one 128-column operand.
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_STREAMED_MATMUL_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_STREAMED_MATMUL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_codegen.h"
#include "core/fused_pattern.h"
#include "core/graph.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::backends::cuda {

// The most rows of X the weights-to-registers form takes.
inline constexpr int64_t kStreamedRegistersMaxRows = 32;

struct StreamedMatmulPlan {
  // StreamedMatmulSchedule.Form values (FORM_SHARED_COMBINE: kShared, splits
  // summed by a combine kernel).
  enum Form { kShared = 1, kRegisters = 2, kWgmma = 4 };
  core::StreamedMatmulMatch match;
  Form form = kShared;
  int warps = 4;  // warps per block (kShared: 4, 8 or 16: 4 along N times 1-4 along M)
  int depth = 2;  // kRegisters: 16-row steps loaded ahead per warp
  int64_t m = 0, k = 0, n = 0, r = 0;
  int m_tiles = 1;  // 16-row tiles: 1, 2 or 4
  int splits = 1;
  bool cluster = false;     // the splits are one cluster, summed in shared memory
  int64_t launch_smem = 0;  // kRegisters: dynamic shared memory the launch asks for
  int stages = 4;
  yirage::v1::DType dtype = yirage::v1::FLOAT16;
};

// The plan for `ops` on `target`, or nullopt when the chain or its shapes
// don't fit (16-bit X and weights of one dtype, X [M, K] with M <= 64, K a
// multiple of 64 (of 64 * splits), N a multiple of 64, rank a multiple of 16
// up to 64, column scales [K]). `schedule.streamed_matmul()` picks the form
// (FORM_AUTO: kRegisters where it applies, else kShared; FORM_SHARED_COMBINE:
// kShared with its K splits summed by a combine kernel rather than in a
// cluster; FORM_WGMMA: kWgmma where it applies, else as FORM_AUTO: the
// caller refuses an explicit form the plan did not get), split_k (when it
// divides K so, else automatic: enough blocks to fill every SM once; on
// sm_90 a 64-row kShared plan takes as many splits as one cluster per
// column tile allows in one wave), stages (kShared: pipeline depth;
// kRegisters: steps loaded ahead) and warps (kRegisters: per block;
// kShared: 4, 8 or 16, 4 along the block's columns).
std::optional<StreamedMatmulPlan> PlanStreamedMatmul(const core::Graph& graph,
                                                     const std::vector<int>& ops,
                                                     const std::vector<int>& outputs,
                                                     const CudaTarget& target,
                                                     const yirage::v1::Schedule& schedule);

// Float workspace bytes the plan needs (0 with one split), and bytes of
// zero-initialized tile counters (kRegisters with splits; the kernel leaves
// them zero).
int64_t StreamedMatmulWorkspaceBytes(const StreamedMatmulPlan& plan);
int64_t StreamedMatmulCounterBytes(const StreamedMatmulPlan& plan);

// Emits the kernels `name` (and `name`_combine for kShared with splits) into
// `source` and their launches: short kernels that instantiate
// streamed_matmul.cuh's templates, after that header and the wgmma ones
// (all guarded, so that a second streamed matmul in the same source repeats
// them harmlessly). The inputs are graph inputs (buffer id = tensor id);
// `out_arg`/`out_type` are the output's buffer id and C type;
// `workspace_arg`/`counter_arg` the buffers sized above (-1 when 0 bytes).
void EmitStreamedMatmul(const StreamedMatmulPlan& plan, const std::string& name, int out_arg,
                        const std::string& out_type, int workspace_arg, int counter_arg,
                        std::string* source, std::vector<KernelLaunch>* launches);

// A one-line summary of the plan's form and knobs, for source comments.
std::string StreamedMatmulSummary(const StreamedMatmulPlan& plan);

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_STREAMED_MATMUL_H_
