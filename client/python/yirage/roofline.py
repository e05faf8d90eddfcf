"""Roofline plots of a job's candidates.

Each verified candidate is a point at its arithmetic intensity (FLOP per
byte moved) against the rate it reached (TFLOP/s), under the two roofs of
the job's chip from the registry: the memory roof (bandwidth x intensity)
and the compute roof (the peak TFLOP/s for the graph's dtype).

    c = yirage.Client("127.0.0.1:50051")
    c.get_job(job_id).roofline("roofline.png")   # writes the PNG; returns the Figure
    fig = c.roofline(job_id)                     # the matplotlib Figure (Agg), to show or save
    r = c.roofline_data(job_id)                  # the numbers: r.points, r.peak_tflops, ...

    python -m yirage.roofline --data DATA.json --out roofline.png

The last form is what `yirage-client roofline JOB --out roofline.png` runs
with the data it fetched (the job, its candidates and its chip in
protobuf's JSON mapping, field names as in the .proto files); it needs
matplotlib only, not grpcio.

Where the numbers come from: the server counts each candidate's work
(Candidate.work, core/plan_work.h): the FLOPs of the plan's graph as the
op table counts them, and the bytes its kernels must move at the least
(each kernel's inputs read once and outputs written once; a fused kernel
keeps its intermediates on chip). The achieved rate is FLOPs over the
candidate's measured median time. Roofs: Chip.memory.bandwidth_gbps and
Chip.compute.peak_tflops_fp32 / _fp16 / _bf16; `peak_tflops=` and
`bandwidth_gbps=` supply or override them.
"""

import argparse
import json
import math
import sys
import textwrap

FORMAT = "yirage-roofline/1"

# Graph dtype (the PlanWork.dtype enum name) -> (Chip.compute field, label).
_PEAK_FIELDS = {
    "FLOAT32": ("peak_tflops_fp32", "fp32"),
    "FLOAT16": ("peak_tflops_fp16", "fp16"),
    "BFLOAT16": ("peak_tflops_bf16", "bf16"),
}
_DTYPE_NAMES = {"FLOAT32": "float32", "FLOAT16": "float16", "BFLOAT16": "bfloat16"}
_FAILED = ("MISMATCH", "ERROR")
_NOT_RUN = ("PENDING", "LEASED", "CANDIDATE_STATUS_UNSPECIFIED")


def _num(value, default=0.0):
    """A number of protobuf's JSON mapping (int64 arrive as strings)."""
    if value is None or value == "":
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _positive(value):
    return value is not None and math.isfinite(value) and value > 0


class Point:
    """One verified candidate on the roofline."""

    def __init__(self, candidate_id, description, time_us, baseline_time_us, flops, nbytes,
                 baseline=False, best=False, same_kernel_as=0):
        self.candidate_id = candidate_id
        self.description = description
        self.time_us = time_us
        self.baseline_time_us = baseline_time_us
        self.flops = flops
        self.bytes = nbytes
        self.baseline = baseline
        self.best = best
        self.same_kernel_as = same_kernel_as

    @property
    def intensity(self):
        """Arithmetic intensity, FLOP per byte."""
        return self.flops / self.bytes

    @property
    def tflops(self):
        """The rate it reached, TFLOP/s (flops over its median time)."""
        return self.flops / self.time_us / 1e6

    @property
    def speedup(self):
        """Over the baseline timed beside it; None where not measured."""
        if self.baseline_time_us > 0 and self.time_us > 0:
            return self.baseline_time_us / self.time_us
        return None

    def to_dict(self):
        return {"candidate_id": self.candidate_id, "description": self.description,
                "time_us": self.time_us, "baseline_time_us": self.baseline_time_us,
                "flops": self.flops, "bytes": self.bytes, "intensity": self.intensity,
                "tflops": self.tflops, "speedup": self.speedup, "baseline": self.baseline,
                "best": self.best, "same_kernel_as": self.same_kernel_as}

    def __repr__(self):
        return "Point(#%d %.3g FLOP/B, %.3g TFLOP/s%s%s)" % (
            self.candidate_id, self.intensity, self.tflops, ", best" if self.best else "",
            ", baseline" if self.baseline else "")


