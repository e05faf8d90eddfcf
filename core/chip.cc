#include "core/chip.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "google/protobuf/reflection.h"
#include "google/protobuf/util/message_differencer.h"

namespace yirage::core {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using nlohmann::json;
using yirage::v1::Chip;

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

bool Contains(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

std::string ChipLabel(const std::string& chip_id, const std::string& where) {
  return chip_id.empty() ? where : absl::StrCat("chip '", chip_id, "'");
}

absl::Status FieldError(const std::string& label, const std::string& field,
                        const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", field, ": ", why));
}

std::string JsonTypeName(const json& v) { return v.type_name(); }

// Sets one non-repeated scalar field from a JSON value.
absl::Status SetScalar(const json& v, Message* m, const FieldDescriptor* f,
                       const std::string& label, const std::string& path) {
  const Reflection* r = m->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      if (!v.is_string()) {
        return FieldError(label, path, absl::StrCat("must be a string, got ", JsonTypeName(v)));
      }
      r->SetString(m, f, v.get<std::string>());
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_BOOL:
      if (!v.is_boolean()) {
        return FieldError(label, path, absl::StrCat("must be true or false, got ", v.dump()));
      }
      r->SetBool(m, f, v.get<bool>());
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_DOUBLE:
      if (!v.is_number()) {
        return FieldError(label, path, absl::StrCat("must be a number, got ", v.dump()));
      }
      r->SetDouble(m, f, v.get<double>());
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64: {
      if (!v.is_number()) {
        return FieldError(label, path, absl::StrCat("must be an integer, got ", v.dump()));
      }
      const double d = v.get<double>();
      const double limit = f->cpp_type() == FieldDescriptor::CPPTYPE_INT32 ? 2147483647.0 : 9.0e18;
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > limit) {
        return FieldError(label, path, absl::StrCat("must be an integer, got ", v.dump()));
      }
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
        r->SetInt32(m, f, static_cast<int32_t>(d));
      } else {
        r->SetInt64(m, f, v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(d));
      }
      return absl::OkStatus();
    }
    default:
      return FieldError(label, path, "unsupported field type");
  }
}

