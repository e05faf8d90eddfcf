"""The PyTorch a user would write for every graph of the CPU suite, and a FLOP count
for any graph JSON.

    TORCH_FNS[graph_name](*inputs) -> output, or a tuple of outputs in the
        graph's output order; inputs are PyTorch tensors in the graph's input
        order, of its shapes. On the CPU the benchmark passes float32 copies of
        float16 and bfloat16 inputs (PyTorch CPU eager cannot multiply float16),
        so every function here works on float32 tensors and never casts to a
        16-bit type.
    graph_flops(graph) -> matmul FLOPs (2 * M * N * K per batch element) of a
        graph JSON object (docs/graph-format.md), compound ops included.
    graph_shapes(graph) -> {tensor name: shape} of every graph input and op result.

The graphs are sized for a small x86 host (one call ~0.05 ms to 20 ms on two
cores, at most ~0.5 GFLOP of matmul and ~64 MB of tensors per graph, so that the
float64 reference stays cheap). graph_flops, graph_shapes and rms_norm come from
the GPU suite's examples/graphs/suite/torch_fns.py, imported by path. graph_flops
and graph_shapes need only the standard library; the functions in TORCH_FNS need
torch when called.
"""
import importlib.util
import os

_SUITE_FNS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               os.pardir, "suite", "torch_fns.py")
_spec = importlib.util.spec_from_file_location("yirage_gpu_suite_torch_fns", _SUITE_FNS_PATH)
_suite = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_suite)

torch = _suite.torch
F = _suite.F
rms_norm = _suite.rms_norm  # F.rms_norm where it exists (torch >= 2.4), else by hand
graph_flops = _suite.graph_flops
graph_shapes = _suite.graph_shapes


# ---------------------------------------------------------------- helpers

def matmul(A, B):
    return A @ B


def gated_mlp(X, W_gate, W_up):
    return F.silu(X @ W_gate) * (X @ W_up)


# ---------------------------------------------------------------- the suite

TORCH_FNS = {
    # matmuls
    "cpu_matmul_square_fp32_512": matmul,
    "cpu_matmul_transpose_b_fp32_m256_k1024_n1024": lambda A, B: A @ B.T,
    "cpu_bmm_fp32_b8_m128_k256_n128": lambda A, B: torch.bmm(A, B),
    # GEMM epilogues (W given as [N, K], as nn.Linear holds it)
    "cpu_gemm_bias_relu_fp32_m256_k1024_n1024": lambda X, W, Bias: torch.relu(F.linear(X, W, Bias)),
    "cpu_gemm_scale_residual_fp32_m256_k512_n1024": lambda X, W, R: F.linear(X, W) * 0.5 + R,
    # gated MLP (the fp16 graph runs on float32 copies here)
    "cpu_gated_mlp_decode_fp16_m4_k1024_n2816": gated_mlp,
    "cpu_gated_mlp_fp32_m32_k1024_n2816": gated_mlp,
    # elementwise
    "cpu_gelu_fp32_1024x4096": lambda X: F.gelu(X),
    "cpu_silu_mul_fp32_512x4096": lambda A, B: F.silu(A) * B,
    # normalizations and reductions
    "cpu_softmax_fp32_512x4096": lambda X: torch.softmax(X, dim=-1),
    "cpu_layer_norm_fp32_1024x1024":
        lambda X, W, Bias: F.layer_norm(X, (X.shape[-1],), W, Bias, eps=1e-5),
    "cpu_rms_norm_fp32_1024x4096": lambda X, W: rms_norm(X, W, 1e-6),
    "cpu_reduce_sum_last_fp32_1024x4096": lambda X: torch.sum(X, dim=-1, keepdim=True),
    "cpu_reduce_mean_mid_fp32_32x1024x64": lambda X: torch.mean(X, dim=1),
}


if __name__ == "__main__":
    _suite.print_suite(os.path.dirname(os.path.abspath(__file__)), TORCH_FNS)
