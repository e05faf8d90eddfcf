#include "backends/cuda/cuda_cublaslt.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_driver.h"
#include "backends/dl_library.h"

#define YR_STR2(x) #x
#define YR_STR(x) YR_STR2(x)

namespace yirage::backends::cuda {
namespace {

absl::StatusOr<const CublasLt*> LoadCublasLtOnce() {
  std::vector<std::string> names;
  if (const char* env = std::getenv("YIRAGE_CUBLASLT_LIBRARY"); env != nullptr && env[0] != '\0') {
    names.push_back(env);
  } else {
    const std::string lib = CudaHome() + "/lib64/";
    for (int major = 16; major >= 12; --major) {
      names.push_back(absl::StrCat(lib, "libcublasLt.so.", major));
    }
    names.push_back(lib + "libcublasLt.so");
    for (int major = 16; major >= 12; --major) {
      names.push_back(absl::StrCat("libcublasLt.so.", major));
    }
  }
  std::string opened, tried;
  void* handle = DlopenFirst(names, &opened, &tried);
  if (handle == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "cuBLASLt not found (library matmuls cannot run; set YIRAGE_CUBLASLT_LIBRARY or "
        "CUDA_HOME): ",
        tried));
  }
  auto* lt = new CublasLt;
  lt->library = opened;
  std::string missing;
#define YR_BIND(name) BindSymbol(handle, YR_STR(name), &lt->name, &missing);
  YR_CUBLASLT_FUNCTIONS(YR_BIND)
#undef YR_BIND
  if (!missing.empty()) {
    delete lt;
    return absl::NotFoundError(absl::StrCat("cuBLASLt (", opened, ") lacks: ", missing));
  }
  return lt;
}

