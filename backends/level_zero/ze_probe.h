// The Level Zero backend's probe(): describes the first GPU the Level Zero
// loader finds in the keys core/chip.cc understands (name, compute_units,
// memory_bytes, warp_size, clock_khz, ...), or says why there is none.
#ifndef YIRAGE_BACKENDS_LEVEL_ZERO_ZE_PROBE_H_
#define YIRAGE_BACKENDS_LEVEL_ZERO_ZE_PROBE_H_

#include <string>

#include "absl/status/statusor.h"
#include "backends/level_zero/ze_loader.h"

namespace yirage::backends::level_zero {

// The probe() JSON object for `api` (the loaded loader, or why it could not
// be loaded). Sets *usable when a GPU was described; otherwise the object has
// backend "level_zero" and a non-empty "reason" (the load error, a failing
// zeInit, no driver, or no GPU device).
//
// What it reads: zeDeviceGetProperties (name, vendor/device id, core clock,
// slices x sub-slices = Xe cores, reported as compute_units because the chip
// registry counts Xe cores; EUs as eu_count), zeDeviceGetComputeProperties
// (work-group size and shared local memory limits, sub-group sizes; warp_size
// is the physical EU SIMD width when it is a supported sub-group size, else
// the largest one), zeDeviceGetMemoryProperties (memory_bytes is the sum over
// the device's memories, e.g. one per HBM stack or tile; clock and bus width
// are the largest) and zeDeviceGetCacheProperties (l2_bytes: the largest
// device cache, Level Zero reports device-level caches only).
std::string ProbeJson(const absl::StatusOr<const ZeApi*>& api, bool* usable);

// The message compile/run/time return: this backend only detects devices.
inline constexpr char kNotImplemented[] =
    "the level_zero backend currently only detects devices: code generation for Level Zero is "
    "not implemented yet";

}  // namespace yirage::backends::level_zero

#endif  // YIRAGE_BACKENDS_LEVEL_ZERO_ZE_PROBE_H_
