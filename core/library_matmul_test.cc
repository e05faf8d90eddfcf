#include "core/library_matmul.h"

#include <string>
#include <vector>

#include "core/candidate_generator.h"
#include "core/graph.h"
#include "core/graph_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

using ::testing::HasSubstr;

Graph FromJson(const std::string& json) {
  absl::StatusOr<yirage::v1::Graph> proto = ParseGraphJson(json);
  EXPECT_TRUE(proto.ok()) << proto.status();
  absl::StatusOr<Graph> g = Graph::FromProto(*proto);
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

std::vector<int> AllOps(const Graph& g) {
  std::vector<int> ops;
  for (int i = 0; i < static_cast<int>(g.ops().size()); ++i) ops.push_back(i);
  return ops;
}

// X(1024, 8192) @ W(8192, 8192)^T + bias, relu: the issue's GEMM.
constexpr char kGemmBiasRelu[] = R"({"name": "g",
  "inputs": [{"name": "X", "shape": [1024, 8192], "dtype": "float16"},
             {"name": "W", "shape": [8192, 8192], "dtype": "float16"},
             {"name": "b", "shape": [8192], "dtype": "float16"}],
  "ops": [{"name": "Y", "op": "matmul", "inputs": ["X", "W"], "attrs": {"transpose_b": true}},
          {"name": "Z", "op": "add", "inputs": ["b", "Y"]},
          {"name": "R", "op": "relu", "inputs": ["Z"]}],
  "outputs": ["R"]})";

TEST(LibraryMatmulTest, MatmulBiasRelu) {
  const Graph g = FromJson(kGemmBiasRelu);
  absl::StatusOr<LibraryMatmul> lm = MatchLibraryMatmul(g, AllOps(g));
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_EQ(lm->m, 1024);
  EXPECT_EQ(lm->n, 8192);
  EXPECT_EQ(lm->k, 8192);
  EXPECT_EQ(lm->batch, 1);
  EXPECT_TRUE(lm->transpose_b);
  EXPECT_EQ(lm->bias, g.FindTensor("b"));
  EXPECT_EQ(lm->residual, -1);
  EXPECT_EQ(lm->activation, LibraryActivation::kRelu);
  EXPECT_EQ(lm->out, g.FindTensor("R"));
  EXPECT_EQ(DescribeLibraryMatmul(g, *lm), "matmul 1024x8192x8192 (B^T) + bias b, relu");
  // Any prefix of the chain is a library matmul too.
  EXPECT_TRUE(MatchLibraryMatmul(g, {0}).ok());
  EXPECT_TRUE(MatchLibraryMatmul(g, {0, 1}).ok());
  // Not starting at the matmul.
  EXPECT_THAT(MatchLibraryMatmul(g, {1, 2}).status().message(), HasSubstr("must be a matmul"));
}

