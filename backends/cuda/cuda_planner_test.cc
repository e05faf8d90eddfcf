// The CUDA kernel planners as pure functions of the chain's shapes, the
// schedule and the target (no NVRTC, no device): the streamed matmul's form,
// splits, clusters and stages; fused attention's splits and merges; the
// family description for a target; the GEMM's tiles, clusters and grid.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/cuda/cuda_attention.h"
#include "backends/cuda/cuda_families.h"
#include "backends/cuda/cuda_gemm.h"
#include "backends/cuda/cuda_streamed_matmul.h"
#include "backends/cuda/cuda_test_util.h"
#include "core/graph.h"
#include "core/kernel_family.h"
#include "gtest/gtest.h"

namespace yirage::backends::cuda {
namespace {

using testing::GraphBuilder;
using yirage::v1::FLOAT16;
using yirage::v1::StreamedMatmulSchedule;

CudaTarget H200() { return CudaTarget{90, 232448, 132}; }
CudaTarget A100() { return CudaTarget{80, 166912, 108}; }

core::Graph MustGraph(const yirage::v1::Graph& proto) {
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

core::Graph Gated(int64_t m, int64_t k, int64_t n) {
  GraphBuilder b("gated");
  b.Input("X", {m, k}, FLOAT16).Input("W1", {k, n}, FLOAT16).Input("W2", {k, n}, FLOAT16);
  b.Op("A", "matmul", {"X", "W1"}).Op("Sg", "silu", {"A"});
  b.Op("Bm", "matmul", {"X", "W2"}).Op("Y", "mul", {"Sg", "Bm"}).Output("Y");
  return MustGraph(b.proto());
}

std::vector<int> AllOps(const core::Graph& g) {
  std::vector<int> ops;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) ops.push_back(i);
  return ops;
}

std::optional<StreamedMatmulPlan> Plan(const core::Graph& g, const CudaTarget& t,
                                       StreamedMatmulSchedule::Form form, int stages = 0,
                                       int warps = 0, int split_k = 0) {
  yirage::v1::Schedule s;
  s.mutable_streamed_matmul()->set_form(form);
  s.mutable_streamed_matmul()->set_stages(stages);
  s.mutable_streamed_matmul()->set_warps(warps);
  s.mutable_streamed_matmul()->set_split_k(split_k);
  return PlanStreamedMatmul(g, AllOps(g), {g.outputs()[0]}, t, s);
}

TEST(StreamedMatmulPlannerTest, DecodeRowsTakeTheRegistersFormAndSplitsFillTheChip) {
  const core::Graph g = Gated(8, 4096, 4096);
  std::optional<StreamedMatmulPlan> p = Plan(g, H200(), StreamedMatmulSchedule::FORM_AUTO);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->form, StreamedMatmulPlan::kRegisters);
  EXPECT_EQ(p->warps, 4);
  EXPECT_GT(p->splits, 1) << "64 column tiles alone leave the SMs idle";
  EXPECT_EQ(4096 % (16 * p->warps * p->splits), 0);
  // 16-warp blocks: few splits, summed in a cluster on sm_90, not on sm_80.
  p = Plan(g, H200(), StreamedMatmulSchedule::FORM_REGISTERS, 2, 16);
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->cluster);
  EXPECT_LE(p->splits, 8);
  p = Plan(g, A100(), StreamedMatmulSchedule::FORM_REGISTERS, 2, 16);
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->cluster);
  // A requested split that divides K is taken.
  p = Plan(g, H200(), StreamedMatmulSchedule::FORM_REGISTERS, 2, 4, 8);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->splits, 8);
}

TEST(StreamedMatmulPlannerTest, SharedFormStagesSplitsAndClusters) {
  const core::Graph g64 = Gated(64, 4096, 4096);
  std::optional<StreamedMatmulPlan> p = Plan(g64, H200(), StreamedMatmulSchedule::FORM_AUTO);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->form, StreamedMatmulPlan::kShared) << "64 rows: no registers form";
  EXPECT_EQ(p->m_tiles, 4);
  EXPECT_EQ(p->warps, 8);
  EXPECT_EQ(p->stages, 4);
  EXPECT_TRUE(p->cluster) << "sm_90: the K splits sum in a cluster";
  EXPECT_GE(p->splits, 2);
  // The combine-kernel form never clusters; sm_80 has no clusters.
  p = Plan(g64, H200(), StreamedMatmulSchedule::FORM_SHARED_COMBINE, 0, 0, 2);
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->cluster);
  EXPECT_EQ(p->splits, 2);
  p = Plan(g64, A100(), StreamedMatmulSchedule::FORM_SHARED);
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->cluster);
  // A pipeline deeper than shared memory holds gets shallower.
  CudaTarget small = A100();
  small.max_smem_per_block = 64 * 1024;
  p = Plan(g64, small, StreamedMatmulSchedule::FORM_SHARED, 8);
  ASSERT_TRUE(p.has_value());
  EXPECT_LT(p->stages, 8);
  EXPECT_GE(p->stages, 2);
  // wgmma: sm_90 only, one warpgroup.
  p = Plan(g64, H200(), StreamedMatmulSchedule::FORM_WGMMA, 5);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->form, StreamedMatmulPlan::kWgmma);
  EXPECT_EQ(p->warps, 4);
  EXPECT_EQ(p->stages, 5);
  p = Plan(g64, A100(), StreamedMatmulSchedule::FORM_WGMMA, 5);
  ASSERT_TRUE(p.has_value());
  EXPECT_NE(p->form, StreamedMatmulPlan::kWgmma) << "sm_80: the caller refuses this plan";
}

TEST(StreamedMatmulPlannerTest, ShapesOutsideTheFamilyAreNotPlanned) {
  EXPECT_FALSE(Plan(Gated(80, 1024, 1024), H200(), StreamedMatmulSchedule::FORM_AUTO).has_value())
      << "more than 64 rows";
  EXPECT_FALSE(Plan(Gated(8, 1000, 1024), H200(), StreamedMatmulSchedule::FORM_AUTO).has_value())
      << "K not a multiple of 64";
  EXPECT_FALSE(
      Plan(Gated(8, 1024, 1024), CudaTarget{75, 65536, 40}, StreamedMatmulSchedule::FORM_AUTO)
          .has_value())
      << "before sm_80";
}

AttentionPattern Attention(const core::Graph& g) {
  std::optional<AttentionPattern> a = MatchAttention(g, AllOps(g), {g.outputs()[0]});
  EXPECT_TRUE(a.has_value());
  return a.value_or(AttentionPattern{});
}

core::Graph AttentionGraph(int64_t heads, int64_t m, int64_t n, int64_t d) {
  GraphBuilder b("attention");
  b.Input("Q", {heads, m, d}, FLOAT16).Input("K", {heads, d, n}, FLOAT16);
  b.Input("V", {heads, n, d}, FLOAT16);
  b.Op("S", "matmul", {"Q", "K"}).Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  return MustGraph(b.proto());
}

