#include "core/op_table.h"

#include <cmath>
#include <limits>
#include <set>
#include <string>

#include "core/cost_model.h"
#include "core/graph.h"
#include "core/graph_json.h"
#include "gtest/gtest.h"

namespace yirage::core {
namespace {

// Every op has one row, found by name and by type, with a unique name.
TEST(OpTableTest, EveryOpHasOneRowFoundByNameAndType) {
  std::set<std::string_view> names;
  for (const OpSpec& spec : AllOpSpecs()) {
    EXPECT_TRUE(names.insert(spec.name).second) << spec.name;
    EXPECT_EQ(&SpecOf(spec.type), &spec);
    ASSERT_NE(FindOpSpec(spec.name), nullptr);
    EXPECT_EQ(FindOpSpec(spec.name)->type, spec.type);
    OpType parsed;
    ASSERT_TRUE(ParseOpType(spec.name, &parsed));
    EXPECT_EQ(parsed, spec.type);
    EXPECT_EQ(OpTypeName(spec.type), spec.name);
  }
  EXPECT_EQ(FindOpSpec("frobnicate"), nullptr);
}

// The graph parser accepts exactly the attributes the table lists.
TEST(OpTableTest, GraphsAcceptTheAttributesTheTableLists) {
  auto parse = [](const std::string& attrs) {
    auto proto = ParseGraphJson(R"({"name": "g",
        "inputs": [{"name": "X", "shape": [4, 8], "dtype": "float32"}],
        "ops": [{"name": "Y", "op": "gelu", "inputs": ["X"], "attrs": {)" +
                                attrs + R"(}}], "outputs": ["Y"]})");
    if (!proto.ok()) return proto.status();
    return Graph::FromProto(*proto).status();
  };
  EXPECT_TRUE(parse(R"("approximate": "tanh")").ok());
  const absl::Status unknown = parse(R"("axis": 1)");
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("gelu accepts: approximate"), absl::string_view::npos)
      << unknown;
}

// The cost model's flops come from the table's basis and rate.
TEST(OpTableTest, FlopsFollowTheTable) {
  auto proto = ParseGraphJson(R"({"name": "g",
      "inputs": [{"name": "X", "shape": [4, 8], "dtype": "float32"},
                 {"name": "W", "shape": [8, 16], "dtype": "float32"}],
      "ops": [{"name": "M", "op": "matmul", "inputs": ["X", "W"]},
              {"name": "E", "op": "exp", "inputs": ["M"]},
              {"name": "R", "op": "reduce_sum", "inputs": ["E"], "attrs": {"axis": 1}},
              {"name": "S", "op": "slice", "inputs": ["E"],
               "attrs": {"axis": 1, "start": 0, "end": 4}}],
      "outputs": ["R", "S"]})");
  ASSERT_TRUE(proto.ok()) << proto.status();
  auto g = Graph::FromProto(*proto);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_DOUBLE_EQ(OpFlops(*g, 0), 2.0 * 4 * 16 * 8);  // 2 M N K
  EXPECT_DOUBLE_EQ(OpFlops(*g, 1), SpecOf(OpType::kExp).flops_per_element * 64);
  EXPECT_DOUBLE_EQ(OpFlops(*g, 2), 64);  // per input element
  EXPECT_DOUBLE_EQ(OpFlops(*g, 3), 0);
}

// Elementwise ops carry the reference's element function; no other op does.
TEST(OpTableTest, ElementwiseOpsCarryTheReferenceValue) {
  for (const OpSpec& spec : AllOpSpecs()) {
    const bool elementwise = spec.kind == OpKind::kUnary || spec.kind == OpKind::kBinary;
    EXPECT_EQ(spec.element != nullptr, elementwise) << spec.name;
    EXPECT_GE(spec.min_inputs, 1) << spec.name;
    EXPECT_LE(spec.min_inputs, spec.max_inputs) << spec.name;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_DOUBLE_EQ(SpecOf(OpType::kSub).element(5, 3, false), 2);
  EXPECT_DOUBLE_EQ(SpecOf(OpType::kRsqrt).element(4, 0, false), 0.5);
  EXPECT_TRUE(std::isnan(SpecOf(OpType::kMaximum).element(nan, 1, false)));
  EXPECT_TRUE(std::isnan(SpecOf(OpType::kRelu).element(nan, 0, false)));
  EXPECT_DOUBLE_EQ(SpecOf(OpType::kRelu).element(-2, 0, false), 0);
  // gelu: erf form, and the tanh approximation within 1e-3 of it at 1.
  const double erf_form = SpecOf(OpType::kGelu).element(1, 0, false);
  EXPECT_NEAR(erf_form, 0.5 * (1 + std::erf(1 / std::sqrt(2.0))), 1e-15);
  EXPECT_NEAR(SpecOf(OpType::kGelu).element(1, 0, true), erf_form, 1e-3);
  EXPECT_NE(SpecOf(OpType::kGelu).element(1, 0, true), erf_form);
}

// The parser counts inputs by the table's row.
TEST(OpTableTest, InputCountsFollowTheTable) {
  auto parse = [](const std::string& op, const std::string& inputs) {
    auto proto = ParseGraphJson(R"({"name": "g",
        "inputs": [{"name": "X", "shape": [4, 8], "dtype": "float32"},
                   {"name": "G", "shape": [8], "dtype": "float32"}],
        "ops": [{"name": "Y", "op": ")" +
                                op + R"(", "inputs": [)" + inputs + R"(]}], "outputs": ["Y"]})");
    if (!proto.ok()) return proto.status();
    return Graph::FromProto(*proto).status();
  };
  EXPECT_TRUE(parse("rms_norm", R"("X", "G")").ok());
  const absl::Status norm = parse("rms_norm", R"("X", "G", "G")");
  EXPECT_NE(norm.message().find("expects 1 to 2 inputs, got 3"), absl::string_view::npos) << norm;
  const absl::Status concat = parse("concat", R"("X")");
  EXPECT_NE(concat.message().find("expects at least 2 inputs, got 1"), absl::string_view::npos)
      << concat;
  const absl::Status exp = parse("exp", R"("X", "X")");
  EXPECT_NE(exp.message().find("expects 1 input, got 2"), absl::string_view::npos) << exp;
}

}  // namespace
}  // namespace yirage::core
