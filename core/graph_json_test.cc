#include "core/graph_json.h"

#include <string>
#include <string_view>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kExample = R"({
  "name": "rms_norm_linear",
  "inputs":  [{"name": "X", "shape": [16, 4096], "dtype": "float16"},
              {"name": "G", "shape": [4096], "dtype": "bfloat16"},
              {"name": "W", "shape": [4096, 6144], "dtype": "float32"}],
  "ops":     [{"name": "N", "op": "rms_norm", "inputs": ["X"], "attrs": {"axis": -1, "eps": 1e-6}},
              {"name": "S", "op": "mul", "inputs": ["N", "G"]},
              {"name": "Y", "op": "matmul", "inputs": ["S", "W"],
               "attrs": {"transpose_b": false, "mode": "x", "scale": 2.0}}],
  "outputs": ["Y"],
  "tolerance": {"rtol": 0.01, "atol": 0.02}
})";

std::string ErrorOf(std::string_view text) {
  absl::StatusOr<yirage::v1::Graph> graph = ParseGraphJson(text);
  EXPECT_FALSE(graph.ok()) << text;
  if (graph.ok()) return "";
  EXPECT_EQ(graph.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(graph.status().message());
}

// `kExample` with `from` replaced by `to` (which must occur once).
std::string Edit(std::string_view from, std::string_view to) {
  std::string text(kExample);
  const size_t pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  EXPECT_EQ(text.find(from, pos + 1), std::string::npos) << from;
  if (pos == std::string::npos) return text;
  return text.replace(pos, from.size(), to);
}

TEST(GraphJsonTest, ParsesEveryField) {
  absl::StatusOr<yirage::v1::Graph> graph = ParseGraphJson(kExample);
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->name(), "rms_norm_linear");
  ASSERT_EQ(graph->inputs_size(), 3);
  EXPECT_EQ(graph->inputs(0).name(), "X");
  EXPECT_THAT(graph->inputs(0).shape(), ::testing::ElementsAre(16, 4096));
  EXPECT_EQ(graph->inputs(0).dtype(), yirage::v1::FLOAT16);
  EXPECT_EQ(graph->inputs(1).dtype(), yirage::v1::BFLOAT16);
  EXPECT_EQ(graph->inputs(2).dtype(), yirage::v1::FLOAT32);
  ASSERT_EQ(graph->ops_size(), 3);
  const yirage::v1::OpNode& norm = graph->ops(0);
  EXPECT_EQ(norm.op(), "rms_norm");
  EXPECT_THAT(norm.inputs(), ::testing::ElementsAre("X"));
  ASSERT_EQ(norm.attrs().size(), 2u);
  EXPECT_EQ(norm.attrs().at("axis").value_case(), yirage::v1::AttrValue::kI);
  EXPECT_EQ(norm.attrs().at("axis").i(), -1);
  EXPECT_EQ(norm.attrs().at("eps").value_case(), yirage::v1::AttrValue::kF);
  EXPECT_DOUBLE_EQ(norm.attrs().at("eps").f(), 1e-6);
  EXPECT_TRUE(graph->ops(1).attrs().empty());
  const auto& attrs = graph->ops(2).attrs();
  EXPECT_EQ(attrs.at("transpose_b").value_case(), yirage::v1::AttrValue::kB);
  EXPECT_FALSE(attrs.at("transpose_b").b());
  EXPECT_EQ(attrs.at("mode").s(), "x");
  // 2.0 is written with a fraction, so it is a float, not an integer.
  EXPECT_EQ(attrs.at("scale").value_case(), yirage::v1::AttrValue::kF);
  EXPECT_THAT(graph->outputs(), ::testing::ElementsAre("Y"));
  EXPECT_DOUBLE_EQ(graph->tolerance().rtol(), 0.01);
  EXPECT_DOUBLE_EQ(graph->tolerance().atol(), 0.02);
}

TEST(GraphJsonTest, ToleranceIsOptional) {
  absl::StatusOr<yirage::v1::Graph> graph = ParseGraphJson(Edit(R"(,
  "tolerance": {"rtol": 0.01, "atol": 0.02})",
                                                                ""));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_FALSE(graph->has_tolerance());
  graph = ParseGraphJson(Edit(R"("rtol": 0.01, )", ""));
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(graph->tolerance().rtol(), 0);
  EXPECT_DOUBLE_EQ(graph->tolerance().atol(), 0.02);
}

TEST(GraphJsonTest, SyntaxErrorsGivePosition) {
  const std::string error = ErrorOf("{\n  \"name\": \"x\",\n  \"inputs\": [1,, 2]\n}");
  EXPECT_THAT(error, HasSubstr("invalid JSON at line 3, column 16 (byte 32)"));
  EXPECT_THAT(ErrorOf(""), HasSubstr("invalid JSON at line 1, column 1"));
  EXPECT_THAT(ErrorOf("{\"name\": \"x\"} trailing"), HasSubstr("invalid JSON at line 1"));
}

