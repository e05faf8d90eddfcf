// Generated CUDA code for every op and plan kind: compile-only checks (NVRTC,
// no GPU needed; they run on the CPU-only CI machine) and numerics against the
// float64 reference (NEEDS A GPU: skipped, saying so, without one).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_test_util.h"
#include "gtest/gtest.h"

namespace yirage::backends::cuda::testing {
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
    b.Op(op + "_bc", op, {"a", "b"}).Output(op + "_bc");
    b.Op(op + "_s", op, {"a"}, {F("scalar", 1.75)}).Output(op + "_s");
    b.Op(op + "_r", op, {"c", "a"}).Output(op + "_r");
  }
  return b.proto();
}

yirage::v1::Graph ReduceNormGraph(DType dtype) {
  GraphBuilder b("reduce_norm");
  b.Input("x", {3, 4, 300}, dtype).Input("w", {300}, dtype).Input("bias", {300}, dtype);
  b.Op("sum", "reduce_sum", {"x"}, {I("axis", -1)}).Output("sum");
  b.Op("mean", "reduce_mean", {"x"}, {I("axis", -1), B("keepdim", false)}).Output("mean");
  b.Op("mx", "reduce_max", {"x"}, {I("axis", -1)}).Output("mx");
  b.Op("sum1", "reduce_sum", {"x"}, {I("axis", 1)}).Output("sum1");
  b.Op("rms", "rms_norm", {"x", "w"}).Output("rms");
  b.Op("ln", "layer_norm", {"x", "w", "bias"}).Output("ln");
  b.Op("sm", "softmax", {"x"}).Output("sm");
  b.Op("sm0", "softmax", {"x"}, {I("axis", 1)}).Output("sm0");
  b.Op("centered", "sub", {"x", "mx"}).Output("centered");
  b.Op("cat", "concat", {"x", "rms"}, {I("axis", -1)}).Output("cat");
  b.Op("cat1", "concat", {"x", "sm0"}, {I("axis", 1)}).Output("cat1");
  return b.proto();
}

// Matmuls: broadcast batches, transposed B, odd shapes, and fused
// prologue/epilogue groups.
yirage::v1::Graph MatmulGraph(DType dtype) {
  GraphBuilder b("matmul");
  b.Input("a3", {2, 5, 48}, dtype).Input("w", {48, 40}, dtype);
  b.Input("a2", {5, 48}, dtype).Input("wb", {3, 48, 40}, dtype);
  b.Input("bt", {2, 40, 48}, dtype).Input("odd", {7, 13}, dtype).Input("wodd", {13, 9}, dtype);
  b.Op("plain", "matmul", {"a3", "w"}).Output("plain");
  b.Op("a_bcast", "matmul", {"a2", "wb"}).Output("a_bcast");
  b.Op("trans", "matmul", {"a3", "bt"}, {B("transpose_b", true)}).Output("trans");
  b.Op("small", "matmul", {"odd", "wodd"}).Output("small");
  // K 7: one K lane, the block's rows over the other threads.
  b.Input("at", {2, 30, 7}, dtype).Input("w7", {2, 7, 7}, dtype);
  b.Op("tiny", "matmul", {"at", "w7"}, {B("transpose_b", true)}).Output("tiny");
  // K 12 with B^T: 16-bit B rows read 4 values (8 bytes) at a time.
  b.Input("a12", {2, 9, 12}, dtype).Input("b12", {2, 10, 12}, dtype);
  b.Op("k12", "matmul", {"a12", "b12"}, {B("transpose_b", true)}).Output("k12");
  return b.proto();
}

// C = relu(A @ B + bias) * 0.5 - R (B as [N, K] where transpose_b), and the
// plain product D = A @ B: the GEMM family's chains.
yirage::v1::Graph GemmGraph(DType dtype, int64_t m, int64_t n, int64_t k, bool transpose_b) {
  GraphBuilder b(absl::StrCat("gemm_", m, "x", n, "x", k, transpose_b ? "_nk" : ""));
  b.Input("a", {m, k}, dtype)
      .Input("b", transpose_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, dtype)
      .Input("bias", {n}, dtype)
      .Input("r", {m, n}, dtype);
  b.Op("p", "matmul", {"a", "b"}, {B("transpose_b", transpose_b)});
  b.Op("pb", "add", {"p", "bias"}).Op("act", "relu", {"pb"});
  b.Op("half", "mul", {"act"}, {F("scalar", 0.5)}).Op("c", "sub", {"half", "r"}).Output("c");
  b.Op("d", "matmul", {"a", "b"}, {B("transpose_b", transpose_b)}).Output("d");
  return b.proto();
}

// GemmGraph's chains over lead dims `lead`: A [lead..., M, K]; B with the
// same lead dims where `batched` (a batch of products), else 2-D (A's lead
// dims are rows); bias [N], R C's shape.
yirage::v1::Graph BatchedGemmGraph(DType dtype, std::vector<int64_t> lead, int64_t m, int64_t n,
                                   int64_t k, bool transpose_b, bool batched) {
  auto shape = [&](int64_t r, int64_t c, bool with_lead) {
    std::vector<int64_t> s = with_lead ? lead : std::vector<int64_t>{};
    s.push_back(r);
    s.push_back(c);
    return s;
  };
  GraphBuilder b(absl::StrCat(batched ? "batched_gemm_" : "rows_gemm_", lead.size(), "_", m, "x", n,
                              "x", k, transpose_b ? "_nk" : ""));
  b.Input("a", shape(m, k, true), dtype)
      .Input("b", transpose_b ? shape(n, k, batched) : shape(k, n, batched), dtype)
      .Input("bias", {n}, dtype)
      .Input("r", shape(m, n, true), dtype);
  b.Op("p", "matmul", {"a", "b"}, {B("transpose_b", transpose_b)});
  b.Op("pb", "add", {"p", "bias"}).Op("act", "relu", {"pb"});
  b.Op("half", "mul", {"act"}, {F("scalar", 0.5)}).Op("c", "sub", {"half", "r"}).Output("c");
  b.Op("d", "matmul", {"a", "b"}, {B("transpose_b", transpose_b)}).Output("d");
  return b.proto();
}

// H = silu(A @ W1) * (A @ W3 * 0.5) + bias (the product first where
// `up_first`), then C = H @ WD - R: the GEMM family's gated form, then a
// GEMM reading the first kernel's output.
yirage::v1::Graph GatedGemmGraph(DType dtype, int64_t m, int64_t n, int64_t k, bool transpose_b,
                                 bool up_first) {
  GraphBuilder b(absl::StrCat("gated_gemm_", m, "x", n, "x", k, transpose_b ? "_nk" : ""));
  const std::vector<int64_t> w =
      transpose_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
  b.Input("a", {m, k}, dtype).Input("w1", w, dtype).Input("w3", w, dtype);
  b.Input("bias", {n}, dtype).Input("wd", {n, 72}, dtype).Input("r", {m, 72}, dtype);
  b.Op("g", "matmul", {"a", "w1"}, {B("transpose_b", transpose_b)});
  b.Op("u", "matmul", {"a", "w3"}, {B("transpose_b", transpose_b)});
  b.Op("ga", "silu", {"g"}).Op("us", "mul", {"u"}, {F("scalar", 0.5)});
  b.Op("h", "mul",
       up_first ? std::vector<std::string>{"us", "ga"} : std::vector<std::string>{"ga", "us"});
  b.Op("hb", "add", {"h", "bias"});
  b.Op("d", "matmul", {"hb", "wd"}).Op("c", "sub", {"d", "r"}).Output("c");
  return b.proto();
}

yirage::v1::Graph GatedMlpGraph(DType dtype, int64_t m, int64_t k, int64_t n) {
  GraphBuilder b("gated");
  b.Input("X", {m, k}, dtype).Input("W1", {k, n}, dtype).Input("W2", {k, n}, dtype);
  b.Input("G", {k}, dtype);
  b.Op("N", "rms_norm", {"X"}).Op("S", "mul", {"N", "G"});
  b.Op("A", "matmul", {"S", "W1"}).Op("Sg", "silu", {"A"});
  b.Op("Bm", "matmul", {"S", "W2"}).Op("Y", "mul", {"Sg", "Bm"}).Output("Y");
  return b.proto();
}

yirage::v1::Graph AttentionGraph(DType dtype) {
  GraphBuilder b("attention");
  b.Input("Q", {2, 8, 32}, dtype).Input("K", {2, 32, 200}, dtype).Input("V", {2, 200, 32}, dtype);
  b.Op("S", "matmul", {"Q", "K"}).Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  return b.proto();
}

// Shapes the fused attention kernel takes: M not a multiple of its 64-row
// tile, keys a multiple of 64.
yirage::v1::Graph FlashAttentionGraph(DType dtype) {
  GraphBuilder b("flash_attention");
  b.Input("Q", {2, 80, 64}, dtype).Input("K", {2, 64, 256}, dtype).Input("V", {2, 256, 32}, dtype);
  b.Op("S", "matmul", {"Q", "K"}).Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  return b.proto();
}