// Fills `m` from the JSON object `j`, refusing unknown keys (but see
// "features"). `path` is the dotted prefix for messages.
absl::Status FillMessage(const json& j, Message* m, const std::string& label,
                         const std::string& path) {
  const std::string where = path.empty() ? std::string("chip") : path;
  if (!j.is_object()) {
    return FieldError(label, where, absl::StrCat("must be an object, got ", JsonTypeName(j)));
  }
  const auto* desc = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (const auto& [key, value] : j.items()) {
    const std::string field_path = path.empty() ? key : absl::StrCat(path, ".", key);
    if (value.is_null()) continue;  // absent
    const FieldDescriptor* f = desc->FindFieldByName(key);
    if (f == nullptr && desc->name() == "ChipFeatures" && key != "other") {
      // An extra feature flag of a partner's catalog: kept in features.other
      // (under a name: features.other refuses an empty key too).
      if (key.empty()) return FieldError(label, where, "a feature with an empty name");
      if (!value.is_boolean()) {
        return FieldError(label, field_path,
                          absl::StrCat("a feature must be true or false, got ", value.dump()));
      }
      auto* features = static_cast<yirage::v1::ChipFeatures*>(m);
      (*features->mutable_other())[key] = value.get<bool>();
      continue;
    }
    if (f == nullptr) {
      return FieldError(label, field_path,
                        absl::StrCat("unknown field (", desc->name(), " has: ",
                                     absl::StrJoin(
                                         [&] {
                                           std::vector<std::string> names;
                                           for (int i = 0; i < desc->field_count(); ++i) {
                                             names.push_back(desc->field(i)->name());
                                           }
                                           return names;
                                         }(),
                                         ", "),
                                     ")"));
    }
    if (f->is_map()) {
      if (!value.is_object()) {
        return FieldError(label, field_path,
                          absl::StrCat("must be an object, got ", JsonTypeName(value)));
      }
      const auto* entry = f->message_type();
      const FieldDescriptor* vf = entry->FindFieldByName("value");
      for (const auto& [k, v] : value.items()) {
        const std::string entry_path = absl::StrCat(field_path, ".", k);
        if (k.empty()) return FieldError(label, field_path, "empty key");
        Message* e = r->AddMessage(m, f);
        e->GetReflection()->SetString(e, entry->FindFieldByName("key"), k);
        if (auto s = SetScalar(v, e, vf, label, entry_path); !s.ok()) return s;
      }
      continue;
    }
    if (f->is_repeated()) {
      if (!value.is_array()) {
        return FieldError(label, field_path,
                          absl::StrCat("must be a list, got ", JsonTypeName(value)));
      }
      for (size_t i = 0; i < value.size(); ++i) {
        const json& v = value[i];
        const std::string item = absl::StrCat(field_path, "[", i, "]");
        if (!v.is_number() || v.get<double>() != std::floor(v.get<double>()) ||
            std::fabs(v.get<double>()) > 2147483647.0) {
          return FieldError(label, item, absl::StrCat("must be an integer, got ", v.dump()));
        }
        r->AddInt32(m, f, static_cast<int32_t>(v.get<double>()));
      }
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (auto s = FillMessage(value, r->MutableMessage(m, f), label, field_path); !s.ok()) {
        return s;
      }
      continue;
    }
    if (auto s = SetScalar(value, m, f, label, field_path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The JSON of `m`: fields that are set (proto3: non-default), nested
// messages when they hold anything.
json MessageToJson(const Message& m) {
  json out = json::object();
  const auto* desc = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    if (f->is_map()) {
      const int n = r->FieldSize(m, f);
      if (n == 0) continue;
      json obj = json::object();
      const FieldDescriptor* kf = f->message_type()->FindFieldByName("key");
      const FieldDescriptor* vf = f->message_type()->FindFieldByName("value");
      for (int k = 0; k < n; ++k) {
        const Message& e = r->GetRepeatedMessage(m, f, k);
        const Reflection* er = e.GetReflection();
        const std::string key = er->GetString(e, kf);
        if (vf->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
          obj[key] = er->GetBool(e, vf);
        } else {
          obj[key] = er->GetString(e, vf);
        }
      }
      out[f->name()] = obj;  // nlohmann::json objects keep keys sorted
      continue;
    }
    if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      if (n == 0) continue;
      json list = json::array();
      for (int k = 0; k < n; ++k) list.push_back(r->GetRepeatedInt32(m, f, k));
      out[f->name()] = list;
      continue;
    }
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (!r->HasField(m, f)) continue;
      json sub = MessageToJson(r->GetMessage(m, f));
      if (!sub.empty()) out[f->name()] = sub;
      continue;
    }
    if (!r->HasField(m, f)) continue;  // proto3 scalars: set means non-default
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_STRING:
        out[f->name()] = r->GetString(m, f);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        out[f->name()] = r->GetBool(m, f);
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:
        out[f->name()] = r->GetDouble(m, f);
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        out[f->name()] = r->GetInt32(m, f);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        out[f->name()] = r->GetInt64(m, f);
        break;
      default:
        break;
    }
  }
  return out;
}

absl::Status CheckNonNegative(const Message& m, const std::string& label, const std::string& path) {
  const auto* desc = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  for (int i = 0; i < desc->field_count(); ++i) {
    const FieldDescriptor* f = desc->field(i);
    if (f->is_repeated()) continue;
    const std::string field = absl::StrCat(path, ".", f->name());
    double v = 0;
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_DOUBLE:
        v = r->GetDouble(m, f);
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        v = r->GetInt32(m, f);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        v = static_cast<double>(r->GetInt64(m, f));
        break;
      default:
        continue;
    }
    if (!std::isfinite(v)) return FieldError(label, field, "must be a finite number");
    if (v < 0) return FieldError(label, field, absl::StrCat("must be >= 0, got ", v));
  }
  return absl::OkStatus();
}

// ---- device descriptions ----

std::string JsonString(const json& j, std::initializer_list<const char*> keys) {
  if (!j.is_object()) return "";
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it != j.end() && it->is_string() && !it->get<std::string>().empty()) return *it;
  }
  return "";
}