TEST(LibraryMatmulTest, ScaleResidualAndBatches) {
  const Graph g = FromJson(R"({"name": "g",
    "inputs": [{"name": "A", "shape": [4, 64, 128], "dtype": "bfloat16"},
               {"name": "B", "shape": [4, 128, 96], "dtype": "bfloat16"},
               {"name": "C", "shape": [4, 64, 96], "dtype": "bfloat16"}],
    "ops": [{"name": "Y", "op": "matmul", "inputs": ["A", "B"]},
            {"name": "S", "op": "div", "inputs": ["Y"], "attrs": {"scalar": 4.0}},
            {"name": "Z", "op": "add", "inputs": ["S", "C"]}],
    "outputs": ["Z"]})");
  absl::StatusOr<LibraryMatmul> lm = MatchLibraryMatmul(g, AllOps(g));
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_EQ(lm->batch, 4);
  EXPECT_EQ(lm->m, 64);
  EXPECT_EQ(lm->a_batch_stride, 64 * 128);
  EXPECT_EQ(lm->b_batch_stride, 128 * 96);
  EXPECT_DOUBLE_EQ(lm->alpha, 0.25);
  EXPECT_EQ(lm->residual, g.FindTensor("C"));

  const Graph folded = FromJson(R"({"name": "g",
    "inputs": [{"name": "A", "shape": [2, 3, 8, 16], "dtype": "float16"},
               {"name": "B", "shape": [16, 24], "dtype": "float16"}],
    "ops": [{"name": "Y", "op": "matmul", "inputs": ["A", "B"]}], "outputs": ["Y"]})");
  lm = MatchLibraryMatmul(folded, {0});
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_EQ(lm->batch, 1);
  EXPECT_EQ(lm->m, 2 * 3 * 8);

  // Grouped heads: B shared by A's innermost lead dim, which folds into m.
  const Graph grouped = FromJson(R"({"name": "g",
    "inputs": [{"name": "A", "shape": [2, 3, 8, 16], "dtype": "float16"},
               {"name": "B", "shape": [2, 1, 16, 24], "dtype": "float16"}],
    "ops": [{"name": "Y", "op": "matmul", "inputs": ["A", "B"]}], "outputs": ["Y"]})");
  lm = MatchLibraryMatmul(grouped, {0});
  ASSERT_TRUE(lm.ok()) << lm.status();
  EXPECT_EQ(lm->batch, 2);
  EXPECT_EQ(lm->m, 3 * 8);
  EXPECT_EQ(lm->a_batch_stride, 3 * 8 * 16);
  EXPECT_EQ(lm->b_batch_stride, 16 * 24);
  // Shared over an outer dim: A's rows of one B are not contiguous.
  const Graph outer = FromJson(R"({"name": "g",
    "inputs": [{"name": "A", "shape": [2, 3, 8, 16], "dtype": "float16"},
               {"name": "B", "shape": [1, 3, 16, 24], "dtype": "float16"}],
    "ops": [{"name": "Y", "op": "matmul", "inputs": ["A", "B"]}], "outputs": ["Y"]})");
  EXPECT_FALSE(MatchLibraryMatmul(outer, {0}).ok());

  const Graph broadcast = FromJson(R"({"name": "g",
    "inputs": [{"name": "A", "shape": [2, 1, 8, 16], "dtype": "float16"},
               {"name": "B", "shape": [5, 16, 24], "dtype": "float16"}],
    "ops": [{"name": "Y", "op": "matmul", "inputs": ["A", "B"]}], "outputs": ["Y"]})");
  EXPECT_THAT(MatchLibraryMatmul(broadcast, {0}).status().message(),
              HasSubstr("neither equal nor absent"));
}

TEST(LibraryMatmulTest, RefusesWhatTheLibraryCannotDo) {
  // Activation before the bias, erf gelu, an intermediate read twice.
  const Graph g = FromJson(R"({"name": "g",
    "inputs": [{"name": "X", "shape": [8, 16], "dtype": "float16"},
               {"name": "W", "shape": [16, 32], "dtype": "float16"},
               {"name": "b", "shape": [32], "dtype": "float16"}],
    "ops": [{"name": "Y", "op": "matmul", "inputs": ["X", "W"]},
            {"name": "R", "op": "relu", "inputs": ["Y"]},
            {"name": "Z", "op": "add", "inputs": ["R", "b"]},
            {"name": "G", "op": "gelu", "inputs": ["Z"]},
            {"name": "T", "op": "add", "inputs": ["G", "Z"]}],
    "outputs": ["T"]})");
  EXPECT_TRUE(MatchLibraryMatmul(g, {0, 1}).ok());
  EXPECT_THAT(MatchLibraryMatmul(g, {0, 1, 2}).status().message(), HasSubstr("out of order"));
  const Graph erf = FromJson(R"({"name": "g",
    "inputs": [{"name": "X", "shape": [8, 16], "dtype": "float16"},
               {"name": "W", "shape": [16, 32], "dtype": "float16"}],
    "ops": [{"name": "Y", "op": "matmul", "inputs": ["X", "W"]},
            {"name": "G", "op": "gelu", "inputs": ["Y"]}], "outputs": ["G"]})");
  EXPECT_FALSE(MatchLibraryMatmul(erf, {0, 1}).ok());
  const Graph twice = FromJson(R"({"name": "g",
    "inputs": [{"name": "X", "shape": [8, 16], "dtype": "float16"},
               {"name": "W", "shape": [16, 32], "dtype": "float16"}],
    "ops": [{"name": "Y", "op": "matmul", "inputs": ["X", "W"]},
            {"name": "R", "op": "relu", "inputs": ["Y"]},
            {"name": "T", "op": "add", "inputs": ["R", "Y"]}], "outputs": ["T"]})");
  EXPECT_THAT(MatchLibraryMatmul(twice, {0, 1}).status().message(),
              HasSubstr("read outside the epilogue chain"));
}

