// The few HIP runtime functions the HIP backend's probe uses, opened with
// dlopen at run time.
//
// The backend is compiled against the HIP headers (Debian 12's libamdhip64-dev
// ships HIP 5.2) but never links libamdhip64: the library and the worker load
// on machines without ROCm, and probe() then reports YIRAGE_NO_DEVICE.
//
// ABI choices, so that one build works with ROCm 5.x and 6.x/7.x runtimes:
// - Scalars come from hipDeviceGetAttribute, hipDeviceGetName,
//   hipDeviceTotalMem and hipRuntimeGetVersion, whose signatures never
//   changed. The hipDeviceAttribute_t values used (ClockRate, L2CacheSize,
//   MaxThreadsPerBlock, MemoryBusWidth, MemoryClockRate, MultiprocessorCount,
//   MaxSharedMemoryPerBlock, WarpSize, ...) are numbered identically in the
//   HIP 5.2 header and the ROCm 6/7 headers (checked enum by enum).
// - hipDeviceProp_t is used only for gcnArchName, which no attribute gives on
//   every version (hipDeviceAttributeGcnArchName was retired in ROCm 6).
//   ROCm 6 renamed hipGetDeviceProperties to hipGetDevicePropertiesR0600
//   with a new struct layout, but kept exporting hipGetDevicePropertiesR0000
//   and the plain hipGetDeviceProperties with the old layout
//   (hipDeviceProp_tR0000), which is field for field the HIP 5.x
//   hipDeviceProp_t we compile against. So the table binds
//   hipGetDevicePropertiesR0000 when exported, else hipGetDeviceProperties,
//   and never R0600; the caller also passes a buffer larger than the struct
//   and checks that the name it reads looks like "gfx...".
#ifndef YIRAGE_BACKENDS_HIP_HIP_RUNTIME_H_
#define YIRAGE_BACKENDS_HIP_HIP_RUNTIME_H_

#include <hip/hip_runtime_api.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace yirage::backends::hip {

// HIP runtime entry points (plain function pointers, so a test can build a
// fake table from captureless lambdas). All are required except
// get_device_properties and hipDriverGetVersion, which may be null.
struct HipApi {
  hipError_t (*hipInit)(unsigned int flags) = nullptr;
  hipError_t (*hipGetDeviceCount)(int* count) = nullptr;
  hipError_t (*hipDeviceGet)(hipDevice_t* device, int ordinal) = nullptr;
  hipError_t (*hipDeviceGetName)(char* name, int len, hipDevice_t device) = nullptr;
  hipError_t (*hipDeviceGetAttribute)(int* value, hipDeviceAttribute_t attr, int device) = nullptr;
  hipError_t (*hipDeviceTotalMem)(size_t* bytes, hipDevice_t device) = nullptr;
  hipError_t (*hipRuntimeGetVersion)(int* version) = nullptr;
  hipError_t (*hipDriverGetVersion)(int* version) = nullptr;
  const char* (*hipGetErrorName)(hipError_t error) = nullptr;
  const char* (*hipGetErrorString)(hipError_t error) = nullptr;
  // hipGetDevicePropertiesR0000 or the legacy hipGetDeviceProperties: fills
  // the HIP 5.x layout (see the file comment). Null when neither exists.
  hipError_t (*get_device_properties)(hipDeviceProp_t* props, int device) = nullptr;
  // The library that was opened, e.g. "libamdhip64.so.5" (for the probe JSON).
  std::string library;
};

// The library names tried, in order.
inline constexpr const char* kHipLibraryNames[] = {"libamdhip64.so", "libamdhip64.so.6",
                                                   "libamdhip64.so.5"};

// Opens the HIP runtime (the first of kHipLibraryNames that loads) and binds
// the table. NotFound "libamdhip64.so not found (dlopen: ...)" when no name
// loads, or "... lacks: hipInit, ..." when a required symbol is missing.
// Loaded once per process; later calls return the same result. Thread-safe.
absl::StatusOr<const HipApi*> LoadHipRuntime();

// What LoadHipRuntime() does with the library names `names`, uncached (tests
// pass a name that does not exist). The table is never freed: the library
// stays open.
absl::StatusOr<const HipApi*> OpenHipRuntime(const std::vector<std::string>& names);

}  // namespace yirage::backends::hip

#endif  // YIRAGE_BACKENDS_HIP_HIP_RUNTIME_H_
