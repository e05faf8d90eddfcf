"""The result of superoptimize: a Kernel with the job's result and its
exported files, callable on tensors where the export can be run.

CPU (`manifest.json` format "yirage-kernel/2") and CUDA
("yirage-cuda-kernel/1"): the export's own yirage_kernel.py runs it (CPU:
builds kernel.cpp with the manifest's build command, loads it with ctypes,
RTLD_LOCAL, on NumPy arrays or CPU PyTorch tensors; CUDA: NVRTC and the
driver API on PyTorch CUDA tensors). A "yirage-kernel/1" export (older
servers, no wrapper) is built and called by the SDK itself.
"""

import ctypes
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref

from .errors import JobFailed


class Kernel:
    """The best kernel a job found.

    job: the final yirage.Job; best_time_us, baseline_time_us, speedup: its
    measured result; files: the exported files (path -> bytes); manifest: the
    parsed manifest.json. `k(*inputs)` runs it and returns the list of outputs.
    """

    def __init__(self, job, kernel_files, graph=None):
        self.job = job
        self.graph = graph
        self.candidate_id = kernel_files.candidate_id
        self.files = dict(kernel_files.files)
        self._kernel_files = kernel_files
        self.manifest = json.loads(self.files["manifest.json"]) if "manifest.json" in self.files \
            else {}
        self._runner = None
        self._lock = threading.Lock()
        self._dir = None

    @property
    def job_id(self):
        return self.job.job_id

    @property
    def backend(self):
        return self.job.backend

    @property
    def best_time_us(self):
        return self.job.best.time_us

    @property
    def baseline_time_us(self):
        return self.job.best.baseline_time_us

    @property
    def speedup(self):
        return self.job.best.speedup

    @property
    def plan(self):
        return self.job.best.description

    def save(self, out_dir):
        """Writes the exported files to out_dir (as `yirage-client kernel`)."""
        return self._kernel_files.write(out_dir)

    def roofline(self, path=None, **kwargs):
        """The job's candidates on its chip's roofline (yirage.Job.roofline):
        writes the image to `path` where given; returns the matplotlib Figure."""
        return self.job.roofline(path, **kwargs)

    def _workdir(self):
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="yirage-kernel-%s-" % self.job_id)
            weakref.finalize(self, shutil.rmtree, self._dir, True)
            self._kernel_files.write(self._dir)
        return self._dir

    def __call__(self, *inputs):
        with self._lock:
            if self._runner is None:
                fmt = self.manifest.get("format", "")
                if fmt == "yirage-kernel/1":  # from servers before the export's own wrapper
                    self._runner = _CpuRunner(self.manifest, self._workdir())
                elif fmt in ("yirage-kernel/2", "yirage-cuda-kernel/1"):
                    self._runner = _ExportRunner(self._workdir())
                else:
                    raise NotImplementedError(
                        "the kernel of job %s (backend '%s') cannot be called from Python: its "
                        "export (format '%s') has no loader the SDK knows; its files are in "
                        "Kernel.files" % (self.job_id, self.backend, fmt or "none"))
            return self._runner(inputs)

    def __repr__(self):
        return "Kernel(job %s, %s, %.4g us, %.2fx over baseline)" % (
            self.job_id, self.backend, self.best_time_us, self.speedup)


