// Plan -> CUDA C++ (compiled by NVRTC) for the CUDA backend.
//
// Every kernel of a plan becomes one extern "C" __global__ function
// yr_p<plan>_k<kernel>, plus a launch (grid, block, dynamic shared
// memory, arguments) the module replays in order. All shapes are compile-time
// constants. Arguments are device buffers, numbered:
//   [0, num_inputs)                        graph inputs, in their dtype
//   [num_inputs, num_inputs + num_outputs) graph outputs, in their dtype
//   num_inputs + num_outputs + b           the plan's own buffer b (PlanBuffer)
// Tensors passed between kernels live in float32 plan buffers, but for those
// a library call or a GEMM kernel reads or writes (PlanContext::native).
//
// KERNEL_ROW (see core/row_group.h): a thread block owns `BR` rows. The group's
// ops split into two phases:
//  * F ("full row") ops: the ones some in-group op needs whole rows of (the A
//    operand of a matmul, the input of a norm, softmax, reduction or concat),
//    and everything they depend on; norms, softmax, reductions and concat are
//    always F. They are computed over whole rows into float buffers in shared
//    memory (or a global per-block arena when the rows do not fit), one pass
//    per op, with warp/block reductions over the row (a group of threads per
//    row).
//  * T ("tile") ops: matmuls whose output is only consumed elementwise, and the
//    elementwise ops after them. The grid's y dimension walks tiles of tile_n
//    output columns; each block computes its tile of every T matmul (sharing
//    the staged A rows, e.g. the two weights of a gated MLP) and applies the
//    elementwise epilogue in shared memory before storing.
//  Matmuls (SIMT, float accumulate): each thread owns a vector of up to 8
//  output columns (16-byte loads of 16-bit B, float4 of float B) for all the
//  block's rows, and the block's threads split K, adding into the float tile
//  with shared-memory atomics. split_k > 1 also splits every T matmul's K
//  across grid.z blocks: partial tiles are added atomically into a float
//  workspace and the last block of each tile (an atomic counter) runs the
//  epilogue and resets the workspace and counter for the next launch.
//  Tensor cores: when every T matmul has a 16-bit, 2-D, non-transposed B that
//  is a graph input, N a multiple of the tile (128 or 64) and K a multiple of
//  32, and the target is sm_80+, the T matmuls use WMMA 16x16x16 (float
//  accumulate) instead: a block holds all rows (up to 64, padded to 16), its
//  K slice of each distinct A operand staged once in shared memory as 16-bit,
//  and streams B through a cp.async pipeline (`stages` chunks of 32 x tile_n,
//  16-byte copies); warp w computes columns [16w, 16w+16) (tile_n/16 warps).
//  split_k 0 then means automatic: the smallest power of two giving at least
//  two blocks per SM (while the K slice stays >= 128). The split-K combine and
//  the fused epilogue are the SIMT path's.
//  Row staging: dense input rows read by the F ops are copied into shared
//  memory first, every 16-byte load in flight at once.
//  Register rows: with one row per block and only elementwise ops and
//  last-axis norms/softmax of one width, the row lives in registers (16-byte
//  loads and stores, block reductions) with no shared-memory row buffers.
//  NOT YET: a K-sliced prologue (norm rows are still materialized whole per
//  block) in the generic matmul path.
// Fused chains (core/fused_pattern.h) get their own kernels: attention
//  (cuda_attention.h: flash attention with split-KV), streamed matmuls
//  (cuda_streamed_matmul.h: gated MLP, rms_norm -> linear, LoRA) and GEMMs
//  with their epilogue, one or two B (cuda_gemm.h: TMA and wgmma, sm_90),
//  whose operands from earlier kernels pass in their own dtype.
// KERNEL_GENERIC: one op, grid-stride loops (one thread per output element or
//  per reduced row).
//
// Schedule mapping: block_rows -> BR (PARALLEL_COLS: all rows, up to 64),
// tile_n -> T tile width (F matmuls: column chunk, at least 128), warps ->
// threads per block / 32 (default 4 with a T matmul, else 8), split_k ->
// grid.z, vector_width -> max elements per vector load of B, unroll -> K-loop
// unroll; stages -> tensor-core pipeline depth (default 4); tile_k unused.
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_CODEGEN_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_CODEGEN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "yirage/v1/backend.pb.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::backends::cuda {

struct PlanBuffer {
  int64_t bytes = 0;
  bool zero_init = false;  // must hold zeros before the first launch
  std::string what;        // for messages
};

// float32 products may run on TF32 tensor cores (10 mantissa bits, as
// float16's) where the job's rtol is at least this.
inline constexpr double kTf32MinRtol = 1e-3;

