#include "core/candidate_generator.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "core/candidate_test_graphs.h"
#include "core/graph.h"
#include "core/graph_json.h"
#include "gmock/gmock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {
namespace {

using ::testing::HasSubstr;
using yirage::v1::KernelPlan;
using yirage::v1::Plan;

Graph MustBuild(const yirage::v1::Graph& proto) {
  absl::StatusOr<Graph> graph = Graph::FromProto(proto);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

std::vector<Plan> MustGenerate(const Graph& graph, const SearchOptions& options = {}) {
  absl::StatusOr<std::vector<Plan>> plans = GenerateCandidates(graph, options);
  EXPECT_TRUE(plans.ok()) << plans.status();
  return plans.ok() ? *std::move(plans) : std::vector<Plan>{};
}

// Options of a CUDA worker on an H200-like chip (warps of 32, 227 KiB of
// shared memory per block), rewrites off.
SearchOptions CudaOptions() {
  SearchOptions gpu;
  gpu.backend = "cuda";
  gpu.enable_rewrites = false;
  gpu.warp_size = 32;
  gpu.max_tile_bytes = 227 * 1024;
  return gpu;
}

// The graph of a JSON file (a path under the source tree).
absl::StatusOr<yirage::v1::Graph> LoadGraphFile(const std::string& relative) {
  std::ifstream in(std::string(YIRAGE_SOURCE_DIR) + "/" + relative);
  std::stringstream text;
  text << in.rdbuf();
  return ParseGraphJson(text.str());
}

// The kernels of a plan, serialized deterministically (what makes two plans
// the same plan, whatever their description or cost).
std::string KernelsKey(const Plan& plan) {
  Plan kernels_only;
  *kernels_only.mutable_kernels() = plan.kernels();
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  kernels_only.SerializeToCodedStream(&coded);
  coded.Trim();
  return out;
}

std::vector<std::string> Strings(const google::protobuf::RepeatedPtrField<std::string>& field) {
  return std::vector<std::string>(field.begin(), field.end());
}

// Checks the contract every GenerateCandidates result must meet.
void ExpectWellFormed(const Graph& graph, const std::vector<Plan>& plans,
                      const SearchOptions& options = {}) {
  ASSERT_FALSE(plans.empty());
  EXPECT_TRUE(plans[0].baseline());
  EXPECT_EQ(plans[0].kernels_size(), static_cast<int>(graph.ops().size()));
  std::set<std::string> keys;
  for (size_t i = 0; i < plans.size(); ++i) {
    const Plan& plan = plans[i];
    SCOPED_TRACE(plan.description());
    EXPECT_TRUE(ValidatePlan(graph, plan).ok()) << ValidatePlan(graph, plan);
    EXPECT_EQ(plan.baseline(), i == 0);
    EXPECT_TRUE(keys.insert(plan.graph().name() + KernelsKey(plan)).second) << "duplicate plan";
    // A rewritten plan names the ops of its own graph.
    const Graph own = plan.has_graph() ? MustBuild(plan.graph()) : graph;
    EXPECT_DOUBLE_EQ(plan.estimated_cost(), EstimatePlanCost(graph, plan, options));
    EXPECT_GT(plan.estimated_cost(), 0);
    EXPECT_FALSE(plan.description().empty());
    if (i >= 2) {
      EXPECT_LE(plans[i - 1].estimated_cost(), plan.estimated_cost());
    }
    for (int k = 0; k < plan.kernels_size(); ++k) {
      const KernelPlan& kernel = plan.kernels(k);
      EXPECT_EQ(kernel.name(), "k" + std::to_string(k));
      // Matmul tiles never exceed the kernel's matmul dims.
      int64_t max_n = 0, max_k = 0;
      for (const std::string& name : kernel.ops()) {
        const OpInfo& op = own.op(own.FindOp(name));
        if (op.type != OpType::kMatmul) continue;
        max_n = std::max(max_n, own.tensor(op.output).shape.back());
        max_k = std::max(max_k, own.tensor(op.inputs[0]).shape.back());
      }
      if (max_n > 0) {
        EXPECT_LE(kernel.schedule().tile_n(), max_n) << kernel.name();
        EXPECT_LE(kernel.schedule().tile_k(), max_k) << kernel.name();
      }
    }
  }
  EXPECT_LE(plans.size(), 200u);
}

bool HasFusedKernel(const std::vector<Plan>& plans) {
  for (const Plan& plan : plans) {
    for (const KernelPlan& kernel : plan.kernels()) {
      if (kernel.ops_size() >= 2) return true;
    }
  }
  return false;
}

const Plan* FindSingleKernelPlan(const std::vector<Plan>& plans) {
  for (const Plan& plan : plans) {
    if (plan.kernels_size() == 1 && !plan.has_graph()) return &plan;  // the original graph's
  }
  return nullptr;
}

TEST(CandidateGeneratorTest, RmsNormLinearYieldsManyDistinctValidPlans) {
  Graph graph = MustBuild(testing::RmsNormLinearProto());
  std::vector<Plan> plans = MustGenerate(graph);
  ExpectWellFormed(graph, plans);
  EXPECT_GE(plans.size(), 16u);

  // Baseline: one kernel per op, default schedule, default tensor lists.
  const Plan& baseline = plans[0];
  EXPECT_EQ(baseline.description(), "[N][S][Y] baseline");
  for (const KernelPlan& kernel : baseline.kernels()) {
    EXPECT_EQ(kernel.kind(), yirage::v1::KERNEL_ROW);
    EXPECT_EQ(kernel.schedule().parallel(), yirage::v1::PARALLEL_ROWS);
    EXPECT_EQ(kernel.schedule().block_rows(), 4);
    EXPECT_EQ(kernel.schedule().tile_n(), 64);
    EXPECT_EQ(kernel.schedule().tile_k(), 256);
    EXPECT_EQ(kernel.schedule().vector_width(), 8);
    EXPECT_EQ(kernel.schedule().unroll(), 1);
  }
  EXPECT_THAT(Strings(baseline.kernels(1).inputs()), ::testing::ElementsAre("N", "G"));
  EXPECT_THAT(Strings(baseline.kernels(1).outputs()), ::testing::ElementsAre("S"));

  // The fully fused kernel reads X, G, W in first-use order and writes Y only.
  const Plan* fused = FindSingleKernelPlan(plans);
  ASSERT_NE(fused, nullptr);
  EXPECT_THAT(Strings(fused->kernels(0).ops()), ::testing::ElementsAre("N", "S", "Y"));
  EXPECT_THAT(Strings(fused->kernels(0).inputs()), ::testing::ElementsAre("X", "G", "W"));
  EXPECT_THAT(Strings(fused->kernels(0).outputs()), ::testing::ElementsAre("Y"));

  // Every partition and both parallel axes and tile widths show up.
  std::set<std::string> partitions;
  std::set<int> block_rows, tile_n, unroll;
  bool has_cols = false;
  for (const Plan& plan : plans) {
    if (plan.has_graph()) continue;  // rewritten graphs (fingerprinted at reduced shapes)
    partitions.insert(plan.description().substr(0, plan.description().find(' ')));
    for (const KernelPlan& kernel : plan.kernels()) {
      if (kernel.schedule().parallel() == yirage::v1::PARALLEL_COLS) {
        has_cols = true;
        EXPECT_EQ(kernel.schedule().block_rows(), 16);
      } else {
        block_rows.insert(kernel.schedule().block_rows());
      }
      tile_n.insert(kernel.schedule().tile_n());
      unroll.insert(kernel.schedule().unroll());
    }
  }
  EXPECT_THAT(partitions,
              ::testing::UnorderedElementsAre("[N][S][Y]", "[N+S][Y]", "[N][S+Y]", "[N+S+Y]"));
  EXPECT_TRUE(has_cols);
  EXPECT_THAT(block_rows, ::testing::ElementsAre(1, 4, 16));  // never above 16 rows
  EXPECT_THAT(tile_n, ::testing::ElementsAre(64, 256));
  EXPECT_THAT(unroll, ::testing::ElementsAre(1, 4));
}

TEST(CandidateGeneratorTest, OutputIsDeterministic) {
  for (const auto& proto : {testing::RmsNormLinearProto(), testing::LoraProto()}) {
    Graph graph = MustBuild(proto);
    std::vector<Plan> a = MustGenerate(graph);
    std::vector<Plan> b = MustGenerate(MustBuild(proto));
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      // Plans of rewritten graphs hold attr maps, whose wire order is not fixed.
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a[i], b[i])) << i;
    }
  }
}

