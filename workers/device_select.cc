#include "workers/device_select.h"

#include <stdlib.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace yirage::worker {

namespace {
std::optional<std::string> GetEnv(const std::string& name) {
  if (name.empty()) return std::nullopt;
  const char* v = getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}
}  // namespace

std::string VisibilityVariable(const std::string& backend) {
  if (backend == "cuda") return "CUDA_VISIBLE_DEVICES";
  if (backend == "hip") return "HIP_VISIBLE_DEVICES";
  if (backend == "level_zero") return "ZE_AFFINITY_MASK";
  return "";
}

absl::StatusOr<DeviceSelection> PlanDeviceSelection(
    const std::string& backend, int index, const std::optional<std::string>& current,
    const std::optional<std::string>& current_cuda_device_order) {
  if (index < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--device: expected 0 or more, got ", index));
  }
  DeviceSelection s;
  s.index = index;
  s.variable = VisibilityVariable(backend);
  if (s.variable.empty()) {
    if (index != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--device ", index, ": the ", backend, " backend has one device, 0"));
    }
    return s;
  }
  if (current.has_value()) {
    // Entries are indices, UUIDs (GPU-..., MIG-...) or, for Level Zero,
    // device.subdevice; the N-th is kept as it is written.
    std::vector<std::string> entries;
    for (absl::string_view e : absl::StrSplit(*current, ',')) {
      e = absl::StripAsciiWhitespace(e);
      if (!e.empty()) entries.emplace_back(e);
    }
    if (static_cast<size_t>(index) >= entries.size()) {
      return absl::NotFoundError(absl::StrCat("device ", index, " of ", s.variable, "='", *current,
                                              "': it lists ", entries.size(), " device",
                                              entries.size() == 1 ? "" : "s"));
    }
    s.value = entries[index];
  } else {
    s.value = std::to_string(index);
    if (backend == "cuda" && !current_cuda_device_order.has_value()) {
      s.cuda_device_order = "PCI_BUS_ID";
    }
  }
  return s;
}

absl::StatusOr<DeviceSelection> SelectDevice(const std::string& backend, int index) {
  const std::string variable = VisibilityVariable(backend);
  auto s = PlanDeviceSelection(backend, index, GetEnv(variable), GetEnv("CUDA_DEVICE_ORDER"));
  if (!s.ok()) return s.status();
  if (!s->variable.empty()) setenv(s->variable.c_str(), s->value.c_str(), 1);
  if (!s->cuda_device_order.empty()) setenv("CUDA_DEVICE_ORDER", s->cuda_device_order.c_str(), 1);
  return s;
}

}  // namespace yirage::worker
