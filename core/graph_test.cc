#include "core/graph.h"

#include <string>
#include <string_view>
#include <vector>

#include "core/graph_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<Graph> Build(std::string_view text) {
  absl::StatusOr<yirage::v1::Graph> proto = ParseGraphJson(text);
  if (!proto.ok()) return proto.status();
  return Graph::FromProto(*proto);
}

// The error message of building `text`, which must fail with InvalidArgument.
std::string BuildError(std::string_view text) {
  absl::StatusOr<Graph> graph = Build(text);
  EXPECT_FALSE(graph.ok()) << text;
  if (graph.ok()) return "";
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(graph.status().message());
}

// A graph with inputs X [4, 8] and Y [4, 8] (float32) and the given ops and outputs.
std::string TwoInputs(std::string_view ops, std::string_view outputs) {
  return std::string(R"({"name": "t", "inputs": [
      {"name": "X", "shape": [4, 8], "dtype": "float32"},
      {"name": "Y", "shape": [4, 8], "dtype": "float32"}],
    "ops": [)") +
         std::string(ops) + R"(], "outputs": [)" + std::string(outputs) + "]}";
}

// One input X of the given shape and dtype, one op Z = op(X, attrs).
std::string OneOp(std::string_view shape, std::string_view op, std::string_view attrs = "{}",
                  std::string_view dtype = "float32") {
  return std::string(R"({"name": "t", "inputs": [{"name": "X", "shape": )") + std::string(shape) +
         R"(, "dtype": ")" + std::string(dtype) + R"("}], "ops": [{"name": "Z", "op": ")" +
         std::string(op) + R"(", "inputs": ["X"], "attrs": )" + std::string(attrs) +
         R"(}], "outputs": ["Z"]})";
}

constexpr std::string_view kRmsNormLinearJson = R"({
  "name": "rms_norm_linear",
  "inputs":  [{"name": "X", "shape": [16, 64], "dtype": "float16"},
              {"name": "G", "shape": [64], "dtype": "float16"},
              {"name": "W", "shape": [64, 96], "dtype": "float16"}],
  "ops":     [{"name": "N", "op": "rms_norm", "inputs": ["X"], "attrs": {"axis": -1}},
              {"name": "S", "op": "mul", "inputs": ["N", "G"]},
              {"name": "Y", "op": "matmul", "inputs": ["S", "W"]}],
  "outputs": ["Y"],
  "tolerance": {"rtol": 0.01, "atol": 0.02}
})";

TEST(GraphTest, BuildsValidGraph) {
  absl::StatusOr<Graph> graph = Build(kRmsNormLinearJson);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->name(), "rms_norm_linear");
  EXPECT_EQ(graph->num_inputs(), 3);
  EXPECT_EQ(graph->num_tensors(), 6);
  ASSERT_EQ(graph->ops().size(), 3u);
  const OpInfo& norm = graph->op(0);
  EXPECT_EQ(norm.name, "N");
  EXPECT_EQ(norm.type, OpType::kRmsNorm);
  EXPECT_EQ(norm.axis, 1);  // -1 normalized
  EXPECT_DOUBLE_EQ(norm.eps, 1e-6);
  EXPECT_THAT(norm.inputs, ElementsAre(0));
  EXPECT_EQ(norm.output, 3);
  EXPECT_THAT(graph->op(1).inputs, ElementsAre(3, 1));
  EXPECT_THAT(graph->op(2).inputs, ElementsAre(4, 2));
  const TensorInfo& y = graph->tensor(5);
  EXPECT_EQ(y.name, "Y");
  EXPECT_THAT(y.shape, ElementsAre(16, 96));
  EXPECT_EQ(y.dtype, yirage::v1::FLOAT16);
  EXPECT_EQ(y.producer, 2);
  EXPECT_TRUE(y.is_graph_output);
  EXPECT_TRUE(y.consumers.empty());
  EXPECT_EQ(y.num_elements(), 16 * 96);
  EXPECT_EQ(graph->tensor(0).producer, -1);
  EXPECT_THAT(graph->tensor(0).consumers, ElementsAre(0));
  EXPECT_FALSE(graph->tensor(4).is_graph_output);
  EXPECT_THAT(graph->outputs(), ElementsAre(5));
  EXPECT_EQ(graph->FindTensor("W"), 2);
  EXPECT_EQ(graph->FindTensor("S"), 4);
  EXPECT_EQ(graph->FindTensor("nope"), -1);
  EXPECT_EQ(graph->FindOp("Y"), 2);
  EXPECT_EQ(graph->FindOp("X"), -1);  // an input, not an op
  EXPECT_DOUBLE_EQ(graph->proto().tolerance().atol(), 0.02);
}