cudaDataType_t DataType(yirage::v1::DType dtype) {
  switch (dtype) {
    case yirage::v1::FLOAT16:
      return CUDA_R_16F;
    case yirage::v1::BFLOAT16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

int64_t ElementBytes(yirage::v1::DType dtype) { return dtype == yirage::v1::FLOAT32 ? 4 : 2; }

cublasLtEpilogue_t Epilogue(const LibraryMatmulCall& call) {
  switch (call.activation) {
    case 1:
      return call.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case 2:
      return call.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    default:
      return call.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  }
}

// The largest power of two (at most 256) dividing every byte offset a batch
// entry of an operand starts at.
uint32_t Alignment(int64_t stride_elements, int64_t element_bytes, int64_t batch) {
  if (batch <= 1 || stride_elements == 0) return 256;
  const int64_t bytes = stride_elements * element_bytes;
  uint32_t a = 256;
  while (a > 1 && bytes % a != 0) a /= 2;
  return a;
}

}  // namespace

absl::StatusOr<const CublasLt*> LoadCublasLt() {
  static const absl::StatusOr<const CublasLt*>* loaded =
      new absl::StatusOr<const CublasLt*>(LoadCublasLtOnce());
  return *loaded;
}

std::string CublasStatusText(const CublasLt* lt, cublasStatus_t status) {
  const char* name = lt != nullptr ? lt->cublasLtGetStatusName(status) : nullptr;
  const char* text = lt != nullptr ? lt->cublasLtGetStatusString(status) : nullptr;
  return absl::StrCat(name != nullptr ? name : "CUBLAS_STATUS", " (", static_cast<int>(status), ")",
                      text != nullptr ? absl::StrCat(": ", text) : "");
}

std::string EpilogueName(const LibraryMatmulCall& call) {
  switch (Epilogue(call)) {
    case CUBLASLT_EPILOGUE_RELU_BIAS:
      return "CUBLASLT_EPILOGUE_RELU_BIAS";
    case CUBLASLT_EPILOGUE_RELU:
      return "CUBLASLT_EPILOGUE_RELU";
    case CUBLASLT_EPILOGUE_GELU_BIAS:
      return "CUBLASLT_EPILOGUE_GELU_BIAS";
    case CUBLASLT_EPILOGUE_GELU:
      return "CUBLASLT_EPILOGUE_GELU";
    case CUBLASLT_EPILOGUE_BIAS:
      return "CUBLASLT_EPILOGUE_BIAS";
    default:
      return "CUBLASLT_EPILOGUE_DEFAULT";
  }
}

yirage::v1::LaunchManifest::LibraryCall LibraryCallManifest(const LibraryMatmulCall& call) {
  yirage::v1::LaunchManifest::LibraryCall m;
  m.set_call("cublasLtMatmul");
  m.set_data_type(call.dtype == yirage::v1::FLOAT16    ? "CUDA_R_16F"
                  : call.dtype == yirage::v1::BFLOAT16 ? "CUDA_R_16BF"
                                                       : "CUDA_R_32F");
  m.set_compute_type(call.tf32 ? "CUBLAS_COMPUTE_32F_FAST_TF32" : "CUBLAS_COMPUTE_32F");
  m.set_scale_type("CUDA_R_32F");
  m.set_transpose_b(call.transpose_b);
  m.set_batch(call.batch);
  m.set_m(call.m);
  m.set_n(call.n);
  m.set_k(call.k);
  m.set_a_batch_stride(call.a_batch_stride);
  m.set_b_batch_stride(call.b_batch_stride);
  m.set_alpha(call.alpha);
  m.set_beta(call.residual ? 1.0 : 0.0);
  m.set_bias(call.bias);
  m.set_epilogue(EpilogueName(call));
  m.set_algo_index(call.algo);
  m.set_workspace_bytes(call.workspace_bytes);
  return m;
}

PreparedMatmul::~PreparedMatmul() {
  if (lt_ == nullptr) return;
  for (cublasLtMatrixLayout_t l : {a_, b_, c_, d_}) {
    if (l != nullptr) lt_->cublasLtMatrixLayoutDestroy(l);
  }
  if (op_ != nullptr) lt_->cublasLtMatmulDescDestroy(op_);
}

absl::Status PreparedMatmul::Init(const CublasLt* lt, cublasLtHandle_t handle,
                                  const LibraryMatmulCall& call) {
  lt_ = lt;
  handle_ = handle;
  call_ = call;
  auto check = [&](cublasStatus_t st, const char* what) -> absl::Status {
    if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(what, ": ", CublasStatusText(lt, st)));
  };
  const cudaDataType_t type = DataType(call.dtype);
  const cublasComputeType_t compute = call.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  if (absl::Status s = check(lt->cublasLtMatmulDescCreate(&op_, compute, CUDA_R_32F),
                             "cublasLtMatmulDescCreate");
      !s.ok()) {
    return s;
  }
  const cublasOperation_t transa = call.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t transb = CUBLAS_OP_N;
  const cublasLtEpilogue_t epilogue = Epilogue(call);
  if (absl::Status s = check(lt->cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA,
                                                                &transa, sizeof(transa)),
                             "TRANSA");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = check(lt->cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB,
                                                                &transb, sizeof(transb)),
                             "TRANSB");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = check(lt->cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                                &epilogue, sizeof(epilogue)),
                             "EPILOGUE");
      !s.ok()) {
    return s;
  }
  // Column-major layouts of our row-major operands (see the header).
  struct Layout {
    cublasLtMatrixLayout_t* out;
    uint64_t rows, cols;
    int64_t ld, stride;
    const char* what;
  };
  const Layout layouts[] = {
      {&a_, static_cast<uint64_t>(call.transpose_b ? call.k : call.n),
       static_cast<uint64_t>(call.transpose_b ? call.n : call.k),
       call.transpose_b ? call.k : call.n, call.b_batch_stride, "B's layout"},
      {&b_, static_cast<uint64_t>(call.k), static_cast<uint64_t>(call.m), call.k,
       call.a_batch_stride, "A's layout"},
      {&c_, static_cast<uint64_t>(call.n), static_cast<uint64_t>(call.m), call.n, call.m * call.n,
       "C's layout"},
      {&d_, static_cast<uint64_t>(call.n), static_cast<uint64_t>(call.m), call.n, call.m * call.n,
       "D's layout"},
  };
  for (const Layout& l : layouts) {
    if (absl::Status s =
            check(lt->cublasLtMatrixLayoutCreate(l.out, type, l.rows, l.cols, l.ld), l.what);
        !s.ok()) {
      return s;
    }
    if (call.batch > 1) {
      const int32_t count = static_cast<int32_t>(call.batch);
      const int64_t stride = l.stride;
      if (absl::Status s =
              check(lt->cublasLtMatrixLayoutSetAttribute(*l.out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                         &count, sizeof(count)),
                    l.what);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = check(
              lt->cublasLtMatrixLayoutSetAttribute(
                  *l.out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
              l.what);
          !s.ok()) {
        return s;
      }
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  if (absl::Status s = check(lt->cublasLtMatmulPreferenceCreate(&pref), "preference"); !s.ok()) {
    return s;
  }
  const uint64_t workspace = static_cast<uint64_t>(call.workspace_bytes);
  const int64_t eb = ElementBytes(call.dtype);
  const uint32_t align_a = Alignment(call.b_batch_stride, eb, call.batch);
  const uint32_t align_b = Alignment(call.a_batch_stride, eb, call.batch);
  const uint32_t align_cd = Alignment(call.m * call.n, eb, call.batch);
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_cd},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_cd}};
  absl::Status status =
      check(lt->cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                     &workspace, sizeof(workspace)),
            "workspace preference");
  for (const auto& [attr, value] : aligns) {
    if (!status.ok()) break;
    status = check(lt->cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof(value)),
                   "alignment preference");
  }
  constexpr int kMaxAlgorithms = 8;
  cublasLtMatmulHeuristicResult_t results[kMaxAlgorithms] = {};
  int returned = 0;
  if (status.ok()) {
    status = check(lt->cublasLtMatmulAlgoGetHeuristic(handle, op_, a_, b_, c_, d_, pref,
                                                      std::min(kMaxAlgorithms, call.algo + 1),
                                                      results, &returned),
                   "cublasLtMatmulAlgoGetHeuristic");
  }
  lt->cublasLtMatmulPreferenceDestroy(pref);
  if (!status.ok()) return status;
  if (call.algo >= kMaxAlgorithms || returned <= call.algo) {
    return absl::FailedPreconditionError(
        absl::StrCat("cuBLASLt offers ", returned, " algorithm", returned == 1 ? "" : "s",
                     " for this matmul (", call.m, "x", call.n, "x", call.k, ", ",
                     EpilogueName(call), "); the plan asks for number ", call.algo + 1));
  }
  algo_ = results[call.algo].algo;
  return absl::OkStatus();
}