class _ExportRunner:
    """The export's own loader, yirage_kernel.py (it reads manifest.json and
    the source beside itself; run(*inputs)): CUDA on PyTorch CUDA tensors,
    CPU on NumPy arrays or CPU tensors (it builds the library first)."""

    def __init__(self, workdir):
        path = os.path.join(workdir, "yirage_kernel.py")
        if not os.path.exists(path):
            raise NotImplementedError("the export has no yirage_kernel.py to run it with")
        spec = importlib.util.spec_from_file_location("yirage_kernel_%x" % id(self), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # CUDA: needs PyTorch and a CUDA driver
        self._module = module

    def __call__(self, inputs):
        out = self._module.run(*inputs)
        return list(out) if isinstance(out, (list, tuple)) else [out]


_NUMPY_DTYPES = {"float32": "float32", "float16": "float16"}


class _CpuRunner:
    """kernel.cpp built as the manifest says, called through ctypes."""

    def __init__(self, manifest, workdir):
        self.manifest = manifest
        build = manifest.get("build")
        entry = manifest.get("entry_point")
        if not build or not entry:
            raise NotImplementedError("the CPU export's manifest.json has no build command or "
                                      "entry point; cannot call it")
        argv = shlex.split(build)
        if shutil.which(argv[0]) is None:
            raise RuntimeError("building the CPU kernel needs %s (Debian: build-essential): %s"
                               % (argv[0], build))
        p = subprocess.run(argv, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        lib_path = os.path.join(workdir, argv[argv.index("-o") + 1]) if "-o" in argv else None
        if p.returncode != 0 or lib_path is None or not os.path.exists(lib_path):
            raise RuntimeError("building the CPU kernel failed (%s):\n%s" % (build, p.stdout))
        self._lib = ctypes.CDLL(lib_path, mode=ctypes.RTLD_LOCAL)
        self._run = getattr(self._lib, entry)
        self._run.restype = ctypes.c_int
        self._run.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p)]
        init = getattr(self._lib, manifest.get("init", entry + "_init"))
        init.restype = ctypes.c_int
        fini = getattr(self._lib, manifest.get("fini", entry + "_fini"))
        fini.restype = None
        rc = init()
        if rc != 0:
            raise RuntimeError("%s returned %d" % (manifest.get("init"), rc))
        weakref.finalize(self, fini)

    def __call__(self, inputs):
        specs_in = self.manifest["inputs"]
        specs_out = self.manifest["outputs"]
        if len(inputs) != len(specs_in):
            raise TypeError("the kernel takes %d inputs (%s), got %d" % (
                len(specs_in), ", ".join(s["name"] for s in specs_in), len(inputs)))
        torch = sys.modules.get("torch")
        use_torch = torch is not None and any(isinstance(x, torch.Tensor) for x in inputs)
        keep, in_ptrs = [], []
        for x, spec in zip(inputs, specs_in):
            buf, ptr = _as_buffer(x, spec, use_torch)
            keep.append(buf)
            in_ptrs.append(ptr)
        outs, out_ptrs = [], []
        for spec in specs_out:
            buf, ptr = _new_buffer(spec, use_torch)
            outs.append(buf)
            out_ptrs.append(ptr)
        in_arr = (ctypes.c_void_p * len(in_ptrs))(*in_ptrs)
        out_arr = (ctypes.c_void_p * len(out_ptrs))(*out_ptrs)
        rc = self._run(in_arr, out_arr)
        if rc != 0:
            raise RuntimeError("%s returned %d" % (self.manifest["entry_point"], rc))
        return outs


def _as_buffer(x, spec, use_torch):
    shape = tuple(spec["shape"])
    what = "input '%s'" % spec["name"]
    if use_torch:
        import torch
        if not isinstance(x, torch.Tensor):
            x = torch.as_tensor(x)
        if x.device.type != "cpu":
            raise TypeError("%s: the CPU kernel takes CPU tensors (got %s)" % (what, x.device))
        want = getattr(torch, spec["dtype"])
        if x.dtype != want:
            raise TypeError("%s: dtype %s, expected %s" % (what, x.dtype, want))
        if tuple(x.shape) != shape:
            raise TypeError("%s: shape %s, expected %s" % (what, tuple(x.shape), shape))
        x = x.contiguous()
        return x, x.data_ptr()
    try:
        import numpy as np
    except ImportError:
        raise NotImplementedError("calling a CPU kernel needs NumPy or PyTorch tensors "
                                  "(Debian: python3-numpy)") from None
    if spec["dtype"] not in _NUMPY_DTYPES:
        raise NotImplementedError("%s is %s, which NumPy lacks: pass PyTorch tensors"
                                  % (what, spec["dtype"]))
    arr = np.asarray(x)
    if arr.dtype != np.dtype(_NUMPY_DTYPES[spec["dtype"]]):
        raise TypeError("%s: dtype %s, expected %s" % (what, arr.dtype, spec["dtype"]))
    if arr.shape != shape:
        raise TypeError("%s: shape %s, expected %s" % (what, arr.shape, shape))
    arr = np.ascontiguousarray(arr)
    return arr, arr.ctypes.data


