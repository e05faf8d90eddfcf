#!/usr/bin/env python3
"""Random valid graphs (docs/graph-format.md) for bench/random_jobs.sh: the
shapes of blocks users send (elementwise chains with broadcasts, reductions
over any axis, norms, softmax, matmuls with their epilogues, batched and
transposed, attention, concat and slice, several outputs) at odd sizes and in
each dtype, so that the whole system (search, rewrites, every backend's
kernels) meets graphs that no test and no benchmark was written for.

    bench/random_graphs.py OUT_DIR [--count N] [--seed S] [--max-elements E] [--min-elements E]
        [--max-k K]

Deterministic for a seed. Inputs come from the worker's generator (values
of magnitude about 1), so the ops are chosen to stay finite: no log, sqrt or
pow of values that may be negative, no exp of a square."""
import argparse
import json
import os
import random

DTYPES = ["float16", "bfloat16", "float32"]
DIMS = [1, 2, 3, 5, 7, 8, 16, 33, 64, 100, 128, 129, 255, 256, 384, 1000]
SAFE_UNARY = ["neg", "relu", "sigmoid", "tanh", "silu", "gelu", "gelu_tanh", "abs"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]


class Builder:
    def __init__(self, rng, name, dtype):
        self.rng, self.dtype = rng, dtype
        self.g = {"name": name, "inputs": [], "ops": [], "outputs": []}
        self.shapes = {}
        self.n = 0

    def fresh(self, prefix):
        self.n += 1
        return f"{prefix}{self.n}"

    def input(self, shape, prefix="in"):
        name = self.fresh(prefix)
        self.g["inputs"].append({"name": name, "shape": list(shape), "dtype": self.dtype})
        self.shapes[name] = list(shape)
        return name

    def op(self, op, inputs, shape, attrs=None, prefix="t"):
        name = self.fresh(prefix)
        entry = {"name": name, "op": op, "inputs": list(inputs)}
        if attrs:
            entry["attrs"] = attrs
        self.g["ops"].append(entry)
        self.shapes[name] = list(shape)
        return name

    def unary(self, x):
        kind = self.rng.choice(SAFE_UNARY)
        if kind == "gelu_tanh":
            return self.op("gelu", [x], self.shapes[x], {"approximate": "tanh"})
        return self.op(kind, [x], self.shapes[x])

    def broadcast_partner(self, shape):
        """An input that broadcasts against `shape`: full, a row vector, a
        column (the last dim 1), leading ones, or a scalar (None)."""
        kind = self.rng.choice(["full", "row", "col", "lead", "scalar"])
        if kind == "scalar":
            return None
        if kind == "row":
            return self.input([shape[-1]])
        if kind == "col" and len(shape) >= 2:
            return self.input(shape[:-1] + [1])
        if kind == "lead" and len(shape) >= 2:
            return self.input([1] + shape[1:])
        return self.input(shape)

    def binary(self, x):
        kind = self.rng.choice(BINARY)
        other = self.broadcast_partner(self.shapes[x])
        if other is None:
            scalar = round(self.rng.uniform(0.25, 2.0), 3)
            return self.op(kind, [x], self.shapes[x], {"scalar": scalar})
        inputs = [x, other] if self.rng.random() < 0.7 else [other, x]
        return self.op(kind, inputs, self.shapes[x])

    def elementwise_chain(self, x, length):
        for _ in range(length):
            x = self.unary(x) if self.rng.random() < 0.5 else self.binary(x)
        return x

    def reduce(self, x):
        shape = self.shapes[x]
        axis = self.rng.randrange(len(shape))
        keepdim = len(shape) == 1 or self.rng.random() < 0.5
        out = list(shape)
        if keepdim:
            out[axis] = 1
        else:
            del out[axis]
        kind = self.rng.choice(["reduce_sum", "reduce_mean", "reduce_max"])
        attrs = {"axis": axis - len(shape) if self.rng.random() < 0.5 else axis, "keepdim": keepdim}
        return self.op(kind, [x], out, attrs)

    def norm(self, x):
        shape = self.shapes[x]
        if self.rng.random() < 0.5:
            inputs = [x] + ([self.input([shape[-1]])] if self.rng.random() < 0.7 else [])
            return self.op("rms_norm", inputs, shape, {"eps": 1e-6})
        inputs = [x]
        if self.rng.random() < 0.7:
            inputs.append(self.input([shape[-1]]))
            if self.rng.random() < 0.5:
                inputs.append(self.input([shape[-1]]))
        return self.op("layer_norm", inputs, shape, {"eps": 1e-5})

    def softmax(self, x):
        axis = self.rng.randrange(len(self.shapes[x]))
        return self.op("softmax", [x], self.shapes[x], {"axis": axis})

    def output(self, x):
        self.g["outputs"].append(x)


MIN_ELEMENTS = 16  # --min-elements


