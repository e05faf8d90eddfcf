// The HIP backend's probe(): describes device 0 from the HIP runtime in the
// keys core/chip.cc understands (name, gcn_arch_name, compute_units,
// memory_bytes, warp_size, clock_khz, ...), or says why there is no device.
#ifndef YIRAGE_BACKENDS_HIP_HIP_PROBE_H_
#define YIRAGE_BACKENDS_HIP_HIP_PROBE_H_

#include <string>

#include "absl/status/statusor.h"
#include "backends/hip/hip_runtime.h"

namespace yirage::backends::hip {

// "hipErrorNoDevice (100): no ROCm-capable device is detected"; the text is
// left out when the runtime has none or it repeats the name.
std::string HipErrorText(const HipApi& api, hipError_t rc);

// The probe() JSON object for `api` (the loaded runtime, or why it could not
// be loaded). Sets *usable when a device was described; otherwise the object
// has backend "hip" and a non-empty "reason" (the load error, a failing
// hipInit, or zero devices).
std::string ProbeJson(const absl::StatusOr<const HipApi*>& api, bool* usable);

// The message compile/run/time return: this backend only detects devices.
inline constexpr char kNotImplemented[] =
    "the hip backend currently only detects devices: code generation for HIP is not "
    "implemented yet";

}  // namespace yirage::backends::hip

#endif  // YIRAGE_BACKENDS_HIP_HIP_PROBE_H_