class Roofline:
    """A job's candidates and its chip's roofs: the data behind the plot.

    points: the verified candidates (Point), best and baseline marked;
    left_out: {reason: count} of the candidates not shown; peak_tflops,
    bandwidth_gbps: the roofs (None where neither the registry nor the
    caller gave one), peak_label ("fp16 peak"), memory_type ("HBM3e"),
    peak_given / bandwidth_given (the caller's, not the registry's);
    ridge: the intensity where they meet (FLOP/B); notes: what a reader
    should know (missing roofs, points above the roof).
    """

    def __init__(self):
        self.job_id = ""
        self.graph_name = ""
        self.state = ""
        self.backend = ""
        self.chip_id = ""
        self.chip_name = ""
        self.chip_found = False  # the registry had chip_id
        self.dtype = ""
        self.peak_tflops = None
        self.peak_label = ""
        self.peak_given = False
        self.bandwidth_gbps = None
        self.memory_type = ""
        self.bandwidth_given = False
        self.points = []
        self.left_out = {}
        self.notes = []

    @property
    def ridge(self):
        if _positive(self.peak_tflops) and _positive(self.bandwidth_gbps):
            return self.peak_tflops * 1e3 / self.bandwidth_gbps
        return None

    @property
    def best(self):
        return next((p for p in self.points if p.best), None)

    @property
    def baseline(self):
        return next((p for p in self.points if p.baseline), None)

    def attainable(self, intensity):
        """The roof at `intensity` (TFLOP/s), or None without roofs."""
        roofs = []
        if _positive(self.bandwidth_gbps):
            roofs.append(self.bandwidth_gbps * intensity / 1e3)
        if _positive(self.peak_tflops):
            roofs.append(self.peak_tflops)
        return min(roofs) if roofs else None

    def roof_fraction(self, point):
        """point.tflops over the roof at its intensity, or None."""
        roof = self.attainable(point.intensity)
        return point.tflops / roof if roof else None

    def to_dict(self):
        points = []
        for p in self.points:
            d = p.to_dict()
            d["roof_fraction"] = self.roof_fraction(p)
            points.append(d)
        return {"job_id": self.job_id, "graph_name": self.graph_name, "state": self.state,
                "backend": self.backend, "chip_id": self.chip_id, "chip_name": self.chip_name,
                "dtype": self.dtype, "peak_tflops": self.peak_tflops,
                "peak_label": self.peak_label, "peak_given": self.peak_given,
                "bandwidth_gbps": self.bandwidth_gbps, "memory_type": self.memory_type,
                "bandwidth_given": self.bandwidth_given, "ridge_flop_per_byte": self.ridge,
                "points": points, "left_out": dict(self.left_out), "notes": list(self.notes)}

    def _chip_text(self):
        if self.chip_name and self.chip_id:
            return "%s (%s)" % (self.chip_name, self.chip_id)
        return self.chip_id or "no chip"

    def _left_out_text(self):
        return ", ".join("%d %s" % (n, why) for why, n in self.left_out.items())

    def table(self):
        """The points as text, one row a candidate, best first."""
        lines = ["job %s (%s, %s) on %s, %s" % (self.job_id, self.graph_name, self.state,
                                               self._chip_text(), self.dtype or "?")]
        roofs = []
        if _positive(self.bandwidth_gbps):
            roofs.append("memory %s GB/s" % _fmt(self.bandwidth_gbps))
        if _positive(self.peak_tflops):
            roofs.append("%s %s TFLOP/s" % (self.peak_label, _fmt(self.peak_tflops)))
        if self.ridge:
            roofs.append("ridge %s FLOP/B" % _fmt(self.ridge))
        lines.append("roofs: " + (", ".join(roofs) if roofs else "none"))
        rows = [("candidate", "", "time us", "GFLOP", "MB", "FLOP/B", "TFLOP/s", "of roof",
                 "speedup", "plan")]
        order = sorted(self.points, key=lambda p: (not p.best, not p.baseline, p.time_us))
        for p in order:
            frac = self.roof_fraction(p)
            mark = "best" if p.best else ("baseline" if p.baseline else "")
            if p.best and p.baseline:
                mark = "best+baseline"
            plan = p.description + (" (same kernel as %d)" % p.same_kernel_as
                                    if p.same_kernel_as else "")
            rows.append((str(p.candidate_id), mark, "%.2f" % p.time_us, "%.4g" % (p.flops / 1e9),
                         "%.4g" % (p.bytes / 1e6), "%.3g" % p.intensity, "%.3g" % p.tflops,
                         _percent(frac) if frac is not None else "-",
                         "%.2fx" % p.speedup if p.speedup else "-", plan))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
        for r in rows:
            lines.append("  ".join(c.rjust(w) if i not in (1,) else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(r, widths))) + "  " + r[-1])
        if self.left_out:
            lines.append("not shown: " + self._left_out_text())
        lines.extend("note: " + n for n in self.notes)
        return "\n".join(lines)

    def plot(self, path=None, dpi=150, figsize=(11, 6.5)):
        """Draws the roofline with matplotlib (the Agg backend, no window):
        log-log axes, the memory and compute roofs, every verified candidate
        a point, the best and the baseline marked. Writes it to `path`
        (PNG, or the format its extension names) where given; returns the
        matplotlib Figure."""
        return _plot(self, path, dpi, figsize)

    def __repr__(self):
        return "Roofline(job %s, %d points, peak %s TFLOP/s, %s GB/s)" % (
            self.job_id, len(self.points), self.peak_tflops, self.bandwidth_gbps)