TEST(GraphJsonTest, MissingFields) {
  EXPECT_EQ(ErrorOf(Edit(R"("name": "rms_norm_linear",)", "")),
            "name: missing (expected a string)");
  EXPECT_EQ(ErrorOf(R"({"name": "g", "ops": [], "outputs": []})"),
            "inputs: missing (expected an array)");
  EXPECT_EQ(ErrorOf(R"({"name": "g", "inputs": [], "outputs": []})"),
            "ops: missing (expected an array)");
  EXPECT_EQ(ErrorOf(R"({"name": "g", "inputs": [], "ops": []})"),
            "outputs: missing (expected an array of strings)");
  EXPECT_EQ(ErrorOf(Edit(R"({"name": "G", "shape": [4096], "dtype": "bfloat16"})",
                         R"({"name": "G", "dtype": "bfloat16"})")),
            "inputs[1].shape: missing (expected an array of integers)");
  EXPECT_EQ(ErrorOf(Edit(R"({"name": "G", "shape": [4096], "dtype": "bfloat16"})",
                         R"({"name": "G", "shape": [4096]})")),
            "inputs[1].dtype: missing (expected a string)");
  EXPECT_EQ(ErrorOf(Edit(R"({"name": "S", "op": "mul", "inputs": ["N", "G"]})",
                         R"({"name": "S", "inputs": ["N", "G"]})")),
            "ops[1].op: missing (expected a string)");
  EXPECT_EQ(ErrorOf(Edit(R"({"name": "S", "op": "mul", "inputs": ["N", "G"]})",
                         R"({"op": "mul", "inputs": ["N", "G"]})")),
            "ops[1].name: missing (expected a string)");
  EXPECT_EQ(ErrorOf(Edit(R"({"name": "S", "op": "mul", "inputs": ["N", "G"]})",
                         R"({"name": "S", "op": "mul"})")),
            "ops[1].inputs: missing (expected an array of strings)");
}

TEST(GraphJsonTest, WrongTypes) {
  EXPECT_EQ(ErrorOf("[1, 2]"), "graph: expected a JSON object, got array");
  EXPECT_EQ(ErrorOf(Edit(R"("name": "rms_norm_linear")", R"("name": 7)")),
            "name: expected a string, got integer");
  EXPECT_EQ(ErrorOf(Edit(R"("shape": [4096],)", R"("shape": [4096.5],)")),
            "inputs[1].shape[0]: expected an integer, got number");
  EXPECT_EQ(ErrorOf(Edit(R"("shape": [4096],)", R"("shape": 4096,)")),
            "inputs[1].shape: expected an array of integers, got integer");
  EXPECT_EQ(ErrorOf(Edit(R"("shape": [4096],)", R"("shape": [18446744073709551615],)")),
            "inputs[1].shape[0]: integer 18446744073709551615 is out of range");
  EXPECT_EQ(ErrorOf(Edit(R"("bfloat16")", R"("float64")")),
            "inputs[1].dtype: unknown dtype 'float64' (expected float16, bfloat16 or float32)");
  EXPECT_EQ(ErrorOf(Edit(R"("inputs": ["N", "G"])", R"("inputs": ["N", 3])")),
            "ops[1].inputs[1]: expected a string, got integer");
  EXPECT_EQ(ErrorOf(Edit(R"("inputs": ["N", "G"])", R"("inputs": "N")")),
            "ops[1].inputs: expected an array of strings, got string");
  EXPECT_EQ(ErrorOf(Edit(R"("axis": -1,)", R"("axis": [-1],)")),
            "ops[0].attrs.axis: expected a number, string or boolean, got array");
  EXPECT_EQ(ErrorOf(Edit(R"("axis": -1,)", R"("axis": null,)")),
            "ops[0].attrs.axis: expected a number, string or boolean, got null");
  EXPECT_EQ(ErrorOf(Edit(R"("inputs": ["N", "G"])", R"("inputs": ["N", "G"], "attrs": [])")),
            "ops[1].attrs: expected an object, got array");
  EXPECT_EQ(ErrorOf(Edit(R"("rtol": 0.01)", R"("rtol": "0.01")")),
            "tolerance.rtol: expected a number, got string");
  EXPECT_EQ(ErrorOf(Edit(R"("outputs": ["Y"])", R"("outputs": "Y")")),
            "outputs: expected an array of strings, got string");
  EXPECT_EQ(ErrorOf(Edit(R"("inputs":  [{"name": "X")", R"("inputs":  [7, {"name": "X")")),
            "inputs[0]: expected an object, got integer");
}

TEST(GraphJsonTest, UnknownFields) {
  EXPECT_EQ(ErrorOf(Edit(R"("outputs": ["Y"])", R"("outputs": ["Y"], "tolernace": {})")),
            "graph: unknown field 'tolernace' (expected: name, inputs, ops, outputs, tolerance)");
  EXPECT_EQ(
      ErrorOf(Edit(R"({"name": "S", "op": "mul")", R"({"name": "S", "type": 1, "op": "mul")")),
      "ops[1]: unknown field 'type' (expected: name, op, inputs, attrs)");
  EXPECT_EQ(ErrorOf(Edit(R"("dtype": "bfloat16")", R"("dtype": "bfloat16", "layout": "nchw")")),
            "inputs[1]: unknown field 'layout' (expected: name, shape, dtype)");
  EXPECT_EQ(ErrorOf(Edit(R"("atol": 0.02)", R"("atol": 0.02, "mode": 1)")),
            "tolerance: unknown field 'mode' (expected: rtol, atol)");
}

TEST(GraphJsonTest, RoundTrip) {
  absl::StatusOr<yirage::v1::Graph> graph = ParseGraphJson(kExample);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::string text = GraphToJson(*graph);
  absl::StatusOr<yirage::v1::Graph> again = ParseGraphJson(text);
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << text;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*graph, *again)) << text;
  // Same text again: the writer is deterministic.
  EXPECT_EQ(GraphToJson(*again), text);
  EXPECT_THAT(text, HasSubstr(R"("scale": 2.0)"));
  EXPECT_THAT(text, HasSubstr(R"("axis": -1)"));
  EXPECT_THAT(text, HasSubstr(R"("transpose_b": false)"));
  EXPECT_THAT(text, HasSubstr(R"("dtype": "bfloat16")"));

  // No tolerance field when unset.
  graph->clear_tolerance();
  EXPECT_THAT(GraphToJson(*graph), ::testing::Not(HasSubstr("tolerance")));
}

}  // namespace
}  // namespace yirage::core
