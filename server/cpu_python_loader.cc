#include "server/cpu_python_loader.h"

namespace yirage::server {

const char* CpuPythonLoaderSource() {
  return R"PY('''A CPU kernel exported by YiRage, callable from Python.

    import yirage_kernel
    outputs = yirage_kernel.run(*inputs)   # manifest.json's input order

Inputs are NumPy arrays or CPU PyTorch tensors of the manifest's shapes and
dtypes (bfloat16 needs PyTorch); run() returns one output per graph output,
of the inputs' kind (a tuple when there are several). The library is built
with the manifest's build command (g++ with OpenMP) when it is missing, and
loaded with its own handle, so two exported kernels live in one process.
Calls are serialized (the kernel owns scratch buffers); OMP_NUM_THREADS
sets its threads.
'''
import atexit
import ctypes
import json
import os
import shlex
import subprocess
import sys
import threading

_DIR = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_DIR, "manifest.json")) as _f:
    MANIFEST = json.load(_f)

_lock = threading.Lock()
_lib = None


def _load():
    global _lib
    if _lib is not None:
        return _lib
    path = os.path.join(_DIR, MANIFEST["library"])
    if not os.path.exists(path):
        p = subprocess.run(shlex.split(MANIFEST["build"]), cwd=_DIR, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0 or not os.path.exists(path):
            raise RuntimeError("building the kernel failed (%s):\n%s" % (MANIFEST["build"],
                                                                        p.stdout))
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    run = getattr(lib, MANIFEST["entry_point"])
    run.restype = ctypes.c_int
    run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
    init = getattr(lib, MANIFEST["init"])
    init.restype = ctypes.c_int
    fini = getattr(lib, MANIFEST["fini"])
    fini.restype = None
    rc = init()
    if rc != 0:
        raise RuntimeError("%s returned %d" % (MANIFEST["init"], rc))
    atexit.register(fini)
    _lib = lib
    return lib


def _torch():
    return sys.modules.get("torch")


def _input(x, spec, use_torch):
    shape = tuple(spec["shape"])
    what = "input '%s'" % spec["name"]
    if use_torch:
        import torch
        x = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
        if x.device.type != "cpu":
            raise TypeError("%s: the kernel takes CPU tensors (got %s)" % (what, x.device))
        if x.dtype != getattr(torch, spec["dtype"]):
            raise TypeError("%s: dtype %s, expected %s" % (what, x.dtype, spec["dtype"]))
        if tuple(x.shape) != shape:
            raise TypeError("%s: shape %s, expected %s" % (what, tuple(x.shape), shape))
        x = x.contiguous()
        return x, x.data_ptr()
    import numpy as np
    if spec["dtype"] == "bfloat16":
        raise TypeError("%s: bfloat16 needs PyTorch tensors (NumPy has no bfloat16)" % what)
    x = np.ascontiguousarray(x)
    if x.dtype != np.dtype(spec["dtype"]):
        raise TypeError("%s: dtype %s, expected %s" % (what, x.dtype, spec["dtype"]))
    if x.shape != shape:
        raise TypeError("%s: shape %s, expected %s" % (what, x.shape, shape))
    return x, x.ctypes.data


def _output(spec, use_torch):
    shape = tuple(spec["shape"])
    if use_torch:
        import torch
        t = torch.empty(shape, dtype=getattr(torch, spec["dtype"]))
        return t, t.data_ptr()
    import numpy as np
    a = np.empty(shape, dtype=np.dtype(spec["dtype"]))
    return a, a.ctypes.data


def run(*inputs):
    specs = MANIFEST["inputs"]
    if len(inputs) != len(specs):
        raise TypeError("the kernel takes %d inputs (%s), got %d" % (
            len(specs), ", ".join(s["name"] for s in specs), len(inputs)))
    torch = _torch()
    use_torch = torch is not None and any(isinstance(x, torch.Tensor) for x in inputs)
    keep, in_ptrs = [], []
    for x, spec in zip(inputs, specs):
        buf, ptr = _input(x, spec, use_torch)
        keep.append(buf)
        in_ptrs.append(ptr)
    outs, out_ptrs = [], []
    for spec in MANIFEST["outputs"]:
        buf, ptr = _output(spec, use_torch)
        outs.append(buf)
        out_ptrs.append(ptr)
    with _lock:
        lib = _load()
        rc = getattr(lib, MANIFEST["entry_point"])(
            (ctypes.c_void_p * len(in_ptrs))(*in_ptrs), (ctypes.c_void_p * len(out_ptrs))(*out_ptrs))
    if rc != 0:
        raise RuntimeError("%s returned %d" % (MANIFEST["entry_point"], rc))
    return outs[0] if len(outs) == 1 else tuple(outs)
)PY";
}

}  // namespace yirage::server
