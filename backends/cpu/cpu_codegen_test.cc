// Numerics of generated code, per op and for fused row groups, through the
// real backend library and the C ABI, against the float64 reference.
#include <string>
#include <vector>

#include "backends/codegen_util.h"
#include "backends/cpu/cpu_test_util.h"
#include "gtest/gtest.h"

namespace yirage::backends::cpu::testing {
namespace {

using yirage::v1::BFLOAT16;
using yirage::v1::DType;
using yirage::v1::FLOAT16;
using yirage::v1::FLOAT32;

const std::vector<std::string> kUnary = {"neg", "exp",  "log",     "sqrt", "rsqrt", "square",
                                         "abs", "relu", "sigmoid", "tanh", "silu",  "gelu"};
const std::vector<std::string> kBinary = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"};

yirage::v1::Graph UnaryGraph(DType dtype) {
  GraphBuilder b("unary");
  b.Input("x", {5, 37}, dtype).Input("p", {5, 37}, dtype);
  for (const std::string& op : kUnary) {
    // log/sqrt/rsqrt need positive inputs: MakeRandomInputs gives p [0.5, 1.5].
    const bool positive = op == "log" || op == "sqrt" || op == "rsqrt";
    b.Op(op, op, {positive ? "p" : "x"}).Output(op);
  }
  b.Op("gelu_tanh", "gelu", {"x"}, {S("approximate", "tanh")}).Output("gelu_tanh");
  return b.proto();
}

yirage::v1::Graph BinaryGraph(DType dtype) {
  GraphBuilder b("binary");
  b.Input("a", {2, 3, 16}, dtype).Input("b", {3, 1}, dtype).Input("c", {16}, dtype);
  for (const std::string& op : kBinary) {
    b.Op(op + "_bc", op, {"a", "b"}).Output(op + "_bc");  // [3,1] against [2,3,16]
    b.Op(op + "_s", op, {"a"}, {F("scalar", 1.75)}).Output(op + "_s");
    b.Op(op + "_r", op, {"c", "a"}).Output(op + "_r");  // [16] against [2,3,16]
  }
  return b.proto();
}

// Index arithmetic (shared with the CUDA backend): dims a tensor walks as
// one run, or skips as one, merge, so a tensor broadcast along the leading
// dims is one modulo and a contiguous one is the index itself. (The kernels
// that use it are checked against the float64 reference below.)
TEST(CodegenUtilTest, OffsetExprMergesRunsOfDims) {
  using ::yirage::backends::BroadcastStrides;
  using ::yirage::backends::OffsetExpr;
  const std::vector<int64_t> space = {5, 33, 64, 256};
  EXPECT_EQ(OffsetExpr(space, BroadcastStrides(space, space), "e"), "(e)");
  EXPECT_EQ(OffsetExpr(space, BroadcastStrides({1, 33, 64, 256}, space), "e"),
            "(((e) % 540672LL))");
  // Broadcast along the two middle dims: the leading dim, then the last.
  EXPECT_EQ(OffsetExpr(space, BroadcastStrides({5, 1, 1, 256}, space), "e"),
            "(((e) / 540672LL) * 256LL + ((e) % 256LL))");
  // A row vector: one modulo by its length; a column: one division.
  EXPECT_EQ(OffsetExpr(space, BroadcastStrides({256}, space), "e"), "(((e) % 256LL))");
  EXPECT_EQ(OffsetExpr(space, BroadcastStrides({5, 33, 64, 1}, space), "e"), "(((e) / 256LL))");
  // Size-1 dims of the space take no term; 32-bit arithmetic on request.
  EXPECT_EQ(OffsetExpr({1, 7, 1, 12}, BroadcastStrides({1, 12}, {1, 7, 1, 12}), "e", true),
            "(i64)((((unsigned)(e)) % 12u))");
}

TEST(CpuCodegenTest, UnaryFloat32) {
  const yirage::v1::Graph g = UnaryGraph(FLOAT32);
  CheckPlans(g, {AllGeneric(g), AllRowSingles(g, Rows(2, 0, 0, 8)), OneRowGroup(g, Rows(3)),
                 OneRowGroup(g, Cols(16))});
}

TEST(CpuCodegenTest, Unary16Bit) {
  for (DType dt : {FLOAT16, BFLOAT16}) {
    SCOPED_TRACE(dt);
    const yirage::v1::Graph g = UnaryGraph(dt);
    CheckPlans(g, {AllGeneric(g), OneRowGroup(g, Rows(2)), OneRowGroup(g, Cols(8))});
  }
}

// exp, tanh and erf are the backend's own vectorizable code (yr_expf,
// yr_tanhf, yr_erff): over inputs scaled to +-85 (from float's smallest
// normals to near its largest) and to +-0.01 (tanh's series), in every kernel
// form.
TEST(CpuCodegenTest, TranscendentalsOverTheirRange) {
  GraphBuilder b("transcendentals");
  b.Input("x", {4, 1000}, FLOAT32);
  b.Op("wide", "mul", {"x"}, {F("scalar", 85.0)});  // e^85 still fits a float
  b.Op("narrow", "mul", {"x"}, {F("scalar", 0.01)});
  for (const std::string in : {"wide", "narrow"}) {
    for (const std::string op : {"exp", "tanh", "sigmoid", "silu", "gelu"}) {
      b.Op(op + "_" + in, op, {in}).Output(op + "_" + in);
    }
    b.Op("gelu_tanh_" + in, "gelu", {in}, {S("approximate", "tanh")}).Output("gelu_tanh_" + in);
    b.Op("softmax_" + in, "softmax", {in}).Output("softmax_" + in);
  }
  const yirage::v1::Graph g = b.proto();
  CheckPlans(g, {AllGeneric(g), AllRowSingles(g, Rows(2, 0, 0, 8)), OneRowGroup(g, Rows(3)),
                 OneRowGroup(g, Cols(16))});
}

TEST(CpuCodegenTest, BinaryBroadcastAndScalarFloat32) {
  const yirage::v1::Graph g = BinaryGraph(FLOAT32);
  CheckPlans(g, {AllGeneric(g), AllRowSingles(g, Rows(4)), OneRowGroup(g, Rows(5, 0, 0, 4)),
                 OneRowGroup(g, Cols(5))});
}

TEST(CpuCodegenTest, Binary16Bit) {
  for (DType dt : {FLOAT16, BFLOAT16}) {
    SCOPED_TRACE(dt);
    const yirage::v1::Graph g = BinaryGraph(dt);
    CheckPlans(g, {AllGeneric(g), OneRowGroup(g, Rows(4)), OneRowGroup(g, Cols(7))});
  }
}

TEST(CpuCodegenTest, Matmul) {
  GraphBuilder b("matmul");
  b.Input("a3", {2, 5, 12}).Input("w", {12, 7});
  b.Input("a2", {5, 12}).Input("wb", {3, 12, 7});
  b.Input("bt", {2, 7, 12});
  b.Input("a4", {2, 1, 5, 12});
  b.Op("plain", "matmul", {"a3", "w"}).Output("plain");
  b.Op("a_bcast", "matmul", {"a2", "wb"}).Output("a_bcast");  // [3,5,7]
  b.Op("trans", "matmul", {"a3", "bt"}, {B("transpose_b", true)}).Output("trans");
  b.Op("batch4", "matmul", {"a4", "wb"}).Output("batch4");  // [2,3,5,7]
  const yirage::v1::Graph g = b.proto();
  CheckPlans(g, {AllGeneric(g), AllRowSingles(g, Rows(3, 4, 5, 8, 2)), AllRowSingles(g, Rows(16)),
                 AllRowSingles(g, Cols(3, 5)), AllRowSingles(g, Cols())});
}

TEST(CpuCodegenTest, Matmul16Bit) {
  for (DType dt : {FLOAT16, BFLOAT16}) {
    SCOPED_TRACE(dt);
    GraphBuilder b("matmul16");
    b.Input("a", {2, 6, 40}, dt).Input("w", {40, 33}, dt).Input("wt", {33, 40}, dt);
    b.Op("y", "matmul", {"a", "w"}).Output("y");
    b.Op("yt", "matmul", {"a", "wt"}, {B("transpose_b", true)}).Output("yt");
    const yirage::v1::Graph g = b.proto();
    CheckPlans(g, {AllGeneric(g), AllRowSingles(g, Rows(5, 16, 16)), OneRowGroup(g, Cols(8))});
  }
}

TEST(CpuCodegenTest, Reductions) {
  GraphBuilder b("reduce");
  b.Input("x", {3, 4, 6});
  std::vector<std::string> last;
  for (const std::string op : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    for (int axis : {2, 1, 0, -1}) {
      for (bool keep : {true, false}) {
        const std::string name = op + "_a" + std::to_string(axis + 3) + (keep ? "_k" : "_n");
        b.Op(name, op, {"x"}, {I("axis", axis), B("keepdim", keep)}).Output(name);
        if (axis == 2 || axis == -1) last.push_back(name);
      }
    }
  }
  // An in-group consumer of a keepdim reduction (width-1 broadcast).
  b.Op("centered", "sub", {"x", "reduce_mean_a5_k"}).Output("centered");
  const yirage::v1::Graph g = b.proto();
  std::vector<KernelSpec> generic = AllGeneric(g);
  // Row kernels for the last-axis reductions, generic for the others.
  auto row_plan = [&](yirage::v1::Schedule s) {
    std::vector<KernelSpec> ks;
    for (const auto& op : g.ops()) {
      if (op.name() == "centered" || op.name() == "reduce_mean_a5_k") continue;
      const bool is_last = std::find(last.begin(), last.end(), op.name()) != last.end();
      ks.push_back(is_last ? Row({op.name()}, s) : Generic(op.name()));
    }
    ks.push_back(Row({"reduce_mean_a5_k", "centered"}, s));
    return ks;
  };
  CheckPlans(g, {generic, row_plan(Rows(5)), row_plan(Cols())});
}

TEST(CpuCodegenTest, NormsAndSoftmax) {
  GraphBuilder b("norms");
  b.Input("x", {6, 10}).Input("w", {10}).Input("bias", {10});
  b.Input("x3", {4, 5, 6}).Input("w1", {5, 1}).Input("w0", {4, 1, 1});
  b.Op("rms", "rms_norm", {"x"}).Output("rms");
  b.Op("rms_w", "rms_norm", {"x", "w"}, {F("eps", 1e-3)}).Output("rms_w");
  b.Op("ln", "layer_norm", {"x"}).Output("ln");
  b.Op("ln_w", "layer_norm", {"x", "w"}).Output("ln_w");
  b.Op("ln_wb", "layer_norm", {"x", "w", "bias"}, {F("eps", 1e-2)}).Output("ln_wb");
  b.Op("sm", "softmax", {"x"}).Output("sm");
  b.Op("rms_ax1", "rms_norm", {"x3", "w1"}, {I("axis", 1)}).Output("rms_ax1");
  b.Op("ln_ax0", "layer_norm", {"x3", "w0"}, {I("axis", 0)}).Output("ln_ax0");
  b.Op("sm_ax1", "softmax", {"x3"}, {I("axis", 1)}).Output("sm_ax1");
  const yirage::v1::Graph g = b.proto();
  auto row_plan = [&](yirage::v1::Schedule s) {
    return std::vector<KernelSpec>{Row({"rms", "rms_w", "ln", "ln_w", "ln_wb", "sm"}, s),
                                   Generic("rms_ax1"), Generic("ln_ax0"), Generic("sm_ax1")};
  };
  CheckPlans(g, {AllGeneric(g), row_plan(Rows(4, 0, 0, 8)), row_plan(Cols())});
}

TEST(CpuCodegenTest, Concat) {
  GraphBuilder b("concat");
  b.Input("a", {3, 4}).Input("b", {3, 2}).Input("c", {2, 4});
  b.Input("p", {2, 3, 4}).Input("q", {2, 1, 4});
  b.Op("ea", "exp", {"a"});
  b.Op("last", "concat", {"ea", "b", "a"}, {I("axis", -1)}).Output("last");
  b.Op("first", "concat", {"a", "c"}, {I("axis", 0)}).Output("first");
  b.Op("mid", "concat", {"p", "q"}, {I("axis", 1)}).Output("mid");
  const yirage::v1::Graph g = b.proto();
  auto row_plan = [&](yirage::v1::Schedule s) {
    return std::vector<KernelSpec>{Row({"ea", "last"}, s), Generic("first"), Generic("mid")};
  };
  CheckPlans(g, {AllGeneric(g), row_plan(Rows(2)), row_plan(Cols())});
}

yirage::v1::Graph MlpGraph(DType dt) {
  GraphBuilder b("mlp");
  b.Input("x", {7, 32}, dt).Input("nw", {32}, dt).Input("wg", {32, 24}, dt);
  b.Input("wu", {32, 24}, dt).Input("wd", {24, 32}, dt);
  b.Op("n", "rms_norm", {"x"});
  b.Op("m", "mul", {"n", "nw"});
  b.Op("g", "matmul", {"m", "wg"});
  b.Op("s", "silu", {"g"}).Output("s");
  b.Op("u", "matmul", {"m", "wu"});
  b.Op("h", "mul", {"s", "u"});
  b.Op("d", "matmul", {"h", "wd"}).Output("d");
  return b.proto();
}

TEST(CpuCodegenTest, FusedMlpGroups) {
  for (DType dt : {FLOAT32, FLOAT16, BFLOAT16}) {
    SCOPED_TRACE(dt);
    const yirage::v1::Graph g = MlpGraph(dt);
    const std::vector<std::string> all = {"n", "m", "g", "s", "u", "h", "d"};
    CheckPlans(g, {
                      AllGeneric(g),
                      {Row(all, Rows(3, 8, 8, 8, 2))},
                      {Row(all, Cols(8, 16))},
                      // rms_norm->mul->matmul, then matmul->silu->mul with a second matmul;
                      // "m" and "s" cross kernels through scratch ("s" is also an output).
                      {Row({"n", "m", "g", "s"}, Rows(2)), Row({"u", "h", "d"}, Rows(4, 16))},
                      {Row({"n", "m"}, Cols()), Generic("g"), Row({"s", "u", "h"}, Rows(8)),
                       Row({"d"}, Cols(5))},
                  });
  }
}

TEST(CpuCodegenTest, FusedSoftmaxMatmul) {
  GraphBuilder b("attn");
  b.Input("q", {2, 4, 6, 8}).Input("k", {2, 4, 9, 8}).Input("v", {2, 1, 9, 5});
  b.Op("s", "matmul", {"q", "k"}, {B("transpose_b", true)});
  b.Op("sc", "mul", {"s"}, {F("scalar", 0.35)});
  b.Op("p", "softmax", {"sc"});
  b.Op("o", "matmul", {"p", "v"}).Output("o");
  const yirage::v1::Graph g = b.proto();
  CheckPlans(g, {AllGeneric(g),
                 OneRowGroup(g, Rows(5, 2, 3)),
                 OneRowGroup(g, Cols(2)),
                 {Row({"s", "sc"}, Rows(7)), Row({"p", "o"}, Rows(1))}});
}

}  // namespace
}  // namespace yirage::backends::cpu::testing