def from_messages(job, candidates, chip=None, chip_id=None, chip_error=None, peak_tflops=None,
                  bandwidth_gbps=None):
    """The Roofline of a job from its messages as dicts in protobuf's JSON
    mapping with the .proto field names (json_format.MessageToDict(...,
    preserving_proto_field_name=True), or C++ MessageToJsonString with
    preserve_proto_field_names): `job` a yirage.v1.Job, `candidates` its
    yirage.v1.Candidate list (from ListCandidates, which sets `work`), `chip`
    the yirage.v1.Chip or None. `peak_tflops` / `bandwidth_gbps` override
    (or supply) the chip's roofs. ValueError when there is nothing to plot."""
    r = Roofline()
    r.job_id = job.get("job_id", "")
    r.graph_name = job.get("graph_name", "")
    r.state = job.get("state", "")
    r.backend = job.get("backend", "")
    r.chip_id = chip_id if chip_id is not None else job.get("chip_id", "")
    best_id = int(_num((job.get("best") or {}).get("candidate_id"), 0))
    dtypes = {}
    left_out = {}
    missing_work = 0

    def leave_out(why):
        left_out[why] = left_out.get(why, 0) + 1

    # A candidate timed again in the job's final round is drawn once, with
    # that round's figures (the ones its winner was chosen by).
    finals = {}
    for c in candidates:
        if int(_num(c.get("final_of"), 0)) and c.get("status") == "VERIFIED":
            finals[int(_num(c.get("final_of"), 0))] = c
    for c in candidates:
        if int(_num(c.get("confirms"), 0)) or int(_num(c.get("final_of"), 0)):
            continue  # a plan run again (a second worker, the final round): not a candidate
        c = finals.get(int(_num(c.get("candidate_id"), 0)), c)
        status = c.get("status", "CANDIDATE_STATUS_UNSPECIFIED")
        if status in _FAILED:
            leave_out("failed")
            continue
        if status == "SKIPPED":
            leave_out("skipped")
            continue
        if status != "VERIFIED":
            leave_out("not run yet" if status in _NOT_RUN else status.lower())
            continue
        work = c.get("work")
        if work is None:
            missing_work += 1
            leave_out("without work figures")
            continue
        flops, nbytes = _num(work.get("flops")), _num(work.get("bytes"))
        time_us = _num(c.get("time_us"))
        if not (_positive(flops) and _positive(nbytes)):
            leave_out("without floating-point work")
            continue
        if not _positive(time_us):
            leave_out("without a time")
            continue
        dtype = work.get("dtype", "DTYPE_UNSPECIFIED")
        dtypes[dtype] = dtypes.get(dtype, 0) + 1
        plan = c.get("plan") or {}
        cid = int(_num(c.get("candidate_id"), 0))
        r.points.append(Point(cid, plan.get("description", ""), time_us,
                              _num(c.get("baseline_time_us")), flops, nbytes,
                              baseline=bool(plan.get("baseline", False)), best=cid == best_id,
                              same_kernel_as=int(_num(c.get("same_kernel_as"), 0))))
    r.left_out = left_out
    if not r.points:
        if missing_work and missing_work == sum(left_out.values()):
            raise ValueError(
                "job %s: the server reports no work figures for its candidates (Candidate.work, "
                "set by ListCandidates): it predates roofline support" % r.job_id)
        raise ValueError("job %s (%s): no verified candidate with a time to plot%s" % (
            r.job_id, r.state or "?", " (%s)" % _summary(left_out) if left_out else ""))
    dtype = max(dtypes, key=dtypes.get) if dtypes else ""
    r.dtype = _DTYPE_NAMES.get(dtype, dtype.lower())
    field, label = _PEAK_FIELDS.get(dtype, (None, r.dtype))

    r.chip_found = bool(chip)
    chip = chip or {}
    r.chip_name = chip.get("chip_name", "")
    compute = chip.get("compute") or {}
    memory = chip.get("memory") or {}
    where = ("registry chip '%s'" % r.chip_id) if r.chip_id else "the job"
    if chip_error:
        r.notes.append(chip_error + ": roofs only where given")
    elif not r.chip_id:
        r.notes.append("the job names no chip: roofs only where given (chip= / --chip names a "
                       "registry chip)")
    r.peak_label = "%s peak" % label
    if peak_tflops is not None:
        r.peak_tflops, r.peak_given = float(peak_tflops), True
    else:
        value = _num(compute.get(field)) if field else 0.0
        if _positive(value):
            r.peak_tflops = value
        else:
            r.notes.append("no %s peak TFLOP/s for %s: compute roof not drawn (give "
                           "peak_tflops= / --peak-tflops)" % (label, where))
    if bandwidth_gbps is not None:
        r.bandwidth_gbps, r.bandwidth_given = float(bandwidth_gbps), True
    else:
        value = _num(memory.get("bandwidth_gbps"))
        if _positive(value):
            kind = memory.get("memory_type", "")
            r.bandwidth_gbps, r.memory_type = value, kind
        else:
            r.notes.append("no memory bandwidth for %s: memory roof not drawn (give "
                           "bandwidth_gbps= / --bandwidth-gbps)" % where)
    above = [p for p in r.points if r.roof_fraction(p) is not None and r.roof_fraction(p) > 1.0]
    if above:
        r.notes.append("%d point(s) above the roof: faster than the chip can move the bytes "
                       "counted, so part of their data stayed in caches" % len(above))
    return r