TEST(GraphTest, SortsOpsTopologicallyKeepingFileOrder) {
  // File order C, A, B, D; C <- B <- A <- X and D <- X. Ready at first: A, D;
  // A frees B, B frees C (file index 0), which then precedes D (index 3).
  absl::StatusOr<Graph> graph = Build(TwoInputs(R"(
      {"name": "C", "op": "exp", "inputs": ["B"]},
      {"name": "A", "op": "add", "inputs": ["X", "Y"]},
      {"name": "B", "op": "neg", "inputs": ["A"]},
      {"name": "D", "op": "abs", "inputs": ["X"]})",
                                                R"("D", "C")"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  std::vector<std::string> order;
  for (const OpInfo& op : graph->ops()) order.push_back(op.name);
  EXPECT_THAT(order, ElementsAre("A", "B", "C", "D"));
  // The stored proto follows the same order.
  ASSERT_EQ(graph->proto().ops_size(), 4);
  EXPECT_EQ(graph->proto().ops(2).name(), "C");
  // Op i's output is tensor num_inputs + i.
  EXPECT_EQ(graph->op(2).output, 4);
  EXPECT_EQ(graph->tensor(4).name, "C");
  EXPECT_THAT(graph->outputs(), ElementsAre(5, 4));
  EXPECT_THAT(graph->tensor(0).consumers, ElementsAre(0, 3));  // A and D
}

TEST(GraphTest, ConsumersListedOnceWhenAnOpReadsATensorTwice) {
  absl::StatusOr<Graph> graph = Build(TwoInputs(
      R"({"name": "A", "op": "mul", "inputs": ["X", "X"]},
         {"name": "B", "op": "add", "inputs": ["A", "Y"]})",
      R"("B")"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_THAT(graph->tensor(0).consumers, ElementsAre(0));
}

TEST(GraphTest, MatmulContractedDimMismatchMessage) {
  constexpr std::string_view kText = R"({
    "name": "g",
    "inputs": [{"name": "X", "shape": [16, 4095], "dtype": "float16"},
               {"name": "G", "shape": [4095], "dtype": "float16"},
               {"name": "W", "shape": [4096, 6144], "dtype": "float16"}],
    "ops": [{"name": "N", "op": "rms_norm", "inputs": ["X"]},
            {"name": "S", "op": "mul", "inputs": ["N", "G"]},
            {"name": "Y", "op": "matmul", "inputs": ["S", "W"]}],
    "outputs": ["Y"]})";
  EXPECT_EQ(BuildError(kText),
            "op 'Y' (ops[2], matmul): inputs[1] 'W' has shape [4096, 6144] but inputs[0] 'S' has "
            "shape [16, 4095]: the contracted dims differ (4095 vs 4096)");
}

TEST(GraphTest, MatmulShapes) {
  // Batch dims [2, 1] and [5] broadcast to [2, 5].
  absl::StatusOr<Graph> graph = Build(R"({"name": "m", "inputs": [
      {"name": "A", "shape": [2, 1, 3, 4], "dtype": "float32"},
      {"name": "B", "shape": [5, 4, 6], "dtype": "float32"},
      {"name": "C", "shape": [7, 4], "dtype": "float32"}],
    "ops": [{"name": "P", "op": "matmul", "inputs": ["A", "B"]},
            {"name": "Q", "op": "matmul", "inputs": ["A", "C"], "attrs": {"transpose_b": true}}],
    "outputs": ["P", "Q"]})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_THAT(graph->tensor(3).shape, ElementsAre(2, 5, 3, 6));
  EXPECT_THAT(graph->tensor(4).shape, ElementsAre(2, 1, 3, 7));
  EXPECT_TRUE(graph->op(1).transpose_b);
  EXPECT_FALSE(graph->op(0).transpose_b);

  const std::string rank1 = BuildError(R"({"name": "m", "inputs": [
      {"name": "A", "shape": [4], "dtype": "float32"},
      {"name": "B", "shape": [4, 6], "dtype": "float32"}],
    "ops": [{"name": "P", "op": "matmul", "inputs": ["A", "B"]}], "outputs": ["P"]})");
  EXPECT_THAT(rank1, HasSubstr("op 'P' (ops[0], matmul): inputs[0] 'A' has shape [4] of rank 1"));
  EXPECT_THAT(rank1, HasSubstr("rank >= 2"));

  const std::string batch = BuildError(R"({"name": "m", "inputs": [
      {"name": "A", "shape": [2, 3, 4], "dtype": "float32"},
      {"name": "B", "shape": [3, 4, 6], "dtype": "float32"}],
    "ops": [{"name": "P", "op": "matmul", "inputs": ["A", "B"]}], "outputs": ["P"]})");
  EXPECT_THAT(batch, HasSubstr("inputs[1] 'B' has shape [3, 4, 6] but inputs[0] 'A' has shape "
                               "[2, 3, 4]: the batch dims do not broadcast"));

  const std::string transposed = BuildError(R"({"name": "m", "inputs": [
      {"name": "A", "shape": [3, 4], "dtype": "float32"},
      {"name": "B", "shape": [4, 6], "dtype": "float32"}],
    "ops": [{"name": "P", "op": "matmul", "inputs": ["A", "B"], "attrs": {"transpose_b": true}}],
    "outputs": ["P"]})");
  EXPECT_THAT(transposed, HasSubstr("the contracted dims differ (4 vs 6) (transpose_b"));
}