TEST(CandidateGeneratorTest, ModelGraphsYieldFusedCandidates) {
  for (const auto& proto : {testing::GatedMlpProto(), testing::LoraProto(), testing::SoftmaxProto(),
                            testing::NormTransformerProto()}) {
    SCOPED_TRACE(proto.name());
    Graph graph = MustBuild(proto);
    std::vector<Plan> plans = MustGenerate(graph);
    ExpectWellFormed(graph, plans);
    EXPECT_TRUE(HasFusedKernel(plans));
    // Each of these graphs is one legal row group as a whole.
    const Plan* fused = FindSingleKernelPlan(plans);
    ASSERT_NE(fused, nullptr);
    EXPECT_EQ(fused->kernels(0).ops_size(), static_cast<int>(graph.ops().size()));
    EXPECT_EQ(fused->kernels(0).kind(), yirage::v1::KERNEL_ROW);
  }
}

TEST(CandidateGeneratorTest, GatedMlpFusedKernelReadsWeightsAndInputOnce) {
  Graph graph = MustBuild(testing::GatedMlpProto());
  std::vector<Plan> plans = MustGenerate(graph);
  const Plan* fused = FindSingleKernelPlan(plans);
  ASSERT_NE(fused, nullptr);
  EXPECT_THAT(Strings(fused->kernels(0).inputs()), ::testing::ElementsAre("X", "W1", "W2"));
  EXPECT_THAT(Strings(fused->kernels(0).outputs()), ::testing::ElementsAre("Y"));
}

