#include "backends/hip/hip_probe.h"

#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace yirage::backends::hip {
namespace {

// Reads gcnArchName through the HIP 5.x-layout properties call (see
// hip_runtime.h). The struct sits at the start of a larger zeroed buffer, so
// a runtime that wrote a bigger layout could not overrun it; a value that
// does not look like "gfx..." is dropped. "" when unavailable.
std::string GcnArchName(const HipApi& api, int device) {
  if (api.get_device_properties == nullptr) return "";
  constexpr size_t kSlack = 8192;
  const size_t size = sizeof(hipDeviceProp_t) + kSlack;
  auto buffer = std::make_unique<unsigned char[]>(size);  // zeroed
  auto* props = reinterpret_cast<hipDeviceProp_t*>(buffer.get());
  if (api.get_device_properties(props, device) != hipSuccess) return "";
  const char* arch = props->gcnArchName;
  const size_t len = strnlen(arch, sizeof(props->gcnArchName));
  if (len == sizeof(props->gcnArchName) || std::strncmp(arch, "gfx", 3) != 0) return "";
  return std::string(arch, len);
}

}  // namespace

std::string HipErrorText(const HipApi& api, hipError_t rc) {
  const char* name = api.hipGetErrorName != nullptr ? api.hipGetErrorName(rc) : nullptr;
  const char* text = api.hipGetErrorString != nullptr ? api.hipGetErrorString(rc) : nullptr;
  std::string out =
      absl::StrCat(name != nullptr ? name : "hipError", " (", static_cast<int>(rc), ")");
  if (text != nullptr && text[0] != '\0' && (name == nullptr || std::strcmp(name, text) != 0)) {
    absl::StrAppend(&out, ": ", text);
  }
  return out;
}

std::string ProbeJson(const absl::StatusOr<const HipApi*>& loaded, bool* usable) {
  nlohmann::json j;
  j["backend"] = "hip";
  *usable = false;
  if (!loaded.ok()) {
    j["reason"] = std::string(loaded.status().message());
    return j.dump();
  }
  const HipApi& api = **loaded;
  j["library"] = api.library;
  int runtime_version = 0;
  if (api.hipRuntimeGetVersion(&runtime_version) == hipSuccess) {
    j["runtime_version"] = runtime_version;  // major * 10000000 + minor * 100000 + patch
  }
  int driver_version = 0;
  if (api.hipDriverGetVersion != nullptr &&
      api.hipDriverGetVersion(&driver_version) == hipSuccess) {
    j["driver_version"] = driver_version;
  }
  if (hipError_t rc = api.hipInit(0); rc != hipSuccess) {
    std::string reason = absl::StrCat("hipInit: ", HipErrorText(api, rc));
    if (rc == hipErrorNoDevice || rc == hipErrorInvalidDevice) {
      absl::StrAppend(&reason,
                      " (no usable ROCm device: is the amdgpu driver loaded and /dev/kfd "
                      "accessible?)");
    }
    j["reason"] = reason;
    return j.dump();
  }
  int count = 0;
  if (hipError_t rc = api.hipGetDeviceCount(&count); rc != hipSuccess) {
    j["reason"] = absl::StrCat("hipGetDeviceCount: ", HipErrorText(api, rc));
    return j.dump();
  }
  if (count < 1) {
    j["reason"] = "hipGetDeviceCount: 0 devices (no ROCm-capable device is detected)";
    return j.dump();
  }
  j["device_count"] = count;
  hipDevice_t device = 0;
  if (hipError_t rc = api.hipDeviceGet(&device, 0); rc != hipSuccess) {
    j["reason"] = absl::StrCat("hipDeviceGet(0): ", HipErrorText(api, rc));
    return j.dump();
  }
  char name[256] = {0};
  if (hipError_t rc = api.hipDeviceGetName(name, sizeof(name) - 1, device); rc != hipSuccess) {
    j["reason"] = absl::StrCat("hipDeviceGetName: ", HipErrorText(api, rc));
    return j.dump();
  }
  j["name"] = std::string(name);
  const std::string arch = GcnArchName(api, device);
  if (!arch.empty()) j["gcn_arch_name"] = arch;
  auto attr = [&](hipDeviceAttribute_t a) -> int64_t {
    int v = 0;
    return api.hipDeviceGetAttribute(&v, a, device) == hipSuccess ? v : 0;
  };
  j["compute_units"] = attr(hipDeviceAttributeMultiprocessorCount);
  size_t memory = 0;
  if (api.hipDeviceTotalMem(&memory, device) != hipSuccess) memory = 0;
  j["memory_bytes"] = static_cast<int64_t>(memory);
  j["warp_size"] = attr(hipDeviceAttributeWarpSize);
  j["clock_khz"] = attr(hipDeviceAttributeClockRate);
  j["memory_clock_khz"] = attr(hipDeviceAttributeMemoryClockRate);
  j["memory_bus_width_bits"] = attr(hipDeviceAttributeMemoryBusWidth);
  j["l2_bytes"] = attr(hipDeviceAttributeL2CacheSize);
  j["shared_mem_per_block"] = attr(hipDeviceAttributeMaxSharedMemoryPerBlock);
  j["shared_mem_per_sm"] = attr(hipDeviceAttributeMaxSharedMemoryPerMultiprocessor);
  j["max_threads_per_block"] = attr(hipDeviceAttributeMaxThreadsPerBlock);
  j["max_threads_per_cu"] = attr(hipDeviceAttributeMaxThreadsPerMultiProcessor);
  j["registers_per_block"] = attr(hipDeviceAttributeMaxRegistersPerBlock);
  *usable = true;
  return j.dump();
}

}  // namespace yirage::backends::hip