TEST(AttentionPlannerTest, KeySplitsFillTheChipAndMergeAsTheTargetAllows) {
  // 2 heads x 256 queries: 8 blocks of 64 rows on 132 SMs.
  const AttentionPattern a = Attention(AttentionGraph(2, 256, 4096, 64));
  const AttentionConfig h200 = PlanAttention(a, H200(), {});
  EXPECT_GT(h200.splits, 1);
  EXPECT_TRUE(h200.cluster_merge || h200.spin_merge);
  EXPECT_FALSE(h200.wgmma) << "only when asked for";
  const AttentionConfig a100 = PlanAttention(a, A100(), {});
  EXPECT_FALSE(a100.cluster_merge) << "no clusters before sm_90";
  yirage::v1::AttentionSchedule workspace;
  workspace.set_merge(yirage::v1::AttentionSchedule::MERGE_WORKSPACE);
  workspace.set_split_k(4);
  const AttentionConfig ws = PlanAttention(a, H200(), workspace);
  EXPECT_EQ(ws.splits, 4);
  EXPECT_FALSE(ws.cluster_merge);
  EXPECT_FALSE(ws.spin_merge);
  EXPECT_GT(AttentionWorkspaceBytes(a, ws), 0);
  // The warpgroup form: sm_90 and D = DV = 64 only.
  yirage::v1::AttentionSchedule wg;
  wg.set_warp_rows(64);
  EXPECT_TRUE(PlanAttention(a, H200(), wg).wgmma);
  EXPECT_FALSE(PlanAttention(a, A100(), wg).wgmma);
  const AttentionPattern d128 = Attention(AttentionGraph(2, 256, 4096, 128));
  EXPECT_FALSE(PlanAttention(d128, H200(), wg).wgmma);
}

// Self-attention as prefill sends it: K given as [.., N, D] (transpose_b).
core::Graph PrefillGraph(int64_t heads, int64_t m, int64_t n, int64_t d) {
  GraphBuilder b("prefill");
  b.Input("Q", {heads, m, d}, FLOAT16).Input("K", {heads, n, d}, FLOAT16);
  b.Input("V", {heads, n, d}, FLOAT16);
  b.Op("S", "matmul", {"Q", "K"}, {testing::B("transpose_b", true)});
  b.Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  return MustGraph(b.proto());
}

TEST(AttentionPlannerTest, TmaCopiesNeedSm90KeysByRowsAndPanelsOf64) {
  yirage::v1::AttentionSchedule tma;
  tma.set_tma(true);
  tma.set_block_rows(32);
  tma.set_warps(2);
  tma.set_stages(6);
  // GQA decode: 128 key/value heads of 4 query rows, 2048 keys, D = 128.
  const AttentionPattern gqa = Attention(PrefillGraph(128, 4, 2048, 128));
  const AttentionConfig c = PlanAttention(gqa, H200(), tma);
  EXPECT_TRUE(c.tma);
  EXPECT_EQ(c.row_warps, 2);
  EXPECT_EQ(c.stages, 6) << "six 32 KiB stages fit 227 KiB";
  EXPECT_FALSE(PlanAttention(gqa, A100(), tma).tma) << "no TMA before sm_90";
  EXPECT_TRUE(PlanAttention(Attention(AttentionGraph(2, 4, 2048, 128)), H200(), tma).tma)
      << "K given as [.., D, N]: boxes of 64 head dims by 64 keys";
  EXPECT_FALSE(PlanAttention(Attention(PrefillGraph(8, 4, 2048, 96)), H200(), tma).tma)
      << "D not a multiple of 64";
  EXPECT_FALSE(PlanAttention(gqa, H200(), {}).tma) << "only when asked for";
  // Eight stages of 32 KiB do not fit: the ring gets shallower.
  tma.set_stages(8);
  EXPECT_LT(PlanAttention(gqa, H200(), tma).stages, 8);
}

yirage::v1::AttentionSchedule Prefill(int rows, int key_tile, int stages) {
  yirage::v1::AttentionSchedule s;
  s.set_prefill(true);
  s.set_block_rows(rows);
  s.set_key_tile(key_tile);
  s.set_stages(stages);
  return s;
}

TEST(AttentionPlannerTest, PrefillFormTakesWarpgroupsOfRowsAndFitsItsRing) {
  const AttentionPattern a = Attention(PrefillGraph(32, 1024, 1024, 128));
  const AttentionConfig c = PlanAttention(a, H200(), Prefill(128, 128, 2));
  ASSERT_TRUE(c.prefill);
  EXPECT_EQ(c.row_warps, 8) << "two warpgroups";
  EXPECT_EQ(c.key_tile, 128);
  EXPECT_EQ(c.stages, 2);
  EXPECT_EQ(c.splits, 1);
  EXPECT_EQ(AttentionWorkspaceBytes(a, c), 0);
  // 192 rows with 128-key tiles: Q 48 KiB and 64 KiB a stage; 8 stages do
  // not fit 227 KiB, 2 do (the ring gets shallower, the rows stay).
  const AttentionConfig deep = PlanAttention(a, H200(), Prefill(192, 128, 8));
  ASSERT_TRUE(deep.prefill);
  EXPECT_EQ(deep.row_warps, 12);
  EXPECT_EQ(deep.stages, 2);
  // The overlap refills a stage two steps later: it needs three stages.
  yirage::v1::AttentionSchedule overlap = Prefill(128, 128, 3);
  overlap.set_overlap(true);
  EXPECT_TRUE(PlanAttention(a, H200(), overlap).overlap);
  overlap.set_stages(2);
  EXPECT_FALSE(PlanAttention(a, H200(), overlap).overlap);
  // Unknown rows and key tiles take the defaults.
  const AttentionConfig def = PlanAttention(a, H200(), Prefill(0, 0, 0));
  ASSERT_TRUE(def.prefill);
  EXPECT_EQ(def.row_warps, 8);
  EXPECT_EQ(def.key_tile, 64);
  EXPECT_EQ(def.stages, 2);
}

TEST(AttentionPlannerTest, PrefillFormRefusesWhatItCannotRun) {
  const AttentionPattern a = Attention(PrefillGraph(4, 256, 256, 128));
  EXPECT_TRUE(PlanAttention(a, H200(), Prefill(128, 128, 2)).prefill);
  EXPECT_FALSE(PlanAttention(a, A100(), Prefill(128, 128, 2)).prefill) << "wgmma is sm_90's";
  // K given as [.., D, N].
  EXPECT_FALSE(
      PlanAttention(Attention(AttentionGraph(4, 256, 256, 128)), H200(), Prefill(128, 64, 2))
          .prefill);
  // Head dims not multiples of 64, or over 256.
  EXPECT_FALSE(
      PlanAttention(Attention(PrefillGraph(4, 256, 256, 96)), H200(), Prefill(128, 64, 2)).prefill);
  const core::Graph d320 = PrefillGraph(4, 256, 256, 320);
  EXPECT_FALSE(MatchAttention(d320, AllOps(d320), {d320.outputs()[0]}).has_value());
}

