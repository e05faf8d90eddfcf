#include "core/op_table.h"

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

}  // namespace
}  // namespace yirage::core
