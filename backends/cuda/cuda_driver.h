// The CUDA driver API and NVRTC, opened with dlopen at run time.
//
// The backend is compiled against the toolkit's headers only: it has no
// link-time dependency on libcuda or libnvrtc, so the worker (and this library)
// load on machines without CUDA, and probe() then reports YIRAGE_NO_DEVICE.
// Function pointers keep the exact types of the headers' declarations; names
// the headers #define to versioned symbols (cuMemAlloc -> cuMemAlloc_v2) are
// looked up under the versioned name.
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_DRIVER_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_DRIVER_H_

#include <cuda.h>
#include <nvrtc.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace yirage::backends::cuda {

// clang-format off
#define YR_CUDA_DRIVER_FUNCTIONS(X)                                                            \
  X(cuInit)                                                                                    \
  X(cuDriverGetVersion)                                                                        \
  X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName)  \
      X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDevicePrimaryCtxRetain)                  \
          X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxReset) X(cuCtxSetCurrent)           \
              X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction) \
                  X(cuFuncSetAttribute) X(cuLaunchKernel) X(cuLaunchCooperativeKernel)         \
                      X(cuMemAlloc) X(cuMemFree)                                               \
                      X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemsetD8) X(cuMemsetD32)             \
                          X(cuEventCreate) X(cuEventRecord) X(cuEventSynchronize)              \
                              X(cuEventElapsedTime) X(cuEventDestroy)

#define YR_NVRTC_FUNCTIONS(X)                                                                   \
  X(nvrtcVersion)                                                                               \
  X(nvrtcGetErrorString)                                                                        \
  X(nvrtcCreateProgram) X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) \
      X(nvrtcGetProgramLog) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetSupportedArchs)     \
          X(nvrtcGetNumSupportedArchs)

// clang-format on
#define YR_DECLARE_FN(name) decltype(&::name) name = nullptr;

// The driver API. Load() once; the table is then immutable (thread-safe).
struct CudaDriver {
  YR_CUDA_DRIVER_FUNCTIONS(YR_DECLARE_FN)
  // Drivers of CUDA 12 and later (TMA descriptors, sm_90); null before.
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled = nullptr;
};

struct Nvrtc {
  YR_NVRTC_FUNCTIONS(YR_DECLARE_FN)
};

#undef YR_DECLARE_FN

// libcuda.so.1 (or libcuda.so) and every function above; an error naming
// what is missing. Loaded once per process; later calls return the same
// result. Thread-safe.
absl::StatusOr<const CudaDriver*> LoadDriver();

// libnvrtc: $YIRAGE_NVRTC_LIBRARY if set, else the versioned soname under the
// toolkit (libnvrtc.so.<major>), else libnvrtc.so. Thread-safe, loaded once.
absl::StatusOr<const Nvrtc*> LoadNvrtc();

// The toolkit root: $CUDA_HOME or $CUDA_PATH if set, else the directory the
// backend was built against (YIRAGE_CUDA_HOME), else /usr/local/cuda.
std::string CudaHome();

// "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered".
std::string DriverErrorText(const CudaDriver& cu, CUresult rc);

// OK, or Internal "<what>: <error text>".
absl::Status CheckCu(const CudaDriver& cu, CUresult rc, const std::string& what);

// True for the errors after which the context is unusable (a kernel fault).
bool IsStickyError(CUresult rc);

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_DRIVER_H_