def _new_buffer(spec, use_torch):
    shape = tuple(spec["shape"])
    if use_torch:
        import torch
        t = torch.empty(shape, dtype=getattr(torch, spec["dtype"]))
        return t, t.data_ptr()
    import numpy as np
    if spec["dtype"] not in _NUMPY_DTYPES:
        raise NotImplementedError("output '%s' is %s, which NumPy lacks: pass PyTorch tensors"
                                  % (spec["name"], spec["dtype"]))
    arr = np.empty(shape, dtype=_NUMPY_DTYPES[spec["dtype"]])
    return arr, arr.ctypes.data


# ---- superoptimize: submit, report progress, fetch the kernel ----

class _Progress:
    """A tqdm bar where tqdm imports, else a line (stderr) per change of the
    job's state or counts."""

    def __init__(self, enabled, stream=None):
        self.enabled = enabled
        self.callback = enabled if callable(enabled) else None
        self.stream = stream or sys.stderr
        self.bar = None
        self.tqdm = None
        if enabled is True:
            try:
                from tqdm import tqdm
                self.tqdm = tqdm
            except ImportError:
                self.tqdm = None
        self.last_line = None

    def update(self, job):
        if self.callback is not None:
            self.callback(job)
            return
        if not self.enabled:
            return
        p = job.proto
        best = job.best
        # As the CLI's line: the best speedup while the job runs (it never
        # drops; a time measured under load may rise), the winner's time too
        # once the job has ended.
        best_text = ""
        if best:
            if job.state not in ("SUCCEEDED", "FAILED", "CANCELLED"):
                best_text = "best %.2fx" % best.speedup
            else:
                final = best.final_of != 0
                best_text = "%s %.2fx (%.4g us%s)" % ("winner" if final else "best", best.speedup,
                                                     best.time_us, ", final round" if final else "")
        if self.tqdm is not None:
            if self.bar is None and p.candidates_generated > 0:
                self.bar = self.tqdm(total=p.candidates_generated, desc=job.job_id, unit="cand")
            if self.bar is not None:
                if self.bar.total != p.candidates_generated:
                    self.bar.total = p.candidates_generated
                self.bar.n = p.candidates_evaluated
                self.bar.set_postfix_str("%s %s" % (job.state, best_text))
                self.bar.refresh()
            return
        line = "%s %s %d/%d candidates (%d failed)%s" % (
            job.job_id, job.state, p.candidates_evaluated, p.candidates_generated,
            p.candidates_failed, " " + best_text if best_text else "")
        if line != self.last_line:
            self.last_line = line
            print(line, file=self.stream, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()


def superoptimize(client, graph, backend="cpu", budget_seconds=None, budget_candidates=None,
                  rtol=None, atol=None, chip=None, progress=True, poll_interval=0.5,
                  timeout=None, any_chip=False):
    """Submits `graph` with `client`, follows it (Client.watch) and returns
    the Kernel of a SUCCEEDED job; raises JobFailed otherwise."""
    job_id = client.submit(graph, backend=backend, budget_candidates=budget_candidates,
                           budget_seconds=budget_seconds, rtol=rtol, atol=atol, chip=chip,
                           any_chip=any_chip)
    bar = _Progress(progress)
    job = None
    try:
        for job in client.watch(job_id, poll_interval=poll_interval, timeout=timeout):
            bar.update(job)
    except KeyboardInterrupt:
        # Ctrl-C: the job is not left running for nobody.
        try:
            client.cancel_job(job_id, timeout=5)
        except Exception:  # noqa: BLE001 (it may have ended meanwhile)
            pass
        raise
    finally:
        bar.close()
    if job.state != "SUCCEEDED":
        raise JobFailed(job)
    if job.best is None or not job.best.verified:
        raise JobFailed(job)
    return Kernel(job, client.get_kernel(job_id), graph)