TEST(GraphTest, BinaryBroadcastingAndScalar) {
  absl::StatusOr<Graph> graph = Build(R"({"name": "b", "inputs": [
      {"name": "A", "shape": [4, 1, 8], "dtype": "bfloat16"},
      {"name": "B", "shape": [3, 1], "dtype": "bfloat16"}],
    "ops": [{"name": "S", "op": "sub", "inputs": ["A", "B"]},
            {"name": "T", "op": "pow", "inputs": ["S"], "attrs": {"scalar": 2}}],
    "outputs": ["T"]})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_THAT(graph->tensor(2).shape, ElementsAre(4, 3, 8));
  EXPECT_EQ(graph->tensor(2).dtype, yirage::v1::BFLOAT16);
  EXPECT_TRUE(graph->op(1).has_scalar);
  EXPECT_DOUBLE_EQ(graph->op(1).scalar, 2.0);  // an integer is accepted for a float attr
  EXPECT_FALSE(graph->op(0).has_scalar);

  const std::string mismatch = BuildError(R"({"name": "b", "inputs": [
      {"name": "A", "shape": [4, 8], "dtype": "float32"},
      {"name": "B", "shape": [7], "dtype": "float32"}],
    "ops": [{"name": "S", "op": "add", "inputs": ["A", "B"]}], "outputs": ["S"]})");
  EXPECT_EQ(mismatch,
            "op 'S' (ops[0], add): inputs[0] 'A' has shape [4, 8] and inputs[1] 'B' has shape "
            "[7]: they do not broadcast: shapes [4, 8] and [7] do not broadcast (8 vs 7 at dim "
            "-1)");
}

TEST(GraphTest, UnknownOpListsKnownOps) {
  const std::string error = BuildError(OneOp("[4]", "matmull"));
  EXPECT_THAT(error, HasSubstr("op 'Z' (ops[0]): unknown op 'matmull'; known ops: matmul, add, "
                               "sub, mul, div, maximum, minimum, pow, neg, exp, log, sqrt, "
                               "rsqrt, square, abs, relu, sigmoid, tanh, silu, gelu, reduce_sum, "
                               "reduce_mean, reduce_max, rms_norm, layer_norm, softmax, concat"));
}

TEST(GraphTest, MissingInputName) {
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "add", "inputs": ["X", "Q"]})", R"("A")")),
            "op 'A' (ops[0], add): inputs[1] 'Q' is not a graph input or op name");
  EXPECT_THAT(BuildError(TwoInputs(R"({"name": "A", "op": "add", "inputs": ["X", ""]})", R"("A")")),
              HasSubstr("inputs[1] is an empty name"));
  EXPECT_THAT(BuildError(TwoInputs(R"({"name": "A", "op": "add", "inputs": []})", R"("A")")),
              HasSubstr("op 'A' (ops[0], add): inputs is empty"));
}

TEST(GraphTest, WrongNumberOfInputs) {
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "exp", "inputs": ["X", "Y"]})", R"("A")")),
            "op 'A' (ops[0], exp): expects 1 input, got 2");
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "matmul", "inputs": ["X"]},
                                 {"name": "B", "op": "add", "inputs": ["A", "Y"]})",
                                 R"("B")")),
            "op 'A' (ops[0], matmul): expects 2 inputs, got 1");
  EXPECT_EQ(
      BuildError(TwoInputs(R"({"name": "A", "op": "add", "inputs": ["X", "Y", "X"]})", R"("A")")),
      "op 'A' (ops[0], add): expects 2 inputs (or 1 input and attrs.scalar), got 3");
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "mul", "inputs": ["X"]},
                                 {"name": "B", "op": "add", "inputs": ["A", "Y"]})",
                                 R"("B")")),
            "op 'A' (ops[0], mul): expects 2 inputs (or 1 input and attrs.scalar), got 1");
  EXPECT_EQ(BuildError(TwoInputs(
                R"({"name": "A", "op": "mul", "inputs": ["X", "Y"], "attrs": {"scalar": 2.5}})",
                R"("A")")),
            "op 'A' (ops[0], mul): attrs.scalar is only allowed with exactly 1 input, got 2 "
            "inputs");
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "concat", "inputs": ["X"],
                                  "attrs": {"axis": 0}},
                                 {"name": "B", "op": "add", "inputs": ["A", "Y"]})",
                                 R"("B")")),
            "op 'A' (ops[0], concat): expects at least 2 inputs, got 1");
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "rms_norm", "inputs": ["X", "Y", "Y"]})",
                                 R"("A")")),
            "op 'A' (ops[0], rms_norm): expects 1 to 2 inputs, got 3");
}

