#include "core/tensor.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/graph.h"
#include "core/graph_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

Graph MustBuild(std::string_view text) {
  absl::StatusOr<yirage::v1::Graph> proto = ParseGraphJson(text);
  EXPECT_TRUE(proto.ok()) << proto.status();
  absl::StatusOr<Graph> graph = Graph::FromProto(*proto);
  EXPECT_TRUE(graph.ok()) << graph.status() << "\n" << text;
  return *std::move(graph);
}

std::string ShapeJson(const std::vector<int64_t>& shape) { return ShapeToString(shape); }

// Evaluates Z = op(inputs...) where inputs are named A, B, C in order.
HostTensor EvalOp(std::string_view op, std::string_view attrs, const std::vector<HostTensor>& in,
                  std::string_view dtype = "float32") {
  std::string text = R"({"name": "t", "inputs": [)";
  std::string names;
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string name(1, static_cast<char>('A' + i));
    text += (i ? ", " : "") + std::string(R"({"name": ")") + name + R"(", "shape": )" +
            ShapeJson(in[i].shape) + R"(, "dtype": ")" + std::string(dtype) + R"("})";
    names += (i ? ", \"" : "\"") + name + "\"";
  }
  text += R"(], "ops": [{"name": "Z", "op": ")" + std::string(op) + R"(", "inputs": [)" + names +
          R"(], "attrs": )" + std::string(attrs) + R"(}], "outputs": ["Z"]})";
  Graph graph = MustBuild(text);
  absl::StatusOr<std::vector<HostTensor>> out = EvaluateReference(graph, in);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok() || out->size() != 1) return {};
  EXPECT_EQ((*out)[0].shape, graph.tensor(graph.outputs()[0]).shape);
  return (*out)[0];
}

void ExpectValues(const HostTensor& got, const std::vector<int64_t>& shape,
                  const std::vector<double>& want, double tol = 1e-12) {
  EXPECT_EQ(got.shape, shape);
  ASSERT_EQ(got.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got.data[i], want[i], tol) << "element " << i;
  }
}

// ---------------------------------------------------------------- interpreter

TEST(EvaluateReferenceTest, Matmul) {
  const HostTensor a{{2, 3}, {1, 2, 3, 4, 5, 6}};
  const HostTensor b{{3, 2}, {7, 8, 9, 10, 11, 12}};
  // [1 2 3] . [7 9 11] = 7 + 18 + 33 = 58; [1 2 3] . [8 10 12] = 8 + 20 + 36 = 64
  // [4 5 6] . [7 9 11] = 28 + 45 + 66 = 139; [4 5 6] . [8 10 12] = 32 + 50 + 72 = 154
  ExpectValues(EvalOp("matmul", "{}", {a, b}), {2, 2}, {58, 64, 139, 154});
  // transpose_b: B given as [N, K] = B^T.
  const HostTensor bt{{2, 3}, {7, 9, 11, 8, 10, 12}};
  ExpectValues(EvalOp("matmul", R"({"transpose_b": true})", {a, bt}), {2, 2}, {58, 64, 139, 154});
  // Batched A [2, 1, 2] times unbatched B [2, 1]: [1 2].[1 10] = 21, [3 4].[1 10] = 43.
  ExpectValues(EvalOp("matmul", "{}", {{{2, 1, 2}, {1, 2, 3, 4}}, {{2, 1}, {1, 10}}}), {2, 1, 1},
               {21, 43});
  // Batch broadcast [2, 1] x [3]: A batches a0 = [1], a1 = [2] (1x1), B batches 1, 10, 100.
  // out[i][j] = a_i * b_j.
  ExpectValues(EvalOp("matmul", "{}", {{{2, 1, 1, 1}, {1, 2}}, {{3, 1, 1}, {1, 10, 100}}}),
               {2, 3, 1, 1}, {1, 10, 100, 2, 20, 200});
}

// Shapes that cross the reference's tiles (4 rows, 16 and 64 columns, 256
// deep, 64-row blocks): every output against a plain triple loop.
TEST(EvaluateReferenceTest, MatmulAcrossItsTilesMatchesAPlainLoop) {
  struct Case {
    int64_t batch, m, k, n;
    bool transpose_b, shared_b;
  };
  for (const Case& c : {Case{1, 1, 7, 3, false, false}, Case{1, 67, 300, 70, false, false},
                        Case{1, 5, 513, 129, true, false}, Case{3, 130, 257, 17, true, false},
                        Case{2, 9, 260, 65, false, true}}) {
    SCOPED_TRACE(absl::StrCat(c.batch, "x", c.m, "x", c.k, "x", c.n, c.transpose_b ? " tb" : "",
                              c.shared_b ? " shared" : ""));
    HostTensor a{{c.batch, c.m, c.k}, std::vector<double>(c.batch * c.m * c.k)};
    std::vector<int64_t> b_shape =
        c.transpose_b ? std::vector<int64_t>{c.n, c.k} : std::vector<int64_t>{c.k, c.n};
    if (!c.shared_b) b_shape.insert(b_shape.begin(), c.batch);
    int64_t b_count = 1;
    for (int64_t d : b_shape) b_count *= d;
    HostTensor b{b_shape, std::vector<double>(b_count)};
    for (size_t i = 0; i < a.data.size(); ++i) a.data[i] = std::sin(0.37 * static_cast<double>(i));
    for (size_t i = 0; i < b.data.size(); ++i) b.data[i] = std::cos(0.11 * static_cast<double>(i));
    const std::string attrs = c.transpose_b ? R"({"transpose_b": true})" : "{}";
    HostTensor got = EvalOp("matmul", attrs, {a, b});
    ASSERT_EQ(got.shape, (std::vector<int64_t>{c.batch, c.m, c.n}));
    for (int64_t bi = 0; bi < c.batch; ++bi) {
      const double* pb = b.data.data() + (c.shared_b ? 0 : bi * c.k * c.n);
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double want = 0;
          for (int64_t p = 0; p < c.k; ++p) {
            want += a.data[(bi * c.m + i) * c.k + p] *
                    (c.transpose_b ? pb[j * c.k + p] : pb[p * c.n + j]);
          }
          ASSERT_NEAR(got.data[(bi * c.m + i) * c.n + j], want, 1e-12 * c.k)
              << "at " << bi << "," << i << "," << j;
        }
      }
    }
  }
}