// K given as [B, N, D] (transpose_b) and a scaled S, as self_attention expands.
yirage::v1::Graph ScaledAttentionGraph(DType dtype) {
  GraphBuilder b("scaled_attention");
  b.Input("Q", {3, 64, 32}, dtype).Input("K", {3, 128, 32}, dtype).Input("V", {3, 128, 48}, dtype);
  b.Op("S", "matmul", {"Q", "K"}, {B("transpose_b", true)});
  b.Op("Ss", "mul", {"S"}, {F("scalar", 0.17677669529)});
  b.Op("P", "softmax", {"Ss"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  return b.proto();
}

// Self-attention at prefill: K given as [B, N, D] (transpose_b), a scaled
// S, `heads` heads of `m` query rows and `n` keys, D = DV = `d`.
yirage::v1::Graph PrefillAttentionGraph(DType dtype, int64_t m, int64_t n, int64_t d,
                                        int64_t heads = 2) {
  GraphBuilder b(absl::StrCat("prefill_attention_h", heads, "_m", m, "_d", d));
  b.Input("Q", {heads, m, d}, dtype).Input("K", {heads, n, d}, dtype);
  b.Input("V", {heads, n, d}, dtype);
  b.Op("S", "matmul", {"Q", "K"}, {B("transpose_b", true)});
  b.Op("Ss", "mul", {"S"}, {F("scalar", 1.0 / std::sqrt(static_cast<double>(d)))});
  b.Op("P", "softmax", {"Ss"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  return b.proto();
}

// Grouped-query attention as users write it at prefill: Q [Hkv, G, M, D]
// against K and V [Hkv, 1, N, D] (K as [.., N, D]), a scaled S; the G
// query heads of a key/value head fold into its rows.
yirage::v1::Graph GqaPrefillGraph(DType dtype, int64_t hkv, int64_t group, int64_t m, int64_t n,
                                  int64_t d) {
  GraphBuilder b(absl::StrCat("gqa_prefill_kv", hkv, "_g", group, "_m", m, "_n", n, "_d", d));
  b.Input("Q", {hkv, group, m, d}, dtype).Input("K", {hkv, 1, n, d}, dtype);
  b.Input("V", {hkv, 1, n, d}, dtype);
  b.Op("S", "matmul", {"Q", "K"}, {B("transpose_b", true)});
  b.Op("Ss", "mul", {"S"}, {F("scalar", 1.0 / std::sqrt(static_cast<double>(d)))});
  b.Op("P", "softmax", {"Ss"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  return b.proto();
}

// Two heads of `m` query rows and `n` keys, D = DV = 64; K as [B, D, N], or
// as [B, N, D] with a scaled S.
yirage::v1::Graph HeadDim64Attention(const std::string& name, DType dtype, int64_t m, int64_t n,
                                     bool transpose_k) {
  GraphBuilder b(name);
  b.Input("Q", {2, m, 64}, dtype)
      .Input("K", transpose_k ? std::vector<int64_t>{2, n, 64} : std::vector<int64_t>{2, 64, n},
             dtype)
      .Input("V", {2, n, 64}, dtype);
  if (transpose_k) {
    b.Op("S", "matmul", {"Q", "K"}, {B("transpose_b", true)});
    b.Op("Ss", "mul", {"S"}, {F("scalar", 0.125)});
    b.Op("P", "softmax", {"Ss"});
  } else {
    b.Op("S", "matmul", {"Q", "K"}).Op("P", "softmax", {"S"});
  }
  b.Op("O", "matmul", {"P", "V"}).Output("O");
  return b.proto();
}

// D = DV = 64, which the warpgroup (wgmma) form takes; 100 query rows (not
// a multiple of 64); K as [B, D, N], or as [B, N, D] with a scaled S.
yirage::v1::Graph WarpgroupAttentionGraph(DType dtype, bool transpose_k) {
  return HeadDim64Attention(transpose_k ? "warpgroup_attention_kt" : "warpgroup_attention", dtype,
                            100, 512, transpose_k);
}

// Keys not a multiple of the kernel's 64-key tile: K as [B, N, D] with 255
// keys (one masked in the last tile) and a scaled S, or K as [B, D, N] with
// 72 keys (56 masked, the last tile 8 keys); 7 query rows, D = DV = 64.
yirage::v1::Graph TailAttentionGraph(DType dtype, bool transpose_k) {
  return HeadDim64Attention(transpose_k ? "tail_attention_kt" : "tail_attention", dtype, 7,
                            transpose_k ? 255 : 72, transpose_k);
}

// GQA decode's shape: a few query rows a key/value head (7), K given as
// [B, N, D] with a scaled S, D = 128 and DV = 64 (two and one 64-column
// panels for the TMA form).
yirage::v1::Graph GqaDecodeGraph(DType dtype) {
  GraphBuilder b("gqa_decode");
  b.Input("Q", {6, 7, 128}, dtype).Input("K", {6, 512, 128}, dtype).Input("V", {6, 512, 64}, dtype);
  b.Op("S", "matmul", {"Q", "K"}, {B("transpose_b", true)});
  b.Op("Ss", "mul", {"S"}, {F("scalar", 0.08838834764)});
  b.Op("P", "softmax", {"Ss"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  return b.proto();
}

// Norm chains wide enough for register rows: broadcast weight, a scalar,
// two outputs, layer norm and softmax.
yirage::v1::Graph NormChainGraph(DType dtype) {
  GraphBuilder b("norm_chain");
  b.Input("H", {6, 512}, dtype).Input("X", {6, 512}, dtype).Input("w", {512}, dtype);
  b.Op("NH", "rms_norm", {"H", "w"}).Op("T", "add", {"NH", "X"}).Output("NH");
  b.Op("U", "mul", {"T"}, {F("scalar", 0.5)}).Op("V", "layer_norm", {"U"});
  b.Op("Y", "softmax", {"V"}).Output("Y");
  return b.proto();
}

// Register rows at hidden sizes whose 8-element chunks are no power of two
// (3584: 448 threads), with last-axis reductions: a residual add with two
// outputs and an rms_norm, a row sum and max stored, and a mean broadcast
// back into the row.
yirage::v1::Graph WideRowsGraph(DType dtype) {
  GraphBuilder b("wide_rows");
  b.Input("X", {5, 3584}, dtype).Input("R", {5, 3584}, dtype).Input("w", {3584}, dtype);
  b.Op("H", "add", {"X", "R"}).Output("H").Op("N", "rms_norm", {"H", "w"}).Output("N");
  b.Op("Sum", "reduce_sum", {"N"}, {I("axis", -1), B("keepdim", true)}).Output("Sum");
  b.Op("Max", "reduce_max", {"H"}, {I("axis", -1), B("keepdim", true)}).Output("Max");
  b.Op("Mean", "reduce_mean", {"X"}, {I("axis", -1), B("keepdim", true)});
  b.Op("C", "sub", {"X", "Mean"}).Output("C");
  return b.proto();
}

// Register rows whose width no thread count divides or no 16-byte load
// fits: rows of 1000 (125 chunks of 8, the threads' last chunk guarded),
// of 255 (one element a chunk: rows start 2 or 4 bytes apart) and of 260
// (chunks of 4), each with a reduction, a norm or softmax and a broadcast
// operand.
yirage::v1::Graph OddRowsGraph(DType dtype) {
  GraphBuilder b("odd_rows");
  b.Input("x", {7, 1000}, dtype).Input("g", {1000}, dtype);
  b.Input("y", {9, 255}, dtype).Input("z", {5, 260}, dtype).Input("zb", {260}, dtype);
  b.Op("xa", "mul", {"x", "g"}).Op("ln", "layer_norm", {"xa"}).Output("ln");
  b.Op("xs", "reduce_max", {"xa"}, {I("axis", -1), B("keepdim", true)}).Output("xs");
  b.Op("ya", "abs", {"y"}).Op("ys", "softmax", {"ya"}).Output("ys");
  b.Op("yr", "reduce_sum", {"ya"}, {I("axis", -1), B("keepdim", true)}).Output("yr");
  b.Op("yn", "rms_norm", {"y"}).Output("yn");
  b.Op("zs", "sub", {"z", "zb"});
  b.Op("zm", "reduce_mean", {"zs"}, {I("axis", -1), B("keepdim", true)});
  b.Op("zc", "sub", {"zs", "zm"}).Output("zc").Op("zn", "softmax", {"zs"}).Output("zn");
  return b.proto();
}

// Last-axis reductions over few, long rows (split rows: each row over
// several blocks, the last to finish combining): an elementwise prologue
// with a broadcast operand over 3 rows of 40000 (16-byte loads), a max over
// one odd row of 99999 (16-byte loads up to 99992, then one element a
// thread) and a mean over 2 rows of 50001 (element loads: its second row
// starts off a 16-byte boundary). Elementwise ops on each result follow
// (the last block applies them as it stores): a per-row scale and tanh, a
// negation, an exp and a per-row shift.
yirage::v1::Graph SplitRowsGraph(DType dtype) {
  GraphBuilder b("split_rows");
  b.Input("x", {3, 40000}, dtype).Input("w", {40000}, dtype).Input("xs", {3}, dtype);
  b.Input("y", {99999}, dtype).Input("z", {2, 50001}, dtype).Input("zb", {2, 1}, dtype);
  b.Op("xw", "mul", {"x", "w"}).Op("xa", "abs", {"xw"});
  b.Op("sx", "reduce_sum", {"xa"}, {I("axis", -1), B("keepdim", false)}).Output("sx");
  b.Op("sm", "mul", {"sx", "xs"}).Op("st", "tanh", {"sm"}).Output("st");
  b.Op("my", "reduce_max", {"y"}, {I("axis", 0), B("keepdim", true)}).Output("my");
  b.Op("mn", "neg", {"my"}).Output("mn");
  b.Op("az", "reduce_mean", {"z"}, {I("axis", -1), B("keepdim", true)});
  b.Op("ae", "exp", {"az"}).Op("ab", "add", {"ae", "zb"}).Output("ab");
  return b.proto();
}

// Norms and softmax over few, long rows (split rows: range statistics,
// then every range combines its row's and stores): a scaled softmax over 2
// rows of 65536 (16-byte loads), a layer_norm with weight and bias over
// one odd row of 99999 (16-byte loads, then an element tail; ranges of a
// multiple of 8 elements) followed by gelu, both stored, and
// a residual add (stored) into an rms_norm over 3 rows of 49152.
yirage::v1::Graph SplitNormsGraph(DType dtype) {
  GraphBuilder b("split_norms");
  b.Input("s", {2, 65536}, dtype).Input("y", {1, 99999}, dtype);
  b.Input("wy", {99999}, dtype).Input("by", {99999}, dtype);
  b.Input("x", {3, 49152}, dtype).Input("r", {3, 49152}, dtype).Input("wx", {49152}, dtype);
  b.Op("st", "mul", {"s"}, {F("scalar", 0.7)}).Op("p", "softmax", {"st"}).Output("p");
  b.Op("ny", "layer_norm", {"y", "wy", "by"}).Output("ny").Op("gy", "gelu", {"ny"}).Output("gy");
  b.Op("h", "add", {"x", "r"}).Output("h").Op("nx", "rms_norm", {"h", "wx"}).Output("nx");
  return b.proto();
}

// Norms, softmax and reductions over axes other than the last (lanes along
// the axis): columns of a warp with lanes spanning 8 warps (softmax over
// the first axis), one column a unit of 8 warps or 4 (an axis followed by a
// size-1 dim: a contiguous row), a unit of one warp (255 rows), two columns
// of 16 lanes (inner 3), a layer_norm over a middle axis with a weight and
// a bias that broadcast; copies along a first and a middle axis, 4 elements
// at a time (inner 12 and 8) and one (inner 3); more below.
// Rows a few elements wide, 256 a block (a thread a row): a softmax over
// 5, a layer_norm over 7 with weight and bias, a sum over 3 after an
// elementwise op; 3001 rows leave the last block partial; a matmul with K
// and N of 7 then a norm (50 rows a batch entry: blocks of 3 rows straddle
// entries).
yirage::v1::Graph NarrowRowsGraph(DType dtype) {
  GraphBuilder b("narrow_rows");
  b.Input("x", {3001, 5}, dtype).Input("y", {3001, 7}, dtype).Input("yw", {7}, dtype);
  b.Input("yb", {7}, dtype).Input("z", {3001, 3}, dtype);
  b.Op("px", "softmax", {"x"}).Output("px");
  b.Op("ny", "layer_norm", {"y", "yw", "yb"}).Output("ny");
  b.Op("az", "abs", {"z"}).Op("sz", "reduce_sum", {"az"}, {I("axis", 1)}).Output("sz");
  // A batched matmul by 7 x 7 weights (B^T) in the rows, then a norm.
  b.Input("ma", {2, 50, 7}, dtype).Input("mw", {2, 7, 7}, dtype);
  b.Op("mm", "matmul", {"ma", "mw"}, {B("transpose_b", true)}).Op("mr", "relu", {"mm"});
  b.Op("mn", "layer_norm", {"mr", "yw"}).Output("mn");
  return b.proto();
}

// A plan's graph that a rewrite left with an unread input (slice_through_
// concat kept a window inside "b"): the kernels take "a" and ignore it.
yirage::v1::Graph UnreadInputGraph(DType dtype) {
  GraphBuilder b("unread_input");
  b.Input("a", {300, 40}, dtype).Input("b", {200, 40}, dtype).Input("w", {1, 40}, dtype);
  b.Op("s", "slice", {"b"}, {I("axis", 0), I("start", 17), I("end", 150)});
  b.Op("m", "minimum", {"w", "s"}).Op("y", "sub", {"m"}, {F("scalar", 1.5)}).Output("y");
  yirage::v1::Graph g = b.proto();
  g.add_unread_inputs("a");
  return g;
}

// Generic chains (core/generic_chain.h): elementwise ops computed as the
// reduction, norm or softmax after them reads. A max over the first axis
// after gelu and a maximum with a tensor broadcast along that axis (a
// column reduction, 16-byte loads of both); a softmax over a middle axis
// after a scale (lanes along the axis); a mean over a middle axis after
// subtracting a [3] row (rows 3 wide: one load an element); an rms_norm
// over a middle axis after abs; a sum over the first axis of a product
// of an input and a row kernel's float result (loads of two widths); and
// elementwise ops after the axis op (below).
yirage::v1::Graph GenericChainsGraph(DType dtype) {
  GraphBuilder b("generic_chains");
  b.Input("x", {6, 40, 24}, dtype).Input("w", {1, 40, 24}, dtype);
  b.Input("y", {3, 50, 16}, dtype).Input("z", {5, 7, 8, 3}, dtype).Input("zb", {3}, dtype);
  b.Input("l", {4, 30, 8}, dtype).Input("u", {9, 64}, dtype);
  b.Op("xg", "gelu", {"x"}).Op("xm", "maximum", {"xg", "w"});
  b.Op("xr", "reduce_max", {"xm"}, {I("axis", 0), B("keepdim", true)}).Output("xr");
  b.Op("ys", "mul", {"y"}, {F("scalar", 0.125)});
  b.Op("yp", "softmax", {"ys"}, {I("axis", 1)}).Output("yp");
  b.Op("zd", "sub", {"z", "zb"}).Op("zq", "reduce_mean", {"zd"}, {I("axis", 1)}).Output("zq");
  b.Op("la", "abs", {"l"}).Op("ln", "rms_norm", {"la"}, {I("axis", 1)}).Output("ln");
  b.Op("ue", "exp", {"u"}).Op("uq", "mul", {"ue", "u"});
  b.Op("us", "reduce_sum", {"uq"}, {I("axis", 0)}).Output("us");
  // After the axis op: tanh of a mean over the first axis (a column
  // reduction) plus a row; a softmax over a middle axis times a tensor
  // broadcast along it; a sum over a middle axis of rows 2 wide (lanes),
  // then a scale.
  b.Input("v", {40, 96}, dtype).Input("vb", {96}, dtype);
  b.Input("s", {2, 30, 16}, dtype).Input("sw", {2, 1, 16}, dtype).Input("q", {6, 20, 2}, dtype);
  b.Op("vm", "reduce_mean", {"v"}, {I("axis", 0)}).Op("vt", "tanh", {"vm"});
  b.Op("vy", "add", {"vt", "vb"}).Output("vy");
  b.Op("sp", "softmax", {"s"}, {I("axis", 1)}).Op("sy", "mul", {"sp", "sw"}).Output("sy");
  b.Op("qa", "abs", {"q"}).Op("qs", "reduce_sum", {"qa"}, {I("axis", 1)});
  b.Op("qy", "mul", {"qs"}, {F("scalar", 0.5)}).Output("qy");
  return b.proto();
}

// Attention at D = 128 over 256 keys: a ring of four key groups at two
// stages (280 KiB) exceeds an H100's or H200's shared memory a block.
yirage::v1::Graph HeadDim128AttentionGraph() {
  GraphBuilder b("head_dim_128");
  b.Input("Q", {1, 64, 128}, FLOAT16).Input("K", {1, 128, 256}, FLOAT16);
  b.Input("V", {1, 256, 128}, FLOAT16);
  b.Op("S", "matmul", {"Q", "K"}).Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"});
  b.Output("O");
  return b.proto();
}

yirage::v1::Graph AxisLanesGraph(DType dtype) {
  GraphBuilder b("axis_lanes");
  b.Input("a", {40, 6, 33}, dtype).Input("r", {7, 2000, 1}, dtype);
  b.Input("s", {50, 255, 1}, dtype).Input("m", {9, 70, 3}, dtype);
  b.Input("t", {4, 5, 1000, 1}, dtype).Input("l", {3, 300, 5}, dtype);
  b.Input("lw", {300, 1}, dtype).Input("lb", {3, 1, 5}, dtype);
  b.Input("c0", {30, 12}, dtype).Input("c1", {20, 12}, dtype).Input("k", {6, 50, 8}, dtype);
  b.Input("q0", {4, 2, 3}, dtype).Input("q1", {4, 5, 3}, dtype);
  b.Op("pa", "softmax", {"a"}, {I("axis", 0)}).Output("pa");
  b.Op("nr", "rms_norm", {"r"}, {I("axis", 1)}).Output("nr");
  b.Op("ss", "reduce_sum", {"s"}, {I("axis", -2), B("keepdim", true)}).Output("ss");
  b.Op("mm", "reduce_max", {"m"}, {I("axis", 1)}).Output("mm");
  b.Op("pt", "softmax", {"t"}, {I("axis", 2)}).Output("pt");
  b.Op("nl", "layer_norm", {"l", "lw", "lb"}, {I("axis", 1)}).Output("nl");
  b.Op("cc", "concat", {"c0", "c1"}, {I("axis", 0)}).Output("cc");
  b.Op("ks", "slice", {"k"}, {I("axis", 1), I("start", 3), I("end", 40)}).Output("ks");
  b.Op("qc", "concat", {"q0", "q1"}, {I("axis", 1)}).Output("qc");
  // Wider inner dims: a layer_norm over a middle axis with a weight and a
  // bias that broadcast, a softmax over the first axis (lanes over warps),
  // an rms_norm over 700 rows of 8.
  b.Input("lv", {5, 100, 32}, dtype).Input("lvw", {100, 1}, dtype).Input("lvb", {1, 32}, dtype);
  b.Input("pv", {300, 64}, dtype).Input("rv", {2, 700, 8}, dtype);
  b.Op("nv", "layer_norm", {"lv", "lvw", "lvb"}, {I("axis", 1)}).Output("nv");
  b.Op("pp", "softmax", {"pv"}, {I("axis", 0)}).Output("pp");
  b.Op("nn", "rms_norm", {"rv"}, {I("axis", 1)}).Output("nn");
  // A softmax over a middle axis of log(relu(x)): about half its elements
  // are -inf, columns start with -inf (their lanes must not make NaN).
  b.Input("lz", {3, 64, 20}, dtype);
  b.Op("lr", "relu", {"lz"}).Op("ll", "log", {"lr"});
  b.Op("pl", "softmax", {"ll"}, {I("axis", 1)}).Output("pl");
  return b.proto();
}

// Per-row ops (core/row_group.h rule 5): elementwise ops after a
// keepdim=false reduction, their inputs indexed by row: rows of 50 and 24
// (narrow), and of 5000 (staged whole rows or registers).
yirage::v1::Graph PerRowGraph(DType dtype) {
  GraphBuilder b("per_row");
  b.Input("x", {37, 50}, dtype).Input("s", {37}, dtype).Input("y", {4, 6, 24}, dtype);
  b.Input("yb", {6}, dtype).Input("z", {3, 5000}, dtype).Input("zs", {3}, dtype);
  b.Op("g", "gelu", {"x"}).Op("m", "reduce_mean", {"g"}, {I("axis", 1), B("keepdim", false)});
  b.Op("p", "mul", {"m", "s"}).Op("q", "add", {"p"}, {F("scalar", 0.5)}).Output("m").Output("q");
  b.Op("ym", "reduce_max", {"y"}, {I("axis", 2), B("keepdim", false)});
  b.Op("yd", "sub", {"ym", "yb"}).Op("ye", "exp", {"yd"}).Output("ye");
  b.Op("za", "abs", {"z"}).Op("zm", "reduce_sum", {"za"}, {I("axis", 1), B("keepdim", false)});
  b.Op("zd", "div", {"zm", "zs"}).Output("zd");
  return b.proto();
}

// A gather over more rows than about four blocks an SM (a cache append of
// 1000 rows, [1000, 24] joined with [1000, 40], scaled): under
// PARALLEL_COLS the gather form, under PARALLEL_ROWS whole rows.
yirage::v1::Graph GatherManyRowsGraph(DType dtype) {
  GraphBuilder b("gather_many_rows");
  b.Input("a", {1000, 24}, dtype).Input("b", {1000, 40}, dtype);
  b.Op("c", "concat", {"a", "b"}, {I("axis", 1)});
  b.Op("s", "mul", {"c"}, {F("scalar", 2.0)}).Output("s");
  return b.proto();
}

// Gathers whose pieces and slice starts fall anywhere: a rank-1 concat of
// three odd pieces (8 columns straddle each join; the last element one a
// thread) then abs and an add, and rows of 1003 joined with rows of 5 (every
// 8 columns of the narrow piece straddle), sliced from column 3, scaled.
yirage::v1::Graph GatherUnalignedGraph(DType dtype) {
  GraphBuilder b("gather_unaligned");
  b.Input("a", {1001}, dtype).Input("b", {2003}, dtype).Input("c", {50005}, dtype);
  b.Input("d", {53009}, dtype).Input("x", {6, 1003}, dtype).Input("y", {6, 5}, dtype);
  b.Op("abc", "concat", {"a", "b", "c"}, {I("axis", 0)});
  b.Op("aa", "abs", {"abc"}).Op("o", "add", {"aa", "d"}).Output("o");
  b.Op("xy", "concat", {"x", "y"}, {I("axis", 1)});
  b.Op("xs", "slice", {"xy"}, {I("axis", 1), I("start", 3), I("end", 1003)});
  b.Op("m", "mul", {"xs"}, {F("scalar", -0.75)}).Output("m");
  return b.proto();
}

// Concats and slices along the row in one group (gather elements: each
// output element from its input elements): a rank-1 concat of 300001 and
// 200003 elements sliced and scaled, and a [5, 1000] row joined with
// [5, 24], stored, sliced, a broadcast row added.
yirage::v1::Graph GatherGraph(DType dtype) {
  GraphBuilder b("gather");
  b.Input("a", {300001}, dtype).Input("b", {200003}, dtype);
  b.Input("x", {5, 1000}, dtype).Input("y", {5, 24}, dtype).Input("z", {1000}, dtype);
  b.Op("ab", "concat", {"a", "b"}, {I("axis", 0)});
  b.Op("s", "slice", {"ab"}, {I("axis", 0), I("start", 250000), I("end", 400000)});
  b.Op("m", "mul", {"s"}, {F("scalar", 1.5)}).Output("m");
  b.Op("xy", "concat", {"x", "y"}, {I("axis", 1)}).Output("xy");
  b.Op("xs", "slice", {"xy"}, {I("axis", 1), I("start", 10), I("end", 1010)});
  b.Op("o", "add", {"xs", "z"}).Output("o");
  return b.proto();
}

// The gather form over 8 columns at a time: every row, piece and slice
// start a multiple of 8; a window of a rank-1 concat, and a cache append
// ([8, 1920] and [8, 128] joined along rows of 2048) with a per-row and a
// row operand.
yirage::v1::Graph GatherVectorsGraph(DType dtype) {
  GraphBuilder b("gather_vectors");
  b.Input("p", {64000}, dtype).Input("q", {32008}, dtype);
  b.Input("kc", {8, 1920}, dtype).Input("kn", {8, 128}, dtype);
  b.Input("rb", {8, 1}, dtype).Input("cb", {2048}, dtype);
  b.Op("pq", "concat", {"p", "q"}, {I("axis", 0)});
  b.Op("w", "slice", {"pq"}, {I("axis", 0), I("start", 8008), I("end", 90008)});
  b.Op("sw", "sigmoid", {"w"}).Output("sw");
  b.Op("k", "concat", {"kc", "kn"}, {I("axis", 1)}).Output("k");
  b.Op("kr", "mul", {"k", "rb"}).Op("kb", "add", {"kr", "cb"}).Output("kb");
  return b.proto();
}

// A norm followed by elementwise ops at a width register rows do not take
// (1000): the whole group in whole rows, no column tiles; two outputs.
yirage::v1::Graph NormTailGraph(DType dtype) {
  GraphBuilder b("norm_tail");
  b.Input("x", {7, 1000}, dtype).Input("r", {7, 1000}, dtype);
  b.Input("w", {1000}, dtype).Input("bias", {1000}, dtype);
  b.Op("h", "add", {"x", "r"}).Output("h").Op("n", "layer_norm", {"h", "w", "bias"});
  b.Op("a", "abs", {"n"}).Op("y", "maximum", {"a"}, {F("scalar", 0.3)}).Output("y");
  return b.proto();
}

// Reductions over a middle and the first axis (the column-reduction
// kernel): rows split over two blocks and combined (600 and 1000 rows),
// one split (16 rows), column vectors short of a warp.
yirage::v1::Graph ColumnReduceGraph(DType dtype) {
  GraphBuilder b("column_reduce");
  b.Input("x", {5, 600, 40}, dtype).Input("y", {1000, 24}, dtype).Input("z", {64, 16, 8}, dtype);
  b.Op("sx", "reduce_sum", {"x"}, {I("axis", 1)}).Output("sx");
  b.Op("mx", "reduce_max", {"x"}, {I("axis", 1), B("keepdim", true)}).Output("mx");
  b.Op("ax", "reduce_mean", {"x"}, {I("axis", 1)}).Output("ax");
  b.Op("sy", "reduce_sum", {"y"}, {I("axis", 0)}).Output("sy");
  b.Op("my", "reduce_max", {"y"}, {I("axis", 0)}).Output("my");
  b.Op("az", "reduce_mean", {"z"}, {I("axis", 1)}).Output("az");
  return b.proto();
}

// A same-shape elementwise chain (the flat kernel) over 21000 8-element
// items, a row and a per-row broadcast mixed in (both read once an item):
// no unroll divides the items evenly.
yirage::v1::Graph FlatChainGraph(DType dtype) {
  GraphBuilder b("flat_chain");
  b.Input("X", {7, 1000, 24}, dtype).Input("G", {7, 1000, 24}, dtype).Input("c", {24}, dtype);
  b.Input("k", {7, 1000, 1}, dtype);
  b.Op("S", "silu", {"X"}).Op("M", "mul", {"S", "G"}).Output("M");
  b.Op("Y", "add", {"M", "c"}).Op("Z", "sub", {"Y", "k"}).Output("Z");
  return b.proto();
}

// Flat kernels over element counts that are no multiple of 8 (21021: 2627
// items of 8, then 5 elements one a thread), with broadcasts along a width
// of 7 (element by element), and over fewer than 8 elements.
yirage::v1::Graph FlatOddGraph(DType dtype) {
  GraphBuilder b("flat_odd");
  b.Input("X", {3, 1001, 7}, dtype).Input("G", {3, 1001, 7}, dtype).Input("r", {7}, dtype);
  b.Input("c", {1001, 1}, dtype).Input("t", {5}, dtype);
  b.Op("S", "silu", {"X"}).Op("M", "mul", {"S", "G"}).Op("Y", "add", {"M", "r"});
  b.Op("Z", "maximum", {"Y", "c"}).Output("Z").Output("M");
  b.Op("T", "tanh", {"t"}).Output("T");
  return b.proto();
}

// The streamed-matmul chains (core/fused_pattern.h) at shapes its kernel
// takes: rows not a multiple of 16, K splits, ranks 16 and 32.
yirage::v1::Graph StreamedGatedGraph(DType dtype, int64_t m, int64_t k, int64_t n) {
  GraphBuilder b("streamed_gated");
  b.Input("X", {m, k}, dtype).Input("W1", {k, n}, dtype).Input("W2", {k, n}, dtype);
  b.Op("A", "matmul", {"X", "W1"}).Op("Sg", "silu", {"A"});
  b.Op("Bm", "matmul", {"X", "W2"}).Op("Y", "mul", {"Sg", "Bm"}).Output("Y");
  return b.proto();
}

yirage::v1::Graph StreamedRmsLinearGraph(DType dtype, int64_t m, int64_t k, int64_t n) {
  GraphBuilder b("streamed_rms_linear");
  b.Input("X", {m, k}, dtype).Input("G", {k}, dtype).Input("W", {k, n}, dtype);
  b.Op("N", "rms_norm", {"X"}).Op("S", "mul", {"N", "G"}).Op("Y", "matmul", {"S", "W"});
  b.Output("Y");
  return b.proto();
}

yirage::v1::Graph StreamedLoraGraph(DType dtype, int64_t m, int64_t k, int64_t n, int64_t r) {
  GraphBuilder b("streamed_lora");
  b.Input("X", {m, k}, dtype).Input("W", {k, n}, dtype).Input("A", {k, r}, dtype);
  b.Input("B", {r, n}, dtype);
  b.Op("XW", "matmul", {"X", "W"}).Op("XA", "matmul", {"X", "A"});
  b.Op("XAB", "matmul", {"XA", "B"}).Op("Y", "add", {"XW", "XAB"}).Output("Y");
  return b.proto();
}

yirage::v1::Graph LoraGraph(DType dtype) {
  GraphBuilder b("lora");
  b.Input("X", {16, 64}, dtype).Input("W", {64, 256}, dtype).Input("A", {64, 16}, dtype);
  b.Input("B", {16, 256}, dtype);
  b.Op("XW", "matmul", {"X", "W"}).Op("XA", "matmul", {"X", "A"});
  b.Op("XAB", "matmul", {"XA", "B"}).Op("Y", "add", {"XW", "XAB"}).Output("Y");
  return b.proto();
}

// BatchedGemmGraph's cases (lead dims, M, N, K, B as [N, K], a batch of
// products rather than rows over lead dims): B as [N, K] with N odd and K
// off the stage, B as [K, N] with two lead dims, a K tail, rows of A over
// its lead dims with a 2-D B.
using BatchedShape = std::tuple<std::vector<int64_t>, int, int, int, bool, bool>;
std::vector<BatchedShape> BatchedGemmShapes() {
  return {{{2}, 100, 255, 1096, true, true},
          {{2, 3}, 129, 136, 128, false, true},
          {{3}, 70, 200, 72, true, true},
          {{3, 2}, 50, 264, 136, false, false}};
}

struct Case {
  yirage::v1::Graph graph;
  std::vector<std::vector<KernelSpec>> plans;
};

// Every kind of plan: GENERIC per op, ROW per op, whole-graph ROW groups with
// several schedules (rows, cols, tiles, vector widths, warps, split-K).
// The GEMM family's points (cuda_families.cc), as hand-made schedules.
std::vector<yirage::v1::Schedule> GemmPoints() {
  return {WithGemm(Rows(4), 128, 256, 4, false, 2, 1), WithGemm(Rows(4), 128, 128, 6, true, 2, 1),
          WithGemm(Rows(4), 128, 256, 4, false, 1, 1), WithGemm(Rows(4), 256, 128, 4, false, 1, 2),
          WithGemm(Rows(4), 128, 128, 6, false, 2, 1)};
}

// float32 GEMM chains that the TF32 form takes (B as [N, K], rtol 1e-2):
// M, N and K off the tiles (K 100: a multiple of 4, not of 8 or 32), more
// tiles than blocks, and split-K on a deep K (1 x 3 tiles of 128 x 256
// over 132 multiprocessors).
std::vector<yirage::v1::Graph> Tf32GemmGraphs() {
  std::vector<yirage::v1::Graph> graphs;
  for (const auto& [m, n, k] : std::vector<std::tuple<int, int, int>>{
           {65, 200, 100}, {129, 264, 136}, {4093, 264, 72}, {100, 520, 2056}}) {
    yirage::v1::Graph g = GemmGraph(FLOAT32, m, n, k, true);
    g.mutable_tolerance()->set_rtol(1e-2);
    g.mutable_tolerance()->set_atol(1e-2);
    graphs.push_back(g);
  }
  return graphs;
}

std::vector<Case> AllCases() {
  std::vector<Case> cases;
  for (DType dt : {FLOAT32, FLOAT16, BFLOAT16}) {
    const yirage::v1::Graph u = UnaryGraph(dt);
    cases.push_back({u,
                     {AllGeneric(u), AllRowSingles(u, Rows(2, 0, 0, 8)), OneRowGroup(u, Rows(3)),
                      OneRowGroup(u, Cols(16))}});
    const yirage::v1::Graph bi = BinaryGraph(dt);
    cases.push_back({bi, {AllGeneric(bi), OneRowGroup(bi, Rows(4)), OneRowGroup(bi, Cols(7))}});
    const yirage::v1::Graph rn = ReduceNormGraph(dt);
    std::vector<KernelSpec> rn_rows;
    for (const auto& op : rn.ops()) {
      const bool generic = op.name() == "sum1" || op.name() == "sm0" || op.name() == "cat1";
      rn_rows.push_back(generic ? Generic(op.name()) : Row({op.name()}, WithGpu(Rows(2), 1, 2)));
    }
    cases.push_back({rn, {AllGeneric(rn), rn_rows}});
    const yirage::v1::Graph mm = MatmulGraph(dt);
    cases.push_back(
        {mm,
         {AllGeneric(mm), AllRowSingles(mm, Rows(2, 16, 16)), AllRowSingles(mm, Rows(5, 32, 8, 4)),
          AllRowSingles(mm, Cols(8)), AllRowSingles(mm, WithGpu(Rows(4, 16), 2))}});
  }
  for (DType dt : {FLOAT16, BFLOAT16, FLOAT32}) {
    const yirage::v1::Graph g = GatedMlpGraph(dt, 24, 256, 192);
    cases.push_back({g,
                     {AllGeneric(g),
                      OneRowGroup(g, Rows(8, 64)),
                      OneRowGroup(g, WithGpu(Rows(16, 32, 0, 0, 2), 4, 8)),
                      OneRowGroup(g, WithGpu(Cols(128), 3, 4)),
                      {Row({"N", "S"}, Rows(4)), Row({"A", "Sg", "Bm", "Y"}, Rows(3, 48))}}});
    const yirage::v1::Graph a = AttentionGraph(dt);
    cases.push_back({a,
                     {AllGeneric(a), OneRowGroup(a, Rows(4, 32)),
                      OneRowGroup(a, WithGpu(Rows(8, 16), 2, 2)), AllRowSingles(a, Rows(3))}});
    for (const yirage::v1::Graph& fa : {FlashAttentionGraph(dt), ScaledAttentionGraph(dt)}) {
      if (dt == FLOAT32) continue;
      const int max_splits = fa.name() == "flash_attention" ? 4 : 2;  // one 64-key tile each
      // Automatic, explicit (2) and no key split; two splits merged through
      // the workspace; 32-row blocks in 4 splits with a two-stage pipeline;
      // 128-row blocks; 64-row blocks with 2 and 4 key groups, pushing and
      // pulling the cluster's rows; 32-row warps (64-row blocks in 2 key
      // groups; 32-row blocks of one warp, 2 splits pulled; 128-row blocks
      // through the workspace); 256-row blocks; merged in the kernel (64-row
      // blocks in the most splits, 32-row warps in two stages, 32-row
      // blocks in 2 splits); then S in its own kernel.
      cases.push_back(
          {fa,
           {OneRowGroup(fa, Rows(4)), OneRowGroup(fa, WithGpu(Rows(4), 2)),
            OneRowGroup(fa, WithGpu(Rows(4), 1)), OneRowGroup(fa, WithForm(WithGpu(Rows(4), 2), 2)),
            OneRowGroup(fa, WithGpu(Rows(32), max_splits, 2, 2)),
            OneRowGroup(fa, WithGpu(Rows(128), 0, 8, 3)),
            OneRowGroup(fa, WithGpu(Rows(64), 0, 8, 3)),
            OneRowGroup(fa, WithForm(WithGpu(Rows(64), 0, 8, 3), 3)),
            OneRowGroup(fa, WithForm(WithGpu(Rows(64), 1, 16, 2), 2)),
            OneRowGroup(fa, WithWarpRows(WithGpu(Rows(64), 0, 4, 4), 32)),
            OneRowGroup(fa, WithForm(WithWarpRows(WithGpu(Rows(32), 2, 1, 3), 32), 3)),
            OneRowGroup(fa, WithForm(WithWarpRows(WithGpu(Rows(128), 2, 4, 2), 32), 2)),
            OneRowGroup(fa, WithGpu(Rows(256), 0, 16, 4)),
            OneRowGroup(fa, WithForm(WithGpu(Rows(64), max_splits, 4, 4), 4)),
            OneRowGroup(fa, WithForm(WithWarpRows(WithGpu(Rows(64), 0, 4, 2), 32), 4)),
            OneRowGroup(fa, WithForm(WithGpu(Rows(32), 2, 4, 2), 4)), AllRowSingles(fa, Rows(2))}});
    }
    // A masked last key tile: automatic; one split; two splits of two key
    // groups (a cluster); two through the workspace; the most splits pulled
    // in a cluster; merged in the kernel; the warpgroup form; 32-row warps.
    for (bool kt : {false, true}) {
      if (dt == FLOAT32) continue;
      const yirage::v1::Graph ta = TailAttentionGraph(dt, kt);
      const int most = kt ? 4 : 2;  // one 64-key tile each
      cases.push_back({ta,
                       {OneRowGroup(ta, Rows(4)), OneRowGroup(ta, WithGpu(Rows(16), 1)),
                        OneRowGroup(ta, WithGpu(Rows(16), 2, 2)),
                        OneRowGroup(ta, WithForm(WithGpu(Rows(16), 2, 1), 2)),
                        OneRowGroup(ta, WithForm(WithGpu(Rows(16), most, 1), 3)),
                        OneRowGroup(ta, WithForm(WithGpu(Rows(32), 2, 4, 2), 4)),
                        OneRowGroup(ta, WithWarpRows(WithGpu(Rows(64), 0, 4, 4), 64)),
                        OneRowGroup(ta, WithWarpRows(WithGpu(Rows(64), 2, 4, 3), 32))}});
    }
    // The warpgroup form (warp_rows 64; sm_90, else 16-row warps):
    // automatic splits, one, two in a cluster (pushed), four through the
    // workspace, pulled in a cluster, merged in the kernel.
    for (bool kt : {false, true}) {
      if (dt == FLOAT32) continue;
      const yirage::v1::Graph wa = WarpgroupAttentionGraph(dt, kt);
      cases.push_back(
          {wa,
           {OneRowGroup(wa, WithWarpRows(WithGpu(Rows(64), 0, 4, 4), 64)),
            OneRowGroup(wa, WithWarpRows(WithGpu(Rows(64), 1, 4, 3), 64)),
            OneRowGroup(wa, WithWarpRows(WithGpu(Rows(64), 2, 4, 2), 64)),
            OneRowGroup(wa, WithForm(WithWarpRows(WithGpu(Rows(64), 4, 4, 4), 64), 2)),
            OneRowGroup(wa, WithForm(WithWarpRows(WithGpu(Rows(64), 4, 4, 2), 64), 3)),
            OneRowGroup(wa, WithForm(WithWarpRows(WithGpu(Rows(64), 0, 4, 2), 64), 4))}});
    }
    // The decode form's TMA copies (sm_90; head dims multiples of 64):
    // 32-row blocks of two warps merged in the kernel,
    // automatic, in one split with two key groups; 64-row blocks through the
    // workspace and pulled in a cluster with two key groups; 32-row warps;
    // 16-row blocks of two key groups (and, without TMA, of one warp in
    // two splits merged in the kernel); the warpgroup form merged in the
    // kernel and in two pushed splits; K given as [B, N, D] and as [B, D, N].
    if (dt != FLOAT32 && TargetOfCompiles().sm == 90) {
      const yirage::v1::Graph gq = GqaDecodeGraph(dt);
      cases.push_back({gq,
                       {OneRowGroup(gq, WithTma(WithForm(WithGpu(Rows(32), 0, 2, 4), 4))),
                        OneRowGroup(gq, WithTma(WithGpu(Rows(32), 0, 2, 4))),
                        OneRowGroup(gq, WithTma(WithGpu(Rows(32), 1, 4, 3))),
                        OneRowGroup(gq, WithTma(WithForm(WithGpu(Rows(64), 2, 4, 2), 2))),
                        OneRowGroup(gq, WithTma(WithForm(WithGpu(Rows(64), 2, 8, 3), 3))),
                        OneRowGroup(gq, WithTma(WithWarpRows(WithGpu(Rows(64), 0, 4, 4), 32))),
                        OneRowGroup(gq, WithTma(WithGpu(Rows(16), 1, 2, 4))),
                        OneRowGroup(gq, WithForm(WithGpu(Rows(16), 2, 1, 3), 4))}});
      for (bool kt : {false, true}) {
        const yirage::v1::Graph wk = WarpgroupAttentionGraph(dt, kt);
        cases.push_back(
            {wk,
             {OneRowGroup(wk, WithTma(WithForm(WithWarpRows(WithGpu(Rows(64), 0, 4, 4), 64), 4))),
              OneRowGroup(wk, WithTma(WithWarpRows(WithGpu(Rows(64), 2, 4, 2), 64))),
              OneRowGroup(wk, WithTma(WithGpu(Rows(64), 4, 4, 3))),
              OneRowGroup(wk, WithTma(WithForm(WithGpu(Rows(16), 0, 2, 4), 4)))}});
      }
    }
    // The prefill forms (sm_90; K as [B, N, D]): query rows past the last
    // block's end (100 and 200 rows), D = DV = 64, 128 and 256, keys off
    // the tiles, one to three warpgroups, 64- and 128-key tiles (and 176 in
    // the warp-specialized form: 384 keys are 3 tiles, the last of 32), S
    // issued behind O += P V (three stages) or not; the warp-specialized
    // form with a tile a block, and with more tiles than the H200's 132
    // multiprocessors (140 heads); each shape also with that form's tiles
    // by TMA (rows and keys past an entry's end read as zeros).
    if (dt != FLOAT32 && TargetOfCompiles().sm == 90) {
      const yirage::v1::Graph p64 = PrefillAttentionGraph(dt, 100, 256, 64);
      cases.push_back({p64,
                       {OneRowGroup(p64, WithPrefill(Rows(4), 64, 64, 3, true)),
                        OneRowGroup(p64, WithPrefill(Rows(4), 128, 128, 2, false)),
                        OneRowGroup(p64, WithPrefill(Rows(4), 192, 64, 3, true)),
                        OneRowGroup(p64, WithPrefillWs(Rows(4), 64, 2)),
                        OneRowGroup(p64, WithPrefillWs(Rows(4), 128, 3)),
                        OneRowGroup(p64, WithTma(WithPrefillWs(Rows(4), 64, 2)))}});
      const yirage::v1::Graph p128 = PrefillAttentionGraph(dt, 200, 384, 128);
      cases.push_back({p128,
                       {OneRowGroup(p128, WithPrefill(Rows(4), 128, 128, 3, true)),
                        OneRowGroup(p128, WithPrefill(Rows(4), 128, 128, 2, false)),
                        OneRowGroup(p128, WithPrefill(Rows(4), 192, 128, 2, true)),
                        OneRowGroup(p128, WithPrefill(Rows(4), 64, 64, 3, true)),
                        OneRowGroup(p128, WithPrefillWs(Rows(4), 128, 3)),
                        OneRowGroup(p128, WithPrefillWs(Rows(4), 64, 4)),
                        OneRowGroup(p128, WithPrefillWs(Rows(4), 176, 2)),
                        OneRowGroup(p128, WithTma(WithPrefillWs(Rows(4), 128, 3)))}});
      const yirage::v1::Graph many = PrefillAttentionGraph(dt, 100, 128, 64, 140);
      cases.push_back({many,
                       {OneRowGroup(many, WithPrefillWs(Rows(4), 128, 2)),
                        OneRowGroup(many, WithTma(WithPrefillWs(Rows(4), 128, 2)))}});
      // Keys off the tiles (250: the last 64-key tile holds 58, the last
      // 128-key tile 122, the last 176-key tile 74) in both forms, and
      // D = DV = 256 over 300 keys (64-key tiles of one and two
      // warpgroups, and warp-specialized with Q in shared memory, 64- and
      // 80-key tiles).
      const yirage::v1::Graph odd = PrefillAttentionGraph(dt, 100, 250, 64);
      cases.push_back({odd,
                       {OneRowGroup(odd, WithPrefill(Rows(4), 64, 64, 3, true)),
                        OneRowGroup(odd, WithPrefill(Rows(4), 128, 128, 2, false)),
                        OneRowGroup(odd, WithPrefillWs(Rows(4), 64, 3)),
                        OneRowGroup(odd, WithPrefillWs(Rows(4), 128, 2)),
                        OneRowGroup(odd, WithPrefillWs(Rows(4), 176, 2)),
                        OneRowGroup(odd, WithTma(WithPrefillWs(Rows(4), 128, 2))),
                        OneRowGroup(odd, WithTma(WithPrefillWs(Rows(4), 64, 3)))}});
      // Grouped queries (Q [2, 3, 50, 128] against K, V [2, 1, N, 128]):
      // 150 rows a key/value head in the prefill forms and a decode form.
      const yirage::v1::Graph gqa = GqaPrefillGraph(dt, 2, 3, 50, 256, 128);
      cases.push_back({gqa,
                       {OneRowGroup(gqa, WithPrefill(Rows(4), 128, 64, 3, true)),
                        OneRowGroup(gqa, WithPrefillWs(Rows(4), 128, 2)),
                        OneRowGroup(gqa, WithTma(WithPrefillWs(Rows(4), 128, 3))),
                        OneRowGroup(gqa, WithGpu(Rows(32), 0, 2, 3))}});
      const yirage::v1::Graph p256 = PrefillAttentionGraph(dt, 100, 300, 256);
      cases.push_back({p256,
                       {OneRowGroup(p256, WithPrefill(Rows(4), 128, 64, 4, true)),
                        OneRowGroup(p256, WithPrefill(Rows(4), 64, 64, 3, true)),
                        OneRowGroup(p256, WithPrefillWs(Rows(4), 64, 2)),
                        OneRowGroup(p256, WithPrefillWs(Rows(4), 80, 2)),
                        OneRowGroup(p256, WithTma(WithPrefillWs(Rows(4), 64, 2)))}});
      // The GEMM family (sm_90): M, N and K off the tiles (K 72 and 136:
      // not multiples of 64), B as [K, N] and [N, K], each point's tiles and
      // clusters, more tiles than blocks (4093 rows), the epilogue of bias,
      // activation, scalar and residual and the plain product.
      const std::vector<yirage::v1::Schedule> points = GemmPoints();
      const std::vector<std::tuple<int, int, int, bool>> shapes = {{65, 200, 72, false},
                                                                   {129, 200, 136, true},
                                                                   {4093, 264, 136, false},
                                                                   {389, 1288, 136, true}};
      // Each shape under two of the points, each point under two shapes.
      for (size_t i = 0; i < shapes.size(); ++i) {
        const auto& [m, n, k, nk] = shapes[i];
        const yirage::v1::Graph gg = GemmGraph(dt, m, n, k, nk);
        std::vector<std::vector<KernelSpec>> plans;
        for (size_t p : {i, (i + 1) % points.size()}) {
          plans.push_back({Row({"p", "pb", "act", "half", "c"}, points[p]), Row({"d"}, points[p])});
        }
        cases.push_back({gg, plans});
      }
      // The gated form (two B, C tiles half the products' width) under
      // each point, B as [K, N] and [N, K], M, N and K off the tiles; the
      // second kernel's A is the first's output, passed in its dtype.
      for (size_t p = 0; p < points.size(); ++p) {
        const yirage::v1::Graph gg = GatedGemmGraph(dt, p % 2 ? 389 : 200, p % 2 ? 264 : 136,
                                                    p % 2 ? 136 : 72, p % 2 == 1, p >= 2);
        cases.push_back({gg,
                         {{Row({"g", "u", "ga", "us", "h", "hb"}, points[p]),
                           Row({"d", "c"}, points[(p + 1) % points.size()])}}});
      }
      // Split-K: the planner's ranges (one tile row, so the cluster turns
      // to 1 x 2 over 3 column tiles, the last cluster's second block past
      // the edge; 2 clusters: 2 ranges of 16 and 17 K blocks, the last
      // partial), and 3 ranges from the knobs under ping-pong.
      const yirage::v1::Graph auto_split = GemmGraph(dt, 100, 520, 2056, true);
      cases.push_back(
          {auto_split, {{Row({"p", "pb", "act", "half", "c"}, points[0]), Row({"d"}, points[0])}}});
      const yirage::v1::Graph set_split = GemmGraph(dt, 129, 200, 1000, false);
      const yirage::v1::Schedule three = WithGemm(Rows(4), 128, 128, 6, true, 2, 1, 3);
      cases.push_back(
          {set_split, {{Row({"p", "pb", "act", "half", "c"}, three), Row({"d"}, three)}}});
      // Whole tiles, then the last wave's split: 12 x 12 tiles on 132
      // blocks, the last 12 in 2 ranges (of 2 and 3 K blocks).
      const yirage::v1::Graph tail_split = GemmGraph(dt, 1500, 1536, 264, false);
      const yirage::v1::Schedule two = WithGemm(Rows(4), 128, 128, 6, true, 1, 1, 2);
      cases.push_back({tail_split, {{Row({"p", "pb", "act", "half", "c"}, two), Row({"d"}, two)}}});
      // Batches: B as [N, K] with N odd and K off the stage (the planner's
      // split-K over 4 tiles), B as [K, N] with two lead dims under
      // ping-pong in clusters, rows of A over its lead dims with a 2-D B;
      // tiles past M and N read the next product's rows.
      const std::vector<BatchedShape> batched = BatchedGemmShapes();
      for (size_t i = 0; i < batched.size(); ++i) {
        const auto& [lead, m, n, k, nk, is_batch] = batched[i];
        const yirage::v1::Graph bg = BatchedGemmGraph(dt, lead, m, n, k, nk, is_batch);
        std::vector<std::vector<KernelSpec>> plans;
        for (size_t p : {i, i + 2}) {
          plans.push_back({Row({"p", "pb", "act", "half", "c"}, points[p % points.size()]),
                           Row({"d"}, points[p % points.size()])});
        }
        cases.push_back({bg, plans});
      }
    }
    // The GEMM family's sm_80 form (sm_80 on, 16-bit; graphs "mma_..."):
    // every tile shape, M, N and K off the tiles (K 72 and 136: not
    // multiples of 64; N 255), B as [K, N] and [N, K], more tiles than
    // multiprocessors, the epilogue of bias, activation, scalar and
    // residual and the plain product, batches (tiles past M and N of one
    // product next to the next one's) and rows of A over lead dims.
    if (dt != FLOAT32 && TargetOfCompiles().sm >= 80) {
      const std::vector<yirage::v1::Schedule> mma = {
          WithMmaGemm(Rows(4), 128, 256, 3), WithMmaGemm(Rows(4), 128, 128, 4),
          WithMmaGemm(Rows(4), 128, 128, 3), WithMmaGemm(Rows(4), 64, 128, 4),
          WithMmaGemm(Rows(4), 64, 64, 4),   WithMmaGemm(Rows(4), 64, 64, 2)};
      const std::vector<std::tuple<int, int, int, bool>> shapes = {
          {65, 200, 72, false},   {129, 255, 136, true},  {4093, 264, 136, false},
          {389, 1288, 136, true}, {300, 64, 1096, false}, {1000, 520, 64, true}};
      for (size_t i = 0; i < shapes.size(); ++i) {
        const auto& [m, n, k, nk] = shapes[i];
        yirage::v1::Graph gg = GemmGraph(dt, m, n, k, nk);
        gg.set_name("mma_" + gg.name());
        std::vector<std::vector<KernelSpec>> plans;
        for (size_t p : {i, (i + 1) % mma.size()}) {
          plans.push_back({Row({"p", "pb", "act", "half", "c"}, mma[p]), Row({"d"}, mma[p])});
        }
        cases.push_back({gg, plans});
      }
      const std::vector<BatchedShape> batched = BatchedGemmShapes();
      for (size_t i = 0; i < batched.size(); ++i) {
        const auto& [lead, m, n, k, nk, is_batch] = batched[i];
        yirage::v1::Graph bg = BatchedGemmGraph(dt, lead, m, n, k, nk, is_batch);
        bg.set_name("mma_" + bg.name());
        std::vector<std::vector<KernelSpec>> plans;
        for (size_t p : {i, i + 3}) {
          plans.push_back({Row({"p", "pb", "act", "half", "c"}, mma[p % mma.size()]),
                           Row({"d"}, mma[p % mma.size()])});
        }
        cases.push_back({bg, plans});
      }
      // The gated form (tile_n 128 and 256: warps 64 products wide), B as
      // [K, N] and [N, K], the product first or second, M, N and K off the
      // tiles; the down GEMM reads the first kernel's output.
      for (size_t p = 0; p < 4; ++p) {
        yirage::v1::Graph gg = GatedGemmGraph(dt, p % 2 ? 389 : 200, p % 2 ? 264 : 136,
                                              p % 2 ? 136 : 72, p % 2 == 1, p >= 2);
        gg.set_name("mma_" + gg.name());
        cases.push_back({gg,
                         {{Row({"g", "u", "ga", "us", "h", "hb"}, mma[p % 3]),
                           Row({"d", "c"}, mma[3 + p % 3])}}});
      }
      // Split-K: the planner's ranges (3 x 3 tiles of 128 x 256 over K
      // 2056: 33 K blocks, 2 ranges), the knobs' 3 (one of them 1 K block
      // short), gated in 2 ranges, a batch in 2.
      auto split = [](yirage::v1::Schedule s, int ranges) {
        s.mutable_gemm()->set_split_k(ranges);
        return s;
      };
      yirage::v1::Graph auto_split = GemmGraph(dt, 300, 520, 2056, true);
      auto_split.set_name("mma_split_" + auto_split.name());
      yirage::v1::Schedule planner = mma[0];
      planner.mutable_gemm()->clear_split_k();
      cases.push_back({auto_split,
                       {{Row({"p", "pb", "act", "half", "c"}, planner), Row({"d"}, planner)},
                        {Row({"p", "pb", "act", "half", "c"}, split(mma[3], 3)),
                         Row({"d"}, split(mma[4], 2))}}});
      yirage::v1::Graph gated_split = GatedGemmGraph(dt, 200, 136, 1096, true, false);
      gated_split.set_name("mma_split_" + gated_split.name());
      cases.push_back({gated_split,
                       {{Row({"g", "u", "ga", "us", "h", "hb"}, split(mma[1], 2)),
                         Row({"d", "c"}, split(mma[4], 2))}}});
      yirage::v1::Graph batch_split = BatchedGemmGraph(dt, {2}, 100, 255, 1096, true, true);
      batch_split.set_name("mma_split_" + batch_split.name());
      cases.push_back({batch_split,
                       {{Row({"p", "pb", "act", "half", "c"}, split(mma[2], 2)),
                         Row({"d"}, split(mma[5], 3))}}});
    }
    if (dt == FLOAT32 && TargetOfCompiles().sm == 90) {
      // Shape i under points i and i + 1: every point under some shape.
      const std::vector<yirage::v1::Graph> tf32 = Tf32GemmGraphs();
      const std::vector<yirage::v1::Schedule> points = GemmPoints();
      for (size_t i = 0; i < tf32.size(); ++i) {
        std::vector<std::vector<KernelSpec>> plans;
        for (size_t p : {i, (i + 1) % points.size()}) {
          plans.push_back({Row({"p", "pb", "act", "half", "c"}, points[p]), Row({"d"}, points[p])});
        }
        cases.push_back({tf32[i], plans});
      }
    }
    // Register rows: one row a block, several (the last block's rows past
    // the end: 6 rows in blocks of 4, 5 in blocks of 2), a block's warps
    // set by the schedule.
    const yirage::v1::Graph nc = NormChainGraph(dt);
    cases.push_back({nc,
                     {OneRowGroup(nc, Rows(1)), OneRowGroup(nc, Rows(2)), OneRowGroup(nc, Rows(4)),
                      OneRowGroup(nc, WithGpu(Rows(1), 0, 1))}});
    const yirage::v1::Graph wr = WideRowsGraph(dt);
    cases.push_back({wr, {OneRowGroup(wr, Rows(1)), OneRowGroup(wr, Rows(2))}});
    // Register rows of any width: guarded last chunks, 4- and 1-element
    // chunks, one row a block and several.
    const yirage::v1::Graph od = OddRowsGraph(dt);
    cases.push_back(
        {od,
         {{Row({"xa", "ln", "xs"}, Rows(1)), Row({"ya", "ys", "yr", "yn"}, Rows(4)),
           Row({"zs", "zm", "zc", "zn"}, Rows(1))},
          {Row({"xa", "ln", "xs"}, Rows(3)), Row({"ya", "ys", "yr", "yn"}, Rows(2)),
           Row({"zs", "zm", "zc", "zn"}, Rows(4))},
          {Row({"xa", "ln", "xs"}, WithGpu(Rows(1), 0, 1)), Row({"ya", "ys", "yr", "yn"}, Rows(16)),
           Row({"zs", "zm", "zc", "zn"}, WithGpu(Rows(1), 0, 2))}}});
    const yirage::v1::Graph cr = ColumnReduceGraph(dt);
    cases.push_back({cr, {AllGeneric(cr)}});
    const yirage::v1::Graph nw = NarrowRowsGraph(dt);
    cases.push_back({nw,
                     {{Row({"px"}, Rows(256)), Row({"ny"}, Rows(256)), Row({"az", "sz"}, Rows(256)),
                       Row({"mm", "mr", "mn"}, Rows(25))},
                      {Row({"px"}, Rows(64)), Row({"ny"}, Rows(16)), Row({"az", "sz"}, Rows(4)),
                       Row({"mm", "mr", "mn"}, Rows(3))}}});
    const yirage::v1::Graph al = AxisLanesGraph(dt);
    cases.push_back({al, {AllGeneric(al)}});
    const yirage::v1::Graph gc = GenericChainsGraph(dt);
    cases.push_back({gc,
                     {AllGeneric(gc),
                      {GenericOps({"xg", "xm", "xr"}), GenericOps({"ys", "yp"}),
                       GenericOps({"zd", "zq"}), GenericOps({"la", "ln"}), Row({"ue"}, Rows(4)),
                       GenericOps({"uq", "us"}), GenericOps({"vm", "vt", "vy"}),
                       GenericOps({"sp", "sy"}), GenericOps({"qa", "qs", "qy"})}}});
    const yirage::v1::Graph ui = UnreadInputGraph(dt);
    cases.push_back({ui, {AllGeneric(ui), {Generic("s"), Row({"m", "y"}, Rows(4))}}});
    const yirage::v1::Graph sr = SplitRowsGraph(dt);
    cases.push_back({sr,
                     {{Row({"xw", "xa", "sx", "sm", "st"}, Rows(1)), Row({"my", "mn"}, Rows(1)),
                       Row({"az", "ae", "ab"}, Rows(1))}}});
    const yirage::v1::Graph nt = NormTailGraph(dt);
    cases.push_back({nt, {OneRowGroup(nt, Rows(1)), OneRowGroup(nt, Rows(4))}});
    const yirage::v1::Graph ga = GatherGraph(dt);
    cases.push_back({ga,
                     {{Row({"ab", "s", "m"}, Rows(1)), Row({"xy", "xs", "o"}, Rows(1))},
                      {Row({"ab", "s", "m"}, Cols(64)), Row({"xy", "xs", "o"}, Rows(4))}}});
    const yirage::v1::Graph pr = PerRowGraph(dt);
    cases.push_back({pr,
                     {{Row({"g", "m", "p", "q"}, Rows(1)), Row({"ym", "yd", "ye"}, Rows(1)),
                       Row({"za", "zm", "zd"}, Rows(1))},
                      {Row({"g", "m", "p", "q"}, Rows(4)), Row({"ym", "yd", "ye"}, Rows(8)),
                       Row({"za", "zm", "zd"}, Rows(2))}}});
    const yirage::v1::Graph gm = GatherManyRowsGraph(dt);
    cases.push_back({gm, {{Row({"c", "s"}, Cols())}, {Row({"c", "s"}, Rows(1))}}});
    const yirage::v1::Graph gu = GatherUnalignedGraph(dt);
    cases.push_back({gu,
                     {{Row({"abc", "aa", "o"}, Rows(1)), Row({"xy", "xs", "m"}, Rows(1))},
                      {Row({"abc", "aa", "o"}, Rows(1, 0, 0, 0, 3)),
                       Row({"xy", "xs", "m"}, Rows(1, 0, 0, 0, 4))}}});
    const yirage::v1::Graph gv = GatherVectorsGraph(dt);
    cases.push_back({gv, {{Row({"pq", "w", "sw"}, Rows(1)), Row({"k", "kr", "kb"}, Rows(1))}}});
    const yirage::v1::Graph sn = SplitNormsGraph(dt);
    cases.push_back(
        {sn, {{Row({"st", "p"}, Rows(1)), Row({"ny", "gy"}, Rows(1)), Row({"h", "nx"}, Rows(1))}}});
    // The flat kernel: its own unroll, 3 and 8 items a thread a round.
    const yirage::v1::Graph fl = FlatChainGraph(dt);
    cases.push_back({fl,
                     {OneRowGroup(fl, Rows(1)), OneRowGroup(fl, Rows(1, 0, 0, 0, 3)),
                      OneRowGroup(fl, Rows(1, 0, 0, 0, 8))}});
    const yirage::v1::Graph fo = FlatOddGraph(dt);
    cases.push_back({fo,
                     {{Row({"S", "M", "Y", "Z"}, Rows(1)), Row({"T"}, Rows(1))},
                      {Row({"S", "M", "Y", "Z"}, Rows(1, 0, 0, 0, 4)), Row({"T"}, Rows(1))}}});
    if (dt != FLOAT32) {
      for (const yirage::v1::Graph& sm :
           {StreamedGatedGraph(dt, 24, 512, 128), StreamedRmsLinearGraph(dt, 3, 1024, 192),
            StreamedLoraGraph(dt, 16, 256, 128, 16), StreamedLoraGraph(dt, 40, 128, 64, 32)}) {
        // Shared-memory form: automatic split, one split (epilogue in the
        // kernel), two splits with a two-stage pipeline. Registers form
        // (not LoRA's): automatic, one split, two splits of two-warp blocks
        // loading three steps ahead, 16-warp blocks with their automatic
        // split. The wgmma form (X padded to 64 rows; the gated chain's
        // only: no low-rank branch, no prologue). The backend's choice.
        const bool lora = sm.name() == "streamed_lora";
        const bool gated = sm.name() == "streamed_gated";
        std::vector<std::vector<KernelSpec>> plans = {
            OneRowGroup(sm, WithForm(Rows(4), 1)),
            OneRowGroup(sm, WithForm(WithGpu(Rows(4), 1), 1)),
            OneRowGroup(sm, WithForm(WithGpu(Rows(4), 2, 0, 2), 1)), OneRowGroup(sm, Rows(4))};
        if (!lora) {
          for (const yirage::v1::Schedule& s :
               {Rows(4), WithGpu(Rows(4), 1), WithGpu(Rows(4), 2, 2, 3),
                WithGpu(Rows(4), 0, 16, 2)}) {
            plans.push_back(OneRowGroup(sm, WithForm(s, 2)));
          }
        }
        if (gated) plans.push_back(OneRowGroup(sm, WithForm(Rows(4), 4)));
        cases.push_back({sm, plans});
      }
      // 64-row tiles (rows not a multiple of 16 in the second): the
      // shared-memory form's warps along the rows (8 by default, 16, 4),
      // its K splits summed in a cluster (sm_90) or by a combine kernel
      // (FORM_SHARED_COMBINE), the norm's sums of squares through either.
      // The wgmma form (FORM_WGMMA; sm_90, no prologue): automatic splits,
      // one split (epilogue in the kernel), 4 splits in a cluster; with
      // more column tiles than a cluster grid fits, a combine kernel.
      for (const yirage::v1::Graph& sm :
           {StreamedGatedGraph(dt, 64, 1024, 128), StreamedRmsLinearGraph(dt, 50, 1024, 192)}) {
        std::vector<std::vector<KernelSpec>> plans = {
            OneRowGroup(sm, WithForm(Rows(4), 1)),
            OneRowGroup(sm, WithForm(WithGpu(Rows(4), 4, 16, 3), 1)),
            OneRowGroup(sm, WithForm(WithGpu(Rows(4), 2, 4, 2), 1)),
            OneRowGroup(sm, WithForm(WithGpu(Rows(4), 2, 8), 3)),
            OneRowGroup(sm, WithForm(WithGpu(Rows(4), 1, 16), 1))};
        if (sm.name() == "streamed_gated") {
          plans.push_back(OneRowGroup(sm, WithForm(Rows(4), 4)));
          plans.push_back(OneRowGroup(sm, WithForm(WithGpu(Rows(4), 1, 0, 5), 4)));
          plans.push_back(OneRowGroup(sm, WithForm(WithGpu(Rows(4), 4, 0, 3), 4)));
        }
        cases.push_back({sm, plans});
      }
      const yirage::v1::Graph wide = StreamedGatedGraph(dt, 64, 1024, 2304);
      cases.push_back({wide, {OneRowGroup(wide, WithForm(WithGpu(Rows(4), 4, 0, 4), 4))}});
      const yirage::v1::Graph wide_rms = StreamedRmsLinearGraph(dt, 40, 1024, 2304);
      cases.push_back({wide_rms, {OneRowGroup(wide_rms, WithForm(WithGpu(Rows(4), 4, 0, 4), 1))}});
    }
    const yirage::v1::Graph l = LoraGraph(dt);
    cases.push_back({l,
                     {AllGeneric(l), OneRowGroup(l, Rows(16, 64)),
                      OneRowGroup(l, WithGpu(Rows(8, 128), 2)), AllRowSingles(l, Cols(32))}});
  }
  return cases;
}

// CPU-only (CI): every plan of every case compiles with NVRTC.
TEST(CudaCodegenCompileTest, EveryPlanKindCompilesWithNvrtc) {
  int plans = 0;
  const char* filter = std::getenv("YIRAGE_CASE_FILTER");  // as in the GPU test below
  for (const Case& c : AllCases()) {
    if (filter != nullptr && c.graph.name().find(filter) == std::string::npos) continue;
    SCOPED_TRACE(c.graph.name());
    absl::StatusOr<core::Graph> g = core::Graph::FromProto(c.graph);
    ASSERT_TRUE(g.ok()) << g.status();
    Compiled compiled;
    CompileThroughAbi(c.graph, MakePlans(*g, c.plans), &compiled);
    ExpectAllCompiled(compiled);
    plans += compiled.response.plans_size();
  }
  std::printf("[ compiled ] %d hand-made plans with NVRTC\n", plans);
}

// CPU-only (CI): float32 GEMM chains within a loose tolerance are planned
// on the GEMM kernel through TF32, not the row kernels; a tight tolerance
// keeps them in float32.
TEST(CudaCodegenCompileTest, Tf32GemmWhereTheToleranceAllows) {
  if (TargetOfCompiles().sm != 90) GTEST_SKIP() << "the GEMM family is sm_90's";
  yirage::v1::Graph g = Tf32GemmGraphs().front();
  absl::StatusOr<core::Graph> graph = core::Graph::FromProto(g);
  ASSERT_TRUE(graph.ok()) << graph.status();
  const std::vector<KernelSpec> spec = {Row({"p", "pb", "act", "half", "c"}, GemmPoints()[0]),
                                        Row({"d"}, GemmPoints()[0])};
  Compiled loose;
  CompileThroughAbi(g, MakePlans(*graph, {spec}), &loose);
  ExpectAllCompiled(loose);
  EXPECT_NE(loose.response.plans(0).source().find("yr_gemm_sm90_cfg<float"), std::string::npos);
  g.mutable_tolerance()->set_rtol(1e-4);
  graph = core::Graph::FromProto(g);
  ASSERT_TRUE(graph.ok()) << graph.status();
  Compiled tight;
  CompileThroughAbi(g, MakePlans(*graph, {spec}), &tight);
  ExpectAllCompiled(tight);
  EXPECT_EQ(tight.response.plans(0).source().find("yr_gemm_sm90_cfg"), std::string::npos);
}

// CPU-only (CI): few long rows reduce in split rows (each of the three
// reductions) and norm in split rows (each of the three norms); concats
// and slices gather elements over the whole grid; a norm followed by elementwise ops
// without a matmul has no column-tile phase (each tile's block would redo the norm).
TEST(CudaCodegenCompileTest, FewLongRowsSplitAndNormTailsStayWhole) {
  const yirage::v1::Graph sr = SplitRowsGraph(FLOAT16);
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(sr);
  ASSERT_TRUE(g.ok()) << g.status();
  Compiled split;
  CompileThroughAbi(sr,
                    MakePlans(*g, {{Row({"xw", "xa", "sx", "sm", "st"}, Rows(1)),
                                    Row({"my", "mn"}, Rows(1)), Row({"az", "ae", "ab"}, Rows(1))}}),
                    &split);
  ExpectAllCompiled(split);
  // The ops after each reduction run in its kernel, applied as the last
  // block stores: one launch a group.
  EXPECT_EQ(split.response.plans(0).launch().launches_size(), 3)
      << split.response.plans(0).source();
  const std::string& src = split.response.plans(0).source();
  EXPECT_NE(src.find("3 row(s) of 40000, split rows, reduction (19 blocks a row"),
            std::string::npos)
      << src;
  EXPECT_NE(src.find("1 row(s) of 99999, split rows"), std::string::npos);
  EXPECT_NE(src.find("2 row(s) of 50001, split rows"), std::string::npos);
  const yirage::v1::Graph nt = NormTailGraph(FLOAT16);
  g = core::Graph::FromProto(nt);
  ASSERT_TRUE(g.ok()) << g.status();
  Compiled whole;
  CompileThroughAbi(nt, MakePlans(*g, {OneRowGroup(nt, Rows(1))}), &whole);
  ExpectAllCompiled(whole);
  EXPECT_EQ(whole.response.plans(0).source().find("tile phase"), std::string::npos)
      << whole.response.plans(0).source();
  const yirage::v1::Graph ga = GatherGraph(FLOAT16);
  g = core::Graph::FromProto(ga);
  ASSERT_TRUE(g.ok()) << g.status();
  Compiled gather;
  CompileThroughAbi(
      ga, MakePlans(*g, {{Row({"ab", "s", "m"}, Cols(64)), Row({"xy", "xs", "o"}, Rows(1))}}),
      &gather);
  ExpectAllCompiled(gather);
  const std::string& gs = gather.response.plans(0).source();
  EXPECT_NE(gs.find("1 rows, gather elements (8 a thread, unroll 2, 37 blocks"), std::string::npos)
      << gs;
  EXPECT_NE(gs.find("5 rows, gather elements"), std::string::npos) << gs;
  const yirage::v1::Graph sn = SplitNormsGraph(FLOAT16);
  g = core::Graph::FromProto(sn);
  ASSERT_TRUE(g.ok()) << g.status();
  Compiled norms;
  CompileThroughAbi(sn,
                    MakePlans(*g, {{Row({"st", "p"}, Rows(1)), Row({"ny", "gy"}, Rows(1)),
                                    Row({"h", "nx"}, Rows(1))}}),
                    &norms);
  ExpectAllCompiled(norms);
  const std::string& ns = norms.response.plans(0).source();
  for (const char* form :
       {"2 row(s) of 65536, split rows, statistics (32 blocks a row",
        "2 row(s) of 65536, split rows, apply (32 blocks a row",
        "1 row(s) of 99999, split rows, statistics (379 blocks a row of 264 elements",
        "3 row(s) of 49152, split rows, apply (24 blocks a row"}) {
    EXPECT_NE(ns.find(form), std::string::npos) << form << "\n" << ns;
  }
}

// NEEDS A GPU: the same plans, run and compared with the reference.
// YIRAGE_CASE_FILTER=TEXT keeps the graphs whose name contains TEXT (a
// quicker check of one kernel form on the device).
TEST(CudaCodegenGpuTest, EveryPlanKindMatchesReference) {
  YR_REQUIRE_GPU();
  const char* filter = std::getenv("YIRAGE_CASE_FILTER");
  for (const Case& c : AllCases()) {
    if (filter != nullptr && c.graph.name().find(filter) == std::string::npos) continue;
    SCOPED_TRACE(c.graph.name());
    // One line a case, flushed: a run killed at its time limit still says
    // how far it got.
    std::printf("[ case ] %s (%zu plans)\n", c.graph.name().c_str(), c.plans.size());
    std::fflush(stdout);
    CheckCudaPlans(c.graph, c.plans);
  }
}

// NEEDS A GPU: split rows' counters are left zero for the next launch:
// three launches with other inputs each time.
TEST(CudaCodegenGpuTest, SplitRowsHoldAcrossLaunches) {
  YR_REQUIRE_GPU();
  const yirage::v1::Graph sr = SplitRowsGraph(BFLOAT16);
  CheckCudaPlans(sr,
                 {{Row({"xw", "xa", "sx", "sm", "st"}, Rows(1)), Row({"my", "mn"}, Rows(1)),
                   Row({"az", "ae", "ab"}, Rows(1))}},
                 {}, 3);
}

// NEEDS A GPU: attention's key splits merged in the kernel (the blocks of a
// query tile wait for each other at a counter that lasts across launches),
// launched three times with other inputs each time: the small graphs in the
// most splits, and gqa_decode b1 as the search gets it (16 splits).
TEST(CudaCodegenGpuTest, InKernelAttentionMergeHoldsAcrossLaunches) {
  YR_REQUIRE_GPU();
  for (const yirage::v1::Graph& fa :
       {FlashAttentionGraph(FLOAT16), ScaledAttentionGraph(BFLOAT16)}) {
    const int max_splits = fa.name() == "flash_attention" ? 4 : 2;
    CheckCudaPlans(fa,
                   {OneRowGroup(fa, WithForm(WithGpu(Rows(64), max_splits, 4, 4), 4)),
                    OneRowGroup(fa, WithForm(WithGpu(Rows(32), 2, 4, 2), 4))},
                   {}, 3);
  }
  absl::StatusOr<yirage::v1::Graph> b1 =
      LoadGraph(SourceDir() + "/examples/graphs/bench/gqa_decode_b1.json");
  ASSERT_TRUE(b1.ok()) << b1.status();
  CheckCudaPlans(*b1, {OneRowGroup(*b1, WithWarpRows(WithGpu(Rows(64), 0, 4, 4), 32))}, {}, 3);
}

// NEEDS A GPU: a kernel given more shared memory than the device has fails
// its own plan, with an error that says so, and the module's other plans
// still run. The target claims 1 MiB a block, so the planner keeps an
// attention form whose ring needs 280 KiB (D = 128, four key groups, two
// stages) that no NVIDIA GPU has (the compile is checked without one).
TEST(CudaCodegenGpuTest, TooMuchSharedMemoryFailsOnlyItsPlan) {
  const yirage::v1::Graph proto = HeadDim128AttentionGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok()) << g.status();
  // Without a device the request's target claims 1 MiB a block; on one, the
  // backend's test hook does (a device's own limit is what it compiles for).
  yirage::v1::CompileTarget target = H200CompileTarget();
  target.set_max_shared_memory_per_block(1 << 20);
  auto claim =
      reinterpret_cast<void (*)(int64_t)>(BackendSymbol("YirageCudaBackendTestClaimSharedMemory"));
  ASSERT_NE(claim, nullptr);
  claim(1 << 20);
  Compiled c;
  CompileThroughAbi(
      proto,
      MakePlans(*g, {OneRowGroup(proto, WithGpu(Rows(64), 1, 16, 2)),
                     OneRowGroup(proto, WithGpu(Rows(64), 1, 8, 2)), AllGeneric(proto)}),
      &c, target);
  claim(0);
  ExpectAllCompiled(c);
  ASSERT_NE(c.response.plans(0).source().find("4 row warps x 4 key group(s), 2 stages"),
            std::string::npos)
      << "plan 0 is no longer the 280 KiB form:\n"
      << c.response.plans(0).source();
  int32_t smem = 0;
  for (const auto& l : c.response.plans(0).launch().launches())
    smem = std::max(smem, l.smem_bytes());
  EXPECT_GT(smem, 232448) << "more than an H100's or H200's 227 KiB a block";
  YR_REQUIRE_GPU();  // compiled on any machine, run on a GPU
  const core::CompareResult big = RunAndCompare(*g, c, 0);
  EXPECT_FALSE(big.ok);
  EXPECT_NE(big.message.find("bytes of shared memory"), std::string::npos) << big.message;
  for (int i : {1, 2, 1}) {
    const core::CompareResult r = RunAndCompare(*g, c, i);
    EXPECT_TRUE(r.ok) << "plan " << i << " after the failed plan: " << r.message;
  }
}

// NEEDS A GPU: decode-sized fused groups with tensor-core-sized tiles and K
// large enough for split-K to matter.
TEST(CudaCodegenGpuTest, LargeFusedMatmulsMatchReference) {
  YR_REQUIRE_GPU();
  const yirage::v1::Graph g = GatedMlpGraph(FLOAT16, 8, 2048, 1024);
  CheckCudaPlans(
      g, {OneRowGroup(g, Rows(8, 128)), OneRowGroup(g, WithGpu(Rows(8, 64), 8)),
          OneRowGroup(g, WithGpu(Cols(256), 16, 8)), OneRowGroup(g, WithGpu(Cols(128), 1, 0, 2))});
  // Tensor-core tiles with M not a multiple of 16, bf16, several row blocks.
  const yirage::v1::Graph b = GatedMlpGraph(BFLOAT16, 24, 1024, 512);
  CheckCudaPlans(b, {OneRowGroup(b, Cols(128)),
                     OneRowGroup(b, WithGpu(Cols(64), 3, 0, 3)),
                     {Row({"N", "S"}, Rows(4)), Row({"A", "Sg", "Bm", "Y"}, Cols(128))}});
  // Streamed matmuls at decode shapes, both forms, several splits.
  const yirage::v1::Graph sg = StreamedGatedGraph(FLOAT16, 8, 2048, 1024);
  CheckCudaPlans(sg, {OneRowGroup(sg, WithForm(Rows(4), 1)), OneRowGroup(sg, WithForm(Rows(4), 2)),
                      OneRowGroup(sg, WithForm(WithGpu(Rows(4), 8, 8, 1), 2)),
                      OneRowGroup(sg, WithForm(WithGpu(Rows(4), 0, 16, 2), 2)),
                      OneRowGroup(sg, WithForm(WithGpu(Rows(4), 2, 0, 3), 1))});
  const yirage::v1::Graph sr = StreamedRmsLinearGraph(BFLOAT16, 16, 2048, 512);
  CheckCudaPlans(
      sr, {OneRowGroup(sr, WithForm(Rows(4), 2)), OneRowGroup(sr, WithForm(WithGpu(Rows(4), 1), 2)),
           OneRowGroup(sr, WithForm(WithGpu(Rows(4), 4, 8, 2), 2))});
  // LoRA, shared-memory form: a ring that holds all of K and one that does
  // not; 8, 16, 40 and 64 rows (1 and 4 row tiles, 40 padded to 64);
  // ranks 16 and 32.
  const yirage::v1::Graph sl = StreamedLoraGraph(FLOAT16, 16, 256, 1024, 16);
  CheckCudaPlans(sl, {OneRowGroup(sl, WithForm(WithGpu(Rows(4), 1, 0, 6), 1)),
                      OneRowGroup(sl, WithForm(WithGpu(Rows(4), 1, 0, 3), 1))});
  const yirage::v1::Graph sl40 = StreamedLoraGraph(BFLOAT16, 40, 512, 512, 16);
  CheckCudaPlans(sl40, {OneRowGroup(sl40, WithForm(WithGpu(Rows(4), 1), 1))});
  const yirage::v1::Graph sl32 = StreamedLoraGraph(FLOAT16, 8, 512, 512, 32);
  CheckCudaPlans(sl32, {OneRowGroup(sl32, WithForm(WithGpu(Rows(4), 1), 1))});
  const yirage::v1::Graph sl64 = StreamedLoraGraph(FLOAT16, 64, 512, 512, 32);
  CheckCudaPlans(sl64, {OneRowGroup(sl64, WithForm(WithGpu(Rows(4), 1), 1))});
  const yirage::v1::Graph many = GatedMlpGraph(FLOAT16, 100, 512, 256);
  CheckCudaPlans(many, {OneRowGroup(many, Cols(128)), OneRowGroup(many, Rows(16, 64))});
}

// How many times `what` occurs in `text`.
int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string PlanSource(const yirage::v1::Graph& proto, const std::vector<KernelSpec>& spec) {
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  EXPECT_TRUE(g.ok());
  Compiled c;
  CompileThroughAbi(proto, MakePlans(*g, {spec}), &c);
  ExpectAllCompiled(c);
  // The source, then the launches the backend reports beside it.
  return c.response.plans_size() > 0
             ? c.response.plans(0).source() +
                   "\n// launches: " + c.response.plans(0).launch().ShortDebugString()
             : "";
}

// CPU-only (CI): rows at most 16 wide take up to 256 rows a block (a
// thread a row); wider rows stay at 64.
TEST(CudaCodegenCompileTest, NarrowRowsTakeAThreadARow) {
  const yirage::v1::Graph nw = NarrowRowsGraph(FLOAT32);
  const std::string src =
      PlanSource(nw, {Row({"px"}, Rows(256)), Row({"ny"}, Rows(256)), Row({"az", "sz"}, Rows(256)),
                      Row({"mm", "mr", "mn"}, Rows(25))});
  EXPECT_EQ(CountOf(src, "rows, BR 256, threads 256"), 3) << src;
  // K 7: one K lane (no shared atomics), 25 rows over 7 x 25 threads.
  EXPECT_NE(src.find("const int rl = tid / 7;"), std::string::npos) << src;
  EXPECT_NE(src.find("if (rl < 25)"), std::string::npos) << src;
  EXPECT_EQ(src.find("atomicAdd"), std::string::npos) << src;
  GraphBuilder b("wide_softmax");
  b.Input("x", {3001, 40}, FLOAT32).Op("p", "softmax", {"x"}).Output("p");
  const std::string wide = PlanSource(b.proto(), {Row({"p"}, Rows(256))});
  EXPECT_NE(wide.find("rows, BR 64, "), std::string::npos) << wide;
}

// CPU-only (CI): a row kernel's matmul by B^T reads a lane's K values of B
// (contiguous in its row) a vector at a time: 16 bytes where K allows, 8
// bytes of 4 16-bit values at K 12, one element a load at K 7.
TEST(CudaCodegenCompileTest, TransposedBRowsReadVectorsAlongK) {
  for (DType dt : {FLOAT16, BFLOAT16, FLOAT32}) {
    const yirage::v1::Graph mm = MatmulGraph(dt);
    const std::string src = PlanSource(mm, AllRowSingles(mm, Rows(2, 16, 16)));
    const bool half = dt != FLOAT32;
    SCOPED_TRACE(half ? "16-bit" : "float32");
    EXPECT_NE(src.find(absl::StrCat(half ? "yr_ld8" : "yr_ld4", "(pb + (i64)cb * 48 + kk, bk);")),
              std::string::npos)
        << src;
    EXPECT_NE(src.find("yr_ld4(pb + (i64)cb * 12 + kk, bk);"), std::string::npos) << src;
    EXPECT_NE(src.find("bv[0] = yr_ld(pb, (i64)cb * 7 + kk);"), std::string::npos) << src;
  }
}

// CPU-only (CI): whole rows stored from the block buffer (a concat along
// the row) take 4 values a store where the width is a multiple of 4 (2000),
// one otherwise (2002).
TEST(CudaCodegenCompileTest, FullRowStoresWriteVectorsWhereTheWidthAllows) {
  for (DType dt : {FLOAT16, FLOAT32}) {
    for (const int64_t w : {1000, 1001}) {
      SCOPED_TRACE(absl::StrCat(dt == FLOAT32 ? "float32 " : "float16 ", w));
      GraphBuilder b("concat_rows");
      b.Input("x", {1000, w}, dt).Input("y", {1000, w}, dt);
      b.Op("c", "concat", {"x", "y"}, {I("axis", 1)}).Output("c");
      const std::string src = PlanSource(b.proto(), {Row({"c"}, Rows(4))});
      if (w % 2 == 0) {
        EXPECT_NE(src.find("for (int x = tid * 4; x < nr * 2000; x += "), std::string::npos) << src;
        EXPECT_NE(src.find("yr_st4(o0, r0 * 2000 + x, b0 + x);"), std::string::npos) << src;
      } else {
        EXPECT_EQ(src.find("yr_st4(o0"), std::string::npos) << src;
        EXPECT_NE(src.find("yr_st(o0, r0 * 2002 + x, b0[x]);"), std::string::npos) << src;
      }
    }
  }
}

// CPU-only (CI): the sm_80 GEMM form on the H200 target: few tiles split
// K by the planner (a workspace and zeroed counters in the plan's
// buffers), a gated chain passes B2, the knobs' split_k 1 is none.
TEST(CudaCodegenCompileTest, Sm80GemmSplitsKAndTakesGatedPairs) {
  const yirage::v1::Graph g = GemmGraph(BFLOAT16, 300, 520, 2056, true);
  const std::string src = PlanSource(
      g, {Row({"p", "pb", "act", "half", "c"}, WithMmaGemm(Rows(4), 128, 256, 3, /*split_k=*/0)),
          Row({"d"}, WithMmaGemm(Rows(4), 64, 64, 4))});
  EXPECT_NE(src.find("yr_gemm80_split{2, ws, flags}"), std::string::npos) << src;
  EXPECT_NE(src.find("split-K partial sums"), std::string::npos) << src;
  EXPECT_NE(src.find("GEMM (cp.async, mma.sync; tile 64 x 64, 4 stages, 2 x 2 warps"),
            std::string::npos)
      << src;
  const yirage::v1::Graph gated = GatedGemmGraph(FLOAT16, 200, 136, 72, false, false);
  const std::string gsrc =
      PlanSource(gated, {Row({"g", "u", "ga", "us", "h", "hb"}, WithMmaGemm(Rows(4), 128, 128, 3)),
                         Row({"d", "c"}, WithMmaGemm(Rows(4), 64, 128, 4))});
  EXPECT_NE(gsrc.find("8, true>"), std::string::npos) << "the gated template" << gsrc;
  EXPECT_NE(gsrc.find("__restrict__ b2"), std::string::npos) << gsrc;
}

// CPU-only (CI): the gather form takes 8 columns a thread over one row or
// rows whose outputs are a multiple of 8 wide, pieces and slice starts
// anywhere (loads aligned at run time where they are not at 16 bytes), one
// otherwise.
TEST(CudaCodegenCompileTest, GatherFormsVectorizeAnyPieces) {
  const yirage::v1::Graph gv = GatherVectorsGraph(BFLOAT16);
  const std::string src =
      PlanSource(gv, {Row({"pq", "w", "sw"}, Rows(1)), Row({"k", "kr", "kb"}, Rows(1))});
  if (std::getenv("YIRAGE_DUMP_SOURCE") != nullptr) std::printf("%s\n", src.c_str());
  EXPECT_EQ(CountOf(src, "gather elements (8 a thread"), 2) << src;
  const std::string kernels = src.substr(src.find("// kernel 0"));
  // p and q; kc, kn and cb 16 bytes at a time; rb one load for 8 columns.
  EXPECT_EQ(CountOf(kernels, "yr_ld8_any("), 5) << src;
  EXPECT_EQ(CountOf(kernels, "const float s_ = yr_ld("), 1) << src;
  const yirage::v1::Graph ga = GatherGraph(BFLOAT16);
  const std::string odd =
      PlanSource(ga, {Row({"ab", "s", "m"}, Rows(1)), Row({"xy", "xs", "o"}, Rows(1))});
  EXPECT_EQ(CountOf(odd, "gather elements (8 a thread"), 2) << odd;
  const yirage::v1::Graph gu = GatherUnalignedGraph(BFLOAT16);
  const std::string any =
      PlanSource(gu, {Row({"abc", "aa", "o"}, Rows(1)), Row({"xy", "xs", "m"}, Rows(1))});
  // 53009 elements: 6626 items of 8 over 13 blocks of 2 a thread, the last
  // one a thread.
  EXPECT_NE(any.find("1 rows, gather elements (8 a thread, unroll 2, 13 blocks"), std::string::npos)
      << any;
  EXPECT_NE(any.find("threadIdx.x < 1)"), std::string::npos) << any;
  EXPECT_NE(any.find("6 rows, gather elements (8 a thread"), std::string::npos) << any;
  // Rows 1001 wide take one column a thread.
  GraphBuilder b("gather_rows_odd");
  b.Input("x", {6, 1003}, BFLOAT16).Input("y", {6, 5}, BFLOAT16);
  b.Op("xy", "concat", {"x", "y"}, {I("axis", 1)});
  b.Op("xs", "slice", {"xy"}, {I("axis", 1), I("start", 3), I("end", 1004)}).Output("xs");
  const std::string rows = PlanSource(b.proto(), {Row({"xy", "xs"}, Rows(1))});
  EXPECT_NE(rows.find("6 rows, gather elements (1 a thread"), std::string::npos) << rows;
  // 1000 rows: the gather under PARALLEL_COLS only (the search times both).
  const yirage::v1::Graph gm = GatherManyRowsGraph(BFLOAT16);
  EXPECT_NE(
      PlanSource(gm, {Row({"c", "s"}, Cols())}).find("1000 rows, gather elements (8 a thread"),
      std::string::npos);
  EXPECT_EQ(PlanSource(gm, {Row({"c", "s"}, Rows(1))}).find("gather elements"), std::string::npos);
}

// CPU-only (CI): flat kernels load 16 bytes an item over the largest
// multiple of 8 elements and take the rest one a thread; a row broadcast
// whose width is a multiple of 8 is one 16-byte load an item, a per-row one
// a single load, other broadcasts element by element.
TEST(CudaCodegenCompileTest, FlatKernelsVectorizeOddCountsAndBroadcasts) {
  const yirage::v1::Graph odd = FlatOddGraph(FLOAT16);
  const std::string src =
      PlanSource(odd, {Row({"S", "M", "Y", "Z"}, Rows(1)), Row({"T"}, Rows(1))});
  if (std::getenv("YIRAGE_DUMP_SOURCE") != nullptr) std::printf("%s\n", src.c_str());
  EXPECT_NE(src.find("21021 elements, flat elementwise (8 a thread"), std::string::npos) << src;
  EXPECT_NE(src.find("the last 5 one a thread"), std::string::npos) << src;
  EXPECT_NE(src.find("if (e >= 21016LL) break;"), std::string::npos) << src;
  EXPECT_NE(src.find("5 elements, flat elementwise (1 a thread"), std::string::npos) << src;
  // X and G 16 bytes an item; r (width 7) and c (per row, width 7) element by element.
  const std::string kernels = src.substr(src.find("// kernel 0"));
  EXPECT_EQ(CountOf(kernels, "reinterpret_cast<const uint4*>("), 2) << src;
  const yirage::v1::Graph chain = FlatChainGraph(BFLOAT16);
  const std::string chain_src = PlanSource(chain, OneRowGroup(chain, Rows(1)));
  if (std::getenv("YIRAGE_DUMP_SOURCE") != nullptr) std::printf("%s\n", chain_src.c_str());
  // X, G and the row c 16 bytes an item; k one element for all 8.
  EXPECT_EQ(
      CountOf(chain_src.substr(chain_src.find("// kernel 0")), "reinterpret_cast<const uint4*>("),
      3)
      << chain_src;
  EXPECT_NE(chain_src.find("const float x = yr_ld("), std::string::npos) << chain_src;
  EXPECT_EQ(chain_src.find("one a thread"), std::string::npos) << chain_src;
}

// CPU-only (CI): skinny 16-bit matmuls take the tensor-core path, with split-K
// chosen automatically (split_k 0) or as given; float32 keeps SIMT.
TEST(CudaCodegenCompileTest, SkinnyHalfMatmulsUseTensorCores) {
  const yirage::v1::Graph g = GatedMlpGraph(FLOAT16, 8, 4096, 4096);
  const std::string src = PlanSource(g, OneRowGroup(g, Cols(128)));
  EXPECT_NE(src.find("// tensor cores: 2 matmul tile(s), K 4096"), std::string::npos) << src;
  EXPECT_NE(src.find("wmma::mma_sync"), std::string::npos);
  if (std::getenv("YIRAGE_DUMP_SOURCE") != nullptr) std::printf("%s\n", src.c_str());
  EXPECT_NE(src.find("cp.async"), std::string::npos);
  EXPECT_EQ(src.find(", split_k 1"), std::string::npos) << "expected an automatic split-K";
  const std::string explicit_split = PlanSource(g, OneRowGroup(g, WithGpu(Cols(128), 2)));
  EXPECT_NE(explicit_split.find(", split_k 2"), std::string::npos);
  EXPECT_NE(explicit_split.find("slice 2048"), std::string::npos);
  const yirage::v1::Graph f = GatedMlpGraph(FLOAT32, 8, 512, 512);
  EXPECT_EQ(PlanSource(f, OneRowGroup(f, Cols(128))).find("tensor cores"), std::string::npos);
}

// CPU-only (CI): gated MLP, rms_norm -> linear and LoRA chains become the
// streamed matmul kernel; K splits as the schedule says.
TEST(CudaCodegenCompileTest, StreamedMatmulChainsUseTheFusedKernel) {
  const yirage::v1::Graph gated = StreamedGatedGraph(FLOAT16, 8, 4096, 4096);
  const std::string g_src = PlanSource(gated, OneRowGroup(gated, Cols(128)));
  EXPECT_NE(g_src.find("streamed matmul, weights to registers"), std::string::npos) << g_src;
  EXPECT_EQ(g_src.find("_combine("), std::string::npos) << "the last block adds the splits";
  EXPECT_EQ(g_src.find(", 1 K split(s)"), std::string::npos) << "expected a K split";
  const std::string shared = PlanSource(gated, OneRowGroup(gated, WithForm(Cols(128), 1)));
  EXPECT_NE(shared.find("cp.async pipeline"), std::string::npos) << shared;
  EXPECT_NE(shared.find("_combine("), std::string::npos) << "expected a K split";
  // 64 rows on sm_90: 8 warps, two K splits summed in a cluster;
  // FORM_SHARED_COMBINE sums them with a combine kernel.
  if (TargetOfCompiles().sm >= 90) {
    const yirage::v1::Graph g64 = StreamedGatedGraph(FLOAT16, 64, 4096, 4096);
    const std::string cl = PlanSource(g64, OneRowGroup(g64, WithForm(Cols(128), 1)));
    EXPECT_NE(cl.find("2 K split(s) in a cluster, 4 stages, 256 threads"), std::string::npos) << cl;
    EXPECT_NE(cl.find("__cluster_dims__(1, 2, 1)"), std::string::npos);
    EXPECT_EQ(cl.find("_combine("), std::string::npos);
    // streamed_matmul.cuh's shared form, fp16 in and out: 64 rows (4 row
    // tiles), two weights, rank 0, 2 splits, 4 stages, 256 threads, no
    // column scales, no wgmma, no rms, the gated epilogue, in a cluster.
    EXPECT_NE(cl.find("yr_streamed_matmul<__half, __half, 64, 4, 4096, 4096, 2, 0, 2, 4, 256, 0, "
                      "false, false, 1, true>(x_in, w1, w2, nullptr, nullptr, "),
              std::string::npos)
        << cl;
    const std::string ws = PlanSource(g64, OneRowGroup(g64, WithForm(WithGpu(Cols(128), 2), 3)));
    EXPECT_NE(ws.find("2 K split(s) (combine kernel)"), std::string::npos) << ws;
    EXPECT_NE(ws.find("_combine("), std::string::npos);
    EXPECT_EQ(ws.find("__cluster_dims__"), std::string::npos);
    // FORM_WGMMA: one warpgroup of wgmma (W1 and W2 as one 128-column
    // operand) in the same cluster split.
    if (TargetOfCompiles().sm == 90) {
      const std::string wg =
          PlanSource(g64, OneRowGroup(g64, WithForm(WithGpu(Cols(128), 0, 0, 5), 4)));
      EXPECT_NE(wg.find("2 K split(s) in a cluster, 5 stages, 128 threads"), std::string::npos)
          << wg;
      // The template's wgmma form (WG true) with two weights on fp16:
      // m64n128k16 (wgmma_ops.cuh's yr_wgmma_ss<128, __half, true>).
      EXPECT_NE(wg.find("yr_streamed_matmul<__half, __half, 64, 4, 4096, 4096, 2, 0, 2, 5, 128, 0, "
                        "true, false, 1, true>(x_in, w1, w2, nullptr, nullptr, "),
                std::string::npos)
          << wg;
      // Attention's warpgroup form: S from shared memory, O += P V with P
      // from registers.
      const yirage::v1::Graph wa = WarpgroupAttentionGraph(FLOAT16, false);
      const std::string at =
          PlanSource(wa, OneRowGroup(wa, WithWarpRows(WithGpu(Rows(64), 0, 4, 4), 64)));
      EXPECT_NE(at.find("wgmma.m64n64k16, one warpgroup"), std::string::npos) << at;
      // attention_decode.cuh's template with WG true, K N-major (KT false)
      // and cp.async copies (TMA false).
      EXPECT_NE(at.find(", true, false, false>(q, k, v, o, ws, "), std::string::npos) << at;
    }
    // The registers form with 16-warp blocks (one an SM): its 2 K splits a
    // cluster, no workspace or counters; 4-warp blocks sum through memory.
    const std::string rc =
        PlanSource(gated, OneRowGroup(gated, WithForm(WithGpu(Cols(128), 0, 16, 2), 2)));
    EXPECT_NE(rc.find("2 K split(s) in a cluster, 16 warps"), std::string::npos) << rc;
    EXPECT_NE(rc.find("__cluster_dims__(1, 2, 1)"), std::string::npos);
    EXPECT_EQ(rc.find("buffers {"), std::string::npos) << rc;
    EXPECT_EQ(g_src.find("__cluster_dims__"), std::string::npos) << g_src;
  }
  const yirage::v1::Graph rms = StreamedRmsLinearGraph(BFLOAT16, 2, 4096, 6144);
  const std::string r_src = PlanSource(rms, OneRowGroup(rms, WithGpu(Rows(4), 1)));
  EXPECT_NE(r_src.find("streamed matmul"), std::string::npos);
  EXPECT_NE(r_src.find(", 1 K split(s)"), std::string::npos);
  const yirage::v1::Graph lora = StreamedLoraGraph(FLOAT16, 16, 256, 4096, 16);
  const std::string l_src = PlanSource(lora, OneRowGroup(lora, Cols(64)));
  EXPECT_NE(l_src.find("rank 16"), std::string::npos) << l_src;
  // The GPU test's LoRA shapes compile (8, 40 and 64 rows; ranks 16 and 32).
  for (const auto& [m, r] : std::vector<std::pair<int64_t, int64_t>>{{8, 32}, {40, 16}, {64, 32}}) {
    const yirage::v1::Graph l = StreamedLoraGraph(FLOAT16, m, 512, 512, r);
    const std::string src = PlanSource(l, OneRowGroup(l, WithForm(WithGpu(Rows(4), 1), 1)));
    EXPECT_NE(
        src.find(absl::StrCat("streamed matmul: M=", m, " K=512 N=512, 1 weight(s), rank ", r)),
        std::string::npos)
        << src;
  }
  // More than 64 rows: the generic row kernels.
  const yirage::v1::Graph wide = StreamedGatedGraph(FLOAT16, 80, 256, 128);
  EXPECT_EQ(PlanSource(wide, OneRowGroup(wide, Cols(128))).find("streamed matmul"),
            std::string::npos);
}

// CPU-only (CI): rows of 33 floats, 64 a block (a multiple of 16 bytes),
// are staged in shared memory, the block's run 16 bytes at a time and its
// last partial vector one element a thread; 63 rows a block are not.
TEST(CudaCodegenCompileTest, OddWidthRowsStageWhereTheBlockIsWholeVectors) {
  GraphBuilder b("odd_stage");
  b.Input("x", {1000, 33}).Input("w", {33});
  b.Op("n", "rms_norm", {"x", "w"}).Op("g", "gelu", {"n"}).Output("g");
  const std::string staged = PlanSource(b.proto(), {Row({"n", "g"}, Rows(64))});
  EXPECT_NE(staged.find("staged rows (1 tensor(s))"), std::string::npos) << staged;
  EXPECT_NE(staged.find("for (int e = nr * 33 / 4 * 4 + tid; e < nr * 33;"), std::string::npos)
      << staged;
  EXPECT_EQ(PlanSource(b.proto(), {Row({"n", "g"}, Rows(63))}).find("staged rows"),
            std::string::npos);
}

// CPU-only (CI): a column reduction over an axis too short for several row
// lanes of kColumnUnroll rows (a max over 5 rows) takes one lane: each
// thread its column vector's rows (all 5 in flight) and results, no combine
// in shared memory.
TEST(CudaCodegenCompileTest, ShortAxisColumnReductionTakesOneLane) {
  GraphBuilder b("column_short");
  b.Input("x", {5, 33, 64, 256}).Input("m", {1, 33, 64, 256});
  b.Op("g", "gelu", {"x"}).Op("xm", "maximum", {"g", "m"});
  b.Op("r", "reduce_max", {"xm"}, {I("axis", 0), B("keepdim", true)}).Output("r");
  const std::string src = PlanSource(b.proto(), {GenericOps({"g", "xm", "r"})});
  EXPECT_NE(src.find("column reduction (1 x 5 x 540672: 256 column vectors x 1 row lanes"),
            std::string::npos)
      << src;
  EXPECT_EQ(src.find("__shared__ float part"), std::string::npos) << src;
  // The lane's 5 rows in one round of loads, all issued before the first
  // is used; m, constant along the reduced axis, read once before the rows.
  EXPECT_NE(src.find("for (int u = 0; u < 5; ++u)"), std::string::npos) << src;
  const size_t rows = src.find("for (i64 r = r0 + ryi;");
  const size_t m = src.find("yr_ld16_once(t1");
  const size_t x = src.find("raw0[u] = yr_ld16_once(t0");
  const size_t use = src.find("= yr_gelu(", rows);
  ASSERT_NE(rows, std::string::npos) << src;
  EXPECT_LT(m, rows) << src;
  EXPECT_EQ(src.find("yr_ld16_once(t1", m + 1), std::string::npos) << src;
  EXPECT_LT(rows, x) << src;
  EXPECT_LT(x, use) << src;
}

// CPU-only (CI): a column reduction whose rows split over several blocks
// (128 slabs of 4096 rows on 132 SMs) is one launch: the last block of each
// tile combines the splits' partials, counted in a zero-initialized buffer
// of one counter a tile.
TEST(CudaCodegenCompileTest, SplitColumnReductionCombinesInTheLastBlock) {
  GraphBuilder b("column_split");
  b.Input("x", {128, 4096, 256}, BFLOAT16);
  b.Op("s", "reduce_sum", {"x"}, {I("axis", 1)}).Output("s");
  const yirage::v1::Graph proto = b.proto();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok()) << g.status();
  Compiled c;
  CompileThroughAbi(proto, MakePlans(*g, {AllGeneric(proto)}), &c);
  ExpectAllCompiled(c);
  ASSERT_EQ(c.response.plans_size(), 1);
  const yirage::v1::CompiledPlan& plan = c.response.plans(0);
  const std::string& src = plan.source();
  if (std::getenv("YIRAGE_DUMP_SOURCE") != nullptr) std::printf("%s\n", src.c_str());
  EXPECT_NE(src.find("column reduction (128 x 4096 x 256"), std::string::npos) << src;
  EXPECT_EQ(src.find(", 1 row split(s)"), std::string::npos) << "expected a row split";
  EXPECT_EQ(src.find("_combine("), std::string::npos) << "the last block combines the splits";
  EXPECT_NE(src.find("atomicAdd(&counters[blockIdx.x], 1u)"), std::string::npos) << src;
  const yirage::v1::LaunchManifest& m = plan.launch();
  ASSERT_EQ(m.launches_size(), 1) << m.ShortDebugString();
  EXPECT_GT(m.launches(0).grid(1), 1) << m.ShortDebugString();
  // The partials (not zeroed) and the counters: one unsigned for each of
  // the 128 tiles (one 32-vector column tile a slab), zero before the
  // first launch; the kernel takes them after the partials.
  int counters = -1;
  for (int i = 0; i < m.buffers_size(); ++i) {
    if (m.buffers(i).what().find("tile counters") != std::string::npos) counters = i;
  }
  ASSERT_GE(counters, 0) << m.ShortDebugString();
  EXPECT_TRUE(m.buffers(counters).zero_init());
  EXPECT_EQ(m.buffers(counters).bytes(), 128 * 4);
  ASSERT_EQ(m.launches(0).args_size(), 4) << m.ShortDebugString();  // x, ws, counters, s
  EXPECT_EQ(m.launches(0).args(2), proto.inputs_size() + proto.outputs_size() + counters);
}

// CPU-only (CI): one-row-per-block norm chains keep their rows in registers.
TEST(CudaCodegenCompileTest, NormChainsUseRegisterRows) {
  const yirage::v1::Graph g = NormChainGraph(FLOAT16);
  EXPECT_NE(PlanSource(g, OneRowGroup(g, Rows(1))).find("register rows (512 wide, threads 64"),
            std::string::npos);
  // Several rows a block: the fewest threads that hold a row (64 chunks,
  // at most 4 a thread), no more rows than the group has.
  EXPECT_NE(PlanSource(g, OneRowGroup(g, Rows(2)))
                .find("threads 16, 32 per thread in chunks of 8, 2 rows a block"),
            std::string::npos);
  EXPECT_NE(PlanSource(g, OneRowGroup(g, Rows(64)))
                .find("threads 16, 32 per thread in chunks of 8, 6 rows a block"),
            std::string::npos);
  // 3584 wide (448 chunks of 8): 448 threads; reductions over the row too.
  const yirage::v1::Graph wide = WideRowsGraph(FLOAT16);
  EXPECT_NE(
      PlanSource(wide, OneRowGroup(wide, Rows(1))).find("register rows (3584 wide, threads 448"),
      std::string::npos);
  // Widths no thread count divides, or no 16-byte load fits, stay in
  // registers: the last chunk guarded, chunks of 4 or 1 elements.
  const yirage::v1::Graph odd = OddRowsGraph(FLOAT16);
  const std::vector<KernelSpec> one = {Row({"xa", "ln", "xs"}, Rows(1)),
                                       Row({"ya", "ys", "yr", "yn"}, Rows(4)),
                                       Row({"zs", "zm", "zc", "zn"}, Rows(1))};
  const std::string src = PlanSource(odd, one);
  // 1000 wide: 125 chunks of 8 over 128 threads, 3 of them idle.
  EXPECT_NE(src.find("register rows (1000 wide, threads 128, 8 per thread in chunks of 8, last "
                     "chunk guarded, 1 rows a block)"),
            std::string::npos)
      << src;
  // 255 wide, 4 rows a block: 8 threads a row, 32 elements each.
  EXPECT_NE(src.find("register rows (255 wide, threads 8, 32 per thread in chunks of 1, last "
                     "chunk guarded, 4 rows a block)"),
            std::string::npos)
      << src;
  // 260 wide: 65 chunks of 4.
  EXPECT_NE(src.find("register rows (260 wide, threads 96, 4 per thread in chunks of 4, last chunk "
                     "guarded, 1 rows a block)"),
            std::string::npos)
      << src;
  EXPECT_EQ(src.find("BR "), std::string::npos) << "no shared-memory row kernel: " << src;
}

// CPU-only (CI): matmul -> softmax -> matmul groups become the fused
// attention kernel, split over the keys as the schedule says.
TEST(CudaCodegenCompileTest, AttentionGroupsUseTheFusedKernel) {
  const yirage::v1::Graph g = FlashAttentionGraph(FLOAT16);
  const std::string automatic = PlanSource(g, OneRowGroup(g, Rows(4)));
  EXPECT_NE(automatic.find("fused attention"), std::string::npos) << automatic;
  if (TargetOfCompiles().sm < 90) GTEST_SKIP() << "the rest checks sm_90 thread-block clusters";
  // sm_90: the splits merge in a thread-block cluster, no second kernel.
  EXPECT_NE(automatic.find("merged in a cluster, 4 row warps x 1 key group(s), 4 stages"),
            std::string::npos)
      << "expected a key split";
  EXPECT_NE(automatic.find("__cluster_dims__(1, 1, "), std::string::npos);
  EXPECT_EQ(automatic.find("_merge("), std::string::npos);
  const std::string one = PlanSource(g, OneRowGroup(g, WithGpu(Rows(4), 1)));
  EXPECT_NE(one.find("1 key split(s), 4 row warps"), std::string::npos);
  EXPECT_EQ(one.find("_merge("), std::string::npos);
  EXPECT_EQ(one.find("__cluster_dims__"), std::string::npos);
  // 8 warps over 64 rows: two key groups per row group.
  const std::string two = PlanSource(g, OneRowGroup(g, WithGpu(Rows(64), 2, 8, 3)));
  EXPECT_NE(two.find("2 key split(s) merged in a cluster, 4 row warps x 2 key group(s), 3 stages"),
            std::string::npos)
      << two;
  EXPECT_NE(two.find("__cluster_dims__(1, 1, 2)"), std::string::npos);
  // The cluster's rows pushed to the merging block unless MERGE_CLUSTER_PULL asks to
  // pull them.
  EXPECT_NE(two.find("rows pushed to the merging block"), std::string::npos) << two;
  // attention_decode.cuh's template: 2 splits, 4 row warps of 1 row tile, 2
  // key groups, 3 stages, merge kind 3 (push), mma.sync.
  EXPECT_NE(two.find(", 2, 4, 1, 2, 3, 3, false, "), std::string::npos) << two;
  const std::string pull = PlanSource(g, OneRowGroup(g, WithForm(WithGpu(Rows(64), 2, 8, 3), 3)));
  EXPECT_NE(pull.find("2 key split(s) merged in a cluster, 4 row warps x 2 key group(s), 3 stages"),
            std::string::npos)
      << pull;
  EXPECT_EQ(pull.find("rows pushed"), std::string::npos) << pull;
  // 32-row warps: 64 rows take 2 row warps.
  const std::string wr32 =
      PlanSource(g, OneRowGroup(g, WithWarpRows(WithGpu(Rows(64), 2, 4, 4), 32)));
  EXPECT_NE(wr32.find("2 row warps of 32 rows x 2 key group(s), 4 stages"), std::string::npos)
      << wr32;
  const std::string wide = PlanSource(g, OneRowGroup(g, WithGpu(Rows(128), 1, 8)));
  EXPECT_NE(wide.find("8 row warps x 1 key group(s)"), std::string::npos) << wide;
  // D = 128: four key groups' two-stage ring (280 KiB) exceeds the shared
  // memory per block, two fit.
  const yirage::v1::Graph h128 = HeadDim128AttentionGraph();
  const std::string d128 = PlanSource(h128, OneRowGroup(h128, WithGpu(Rows(64), 1, 16, 2)));
  EXPECT_NE(d128.find("4 row warps x 2 key group(s), 2 stages"), std::string::npos) << d128;
  // MERGE_WORKSPACE: through the workspace and a merge kernel.
  const std::string workspace = PlanSource(g, OneRowGroup(g, WithForm(WithGpu(Rows(4), 2), 2)));
  EXPECT_NE(workspace.find("_merge("), std::string::npos) << workspace;
  EXPECT_EQ(workspace.find("__cluster_dims__"), std::string::npos);
  // Keys not a multiple of 64: the last tile masked. K as [B, D, N] with
  // rows not 16-byte aligned: the generic row kernel.
  const yirage::v1::Graph tail = AttentionGraph(FLOAT16);
  const std::string masked = PlanSource(tail, OneRowGroup(tail, Rows(4)));
  EXPECT_NE(masked.find("fused attention"), std::string::npos) << masked;
  EXPECT_NE(masked.find("(the last 56 masked)"), std::string::npos) << masked;
  const yirage::v1::Graph kt = TailAttentionGraph(FLOAT16, true);
  const std::string last = PlanSource(kt, OneRowGroup(kt, WithGpu(Rows(16), 1, 2, 4)));
  EXPECT_NE(last.find("(the last 1 masked)"), std::string::npos) << last;
  GraphBuilder ub("unaligned_attention");
  ub.Input("Q", {2, 8, 32}, FLOAT16).Input("K", {2, 32, 201}, FLOAT16);
  ub.Input("V", {2, 201, 32}, FLOAT16);
  ub.Op("S", "matmul", {"Q", "K"}).Op("P", "softmax", {"S"}).Op("O", "matmul", {"P", "V"});
  ub.Output("O");
  const yirage::v1::Graph odd = ub.proto();
  EXPECT_EQ(PlanSource(odd, OneRowGroup(odd, Rows(4))).find("fused attention"), std::string::npos);
}

// CPU-only (CI), or on an H200: the automatic key splits of the benchmark's
// attention graphs for plans the search offers (among them the two the H200
// table in README.md picked).
TEST(CudaCodegenCompileTest, AttentionSplitsFillTheChip) {
  const CompileTarget target = TargetOfCompiles();
  if (target.sm < 90 || target.sm_count != 132) {
    GTEST_SKIP() << "the expected splits are an H200's (sm_90, 132 SMs); this target: sm_"
                 << target.sm << ", " << target.sm_count << " SMs";
  }
  auto source = [](const std::string& name, const yirage::v1::Schedule& schedule) {
    absl::StatusOr<yirage::v1::Graph> g =
        LoadGraph(SourceDir() + "/examples/graphs/bench/" + name + ".json");
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? PlanSource(*g, OneRowGroup(*g, schedule)) : std::string();
  };
  auto expect = [](const std::string& src, const std::string& what, bool workspace) {
    EXPECT_NE(src.find(what), std::string::npos) << what << "\n" << src.substr(0, 4000);
    EXPECT_EQ(src.find("_merge(") != std::string::npos, workspace) << what;
  };
  // b = 1 (2 heads x 256 queries): 8 blocks of 64 rows, each split 16 ways
  // (a block an SM) and merged in the kernel: a cluster holds 8 at most.
  auto in_kernel = [](const std::string& src) {
    EXPECT_NE(src.find("in the kernel, through the workspace"), std::string::npos);
    EXPECT_NE(src.find("cooperative: true"), std::string::npos);
    EXPECT_EQ(src.find("__cluster_dims__"), std::string::npos);
  };
  const std::string b1 = source("gqa_decode_b1", Rows(4));
  expect(b1,
         "16 key split(s) merged in the kernel (cooperative launch), 4 row warps x 1 key "
         "group(s), 4 stages",
         false);
  in_kernel(b1);
  const std::string b1_8warps = source("gqa_decode_b1", WithGpu(Rows(64), 0, 8, 3));
  expect(b1_8warps,
         "16 key split(s) merged in the kernel (cooperative launch), 4 row warps x 2 key "
         "group(s), 3 stages",
         false);
  in_kernel(b1_8warps);
  // Asked for the in-kernel merge (MERGE_IN_KERNEL): 32-row warps, two stages, two
  // blocks an SM, so 4 splits of the 64 query tiles at b = 8.
  const std::string b8_in_kernel =
      source("gqa_decode_b8", WithForm(WithWarpRows(WithGpu(Rows(64), 0, 4, 2), 32), 4));
  expect(b8_in_kernel,
         "4 key split(s) merged in the kernel (cooperative launch), 2 row warps of 32 rows x 2 "
         "key group(s), 2 stages",
         false);
  in_kernel(b8_in_kernel);
  // b = 8 (16 heads): 64 blocks of 64 rows fill the chip in 4 splits, two
  // blocks an SM: too many for clusters.
  expect(source("gqa_decode_b8", Rows(4)), "4 key split(s), 4 row warps x 1 key group(s), 4 stages",
         true);
  expect(source("gqa_decode_b8", WithGpu(Rows(64), 0, 16, 2)),
         "2 key split(s) merged in a cluster, 4 row warps x 4 key group(s), 2 stages, rows pushed",
         false);
  expect(source("gqa_decode_b8", WithWarpRows(WithGpu(Rows(64), 0, 4, 4), 32)),
         "2 key split(s) merged in a cluster, 2 row warps of 32 rows x 2 key group(s), 4 stages, "
         "rows pushed",
         false);
  expect(source("gqa_decode_b8", WithGpu(Rows(256), 0, 16, 4)),
         "16 key split(s), 16 row warps x 1 key group(s), 4 stages", true);
}

}  // namespace
}  // namespace yirage::backends::cuda::testing
