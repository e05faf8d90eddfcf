#!/usr/bin/python3
"""Times CPU kernels exported by YiRage (yirage-client kernel JOB --out DIR)
against PyTorch CPU eager, in one process, as a user on this machine would:

- each exported kernel is built with its manifest's build command (g++ -O3
  -march=native -fopenmp) and called through ctypes on tensors' memory;
- PyTorch runs the PyTorch a user writes for the graph (TORCH_FNS below for
  examples/graphs, else torch_fns.py beside the graph's JSON). PyTorch CPU
  cannot multiply 16-bit matrices, so its side gets float32 copies of 16-bit
  inputs, made once before timing (what such a user keeps);
- both use the same number of threads (--threads, default every core:
  torch.set_num_threads and OMP_NUM_THREADS for ours);
- after --warmup calls of each, blocks of 10 calls alternate between the
  sides (ours, PyTorch, PyTorch, ours, ...), each call timed alone with a
  monotonic clock; before each block the process idles 0.25 s, so that the
  other side's idle threads have stopped spinning (libgomp spins after a
  parallel region, OpenBLAS's threads ~0.1 s after a call: alternating single
  calls timed each side while the other's threads still held the cores), and
  one untimed call wakes this side's threads. The medians of --iters calls
  per side are reported.

PyTorch's BLAS is reported (Debian's torch calls libblas.so.3, which the
alternatives system points at OpenBLAS once libopenblas0-pthread is installed;
the reference BLAS otherwise). Prints one row per kernel: ours, eager, the
speedup, the matmul GFLOP/s reached, the largest difference from PyTorch's
result, the job's search seconds (--job-seconds) and the plan; then the
geometric mean and the count under 1.0x. --json and --markdown also write the
rows.

    /usr/bin/python3 bench/cpu_vs_torch.py [--threads N] [--iters 50]
        [--graphs-dir DIR...] [--job-seconds FILE] [--markdown FILE] KERNEL_DIR...
"""
import argparse
import ctypes
import importlib.util
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES_DIR = os.path.join(HERE, "..", "examples", "graphs")
CPU_SUITE_DIR = os.path.join(EXAMPLES_DIR, "cpu")
SUITE_DIR = os.path.join(EXAMPLES_DIR, "suite")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--graphs-dir", action="append", nargs="+", default=None,
                    help="folders with graph JSON and torch_fns.py (default examples/graphs, "
                         "examples/graphs/cpu, examples/graphs/suite)")
    ap.add_argument("--job-seconds", help="JSON map graph name -> the job's wall seconds")
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--markdown", help="also write the table here (GitHub markdown)")
    return ap.parse_args()


ARGS = parse_args()
# Our kernels read OMP_NUM_THREADS when built into a process; PyTorch is told
# below. Set before torch (and its OpenMP) loads.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench_graphs import load_graph_jsons, positive_inputs, speedup_summary  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def rms(x, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def attention(Q, K, V):
    s = torch.softmax(torch.bmm(Q, K.transpose(1, 2)) / math.sqrt(Q.shape[-1]), dim=-1)
    return torch.bmm(s, V)


# The PyTorch a user writes for each graph of examples/graphs (float32 inputs).
TORCH_FNS = {
    "gated_mlp": lambda X, W1, W2: F.silu(X @ W1) * (X @ W2),
    "lora": lambda X, W, A, B: X @ W + (X @ A) @ B,
    "low_rank_projection": lambda X, U, P: (X @ U) @ P,
    "rms_norm_linear": lambda X, G, W: (rms(X, 1e-6) * G) @ W,
    "norm_transformer": lambda H, X, alpha: rms(X + alpha * (rms(H, 1e-6) + X), 1e-6),
    "softmax": lambda X: torch.softmax(X * 4.0, dim=-1),
    "attention": attention,
}


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_graphs(dirs):
    """({graph name: JSON}, {graph name: torch function}, graph_flops or None)."""
    fns, flops = {}, None
    for i, d in enumerate(dirs):
        fn_path = os.path.join(d, "torch_fns.py")
        if os.path.exists(fn_path):
            module = load_module(fn_path, f"yirage_torch_fns_{i}")
            for k, v in getattr(module, "TORCH_FNS", {}).items():
                fns.setdefault(k, v)
            flops = flops or getattr(module, "graph_flops", None)
    return load_graph_jsons(dirs), fns, flops