TEST(CandidateGeneratorTest, NonLastAxisReductionIsGeneric) {
  Graph graph = MustBuild(testing::ColumnReductionProto());
  std::vector<Plan> plans = MustGenerate(graph);
  ExpectWellFormed(graph, plans);
  for (const Plan& plan : plans) {
    bool found = false;
    for (const KernelPlan& kernel : plan.kernels()) {
      if (std::find(kernel.ops().begin(), kernel.ops().end(), "R") == kernel.ops().end()) {
        EXPECT_EQ(kernel.kind(), yirage::v1::KERNEL_ROW);
        continue;
      }
      found = true;
      EXPECT_EQ(kernel.kind(), yirage::v1::KERNEL_GENERIC);
      EXPECT_EQ(kernel.ops_size(), 1);
      EXPECT_EQ(kernel.schedule().block_rows(), 1);
    }
    EXPECT_TRUE(found);
  }
  EXPECT_THAT(plans[0].description(), HasSubstr("[R:generic]"));
}

TEST(CandidateGeneratorTest, MaxCandidatesTruncatesAndKeepsBaseline) {
  Graph graph = MustBuild(testing::RmsNormLinearProto());
  std::vector<Plan> all = MustGenerate(graph);
  ASSERT_GT(all.size(), 5u);
  SearchOptions options;
  options.max_candidates = 5;
  std::vector<Plan> five = MustGenerate(graph, options);
  ASSERT_EQ(five.size(), 5u);
  for (size_t i = 0; i < five.size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(five[i], all[i])) << i;
  }
  options.max_candidates = 1;
  std::vector<Plan> one = MustGenerate(graph, options);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_TRUE(one[0].baseline());
}

