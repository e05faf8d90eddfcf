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
#include "core/graph_test_util.h"
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

std::vector<Plan> MustGenerate(const Graph& graph, const SearchOptions& options = {}) {
  absl::StatusOr<std::vector<Plan>> plans = GenerateCandidates(graph, options);
  EXPECT_TRUE(plans.ok()) << plans.status();
  return plans.ok() ? *std::move(plans) : std::vector<Plan>{};
}

// A GPU-like backend's description for tests of the mechanism (the CUDA
// backend's own is tested in backends/cuda/cuda_families_test.cc): flat
// elementwise rows, register rows from 256 wide, a library with two
// algorithms, a streamed-matmul family (a default, a shared-memory point,
// register points for 16 and 8 rows) and an attention family (two points).
yirage::v1::BackendKernels TestGpuKernels() {
  yirage::v1::BackendKernels k;
  k.set_backend("test_gpu");
  k.set_gpu(true);
  k.mutable_row()->set_flat_elementwise(true);
  k.mutable_row()->set_threads_knob(true);
  k.mutable_row()->set_register_row_min_width(256);
  k.mutable_row()->set_register_row_multiple(8);
  k.mutable_row()->set_narrow_row_max_width(16);
  k.mutable_row()->set_narrow_block_rows(256);
  yirage::v1::KernelFamily* mm = k.add_families();
  mm->set_name("streamed_matmul");
  mm->set_pattern(yirage::v1::STREAMED_MATMUL);
  auto add_mm = [&](yirage::v1::StreamedMatmulSchedule::Form form, int stages, int max_rows) {
    yirage::v1::SchedulePoint* p = mm->add_points();
    p->mutable_schedule()->mutable_streamed_matmul()->set_form(form);
    p->mutable_schedule()->mutable_streamed_matmul()->set_stages(stages);
    p->set_label(absl::StrCat("form ", form, " stages ", stages));
    if (max_rows > 0) {
      p->mutable_limits()->set_max_rows(max_rows);
      p->mutable_limits()->set_no_low_rank(true);
    }
  };
  add_mm(yirage::v1::StreamedMatmulSchedule::FORM_SHARED, 3, 0);
  add_mm(yirage::v1::StreamedMatmulSchedule::FORM_REGISTERS, 2, 16);
  add_mm(yirage::v1::StreamedMatmulSchedule::FORM_REGISTERS, 3, 8);
  yirage::v1::KernelFamily* at = k.add_families();
  at->set_name("attention");
  at->set_pattern(yirage::v1::ATTENTION);
  for (int warps : {4, 8}) {
    yirage::v1::SchedulePoint* p = at->add_points();
    p->mutable_schedule()->mutable_attention()->set_warps(warps);
    p->mutable_schedule()->mutable_attention()->set_block_rows(64);
    p->set_label(absl::StrCat("warps ", warps));
  }
  return k;
}

