#include "client/spec_file.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/graph.h"
#include "core/graph_json.h"
#include "yaml-cpp/yaml.h"

namespace yirage::client {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path.empty() ? "spec" : path, ": ", what));
}

// Whole numbers a double holds exactly (and int64 stores).
constexpr double kMaxWhole = 9.0e15;
bool IsWhole(double v) { return v == std::floor(v) && std::fabs(v) <= kMaxWhole; }

// " (the dims are: M, N)" for messages about a name that is not a dim.
std::string DimsAre(const std::vector<std::string>& dims) {
  return absl::StrCat(" (the dims are: ", dims.empty() ? "none" : absl::StrJoin(dims, ", "), ")");
}

// The first name `e` reads that is not a dim, or "".
std::string NotADim(const Expression& e, const std::vector<std::string>& dims) {
  for (const std::string& name : e.Names()) {
    if (std::find(dims.begin(), dims.end(), name) == dims.end()) return name;
  }
  return "";
}

std::string Mark(const YAML::Node& node) {
  const YAML::Mark m = node.Mark();
  return m.line >= 0 ? absl::StrCat(" (line ", m.line + 1, ")") : "";
}

// Every key of map `node` one of `allowed`.
absl::Status CheckKeys(const YAML::Node& node, const std::string& path,
                       const std::set<std::string>& allowed) {
  if (!node.IsMap()) return Bad(path, absl::StrCat("expected a mapping", Mark(node)));
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (!allowed.count(key)) {
      return Bad(path, absl::StrCat("unknown key '", key, "'", Mark(kv.first),
                                    " (allowed: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Str(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) return Bad(path, absl::StrCat("expected a string", Mark(node)));
  return node.Scalar();
}

absl::StatusOr<double> Number(const YAML::Node& node, const std::string& path) {
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(v)) return v;
  }
  return Bad(path, absl::StrCat("expected a number", Mark(node)));
}

// A whole number from a YAML scalar.
absl::StatusOr<int64_t> Whole(const YAML::Node& node, const std::string& path) {
  absl::StatusOr<double> v = Number(node, path);
  if (!v.ok()) return v.status();
  if (!IsWhole(*v)) {
    return Bad(path, absl::StrCat("expected a whole number, not ", node.Scalar(), Mark(node)));
  }
  return static_cast<int64_t>(*v);
}

// An expression over the dims, from a scalar (a number or a formula).
absl::StatusOr<Expression> Expr(const YAML::Node& node, const std::string& path,
                                const std::vector<std::string>& dims) {
  if (!node.IsScalar()) return Bad(path, absl::StrCat("expected a number or formula", Mark(node)));
  absl::StatusOr<Expression> e = Expression::Parse(node.Scalar());
  if (!e.ok()) return Bad(path, absl::StrCat(e.status().message(), Mark(node)));
  if (const std::string name = NotADim(*e, dims); !name.empty()) {
    return Bad(path, absl::StrCat("unknown dim '", name, "' in '", node.Scalar(), "'", Mark(node),
                                  DimsAre(dims)));
  }
  return e;
}

// A scalar attribute value: a bool, a number, an expression over the dims,
// else a string (an activation's name).
void ScalarAttr(const YAML::Node& node, const std::vector<std::string>& dims, int position,
                json* literal, std::vector<std::pair<int, Expression>>* exprs) {
  const std::string& s = node.Scalar();
  if (s == "true" || s == "false") {
    *literal = s == "true";
    return;
  }
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (!s.empty() && end == s.c_str() + s.size()) {
    if (IsWhole(v) && s.find_first_of(".eE") == std::string::npos) {
      *literal = static_cast<int64_t>(v);
    } else {
      *literal = v;
    }
    return;
  }
  absl::StatusOr<Expression> e = Expression::Parse(s);
  if (e.ok() && NotADim(*e, dims).empty()) {
    exprs->emplace_back(position, *std::move(e));
    *literal = nullptr;
    return;
  }
  *literal = s;
}

// `node`'s dtype, rtol and atol where it has them, into `v` (the spec's
// defaults at the top level, a variant's own under it); `prefix` leads the
// keys' paths in messages.
absl::Status ReadSettings(const YAML::Node& node, const std::string& prefix, SpecVariant* v) {
  if (const YAML::Node d = node["dtype"]; d) {
    absl::StatusOr<std::string> s = Str(d, prefix + "dtype");
    if (!s.ok()) return s.status();
    v->dtype = *s;
  }
  for (const char* key : {"rtol", "atol"}) {
    if (const YAML::Node t = node[key]; t) {
      const std::string path = prefix + key;
      absl::StatusOr<double> value = Number(t, path);
      if (!value.ok()) return value.status();
      if (*value < 0) return Bad(path, "must be >= 0");
      (std::string(key) == "rtol" ? v->rtol : v->atol) = *value;
    }
  }
  return absl::OkStatus();
}

// Variant `name` of `node` (null: the spec's defaults as they are) over the
// spec's defaults `base`.
absl::Status ParseVariant(const std::string& name, const YAML::Node& node, const SpecFile& spec,
                          const SpecVariant& base, SpecVariant* out) {
  const std::string path = absl::StrCat("variants.", name);
  *out = base;
  out->name = name;
  if (node.IsNull()) return absl::OkStatus();
  if (absl::Status s = CheckKeys(node, path, {"dims", "dtype", "rtol", "atol"}); !s.ok()) return s;
  if (const YAML::Node dims = node["dims"]; dims) {
    if (!dims.IsMap()) return Bad(path + ".dims", absl::StrCat("expected a mapping", Mark(dims)));
    for (const auto& kv : dims) {
      const std::string dim = kv.first.as<std::string>();
      if (!base.dims.count(dim)) {
        return Bad(path + ".dims", absl::StrCat("unknown dim '", dim, "'", Mark(kv.first),
                                                DimsAre(spec.dim_names)));
      }
      absl::StatusOr<int64_t> v = Whole(kv.second, absl::StrCat(path, ".dims.", dim));
      if (!v.ok()) return v.status();
      out->dims[dim] = *v;
    }
  }
  return ReadSettings(node, path + ".", out);
}

absl::StatusOr<SpecFile> Parse(const YAML::Node& root) {
  SpecFile spec;
  if (absl::Status s = CheckKeys(root, "",
                                 {"name", "dims", "dtype", "rtol", "atol", "inputs", "ops",
                                  "outputs", "flops", "bytes", "variants"});
      !s.ok()) {
    return s;
  }
  if (!root["name"]) return Bad("name", "missing (the graphs are named <name>_<variant>)");
  absl::StatusOr<std::string> name = Str(root["name"], "name");
  if (!name.ok()) return name.status();
  spec.name = *name;
  // The spec's defaults: the "default" variant where it names none.
  SpecVariant base;
  base.name = "default";
  if (const YAML::Node dims = root["dims"]; dims) {
    if (!dims.IsMap())
      return Bad("dims", absl::StrCat("expected a mapping of names to values", Mark(dims)));
    for (const auto& kv : dims) {
      const std::string dim = kv.first.as<std::string>();
      absl::StatusOr<Expression> check = Expression::Parse(dim);
      if (!check.ok() || check->Names() != std::set<std::string>{dim}) {
        return Bad("dims", absl::StrCat("'", dim, "' is not a name (letters, digits, _)"));
      }
      absl::StatusOr<int64_t> v = Whole(kv.second, "dims." + dim);
      if (!v.ok()) return v.status();
      spec.dim_names.push_back(dim);
      base.dims[dim] = *v;
    }
  }
  if (absl::Status s = ReadSettings(root, "", &base); !s.ok()) return s;

  const YAML::Node inputs = root["inputs"];
  if (!inputs || !inputs.IsMap() || inputs.size() == 0) {
    return Bad("inputs",
               "expected a mapping of input names to shapes ([M, K]) or "
               "{shape: [...], dtype: ...}");
  }
  for (const auto& kv : inputs) {
    SpecInput in;
    in.name = kv.first.as<std::string>();
    const std::string path = "inputs." + in.name;
    YAML::Node shape = kv.second;
    if (kv.second.IsMap()) {
      if (absl::Status s = CheckKeys(kv.second, path, {"shape", "dtype"}); !s.ok()) return s;
      shape = kv.second["shape"];
      if (kv.second["dtype"]) {
        absl::StatusOr<std::string> d = Str(kv.second["dtype"], path + ".dtype");
        if (!d.ok()) return d.status();
        in.dtype = *d;
      }
    }
    if (!shape || !shape.IsSequence()) {
      return Bad(path, absl::StrCat("expected a shape: a list of dims, numbers or formulas",
                                    Mark(kv.second)));
    }
    for (size_t i = 0; i < shape.size(); ++i) {
      absl::StatusOr<Expression> e =
          Expr(shape[i], absl::StrCat(path, ".shape[", i, "]"), spec.dim_names);
      if (!e.ok()) return e.status();
      in.shape.push_back(*std::move(e));
    }
    spec.inputs.push_back(std::move(in));
  }

  const YAML::Node ops = root["ops"];
  if (!ops || !ops.IsSequence() || ops.size() == 0) {
    return Bad("ops", "expected a list of ops ({name, op, inputs, attrs})");
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const YAML::Node o = ops[i];
    std::string path = absl::StrCat("ops[", i, "]");
    if (absl::Status s = CheckKeys(o, path, {"name", "op", "inputs", "attrs"}); !s.ok()) return s;
    SpecOp op;
    for (const char* key : {"name", "op"}) {
      if (!o[key]) return Bad(path, absl::StrCat("missing '", key, "'", Mark(o)));
      absl::StatusOr<std::string> v = Str(o[key], absl::StrCat(path, ".", key));
      if (!v.ok()) return v.status();
      (std::string(key) == "name" ? op.name : op.op) = *v;
    }
    path = absl::StrCat("ops[", i, "] ('", op.name, "')");
    const YAML::Node in = o["inputs"];
    if (!in || !in.IsSequence()) return Bad(path + ".inputs", "expected a list of tensor names");
    for (size_t j = 0; j < in.size(); ++j) {
      absl::StatusOr<std::string> v = Str(in[j], absl::StrCat(path, ".inputs[", j, "]"));
      if (!v.ok()) return v.status();
      op.inputs.push_back(*v);
    }
    if (const YAML::Node attrs = o["attrs"]; attrs) {
      if (!attrs.IsMap())
        return Bad(path + ".attrs", absl::StrCat("expected a mapping", Mark(attrs)));
      for (const auto& kv : attrs) {
        SpecAttr attr;
        attr.key = kv.first.as<std::string>();
        if (kv.second.IsScalar()) {
          ScalarAttr(kv.second, spec.dim_names, -1, &attr.literal, &attr.exprs);
        } else if (kv.second.IsSequence()) {
          attr.literal = json::array();
          for (size_t j = 0; j < kv.second.size(); ++j) {
            if (!kv.second[j].IsScalar()) {
              return Bad(absl::StrCat(path, ".attrs.", attr.key, "[", j, "]"),
                         "expected a number, formula or string");
            }
            json item;
            ScalarAttr(kv.second[j], spec.dim_names, static_cast<int>(j), &item, &attr.exprs);
            attr.literal.push_back(item);
          }
        } else {
          return Bad(absl::StrCat(path, ".attrs.", attr.key),
                     absl::StrCat("expected a value or a list of values", Mark(kv.second)));
        }
        op.attrs.push_back(std::move(attr));
      }
    }
    spec.ops.push_back(std::move(op));
  }

  const YAML::Node outputs = root["outputs"];
  if (!outputs || !outputs.IsSequence() || outputs.size() == 0) {
    return Bad("outputs", "expected a list of tensor names");
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    absl::StatusOr<std::string> v = Str(outputs[i], absl::StrCat("outputs[", i, "]"));
    if (!v.ok()) return v.status();
    spec.outputs.push_back(*v);
  }
  for (const char* key : {"flops", "bytes"}) {
    if (!root[key]) continue;
    absl::StatusOr<Expression> e = Expr(root[key], key, spec.dim_names);
    if (!e.ok()) return e.status();
    (std::string(key) == "flops" ? spec.flops : spec.bytes) = *std::move(e);
  }

  if (const YAML::Node variants = root["variants"]; variants) {
    if (!variants.IsMap() || variants.size() == 0) {
      return Bad("variants",
                 absl::StrCat("expected a mapping of variant names to {dims, dtype, rtol, atol}",
                              Mark(variants)));
    }
    for (const auto& kv : variants) {
      SpecVariant v;
      if (absl::Status s = ParseVariant(kv.first.as<std::string>(), kv.second, spec, base, &v);
          !s.ok()) {
        return s;
      }
      spec.variants.push_back(std::move(v));
    }
  } else {
    spec.variants.push_back(std::move(base));
  }
  return spec;
}

std::map<std::string, double> Bindings(const SpecVariant& variant) {
  std::map<std::string, double> vars;
  for (const auto& [name, value] : variant.dims) vars[name] = static_cast<double>(value);
  return vars;
}

}  // namespace