TEST(GraphTest, DTypeErrors) {
  EXPECT_EQ(BuildError(R"({"name": "d", "inputs": [
      {"name": "A", "shape": [4], "dtype": "float16"},
      {"name": "B", "shape": [4], "dtype": "float32"}],
    "ops": [{"name": "S", "op": "add", "inputs": ["A", "B"]}], "outputs": ["S"]})"),
            "op 'S' (ops[0], add): inputs[1] 'B' has dtype float32 but inputs[0] 'A' has dtype "
            "float16; all inputs of an op must have the same dtype");

  yirage::v1::Graph proto;
  proto.set_name("d");
  yirage::v1::TensorSpec* input = proto.add_inputs();
  input->set_name("A");
  input->add_shape(4);  // dtype left unspecified
  yirage::v1::OpNode* op = proto.add_ops();
  op->set_name("E");
  op->set_op("exp");
  op->add_inputs("A");
  proto.add_outputs("E");
  absl::StatusOr<Graph> graph = Graph::FromProto(proto);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message(),
            "input 'A' (inputs[0]): dtype must be float16, bfloat16 or float32 (got enum value "
            "0)");
  input->set_dtype(yirage::v1::FLOAT16);
  EXPECT_TRUE(Graph::FromProto(proto).ok());
}

TEST(GraphTest, RankAndDimErrors) {
  EXPECT_EQ(BuildError(OneOp("[]", "exp")),
            "input 'X' (inputs[0]): shape [] has rank 0; rank must be 1 to 4");
  EXPECT_EQ(BuildError(OneOp("[1, 2, 3, 4, 5]", "exp")),
            "input 'X' (inputs[0]): shape [1, 2, 3, 4, 5] has rank 5; rank must be 1 to 4");
  EXPECT_EQ(BuildError(OneOp("[4, 0]", "exp")),
            "input 'X' (inputs[0]): shape[1] is 0 in shape [4, 0]; dims must be >= 1");
  EXPECT_THAT(BuildError(OneOp("[-3]", "exp")), HasSubstr("shape[0] is -3"));
  EXPECT_TRUE(Build(OneOp("[1, 2, 3, 4]", "exp")).ok());
}

// Size limits: every element count and byte total in checked arithmetic,
// each refusal naming the tensor, the value and the limit.
TEST(GraphTest, SizeLimits) {
  EXPECT_EQ(BuildError(OneOp("[100000, 100000]", "exp")),
            "input 'X' (inputs[0]): shape [100000, 100000] has 10000000000 elements; the limit "
            "is 4294967296 a tensor");
  // 2^32 * 2^32 * 4 * 4 overflows 64 bits: refused, not wrapped.
  EXPECT_THAT(BuildError(OneOp("[4294967296, 4294967296, 4, 4]", "exp")),
              HasSubstr("has more than 2^63 elements"));
  // An intermediate past the limit: [65536, 1] @ [1, 65536].
  EXPECT_THAT(BuildError(R"({"name": "t", "inputs": [
      {"name": "A", "shape": [65536, 1], "dtype": "float32"},
      {"name": "B", "shape": [1, 65536], "dtype": "float32"}],
      "ops": [{"name": "C", "op": "matmul", "inputs": ["A", "B"]}], "outputs": ["C"]})"),
              HasSubstr("op 'C'"));
  absl::StatusOr<yirage::v1::Graph> proto = ParseGraphJson(OneOp("[1024, 1024]", "exp"));
  ASSERT_TRUE(proto.ok());
  GraphLimits limits;
  limits.max_total_bytes = 8 << 20;  // X and Z: 4 MiB each
  EXPECT_TRUE(Graph::FromProto(*proto, limits).ok());
  limits.max_total_bytes = (8 << 20) - 1;
  absl::StatusOr<Graph> over = Graph::FromProto(*proto, limits);
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.status().message(), HasSubstr("take more than 8388607 bytes, the limit"));
  limits = GraphLimits();
  limits.max_ops = 0;
  EXPECT_EQ(Graph::FromProto(*proto, limits).status().message(),
            "ops: the graph has 1 ops; the limit is 0");
}

// Names reach generated code: a bounded length and an identifier charset.
TEST(GraphTest, NameLimits) {
  EXPECT_TRUE(CheckName("O/scores", 128).ok());
  EXPECT_TRUE(CheckName("layer.0:q-proj", 128).ok());
  EXPECT_TRUE(CheckName("_x", 128).ok());
  EXPECT_THAT(CheckName("-x", 128).message(), HasSubstr("'-' at position 0"));
  EXPECT_THAT(CheckName("a b", 128).message(), HasSubstr("' ' at position 1"));
  EXPECT_THAT(CheckName("Y\"); system(\"x", 128).message(), HasSubstr("'\"' at position 1"));
  EXPECT_THAT(CheckName("a\nb", 128).message(), HasSubstr("byte 10 at position 1"));
  EXPECT_EQ(CheckName(std::string(129, 'a'), 128).message(),
            "name is 129 characters long; the limit is 128");
  std::string text = OneOp("[4]", "exp");
  const std::string op_name = R"("name": "Z")";
  text.replace(text.find(op_name), op_name.size(), R"("name": "Z;rm")");
  text.replace(text.find(R"(["Z"])"), 5, R"(["Z;rm"])");
  EXPECT_THAT(BuildError(text), HasSubstr("ops[0]: name 'Z;rm' has ';' at position 1"));
  std::string long_graph = OneOp("[4]", "exp");
  long_graph.replace(long_graph.find(R"("name": "t")"), 11,
                     "\"name\": \"" + std::string(200, 'g') + "\"");
  EXPECT_EQ(BuildError(long_graph), "graph name: name is 200 characters long; the limit is 128");
}

