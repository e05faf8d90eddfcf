"""Graph JSON helpers shared by bench/cuda_vs_torch.py and bench/cpu_vs_torch.py
(standard library only)."""
import glob
import json
import math
import os


def load_graph_jsons(dirs):
    """{graph name: graph JSON} of every *.json in dirs (the first one of a name wins)."""
    graphs = {}
    for d in dirs:
        for path in sorted(glob.glob(os.path.join(d, "*.json"))):
            try:
                with open(path) as f:
                    g = json.load(f)
            except (OSError, ValueError):
                continue
            if isinstance(g, dict) and isinstance(g.get("name"), str) and "ops" in g:
                graphs.setdefault(g["name"], g)
    return graphs


def positive_inputs(graph):
    """Graph inputs that must be positive, as in the server's MakeRandomInputs:
    direct operands of log, sqrt and rsqrt, the divisor of div, the base of pow."""
    names = set()
    for op in (graph or {}).get("ops", []):
        ins = op.get("inputs", [])
        if op.get("op") in ("log", "sqrt", "rsqrt") and ins:
            names.add(ins[0])
        elif op.get("op") == "div" and len(ins) == 2:
            names.add(ins[1])
        elif op.get("op") == "pow" and ins:
            names.add(ins[0])
    return names


def speedup_summary(speedups, against):
    """'geometric mean speedup over AGAINST: G x over N cases: U under 1.0x,
    A at or above', or '' without speedups."""
    if not speedups:
        return ""
    geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    under = sum(s < 1.0 for s in speedups)
    return (f"geometric mean speedup over {against}: {geo:.2f}x over {len(speedups)} cases: "
            f"{under} under 1.0x, {len(speedups) - under} at or above")