TEST(AttentionPlannerTest, PrefillFormMasksTheLastKeyTile) {
  // 192 and 1000 keys: not whole 128-key tiles; the last tile is masked.
  for (const int64_t keys : {192, 1000}) {
    SCOPED_TRACE(keys);
    const AttentionPattern a = Attention(PrefillGraph(4, 256, keys, 128));
    EXPECT_TRUE(PlanAttention(a, H200(), Prefill(128, 128, 2)).prefill);
    EXPECT_TRUE(PlanAttention(a, H200(), Prefill(64, 64, 3)).prefill);
  }
}

// Q [lq.., M, D] against K and V [lk.., N, D] (K as [.., N, D]).
core::Graph LeadAttention(const std::vector<int64_t>& lq, const std::vector<int64_t>& lk, int64_t m,
                          int64_t n, int64_t d) {
  auto shape = [](std::vector<int64_t> lead, int64_t rows, int64_t cols) {
    lead.push_back(rows);
    lead.push_back(cols);
    return lead;
  };
  GraphBuilder b("lead_attention");
  b.Input("Q", shape(lq, m, d), FLOAT16).Input("K", shape(lk, n, d), FLOAT16);
  b.Input("V", shape(lk, n, d), FLOAT16);
  b.Op("S", "matmul", {"Q", "K"}, {testing::B("transpose_b", true)});
  b.Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  return MustGraph(b.proto());
}

TEST(AttentionPlannerTest, GroupedQueriesFoldIntoTheRowsOfTheirKeyValueHead) {
  // Llama-3 8B at prefill: 8 KV heads of 4 query heads, 1024 tokens.
  std::optional<AttentionPattern> a;
  core::Graph g = LeadAttention({8, 4}, {8, 1}, 1024, 1024, 128);
  a = MatchAttention(g, AllOps(g), {g.outputs()[0]});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->batch, 8);
  EXPECT_EQ(a->m, 4 * 1024);
  EXPECT_TRUE(PlanAttention(*a, H200(), Prefill(128, 128, 2)).prefill);
  // One KV head of 6 query heads.
  g = LeadAttention({6}, {1}, 64, 256, 64);
  a = MatchAttention(g, AllOps(g), {g.outputs()[0]});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->batch, 1);
  EXPECT_EQ(a->m, 6 * 64);
  // K and V shared by every head (missing lead dims): one batch entry.
  g = LeadAttention({3, 5}, {}, 16, 256, 64);
  a = MatchAttention(g, AllOps(g), {g.outputs()[0]});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->batch, 1);
  EXPECT_EQ(a->m, 3 * 5 * 16);
  // Broadcast over an outer dim: a KV head's query rows are not contiguous.
  g = LeadAttention({2, 8}, {1, 8}, 64, 256, 64);
  EXPECT_FALSE(MatchAttention(g, AllOps(g), {g.outputs()[0]}).has_value());
}

TEST(AttentionPlannerTest, PrefillFormTakesHeadDim256InNarrowTiles) {
  const AttentionPattern a = Attention(PrefillGraph(4, 512, 1000, 256));
  // Two warpgroups: Q 64 KiB + 2 stages of 64 keys x (256 + 256) x 2 bytes
  // = 192 KiB; four stages would not fit, so no overlap either.
  const AttentionConfig two = PlanAttention(a, H200(), Prefill(128, 64, 4));
  ASSERT_TRUE(two.prefill);
  EXPECT_EQ(two.row_warps, 8);
  EXPECT_EQ(two.stages, 2);
  EXPECT_FALSE(two.overlap);
  // One warpgroup: Q 32 KiB + 3 stages = 224 KiB, with the overlap.
  yirage::v1::AttentionSchedule one_s = Prefill(64, 64, 3);
  one_s.set_overlap(true);
  const AttentionConfig one = PlanAttention(a, H200(), one_s);
  ASSERT_TRUE(one.prefill);
  EXPECT_EQ(one.row_warps, 4);
  EXPECT_EQ(one.stages, 3);
  EXPECT_TRUE(one.overlap);
  // 128-key tiles or three warpgroups would not hold a 64 x 256 O in
  // registers.
  EXPECT_FALSE(PlanAttention(a, H200(), Prefill(128, 128, 2)).prefill);
  EXPECT_FALSE(PlanAttention(a, H200(), Prefill(192, 64, 2)).prefill);
  // The warp-specialized form (Q from shared memory): 64-key tiles, two
  // stages (Q 64 KiB + 2 x 64 KiB and the mbarriers).
  yirage::v1::AttentionSchedule ws = Prefill(0, 64, 3);
  ws.set_warp_specialized(true);
  const AttentionConfig wsc = PlanAttention(a, H200(), ws);
  ASSERT_TRUE(wsc.warp_specialized);
  EXPECT_EQ(wsc.stages, 2);
  ws.set_key_tile(128);
  EXPECT_FALSE(PlanAttention(a, H200(), ws).prefill);
}

yirage::v1::AttentionSchedule PrefillWs(int key_tile, int stages) {
  yirage::v1::AttentionSchedule s = Prefill(0, key_tile, stages);
  s.set_warp_specialized(true);
  s.set_overlap(true);  // does not apply to the form
  return s;
}

TEST(AttentionPlannerTest, WarpSpecializedPrefillIsPersistentOverTilesOf128Rows) {
  // 32 heads x 1024 rows: 256 tiles of 128 rows over the 132 SMs.
  const AttentionPattern a = Attention(PrefillGraph(32, 1024, 1024, 128));
  const AttentionConfig c = PlanAttention(a, H200(), PrefillWs(128, 3));
  ASSERT_TRUE(c.prefill);
  ASSERT_TRUE(c.warp_specialized);
  EXPECT_EQ(c.row_warps, 8) << "two consumer warpgroups";
  EXPECT_EQ(c.key_tile, 128);
  EXPECT_EQ(c.stages, 3) << "Q 32 KiB + 3 x 64 KiB + barriers fit 227 KiB";
  EXPECT_FALSE(c.overlap);
  EXPECT_EQ(c.blocks, 132);
  // Fewer tiles than SMs: a block a tile. 4 stages of 128 keys do not fit.
  const AttentionConfig few =
      PlanAttention(Attention(PrefillGraph(2, 200, 1024, 128)), H200(), PrefillWs(128, 4));
  ASSERT_TRUE(few.warp_specialized);
  EXPECT_EQ(few.blocks, 4);
  EXPECT_EQ(few.stages, 3);
  // The plain prefill form does not set it.
  EXPECT_FALSE(PlanAttention(a, H200(), Prefill(128, 128, 2)).warp_specialized);
}

// A FlashAttention-3 key tile `tile` asked for on `own` (whose head dims it
// serves): the warp-specialized form takes it with two stages (three would
// not fit), the block-synchronous form falls back to 64 keys, and `other`
// (head dims it does not serve) is refused.
void ExpectWarpSpecializedKeyTile(int tile, const core::Graph& own, const core::Graph& other) {
  const AttentionPattern a = Attention(own);
  const AttentionConfig c = PlanAttention(a, H200(), PrefillWs(tile, 3));
  ASSERT_TRUE(c.warp_specialized);
  EXPECT_EQ(c.key_tile, tile);
  EXPECT_EQ(c.stages, 2);
  const AttentionConfig plain = PlanAttention(a, H200(), Prefill(128, tile, 2));
  ASSERT_TRUE(plain.prefill);
  EXPECT_EQ(plain.key_tile, 64) << "the block-synchronous form takes 64 or 128";
  EXPECT_FALSE(PlanAttention(Attention(other), H200(), PrefillWs(tile, 2)).prefill)
      << "head dims the tile does not serve";
}

