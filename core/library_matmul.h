// Library matmuls: a matmul and the epilogue a vendor GEMM applies in the
// same call (cuBLASLt on CUDA, a BLAS on the CPU), as one KERNEL_LIBRARY
// kernel of a plan:
//
//   D = act(alpha * (A @ B) + C + bias)
//
// alpha a constant (mul or div by a scalar right after the matmul), C a
// tensor of D's shape (residual add), bias a vector over D's columns
// broadcast over its rows, act relu or tanh-approximated gelu. Each part is
// optional; they must come in this order, each op reading the previous one's
// result, which nothing else reads. C and bias are graph inputs (so they are
// in the graph's dtype). The batch dims of A and B must either equal the
// output's or be absent (all ones), so the call is one strided batch.
//
// Every backend whose BackendKernels has a library runs all of this;
// core/ knows only the ops, never the library.
#ifndef YIRAGE_CORE_LIBRARY_MATMUL_H_
#define YIRAGE_CORE_LIBRARY_MATMUL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/graph.h"

namespace yirage::core {

enum class LibraryActivation { kNone, kRelu, kGeluTanh };

struct LibraryMatmul {
  std::vector<int> ops;  // the kernel's ops: the matmul first
  int a = -1;            // tensor ids
  int b = -1;
  int out = -1;  // D: the last op's result
  bool transpose_b = false;
  // One GEMM per batch entry: D[i] (m x n) = A[i] (m x k) @ B[i] (k x n).
  // A's lead dims that B lacks or has as 1 after those they share (B
  // without batch dims, or grouped heads: A [H, G, M, K] by B [H, 1, K, N])
  // are folded into m.
  int64_t batch = 1;
  int64_t m = 0, n = 0, k = 0;
  int64_t a_batch_stride = 0;  // elements between batch entries; 0 = shared
  int64_t b_batch_stride = 0;
  double alpha = 1.0;
  int residual = -1;  // C, a graph input of D's shape, or -1
  int bias = -1;      // a graph input of n elements, or -1
  LibraryActivation activation = LibraryActivation::kNone;
};

// The library matmul that `ops` (ascending op indices) form, or why not:
// InvalidArgument naming the op that does not fit.
absl::StatusOr<LibraryMatmul> MatchLibraryMatmul(const Graph& graph, absl::Span<const int> ops);

// "matmul 1024x8192x8192 (B^T) + bias, relu": for descriptions and manifests.
std::string DescribeLibraryMatmul(const Graph& graph, const LibraryMatmul& lm);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_LIBRARY_MATMUL_H_
