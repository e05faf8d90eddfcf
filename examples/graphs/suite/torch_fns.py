"""The PyTorch a user would write for every graph of this suite, and a FLOP count
for any graph JSON.

    TORCH_FNS[graph_name](*inputs) -> output, or a tuple of outputs in the
        graph's output order; inputs are PyTorch tensors in the graph's input
        order, of its shapes and dtypes.
    graph_flops(graph) -> matmul FLOPs (2 * M * N * K per batch element) of a
        graph JSON object (docs/graph-format.md), compound ops included.
    graph_shapes(graph) -> {tensor name: shape} of every graph input and op result.

bench/cuda_vs_torch.py imports this file by path. graph_flops and graph_shapes
need only the standard library; the functions in TORCH_FNS need torch when called.
"""
import math

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # graph_flops and graph_shapes still work
    torch = F = None


# ---------------------------------------------------------------- helpers

def rms_norm(x, weight, eps):
    """F.rms_norm (torch >= 2.4) or the same formula by hand: x / sqrt(mean(x^2) + eps) * weight."""
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps=eps)
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.float()).to(x.dtype)


def _torch_version():
    if torch is None:
        return (0, 0)
    parts = torch.__version__.split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


# SDPA's enable_gqa argument exists from torch 2.5 on.
_SDPA_GQA = _torch_version() >= (2, 5)


def gqa_decode(Q, K, V):
    """One decode step of grouped-query attention. The graph's Q is
    [B, Hkv, G, D] (G query heads per KV head), which is memory-identical to
    torch's [B, H, 1, D] (head h = kv * G + g reads KV head h // G); K, V are
    [B, Hkv, N, D]. Non-causal (one query), scale 1/sqrt(D) (SDPA's default,
    the graph's default)."""
    b, hkv, g, d = Q.shape
    q = Q.reshape(b, hkv * g, 1, d)
    if _SDPA_GQA:
        o = F.scaled_dot_product_attention(q, K, V, enable_gqa=True)
    else:
        o = F.scaled_dot_product_attention(q, K.repeat_interleave(g, dim=1),
                                           V.repeat_interleave(g, dim=1))
    return o.reshape(b, hkv, g, d)


def gqa_prefill(Q, K, V):
    """Grouped-query attention at prefill, non-causal. The graph's Q is
    [Hkv, G, N, D] (one sequence: G query heads per KV head, in torch's head
    order h = kv * G + g), K and V [Hkv, 1, N, D]; torch's [1, H, N, D]
    and [1, Hkv, N, D] are the same memory. Scale 1/sqrt(D)."""
    hkv, g, n, d = Q.shape
    q = Q.reshape(1, hkv * g, n, d)
    k = K.reshape(1, hkv, K.shape[2], d)
    v = V.reshape(1, hkv, V.shape[2], V.shape[3])
    if _SDPA_GQA:
        o = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    else:
        o = F.scaled_dot_product_attention(q, k.repeat_interleave(g, dim=1),
                                           v.repeat_interleave(g, dim=1))
    return o.reshape(hkv, g, n, v.shape[3])


def attention(Q, K, V):
    """Non-causal attention over [B, H, N, D] tensors, scale 1/sqrt(D)."""
    return F.scaled_dot_product_attention(Q, K, V)


def matmul(A, B):
    return A @ B


def linear(X, W):
    """X @ W^T with W given as [N, K] (the graph's transpose_b)."""
    return F.linear(X, W)


def gated_mlp(X, W_gate, W_up):
    return F.silu(X @ W_gate) * (X @ W_up)


def gated_mlp_down(X, W_gate, W_up, W_down):
    return (F.silu(X @ W_gate) * (X @ W_up)) @ W_down


def rmsnorm_residual(eps):
    def fn(X, R, W):
        h = X + R
        return h, rms_norm(h, W, eps)
    return fn


# ---------------------------------------------------------------- the suite