def dims(rng, rank, max_elements):
    """A shape of `rank` dims from DIMS with MIN_ELEMENTS to max_elements
    elements (where DIMS alone cannot reach MIN_ELEMENTS at this rank, the
    last dim any size that brings the count into that range)."""
    if MIN_ELEMENTS > max_elements:
        raise SystemExit(f"--min-elements {MIN_ELEMENTS} is above the {max_elements} elements "
                         "a shape may have here (--max-elements, halved for concat pieces)")
    while True:
        shape = [rng.choice(DIMS) for _ in range(rank)]
        if DIMS[-1] ** rank < MIN_ELEMENTS:
            # DIMS alone cannot reach MIN_ELEMENTS at this rank: the last dim
            # any size that brings the count into range.
            lead = 1
            for d in shape[:-1]:
                lead *= d
            lo = -(-MIN_ELEMENTS // lead)
            if lo > max_elements // lead:
                continue
            shape[-1] = rng.randint(lo, max_elements // lead)
        count = 1
        for d in shape:
            count *= d
        if MIN_ELEMENTS <= count <= max_elements:
            return shape


def elementwise(b, rng, max_elements):
    x = b.input(dims(rng, rng.randint(1, 4), max_elements))
    y = b.elementwise_chain(x, rng.randint(1, 5))
    if rng.random() < 0.3:  # a second output from the middle of the chain
        z = b.unary(y)
        b.output(z)
    b.output(y)


def reduction(b, rng, max_elements):
    x = b.input(dims(rng, rng.randint(1, 4), max_elements))
    x = b.elementwise_chain(x, rng.randint(0, 2))
    r = b.reduce(x)
    if rng.random() < 0.5:
        r = b.elementwise_chain(r, 1)
    b.output(r)


def norm(b, rng, max_elements):
    x = b.input(dims(rng, rng.randint(2, 3), max_elements))
    if rng.random() < 0.5:  # a residual first, the sum kept as a second output
        x = b.op("add", [x, b.input(b.shapes[x])], b.shapes[x])
        b.output(x)
    y = b.norm(x)
    b.output(b.elementwise_chain(y, rng.randint(0, 2)))


def softmax(b, rng, max_elements):
    x = b.input(dims(rng, rng.randint(1, 4), max_elements))
    if rng.random() < 0.5:
        x = b.op("mul", [x], b.shapes[x], {"scalar": 0.125})
    b.output(b.softmax(x))


def matmul(b, rng, max_elements, max_k):
    m, n = rng.choice(DIMS), rng.choice(DIMS[3:])
    k = rng.choice([d for d in DIMS if d <= max_k] + [max_k])
    batch = rng.choice([[], [], [2], [3], [2, 3]])
    transpose_b = rng.random() < 0.5
    a = b.input(batch + [m, k])
    b_batch = batch if rng.random() < 0.7 else batch[-1:] if batch else []
    w = b.input(b_batch + ([n, k] if transpose_b else [k, n]))
    out = batch + [m, n]
    y = b.op("matmul", [a, w], out, {"transpose_b": True} if transpose_b else None)
    if rng.random() < 0.6:  # a bias
        y = b.op("add", [y, b.input([n])], out)
    y = b.elementwise_chain(y, rng.randint(0, 2))
    if rng.random() < 0.25:
        y = b.softmax(y) if rng.random() < 0.5 else b.norm(y)
    b.output(y)


def attention(b, rng, max_elements):
    heads, m, n = rng.choice([1, 2, 4]), rng.choice([1, 4, 7, 16, 64, 100]), rng.choice(DIMS[4:])
    d = rng.choice([16, 32, 64, 128])
    q = b.input([heads, m, d])
    kk = b.input([heads, n, d])
    v = b.input([heads, n, d])
    s = b.op("matmul", [q, kk], [heads, m, n], {"transpose_b": True})
    s = b.op("mul", [s], [heads, m, n], {"scalar": round(d ** -0.5, 6)})
    p = b.op("softmax", [s], [heads, m, n], {"axis": -1})
    b.output(b.op("matmul", [p, v], [heads, m, d]))


def concat_slice(b, rng, max_elements):
    shape = dims(rng, rng.randint(1, 3), max_elements // 2)
    axis = rng.randrange(len(shape))
    parts = [b.input(shape) for _ in range(rng.randint(2, 3))]
    out = list(shape)
    out[axis] *= len(parts)
    c = b.op("concat", parts, out, {"axis": axis})
    c = b.elementwise_chain(c, rng.randint(0, 2))
    if out[axis] > 1 and rng.random() < 0.7:
        start = rng.randrange(out[axis] - 1)
        end = rng.randint(start + 1, out[axis])
        sliced = list(out)
        sliced[axis] = end - start
        c = b.op("slice", [c], sliced, {"axis": axis, "start": start, "end": end})
    b.output(c)


KINDS = ["elementwise", "reduction", "norm", "softmax", "matmul", "attention", "concat_slice"]


def make(rng, index, max_elements, max_k):
    kind = KINDS[index % len(KINDS)]
    dtype = rng.choice(DTYPES)
    b = Builder(rng, f"random_{index:03d}_{kind}_{dtype}", dtype)
    if kind == "matmul":
        matmul(b, rng, max_elements, max_k)
    else:
        globals()[kind](b, rng, max_elements)
    return b.g


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--count", type=int, default=42)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-elements", type=int, default=1 << 20)
    ap.add_argument("--max-k", type=int, default=1024)
    ap.add_argument("--min-elements", type=int, default=16,
                    help="the least elements of a generated tensor shape (not of matmul, "
                         "attention and reduced shapes); large values leave out tiny "
                         "launch-bound graphs")
    args = ap.parse_args()
    global MIN_ELEMENTS
    MIN_ELEMENTS = args.min_elements
    os.makedirs(args.out_dir, exist_ok=True)
    rng = random.Random(args.seed)
    for i in range(args.count):
        g = make(rng, i, args.max_elements, args.max_k)
        with open(os.path.join(args.out_dir, g["name"] + ".json"), "w") as f:
            json.dump(g, f, indent=1)
    print(f"{args.count} graphs in {args.out_dir} (seed {args.seed})")


if __name__ == "__main__":
    main()