// 176-key tiles (FlashAttention-3's for head dims up to 128): in the
// warp-specialized form only, two stages (Q 32 KiB + 3 x 176 KiB would not
// fit), head dims up to 128 (64 too); head dim 256 takes 64 or 80.
TEST(AttentionPlannerTest, KeyTilesOf176AreTheWarpSpecializedFormsForHeadDimsUpTo128) {
  ExpectWarpSpecializedKeyTile(176, PrefillGraph(32, 1024, 1024, 128),
                               PrefillGraph(16, 1000, 1000, 256));
  const AttentionConfig d64 =
      PlanAttention(Attention(PrefillGraph(8, 333, 500, 64)), H200(), PrefillWs(176, 2));
  ASSERT_TRUE(d64.warp_specialized);
  EXPECT_EQ(d64.key_tile, 176);
}

// 80-key tiles (FlashAttention-3's for head dim 256): warp-specialized,
// head dims over 128, two stages (Q 64 KiB + 2 x 80 KiB + barriers); head
// dims up to 128 take 64 keys or more.
TEST(AttentionPlannerTest, KeyTilesOf80AreTheWarpSpecializedFormsForHeadDim256) {
  ExpectWarpSpecializedKeyTile(80, PrefillGraph(16, 1000, 1000, 256),
                               PrefillGraph(32, 1024, 1024, 128));
}

// TMA copies in the warp-specialized form: where asked, as three 3-D
// tensor maps (Q, K, V over {D, rows, batch}: a box never crosses into the
// next batch entry), boxes of 64 columns x 128 query rows or a key tile.
TEST(AttentionPlannerTest, WarpSpecializedPrefillTakesTmaCopiesWhereAsked) {
  const AttentionPattern a = Attention(PrefillGraph(32, 1000, 1000, 128));
  yirage::v1::AttentionSchedule s = PrefillWs(128, 3);
  EXPECT_FALSE(PlanAttention(a, H200(), s).tma);
  s.set_tma(true);
  const AttentionConfig c = PlanAttention(a, H200(), s);
  ASSERT_TRUE(c.warp_specialized);
  EXPECT_TRUE(c.tma);
  EXPECT_EQ(c.stages, 3);
  yirage::v1::AttentionSchedule plain = Prefill(128, 128, 2);
  plain.set_tma(true);
  EXPECT_FALSE(PlanAttention(a, H200(), plain).tma) << "the block-synchronous form copies itself";

  std::string source;
  std::vector<KernelLaunch> launches;
  EmitAttention(a, c, "k0", 0, 1, 2, 3, "__half", -1, &source, &launches);
  ASSERT_EQ(launches.size(), 1u);
  const std::vector<TensorMapArg>& maps = launches[0].tensor_maps;
  ASSERT_EQ(maps.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(maps[i].buffer, i);
    EXPECT_EQ(maps[i].dims, (std::vector<int64_t>{128, 1000, 32}));
    EXPECT_EQ(maps[i].stride_bytes, 128 * 2);
    EXPECT_EQ(maps[i].batch_stride_bytes, 1000 * 128 * 2);
    EXPECT_EQ(maps[i].box, (std::vector<int>{64, 128, 1}));
  }
  EXPECT_NE(source.find("const __grid_constant__ CUtensorMap tq, const __grid_constant__ "
                        "CUtensorMap tk, const __grid_constant__ CUtensorMap tv, "),
            std::string::npos);
  EXPECT_NE(source.find(", true>(q, k, v, o, 32, 1000, 1000, "), std::string::npos) << source;

  // 64-key tiles: the key and value boxes follow the tile.
  s.set_key_tile(64);
  launches.clear();
  EmitAttention(a, PlanAttention(a, H200(), s), "k0", 0, 1, 2, 3, "__half", -1, &source, &launches);
  ASSERT_EQ(launches.size(), 1u);
  ASSERT_EQ(launches[0].tensor_maps.size(), 3u);
  EXPECT_EQ(launches[0].tensor_maps[0].box, (std::vector<int>{64, 128, 1}));
  EXPECT_EQ(launches[0].tensor_maps[1].box, (std::vector<int>{64, 64, 1}));
  EXPECT_EQ(launches[0].tensor_maps[2].box, (std::vector<int>{64, 64, 1}));
}

TEST(AttentionPlannerTest, WarpSpecializedPrefillRefusesWhatItCannotRun) {
  const AttentionPattern a = Attention(PrefillGraph(4, 256, 256, 128));
  EXPECT_TRUE(PlanAttention(a, H200(), PrefillWs(128, 2)).warp_specialized);
  EXPECT_FALSE(PlanAttention(a, A100(), PrefillWs(128, 2)).prefill) << "wgmma is sm_90's";
  EXPECT_TRUE(PlanAttention(Attention(PrefillGraph(4, 256, 192, 128)), H200(), PrefillWs(128, 2))
                  .warp_specialized)
      << "keys off the tiles: the last one is masked";
  // D != DV.
  GraphBuilder b("prefill_dv");
  b.Input("Q", {4, 256, 128}, FLOAT16).Input("K", {4, 256, 128}, FLOAT16);
  b.Input("V", {4, 256, 64}, FLOAT16);
  b.Op("S", "matmul", {"Q", "K"}, {testing::B("transpose_b", true)});
  b.Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  const AttentionPattern dv = Attention(MustGraph(b.proto()));
  EXPECT_FALSE(PlanAttention(dv, H200(), PrefillWs(128, 2)).prefill);
  EXPECT_TRUE(PlanAttention(dv, H200(), Prefill(128, 128, 2)).prefill);
}

TEST(AttentionPlannerTest, KeyGroupsShrinkToWhatSharedMemoryHolds) {
  // D = 128: four key groups' two-stage ring does not fit 227 KiB; two do.
  const AttentionPattern a = Attention(AttentionGraph(1, 64, 256, 128));
  yirage::v1::AttentionSchedule s;
  s.set_block_rows(64);
  s.set_warps(16);
  s.set_stages(2);
  s.set_split_k(1);
  const AttentionConfig c = PlanAttention(a, H200(), s);
  EXPECT_EQ(c.row_warps, 4);
  EXPECT_EQ(c.key_groups, 2);
  EXPECT_EQ(c.stages, 2);
}

// Y = relu(X @ W + bias) (W [K, N], or [N, K] where `nk`), `dtype` in and
// out, the graph's rtol `rtol`.
core::Graph GemmChain(int64_t m, int64_t n, int64_t k, bool nk, yirage::v1::DType dtype = FLOAT16,
                      double rtol = 0) {
  GraphBuilder b("gemm");
  b.Input("X", {m, k}, dtype)
      .Input("W", nk ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, dtype)
      .Input("bias", {n}, dtype);
  b.Op("P", "matmul", {"X", "W"}, {testing::B("transpose_b", nk)});
  b.Op("Q", "add", {"P", "bias"}).Op("Y", "relu", {"Q"}).Output("Y");
  yirage::v1::Graph proto = b.proto();
  proto.mutable_tolerance()->set_rtol(rtol);
  return MustGraph(proto);
}

