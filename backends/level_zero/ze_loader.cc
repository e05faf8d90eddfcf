#include "backends/level_zero/ze_loader.h"

#include <dlfcn.h>

#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/dl_library.h"

namespace yirage::backends::level_zero {
using ::yirage::backends::BindSymbol;

absl::StatusOr<const ZeApi*> OpenZeLoader(const std::vector<std::string>& names) {
  std::string opened, tried;
  void* handle = ::yirage::backends::DlopenFirst(names, &opened, &tried);
  if (handle == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("libze_loader.so.1 not found (dlopen: ", tried,
                     "): the Level Zero loader is not installed on this machine"));
  }
  auto* api = new ZeApi;
  api->library = opened;
  std::string missing;
#define YR_BIND(name) BindSymbol(handle, #name, &api->name, &missing)
  YR_BIND(zeInit);
  YR_BIND(zeDriverGet);
  YR_BIND(zeDeviceGet);
  YR_BIND(zeDeviceGetProperties);
  YR_BIND(zeDeviceGetComputeProperties);
  YR_BIND(zeDeviceGetMemoryProperties);
#undef YR_BIND
  BindSymbol(handle, "zeDriverGetProperties", &api->zeDriverGetProperties, nullptr);
  BindSymbol(handle, "zeDeviceGetCacheProperties", &api->zeDeviceGetCacheProperties, nullptr);
  if (!missing.empty()) {
    delete api;
    return absl::NotFoundError(absl::StrCat(opened, " lacks: ", missing));
  }
  return api;
}

absl::StatusOr<const ZeApi*> LoadZeLoader() {
  static const absl::StatusOr<const ZeApi*>* loaded = new absl::StatusOr<const ZeApi*>(OpenZeLoader(
      std::vector<std::string>(std::begin(kZeLibraryNames), std::end(kZeLibraryNames))));
  return *loaded;
}

std::string ZeResultName(ze_result_t rc) {
  switch (rc) {
#define YR_CASE(name) \
  case name:          \
    return #name;
    YR_CASE(ZE_RESULT_SUCCESS)
    YR_CASE(ZE_RESULT_NOT_READY)
    YR_CASE(ZE_RESULT_ERROR_DEVICE_LOST)
    YR_CASE(ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY)
    YR_CASE(ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)
    YR_CASE(ZE_RESULT_ERROR_MODULE_BUILD_FAILURE)
    YR_CASE(ZE_RESULT_ERROR_INSUFFICIENT_PERMISSIONS)
    YR_CASE(ZE_RESULT_ERROR_NOT_AVAILABLE)
    YR_CASE(ZE_RESULT_ERROR_DEPENDENCY_UNAVAILABLE)
    YR_CASE(ZE_RESULT_ERROR_UNINITIALIZED)
    YR_CASE(ZE_RESULT_ERROR_UNSUPPORTED_VERSION)
    YR_CASE(ZE_RESULT_ERROR_UNSUPPORTED_FEATURE)
    YR_CASE(ZE_RESULT_ERROR_INVALID_ARGUMENT)
    YR_CASE(ZE_RESULT_ERROR_INVALID_NULL_HANDLE)
    YR_CASE(ZE_RESULT_ERROR_HANDLE_OBJECT_IN_USE)
    YR_CASE(ZE_RESULT_ERROR_INVALID_NULL_POINTER)
    YR_CASE(ZE_RESULT_ERROR_INVALID_SIZE)
    YR_CASE(ZE_RESULT_ERROR_UNSUPPORTED_SIZE)
    YR_CASE(ZE_RESULT_ERROR_INVALID_ENUMERATION)
    YR_CASE(ZE_RESULT_ERROR_UNKNOWN)
#undef YR_CASE
    default:
      return absl::StrFormat("ze_result_t 0x%08x", static_cast<uint32_t>(rc));
  }
}

}  // namespace yirage::backends::level_zero
