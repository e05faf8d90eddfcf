// The analytical cost model that ranks candidate plans: an estimate of each
// kernel's time on the target, in seconds, from a roofline of the chip's
// registry figures (memory bandwidth, peak FLOP/s of its vector and matrix
// units). It ranks, it does not decide: workers time every candidate and the
// fastest verified one wins.
//
// The roofline (Roofline, RooflineOf): the registry's figures times the
// fraction of them kernels reach (kBandwidthEfficiency, kVectorEfficiency,
// kMatrixEfficiency), defaults where a figure is unknown (a chip without a
// registry entry, a detected CPU without a bandwidth figure).
//
// Per kernel:
//
//   seconds = launch + (memory + compute) * imbalance + rounds * round cost
//
// Generated kernels stage their blocks through shared memory or cache
// between loads and arithmetic, so their memory and compute times add;
// library and family kernels overlap them (a pipeline), a roofline's max.
//
//  * launch: kGpuLaunchSeconds or kCpuLaunchSeconds, a kernel's fixed cost.
//  * memory: bytes over the memory bandwidth, re-reads that fit the cache
//    over the cache's (kCacheSpeedup times that). Every kernel input read
//    once (only the windows where the kernel reads it through slices, or
//    through a concat that only slices read) and every output written
//    once, at the tensor's dtype size for
//    graph inputs and outputs and 4 bytes (float32 scratch) for
//    intermediates passed between kernels. KERNEL_ROW extras:
//      - matmul B operands are read whole by every row block (PARALLEL_ROWS);
//        at the cache rate when B fits in the cache. PARALLEL_COLS reads B once.
//      - the A rows of a matmul are re-read once per N tile (per block), at the
//        cache rate when the [block_rows, K] float block fits in the cache.
//      - when a block's buffers (block_rows * sum of row widths * 4 bytes)
//        exceed the cache, every op's block output is written and read back.
//  * compute: flops over the vector rate, scaled up when vector_width is
//    below the target SIMD width, and by kUnrollGain for matmuls unrolled 4x
//    or more. Where the backend holds rows in registers (RowKernels.register_row_*:
//    a chain of elementwise ops, norms and softmaxes of one row width, wide
//    enough, one row a block or several where the backend says so), no
//    staging through shared memory: its compute costs kRegisterRowsGain as much.
//  * split rows (RowKernels.split_row_min_width): a last-axis reduction or
//    one norm or softmax among elementwise ops over few long rows runs each
//    row over S = min(ceil(4T / rows), width / min_width) blocks (at least
//    2, 8 for norms); its work items are rows * S, no block buffer spills,
//    and a norm pays a second launch and its inputs' traffic again.
//  * imbalance: work items W (row blocks for PARALLEL_ROWS, N tiles for
//    PARALLEL_COLS) over the T parallel units (CPU threads, GPU multiprocessors):
//    ceil(W / T) * T / W, which is 1 when the units are evenly busy and T / W
//    when W < T. Each round of work items, ceil(W / T), also pays
//    kCpuWorkRoundSeconds or kGpuWorkRoundSeconds (block setup, scheduling),
//    which favours fewer, larger blocks once every unit is busy. A flat
//    elementwise group (RowKernels.flat_elementwise: elementwise ops of one
//    output shape) has max(T, elements / kFlatBlockElements) work items
//    whatever its rows, and no block buffer.
//  * latency (GPU row kernels with a matmul): a block keeps few loads in
//    flight while it walks K, so its memory time is at least each block's
//    bytes (its share of the rows' inputs and outputs, plus the B of its
//    batch entry) over kGpuBlockBytesInFlight per kGpuMemoryLatencySeconds,
//    in waves of kGpuResidentBlocks blocks a multiprocessor; the larger of
//    that and the bandwidth time counts.
//  * KERNEL_LIBRARY kernels (a vendor GEMM and its epilogue) and kernels of a
//    backend kernel family (a schedule with family knobs: core/kernel_family.h)
//    are pipelined: launch + max(memory, flops over the matrix rate of their
//    matmul's dtype). A GEMM family kernel (GemmSchedule) on a GPU: its
//    tiles' share of work that computes C (partial edge tiles compute
//    padding; a persistent grid's last wave of tiles over the
//    multiprocessors leaves some idle unless split-K, the knob or as many K
//    ranges as fill the wave, cuts them), over the best share among the
//    tiles of its family's points that take the chain, scales its matrix
//    rate: its points rank by their tiles' fit, the best costs as a library
//    GEMM (which picks its own tiles).
//  * KERNEL_GENERIC kernels (and KERNEL_ROW kernels that are not legal row
//    groups) cost launch + (memory + compute) * kGenericSlowdown, no imbalance.
#ifndef YIRAGE_CORE_COST_MODEL_H_
#define YIRAGE_CORE_COST_MODEL_H_

#include <cstdint>