double JsonNumber(const json& j, std::initializer_list<const char*> keys) {
  if (!j.is_object()) return 0;
  for (const char* k : keys) {
    auto it = j.find(k);
    if (it != j.end() && it->is_number()) return it->get<double>();
  }
  return 0;
}

std::string DeviceName(const json& d) {
  return JsonString(d, {"name", "model_name", "device_name", "model"});
}

int DeviceComputeUnits(const json& d) {
  return static_cast<int>(JsonNumber(d, {"sm_count", "multiprocessor_count", "compute_units",
                                         "num_compute_units", "cores_physical"}));
}

double DeviceMemoryBytes(const json& d) {
  return JsonNumber(d, {"memory_bytes", "total_memory_bytes", "global_memory_bytes"});
}

// "sm_90" from compute_capability "9.0"; "gfx942" from "gfx942:sramecc+:xnack-".
std::string DeviceArchCode(const json& d) {
  std::string cc = JsonString(d, {"compute_capability"});
  if (!cc.empty()) {
    std::vector<std::string> parts = absl::StrSplit(cc, '.');
    if (parts.size() == 2) return absl::StrCat("sm_", parts[0], parts[1]);
  }
  std::string arch = JsonString(d, {"arch_code", "gcn_arch_name", "arch"});
  return arch.substr(0, arch.find(':'));
}

bool HasSimd(const json& d, const char* feature) {
  auto it = d.find("simd");
  if (it == d.end() || !it->is_array()) return false;
  for (const auto& f : *it) {
    if (f.is_string() && f.get<std::string>() == feature) return true;
  }
  return false;
}

// Does `pattern` occur in `name` (both normalized) at word boundaries?
bool ContainsWord(const std::string& name, const std::string& pattern) {
  if (pattern.empty()) return false;
  for (size_t pos = name.find(pattern); pos != std::string::npos;
       pos = name.find(pattern, pos + 1)) {
    const bool start_ok = pos == 0 || name[pos - 1] == ' ';
    const size_t end = pos + pattern.size();
    const bool end_ok = end == name.size() || name[end] == ' ';
    if (start_ok && end_ok) return true;
  }
  return false;
}

std::vector<std::string> MatchPatterns(const Chip& chip) {
  std::vector<std::string> out;
  auto it = chip.metadata().find("match");
  if (it != chip.metadata().end()) {
    for (absl::string_view p : absl::StrSplit(it->second, '|', absl::SkipWhitespace())) {
      std::string n = NormalizeDeviceName(std::string(p));
      if (!n.empty()) out.push_back(n);
    }
    return out;
  }
  std::string name = NormalizeDeviceName(chip.chip_name());
  out.push_back(name);
  // Without the vendor word: "nvidia h100 pcie" also as "h100 pcie".
  const std::string vendor = chip.vendor() + " ";
  if (name.rfind(vendor, 0) == 0) out.push_back(name.substr(vendor.size()));
  return out;
}

int LogicalDevices(const Chip& chip) {
  auto it = chip.metadata().find("logical_devices");
  int n = 1;
  if (it != chip.metadata().end()) n = std::max(1, std::atoi(it->second.c_str()));
  return n;
}

bool IsDetected(const Chip& chip) {
  auto it = chip.metadata().find("detected");
  return it != chip.metadata().end() && it->second == kDetectedUnknownDevice;
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string GuessVendor(const std::string& normalized, const std::string& vendor_field,
                        const std::string& backend) {
  const std::string v = absl::AsciiStrToLower(vendor_field);
  auto has = [&](const char* w) { return ContainsWord(normalized, w); };
  if (v == "authenticamd" || has("amd") || has("radeon") || has("instinct")) return "amd";
  if (v == "genuineintel" || has("intel")) return "intel";
  if (has("nvidia") || has("tesla") || has("geforce") || has("quadro")) return "nvidia";
  if (v == "arm:0x61" || has("apple")) return "apple";
  if (has("ascend")) return "huawei";
  if (backend == "cuda") return "nvidia";
  if (backend == "hip") return "amd";
  if (backend == "level_zero") return "intel";
  if (backend == "mps") return "apple";
  if (backend == "ascend") return "huawei";
  if (backend == "maca") return "metax";
  if (backend == "tpu") return "google";
  if (backend == "nki") return "aws";
  return "other";
}

std::string CategoryOf(const std::string& backend) {
  if (backend == "cpu") return "cpu";
  if (backend == "ascend") return "npu";
  if (backend == "tpu") return "tpu";
  if (backend == "fpga") return "fpga";
  if (backend == "nki") return "dsa";
  return "gpu";
}

}  // namespace