TEST(GraphTest, AxisOutOfRange) {
  EXPECT_EQ(BuildError(OneOp("[4, 8]", "softmax", R"({"axis": 2})")),
            "op 'Z' (ops[0], softmax): attrs.axis is 2 but inputs[0] 'X' has rank 2 (shape [4, "
            "8]); axis must be in [-2, 1]");
  EXPECT_THAT(BuildError(OneOp("[4, 8]", "reduce_sum", R"({"axis": -3})")),
              HasSubstr("attrs.axis is -3"));
  absl::StatusOr<Graph> graph = Build(OneOp("[4, 8]", "softmax", R"({"axis": -2})"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->op(0).axis, 0);
}

TEST(GraphTest, Cycles) {
  const std::string error = BuildError(TwoInputs(R"(
      {"name": "A", "op": "add", "inputs": ["X", "C"]},
      {"name": "B", "op": "exp", "inputs": ["A"]},
      {"name": "C", "op": "neg", "inputs": ["B"]},
      {"name": "D", "op": "add", "inputs": ["C", "Y"]})",
                                                 R"("D")"));
  EXPECT_EQ(error,
            "the ops form a cycle: 'A' (ops[0]) -> 'B' (ops[1]) -> 'C' (ops[2]) -> 'A' (ops[0])");
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "add", "inputs": ["A", "Y"]},
                                 {"name": "B", "op": "add", "inputs": ["X", "A"]})",
                                 R"("B")")),
            "the ops form a cycle: 'A' (ops[0]) -> 'A' (ops[0])");
}

TEST(GraphTest, DuplicateNames) {
  EXPECT_EQ(BuildError(R"({"name": "d", "inputs": [
      {"name": "A", "shape": [4], "dtype": "float32"},
      {"name": "A", "shape": [4], "dtype": "float32"}],
    "ops": [{"name": "S", "op": "add", "inputs": ["A", "A"]}], "outputs": ["S"]})"),
            "input 'A' (inputs[1]): name 'A' is already used by inputs[0]");
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "Y", "op": "exp", "inputs": ["X"]})", R"("Y")")),
            "op 'Y' (ops[0]): name 'Y' is already used by inputs[1]");
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "exp", "inputs": ["X"]},
                                 {"name": "A", "op": "exp", "inputs": ["Y"]})",
                                 R"("A")")),
            "op 'A' (ops[1]): name 'A' is already used by ops[0]");
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "", "op": "exp", "inputs": ["X"]})", R"("A")")),
            "ops[0]: name is empty");
}

TEST(GraphTest, OutputErrors) {
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "add", "inputs": ["X", "Y"]})", "")),
            "outputs: the graph has no outputs; list at least one op");
  EXPECT_EQ(
      BuildError(TwoInputs(R"({"name": "A", "op": "add", "inputs": ["X", "Y"]})", R"("A", "Q")")),
      "outputs[1] 'Q' is not an op name (no op produces it)");
  EXPECT_EQ(
      BuildError(TwoInputs(R"({"name": "A", "op": "add", "inputs": ["X", "Y"]})", R"("A", "X")")),
      "outputs[1] 'X' is a graph input; outputs must be op results");
  EXPECT_EQ(
      BuildError(TwoInputs(R"({"name": "A", "op": "add", "inputs": ["X", "Y"]})", R"("A", "A")")),
      "outputs[1] 'A' is listed twice (also outputs[0])");
}

TEST(GraphTest, UnusedTensors) {
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "add", "inputs": ["X", "Y"]},
                                 {"name": "B", "op": "exp", "inputs": ["A"]},
                                 {"name": "C", "op": "neg", "inputs": ["A"]})",
                                 R"("C")")),
            "op 'B' (ops[1], exp): its result is never used (it is neither a graph output nor "
            "an input of another op)");
  EXPECT_EQ(BuildError(TwoInputs(R"({"name": "A", "op": "exp", "inputs": ["X"]})", R"("A")")),
            "input 'Y' (inputs[1]): never used (no op reads it)");
}