// Options of a worker of that backend on a chip with warps of 32, rewrites off.
SearchOptions GpuOptions() {
  SearchOptions gpu;
  gpu.backend = "test_gpu";
  gpu.kernels = TestGpuKernels();
  gpu.enable_rewrites = false;
  gpu.warp_size = 32;
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

// On a GPU, a graph whose rows are a few elements wide also takes 256 rows a
// block (a thread a row); wider rows, and CPUs, keep the usual choices.
TEST(CandidateGeneratorTest, NarrowRowsTakeAThreadARowOnGpus) {
  auto softmax = [](int64_t width) {
    return MustBuild(testing::GraphProtoBuilder("g")
                         .Input("X", {4000, width}, yirage::v1::FLOAT32)
                         .Op("Y", "softmax", {"X"})
                         .Output("Y")
                         .proto());
  };
  auto block_rows = [](const std::vector<Plan>& plans) {
    std::set<int> seen;
    for (const Plan& plan : plans) {
      for (const KernelPlan& kernel : plan.kernels()) seen.insert(kernel.schedule().block_rows());
    }
    return seen;
  };
  EXPECT_EQ(block_rows(MustGenerate(softmax(5), GpuOptions())).count(256), 1u);
  EXPECT_EQ(block_rows(MustGenerate(softmax(64), GpuOptions())).count(256), 0u);
  EXPECT_EQ(block_rows(MustGenerate(softmax(5))).count(256), 0u) << "a CPU";
}

// A concat along rows of 1000 rows (too many for PARALLEL_COLS otherwise) is
// also offered PARALLEL_COLS where the backend gathers such groups over
// their elements (RowKernels.gather_cols); a softmax of as many rows is not.
TEST(CandidateGeneratorTest, ConcatGroupsTakeColumnsWhereTheBackendGathers) {
  const Graph concat = MustBuild(testing::GraphProtoBuilder("g")
                                     .Input("A", {1000, 24}, yirage::v1::FLOAT16)
                                     .Input("B", {1000, 40}, yirage::v1::FLOAT16)
                                     .Op("C", "concat", {"A", "B"}, {{"axis", testing::IntAttr(1)}})
                                     .Op("S", "mul", {"C"}, {{"scalar", testing::FloatAttr(2.0)}})
                                     .Output("S")
                                     .proto());
  const Graph softmax = MustBuild(testing::GraphProtoBuilder("g")
                                      .Input("X", {1000, 64}, yirage::v1::FLOAT16)
                                      .Op("Y", "softmax", {"X"})
                                      .Output("Y")
                                      .proto());
  auto cols = [](const std::vector<Plan>& plans) {
    int n = 0;
    for (const Plan& plan : plans) {
      for (const KernelPlan& kernel : plan.kernels()) {
        n += kernel.kind() == yirage::v1::KERNEL_ROW &&
             kernel.schedule().parallel() == yirage::v1::PARALLEL_COLS;
      }
    }
    return n;
  };
  SearchOptions gather = GpuOptions();
  gather.kernels.mutable_row()->set_gather_cols(true);
  EXPECT_GT(cols(MustGenerate(concat, gather)), 0);
  EXPECT_EQ(cols(MustGenerate(concat, GpuOptions())), 0);
  EXPECT_EQ(cols(MustGenerate(softmax, gather)), 0);
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

// Decode attention over 100 keys of 32 floats, 4 heads: small enough that
// launches and memory latency rule, where the model is least sure.
Graph SmallAttention() {
  absl::StatusOr<yirage::v1::Graph> proto = ParseGraphJson(R"({"name": "small_attention",
    "inputs": [{"name": "q", "shape": [4, 1, 32], "dtype": "float32"},
               {"name": "k", "shape": [4, 100, 32], "dtype": "float32"},
               {"name": "v", "shape": [4, 100, 32], "dtype": "float32"}],
    "ops": [{"name": "s", "op": "matmul", "inputs": ["q", "k"], "attrs": {"transpose_b": true}},
            {"name": "t", "op": "mul", "inputs": ["s"], "attrs": {"scalar": 0.176777}},
            {"name": "p", "op": "softmax", "inputs": ["t"], "attrs": {"axis": -1}},
            {"name": "o", "op": "matmul", "inputs": ["p", "v"]}],
    "outputs": ["o"]})");
  EXPECT_TRUE(proto.ok()) << proto.status();
  return MustBuild(*proto);
}

TEST(CandidateGeneratorTest, ACutOrderKeepsTheFewestKernelPlanWithinReach) {
  const Graph graph = SmallAttention();
  // Row kernels and library matmuls (no attention family: the CUDA backend's
  // takes 16-bit types only).
  SearchOptions options = GpuOptions();
  options.kernels.clear_families();
  options.kernels.mutable_library()->set_algorithms(2);
  const std::vector<Plan> all = MustGenerate(graph, options);
  ASSERT_GT(all.size(), 6u);
  // The cheapest plan of the fewest kernels, and the best estimate.
  size_t fewest = 1;
  double best = all[1].estimated_cost();
  for (size_t i = 1; i < all.size(); ++i) {
    best = std::min(best, all[i].estimated_cost());
    if (all[i].kernels_size() < all[fewest].kernels_size() ||
        (all[i].kernels_size() == all[fewest].kernels_size() &&
         all[i].estimated_cost() < all[fewest].estimated_cost())) {
      fewest = i;
    }
  }
  ASSERT_EQ(all[fewest].kernels_size(), 1) << all[fewest].description();
  // Past a budget of 5, within reach of the best: the case the hedge is for.
  ASSERT_GT(fewest, 5u) << all[fewest].description();
  ASSERT_LE(all[fewest].estimated_cost(), 1.5 * best);

  SearchStats stats;
  options.max_candidates = 5;
  absl::StatusOr<std::vector<Plan>> five = GenerateCandidatesWithStats(graph, options, &stats);
  ASSERT_TRUE(five.ok()) << five.status();
  ASSERT_EQ(five->size(), 5u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*five)[i], all[i])) << i;
  }
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*five)[4], all[fewest]))
      << (*five)[4].description();
  EXPECT_EQ(stats.hedged_plan, all[fewest].description());

  // A budget that reaches it anyway, and one too small to spare a place,
  // keep the plain order.
  for (const int budget : {static_cast<int>(fewest) + 1, 4}) {
    options.max_candidates = budget;
    absl::StatusOr<std::vector<Plan>> cut = GenerateCandidatesWithStats(graph, options, &stats);
    ASSERT_TRUE(cut.ok()) << cut.status();
    ASSERT_EQ(cut->size(), static_cast<size_t>(budget));
    for (int i = 0; i < budget; ++i) {
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals((*cut)[i], all[i]))
          << budget << " " << i;
    }
    EXPECT_EQ(stats.hedged_plan, "") << budget;
  }
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