def from_data(data, peak_tflops=None, bandwidth_gbps=None):
    """The Roofline of what `yirage-client roofline` fetched (a dict in the
    yirage-roofline/1 format: job, candidates, chip, chip_id, chip_error)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError("not %s data (expected a JSON object with \"format\": \"%s\")"
                         % (FORMAT, FORMAT))
    return from_messages(data.get("job") or {}, data.get("candidates") or [], data.get("chip"),
                         chip_id=data.get("chip_id"), chip_error=data.get("chip_error"),
                         peak_tflops=peak_tflops, bandwidth_gbps=bandwidth_gbps)


def fetch(client, job_id, chip=None, peak_tflops=None, bandwidth_gbps=None):
    """The Roofline of job `job_id` through `client` (a yirage.Client):
    GetJob, ListCandidates, and GetChip of the job's chip (or `chip`)."""
    from google.protobuf import json_format

    from . import errors

    def as_dict(msg):
        return json_format.MessageToDict(msg, preserving_proto_field_name=True)

    job = client.get_job(job_id)
    candidates = client.candidates(job_id)
    chip_id = chip or job.proto.chip_id
    chip_msg, chip_error = None, None
    if chip_id:
        try:
            chip_msg = client.get_chip(chip_id)
        except errors.NotFound:
            chip_error = "chip '%s' is not in the registry" % chip_id
    return from_messages(as_dict(job.proto), [as_dict(c) for c in candidates],
                         as_dict(chip_msg) if chip_msg is not None else None, chip_id=chip_id,
                         chip_error=chip_error, peak_tflops=peak_tflops,
                         bandwidth_gbps=bandwidth_gbps)


