#include "core/op_table.h"

namespace yirage::core {
namespace {

// Transcendental elementwise ops cost this many flops an element.
constexpr double kTranscendental = 8.0;

using K = OpKind;
using F = FlopBasis;

constexpr OpSpec kOps[] = {
    {OpType::kMatmul, "matmul", K::kMatmul, {"transpose_b"}, F::kMatmulMultiply, 0},
    {OpType::kAdd, "add", K::kBinary, {"scalar"}, F::kPerOutput, 1},
    {OpType::kSub, "sub", K::kBinary, {"scalar"}, F::kPerOutput, 1},
    {OpType::kMul, "mul", K::kBinary, {"scalar"}, F::kPerOutput, 1},
    {OpType::kDiv, "div", K::kBinary, {"scalar"}, F::kPerOutput, 1},
    {OpType::kMaximum, "maximum", K::kBinary, {"scalar"}, F::kPerOutput, 1},
    {OpType::kMinimum, "minimum", K::kBinary, {"scalar"}, F::kPerOutput, 1},
    {OpType::kPow, "pow", K::kBinary, {"scalar"}, F::kPerOutput, kTranscendental},
    {OpType::kNeg, "neg", K::kUnary, {}, F::kPerOutput, 1},
    {OpType::kExp, "exp", K::kUnary, {}, F::kPerOutput, kTranscendental},
    {OpType::kLog, "log", K::kUnary, {}, F::kPerOutput, kTranscendental},
    {OpType::kSqrt, "sqrt", K::kUnary, {}, F::kPerOutput, kTranscendental},
    {OpType::kRsqrt, "rsqrt", K::kUnary, {}, F::kPerOutput, kTranscendental},
    {OpType::kSquare, "square", K::kUnary, {}, F::kPerOutput, 1},
    {OpType::kAbs, "abs", K::kUnary, {}, F::kPerOutput, 1},
    {OpType::kRelu, "relu", K::kUnary, {}, F::kPerOutput, 1},
    {OpType::kSigmoid, "sigmoid", K::kUnary, {}, F::kPerOutput, kTranscendental},
    {OpType::kTanh, "tanh", K::kUnary, {}, F::kPerOutput, kTranscendental},
    {OpType::kSilu, "silu", K::kUnary, {}, F::kPerOutput, kTranscendental},
    {OpType::kGelu, "gelu", K::kUnary, {"approximate"}, F::kPerOutput, kTranscendental},
    {OpType::kReduceSum, "reduce_sum", K::kReduction, {"axis", "keepdim"}, F::kPerInput, 1},
    {OpType::kReduceMean, "reduce_mean", K::kReduction, {"axis", "keepdim"}, F::kPerInput, 1},
    {OpType::kReduceMax, "reduce_max", K::kReduction, {"axis", "keepdim"}, F::kPerInput, 1},
    {OpType::kRmsNorm, "rms_norm", K::kNorm, {"axis", "eps"}, F::kPerOutput, 4},
    {OpType::kLayerNorm, "layer_norm", K::kNorm, {"axis", "eps"}, F::kPerOutput, 7},
    {OpType::kSoftmax, "softmax", K::kSoftmax, {"axis"}, F::kPerOutput, kTranscendental + 4},
    {OpType::kConcat, "concat", K::kConcat, {"axis"}, F::kNone, 0},
    {OpType::kSlice, "slice", K::kSlice, {"axis", "start", "end"}, F::kNone, 0},
};

constexpr bool InOpTypeOrder() {
  for (size_t i = 0; i < sizeof(kOps) / sizeof(kOps[0]); ++i) {
    if (static_cast<size_t>(kOps[i].type) != i) return false;
  }
  return true;
}
static_assert(InOpTypeOrder(), "kOps must list every OpType in declaration order");
static_assert(sizeof(kOps) / sizeof(kOps[0]) == static_cast<size_t>(OpType::kSlice) + 1,
              "every OpType needs a row");

}  // namespace

absl::Span<const OpSpec> AllOpSpecs() { return absl::MakeConstSpan(kOps); }

const OpSpec& SpecOf(OpType type) { return kOps[static_cast<size_t>(type)]; }

const OpSpec* FindOpSpec(std::string_view name) {
  for (const OpSpec& spec : kOps) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

}  // namespace yirage::core
