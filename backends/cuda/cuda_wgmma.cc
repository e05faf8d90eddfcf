#include "backends/cuda/cuda_wgmma.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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
  return absl::StrCat("yr_wgmma_m64n", n, bf16 ? "_bf16" : "_f16", a_in_registers ? "_rs" : "_ss",
                      b_n_major ? "_bn" : "_bk");
}

std::string WgmmaOpSource(int n, bool bf16, bool a_in_registers, bool b_n_major) {
  const std::string name = WgmmaOpName(n, bf16, a_in_registers, b_n_major);
  const char* t = bf16 ? "bf16" : "f16";
  const int nd = n / 2;  // accumulators a thread
  std::vector<std::string> regs, operands;
  for (int i = 0; i < nd; ++i) {
    regs.push_back(absl::StrCat("%", i));
    operands.push_back(absl::StrCat("\"+f\"(d[", i, "])"));
  }
  // Operands after the accumulators: A (descriptor, or 4 registers), B's
  // descriptor, the scale-d predicate's source.
  const int a0 = nd;
  const std::string a_operand =
      a_in_registers ? absl::StrCat("{%", a0, ", %", a0 + 1, ", %", a0 + 2, ", %", a0 + 3, "}")
                     : absl::StrCat("%", a0);
  const int b = a_in_registers ? a0 + 4 : a0 + 1;
  // Immediates: scale-a, scale-b, then (A in shared memory) A's transpose
  // (0: K-major) and B's (1: N-major).
  const std::string imms =
      absl::StrCat("1, 1, ", a_in_registers ? "" : "0, ", b_n_major ? "1" : "0");
  const std::string inputs =
      a_in_registers ? "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(b), \"r\"(1)"
                     : "\"l\"(a), \"l\"(b), \"r\"(1)";
  return absl::StrCat(
      "#ifndef ", name, "_DEFINED\n#define ", name, "_DEFINED\n",
      "static __device__ __forceinline__ void ", name, "(float* d, ",
      a_in_registers ? "const unsigned* a" : "unsigned long long a", ", unsigned long long b) {\n",
      "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %", b + 1, ", 0;\\n\"\n",
      "      \"wgmma.mma_async.sync.aligned.m64n", n, "k16.f32.", t, ".", t, " {",
      absl::StrJoin(regs, ","), "}, ", a_operand, ", %", b, ", p, ", imms, ";\\n}\\n\"\n",
      "      : ", absl::StrJoin(operands, ", "), "\n      : ", inputs, ");\n}\n#endif\n");
}

}  // namespace yirage::backends::cuda
