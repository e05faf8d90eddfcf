#include "core/cost_model.h"

#include <string>
#include <vector>

#include "core/candidate_test_graphs.h"
#include "core/graph.h"
#include "core/graph_test_util.h"
#include "core/row_group.h"
#include "gtest/gtest.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {
namespace {

using yirage::v1::KernelPlan;

// Kernel k0 of `kind` running `ops`, reading `inputs`, writing `outputs`.
KernelPlan KernelOf(yirage::v1::KernelKind kind, const std::vector<std::string>& ops,
                    const std::vector<std::string>& inputs,
                    const std::vector<std::string>& outputs) {
  KernelPlan kernel;
  kernel.set_name("k0");
  kernel.set_kind(kind);
  for (const std::string& o : ops) kernel.add_ops(o);
  for (const std::string& i : inputs) kernel.add_inputs(i);
  for (const std::string& o : outputs) kernel.add_outputs(o);
  return kernel;
}

// The matmul Y = S @ W of rms_norm_linear as its own kernel.
KernelPlan MatmulKernel(yirage::v1::ParallelAxis axis, int block_rows, int tile_n) {
  KernelPlan kernel = KernelOf(yirage::v1::KERNEL_ROW, {"Y"}, {"S", "W"}, {"Y"});
  yirage::v1::Schedule* s = kernel.mutable_schedule();
  s->set_parallel(axis);
  s->set_block_rows(block_rows);
  s->set_tile_n(tile_n);
  s->set_tile_k(256);
  s->set_vector_width(8);
  s->set_unroll(1);
  return kernel;
}

class CostModelTest : public ::testing::Test {
 protected:
  double MatmulCost(yirage::v1::ParallelAxis axis, int block_rows, int tile_n,
                    const SearchOptions& options = {}) {
    absl::StatusOr<RowGroupInfo> row = AnalyzeRowGroup(graph_, std::vector<int>{2});
    EXPECT_TRUE(row.ok()) << row.status();
    return EstimateKernelCost(graph_, MatmulKernel(axis, block_rows, tile_n), &*row, options);
  }
  Graph graph_ = MustBuild(testing::RmsNormLinearProto());
};

TEST_F(CostModelTest, TensorBytesUseDTypeForGraphTensorsAndFloatScratchOtherwise) {
  EXPECT_DOUBLE_EQ(TensorBytes(graph_, graph_.FindTensor("X")), 2.0 * 16 * 4096);
  EXPECT_DOUBLE_EQ(TensorBytes(graph_, graph_.FindTensor("N")), 4.0 * 16 * 4096);
  EXPECT_DOUBLE_EQ(TensorBytes(graph_, graph_.FindTensor("Y")), 2.0 * 16 * 6144);
}

TEST_F(CostModelTest, MatmulFlops) {
  EXPECT_DOUBLE_EQ(OpFlops(graph_, graph_.FindOp("Y")), 2.0 * 16 * 6144 * 4096);
}

TEST_F(CostModelTest, FewWorkItemsArePenalized) {
  // One row block of 16 rows keeps 7 of 8 threads idle; 96 column tiles keep
  // them all busy and read W once.
  EXPECT_GT(MatmulCost(yirage::v1::PARALLEL_ROWS, 16, 64),
            MatmulCost(yirage::v1::PARALLEL_COLS, 16, 64));
}

TEST_F(CostModelTest, ReReadingBOncePerRowBlockCosts) {
  // Both keep 8 threads evenly busy (16 and 8 row blocks); block_rows 1 reads
  // the 48 MiB W sixteen times, block_rows 2 eight times.
  EXPECT_GT(MatmulCost(yirage::v1::PARALLEL_ROWS, 1, 64),
            MatmulCost(yirage::v1::PARALLEL_ROWS, 2, 64));
}

TEST_F(CostModelTest, BThatFitsInCacheIsReReadCheaply) {
  SearchOptions small, large;
  small.cache_bytes = 1 << 20;
  large.cache_bytes = int64_t{1} << 30;
  EXPECT_GT(MatmulCost(yirage::v1::PARALLEL_ROWS, 1, 64, small),
            MatmulCost(yirage::v1::PARALLEL_ROWS, 1, 64, large));
}

TEST_F(CostModelTest, NarrowVectorsCostMore) {
  KernelPlan wide = MatmulKernel(yirage::v1::PARALLEL_COLS, 16, 64);
  KernelPlan narrow = wide;
  narrow.mutable_schedule()->set_vector_width(1);
  absl::StatusOr<RowGroupInfo> row = AnalyzeRowGroup(graph_, std::vector<int>{2});
  ASSERT_TRUE(row.ok());
  EXPECT_GT(EstimateKernelCost(graph_, narrow, &*row, {}),
            EstimateKernelCost(graph_, wide, &*row, {}));
}

TEST_F(CostModelTest, GenericKernelsCostMoreThanRowKernels) {
  KernelPlan kernel = MatmulKernel(yirage::v1::PARALLEL_COLS, 16, 64);
  absl::StatusOr<RowGroupInfo> row = AnalyzeRowGroup(graph_, std::vector<int>{2});
  ASSERT_TRUE(row.ok());
  EXPECT_GT(EstimateKernelCost(graph_, kernel, nullptr, {}),
            EstimateKernelCost(graph_, kernel, &*row, {}));
}

// The cost of a KERNEL_ROW kernel of `ops` (one row a block, 8-wide
// vectors) on an H100-sized chip whose backend splits rows of at least
// `split_min` elements (RowKernels.split_row_min_width; 0: never).
double SplitRowCost(const Graph& g, const std::vector<std::string>& ops,
                    const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                    int split_min) {
  KernelPlan kernel = KernelOf(yirage::v1::KERNEL_ROW, ops, inputs, outputs);
  kernel.mutable_schedule()->set_block_rows(1);
  kernel.mutable_schedule()->set_vector_width(8);
  std::vector<int> ids;
  for (const std::string& op : ops) ids.push_back(g.FindOp(op));
  absl::StatusOr<RowGroupInfo> row = AnalyzeRowGroup(g, ids);
  EXPECT_TRUE(row.ok()) << row.status();
  SearchOptions options;
  options.num_threads = 132;
  options.cache_bytes = int64_t{50} << 20;
  options.kernels.mutable_row()->set_split_row_min_width(split_min);
  return EstimateKernelCost(g, kernel, &*row, options);
}

// Few long rows: where the backend splits rows over blocks
// (RowKernels.split_row_min_width), a softmax over 2 rows of 131072 is 128
// work items, not 2; a sum over them too; many rows do not split.
TEST(CostModelSplitRowsTest, FewLongRowsSplitWhereTheBackendSplitsThem) {
  auto cost = [](const yirage::v1::Graph& proto, const std::string& op, int split_min) {
    return SplitRowCost(MustBuild(proto), {op}, {"X"}, {op}, split_min);
  };
  auto graph = [](const std::string& op, int64_t rows, yirage::v1::AttrValue axis) {
    return testing::GraphProtoBuilder("g")
        .Input("X", {rows, 131072}, yirage::v1::FLOAT16)
        .Op("P", op, {"X"}, {{"axis", axis}})
        .Output("P")
        .proto();
  };
  const yirage::v1::AttrValue last = testing::IntAttr(-1);
  for (const char* op : {"softmax", "reduce_sum"}) {
    SCOPED_TRACE(op);
    const double whole = cost(graph(op, 2, last), "P", 0);
    const double split = cost(graph(op, 2, last), "P", 2048);
    EXPECT_LT(split * 4, whole);
    // 2048 rows: no split, the same cost either way.
    EXPECT_DOUBLE_EQ(cost(graph(op, 2048, last), "P", 2048), cost(graph(op, 2048, last), "P", 0));
  }
}

// A split reduction takes elementwise ops on its result (the last block
// applies them as it stores): a sum over 2 rows of 131072 then abs and a
// per-row scale still splits; with the sum's input (the row's width) as an
// output too, it does not.
TEST(CostModelSplitRowsTest, SplitReductionsTakeTheOpsOnTheirResult) {
  const Graph g =
      MustBuild(testing::GraphProtoBuilder("g")
                    .Input("X", {2, 131072}, yirage::v1::FLOAT16)
                    .Input("S", {2}, yirage::v1::FLOAT16)
                    .Op("E", "exp", {"X"})
                    .Op("P", "reduce_sum", {"E"},
                        {{"axis", testing::IntAttr(-1)}, {"keepdim", testing::BoolAttr(false)}})
                    .Op("A", "abs", {"P"})
                    .Op("M", "mul", {"A", "S"})
                    .Output("M")
                    .Output("E")
                    .proto());
  const std::vector<std::string> ops = {"E", "P", "A", "M"};
  EXPECT_LT(SplitRowCost(g, ops, {"X", "S"}, {"M"}, 2048) * 4,
            SplitRowCost(g, ops, {"X", "S"}, {"M"}, 0));
  // E (the row's width) is an output too: the split form does not store it.
  EXPECT_DOUBLE_EQ(SplitRowCost(g, ops, {"X", "S"}, {"M", "E"}, 2048),
                   SplitRowCost(g, ops, {"X", "S"}, {"M", "E"}, 0));
}

// Short rows held in registers (RowKernels.register_row_*): a block of one
// 256-wide row gets the register gain; several rows a block get it too only
// where the backend says it holds them so (register_row_multi_min_width),
// and rows narrower than that do not.
TEST(CostModelRegisterRowsTest, SeveralRowsABlockWhereTheBackendHoldsThemInRegisters) {
  const Graph g = MustBuild(testing::GraphProtoBuilder("g")
                                .Input("X", {24576, 256}, yirage::v1::BFLOAT16)
                                .Op("Y", "softmax", {"X"}, {{"axis", testing::IntAttr(-1)}})
                                .Output("Y")
                                .proto());
  absl::StatusOr<RowGroupInfo> row = AnalyzeRowGroup(g, std::vector<int>{g.FindOp("Y")});
  ASSERT_TRUE(row.ok()) << row.status();
  auto cost = [&](int block_rows, int multi_min) {
    KernelPlan kernel = KernelOf(yirage::v1::KERNEL_ROW, {"Y"}, {"X"}, {"Y"});
    kernel.mutable_schedule()->set_block_rows(block_rows);
    kernel.mutable_schedule()->set_vector_width(4);
    SearchOptions options;
    options.num_threads = 132;
    options.cache_bytes = int64_t{50} << 20;
    options.kernels.set_gpu(true);
    options.kernels.mutable_row()->set_register_row_min_width(256);
    options.kernels.mutable_row()->set_register_row_multiple(8);
    options.kernels.mutable_row()->set_register_row_multi_min_width(multi_min);
    return EstimateKernelCost(g, kernel, &*row, options);
  };
  EXPECT_DOUBLE_EQ(cost(1, 0), cost(1, 64)) << "one row a block: the multi-row width is moot";
  EXPECT_GT(cost(16, 0), cost(1, 0)) << "without registers, 16 rows a block lose the gain";
  EXPECT_LT(cost(16, 64), cost(16, 0));
  EXPECT_DOUBLE_EQ(cost(16, 512), cost(16, 0)) << "rows narrower than the backend's minimum";
}

// An H200 as its registry entry describes it (data/chips/nvidia.json).
SearchOptions H200Options() {
  SearchOptions o;
  o.warp_size = 32;
  o.num_compute_units = 132;
  o.cache_bytes = int64_t{60} << 20;
  o.simd_width_floats = 4;
  o.memory_bandwidth_gbps = 4800;
  o.peak_tflops_fp32 = 67;
  o.peak_tflops_fp16 = 989.5;
  o.peak_tflops_bf16 = 989.5;
  o.kernels.set_gpu(true);
  return o;
}

TEST(CostModelRooflineTest, RatesComeFromTheChipsFigures) {
  const Roofline r = RooflineOf(H200Options());
  EXPECT_TRUE(r.gpu);
  EXPECT_EQ(r.parallel_units, 132);
  EXPECT_DOUBLE_EQ(r.launch_seconds, kGpuLaunchSeconds);
  EXPECT_DOUBLE_EQ(r.memory_bytes_per_second, 4800e9 * kBandwidthEfficiency);
  EXPECT_DOUBLE_EQ(r.cache_bytes_per_second, 4800e9 * kBandwidthEfficiency * kCacheSpeedup);
  EXPECT_DOUBLE_EQ(r.vector_flops_per_second, 67e12 * kVectorEfficiency);
  EXPECT_DOUBLE_EQ(r.MatrixFlopsPerSecond(yirage::v1::FLOAT16), 989.5e12 * kMatrixEfficiency);
  EXPECT_DOUBLE_EQ(r.MatrixFlopsPerSecond(yirage::v1::BFLOAT16), 989.5e12 * kMatrixEfficiency);
  // fp32 on tensor cores: TF32, half the fp16 rate.
  EXPECT_DOUBLE_EQ(r.MatrixFlopsPerSecond(yirage::v1::FLOAT32), 989.5e12 / 2 * kMatrixEfficiency);
}

TEST(CostModelRooflineTest, UnknownFiguresUseDefaults) {
  const Roofline cpu = RooflineOf({});
  EXPECT_FALSE(cpu.gpu);
  EXPECT_EQ(cpu.parallel_units, kDefaultThreads);
  EXPECT_DOUBLE_EQ(cpu.launch_seconds, kCpuLaunchSeconds);
  EXPECT_DOUBLE_EQ(cpu.memory_bytes_per_second, kDefaultCpuBandwidthGbps * 1e9);
  EXPECT_DOUBLE_EQ(cpu.vector_flops_per_second,
                   kDefaultCpuBandwidthGbps * 1e9 * kDefaultFlopsPerByte);
  EXPECT_DOUBLE_EQ(cpu.MatrixFlopsPerSecond(yirage::v1::FLOAT32),
                   cpu.vector_flops_per_second * kDefaultCpuMatrixSpeedup);
  // A CPU with a vector peak (a detected one: core/chip_search.h derives it)
  // runs its BLAS at that peak, the generated kernels at a fraction of it.
  SearchOptions detected;
  detected.num_threads = 2;
  detected.peak_tflops_fp32 = 0.32;
  const Roofline d = RooflineOf(detected);
  EXPECT_EQ(d.parallel_units, 2);
  EXPECT_DOUBLE_EQ(d.vector_flops_per_second, 0.32e12 * kVectorEfficiency);
  EXPECT_DOUBLE_EQ(d.MatrixFlopsPerSecond(yirage::v1::FLOAT16), 0.32e12 * kMatrixEfficiency);
}

// The estimates are times: a large elementwise kernel costs its bytes over
// the bandwidth (plus its launch and block rounds), a library GEMM its flops
// over the matrix rate of its dtype.
TEST(CostModelRooflineTest, EstimatesAreSecondsOnTheRoofline) {
  const SearchOptions h200 = H200Options();
  const Roofline r = RooflineOf(h200);
  const Graph relu = MustBuild(testing::GraphProtoBuilder("g")
                                   .Input("X", {4096, 16384}, yirage::v1::FLOAT16)
                                   .Op("Y", "relu", {"X"})
                                   .Output("Y")
                                   .proto());
  KernelPlan kernel = KernelOf(yirage::v1::KERNEL_ROW, {"Y"}, {"X"}, {"Y"});
  kernel.mutable_schedule()->set_block_rows(1);
  kernel.mutable_schedule()->set_vector_width(4);
  absl::StatusOr<RowGroupInfo> row = AnalyzeRowGroup(relu, std::vector<int>{0});
  ASSERT_TRUE(row.ok()) << row.status();
  const double bytes = 2.0 * 2 * 4096 * 16384;
  const double floor = r.launch_seconds + bytes / r.memory_bytes_per_second;
  const double relu_s = EstimateKernelCost(relu, kernel, &*row, h200);
  EXPECT_GE(relu_s, floor);
  EXPECT_LT(relu_s, 1.1 * floor);

  auto gemm = [](yirage::v1::DType dtype) {
    return MustBuild(testing::GraphProtoBuilder("g")
                         .Input("A", {4096, 4096}, dtype)
                         .Input("B", {4096, 4096}, dtype)
                         .Op("Y", "matmul", {"A", "B"})
                         .Output("Y")
                         .proto());
  };
  const KernelPlan library = KernelOf(yirage::v1::KERNEL_LIBRARY, {"Y"}, {"A", "B"}, {"Y"});
  const double flops = 2.0 * 4096 * 4096 * 4096;
  for (yirage::v1::DType dtype : {yirage::v1::FLOAT16, yirage::v1::BFLOAT16, yirage::v1::FLOAT32}) {
    SCOPED_TRACE(yirage::v1::DType_Name(dtype));
    EXPECT_DOUBLE_EQ(EstimateKernelCost(gemm(dtype), library, nullptr, h200),
                     r.launch_seconds + flops / r.MatrixFlopsPerSecond(dtype));
  }
}

// On a backend with flat elementwise kernels (RowKernels.flat_elementwise)
// an elementwise group's elements, not its rows, make the work: a rank-1
// tensor of 10M elements is one row but not one block, and costs its bytes
// over the bandwidth. Where the backend runs rows, one row is one block.
TEST(CostModelRooflineTest, FlatElementwiseGroupsAreNotBoundByTheirRows) {
  SearchOptions h200 = H200Options();
  const Roofline r = RooflineOf(h200);
  const Graph flat = MustBuild(testing::GraphProtoBuilder("g")
                                   .Input("X", {9999991}, yirage::v1::FLOAT16)
                                   .Input("G", {9999991}, yirage::v1::FLOAT16)
                                   .Op("S", "silu", {"X"})
                                   .Op("Y", "mul", {"S", "G"})
                                   .Output("Y")
                                   .proto());
  KernelPlan kernel = KernelOf(yirage::v1::KERNEL_ROW, {"S", "Y"}, {"X", "G"}, {"Y"});
  kernel.mutable_schedule()->set_vector_width(4);
  absl::StatusOr<RowGroupInfo> row = AnalyzeRowGroup(flat, std::vector<int>{0, 1});
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_EQ(row->num_rows, 1);
  const double floor = r.launch_seconds + 3.0 * 2 * 9999991 / r.memory_bytes_per_second;
  const double rows_s = EstimateKernelCost(flat, kernel, &*row, h200);
  EXPECT_GT(rows_s, 50 * floor) << "one row, one block";
  h200.kernels.mutable_row()->set_flat_elementwise(true);
  const double flat_s = EstimateKernelCost(flat, kernel, &*row, h200);
  EXPECT_GE(flat_s, floor);
  EXPECT_LT(flat_s, 1.2 * floor);
}

// A GPU row kernel with a matmul over few blocks is latency-bound: each
// block moves kGpuBlockBytesInFlight a memory latency (Little's law), the B
// of its own batch entry, however fast the chip's memory. Decode attention
// of 2 heads (1 query row, 255 keys of 128): two blocks, each reading 65 KB
// of V, cannot run at a 132nd of the HBM bandwidth each.
TEST(CostModelRooflineTest, FewMatmulBlocksAreLatencyBound) {
  const SearchOptions h200 = H200Options();
  const Roofline r = RooflineOf(h200);
  auto pv = [](int64_t heads, int64_t rows) {
    return MustBuild(testing::GraphProtoBuilder("g")
                         .Input("P", {heads, rows, 255}, yirage::v1::BFLOAT16)
                         .Input("V", {heads, 255, 128}, yirage::v1::BFLOAT16)
                         .Op("O", "matmul", {"P", "V"})
                         .Output("O")
                         .proto());
  };
  KernelPlan kernel = KernelOf(yirage::v1::KERNEL_ROW, {"O"}, {"P", "V"}, {"O"});
  kernel.mutable_schedule()->set_block_rows(1);
  kernel.mutable_schedule()->set_tile_n(64);
  kernel.mutable_schedule()->set_tile_k(256);
  const Graph decode = pv(2, 1);
  absl::StatusOr<RowGroupInfo> row = AnalyzeRowGroup(decode, std::vector<int>{0});
  ASSERT_TRUE(row.ok()) << row.status();
  // Each block: its P row and O row, and V of its head.
  const double per_block = (255.0 * 2 + 128 * 2) + 255.0 * 128 * 2;
  const double bound =
      r.launch_seconds + per_block / kGpuBlockBytesInFlight * kGpuMemoryLatencySeconds;
  const double decode_s = EstimateKernelCost(decode, kernel, &*row, h200);
  EXPECT_GE(decode_s, bound);
  EXPECT_LT(decode_s, 1.1 * bound);
  // Without the bound, two blocks at a 132nd of the chip's bandwidth each
  // would take under a fifth of it.
  EXPECT_LT(5 * (132 / 2) * 2 * per_block / r.memory_bytes_per_second, decode_s - r.launch_seconds);
  // Blocks past what the multiprocessors hold at once run in waves: 8 blocks
  // an SM, so 132 * 8 * 2 rows of each head take two.
  const Graph waves = pv(1, 132 * 8 * 2);
  row = AnalyzeRowGroup(waves, std::vector<int>{0});
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_GE(
      EstimateKernelCost(waves, kernel, &*row, h200),
      r.launch_seconds + 2 * 255.0 * 128 * 2 / kGpuBlockBytesInFlight * kGpuMemoryLatencySeconds);
}

// A GEMM family kernel computes at the matrix rate on the share of its tile
// work that covers C: tiles of 256 rows over 128 rows compute half padding,
// and a last wave that leaves multiprocessors idle costs what split-K does
// not win back.
// Y = A @ B, A [M, 4096] and B [4096, N] in fp16.
Graph Fp16Matmul(int64_t m, int64_t n) {
  return MustBuild(testing::GraphProtoBuilder("g")
                       .Input("A", {m, 4096}, yirage::v1::FLOAT16)
                       .Input("B", {4096, n}, yirage::v1::FLOAT16)
                       .Op("Y", "matmul", {"A", "B"})
                       .Output("Y")
                       .proto());
}

TEST(CostModelRooflineTest, GemmTilesPayForPaddingAndPartialWaves) {
  // A GEMM family with the tiles its points offer (as the CUDA backend
  // describes them), and one point leaving the tile to the backend.
  SearchOptions options = H200Options();
  yirage::v1::KernelFamily* family = options.kernels.add_families();
  family->set_name("gemm");
  family->set_pattern(yirage::v1::GEMM);
  for (const auto& [m, n] :
       {std::pair{0, 0}, std::pair{128, 256}, std::pair{128, 128}, std::pair{256, 128}}) {
    yirage::v1::GemmSchedule* point = family->add_points()->mutable_schedule()->mutable_gemm();
    point->set_tile_m(m);
    point->set_tile_n(n);
  }
  auto cost = [&](int64_t m, int64_t n, int tile_m, int tile_n, int split_k) {
    const Graph g = Fp16Matmul(m, n);
    KernelPlan kernel = KernelOf(tile_m == 0 ? yirage::v1::KERNEL_LIBRARY : yirage::v1::KERNEL_ROW,
                                 {"Y"}, {"A", "B"}, {"Y"});
    if (tile_m != 0) {
      yirage::v1::GemmSchedule* gemm = kernel.mutable_schedule()->mutable_gemm();
      gemm->set_tile_m(tile_m);
      gemm->set_tile_n(tile_n);
      gemm->set_split_k(split_k);
    }
    return EstimateKernelCost(g, kernel, nullptr, options);
  };
  auto library = [&](int64_t m, int64_t n) { return cost(m, n, 0, 0, 0); };
  // 384 rows: tiles of 256 rows compute a quarter padding (512 rows).
  EXPECT_NEAR(cost(384, 16384, 256, 128, 0) / cost(384, 16384, 128, 128, 0), 4.0 / 3, 0.05);
  // The best tiles for the shape cost as the library would.
  EXPECT_DOUBLE_EQ(cost(384, 16384, 128, 128, 0), library(384, 16384));
  // 512 x 16384: 128x128 tiles are 512 of them (3.9 waves of 132), 128x256
  // ones 256 (1.9 waves): the same share of the chip busy.
  EXPECT_NEAR(cost(512, 16384, 128, 256, 0), cost(512, 16384, 128, 128, 0),
              0.05 * cost(512, 16384, 128, 128, 0));
  // 512 x 9728 in 128x256 tiles: 152 tiles, a last wave of 20. Without
  // split-K it idles 112 multiprocessors; split into 6 it fills the wave.
  EXPECT_GT(cost(512, 9728, 128, 256, 1), 1.5 * cost(512, 9728, 128, 256, 0));
  // Whole waves (1056 tiles of 128x128 over 132 multiprocessors) reach the
  // matrix rate.
  const Roofline r = RooflineOf(H200Options());
  EXPECT_NEAR(cost(128 * 132, 1024, 128, 128, 0),
              r.launch_seconds +
                  2.0 * 128 * 132 * 1024 * 4096 / r.MatrixFlopsPerSecond(yirage::v1::FLOAT16),
              1e-9);
  // Tiles rank against the backend's own points: with no GEMM family
  // described, no tile is preferred.
  options.kernels.clear_families();
  EXPECT_DOUBLE_EQ(cost(384, 16384, 256, 128, 0), library(384, 16384));
}

// A point's matrix_share scales its products' rate and its
// blocks_per_multiprocessor the waves its tiles run in; the kernel takes
// the figures of the point whose knobs it carries.
TEST(CostModelRooflineTest, GemmPointsChargeTheirFormsRateAndResidentBlocks) {
  SearchOptions options = H200Options();
  yirage::v1::KernelFamily* family = options.kernels.add_families();
  family->set_name("gemm");
  family->set_pattern(yirage::v1::GEMM);
  yirage::v1::SchedulePoint* wgmma = family->add_points();
  wgmma->mutable_schedule()->mutable_gemm()->set_tile_m(128);
  wgmma->mutable_schedule()->mutable_gemm()->set_tile_n(256);
  wgmma->mutable_schedule()->mutable_gemm()->set_split_k(1);
  yirage::v1::SchedulePoint* mma = family->add_points();
  mma->mutable_schedule()->mutable_gemm()->set_mma_sync(true);
  mma->mutable_schedule()->mutable_gemm()->set_tile_m(64);
  mma->mutable_schedule()->mutable_gemm()->set_tile_n(64);
  mma->mutable_schedule()->mutable_gemm()->set_split_k(1);
  mma->set_matrix_share(0.5);
  mma->set_blocks_per_multiprocessor(2);
  auto cost = [&](int64_t m, int64_t n, const yirage::v1::SchedulePoint* point) {
    const Graph g = Fp16Matmul(m, n);
    KernelPlan kernel = KernelOf(yirage::v1::KERNEL_ROW, {"Y"}, {"A", "B"}, {"Y"});
    *kernel.mutable_schedule() = point->schedule();
    return EstimateKernelCost(g, kernel, nullptr, options);
  };
  const Roofline r = RooflineOf(H200Options());
  const int64_t m = 128 * 132;
  const double at_peak =
      r.launch_seconds + 2.0 * m * 2048 * 4096 / r.MatrixFlopsPerSecond(yirage::v1::FLOAT16);
  // Whole waves of both (1056 tiles of 128 x 256 over 132 multiprocessors;
  // 8448 of 64 x 64 over 132 x 2 blocks): the wgmma point at the peak, the
  // mma one at half of it.
  EXPECT_NEAR(cost(m, 2048, wgmma), at_peak, 1e-9);
  EXPECT_NEAR(cost(m, 2048, mma), 2 * at_peak - r.launch_seconds, 1e-9);
  // 512 x 512 without split-K: 8 tiles of 128 x 256 keep 8 of 132
  // multiprocessors busy; 64 tiles of 64 x 64 are 64 of 264 blocks at
  // half the rate, twice the share: the mma point is the cheaper.
  EXPECT_LT(cost(512, 512, mma), cost(512, 512, wgmma));
  // With 4 blocks a multiprocessor, the 64 tiles are a quarter of a wave
  // of 528 blocks: the two cost the same.
  mma->set_blocks_per_multiprocessor(4);
  EXPECT_NEAR(cost(512, 512, mma), cost(512, 512, wgmma), 1e-3 * cost(512, 512, wgmma));
  // A kernel whose knobs are no point's: the defaults (the full rate, a
  // block a multiprocessor).
  yirage::v1::SchedulePoint other = *mma;
  other.mutable_schedule()->mutable_gemm()->set_stages(7);
  EXPECT_LT(cost(m, 2048, &other), cost(m, 2048, mma));
}

// A kernel that reads an input through a slice, or through a concat that
// only a slice reads, moves the window, not the whole input.
TEST(CostModelRooflineTest, SlicesReadTheirWindows) {
  const Graph g = MustBuild(testing::GraphProtoBuilder("g")
                                .Input("A", {1000, 1000}, yirage::v1::BFLOAT16)
                                .Input("B", {1000, 1000}, yirage::v1::BFLOAT16)
                                .Op("C", "concat", {"A", "B"}, {{"axis", testing::IntAttr(0)}})
                                .Op("S", "slice", {"C"},
                                    {{"axis", testing::IntAttr(0)},
                                     {"start", testing::IntAttr(900)},
                                     {"end", testing::IntAttr(1100)}})
                                .Output("S")
                                .proto());
  auto cost = [&](const std::vector<std::string>& ops, const std::vector<std::string>& inputs,
                  const std::vector<std::string>& outputs) {
    return EstimateKernelCost(g, KernelOf(yirage::v1::KERNEL_GENERIC, ops, inputs, outputs),
                              nullptr, H200Options());
  };
  const Roofline r = RooflineOf(H200Options());
  const double row = 1000 * 2.0;  // bytes of one bf16 row
  auto expected = [&](double bytes) {
    return r.launch_seconds + bytes / r.memory_bytes_per_second * kGenericSlowdown;
  };
  // concat + slice in one kernel: rows 900-999 of A and 0-99 of B in, 200 rows out.
  EXPECT_DOUBLE_EQ(cost({"C", "S"}, {"A", "B"}, {"S"}), expected(400 * row));
  // The slice alone reads its 200 of C's 2000 rows (C passed as float32 scratch).
  EXPECT_DOUBLE_EQ(cost({"S"}, {"C"}, {"S"}), expected(200 * 2 * row + 200 * row));
  // The concat alone reads both inputs whole.
  EXPECT_DOUBLE_EQ(cost({"C"}, {"A", "B"}, {"C"}), expected(2000 * row + 2000 * 2 * row));
}

TEST(CostModelDefaultsTest, UnknownTargetValuesUseDefaults) {
  SearchOptions options;
  options.simd_width_floats = 0;
  EXPECT_EQ(EffectiveThreads(options), kDefaultThreads);
  EXPECT_EQ(EffectiveCacheBytes(options), kDefaultCacheBytes);
  EXPECT_EQ(EffectiveSimdWidth(options), kDefaultSimdWidth);
  options.num_threads = 3;
  options.cache_bytes = 100;
  EXPECT_EQ(EffectiveThreads(options), 3);
  EXPECT_EQ(EffectiveCacheBytes(options), 100);
}

}  // namespace
}  // namespace yirage::core