TEST(CandidateGeneratorTest, OptionsShapeTheSchedules) {
  Graph graph = MustBuild(testing::NormTransformerProto());  // 128 rows, no matmul
  SearchOptions options;
  options.simd_width_floats = 16;
  options.num_threads = 4;
  std::vector<Plan> plans = MustGenerate(graph, options);
  ExpectWellFormed(graph, plans, options);
  std::set<int> block_rows;
  for (const Plan& plan : plans) {
    for (const KernelPlan& kernel : plan.kernels()) {
      EXPECT_EQ(kernel.schedule().vector_width(), 16);
      // 128 rows and 4 threads: no group qualifies for PARALLEL_COLS.
      EXPECT_EQ(kernel.schedule().parallel(), yirage::v1::PARALLEL_ROWS);
      EXPECT_EQ(kernel.schedule().tile_n(), 64);
      block_rows.insert(kernel.schedule().block_rows());
    }
  }
  EXPECT_THAT(block_rows, ::testing::ElementsAre(1, 4, 16, 64));
}

TEST(CandidateGeneratorTest, ChipTileBoundLimitsMatmulTiles) {
  Graph graph = MustBuild(testing::RmsNormLinearProto());
  SearchOptions unbounded;
  unbounded.enable_rewrites = false;
  std::set<int> free_tiles;
  for (const Plan& plan : MustGenerate(graph, unbounded)) {
    for (const KernelPlan& kernel : plan.kernels()) free_tiles.insert(kernel.schedule().tile_n());
  }
  ASSERT_TRUE(free_tiles.count(256)) << "the unbounded search should try 256-wide tiles";
  SearchOptions bounded = unbounded;
  bounded.tile_sizes = {16, 32, 64, 128};  // what a chip with little on-chip memory allows
  std::set<int> tiles;
  for (const Plan& plan : MustGenerate(graph, bounded)) {
    for (const KernelPlan& kernel : plan.kernels()) {
      if (plan.baseline()) continue;
      tiles.insert(kernel.schedule().tile_n());
    }
  }
  EXPECT_FALSE(tiles.empty());
  EXPECT_LE(*tiles.rbegin(), 128);
}

// GPU search spaces follow the chip: copy-pipeline depths bounded by shared
// memory per block, block widths by the chip's thread limits.
TEST(CandidateGeneratorTest, GpuKnobsFollowTheChip) {
  Graph graph = MustBuild(testing::RmsNormLinearProto());
  SearchOptions big;
  big.backend = "cuda";
  big.enable_rewrites = false;
  big.warp_size = 32;
  big.max_tile_bytes = 227 * 1024;
  big.block_threads = {32, 64, 128, 256, 512, 1024};
  std::set<int> stages, warps;
  for (const Plan& plan : MustGenerate(graph, big)) {
    for (const KernelPlan& kernel : plan.kernels()) {
      stages.insert(kernel.schedule().stages());
      warps.insert(kernel.schedule().warps());
    }
  }
  EXPECT_TRUE(stages.count(6)) << "227 KiB of shared memory holds a 6-stage pipeline";
  EXPECT_TRUE(stages.count(3));
  EXPECT_TRUE(warps.count(32)) << "1024-thread blocks";
  SearchOptions small = big;
  small.max_tile_bytes = 64 * 1024;
  small.block_threads = {32, 64, 128, 256};
  stages.clear();
  warps.clear();
  for (const Plan& plan : MustGenerate(graph, small)) {
    for (const KernelPlan& kernel : plan.kernels()) {
      stages.insert(kernel.schedule().stages());
      warps.insert(kernel.schedule().warps());
    }
  }
  EXPECT_FALSE(stages.count(6)) << "64 KiB cannot hold 6 stages";
  EXPECT_TRUE(stages.count(3));
  EXPECT_FALSE(warps.count(32));
}