def _summary(left_out):
    return ", ".join("%d %s" % (n, why) for why, n in left_out.items())


def _fmt(v):
    """A figure for a label: 4800 -> '4,800', 989.4 -> '989', 0.512 -> '0.512'."""
    if v >= 100:
        return "{:,.0f}".format(v)
    return "%.3g" % v


def _import_matplotlib():
    try:
        from matplotlib import ticker
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(
            "roofline plots need matplotlib, which %s cannot import (%s): install Debian's "
            "python3-matplotlib (for /usr/bin/python3), or use a python that has it"
            % (sys.executable or "this python", e)) from None
    return Figure, FigureCanvasAgg, ticker


def _span(lo, hi, decades):
    """[lo, hi] widened on a log scale to at least `decades` decades."""
    have = math.log10(hi / lo)
    if have < decades:
        pad = 10 ** ((decades - have) / 2)
        lo, hi = lo / pad, hi * pad
    return lo, hi


def _plot(r, path, dpi, figsize):
    Figure, FigureCanvasAgg, ticker = _import_matplotlib()
    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    # Fixed axes (no layout engine), so that the memory roof's label can be
    # turned to the line's slope as drawn; the legend sits to the right.
    ax = fig.add_axes([0.075, 0.17, 0.6, 0.68])
    ax.set_xscale("log")
    ax.set_yscale("log")

    xs = [p.intensity for p in r.points]
    ys = [p.tflops for p in r.points]
    ridge = r.ridge
    x_lo, x_hi = min(xs), max(xs)
    if ridge:
        x_lo, x_hi = min(x_lo, ridge), max(x_hi, ridge)
    x_lo, x_hi = _span(x_lo / 3, x_hi * 3, 2)
    y_lo, y_hi = min(ys), max(ys)
    if _positive(r.peak_tflops):
        y_hi = max(y_hi, r.peak_tflops)
    elif _positive(r.bandwidth_gbps):
        y_hi = max(y_hi, r.bandwidth_gbps * x_hi / 1e3)
    y_lo, y_hi = _span(y_lo / 4, y_hi * 4, 2)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)

    handles = []
    mem_color, peak_color = "#1f5fa8", "#c0392b"
    if _positive(r.bandwidth_gbps):
        end = ridge if ridge else x_hi
        what = "given" if r.bandwidth_given else r.memory_type
        label = "memory roof: %s GB/s%s" % (_fmt(r.bandwidth_gbps), " (%s)" % what if what
                                             else "")
        handles += ax.plot([x_lo, end], [r.bandwidth_gbps * x_lo / 1e3,
                                         r.bandwidth_gbps * end / 1e3],
                           color=mem_color, lw=2.2, label=label, zorder=2)
        # Its label along the line's visible part, where it is farthest
        # from any point's intensity (it sits just above the line).
        x_start = max(x_lo, y_lo * 1e3 / r.bandwidth_gbps)
        if end > x_start * 1.5:
            span = math.log(end / x_start)
            spots = [x_start * math.exp(span * f) for f in (0.05, 0.2, 0.35, 0.5, 0.6)]
            x_text = max(spots, key=lambda x: min(abs(math.log(x / i)) for i in xs))
            y_text = r.bandwidth_gbps * x_text / 1e3
            p1 = ax.transData.transform((x_text, y_text))
            p2 = ax.transData.transform((x_text * 2, y_text * 2))
            angle = math.degrees(math.atan2(p2[1] - p1[1], p2[0] - p1[0]))
            ax.annotate("%s GB/s" % _fmt(r.bandwidth_gbps), (x_text, y_text),
                        xytext=(-4, 6), textcoords="offset points", rotation=angle,
                        rotation_mode="anchor", ha="left", va="bottom", color=mem_color,
                        fontsize=9)
    if _positive(r.peak_tflops):
        start = ridge if ridge else x_lo
        label = "compute roof: %s %s TFLOP/s%s" % (r.peak_label, _fmt(r.peak_tflops),
                                                   " (given)" if r.peak_given else "")
        handles += ax.plot([start, x_hi], [r.peak_tflops, r.peak_tflops], color=peak_color,
                           lw=2.2, label=label, zorder=2)
        ax.annotate("%s %s TFLOP/s" % (r.peak_label, _fmt(r.peak_tflops)),
                    (x_hi, r.peak_tflops), xytext=(-6, 5), textcoords="offset points",
                    ha="right", va="bottom", color=peak_color, fontsize=9)
    if ridge:
        handles += ax.plot([ridge, ridge], [y_lo, r.peak_tflops], color="#777777", lw=1.0,
                           ls=":", zorder=1,
                           label="ridge: %s FLOP/B (memory-bound to its left)" % _fmt(ridge))

    others = [p for p in r.points if not p.best and not p.baseline]
    if others:
        handles.append(ax.scatter([p.intensity for p in others], [p.tflops for p in others],
                                  s=30, color="#4c72b0", alpha=0.65, edgecolors="white",
                                  linewidths=0.6, zorder=3,
                                  label="other verified candidates (%d)" % len(others)))
    marks = []
    base, best = r.baseline, r.best
    if base is not None and base is not best:
        marks.append((base, "s", "#2e8b57", 80, "baseline"))
    if best is not None:
        marks.append((best, "*", "#e8a317", 260, "best = baseline" if best.baseline else "best"))
    for p, marker, color, size, what in marks:
        frac = r.roof_fraction(p)
        details = "%s \u00b5s" % _fmt_time(p.time_us)
        if p.speedup and not p.baseline:
            details += ", %.2fx speedup" % p.speedup
        if frac is not None:
            details += ", %s of roof" % _percent(frac)
        handles.append(ax.scatter([p.intensity], [p.tflops], s=size, marker=marker, color=color,
                                  edgecolors="black", linewidths=0.7, zorder=5,
                                  label="%s #%d: %s" % (what, p.candidate_id, details)))
        ax.annotate("%s #%d" % (what, p.candidate_id), (p.intensity, p.tflops),
                    xytext=(9, -13 if what == "baseline" else 8), textcoords="offset points",
                    fontsize=9, fontweight="bold", color="#333333", zorder=6)

    # Plain numbers on the ticks (0.01, not 10^-2); 1-2-5 steps on an axis
    # of three decades or less, so that it has more than two labels.
    fmt = ticker.FuncFormatter(lambda v, _: "%g" % v)
    for axis, (lo, hi) in ((ax.xaxis, (x_lo, x_hi)), (ax.yaxis, (y_lo, y_hi))):
        subs = (1.0, 2.0, 5.0) if math.log10(hi / lo) <= 3.2 else (1.0,)
        axis.set_major_locator(ticker.LogLocator(base=10, subs=subs))
        axis.set_major_formatter(fmt)
        axis.set_minor_formatter(ticker.NullFormatter())
    ax.grid(True, which="major", color="#d0d0d0", lw=0.8)
    ax.grid(True, which="minor", color="#ececec", lw=0.5)
    ax.set_axisbelow(True)
    ax.set_xlabel("arithmetic intensity (FLOP / byte moved)")
    ax.set_ylabel("achieved performance (TFLOP/s)")

    fig.text(0.075, 0.95, "Roofline of job %s: %s" % (r.job_id, r.graph_name or "?"),
             fontsize=13, fontweight="bold", va="bottom")
    shown = "%d verified candidate%s" % (len(r.points), "" if len(r.points) == 1 else "s")
    if r.left_out:
        shown += " (not shown: %s)" % r._left_out_text()
    fig.text(0.075, 0.905, "%s, %s on %s  ·  job %s  ·  %s" % (
        r._chip_text(), r.dtype or "?", r.backend or "?", r.state.lower() or "?", shown),
        fontsize=9.5, color="#333333", va="bottom")

    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8.5,
              frameon=False, borderaxespad=0.0)
    side = []
    if r.notes:
        side.extend("\n".join(textwrap.wrap(n, 44)) for n in r.notes)
    if side:
        fig.text(0.695, 0.50, "\n\n".join(side), fontsize=8, color="#8a4b08", va="top")
    foot = ("Intensity: each plan's FLOPs (the op table's count for its graph) over the bytes "
            "its kernels must move (each kernel's inputs read and outputs written once; a fused "
            "kernel keeps its intermediates on chip). Achieved: FLOPs / median measured time; "
            "speedups against the baseline timed beside each candidate. "
            "%s" % _roof_source(r))
    fig.text(0.075, 0.02, "\n".join(textwrap.wrap(foot, 150)), fontsize=7.5, color="#555555",
             va="bottom")
    if path:
        fig.savefig(path, dpi=dpi, format=None if "." in str(path).rsplit("/", 1)[-1] else "png",
                    facecolor="white")
    return fig


