// Spec files (docs/spec-files.md): one YAML file describes a family of
// graphs over named dimensions, its variants (dimension values, dtype,
// tolerance) and FLOP and byte formulas; `yirage-client submit-spec`
// submits one job a variant. Shapes, attribute values and formulas are
// expressions over the dims (client/expression.h), parsed once.
#ifndef YIRAGE_CLIENT_SPEC_FILE_H_
#define YIRAGE_CLIENT_SPEC_FILE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/expression.h"
#include "nlohmann/json.hpp"
#include "yirage/v1/graph.pb.h"

namespace yirage::client {

struct SpecVariant {
  std::string name;
  std::map<std::string, int64_t> dims;  // every dim of the spec
  std::string dtype;                    // inputs without their own dtype
  double rtol = 0, atol = 0;            // 0: not set (the server's default)
};

// An attribute's value as written: a literal (bool, number, string, or a
// list of them), or an expression over the dims (a list may mix both).
struct SpecAttr {
  std::string key;
  nlohmann::json literal;  // with `exprs` empty
  // Entries that are expressions: position in `literal` (a list) or -1
  // for the whole value.
  std::vector<std::pair<int, Expression>> exprs;
};

struct SpecInput {
  std::string name;
  std::vector<Expression> shape;
  std::string dtype;  // empty: the variant's
};

struct SpecOp {
  std::string name, op;
  std::vector<std::string> inputs;
  std::vector<SpecAttr> attrs;
};

struct SpecFile {
  std::string name;
  std::vector<std::string> dim_names;  // in the file's order
  std::vector<SpecInput> inputs;
  std::vector<SpecOp> ops;
  std::vector<std::string> outputs;
  std::optional<Expression> flops, bytes;
  std::vector<SpecVariant> variants;  // the file's, or one named "default"
};

// Parses a spec file's text. Errors name the field ("variants.prefill.dims:
// unknown dim 'Q' (the dims are: H, M)") and, for YAML syntax, the line.
absl::StatusOr<SpecFile> ParseSpec(const std::string& yaml_text);

// The variants named by `names` (all where empty), in the file's order, or
// an error naming the unknown one and the known ones.
absl::StatusOr<std::vector<SpecVariant>> SelectVariants(const SpecFile& spec,
                                                        const std::vector<std::string>& names);

// The variant's graph JSON (docs/graph-format.md), named
// "<spec name>_<variant name>", with its tolerance where the variant sets
// one; a shape entry that is not a whole number >= 1 is an error naming it.
absl::StatusOr<nlohmann::json> SpecGraphJson(const SpecFile& spec, const SpecVariant& variant);
// The same, parsed and checked as a graph file is; with `graph_json`, also
// the JSON it was parsed from.
absl::StatusOr<yirage::v1::Graph> SpecGraph(const SpecFile& spec, const SpecVariant& variant,
                                            nlohmann::json* graph_json = nullptr);

// The formula's value for the variant; nullopt where the spec has none.
absl::StatusOr<std::optional<double>> SpecFormula(const std::optional<Expression>& formula,
                                                  const SpecVariant& variant);

}  // namespace yirage::client

#endif  // YIRAGE_CLIENT_SPEC_FILE_H_