// The streamed-matmul chains get both kernel forms (Schedule.variant) with
// their knobs; the registers form only where it applies (no low-rank branch,
// X of at most 32 rows).
TEST(CandidateGeneratorTest, StreamedMatmulFormsAreSearched) {
  const SearchOptions gpu = CudaOptions();
  auto forms = [&](const yirage::v1::Graph& proto) {
    std::set<std::tuple<int, int, int>> seen;  // (variant, stages, warps)
    for (const Plan& plan : MustGenerate(MustBuild(proto), gpu)) {
      if (plan.kernels_size() != 1) continue;
      const auto& s = plan.kernels(0).schedule();
      seen.insert({s.variant(), s.stages(), s.warps()});
    }
    return seen;
  };
  const auto rms = forms(testing::RmsNormLinearProto());  // X: 16 rows
  for (const auto& form :
       {std::tuple{0, 0, 0}, std::tuple{1, 3, 0}, std::tuple{1, 6, 0}, std::tuple{2, 1, 0},
        std::tuple{2, 2, 0}, std::tuple{2, 2, 8}, std::tuple{2, 3, 0}}) {
    EXPECT_TRUE(rms.count(form)) << std::get<0>(form) << " " << std::get<1>(form) << " "
                                 << std::get<2>(form);
  }
  const auto lora = forms(testing::LoraProto());  // a low-rank branch
  EXPECT_TRUE(lora.count({1, 3, 0}));
  for (const auto& form : lora) EXPECT_NE(std::get<0>(form), 2);
}

// A fused attention chain gets its own variants on GPUs (block rows, warps,
// pipeline depth, the workspace and in-kernel merges); other chains get none
// of them.
TEST(CandidateGeneratorTest, AttentionVariantsAreSearched) {
  absl::StatusOr<yirage::v1::Graph> proto =
      LoadGraphFile("examples/graphs/bench/gqa_decode_b1.json");
  ASSERT_TRUE(proto.ok()) << proto.status();
  const SearchOptions gpu = CudaOptions();
  // (variant, stages, warps, block_rows, warp_rows)
  std::set<std::tuple<int, int, int, int, int>> seen;
  for (const Plan& plan : MustGenerate(MustBuild(*proto), gpu)) {
    if (plan.kernels_size() != 1) continue;
    const auto& s = plan.kernels(0).schedule();
    seen.insert({s.variant(), s.stages(), s.warps(), s.block_rows(), s.warp_rows()});
  }
  for (const auto& v :
       {std::tuple{0, 0, 0, 1, 0}, std::tuple{0, 3, 0, 1, 0}, std::tuple{0, 6, 0, 1, 0},
        std::tuple{0, 3, 8, 64, 0}, std::tuple{3, 3, 8, 64, 0}, std::tuple{0, 2, 16, 64, 0},
        std::tuple{0, 4, 4, 64, 32}, std::tuple{2, 4, 4, 64, 0}, std::tuple{4, 2, 4, 64, 32},
        std::tuple{4, 4, 4, 64, 64}}) {
    EXPECT_TRUE(seen.count(v)) << std::get<0>(v) << " " << std::get<1>(v) << " " << std::get<2>(v)
                               << " " << std::get<3>(v) << " " << std::get<4>(v);
  }
  EXPECT_EQ(seen.size(), 10u) << "the registers-form and wgmma-matmul variants dedupe away";
  // A streamed matmul takes none of attention's knobs.
  for (const Plan& plan : MustGenerate(MustBuild(testing::RmsNormLinearProto()), gpu)) {
    for (const auto& kernel : plan.kernels()) {
      EXPECT_EQ(kernel.schedule().warp_rows(), 0);
      EXPECT_NE(kernel.schedule().block_rows(), 64);
    }
  }
}

// On GPUs a one-row-per-block norm chain in registers is costed below the
// same chain with rms_norm expanded into reductions (staged in shared
// memory), so the search tries the fused original first.
TEST(CandidateGeneratorTest, RegisterRowNormChainsRankFirstOnGpus) {
  absl::StatusOr<yirage::v1::Graph> proto =
      LoadGraphFile("examples/graphs/bench/norm_transformer_b1.json");
  ASSERT_TRUE(proto.ok()) << proto.status();
  SearchOptions gpu;
  gpu.backend = "cuda";
  gpu.warp_size = 32;
  gpu.max_candidates = 4;
  std::vector<Plan> plans = MustGenerate(MustBuild(*proto), gpu);
  ASSERT_GE(plans.size(), 2u);
  EXPECT_TRUE(plans[0].baseline());
  EXPECT_EQ(plans[1].description().rfind("[NH+T+U+V+Y] rows b1", 0), 0u) << plans[1].description();
  EXPECT_TRUE(plans[1].rewrites().empty());
}

