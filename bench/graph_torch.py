#!/usr/bin/env python3
"""The PyTorch a user writes for any graph of docs/graph-format.md: each op as
the torch call that computes it (torch.matmul, F.silu, torch.softmax,
F.layer_norm, ...), in the graph's dtypes, so that graphs without a
hand-written function (bench/random_graphs.py, a user's own) are timed
against eager and torch.compile like the suite's.

    fn = torch_fn(graph_json)      # fn(*inputs in graph input order) -> tuple of outputs

Compound ops (gated_mlp, rms_norm_linear, gemm_softmax, gemm_layernorm,
self_attention) run as their expansion says. Norms and softmax compute in
the input's dtype as PyTorch's own kernels do (float accumulation inside);
a weight that is not a plain vector over the normalized axis is applied
after the norm.

    python3 bench/graph_torch.py GRAPH.json...   # runs each on the CPU, prints output shapes
    python3 bench/graph_torch.py --check DIR...   # against DIR/torch_fns.py's TORCH_FNS

--check runs every graph of each DIR that has a hand-written function in the
torch_fns.py beside it through both, in float32 on the CPU, and fails on a
difference above 1e-4 of the output's largest magnitude.
"""
import json
import math
import sys

import torch
import torch.nn.functional as F

UNARY = {
    "neg": torch.neg,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "rsqrt": torch.rsqrt,
    "square": torch.square,
    "abs": torch.abs,
    "relu": F.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "silu": F.silu,
}
BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "pow": torch.pow,
}
ACTIVATIONS = {
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def _matmul(a, b, transpose_b=False):
    return torch.matmul(a, b.transpose(-1, -2) if transpose_b else b)


def _rms_norm(x, weight, axis, eps):
    if axis in (-1, x.dim() - 1) and hasattr(F, "rms_norm") and (
            weight is None or weight.numel() == x.shape[-1]):
        w = None if weight is None else weight.reshape(x.shape[-1])
        return F.rms_norm(x, (x.shape[-1],), w, eps)
    y = x * torch.rsqrt(x.float().pow(2).mean(axis, keepdim=True) + eps).to(x.dtype)
    return y if weight is None else y * weight


def _layer_norm(x, weight, bias, axis, eps):
    n = x.shape[axis]
    last = axis in (-1, x.dim() - 1)
    vector = all(t is None or t.numel() == n for t in (weight, bias))
    if last and vector:
        return F.layer_norm(x, (n,), None if weight is None else weight.reshape(n),
                            None if bias is None else bias.reshape(n), eps)
    if last:
        y = F.layer_norm(x, (n,), eps=eps)
    else:
        xf = x.float()
        mean = xf.mean(axis, keepdim=True)
        var = (xf - mean).pow(2).mean(axis, keepdim=True)
        y = ((xf - mean) * torch.rsqrt(var + eps)).to(x.dtype)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def _reduce(kind, x, axis, keepdim):
    if kind == "reduce_sum":
        return x.sum(axis, keepdim=keepdim)
    if kind == "reduce_mean":
        return x.mean(axis, keepdim=keepdim)
    return x.amax(axis, keepdim=keepdim)


def _apply(op, args, attrs, env, name):
    """Computes one op into env (compound ops put their parts there too)."""
    a = attrs.get
    if op in UNARY:
        env[name] = UNARY[op](args[0])
    elif op == "gelu":
        env[name] = F.gelu(args[0], approximate="tanh" if a("approximate") == "tanh" else "none")
    elif op in BINARY:
        if "scalar" in attrs:
            env[name] = BINARY[op](args[0], float(attrs["scalar"])) if op not in (
                "maximum", "minimum") else BINARY[op](
                    args[0], torch.tensor(float(attrs["scalar"]), dtype=args[0].dtype,
                                          device=args[0].device))
        else:
            env[name] = BINARY[op](args[0], args[1])
    elif op == "matmul":
        env[name] = _matmul(args[0], args[1], bool(a("transpose_b", False)))
    elif op in ("reduce_sum", "reduce_mean", "reduce_max"):
        env[name] = _reduce(op, args[0], int(a("axis", -1)), bool(a("keepdim", True)))
    elif op == "rms_norm":
        env[name] = _rms_norm(args[0], args[1] if len(args) > 1 else None, int(a("axis", -1)),
                              float(a("eps", 1e-6)))
    elif op == "layer_norm":
        env[name] = _layer_norm(args[0], args[1] if len(args) > 1 else None,
                                args[2] if len(args) > 2 else None, int(a("axis", -1)),
                                float(a("eps", 1e-5)))
    elif op == "softmax":
        env[name] = torch.softmax(args[0], int(a("axis", -1)))
    elif op == "concat":
        env[name] = torch.cat(args, int(attrs["axis"]))
    elif op == "slice":
        axis = int(attrs["axis"])
        start = int(a("start", 0))
        env[name] = args[0].narrow(axis, start, int(attrs["end"]) - start)
    elif op == "gated_mlp":
        act = ACTIVATIONS[a("activation", "silu")]
        hidden = act(args[0] @ args[1]) * (args[0] @ args[2])
        env[name] = hidden @ args[3] if len(args) > 3 else hidden
    elif op == "rms_norm_linear":
        norm = _rms_norm(args[0], args[2] if len(args) > 2 else None, -1, float(a("eps", 1e-6)))
        env[name] = _matmul(norm, args[1], bool(a("transpose_b", False)))
    elif op == "gemm_softmax":
        y = _matmul(args[0], args[1], bool(a("transpose_b", False)))
        if "scale" in attrs:
            y = y * float(attrs["scale"])
        env[name] = torch.softmax(y, -1)
    elif op == "gemm_layernorm":
        y = _matmul(args[0], args[1], bool(a("transpose_b", False)))
        env[name] = _layer_norm(y, args[2] if len(args) > 2 else None,
                                args[3] if len(args) > 3 else None, -1, float(a("eps", 1e-5)))
    elif op == "self_attention":
        q, k, v = args
        scale = float(attrs["scale"]) if "scale" in attrs else 1.0 / math.sqrt(q.shape[-1])
        s = _matmul(q, k, True) * scale
        env[name] = torch.softmax(s, -1) @ v
    else:
        raise ValueError(f"op '{name}': no PyTorch form for op '{op}'")


def _order(graph):
    """The graph's ops in an order where each op's inputs come first (ops may
    be listed in any order)."""
    known = {t["name"] for t in graph["inputs"]}
    pending = list(graph["ops"])
    ordered = []
    while pending:
        ready = [o for o in pending if all(i in known for i in o["inputs"])]
        if not ready:
            raise ValueError("ops refer to unknown tensors or form a cycle: "
                             + ", ".join(o["name"] for o in pending))
        for o in ready:
            known.add(o["name"])
        ordered += ready
        pending = [o for o in pending if o["name"] not in known]
    return ordered


def torch_fn(graph):
    """A function of the graph's inputs (in order) returning its outputs (a
    tuple, in order), written with one torch call per op."""
    ops = _order(graph)
    input_names = [t["name"] for t in graph["inputs"]]
    outputs = list(graph["outputs"])

    def fn(*inputs):
        if len(inputs) != len(input_names):
            raise TypeError(f"graph '{graph.get('name', '')}' takes {len(input_names)} inputs, "
                            f"got {len(inputs)}")
        env = dict(zip(input_names, inputs))
        for o in ops:
            _apply(o["op"], [env[i] for i in o["inputs"]], o.get("attrs", {}), env, o["name"])
        return tuple(env[n] for n in outputs)

    fn.__name__ = "graph_" + "".join(c if c.isalnum() else "_" for c in graph.get("name", ""))
    return fn


def check(dirs, only):
    """Compares torch_fn with each DIR/torch_fns.py's TORCH_FNS; 1 on a mismatch."""
    import glob
    import importlib.util
    import os
    failed = checked = 0
    for d in dirs:
        spec = importlib.util.spec_from_file_location(
            "torch_fns_" + str(abs(hash(d))), os.path.join(d, "torch_fns.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fns = module.TORCH_FNS
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            with open(path) as f:
                graph = json.load(f)
            name = graph.get("name", "")
            if name not in fns or (only and not any(o in name for o in only)):
                continue
            torch.manual_seed(0)
            inputs = [torch.rand(*t["shape"]).add_(0.5) if t["name"] in _positive(graph)
                      else torch.randn(*t["shape"]).mul_(0.5) for t in graph["inputs"]]
            with torch.no_grad():
                ours = torch_fn(graph)(*inputs)
                theirs = fns[name](*inputs)
            theirs = tuple(theirs) if isinstance(theirs, (tuple, list)) else (theirs,)
            worst = max(((o.double() - t.double()).abs().max() /
                         t.double().abs().max().clamp_min(1e-30)).item()
                        for o, t in zip(ours, theirs))
            ok = len(ours) == len(theirs) and all(o.shape == t.shape for o, t in zip(ours, theirs)) \
                and worst <= 1e-4
            checked += 1
            failed += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: relative difference {worst:.2e}", flush=True)
    print(f"{checked - failed} of {checked} graphs agree")
    return 1 if failed or not checked else 0


def _positive(graph):
    names = set()
    for op in graph["ops"]:
        if op["op"] in ("log", "sqrt", "rsqrt", "pow") or (op["op"] == "div" and len(op["inputs"]) > 1):
            names.add(op["inputs"][-1 if op["op"] == "div" else 0])
    return names


def main():
    if sys.argv[1:2] == ["--check"]:
        dirs = [a for a in sys.argv[2:] if not a.startswith("--only=")]
        only = [a[len("--only="):] for a in sys.argv[2:] if a.startswith("--only=")]
        sys.exit(check(dirs, only))
    dtypes = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
    for path in sys.argv[1:]:
        with open(path) as f:
            graph = json.load(f)
        inputs = [torch.randn(*t["shape"]) for t in graph["inputs"]]  # float32: the CPU
        outs = torch_fn(graph)(*inputs)
        print(f"{graph.get('name', path)}: " + ", ".join(str(list(o.shape)) for o in outs))


if __name__ == "__main__":
    main()
