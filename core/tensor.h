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
std::vector<HostTensor> MakeRandomInputs(const Graph& graph, uint64_t seed);

// Evaluates the graph in float64; returns the graph outputs in order.
// REQUIRES: inputs match the graph inputs' shapes, in declaration order.
absl::StatusOr<std::vector<HostTensor>> EvaluateReference(
    const Graph& graph, const std::vector<HostTensor>& inputs);

struct Tolerance {
  double rtol = 0;
  double atol = 0;
};

// The server default for a graph: float32 outputs rtol 1e-4 atol 1e-5,
// 16-bit outputs 1e-2 / 1e-2 (the loosest dtype among the outputs wins).
Tolerance DefaultTolerance(const Graph& graph);
// Per-job override > graph file > server default (a zero pair means unset).
Tolerance ResolveTolerance(const Graph& graph, const yirage::v1::Tolerance& job);

struct CompareResult {
  bool ok = false;
  double max_abs_error = 0;
  double max_rel_error = 0;
  std::string message;  // first failing output and element when !ok
};

// Every element must satisfy |got - ref| <= atol + rtol * |ref|. NaN or Inf in
// `got` where `ref` is finite fails; NaN matches NaN and equal infinities match.
CompareResult CompareOutputs(const Graph& graph,
                             const std::vector<HostTensor>& reference,
                             const std::vector<HostTensor>& got,
                             const Tolerance& tolerance);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_TENSOR_H_