TEST(CandidateGeneratorTest, SkinnyElementwiseGraphGetsColumnSchedules) {
  // 2 rows < 8 threads: PARALLEL_COLS qualifies without a matmul.
  Graph graph = MustBuild(testing::ElementwiseChainProto(3, /*rows=*/2));
  SearchOptions options;
  options.num_threads = 8;
  std::vector<Plan> plans = MustGenerate(graph, options);
  ExpectWellFormed(graph, plans, options);
  bool has_cols = false;
  for (const Plan& plan : plans) {
    for (const KernelPlan& kernel : plan.kernels()) {
      if (kernel.schedule().parallel() == yirage::v1::PARALLEL_COLS) {
        has_cols = true;
        EXPECT_EQ(kernel.schedule().block_rows(), 2);
      } else {
        EXPECT_LE(kernel.schedule().block_rows(), 2);
      }
    }
  }
  EXPECT_TRUE(has_cols);
}

TEST(CandidateGeneratorTest, RejectsBadOptions) {
  Graph graph = MustBuild(testing::RmsNormLinearProto());
  SearchOptions options;
  options.max_candidates = -1;
  EXPECT_EQ(GenerateCandidates(graph, options).status().code(), absl::StatusCode::kInvalidArgument);
  options = SearchOptions();
  options.simd_width_floats = 0;
  EXPECT_EQ(GenerateCandidates(graph, options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CandidateGeneratorTest, LargeGraphsStayBounded) {
  // 14 ops: all 8192 segmentations are legal, trimmed to the bound.
  Graph chain14 = MustBuild(testing::ElementwiseChainProto(14));
  std::vector<Plan> plans = MustGenerate(chain14);
  ExpectWellFormed(chain14, plans);
  EXPECT_EQ(plans.size(), 200u);
  // 20 ops: the bounded partition set still holds the greedy full fusion.
  Graph chain20 = MustBuild(testing::ElementwiseChainProto(20));
  plans = MustGenerate(chain20);
  ExpectWellFormed(chain20, plans);
  ASSERT_NE(FindSingleKernelPlan(plans), nullptr);
  EXPECT_TRUE(HasFusedKernel(plans));
}

TEST(CandidateGeneratorTest, FusionRanksAboveBaselineForElementwiseChain) {
  Graph graph = MustBuild(testing::ElementwiseChainProto(4, /*rows=*/1024));
  std::vector<Plan> plans = MustGenerate(graph);
  ASSERT_GT(plans.size(), 1u);
  EXPECT_LT(plans[1].estimated_cost(), plans[0].estimated_cost());
  EXPECT_EQ(plans[1].kernels_size(), 1);  // the cheapest plan fuses everything
}

// ---- ValidatePlan ----

class ValidatePlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plans_ = MustGenerate(graph_);
    ASSERT_FALSE(plans_.empty());
    baseline_ = plans_[0];
    for (const Plan& plan : plans_) {
      if (!plan.has_graph() && plan.kernels_size() == 2 && plan.kernels(0).ops_size() == 2) {
        fused_ns_ = plan;  // [N+S][Y]
        break;
      }
    }
    ASSERT_EQ(fused_ns_.kernels_size(), 2);
    ASSERT_TRUE(ValidatePlan(graph_, baseline_).ok());
    ASSERT_TRUE(ValidatePlan(graph_, fused_ns_).ok());
  }

  void ExpectInvalid(const Plan& plan, const std::vector<std::string>& fragments) {
    absl::Status status = ValidatePlan(graph_, plan);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    for (const std::string& fragment : fragments) {
      EXPECT_THAT(std::string(status.message()), HasSubstr(fragment));
    }
  }

  Graph graph_ = MustBuild(testing::RmsNormLinearProto());
  std::vector<Plan> plans_;
  Plan baseline_;
  Plan fused_ns_;
};

TEST_F(ValidatePlanTest, RejectsMissingOp) {
  Plan plan = baseline_;
  plan.mutable_kernels()->RemoveLast();  // drops Y
  ExpectInvalid(plan, {"op 'Y'", "no kernel"});
}

