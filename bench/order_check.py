#!/usr/bin/env python3
"""Where measured winners stand in a search's order, and what a change moved.

`yirage-search-bench --json-dir DIR` writes the order a job would time its
candidates in (DIR/NAME.json, baseline first). Given the plans that won when
the graphs were timed on a device (WINNERS: a JSON object, graph name -> a
list of {"description", ...}, newest first; bench/h200_winners.json holds the
H200's from bench/RESULTS.md), this says for each graph where its newest
winner now stands: a job with a budget of N times it when its place is N or
less (1 = the baseline). With --before DIR2 (the order of another build) it
also lists the graphs whose first N plans changed. It exits 1 when a
winner is outside the first N, unless its entry says why ("moved_out": a
change that puts untimed plans first on purpose, to be measured). Where the winners file
has the measured time (yirage_us), it also says how close the order's
estimates (seconds, core/cost_model.h) come to those times.

  python3 bench/order_check.py --winners bench/h200_winners.json [--budget 8]
      [--before OLD_DIR] NEW_DIR
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rank_quality  # noqa: E402


def load_orders(folder, costs=None):
    orders = {}
    for f in sorted(os.listdir(folder)):
        if f.endswith(".json"):
            with open(os.path.join(folder, f)) as fh:
                plans = json.load(fh)["plans"]
            orders[f[:-5]] = [p["description"] for p in plans]
            if costs is not None:
                costs[f[:-5]] = [p.get("estimated_cost", 0) for p in plans]
    return orders


def estimate_accuracy(orders, costs, winners):
    """Measured time of each newest winner (yirage_us) over the order's
    estimate of its plan (seconds): how many, and rank_quality's
    log_ratio_stats of them (None for fewer than two)."""
    ratios = []
    for name, order in orders.items():
        w = (winners.get(name) or [{}])[0]
        p = place(order, w.get("description", ""))
        us = w.get("yirage_us")
        if p is None or not us or costs[name][p - 1] <= 0:
            continue
        ratios.append(us / (costs[name][p - 1] * 1e6))
    stats = rank_quality.log_ratio_stats(ratios)
    return (len(ratios),) + stats if stats else None


def place(order, description):
    """1-based place of the plan in the order, None when absent. The
    baseline's description ends in "baseline" (or "baseline (library
    matmuls)"); a winner written as "baseline" matches it."""
    for i, d in enumerate(order):
        if d == description or (i == 0 and description.endswith("baseline") and "baseline" in d):
            return i + 1
    return None


def check(orders, winners):
    rows = []
    for name in sorted(orders):
        entries = winners.get(name) or []
        if not entries:
            continue
        w = entries[0]
        rows.append((name, w["description"], place(orders[name], w["description"]),
                     w.get("moved_out", "")))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--winners", required=True)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--before", help="another build's orders, to list what changed")
    ap.add_argument("orders")
    args = ap.parse_args()
    with open(args.winners) as fh:
        winners = json.load(fh)
    costs = {}
    orders = load_orders(args.orders, costs)
    rows = check(orders, winners)
    before = load_orders(args.before) if args.before else {}
    old = {name: p for name, _, p, _ in check(before, winners)} if before else {}
    outside = 0
    excused = []
    print(f"| graph | newest winner | place | {'before | ' if before else ''}within {args.budget} |")
    print("|---|---|---:|" + ("---:|" if before else "") + "---|")
    for name, desc, p, moved_out in rows:
        ok = p is not None and p <= args.budget
        if not ok and moved_out:
            excused.append((name, moved_out))
        elif not ok:
            outside += 1
        cells = [f"`{name}`", desc[:70], "absent" if p is None else str(p)]
        if before:
            q = old.get(name)
            cells.append("absent" if q is None else str(q))
        cells.append("yes" if ok else "moved out" if moved_out else "**no**")
        print("| " + " | ".join(cells) + " |")
    inside = len(rows) - outside - len(excused)
    print(f"\n{inside} of {len(rows)} newest winners within the first {args.budget}")
    for name, why in excused:
        print(f"moved out on purpose: {name}: {why}")
    acc = estimate_accuracy(orders, costs, winners)
    if acc:
        n, geo, sd, within = acc
        print(f"measured time / estimate over {n} winners (estimates in seconds): geometric mean "
              f"{geo:.3g}, log spread {sd:.2f}, {within:.0%} within 2x of that mean")
    if before:
        changed = []
        for name in sorted(orders):
            if name in before and orders[name][:args.budget] != before[name][:args.budget]:
                gone = [d for d in before[name][:args.budget] if d not in orders[name][:args.budget]]
                came = [d for d in orders[name][:args.budget] if d not in before[name][:args.budget]]
                changed.append((name, gone, came))
        print(f"\n{len(changed)} of {len(orders)} graphs change their first {args.budget}:")
        for name, gone, came in changed:
            print(f"- {name}: out {gone if gone else '(reordered only)'}; in {came}")
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main())