TEST(EvaluateReferenceTest, BinaryWithBroadcasting) {
  const HostTensor a{{2, 2}, {1, 2, 3, 4}};
  const HostTensor b{{2}, {10, 20}};  // broadcast along rows
  ExpectValues(EvalOp("add", "{}", {a, b}), {2, 2}, {11, 22, 13, 24});
  ExpectValues(EvalOp("sub", "{}", {a, b}), {2, 2}, {-9, -18, -7, -16});
  ExpectValues(EvalOp("mul", "{}", {a, b}), {2, 2}, {10, 40, 30, 80});
  ExpectValues(EvalOp("div", "{}", {a, b}), {2, 2}, {0.1, 0.1, 0.3, 0.2});
  const HostTensor c{{2}, {2, 3}};
  ExpectValues(EvalOp("maximum", "{}", {a, c}), {2, 2}, {2, 3, 3, 4});
  ExpectValues(EvalOp("minimum", "{}", {a, c}), {2, 2}, {1, 2, 2, 3});
  // pow: 1^2 = 1, 2^0.5 = 1.41421356..., 3^2 = 9, 4^0.5 = 2.
  ExpectValues(EvalOp("pow", "{}", {a, {{2}, {2, 0.5}}}), {2, 2}, {1, std::sqrt(2.0), 9, 2});
  // Column vector [2, 1] against row [3]: outer sum.
  ExpectValues(EvalOp("add", "{}", {{{2, 1}, {1, 2}}, {{3}, {10, 20, 30}}}), {2, 3},
               {11, 21, 31, 12, 22, 32});
  // Maximum/minimum propagate NaN.
  const HostTensor nan{{2}, {kNaN, 1}};
  HostTensor m = EvalOp("maximum", "{}", {nan, {{2}, {0, kNaN}}});
  EXPECT_TRUE(std::isnan(m.data[0]));
  EXPECT_TRUE(std::isnan(m.data[1]));
}

TEST(EvaluateReferenceTest, BinaryWithScalar) {
  const HostTensor x{{3}, {1, 2, 4}};
  ExpectValues(EvalOp("add", R"({"scalar": 0.5})", {x}), {3}, {1.5, 2.5, 4.5});
  ExpectValues(EvalOp("sub", R"({"scalar": 1})", {x}), {3}, {0, 1, 3});  // x - s
  ExpectValues(EvalOp("mul", R"({"scalar": -2})", {x}), {3}, {-2, -4, -8});
  ExpectValues(EvalOp("div", R"({"scalar": 4})", {x}), {3}, {0.25, 0.5, 1});  // x / s
  ExpectValues(EvalOp("maximum", R"({"scalar": 2})", {x}), {3}, {2, 2, 4});
  ExpectValues(EvalOp("minimum", R"({"scalar": 2})", {x}), {3}, {1, 2, 2});
  ExpectValues(EvalOp("pow", R"({"scalar": 2})", {x}), {3}, {1, 4, 16});  // x ^ s
}

TEST(EvaluateReferenceTest, Unary) {
  const HostTensor x{{4}, {-1, 0, 0.5, 2}};
  ExpectValues(EvalOp("neg", "{}", {x}), {4}, {1, 0, -0.5, -2});
  // e^-1, e^0, e^0.5, e^2
  ExpectValues(EvalOp("exp", "{}", {x}), {4},
               {0.36787944117144233, 1, 1.6487212707001282, 7.38905609893065});
  ExpectValues(EvalOp("square", "{}", {x}), {4}, {1, 0, 0.25, 4});
  ExpectValues(EvalOp("abs", "{}", {x}), {4}, {1, 0, 0.5, 2});
  ExpectValues(EvalOp("relu", "{}", {x}), {4}, {0, 0, 0.5, 2});
  // 1 / (1 + e^-x): 1/(1+e) = 0.26894..., 1/2, 1/(1+e^-0.5) = 0.62246..., 1/(1+e^-2) = 0.88080...
  const std::vector<double> sigmoid = {0.2689414213699951, 0.5, 0.6224593312018546,
                                       0.8807970779778823};
  ExpectValues(EvalOp("sigmoid", "{}", {x}), {4}, sigmoid);
  ExpectValues(EvalOp("tanh", "{}", {x}), {4},
               {-0.7615941559557649, 0, 0.46211715726000974, 0.9640275800758169});
  // silu = x * sigmoid(x)
  ExpectValues(EvalOp("silu", "{}", {x}), {4}, {-sigmoid[0], 0, 0.5 * sigmoid[2], 2 * sigmoid[3]});
  // gelu = x * Phi(x): Phi(-1) = 0.158655..., Phi(0.5) = 0.691462..., Phi(2) = 0.977249...
  ExpectValues(EvalOp("gelu", "{}", {x}), {4},
               {-0.15865525393145707, 0, 0.34573123063700656, 1.9544997361036416});
  ExpectValues(EvalOp("gelu", R"({"approximate": "none"})", {x}), {4},
               {-0.15865525393145707, 0, 0.34573123063700656, 1.9544997361036416});
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  ExpectValues(EvalOp("gelu", R"({"approximate": "tanh"})", {x}), {4},
               {-0.15880800939172324, 0, 0.34571400982514394, 1.954597694087775});

  const HostTensor p{{3}, {0.25, 1, 4}};
  ExpectValues(EvalOp("log", "{}", {p}), {3}, {-2 * std::log(2.0), 0, 2 * std::log(2.0)});
  ExpectValues(EvalOp("sqrt", "{}", {p}), {3}, {0.5, 1, 2});
  ExpectValues(EvalOp("rsqrt", "{}", {p}), {3}, {2, 1, 0.5});
}

