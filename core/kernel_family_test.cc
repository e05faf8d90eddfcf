// The one matcher of the backends' kernel families (core/kernel_family.h):
// which attention chains a schedule point's limits take, and what the GEMM
// pattern takes.
#include "core/kernel_family.h"

#include <optional>
#include <string>
#include <vector>

#include "core/candidate_test_graphs.h"
#include "core/fused_pattern.h"
#include "core/graph.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

using testing::GraphProtoBuilder;

// S = Q K (K as [H, N, D] with `keys_by_rows`, else [H, D, N]), softmax, O = P V
// (V [H, N, DV], DV = `dv` or else D).
Graph AttentionGraph(int64_t m, int64_t n, int64_t d, bool keys_by_rows, int64_t dv = 0) {
  yirage::v1::AttrValue transpose;
  transpose.set_b(true);
  GraphProtoBuilder b("attention");
  b.Input("Q", {4, m, d}, yirage::v1::FLOAT16);
  b.Input("K", keys_by_rows ? std::vector<int64_t>{4, n, d} : std::vector<int64_t>{4, d, n},
          yirage::v1::FLOAT16);
  b.Input("V", {4, n, dv > 0 ? dv : d}, yirage::v1::FLOAT16);
  if (keys_by_rows) {
    b.Op("S", "matmul", {"Q", "K"}, {{"transpose_b", transpose}});
  } else {
    b.Op("S", "matmul", {"Q", "K"});
  }
  b.Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"}).Output("O");
  absl::StatusOr<Graph> g = Graph::FromProto(b.proto());
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

bool Takes(const yirage::v1::MatchLimits& limits, const Graph& g) {
  return WithinLimits(limits, yirage::v1::ATTENTION, g, {0, 1, 2});
}

TEST(KernelFamilyTest, AttentionQueryRowsAndKeyLayoutLimits) {
  yirage::v1::MatchLimits prefill;
  prefill.set_min_query_rows(64);
  prefill.set_keys_by_rows(true);
  prefill.set_head_dim_multiple(64);
  prefill.set_keys_multiple(128);
  EXPECT_TRUE(Takes(prefill, AttentionGraph(64, 256, 128, true)));
  EXPECT_FALSE(Takes(prefill, AttentionGraph(63, 256, 128, true))) << "fewer rows than the least";
  EXPECT_FALSE(Takes(prefill, AttentionGraph(512, 256, 128, false))) << "K given as [.., D, N]";
  EXPECT_FALSE(Takes(prefill, AttentionGraph(512, 192, 128, true))) << "keys not whole tiles";
  EXPECT_FALSE(Takes(prefill, AttentionGraph(512, 256, 96, true))) << "D not a multiple of 64";
  EXPECT_TRUE(Takes(prefill, AttentionGraph(512, 256, 128, true, 64)));
  prefill.set_equal_head_dims(true);
  EXPECT_FALSE(Takes(prefill, AttentionGraph(512, 256, 128, true, 64))) << "D != DV";
  EXPECT_TRUE(Takes(prefill, AttentionGraph(512, 256, 64, true, 64)));
  yirage::v1::MatchLimits decode;
  decode.set_max_query_rows(32);
  EXPECT_TRUE(Takes(decode, AttentionGraph(32, 256, 128, false)));
  EXPECT_FALSE(Takes(decode, AttentionGraph(33, 256, 128, false)));
  // K as [.., D, N]: its rows must start 16-byte aligned; K as [.., N, D]
  // takes any key count.
  decode.set_keys_by_columns_multiple(8);
  EXPECT_TRUE(Takes(decode, AttentionGraph(7, 200, 64, false)));
  EXPECT_FALSE(Takes(decode, AttentionGraph(7, 201, 64, false))) << "[D, N] rows unaligned";
  EXPECT_TRUE(Takes(decode, AttentionGraph(7, 201, 64, true)));
  EXPECT_TRUE(Takes(yirage::v1::MatchLimits(), AttentionGraph(7, 256, 128, false)))
      << "no limits: any attention chain";
}

// The GEMM pattern: a matmul and the elementwise ops after it, each taking
// the running value and a constant, a row vector or a tensor of C's shape.
TEST(KernelFamilyTest, GemmTakesAMatmulAndItsElementwiseEpilogue) {
  yirage::v1::AttrValue scalar;
  scalar.set_f(2.0);
  GraphProtoBuilder b("gemm");
  b.Input("A", {128, 64}, yirage::v1::FLOAT16).Input("B", {64, 96}, yirage::v1::FLOAT16);
  b.Input("bias", {96}, yirage::v1::FLOAT16).Input("R", {128, 96}, yirage::v1::FLOAT16);
  b.Input("col", {128, 1}, yirage::v1::FLOAT16);
  b.Op("P", "matmul", {"A", "B"}).Op("Q", "add", {"bias", "P"}).Op("S", "silu", {"Q"});
  b.Op("T", "div", {"S"}, {{"scalar", scalar}}).Op("Y", "sub", {"R", "T"}).Output("Y");
  b.Op("P2", "matmul", {"A", "B"}).Op("Z", "mul", {"P2", "col"}).Output("Z");
  absl::StatusOr<Graph> g = Graph::FromProto(b.proto());
  ASSERT_TRUE(g.ok()) << g.status();
  const std::optional<GemmMatch> m = MatchGemm(*g, {0, 1, 2, 3, 4});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->m, 128);
  EXPECT_EQ(m->n, 96);
  EXPECT_EQ(m->k, 64);
  ASSERT_EQ(m->epilogue.size(), 4u);
  using Operand = GemmMatch::Step::Operand;
  EXPECT_EQ(m->epilogue[0].operand, Operand::kRow);
  EXPECT_FALSE(m->epilogue[0].value_first) << "bias + P";
  EXPECT_EQ(m->epilogue[1].operand, Operand::kNone);
  EXPECT_EQ(m->epilogue[2].operand, Operand::kScalar);
  EXPECT_EQ(m->epilogue[3].operand, Operand::kFull);
  EXPECT_FALSE(m->epilogue[3].value_first) << "R - T";
  EXPECT_EQ(m->out, g->FindTensor("Y"));
  // A column vector broadcast is no GEMM epilogue here.
  EXPECT_FALSE(MatchGemm(*g, {5, 6}).has_value());
  EXPECT_TRUE(MatchGemm(*g, {5}).has_value());
  yirage::v1::MatchLimits limits;
  limits.set_min_rows(129);
  EXPECT_FALSE(WithinLimits(limits, yirage::v1::GEMM, *g, {0, 1, 2, 3, 4}));
  limits.set_min_rows(128);
  limits.set_n_multiple(32);
  EXPECT_TRUE(WithinLimits(limits, yirage::v1::GEMM, *g, {0, 1, 2, 3, 4}));
  limits.set_n_multiple(64);
  EXPECT_FALSE(WithinLimits(limits, yirage::v1::GEMM, *g, {0, 1, 2, 3, 4}));
}

