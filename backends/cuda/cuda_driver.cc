#include "backends/cuda/cuda_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#ifndef YIRAGE_CUDA_HOME
#define YIRAGE_CUDA_HOME "/usr/local/cuda"
#endif

#define YR_STR2(x) #x
#define YR_STR(x) YR_STR2(x)

namespace yirage::backends::cuda {
namespace {

// dlopen of the first name that loads; the error lists every name tried.
absl::StatusOr<void*> OpenFirst(const std::vector<std::string>& names) {
  std::string tried;
  for (const std::string& name : names) {
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) return h;
    const char* err = dlerror();
    absl::StrAppend(&tried, "\n  ", name, ": ", err != nullptr ? err : "not found");
  }
  return absl::NotFoundError(absl::StrCat("cannot dlopen any of:", tried));
}

template <typename Fn>
bool Bind(void* handle, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*fn == nullptr) absl::StrAppend(missing, missing->empty() ? "" : ", ", name);
  return *fn != nullptr;
}

absl::StatusOr<const CudaDriver*> LoadDriverOnce() {
  absl::StatusOr<void*> h = OpenFirst({"libcuda.so.1", "libcuda.so"});
  if (!h.ok()) return absl::NotFoundError(absl::StrCat("CUDA driver: ", h.status().message()));
  auto* cu = new CudaDriver;
  std::string missing;
#define YR_BIND(name) Bind(*h, YR_STR(name), &cu->name, &missing);
  YR_CUDA_DRIVER_FUNCTIONS(YR_BIND)
#undef YR_BIND
  std::string optional;
  Bind(*h, "cuTensorMapEncodeTiled", &cu->cuTensorMapEncodeTiled, &optional);
  if (!missing.empty()) {
    delete cu;
    return absl::NotFoundError(absl::StrCat("CUDA driver lacks: ", missing));
  }
  return cu;
}

absl::StatusOr<const Nvrtc*> LoadNvrtcOnce() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("YIRAGE_NVRTC_LIBRARY"); env != nullptr && env[0] != '\0') {
    names.push_back(env);
  }
  const std::string lib = CudaHome() + "/lib64/";
  for (int major = 16; major >= 11; --major) {
    names.push_back(absl::StrCat(lib, "libnvrtc.so.", major));
  }
  names.push_back(lib + "libnvrtc.so");
  for (int major = 16; major >= 11; --major) names.push_back(absl::StrCat("libnvrtc.so.", major));
  names.push_back("libnvrtc.so");
  absl::StatusOr<void*> h = OpenFirst(names);
  if (!h.ok()) return absl::NotFoundError(absl::StrCat("NVRTC: ", h.status().message()));
  auto* nv = new Nvrtc;
  std::string missing;
#define YR_BIND(name) Bind(*h, YR_STR(name), &nv->name, &missing);
  YR_NVRTC_FUNCTIONS(YR_BIND)
#undef YR_BIND
  if (!missing.empty()) {
    delete nv;
    return absl::NotFoundError(absl::StrCat("NVRTC lacks: ", missing));
  }
  return nv;
}

}  // namespace

absl::StatusOr<const CudaDriver*> LoadDriver() {
  static const absl::StatusOr<const CudaDriver*>* loaded =
      new absl::StatusOr<const CudaDriver*>(LoadDriverOnce());
  return *loaded;
}

absl::StatusOr<const Nvrtc*> LoadNvrtc() {
  static const absl::StatusOr<const Nvrtc*>* loaded =
      new absl::StatusOr<const Nvrtc*>(LoadNvrtcOnce());
  return *loaded;
}

std::string CudaHome() {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char* env = std::getenv(var);
    if (env != nullptr && env[0] != '\0') return env;
  }
  return YIRAGE_CUDA_HOME;
}

std::string DriverErrorText(const CudaDriver& cu, CUresult rc) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cu.cuGetErrorName(rc, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR";
  if (cu.cuGetErrorString(rc, &text) != CUDA_SUCCESS || text == nullptr) text = "unknown error";
  return absl::StrCat(name, " (", static_cast<int>(rc), "): ", text);
}

absl::Status CheckCu(const CudaDriver& cu, CUresult rc, const std::string& what) {
  if (rc == CUDA_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", DriverErrorText(cu, rc)));
}

bool IsStickyError(CUresult rc) {
  switch (rc) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return true;
    default:
      return false;
  }
}

}  // namespace yirage::backends::cuda
