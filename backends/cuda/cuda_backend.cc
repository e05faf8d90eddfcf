// The CUDA backend's exported C ABI table (backends/backend_api.h). Plans are
// generated as CUDA C++, compiled by NVRTC for the device's architecture and
// launched through the driver API; libcuda and libnvrtc are dlopen'd, so this
// library loads on machines without CUDA (probe() then says so). No exception
// crosses this boundary: every entry point catches everything.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "backends/backend_abi_util.h"
#include "backends/backend_api.h"
#include "backends/backend_compile_util.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_families.h"
#include "backends/cuda/cuda_module.h"
#include "yirage/v1/backend.pb.h"

struct YirageModule {
  std::unique_ptr<yirage::backends::cuda::CudaModule> impl;
};

namespace yirage::backends::cuda {
namespace {

using ::yirage::backends::CopyString;
using ::yirage::backends::SetError;

// Runs `body`, turning exceptions into YIRAGE_ERROR.
template <typename F>
int Guard(char** error, F&& body) {
  return ::yirage::backends::Guard("cuda", error, std::forward<F>(body));
}

int Probe(char** json_out) {
  char* unused = nullptr;
  const int rc = Guard(&unused, [&] {
    bool usable = false;
    const std::string json = ProbeJson(&usable);
    if (json_out != nullptr) *json_out = CopyString(json);
    return usable ? YIRAGE_OK : YIRAGE_NO_DEVICE;
  });
  std::free(unused);
  return rc;
}

int Compile(const void* request, size_t request_len, YirageModule** module, void** response,
            size_t* response_len, char** error) {
  return Guard(error, [&] {
    return ::yirage::backends::CompileRequestWith(
        request, request_len, module, response, response_len, error,
        [](const yirage::v1::CompileRequest& req,
           yirage::v1::CompileResponse* resp) -> absl::StatusOr<YirageModule*> {
          auto built = BuildModule(req, resp);
          if (!built.ok()) return built.status();
          return new YirageModule{*std::move(built)};
        });
  });
}

int Run(YirageModule* module, int32_t plan_index, const void* const* inputs, void* const* outputs,
        char** error) {
  return Guard(error, [&] {
    if (module == nullptr || module->impl == nullptr) {
      SetError(error, "run: null module");
      return YIRAGE_ERROR;
    }
    if (absl::Status s = module->impl->Run(plan_index, inputs, outputs); !s.ok()) {
      SetError(error, absl::StrCat("run: ", s.message()));
      return IsDeviceLost(s) ? YIRAGE_DEVICE_LOST : YIRAGE_ERROR;
    }
    return YIRAGE_OK;
  });
}

int Time(YirageModule* module, int32_t plan_index, const void* const* inputs, void* const* outputs,
         const YirageTimingOptions* options, YirageTiming* timing, char** error) {
  return Guard(error, [&] {
    if (module == nullptr || module->impl == nullptr || timing == nullptr) {
      SetError(error, "time: null module or timing");
      return YIRAGE_ERROR;
    }
    absl::StatusOr<YirageTiming> t = module->impl->Time(plan_index, inputs, outputs, options);
    if (!t.ok()) {
      SetError(error, absl::StrCat("time: ", t.status().message()));
      return IsDeviceLost(t.status()) ? YIRAGE_DEVICE_LOST : YIRAGE_ERROR;
    }
    *timing = *t;
    return YIRAGE_OK;
  });
}

void Release(YirageModule* module) {
  try {
    delete module;
  } catch (...) {
  }
}

void FreeBuffer(void* buffer) { std::free(buffer); }

int Describe(const void* target, size_t target_len, void** response, size_t* response_len,
             char** error) {
  return Guard(error, [&] {
    return ::yirage::backends::DescribeWith(target, target_len, response, response_len, error,
                                            [](const yirage::v1::CompileTarget* requested)
                                                -> absl::StatusOr<yirage::v1::BackendKernels> {
                                              absl::StatusOr<CudaTarget> target =
                                                  DescribeTarget(requested);
                                              if (!target.ok()) return target.status();
                                              return DescribeKernels(*target);
                                            });
  });
}

const YirageBackendV1 kBackend = {
    YIRAGE_BACKEND_ABI_VERSION,
    "cuda",
    &Probe,
    &Compile,
    &Run,
    &Time,
    &Release,
    &FreeBuffer,
    &Describe,
};

}  // namespace
}  // namespace yirage::backends::cuda

extern "C" __attribute__((visibility("default"))) const YirageBackendV1* YirageBackendGetV1() {
  return &yirage::backends::cuda::kBackend;
}

// Test-only: plan `plan_index` of every later compile request fails to
// compile (an injected #error); -1 turns it off.
extern "C" __attribute__((visibility("default"))) void YirageCudaBackendTestInjectCompileError(
    int32_t plan_index) {
  yirage::backends::cuda::SetInjectedCompileError(plan_index);
}

// Test-only: the first kernel of plan `plan_index` of every later compile
// request writes through a null pointer (an illegal-address fault); -1 turns
// it off.
extern "C" __attribute__((visibility("default"))) void YirageCudaBackendTestInjectFault(
    int32_t plan_index) {
  yirage::backends::cuda::SetInjectedFault(plan_index);
}

// Test-only: later compile requests on a device size kernels as if it
// offered `bytes` of shared memory a block (without a device the request's
// target says so); 0 turns it off.
extern "C" __attribute__((visibility("default"))) void YirageCudaBackendTestClaimSharedMemory(
    int64_t bytes) {
  yirage::backends::cuda::SetClaimedSharedMemory(bytes);
}