TEST(EvaluateReferenceTest, Reductions) {
  const HostTensor x{{2, 3}, {1, 2, 3, 4, 5, -6}};
  ExpectValues(EvalOp("reduce_sum", "{}", {x}), {2, 1}, {6, 3});
  ExpectValues(EvalOp("reduce_sum", R"({"axis": 0, "keepdim": false})", {x}), {3}, {5, 7, -3});
  ExpectValues(EvalOp("reduce_mean", R"({"axis": 0, "keepdim": false})", {x}), {3},
               {2.5, 3.5, -1.5});
  ExpectValues(EvalOp("reduce_mean", R"({"axis": 1})", {x}), {2, 1}, {2, 1});
  ExpectValues(EvalOp("reduce_max", "{}", {x}), {2, 1}, {3, 5});
  ExpectValues(EvalOp("reduce_max", R"({"axis": -2})", {x}), {1, 3}, {4, 5, 3});
  // Middle axis of [2, 2, 2]: values v[a][b][c] = 4a + 2b + c; sum over b: 4a + c + (4a + 2 + c).
  const HostTensor y{{2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}};
  ExpectValues(EvalOp("reduce_sum", R"({"axis": 1, "keepdim": false})", {y}), {2, 2},
               {2, 4, 10, 12});
  // reduce_max propagates NaN.
  HostTensor m = EvalOp("reduce_max", "{}", {{{3}, {1, kNaN, 2}}});
  EXPECT_TRUE(std::isnan(m.data[0]));
}

TEST(EvaluateReferenceTest, RmsNorm) {
  // x = [3, 4]: mean(x^2) = 12.5, rms = 3.5355..., y = [0.848528..., 1.131370...]
  const HostTensor x{{2}, {3, 4}};
  ExpectValues(EvalOp("rms_norm", R"({"eps": 0})", {x}), {2},
               {3 / std::sqrt(12.5), 4 / std::sqrt(12.5)});
  // Default eps 1e-6 is added inside the sqrt.
  ExpectValues(EvalOp("rms_norm", "{}", {x}), {2},
               {3 / std::sqrt(12.5 + 1e-6), 4 / std::sqrt(12.5 + 1e-6)}, 1e-15);
  EXPECT_NE(EvalOp("rms_norm", "{}", {x}).data[0], 3 / std::sqrt(12.5));
  // Weight multiplies after normalizing.
  ExpectValues(EvalOp("rms_norm", R"({"eps": 0})", {x, {{2}, {2, -1}}}), {2},
               {6 / std::sqrt(12.5), -4 / std::sqrt(12.5)});
  // Axis 0 of [[3, 1], [4, 1]]: column [3, 4] as above, column [1, 1] has rms 1.
  ExpectValues(EvalOp("rms_norm", R"({"axis": 0, "eps": 0})", {{{2, 2}, {3, 1, 4, 1}}}), {2, 2},
               {3 / std::sqrt(12.5), 1, 4 / std::sqrt(12.5), 1});
}

TEST(EvaluateReferenceTest, LayerNorm) {
  // x = [1, 2, 3, 4]: mean 2.5, population variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
  const HostTensor x{{4}, {1, 2, 3, 4}};
  const double s = std::sqrt(1.25);
  ExpectValues(EvalOp("layer_norm", R"({"eps": 0})", {x}), {4},
               {-1.5 / s, -0.5 / s, 0.5 / s, 1.5 / s});
  // weight 2, bias 1 (broadcast from [1]): 2 * y + 1 = [-1.68328, 0.10557, 1.89443, 3.68328]
  ExpectValues(EvalOp("layer_norm", R"({"eps": 0})", {x, {{1}, {2}}, {{1}, {1}}}), {4},
               {-1.6832815729997477, 0.10557280900008414, 1.8944271909999157, 3.6832815729997477});
  // Default eps 1e-5.
  const double se = std::sqrt(1.25 + 1e-5);
  ExpectValues(EvalOp("layer_norm", "{}", {x}), {4}, {-1.5 / se, -0.5 / se, 0.5 / se, 1.5 / se},
               1e-15);
  // Rows of a [2, 2] tensor along axis 1: [1, 3] -> [-1, 1]; [8, 5] -> [1, -1].
  ExpectValues(EvalOp("layer_norm", R"({"eps": 0})", {{{2, 2}, {1, 3, 8, 5}}}), {2, 2},
               {-1, 1, 1, -1});
  // Along axis 0 of the same tensor: columns [1, 8] -> [-1, 1], [3, 5] -> [-1, 1].
  ExpectValues(EvalOp("layer_norm", R"({"axis": 0, "eps": 0})", {{{2, 2}, {1, 3, 8, 5}}}), {2, 2},
               {-1, -1, 1, 1});
}

TEST(EvaluateReferenceTest, Softmax) {
  // e^1, e^2, e^3 over their sum 30.19287...
  ExpectValues(EvalOp("softmax", "{}", {{{1, 3}, {1, 2, 3}}}), {1, 3},
               {0.09003057317038046, 0.24472847105479767, 0.6652409557748219});
  // Large values do not overflow (the max is subtracted first).
  ExpectValues(EvalOp("softmax", "{}", {{{2}, {1000, 1000}}}), {2}, {0.5, 0.5});
  // Axis 0 of [[0, 1], [0, 3]]: column 0 -> [0.5, 0.5]; column 1 -> [1/(1+e^2), e^2/(1+e^2)].
  const double e2 = std::exp(2.0);
  ExpectValues(EvalOp("softmax", R"({"axis": 0})", {{{2, 2}, {0, 1, 0, 3}}}), {2, 2},
               {0.5, 1 / (1 + e2), 0.5, e2 / (1 + e2)});
}

TEST(EvaluateReferenceTest, Concat) {
  const HostTensor a{{2, 1}, {1, 2}};
  const HostTensor b{{2, 2}, {3, 4, 5, 6}};
  ExpectValues(EvalOp("concat", R"({"axis": 1})", {a, b}), {2, 3}, {1, 3, 4, 2, 5, 6});
  ExpectValues(EvalOp("concat", R"({"axis": 0})", {{{1, 2}, {7, 8}}, b, {{1, 2}, {9, 10}}}), {4, 2},
               {7, 8, 3, 4, 5, 6, 9, 10});
}