const std::vector<std::string>& ChipVendors() {
  static const auto* v = new std::vector<std::string>{
      "nvidia", "amd", "intel", "huawei", "metax", "apple", "google", "xilinx", "aws", "other"};
  return *v;
}
const std::vector<std::string>& ChipCategories() {
  static const auto* v = new std::vector<std::string>{"gpu", "npu", "tpu", "fpga", "dsa", "cpu"};
  return *v;
}
const std::vector<std::string>& ChipBackends() {
  static const auto* v =
      new std::vector<std::string>{"cuda", "hip", "level_zero", "cpu", "mps",    "ascend",
                                   "maca", "tpu", "fpga",       "nki", "triton", "mlir"};
  return *v;
}

namespace {

absl::Status ValidateChipAs(const Chip& chip, const std::string& where) {
  const std::string label = ChipLabel(chip.chip_id(), where);
  if (chip.chip_id().empty()) return FieldError(label, "chip_id", "missing");
  if (chip.chip_id().size() > 64) return FieldError(label, "chip_id", "longer than 64 characters");
  for (char c : chip.chip_id()) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) {
      return FieldError(label, "chip_id",
                        "may hold only lowercase letters, digits and underscores");
    }
  }
  if (chip.chip_name().empty()) return FieldError(label, "chip_name", "missing");
  struct Enum {
    const char* field;
    const std::string& value;
    const std::vector<std::string>& allowed;
  };
  for (const Enum& e : {Enum{"vendor", chip.vendor(), ChipVendors()},
                        Enum{"category", chip.category(), ChipCategories()},
                        Enum{"backend", chip.backend(), ChipBackends()}}) {
    if (e.value.empty()) {
      return FieldError(label, e.field,
                        absl::StrCat("missing; expected one of: ", absl::StrJoin(e.allowed, " ")));
    }
    if (!Contains(e.allowed, e.value)) {
      return FieldError(label, e.field,
                        absl::StrCat("unknown value '", e.value,
                                     "'; expected one of: ", absl::StrJoin(e.allowed, " ")));
    }
  }
  const auto& mem = chip.memory();
  if (!std::isfinite(mem.capacity_gb()) || mem.capacity_gb() <= 0) {
    return FieldError(label, "memory.capacity_gb",
                      absl::StrCat("must be > 0, got ", mem.capacity_gb()));
  }
  const bool unmeasured_ok = IsDetected(chip) && mem.bandwidth_gbps() == 0;
  if (!std::isfinite(mem.bandwidth_gbps()) || (mem.bandwidth_gbps() <= 0 && !unmeasured_ok)) {
    return FieldError(label, "memory.bandwidth_gbps",
                      absl::StrCat("must be > 0, got ", mem.bandwidth_gbps()));
  }
  if (auto s = CheckNonNegative(mem, label, "memory"); !s.ok()) return s;
  if (auto s = CheckNonNegative(chip.compute(), label, "compute"); !s.ok()) return s;
  if (auto s = CheckNonNegative(chip.features(), label, "features"); !s.ok()) return s;
  if (auto s = CheckNonNegative(chip.search_config(), label, "search_config"); !s.ok()) return s;
  const auto& sc = chip.search_config();
  struct List {
    const char* field;
    const google::protobuf::RepeatedField<int32_t>& values;
  };
  for (const List& l :
       {List{"tile_sizes", sc.tile_sizes()}, List{"block_threads", sc.block_threads()},
        List{"grid_blocks", sc.grid_blocks()}}) {
    for (int i = 0; i < l.values.size(); ++i) {
      if (l.values[i] <= 0) {
        return FieldError(label, absl::StrCat("search_config.", l.field, "[", i, "]"),
                          absl::StrCat("must be > 0, got ", l.values[i]));
      }
    }
  }
  for (const auto& [k, v] : chip.metadata()) {
    if (k.empty()) return FieldError(label, "metadata", "empty key");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateChip(const Chip& chip) { return ValidateChipAs(chip, "chip"); }

absl::StatusOr<Chip> ChipFromJson(const json& j, const std::string& where) {
  std::string label = where;
  if (j.is_object()) {
    auto it = j.find("chip_id");
    if (it != j.end() && it->is_string() && !it->get<std::string>().empty()) {
      label = ChipLabel(it->get<std::string>(), where);
    }
  }
  Chip chip;
  if (auto s = FillMessage(j, &chip, label, ""); !s.ok()) return s;
  if (auto s = ValidateChipAs(chip, where); !s.ok()) return s;
  return chip;
}

absl::StatusOr<Chip> ParseChipJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("chip: malformed JSON");
  return ChipFromJson(j);
}