// A plan's graph may list inputs that a rewrite left unread; nothing else.
TEST(GraphTest, UnreadInputsOfPlanGraphs) {
  absl::StatusOr<yirage::v1::Graph> proto =
      ParseGraphJson(TwoInputs(R"({"name": "A", "op": "exp", "inputs": ["X"]})", R"("A")"));
  ASSERT_TRUE(proto.ok()) << proto.status();
  proto->add_unread_inputs("Y");
  absl::StatusOr<Graph> g = Graph::FromProto(*proto);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_TRUE(g->tensor(g->FindTensor("Y")).consumers.empty());
  EXPECT_EQ(g->num_inputs(), 2);
  proto->add_unread_inputs("A");
  EXPECT_EQ(Graph::FromProto(*proto).status().message(),
            "unread_inputs[1] 'A' is not an input of the graph");
  // Listing an input that is read changes nothing.
  proto->clear_unread_inputs();
  proto->add_unread_inputs("X");
  EXPECT_EQ(Graph::FromProto(*proto).status().message(),
            "input 'Y' (inputs[1]): never used (no op reads it)");
}

TEST(GraphTest, AttrErrors) {
  EXPECT_EQ(BuildError(OneOp("[4, 8]", "softmax", R"({"axis": 1.5})")),
            "op 'Z' (ops[0], softmax): attrs.axis must be an integer (got float 1.5)");
  EXPECT_EQ(BuildError(OneOp("[4, 8]", "reduce_max", R"({"keepdim": 0})")),
            "op 'Z' (ops[0], reduce_max): attrs.keepdim must be a bool (got integer 0)");
  EXPECT_EQ(BuildError(OneOp("[4, 8]", "gelu", R"({"approximate": true})")),
            "op 'Z' (ops[0], gelu): attrs.approximate must be a string (got bool true)");
  EXPECT_EQ(BuildError(OneOp("[4, 8]", "gelu", R"({"approximate": "fast"})")),
            "op 'Z' (ops[0], gelu): attrs.approximate must be \"none\" or \"tanh\" (got \"fast\")");
  EXPECT_EQ(BuildError(OneOp("[4, 8]", "rms_norm", R"({"eps": "small"})")),
            "op 'Z' (ops[0], rms_norm): attrs.eps must be a number (got string \"small\")");
  EXPECT_EQ(BuildError(OneOp("[4, 8]", "rms_norm", R"({"eps": -1e-6})")),
            "op 'Z' (ops[0], rms_norm): attrs.eps must be >= 0 (got -1e-06)");
  EXPECT_EQ(BuildError(OneOp("[4, 8]", "softmax", R"({"axis": 0, "dim": 1})")),
            "op 'Z' (ops[0], softmax): unknown attr 'dim' (softmax accepts: axis)");
  EXPECT_EQ(BuildError(OneOp("[4, 8]", "exp", R"({"axis": 0})")),
            "op 'Z' (ops[0], exp): unknown attr 'axis' (exp accepts no attrs)");
  EXPECT_EQ(BuildError(OneOp("[4, 8]", "layer_norm", R"({"keepdim": true})")),
            "op 'Z' (ops[0], layer_norm): unknown attr 'keepdim' (layer_norm accepts: axis, eps)");

  // A scalar that is not finite can only come from a proto.
  yirage::v1::Graph proto = *ParseGraphJson(OneOp("[4]", "add", R"({"scalar": 1.0})"));
  (*proto.mutable_ops(0)->mutable_attrs())["scalar"].set_f(std::numeric_limits<double>::infinity());
  absl::StatusOr<Graph> graph = Graph::FromProto(proto);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message(),
            "op 'Z' (ops[0], add): attrs.scalar must be finite (got inf)");
  (*proto.mutable_ops(0)->mutable_attrs())["scalar"].Clear();
  graph = Graph::FromProto(proto);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message(),
            "op 'Z' (ops[0], add): attrs.scalar must be a number (got no value)");
}

TEST(GraphTest, ReductionShapes) {
  absl::StatusOr<Graph> keep = Build(OneOp("[4, 8, 2]", "reduce_sum", R"({"axis": 1})"));
  ASSERT_TRUE(keep.ok()) << keep.status();
  EXPECT_THAT(keep->tensor(1).shape, ElementsAre(4, 1, 2));
  EXPECT_TRUE(keep->op(0).keepdim);
  absl::StatusOr<Graph> drop =
      Build(OneOp("[4, 8, 2]", "reduce_mean", R"({"axis": 1, "keepdim": false})"));
  ASSERT_TRUE(drop.ok()) << drop.status();
  EXPECT_THAT(drop->tensor(1).shape, ElementsAre(4, 2));
  absl::StatusOr<Graph> last = Build(OneOp("[4, 8]", "reduce_max"));
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->op(0).axis, 1);
  EXPECT_THAT(last->tensor(1).shape, ElementsAre(4, 1));
  EXPECT_THAT(BuildError(OneOp("[8]", "reduce_sum", R"({"keepdim": false})")),
              HasSubstr("op 'Z' (ops[0], reduce_sum): attrs.keepdim is false but inputs[0] 'X' "
                        "has shape [8]: the result would be a scalar"));
}