TORCH_FNS = {
    # KernelBench level 1
    "kb1_matmul_square_fp16_4096": matmul,
    "kb1_matmul_square_bf16_4096": matmul,
    "kb1_matmul_square_fp32_2048": matmul,
    "kb1_matmul_tall_skinny_fp16_m16384_k1024_n128": matmul,
    "kb1_matmul_wide_k_fp16_m64_k16384_n4096": matmul,
    "kb1_bmm_fp16_b32_m512_k1024_n512": lambda A, B: torch.bmm(A, B),
    "kb1_matmul_transpose_b_bf16_m2048_k4096_n8192": lambda A, B: A @ B.T,
    "kb1_relu_fp16_16x16384x1024": lambda X: torch.relu(X),
    "kb1_gelu_fp16_4096x16384": lambda X: F.gelu(X),
    "kb1_gelu_tanh_bf16_4096x16384": lambda X: F.gelu(X, approximate="tanh"),
    "kb1_silu_bf16_4096x16384": lambda X: F.silu(X),
    "kb1_sigmoid_fp16_4096x16384": lambda X: torch.sigmoid(X),
    "kb1_tanh_fp16_16x16384x1024": lambda X: torch.tanh(X),
    "kb1_reduce_sum_last_fp16_4096x16384": lambda X: torch.sum(X, dim=-1, keepdim=True),
    "kb1_reduce_sum_mid_fp16_128x4096x256": lambda X: torch.sum(X, dim=1, keepdim=True),
    "kb1_reduce_mean_last_bf16_4096x16384": lambda X: torch.mean(X, dim=-1),
    "kb1_reduce_mean_mid_fp32_128x4096x256": lambda X: torch.mean(X, dim=1),
    "kb1_reduce_max_last_fp16_4096x16384": lambda X: torch.amax(X, dim=-1, keepdim=True),
    "kb1_reduce_max_mid_bf16_128x4096x256": lambda X: torch.amax(X, dim=1),
    "kb1_softmax_fp16_4096x8192": lambda X: torch.softmax(X, dim=-1),
    "kb1_softmax_bf16_8x32x1024x1024": lambda X: torch.softmax(X, dim=-1),
    "kb1_layer_norm_bf16_8192x4096":
        lambda X, W, Bias: F.layer_norm(X, (X.shape[-1],), W, Bias, eps=1e-5),
    "kb1_rms_norm_fp16_8192x4096": lambda X, W: rms_norm(X, W, 1e-6),
    # KernelBench level 2
    "kb2_gemm_bias_relu_fp16_m1024_k8192_n8192": lambda X, W, Bias: torch.relu(F.linear(X, W, Bias)),
    "kb2_gemm_div_gelu_fp16_m128_k4096_n16384": lambda X, W: F.gelu((X @ W) / 2.0),
    "kb2_gemm_scale_residual_bf16_m2048_k4096_n4096": lambda X, W, R: F.linear(X, W) * 0.5 + R,
    "kb2_gemm_layernorm_fp16_m2048_k4096_n4096":
        lambda X, W, G, Bias: F.layer_norm(X @ W, (W.shape[-1],), G, Bias, eps=1e-5),
    "kb2_gemm_softmax_fp16_m1024_k4096_n8192": lambda X, W: torch.softmax(F.linear(X, W), dim=-1),
    "kb2_gemm_bias_gelu_tanh_fp32_m512_k4096_n4096":
        lambda X, W, Bias: F.gelu(F.linear(X, W, Bias), approximate="tanh"),
    # KernelBench level 2, 59_Matmul_Swish_Scaling (nn.Linear, x * sigmoid(x), * 2.0)
    "kb2_gemm_swish_scale_fp32_m1024_k8192_n8192":
        lambda X, W, Bias: F.silu(F.linear(X, W, Bias)) * 2.0,
    # LLM blocks: Llama-3-8B, Qwen2.5-7B, Mixtral-8x7B
    "llama3_8b_qkv_decode_m16": matmul,
    "llama3_8b_qkv_prefill_m2048": matmul,
    "qwen25_7b_qkv_bias_decode_m8": lambda X, W, b: F.linear(X, W, b),
    "qwen25_7b_qkv_bias_prefill_m1024": lambda X, W, b: F.linear(X, W, b),
    "llama3_8b_gated_mlp_decode_m16": gated_mlp,
    "llama3_8b_gated_mlp_prefill_m1024": gated_mlp,
    "qwen25_7b_gated_mlp_decode_m4": gated_mlp,
    "qwen25_7b_gated_mlp_prefill_m512": gated_mlp,
    "llama3_8b_down_proj_decode_m16": matmul,
    "llama3_8b_down_proj_prefill_m2048": matmul,
    "qwen25_7b_down_proj_decode_m32": matmul,
    "mixtral_8x7b_expert_mlp_m64": gated_mlp_down,
    "mixtral_8x7b_expert_mlp_m1024": gated_mlp_down,
    "llama3_8b_rmsnorm_residual_decode_m16": rmsnorm_residual(1e-5),
    "llama3_8b_rmsnorm_residual_prefill_m4096": rmsnorm_residual(1e-5),
    "qwen25_7b_rmsnorm_residual_prefill_m2048": rmsnorm_residual(1e-6),
    "llama3_8b_attention_prefill_h32_n1024_fp16": attention,
    "llama3_8b_attention_prefill_h32_n2048_bf16": attention,
    # Head dim 256 (Gemma-2 9B, K and V repeated to the 16 query heads), a
    # prompt of 1000 tokens: no whole 64- or 128-key tiles.
    "gemma2_9b_attention_prefill_h16_n1000_d256_bf16": attention,
    # Grouped queries as the model has them (32 query heads over 8 KV heads):
    # the graph broadcasts K and V over the group dim.
    "llama3_8b_gqa_prefill_h32_kv8_n1024_bf16": gqa_prefill,
    "llama3_8b_gqa_decode_b1_n8192": gqa_decode,
    "llama3_8b_gqa_decode_b16_n2048": gqa_decode,
    "qwen25_7b_gqa_decode_b8_n4096": gqa_decode,
    "silu_mul_fp16_256x14336": lambda A, B: F.silu(A) * B,
    # Sampling at decode: float32 logits over the vocabulary, temperature 0.7
    "llama3_8b_sampling_softmax_b1": lambda X: torch.softmax(X * (1 / 0.7), dim=-1),
    "qwen25_7b_sampling_softmax_b8": lambda X: torch.softmax(X * (1 / 0.7), dim=-1),
}