absl::StatusOr<std::vector<Chip>> ParseChipListJson(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("chips: malformed JSON");
  if (j.is_object() && j.contains("chips")) j = j["chips"];
  if (!j.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chips: expected a JSON list of chip objects, got ", j.type_name()));
  }
  std::vector<Chip> chips;
  std::set<std::string> ids;
  for (size_t i = 0; i < j.size(); ++i) {
    auto chip = ChipFromJson(j[i], absl::StrCat("chip #", i + 1));
    if (!chip.ok()) return chip.status();
    if (!ids.insert(chip->chip_id()).second) {
      return FieldError(ChipLabel(chip->chip_id(), ""), "chip_id",
                        absl::StrCat("appears more than once (again as chip #", i + 1, ")"));
    }
    chips.push_back(std::move(*chip));
  }
  return chips;
}

json ChipToJson(const Chip& chip, bool with_timestamps) {
  Chip copy = chip;
  if (!with_timestamps) {
    copy.clear_created_unix();
    copy.clear_updated_unix();
  }
  json j = MessageToJson(copy);
  for (const char* k :
       {"chip_id", "chip_name", "vendor", "category", "arch_name", "arch_code", "backend"}) {
    if (!j.contains(k)) j[k] = "";
  }
  return j;
}

std::string ChipListToJsonText(const std::vector<Chip>& chips) {
  json list = json::array();
  for (const Chip& c : chips) list.push_back(ChipToJson(c));
  return list.dump(2) + "\n";
}

bool SameChip(const Chip& a, const Chip& b) {
  Chip x = a, y = b;
  x.clear_created_unix();
  x.clear_updated_unix();
  y.clear_created_unix();
  y.clear_updated_unix();
  return google::protobuf::util::MessageDifferencer::Equivalent(x, y);
}