#include "core/candidate_generator.h"
#include "core/graph.h"
#include "core/row_group.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {

// Fractions of the registry's peaks that kernels reach.
inline constexpr double kBandwidthEfficiency = 0.8;
// Generated kernels' arithmetic (vector units, fp32) at full vector width.
inline constexpr double kVectorEfficiency = 0.5;
// Library and family kernels on the matrix units (a CPU's BLAS: its vector units).
inline constexpr double kMatrixEfficiency = 0.75;
// Re-reads that fit the cache move this much faster than memory.
inline constexpr double kCacheSpeedup = 10.0;
inline constexpr double kGpuLaunchSeconds = 3e-6;
inline constexpr double kCpuLaunchSeconds = 2e-6;
// A round of work items: CPU threads take their next block; GPU blocks are
// scheduled by the hardware, several resident on a multiprocessor at once.
inline constexpr double kCpuWorkRoundSeconds = 1e-7;
inline constexpr double kGpuWorkRoundSeconds = 1e-8;
// Elements a work item of a flat elementwise kernel covers
// (RowKernels.flat_elementwise): a block of 256 threads, 16 elements each.
inline constexpr int64_t kFlatBlockElements = 4096;
// A GPU row kernel whose matmul walks K keeps few loads in flight a block
// (its threads' next B elements): by Little's law a block moves at most
// kGpuBlockBytesInFlight a memory latency, whatever the chip's bandwidth,
// and at most kGpuResidentBlocks blocks share a multiprocessor at once.
// What bounds such kernels over few blocks (H200, decode attention of 2
// heads, 255 keys of 128: 65 us on 4 blocks, each reading 130 KB of K and
// V, where the bandwidth alone says 5.5 us).
inline constexpr double kGpuBlockBytesInFlight = 4096.0;
inline constexpr double kGpuMemoryLatencySeconds = 1e-6;
inline constexpr int kGpuResidentBlocks = 8;
inline constexpr double kGenericSlowdown = 2.0;
inline constexpr double kUnrollGain = 0.9;
inline constexpr double kRegisterRowsGain = 0.5;
// Defaults where the registry has no figure.
inline constexpr double kDefaultCpuBandwidthGbps = 20.0;
inline constexpr double kDefaultGpuBandwidthGbps = 1000.0;
inline constexpr double kDefaultFlopsPerByte = 8.0;  // vector rate / bandwidth
// Matrix rate over the vector rate where the matrix peaks are unknown.
inline constexpr double kDefaultGpuMatrixSpeedup = 16.0;
inline constexpr double kDefaultCpuMatrixSpeedup = 4.0;
inline constexpr int kDefaultThreads = 8;
inline constexpr int64_t kDefaultCacheBytes = int64_t{1} << 20;
inline constexpr int kDefaultSimdWidth = 8;

// Threads, cache bytes and SIMD width of the target, defaults where unknown.
int EffectiveThreads(const SearchOptions& options);
int64_t EffectiveCacheBytes(const SearchOptions& options);
int EffectiveSimdWidth(const SearchOptions& options);

// The rates the model charges, as derived above.
struct Roofline {
  bool gpu = false;
  double memory_bytes_per_second = 0;
  double cache_bytes_per_second = 0;
  double vector_flops_per_second = 0;
  double matrix_fp32_flops_per_second = 0;  // GPUs with tensor cores: TF32
  double matrix_fp16_flops_per_second = 0;
  double matrix_bf16_flops_per_second = 0;
  double launch_seconds = 0;
  int parallel_units = 1;  // work items that run at once: CPU threads, GPU multiprocessors

  // The matrix rate for matmul inputs of `dtype` (fp32 for others).
  double MatrixFlopsPerSecond(yirage::v1::DType dtype) const;
};

// The target's roofline: a GPU where options.kernels.gpu or the chip has
// warps (warp_size > 1).
Roofline RooflineOf(const SearchOptions& options);

// Floating-point operations of one op, by its row of the op table
// (core/op_table.h): a matmul is 2*M*N*K; transcendental elementwise ops
// count 8 per element; norms and softmax a few per element.
double OpFlops(const Graph& graph, int op);

// Bytes a tensor occupies in memory between kernels: its dtype size for graph
// inputs and outputs, 4 bytes per element (float32 scratch) otherwise.
double TensorBytes(const Graph& graph, int tensor);

// Estimated seconds of one kernel as described above. `row` is
// AnalyzeRowGroup's result for the kernel's ops when it is a legal KERNEL_ROW
// group, nullptr otherwise. Names the graph does not know are ignored (never
// fails), so the estimate of a plan that fails ValidatePlan is meaningless but
// harmless.
double EstimateKernelCost(const Graph& graph, const yirage::v1::KernelPlan& kernel,
                          const RowGroupInfo* row, const SearchOptions& options);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_COST_MODEL_H_
