// The validated graph IR shared by every process. Built from a yirage.v1.Graph
// (which the JSON file format maps onto); once built it is immutable, its ops
// are in topological order and every tensor has a known shape and dtype.
#ifndef YIRAGE_CORE_GRAPH_H_
#define YIRAGE_CORE_GRAPH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "yirage/v1/graph.pb.h"

namespace yirage::core {

enum class OpType {
  kMatmul,
  // Binary elementwise (NumPy broadcasting, or one input plus attr "scalar").
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMaximum,
  kMinimum,
  kPow,
  // Unary elementwise.
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kSquare,
  kAbs,
  kRelu,
  kSigmoid,
  kTanh,
  kSilu,
  kGelu,
  // Reductions over one axis.
  kReduceSum,
  kReduceMean,
  kReduceMax,
  // Normalizations and softmax over one axis.
  kRmsNorm,
  kLayerNorm,
  kSoftmax,
  kConcat,
  // Contiguous slice [start, end) of one axis (public; rewrites use it to split
  // the output of a matmul over concatenated weights).
  kSlice,
};

// "matmul" -> kMatmul, ...; false for an unknown name.
bool ParseOpType(std::string_view name, OpType* type);
std::string_view OpTypeName(OpType type);
bool IsUnaryElementwise(OpType type);
bool IsBinaryElementwise(OpType type);
bool IsElementwise(OpType type);    // unary or binary
bool IsReduction(OpType type);      // reduce_sum/mean/max
bool IsNormOrSoftmax(OpType type);  // rms_norm/layer_norm/softmax: statistics of the whole row

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  yirage::v1::DType dtype = yirage::v1::FLOAT32;
  int producer = -1;           // op index, -1 for a graph input
  std::vector<int> consumers;  // op indices, ascending
  bool is_graph_output = false;

  int64_t num_elements() const;
};

struct OpInfo {
  std::string name;  // also the name of its output tensor
  OpType type = OpType::kAdd;
  std::vector<int> inputs;  // tensor ids
  int output = -1;          // tensor id
  // Normalized attributes (defaults filled in, axes non-negative).
  int axis = -1;            // reductions, norms, softmax, concat
  bool keepdim = true;      // reductions
  double eps = 0;           // norms (rms_norm 1e-6, layer_norm 1e-5 by default)
  bool has_scalar = false;  // binary op with a constant second operand
  double scalar = 0;
  bool transpose_b = false;  // matmul: B is [..., N, K]
  bool gelu_tanh = false;    // gelu approximate == "tanh"
  int64_t slice_start = 0;   // slice: [slice_start, slice_end) of `axis`
  int64_t slice_end = 0;
};

// The compound operations of the graph builders (gated_mlp, rms_norm_linear,
// gemm_softmax, gemm_layernorm, self_attention) expanded into primitive ops;
// the compound op's name names its final op, the others are named
// "<name>/<part>". Graphs without compound ops are returned unchanged.
// Graph::FromProto calls this first. Expansions: docs/graph-format.md.
bool IsCompoundOp(std::string_view name);
absl::StatusOr<yirage::v1::Graph> ExpandCompoundOps(const yirage::v1::Graph& proto);

// Bounds on what one graph may ask for (a server sets them from its flags
// and the target chip); Graph::FromProto refuses a graph beyond one, naming
// the field, the value and the limit. Element counts and bytes are computed
// with checked arithmetic.
struct GraphLimits {
  int max_ops = 1024;         // ops, before and after compound ops expand
  int max_name_length = 128;  // the graph's, inputs' and ops' names
  int64_t max_tensor_elements = int64_t{1} << 32;
  int64_t max_total_bytes = int64_t{16} << 30;  // every tensor at its dtype
};

// Names reach generated code and exported files: letters, digits and
// "_.:/-", starting with a letter, digit or '_'. OK, or why not.
absl::Status CheckName(std::string_view name, int max_length);

