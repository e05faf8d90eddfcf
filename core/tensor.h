// Host tensors for the reference interpreter, input generation and output
// comparison, and conversions between float64 values and stored dtypes.
#ifndef YIRAGE_CORE_TENSOR_H_
#define YIRAGE_CORE_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "yirage/v1/graph.pb.h"

namespace yirage::core {

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major
};

// IEEE half and bfloat16 conversions (round to nearest even).
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t bits);
uint16_t FloatToBFloat16(float value);
float BFloat16ToFloat(uint16_t bits);

// Rounds every element to what `dtype` can hold.
void RoundToDType(yirage::v1::DType dtype, HostTensor* tensor);

// Raw little-endian bytes of `tensor` stored as `dtype`, and back.
std::vector<uint8_t> EncodeTensor(const HostTensor& tensor, yirage::v1::DType dtype);
HostTensor DecodeTensor(const void* bytes, const std::vector<int64_t>& shape,
                        yirage::v1::DType dtype);

// Seeded random inputs for every graph input, already rounded to its dtype.
// Values are uniform in [-1, 1], except inputs that feed log, sqrt, rsqrt, a
// divisor or a pow base, which are uniform in [0.5, 1.5] so the reference is
// finite. The same seed always gives the same inputs.
// Details: each input i draws from its own splitmix64 stream seeded from
// (seed, i), so the values depend only on the seed, the input's index and its
// size, identically on every compiler and platform. An input that is the B
// operand (inputs[1]) of a matmul, and not also in the [0.5, 1.5] class, is
// uniform in [-1/sqrt(K), 1/sqrt(K)] (K the contracted dim; the largest one if
// it feeds several matmuls) so that matmul outputs stay O(1). Only direct
// operands count: an input feeding log through another op gets [-1, 1].
// Attention-shaped chains override that, so that their checks test S and P:
// a softmax over the last axis of [scalar *] (A @ B), A and B graph inputs,
// gets A and B uniform in [-a, a] with scores of standard deviation 1 (P
// far from uniform, yet 16-bit scores keep it within the 16-bit
// tolerance), and the B operand of a matmul whose A is a softmax's output
// (V under P) gets [-1, 1].
std::vector<HostTensor> MakeRandomInputs(const Graph& graph, uint64_t seed);

// Evaluates the graph in float64; returns the graph outputs in order.
// REQUIRES: inputs match the graph inputs' shapes, in declaration order.
absl::StatusOr<std::vector<HostTensor>> EvaluateReference(const Graph& graph,
                                                          const std::vector<HostTensor>& inputs);

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// The server default for a graph: float32 outputs rtol 1e-4 atol 1e-5,
// 16-bit outputs 1e-2 / 1e-2 (the loosest dtype among the outputs wins).
Tolerance DefaultTolerance(const Graph& graph);
// Per-job override > graph file > server default (a zero pair means unset).
Tolerance ResolveTolerance(const Graph& graph, const yirage::v1::Tolerance& job);

// CompareOutputs reports rel error as |got - ref| / max(|ref|, kCompareTinyRef).
inline constexpr double kCompareTinyRef = 1e-12;

struct CompareResult {
  bool ok = false;
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::string message;  // first failing output and element when !ok
};

// Every element must satisfy |got - ref| <= atol + rtol * |ref|, and each
// output as a whole ||got - ref|| <= rtol * ||ref|| (2-norms over its finite
// pairs; when rtol > 0 and ||ref|| > 0), so that outputs whose values all
// sit under the atol are still checked. NaN or Inf in
// `got` where `ref` is finite fails; NaN matches NaN and equal infinities match.
// A non-finite ref must be matched exactly (a NaN ref by NaN). Non-finite
// mismatches count as infinite abs/rel error; matching non-finite pairs count
// as zero. The counts and shapes of `got` and `reference` must match the
// graph outputs, else the result fails with a message saying so.
CompareResult CompareOutputs(const Graph& graph, const std::vector<HostTensor>& reference,
                             const std::vector<HostTensor>& got, const Tolerance& tolerance);

// CompareOutputs over outputs as a backend writes them: got[o] is output o's
// raw little-endian bytes in its graph dtype and shape (what DecodeTensor
// reads), compared without decoding them whole first. The same result as
// CompareOutputs of the decoded tensors.
// REQUIRES: each got[o] holds the graph output's element count in its dtype.
CompareResult CompareEncodedOutputs(const Graph& graph, const std::vector<HostTensor>& reference,
                                    const std::vector<const void*>& got,
                                    const Tolerance& tolerance);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_TENSOR_H_
