"""Kernel graphs: the builder API, and the graph JSON format of
docs/graph-format.md (the server's and `yirage-client submit`'s format).

    g = yirage.new_kernel_graph()
    X = g.new_input(dims=(8, 4096), dtype=yirage.float16)
    W = g.new_input(dims=(4096, 6144), dtype=yirage.float16)
    Y = g.matmul(g.rms_norm(X), W)
    g.mark_output(Y)
    text = g.to_json()                     # the JSON file format
    g2 = yirage.from_json(text)            # and back

Every op of docs/graph-format.md has one method. Attributes are keyword
arguments; an attribute left at None is not written, so the server applies
its documented default. Shapes are inferred on the client (`Y.dims`) and a
mismatch is refused at once; the server validates the graph again and has
the final word.
"""

import json
import math
import os

from .errors import GraphFormatError


class DType:
    """A tensor element type: yirage.float16, yirage.bfloat16, yirage.float32."""

    __slots__ = ("name", "size", "_enum")

    def __init__(self, name, size, enum):
        self.name = name
        self.size = size
        self._enum = enum

    def __repr__(self):
        return "yirage." + self.name

    def __str__(self):
        return self.name

    def __eq__(self, other):
        if isinstance(other, DType):
            return self.name == other.name
        if isinstance(other, str):
            return self.name == other
        return NotImplemented

    def __hash__(self):
        return hash(self.name)


float16 = DType("float16", 2, 1)
bfloat16 = DType("bfloat16", 2, 2)
float32 = DType("float32", 4, 3)
DTYPES = {d.name: d for d in (float16, bfloat16, float32)}
_DTYPE_BY_ENUM = {d._enum: d for d in DTYPES.values()}


def dtype_of(value):
    """A DType from a DType, its name ("float16"), or torch/numpy dtypes."""
    if isinstance(value, DType):
        return value
    name = str(value)
    for prefix in ("torch.", "yirage."):
        if name.startswith(prefix):
            name = name[len(prefix):]
    aliases = {"half": "float16", "float": "float32", "fp16": "float16", "fp32": "float32",
               "bf16": "bfloat16"}
    name = aliases.get(name, name)
    if name not in DTYPES:
        raise GraphFormatError("unknown dtype '%s' (expected float16, bfloat16 or float32)"
                               % value)
    return DTYPES[name]


UNARY_OPS = ("neg", "exp", "log", "sqrt", "rsqrt", "square", "abs", "relu", "sigmoid", "tanh",
             "silu", "gelu")
BINARY_OPS = ("add", "sub", "mul", "div", "maximum", "minimum", "pow")
REDUCE_OPS = ("reduce_sum", "reduce_mean", "reduce_max")
COMPOUND_OPS = ("gated_mlp", "rms_norm_linear", "gemm_softmax", "gemm_layernorm",
                "self_attention")
OPS = ("matmul",) + BINARY_OPS + UNARY_OPS + REDUCE_OPS + (
    "rms_norm", "layer_norm", "softmax", "concat", "slice") + COMPOUND_OPS


class Tensor:
    """A graph input or an op's result, named `name` in the graph."""

    __slots__ = ("graph", "name")

    def __init__(self, graph, name):
        self.graph = graph
        self.name = name

    @property
    def dims(self):
        """The shape (a tuple), inferred on the client."""
        return self.graph.shape_of(self.name)

    shape = dims

    @property
    def dtype(self):
        return self.graph.dtype_of(self.name)

    def num_dims(self):
        return len(self.dims)

    def dim(self, i):
        return self.dims[i]

    def __repr__(self):
        try:
            return "Tensor(%r, dims=%s, dtype=%s)" % (self.name, self.dims, self.dtype)
        except GraphFormatError:
            return "Tensor(%r)" % self.name


def _broadcast(a, b, what):
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and x != 1 and y != 1:
            raise GraphFormatError("%s: shapes %s and %s do not broadcast (%d vs %d at dim %d)"
                                   % (what, list(a), list(b), x, y, -i))
        out.append(max(x, y) if 1 in (x, y) else x)
    return tuple(reversed(out))


