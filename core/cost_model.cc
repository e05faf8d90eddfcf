#include "core/cost_model.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/fused_pattern.h"
#include "core/kernel_family.h"
#include "core/op_table.h"
#include "google/protobuf/util/message_differencer.h"

namespace yirage::core {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int EffectiveThreads(const SearchOptions& options) {
  return options.num_threads > 0 ? options.num_threads : kDefaultThreads;
}

int64_t EffectiveCacheBytes(const SearchOptions& options) {
  return options.cache_bytes > 0 ? options.cache_bytes : kDefaultCacheBytes;
}

int EffectiveSimdWidth(const SearchOptions& options) {
  return options.simd_width_floats > 0 ? options.simd_width_floats : kDefaultSimdWidth;
}

double Roofline::MatrixFlopsPerSecond(yirage::v1::DType dtype) const {
  switch (dtype) {
    case yirage::v1::FLOAT16:
      return matrix_fp16_flops_per_second;
    case yirage::v1::BFLOAT16:
      return matrix_bf16_flops_per_second;
    default:
      return matrix_fp32_flops_per_second;
  }
}

Roofline RooflineOf(const SearchOptions& options) {
  Roofline r;
  r.gpu = options.kernels.gpu() || options.warp_size > 1;
  r.launch_seconds = r.gpu ? kGpuLaunchSeconds : kCpuLaunchSeconds;
  const double bandwidth =
      options.memory_bandwidth_gbps > 0
          ? options.memory_bandwidth_gbps * 1e9 * kBandwidthEfficiency
          : (r.gpu ? kDefaultGpuBandwidthGbps : kDefaultCpuBandwidthGbps) * 1e9;
  r.memory_bytes_per_second = bandwidth;
  r.cache_bytes_per_second = bandwidth * kCacheSpeedup;
  r.vector_flops_per_second = options.peak_tflops_fp32 > 0
                                  ? options.peak_tflops_fp32 * 1e12 * kVectorEfficiency
                                  : bandwidth * kDefaultFlopsPerByte;
  // Matrix units: the dtype's peak; fp32 on a GPU's tensor cores runs as
  // TF32, half the fp16 rate. Without matrix figures: the vector peak (a
  // CPU's BLAS), or the default speedup over the vector rate.
  const double fallback = !r.gpu && options.peak_tflops_fp32 > 0
                              ? options.peak_tflops_fp32 * 1e12 * kMatrixEfficiency
                              : r.vector_flops_per_second *
                                    (r.gpu ? kDefaultGpuMatrixSpeedup : kDefaultCpuMatrixSpeedup);
  auto matrix = [&](double tflops) {
    return tflops > 0 ? tflops * 1e12 * kMatrixEfficiency : fallback;
  };
  r.matrix_fp16_flops_per_second = matrix(options.peak_tflops_fp16);
  r.matrix_bf16_flops_per_second = matrix(options.peak_tflops_bf16);
  r.matrix_fp32_flops_per_second =
      r.gpu && options.peak_tflops_fp16 > 0 ? matrix(options.peak_tflops_fp16 / 2) : fallback;
  r.parallel_units = options.num_threads > 0                  ? options.num_threads
                     : r.gpu && options.num_compute_units > 0 ? options.num_compute_units
                                                              : kDefaultThreads;
  return r;
}

double OpFlops(const Graph& graph, int op_index) {
  const OpInfo& op = graph.op(op_index);
  const OpSpec& spec = SpecOf(op.type);
  const double out = static_cast<double>(graph.tensor(op.output).num_elements());
  switch (spec.flop_basis) {
    case FlopBasis::kMatmulMultiply: {
      const std::vector<int64_t>& a = graph.tensor(op.inputs[0]).shape;
      return 2.0 * out * static_cast<double>(a.empty() ? 1 : a.back());
    }
    case FlopBasis::kPerInput:
      return spec.flops_per_element *
             static_cast<double>(graph.tensor(op.inputs[0]).num_elements());
    case FlopBasis::kPerOutput:
      return spec.flops_per_element * out;
    case FlopBasis::kNone:
      return 0.0;
  }
  return out;
}

double TensorBytes(const Graph& graph, int tensor) {
  const TensorInfo& info = graph.tensor(tensor);
  const bool in_memory_dtype = info.producer < 0 || info.is_graph_output;
  const double element_bytes = in_memory_dtype ? DTypeSize(info.dtype) : 4.0;
  return element_bytes * static_cast<double>(info.num_elements());
}

namespace {

// Blocks a row when the backend splits the group's rows
// (RowKernels.split_row_min_width: see backend.proto), else 1; `reduction`
// says whether the split op is a reduction (else a norm or softmax).
int64_t SplitRowBlocks(const Graph& graph, const yirage::v1::KernelPlan& kernel,
                       const std::vector<int>& ops, const RowGroupInfo& row,
                       const yirage::v1::RowKernels& row_kernels, int64_t threads,
                       bool* reduction) {
  *reduction = false;
  const int64_t min_width = row_kernels.split_row_min_width();
  if (min_width <= 0 || ops.empty()) return 1;
  size_t stat = ops.size();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (IsReduction(graph.op(ops[i]).type)) stat = i;
  }
  // Ops after a reduction: elementwise on its result (width 1).
  size_t end = ops.size();
  if (stat < ops.size()) {
    *reduction = true;
    for (size_t i = stat + 1; i < ops.size(); ++i) {
      if (!IsElementwise(graph.op(ops[i]).type) || row.row_width[i] != 1) return 1;
    }
    for (const std::string& out : kernel.outputs()) {
      const int producer = graph.tensor(graph.FindTensor(out)).producer;
      const auto at = std::find(ops.begin(), ops.end(), producer);
      if (at - ops.begin() < static_cast<std::ptrdiff_t>(stat)) return 1;
    }
    end = stat + 1;
  } else {
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!IsNormOrSoftmax(graph.op(ops[i]).type)) continue;
      if (stat != ops.size()) return 1;  // a second norm
      stat = i;
    }
    if (stat == ops.size()) return 1;
  }
  const std::vector<int64_t>& in = graph.tensor(graph.op(ops[stat]).inputs[0]).shape;
  const int64_t width = in.empty() ? 1 : in.back();
  for (size_t i = 0; i < end; ++i) {
    if (i != stat && (!IsElementwise(graph.op(ops[i]).type) || row.row_width[i] != width)) return 1;
  }
  const int64_t rows = std::max<int64_t>(1, row.num_rows);
  const int64_t splits = std::min(CeilDiv(4 * threads, rows), width / min_width);
  // As the CUDA backend: a norm, read twice over two kernels, splits where
  // that gives 8 blocks a row (it also splits at 3 where register rows do
  // not hold the row, which the model does not know).
  return splits >= (*reduction ? 2 : 8) ? splits : 1;
}

