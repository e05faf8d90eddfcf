// The process's CUDA device (device 0, its primary context), NVRTC
// compilation and the probe() description.
//
// Faults: a kernel that faults (illegal address, launch failure, ...) leaves a
// "sticky" error: the context, and on current drivers the whole process, can
// no longer use the GPU (cuDevicePrimaryCtxReset + Retain was tried on an H200
// and failed with CUDA_ERROR_ILLEGAL_ADDRESS). The caller marks the device lost
// (MarkLost); every later use fails at once with an Unavailable status that
// names the first fault, which the C ABI reports as YIRAGE_DEVICE_LOST. The
// worker restarts its process.
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_DEVICE_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_DEVICE_H_

#include <cstdint>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_driver.h"

namespace yirage::backends::cuda {

struct DeviceInfo {
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int64_t memory_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t shared_mem_per_block = 0;        // default limit
  int64_t shared_mem_per_block_optin = 0;  // with the opt-in attribute
  int64_t shared_mem_per_sm = 0;
  int clock_khz = 0;
  int memory_clock_khz = 0;
  int bus_width_bits = 0;
  int warp_size = 0;
  int max_threads_per_block = 0;
  int driver_version = 0;

  std::string Arch() const;  // "sm_90a" for 9.0 (arch-specific features on sm_90+)
  CudaTarget Target() const;
};

// The NVRTC target for a compute capability: "sm_<major><minor>" plus "a" on
// 9.0 and later.
std::string ArchFor(int cc_major, int cc_minor);

// Serializes every use of the device; while held, the context is current on
// the calling thread.
class DeviceLock {
 public:
  DeviceLock();
  std::unique_lock<std::mutex>& lock() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

class Device {
 public:
  // Loads the driver, cuInit, device 0, retains its primary context. Errors
  // (no driver, no device) are cached: the answer never changes in a process.
  static absl::StatusOr<Device*> Get();

  const CudaDriver& cu() const { return *cu_; }
  const DeviceInfo& info() const { return info_; }
  CUcontext context() const { return ctx_; }
  // The context's generation: device state made in another one is gone. The
  // primary context is never re-created (see the file comment), so it is 0.
  int64_t generation() const { return generation_; }

  // Makes the context current on this thread; Unavailable once the device is
  // lost. REQUIRES: a DeviceLock held.
  absl::Status MakeCurrent();
  // Records a sticky error (see the file comment). REQUIRES: a DeviceLock held.
  void MarkLost(const std::string& why);
  bool lost() const { return !lost_reason_.empty(); }

  static std::mutex& mutex();

 private:
  Device() = default;
  const CudaDriver* cu_ = nullptr;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  DeviceInfo info_;
  int64_t generation_ = 0;
  std::string lost_reason_;
};

// True for the status of a call that failed because the device is lost.
bool IsDeviceLost(const absl::Status& status);

// Compiles CUDA C++ to a cubin for `arch` ("sm_90a") with NVRTC; the error
// holds the compiler log. Needs no GPU. Thread-safe.
absl::StatusOr<std::string> CompileCubin(const std::string& source, const std::string& arch,
                                         const std::string& name);

// "major.minor" of the NVRTC library, or an error when it cannot be loaded.
absl::StatusOr<std::string> NvrtcVersion();

// probe(): the device JSON; *usable false (and "reason") without a driver,
// a device or NVRTC.
std::string ProbeJson(bool* usable);

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_DEVICE_H_
