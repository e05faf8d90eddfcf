#include "backends/cuda/cuda_wgmma.h"

#include "absl/strings/str_cat.h"

namespace yirage::backends::cuda {

const char* WgmmaHelpersSource() {
  // backends/cuda/wgmma_helpers.cuh, embedded at build time (cmake/embed_text.cmake).
  return
#include "cuda_wgmma_helpers.inc"
      ;
}

const char* WgmmaOpsSource() {
  // backends/cuda/wgmma_ops.cuh, embedded at build time.
  return
#include "cuda_wgmma_ops.inc"
      ;
}

std::string WgmmaOpName(int n, bool bf16, bool a_in_registers, bool b_n_major) {
  return absl::StrCat(a_in_registers ? "yr_wgmma_rs<" : "yr_wgmma_ss<", n, ", ",
                      bf16 ? "__nv_bfloat16" : "__half", ", ", b_n_major ? "true" : "false", ">");
}

}  // namespace yirage::backends::cuda
