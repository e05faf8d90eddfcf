#include "core/op_table.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace yirage::core {
namespace {

// Transcendental elementwise ops cost this many flops an element.
constexpr double kTranscendental = 8.0;

using K = OpKind;
using F = FlopBasis;

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double NaNOr(double a, double b, double value) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : value;
}

// The reference's element functions (ElementFn).
double Add(double x, double y, bool) { return x + y; }
double Sub(double x, double y, bool) { return x - y; }
double Mul(double x, double y, bool) { return x * y; }
double Div(double x, double y, bool) { return x / y; }
double Maximum(double x, double y, bool) { return NaNOr(x, y, std::max(x, y)); }
double Minimum(double x, double y, bool) { return NaNOr(x, y, std::min(x, y)); }
double Pow(double x, double y, bool) { return std::pow(x, y); }
double Neg(double x, double, bool) { return -x; }
double Exp(double x, double, bool) { return std::exp(x); }
double Log(double x, double, bool) { return std::log(x); }
double Sqrt(double x, double, bool) { return std::sqrt(x); }
double Rsqrt(double x, double, bool) { return 1.0 / std::sqrt(x); }
double Square(double x, double, bool) { return x * x; }
double Abs(double x, double, bool) { return std::fabs(x); }
double Relu(double x, double, bool) { return std::isnan(x) ? x : (x > 0 ? x : 0.0); }
double SigmoidFn(double x, double, bool) { return Sigmoid(x); }
double Tanh(double x, double, bool) { return std::tanh(x); }
double Silu(double x, double, bool) { return x * Sigmoid(x); }
double Gelu(double x, double, bool tanh) {
  if (tanh) {
    const double k = std::sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
  }
  return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
}

constexpr OpSpec kOps[] = {
    {OpType::kMatmul, "matmul", K::kMatmul, 2, 2, {"transpose_b"}, F::kMatmulMultiply, 0},
    {OpType::kAdd, "add", K::kBinary, 1, 2, {"scalar"}, F::kPerOutput, 1, Add},
    {OpType::kSub, "sub", K::kBinary, 1, 2, {"scalar"}, F::kPerOutput, 1, Sub},
    {OpType::kMul, "mul", K::kBinary, 1, 2, {"scalar"}, F::kPerOutput, 1, Mul},
    {OpType::kDiv, "div", K::kBinary, 1, 2, {"scalar"}, F::kPerOutput, 1, Div},
    {OpType::kMaximum, "maximum", K::kBinary, 1, 2, {"scalar"}, F::kPerOutput, 1, Maximum},
    {OpType::kMinimum, "minimum", K::kBinary, 1, 2, {"scalar"}, F::kPerOutput, 1, Minimum},
    {OpType::kPow, "pow", K::kBinary, 1, 2, {"scalar"}, F::kPerOutput, kTranscendental, Pow},
    {OpType::kNeg, "neg", K::kUnary, 1, 1, {}, F::kPerOutput, 1, Neg},
    {OpType::kExp, "exp", K::kUnary, 1, 1, {}, F::kPerOutput, kTranscendental, Exp},
    {OpType::kLog, "log", K::kUnary, 1, 1, {}, F::kPerOutput, kTranscendental, Log},
    {OpType::kSqrt, "sqrt", K::kUnary, 1, 1, {}, F::kPerOutput, kTranscendental, Sqrt},
    {OpType::kRsqrt, "rsqrt", K::kUnary, 1, 1, {}, F::kPerOutput, kTranscendental, Rsqrt},
    {OpType::kSquare, "square", K::kUnary, 1, 1, {}, F::kPerOutput, 1, Square},
    {OpType::kAbs, "abs", K::kUnary, 1, 1, {}, F::kPerOutput, 1, Abs},
    {OpType::kRelu, "relu", K::kUnary, 1, 1, {}, F::kPerOutput, 1, Relu},
    {OpType::kSigmoid, "sigmoid", K::kUnary, 1, 1, {}, F::kPerOutput, kTranscendental, SigmoidFn},
    {OpType::kTanh, "tanh", K::kUnary, 1, 1, {}, F::kPerOutput, kTranscendental, Tanh},
    {OpType::kSilu, "silu", K::kUnary, 1, 1, {}, F::kPerOutput, kTranscendental, Silu},
    {OpType::kGelu, "gelu", K::kUnary, 1, 1, {"approximate"}, F::kPerOutput, kTranscendental, Gelu},
    {OpType::kReduceSum, "reduce_sum", K::kReduction, 1, 1, {"axis", "keepdim"}, F::kPerInput, 1},
    {OpType::kReduceMean, "reduce_mean", K::kReduction, 1, 1, {"axis", "keepdim"}, F::kPerInput, 1},
    {OpType::kReduceMax, "reduce_max", K::kReduction, 1, 1, {"axis", "keepdim"}, F::kPerInput, 1},
    {OpType::kRmsNorm, "rms_norm", K::kNorm, 1, 2, {"axis", "eps"}, F::kPerOutput, 4},
    {OpType::kLayerNorm, "layer_norm", K::kNorm, 1, 3, {"axis", "eps"}, F::kPerOutput, 7},
    {OpType::kSoftmax, "softmax", K::kSoftmax, 1, 1, {"axis"}, F::kPerOutput, kTranscendental + 4},
    {OpType::kConcat, "concat", K::kConcat, 2, kAnyInputs, {"axis"}, F::kNone, 0},
    {OpType::kSlice, "slice", K::kSlice, 1, 1, {"axis", "start", "end"}, F::kNone, 0},
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
