#!/usr/bin/env python3
"""Times kernels exported by YiRage (yirage-client kernel JOB --out DIR) against
PyTorch eager and torch.compile, in one process, with one method: CUDA events
around one call, the L2 cache flushed (a 512 MiB write) before each call, the
median of --iters calls after --warmup calls. Each exported kernel is called
through its own yirage_kernel.py, as a user would.

    python3 bench/cuda_vs_torch.py [--bandwidth-gbps 4800] [--peak-tflops 989]
        [--graphs-dir DIR...] [--job-seconds FILE] [--markdown FILE] KERNEL_DIR...

Prints one row per kernel: our time, eager, torch.compile, our speedup over the
faster of the two; the roofline bound: the larger of the matmul FLOPs / peak
(compute) and the bytes of the inputs and outputs / HBM bandwidth (memory),
that time (bound_us) and the fraction of it we reach (bound_us / our time);
the fraction of the HBM roofline alone, and read_us: the time of a tuned CUDA
kernel that only reads that many bytes (bench/hbm_read.cu, its launch shape
searched, through CuPy), measured the same way (launch, events and ramp
included), which is the memory bound (the flat HBM roofline when CuPy is
missing); the job's search seconds (--job-seconds);
the largest difference from PyTorch's result. After each flush the stream idles
~100 us before the start event, so host launch overhead is in no figure.

The PyTorch function of a graph comes from TORCH_FNS below (by the graph's
name without its _b<N> suffix), else from examples/graphs/suite/torch_fns.py
(by the exact graph name), else from the graph itself, one torch call per op
(bench/graph_torch.py). FLOPs come from the graph's JSON, found by name in
--graphs-dir (default: examples/graphs/suite and examples/graphs/bench); the
peak is --peak-tflops for graphs with 16-bit tensors, --peak-tflops-tf32 for
float32 graphs with matmuls (TF32 is allowed on the PyTorch side),
--peak-tflops-fp32 for other float32 graphs. Also writes the rows as JSON to
--json and as a GitHub markdown table to --markdown when given."""
import argparse
import gc
import importlib.util
import json
import math
import os
import statistics
import sys
import traceback
import warnings

import torch
import torch.nn.functional as F

from bench_graphs import load_graph_jsons, positive_inputs, speedup_summary
from graph_torch import torch_fn

torch.backends.cuda.matmul.allow_tf32 = True
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def rms(x, eps=1e-6):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype)


def gqa(Q, K, V):
    s = torch.exp(torch.bmm(Q, K).float())
    return torch.bmm((s / s.sum(-1, keepdim=True)).to(Q.dtype), V)


# The PyTorch a user writes for each benchmark graph (examples/graphs/bench),
# as in ../shared/reference/torch_baselines.py; arguments in graph input order.
TORCH_FNS = {
    "gated_mlp": lambda X, W1, W2: F.silu(X @ W1) * (X @ W2),
    "rms_norm_linear": lambda X, G, W: rms(X) * G @ W,
    "lora": lambda X, W, A, B: X @ W + (X @ A) @ B,
    "gqa_decode": gqa,
    "norm_transformer": lambda H, X, alpha: rms(X + alpha * (rms(H) + X)),
}

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE_DIR = os.path.join(HERE, "..", "examples", "graphs", "suite")
BENCH_DIR = os.path.join(HERE, "..", "examples", "graphs", "bench")