// With library kernels the baseline runs its matmuls through the library,
// the library plans come right after it, and the generated one-kernel-per-op
// plan is still a candidate.
TEST(LibraryMatmulTest, BaselineAndFirstCandidatesUseTheLibrary) {
  const Graph g = FromJson(kGemmBiasRelu);
  SearchOptions options;
  options.backend = "cuda";
  options.warp_size = 32;
  options.kernels.set_gpu(true);
  options.kernels.mutable_library()->set_algorithms(3);  // as CUDA workers say
  options.max_candidates = 12;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans = GenerateCandidates(g, options);
  ASSERT_TRUE(plans.ok()) << plans.status();
  ASSERT_GE(plans->size(), 5u);
  const yirage::v1::Plan& baseline = (*plans)[0];
  EXPECT_TRUE(baseline.baseline());
  ASSERT_EQ(baseline.kernels_size(), 3);
  EXPECT_EQ(baseline.kernels(0).kind(), yirage::v1::KERNEL_LIBRARY);
  EXPECT_NE(baseline.kernels(1).kind(), yirage::v1::KERNEL_LIBRARY);
  EXPECT_THAT(baseline.description(), HasSubstr("library"));
  // Next: the whole chain in one library call, then it with the next two
  // algorithms.
  for (int i = 1; i <= 3; ++i) {
    const yirage::v1::Plan& p = (*plans)[i];
    ASSERT_EQ(p.kernels_size(), 1) << p.description();
    EXPECT_EQ(p.kernels(0).kind(), yirage::v1::KERNEL_LIBRARY);
    EXPECT_EQ(p.kernels(0).ops_size(), 3);
    EXPECT_EQ(p.kernels(0).schedule().library().algorithm(), i - 1);
    EXPECT_FALSE(p.baseline());
  }
  int generated = 0, baselines = 0;
  for (const yirage::v1::Plan& p : *plans) {
    EXPECT_TRUE(ValidatePlan(g, p).ok()) << p.description();
    baselines += p.baseline() ? 1 : 0;
    bool library = false;
    for (const auto& k : p.kernels()) library |= k.kind() == yirage::v1::KERNEL_LIBRARY;
    generated += library ? 0 : 1;
  }
  EXPECT_EQ(baselines, 1);
  EXPECT_GT(generated, 0);

  // Without library kernels nothing changes: the generated baseline.
  options.kernels.clear_library();
  plans = GenerateCandidates(g, options);
  ASSERT_TRUE(plans.ok());
  for (const yirage::v1::Plan& p : *plans) {
    for (const auto& k : p.kernels()) EXPECT_NE(k.kind(), yirage::v1::KERNEL_LIBRARY);
  }
}

