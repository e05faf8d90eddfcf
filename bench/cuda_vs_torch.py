#!/usr/bin/env python3
"""Times kernels exported by YiRage (yirage-client kernel JOB --out DIR) against
PyTorch eager and torch.compile, in one process, with one method: CUDA events
around one call, the L2 cache flushed (a 512 MiB write) before each call, the
median of --iters calls after --warmup calls. Each exported kernel is called
through its own yirage_kernel.py, as a user would.

    python3 bench/cuda_vs_torch.py [--bandwidth-gbps 4800] KERNEL_DIR...

Prints one row per kernel: our time, eager, torch.compile, our speedup over the
faster of the two, the fraction of the HBM roofline we reach (bytes of the
inputs and outputs / time, against the chip's bandwidth), and read_us: the time
of a simple Triton kernel that only reads that many bytes, measured the same
way (launch, events and ramp included): a reference point for memory-bound
kernels, not a bound (a tuned read can be faster). After each flush the
stream idles ~100 us before the start event, so host launch overhead is in no
figure. Also writes the rows as JSON to --json when given."""
import argparse
import importlib.util
import json
import math
import os
import statistics
import sys

import torch
import torch.nn.functional as F

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

_flush = None
# GPU cycles the stream idles after each flush (~100 us on an H200): the call's
# launches are all queued before its start event, so no figure counts host
# launch overhead (Python, dynamo guards), which a 512 MiB flush alone did not
# always hide (torch.compile's LoRA: 152 us with events, 3.7 us of kernels).
HEAD_START_CYCLES = 200_000


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


def read_floor_fn(nbytes):
    """A call that only reads `nbytes` from HBM (a Triton kernel summing
    16-byte vectors, one 16 KiB block per program): what a plain read of those
    bytes takes under this method. None without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def _read(x, out, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x + offs, mask=offs < n, other=0)
        tl.store(out + pid, tl.sum(v, axis=0))

    n = max(4, nbytes // 4)
    block = 4096
    x = torch.ones(n, dtype=torch.int32, device="cuda")
    grid = (n + block - 1) // block
    out = torch.empty(grid, dtype=torch.int32, device="cuda")
    return lambda: _read[(grid,)](x, out, n, BLOCK=block)


def load_kernel(path, index):
    spec = importlib.util.spec_from_file_location(f"yirage_kernel_{index}",
                                                  os.path.join(path, "yirage_kernel.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    global _flush
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--bandwidth-gbps", type=float, default=4800.0,
                    help="the chip's HBM bandwidth (the registry's memory.bandwidth_gbps)")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--profile", action="store_true",
                    help="also print each one's kernel time per call (CUPTI), without launch gaps")
    args = ap.parse_args()
    torch.manual_seed(0)
    _flush = torch.empty(512 * 1024 * 1024, dtype=torch.int8, device="cuda")
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  "
          f"bandwidth {args.bandwidth_gbps:g} GB/s  median of {args.iters} calls, L2 flushed")
    header = (f"{'case':<20}{'yirage_us':>10}{'eager_us':>10}{'compile_us':>11}"
              f"{'speedup':>9}{'roofline':>9}{'read_us':>9}{'max_err':>9}  plan")
    print(header)
    if args.profile:
        tiny = torch.zeros(1, device="cuda")
        print(f"{'(floor: one tiny kernel)':<30}{bench(lambda: tiny.add_(1), args.iters, args.warmup):>10.2f}")
    rows = []
    for index, d in enumerate(args.dirs):
        with open(os.path.join(d, "manifest.json")) as f:
            manifest = json.load(f)
        graph = manifest["graph"]
        base = graph.rsplit("_b", 1)[0] if "_b" in graph else graph
        fn = TORCH_FNS.get(base)
        inputs = [(torch.randn(*t["shape"], device="cuda") * 0.1).to(DTYPES[t["dtype"]])
                  for t in manifest["inputs"]]
        kernel = load_kernel(d, index)
        ours = lambda: kernel.run(*inputs)
        out = ours()
        torch.cuda.synchronize()
        row = {"case": graph, "plan": manifest.get("plan", "")}
        if fn is not None:
            with torch.no_grad():
                expected = fn(*inputs)
                row["max_err"] = (out.float() - expected.float()).abs().max().item()
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
                torch._dynamo.reset()
        if args.profile:
            row["yirage_gpu"] = kernel_times(ours)
        row["yirage_us"] = bench(ours, args.iters, args.warmup)
        moved = sum(t["bytes"] for t in manifest["inputs"]) + \
            sum(t["bytes"] for t in manifest["outputs"])
        row["bytes"] = moved
        row["roofline_us"] = moved / (args.bandwidth_gbps * 1e3)
        row["roofline_fraction"] = row["roofline_us"] / row["yirage_us"]
        floor = read_floor_fn(moved)
        row["read_us"] = bench(floor, args.iters, args.warmup) if floor else math.nan
        torch_best = min(v for v in (row.get("eager_us", math.nan), row.get("compile_us", math.nan))
                         if not math.isnan(v)) if fn is not None else math.nan
        row["speedup"] = torch_best / row["yirage_us"]
        rows.append(row)
        print(f"{graph:<20}{row['yirage_us']:>10.2f}{row.get('eager_us', math.nan):>10.2f}"
              f"{row.get('compile_us', math.nan):>11.2f}{row['speedup']:>8.2f}x"
              f"{row['roofline_fraction']:>9.2f}{row['read_us']:>9.2f}"
              f"{row.get('max_err', math.nan):>9.4f}  "
              f"{row['plan'][:60]}", flush=True)
        if args.profile:
            for who in ("yirage", "eager", "compile"):
                if who + "_gpu" in row:
                    t, n, name = row[who + "_gpu"]
                    print(f"    {who:<8} kernels {t:8.2f} us in {n} kernel(s), longest {name[:70]}")
    speedups = [r["speedup"] for r in rows if not math.isnan(r["speedup"])]
    if speedups:
        geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        print(f"geometric mean speedup over the faster of eager and torch.compile: {geo:.2f}x "
              f"({sum(s >= 1.0 for s in speedups)}/{len(speedups)} cases at or above 1.0x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
