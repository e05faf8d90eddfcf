#include "client/spec_file.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace yirage::client {
namespace {

constexpr char kSpec[] = R"(
name: mlp
dims: {M: 16, H: 64, I: 128}
dtype: float16
rtol: 1e-2
inputs:
  X: [M, H]
  W1: {shape: [H, I], dtype: bfloat16}
  W2: [H, "I"]
  R: [M, I // 2]
ops:
  - {name: A, op: matmul, inputs: [X, W1]}
  - {name: B, op: silu, inputs: [A]}
  - {name: S, op: slice, inputs: [B], attrs: {axis: -1, start: 0, end: I / 2}}
  - {name: Y, op: mul, inputs: [S], attrs: {scalar: 1 / sqrt(H)}}
  - {name: G, op: gelu, inputs: [Y], attrs: {approximate: tanh}}
  - {name: P, op: add, inputs: [G, R]}
  - {name: C, op: matmul, inputs: [X, W2]}
outputs: [P, C]
flops: 2 * M * H * I
bytes: 2 * (M * H + 2 * H * I)
variants:
  decode: {}
  prefill: {dims: {M: 512}, dtype: bfloat16, atol: 1e-3}
)";

TEST(SpecFileTest, VariantsBecomeGraphs) {
  absl::StatusOr<SpecFile> spec = ParseSpec(kSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "mlp");
  EXPECT_EQ(spec->dim_names, (std::vector<std::string>{"M", "H", "I"}));
  ASSERT_EQ(spec->variants.size(), 2u);
  const SpecVariant& decode = spec->variants[0];
  EXPECT_EQ(decode.name, "decode");
  EXPECT_EQ(decode.dims.at("M"), 16);
  EXPECT_EQ(decode.dtype, "float16");
  EXPECT_DOUBLE_EQ(decode.rtol, 1e-2);
  const SpecVariant& prefill = spec->variants[1];
  EXPECT_EQ(prefill.dims.at("M"), 512);
  EXPECT_EQ(prefill.dims.at("H"), 64) << "the spec's value where the variant sets none";
  EXPECT_EQ(prefill.dtype, "bfloat16");
  EXPECT_DOUBLE_EQ(prefill.atol, 1e-3);

  absl::StatusOr<nlohmann::json> g = SpecGraphJson(*spec, prefill);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)["name"], "mlp_prefill");
  EXPECT_EQ((*g)["inputs"][0]["shape"], nlohmann::json({512, 64}));
  EXPECT_EQ((*g)["inputs"][0]["dtype"], "bfloat16") << "the variant's dtype";
  EXPECT_EQ((*g)["inputs"][1]["dtype"], "bfloat16") << "the input's own";
  EXPECT_EQ((*g)["inputs"][3]["shape"], nlohmann::json({512, 64})) << "I // 2";
  EXPECT_EQ((*g)["ops"][2]["attrs"]["end"], 64) << "an attribute formula";
  EXPECT_EQ((*g)["ops"][2]["attrs"]["axis"], -1);
  EXPECT_DOUBLE_EQ((*g)["ops"][3]["attrs"]["scalar"].get<double>(), 0.125);
  EXPECT_EQ((*g)["ops"][4]["attrs"]["approximate"], "tanh") << "a string stays one";
  EXPECT_DOUBLE_EQ((*g)["tolerance"]["rtol"].get<double>(), 1e-2);
  EXPECT_DOUBLE_EQ((*g)["tolerance"]["atol"].get<double>(), 1e-3);
  absl::StatusOr<yirage::v1::Graph> proto = SpecGraph(*spec, decode);
  ASSERT_TRUE(proto.ok()) << proto.status();
  EXPECT_EQ(proto->name(), "mlp_decode");
  EXPECT_EQ(proto->ops_size(), 7);

  absl::StatusOr<std::optional<double>> flops = SpecFormula(spec->flops, prefill);
  ASSERT_TRUE(flops.ok());
  EXPECT_DOUBLE_EQ(**flops, 2.0 * 512 * 64 * 128);
  absl::StatusOr<std::vector<SpecVariant>> only = SelectVariants(*spec, {"prefill"});
  ASSERT_TRUE(only.ok());
  ASSERT_EQ(only->size(), 1u);
  EXPECT_EQ((*only)[0].name, "prefill");
  absl::StatusOr<std::vector<SpecVariant>> unknown = SelectVariants(*spec, {"train"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(std::string(unknown.status().message())
                .find("no variant 'train' (the spec's: decode, prefill)"),
            std::string::npos);
}

// Each mistake names its field (and the line, for YAML's own).
TEST(SpecFileTest, ErrorsNameTheField) {
  auto error = [](const std::string& text) {
    absl::StatusOr<SpecFile> spec = ParseSpec(text);
    EXPECT_FALSE(spec.ok()) << text;
    return spec.ok() ? std::string() : std::string(spec.status().message());
  };
  const std::string base =
      "name: t\ndims: {M: 4}\ndtype: float32\ninputs: {X: [M, 8]}\n"
      "ops: [{name: Y, op: relu, inputs: [X]}]\noutputs: [Y]\n";
  ASSERT_TRUE(ParseSpec(base).ok()) << ParseSpec(base).status();
  EXPECT_NE(error(base + "flops: 2 * M * K\n").find("flops: unknown dim 'K'"), std::string::npos)
      << error(base + "flops: 2 * M * K\n");
  EXPECT_NE(
      error(base + "variants: {big: {dims: {Q: 2}}}\n").find("variants.big.dims: unknown dim 'Q'"),
      std::string::npos);
  EXPECT_NE(error(base + "variants: {big: {size: 2}}\n").find("variants.big: unknown key 'size'"),
            std::string::npos);
  EXPECT_NE(error(base + "bogus: 1\n").find("unknown key 'bogus'"), std::string::npos);
  EXPECT_NE(error(base + "variants: {big: {dims: {M: 2.5}}}\n").find("expected a whole number"),
            std::string::npos);
  EXPECT_NE(error("name: t\ninputs: {X: [M, 8]}\nops: []\noutputs: [X]\n")
                .find("inputs.X.shape[0]: unknown dim 'M'"),
            std::string::npos);
  EXPECT_NE(error("name: t\ndims: {M: 4}\ninputs: {X: [M +, 8]}\n").find("at the end"),
            std::string::npos);
  EXPECT_NE(error("name: [t\n").find("YAML"), std::string::npos);
  EXPECT_NE(error("name: t\ndims: {M: 4}\ninputs: {X: [M]}\nops: 3\noutputs: [X]\n")
                .find("ops: expected a list of ops"),
            std::string::npos);
  // A shape that is not a whole number, at instantiation.
  absl::StatusOr<SpecFile> spec = ParseSpec(
      "name: t\ndims: {M: 3}\ndtype: float32\ninputs: {X: [M / 2, 8]}\n"
      "ops: [{name: Y, op: relu, inputs: [X]}]\noutputs: [Y]\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<nlohmann::json> g = SpecGraphJson(*spec, spec->variants[0]);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(std::string(g.status().message())
                .find("variant 'default': inputs.X.shape[0]: 'M / 2' is 1.5, not a whole number"),
            std::string::npos)
      << g.status();
  // The graph's own checks, with the variant named.
  spec = ParseSpec(
      "name: t\ndims: {M: 3}\ndtype: float32\ninputs: {X: [M, 8]}\n"
      "ops: [{name: Y, op: relu, inputs: [Z]}]\noutputs: [Y]\n");
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<yirage::v1::Graph> proto = SpecGraph(*spec, spec->variants[0]);
  ASSERT_FALSE(proto.ok());
  EXPECT_NE(std::string(proto.status().message()).find("variant 'default'"), std::string::npos);
}

// The example spec shipped in examples/specs parses and every variant is a
// valid graph.
TEST(SpecFileTest, TheExampleSpecIsValid) {
  std::ifstream in(std::string(YIRAGE_SOURCE_DIR) + "/examples/specs/rms_norm_linear.yaml");
  ASSERT_TRUE(in) << "examples/specs/rms_norm_linear.yaml";
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<SpecFile> spec = ParseSpec(text.str());
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->variants.size(), 3u);
  for (const SpecVariant& v : spec->variants) {
    absl::StatusOr<yirage::v1::Graph> g = SpecGraph(*spec, v);
    EXPECT_TRUE(g.ok()) << v.name << ": " << g.status();
  }
}

}  // namespace
}  // namespace yirage::client
