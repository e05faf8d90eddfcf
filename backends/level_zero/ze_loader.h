// The few Level Zero functions the Level Zero backend's probe uses, opened
// with dlopen at run time.
//
// The backend is compiled against the Level Zero headers (Debian 12's
// libze-dev, spec 1.8) but never links libze_loader: the library and the
// worker load on machines without it, and probe() then reports
// YIRAGE_NO_DEVICE. Level Zero properties structs are versioned through their
// stype field (a driver fills the structure the stype names, and extends it
// only through pNext), so structs from the 1.8 headers are safe with newer
// drivers.
#ifndef YIRAGE_BACKENDS_LEVEL_ZERO_ZE_LOADER_H_
#define YIRAGE_BACKENDS_LEVEL_ZERO_ZE_LOADER_H_

#include <level_zero/ze_api.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace yirage::backends::level_zero {

// Level Zero entry points (plain function pointers, so a test can build a
// fake table from captureless lambdas). All are required except
// zeDeviceGetCacheProperties and zeDriverGetProperties, which may be null.
struct ZeApi {
  ze_result_t (*zeInit)(ze_init_flags_t flags) = nullptr;
  ze_result_t (*zeDriverGet)(uint32_t* count, ze_driver_handle_t* drivers) = nullptr;
  ze_result_t (*zeDriverGetProperties)(ze_driver_handle_t driver,
                                       ze_driver_properties_t* props) = nullptr;
  ze_result_t (*zeDeviceGet)(ze_driver_handle_t driver, uint32_t* count,
                             ze_device_handle_t* devices) = nullptr;
  ze_result_t (*zeDeviceGetProperties)(ze_device_handle_t device,
                                       ze_device_properties_t* props) = nullptr;
  ze_result_t (*zeDeviceGetComputeProperties)(ze_device_handle_t device,
                                              ze_device_compute_properties_t* props) = nullptr;
  ze_result_t (*zeDeviceGetMemoryProperties)(ze_device_handle_t device, uint32_t* count,
                                             ze_device_memory_properties_t* props) = nullptr;
  ze_result_t (*zeDeviceGetCacheProperties)(ze_device_handle_t device, uint32_t* count,
                                            ze_device_cache_properties_t* props) = nullptr;
  // The library that was opened, e.g. "libze_loader.so.1" (for the probe JSON).
  std::string library;
};

// The library names tried, in order.
inline constexpr const char* kZeLibraryNames[] = {"libze_loader.so.1", "libze_loader.so"};

// Opens the Level Zero loader (the first of kZeLibraryNames that loads) and
// binds the table. NotFound "libze_loader.so.1 not found (dlopen: ...)" when
// no name loads, or "... lacks: zeInit, ..." when a required symbol is
// missing. Loaded once per process. Thread-safe.
absl::StatusOr<const ZeApi*> LoadZeLoader();

// What LoadZeLoader() does with the library names `names`, uncached (tests
// pass a name that does not exist). The table is never freed: the library
// stays open.
absl::StatusOr<const ZeApi*> OpenZeLoader(const std::vector<std::string>& names);

// "ZE_RESULT_ERROR_UNINITIALIZED" for a known code, else "ze_result_t
// 0x<hex>".
std::string ZeResultName(ze_result_t rc);

}  // namespace yirage::backends::level_zero

#endif  // YIRAGE_BACKENDS_LEVEL_ZERO_ZE_LOADER_H_
