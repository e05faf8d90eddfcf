// The HIP backend's exported C ABI table (backends/backend_api.h). For now it
// only detects and describes the AMD GPU (probe); compile, run and time fail
// with YIRAGE_ERROR saying code generation for HIP is not implemented yet.
// libamdhip64 is dlopen'd, so this library loads on machines without ROCm.
#include <string>

#include "backends/backend_api.h"
#include "backends/detection_only_backend.h"
#include "backends/hip/hip_probe.h"
#include "backends/hip/hip_runtime.h"

namespace yirage::backends::hip {
namespace {

struct HipTraits {
  static constexpr char kName[] = "hip";
  static const char* NotImplemented() { return kNotImplemented; }
  static std::string ProbeJson(bool* usable) {
    return ::yirage::backends::hip::ProbeJson(LoadHipRuntime(), usable);
  }
};

}  // namespace
}  // namespace yirage::backends::hip

extern "C" __attribute__((visibility("default"))) const YirageBackendV1* YirageBackendGetV1() {
  return yirage::backends::DetectionOnlyBackend<yirage::backends::hip::HipTraits>::Table();
}