TEST(EvaluateReferenceTest, ChainsOpsInFloat64AndReturnsOutputsInOrder) {
  // Z = (A + B) * 1e-10 * 1e-10, listed before the ops it reads; outputs Z, S.
  // 4e-20 underflows to 0 in float16, so a non-zero Z shows no intermediate rounding.
  Graph graph = MustBuild(R"({"name": "c", "inputs": [
      {"name": "A", "shape": [2], "dtype": "float16"},
      {"name": "B", "shape": [2], "dtype": "float16"}],
    "ops": [{"name": "Z", "op": "mul", "inputs": ["T"], "attrs": {"scalar": 1e-10}},
            {"name": "S", "op": "add", "inputs": ["A", "B"]},
            {"name": "T", "op": "mul", "inputs": ["S"], "attrs": {"scalar": 1e-10}}],
    "outputs": ["Z", "S"]})");
  absl::StatusOr<std::vector<HostTensor>> out =
      EvaluateReference(graph, {{{2}, {1, 2}}, {{2}, {3, 4}}});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_DOUBLE_EQ((*out)[0].data[0], 4e-20);
  EXPECT_DOUBLE_EQ((*out)[0].data[1], 6e-20);
  EXPECT_THAT((*out)[1].data, ElementsAre(4, 6));
}

TEST(EvaluateReferenceTest, RejectsMismatchedInputs) {
  Graph graph = MustBuild(R"({"name": "c", "inputs": [{"name": "A", "shape": [2], "dtype":
      "float32"}], "ops": [{"name": "Z", "op": "exp", "inputs": ["A"]}], "outputs": ["Z"]})");
  EXPECT_FALSE(EvaluateReference(graph, {}).ok());
  absl::StatusOr<std::vector<HostTensor>> out = EvaluateReference(graph, {{{3}, {1, 2, 3}}});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              HasSubstr("input 'A' (inputs[0]) must have shape [2] but has shape [3]"));
}

// ------------------------------------------------------------ fp16 / bf16

TEST(HalfTest, KnownEncodings) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66);  // 0.0999755859375
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);  // below the midpoint 65520
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // tie between 65504 (odd) and 65536 -> inf
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  const uint16_t nan = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  // A signalling-looking NaN whose payload sits only in the low bits stays NaN.
  EXPECT_NE(FloatToHalf(std::bit_cast<float>(0x7f800001u)) & 0x03ff, 0);
}

TEST(HalfTest, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 (even) and 1 + 2^-10: down.
  EXPECT_EQ(FloatToHalf(1.0f + 0x1.0p-11f), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: up.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * 0x1.0p-11f), 0x3c02);
  // Just above the midpoint rounds up.
  EXPECT_EQ(FloatToHalf(1.0f + 0x1.0p-11f + 0x1.0p-20f), 0x3c01);
  // Mantissa overflow carries into the exponent: 2 - 2^-12 -> 2.
  EXPECT_EQ(FloatToHalf(2.0f - 0x1.0p-12f), 0x4000);
}

TEST(HalfTest, Subnormals) {
  EXPECT_EQ(FloatToHalf(0x1.0p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(FloatToHalf(1023 * 0x1.0p-24f), 0x03ff);  // largest subnormal
  EXPECT_EQ(FloatToHalf(0x1.0p-14f), 0x0400);         // smallest normal
  EXPECT_EQ(FloatToHalf(0x1.0p-25f), 0x0000);         // tie with 0 (even)
  EXPECT_EQ(FloatToHalf(0x1.0p-25f * 1.0001f), 0x0001);
  EXPECT_EQ(FloatToHalf(3 * 0x1.0p-25f), 0x0002);        // tie between 1 and 2 ulps -> 2
  EXPECT_EQ(FloatToHalf(-0x1.0p-26f), 0x8000);           // underflows to -0
  EXPECT_EQ(FloatToHalf(1023.5f * 0x1.0p-24f), 0x0400);  // rounds up into the normals
  EXPECT_EQ(HalfToFloat(0x0001), 0x1.0p-24f);
  EXPECT_EQ(HalfToFloat(0x03ff), 1023 * 0x1.0p-24f);
  EXPECT_EQ(HalfToFloat(0x8001), -0x1.0p-24f);
}

TEST(HalfTest, Decoding) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
}

TEST(HalfTest, EveryBitPatternRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << std::hex << h;
    } else {
      EXPECT_EQ(FloatToHalf(f), h) << std::hex << h;
    }
  }
}

#if defined(__FLT16_MAX__)
// The compiler's own _Float16 conversion is an independent oracle.
TEST(HalfTest, MatchesCompilerFloat16) {
  uint64_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    // Exponents concentrated around the half range, including subnormals and overflow.
    const uint32_t bits = static_cast<uint32_t>(state >> 32);
    const uint32_t exponent = 100 + (bits >> 24) % 56;  // 2^-27 .. 2^28
    const float f = std::bit_cast<float>((bits & 0x807fffffu) | (exponent << 23));
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t want;
    std::memcpy(&want, &h, 2);
    ASSERT_EQ(FloatToHalf(f), want) << f;
  }
}
#endif

TEST(BFloat16Test, KnownEncodings) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1.0p-8f), 0x3f80);      // tie, down to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * 0x1.0p-8f), 0x3f82);  // tie, up to even
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1.0p-8f + 0x1.0p-20f), 0x3f81);
  EXPECT_EQ(FloatToBFloat16(std::bit_cast<float>(0x7f7f0000u)), 0x7f7f);  // largest finite
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(FloatToBFloat16(0x1.0p-130f), 0x0008);  // subnormal
  EXPECT_EQ(FloatToBFloat16(0x1.0p-133f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToBFloat16(0x1.0p-134f), 0x0000);  // tie with 0
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
  const uint16_t nan = FloatToBFloat16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  // A NaN whose payload is only in the dropped low bits must not become inf.
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::bit_cast<float>(0x7f800001u)))));
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0x0001), 0x1.0p-133f);
}

TEST(BFloat16Test, EveryBitPatternRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(f)))) << std::hex << h;
    } else {
      EXPECT_EQ(FloatToBFloat16(f), h) << std::hex << h;
    }
  }
}