yirage::v1::GemmSchedule GemmKnobs(int tm, int tn, int stages, bool pingpong, int cm, int cn) {
  yirage::v1::GemmSchedule s;
  s.set_tile_m(tm);
  s.set_tile_n(tn);
  s.set_stages(stages);
  s.set_pingpong(pingpong);
  s.set_cluster_m(cm);
  s.set_cluster_n(cn);
  return s;
}

TEST(GemmPlannerTest, DefaultsAndTheGridOfWholeClusters) {
  const core::Graph g = GemmChain(4096, 4096, 4096, true);
  const std::optional<GemmPlan> p = PlanGemm(g, AllOps(g), FLOAT16, H200(), {});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->tile_m, 128);
  EXPECT_EQ(p->tile_n, 256);
  EXPECT_EQ(p->stages, 4);
  EXPECT_FALSE(p->pingpong);
  EXPECT_EQ(p->cluster_m * p->cluster_n, 2);
  EXPECT_EQ(p->blocks, 132) << "512 tiles in 2-block clusters: one block a multiprocessor";
  EXPECT_EQ(p->smem_bytes, 1024 + 4 * (128 + 256) * 64 * 2 + 2 * 4 * 8 + 16);
  EXPECT_EQ(p->splits, 1) << "the last wave's 58 of 66 clusters: no room to split";
  EXPECT_EQ(GemmWorkspaceBytes(*p), 0);
  EXPECT_EQ(GemmCounterBytes(*p), 0);
  EXPECT_EQ(p->match.epilogue.size(), 2u);
  // Fewer tiles than multiprocessors: a block a tile, whole clusters.
  const core::Graph small = GemmChain(300, 600, 256, false);
  const std::optional<GemmPlan> q =
      PlanGemm(small, AllOps(small), FLOAT16, H200(), GemmKnobs(128, 128, 6, true, 2, 1));
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->blocks, 2 * 5 * 2) << "3 row tiles in 2 cluster rows, 5 column tiles";
}

TEST(GemmPlannerTest, FewTilesSplitKAndClustersAlongTheAxisWithTiles) {
  // M 128: one tile row, so the default 2 x 1 cluster turns to 1 x 2; 64
  // tiles of 128 x 256 (32 clusters) fill 64 of 132 multiprocessors: two
  // K ranges of 32 blocks.
  const core::Graph wide = GemmChain(128, 16384, 4096, true);
  std::optional<GemmPlan> p = PlanGemm(wide, AllOps(wide), FLOAT16, H200(), {});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->cluster_m, 1);
  EXPECT_EQ(p->cluster_n, 2);
  EXPECT_EQ(p->splits, 2);
  EXPECT_EQ(p->blocks, 128);
  EXPECT_EQ(GemmWorkspaceBytes(*p), int64_t{64} * 2 * 128 * 256 * 4);
  EXPECT_EQ(GemmCounterBytes(*p), 64 * 2 * 4);
  // 16 tiles (8 clusters): 8 ranges would fill 128 blocks, but a range
  // has at least 16 of the 64 K blocks.
  const core::Graph square = GemmChain(128, 4096, 4096, true);
  p = PlanGemm(square, AllOps(square), FLOAT16, H200(), {});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->splits, 4);
  EXPECT_EQ(p->blocks, 64);
  const core::Graph shallow = GemmChain(128, 4096, 512, true);
  p = PlanGemm(shallow, AllOps(shallow), FLOAT16, H200(), {});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->splits, 1) << "8 K blocks";
  // The knobs: 1 is none, up to one range a K block (and 16).
  yirage::v1::GemmSchedule knobs = GemmKnobs(128, 128, 6, true, 1, 1);
  knobs.set_split_k(1);
  p = PlanGemm(square, AllOps(square), FLOAT16, H200(), knobs);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->splits, 1);
  EXPECT_EQ(p->blocks, 32);
  knobs.set_split_k(3);
  p = PlanGemm(square, AllOps(square), FLOAT16, H200(), knobs);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->splits, 3);
  EXPECT_EQ(p->blocks, 96);
  knobs.set_split_k(9);
  EXPECT_FALSE(PlanGemm(shallow, AllOps(shallow), FLOAT16, H200(), knobs).has_value())
      << "9 ranges for 8 K blocks";
  knobs.set_split_k(17);
  EXPECT_FALSE(PlanGemm(square, AllOps(square), FLOAT16, H200(), knobs).has_value());
  knobs.set_split_k(-1);
  EXPECT_FALSE(PlanGemm(square, AllOps(square), FLOAT16, H200(), knobs).has_value());
  // More tiles than blocks: 8 x 18 tiles in 2 x 1 clusters are 72 on 66
  // clusters; the last wave's 6 split in 3 ranges of 18 or 19 K blocks.
  const core::Graph qkv = GemmChain(1024, 4608, 3584, true);
  p = PlanGemm(qkv, AllOps(qkv), FLOAT16, H200(), {});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->cluster_m, 2);
  EXPECT_EQ(p->splits, 3);
  EXPECT_EQ(p->split_tiles, 6);
  EXPECT_EQ(p->blocks, 132);
  EXPECT_EQ(GemmWorkspaceBytes(*p), int64_t{6} * 2 * 3 * 128 * 256 * 4);
  EXPECT_EQ(GemmCounterBytes(*p), 6 * 2 * 2 * 4);
  // One tile: no cluster at all.
  const core::Graph one = GemmChain(100, 200, 4096, false);
  p = PlanGemm(one, AllOps(one), FLOAT16, H200(), {});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->cluster_m * p->cluster_n, 1);
  EXPECT_EQ(p->splits, 4) << "64 K blocks, 16 a range";
}

// Y = X @ W (+ R, X's shape but N columns): X [lead..., M, K]; W [K, N]
// or [N, K] where `nk`, with X's lead dims where `batched`.
core::Graph BatchedGemmChain(std::vector<int64_t> lead, int64_t m, int64_t n, int64_t k, bool nk,
                             bool batched) {
  GraphBuilder b("batched_gemm");
  auto shape = [&](int64_t r, int64_t c, bool with_lead) {
    std::vector<int64_t> s = with_lead ? lead : std::vector<int64_t>{};
    s.push_back(r);
    s.push_back(c);
    return s;
  };
  b.Input("X", shape(m, k, true), FLOAT16);
  b.Input("W", nk ? shape(n, k, batched) : shape(k, n, batched), FLOAT16);
  b.Input("R", shape(m, n, true), FLOAT16);
  b.Op("P", "matmul", {"X", "W"}, {testing::B("transpose_b", nk)});
  b.Op("Y", "add", {"P", "R"}).Output("Y");
  return MustGraph(b.proto());
}