absl::StatusOr<SpecFile> ParseSpec(const std::string& yaml_text) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("spec: YAML: ", e.what()));
  }
  try {
    return Parse(root);
  } catch (const YAML::Exception& e) {
    // A key that is not a scalar, and kin.
    return absl::InvalidArgumentError(absl::StrCat("spec: ", e.what()));
  }
}

absl::StatusOr<std::vector<SpecVariant>> SelectVariants(const SpecFile& spec,
                                                        const std::vector<std::string>& names) {
  if (names.empty()) return spec.variants;
  std::vector<SpecVariant> out;
  std::vector<std::string> known;
  for (const SpecVariant& v : spec.variants) known.push_back(v.name);
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--variant: no variant '", name, "' (the spec's: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  for (const SpecVariant& v : spec.variants) {
    if (std::find(names.begin(), names.end(), v.name) != names.end()) out.push_back(v);
  }
  return out;
}

absl::StatusOr<json> SpecGraphJson(const SpecFile& spec, const SpecVariant& variant) {
  const std::map<std::string, double> vars = Bindings(variant);
  json graph;
  graph["name"] = absl::StrCat(spec.name, "_", variant.name);
  json inputs = json::array();
  for (const SpecInput& in : spec.inputs) {
    json shape = json::array();
    for (size_t i = 0; i < in.shape.size(); ++i) {
      absl::StatusOr<double> v = in.shape[i].Evaluate(vars);
      const std::string path =
          absl::StrCat("variant '", variant.name, "': inputs.", in.name, ".shape[", i, "]");
      if (!v.ok()) return Bad(path, std::string(v.status().message()));
      if (!IsWhole(*v) || *v < 1) {
        return Bad(path,
                   absl::StrCat("'", in.shape[i].text(), "' is ", *v, ", not a whole number >= 1"));
      }
      shape.push_back(static_cast<int64_t>(*v));
    }
    const std::string dtype = in.dtype.empty() ? variant.dtype : in.dtype;
    if (dtype.empty()) {
      return Bad(absl::StrCat("inputs.", in.name),
                 "no dtype (give the input one, or the spec or the variant a dtype)");
    }
    inputs.push_back({{"name", in.name}, {"shape", shape}, {"dtype", dtype}});
  }
  graph["inputs"] = inputs;
  json ops = json::array();
  for (const SpecOp& op : spec.ops) {
    json o = {{"name", op.name}, {"op", op.op}, {"inputs", op.inputs}};
    if (!op.attrs.empty()) {
      json attrs = json::object();
      for (const SpecAttr& a : op.attrs) {
        json value = a.literal;
        for (const auto& [position, expr] : a.exprs) {
          absl::StatusOr<double> v = expr.Evaluate(vars);
          if (!v.ok()) {
            return Bad(
                absl::StrCat("variant '", variant.name, "': op '", op.name, "' attr '", a.key, "'"),
                std::string(v.status().message()));
          }
          json number = IsWhole(*v) ? json(static_cast<int64_t>(*v)) : json(*v);
          if (position < 0) {
            value = number;
          } else {
            value[position] = number;
          }
        }
        attrs[a.key] = value;
      }
      o["attrs"] = attrs;
    }
    ops.push_back(o);
  }
  graph["ops"] = ops;
  graph["outputs"] = spec.outputs;
  if (variant.rtol > 0 || variant.atol > 0) {
    json tolerance = json::object();
    if (variant.rtol > 0) tolerance["rtol"] = variant.rtol;
    if (variant.atol > 0) tolerance["atol"] = variant.atol;
    graph["tolerance"] = tolerance;
  }
  return graph;
}

absl::StatusOr<yirage::v1::Graph> SpecGraph(const SpecFile& spec, const SpecVariant& variant,
                                            json* graph_json) {
  absl::StatusOr<json> graph = SpecGraphJson(spec, variant);
  if (!graph.ok()) return graph.status();
  if (graph_json != nullptr) *graph_json = *graph;
  absl::StatusOr<yirage::v1::Graph> parsed = core::ParseGraphJson(graph->dump());
  absl::Status valid = parsed.status();
  // The server's checks too (names, shapes, dtypes, limits), so that a bad
  // variant is found before any job is submitted.
  if (valid.ok()) valid = core::Graph::FromProto(*parsed).status();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("variant '", variant.name, "': ", valid.message()));
  }
  return parsed;
}

absl::StatusOr<std::optional<double>> SpecFormula(const std::optional<Expression>& formula,
                                                  const SpecVariant& variant) {
  if (!formula.has_value()) return std::optional<double>();
  absl::StatusOr<double> v = formula->Evaluate(Bindings(variant));
  if (!v.ok()) return v.status();
  return std::optional<double>(*v);
}

}  // namespace yirage::client
