#include "server/cuda_python_loader.h"

namespace yirage::server {

const char* CudaPythonLoaderSource() {
  return R"PY('''A CUDA kernel exported by YiRage, callable from PyTorch.

    import torch, yirage_kernel
    outputs = yirage_kernel.run(*inputs)   # CUDA tensors in manifest.json's input order

run() returns one tensor per graph output (a tuple when there are several).
Inputs must be contiguous CUDA tensors of the manifest's shapes and dtypes.
The kernel is compiled with NVRTC for the current GPU on first use and runs
on the current PyTorch stream. Kernel(device) binds another device; a Kernel
is not safe to call from two threads at once (it owns scratch buffers).
Needs: PyTorch, the CUDA driver (libcuda.so.1) and NVRTC (libnvrtc.so; set
CUDA_HOME or YIRAGE_NVRTC to point at it); plans with library matmuls (launches
with a "library" entry) also need cuBLASLt (libcublasLt.so; YIRAGE_CUBLASLT),
which they call with the manifest's shapes, epilogue and algorithm index.
'''
import ctypes
import glob
import json
import os

import torch

_DIR = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(_DIR, "manifest.json")) as _f:
    MANIFEST = json.load(_f)
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def _cuda_home():
    return os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"


def _load_library(candidates, what):
    errors = []
    for name in candidates:
        try:
            return ctypes.CDLL(name)
        except OSError as e:
            errors.append(str(e))
    raise RuntimeError(f"yirage_kernel: cannot load {what}: " + "; ".join(errors))


def _nvrtc():
    home = _cuda_home()
    names = [os.environ["YIRAGE_NVRTC"]] if os.environ.get("YIRAGE_NVRTC") else []
    names += sorted(glob.glob(os.path.join(home, "lib64", "libnvrtc.so*")), reverse=True)
    names += sorted(glob.glob(os.path.join(home, "lib", "libnvrtc.so*")), reverse=True)
    names += ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]
    return _load_library(names, "NVRTC (libnvrtc.so)")


def _cublaslt():
    home = _cuda_home()
    names = [os.environ["YIRAGE_CUBLASLT"]] if os.environ.get("YIRAGE_CUBLASLT") else []
    names += sorted(glob.glob(os.path.join(home, "lib64", "libcublasLt.so.*")), reverse=True)
    names += ["libcublasLt.so", "libcublasLt.so.13", "libcublasLt.so.12"]
    return _load_library(names, "cuBLASLt (libcublasLt.so)")


_cu = None
_nv = None
_lt = None

# cuBLASLt enum values (cublasLt.h, cublas_api.h, library_types.h).
_LT_TYPES = {"CUDA_R_16F": 2, "CUDA_R_16BF": 14, "CUDA_R_32F": 0}
_LT_COMPUTE = {"CUBLAS_COMPUTE_32F": 68, "CUBLAS_COMPUTE_32F_FAST_TF32": 77}
_LT_EPILOGUE = {"CUBLASLT_EPILOGUE_DEFAULT": 1, "CUBLASLT_EPILOGUE_RELU": 2,
                "CUBLASLT_EPILOGUE_BIAS": 4, "CUBLASLT_EPILOGUE_RELU_BIAS": 6,
                "CUBLASLT_EPILOGUE_GELU": 32, "CUBLASLT_EPILOGUE_GELU_BIAS": 36}
_DESC_TRANSA, _DESC_TRANSB, _DESC_EPILOGUE, _DESC_BIAS_POINTER = 3, 4, 7, 8
_LAYOUT_BATCH_COUNT, _LAYOUT_BATCH_OFFSET = 5, 6
_PREF_MAX_WORKSPACE = 1
_PREF_ALIGN = (5, 6, 7, 8)  # MIN_ALIGNMENT_{A,B,C,D}_BYTES
_HEURISTIC_RESULT_BYTES = 96  # cublasLtMatmulHeuristicResult_t


class _LibraryMatmul:
    """One cuBLASLt call of the plan (the manifest's "library" entry): row-major
    D = act(alpha * A @ B + beta * C + bias) handed to cuBLASLt as D^T = B^T A^T."""

    def __init__(self, handle, call):
        global _lt
        if _lt is None:
            _lt = _cublaslt()
        lt = _lt
        self.call, self.handle = call, handle
        c_int64, c_uint32, c_int32 = ctypes.c_int64, ctypes.c_uint32, ctypes.c_int32

        def check(rc, what):
            if rc != 0:
                raise RuntimeError(f"yirage_kernel: {what} failed (cublasStatus {rc})")

        def set_attr(fn, obj, attr, value):
            check(fn(obj, attr, ctypes.byref(value), ctypes.sizeof(value)), fn.__name__)

        self.op = ctypes.c_void_p()
        check(lt.cublasLtMatmulDescCreate(ctypes.byref(self.op),
                                          _LT_COMPUTE[call["compute_type"]], 0),
              "cublasLtMatmulDescCreate")
        set_attr(lt.cublasLtMatmulDescSetAttribute, self.op, _DESC_TRANSA,
                 c_int32(1 if call["transpose_b"] else 0))
        set_attr(lt.cublasLtMatmulDescSetAttribute, self.op, _DESC_TRANSB, c_int32(0))
        set_attr(lt.cublasLtMatmulDescSetAttribute, self.op, _DESC_EPILOGUE,
                 c_uint32(_LT_EPILOGUE[call["epilogue"]]))
        m, n, k, batch = call["m"], call["n"], call["k"], call["batch"]
        tb = call["transpose_b"]
        dtype = _LT_TYPES[call["data_type"]]
        esize = 4 if call["data_type"] == "CUDA_R_32F" else 2
        specs = [((k, n, k) if tb else (n, k, n), call["b_batch_stride"]),
                 ((k, m, k), call["a_batch_stride"]),
                 ((n, m, n), m * n), ((n, m, n), m * n)]
        self.layouts = []
        aligns = []
        for (rows, cols, ld), stride in specs:
            layout = ctypes.c_void_p()
            check(lt.cublasLtMatrixLayoutCreate(ctypes.byref(layout), dtype, ctypes.c_uint64(rows),
                                                ctypes.c_uint64(cols), c_int64(ld)),
                  "cublasLtMatrixLayoutCreate")
            if batch > 1:
                set_attr(lt.cublasLtMatrixLayoutSetAttribute, layout, _LAYOUT_BATCH_COUNT,
                         c_int32(batch))
                set_attr(lt.cublasLtMatrixLayoutSetAttribute, layout, _LAYOUT_BATCH_OFFSET,
                         c_int64(stride))
            a = 256
            if batch > 1 and stride:
                while a > 1 and (stride * esize) % a:
                    a //= 2
            aligns.append(a)
            self.layouts.append(layout)
        pref = ctypes.c_void_p()
        check(lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "preference")
        set_attr(lt.cublasLtMatmulPreferenceSetAttribute, pref, _PREF_MAX_WORKSPACE,
                 ctypes.c_uint64(call["workspace_bytes"]))
        for attr, a in zip(_PREF_ALIGN, aligns):
            set_attr(lt.cublasLtMatmulPreferenceSetAttribute, pref, attr, c_uint32(a))
        want = call["algo_index"] + 1
        results = ctypes.create_string_buffer(_HEURISTIC_RESULT_BYTES * want)
        returned = c_int32(0)
        la, lb, lc, ld_ = self.layouts
        check(lt.cublasLtMatmulAlgoGetHeuristic(handle, self.op, la, lb, lc, ld_, pref, want,
                                                results, ctypes.byref(returned)),
              "cublasLtMatmulAlgoGetHeuristic")
        lt.cublasLtMatmulPreferenceDestroy(pref)
        if returned.value < want:
            raise RuntimeError(f"yirage_kernel: cuBLASLt offers {returned.value} algorithms for "
                               f"this matmul; the plan asks for number {want}")
        # The algorithm (64 bytes) leads each result.
        self.algo = ctypes.create_string_buffer(
            results.raw[_HEURISTIC_RESULT_BYTES * (want - 1):][:64], 64)
        self.alpha = ctypes.c_float(call["alpha"])
        self.beta = ctypes.c_float(call["beta"])

    def run(self, a, b, c, bias, d, workspace, stream):
        lt = _lt
        if self.call["bias"]:
            p = ctypes.c_void_p(bias)
            lt.cublasLtMatmulDescSetAttribute(self.op, _DESC_BIAS_POINTER, ctypes.byref(p),
                                              ctypes.sizeof(p))
        la, lb, lc, ld_ = self.layouts
        rc = lt.cublasLtMatmul(self.handle, self.op, ctypes.byref(self.alpha), ctypes.c_void_p(b),
                               la, ctypes.c_void_p(a), lb, ctypes.byref(self.beta),
                               ctypes.c_void_p(c), lc, ctypes.c_void_p(d), ld_, self.algo,
                               ctypes.c_void_p(workspace),
                               ctypes.c_size_t(self.call["workspace_bytes"]), stream)
        if rc != 0:
            raise RuntimeError(f"yirage_kernel: cublasLtMatmul failed (cublasStatus {rc})")


# CUtensorMapDataType and CUtensorMapSwizzle values (cuda.h).
_TMA_DATA_TYPES = {
    "CU_TENSOR_MAP_DATA_TYPE_FLOAT16": 6,
    "CU_TENSOR_MAP_DATA_TYPE_FLOAT32": 7,
    "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16": 9,
}
_TMA_SWIZZLES = {"CU_TENSOR_MAP_SWIZZLE_128B": 3}


def _check_cu(rc, call):
    if rc != 0:
        name = ctypes.c_char_p()
        _cu.cuGetErrorName(rc, ctypes.byref(name))
        raise RuntimeError(f"yirage_kernel: {call} failed: "
                           f"{name.value.decode() if name.value else rc}")


def _compile(source, arch):
    nv = _nv
    prog = ctypes.c_void_p()
    rc = nv.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None)
    if rc != 0:
        raise RuntimeError(f"yirage_kernel: nvrtcCreateProgram failed ({rc})")
    home = _cuda_home()
    opts = [f"--gpu-architecture={arch}", "--std=c++17", f"-I{home}/include"]
    if os.path.isdir(os.path.join(home, "include", "cccl")):
        opts.append(f"-I{home}/include/cccl")
    argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    rc = nv.nvrtcCompileProgram(prog, len(opts), argv)
    log_size = ctypes.c_size_t()
    nv.nvrtcGetProgramLogSize(prog, ctypes.byref(log_size))
    log = ctypes.create_string_buffer(max(log_size.value, 1))
    nv.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        nv.nvrtcDestroyProgram(ctypes.byref(prog))
        raise RuntimeError(f"yirage_kernel: NVRTC ({arch}) failed:\n{log.value.decode()}")
    size = ctypes.c_size_t()
    nv.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    cubin = ctypes.create_string_buffer(size.value)
    nv.nvrtcGetCUBIN(prog, cubin)
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    return cubin


class Kernel:
    """The compiled kernel on one device, with its scratch buffers."""

    def __init__(self, device=None):
        global _cu, _nv
        if _cu is None:
            _cu = _load_library(["libcuda.so.1", "libcuda.so"], "the CUDA driver (libcuda.so.1)")
            _cu.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
            _nv = _nvrtc()
        self.device = torch.device("cuda", torch.cuda.current_device() if device is None
                                   else torch.device(device).index or 0)
        with torch.cuda.device(self.device):
            torch.empty(1, device=self.device)  # makes the primary context current
            major, minor = torch.cuda.get_device_capability(self.device)
            arch = f"sm_{major}{minor}" + ("a" if major >= 9 else "")
            with open(os.path.join(_DIR, MANIFEST["source"])) as f:
                cubin = _compile(f.read(), arch)
            self._module = ctypes.c_void_p()
            _check_cu(_cu.cuModuleLoadData(ctypes.byref(self._module), cubin), "cuModuleLoadData")
            self._launches = []
            self._lt_handle = None
            for launch in MANIFEST["launches"]:
                if "library" in launch:
                    if self._lt_handle is None:
                        global _lt
                        if _lt is None:
                            _lt = _cublaslt()
                        self._lt_handle = ctypes.c_void_p()
                        if _lt.cublasLtCreate(ctypes.byref(self._lt_handle)) != 0:
                            raise RuntimeError("yirage_kernel: cublasLtCreate failed")
                    self._launches.append((_LibraryMatmul(self._lt_handle, launch["library"]),
                                           launch))
                    continue
                fn = ctypes.c_void_p()
                _check_cu(_cu.cuModuleGetFunction(ctypes.byref(fn), self._module,
                                                  launch["name"].encode()),
                          f"cuModuleGetFunction({launch['name']})")
                if launch["smem_bytes"] > 48 * 1024:
                    # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                    _check_cu(_cu.cuFuncSetAttribute(fn, 8, launch["smem_bytes"]),
                              "cuFuncSetAttribute")
                self._launches.append((fn, launch))
            # Scratch: zero-filled once; kernels that need zeros leave them zero.
            self._buffers = [torch.zeros(max(b["bytes"], 1), dtype=torch.uint8, device=self.device)
                             for b in MANIFEST["buffers"]]
        self._inputs = [(t["name"], tuple(t["shape"]), _DTYPES[t["dtype"]])
                        for t in MANIFEST["inputs"]]
        self._outputs = [(t["name"], tuple(t["shape"]), _DTYPES[t["dtype"]])
                         for t in MANIFEST["outputs"]]
        self._packed = {}

    def _tensor_map(self, spec, pointers):
        """A CUtensorMap (128 bytes, 64-byte aligned) over one buffer."""
        raw = ctypes.create_string_buffer(128 + 64)
        address = (ctypes.addressof(raw) + 63) // 64 * 64
        rank = len(spec["dims"])
        dims = (ctypes.c_uint64 * rank)(*spec["dims"])
        strides = (ctypes.c_uint64 * (rank - 1))(
            *([spec["stride_bytes"], spec.get("batch_stride_bytes", 0)][:rank - 1]))
        box = (ctypes.c_uint32 * rank)(*spec["box"])
        element_strides = (ctypes.c_uint32 * rank)(*([1] * rank))
        rc = _cu.cuTensorMapEncodeTiled(
            ctypes.c_void_p(address), _TMA_DATA_TYPES[spec["data_type"]], rank,
            ctypes.c_void_p(pointers[spec["buffer"]]), dims, strides, box, element_strides,
            0, _TMA_SWIZZLES[spec["swizzle"]], 3, 0)  # no interleave, L2 256B, no OOB fill
        _check_cu(rc, "cuTensorMapEncodeTiled")
        return raw, address

    def _params(self, pointers):
        packed = self._packed.get(pointers)
        if packed is None:
            values = (ctypes.c_uint64 * len(pointers))(*pointers)
            base = ctypes.addressof(values)
            calls = []
            keep = [values]
            for fn, launch in self._launches:
                args = launch["args"]
                if "library" in launch:
                    calls.append((fn, launch, [pointers[a] for a in args]))
                    continue
                # TMA descriptors first (the driver copies each by value), then pointers.
                maps = [self._tensor_map(m, pointers) for m in launch.get("tensor_maps", [])]
                keep.extend(raw for raw, _ in maps)
                addresses = [address for _, address in maps] + [base + 8 * a for a in args]
                params = (ctypes.c_void_p * max(len(addresses), 1))(*addresses)
                calls.append((fn, launch, params))
            if len(self._packed) > 64:
                self._packed.clear()
            packed = self._packed[pointers] = (keep, calls)
        return packed[1]

    def run(self, *inputs, outputs=None):
        """Runs the kernel; returns the outputs (new tensors unless given)."""
        if len(inputs) != len(self._inputs):
            raise ValueError(f"expected {len(self._inputs)} inputs "
                             f"({', '.join(n for n, _, _ in self._inputs)}), got {len(inputs)}")
        for t, (name, shape, dtype) in zip(inputs, self._inputs):
            if tuple(t.shape) != shape or t.dtype != dtype or t.device != self.device \
                    or not t.is_contiguous():
                raise ValueError(f"input {name}: expected a contiguous {dtype} tensor of shape "
                                 f"{list(shape)} on {self.device}, got {t.dtype} "
                                 f"{list(t.shape)} on {t.device}")
        if outputs is None:
            outputs = [torch.empty(shape, dtype=dtype, device=self.device)
                       for _, shape, dtype in self._outputs]
        pointers = tuple(t.data_ptr() for t in inputs) + tuple(o.data_ptr() for o in outputs) \
            + tuple(b.data_ptr() for b in self._buffers)
        stream = ctypes.c_void_p(torch.cuda.current_stream(self.device).cuda_stream)
        for fn, launch, params in self._params(pointers):
            if "library" in launch:
                fn.run(*params, stream)
                continue
            g = launch["grid"]
            if launch.get("cooperative"):
                # The grid's blocks wait for each other: all resident at once.
                _check_cu(_cu.cuLaunchCooperativeKernel(fn, g[0], g[1], g[2], launch["block"],
                                                        1, 1, launch["smem_bytes"], stream,
                                                        params),
                          f"cuLaunchCooperativeKernel({launch['name']})")
            else:
                _check_cu(_cu.cuLaunchKernel(fn, g[0], g[1], g[2], launch["block"], 1, 1,
                                             launch["smem_bytes"], stream, params, None),
                          f"cuLaunchKernel({launch['name']})")
        return outputs[0] if len(outputs) == 1 else tuple(outputs)


_default = None


def run(*inputs):
    """Runs the kernel on the current device (compiled on first call)."""
    global _default
    if _default is None or _default.device.index != torch.cuda.current_device():
        _default = Kernel()
    return _default.run(*inputs)
)PY";
}

}  // namespace yirage::server