TEST_F(ValidatePlanTest, RejectsOpTwice) {
  Plan plan = baseline_;
  plan.mutable_kernels(2)->add_ops("S");
  ExpectInvalid(plan, {"op 'S'", "twice", "k1", "k2"});
}

TEST_F(ValidatePlanTest, RejectsUnknownOp) {
  Plan plan = baseline_;
  plan.mutable_kernels(2)->add_ops("Q");
  ExpectInvalid(plan, {"kernel k2", "unknown op 'Q'"});
}

TEST_F(ValidatePlanTest, RejectsWrongOrder) {
  Plan plan = baseline_;
  plan.mutable_kernels()->SwapElements(0, 1);  // S's kernel runs before N's
  ExpectInvalid(plan, {"kernel k1", "op 'S'", "'N'", "k0", "out of order"});
}

TEST_F(ValidatePlanTest, RejectsOpsOutOfTopologicalOrderInKernel) {
  Plan plan = fused_ns_;
  plan.mutable_kernels(0)->mutable_ops()->SwapElements(0, 1);
  ExpectInvalid(plan, {"kernel k0", "topological", "'N'"});
}

TEST_F(ValidatePlanTest, RejectsMissingInput) {
  Plan plan = baseline_;
  plan.mutable_kernels(1)->clear_inputs();
  plan.mutable_kernels(1)->add_inputs("G");
  ExpectInvalid(plan, {"kernel k1", "missing input 'N'", "read by op 'S'"});
}

TEST_F(ValidatePlanTest, RejectsExtraInput) {
  Plan plan = baseline_;
  plan.mutable_kernels(1)->add_inputs("W");
  ExpectInvalid(plan, {"kernel k1", "extra input 'W'"});
}

TEST_F(ValidatePlanTest, RejectsExtraOutput) {
  Plan plan = fused_ns_;
  plan.mutable_kernels(0)->add_outputs("N");  // N never leaves the kernel
  ExpectInvalid(plan, {"kernel k0", "extra output 'N'"});
}

TEST_F(ValidatePlanTest, RejectsMissingOutput) {
  Plan plan = baseline_;
  plan.mutable_kernels(2)->clear_outputs();
  ExpectInvalid(plan, {"kernel k2", "missing output 'Y'", "graph output"});
  plan = baseline_;
  plan.mutable_kernels(1)->clear_outputs();
  ExpectInvalid(plan, {"kernel k1", "missing output 'S'", "read by op 'Y' in kernel k2"});
}

TEST_F(ValidatePlanTest, RejectsDuplicateListEntry) {
  Plan plan = baseline_;
  plan.mutable_kernels(2)->add_inputs("W");
  ExpectInvalid(plan, {"kernel k2", "input 'W'", "twice"});
}

TEST_F(ValidatePlanTest, RejectsGenericKernelWithTwoOps) {
  Plan plan = fused_ns_;
  plan.mutable_kernels(0)->set_kind(yirage::v1::KERNEL_GENERIC);
  ExpectInvalid(plan, {"kernel k0", "KERNEL_GENERIC", "N, S"});
}

TEST_F(ValidatePlanTest, RejectsZeroTile) {
  Plan plan = baseline_;
  plan.mutable_kernels(2)->mutable_schedule()->set_tile_n(0);
  ExpectInvalid(plan, {"kernel k2", "tile_n", "positive"});
}

TEST_F(ValidatePlanTest, RejectsUnsetParallelAxisAndMissingSchedule) {
  Plan plan = baseline_;
  plan.mutable_kernels(0)->clear_schedule();
  ExpectInvalid(plan, {"kernel k0", "parallel"});
}

TEST_F(ValidatePlanTest, RejectsDuplicateKernelNamesAndEmptyPlans) {
  Plan plan = baseline_;
  plan.mutable_kernels(1)->set_name("k0");
  ExpectInvalid(plan, {"'k0'", "twice"});
  ExpectInvalid(Plan(), {"no kernels"});
}