TEST(GraphTest, NormShapesAndDefaults) {
  absl::StatusOr<Graph> graph = Build(R"({"name": "n", "inputs": [
      {"name": "X", "shape": [2, 4, 8], "dtype": "float32"},
      {"name": "W", "shape": [8], "dtype": "float32"},
      {"name": "B", "shape": [4, 1], "dtype": "float32"}],
    "ops": [{"name": "L", "op": "layer_norm", "inputs": ["X", "W", "B"]},
            {"name": "R", "op": "rms_norm", "inputs": ["L", "W"], "attrs": {"eps": 1}}],
    "outputs": ["R"]})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_DOUBLE_EQ(graph->op(0).eps, 1e-5);
  EXPECT_EQ(graph->op(0).axis, 2);
  EXPECT_DOUBLE_EQ(graph->op(1).eps, 1.0);
  EXPECT_THAT(graph->tensor(4).shape, ElementsAre(2, 4, 8));

  // The weight may not grow X's shape.
  EXPECT_EQ(BuildError(R"({"name": "n", "inputs": [
      {"name": "X", "shape": [8], "dtype": "float32"},
      {"name": "W", "shape": [2, 8], "dtype": "float32"}],
    "ops": [{"name": "R", "op": "rms_norm", "inputs": ["X", "W"]}], "outputs": ["R"]})"),
            "op 'R' (ops[0], rms_norm): inputs[1] 'W' has shape [2, 8] (weight) but inputs[0] "
            "'X' has shape [8]: the weight must broadcast to [8] exactly (broadcasting gives [2, "
            "8])");
  EXPECT_THAT(BuildError(R"({"name": "n", "inputs": [
      {"name": "X", "shape": [4, 8], "dtype": "float32"},
      {"name": "B", "shape": [3], "dtype": "float32"}],
    "ops": [{"name": "L", "op": "layer_norm", "inputs": ["X", "X", "B"]}], "outputs": ["L"]})"),
              HasSubstr("inputs[2] 'B' has shape [3] (bias) but inputs[0] 'X' has shape [4, 8]: "
                        "the bias must broadcast to [4, 8] exactly"));
}

TEST(GraphTest, ConcatShapes) {
  absl::StatusOr<Graph> graph = Build(R"({"name": "c", "inputs": [
      {"name": "A", "shape": [2, 3], "dtype": "float32"},
      {"name": "B", "shape": [2, 5], "dtype": "float32"}],
    "ops": [{"name": "C", "op": "concat", "inputs": ["A", "B", "A"], "attrs": {"axis": -1}}],
    "outputs": ["C"]})");
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_THAT(graph->tensor(2).shape, ElementsAre(2, 11));
  EXPECT_EQ(graph->op(0).axis, 1);

  EXPECT_EQ(BuildError(R"({"name": "c", "inputs": [
      {"name": "A", "shape": [2, 3], "dtype": "float32"},
      {"name": "B", "shape": [2, 5], "dtype": "float32"}],
    "ops": [{"name": "C", "op": "concat", "inputs": ["A", "B"], "attrs": {"axis": 0}}],
    "outputs": ["C"]})"),
            "op 'C' (ops[0], concat): inputs[1] 'B' has shape [2, 5] but inputs[0] 'A' has shape "
            "[2, 3]: all dims except the concat axis 0 must match (dim 1: 5 vs 3)");
  EXPECT_THAT(BuildError(R"({"name": "c", "inputs": [
      {"name": "A", "shape": [2, 3], "dtype": "float32"},
      {"name": "B", "shape": [3], "dtype": "float32"}],
    "ops": [{"name": "C", "op": "concat", "inputs": ["A", "B"], "attrs": {"axis": 0}}],
    "outputs": ["C"]})"),
              HasSubstr("concat inputs must have the same rank (1 vs 2)"));
  EXPECT_EQ(BuildError(R"({"name": "c", "inputs": [
      {"name": "A", "shape": [2, 3], "dtype": "float32"}],
    "ops": [{"name": "C", "op": "concat", "inputs": ["A", "A"]}], "outputs": ["C"]})"),
            "op 'C' (ops[0], concat): attrs.axis is required (an integer)");
}