# ---------------------------------------------------------------- FLOPs and shapes

_UNARY = {"neg", "exp", "log", "sqrt", "rsqrt", "square", "abs", "relu", "sigmoid", "tanh",
          "silu", "gelu"}
_BINARY = {"add", "sub", "mul", "div", "maximum", "minimum", "pow"}
_REDUCE = {"reduce_sum", "reduce_mean", "reduce_max"}
_SAME_SHAPE = {"rms_norm", "layer_norm", "softmax"}


def _broadcast(a, b):
    a, b = list(a), list(b)
    n = max(len(a), len(b))
    a = [1] * (n - len(a)) + a
    b = [1] * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return out


def _matmul(a, b, transpose_b=False):
    """(result shape, FLOPs) of matmul(a, b) as docs/graph-format.md defines it."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"matmul operands need rank >= 2 (got {a} and {b})")
    m, k = a[-2], a[-1]
    kb, n = (b[-1], b[-2]) if transpose_b else (b[-2], b[-1])
    if k != kb:
        raise ValueError(f"matmul contracted dims differ ({k} vs {kb}) in {a} x {b}")
    batch = _broadcast(a[:-2], b[:-2]) if (len(a) > 2 or len(b) > 2) else []
    return batch + [m, n], 2 * m * n * k * math.prod(batch)


def _op_shape(kind, shapes, attrs):
    """(result shape, matmul FLOPs) of one op, compound ops included."""
    a = list(shapes[0])
    if kind == "matmul":
        return _matmul(a, shapes[1], bool(attrs.get("transpose_b", False)))
    if kind in _BINARY:
        return (_broadcast(a, shapes[1]) if len(shapes) > 1 else a), 0
    if kind in _UNARY or kind in _SAME_SHAPE:
        return a, 0
    if kind in _REDUCE:
        axis = attrs.get("axis", -1) % len(a)
        if attrs.get("keepdim", True):
            return a[:axis] + [1] + a[axis + 1:], 0
        return a[:axis] + a[axis + 1:], 0
    if kind == "concat":
        axis = attrs["axis"] % len(a)
        a[axis] = sum(s[axis] for s in shapes)
        return a, 0
    if kind == "slice":
        axis = attrs["axis"] % len(a)
        a[axis] = attrs["end"] - attrs.get("start", 0)
        return a, 0
    if kind == "gated_mlp":
        gate, f1 = _matmul(a, shapes[1])
        up, f2 = _matmul(a, shapes[2])
        if len(shapes) > 3:
            out, f3 = _matmul(_broadcast(gate, up), shapes[3])
            return out, f1 + f2 + f3
        return _broadcast(gate, up), f1 + f2
    if kind == "rms_norm_linear":
        return _matmul(a, shapes[1], bool(attrs.get("transpose_b", False)))
    if kind in ("gemm_softmax", "gemm_layernorm"):
        return _matmul(a, shapes[1], bool(attrs.get("transpose_b", False)))
    if kind == "self_attention":
        scores, f1 = _matmul(a, shapes[1], True)
        out, f2 = _matmul(scores, shapes[2])
        return out, f1 + f2
    raise ValueError(f"unknown op '{kind}'")


def _walk(graph):
    """Shapes of all tensors and the total matmul FLOPs; ops may be listed in any order."""
    shapes = {t["name"]: list(t["shape"]) for t in graph["inputs"]}
    pending = list(graph["ops"])
    flops = 0
    while pending:
        ready = [o for o in pending if all(i in shapes for i in o["inputs"])]
        if not ready:
            raise ValueError("ops refer to unknown tensors or form a cycle: "
                             + ", ".join(o["name"] for o in pending))
        for o in ready:
            shape, f = _op_shape(o["op"], [shapes[i] for i in o["inputs"]], o.get("attrs", {}))
            shapes[o["name"]] = shape
            flops += f
        pending = [o for o in pending if o["name"] not in shapes]
    return shapes, flops


def graph_shapes(graph):
    """{tensor name: shape} for every graph input and op result of a graph JSON object."""
    return _walk(graph)[0]


def graph_flops(graph):
    """Matmul FLOPs of a graph JSON object: 2 * M * N * K times the broadcast batch
    size, for every matmul, those inside compound ops (gated_mlp, rms_norm_linear,
    gemm_softmax, gemm_layernorm, self_attention) included. Elementwise work,
    norms and softmax are not counted."""
    return _walk(graph)[1]


def print_suite(folder, fns):
    """Lists the graphs of `folder` (name, matmul GFLOP, inputs), marking those
    without a function in `fns`."""
    import glob
    import json
    import os
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            g = json.load(f)
        shapes = " ".join(f"{t['name']}{t['shape']}" for t in g["inputs"])
        print(f"{g['name']:<52} {graph_flops(g) / 1e9:10.3f} GFLOP  {shapes}"
              + ("" if g["name"] in fns else "  (no torch function)"))


if __name__ == "__main__":
    import os
    print_suite(os.path.dirname(os.path.abspath(__file__)), TORCH_FNS)
