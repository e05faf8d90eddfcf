// The CPU backend's exported C ABI table (backends/backend_api.h). Plans are
// generated as C++ with OpenMP, compiled by the system compiler and dlopen'd.
// No exception crosses this boundary: every entry point catches everything.
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
#include "backends/cpu/cpu_builder.h"
#include "backends/cpu/cpu_compiler.h"
#include "backends/cpu/cpu_module.h"
#include "backends/cpu/cpu_probe.h"
#include "yirage/v1/backend.pb.h"

struct YirageModule {
  std::unique_ptr<yirage::backends::cpu::CpuModule> impl;
};

namespace yirage::backends::cpu {
namespace {

using ::yirage::backends::CopyString;
using ::yirage::backends::SetError;

// Runs `body`, turning exceptions into YIRAGE_ERROR.
template <typename F>
int Guard(char** error, F&& body) {
  return ::yirage::backends::Guard("cpu", error, std::forward<F>(body));
}

int Probe(char** json_out) {
  char* unused = nullptr;
  const int rc = Guard(&unused, [&] {
    absl::StatusOr<std::unique_ptr<CpuModule>> scratch = CpuModule::Create(0);
    if (!scratch.ok()) {
      if (json_out != nullptr) {
        *json_out = CopyString(absl::StrCat(R"({"backend":"cpu","reason":")",
                                            "cannot create a temp directory", R"("})"));
      }
      return YIRAGE_NO_DEVICE;
    }
    bool usable = false;
    const std::string json =
        ProbeJson(CpuCompiler(CpuCompiler::DefaultPath()), (*scratch)->dir(), &usable);
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
          auto built = BuildModule(req, CpuCompiler(CpuCompiler::DefaultPath()), resp);
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
      return YIRAGE_ERROR;
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
      return YIRAGE_ERROR;
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

// Row kernels (rows and columns spread over the cores) and the BLAS behind
// KERNEL_LIBRARY kernels, one algorithm; no fused families.
int Describe(const void* target, size_t target_len, void** response, size_t* response_len,
             char** error) {
  return Guard(error, [&] {
    return ::yirage::backends::DescribeWith(
        target, target_len, response, response_len, error,
        [](const yirage::v1::CompileTarget*) -> absl::StatusOr<yirage::v1::BackendKernels> {
          yirage::v1::BackendKernels kernels;
          kernels.set_backend("cpu");
          kernels.mutable_row();
          // The CPU kernels run generic chains (cpu_codegen.cc) but the search
          // is not offered them: their prologue runs element by element, not
          // vectorized, and measured slower than a row kernel then the axis
          // op (bench/RESULTS.md, "Generic chains on the CPU").
          kernels.set_generic_prologue(false);
          kernels.mutable_library()->set_algorithms(1);
          return kernels;
        });
  });
}

const YirageBackendV1 kBackend = {
    YIRAGE_BACKEND_ABI_VERSION,
    "cpu",
    &Probe,
    &Compile,
    &Run,
    &Time,
    &Release,
    &FreeBuffer,
    &Describe,
};

}  // namespace
}  // namespace yirage::backends::cpu

extern "C" __attribute__((visibility("default"))) const YirageBackendV1* YirageBackendGetV1() {
  return &yirage::backends::cpu::kBackend;
}

// Test-only: makes plan `plan_index` of every later compile request fail to
// compile (an injected #error); -1 turns it off.
extern "C" __attribute__((visibility("default"))) void YirageCpuBackendTestInjectCompileError(
    int32_t plan_index) {
  yirage::backends::cpu::SetInjectedCompileError(plan_index);
}