TEST(GraphTest, UnaryAttrsAndShapes) {
  absl::StatusOr<Graph> graph =
      Build(OneOp("[3, 5]", "gelu", R"({"approximate": "tanh"})", "float16"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_TRUE(graph->op(0).gelu_tanh);
  EXPECT_THAT(graph->tensor(1).shape, ElementsAre(3, 5));
  EXPECT_EQ(graph->tensor(1).dtype, yirage::v1::FLOAT16);
  graph = Build(OneOp("[3, 5]", "gelu"));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_FALSE(graph->op(0).gelu_tanh);
}

TEST(GraphTest, ToleranceMustBeNonNegative) {
  yirage::v1::Graph proto = *ParseGraphJson(OneOp("[4]", "exp"));
  proto.mutable_tolerance()->set_rtol(-0.1);
  absl::StatusOr<Graph> graph = Graph::FromProto(proto);
  ASSERT_FALSE(graph.ok());
  EXPECT_EQ(graph.status().message(), "tolerance.rtol must be finite and >= 0 (got -0.1)");
  proto.mutable_tolerance()->set_rtol(0.1);
  proto.mutable_tolerance()->set_atol(std::numeric_limits<double>::quiet_NaN());
  graph = Graph::FromProto(proto);
  ASSERT_FALSE(graph.ok());
  EXPECT_THAT(std::string(graph.status().message()), HasSubstr("tolerance.atol must be finite"));
}

TEST(GraphHelpersTest, BroadcastShapes) {
  EXPECT_THAT(*BroadcastShapes({4, 1, 8}, {3, 1}), ElementsAre(4, 3, 8));
  EXPECT_THAT(*BroadcastShapes({1}, {2, 3}), ElementsAre(2, 3));
  EXPECT_THAT(*BroadcastShapes({}, {5}), ElementsAre(5));
  EXPECT_THAT(*BroadcastShapes({2, 3}, {2, 3}), ElementsAre(2, 3));
  absl::StatusOr<std::vector<int64_t>> bad = BroadcastShapes({2, 3, 4}, {3, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "shapes [2, 3, 4] and [3, 3] do not broadcast (4 vs 3 at dim -1)");
  bad = BroadcastShapes({2, 3}, {4, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("(2 vs 4 at dim -2)"));
}

TEST(GraphHelpersTest, NamesAndSizes) {
  EXPECT_EQ(ShapeToString({16, 4096}), "[16, 4096]");
  EXPECT_EQ(ShapeToString({}), "[]");
  EXPECT_EQ(DTypeName(yirage::v1::FLOAT16), "float16");
  EXPECT_EQ(DTypeName(yirage::v1::BFLOAT16), "bfloat16");
  EXPECT_EQ(DTypeName(yirage::v1::FLOAT32), "float32");
  EXPECT_EQ(DTypeSize(yirage::v1::FLOAT16), 2);
  EXPECT_EQ(DTypeSize(yirage::v1::BFLOAT16), 2);
  EXPECT_EQ(DTypeSize(yirage::v1::FLOAT32), 4);
  EXPECT_EQ(DTypeSize(yirage::v1::DTYPE_UNSPECIFIED), 0);
  for (yirage::v1::DType dtype : {yirage::v1::FLOAT16, yirage::v1::BFLOAT16, yirage::v1::FLOAT32}) {
    yirage::v1::DType parsed = yirage::v1::DTYPE_UNSPECIFIED;
    ASSERT_TRUE(ParseDType(DTypeName(dtype), &parsed));
    EXPECT_EQ(parsed, dtype);
  }
  yirage::v1::DType parsed = yirage::v1::FLOAT32;
  EXPECT_FALSE(ParseDType("float64", &parsed));
  EXPECT_FALSE(ParseDType("unspecified", &parsed));
  EXPECT_EQ(parsed, yirage::v1::FLOAT32);
}

TEST(GraphHelpersTest, OpTypeNamesAndClasses) {
  int unary = 0, binary = 0, reductions = 0;
  for (int t = static_cast<int>(OpType::kMatmul); t <= static_cast<int>(OpType::kConcat); ++t) {
    const OpType type = static_cast<OpType>(t);
    OpType parsed;
    ASSERT_TRUE(ParseOpType(OpTypeName(type), &parsed)) << OpTypeName(type);
    EXPECT_EQ(parsed, type);
    unary += IsUnaryElementwise(type);
    binary += IsBinaryElementwise(type);
    reductions += IsReduction(type);
    EXPECT_EQ(IsElementwise(type), IsUnaryElementwise(type) || IsBinaryElementwise(type));
  }
  EXPECT_EQ(unary, 12);
  EXPECT_EQ(binary, 7);
  EXPECT_EQ(reductions, 3);
  EXPECT_TRUE(IsUnaryElementwise(OpType::kGelu));
  EXPECT_TRUE(IsUnaryElementwise(OpType::kNeg));
  EXPECT_TRUE(IsBinaryElementwise(OpType::kPow));
  EXPECT_FALSE(IsElementwise(OpType::kMatmul));
  EXPECT_FALSE(IsElementwise(OpType::kSoftmax));
  EXPECT_TRUE(IsReduction(OpType::kReduceMax));
  EXPECT_FALSE(IsReduction(OpType::kRmsNorm));
  OpType parsed = OpType::kAdd;
  EXPECT_FALSE(ParseOpType("Matmul", &parsed));
  EXPECT_EQ(parsed, OpType::kAdd);
}

}  // namespace
}  // namespace yirage::core
