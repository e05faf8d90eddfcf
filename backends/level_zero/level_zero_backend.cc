// The Level Zero backend's exported C ABI table (backends/backend_api.h). For now it
// only detects and describes the Intel GPU (probe); compile, run and time fail
// with YIRAGE_ERROR saying code generation for Level Zero is not implemented yet.
// libze_loader is dlopen'd, so this library loads on machines without it.
// No exception crosses this boundary.
#include <cstdlib>
#include <string>
#include <utility>

#include "backends/backend_abi_util.h"
#include "backends/backend_api.h"
#include "backends/level_zero/ze_loader.h"
#include "backends/level_zero/ze_probe.h"

// Never created: compile always fails.
struct YirageModule {};

namespace yirage::backends::level_zero {
namespace {

using ::yirage::backends::CopyString;
using ::yirage::backends::SetError;

int Probe(char** json_out) {
  char* unused = nullptr;
  const int rc = ::yirage::backends::Guard("level_zero", &unused, [&] {
    bool usable = false;
    const std::string json = ProbeJson(LoadZeLoader(), &usable);
    if (json_out != nullptr) *json_out = CopyString(json);
    return usable ? YIRAGE_OK : YIRAGE_NO_DEVICE;
  });
  std::free(unused);
  return rc;
}

int Compile(const void*, size_t, YirageModule** module, void** response, size_t* response_len,
            char** error) {
  if (module != nullptr) *module = nullptr;
  if (response != nullptr) *response = nullptr;
  if (response_len != nullptr) *response_len = 0;
  SetError(error, std::string("compile: ") + kNotImplemented);
  return YIRAGE_ERROR;
}

int Run(YirageModule*, int32_t, const void* const*, void* const*, char** error) {
  SetError(error, std::string("run: ") + kNotImplemented);
  return YIRAGE_ERROR;
}

int Time(YirageModule*, int32_t, const void* const*, void* const*, const YirageTimingOptions*,
         YirageTiming*, char** error) {
  SetError(error, std::string("time: ") + kNotImplemented);
  return YIRAGE_ERROR;
}

void Release(YirageModule* module) { delete module; }

void FreeBuffer(void* buffer) { std::free(buffer); }

const YirageBackendV1 kBackend = {
    YIRAGE_BACKEND_ABI_VERSION, "level_zero", &Probe, &Compile, &Run, &Time, &Release, &FreeBuffer,
};

}  // namespace
}  // namespace yirage::backends::level_zero

extern "C" __attribute__((visibility("default"))) const YirageBackendV1* YirageBackendGetV1() {
  return &yirage::backends::level_zero::kBackend;
}