TEST(RoundToDTypeTest, RoundsOnceFromDouble) {
  HostTensor t{{3}, {1.0 / 3, 1.0 + 0x1.0p-11 + 0x1.0p-40, 1e6}};
  HostTensor h = t;
  RoundToDType(yirage::v1::FLOAT16, &h);
  EXPECT_EQ(h.data[0], 0.333251953125);
  // Just above a half-precision midpoint: rounding via float first would land
  // exactly on the midpoint and then round down to 1.
  EXPECT_EQ(h.data[1], 1.0 + 0x1.0p-10);
  EXPECT_EQ(h.data[2], kInf);
  HostTensor b = t;
  RoundToDType(yirage::v1::BFLOAT16, &b);
  EXPECT_EQ(b.data[0], 0.333984375);
  EXPECT_EQ(b.data[1], 1.0);
  EXPECT_EQ(b.data[2], 999424.0);  // 1e6 = 0xF4240; 8 significant bits -> 0xF4000
  HostTensor f = t;
  RoundToDType(yirage::v1::FLOAT32, &f);
  EXPECT_EQ(f.data[0], static_cast<double>(1.0f / 3));
  EXPECT_EQ(f.data[1], 1.0 + 0x1.0p-11);
  EXPECT_EQ(f.data[2], 1e6);
  HostTensor special{{3}, {kNaN, -kInf, -0.0}};
  RoundToDType(yirage::v1::FLOAT16, &special);
  EXPECT_TRUE(std::isnan(special.data[0]));
  EXPECT_EQ(special.data[1], -kInf);
  EXPECT_TRUE(std::signbit(special.data[2]));
}

TEST(EncodeTensorTest, BytesAndRoundTrip) {
  const HostTensor t{{2}, {1.0, -2.0}};
  EXPECT_THAT(EncodeTensor(t, yirage::v1::FLOAT16), ElementsAre(0x00, 0x3c, 0x00, 0xc0));
  EXPECT_THAT(EncodeTensor(t, yirage::v1::BFLOAT16), ElementsAre(0x80, 0x3f, 0x00, 0xc0));
  EXPECT_THAT(EncodeTensor(t, yirage::v1::FLOAT32),
              ElementsAre(0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0));
  // Encoding rounds correctly from double (single rounding).
  const std::vector<uint8_t> tricky =
      EncodeTensor({{1}, {1.0 + 0x1.0p-11 + 0x1.0p-40}}, yirage::v1::FLOAT16);
  EXPECT_THAT(tricky, ElementsAre(0x01, 0x3c));

  const HostTensor values{{2, 2}, {0.1, -3.75, 1e-6, 123.456}};
  for (yirage::v1::DType dtype : {yirage::v1::FLOAT16, yirage::v1::BFLOAT16, yirage::v1::FLOAT32}) {
    const std::vector<uint8_t> bytes = EncodeTensor(values, dtype);
    EXPECT_EQ(bytes.size(), 4u * DTypeSize(dtype));
    const HostTensor decoded = DecodeTensor(bytes.data(), {2, 2}, dtype);
    HostTensor rounded = values;
    RoundToDType(dtype, &rounded);
    EXPECT_EQ(decoded.shape, values.shape);
    EXPECT_EQ(decoded.data, rounded.data) << DTypeName(dtype);
  }
}

// ------------------------------------------------------------ random inputs

constexpr std::string_view kDomains = R"({"name": "r", "inputs": [
    {"name": "P", "shape": [64], "dtype": "float32"},
    {"name": "Q", "shape": [64], "dtype": "float16"},
    {"name": "D", "shape": [64], "dtype": "float32"},
    {"name": "N", "shape": [64], "dtype": "float32"},
    {"name": "E", "shape": [64], "dtype": "float32"},
    {"name": "A", "shape": [8, 64], "dtype": "bfloat16"},
    {"name": "B", "shape": [64, 16], "dtype": "bfloat16"}],
  "ops": [{"name": "L", "op": "log", "inputs": ["P"]},
          {"name": "S", "op": "rsqrt", "inputs": ["Q"]},
          {"name": "V", "op": "div", "inputs": ["N", "D"]},
          {"name": "W", "op": "pow", "inputs": ["E", "N"]},
          {"name": "M", "op": "matmul", "inputs": ["A", "B"]}],
  "outputs": ["L", "S", "V", "W", "M"]})";

TEST(MakeRandomInputsTest, RangesAndRounding) {
  Graph graph = MustBuild(kDomains);
  const std::vector<HostTensor> inputs = MakeRandomInputs(graph, 7);
  ASSERT_EQ(inputs.size(), 7u);
  auto range = [&](int i) {
    const auto [lo, hi] = std::minmax_element(inputs[i].data.begin(), inputs[i].data.end());
    return std::pair<double, double>(*lo, *hi);
  };
  for (int i : {0, 1, 2, 4}) {  // log, rsqrt, divisor, pow base
    EXPECT_EQ(inputs[i].shape, graph.tensor(i).shape);
    EXPECT_GE(range(i).first, 0.5) << graph.tensor(i).name;
    EXPECT_LE(range(i).second, 1.5) << graph.tensor(i).name;
  }
  // The dividend / exponent N and the matmul A are in [-1, 1] and take both signs.
  for (int i : {3, 5}) {
    EXPECT_GE(range(i).first, -1.0);
    EXPECT_LT(range(i).first, 0.0);
    EXPECT_GT(range(i).second, 0.0);
    EXPECT_LE(range(i).second, 1.0);
  }
  // Matmul B: scaled by 1/sqrt(K) = 1/8.
  EXPECT_GE(range(6).first, -0.125);
  EXPECT_LE(range(6).second, 0.125);
  EXPECT_LT(range(6).first, -0.06);
  EXPECT_GT(range(6).second, 0.06);
  EXPECT_EQ(inputs[6].data.size(), 64u * 16u);
  // Already rounded to each dtype.
  for (int i = 0; i < 7; ++i) {
    HostTensor copy = inputs[i];
    RoundToDType(graph.tensor(i).dtype, &copy);
    EXPECT_EQ(copy.data, inputs[i].data) << graph.tensor(i).name;
  }
  // The reference is finite on these inputs.
  absl::StatusOr<std::vector<HostTensor>> out = EvaluateReference(graph, inputs);
  ASSERT_TRUE(out.ok()) << out.status();
  for (const HostTensor& t : *out) {
    for (double v : t.data) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(MakeRandomInputsTest, SeedDeterminism) {
  Graph graph = MustBuild(kDomains);
  const std::vector<HostTensor> a = MakeRandomInputs(graph, 42);
  const std::vector<HostTensor> b = MakeRandomInputs(graph, 42);
  const std::vector<HostTensor> c = MakeRandomInputs(graph, 43);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].data, b[i].data);
    EXPECT_NE(a[i].data, c[i].data);
  }
  // Distinct inputs of the same shape and range get distinct streams.
  EXPECT_NE(a[0].data, a[2].data);
  // Pinned values: the stream is splitmix64, independent of the compiler and
  // the standard library; a change here changes every stored job's inputs.
  // Worked out independently in Python: state = 1 ^ 0xd1b54a32d192ed03, then
  // for each value splitmix64 -> u = (z >> 11) * 2^-53 -> -1 + 2u -> float32.
  constexpr std::string_view kPinnedSeed1 = "-0.435503811 0.043655917 -0.402772546 ";
  Graph simple = MustBuild(R"({"name": "s", "inputs": [{"name": "X", "shape": [3],
      "dtype": "float32"}], "ops": [{"name": "Z", "op": "exp", "inputs": ["X"]}],
      "outputs": ["Z"]})");
  const std::vector<HostTensor> pinned = MakeRandomInputs(simple, 1);
  ASSERT_EQ(pinned[0].data.size(), 3u);
  std::ostringstream text;
  text.precision(9);
  for (double v : pinned[0].data) text << v << " ";
  EXPECT_EQ(text.str(), kPinnedSeed1);
}