// Reduced-precision forms (TF32) take B as rows only, and only where the
// job's tolerance is loose enough.
TEST(KernelFamilyTest, GemmLimitsOnBLayoutAndTolerance) {
  auto build = [](bool transpose_b, double rtol) {
    yirage::v1::AttrValue t;
    t.set_b(transpose_b);
    GraphProtoBuilder b("gemm_f32");
    b.Input("A", {128, 64}, yirage::v1::FLOAT32);
    b.Input("B", transpose_b ? std::vector<int64_t>{96, 64} : std::vector<int64_t>{64, 96},
            yirage::v1::FLOAT32);
    b.Op("Y", "matmul", {"A", "B"}, {{"transpose_b", t}}).Output("Y");
    yirage::v1::Graph proto = b.proto();
    proto.mutable_tolerance()->set_rtol(rtol);
    absl::StatusOr<Graph> g = Graph::FromProto(proto);
    EXPECT_TRUE(g.ok()) << g.status();
    return *std::move(g);
  };
  yirage::v1::MatchLimits tf32;
  tf32.set_b_by_rows(true);
  tf32.set_min_rtol(1e-3);
  EXPECT_TRUE(WithinLimits(tf32, yirage::v1::GEMM, build(true, 1e-2), {0}));
  EXPECT_TRUE(WithinLimits(tf32, yirage::v1::GEMM, build(true, 1e-3), {0})) << "inclusive";
  EXPECT_FALSE(WithinLimits(tf32, yirage::v1::GEMM, build(true, 1e-4), {0})) << "rtol too tight";
  EXPECT_FALSE(WithinLimits(tf32, yirage::v1::GEMM, build(false, 1e-2), {0})) << "B as [K, N]";
  EXPECT_TRUE(WithinLimits(yirage::v1::MatchLimits(), yirage::v1::GEMM, build(false, 0), {0}));
}