// Row kernels on a backend with the threads knob get the widest block the
// chip allows, and no wider.
TEST(CandidateGeneratorTest, GpuThreadsFollowTheChip) {
  Graph graph = MustBuild(testing::SoftmaxProto());
  SearchOptions big = GpuOptions();
  big.block_threads = {32, 64, 128, 256, 512, 1024};
  std::set<int> warps;
  for (const Plan& plan : MustGenerate(graph, big)) {
    for (const KernelPlan& kernel : plan.kernels()) warps.insert(kernel.schedule().warps());
  }
  EXPECT_TRUE(warps.count(32)) << "1024-thread blocks";
  SearchOptions small = big;
  small.block_threads = {32, 64, 128, 256};
  warps.clear();
  for (const Plan& plan : MustGenerate(graph, small)) {
    for (const KernelPlan& kernel : plan.kernels()) warps.insert(kernel.schedule().warps());
  }
  EXPECT_FALSE(warps.count(32));
  SearchOptions no_knob = big;
  no_knob.kernels.mutable_row()->set_threads_knob(false);
  warps.clear();
  for (const Plan& plan : MustGenerate(graph, no_knob)) {
    for (const KernelPlan& kernel : plan.kernels()) warps.insert(kernel.schedule().warps());
  }
  EXPECT_FALSE(warps.count(32)) << "the backend has no threads knob";
}

// The (form, stages) of the one-kernel plans of `proto`.
std::set<std::pair<int, int>> StreamedForms(const yirage::v1::Graph& proto,
                                            const SearchOptions& options) {
  std::set<std::pair<int, int>> seen;
  for (const Plan& plan : MustGenerate(MustBuild(proto), options)) {
    if (plan.kernels_size() != 1 || plan.kernels(0).kind() != yirage::v1::KERNEL_ROW) continue;
    const auto& s = plan.kernels(0).schedule();
    EXPECT_TRUE(s.has_streamed_matmul()) << plan.description();
    seen.insert({s.streamed_matmul().form(), s.streamed_matmul().stages()});
  }
  return seen;
}

// A family's chains get every point of the family whose limits they are
// within (and its defaults), no other knobs: here X has 16 rows, so the
// 16-row registers point applies and the 8-row one does not; a low-rank
// branch takes neither.
TEST(CandidateGeneratorTest, FamilyPointsAreSearchedWithinTheirLimits) {
  using Form = yirage::v1::StreamedMatmulSchedule;
  const SearchOptions gpu = GpuOptions();
  EXPECT_EQ(StreamedForms(testing::RmsNormLinearProto(), gpu),
            (std::set<std::pair<int, int>>{
                {Form::FORM_AUTO, 0}, {Form::FORM_SHARED, 3}, {Form::FORM_REGISTERS, 2}}));
  EXPECT_EQ(StreamedForms(testing::LoraProto(), gpu),
            (std::set<std::pair<int, int>>{{Form::FORM_AUTO, 0}, {Form::FORM_SHARED, 3}}));
  // The family's own limits: chains outside them are row kernels.
  SearchOptions bf16_only = gpu;
  bf16_only.kernels.mutable_families(0)->mutable_limits()->add_dtypes(yirage::v1::BFLOAT16);
  for (const Plan& plan : MustGenerate(MustBuild(testing::RmsNormLinearProto()), bf16_only)) {
    for (const KernelPlan& kernel : plan.kernels()) {
      EXPECT_FALSE(kernel.schedule().has_streamed_matmul()) << plan.description();
    }
  }
}

