// Hopper warpgroup MMA (wgmma.mma_async, sm_90a) as templates, for the
// device code in .cuh files and the kernels the backend generates:
// D (64 x N, float) += A (64 x 16) * B (16 x N).
//   yr_wgmma_ss<N, T, B_MN_MAJOR>(d, a_desc, b_desc[, accumulate]): A and B
//     in shared memory, described by matrix descriptors (yr_wg_desc); A
//     K-major.
//   yr_wgmma_rs<N, T, B_MN_MAJOR>(d, a, b_desc[, accumulate]): A from
//     registers, each warp's 16 rows as the four m16n8k16 A fragments.
// T is __half or __nv_bfloat16, or float (TF32, k8 steps, ss with B
// K-major only). B is K-major (rows of K contiguous) unless
// B_MN_MAJOR (rows of N contiguous). `accumulate` false overwrites D.
// d holds N / 2 floats a thread in the m64nNk16 accumulator layout (the
// m16n8 layout of each warp's 16 rows, N / 8 tiles of 4). N is 64, 128 or 256,
// or 80 or 176 for 16-bit types.
// REQUIRES: wgmma_helpers.cuh before this file (yr_wg_desc and the fences).
#ifndef YR_WGMMA_OPS
#define YR_WGMMA_OPS
template <int N, typename T, bool B_MN_MAJOR>
struct yr_wgmma_op;

// The accumulator registers of m64nNk16 as asm operands %0 .. %(N/2 - 1)
// (YR_WG_REGS_N) and their constraints (YR_WG_D_N), each N's list the
// smaller N's followed by more chunks of 8 (YR_WG_Rc: operands 8c .. 8c + 7
// in the instruction's text, YR_WG_Cc: their "+f" constraints).
// clang-format off
#define YR_WG_R0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define YR_WG_R1 "%8, %9, %10, %11, %12, %13, %14, %15"
#define YR_WG_R2 "%16, %17, %18, %19, %20, %21, %22, %23"
#define YR_WG_R3 "%24, %25, %26, %27, %28, %29, %30, %31"
#define YR_WG_R4 "%32, %33, %34, %35, %36, %37, %38, %39"
#define YR_WG_R5 "%40, %41, %42, %43, %44, %45, %46, %47"
#define YR_WG_R6 "%48, %49, %50, %51, %52, %53, %54, %55"
#define YR_WG_R7 "%56, %57, %58, %59, %60, %61, %62, %63"
#define YR_WG_R8 "%64, %65, %66, %67, %68, %69, %70, %71"
#define YR_WG_R9 "%72, %73, %74, %75, %76, %77, %78, %79"
#define YR_WG_R10 "%80, %81, %82, %83, %84, %85, %86, %87"
#define YR_WG_R11 "%88, %89, %90, %91, %92, %93, %94, %95"
#define YR_WG_R12 "%96, %97, %98, %99, %100, %101, %102, %103"
#define YR_WG_R13 "%104, %105, %106, %107, %108, %109, %110, %111"
#define YR_WG_R14 "%112, %113, %114, %115, %116, %117, %118, %119"
#define YR_WG_R15 "%120, %121, %122, %123, %124, %125, %126, %127"
#define YR_WG_C0 "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
#define YR_WG_C1 "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define YR_WG_C2 "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23])
#define YR_WG_C3 "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define YR_WG_C4 "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define YR_WG_C5 "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47])
#define YR_WG_C6 "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55])
#define YR_WG_C7 "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define YR_WG_C8 "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
#define YR_WG_C9 "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
#define YR_WG_C10 "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
#define YR_WG_C11 "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
#define YR_WG_C12 "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103])
#define YR_WG_C13 "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111])
#define YR_WG_C14 "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119])
#define YR_WG_C15 "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
#define YR_WG_L_64 YR_WG_R0 ", " YR_WG_R1 ", " YR_WG_R2 ", " YR_WG_R3
#define YR_WG_D_64 YR_WG_C0, YR_WG_C1, YR_WG_C2, YR_WG_C3
#define YR_WG_REGS_64 "{" YR_WG_L_64 "}"
#define YR_WG_L_80 YR_WG_L_64 ", " YR_WG_R4
#define YR_WG_D_80 YR_WG_D_64, YR_WG_C4
#define YR_WG_REGS_80 "{" YR_WG_L_80 "}"
#define YR_WG_L_128 YR_WG_L_80 ", " YR_WG_R5 ", " YR_WG_R6 ", " YR_WG_R7
#define YR_WG_D_128 YR_WG_D_80, YR_WG_C5, YR_WG_C6, YR_WG_C7
#define YR_WG_REGS_128 "{" YR_WG_L_128 "}"
#define YR_WG_L_176 YR_WG_L_128 ", " YR_WG_R8 ", " YR_WG_R9 ", " YR_WG_R10
#define YR_WG_D_176 YR_WG_D_128, YR_WG_C8, YR_WG_C9, YR_WG_C10
#define YR_WG_REGS_176 "{" YR_WG_L_176 "}"
#define YR_WG_L_256 YR_WG_L_176 ", " YR_WG_R11 ", " YR_WG_R12 ", " YR_WG_R13 ", " YR_WG_R14 ", " YR_WG_R15
#define YR_WG_D_256 YR_WG_D_176, YR_WG_C11, YR_WG_C12, YR_WG_C13, YR_WG_C14, YR_WG_C15
#define YR_WG_REGS_256 "{" YR_WG_L_256 "}"
// clang-format on

