// The GEMM family for the CUDA backend (core/fused_pattern.h GemmMatch): a
// matmul of any M, N and K with its elementwise epilogue fused, on
// backends/cuda/gemm_sm90.cuh (TMA, wgmma, warp-specialized, persistent;
// sm_90) or, where the schedule asks for mma_sync, gemm_sm80.cuh
// (cp.async, ldmatrix, mma.sync, a block a tile; sm_80 on). The planner is a pure function of the
// chain, the schedule and the target; the emitter writes a short extern "C" kernel that
// instantiates the template with an epilogue functor made from the chain's ops.
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_GEMM_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_GEMM_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_codegen.h"
#include "core/fused_pattern.h"
#include "core/graph.h"
#include "yirage/v1/backend.pb.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::backends::cuda {

struct GemmPlan {
  core::GemmMatch match;
  yirage::v1::DType dtype = yirage::v1::FLOAT16;  // A, B and C (FLOAT32: TF32 products)
  int tile_m = 128, tile_n = 256, stages = 4;
  bool pingpong = false;
  int cluster_m = 2, cluster_n = 1;
  int group = 8;            // cluster rows a group of the tile order
  int splits = 1;           // split-K: K ranges a split tile...
  int64_t split_tiles = 0;  // ...of the last cluster tiles (0 without split-K)
  int64_t blocks = 0;       // the persistent grid
  int64_t smem_bytes = 0;   // dynamic shared memory (yr_gemm_sm90_cfg::smem_bytes)
  // The sm_80 form (pingpong, clusters and split-K unused): its warps along
  // M and N, each a (tile_m / warps_m) x (tile_n / warps_n) piece.
  bool mma_sync = false;
  int warps_m = 0, warps_n = 0;
};

// The chains the family takes (cuda_families.h): 16-bit inputs of one dtype
// (graph inputs or earlier kernels' outputs, which then pass between the
// kernels in that dtype), more rows than the streamed matmul takes, K a
// multiple of 8 and, for B given as [K, N], N of 8 (TMA: row strides in
// multiples of 16 bytes); batches of matmuls too.
yirage::v1::MatchLimits GemmLimits();
// float32 chains through TF32 tensor cores (the family "gemm_tf32"): B given
// as [N, K] (wgmma reads tf32 operands K-major), the job's rtol at least
// kTf32MinRtol, K a multiple of 4.
yirage::v1::MatchLimits GemmTf32Limits();
// The Hopper form's schedule points' limits beside the family's: in a batch
// with B given as [.., K, N], K a multiple of a stage's K rows of `dtype`
// (TMA reads B in such blocks; a K tail would read the next product's rows).
yirage::v1::MatchLimits GemmSm90PointLimits(yirage::v1::DType dtype);

// The plan for `ops` on `target` under `knobs` (unset: the backend's
// choice: 128 x 256 tiles, 4 stages, 2-block clusters along M), or nullopt
// when the chain, its shapes or the knobs do not fit: sm_90, the chain
// within GemmLimits() or GemmTf32Limits(), its output `out_dtype` (the
// kernel stores A's dtype), tiles of 128 x 128 (ping-pong or cooperative), 128 x 256 or
// 256 x 128 (cooperative), clusters of at most 2 blocks, the ring within
// the target's shared memory, and at most one K range a K block (a
// stage's 128-byte row of K: 64 16-bit elements, 32 floats); a batch's
// rows, columns and K rows below 2^31 in all, and with B given as [K, N],
// K a multiple of a stage's. A batch's tiles are the units of all its
// products.
// A cluster along an axis with one tile turns to the other axis (or to
// one block): its second block would have nothing to compute. Split-K cuts
// the cluster tiles of the last, partial wave over the multiprocessors
// (all of them where there are fewer than fit at once) into K ranges: the
// knobs' split_k of them, or by default as many as the wave has room for,
// each of at least 16 K blocks.
// knobs.mma_sync: the sm_80 form, on sm_80 and later, for 16-bit chains:
// tiles of 64 or 128 rows by 64, 128 or 256 columns (warps of 64 x 64
// pieces, 32 where the tile is 64 along an axis; gated chains need the
// 64-wide pieces, tile_n 128 or 256), at least 2 stages within the
// target's shared memory; a block a tile of each product, at most
// 2^31 - 1 blocks. Split-K there cuts every tile into the knobs' split_k
// ranges or, by default where the tiles are fewer than the
// multiprocessors, as many as fill them, each of at least 16 K blocks.
std::optional<GemmPlan> PlanGemm(const core::Graph& graph, const std::vector<int>& ops,
                                 yirage::v1::DType out_dtype, const CudaTarget& target,
                                 const yirage::v1::GemmSchedule& knobs);

// The sm_80 form's dynamic shared memory (yr_gemm_sm80_cfg::smem_bytes:
// the ring, then a word) and threads (a warp a 64 x 64 piece of the tile,
// 32 along an axis where the tile is 64).
int64_t GemmSm80SmemBytes(int tile_m, int tile_n, int stages);
int GemmSm80Threads(int tile_m, int tile_n);

// Split-K's workspace (partial sums: a float a split block tile's element
// a K range) and counters (two a split block tile, zero before the first
// launch); 0 without split-K.
int64_t GemmWorkspaceBytes(const GemmPlan& plan);
int64_t GemmCounterBytes(const GemmPlan& plan);

// Emits the kernel `name` into `source` (after the headers it needs, guarded
// so a second GEMM in the same source repeats them harmlessly) and its
// launch: tensor maps of A and B (and B2, gated), then C (buffer
// `out_arg`), every epilogue operand, then with split-K the workspace and
// counter buffers; the sm_80 form: C, every epilogue operand, A, B (and
// B2, gated), then with split-K the workspace and counter buffers.
// `read_arg`: the buffer id a kernel reads tensor t from (a graph input's,
// or an earlier kernel's output in its own dtype).
// REQUIRES: where plan.splits > 1, buffers `workspace_arg` and
// `counter_arg` of GemmWorkspaceBytes and GemmCounterBytes, the counters
// zero before the first launch.
void EmitGemm(const GemmPlan& plan, const core::Graph& graph, const std::string& name, int out_arg,
              int workspace_arg, int counter_arg, const std::function<int(int)>& read_arg,
              std::string* source, std::vector<KernelLaunch>* launches);

// A one-line summary of the plan's knobs, for source comments.
std::string GemmSummary(const GemmPlan& plan);

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_GEMM_H_
