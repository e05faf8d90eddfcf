// The analytical cost model that ranks candidate plans. It ranks, it does not
// decide: workers time every candidate and the fastest verified one wins.
//
// Units are "byte equivalents" (one byte moved to or from memory costs 1).
// Per kernel:
//
//   cost = kKernelOverhead + (traffic + compute) * imbalance
//          + kWorkItemOverhead * ceil(W / T)
//
//  * traffic: every kernel input read once and every output written once, at
//    the tensor's dtype size for graph inputs and outputs and 4 bytes (float32
//    scratch) for intermediates passed between kernels. KERNEL_ROW extras:
//      - matmul B operands are read whole by every row block (PARALLEL_ROWS);
//        re-reads cost kCachedByteCost per byte when B fits in the cache,
//        kByteCost otherwise. PARALLEL_COLS reads B once.
//      - the A rows of a matmul are re-read once per N tile (per block), at the
//        cached rate when the [block_rows, K] float block fits in the cache.
//      - when a block's buffers (block_rows * sum of row widths * 4 bytes)
//        exceed the cache, every op's block output is written and read back.
//  * compute: flops * kFlopCost, scaled up when vector_width is below the
//    target SIMD width, and by kUnrollGain for matmuls unrolled 4x or more.
//    Where the backend holds rows in registers (RowKernels.register_row_*:
//    a one-row-per-block chain of elementwise ops, norms and softmaxes of
//    one row width, wide enough), no staging through shared memory: its
//    compute costs kRegisterRowsGain as much.
//  * split rows (RowKernels.split_row_min_width): a last-axis reduction or
//    one norm or softmax among elementwise ops over few long rows runs each
//    row over S = min(ceil(4T / rows), width / min_width) blocks (at least
//    2, 8 for norms); its work items are rows * S, no block buffer spills,
//    and a norm pays a second kernel overhead and its inputs' traffic again.
//  * imbalance: work items W (row blocks for PARALLEL_ROWS, N tiles for
//    PARALLEL_COLS) over T threads: ceil(W / T) * T / W, which is 1 when the
//    threads are evenly busy and T / W when W < T. Each round of work items
//    also pays kWorkItemOverhead (block setup, scheduling), which favours
//    fewer, larger blocks once every thread is busy.
//  * KERNEL_LIBRARY kernels (a vendor GEMM and its epilogue) cost their
//    traffic plus their flops at kTensorCoreSpeedup (GPU backends:
//    BackendKernels.gpu) or kCpuLibrarySpeedup times the generic rate.
//  * Kernels of a backend kernel family (a schedule with family knobs:
//    core/kernel_family.h) cost their traffic plus their flops at
//    kTensorCoreSpeedup.
//  * KERNEL_GENERIC kernels (and KERNEL_ROW kernels that are not legal row
//    groups) cost (traffic + compute) * kGenericSlowdown with no imbalance.
//
// Unknown target values use kDefaultThreads and kDefaultCacheBytes.
#ifndef YIRAGE_CORE_COST_MODEL_H_
#define YIRAGE_CORE_COST_MODEL_H_

#include <cstdint>

#include "core/candidate_generator.h"
#include "core/graph.h"
#include "core/row_group.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {

inline constexpr double kByteCost = 1.0;
inline constexpr double kCachedByteCost = 0.1;
inline constexpr double kFlopCost = 0.125;
inline constexpr double kKernelOverhead = 32768.0;
// Matmul flops of a fused GPU attention kernel (tensor cores) cost this much
// less than kFlopCost.
inline constexpr double kTensorCoreSpeedup = 16.0;
// Matmul flops of a KERNEL_LIBRARY kernel on a CPU (a BLAS) cost this much
// less than kFlopCost; on GPUs they cost as tensor-core flops.
inline constexpr double kCpuLibrarySpeedup = 4.0;
inline constexpr double kWorkItemOverhead = 2048.0;
inline constexpr double kGenericSlowdown = 2.0;
inline constexpr double kUnrollGain = 0.9;
inline constexpr double kRegisterRowsGain = 0.5;
inline constexpr int kDefaultThreads = 8;
inline constexpr int64_t kDefaultCacheBytes = int64_t{1} << 20;
inline constexpr int kDefaultSimdWidth = 8;

// Threads, cache bytes and SIMD width of the target, defaults where unknown.
int EffectiveThreads(const SearchOptions& options);
int64_t EffectiveCacheBytes(const SearchOptions& options);
int EffectiveSimdWidth(const SearchOptions& options);

// Floating-point operations of one op, by its row of the op table
// (core/op_table.h): a matmul is 2*M*N*K; transcendental elementwise ops
// count 8 per element; norms and softmax a few per element.
double OpFlops(const Graph& graph, int op);

// Bytes a tensor occupies in memory between kernels: its dtype size for graph
// inputs and outputs, 4 bytes per element (float32 scratch) otherwise.
double TensorBytes(const Graph& graph, int tensor);

// Cost of one kernel as described above. `row` is AnalyzeRowGroup's result
// for the kernel's ops when it is a legal KERNEL_ROW group, nullptr otherwise.
// Names the graph does not know are ignored (never fails), so the estimate of
// a plan that fails ValidatePlan is meaningless but harmless.
double EstimateKernelCost(const Graph& graph, const yirage::v1::KernelPlan& kernel,
                          const RowGroupInfo* row, const SearchOptions& options);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_COST_MODEL_H_