class Graph {
 public:
  // Expands compound ops (ExpandCompoundOps), validates and builds the IR. Errors name the op (or
  // input) and the field, and say what was expected: unknown op, missing input, shape mismatch
  // (with both shapes), bad dtype, bad rank, cycle, unknown or unused output, duplicate name, bad
  // attribute. Outputs must name ops (not graph inputs); every graph input and op result must be
  // used. The full rules and messages are in docs/graph-format.md. `limits`
  // bound its size (GraphLimits).
  static absl::StatusOr<Graph> FromProto(const yirage::v1::Graph& proto,
                                         const GraphLimits& limits = {});

  // The validated proto with its ops reordered into topological order, so
  // proto().ops(i) is op(i); everything else is as given.
  const yirage::v1::Graph& proto() const { return proto_; }
  const std::string& name() const { return proto_.name(); }

  // Sets the tolerance proto() carries (a job's resolved one, which the
  // search and the backends read to choose reduced-precision forms).
  // REQUIRES: both finite and >= 0.
  void SetTolerance(double rtol, double atol) {
    proto_.mutable_tolerance()->set_rtol(rtol);
    proto_.mutable_tolerance()->set_atol(atol);
  }

  // Tensor ids: graph inputs first (in declaration order), then one per op
  // (op i's output is tensor num_inputs() + i).
  int num_tensors() const { return static_cast<int>(tensors_.size()); }
  const TensorInfo& tensor(int id) const { return tensors_[id]; }
  int FindTensor(std::string_view name) const;  // -1 if absent

  int num_inputs() const { return num_inputs_; }
  const std::vector<OpInfo>& ops() const { return ops_; }  // topological
  const OpInfo& op(int index) const { return ops_[index]; }
  int FindOp(std::string_view name) const;                      // -1 if absent
  const std::vector<int>& outputs() const { return outputs_; }  // tensor ids

 private:
  yirage::v1::Graph proto_;
  std::vector<TensorInfo> tensors_;
  std::vector<OpInfo> ops_;
  std::vector<int> outputs_;
  int num_inputs_ = 0;
};

// OK when `other` has the same inputs and outputs as `reference`: names,
// dtypes and memory layouts (dense row-major: the same element count, as a
// rewrite that drops size-1 dims or merges dims keeps), in the same order
// (what a rewritten graph must keep).
absl::Status CheckSameSignature(const Graph& reference, const Graph& other);

// NumPy broadcast of two shapes; error text names both shapes.
absl::StatusOr<std::vector<int64_t>> BroadcastShapes(const std::vector<int64_t>& a,
                                                     const std::vector<int64_t>& b);

// A batched product's A [lead.., M, K] against B [lead_b.., K, N] where
// B's lead dims, padded with 1s on the left to A's, equal A's up to some
// point and are 1 from there (B shared by A's innermost lead dims, as
// grouped query heads share a key/value head, or by all of them): A's
// entries of those inner dims are consecutive row blocks, so the product
// is `batch` products of A's `m` rows (M times the inner dims). Nullopt
// when B is not shared that way (or has more dims than A).
struct FoldedBatch {
  int64_t batch = 1;
  int64_t m = 0;
};
std::optional<FoldedBatch> FoldSharedLeadDims(const std::vector<int64_t>& a_shape,
                                              const std::vector<int64_t>& b_shape);

std::string ShapeToString(const std::vector<int64_t>& shape);  // "[16, 4096]"
// The product of the dims (1 for a scalar's []).
int64_t NumElements(const std::vector<int64_t>& shape);
std::string_view DTypeName(yirage::v1::DType dtype);  // "float16"
bool ParseDType(std::string_view name, yirage::v1::DType* dtype);
int DTypeSize(yirage::v1::DType dtype);  // bytes

}  // namespace yirage::core

#endif  // YIRAGE_CORE_GRAPH_H_