TEST(GemmPlannerTest, BatchesAndRowsOverLeadDims) {
  // random_018's shape: 2 products of 100 x 255 x 4096 (B as [N, K], N
  // odd): 2 x 2 tiles of 128 x 128, one block a tile, K in 4 ranges of 16
  // K blocks.
  const core::Graph g = BatchedGemmChain({2}, 100, 255, 4096, true, true);
  std::optional<GemmPlan> p =
      PlanGemm(g, AllOps(g), FLOAT16, H200(), GemmKnobs(128, 128, 6, true, 1, 1));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->match.batch, 2);
  EXPECT_EQ(p->match.m, 100);
  EXPECT_EQ(p->match.n, 255);
  EXPECT_EQ(p->splits, 4);
  EXPECT_EQ(p->split_tiles, 4);
  EXPECT_EQ(p->blocks, 16);
  EXPECT_NE(GemmSummary(*p).find("batch 2 x M 100"), std::string::npos) << GemmSummary(*p);
  // Lead dims with a 2-D B: one matmul of all the rows.
  const core::Graph rows = BatchedGemmChain({4, 3}, 50, 512, 256, false, false);
  p = PlanGemm(rows, AllOps(rows), FLOAT16, H200(), {});
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->match.batch, 1);
  EXPECT_EQ(p->match.m, 600);
  // B as [K, N] in a batch: K a multiple of a stage's 64 (a K tail would
  // read the next product's rows of B).
  const core::Graph kn = BatchedGemmChain({3}, 200, 128, 128, false, true);
  EXPECT_TRUE(PlanGemm(kn, AllOps(kn), FLOAT16, H200(), {}).has_value());
  const core::Graph kn_tail = BatchedGemmChain({3}, 200, 128, 136, false, true);
  EXPECT_FALSE(PlanGemm(kn_tail, AllOps(kn_tail), FLOAT16, H200(), {}).has_value());
  const core::Graph nk_tail = BatchedGemmChain({3}, 200, 128, 136, true, true);
  EXPECT_TRUE(PlanGemm(nk_tail, AllOps(nk_tail), FLOAT16, H200(), {}).has_value());
}

yirage::v1::GemmSchedule MmaKnobs(int tm, int tn, int stages) {
  yirage::v1::GemmSchedule s = GemmKnobs(tm, tn, stages, false, 0, 0);
  s.set_mma_sync(true);
  return s;
}

TEST(GemmPlannerTest, Sm80FormTakesABlockATileOfEveryProduct) {
  const core::Graph g = GemmChain(1000, 520, 4096, true);
  std::optional<GemmPlan> p = PlanGemm(g, AllOps(g), FLOAT16, H200(), MmaKnobs(128, 256, 3));
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->mma_sync);
  EXPECT_EQ(p->warps_m, 2);
  EXPECT_EQ(p->warps_n, 4);
  // 8 row tiles by 3 column tiles fill 24 of 132 multiprocessors: K's 64
  // blocks in 4 ranges of 16.
  EXPECT_EQ(p->splits, 4);
  EXPECT_EQ(p->blocks, 8 * 3 * 4);
  EXPECT_EQ(p->smem_bytes, 3 * (128 + 256) * 64 * 2 + 16);
  EXPECT_EQ(GemmWorkspaceBytes(*p), int64_t{24} * 4 * 128 * 256 * 4);
  EXPECT_GE(GemmCounterBytes(*p), 24 * 4);
  EXPECT_NE(
      GemmSummary(*p).find("mma.sync; tile 128 x 256, 3 stages, split-K 4, 2 x 4 warps, 96 blocks"),
      std::string::npos)
      << GemmSummary(*p);
  // The knobs: 1 is none.
  yirage::v1::GemmSchedule one = MmaKnobs(128, 256, 3);
  one.set_split_k(1);
  p = PlanGemm(g, AllOps(g), FLOAT16, H200(), one);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->blocks, 24);
  EXPECT_EQ(GemmWorkspaceBytes(*p), 0);
  // 64-row and 64-column tiles take 32 x 32 pieces a warp.
  p = PlanGemm(g, AllOps(g), FLOAT16, A100(), MmaKnobs(64, 64, 4));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->warps_m * p->warps_n, 4);
  EXPECT_EQ(p->blocks, 16 * 9);
  // Off Hopper the backend's choice is this form: 128 x 128, 3 stages.
  p = PlanGemm(g, AllOps(g), FLOAT16, A100(), {});
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->mma_sync);
  EXPECT_EQ(p->tile_m, 128);
  EXPECT_EQ(p->tile_n, 128);
  EXPECT_EQ(p->stages, 3);
  // Batches: a block a tile of each product.
  const core::Graph b = BatchedGemmChain({3}, 200, 128, 136, false, true);
  p = PlanGemm(b, AllOps(b), FLOAT16, A100(), MmaKnobs(128, 128, 4));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->blocks, 3 * 2 * 1) << "a K tail reads only its own product's rows";
}

TEST(GemmPlannerTest, Sm80FormRefusesWhatItCannotRun) {
  const core::Graph g = GemmChain(1000, 520, 4096, true);
  auto plan = [&](const CudaTarget& t, const yirage::v1::GemmSchedule& k) {
    return PlanGemm(g, AllOps(g), FLOAT16, t, k).has_value();
  };
  EXPECT_TRUE(plan(A100(), MmaKnobs(128, 256, 3)));
  EXPECT_FALSE(plan(A100(), MmaKnobs(256, 128, 3))) << "tile_m 64 or 128";
  EXPECT_FALSE(plan(A100(), MmaKnobs(128, 96, 3))) << "tile_n 64, 128 or 256";
  EXPECT_FALSE(plan(A100(), MmaKnobs(128, 128, 1))) << "one stage";
  EXPECT_FALSE(plan(A100(), MmaKnobs(128, 256, 4))) << "192 KiB of ring on a 163 KiB part";
  EXPECT_FALSE(plan(CudaTarget{86, 101376, 84}, MmaKnobs(128, 128, 4))) << "128 KiB on sm_86";
  EXPECT_TRUE(plan(CudaTarget{86, 101376, 84}, MmaKnobs(128, 128, 3)));
  EXPECT_FALSE(plan(CudaTarget{75, 65536, 40}, MmaKnobs(64, 64, 2))) << "no cp.async";
  yirage::v1::GemmSchedule k = MmaKnobs(128, 128, 3);
  k.set_split_k(16);
  EXPECT_TRUE(plan(A100(), k)) << "16 ranges of 64 K blocks";
  k.set_split_k(17);
  EXPECT_FALSE(plan(A100(), k)) << "at most 16 ranges";
  k.set_split_k(-1);
  EXPECT_FALSE(plan(A100(), k));
  const core::Graph shallow = GemmChain(1000, 520, 128, true);
  k.set_split_k(3);
  EXPECT_FALSE(PlanGemm(shallow, AllOps(shallow), FLOAT16, A100(), k).has_value())
      << "3 ranges of 2 K blocks";
  k = MmaKnobs(128, 128, 3);
  k.set_pingpong(true);
  EXPECT_FALSE(plan(A100(), k));
  k = MmaKnobs(128, 128, 3);
  k.set_cluster_m(2);
  EXPECT_FALSE(plan(A100(), k));
  // float32 (TF32 is the Hopper form's; gated pairs: below).
  const core::Graph f32 = GemmChain(1000, 520, 4096, true, yirage::v1::FLOAT32, 1e-2);
  EXPECT_FALSE(
      PlanGemm(f32, AllOps(f32), yirage::v1::FLOAT32, A100(), MmaKnobs(128, 128, 3)).has_value());
  EXPECT_FALSE(PlanGemm(f32, AllOps(f32), yirage::v1::FLOAT32, A100(), {}).has_value());
}