// Attention: Q and K spread the scores (a peaked softmax) and V is O(1), so
// that a kernel that reads K wrong (here: its feature halves swapped, the
// effect of a wrong shared-memory swizzle) fails the 16-bit check on most
// outputs; with the plain matmul ranges the softmax was near uniform and O
// a mean of V under the atol, which any such kernel passed.
TEST(MakeRandomInputsTest, AttentionInputsMakeTheCheckSensitive) {
  Graph graph = MustBuild(R"({"name": "a", "inputs": [
      {"name": "Q", "shape": [2, 64, 64], "dtype": "bfloat16"},
      {"name": "K", "shape": [2, 300, 64], "dtype": "bfloat16"},
      {"name": "V", "shape": [2, 300, 64], "dtype": "bfloat16"}],
    "ops": [{"name": "O", "op": "self_attention", "inputs": ["Q", "K", "V"]}],
    "outputs": ["O"]})");
  const std::vector<HostTensor> inputs = MakeRandomInputs(graph, 5);
  auto max_abs = [](const HostTensor& t) {
    double m = 0;
    for (double v : t.data) m = std::max(m, std::fabs(v));
    return m;
  };
  // Scores s * Q.K with s = 1/8: a = sqrt(3 * 1 / (s * sqrt(64))) = sqrt(3).
  for (int i : {0, 1}) {
    EXPECT_LE(max_abs(inputs[i]), std::sqrt(3.0) + 1e-2);
    EXPECT_GT(max_abs(inputs[i]), 1.6);
  }
  EXPECT_LE(max_abs(inputs[2]), 1.0);
  EXPECT_GT(max_abs(inputs[2]), 0.9);
  absl::StatusOr<std::vector<HostTensor>> ref = EvaluateReference(graph, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  std::vector<HostTensor> wrong = inputs;
  for (size_t row = 0; row < wrong[1].data.size() / 64; ++row) {
    for (int c = 0; c < 32; ++c)
      std::swap(wrong[1].data[row * 64 + c], wrong[1].data[row * 64 + 32 + c]);
  }
  absl::StatusOr<std::vector<HostTensor>> got = EvaluateReference(graph, wrong);
  ASSERT_TRUE(got.ok()) << got.status();
  const Tolerance tol = DefaultTolerance(graph);
  int64_t off = 0;
  for (size_t i = 0; i < (*ref)[0].data.size(); ++i) {
    const double r = (*ref)[0].data[i], g = (*got)[0].data[i];
    off += std::fabs(g - r) > tol.atol + tol.rtol * std::fabs(r) ? 1 : 0;
  }
  EXPECT_GT(off, static_cast<int64_t>((*ref)[0].data.size()) / 2);
  EXPECT_FALSE(CompareOutputs(graph, *ref, *got, tol).ok);
}

// ------------------------------------------------------------ tolerance

Graph DTypeGraph(std::string_view dtype_a, std::string_view dtype_b, std::string_view tolerance) {
  return MustBuild(std::string(R"({"name": "t", "inputs": [
      {"name": "A", "shape": [2], "dtype": ")") +
                   std::string(dtype_a) + R"("}, {"name": "B", "shape": [2], "dtype": ")" +
                   std::string(dtype_b) + R"("}],
    "ops": [{"name": "X", "op": "exp", "inputs": ["A"]}, {"name": "Y", "op": "exp", "inputs": ["B"]}],
    "outputs": ["X", "Y"])" +
                   std::string(tolerance) + "}");
}

TEST(ToleranceTest, DefaultsAndResolution) {
  Tolerance t = DefaultTolerance(DTypeGraph("float32", "float32", ""));
  EXPECT_EQ(t.rtol, 1e-4);
  EXPECT_EQ(t.atol, 1e-5);
  t = DefaultTolerance(DTypeGraph("float32", "bfloat16", ""));  // loosest output wins
  EXPECT_EQ(t.rtol, 1e-2);
  EXPECT_EQ(t.atol, 1e-2);
  t = DefaultTolerance(DTypeGraph("float16", "float16", ""));
  EXPECT_EQ(t.rtol, 1e-2);
  EXPECT_EQ(t.atol, 1e-2);

  const Graph with_file =
      DTypeGraph("float32", "float32", R"(, "tolerance": {"rtol": 0.003, "atol": 0})");
  const Graph without_file = DTypeGraph("float32", "float32", "");
  yirage::v1::Tolerance job;
  t = ResolveTolerance(with_file, job);  // unset job -> file
  EXPECT_EQ(t.rtol, 0.003);
  EXPECT_EQ(t.atol, 0);
  t = ResolveTolerance(without_file, job);  // unset job and file -> default
  EXPECT_EQ(t.rtol, 1e-4);
  EXPECT_EQ(t.atol, 1e-5);
  job.set_atol(0.5);  // either field set -> the job's pair wins as given
  t = ResolveTolerance(with_file, job);
  EXPECT_EQ(t.rtol, 0);
  EXPECT_EQ(t.atol, 0.5);
}