TEST(ValidatePlanRowGroupTest, RejectsIllegalRowGroup) {
  Graph graph = MustBuild(testing::ColumnReductionProto());
  std::vector<Plan> plans = MustGenerate(graph);
  ASSERT_FALSE(plans.empty());
  Plan plan = plans[0];
  ASSERT_EQ(plan.kernels(1).ops(0), "R");
  ASSERT_TRUE(ValidatePlan(graph, plan).ok());
  plan.mutable_kernels(1)->set_kind(yirage::v1::KERNEL_ROW);
  absl::Status status = ValidatePlan(graph, plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("kernel k1"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("KERNEL_ROW"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("R"));
}

TEST(ValidatePlanRowGroupTest, RejectsMatmulWithInGroupB) {
  // Y = X @ relu(W): relu(W) as an in-group B operand breaks rule 3.
  Graph graph = MustBuild(testing::GraphProtoBuilder("in_group_b")
                              .Input("X", {16, 16})
                              .Input("W", {16, 16})
                              .Op("R", "relu", {"W"})
                              .Op("Y", "matmul", {"X", "R"})
                              .Output("Y")
                              .proto());
  Plan plan;
  KernelPlan* kernel = plan.add_kernels();
  kernel->set_name("k0");
  kernel->set_kind(yirage::v1::KERNEL_ROW);
  kernel->add_ops("R");
  kernel->add_ops("Y");
  kernel->add_inputs("W");
  kernel->add_inputs("X");
  kernel->add_outputs("Y");
  yirage::v1::Schedule* s = kernel->mutable_schedule();
  s->set_parallel(yirage::v1::PARALLEL_ROWS);
  s->set_block_rows(4);
  s->set_tile_n(16);
  s->set_tile_k(16);
  s->set_vector_width(8);
  s->set_unroll(1);
  absl::Status status = ValidatePlan(graph, plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("kernel k0"));
  // And the generator never proposes that group.
  for (const Plan& p : MustGenerate(graph)) EXPECT_EQ(p.kernels_size(), 2);
}

// Not an assertion on time: prints how long generation takes per graph.
TEST(CandidateGeneratorTest, ReportsGenerationTime) {
  std::vector<yirage::v1::Graph> protos = {testing::RmsNormLinearProto(),
                                           testing::GatedMlpProto(),
                                           testing::LoraProto(),
                                           testing::SoftmaxProto(),
                                           testing::NormTransformerProto(),
                                           testing::ColumnReductionProto(),
                                           testing::ElementwiseChainProto(14),
                                           testing::ElementwiseChainProto(40)};
  for (const yirage::v1::Graph& proto : protos) {
    Graph graph = MustBuild(proto);
    const auto start = std::chrono::steady_clock::now();
    std::vector<Plan> plans = MustGenerate(graph);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("[candidates] %-18s ops=%-3zu plans=%-4zu %.2f ms  best: %s\n",
                proto.name().c_str(), graph.ops().size(), plans.size(), ms,
                plans.size() > 1 ? plans[1].description().c_str() : "-");
    EXPECT_FALSE(plans.empty());
  }
}

// Every example graph shipped with the repository (if any) yields a
// well-formed candidate list; prints counts and generation time.
TEST(CandidateGeneratorTest, ExampleGraphsYieldWellFormedPlans) {
  const std::filesystem::path dir = YIRAGE_SOURCE_DIR "/examples/graphs";
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(dir)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().extension() == ".json") files.push_back(entry.path());
    }
  }
  if (files.empty()) GTEST_SKIP() << "no example graphs in " << dir;
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& file : files) {
    SCOPED_TRACE(file.string());
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<yirage::v1::Graph> proto = ParseGraphJson(text.str());
    ASSERT_TRUE(proto.ok()) << proto.status();
    Graph graph = MustBuild(*proto);
    const auto start = std::chrono::steady_clock::now();
    std::vector<Plan> plans = MustGenerate(graph);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("[candidates] example %-18s ops=%-3zu plans=%-4zu %.2f ms\n",
                file.filename().string().c_str(), graph.ops().size(), plans.size(), ms);
    ExpectWellFormed(graph, plans);
  }
}

}  // namespace
}  // namespace yirage::core