// H = silu(X @ W1) * (X @ W3 * 0.5) + bias, then (`down`) Y = H @ WD + R:
// the gated form, then a GEMM whose A is the first kernel's output.
core::Graph GatedGemmChain(int64_t m, int64_t n, int64_t k, bool nk, bool up_first = false) {
  GraphBuilder b("gated_gemm");
  const std::vector<int64_t> w = nk ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
  b.Input("X", {m, k}, FLOAT16).Input("W1", w, FLOAT16).Input("W3", w, FLOAT16);
  b.Input("bias", {n}, FLOAT16).Input("WD", {n, 64}, FLOAT16).Input("R", {m, 64}, FLOAT16);
  b.Op("G", "matmul", {"X", "W1"}, {testing::B("transpose_b", nk)});
  b.Op("U", "matmul", {"X", "W3"}, {testing::B("transpose_b", nk)});
  b.Op("A", "silu", {"G"}).Op("S", "mul", {"U"}, {testing::F("scalar", 0.5)});
  b.Op("P", "mul",
       up_first ? std::vector<std::string>{"S", "A"} : std::vector<std::string>{"A", "S"});
  b.Op("H", "add", {"P", "bias"});
  b.Op("D", "matmul", {"H", "WD"}).Op("Y", "add", {"D", "R"}).Output("Y");
  return MustGraph(b.proto());
}

TEST(GemmPlannerTest, GatedChainsAndOperandsFromEarlierKernels) {
  for (bool up_first : {false, true}) {
    const core::Graph g = GatedGemmChain(1000, 264, 136, false, up_first);
    const std::vector<int> gated = {0, 1, 2, 3, 4, 5}, down = {6, 7};
    std::optional<GemmPlan> p = PlanGemm(g, gated, FLOAT16, H200(), {});
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->match.a, g.FindTensor("X"));
    EXPECT_EQ(p->match.b, g.FindTensor("W1"));
    EXPECT_EQ(p->match.b2, g.FindTensor("W3"));
    ASSERT_EQ(p->match.gate.size(), 1u);
    EXPECT_EQ(p->match.gate[0].type, core::OpType::kSilu);
    ASSERT_EQ(p->match.up.size(), 1u);
    EXPECT_EQ(p->match.up[0].operand, core::GemmMatch::Step::Operand::kScalar);
    EXPECT_EQ(p->match.join, core::OpType::kMul);
    EXPECT_EQ(p->match.join_gate_first, !up_first);
    ASSERT_EQ(p->match.epilogue.size(), 1u) << "the bias";
    EXPECT_EQ(p->match.out, g.FindTensor("H"));
    // A 128 x 256 tile of products is 128 x 128 of C: 8 x 3 tiles.
    EXPECT_EQ(p->tile_n, 256);
    EXPECT_EQ(p->blocks, 2 * 4 * 3) << "8 row tiles in 2-block clusters, 3 column tiles";
    // The down GEMM reads H, the first kernel's output.
    p = PlanGemm(g, down, FLOAT16, H200(), {});
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(p->match.a, g.FindTensor("H"));
    EXPECT_EQ(p->match.b2, -1);
    // The sm_80 form takes gated pairs where its warps are 64 products
    // wide: tile_n 128 (C's tiles 64 wide: 8 x 5 of them) or 256.
    std::optional<GemmPlan> mma = PlanGemm(g, gated, FLOAT16, A100(), {});
    ASSERT_TRUE(mma.has_value());
    EXPECT_TRUE(mma->mma_sync);
    EXPECT_EQ(mma->blocks, 8 * 5);
    EXPECT_NE(GemmSummary(*mma).find("gated"), std::string::npos);
    EXPECT_TRUE(PlanGemm(g, gated, FLOAT16, H200(), MmaKnobs(128, 256, 3)).has_value());
    EXPECT_FALSE(PlanGemm(g, gated, FLOAT16, H200(), MmaKnobs(128, 64, 3)).has_value());
    EXPECT_FALSE(PlanGemm(g, gated, FLOAT16, A100(), MmaKnobs(64, 64, 4)).has_value());
    yirage::v1::MatchLimits no_gate;
    no_gate.set_no_gate(true);
    EXPECT_FALSE(core::WithinLimits(no_gate, yirage::v1::GEMM, g, gated));
    EXPECT_TRUE(core::WithinLimits(no_gate, yirage::v1::GEMM, g, down));
    EXPECT_TRUE(PlanGemm(g, down, FLOAT16, A100(), {}).has_value());
  }
  // Not gated: the two products of different A, or a branch op with a
  // tensor operand, or a 64-wide tile of products (32 columns of C).
  GraphBuilder b("two_a");
  b.Input("X", {256, 64}, FLOAT16).Input("Z", {256, 64}, FLOAT16);
  b.Input("W1", {64, 128}, FLOAT16).Input("W3", {64, 128}, FLOAT16);
  b.Op("G", "matmul", {"X", "W1"}).Op("U", "matmul", {"Z", "W3"});
  b.Op("P", "mul", {"G", "U"}).Output("P");
  const core::Graph two_a = MustGraph(b.proto());
  EXPECT_FALSE(PlanGemm(two_a, AllOps(two_a), FLOAT16, H200(), {}).has_value());
  GraphBuilder c("branch_operand");
  c.Input("X", {256, 64}, FLOAT16).Input("R", {256, 128}, FLOAT16);
  c.Input("W1", {64, 128}, FLOAT16).Input("W3", {64, 128}, FLOAT16);
  c.Op("G", "matmul", {"X", "W1"}).Op("GR", "add", {"G", "R"});
  c.Op("U", "matmul", {"X", "W3"}).Op("P", "mul", {"GR", "U"}).Output("P");
  const core::Graph branch = MustGraph(c.proto());
  EXPECT_FALSE(PlanGemm(branch, AllOps(branch), FLOAT16, H200(), {}).has_value());
}