// A family's plans are described by the point's label; chains of no family
// never get family knobs, and a backend with no families gives none.
TEST(CandidateGeneratorTest, FamilyKnobsOnlyForTheirChains) {
  const SearchOptions gpu = GpuOptions();
  bool labelled = false;
  for (const Plan& plan : MustGenerate(MustBuild(testing::RmsNormLinearProto()), gpu)) {
    labelled = labelled || plan.description().find("fused form 2 stages 2") != std::string::npos;
    for (const KernelPlan& kernel : plan.kernels()) {
      EXPECT_FALSE(kernel.schedule().has_attention()) << plan.description();
    }
  }
  EXPECT_TRUE(labelled);
  SearchOptions none = gpu;
  none.kernels.clear_families();
  for (const Plan& plan : MustGenerate(MustBuild(testing::RmsNormLinearProto()), none)) {
    for (const KernelPlan& kernel : plan.kernels()) {
      EXPECT_EQ(kernel.schedule().family_case(), yirage::v1::Schedule::FAMILY_NOT_SET);
    }
  }
}

// Plans are told apart by their descriptions, also where a family kernel
// sits beside row kernels: its point is named before the row knobs.
TEST(CandidateGeneratorTest, NoTwoPlansShareADescription) {
  for (const char* file : {"examples/graphs/bench/gqa_decode_b8.json",
                           "examples/graphs/bench/rms_norm_linear_b1.json"}) {
    SCOPED_TRACE(file);
    absl::StatusOr<yirage::v1::Graph> proto = LoadGraphFile(file);
    ASSERT_TRUE(proto.ok()) << proto.status();
    std::set<std::string> seen;
    for (const Plan& plan : MustGenerate(MustBuild(*proto), GpuOptions())) {
      EXPECT_TRUE(seen.insert(plan.description()).second) << plan.description();
    }
    // The attention graph has plans with a family kernel (a streamed matmul's
    // point) beside row kernels.
    if (std::string(file).find("gqa_decode") != std::string::npos) {
      const bool mixed = std::any_of(seen.begin(), seen.end(), [](const std::string& d) {
        return d.find("fused form 1 stages 3 + rows") != std::string::npos;
      });
      EXPECT_TRUE(mixed) << "a plan with a family kernel beside row kernels names its point";
    }
  }
}

// Attention chains get the attention family's points.
TEST(CandidateGeneratorTest, AttentionPointsAreSearched) {
  absl::StatusOr<yirage::v1::Graph> proto =
      LoadGraphFile("examples/graphs/bench/gqa_decode_b1.json");
  ASSERT_TRUE(proto.ok()) << proto.status();
  std::set<int> warps;
  for (const Plan& plan : MustGenerate(MustBuild(*proto), GpuOptions())) {
    if (plan.kernels_size() != 1) continue;
    ASSERT_TRUE(plan.kernels(0).schedule().has_attention()) << plan.description();
    warps.insert(plan.kernels(0).schedule().attention().warps());
  }
  EXPECT_EQ(warps, (std::set<int>{0, 4, 8}));
}

// ValidatePlan rejects family knobs on a kernel whose ops are not the
// family's chain, and on library kernels.
TEST(CandidateGeneratorTest, ValidatePlanChecksFamilyKnobs) {
  Graph graph = MustBuild(testing::RmsNormLinearProto());
  std::vector<Plan> plans = MustGenerate(graph, GpuOptions());
  const Plan* fused = FindSingleKernelPlan(plans);
  ASSERT_NE(fused, nullptr);
  Plan wrong = *fused;
  wrong.mutable_kernels(0)->mutable_schedule()->mutable_attention();
  absl::Status status = ValidatePlan(graph, wrong);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("schedule.attention is set but its ops are not a attention"),
            std::string::npos)
      << status;
}

// On GPUs a one-row-per-block norm chain in registers is costed below the
// same chain with rms_norm expanded into reductions (staged in shared
// memory), so the search tries the fused original first.
TEST(CandidateGeneratorTest, RegisterRowNormChainsRankFirstOnGpus) {
  absl::StatusOr<yirage::v1::Graph> proto =
      LoadGraphFile("examples/graphs/bench/norm_transformer_b1.json");
  ASSERT_TRUE(proto.ok()) << proto.status();
  SearchOptions gpu = GpuOptions();
  gpu.enable_rewrites = true;
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