def blas_in_use():
    """The BLAS library PyTorch's process has mapped, after one matmul."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower()}
    except OSError:
        return "unknown"
    real = sorted({os.path.realpath(p) for p in libs if p.startswith("/")})
    return ", ".join(real) or "none mapped"


class Kernel:
    """An exported CPU kernel built into a shared library and called via ctypes."""

    def __init__(self, folder, manifest):
        self.tmp = tempfile.mkdtemp(prefix="yirage_cpu_bench_")
        # The source, and the header it includes (exports of format /2).
        for name in filter(None, [manifest["source"], manifest.get("header")]):
            shutil.copy(os.path.join(folder, name), self.tmp)
        subprocess.run(manifest["build"], shell=True, cwd=self.tmp, check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.lib = ctypes.CDLL(os.path.join(self.tmp,
                                            manifest.get("library", "libyirage_kernel.so")))
        self.entry = getattr(self.lib, manifest["entry_point"])
        self.entry.restype = ctypes.c_int
        init = getattr(self.lib, manifest["init"])
        init.restype = ctypes.c_int
        rc = init()
        if rc != 0:
            raise RuntimeError(f"{manifest['init']} returned {rc}")
        self.fini = getattr(self.lib, manifest["fini"])

    def bind(self, inputs, outputs):
        ins = (ctypes.c_void_p * len(inputs))(*[t.data_ptr() for t in inputs])
        outs = (ctypes.c_void_p * len(outputs))(*[t.data_ptr() for t in outputs])
        self._keep = (ins, outs)
        entry = self.entry

        def call():
            if entry(ins, outs) != 0:
                raise RuntimeError("the kernel returned an error")
        return call

    def close(self):
        self.fini()
        shutil.rmtree(self.tmp, ignore_errors=True)


# Calls are timed in blocks of BLOCK per side, the sides alternating, with
# SETTLE_SECONDS of idle before each block.
BLOCK = 10
SETTLE_SECONDS = 0.25


def timed(fn):
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e3


def main():
    torch.set_num_threads(ARGS.threads)
    torch.manual_seed(0)
    dirs = ([d for group in ARGS.graphs_dir for d in group] if ARGS.graphs_dir
            else [EXAMPLES_DIR, CPU_SUITE_DIR, SUITE_DIR])
    graphs, suite_fns, graph_flops = load_graphs(dirs)
    job_seconds = {}
    if ARGS.job_seconds and os.path.exists(ARGS.job_seconds):
        with open(ARGS.job_seconds) as f:
            job_seconds = json.load(f)
    blas = blas_in_use()
    print(f"torch {torch.__version__}, {ARGS.threads} threads, BLAS: {blas}; "
          f"median of {ARGS.iters} calls in alternating blocks of {BLOCK}")
    manifests = []
    for d in ARGS.dirs:
        with open(os.path.join(d, "manifest.json")) as f:
            manifests.append(json.load(f))
    width = max([20] + [len(m["graph"]) + 2 for m in manifests])
    print(f"{'case':<{width}}{'yirage_us':>11}{'eager_us':>11}{'speedup':>9}{'GFLOP/s':>9}"
          f"{'max_err':>10}{'search_s':>9}  plan")
    rows = []
    for d, manifest in zip(ARGS.dirs, manifests):
        graph = manifest["graph"]
        row = {"case": graph, "plan": manifest.get("plan", "")}
        kernel = None
        try:
            graph_json = graphs.get(graph)
            fn = TORCH_FNS.get(graph) or suite_fns.get(graph)
            if fn is None:
                raise RuntimeError(f"no PyTorch function for {graph}")
            positive = positive_inputs(graph_json)
            ours_in, torch_in = [], []
            for t in manifest["inputs"]:
                x = (torch.rand(*t["shape"]) + 0.5 if t["name"] in positive
                     else torch.randn(*t["shape"]) * 0.1)
                ours_in.append(x.to(DTYPES[t["dtype"]]).contiguous())
                torch_in.append(ours_in[-1].float())  # float32 copies, made once
            outs = [torch.empty(*t["shape"], dtype=DTYPES[t["dtype"]])
                    for t in manifest["outputs"]]
            kernel = Kernel(d, manifest)
            ours = kernel.bind(ours_in, outs)
            with torch.no_grad():
                theirs = lambda: fn(*torch_in)
                ours()
                expected = theirs()
                expected = expected if isinstance(expected, (tuple, list)) else (expected,)
                row["max_err"] = max((o.float() - e.float()).abs().max().item()
                                     for o, e in zip(outs, expected))
                for _ in range(ARGS.warmup):
                    ours()
                    theirs()
                mine, eager = [], []
                blocks = max(1, -(-ARGS.iters // BLOCK))
                for b in range(blocks):
                    sides = [(ours, mine), (theirs, eager)]
                    for call, times in (sides if b % 2 == 0 else sides[::-1]):
                        # The other side's idle threads (OpenMP's spin, OpenBLAS's
                        # ~0.1 s spin) must be asleep before this side runs.
                        time.sleep(SETTLE_SECONDS)
                        call()  # wakes this side's threads; not timed
                        for _ in range(min(BLOCK, ARGS.iters - b * BLOCK)):
                            times.append(timed(call))
            row["yirage_us"] = statistics.median(mine)
            row["eager_us"] = statistics.median(eager)
            row["speedup"] = row["eager_us"] / row["yirage_us"]
            flops = graph_flops(graph_json) if graph_flops and graph_json else None
            row["gflops"] = flops / (row["yirage_us"] * 1e3) if flops else math.nan
            search = job_seconds.get(graph)
            row["search_s"] = float(search) if search is not None else math.nan
            print(f"{graph:<{width}}{row['yirage_us']:>11.1f}{row['eager_us']:>11.1f}"
                  f"{row['speedup']:>8.2f}x{row['gflops']:>9.1f}{row['max_err']:>10.2e}"
                  f"{row['search_s']:>9.1f}  {row['plan'][:70]}", flush=True)
        except Exception as e:  # one failing case must not end the run
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {e}"
            print(f"{graph:<{width}}FAILED: {row['error'][:200]}", flush=True)
        finally:
            if kernel is not None:
                kernel.close()
        rows.append(row)
    speedups = [r["speedup"] for r in rows if "speedup" in r]
    summary = speedup_summary(speedups, "PyTorch CPU eager")
    if summary:
        print(summary)
    failed = [r["case"] for r in rows if "error" in r]
    if failed:
        print(f"{len(failed)} case(s) failed: {', '.join(failed)}")
    if ARGS.json:
        with open(ARGS.json, "w") as f:
            json.dump({"torch": torch.__version__, "threads": ARGS.threads, "blas": blas,
                       "rows": rows}, f, indent=1)
    if ARGS.markdown:
        lines = ["| case | YiRage µs | eager µs | speedup | GFLOP/s | max err | job s | plan |",
                 "|---|---:|---:|---:|---:|---:|---:|---|"]
        for r in rows:
            if "error" in r:
                lines.append(f"| `{r['case']}` | | | | | | | failed: "
                             f"{r['error'][:80].replace('|', '/')} |")
                continue
            g = "" if math.isnan(r["gflops"]) else f"{r['gflops']:.1f}"
            s = "" if math.isnan(r["search_s"]) else f"{r['search_s']:.1f}"
            lines.append(f"| `{r['case']}` | {r['yirage_us']:.1f} | {r['eager_us']:.1f} | "
                         f"{r['speedup']:.2f}x | {g} | {r['max_err']:.1e} | {s} | "
                         f"{r['plan'][:100].replace('|', '/')} |")
        with open(ARGS.markdown, "w") as f:
            f.write("\n".join(lines) + "\n\n" + summary + (
                f"; {len(failed)} case(s) failed" if failed else "") + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
