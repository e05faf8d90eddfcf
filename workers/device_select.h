// Which device of its backend a worker uses (`yirage-worker --device N`).
//
// The backend ABI has no device index: every backend opens its runtime's
// device 0. So before the backend is loaded, the worker narrows what the
// runtime can see to the one device it wants, through the runtime's own
// visibility variable: CUDA_VISIBLE_DEVICES (cuda), HIP_VISIBLE_DEVICES
// (hip), ZE_AFFINITY_MASK (level_zero). The cpu backend has one device, 0.
//
// Device N is the N-th device this process could see: the N-th entry of the
// variable when it is already set (a container runtime, a scheduler or the
// operator narrowed it), else the runtime's device N. A device past the end
// of a list that is set is NotFound (the worker exits 3, "no device"); past
// the devices of the machine, the backend's probe finds none.
#ifndef YIRAGE_WORKERS_DEVICE_SELECT_H_
#define YIRAGE_WORKERS_DEVICE_SELECT_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace yirage::worker {

struct DeviceSelection {
  int index = 0;
  // The variable set and its value; empty for the cpu backend.
  std::string variable;
  std::string value;
  // cuda only, when neither it nor CUDA_VISIBLE_DEVICES was set: "PCI_BUS_ID",
  // so that device N is nvidia-smi's GPU N rather than the N-th fastest.
  std::string cuda_device_order;
};

// The runtime variable that narrows `backend`'s devices; "" for cpu (and
// for a backend this worker does not know, e.g. one loaded from a test .so).
std::string VisibilityVariable(const std::string& backend);

// What the worker sets for `backend` and device `index`, given the current
// values of the variables (nullopt: unset). Pure, for tests; SelectDevice
// reads the environment and applies the answer.
//   InvalidArgument: index < 0, or index > 0 for the cpu backend.
//   NotFound: the variable is set and lists fewer than index + 1 devices.
absl::StatusOr<DeviceSelection> PlanDeviceSelection(
    const std::string& backend, int index, const std::optional<std::string>& current,
    const std::optional<std::string>& current_cuda_device_order = std::nullopt);

// PlanDeviceSelection on this process's environment, then setenv. Call it
// before the backend library is loaded (and before threads start).
absl::StatusOr<DeviceSelection> SelectDevice(const std::string& backend, int index);

}  // namespace yirage::worker

#endif  // YIRAGE_WORKERS_DEVICE_SELECT_H_
