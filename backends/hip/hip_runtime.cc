#include "backends/hip/hip_runtime.h"

#include <dlfcn.h>

#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace yirage::backends::hip {
namespace {

// Binds `name` in `handle` to *fn; appends the name to *missing when absent.
template <typename Fn>
void Bind(void* handle, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*fn == nullptr && missing != nullptr) {
    absl::StrAppend(missing, missing->empty() ? "" : ", ", name);
  }
}

}  // namespace

absl::StatusOr<const HipApi*> OpenHipRuntime(const std::vector<std::string>& names) {
  void* handle = nullptr;
  std::string opened;
  std::string tried;
  for (const std::string& name : names) {
    handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      opened = name;
      break;
    }
    const char* err = dlerror();
    absl::StrAppend(&tried, tried.empty() ? "" : "; ", err != nullptr ? std::string(err) : name);
  }
  if (handle == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("libamdhip64.so not found (dlopen: ", tried,
                     "): the HIP runtime (ROCm) is not installed on this machine"));
  }
  auto* api = new HipApi;
  api->library = opened;
  std::string missing;
#define YR_BIND(name) Bind(handle, #name, &api->name, &missing)
  YR_BIND(hipInit);
  YR_BIND(hipGetDeviceCount);
  YR_BIND(hipDeviceGet);
  YR_BIND(hipDeviceGetName);
  YR_BIND(hipDeviceGetAttribute);
  YR_BIND(hipDeviceTotalMem);
  YR_BIND(hipRuntimeGetVersion);
  YR_BIND(hipGetErrorName);
  YR_BIND(hipGetErrorString);
#undef YR_BIND
  Bind(handle, "hipDriverGetVersion", &api->hipDriverGetVersion, nullptr);
  // The HIP 5.x layout only (see the header comment): never R0600.
  Bind(handle, "hipGetDevicePropertiesR0000", &api->get_device_properties, nullptr);
  if (api->get_device_properties == nullptr) {
    Bind(handle, "hipGetDeviceProperties", &api->get_device_properties, nullptr);
  }
  if (!missing.empty()) {
    delete api;
    return absl::NotFoundError(absl::StrCat(opened, " lacks: ", missing));
  }
  return api;
}

absl::StatusOr<const HipApi*> LoadHipRuntime() {
  static const absl::StatusOr<const HipApi*>* loaded =
      new absl::StatusOr<const HipApi*>(OpenHipRuntime(
          std::vector<std::string>(std::begin(kHipLibraryNames), std::end(kHipLibraryNames))));
  return *loaded;
}

}  // namespace yirage::backends::hip
