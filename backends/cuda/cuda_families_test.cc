// The CUDA backend's kernel families (cuda_families.h): what describe()
// reports for a target, the search space the generator builds from it, and
// the refusal of knobs the backend cannot run. CPU-only (CI): no device is
// needed, only NVRTC for the refusal test.
#include <cstdlib>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_plan_context.h"
#include "backends/cuda/cuda_test_util.h"
#include "core/candidate_generator.h"
#include "gtest/gtest.h"

namespace yirage::backends::cuda::testing {
namespace {

using yirage::v1::AttentionSchedule;
using yirage::v1::BackendKernels;
using yirage::v1::FLOAT16;
using yirage::v1::FLOAT32;
using yirage::v1::StreamedMatmulSchedule;

const yirage::v1::KernelFamily* Family(const BackendKernels& k, const std::string& name) {
  for (const auto& f : k.families()) {
    if (f.name() == name) return &f;
  }
  return nullptr;
}

// (form, stages, warps) of a streamed-matmul family's points.
std::set<std::tuple<int, int, int>> StreamedPoints(const BackendKernels& k) {
  std::set<std::tuple<int, int, int>> out;
  const yirage::v1::KernelFamily* f = Family(k, "streamed_matmul");
  if (f == nullptr) return out;
  for (const auto& p : f->points()) {
    const StreamedMatmulSchedule& s = p.schedule().streamed_matmul();
    out.insert({s.form(), s.stages(), s.warps()});
  }
  return out;
}

yirage::v1::CompileTarget Target(int sm, int sms, int64_t smem) {
  yirage::v1::CompileTarget t;
  t.set_compute_capability(sm);
  t.set_multiprocessors(sms);
  t.set_max_shared_memory_per_block(smem);
  return t;
}

TEST(CudaFamiliesTest, DescribeSaysWhatTheTargetRuns) {
  const BackendKernels h200 = DescribeKernels(H200CompileTarget());
  EXPECT_EQ(h200.backend(), "cuda");
  EXPECT_TRUE(h200.gpu());
  EXPECT_EQ(h200.library().algorithms(), 3);
  EXPECT_TRUE(h200.row().flat_elementwise());
  EXPECT_TRUE(h200.row().threads_knob());
  // The narrow-row form the row kernels take (a thread a row), which the
  // search offers from this description.
  EXPECT_EQ(h200.row().narrow_row_max_width(), kNarrowRowWidth);
  EXPECT_EQ(h200.row().narrow_block_rows(), kMaxNarrowBlockRows);
  ASSERT_NE(Family(h200, "streamed_matmul"), nullptr);
  ASSERT_NE(Family(h200, "attention"), nullptr);
  EXPECT_EQ(Family(h200, "streamed_matmul")->pattern(), yirage::v1::STREAMED_MATMUL);
  EXPECT_EQ(Family(h200, "attention")->pattern(), yirage::v1::ATTENTION);
  const auto points = StreamedPoints(h200);
  for (const auto& want : {std::tuple{1, 3, 0}, std::tuple{1, 6, 0}, std::tuple{4, 5, 0},
                           std::tuple{2, 1, 0}, std::tuple{2, 2, 8}, std::tuple{2, 2, 16}}) {
    EXPECT_TRUE(points.count(want)) << std::get<0>(want) << " " << std::get<1>(want);
  }
  if (HasGpu()) GTEST_SKIP() << "with a device, describe() answers for the device";
  // sm_80: no wgmma points; 64 KiB of shared memory: no 6-stage pipeline.
  const BackendKernels a100 = DescribeKernels(Target(80, 108, 166912));
  for (const auto& [form, stages, warps] : StreamedPoints(a100)) {
    EXPECT_NE(form, StreamedMatmulSchedule::FORM_WGMMA);
  }
  for (const auto& p : Family(a100, "attention")->points()) {
    EXPECT_NE(p.schedule().attention().warp_rows(), 64) << p.label();
    EXPECT_FALSE(p.schedule().attention().prefill()) << p.label();
  }
  // The GEMM family off Hopper: the sm_80 form alone, the points whose ring
  // fits the part (gated pairs on those 128 or 256 wide); on Hopper those
  // after the wgmma ones.
  auto mma_labels = [](const BackendKernels& k) {
    std::vector<std::string> labels;
    const yirage::v1::KernelFamily* gemm = Family(k, "gemm");
    if (gemm == nullptr) return labels;
    for (const auto& p : gemm->points()) {
      if (!p.schedule().gemm().mma_sync()) continue;
      labels.push_back(p.label());
      EXPECT_EQ(p.limits().no_gate(), p.schedule().gemm().tile_n() < 128) << p.label();
      EXPECT_GE(p.blocks_per_multiprocessor(), 1) << p.label();
    }
    return labels;
  };
  ASSERT_NE(Family(a100, "gemm"), nullptr);
  EXPECT_FALSE(Family(a100, "gemm")->limits().no_gate());
  EXPECT_EQ(Family(a100, "gemm_tf32"), nullptr);
  EXPECT_EQ(mma_labels(a100),
            (std::vector<std::string>{"mma.sync 128x256 stages 3", "mma.sync 128x128 stages 4",
                                      "mma.sync 64x128 stages 4", "mma.sync 64x64 stages 4"}));
  EXPECT_EQ(mma_labels(DescribeKernels(Target(89, 128, 101376))),
            (std::vector<std::string>{"mma.sync 128x128 stages 3", "mma.sync 64x128 stages 4",
                                      "mma.sync 64x64 stages 4"}));
  const BackendKernels hopper = DescribeKernels(Target(90, 132, 232448));
  const std::vector<std::string> hopper_mma = mma_labels(hopper);
  // 128 x 128 in 3 stages, not 4: two blocks fit beside each other.
  EXPECT_EQ(hopper_mma,
            (std::vector<std::string>{"mma.sync 128x256 stages 3", "mma.sync 128x128 stages 3",
                                      "mma.sync 64x128 stages 4", "mma.sync 64x64 stages 4"}));
  EXPECT_FALSE(Family(hopper, "gemm")->points(0).schedule().gemm().mma_sync());
  for (const auto& p : Family(hopper, "gemm")->points()) {
    EXPECT_EQ(p.matrix_share() > 0, p.schedule().gemm().mma_sync()) << p.label();
  }
  // sm_90: the prefill points, each limited to the chains the form runs.
  // Both forms mask their last key tile (any key count); the
  // warp-specialized form takes D = DV, and its 64-key points head dims up
  // to 256, as do the other form's 64-key points of at most 128 rows.
  int prefill = 0, warp_specialized = 0, wide = 0;
  const BackendKernels sm90 = DescribeKernels(Target(90, 132, 232448));
  for (const auto& p : Family(sm90, "attention")->points()) {
    const yirage::v1::AttentionSchedule& s = p.schedule().attention();
    if (!s.prefill()) continue;
    ++prefill;
    if (s.warp_specialized()) {
      ++warp_specialized;
      EXPECT_TRUE(p.limits().equal_head_dims()) << p.label();
    }
    EXPECT_EQ(p.limits().keys_multiple(), 0) << p.label();
    const bool narrow = (s.key_tile() == 64 || s.key_tile() == 80) &&
                        (s.warp_specialized() || s.block_rows() <= 128);
    EXPECT_EQ(p.limits().max_head_dim(), narrow ? 256 : 128) << p.label();
    // 80-key tiles: head dim 256 only.
    EXPECT_EQ(p.limits().head_dim(), s.key_tile() == 80 ? 256 : 0) << p.label();
    wide += narrow;
    EXPECT_TRUE(p.limits().keys_by_rows()) << p.label();
    EXPECT_EQ(p.limits().head_dim_multiple(), 64) << p.label();
    EXPECT_GE(p.limits().min_query_rows(), 64) << p.label();
  }
  EXPECT_GT(prefill, 0);
  EXPECT_GT(warp_specialized, 0);
  EXPECT_GT(wide, 0);
  // Each TMA point of the warp-specialized form comes right after its
  // cp.async twin (same key tile and stages), so that a budget which
  // times one times the other too.
  int tma = 0;
  const auto& attention_points = Family(sm90, "attention")->points();
  for (int i = 0; i < attention_points.size(); ++i) {
    const yirage::v1::AttentionSchedule& s = attention_points[i].schedule().attention();
    if (!s.tma() || !s.prefill()) continue;
    ++tma;
    ASSERT_GT(i, 0);
    const yirage::v1::AttentionSchedule& before = attention_points[i - 1].schedule().attention();
    const std::string& label = attention_points[i].label();
    EXPECT_TRUE(s.warp_specialized()) << label;
    EXPECT_TRUE(before.warp_specialized() && !before.tma()) << label;
    EXPECT_EQ(before.key_tile(), s.key_tile()) << label;
    EXPECT_EQ(before.stages(), s.stages()) << label;
  }
  EXPECT_GT(tma, 0);
  const auto small = StreamedPoints(DescribeKernels(Target(86, 84, 65536)));
  EXPECT_TRUE(small.count({1, 3, 0}));
  EXPECT_FALSE(small.count({1, 6, 0}));
  // Before sm_80 the families' cp.async and mma.sync are not there.
  const BackendKernels volta = DescribeKernels(Target(70, 80, 98304));
  EXPECT_EQ(volta.families_size(), 0);
  EXPECT_TRUE(volta.has_library());
  // Neither a device nor a target: no answer.
  void* out = nullptr;
  size_t len = 0;
  char* error = nullptr;
  EXPECT_EQ(Backend()->describe(nullptr, 0, &out, &len, &error), YIRAGE_NO_DEVICE);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("CompileRequest.target must name the device"),
            std::string::npos)
      << error;
  Backend()->free_buffer(error);
}

core::SearchOptions OptionsFor(const BackendKernels& kernels) {
  core::SearchOptions options;  // as the scheduler searches for a CUDA worker
  options.backend = "cuda";
  options.kernels = kernels;
  options.enable_rewrites = false;
  options.warp_size = 32;
  return options;
}

std::vector<yirage::v1::Plan> Generate(const yirage::v1::Graph& proto,
                                       const core::SearchOptions& options) {
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans = core::GenerateCandidates(*g, options);
  EXPECT_TRUE(plans.ok()) << plans.status();
  return plans.ok() ? *plans : std::vector<yirage::v1::Plan>{};
}

absl::StatusOr<yirage::v1::Graph> BenchGraph(const std::string& name) {
  return LoadGraph(SourceDir() + "/examples/graphs/bench/" + name + ".json");
}

// The streamed-matmul chains get the family's forms with their knobs; the
// registers and wgmma forms only where they apply.
TEST(CudaFamiliesTest, StreamedMatmulFormsAreSearched) {
  const core::SearchOptions options = OptionsFor(DescribeKernels(H200CompileTarget()));
  auto forms = [&](const std::string& name) {
    std::set<std::tuple<int, int, int>> seen;
    absl::StatusOr<yirage::v1::Graph> proto = BenchGraph(name);
    EXPECT_TRUE(proto.ok()) << proto.status();
    if (!proto.ok()) return seen;
    for (const yirage::v1::Plan& plan : Generate(*proto, options)) {
      // The whole chain as one kernel.
      if (plan.kernels_size() != 1 || !plan.kernels(0).schedule().has_streamed_matmul()) continue;
      const StreamedMatmulSchedule& s = plan.kernels(0).schedule().streamed_matmul();
      seen.insert({s.form(), s.stages(), s.warps()});
    }
    return seen;
  };
  const auto rms = forms("rms_norm_linear_b1");  // a prologue: no wgmma
  for (const auto& want :
       {std::tuple{0, 0, 0}, std::tuple{1, 3, 0}, std::tuple{1, 6, 0}, std::tuple{2, 1, 0},
        std::tuple{2, 2, 0}, std::tuple{2, 2, 8}, std::tuple{2, 2, 16}, std::tuple{2, 3, 0}}) {
    EXPECT_TRUE(rms.count(want)) << std::get<0>(want) << " " << std::get<1>(want) << " "
                                 << std::get<2>(want);
  }
  for (const auto& f : rms) EXPECT_NE(std::get<0>(f), StreamedMatmulSchedule::FORM_WGMMA);
  EXPECT_TRUE(forms("gated_mlp_b8").count({StreamedMatmulSchedule::FORM_WGMMA, 5, 0}));
  const auto lora = forms("lora_b1");  // a low-rank branch: neither registers nor wgmma
  EXPECT_TRUE(lora.count({1, 3, 0}));
  for (const auto& f : lora) {
    EXPECT_NE(std::get<0>(f), StreamedMatmulSchedule::FORM_REGISTERS);
    EXPECT_NE(std::get<0>(f), StreamedMatmulSchedule::FORM_WGMMA);
  }
}

// A fused attention chain gets the family's points (pipeline depths, block
// and warp rows, warps, the merges; the wgmma form where D = DV = 64) and its
// defaults; a streamed matmul takes none of them.
TEST(CudaFamiliesTest, AttentionPointsAreSearched) {
  absl::StatusOr<yirage::v1::Graph> proto = BenchGraph("gqa_decode_b1");  // D = DV = 64
  ASSERT_TRUE(proto.ok()) << proto.status();
  const core::SearchOptions options = OptionsFor(DescribeKernels(H200CompileTarget()));
  // (merge, stages, warps, block_rows, warp_rows)
  std::set<std::tuple<int, int, int, int, int>> seen;
  for (const yirage::v1::Plan& plan : Generate(*proto, options)) {
    if (plan.kernels_size() != 1) continue;
    ASSERT_TRUE(plan.kernels(0).schedule().has_attention()) << plan.description();
    const AttentionSchedule& s = plan.kernels(0).schedule().attention();
    seen.insert({s.merge(), s.stages(), s.warps(), s.block_rows(), s.warp_rows()});
  }
  using M = AttentionSchedule;
  const std::set<std::tuple<int, int, int, int, int>> want = {{0, 0, 0, 0, 0},
                                                              {0, 3, 0, 0, 0},
                                                              {0, 6, 0, 0, 0},
                                                              {M::MERGE_IN_KERNEL, 4, 4, 64, 64},
                                                              {M::MERGE_IN_KERNEL, 4, 4, 64, 0},
                                                              {0, 3, 8, 64, 0},
                                                              {M::MERGE_CLUSTER_PULL, 3, 8, 64, 0},
                                                              {0, 2, 16, 64, 0},
                                                              {0, 4, 4, 64, 32},
                                                              {M::MERGE_WORKSPACE, 4, 4, 64, 0},
                                                              {M::MERGE_IN_KERNEL, 2, 4, 64, 32}};
  EXPECT_EQ(seen, want) << "256 query rows a head: no 32-row points";
  // GQA decode (4 query rows a key/value head): the 32-row points too.
  absl::StatusOr<yirage::v1::Graph> gqa =
      LoadGraph(SourceDir() + "/examples/graphs/suite/llama3_8b_gqa_decode_b16_n2048.json");
  ASSERT_TRUE(gqa.ok()) << gqa.status();
  seen.clear();
  for (const yirage::v1::Plan& plan : Generate(*gqa, options)) {
    for (const auto& k : plan.kernels()) {
      if (!k.schedule().has_attention()) continue;
      const AttentionSchedule& s = k.schedule().attention();
      seen.insert({s.merge(), s.stages(), s.warps(), s.block_rows(), s.warp_rows()});
    }
  }
  EXPECT_TRUE(seen.count({M::MERGE_IN_KERNEL, 3, 2, 32, 0}));
  EXPECT_TRUE(seen.count({0, 2, 2, 32, 0}));
  EXPECT_FALSE(seen.count({M::MERGE_IN_KERNEL, 4, 4, 64, 64})) << "D = 128: no wgmma point";
  absl::StatusOr<yirage::v1::Graph> rms = BenchGraph("rms_norm_linear_b1");
  ASSERT_TRUE(rms.ok());
  for (const yirage::v1::Plan& plan : Generate(*rms, options)) {
    for (const auto& kernel : plan.kernels()) {
      EXPECT_FALSE(kernel.schedule().has_attention()) << plan.description();
    }
  }
}

// Knobs the backend cannot run for the chain are refused with the reason,
// never run as another kernel.
TEST(CudaFamiliesTest, KnobsTheBackendCannotRunAreRefused) {
  auto error_of = [](const yirage::v1::Graph& proto, yirage::v1::Plan plan) {
    Compiled c;
    CompileThroughAbi(proto, {plan}, &c);
    return c.response.plans_size() == 1 && !c.response.plans(0).ok() ? c.response.plans(0).error()
                                                                     : std::string("compiled");
  };
  auto one_kernel = [](const yirage::v1::Graph& proto, const yirage::v1::Schedule& schedule) {
    absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
    EXPECT_TRUE(g.ok());
    return MakePlan(*g, OneRowGroup(proto, schedule));
  };
  // A low-rank branch in the registers form.
  GraphBuilder l("lora");
  l.Input("X", {16, 256}, FLOAT16).Input("W", {256, 256}, FLOAT16);
  l.Input("A", {256, 16}, FLOAT16).Input("B", {16, 256}, FLOAT16);
  l.Op("XW", "matmul", {"X", "W"}).Op("XA", "matmul", {"X", "A"});
  l.Op("XAB", "matmul", {"XA", "B"}).Op("Y", "add", {"XW", "XAB"}).Output("Y");
  yirage::v1::Schedule regs = Rows(4);
  regs.mutable_streamed_matmul()->set_form(StreamedMatmulSchedule::FORM_REGISTERS);
  EXPECT_NE(error_of(l.proto(), one_kernel(l.proto(), regs))
                .find("schedule.streamed_matmul.form FORM_REGISTERS does not apply"),
            std::string::npos);
  // wgmma under a norm prologue.
  GraphBuilder r("rms_linear");
  r.Input("X", {16, 512}, FLOAT16).Input("W", {512, 256}, FLOAT16);
  r.Op("N", "rms_norm", {"X"}).Op("Y", "matmul", {"N", "W"}).Output("Y");
  yirage::v1::Schedule wgmma = Rows(4);
  wgmma.mutable_streamed_matmul()->set_form(StreamedMatmulSchedule::FORM_WGMMA);
  EXPECT_NE(error_of(r.proto(), one_kernel(r.proto(), wgmma)).find("FORM_WGMMA does not apply"),
            std::string::npos);
  // Attention's wgmma form with D = 128.
  GraphBuilder a("attention_d128");
  a.Input("Q", {1, 64, 128}, FLOAT16).Input("K", {1, 128, 256}, FLOAT16);
  a.Input("V", {1, 256, 128}, FLOAT16);
  a.Op("S", "matmul", {"Q", "K"}).Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"});
  a.Output("O");
  yirage::v1::Schedule wide = Rows(4);
  wide.mutable_attention()->set_warp_rows(64);
  EXPECT_NE(error_of(a.proto(), one_kernel(a.proto(), wide))
                .find("schedule.attention.warp_rows 64 (the wgmma form) needs sm_90"),
            std::string::npos);
  // Attention's TMA copies with a masked last key tile (255 keys): its boxes
  // would read the next batch entry's keys.
  GraphBuilder t("attention_255_keys");
  t.Input("Q", {2, 7, 64}, FLOAT16).Input("K", {2, 255, 64}, FLOAT16);
  t.Input("V", {2, 255, 64}, FLOAT16);
  t.Op("S", "matmul", {"Q", "K"}, {B("transpose_b", true)});
  t.Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"}).Output("O");
  yirage::v1::Schedule tma = Rows(16);
  tma.mutable_attention()->set_tma(true);
  EXPECT_NE(error_of(t.proto(), one_kernel(t.proto(), tma))
                .find("schedule.attention.tma needs sm_90, D and DV multiples of 64 and keys a "
                      "multiple of 64; this is sm_90 with D 64, DV 64, 255 keys"),
            std::string::npos);
  // Attention knobs on a float32 chain, which the kernel does not take.
  GraphBuilder f("attention_f32");
  f.Input("Q", {1, 64, 64}, FLOAT32).Input("K", {1, 64, 128}, FLOAT32);
  f.Input("V", {1, 128, 64}, FLOAT32);
  f.Op("S", "matmul", {"Q", "K"}).Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"});
  f.Output("O");
  yirage::v1::Schedule knobs = Rows(4);
  knobs.mutable_attention()->set_stages(3);
  EXPECT_NE(error_of(f.proto(), one_kernel(f.proto(), knobs))
                .find("the fused attention kernel does not take this chain"),
            std::string::npos);
  // Its defaults are the backend's choice: the row kernel.
  yirage::v1::Schedule defaults = Rows(4);
  defaults.mutable_attention();
  EXPECT_EQ(error_of(f.proto(), one_kernel(f.proto(), defaults)), "compiled");
}

}  // namespace
}  // namespace yirage::backends::cuda::testing