TEST(GemmPlannerTest, RefusesWhatTheTemplateCannotRun) {
  const core::Graph g = GemmChain(512, 512, 512, false);
  const std::vector<int> ops = AllOps(g);
  const std::optional<GemmPlan> a100 = PlanGemm(g, ops, FLOAT16, A100(), {});
  ASSERT_TRUE(a100.has_value());
  EXPECT_TRUE(a100->mma_sync) << "the sm_80 form off Hopper";
  EXPECT_FALSE(PlanGemm(g, ops, FLOAT16, A100(), GemmKnobs(128, 256, 4, false, 2, 1)).has_value())
      << "clusters: the Hopper form, sm_90 only";
  EXPECT_FALSE(PlanGemm(g, ops, yirage::v1::FLOAT32, H200(), {}).has_value())
      << "the output in A's dtype";
  EXPECT_FALSE(PlanGemm(g, ops, FLOAT16, H200(), GemmKnobs(128, 256, 4, true, 1, 1)).has_value())
      << "ping-pong 128 x 256 would hold 256 accumulators a thread";
  EXPECT_FALSE(PlanGemm(g, ops, FLOAT16, H200(), GemmKnobs(64, 128, 4, false, 1, 1)).has_value());
  EXPECT_FALSE(PlanGemm(g, ops, FLOAT16, H200(), GemmKnobs(128, 256, 4, false, 2, 2)).has_value())
      << "clusters of at most 2 blocks";
  EXPECT_FALSE(PlanGemm(g, ops, FLOAT16, H200(), GemmKnobs(128, 256, 8, false, 1, 1)).has_value())
      << "8 stages of 48 KiB exceed shared memory";
  EXPECT_TRUE(PlanGemm(g, ops, FLOAT16, H200(), GemmKnobs(256, 128, 4, false, 1, 2)).has_value());
  const core::Graph decode = GemmChain(64, 512, 512, false);
  EXPECT_FALSE(PlanGemm(decode, AllOps(decode), FLOAT16, H200(), {}).has_value())
      << "64 rows are the streamed matmul's";
  const core::Graph odd_k = GemmChain(512, 512, 100, false);
  EXPECT_FALSE(PlanGemm(odd_k, AllOps(odd_k), FLOAT16, H200(), {}).has_value())
      << "TMA row strides: K a multiple of 8";
}

// float32 through TF32: B as [N, K], the tolerance loose enough, K a
// multiple of 4; a stage holds 32 of K, so split-K counts 32-deep blocks.
TEST(GemmPlannerTest, Tf32WhereTheToleranceAllowsAndBIsByRows) {
  using yirage::v1::FLOAT32;
  const core::Graph g = GemmChain(512, 4096, 4096, true, FLOAT32, 1e-2);
  std::optional<GemmPlan> p =
      PlanGemm(g, AllOps(g), FLOAT32, H200(), GemmKnobs(128, 128, 6, false, 1, 1));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->dtype, FLOAT32);
  EXPECT_EQ(p->smem_bytes, 1024 + 6 * 256 * 128 + 6 * 16 + 16) << "the same bytes a stage";
  // 4 x 32 tiles of 128 x 128 on 132 multiprocessors: one partial wave of
  // 128, cut in one K range (132 / 128); 4096 / 32 = 128 K blocks allow it.
  EXPECT_EQ(p->splits, 1);
  const core::Graph skinny = GemmChain(128, 1024, 8192, true, FLOAT32, 1e-2);
  p = PlanGemm(skinny, AllOps(skinny), FLOAT32, H200(), GemmKnobs(128, 128, 6, false, 1, 1));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->splits, 16) << "8 tiles, 256 K blocks of 32: 16 ranges of 16 blocks";
  EXPECT_TRUE(PlanGemm(GemmChain(512, 512, 100, true, FLOAT32, 1e-2),
                       AllOps(GemmChain(512, 512, 100, true, FLOAT32, 1e-2)), FLOAT32, H200(), {})
                  .has_value())
      << "K a multiple of 4 (16-byte rows)";
  const core::Graph odd_k = GemmChain(512, 512, 102, true, FLOAT32, 1e-2);
  EXPECT_FALSE(PlanGemm(odd_k, AllOps(odd_k), FLOAT32, H200(), {}).has_value());
  const core::Graph kn = GemmChain(512, 512, 512, false, FLOAT32, 1e-2);
  EXPECT_FALSE(PlanGemm(kn, AllOps(kn), FLOAT32, H200(), {}).has_value())
      << "B as [K, N]: wgmma reads tf32 K-major only";
  const core::Graph tight = GemmChain(512, 512, 512, true, FLOAT32, 1e-4);
  EXPECT_FALSE(PlanGemm(tight, AllOps(tight), FLOAT32, H200(), {}).has_value())
      << "rtol 1e-4: float32 products stay float32";
}

TEST(GemmPlannerTest, DescribedOnSm90AfterTheOtherFamilies) {
  const yirage::v1::BackendKernels h200 = DescribeKernels(H200());
  ASSERT_GE(h200.families_size(), 4);
  const yirage::v1::KernelFamily& gemm = h200.families(h200.families_size() - 2);
  EXPECT_EQ(gemm.name(), "gemm");
  EXPECT_EQ(gemm.pattern(), yirage::v1::GEMM);
  EXPECT_EQ(gemm.limits().min_rows(), 65);
  for (const yirage::v1::SchedulePoint& point : gemm.points()) {
    SCOPED_TRACE(point.label());
    const core::Graph g = GemmChain(4096, 4096, 4096, false);
    EXPECT_TRUE(PlanGemm(g, AllOps(g), FLOAT16, H200(), point.schedule().gemm()).has_value());
  }
  const yirage::v1::KernelFamily& tf32 = h200.families(h200.families_size() - 1);
  EXPECT_EQ(tf32.name(), "gemm_tf32");
  EXPECT_EQ(tf32.pattern(), yirage::v1::GEMM);
  for (const yirage::v1::SchedulePoint& point : tf32.points()) {
    SCOPED_TRACE(point.label());
    const core::Graph g = GemmChain(4096, 4096, 4096, true, yirage::v1::FLOAT32, 1e-2);
    EXPECT_TRUE(
        PlanGemm(g, AllOps(g), yirage::v1::FLOAT32, H200(), point.schedule().gemm()).has_value());
  }
  // A float32 chain is the TF32 family's, a 16-bit one the gemm family's.
  const core::Graph f32 = GemmChain(1024, 1024, 1024, true, yirage::v1::FLOAT32, 1e-2);
  EXPECT_EQ(core::MatchFamily(h200, f32, AllOps(f32)), h200.families_size() - 1);
  const core::Graph f16 = GemmChain(1024, 1024, 1024, true);
  EXPECT_EQ(core::MatchFamily(h200, f16, AllOps(f16)), h200.families_size() - 2);
  const core::Graph tight = GemmChain(1024, 1024, 1024, true, yirage::v1::FLOAT32, 1e-4);
  EXPECT_EQ(core::MatchFamily(h200, tight, AllOps(tight)), -1) << "rtol 1e-4: no TF32";
  // Off Hopper: the gemm family of the sm_80 form, every point plannable
  // there; no TF32 family.
  const yirage::v1::BackendKernels a100 = DescribeKernels(A100());
  int gemm_families = 0;
  for (const yirage::v1::KernelFamily& f : a100.families()) {
    if (f.pattern() != yirage::v1::GEMM) continue;
    ++gemm_families;
    EXPECT_EQ(f.name(), "gemm");
    for (const yirage::v1::SchedulePoint& point : f.points()) {
      SCOPED_TRACE(point.label());
      const core::Graph g = GemmChain(4096, 4096, 4096, false);
      const std::optional<GemmPlan> p =
          PlanGemm(g, AllOps(g), FLOAT16, A100(), point.schedule().gemm());
      ASSERT_TRUE(p.has_value());
      EXPECT_TRUE(p->mma_sync);
    }
  }
  EXPECT_EQ(gemm_families, 1);
}

}  // namespace
}  // namespace yirage::backends::cuda
