// Device code for Hopper's warpgroup MMA (wgmma.mma_async, sm_90a), shared
// by the kernels that use it (the streamed matmul's kWgmma form, fused
// attention's warpgroup and prefill forms). Operands in shared memory are described by
// 64-bit matrix descriptors; every tile they read is stored with the
// 128-byte swizzle that yr_swz<64> gives rows of 64 16-bit elements, from a
// 1024-byte boundary.
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_WGMMA_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_WGMMA_H_

namespace yirage::backends::cuda {

// Guarded helpers (emit before the first kernel that uses them; repeats
// are harmless): yr_wg_desc(ptr, lbo, sbo) (128-byte swizzle),
// yr_wg_fence(), yr_wg_commit(), yr_wg_wait<N>(), yr_fence_proxy_async()
// and yr_wg_fence_operands(d, n), which keeps the compiler from touching
// accumulators d[0..n) across a wait (n a compile-time constant once
// inlined, so that d stays in registers).
const char* WgmmaHelpersSource();

// wgmma_ops.cuh: the templates yr_wgmma_ss / yr_wgmma_rs (guarded; after
// WgmmaHelpersSource()).
const char* WgmmaOpsSource();

}  // namespace yirage::backends::cuda

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_WGMMA_H_