def load_suite():
    """examples/graphs/suite/torch_fns.py (TORCH_FNS by exact graph name,
    graph_flops), or None when it is absent."""
    path = os.path.join(SUITE_DIR, "torch_fns.py")
    if not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("yirage_suite_torch_fns", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_inputs(specs, positive):
    """randn * 0.1 in each input's dtype; uniform [0.5, 1.5] where it must be positive."""
    inputs = []
    for t in specs:
        if t["name"] in positive:
            x = torch.rand(*t["shape"], device="cuda").add_(0.5)
        else:
            x = torch.randn(*t["shape"], device="cuda").mul_(0.1)
        inputs.append(x.to(DTYPES[t["dtype"]]))
        del x
    return inputs


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


_flush = None
# GPU cycles the stream idles after each flush (~500 us on an H200): the call's
# launches are all queued before its start event, so no figure counts host
# launch overhead (Python, dynamo guards), which a 512 MiB flush alone did not
# always hide (torch.compile's LoRA: 152 us with events, 3.7 us of kernels).
# (It was 100 us. Raising it did not steady torch.compile's times, which
# moved up to 4.7x between runs of the same kernels before and after:
# bench/RESULTS.md, the seed-11 random graphs; it only rules host launch
# overhead out as their cause.)
HEAD_START_CYCLES = 1_000_000


def bench(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        _flush.zero_()
        torch.cuda._sleep(HEAD_START_CYCLES)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def kernel_times(fn, calls=30):
    """GPU time of fn's kernels per call (CUPTI, torch.profiler), without the
    launch gaps that events around the call also see: (median us, kernels per
    call, the longest kernel's name). The L2 flush runs before each call as in
    bench() and is left out by its kernel name."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            _flush.zero_()
            torch.cuda.synchronize()
            fn()
            torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "fill" not in e.name.lower() and "memset" not in e.name.lower()
               and "memcpy" not in e.name.lower()]
    kernels.sort(key=lambda e: e.time_range.start)
    # Calls are separated by synchronizations: split where the gap is large.
    groups, last_end = [], None
    for e in kernels:
        if last_end is None or e.time_range.start - last_end > 50:
            groups.append([])
        groups[-1].append(e)
        last_end = e.time_range.end
    if not groups:
        return math.nan, 0, ""
    per_call = [sum(e.time_range.elapsed_us() for e in g) for g in groups]
    longest = max(groups[-1], key=lambda e: e.time_range.elapsed_us()).name
    return statistics.median(per_call), statistics.median(len(g) for g in groups), longest


_read_module = None


def tuned_read(nbytes, iters, warmup):
    """The memory bound of a case: the fastest read of `nbytes` from HBM by
    bench/hbm_read.cu (CuPy compiles it with NVRTC), its launch shape and
    loads in flight searched here, timed by bench() like every kernel
    (launch, events and ramp included). Returns (us, how) where how names the
    kernel and the shape that won, or (nan, why) without CuPy."""
    global _read_module
    try:
        import cupy
    except ImportError as e:
        return math.nan, f"no CuPy ({e})"
    if _read_module is None:
        with open(os.path.join(HERE, "hbm_read.cu")) as f:
            source = f.read()
        _read_module = cupy.RawModule(code=source, options=("-std=c++17",),
                                      name_expressions=[f"hbm_read<{u}>" for u in (2, 4, 8)])
    vectors = max(1, nbytes // 16)
    x = torch.ones(vectors * 4, dtype=torch.int32, device="cuda")
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    xs, outs = cupy.asarray(x), cupy.asarray(out)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    with warnings.catch_warnings():  # CuPy 14 deprecates ExternalStream; it still works
        warnings.simplefilter("ignore", DeprecationWarning)
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    shapes = []
    for u in (2, 4, 8):
        kernel = _read_module.get_function(f"hbm_read<{u}>")
        for threads in (256, 512, 1024):
            for per_sm in (1, 2, 4, 8):
                if threads * per_sm > 2048:
                    continue
                blocks = min(sms * per_sm, max(1, -(-vectors // threads)))
                shapes.append((u, threads, blocks, kernel))
    shapes = list({(u, t, b): k for u, t, b, k in shapes}.items())

    def launcher(u, threads, blocks, kernel):
        def run():
            with stream:
                kernel((blocks,), (threads,), (xs, cupy.uint64(vectors), outs))
        return run

    trial = max(10, iters // 5)
    timed = [(bench(launcher(u, t, b, k), trial, 3), (u, t, b, k)) for (u, t, b), k in shapes]
    _, (u, t, b, k) = min(timed, key=lambda p: p[0])
    us = bench(launcher(u, t, b, k), iters, warmup)
    return us, f"hbm_read<{u}> {b} blocks x {t} threads"


def load_kernel(path, index):
    spec = importlib.util.spec_from_file_location(f"yirage_kernel_{index}",
                                                  os.path.join(path, "yirage_kernel.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fmt(v, spec):
    return "" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def write_markdown(path, rows, summary):
    cols = ["case", "YiRage µs", "eager µs", "compile µs", "speedup vs faster", "bound",
            "fraction of bound", "HBM roofline fraction", "tuned read µs", "search s", "plan"]
    lines = ["| " + " | ".join(cols) + " |",
             "|" + "|".join(["---"] + ["---:"] * 4 + ["---"] + ["---:"] * 4 + ["---"]) + "|"]
    for r in rows:
        if "error" in r:
            cells = [f"`{r['case']}`"] + [""] * 9 + ["failed: " + r["error"][:80].replace("|", "\\|")]
        else:
            plan = r.get("plan", "")
            plan = (plan[:117] + "...") if len(plan) > 120 else plan
            speedup = fmt(r.get("speedup"), ".2f")
            cells = [f"`{r['case']}`", fmt(r.get("yirage_us"), ".2f"), fmt(r.get("eager_us"), ".2f"),
                     fmt(r.get("compile_us"), ".2f"), speedup + ("x" if speedup else ""),
                     r.get("bound", ""), fmt(r.get("bound_frac"), ".2f"),
                     fmt(r.get("roofline_fraction"), ".2f"), fmt(r.get("read_us"), ".2f"),
                     fmt(r.get("search_s"), ".1f"), plan.replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
        if summary:
            f.write("\n" + summary + "\n")


def main():
    global _flush
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--bandwidth-gbps", type=float, default=4800.0,
                    help="the chip's HBM bandwidth (the registry's memory.bandwidth_gbps)")
    ap.add_argument("--peak-tflops", type=float, default=989.0,
                    help="the chip's dense 16-bit peak (compute.peak_tflops_fp16), for graphs "
                         "with float16/bfloat16 tensors")
    ap.add_argument("--peak-tflops-fp32", type=float, default=67.0,
                    help="dense float32 peak (compute.peak_tflops_fp32), for float32 graphs "
                         "without matmuls")
    ap.add_argument("--peak-tflops-tf32", type=float, default=494.0,
                    help="dense TF32 peak, for float32 graphs with matmuls (TF32 allowed)")
    ap.add_argument("--graphs-dir", action="append", nargs="+", default=None,
                    help="folders holding the graph JSON of each manifest's 'graph' (for FLOPs "
                         "and positive inputs); default examples/graphs/suite and "
                         "examples/graphs/bench")
    ap.add_argument("--job-seconds",
                    help="a JSON map graph name -> the job's search wall seconds (gpu_bench.sh)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--markdown", help="also write the table here as a GitHub markdown table")
    ap.add_argument("--profile", action="store_true",
                    help="also print each one's kernel time per call (CUPTI), without launch gaps")
    args = ap.parse_args()
    args.dirs = [d for d in args.dirs if d != "--"]
    graphs_dirs = ([d for group in args.graphs_dir for d in group] if args.graphs_dir
                   else [SUITE_DIR, BENCH_DIR])
    graphs = load_graph_jsons(graphs_dirs)
    suite = load_suite()
    suite_fns = getattr(suite, "TORCH_FNS", {}) if suite else {}
    graph_flops = getattr(suite, "graph_flops", None) if suite else None
    job_seconds = {}
    if args.job_seconds and os.path.exists(args.job_seconds):
        with open(args.job_seconds) as f:
            job_seconds = json.load(f)
    manifests = []
    for d in args.dirs:
        with open(os.path.join(d, "manifest.json")) as f:
            manifests.append(json.load(f))
    width = max([20] + [len(m["graph"]) + 2 for m in manifests])

    torch.manual_seed(0)
    _flush = torch.empty(512 * 1024 * 1024, dtype=torch.int8, device="cuda")
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"bandwidth {args.bandwidth_gbps:g} GB/s  peak {args.peak_tflops:g} (16-bit) / "
          f"{args.peak_tflops_tf32:g} (TF32) / {args.peak_tflops_fp32:g} (fp32) TFLOPS  "
          f"median of {args.iters} calls, L2 flushed")
    header = (f"{'case':<{width}}{'yirage_us':>10}{'eager_us':>10}{'compile_us':>11}"
              f"{'speedup':>9}{'bound':>9}{'bound_us':>10}{'of_bound':>9}{'roofline':>9}"
              f"{'read_us':>9}{'search_s':>9}{'max_err':>9}  plan")
    print(header)
    if args.profile:
        tiny = torch.zeros(1, device="cuda")
        print(f"{'(floor: one tiny kernel)':<30}{bench(lambda: tiny.add_(1), args.iters, args.warmup):>10.2f}")
    rows = []
    for index, (d, manifest) in enumerate(zip(args.dirs, manifests)):
        graph = manifest["graph"]
        base = graph.rsplit("_b", 1)[0] if "_b" in graph else graph
        fn = TORCH_FNS.get(base) or suite_fns.get(graph)
        graph_json = graphs.get(graph)
        row = {"case": graph, "plan": manifest.get("plan", "")}
        if fn is None and graph_json is not None:
            fn = torch_fn(graph_json)  # one torch call per op (bench/graph_torch.py)
            row["torch_from"] = "graph"
        inputs = out = expected = kernel = compiled = None
        try:
            inputs = make_inputs(manifest["inputs"], positive_inputs(graph_json))
            kernel = load_kernel(d, index)
            ours = lambda: kernel.run(*inputs)
            out = ours()
            torch.cuda.synchronize()
            if fn is not None:
                with torch.no_grad():
                    expected = fn(*inputs)
                    row["max_err"] = max((o.float() - e.float()).abs().max().item()
                                         for o, e in zip(as_tuple(out), as_tuple(expected)))
                    expected = None
                    row["eager_us"] = bench(lambda: fn(*inputs), args.iters, args.warmup)
                    try:
                        compiled = torch.compile(fn)
                        compiled(*inputs)
                        row["compile_us"] = bench(lambda: compiled(*inputs), args.iters, args.warmup)
                    except Exception as e:  # report, keep going
                        print(f"torch.compile failed for {graph}: {e}", file=sys.stderr)
                        row["compile_us"] = math.nan
                    if args.profile:
                        row["eager_gpu"] = kernel_times(lambda: fn(*inputs))
                        if not math.isnan(row["compile_us"]):
                            row["compile_gpu"] = kernel_times(lambda: compiled(*inputs))
                    compiled = None
                    torch._dynamo.reset()
            else:
                print(f"no PyTorch function for {graph}", file=sys.stderr)
            if args.profile:
                row["yirage_gpu"] = kernel_times(ours)
            row["yirage_us"] = bench(ours, args.iters, args.warmup)
        except Exception as e:  # one failing case must not end the run
            traceback.print_exc()
            row["error"] = f"{type(e).__name__}: {e}"
            print(f"{graph:<{width}}FAILED: {row['error'][:200]}", flush=True)
            rows.append(row)
            continue
        finally:
            inputs = out = expected = kernel = compiled = ours = None
            gc.collect()
            torch.cuda.empty_cache()
        moved = sum(t["bytes"] for t in manifest["inputs"]) + \
            sum(t["bytes"] for t in manifest["outputs"])
        row["bytes"] = moved
        row["roofline_us"] = moved / (args.bandwidth_gbps * 1e3)
        row["roofline_fraction"] = row["roofline_us"] / row["yirage_us"]
        try:
            row["read_us"], row["read_how"] = tuned_read(moved, args.iters, args.warmup)
        except Exception as e:  # the bound falls back to the roofline
            traceback.print_exc()
            row["read_us"], row["read_how"] = math.nan, f"{type(e).__name__}: {e}"
        flops = None
        if graph_json is not None and graph_flops is not None:
            try:
                flops = graph_flops(graph_json)
            except Exception as e:
                print(f"no FLOP count for {graph}: {e}", file=sys.stderr)
        sixteen = any(t["dtype"] != "float32" for t in manifest["inputs"] + manifest["outputs"])
        peak = args.peak_tflops if sixteen else (
            args.peak_tflops_tf32 if flops else args.peak_tflops_fp32)
        row["flops"] = flops
        row["peak_tflops"] = peak
        row["compute_us"] = flops / (peak * 1e6) if flops is not None else math.nan
        memory_us = row["read_us"] if not math.isnan(row["read_us"]) else row["roofline_us"]
        compute_bound = flops is not None and row["compute_us"] > memory_us
        row["bound"] = "compute" if compute_bound else "memory"
        row["bound_us"] = row["compute_us"] if compute_bound else memory_us
        row["bound_frac"] = row["bound_us"] / row["yirage_us"]
        search = job_seconds.get(graph, job_seconds.get(os.path.basename(os.path.normpath(d))))
        row["search_s"] = float(search) if search is not None else math.nan
        torch_times = [v for v in (row.get("eager_us", math.nan), row.get("compile_us", math.nan))
                       if not math.isnan(v)]
        torch_best = min(torch_times) if torch_times else math.nan
        row["speedup"] = torch_best / row["yirage_us"]
        rows.append(row)
        print(f"{graph:<{width}}{row['yirage_us']:>10.2f}{row.get('eager_us', math.nan):>10.2f}"
              f"{row.get('compile_us', math.nan):>11.2f}{row['speedup']:>8.2f}x"
              f"{row['bound']:>9}{row['bound_us']:>10.2f}{row['bound_frac']:>9.2f}"
              f"{row['roofline_fraction']:>9.2f}{row['read_us']:>9.2f}{row['search_s']:>9.1f}"
              f"{row.get('max_err', math.nan):>9.4f}  "
              f"{row['plan'][:60]}", flush=True)
        if args.profile:
            for who in ("yirage", "eager", "compile"):
                if who + "_gpu" in row:
                    t, n, name = row[who + "_gpu"]
                    print(f"    {who:<8} kernels {t:8.2f} us in {n} kernel(s), longest {name[:70]}")
            print(f"    read     {row['read_how']}")
    speedups = [r["speedup"] for r in rows if not math.isnan(r.get("speedup", math.nan))]
    summary = speedup_summary(speedups, "the faster of eager and torch.compile")
    if summary:
        memory = [r for r in rows if r.get("bound") == "memory" and "error" not in r
                  and not math.isnan(r.get("read_us", math.nan))]
        if memory:
            near = sum(r["yirage_us"] <= 1.1 * r["read_us"] for r in memory)
            summary += (f"; memory-bound cases within 1.1x of the tuned read: {near} of "
                        f"{len(memory)}")
        print(summary)
    failed = [r["case"] for r in rows if "error" in r]
    if failed:
        print(f"{len(failed)} case(s) failed: {', '.join(failed)}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.markdown:
        write_markdown(args.markdown, rows, summary + (f"; {len(failed)} case(s) failed"
                                                      if failed else ""))


if __name__ == "__main__":
    main()