// ------------------------------------------------------------ compare

Graph CompareGraph() {
  return MustBuild(R"({"name": "c", "inputs": [
      {"name": "A", "shape": [2, 2], "dtype": "float32"},
      {"name": "B", "shape": [3], "dtype": "float32"}],
    "ops": [{"name": "Y", "op": "exp", "inputs": ["A"]}, {"name": "Z", "op": "neg", "inputs": ["B"]}],
    "outputs": ["Y", "Z"]})");
}

TEST(CompareOutputsTest, ToleranceEdges) {
  const Graph graph = CompareGraph();
  const Tolerance tol{0.25, 0.5};  // bound = 0.5 + 0.25 * |ref|, exact in binary
  const std::vector<HostTensor> ref = {{{2, 2}, {2, -4, 0, 1}}, {{3}, {8, 0, 0}}};
  // Errors exactly at the bound: 1.0 and 0.5 (the others exact, so that the
  // norm-wise errors, 1 / sqrt(21) and 0.5 / 8, stay within rtol).
  std::vector<HostTensor> got = {{{2, 2}, {3, -4, 0, 1}}, {{3}, {8, 0, 0.5}}};
  CompareResult r = CompareOutputs(graph, ref, got, tol);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.message, "");
  EXPECT_EQ(r.max_abs_error, 1.0);
  EXPECT_EQ(r.max_rel_error, 0.5 / kCompareTinyRef);  // 0.5 off a zero ref

  got[0].data[0] = std::nextafter(3.0, 4.0);  // one ulp past the bound
  r = CompareOutputs(graph, ref, got, tol);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("output 'Y' (outputs[0]) element 0 [0, 0]: got 3, expected 2"));
  EXPECT_THAT(r.message, HasSubstr("> atol 0.5 + rtol 0.25 * |expected| = 1)"));
  EXPECT_THAT(r.message, HasSubstr("1 of 7 elements out of tolerance"));

  got[1].data[0] = 5.0;  // second failure, in the second output; first one is still named
  r = CompareOutputs(graph, ref, got, tol);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("output 'Y'"));
  EXPECT_THAT(r.message, HasSubstr("2 of 7 elements"));
  // Z's norm-wise error, sqrt(9 + 0.25) / 8, is over rtol too.
  EXPECT_THAT(r.message, HasSubstr("output 'Z' (outputs[1]): relative error norm"));
  EXPECT_EQ(r.max_abs_error, 3.0);

  // Zero tolerance requires exact equality.
  r = CompareOutputs(graph, ref, ref, Tolerance{0, 0});
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.max_abs_error, 0);
  EXPECT_EQ(r.max_rel_error, 0);
}

// Outputs whose values all sit under the atol (softmax rows of thousands)
// pass the element bounds whatever they hold; the norm-wise bound still
// checks them.
TEST(CompareOutputsTest, NormWiseBoundChecksSmallOutputs) {
  const Graph graph = CompareGraph();
  const Tolerance tol{1e-2, 1e-2};
  std::vector<HostTensor> ref = {{{2, 2}, {1e-4, 3e-4, 2e-4, 4e-4}}, {{3}, {1, -1, 0.5}}};
  std::vector<HostTensor> got = ref;
  for (double& v : got[0].data) v = 0;  // zeros: every element within atol
  CompareResult r = CompareOutputs(graph, ref, got, tol);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("output 'Y' (outputs[0]): relative error norm "
                                   "||got - expected|| / ||expected|| = 1 > rtol 0.01"));
  EXPECT_THAT(r.message, HasSubstr("every element within its bound"));
  got[0] = ref[0];
  for (double& v : got[0].data) v *= 1.005;  // half a percent off: passes
  r = CompareOutputs(graph, ref, got, tol);
  EXPECT_TRUE(r.ok) << r.message;
  // A pure absolute tolerance (rtol 0) asks for no norm-wise bound; an
  // all-zero reference has none either.
  for (double& v : got[0].data) v = 0;
  EXPECT_TRUE(CompareOutputs(graph, ref, got, Tolerance{0, 1e-2}).ok);
  ref[0].data.assign(4, 0.0);
  got[0].data.assign(4, 1e-3);
  EXPECT_TRUE(CompareOutputs(graph, ref, got, tol).ok);
}

TEST(CompareOutputsTest, NonFiniteRules) {
  const Graph graph = CompareGraph();
  const Tolerance tol{0.1, 0.1};
  const std::vector<HostTensor> ref = {{{2, 2}, {kNaN, kInf, -kInf, 1}}, {{3}, {1, 2, 3}}};
  std::vector<HostTensor> got = {{{2, 2}, {kNaN, kInf, -kInf, 1}}, {{3}, {1, 2, 3}}};
  CompareResult r = CompareOutputs(graph, ref, got, tol);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.max_abs_error, 0);

  got[1].data[2] = kNaN;  // NaN where ref is finite
  r = CompareOutputs(graph, ref, got, tol);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("output 'Z' (outputs[1]) element 2 [2]: got nan, expected 3"));
  EXPECT_EQ(r.max_abs_error, kInf);

  got[1].data[2] = kInf;  // Inf where ref is finite
  EXPECT_FALSE(CompareOutputs(graph, ref, got, tol).ok);
  got[1].data[2] = 3;

  got[0].data[1] = -kInf;  // wrong-signed infinity
  r = CompareOutputs(graph, ref, got, tol);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("element 1 [0, 1]: got -inf, expected inf"));
  got[0].data[1] = 1e308;  // finite where ref is inf
  EXPECT_FALSE(CompareOutputs(graph, ref, got, tol).ok);
  got[0].data[1] = kInf;

  got[0].data[0] = 0;  // finite where ref is NaN
  r = CompareOutputs(graph, ref, got, tol);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("element 0 [0, 0]: got 0, expected nan"));
}

