#include "backends/hip/hip_runtime.h"

#include <dlfcn.h>

#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/dl_library.h"

namespace yirage::backends::hip {
using ::yirage::backends::BindSymbol;

absl::StatusOr<const HipApi*> OpenHipRuntime(const std::vector<std::string>& names) {
  std::string opened, tried;
  void* handle = ::yirage::backends::DlopenFirst(names, &opened, &tried);
  if (handle == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("libamdhip64.so not found (dlopen: ", tried,
                     "): the HIP runtime (ROCm) is not installed on this machine"));
  }
  auto* api = new HipApi;
  api->library = opened;
  std::string missing;
#define YR_BIND(name) BindSymbol(handle, #name, &api->name, &missing)
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
  BindSymbol(handle, "hipDriverGetVersion", &api->hipDriverGetVersion, nullptr);
  // The HIP 5.x layout only (see the header comment): never R0600.
  BindSymbol(handle, "hipGetDevicePropertiesR0000", &api->get_device_properties, nullptr);
  if (api->get_device_properties == nullptr) {
    BindSymbol(handle, "hipGetDeviceProperties", &api->get_device_properties, nullptr);
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
