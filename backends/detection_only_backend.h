// The C ABI table (backends/backend_api.h) of a backend that, for now, only
// detects its device: probe() describes it, describe() names no kernels,
// compile/run/time fail with
// YIRAGE_ERROR saying that code generation is not implemented for it. Shared
// by the HIP and Level Zero backends. No exception crosses the boundary.
#ifndef YIRAGE_BACKENDS_DETECTION_ONLY_BACKEND_H_
#define YIRAGE_BACKENDS_DETECTION_ONLY_BACKEND_H_

#include <cstdlib>
#include <string>

#include "backends/backend_abi_util.h"
#include "backends/backend_api.h"
#include "backends/backend_compile_util.h"

namespace yirage::backends {

// Traits: static constexpr char kName[] (the backend name);
// static const char* NotImplemented() (why compile/run/time fail);
// static std::string ProbeJson(bool* usable) (the device description, or
// why there is none, with *usable set).
template <typename Traits>
class DetectionOnlyBackend {
 public:
  static const YirageBackendV1* Table() {
    static const YirageBackendV1 table = {
        YIRAGE_BACKEND_ABI_VERSION,
        Traits::kName,
        &Probe,
        &Compile,
        &Run,
        &Time,
        &Release,
        &FreeBuffer,
        &Describe,
    };
    return &table;
  }

 private:
  static int Probe(char** json_out) {
    char* unused = nullptr;
    const int rc = Guard(Traits::kName, &unused, [&] {
      bool usable = false;
      const std::string json = Traits::ProbeJson(&usable);
      if (json_out != nullptr) *json_out = CopyString(json);
      return usable ? YIRAGE_OK : YIRAGE_NO_DEVICE;
    });
    std::free(unused);
    return rc;
  }

  static int Compile(const void*, size_t, YirageModule** module, void** response,
                     size_t* response_len, char** error) {
    if (module != nullptr) *module = nullptr;
    if (response != nullptr) *response = nullptr;
    if (response_len != nullptr) *response_len = 0;
    SetError(error, std::string("compile: ") + Traits::NotImplemented());
    return YIRAGE_ERROR;
  }

  static int Run(YirageModule*, int32_t, const void* const*, void* const*, char** error) {
    SetError(error, std::string("run: ") + Traits::NotImplemented());
    return YIRAGE_ERROR;
  }

  static int Time(YirageModule*, int32_t, const void* const*, void* const*,
                  const YirageTimingOptions*, YirageTiming*, char** error) {
    SetError(error, std::string("time: ") + Traits::NotImplemented());
    return YIRAGE_ERROR;
  }

  static void Release(YirageModule*) {}  // compile never creates a module

  static void FreeBuffer(void* buffer) { std::free(buffer); }

  // Nothing to run: a description with no kernels (the search plans none).
  static int Describe(const void* target, size_t target_len, void** response, size_t* response_len,
                      char** error) {
    return Guard(Traits::kName, error, [&] {
      return DescribeWith(
          target, target_len, response, response_len, error,
          [](const yirage::v1::CompileTarget*) -> absl::StatusOr<yirage::v1::BackendKernels> {
            yirage::v1::BackendKernels kernels;
            kernels.set_backend(Traits::kName);
            kernels.set_gpu(true);
            return kernels;
          });
    });
  }
};

}  // namespace yirage::backends

#endif  // YIRAGE_BACKENDS_DETECTION_ONLY_BACKEND_H_