// What a KERNEL_LIBRARY kernel asks of the library, in our row-major terms.
// (cuda_cublaslt.h runs it.) Its launch arguments are, in order: A, B, C, bias, D, workspace (C is
// D when there is no residual, bias is D when there is no bias).
struct LibraryMatmulCall {
  yirage::v1::DType dtype = yirage::v1::FLOAT16;  // A, B, C, bias and D
  bool tf32 = false;                              // float32: TF32 tensor cores
  bool transpose_b = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  int64_t a_batch_stride = 0, b_batch_stride = 0;  // elements; 0 = shared
  float alpha = 1.0f;
  bool residual = false;  // beta = 1
  bool bias = false;
  int activation = 0;  // 0 none, 1 relu, 2 tanh gelu
  int algo = 0;        // the heuristic's n-th algorithm
  int64_t workspace_bytes = 0;
};

// A 2-D TMA descriptor over a buffer, made on the host at launch
// (cuTensorMapEncodeTiled: 128-byte swizzle, element strides 1, zeros out of
// bounds) and passed by value before the launch's pointer arguments.
struct TensorMapArg {
  int buffer = -1;                 // buffer id (see the file comment)
  std::string data_type;           // CUtensorMapDataType's name
  std::vector<int64_t> dims;       // {inner, outer} or {inner, outer, batch}, elements
  int64_t stride_bytes = 0;        // of the outer dim
  int64_t batch_stride_bytes = 0;  // of the batch dim (three dims only)
  std::vector<int> box;            // one extent a dim
};

// TensorMapArg::data_type for a tensor of `dtype`.
inline std::string TmaDataType(yirage::v1::DType dtype) {
  switch (dtype) {
    case yirage::v1::BFLOAT16:
      return "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16";
    case yirage::v1::FLOAT32:
      return "CU_TENSOR_MAP_DATA_TYPE_FLOAT32";
    default:
      return "CU_TENSOR_MAP_DATA_TYPE_FLOAT16";
  }
}

struct KernelLaunch {
  std::string name;  // the __global__ function
  int64_t grid[3] = {1, 1, 1};
  int block = 128;        // threads
  int smem_bytes = 0;     // dynamic shared memory
  std::vector<int> args;  // buffer ids (see the file comment)
  // Launched with cuLaunchCooperativeKernel: its blocks wait for each other,
  // so the whole grid must be resident at once (the launch fails otherwise).
  bool cooperative = false;
  // Set for a KERNEL_LIBRARY kernel: a cuBLASLt call rather than a kernel
  // launch (name, grid, block and smem_bytes unused).
  std::optional<LibraryMatmulCall> library;
  // The kernel's first parameters, before `args`.
  std::vector<TensorMapArg> tensor_maps;
};

struct PlanCode {
  std::string source;  // this plan's kernels (compile after Prelude())
  std::vector<PlanBuffer> buffers;
  std::vector<KernelLaunch> launches;  // in execution order
};

struct CudaTarget {
  int sm = 90;                          // compute capability * 10
  int64_t max_smem_per_block = 232448;  // opt-in dynamic shared memory limit
  int sm_count = 132;
};

// A float literal in CUDA C++: "(1.5f)", NaN and infinities as bit patterns.
std::string CudaFloatLiteral(double value);

// Names of the generated kernels.
std::string KernelName(int plan, int kernel);  // "yr_p<plan>_k<kernel>"

// `code`'s buffers and launches as CompiledPlan.launch reports them (the
// worker stores them with the candidate; kernel export writes them to
// manifest.json).
yirage::v1::LaunchManifest LaunchManifestOf(const PlanCode& code);

class CudaCodegen {
 public:
  // REQUIRES: `graph` outlives the codegen.
  CudaCodegen(const core::Graph& graph, CudaTarget target) : graph_(graph), target_(target) {}

  // Includes and device helpers shared by every plan of a translation unit.
  static std::string Prelude();

  // Returns InvalidArgument naming the kernel and the problem when the plan
  // does not fit the graph (same checks as the CPU backend). A plan with its
  // own (rewritten) graph, Plan.graph, is generated against that graph, which
  // must keep the job graph's inputs and outputs. `inject_fault`
  // (tests only) makes the plan's first kernel write through a null pointer.
  absl::StatusOr<PlanCode> GeneratePlan(const yirage::v1::Plan& plan, int index,
                                        bool inject_fault = false) const;

 private:
  absl::StatusOr<PlanCode> GeneratePlanFor(const core::Graph& g, const yirage::v1::Plan& plan,
                                           int index, bool inject_fault) const;

  const core::Graph& graph_;
  const CudaTarget target_;
};

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_CODEGEN_H_
