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
    if (module == nullptr || response == nullptr || response_len == nullptr) {
      SetError(error, "compile: null output pointer");
      return YIRAGE_ERROR;
    }
    *module = nullptr;
    *response = nullptr;
    *response_len = 0;
    yirage::v1::CompileRequest req;
    if (request == nullptr || !req.ParseFromArray(request, static_cast<int>(request_len))) {
      SetError(error, "compile: the request is not a serialized yirage.v1.CompileRequest");
      return YIRAGE_ERROR;
    }
    yirage::v1::CompileResponse resp;
    absl::StatusOr<std::unique_ptr<CpuModule>> built =
        BuildModule(req, CpuCompiler(CpuCompiler::DefaultPath()), &resp);
    if (!built.ok()) {
      SetError(error, absl::StrCat("compile: ", built.status().message()));
      return YIRAGE_ERROR;
    }
    const std::string bytes = resp.SerializeAsString();
    void* buf = std::malloc(bytes.size() > 0 ? bytes.size() : 1);
    if (buf == nullptr) {
      SetError(error, "compile: out of memory");
      return YIRAGE_ERROR;
    }
    std::memcpy(buf, bytes.data(), bytes.size());
    *response = buf;
    *response_len = bytes.size();
    *module = new YirageModule{*std::move(built)};
    return YIRAGE_OK;
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

const YirageBackendV1 kBackend = {
    YIRAGE_BACKEND_ABI_VERSION, "cpu", &Probe, &Compile, &Run, &Time, &Release, &FreeBuffer,
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