// The share of a GEMM family kernel's tile work that computes C with tiles
// of tile_m x tile_n: partial tiles at C's edges compute padding, and a
// persistent grid's last wave leaves multiprocessors idle unless split-K
// cuts its tiles into K ranges (`split_k`, or where it is 0 as many as fill
// the wave, as the CUDA planner does).
double GemmTileShare(const GemmMatch& match, int64_t tile_m, int64_t tile_n, int split_k,
                     int units) {
  // A gated tile's columns are half gate, half up products.
  tile_n = std::max<int64_t>(1, tile_n / (match.b2 >= 0 ? 2 : 1));
  const int64_t tiles_m = CeilDiv(match.m, tile_m);
  const int64_t tiles_n = CeilDiv(match.n, tile_n);
  const double padding =
      static_cast<double>(match.m) * static_cast<double>(match.n) /
      (static_cast<double>(tiles_m * tile_m) * static_cast<double>(tiles_n * tile_n));
  const int64_t tiles = std::max<int64_t>(1, match.batch) * tiles_m * tiles_n;
  const int64_t last = tiles % units;
  double waves = static_cast<double>(tiles / units);
  if (last > 0) {
    const int64_t splits = split_k > 0 ? split_k : std::max<int64_t>(1, units / last);
    waves += static_cast<double>(CeilDiv(last * splits, units)) / static_cast<double>(splits);
  }
  return padding * static_cast<double>(tiles) / (waves * units);
}

