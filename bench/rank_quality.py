#!/usr/bin/env python3
"""How well a job's candidate order picks what the device measures.

The search orders a job's candidates (the baseline first, then by the cost
model's estimate, library plans early) and a job with a budget evaluates
only the first N. Given jobs whose candidates were all evaluated (a budget
at least their count), this says, per job, whether the fastest kernel would
have been among the first N, and how close the cost model's estimates rank
to the measured times:

  rank of best   the fastest verified search row's place in the order (1 =
                 first after the baseline)
  regret@N       best time among the first N rows / best time overall
                 (1.00: a budget of N finds the best)
  spearman       rank correlation of estimated cost and measured time over
                 the verified rows (1.0: the same order)

Input: `yirage-client candidates JOB --json` outputs, one a file (gpu_bench.sh
keeps them as OUT/candidates/NAME.json), or folders of them.

  python3 bench/rank_quality.py [--budgets 8,12] [--order DIR] FILE_OR_DIR...

--order DIR replays the jobs in another order: DIR/NAME.json (NAME: the
candidates file's stem) as `yirage-search-bench --json-dir DIR` writes it
for the job's graph and chip, say with a changed cost model. The measured
rows are then ranked by their place in that order (matched by description)
and its estimates, and `new@N` counts the plans among its first N that the
job never timed (regret@N is then a bound on what that budget finds).
"""
import argparse
import json
import math
import os
import sys


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):  # ties share their mean rank
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2.0 + 1
        i = j + 1
    return r


def spearman(xs, ys):
    if len(xs) < 3:
        return float("nan")
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    return cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else float("nan")


def replay(search, order):
    """search's rows at their places in `order` (a search-bench plans list,
    baseline first), with its estimates; rows it lacks go last. Also returns
    the places of the order's plans that no row matches."""
    places = {}
    for i, p in enumerate(order[1:]):
        places.setdefault(p["description"], []).append((i, p.get("estimated_cost", 0)))
    placed = []
    for c in search:
        spots = places.get(c.get("description", ""))
        if spots:
            i, est = spots.pop(0)
            c = dict(c, estimated_cost=est)
        else:  # not in the order: no estimate of its
            i = len(order) + len(placed)
            c = dict(c, estimated_cost=0)
        placed.append((i, c))
    placed.sort(key=lambda t: t[0])
    unmatched = sorted(i for spots in places.values() for i, _ in spots)
    return placed, unmatched


def log_ratio_stats(ratios):
    """Of positive ratios (measured time / estimate): their geometric mean,
    the spread (standard deviation) of their logs, and the share within 2x
    of that mean. None for fewer than two."""
    if len(ratios) < 2:
        return None
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / len(logs))
    within = sum(1 for x in logs if abs(x - mean) <= math.log(2)) / len(logs)
    return math.exp(mean), sd, within


def job_quality(doc, budgets, order=None):
    rows = [c for c in doc.get("candidates", [])
            if not c.get("final_of") and not c.get("confirms")]
    rows.sort(key=lambda c: c["candidate_id"])  # the order the budget takes them in
    search = [c for c in rows if not c.get("baseline")]
    unevaluated = sum(1 for c in search if c.get("status") in ("PENDING", "LEASED", "SKIPPED"))
    placed, unmatched = replay(search, order) if order is not None else (
        list(enumerate(search)), [])
    timed = [(i, c) for i, c in placed
             if c.get("status") == "VERIFIED" and c.get("time_us", 0) > 0]
    if not timed:
        return None
    best_i, best = min(timed, key=lambda t: t[1]["time_us"])
    estimated = [(i, c) for i, c in timed if c.get("estimated_cost", 0) > 0]
    out = {
        "job_id": doc.get("job_id", ""),
        "rows": len(search),
        "verified": len(timed),
        "unevaluated": unevaluated,
        "best_rank": best_i + 1,
        "best_us": best["time_us"],
        "best_plan": best.get("description", ""),
        "ratios": [c["time_us"] / (c["estimated_cost"] * 1e6) for _, c in estimated],
        "spearman": spearman([c["estimated_cost"] for _, c in estimated],
                             [c["time_us"] for _, c in estimated]),
    }
    for n in budgets:
        first = [c["time_us"] for i, c in timed if i < n]
        out[f"regret@{n}"] = (min(first) / best["time_us"]) if first else float("inf")
        out[f"new@{n}"] = sum(1 for i in unmatched if i < n)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--budgets", default="8,12", help="budgets N to report regret@N for")
    ap.add_argument("--order", help="folder of search orders to replay the jobs in")
    ap.add_argument("paths", nargs="+")
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",") if b]
    files = []
    for p in args.paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".json"))
        else:
            files.append(p)
    results = []
    for f in files:
        try:
            with open(f) as fh:
                doc = json.load(fh)
        except (OSError, ValueError) as e:
            print(f"{f}: unreadable: {e}", file=sys.stderr)
            continue
        order = None
        if args.order:
            path = os.path.join(args.order, os.path.basename(f))
            try:
                with open(path) as fh:
                    order = json.load(fh)["plans"]
            except (OSError, ValueError, KeyError) as e:
                print(f"{path}: no order: {e}", file=sys.stderr)
                continue
        q = job_quality(doc, budgets, order)
        if q is None:
            print(f"{f}: no verified search row", file=sys.stderr)
            continue
        q["name"] = os.path.splitext(os.path.basename(f))[0]
        results.append(q)
    if not results:
        return 1
    head = ["case", "rows", "verified", "rank of best", "spearman"] + [f"regret@{n}" for n in budgets]
    print("| " + " | ".join(head) + " | best plan |")
    print("|---" * (len(head) + 1) + "|")
    for q in results:
        cells = [f"`{q['name']}`", str(q["rows"]), str(q["verified"]), str(q["best_rank"]),
                 "n/a" if math.isnan(q["spearman"]) else f"{q['spearman']:.2f}"]
        cells += [f"{q[f'regret@{n}']:.2f}" + (f" (new {q[f'new@{n}']})" if q[f"new@{n}"] else "")
                  for n in budgets]
        print("| " + " | ".join(cells) + f" | {q['best_plan'][:70]} |")
    partial = [q["name"] for q in results if q["unevaluated"]]
    for n in budgets:
        vals = [q[f"regret@{n}"] for q in results if math.isfinite(q[f"regret@{n}"])]
        geo = math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")
        found = sum(1 for q in results if q[f"regret@{n}"] <= 1.0)
        print(f"\nbudget {n}: the best found in {found} of {len(results)} jobs; "
              f"geometric mean regret {geo:.3f}")
    ratios = [r for q in results for r in q["ratios"]]
    stats = log_ratio_stats(ratios)
    if stats:
        geo, sd, _ = stats
        print(f"measured time / estimate (estimates in seconds) over {len(ratios)} verified rows: "
              f"geometric mean {geo:.3g}, log spread {sd:.2f}")
    rhos = [q["spearman"] for q in results if not math.isnan(q["spearman"])]
    if rhos:
        print(f"median spearman {sorted(rhos)[len(rhos) // 2]:.2f} over {len(rhos)} jobs")
    if partial:
        print(f"not every candidate evaluated (regret is a lower bound) in: {', '.join(partial)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