def _axis(axis, rank, what):
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise GraphFormatError("%s: attrs.axis must be an integer (got %r)" % (what, axis))
    if axis < -rank or axis >= rank:
        raise GraphFormatError("%s: attrs.axis is %d but the input has rank %d; axis must be in "
                               "[%d, %d]" % (what, axis, rank, -rank, rank - 1))
    return axis % rank


def _matmul_shape(a, b, transpose_b, what):
    if len(a) < 2 or len(b) < 2:
        raise GraphFormatError("%s: matmul inputs need rank >= 2 (got %s and %s)"
                               % (what, list(a), list(b)))
    k_b, n = (b[-1], b[-2]) if transpose_b else (b[-2], b[-1])
    if a[-1] != k_b:
        raise GraphFormatError("%s: the contracted dims differ (%d vs %d; shapes %s and %s)"
                               % (what, a[-1], k_b, list(a), list(b)))
    batch = _broadcast(a[:-2], b[:-2], what) if (a[:-2] or b[:-2]) else ()
    return tuple(batch) + (a[-2], n)


class KernelGraph:
    """A graph of tensor ops in the format of docs/graph-format.md."""

    def __init__(self, name=""):
        self.name = name
        self._inputs = []      # dicts: name, shape (list), dtype (str)
        self._ops = []         # dicts: name, op, inputs (list), attrs (dict, may be absent)
        self._outputs = []
        self.tolerance = None  # None or a dict with rtol and/or atol
        self._names = set()
        self._counter = 0
        self._shapes = {}

    # ---- building ----

    def _fresh(self, prefix):
        while True:
            self._counter += 1
            name = "%s%d" % (prefix, self._counter)
            if name not in self._names:
                return name

    def _claim(self, name, prefix):
        if name is None:
            name = self._fresh(prefix)
        if not isinstance(name, str) or not name:
            raise GraphFormatError("a tensor name must be a non-empty string (got %r)" % (name,))
        if name in self._names:
            raise GraphFormatError("name '%s' is already used in this graph" % name)
        self._names.add(name)
        return name

    def _ref(self, t, what):
        if isinstance(t, Tensor):
            if t.graph is not self:
                raise GraphFormatError("%s: tensor '%s' belongs to another graph" % (what, t.name))
            return t.name
        if isinstance(t, str) and t in self._names:
            return t
        raise GraphFormatError("%s: expected a Tensor of this graph, got %r" % (what, t))

    def new_input(self, dims, dtype=float32, name=None):
        """A graph input of shape `dims` (rank 1 to 4); inputs are passed to the
        kernel in the order they are declared."""
        dims = [int(d) for d in dims]
        dt = dtype_of(dtype)
        name = self._claim(name, "in")
        self._inputs.append({"name": name, "shape": dims, "dtype": dt.name})
        return Tensor(self, name)

    def add_op(self, op, inputs, attrs=None, name=None):
        """The generic form of every op method: `op` with input tensors and a
        dict of attributes (None values are dropped)."""
        refs = [self._ref(t, op) for t in inputs]
        clean = {k: v for k, v in (attrs or {}).items() if v is not None}
        name = self._claim(name, "t")
        entry = {"name": name, "op": op, "inputs": refs}
        if clean:
            entry["attrs"] = clean
        self._ops.append(entry)
        out = Tensor(self, name)
        try:
            out.dims  # infer now, so a mismatch is reported at the call
        except GraphFormatError:
            self._ops.pop()
            self._names.discard(name)
            raise
        return out

    def mark_output(self, tensor):
        """Adds `tensor` (an op result) to the graph's outputs, in order."""
        name = self._ref(tensor, "mark_output")
        if name in self._outputs:
            raise GraphFormatError("mark_output: '%s' is already an output" % name)
        self._outputs.append(name)
        return tensor

    def set_tolerance(self, rtol=None, atol=None):
        """The graph's tolerance (docs/graph-format.md, "Tolerance")."""
        tol = {}
        if rtol is not None:
            tol["rtol"] = float(rtol)
        if atol is not None:
            tol["atol"] = float(atol)
        self.tolerance = tol or None

    # ---- ops (docs/graph-format.md, "Operators") ----

    def matmul(self, a, b, transpose_b=None, name=None):
        return self.add_op("matmul", [a, b], {"transpose_b": _opt_bool(transpose_b)}, name)

    def _binary(self, op, a, b, name):
        if isinstance(b, (int, float)) and not isinstance(b, bool):
            return self.add_op(op, [a], {"scalar": float(b)}, name)
        return self.add_op(op, [a, b], None, name)

    def add(self, a, b, name=None):
        """a + b (b a tensor, broadcast NumPy-style, or a number)."""
        return self._binary("add", a, b, name)

    def sub(self, a, b, name=None):
        return self._binary("sub", a, b, name)

    def mul(self, a, b, name=None):
        return self._binary("mul", a, b, name)

    def div(self, a, b, name=None):
        return self._binary("div", a, b, name)

    def maximum(self, a, b, name=None):
        return self._binary("maximum", a, b, name)

    def minimum(self, a, b, name=None):
        return self._binary("minimum", a, b, name)

    def pow(self, a, b, name=None):
        return self._binary("pow", a, b, name)

    def neg(self, x, name=None):
        return self.add_op("neg", [x], None, name)

    def exp(self, x, name=None):
        return self.add_op("exp", [x], None, name)

    def log(self, x, name=None):
        return self.add_op("log", [x], None, name)

    def sqrt(self, x, name=None):
        return self.add_op("sqrt", [x], None, name)

    def rsqrt(self, x, name=None):
        return self.add_op("rsqrt", [x], None, name)

    def square(self, x, name=None):
        return self.add_op("square", [x], None, name)

    def abs(self, x, name=None):
        return self.add_op("abs", [x], None, name)

    def relu(self, x, name=None):
        return self.add_op("relu", [x], None, name)

    def sigmoid(self, x, name=None):
        return self.add_op("sigmoid", [x], None, name)

    def tanh(self, x, name=None):
        return self.add_op("tanh", [x], None, name)

    def silu(self, x, name=None):
        return self.add_op("silu", [x], None, name)

    def gelu(self, x, approximate=None, name=None):
        """approximate: "none" (default, erf) or "tanh"."""
        return self.add_op("gelu", [x], {"approximate": approximate}, name)

    def reduce_sum(self, x, axis=None, keepdim=None, name=None):
        return self.add_op("reduce_sum", [x], _reduce_attrs(axis, keepdim), name)

    def reduce_mean(self, x, axis=None, keepdim=None, name=None):
        return self.add_op("reduce_mean", [x], _reduce_attrs(axis, keepdim), name)

    def reduce_max(self, x, axis=None, keepdim=None, name=None):
        return self.add_op("reduce_max", [x], _reduce_attrs(axis, keepdim), name)

    def rms_norm(self, x, weight=None, axis=None, eps=None, name=None):
        """x / sqrt(mean(x^2 over axis) + eps) * weight; defaults axis -1, eps 1e-6."""
        ins = [x] if weight is None else [x, weight]
        return self.add_op("rms_norm", ins, {"axis": _opt_int(axis), "eps": _opt_float(eps)},
                           name)

    def layer_norm(self, x, weight=None, bias=None, axis=None, eps=None, name=None):
        """(x - mean) / sqrt(var + eps) * weight + bias; defaults axis -1, eps 1e-5."""
        if bias is not None and weight is None:
            raise GraphFormatError("layer_norm: a bias needs a weight (inputs X, weight, bias)")
        ins = [t for t in (x, weight, bias) if t is not None]
        return self.add_op("layer_norm", ins, {"axis": _opt_int(axis), "eps": _opt_float(eps)},
                           name)

    def softmax(self, x, axis=None, name=None):
        return self.add_op("softmax", [x], {"axis": _opt_int(axis)}, name)

    def concat(self, tensors, axis, name=None):
        return self.add_op("concat", list(tensors), {"axis": int(axis)}, name)

    def slice(self, x, axis, end, start=None, name=None):
        """Elements [start, end) of `axis` (start defaults to 0)."""
        return self.add_op("slice", [x], {"axis": int(axis), "start": _opt_int(start),
                                          "end": int(end)}, name)

    # Compound ops (expanded by the server: docs/graph-format.md).

    def gated_mlp(self, x, w_gate, w_up, w_down=None, activation=None, name=None):
        ins = [x, w_gate, w_up] + ([w_down] if w_down is not None else [])
        return self.add_op("gated_mlp", ins, {"activation": activation}, name)

    def rms_norm_linear(self, x, w, weight=None, eps=None, transpose_b=None, name=None):
        ins = [x, w] + ([weight] if weight is not None else [])
        return self.add_op("rms_norm_linear", ins,
                           {"eps": _opt_float(eps), "transpose_b": _opt_bool(transpose_b)}, name)

    def gemm_softmax(self, a, b, transpose_b=None, scale=None, name=None):
        return self.add_op("gemm_softmax", [a, b],
                           {"transpose_b": _opt_bool(transpose_b), "scale": _opt_float(scale)},
                           name)

    def gemm_layernorm(self, a, b, weight=None, bias=None, eps=None, transpose_b=None, name=None):
        if bias is not None and weight is None:
            raise GraphFormatError("gemm_layernorm: a bias needs a weight")
        ins = [t for t in (a, b, weight, bias) if t is not None]
        return self.add_op("gemm_layernorm", ins,
                           {"eps": _opt_float(eps), "transpose_b": _opt_bool(transpose_b)}, name)

    def self_attention(self, q, k, v, scale=None, name=None):
        return self.add_op("self_attention", [q, k, v], {"scale": _opt_float(scale)}, name)

    # ---- reading ----

    @property
    def inputs(self):
        return [Tensor(self, i["name"]) for i in self._inputs]

    @property
    def outputs(self):
        return [Tensor(self, o) for o in self._outputs]

    def tensor(self, name):
        if name not in self._names:
            raise KeyError(name)
        return Tensor(self, name)

    def dtype_of(self, name):
        for i in self._inputs:
            if i["name"] == name:
                return dtype_of(i["dtype"])
        op = self._op(name)
        if not op["inputs"]:
            raise GraphFormatError("op '%s' has no inputs" % name)
        return self.dtype_of(op["inputs"][0])

    def _op(self, name):
        for op in self._ops:
            if op["name"] == name:
                return op
        raise GraphFormatError("'%s' is not a graph input or op name" % name)

    def shape_of(self, name, _visiting=None):
        """The shape of tensor `name`, inferred from the inputs' shapes."""
        if name in self._shapes:
            return self._shapes[name]
        for i in self._inputs:
            if i["name"] == name:
                return tuple(i["shape"])
        visiting = _visiting if _visiting is not None else set()
        if name in visiting:
            raise GraphFormatError("the ops form a cycle through '%s'" % name)
        visiting.add(name)
        op = self._op(name)
        shapes = [self.shape_of(i, visiting) for i in op["inputs"]]
        shape = _infer(op, shapes)
        visiting.discard(name)
        self._shapes[name] = shape
        return shape

    # ---- the JSON format ----

    def to_dict(self):
        """The graph as the JSON object of docs/graph-format.md."""
        d = {"name": self.name,
             "inputs": [dict(i, shape=list(i["shape"])) for i in self._inputs],
             "ops": [_copy_op(op) for op in self._ops],
             "outputs": list(self._outputs)}
        if self.tolerance is not None:
            d["tolerance"] = dict(self.tolerance)
        return d

    def to_json(self, indent=None):
        """The graph as JSON text (docs/graph-format.md); `yirage-client submit`
        and the server read it."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def save(self, path, indent=2):
        with open(path, "w") as f:
            f.write(self.to_json(indent=indent) + "\n")

    def to_proto(self):
        """The yirage.v1.Graph message."""
        from .v1 import graph_pb2
        msg = graph_pb2.Graph(name=self.name, outputs=self._outputs)
        for i in self._inputs:
            msg.inputs.add(name=i["name"], shape=i["shape"], dtype=DTYPES[i["dtype"]]._enum)
        for op in self._ops:
            node = msg.ops.add(name=op["name"], op=op["op"], inputs=op["inputs"])
            for k, v in op.get("attrs", {}).items():
                a = node.attrs[k]
                if isinstance(v, bool):
                    a.b = v
                elif isinstance(v, int):
                    a.i = v
                elif isinstance(v, float):
                    a.f = v
                else:
                    a.s = v
        if self.tolerance:
            msg.tolerance.rtol = self.tolerance.get("rtol", 0.0)
            msg.tolerance.atol = self.tolerance.get("atol", 0.0)
        return msg

    # ---- the service ----

    def superoptimize(self, backend="cpu", server="127.0.0.1:50051", budget_seconds=None,
                      budget_candidates=None, rtol=None, atol=None, chip=None, progress=True,
                      client=None, token=None, token_file=None, tls_ca=None, poll_interval=0.5,
                      timeout=None, any_chip=False):
        """Submits the graph, reports progress until the job ends (a tqdm bar
        where tqdm imports, else a line per change), and returns a
        yirage.Kernel with the result. Raises yirage.JobFailed when the job
        ends FAILED or CANCELLED, the typed RPC errors otherwise."""
        from .client import Client
        from .kernel import superoptimize
        own = client is None
        if own:
            client = Client(server, token=token, token_file=token_file, tls_ca=tls_ca)
        try:
            return superoptimize(client, self, backend=backend, budget_seconds=budget_seconds,
                                 budget_candidates=budget_candidates, rtol=rtol, atol=atol,
                                 chip=chip, progress=progress, poll_interval=poll_interval,
                                 timeout=timeout, any_chip=any_chip)
        finally:
            if own:
                client.close()

    def __repr__(self):
        return "KernelGraph(%r: %d inputs, %d ops, %d outputs)" % (
            self.name, len(self._inputs), len(self._ops), len(self._outputs))


def _copy_op(op):
    out = {"name": op["name"], "op": op["op"], "inputs": list(op["inputs"])}
    if "attrs" in op:
        out["attrs"] = dict(op["attrs"])
    return out


def _opt_int(v):
    return None if v is None else int(v)


def _opt_float(v):
    return None if v is None else float(v)


def _opt_bool(v):
    return None if v is None else bool(v)


def _reduce_attrs(axis, keepdim):
    return {"axis": _opt_int(axis), "keepdim": _opt_bool(keepdim)}


def _infer(op, shapes):
    """The result shape of `op` (a dict) given its inputs' shapes; raises
    GraphFormatError on what cannot be computed. The server's checks are the
    complete ones (docs/graph-format.md)."""
    kind = op["op"]
    attrs = op.get("attrs", {})
    what = "op '%s' (%s)" % (op["name"], kind)

    def need(n_min, n_max=None):
        n_max = n_min if n_max is None else n_max
        if not n_min <= len(shapes) <= n_max:
            want = str(n_min) if n_min == n_max else "%d to %d" % (n_min, n_max)
            raise GraphFormatError("%s: expects %s input(s), got %d" % (what, want, len(shapes)))

    if kind == "matmul":
        need(2)
        return _matmul_shape(shapes[0], shapes[1], bool(attrs.get("transpose_b", False)), what)
    if kind in BINARY_OPS:
        if "scalar" in attrs:
            need(1)
            return shapes[0]
        need(2)
        return _broadcast(shapes[0], shapes[1], what)
    if kind in UNARY_OPS or kind in ("rms_norm", "layer_norm", "softmax"):
        if kind == "rms_norm":
            need(1, 2)
        elif kind == "layer_norm":
            need(1, 3)
        else:
            need(1)
        if "axis" in attrs:
            _axis(attrs["axis"], len(shapes[0]), what)
        return shapes[0]
    if kind in REDUCE_OPS:
        need(1)
        s = list(shapes[0])
        ax = _axis(attrs.get("axis", -1), len(s), what)
        if attrs.get("keepdim", True):
            s[ax] = 1
        else:
            del s[ax]
        return tuple(s)
    if kind == "concat":
        if len(shapes) < 2:
            raise GraphFormatError("%s: expects 2 or more inputs, got %d" % (what, len(shapes)))
        if "axis" not in attrs:
            raise GraphFormatError("%s: attrs.axis is required (an integer)" % what)
        ax = _axis(attrs["axis"], len(shapes[0]), what)
        out = list(shapes[0])
        for s in shapes[1:]:
            if len(s) != len(out) or any(s[d] != out[d] for d in range(len(out)) if d != ax):
                raise GraphFormatError("%s: all dims except the concat axis must match (%s vs %s)"
                                       % (what, list(shapes[0]), list(s)))
            out[ax] += s[ax]
        return tuple(out)
    if kind == "slice":
        need(1)
        if "axis" not in attrs or "end" not in attrs:
            raise GraphFormatError("%s: attrs.axis and attrs.end are required" % what)
        s = list(shapes[0])
        ax = _axis(attrs["axis"], len(s), what)
        start, end = attrs.get("start", 0), attrs["end"]
        if not 0 <= start < end <= s[ax]:
            raise GraphFormatError("%s: needs 0 <= start < end <= %d (got start %d, end %d)"
                                   % (what, s[ax], start, end))
        s[ax] = end - start
        return tuple(s)
    if kind == "gated_mlp":
        need(3, 4)
        h = _matmul_shape(shapes[0], shapes[1], False, what)
        _broadcast(h, _matmul_shape(shapes[0], shapes[2], False, what), what)
        return _matmul_shape(h, shapes[3], False, what) if len(shapes) == 4 else h
    if kind == "rms_norm_linear":
        need(2, 3)
        return _matmul_shape(shapes[0], shapes[1], bool(attrs.get("transpose_b", False)), what)
    if kind in ("gemm_softmax", "gemm_layernorm"):
        need(2) if kind == "gemm_softmax" else need(2, 4)
        return _matmul_shape(shapes[0], shapes[1], bool(attrs.get("transpose_b", False)), what)
    if kind == "self_attention":
        need(3)
        scores = _matmul_shape(shapes[0], shapes[1], True, what)
        return _matmul_shape(scores, shapes[2], False, what)
    raise GraphFormatError("%s: unknown op '%s'; known ops: %s" % (what, kind, ", ".join(OPS)))


def new_kernel_graph(name=""):
    """An empty graph to build on (the seed's entry point)."""
    return KernelGraph(name)


# ---- reading the JSON format (the checks of core/graph_json.cc, same messages) ----

def _type_name(v):
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    if v is None:
        return "null"
    return type(v).__name__


def _check_keys(obj, path, allowed):
    for k in obj:
        if k not in allowed:
            raise GraphFormatError("%s: unknown field '%s' (expected: %s)"
                                   % (path or "graph", k, ", ".join(allowed)))


def _member(obj, path, key, required, ok, type_desc):
    full = "%s.%s" % (path, key) if path else key
    if key not in obj:
        if required:
            raise GraphFormatError("%s: missing (expected %s)" % (full, type_desc))
        return None
    v = obj[key]
    if not ok(v):
        raise GraphFormatError("%s: expected %s, got %s" % (full, type_desc, _type_name(v)))
    return v


def _is_str(v):
    return isinstance(v, str)


def _is_list(v):
    return isinstance(v, list)


def _is_obj(v):
    return isinstance(v, dict)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _string_list(obj, path, key):
    items = _member(obj, path, key, True, _is_list, "an array of strings")
    full = "%s.%s" % (path, key) if path else key
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise GraphFormatError("%s[%d]: expected a string, got %s"
                                   % (full, i, _type_name(item)))
    return list(items)


def from_dict(d):
    """A KernelGraph from the JSON object of docs/graph-format.md (parsed)."""
    if not isinstance(d, dict):
        raise GraphFormatError("graph: expected an object, got %s" % _type_name(d))
    _check_keys(d, "", ("name", "inputs", "ops", "outputs", "tolerance"))
    g = KernelGraph(_member(d, "", "name", True, _is_str, "a string"))
    for idx, spec in enumerate(_member(d, "", "inputs", True, _is_list, "an array")):
        path = "inputs[%d]" % idx
        if not isinstance(spec, dict):
            raise GraphFormatError("%s: expected an object, got %s" % (path, _type_name(spec)))
        _check_keys(spec, path, ("name", "shape", "dtype"))
        name = _member(spec, path, "name", True, _is_str, "a string")
        shape = _member(spec, path, "shape", True, _is_list, "an array of integers")
        for j, dim in enumerate(shape):
            if not _is_int(dim):
                raise GraphFormatError("%s.shape[%d]: expected an integer, got %s"
                                       % (path, j, _type_name(dim)))
        dt = _member(spec, path, "dtype", True, _is_str, "a string")
        if dt not in DTYPES:
            raise GraphFormatError("%s.dtype: unknown dtype '%s' (expected float16, bfloat16 or "
                                   "float32)" % (path, dt))
        g._names.add(name)
        g._inputs.append({"name": name, "shape": list(shape), "dtype": dt})
    for idx, op in enumerate(_member(d, "", "ops", True, _is_list, "an array")):
        path = "ops[%d]" % idx
        if not isinstance(op, dict):
            raise GraphFormatError("%s: expected an object, got %s" % (path, _type_name(op)))
        _check_keys(op, path, ("name", "op", "inputs", "attrs"))
        entry = {"name": _member(op, path, "name", True, _is_str, "a string"),
                 "op": _member(op, path, "op", True, _is_str, "a string"),
                 "inputs": _string_list(op, path, "inputs")}
        attrs = _member(op, path, "attrs", False, _is_obj, "an object")
        if attrs is not None:
            for k, v in attrs.items():
                if not (isinstance(v, (bool, int, str)) or
                        (isinstance(v, float) and math.isfinite(v))):
                    raise GraphFormatError("%s.attrs.%s: expected a number, string or boolean, "
                                           "got %s" % (path, k, _type_name(v)))
            entry["attrs"] = dict(attrs)
        g._names.add(entry["name"])
        g._ops.append(entry)
    g._outputs = _string_list(d, "", "outputs")
    tol = _member(d, "", "tolerance", False, _is_obj, "an object")
    if tol is not None:
        _check_keys(tol, "tolerance", ("rtol", "atol"))
        for k in ("rtol", "atol"):
            _member(tol, "tolerance", k, False, _is_num, "a number")
        g.tolerance = dict(tol)
    return g


def from_json(text):
    """A KernelGraph from JSON text (str or bytes) or an already parsed dict,
    in the format of docs/graph-format.md."""
    if isinstance(text, dict):
        return from_dict(text)
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    try:
        d = json.loads(text)
    except ValueError as e:
        raise GraphFormatError("invalid JSON: %s" % e) from None
    return from_dict(d)


def load_graph(path):
    """A KernelGraph from a graph JSON file (e.g. examples/graphs/gated_mlp.json)."""
    with open(os.fspath(path), "rb") as f:
        return from_json(f.read())


def from_proto(msg):
    """A KernelGraph from a yirage.v1.Graph message."""
    g = KernelGraph(msg.name)
    for t in msg.inputs:
        if t.dtype not in _DTYPE_BY_ENUM:
            raise GraphFormatError("input '%s': dtype must be float16, bfloat16 or float32 (got "
                                   "enum value %d)" % (t.name, t.dtype))
        g._names.add(t.name)
        g._inputs.append({"name": t.name, "shape": list(t.shape),
                          "dtype": _DTYPE_BY_ENUM[t.dtype].name})
    for n in msg.ops:
        entry = {"name": n.name, "op": n.op, "inputs": list(n.inputs)}
        if n.attrs:
            attrs = {}
            for k in sorted(n.attrs):
                a = n.attrs[k]
                which = a.WhichOneof("value")
                attrs[k] = getattr(a, which) if which else None
            entry["attrs"] = attrs
        g._names.add(n.name)
        g._ops.append(entry)
    g._outputs = list(msg.outputs)
    if msg.HasField("tolerance") and (msg.tolerance.rtol or msg.tolerance.atol):
        g.tolerance = {"rtol": msg.tolerance.rtol, "atol": msg.tolerance.atol}
    return g


def as_graph(graph):
    """A KernelGraph from a KernelGraph, a dict, JSON text or a Graph message."""
    if isinstance(graph, KernelGraph):
        return graph
    if isinstance(graph, (dict, str, bytes, bytearray)):
        return from_json(graph)
    if hasattr(graph, "DESCRIPTOR") and graph.DESCRIPTOR.full_name == "yirage.v1.Graph":
        return from_proto(graph)
    raise TypeError("expected a yirage.KernelGraph, a graph dict, JSON text or a "
                    "yirage.v1.Graph, got %s" % type(graph).__name__)
