// The tensor-core rate of mma.sync.m16n8k16 (fp16 in, fp32 accumulate) on
// this GPU (bench/micro/run.sh): every warp runs 8 independent accumulator
// chains from registers, at 4, 8 and 16 warps per SM. The CUDA backend's
// fused kernels are built on this instruction.
#include <cuda_fp16.h>

#include <cstdio>
__device__ __forceinline__ void mma(float* c, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
template <int ACC>
__global__ void k(float* out, int iters) {
  unsigned a[4] = {threadIdx.x, threadIdx.x * 3u, 7u, 9u}, b[2] = {threadIdx.x * 5u, 11u};
  float c[ACC][4] = {};
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < ACC; ++j) mma(c[j], a, b);
  }
  float s = 0;
  for (int j = 0; j < ACC; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == 1.2345f) out[0] = s;
}
int main() {
  float* out;
  cudaMalloc(&out, 4);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  for (int wpsm : {4, 8, 16}) {
    int iters = 4096;
    int blocks = sms * wpsm / 4;
    k<8><<<blocks, 128>>>(out, 16);
    cudaEventRecord(e0);
    k<8><<<blocks, 128>>>(out, iters);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    double flops = (double)blocks * 4 * iters * 8 * 4096;
    printf("mma.sync f16->f32, %2d warps/SM, 8 acc: %.1f TFLOPS  (%.2f clk/mma/SMSP at 1.98 GHz)\n",
           wpsm, flops / ms / 1e9, ms * 1e-3 * 1.98e9 / ((double)iters * 8 * wpsm / 4));
  }
}