// A GEMM family kernel's (GemmSchedule) efficiency over the best among its
// family's points that take its chain (the backend's, as it describes
// them): a point's is its tile share (over its waves of `units` times its
// blocks_per_multiprocessor) times its matrix_share. Its points rank by how
// well their tiles and forms fit, while the best of them costs as a library
// GEMM does (the library picks its own tiles). The kernel's own figures are
// those of the point whose knobs it carries (the defaults where none does).
// 1 for other kernels, and where the knobs leave the tile to the backend.
double GemmTileEfficiency(const Graph& graph, const std::vector<int>& ops,
                          const yirage::v1::Schedule& schedule,
                          const yirage::v1::BackendKernels& kernels, int units) {
  if (!schedule.has_gemm() || units <= 0) return 1.0;
  const yirage::v1::GemmSchedule& g = schedule.gemm();
  if (g.tile_m() <= 0 || g.tile_n() <= 0) return 1.0;
  std::optional<GemmMatch> match = MatchGemm(graph, ops);
  const int family = MatchFamily(kernels, graph, ops);
  if (!match.has_value() || match->m <= 0 || match->n <= 0 || family < 0) return 1.0;
  const yirage::v1::KernelFamily& f = kernels.families(family);
  auto efficiency = [&](const yirage::v1::GemmSchedule& knobs,
                        const yirage::v1::SchedulePoint* point) {
    const int per_unit = point != nullptr ? std::max(1, point->blocks_per_multiprocessor()) : 1;
    const double matrix =
        point != nullptr && point->matrix_share() > 0 ? point->matrix_share() : 1.0;
    return matrix *
           GemmTileShare(*match, knobs.tile_m(), knobs.tile_n(), knobs.split_k(), units * per_unit);
  };
  double best = 0;
  const yirage::v1::SchedulePoint* own = nullptr;
  for (const yirage::v1::SchedulePoint& point : f.points()) {
    const yirage::v1::GemmSchedule& p = point.schedule().gemm();
    if (own == nullptr && google::protobuf::util::MessageDifferencer::Equals(p, g)) own = &point;
    if (p.tile_m() <= 0 || p.tile_n() <= 0 ||
        !WithinLimits(point.limits(), f.pattern(), graph, ops)) {
      continue;
    }
    best = std::max(best, efficiency(p, &point));
  }
  const double mine = efficiency(g, own);
  return best > 0 ? std::min(1.0, mine / best) : 1.0;
}

// The share of input tensor `t` that a kernel of `ops` (writing `outputs`)
// reads: where each of its uses in the kernel is a slice, or a concat along
// an axis whose result only slices along that axis read (and the kernel
// does not write), only the windows are read. 1 where any use reads it all.
double ReadShare(const Graph& graph, const std::vector<int>& ops, const std::vector<int>& outputs,
                 int t) {
  auto in_kernel = [&](int op) { return std::find(ops.begin(), ops.end(), op) != ops.end(); };
  const std::vector<int64_t>& shape = graph.tensor(t).shape;
  double share = 0;
  bool used = false;
  for (int use : graph.tensor(t).consumers) {
    if (!in_kernel(use)) continue;
    used = true;
    const OpInfo& op = graph.op(use);
    if (op.axis < 0 || op.axis >= static_cast<int>(shape.size()) || shape[op.axis] <= 0) return 1.0;
    const double length = static_cast<double>(shape[op.axis]);
    if (op.type == OpType::kSlice) {
      share += static_cast<double>(op.slice_end - op.slice_start) / length;
      continue;
    }
    if (op.type != OpType::kConcat || std::count(op.inputs.begin(), op.inputs.end(), t) != 1 ||
        std::find(outputs.begin(), outputs.end(), op.output) != outputs.end()) {
      return 1.0;
    }
    // t's place along the concat axis.
    int64_t offset = 0;
    for (int in : op.inputs) {
      if (in == t) break;
      offset += graph.tensor(in).shape[op.axis];
    }
    for (int reader : graph.tensor(op.output).consumers) {
      if (!in_kernel(reader)) continue;
      const OpInfo& slice = graph.op(reader);
      if (slice.type != OpType::kSlice || slice.axis != op.axis) return 1.0;
      const int64_t overlap =
          std::min(slice.slice_end, offset + shape[op.axis]) - std::max(slice.slice_start, offset);
      share += static_cast<double>(std::max<int64_t>(0, overlap)) / length;
    }
  }
  return used ? std::min(1.0, share) : 1.0;
}

}  // namespace