def _percent(fraction):
    """0.431 -> '43%', 0.0081 -> '0.81%'."""
    return "%.0f%%" % (100 * fraction) if fraction >= 0.095 else "%.2g%%" % (100 * fraction)


def _fmt_time(us):
    return "%.3g" % us if us < 100 else "{:,.0f}".format(us)


def _roof_source(r):
    """Where each roof came from, as a sentence or two."""
    registry, given, missing = [], [], []
    roofs = (("memory bandwidth x intensity", "memory bandwidth", r.bandwidth_gbps,
              r.bandwidth_given),
             ("the %s" % r.peak_label, r.peak_label, r.peak_tflops, r.peak_given))
    for drawn, name, value, was_given in roofs:
        if not _positive(value):
            missing.append(name)
        else:
            (given if was_given else registry).append(drawn)
    entry = "the registry's entry for %s" % r.chip_id
    out = []
    if registry:
        out.append("Roofs from %s: %s." % (entry, " and ".join(registry)))
    if given:
        out.append("Given roofs: %s." % " and ".join(given))
    if missing:
        why = ("not in " + entry if r.chip_found else
               "no registry entry for %s" % r.chip_id if r.chip_id else "the job names no chip")
        out.append("Not drawn (%s): %s." % (why, " and ".join(missing)))
    return " ".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m yirage.roofline",
        description="Draw a job's roofline from the data yirage-client roofline fetched.")
    ap.add_argument("--data", required=True, help="the %s JSON file" % FORMAT)
    ap.add_argument("--out", required=True, help="the image to write (PNG; .svg, .pdf too)")
    ap.add_argument("--peak-tflops", type=float, help="compute roof, TFLOP/s (else the registry)")
    ap.add_argument("--bandwidth-gbps", type=float,
                    help="memory roof, GB/s (else the registry)")
    ap.add_argument("--dpi", type=int, default=150)
    ap.add_argument("--json", action="store_true", help="print the points as one JSON object")
    args = ap.parse_args(argv)
    try:
        with open(args.data) as f:
            data = json.load(f)
        r = from_data(data, peak_tflops=args.peak_tflops, bandwidth_gbps=args.bandwidth_gbps)
        r.plot(args.out, dpi=args.dpi)
    except ImportError as e:
        # 3: yirage-client says nothing more (this says what to install).
        print("yirage roofline: %s (yirage-client runs $YIRAGE_PYTHON, else /usr/bin/python3)"
              % e, file=sys.stderr)
        return 3
    except (OSError, ValueError) as e:
        print("yirage roofline: %s" % e, file=sys.stderr)
        return 1
    if args.json:
        out = r.to_dict()
        out["out"] = args.out
        print(json.dumps(out, indent=2))
    else:
        print(r.table())
        print("wrote %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