std::string NormalizeDeviceName(std::string_view name) {
  std::string lower = absl::AsciiStrToLower(std::string(name));
  for (const char* mark : {"(r)", "(tm)", "(c)"}) {
    for (size_t pos = lower.find(mark); pos != std::string::npos; pos = lower.find(mark)) {
      lower.erase(pos, std::string(mark).size());
    }
  }
  std::string out;
  for (char c : lower) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (alnum) {
      out.push_back(c);
    } else if (!out.empty() && out.back() != ' ') {
      out.push_back(' ');
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::optional<ChipMatch> MatchDevice(const json& device, const std::string& backend,
                                     const std::vector<Chip>& registry) {
  const std::string name = NormalizeDeviceName(DeviceName(device));
  if (name.empty()) return std::nullopt;
  const int cus = DeviceComputeUnits(device);
  const double mem_gib = DeviceMemoryBytes(device) / kGiB;
  const std::string arch = DeviceArchCode(device);
  bool backend_known = false;
  for (const Chip& c : registry) backend_known |= c.backend() == backend;

  struct Candidate {
    const Chip* chip;
    size_t pattern_length;
    double memory_error;  // relative; 0 when not compared
    std::string pattern;
  };
  std::vector<Candidate> candidates;
  for (const Chip& chip : registry) {
    if (backend_known && chip.backend() != backend) continue;
    size_t best = 0;
    std::string best_pattern;
    for (const std::string& p : MatchPatterns(chip)) {
      if (p.size() > best && ContainsWord(name, p)) {
        best = p.size();
        best_pattern = p;
      }
    }
    if (best == 0) continue;
    const bool detected = IsDetected(chip);
    const bool is_cpu = chip.category() == "cpu";
    // Measured properties that contradict the entry rule it out.
    if (!arch.empty() && !chip.arch_code().empty() && !is_cpu &&
        absl::AsciiStrToLower(chip.arch_code()) != absl::AsciiStrToLower(arch)) {
      continue;
    }
    const int chip_cus = chip.compute().num_compute_units() / LogicalDevices(chip);
    // A CPU's visible cores depend on the machine (VMs, sockets); its model
    // name is exact. Devices report every compute unit.
    if (cus > 0 && chip_cus > 0 && cus != chip_cus && (!is_cpu || detected)) continue;
    double memory_error = 0;
    if ((!is_cpu || detected) && mem_gib > 0) {
      const double chip_gib = chip.memory().capacity_gb() / LogicalDevices(chip);
      memory_error = std::fabs(mem_gib - chip_gib) / chip_gib;
      if (memory_error > (detected ? 0.02 : 0.15)) continue;
    }
    candidates.push_back({&chip, best, memory_error, best_pattern});
  }
  if (candidates.empty()) return std::nullopt;
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) {
                     if (a.pattern_length != b.pattern_length) {
                       return a.pattern_length > b.pattern_length;
                     }
                     return a.memory_error < b.memory_error;
                   });
  const Candidate& winner = candidates.front();
  std::string reason = absl::StrCat("device name '", name, "' matches '", winner.pattern, "'");
  if (cus > 0) absl::StrAppend(&reason, ", ", cus, " compute units");
  if (mem_gib > 0 && winner.chip->category() != "cpu") {
    absl::StrAppend(&reason, absl::StrFormat(", %.1f GiB memory", mem_gib));
  }
  if (!arch.empty()) absl::StrAppend(&reason, ", arch ", arch);
  return ChipMatch{winner.chip->chip_id(), reason};
}