double EstimateKernelCost(const Graph& graph, const yirage::v1::KernelPlan& kernel,
                          const RowGroupInfo* row, const SearchOptions& options) {
  const Roofline rates = RooflineOf(options);
  std::vector<int> ops;
  for (const std::string& name : kernel.ops()) {
    if (int op = graph.FindOp(name); op >= 0) ops.push_back(op);
  }
  // Bytes moved at the memory rate (traffic) and at the cache rate (cached):
  // inputs as far as the kernel reads them (ReadShare), outputs whole.
  std::vector<int> outputs;
  for (const std::string& name : kernel.outputs()) {
    if (int t = graph.FindTensor(name); t >= 0) outputs.push_back(t);
  }
  double input_bytes = 0;
  for (const std::string& name : kernel.inputs()) {
    if (int t = graph.FindTensor(name); t >= 0) {
      input_bytes += TensorBytes(graph, t) * ReadShare(graph, ops, outputs, t);
    }
  }
  double output_bytes = 0;
  for (int t : outputs) output_bytes += TensorBytes(graph, t);
  double traffic = input_bytes + output_bytes;
  double cached = 0;
  auto memory_seconds = [&] {
    return traffic / rates.memory_bytes_per_second + cached / rates.cache_bytes_per_second;
  };
  double all_flops = 0;
  yirage::v1::DType matmul_dtype = yirage::v1::FLOAT32;
  bool has_matmul = false;
  for (int op : ops) {
    all_flops += OpFlops(graph, op);
    if (!has_matmul && graph.op(op).type == OpType::kMatmul) {
      has_matmul = true;
      matmul_dtype = graph.tensor(graph.op(op).inputs[0]).dtype;
    }
  }

  // A vendor library's kernel, or a kernel of a backend family (its schedule
  // carries the family's knobs: core/kernel_family.h): one hand-structured,
  // pipelined kernel that moves only its inputs and outputs and runs its
  // matmuls on the matrix units.
  if (kernel.kind() == yirage::v1::KERNEL_LIBRARY ||
      (kernel.kind() == yirage::v1::KERNEL_ROW &&
       ScheduleFamily(kernel.schedule()) != yirage::v1::FAMILY_PATTERN_UNSPECIFIED)) {
    const double efficiency = GemmTileEfficiency(graph, ops, kernel.schedule(), options.kernels,
                                                 rates.gpu ? rates.parallel_units : 0);
    return rates.launch_seconds +
           std::max(memory_seconds(),
                    all_flops / (rates.MatrixFlopsPerSecond(matmul_dtype) * efficiency));
  }
  if (kernel.kind() != yirage::v1::KERNEL_ROW || row == nullptr ||
      row->row_width.size() != ops.size()) {
    return rates.launch_seconds +
           (memory_seconds() + all_flops / rates.vector_flops_per_second) * kGenericSlowdown;
  }

  const yirage::v1::Schedule& schedule = kernel.schedule();
  const int64_t threads = rates.parallel_units;
  const double cache = static_cast<double>(EffectiveCacheBytes(options));
  const int64_t rows = std::max<int64_t>(1, row->num_rows);
  // Elementwise ops of one output shape on a backend with flat row kernels
  // (RowKernels.flat_elementwise) run over the elements: the rows do not
  // bound the grid (one row of 10M elements is not one block) and no row is
  // held in a block buffer.
  bool flat = options.kernels.row().flat_elementwise() && !ops.empty();
  for (int op : ops) {
    flat =
        flat && IsElementwise(graph.op(op).type) &&
        graph.tensor(graph.op(op).output).shape == graph.tensor(graph.op(ops.front()).output).shape;
  }
  const bool cols = schedule.parallel() == yirage::v1::PARALLEL_COLS;
  const int64_t block_rows = cols ? rows : std::clamp<int64_t>(schedule.block_rows(), 1, rows);
  const int64_t blocks = CeilDiv(rows, block_rows);
  const int64_t tile_n = std::max(1, schedule.tile_n());
  // Re-reads: at the cache rate when the re-read block fits in the cache.
  auto reread = [&](double bytes, double times) {
    (bytes <= cache ? cached : traffic) += times * bytes;
  };

  double flops = 0;
  double row_width_sum = 0;
  // Matmul B bytes: all of them, and what one block reads.
  double b_bytes = 0;
  double b_per_block = 0;
  int64_t col_tiles = 1;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OpInfo& op = graph.op(ops[i]);
    const int64_t width = std::max<int64_t>(1, row->row_width[i]);
    row_width_sum += static_cast<double>(width);
    col_tiles = std::max(col_tiles, CeilDiv(width, tile_n));
    double op_flops = OpFlops(graph, ops[i]);
    if (op.type == OpType::kMatmul) {
      const std::vector<int64_t>& a = graph.tensor(op.inputs[0]).shape;
      const double k = static_cast<double>(a.empty() ? 1 : a.back());
      const int64_t n_tiles = CeilDiv(width, tile_n);
      // A rows: re-read once per extra N tile, in every block.
      reread(static_cast<double>(block_rows) * k * 4.0,
             static_cast<double>(blocks * (n_tiles - 1)));
      // B: read whole by every row block; PARALLEL_COLS reads it once.
      reread(TensorBytes(graph, op.inputs[1]), static_cast<double>(blocks - 1));
      // A block reads the B of its batch entry (B's lead dims).
      const std::vector<int64_t>& b = graph.tensor(op.inputs[1]).shape;
      int64_t batch = 1;
      for (size_t d = 0; d + 2 < b.size(); ++d) batch *= b[d];
      b_bytes += TensorBytes(graph, op.inputs[1]);
      b_per_block += TensorBytes(graph, op.inputs[1]) / static_cast<double>(batch);
      if (schedule.unroll() >= 4) op_flops *= kUnrollGain;
    }
    flops += op_flops;
  }
  // Split rows (RowKernels.split_row_min_width): few long rows, each over
  // several blocks, nothing held in block buffers.
  const yirage::v1::RowKernels& row_kernels = options.kernels.row();
  bool split_reduction = false;
  const int64_t splits =
      SplitRowBlocks(graph, kernel, ops, *row, row_kernels, threads, &split_reduction);
  // A split norm reads its inputs again in a second kernel.
  const bool norm_split = splits > 1 && !split_reduction;
  if (norm_split) traffic += input_bytes;
  if (!flat && splits == 1 && static_cast<double>(block_rows) * row_width_sum * 4.0 > cache) {
    // Block buffers that do not fit in the cache spill: written and read back.
    traffic += 2.0 * static_cast<double>(rows) * row_width_sum * 4.0;
  }
  // Rows the backend holds in registers (RowKernels.register_row_*): one
  // width, elementwise ops, norms and softmax; one row a block, or several
  // where the backend says so.
  const int64_t width = row->row_width.empty() ? 0 : row->row_width[0];
  const int64_t register_min = block_rows == 1 ? row_kernels.register_row_min_width()
                                               : row_kernels.register_row_multi_min_width();
  if (register_min > 0 && !cols && width >= register_min &&
      width % std::max(1, row_kernels.register_row_multiple()) == 0) {
    bool registers = true;
    for (size_t i = 0; i < ops.size() && registers; ++i) {
      const OpType type = graph.op(ops[i]).type;
      registers = row->row_width[i] == width && (IsElementwise(type) || IsNormOrSoftmax(type));
    }
    if (registers) flops *= kRegisterRowsGain;
  }
  const int simd = EffectiveSimdWidth(options);
  const int vector_width = std::clamp(schedule.vector_width(), 1, simd);
  const double compute =
      flops * static_cast<double>(simd) / vector_width / rates.vector_flops_per_second;

  // A flat grid: at least one block a thread (SM), more where the elements
  // make more blocks of kFlatBlockElements.
  const int64_t flat_blocks = std::max<int64_t>(
      threads,
      CeilDiv(NumElements(graph.tensor(graph.op(ops.front()).output).shape), kFlatBlockElements));
  const int64_t work = flat ? flat_blocks : splits > 1 ? rows * splits : cols ? col_tiles : blocks;
  const int64_t rounds = CeilDiv(work, threads);
  const double imbalance = static_cast<double>(rounds * threads) / static_cast<double>(work);
  double memory = memory_seconds() * imbalance;
  if (rates.gpu && has_matmul) {
    // Latency-bound blocks (kGpuBlockBytesInFlight): each block's share of
    // the rows' bytes and the B it multiplies, in waves of the blocks
    // resident at once.
    const double per_block =
        std::max(0.0, input_bytes - b_bytes + output_bytes) / static_cast<double>(work) +
        b_per_block;
    const int64_t waves = CeilDiv(work, threads * kGpuResidentBlocks);
    memory = std::max(memory, static_cast<double>(waves) * per_block / kGpuBlockBytesInFlight *
                                  kGpuMemoryLatencySeconds);
  }
  return rates.launch_seconds * (norm_split ? 2 : 1) + memory + compute * imbalance +
         (rates.gpu ? kGpuWorkRoundSeconds : kCpuWorkRoundSeconds) * static_cast<double>(rounds);
}

}  // namespace yirage::core
