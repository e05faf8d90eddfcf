// Compiled plans of one CompileRequest: NVRTC cubins, launch manifests and the
// device state (loaded CUmodules, buffers) to run and time them.
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_MODULE_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_MODULE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/backend_api.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_cublaslt.h"
#include "backends/cuda/cuda_device.h"
#include "yirage/v1/backend.pb.h"

namespace yirage::backends::cuda {

inline constexpr size_t kMaxDiagnosticBytes = 8192;

// Thread-safe: all device work is serialized by the device lock.
//
// Device state is created lazily on first use: buffers are allocated once per module per
// context, inputs are copied host-to-device on every run/time call and
// outputs back at the end.
class CudaModule {
 public:
  // `device` may be null (compile-only: no GPU); then run/time fail.
  CudaModule(Device* device, std::vector<int64_t> input_bytes, std::vector<int64_t> output_bytes,
             int num_plans);
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;

  int num_plans() const { return static_cast<int>(plans_.size()); }
  int AddImage(std::string cubin);
  void SetPlan(int plan, PlanCode code, int image);

  // Both fail with IsDeviceLost(status) after a sticky error (this call's or
  // an earlier one's): the process can no longer use the GPU.
  absl::Status Run(int plan, const void* const* inputs, void* const* outputs);
  // Warm-up runs, then timed runs: each flushes L2 (cuMemsetD8 of a buffer of
  // `flush_bytes`, default 2x L2) then records CUDA events around all of the
  // plan's launches. Median and min of the runs. `options` may be null
  // (defaults: 3 warm-ups, 100 runs max, 0.05 s, 10 runs min).
  absl::StatusOr<YirageTiming> Time(int plan, const void* const* inputs, void* const* outputs,
                                    const YirageTimingOptions* options);

 private:
  struct PlanState {
    bool ok = false;
    PlanCode code;
    int image = -1;
    int64_t generation = -1;                               // context generation of fns/buffers
    std::vector<CUfunction> fns;                           // per launch; null for library calls
    std::vector<std::unique_ptr<PreparedMatmul>> matmuls;  // per launch; null for kernels
    std::vector<CUdeviceptr> buffers;
    // Per launch: its TMA descriptors, made once the buffers are in place.
    std::vector<std::vector<CUtensorMap>> tensor_maps;
  };

  absl::Status CheckPlan(int plan) const;
  // REQUIRES: the device lock. Loads images and allocates buffers as needed.
  absl::Status Prepare(int plan);
  absl::Status Launch(int plan);
  absl::Status CopyIn(const void* const* inputs);
  absl::Status CopyOut(void* const* outputs);
  // Turns a driver error into a status: Unavailable (IsDeviceLost) for a sticky
  // error, which also marks the device lost (see cuda_device.h).
  absl::Status Fail(CUresult rc, const std::string& what);
  void FreeDeviceState();

  Device* const device_;
  const std::vector<int64_t> input_bytes_;
  const std::vector<int64_t> output_bytes_;
  std::vector<PlanState> plans_;
  std::vector<std::string> images_;
  std::vector<CUmodule> cu_modules_;  // per image, in context generation gen_
  std::vector<CUdeviceptr> io_;       // inputs then outputs
  // The host buffers whose contents io_'s inputs hold (empty: none, or
  // unknown after a failed copy), for YirageTimingOptions.reuse_io.
  std::vector<const void*> loaded_inputs_;
  cublasLtHandle_t lt_handle_ = nullptr;  // in context generation gen_, made on first use
  CUdeviceptr flush_ = 0;
  int64_t flush_bytes_ = 0;
  int64_t gen_ = -1;
};

// Builds the request's plans: code generation, one NVRTC compile of all plans
// (one per plan when that fails, so a bad plan fails only itself), targeting
// the device's architecture, or without a device the request's target
// (FailedPrecondition when it has none, InvalidArgument when it is out of
// range). Returns InvalidArgument when the graph does not validate.
// The target the backend compiles for: its device's, else `requested`
// (validated as a compile request's target; FailedPrecondition when null).
absl::StatusOr<CudaTarget> DescribeTarget(const yirage::v1::CompileTarget* requested);

absl::StatusOr<std::unique_ptr<CudaModule>> BuildModule(const yirage::v1::CompileRequest& request,
                                                        yirage::v1::CompileResponse* response);

// Test hooks (-1 turns them off): the generated source of plan `plan_index`
// gets an #error line / its first kernel writes through a null pointer.
void SetInjectedCompileError(int plan_index);
void SetInjectedFault(int plan_index);
// Test hook (0 turns it off): compile requests size kernels as if the
// device offered `bytes` of shared memory a block, so that a kernel over
// its real limit reaches the launch (and must fail its plan alone there).
void SetClaimedSharedMemory(int64_t bytes);

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_MODULE_H_
