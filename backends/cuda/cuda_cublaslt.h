// cuBLASLt, opened with dlopen at run time, and the one call KERNEL_LIBRARY
// kernels make: a (strided-batch) matmul with its epilogue
// (core/library_matmul.h), D = act(alpha * (A @ B) + C + bias).
//
// Row-major tensors are handed to cuBLASLt's column-major interface as their
// transposes: D^T = B^T A^T, so its "A" is our B, its "B" our A, and the bias
// runs along its rows (our columns).
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_CUBLASLT_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_CUBLASLT_H_

#include <cublasLt.h>
#include <cuda.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backends/cuda/cuda_codegen.h"
#include "nlohmann/json.hpp"
#include "yirage/v1/backend.pb.h"
#include "yirage/v1/graph.pb.h"

namespace yirage::backends::cuda {

// clang-format off
#define YR_CUBLASLT_FUNCTIONS(X)                                                          \
  X(cublasLtCreate) X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtGetStatusName)     \
  X(cublasLtGetStatusString) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)     \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate)                         \
  X(cublasLtMatrixLayoutDestroy) X(cublasLtMatrixLayoutSetAttribute)                      \
  X(cublasLtMatmulPreferenceCreate) X(cublasLtMatmulPreferenceDestroy)                    \
  X(cublasLtMatmulPreferenceSetAttribute) X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)
// clang-format on

#define YR_DECLARE_FN(name) decltype(&::name) name = nullptr;
struct CublasLt {
  YR_CUBLASLT_FUNCTIONS(YR_DECLARE_FN)
  std::string library;  // the file that was opened
};
#undef YR_DECLARE_FN

// $YIRAGE_CUBLASLT_LIBRARY if set, else libcublasLt.so.<major> under the
// toolkit (CudaHome()/lib64), else the soname on the loader's path. Loaded
// once per process; NotFound "cuBLASLt not found: ..." naming every file
// tried when absent. Thread-safe.
absl::StatusOr<const CublasLt*> LoadCublasLt();

// "CUBLAS_STATUS_NOT_SUPPORTED (15): ..." (status names without the library:
// the number alone).
std::string CublasStatusText(const CublasLt* lt, cublasStatus_t status);

// The workspace a call gets (cuBLASLt's recommendation for Hopper).
inline constexpr int64_t kCublasLtWorkspaceBytes = int64_t{32} << 20;

// cuBLASLt's epilogue name for the call ("CUBLASLT_EPILOGUE_RELU_BIAS"), and
// the whole call as the launch manifest gives it.
std::string EpilogueName(const LibraryMatmulCall& call);
yirage::v1::LaunchManifest::LibraryCall LibraryCallManifest(const LibraryMatmulCall& call);

// Descriptors and the chosen algorithm of one call, made once per context.
class PreparedMatmul {
 public:
  PreparedMatmul() = default;
  ~PreparedMatmul();
  PreparedMatmul(const PreparedMatmul&) = delete;
  PreparedMatmul& operator=(const PreparedMatmul&) = delete;

  // Builds the descriptors and asks the heuristic for call.algo + 1
  // algorithms; FailedPrecondition when it offers fewer ("cuBLASLt offers 1
  // algorithm for this matmul; the plan asks for its 3rd").
  absl::Status Init(const CublasLt* lt, cublasLtHandle_t handle, const LibraryMatmulCall& call);

  // Enqueues the call on `stream`. REQUIRES: Init succeeded.
  absl::Status Run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias, CUdeviceptr d,
                   CUdeviceptr workspace, CUstream stream);

 private:
  const CublasLt* lt_ = nullptr;
  cublasLtHandle_t handle_ = nullptr;
  LibraryMatmulCall call_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_CUBLASLT_H_