// A with lead dims times a 2-D B is one matmul of all of A's rows; both
// with the same lead dims, a batch (for families that take one); lead dims
// that differ (broadcast) are no GEMM here. N need not be a multiple of
// b_kn_n_multiple where B is given as [N, K].
TEST(KernelFamilyTest, GemmBatchesAndRowsOverLeadDims) {
  yirage::v1::AttrValue t;
  t.set_b(true);
  GraphProtoBuilder b("gemm_batched");
  b.Input("A", {2, 3, 100, 64}, yirage::v1::FLOAT16).Input("W", {64, 96}, yirage::v1::FLOAT16);
  b.Input("B", {2, 3, 255, 64}, yirage::v1::FLOAT16).Input("Bb", {3, 255, 64}, yirage::v1::FLOAT16);
  b.Input("R", {2, 3, 100, 255}, yirage::v1::FLOAT16).Input("bias", {255}, yirage::v1::FLOAT16);
  b.Op("Rows", "matmul", {"A", "W"}).Output("Rows");
  b.Op("P", "matmul", {"A", "B"}, {{"transpose_b", t}}).Op("Q", "add", {"P", "R"});
  b.Op("Y", "add", {"Q", "bias"}).Output("Y");
  b.Op("Bc", "matmul", {"A", "Bb"}, {{"transpose_b", t}}).Output("Bc");
  absl::StatusOr<Graph> g = Graph::FromProto(b.proto());
  ASSERT_TRUE(g.ok()) << g.status();
  std::optional<GemmMatch> m = MatchGemm(*g, {0});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->batch, 1);
  EXPECT_EQ(m->m, 600);
  EXPECT_EQ(m->n, 96);
  m = MatchGemm(*g, {1, 2, 3});
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->batch, 6);
  EXPECT_EQ(m->m, 100);
  EXPECT_EQ(m->n, 255);
  EXPECT_EQ(m->k, 64);
  ASSERT_EQ(m->epilogue.size(), 2u);
  EXPECT_EQ(m->epilogue[0].operand, GemmMatch::Step::Operand::kFull);
  EXPECT_EQ(m->epilogue[1].operand, GemmMatch::Step::Operand::kRow);
  EXPECT_FALSE(MatchGemm(*g, {4}).has_value()) << "B's lead dims broadcast over A's";
  yirage::v1::MatchLimits limits;
  limits.set_b_kn_n_multiple(8);
  limits.set_no_batch(true);
  EXPECT_FALSE(WithinLimits(limits, yirage::v1::GEMM, *g, {1, 2, 3})) << "no batch";
  limits.set_no_batch(false);
  EXPECT_TRUE(WithinLimits(limits, yirage::v1::GEMM, *g, {1, 2, 3})) << "N 255, B as [N, K]";
  EXPECT_TRUE(WithinLimits(limits, yirage::v1::GEMM, *g, {0}));
  limits.set_b_kn_n_multiple(64);
  EXPECT_FALSE(WithinLimits(limits, yirage::v1::GEMM, *g, {0})) << "N 96, B as [K, N]";
  // batch_kn_k_multiple: batches with B as [.., K, N] only.
  GraphProtoBuilder kb("gemm_batched_kn");
  kb.Input("A", {3, 100, 16}, yirage::v1::BFLOAT16).Input("B", {3, 16, 1000}, yirage::v1::BFLOAT16);
  kb.Input("A2", {300, 16}, yirage::v1::BFLOAT16).Input("W", {16, 1000}, yirage::v1::BFLOAT16);
  kb.Op("P", "matmul", {"A", "B"}).Output("P");
  kb.Op("Q", "matmul", {"A2", "W"}).Output("Q");
  absl::StatusOr<Graph> kg = Graph::FromProto(kb.proto());
  ASSERT_TRUE(kg.ok()) << kg.status();
  yirage::v1::MatchLimits k64;
  k64.set_batch_kn_k_multiple(64);
  EXPECT_FALSE(WithinLimits(k64, yirage::v1::GEMM, *kg, {0})) << "a batch of K 16, B as [K, N]";
  EXPECT_TRUE(WithinLimits(k64, yirage::v1::GEMM, *kg, {1})) << "one product: no next rows";
  EXPECT_TRUE(WithinLimits(k64, yirage::v1::GEMM, *g, {1, 2, 3})) << "a batch with B as [N, K]";
  k64.set_batch_kn_k_multiple(16);
  EXPECT_TRUE(WithinLimits(k64, yirage::v1::GEMM, *kg, {0}));
}

// Every intermediate feeds the next op only: a value also read elsewhere
// (or a graph output) ends the match.
TEST(KernelFamilyTest, GemmIntermediatesStayInTheChain) {
  GraphProtoBuilder b("gemm_shared");
  b.Input("A", {128, 64}, yirage::v1::FLOAT16).Input("B", {64, 96}, yirage::v1::FLOAT16);
  b.Op("P", "matmul", {"A", "B"}).Op("Q", "relu", {"P"}).Op("Y", "add", {"Q", "P"}).Output("Y");
  absl::StatusOr<Graph> g = Graph::FromProto(b.proto());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(MatchGemm(*g, {0, 1, 2}).has_value());
  EXPECT_TRUE(MatchGemm(*g, {0}).has_value());
}

}  // namespace
}  // namespace yirage::core