absl::Status PreparedMatmul::Run(CUdeviceptr a, CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias,
                                 CUdeviceptr d, CUdeviceptr workspace, CUstream stream) {
  if (call_.bias) {
    void* pointer = reinterpret_cast<void*>(bias);
    if (cublasStatus_t st = lt_->cublasLtMatmulDescSetAttribute(
            op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pointer, sizeof(pointer));
        st != CUBLAS_STATUS_SUCCESS) {
      return absl::InternalError(absl::StrCat("bias pointer: ", CublasStatusText(lt_, st)));
    }
  }
  const float alpha = call_.alpha, beta = call_.residual ? 1.0f : 0.0f;
  // cuBLASLt's A is our B and its B our A (the transposed view).
  const cublasStatus_t st = lt_->cublasLtMatmul(
      handle_, op_, &alpha, reinterpret_cast<const void*>(b), a_, reinterpret_cast<const void*>(a),
      b_, &beta, reinterpret_cast<const void*>(c), c_, reinterpret_cast<void*>(d), d_, &algo_,
      reinterpret_cast<void*>(workspace), static_cast<size_t>(call_.workspace_bytes),
      reinterpret_cast<cudaStream_t>(stream));
  if (st != CUBLAS_STATUS_SUCCESS) {
    return absl::InternalError(absl::StrCat("cublasLtMatmul: ", CublasStatusText(lt_, st)));
  }
  return absl::OkStatus();
}

}  // namespace yirage::backends::cuda