TEST(CompareOutputsTest, ShapeAndCountMismatch) {
  const Graph graph = CompareGraph();
  const std::vector<HostTensor> ref = {{{2, 2}, {1, 2, 3, 4}}, {{3}, {1, 2, 3}}};
  CompareResult r = CompareOutputs(graph, ref, {ref[0]}, Tolerance{0.1, 0.1});
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("the graph has 2 outputs but got 1 tensors"));
  r = CompareOutputs(graph, ref, {ref[0], {{2}, {1, 2}}}, Tolerance{0.1, 0.1});
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("output 'Z' (outputs[1]): got shape [2]"));
  // Values that do not fill the shape they claim: both are reported.
  r = CompareOutputs(graph, ref, {ref[0], {{3}, {1, 2}}}, Tolerance{0.1, 0.1});
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("output 'Z' (outputs[1]): got shape [3] with 2 values"));
}

// Outputs as a backend writes them (raw bytes in their dtype) compare as
// their decoded tensors do, over outputs of many chunks (compared on several
// threads): the same verdict, errors, first failing element and counts.
TEST(CompareOutputsTest, EncodedOutputsCompareAsDecoded) {
  constexpr int64_t kN = 600001;  // chunks of 65536 on several threads, and a partial one
  const std::string n = std::to_string(kN);
  const Graph graph = MustBuild(R"({"name": "c", "inputs": [
      {"name": "A", "shape": [)" +
                                n + R"(], "dtype": "float16"},
      {"name": "B", "shape": [)" +
                                n + R"(], "dtype": "bfloat16"},
      {"name": "C", "shape": [)" +
                                n + R"(], "dtype": "float32"}],
    "ops": [{"name": "X", "op": "neg", "inputs": ["A"]}, {"name": "Y", "op": "neg", "inputs": ["B"]},
            {"name": "Z", "op": "neg", "inputs": ["C"]}],
    "outputs": ["X", "Y", "Z"]})");
  std::vector<HostTensor> ref;
  const yirage::v1::DType dtypes[] = {yirage::v1::FLOAT16, yirage::v1::BFLOAT16,
                                      yirage::v1::FLOAT32};
  for (int o = 0; o < 3; ++o) {
    HostTensor t{{kN}, std::vector<double>(kN)};
    for (int64_t i = 0; i < kN; ++i) t.data[i] = std::sin(0.001 * static_cast<double>(i) + o);
    RoundToDType(dtypes[o], &t);
    ref.push_back(std::move(t));
  }
  ref[2].data[7] = kNaN;  // a NaN reference matched by NaN
  const Tolerance tol{1e-2, 1e-2};
  auto check = [&](const std::vector<HostTensor>& got) {
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<const void*> raw;
    for (int o = 0; o < 3; ++o) bytes.push_back(EncodeTensor(got[o], dtypes[o]));
    for (const auto& b : bytes) raw.push_back(b.data());
    std::vector<HostTensor> decoded;
    for (int o = 0; o < 3; ++o) decoded.push_back(DecodeTensor(bytes[o].data(), {kN}, dtypes[o]));
    const CompareResult want = CompareOutputs(graph, ref, decoded, tol);
    const CompareResult r = CompareEncodedOutputs(graph, ref, raw, tol);
    EXPECT_EQ(r.ok, want.ok);
    EXPECT_EQ(r.max_abs_error, want.max_abs_error);
    EXPECT_EQ(r.max_rel_error, want.max_rel_error);
    EXPECT_EQ(r.message, want.message);
    return r;
  };
  std::vector<HostTensor> got = ref;
  CompareResult r = check(got);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(r.max_abs_error, 0);
  // Failures in a late chunk and an early one of the second output: the
  // early one is named, both are counted.
  got[1].data[250000] = 3;
  got[1].data[70000] = -3;
  got[2].data[299999] = kInf;
  r = check(got);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("output 'Y' (outputs[1]) element 70000 [70000]: got -3"));
  EXPECT_THAT(r.message, HasSubstr("3 of 1800003 elements out of tolerance"));
  EXPECT_EQ(r.max_abs_error, kInf);
  // A count that does not match the graph's outputs.
  const std::vector<uint8_t> one = EncodeTensor(ref[0], dtypes[0]);
  r = CompareEncodedOutputs(graph, ref, {one.data()}, tol);
  EXPECT_FALSE(r.ok);
  EXPECT_THAT(r.message, HasSubstr("the graph has 3 outputs but got 1 tensors"));
}

// DecodeTensor reads every half exactly as HalfToFloat does (through its
// table), subnormals, infinities and NaN payloads included.
TEST(TensorCodecTest, DecodeTensorReadsEveryHalf) {
  std::vector<uint16_t> all(1 << 16);
  for (uint32_t h = 0; h < all.size(); ++h) all[h] = static_cast<uint16_t>(h);
  const HostTensor t = DecodeTensor(all.data(), {1 << 16}, yirage::v1::FLOAT16);
  for (uint32_t h = 0; h < all.size(); ++h) {
    const double want = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(t.data[h])) << h;
    } else {
      ASSERT_EQ(t.data[h], want) << h;
    }
  }
}

// ------------------------------------------------------------ example graphs

TEST(ExampleGraphsTest, EveryExampleParsesAndEvaluates) {
  const std::filesystem::path dir = std::filesystem::path(YIRAGE_SOURCE_DIR) / "examples/graphs";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 5u);
  for (const std::filesystem::path& file : files) {
    SCOPED_TRACE(file.string());
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<yirage::v1::Graph> proto = ParseGraphJson(text.str());
    ASSERT_TRUE(proto.ok()) << proto.status();
    EXPECT_EQ(proto->name(), file.stem().string());
    absl::StatusOr<Graph> graph = Graph::FromProto(*proto);
    ASSERT_TRUE(graph.ok()) << graph.status();
    const std::vector<HostTensor> inputs = MakeRandomInputs(*graph, 1);
    absl::StatusOr<std::vector<HostTensor>> out = EvaluateReference(*graph, inputs);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), graph->outputs().size());
    for (const HostTensor& t : *out) {
      for (double v : t.data) ASSERT_TRUE(std::isfinite(v));
    }
    // The reference compares equal to itself under the resolved tolerance.
    const Tolerance tol = ResolveTolerance(*graph, yirage::v1::Tolerance());
    EXPECT_TRUE(CompareOutputs(*graph, *out, *out, tol).ok);
  }
}

}  // namespace
}  // namespace yirage::core
