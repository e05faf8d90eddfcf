// The Level Zero backend's exported C ABI table (backends/backend_api.h). For
// now it only detects and describes the Intel GPU (probe); compile, run and
// time fail with YIRAGE_ERROR saying code generation for Level Zero is not
// implemented yet. libze_loader is dlopen'd, so this library loads on
// machines without it.
#include <string>

#include "backends/backend_api.h"
#include "backends/detection_only_backend.h"
#include "backends/level_zero/ze_loader.h"
#include "backends/level_zero/ze_probe.h"

namespace yirage::backends::level_zero {
namespace {

struct LevelZeroTraits {
  static constexpr char kName[] = "level_zero";
  static const char* NotImplemented() { return kNotImplemented; }
  static std::string ProbeJson(bool* usable) {
    return ::yirage::backends::level_zero::ProbeJson(LoadZeLoader(), usable);
  }
};

}  // namespace
}  // namespace yirage::backends::level_zero

extern "C" __attribute__((visibility("default"))) const YirageBackendV1* YirageBackendGetV1() {
  return yirage::backends::DetectionOnlyBackend<
      yirage::backends::level_zero::LevelZeroTraits>::Table();
}
