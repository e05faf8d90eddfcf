#include "backends/level_zero/ze_loader.h"

#include <dlfcn.h>

#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace yirage::backends::level_zero {
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

absl::StatusOr<const ZeApi*> OpenZeLoader(const std::vector<std::string>& names) {
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
        absl::StrCat("libze_loader.so.1 not found (dlopen: ", tried,
                     "): the Level Zero loader is not installed on this machine"));
  }
  auto* api = new ZeApi;
  api->library = opened;
  std::string missing;
#define YR_BIND(name) Bind(handle, #name, &api->name, &missing)
  YR_BIND(zeInit);
  YR_BIND(zeDriverGet);
  YR_BIND(zeDeviceGet);
  YR_BIND(zeDeviceGetProperties);
  YR_BIND(zeDeviceGetComputeProperties);
  YR_BIND(zeDeviceGetMemoryProperties);
#undef YR_BIND
  Bind(handle, "zeDriverGetProperties", &api->zeDriverGetProperties, nullptr);
  Bind(handle, "zeDeviceGetCacheProperties", &api->zeDeviceGetCacheProperties, nullptr);
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
