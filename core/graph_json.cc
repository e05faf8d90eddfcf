#include "core/graph_json.h"

#include <cstdint>
#include <exception>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/graph.h"
#include "nlohmann/json.hpp"

namespace yirage::core {
namespace {

using nlohmann::json;

absl::Status FieldError(const std::string& path, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
}

std::string TypeName(const json& value) {
  if (value.is_number_integer()) return "integer";
  return value.type_name();
}

// Rejects keys of `object` outside `allowed`.
absl::Status CheckKeys(const json& object, const std::string& path,
                       std::initializer_list<const char*> allowed) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool known = false;
    for (const char* key : allowed) known = known || it.key() == key;
    if (!known) {
      return FieldError(path.empty() ? "graph" : path,
                        absl::StrCat("unknown field '", it.key(),
                                     "' (expected: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

std::string Join(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

// The member `key` of `object`, required to have JSON type `type` (checked by
// `is_type`); nullptr with *status set when missing (and required) or mistyped.
const json* Member(const json& object, const std::string& path, const char* key, bool required,
                   bool (json::*is_type)() const noexcept, const char* type, absl::Status* status) {
  auto it = object.find(key);
  if (it == object.end()) {
    if (required)
      *status = FieldError(Join(path, key), absl::StrCat("missing (expected ", type, ")"));
    return nullptr;
  }
  if (!((*it).*is_type)()) {
    *status = FieldError(Join(path, key), absl::StrCat("expected ", type, ", got ", TypeName(*it)));
    return nullptr;
  }
  return &*it;
}

absl::Status ReadString(const json& object, const std::string& path, const char* key,
                        std::string* out) {
  absl::Status status;
  const json* value = Member(object, path, key, true, &json::is_string, "a string", &status);
  if (value == nullptr) return status;
  *out = value->get<std::string>();
  return absl::OkStatus();
}

absl::Status ReadInt64(const json& value, const std::string& path, int64_t* out) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return FieldError(path, absl::StrCat("integer ", u, " is out of range"));
    }
    *out = static_cast<int64_t>(u);
    return absl::OkStatus();
  }
  if (value.is_number_integer()) {
    *out = value.get<int64_t>();
    return absl::OkStatus();
  }
  return FieldError(path, absl::StrCat("expected an integer, got ", TypeName(value)));
}

absl::Status ReadStringList(const json& object, const std::string& path, const char* key,
                            google::protobuf::RepeatedPtrField<std::string>* out) {
  absl::Status status;
  const json* list =
      Member(object, path, key, true, &json::is_array, "an array of strings", &status);
  if (list == nullptr) return status;
  for (size_t i = 0; i < list->size(); ++i) {
    const json& item = (*list)[i];
    if (!item.is_string()) {
      return FieldError(absl::StrCat(Join(path, key), "[", i, "]"),
                        absl::StrCat("expected a string, got ", TypeName(item)));
    }
    *out->Add() = item.get<std::string>();
  }
  return absl::OkStatus();
}

absl::Status ParseInput(const json& value, const std::string& path, yirage::v1::TensorSpec* spec) {
  if (!value.is_object()) {
    return FieldError(path, absl::StrCat("expected an object, got ", TypeName(value)));
  }
  if (absl::Status s = CheckKeys(value, path, {"name", "shape", "dtype"}); !s.ok()) return s;
  if (absl::Status s = ReadString(value, path, "name", spec->mutable_name()); !s.ok()) return s;
  absl::Status status;
  const json* shape =
      Member(value, path, "shape", true, &json::is_array, "an array of integers", &status);
  if (shape == nullptr) return status;
  for (size_t d = 0; d < shape->size(); ++d) {
    int64_t dim = 0;
    if (absl::Status s = ReadInt64((*shape)[d], absl::StrCat(path, ".shape[", d, "]"), &dim);
        !s.ok()) {
      return s;
    }
    spec->add_shape(dim);
  }
  std::string dtype_name;
  if (absl::Status s = ReadString(value, path, "dtype", &dtype_name); !s.ok()) return s;
  yirage::v1::DType dtype;
  if (!ParseDType(dtype_name, &dtype)) {
    return FieldError(Join(path, "dtype"), absl::StrCat("unknown dtype '", dtype_name,
                                                        "' (expected float16, bfloat16 or "
                                                        "float32)"));
  }
  spec->set_dtype(dtype);
  return absl::OkStatus();
}

absl::Status ParseAttr(const json& value, const std::string& path, yirage::v1::AttrValue* attr) {
  if (value.is_boolean()) {
    attr->set_b(value.get<bool>());
  } else if (value.is_number_integer()) {
    int64_t i = 0;
    if (absl::Status s = ReadInt64(value, path, &i); !s.ok()) return s;
    attr->set_i(i);
  } else if (value.is_number_float()) {
    attr->set_f(value.get<double>());
  } else if (value.is_string()) {
    attr->set_s(value.get<std::string>());
  } else {
    return FieldError(path,
                      absl::StrCat("expected a number, string or boolean, got ", TypeName(value)));
  }
  return absl::OkStatus();
}

absl::Status ParseOp(const json& value, const std::string& path, yirage::v1::OpNode* op) {
  if (!value.is_object()) {
    return FieldError(path, absl::StrCat("expected an object, got ", TypeName(value)));
  }
  if (absl::Status s = CheckKeys(value, path, {"name", "op", "inputs", "attrs"}); !s.ok()) {
    return s;
  }
  if (absl::Status s = ReadString(value, path, "name", op->mutable_name()); !s.ok()) return s;
  if (absl::Status s = ReadString(value, path, "op", op->mutable_op()); !s.ok()) return s;
  if (absl::Status s = ReadStringList(value, path, "inputs", op->mutable_inputs()); !s.ok()) {
    return s;
  }
  absl::Status status;
  const json* attrs = Member(value, path, "attrs", false, &json::is_object, "an object", &status);
  if (!status.ok()) return status;
  if (attrs != nullptr) {
    for (auto it = attrs->begin(); it != attrs->end(); ++it) {
      yirage::v1::AttrValue attr;
      if (absl::Status s = ParseAttr(*it, absl::StrCat(path, ".attrs.", it.key()), &attr);
          !s.ok()) {
        return s;
      }
      (*op->mutable_attrs())[it.key()] = attr;
    }
  }
  return absl::OkStatus();
}

absl::Status ParseTolerance(const json& value, yirage::v1::Tolerance* tolerance) {
  if (absl::Status s = CheckKeys(value, "tolerance", {"rtol", "atol"}); !s.ok()) return s;
  absl::Status status;
  for (const char* key : {"rtol", "atol"}) {
    const json* field =
        Member(value, "tolerance", key, false, &json::is_number, "a number", &status);
    if (!status.ok()) return status;
    if (field == nullptr) continue;
    const double v = field->get<double>();
    if (std::string_view(key) == "rtol") {
      tolerance->set_rtol(v);
    } else {
      tolerance->set_atol(v);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<yirage::v1::Graph> ParseParsed(const json& root) {
  if (!root.is_object()) {
    return FieldError("graph", absl::StrCat("expected a JSON object, got ", TypeName(root)));
  }
  if (absl::Status s = CheckKeys(root, "", {"name", "inputs", "ops", "outputs", "tolerance"});
      !s.ok()) {
    return s;
  }
  yirage::v1::Graph graph;
  if (absl::Status s = ReadString(root, "", "name", graph.mutable_name()); !s.ok()) return s;
  absl::Status status;
  const json* inputs = Member(root, "", "inputs", true, &json::is_array, "an array", &status);
  if (inputs == nullptr) return status;
  for (size_t i = 0; i < inputs->size(); ++i) {
    if (absl::Status s =
            ParseInput((*inputs)[i], absl::StrCat("inputs[", i, "]"), graph.add_inputs());
        !s.ok()) {
      return s;
    }
  }
  const json* ops = Member(root, "", "ops", true, &json::is_array, "an array", &status);
  if (ops == nullptr) return status;
  for (size_t j = 0; j < ops->size(); ++j) {
    if (absl::Status s = ParseOp((*ops)[j], absl::StrCat("ops[", j, "]"), graph.add_ops());
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ReadStringList(root, "", "outputs", graph.mutable_outputs()); !s.ok()) {
    return s;
  }
  const json* tolerance =
      Member(root, "", "tolerance", false, &json::is_object, "an object", &status);
  if (!status.ok()) return status;
  if (tolerance != nullptr) {
    if (absl::Status s = ParseTolerance(*tolerance, graph.mutable_tolerance()); !s.ok()) return s;
  }
  return graph;
}

// 1-based line and column of byte offset `byte` in `text`.
std::pair<int64_t, int64_t> LineAndColumn(std::string_view text, size_t byte) {
  int64_t line = 1;
  int64_t column = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

}  // namespace

absl::StatusOr<yirage::v1::Graph> ParseGraphJson(std::string_view text) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // e.byte is 1-based: the byte where the parser stopped.
    const size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    auto [line, column] = LineAndColumn(text, offset);
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON at line ", line, ", column ",
                                                   column, " (byte ", offset, "): ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON: ", e.what()));
  }
  try {
    return ParseParsed(root);
  } catch (const std::exception& e) {  // not expected: every access is type-checked
    return absl::InternalError(absl::StrCat("graph JSON: ", e.what()));
  }
}

std::string GraphToJson(const yirage::v1::Graph& graph) {
  nlohmann::ordered_json root;
  root["name"] = graph.name();
  root["inputs"] = nlohmann::ordered_json::array();
  for (const yirage::v1::TensorSpec& spec : graph.inputs()) {
    nlohmann::ordered_json input;
    input["name"] = spec.name();
    input["shape"] = std::vector<int64_t>(spec.shape().begin(), spec.shape().end());
    input["dtype"] = std::string(DTypeName(spec.dtype()));
    root["inputs"].push_back(std::move(input));
  }
  root["ops"] = nlohmann::ordered_json::array();
  for (const yirage::v1::OpNode& node : graph.ops()) {
    nlohmann::ordered_json op;
    op["name"] = node.name();
    op["op"] = node.op();
    op["inputs"] = std::vector<std::string>(node.inputs().begin(), node.inputs().end());
    if (!node.attrs().empty()) {
      // Sorted, so the text does not depend on the map's iteration order.
      std::map<std::string, yirage::v1::AttrValue> sorted(node.attrs().begin(), node.attrs().end());
      nlohmann::ordered_json attrs = nlohmann::ordered_json::object();
      for (const auto& [key, value] : sorted) {
        switch (value.value_case()) {
          case yirage::v1::AttrValue::kF:
            attrs[key] = value.f();
            break;
          case yirage::v1::AttrValue::kI:
            attrs[key] = value.i();
            break;
          case yirage::v1::AttrValue::kS:
            attrs[key] = value.s();
            break;
          case yirage::v1::AttrValue::kB:
            attrs[key] = value.b();
            break;
          case yirage::v1::AttrValue::VALUE_NOT_SET:
            attrs[key] = nullptr;
            break;
        }
      }
      op["attrs"] = std::move(attrs);
    }
    root["ops"].push_back(std::move(op));
  }
  root["outputs"] = std::vector<std::string>(graph.outputs().begin(), graph.outputs().end());
  if (graph.tolerance().rtol() != 0 || graph.tolerance().atol() != 0) {
    root["tolerance"]["rtol"] = graph.tolerance().rtol();
    root["tolerance"]["atol"] = graph.tolerance().atol();
  }
  // Invalid UTF-8 in names is replaced rather than thrown on.
  return root.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace yirage::core
