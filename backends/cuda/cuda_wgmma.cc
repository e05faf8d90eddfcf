#include "backends/cuda/cuda_wgmma.h"

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

}  // namespace yirage::backends::cuda