// One specialization: the instruction for N and the type (TS: "f16" or
// "bf16"); the operands after the N / 2 accumulators are numbered from ND.
// ss: A's descriptor %ND, B's %ND+1, scale-d %ND+2, B's transpose %ND+3.
// rs: A's registers %ND .. %ND+3, B's descriptor %ND+4, scale-d %ND+5, B's
// transpose %ND+6. (Operand numbers are spelled out: asm strings are
// literals.)
#define YR_WGMMA_OP(N, T, TS, SS_A, SS_B, SS_SC, SS_TB, RS_A, RS_B, RS_SC, RS_TB)               \
  template <bool B_MN_MAJOR>                                                                    \
  struct yr_wgmma_op<N, T, B_MN_MAJOR> {                                                        \
    static __device__ __forceinline__ void ss(float* d, unsigned long long a,                   \
                                              unsigned long long b, int scale_d) {              \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SS_SC ", 0;\n"                        \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TS "." TS " " YR_WG_REGS_##N \
                   ", %" #SS_A ", %" #SS_B ", p, 1, 1, 0, %" #SS_TB ";\n}\n"                     \
                   : YR_WG_D_##N                                                                \
                   : "l"(a), "l"(b), "r"(scale_d), "n"(B_MN_MAJOR ? 1 : 0));                    \
    }                                                                                           \
    static __device__ __forceinline__ void rs(float* d, const unsigned* a,                      \
                                              unsigned long long b, int scale_d) {              \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #RS_SC ", 0;\n"                        \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TS "." TS " " YR_WG_REGS_##N \
                   ", " RS_A ", %" #RS_B ", p, 1, 1, %" #RS_TB ";\n}\n"                          \
                   : YR_WG_D_##N                                                                \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(scale_d),          \
                     "n"(B_MN_MAJOR ? 1 : 0));                                                  \
    }                                                                                           \
  };
YR_WGMMA_OP(64, __half, "f16", 32, 33, 34, 35, "{%32, %33, %34, %35}", 36, 37, 38)
YR_WGMMA_OP(64, __nv_bfloat16, "bf16", 32, 33, 34, 35, "{%32, %33, %34, %35}", 36, 37, 38)
YR_WGMMA_OP(128, __half, "f16", 64, 65, 66, 67, "{%64, %65, %66, %67}", 68, 69, 70)
YR_WGMMA_OP(128, __nv_bfloat16, "bf16", 64, 65, 66, 67, "{%64, %65, %66, %67}", 68, 69, 70)
YR_WGMMA_OP(80, __half, "f16", 40, 41, 42, 43, "{%40, %41, %42, %43}", 44, 45, 46)
YR_WGMMA_OP(80, __nv_bfloat16, "bf16", 40, 41, 42, 43, "{%40, %41, %42, %43}", 44, 45, 46)
YR_WGMMA_OP(176, __half, "f16", 88, 89, 90, 91, "{%88, %89, %90, %91}", 92, 93, 94)
YR_WGMMA_OP(176, __nv_bfloat16, "bf16", 88, 89, 90, 91, "{%88, %89, %90, %91}", 92, 93, 94)
YR_WGMMA_OP(256, __half, "f16", 128, 129, 130, 131, "{%128, %129, %130, %131}", 132, 133, 134)
YR_WGMMA_OP(256, __nv_bfloat16, "bf16", 128, 129, 130, 131, "{%128, %129, %130, %131}", 132, 133, 134)
#undef YR_WGMMA_OP

// float in shared memory as TF32 (m64nNk8: a k8 step is 32 bytes, as a k16
// step of 16-bit types): both operands K-major, the instruction has no
// transpose; ss only.
#define YR_WGMMA_TF32(N, SS_A, SS_B, SS_SC)                                                     \
  template <>                                                                                   \
  struct yr_wgmma_op<N, float, false> {                                                         \
    static __device__ __forceinline__ void ss(float* d, unsigned long long a,                   \
                                              unsigned long long b, int scale_d) {              \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SS_SC ", 0;\n"                        \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " YR_WG_REGS_##N      \
                   ", %" #SS_A ", %" #SS_B ", p, 1, 1;\n}\n"                                     \
                   : YR_WG_D_##N                                                                \
                   : "l"(a), "l"(b), "r"(scale_d));                                             \
    }                                                                                           \
  };
YR_WGMMA_TF32(64, 32, 33, 34)
YR_WGMMA_TF32(128, 64, 65, 66)
YR_WGMMA_TF32(256, 128, 129, 130)
#undef YR_WGMMA_TF32

template <int N, typename T, bool B_MN_MAJOR>
static __device__ __forceinline__ void yr_wgmma_ss(float* d, unsigned long long a,
                                                   unsigned long long b, bool accumulate = true) {
  yr_wgmma_op<N, T, B_MN_MAJOR>::ss(d, a, b, accumulate ? 1 : 0);
}
template <int N, typename T, bool B_MN_MAJOR>
static __device__ __forceinline__ void yr_wgmma_rs(float* d, const unsigned* a,
                                                   unsigned long long b, bool accumulate = true) {
  yr_wgmma_op<N, T, B_MN_MAJOR>::rs(d, a, b, accumulate ? 1 : 0);
}
#endif