absl::StatusOr<Chip> ChipFromDevice(const json& device, const std::string& backend) {
  const std::string raw_name = DeviceName(device);
  const std::string name = NormalizeDeviceName(raw_name);
  if (name.empty()) {
    return absl::InvalidArgumentError(
        "device: the description names no device (no name/model field)");
  }
  if (!Contains(ChipBackends(), backend)) {
    return absl::InvalidArgumentError(absl::StrCat("device: unknown backend '", backend, "'"));
  }
  Chip chip;
  const int cus = DeviceComputeUnits(device);
  const double mem_bytes = DeviceMemoryBytes(device);
  std::string slug;
  for (char c : name.substr(0, 32)) slug.push_back(c == ' ' ? '_' : c);
  while (!slug.empty() && slug.back() == '_') slug.pop_back();
  const std::string identity =
      absl::StrCat(backend, "|", name, "|", cus, "|", std::llround(mem_bytes / kGiB));
  chip.set_chip_id(absl::StrCat("detected_", backend, "_", slug, "_",
                                absl::StrFormat("%06x", Fnv1a(identity) & 0xffffff)));
  chip.set_chip_name(raw_name);
  chip.set_vendor(GuessVendor(name, JsonString(device, {"vendor"}), backend));
  chip.set_category(CategoryOf(backend));
  chip.set_backend(backend);
  chip.set_arch_code(DeviceArchCode(device));
  chip.set_arch_name(JsonString(device, {"arch_name"}));

  auto* mem = chip.mutable_memory();
  // Stored in GiB so that the device matches its own entry exactly.
  mem->set_capacity_gb(std::round(mem_bytes / kGiB * 100) / 100);
  double bandwidth = JsonNumber(device, {"memory_bandwidth_gbps"});
  const double mem_clock_khz = JsonNumber(device, {"memory_clock_khz"});
  const double bus_bits =
      JsonNumber(device, {"memory_bus_width_bits", "bus_width_bits", "memory_bus_width"});
  if (bandwidth <= 0 && mem_clock_khz > 0 && bus_bits > 0) {
    bandwidth = 2.0 * mem_clock_khz * 1e3 * bus_bits / 8 / 1e9;  // double data rate
  }
  mem->set_bandwidth_gbps(std::round(bandwidth * 10) / 10);
  mem->set_bus_width_bits(static_cast<int32_t>(bus_bits));
  if (auto it = device.find("ecc"); it != device.end() && it->is_boolean()) {
    mem->set_ecc(it->get<bool>());
  }

  auto* compute = chip.mutable_compute();
  compute->set_num_compute_units(cus);
  auto* features = chip.mutable_features();
  if (backend == "cpu") {
    compute->set_warp_size(1);
    const json caches = device.value("cache_bytes", json::object());
    const double l1 = JsonNumber(caches, {"l1d"}), l2 = JsonNumber(caches, {"l2"}),
                 l3 = JsonNumber(caches, {"l3"});
    compute->set_l1_cache_kb(l1 / 1024);
    // cpu0's L2 is private to its core; the L3 figure is what cpu0 sees.
    compute->set_l2_cache_mb(l2 * std::max(cus, 1) / kMiB);
    compute->set_l3_cache_mb(l3 / kMiB);
    compute->set_clock_mhz(static_cast<int32_t>(JsonNumber(device, {"clock_mhz", "mhz"})));
    const bool avx512 = HasSimd(device, "avx512f");
    const bool avx2 = HasSimd(device, "avx2");
    const bool neon = HasSimd(device, "neon") || HasSimd(device, "asimd");
    features->set_avx2(avx2);
    features->set_avx512(avx512);
    features->set_amx(HasSimd(device, "amx_tile"));
    features->set_neon(neon);
    features->set_sve(HasSimd(device, "sve"));
    features->set_tensor_cores(features->amx());
    features->set_bf16(HasSimd(device, "avx512_bf16") || HasSimd(device, "amx_bf16") ||
                       HasSimd(device, "bf16"));
    features->set_fp16(HasSimd(device, "avx512_fp16") || HasSimd(device, "asimdhp"));
    features->set_int8(HasSimd(device, "avx512_vnni") || HasSimd(device, "amx_int8"));
    compute->set_simd_width_bits(avx512                                ? 512
                                 : (avx2 || HasSimd(device, "avx"))    ? 256
                                 : (neon || HasSimd(device, "sse4_2")) ? 128
                                                                       : 0);
  } else {
    compute->set_warp_size(
        static_cast<int32_t>(JsonNumber(device, {"warp_size", "wavefront_size"})));
    double clock = JsonNumber(device, {"clock_mhz"});
    if (clock <= 0) clock = JsonNumber(device, {"clock_khz", "clock_rate_khz"}) / 1000;
    compute->set_clock_mhz(static_cast<int32_t>(clock));
    compute->set_max_threads_per_block(
        static_cast<int32_t>(JsonNumber(device, {"max_threads_per_block"})));
    compute->set_max_threads_per_cu(static_cast<int32_t>(JsonNumber(
        device, {"max_threads_per_sm", "max_threads_per_multiprocessor", "max_threads_per_cu"})));
    compute->set_max_blocks_per_cu(static_cast<int32_t>(JsonNumber(
        device, {"max_blocks_per_sm", "max_blocks_per_multiprocessor", "max_blocks_per_cu"})));
    double smem_block =
        JsonNumber(device, {"shared_memory_per_block_optin_bytes", "shared_mem_per_block_optin",
                            "shared_memory_per_block_bytes", "shared_mem_per_block", "lds_bytes"});
    compute->set_shared_mem_per_block_kb(smem_block / 1024);
    compute->set_shared_mem_per_cu_kb(
        JsonNumber(device, {"shared_memory_per_sm_bytes", "shared_mem_per_sm",
                            "shared_memory_per_multiprocessor_bytes"}) /
        1024);
    compute->set_l2_cache_mb(JsonNumber(device, {"l2_bytes", "l2_cache_bytes"}) / kMiB);
    compute->set_registers_per_block(
        static_cast<int32_t>(JsonNumber(device, {"registers_per_block"})));
  }
  (*chip.mutable_metadata())["detected"] = kDetectedUnknownDevice;
  (*chip.mutable_metadata())["source"] =
      absl::StrCat("measured by the ", backend, " backend's probe (no registry entry matched)");
  (*chip.mutable_metadata())["match"] = name;
  if (auto s = ValidateChip(chip); !s.ok()) return s;
  return chip;
}

}  // namespace yirage::core
