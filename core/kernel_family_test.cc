// The one matcher of the backends' kernel families (core/kernel_family.h):
// which attention chains a schedule point's limits take.
#include "core/kernel_family.h"

#include <string>
#include <vector>

#include "core/candidate_test_graphs.h"
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
  EXPECT_TRUE(Takes(yirage::v1::MatchLimits(), AttentionGraph(7, 256, 128, false)))
      << "no limits: any attention chain";
}

}  // namespace
}  // namespace yirage::core