// A matmul of a few KB costs its launch whatever the algorithm (and
// cuBLASLt's heuristic offers fewer than asked for it): only the first
// algorithm is a candidate, so no budget goes to plans that cannot differ.
TEST(LibraryMatmulTest, TinyMatmulsTakeOneAlgorithm) {
  const Graph g = FromJson(R"({"name": "g",
    "inputs": [{"name": "X", "shape": [16, 32], "dtype": "bfloat16"},
               {"name": "W", "shape": [32, 16], "dtype": "bfloat16"}],
    "ops": [{"name": "Y", "op": "matmul", "inputs": ["X", "W"]},
            {"name": "R", "op": "relu", "inputs": ["Y"]}], "outputs": ["R"]})");
  SearchOptions options;
  options.backend = "cuda";
  options.warp_size = 32;
  options.kernels.set_gpu(true);
  options.kernels.mutable_library()->set_algorithms(3);
  options.max_candidates = 12;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans = GenerateCandidates(g, options);
  ASSERT_TRUE(plans.ok()) << plans.status();
  int library_plans = 0;
  for (const yirage::v1::Plan& p : *plans) {
    for (const auto& k : p.kernels()) {
      if (k.kind() != yirage::v1::KERNEL_LIBRARY) continue;
      ++library_plans;
      EXPECT_EQ(k.schedule().library().algorithm(), 0) << p.description();
    }
  }
  EXPECT_GT(library_plans, 0);
}

// silu(X W1) * (X W2) at prefill size: two library calls and the two
// elementwise ops gathered into one kernel between and after them.
TEST(LibraryMatmulTest, GathersTheOpsBetweenLibraryCalls) {
  const Graph g = FromJson(R"({"name": "g",
    "inputs": [{"name": "X", "shape": [512, 1024], "dtype": "float16"},
               {"name": "W1", "shape": [1024, 2048], "dtype": "float16"},
               {"name": "W2", "shape": [1024, 2048], "dtype": "float16"}],
    "ops": [{"name": "G", "op": "matmul", "inputs": ["X", "W1"]},
            {"name": "A", "op": "silu", "inputs": ["G"]},
            {"name": "U", "op": "matmul", "inputs": ["X", "W2"]},
            {"name": "Y", "op": "mul", "inputs": ["A", "U"]}],
    "outputs": ["Y"]})");
  SearchOptions options;
  options.backend = "cuda";
  options.warp_size = 32;
  options.kernels.mutable_library()->set_algorithms(1);
  options.enable_rewrites = false;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans = GenerateCandidates(g, options);
  ASSERT_TRUE(plans.ok()) << plans.status();
  const yirage::v1::Plan* gathered = nullptr;
  for (const yirage::v1::Plan& p : *plans) {
    if (p.description().find("gathered") != std::string::npos) gathered = &p;
  }
  ASSERT_NE(gathered, nullptr);
  ASSERT_EQ(gathered->kernels_size(), 3) << gathered->description();
  EXPECT_EQ(gathered->kernels(0).kind(), yirage::v1::KERNEL_LIBRARY);
  EXPECT_EQ(gathered->kernels(1).kind(), yirage::v1::KERNEL_LIBRARY);
  EXPECT_EQ(gathered->kernels(2).kind(), yirage::v1::KERNEL_ROW);
  EXPECT_THAT(std::vector<std::string>(gathered->kernels(2).ops().begin(),
                                       gathered->kernels(2).ops().end()),
              ::testing::ElementsAre("A", "Y"));
  EXPECT_TRUE(ValidatePlan(g, *gathered).ok());
  // Among the first candidates (right after the baseline and the cheapest
  // library plan).
  int index = static_cast<int>(gathered - plans->data());
  EXPECT_LE(index, 3);
}

TEST(LibraryMatmulTest, ValidationNamesTheKernel) {
  const Graph g = FromJson(kGemmBiasRelu);
  yirage::v1::Plan plan;
  auto* k = plan.add_kernels();
  k->set_name("k0");
  k->set_kind(yirage::v1::KERNEL_LIBRARY);
  for (const char* op : {"Z", "R"}) k->add_ops(op);
  auto* k2 = plan.add_kernels();
  k2->set_name("k1");
  k2->set_kind(yirage::v1::KERNEL_GENERIC);
  k2->add_ops("Y");
  const absl::Status s = ValidatePlan(g, plan);
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace yirage::core
