// Test-only: small model graphs built in code for the candidate generator,
// partition enumerator and cost model tests.
#ifndef YIRAGE_CORE_CANDIDATE_TEST_GRAPHS_H_
#define YIRAGE_CORE_CANDIDATE_TEST_GRAPHS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "yirage/v1/graph.pb.h"

namespace yirage::core::testing {

inline yirage::v1::AttrValue IntAttr(int64_t v) {
  yirage::v1::AttrValue a;
  a.set_i(v);
  return a;
}
inline yirage::v1::AttrValue FloatAttr(double v) {
  yirage::v1::AttrValue a;
  a.set_f(v);
  return a;
}
inline yirage::v1::AttrValue BoolAttr(bool v) {
  yirage::v1::AttrValue a;
  a.set_b(v);
  return a;
}

// Builds a yirage.v1.Graph proto op by op.
class GraphProtoBuilder {
 public:
  explicit GraphProtoBuilder(std::string name) { proto_.set_name(std::move(name)); }

  GraphProtoBuilder& Input(const std::string& name, std::vector<int64_t> shape,
                           yirage::v1::DType dtype = yirage::v1::FLOAT32) {
    yirage::v1::TensorSpec* spec = proto_.add_inputs();
    spec->set_name(name);
    for (int64_t d : shape) spec->add_shape(d);
    spec->set_dtype(dtype);
    return *this;
  }

  GraphProtoBuilder& Op(const std::string& name, const std::string& op,
                        std::vector<std::string> inputs,
                        std::vector<std::pair<std::string, yirage::v1::AttrValue>> attrs = {}) {
    yirage::v1::OpNode* node = proto_.add_ops();
    node->set_name(name);
    node->set_op(op);
    for (std::string& in : inputs) node->add_inputs(std::move(in));
    for (auto& [key, value] : attrs) (*node->mutable_attrs())[key] = value;
    return *this;
  }

  GraphProtoBuilder& Output(const std::string& name) {
    proto_.add_outputs(name);
    return *this;
  }

  const yirage::v1::Graph& proto() const { return proto_; }

 private:
  yirage::v1::Graph proto_;
};

// Y = matmul(mul(rms_norm(X), G), W), float16.
inline yirage::v1::Graph RmsNormLinearProto() {
  return GraphProtoBuilder("rms_norm_linear")
      .Input("X", {16, 4096}, yirage::v1::FLOAT16)
      .Input("G", {4096}, yirage::v1::FLOAT16)
      .Input("W", {4096, 6144}, yirage::v1::FLOAT16)
      .Op("N", "rms_norm", {"X"})
      .Op("S", "mul", {"N", "G"})
      .Op("Y", "matmul", {"S", "W"})
      .Output("Y")
      .proto();
}

// Y = silu(X @ W1) * (X @ W2).
inline yirage::v1::Graph GatedMlpProto() {
  return GraphProtoBuilder("gated_mlp")
      .Input("X", {32, 512})
      .Input("W1", {512, 1408})
      .Input("W2", {512, 1408})
      .Op("A", "matmul", {"X", "W1"})
      .Op("B", "silu", {"A"})
      .Op("C", "matmul", {"X", "W2"})
      .Op("Y", "mul", {"B", "C"})
      .Output("Y")
      .proto();
}

// Y = X @ W + (X @ A) @ B.
inline yirage::v1::Graph LoraProto() {
  return GraphProtoBuilder("lora")
      .Input("X", {64, 1024})
      .Input("W", {1024, 1024})
      .Input("A", {1024, 16})
      .Input("B", {16, 1024})
      .Op("XW", "matmul", {"X", "W"})
      .Op("XA", "matmul", {"X", "A"})
      .Op("XAB", "matmul", {"XA", "B"})
      .Op("Y", "add", {"XW", "XAB"})
      .Output("Y")
      .proto();
}

// Softmax over the last axis, spelled out.
inline yirage::v1::Graph SoftmaxProto() {
  return GraphProtoBuilder("softmax")
      .Input("X", {256, 1000})
      .Op("M", "reduce_max", {"X"}, {{"axis", IntAttr(1)}, {"keepdim", BoolAttr(true)}})
      .Op("D", "sub", {"X", "M"})
      .Op("E", "exp", {"D"})
      .Op("Z", "reduce_sum", {"E"}, {{"axis", IntAttr(1)}, {"keepdim", BoolAttr(true)}})
      .Op("Y", "div", {"E", "Z"})
      .Output("Y")
      .proto();
}

// Y = rms_norm(X + 0.5 * (rms_norm(H) + X)).
inline yirage::v1::Graph NormTransformerProto() {
  return GraphProtoBuilder("norm_transformer")
      .Input("X", {128, 768})
      .Input("H", {128, 768})
      .Op("A", "rms_norm", {"H"})
      .Op("B", "add", {"A", "X"})
      .Op("C", "mul", {"B"}, {{"scalar", FloatAttr(0.5)}})
      .Op("D", "add", {"X", "C"})
      .Op("Y", "rms_norm", {"D"})
      .Output("Y")
      .proto();
}

// Y = layer_norm(X [, G [, B]]) @ W (pre-norm projection). `row_vectors`:
// G and B are [1, K] instead of [K].
inline yirage::v1::Graph LayerNormLinearProto(bool weight = true, bool bias = true,
                                              bool row_vectors = false) {
  GraphProtoBuilder builder("layer_norm_linear");
  builder.Input("X", {32, 256}).Input("W", {256, 128});
  std::vector<std::string> norm_inputs = {"X"};
  const std::vector<int64_t> vec =
      row_vectors ? std::vector<int64_t>{1, 256} : std::vector<int64_t>{256};
  if (weight) {
    builder.Input("G", vec);
    norm_inputs.push_back("G");
  }
  if (weight && bias) {
    builder.Input("B", vec);
    norm_inputs.push_back("B");
  }
  return builder.Op("N", "layer_norm", norm_inputs, {{"eps", FloatAttr(1e-5)}})
      .Op("Y", "matmul", {"N", "W"})
      .Output("Y")
      .proto();
}

// R = reduce_sum(relu(X), axis 0) is no row group; Y = X * R.
inline yirage::v1::Graph ColumnReductionProto() {
  return GraphProtoBuilder("column_reduction")
      .Input("X", {64, 32})
      .Op("A", "relu", {"X"})
      .Op("R", "reduce_sum", {"A"}, {{"axis", IntAttr(0)}, {"keepdim", BoolAttr(true)}})
      .Op("Y", "mul", {"X", "R"})
      .Output("Y")
      .proto();
}

// A chain of `n` elementwise ops on X [rows, 256]: E0 = relu(X), Ei = f(Ei-1).
inline yirage::v1::Graph ElementwiseChainProto(int n, int64_t rows = 64) {
  GraphProtoBuilder builder("chain" + std::to_string(n));
  builder.Input("X", {rows, 256});
  const char* kinds[] = {"relu", "neg", "abs", "square"};
  std::string prev = "X";
  for (int i = 0; i < n; ++i) {
    std::string name = "E" + std::to_string(i);
    builder.Op(name, kinds[i % 4], {prev});
    prev = name;
  }
  builder.Output(prev);
  return builder.proto();
}

}  // namespace yirage::core::testing

#endif  // YIRAGE_CORE_CANDIDATE_TEST_GRAPHS_H_
