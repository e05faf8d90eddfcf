"""Tests of the Python SDK (client/python, package `yirage`) against a real
yirage-server with one local CPU worker. Run by tests/python/run_sdk_test.py
in a venv where the SDK is pip-installed; YIRAGE_BIN_DIR names build/bin.
"""

import contextlib
import glob
import io
import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

import yirage
import yirage.v1.graph_pb2
import yirage.v1.job_pb2

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN_DIR = os.environ["YIRAGE_BIN_DIR"]
START = time.monotonic()


def log(msg):
    print("[%6.1fs] %s" % (time.monotonic() - START, msg), file=sys.stderr, flush=True)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


class Server:
    """yirage-server on free loopback ports (port 0; it prints what it bound)."""

    def __init__(self, work, extra=(), local_workers="cpu"):
        self.log_path = os.path.join(work, "server.log")
        argv = [os.path.join(BIN_DIR, "yirage-server"),
                "--listen", "127.0.0.1:0", "--worker-listen", "127.0.0.1:0",
                "--metrics-listen", "127.0.0.1:0", "--db", os.path.join(work, "yirage.db"),
                "--local-workers", local_workers,
                # One worker: no second worker to confirm a winner on.
                "--confirm-winners", "false", "--search-seconds", "5"] + list(extra)
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        pat = re.compile(r"listening client=(\S+) worker=(\S+)")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = pat.search(read(self.log_path))
            if m:
                self.address = m.group(1)
                return
            if self.proc.poll() is not None:
                raise RuntimeError("yirage-server exited early:\n" + read(self.log_path))
            time.sleep(0.05)
        raise RuntimeError("yirage-server printed no listening line:\n" + read(self.log_path))

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group: its local workers too
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


WORK = None
SERVER = None


def setUpModule():
    global WORK, SERVER
    WORK = tempfile.mkdtemp(prefix="yirage-sdk-test-")
    SERVER = Server(WORK)
    log("server at %s (log %s)" % (SERVER.address, SERVER.log_path))


def tearDownModule():
    if SERVER is not None:
        SERVER.stop()


def strict_equal(a, b, path="$"):
    """JSON values equal with their types (1 vs 1.0 differ: AttrValue i vs f)."""
    if type(a) is not type(b):
        return "%s: %r (%s) vs %r (%s)" % (path, a, type(a).__name__, b, type(b).__name__)
    if isinstance(a, dict):
        if list(a) != list(b) and set(a) != set(b):
            return "%s: keys %s vs %s" % (path, sorted(a), sorted(b))
        for k in a:
            d = strict_equal(a[k], b[k], "%s.%s" % (path, k))
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s: length %d vs %d" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = strict_equal(x, y, "%s[%d]" % (path, i))
            if d:
                return d
        return None
    return None if a == b else "%s: %r vs %r" % (path, a, b)


def cli(*args, timeout=60):
    p = subprocess.run([os.path.join(BIN_DIR, "yirage-client"), "--server", SERVER.address]
                       + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout


def cli_env(env, *args, timeout=60):
    """cli() with `env` added to the environment."""
    p = subprocess.run([os.path.join(BIN_DIR, "yirage-client"), "--server", SERVER.address]
                       + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, env=dict(os.environ, **env))
    return p.returncode, p.stdout


def every_op_graph():
    """A float32 graph that uses every builder method once (each result used)."""
    g = yirage.new_kernel_graph("every_op")
    X = g.new_input(dims=(4, 16), dtype=yirage.float32, name="X")
    W = g.new_input(dims=(16, 16), dtype=yirage.float32, name="W")
    G = g.new_input(dims=(16,), dtype="float32", name="G")
    Q = g.new_input(dims=(4, 8), dtype=yirage.float32, name="Q")
    t = g.matmul(X, W, transpose_b=True)
    t = g.add(t, G)
    t = g.sub(t, 0.5)
    t = g.mul(t, X)
    t = g.div(t, g.add(g.square(X), 1.0))
    t = g.maximum(t, g.neg(X))
    t = g.minimum(t, g.abs(X))
    t = g.add(t, g.pow(g.add(g.abs(X), 1.0), 2.0))
    t = g.add(t, g.exp(g.log(g.sqrt(g.rsqrt(g.add(g.abs(t), 1.0))))))
    t = g.add(g.relu(t), g.sigmoid(g.tanh(t)))
    t = g.add(g.silu(t), g.gelu(t, approximate="tanh"))
    t = g.add(t, g.reduce_sum(t, axis=-1, keepdim=True))
    t = g.sub(t, g.reduce_mean(t, axis=1))
    t = g.div(t, g.add(g.reduce_max(g.abs(t)), 1.0))
    t = g.rms_norm(t, G, eps=1e-6)
    t = g.layer_norm(t, G, G, axis=-1, eps=1e-5)
    t = g.softmax(t, axis=-1)
    c = g.concat([t, Q], axis=1)                     # (4, 24)
    s = g.slice(c, axis=1, start=0, end=16)           # (4, 16)
    y1 = g.rms_norm_linear(s, W, G, eps=1e-6)         # (4, 16)
    y2 = g.gated_mlp(y1, W, W, W, activation="silu")  # (4, 16)
    y3 = g.gemm_softmax(y2, W, transpose_b=True, scale=0.25)
    y4 = g.gemm_layernorm(y3, W, G, G, eps=1e-5)
    y5 = g.self_attention(y4, y4, y4, scale=0.25)
    out = g.reduce_sum(y5, axis=0, keepdim=False, name="Y")
    g.mark_output(out)
    g.set_tolerance(rtol=1e-3, atol=1e-3)
    return g


class BuilderAndFormat(unittest.TestCase):
    def test_builder_graph_submitted_by_the_cli(self):
        # The builder's JSON is exactly the CLI's file format.
        g = every_op_graph()
        self.assertEqual(g.outputs[0].dims, (16,))
        path = os.path.join(WORK, "every_op.json")
        g.save(path)
        rc, out = cli("submit", path, "--budget-candidates", "1")
        self.assertEqual(rc, 0, out)
        job_id = out.strip().splitlines()[-1].strip()
        self.assertTrue(job_id.startswith("job-"), out)
        with yirage.Client(SERVER.address) as c:
            job = c.get_job(job_id)
            self.assertEqual(job.graph_name, "every_op")
            self.assertAlmostEqual(job.tolerance.rtol, 1e-3)
            c.wait(job_id, timeout=120)

    def test_builder_graph_submitted_by_the_sdk(self):
        g = every_op_graph()
        with yirage.Client(SERVER.address) as c:
            job_id = c.submit(g, budget_candidates=1)
            job = c.wait(job_id, timeout=120)
            self.assertIn(job.state, yirage.TERMINAL_STATES)
            self.assertNotEqual(job.state, "FAILED", job.message)

    def test_watch_follows_the_stream_to_the_end(self):
        with yirage.Client(SERVER.address) as c:
            with open(os.path.join(SOURCE_DIR, "examples", "graphs", "softmax.json")) as f:
                softmax = f.read()
            job_id = c.submit(softmax, budget_candidates=3)
            seen = list(c.watch(job_id, timeout=120))
            self.assertGreaterEqual(len(seen), 2)
            self.assertEqual(seen[-1].state, "SUCCEEDED", seen[-1].message)
            self.assertTrue(all(not j.done for j in seen[:-1]), [j.state for j in seen])
            evaluated = [j.proto.candidates_evaluated for j in seen]
            self.assertEqual(evaluated, sorted(evaluated), "counts only grow")
            # A job that cannot run (no worker of its backend): the watch's
            # timeout ends it.
            stuck = c.submit(softmax, backend="hip")
            with self.assertRaises(yirage.DeadlineExceeded):
                for _ in c.watch(stuck, timeout=1.5):
                    pass
            c.cancel_job(stuck)

    def test_round_trip_examples(self):
        paths = sorted(glob.glob(os.path.join(SOURCE_DIR, "examples", "graphs", "**", "*.json"),
                                 recursive=True))
        self.assertGreater(len(paths), 10)
        for path in paths:
            with open(path) as f:
                text = f.read()
            original = json.loads(text)
            g = yirage.from_json(text)
            diff = strict_equal(original, json.loads(g.to_json()))
            self.assertIsNone(diff, "%s: to_json(from_json) differs: %s" % (path, diff))
            diff = strict_equal(g.to_dict(), yirage.load_graph(path).to_dict())
            self.assertIsNone(diff, path)
            # Through the protobuf message and back (what submit sends).
            again = yirage.from_proto(g.to_proto())
            self.assertEqual(again.to_proto(), g.to_proto(), path)
            for t in g.outputs:  # shapes infer for every example
                self.assertTrue(all(d >= 1 for d in t.dims), path)

    def test_from_json_refuses_what_the_server_refuses(self):
        good = {"name": "s", "inputs": [{"name": "X", "shape": [4, 8], "dtype": "float32"}],
                "ops": [{"name": "Y", "op": "softmax", "inputs": ["X"]}], "outputs": ["Y"]}
        cases = [
            (dict(good, tolernace={}), "graph: unknown field 'tolernace' (expected: name, inputs, "
                                       "ops, outputs, tolerance)"),
            (dict(good, inputs=[{"name": "X", "shape": [4, 8], "dtype": "float64"}]),
             "inputs[0].dtype: unknown dtype 'float64' (expected float16, bfloat16 or float32)"),
            (dict(good, inputs=[{"name": "X", "shape": [4, 8.5], "dtype": "float32"}]),
             "inputs[0].shape[1]: expected an integer, got number"),
            (dict(good, ops=[{"name": "Y", "inputs": ["X"]}]),
             "ops[0].op: missing (expected a string)"),
            (dict(good, ops=[{"name": "Y", "op": "softmax", "inputs": ["X"],
                              "attrs": {"axis": [1]}}]),
             "ops[0].attrs.axis: expected a number, string or boolean, got array"),
        ]
        for graph, message in cases:
            with self.assertRaises(yirage.GraphFormatError) as cm:
                yirage.from_json(json.dumps(graph))
            self.assertEqual(str(cm.exception), message)
            # The server says the same about the same file.
            path = os.path.join(WORK, "bad.json")
            with open(path, "w") as f:
                json.dump(graph, f)
            rc, out = cli("submit", path)
            self.assertNotEqual(rc, 0)
            self.assertIn(message, out)

    def test_builder_refuses_bad_shapes_at_the_call(self):
        g = yirage.new_kernel_graph()
        A = g.new_input(dims=(4, 8))
        B = g.new_input(dims=(7, 3))
        with self.assertRaises(yirage.GraphFormatError):
            g.matmul(A, B)
        with self.assertRaises(yirage.GraphFormatError):
            g.add(A, B)
        self.assertEqual(g.matmul(A, g.new_input(dims=(2, 8, 3))).dims, (2, 4, 3))
        with self.assertRaises(yirage.GraphFormatError):
            g.new_input(dims=(4,), dtype="float64")


class Superoptimize(unittest.TestCase):
    def test_superoptimize_cpu_and_call_the_kernel(self):
        g = yirage.new_kernel_graph("sdk_rms_norm_linear")
        X = g.new_input(dims=(8, 256), dtype=yirage.float32, name="X")
        G = g.new_input(dims=(256,), dtype=yirage.float32, name="G")
        W = g.new_input(dims=(256, 128), dtype=yirage.float32, name="W")
        Y = g.matmul(g.rms_norm(X, G, eps=1e-6), W, name="Y")
        g.mark_output(Y)
        err = io.StringIO()
        t0 = time.monotonic()
        with contextlib.redirect_stderr(err):
            k = g.superoptimize(backend="cpu", server=SERVER.address, budget_seconds=60,
                                budget_candidates=4, timeout=240, poll_interval=0.2)
        log("superoptimize: %.1f s, %r" % (time.monotonic() - t0, k))
        progress = err.getvalue()
        sys.stderr.write(progress)
        try:
            import tqdm  # noqa: F401 (then progress is a bar)
            self.assertIn(k.job_id, progress)
        except ImportError:
            self.assertIn("%s SUCCEEDED " % k.job_id, progress)  # a line per change
        self.assertEqual(k.job.state, "SUCCEEDED")
        self.assertTrue(k.job.best.verified)
        self.assertGreater(k.best_time_us, 0)
        self.assertGreater(k.baseline_time_us, 0)
        self.assertAlmostEqual(k.speedup, k.baseline_time_us / k.best_time_us, places=3)
        self.assertEqual(k.candidate_id, k.job.best.candidate_id)
        self.assertIn("kernel.cpp", k.files)
        self.assertEqual(k.manifest["job_id"], k.job_id)
        self.assertEqual([tuple(o["shape"]) for o in k.manifest["outputs"]], [Y.dims])
        self.assertEqual([i["name"] for i in k.manifest["inputs"]], ["X", "G", "W"])

        # The job as the client API reports it.
        with yirage.Client(SERVER.address) as c:
            cands = c.candidates(k.job_id)
            best = [x for x in cands if x.candidate_id == k.candidate_id]
            self.assertEqual(len(best), 1)
            self.assertEqual(yirage.v1.job_pb2.CandidateStatus.Name(best[0].status), "VERIFIED")
            self.assertIn(k.job_id, [j.job_id for j in c.list_jobs()])

        # Call it (built from the export with the manifest's command, ctypes).
        rng = np.random.default_rng(1)
        x = rng.uniform(-1, 1, (8, 256)).astype(np.float32)
        gw = rng.uniform(0.5, 1.5, (256,)).astype(np.float32)
        w = rng.uniform(-1 / 16, 1 / 16, (256, 128)).astype(np.float32)
        (y,) = k(x, gw, w)
        x64 = x.astype(np.float64)
        ref = (x64 / np.sqrt((x64 ** 2).mean(axis=-1, keepdims=True) + 1e-6) * gw) @ w
        self.assertEqual(y.shape, (8, 128))
        self.assertEqual(y.dtype, np.float32)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
        (y2,) = k(2 * x, gw, w)  # a second call on other data (rms_norm: same result)
        np.testing.assert_allclose(y2, ref, rtol=1e-4, atol=1e-4)
        with self.assertRaises(TypeError):
            k(x.astype(np.float16), gw, w)
        with self.assertRaises(TypeError):
            k(x, gw)
        saved = k.save(os.path.join(WORK, "kernel"))
        self.assertIn(os.path.join(WORK, "kernel", "build.sh"), saved)


    def test_kernel_without_a_loader_says_what_is_missing(self):
        # An export whose manifest names no format the SDK can run (the
        # server exports CPU and CUDA only) is refused, not faked.
        resp = yirage.v1.job_pb2.GetKernelResponse(candidate_id=3)
        resp.files.add(path="manifest.json", content=b'{"format": "other/1"}')
        job = yirage.v1.job_pb2.Job(job_id="job-x", backend="hip",
                                    state=yirage.v1.job_pb2.SUCCEEDED)
        k = yirage.Kernel(yirage.Job(job), yirage.KernelFiles(resp))
        with self.assertRaises(NotImplementedError) as cm:
            k(np.zeros(4, np.float32))
        self.assertIn("backend 'hip'", str(cm.exception))


class ErrorsAndJobs(unittest.TestCase):
    def test_bad_graph_is_invalid_argument_with_the_servers_message(self):
        bad = {"name": "bad", "inputs": [{"name": "A", "shape": [4, 8], "dtype": "float32"},
                                         {"name": "B", "shape": [7, 3], "dtype": "float32"}],
               "ops": [{"name": "Y", "op": "matmul", "inputs": ["A", "B"]}], "outputs": ["Y"]}
        with yirage.Client(SERVER.address) as c:
            with self.assertRaises(yirage.InvalidArgument) as cm:
                c.submit(bad)  # from_json does not check shapes: the server does
            msg = cm.exception.details
            self.assertIn("op 'Y' (ops[0], matmul)", msg)
            self.assertIn("the contracted dims differ (8 vs 7)", msg)
            self.assertEqual(cm.exception.code.name, "INVALID_ARGUMENT")
            self.assertIsInstance(cm.exception, ValueError)
            with self.assertRaises(yirage.InvalidArgument) as cm:
                c.submit(yirage.load_graph(os.path.join(SOURCE_DIR, "examples", "graphs",
                                                        "softmax.json")),
                         chip="no_such_chip")
            self.assertIn("no_such_chip", cm.exception.details)

    def test_unknown_job_is_not_found(self):
        with yirage.Client(SERVER.address) as c:
            for call in (c.get_job, c.cancel_job, c.candidates, c.get_kernel):
                with self.assertRaises(yirage.NotFound) as cm:
                    call("job-doesnotexist")
                self.assertIn("job-doesnotexist", cm.exception.details)

    def test_unreachable_server_is_unavailable(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]  # bound, not listening: connections are refused
            with yirage.Client("127.0.0.1:%d" % port, timeout=5) as c:
                with self.assertRaises((yirage.Unavailable, yirage.DeadlineExceeded)):
                    c.list_jobs()

    def test_deadline_exceeded(self):
        # A peer that accepts TCP connections and never speaks HTTP/2: the call can only end
        # at its deadline. (A 1 us deadline against the real server is not enough: gRPC keeps
        # deadlines in milliseconds, and a loopback ListJobs can finish inside one.)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            port = s.getsockname()[1]
            with yirage.Client("127.0.0.1:%d" % port, timeout=0.3) as c:
                start = time.monotonic()
                with self.assertRaises(yirage.DeadlineExceeded):
                    c.list_jobs()
                self.assertLess(time.monotonic() - start, 10.0)

    def test_list_get_cancel(self):
        graph = yirage.load_graph(os.path.join(SOURCE_DIR, "examples", "graphs", "cpu",
                                               "cpu_gated_mlp_fp32_m32_k1024_n2816.json"))
        with yirage.Client(SERVER.address) as c:
            job_id = c.submit(graph, budget_candidates=50)
            job = c.get_job(job_id)
            self.assertEqual(job.job_id, job_id)
            self.assertIn(job.state, ("SEARCHING", "QUEUED", "RUNNING"))
            cancelled = c.cancel_job(job_id)
            self.assertEqual(cancelled.state, "CANCELLED")
            self.assertEqual(c.get_job(job_id).state, "CANCELLED")
            listed = {j.job_id: j for j in c.list_jobs()}
            self.assertEqual(listed[job_id].state, "CANCELLED")
            with self.assertRaises(yirage.FailedPrecondition):
                c.cancel_job(job_id)
            with self.assertRaises(yirage.JobFailed):
                graph.superoptimize(server=SERVER.address, budget_candidates=1, client=c,
                                    progress=lambda job: c.cancel_job(job.job_id)
                                    if not job.done else None)

    def test_a_repeated_request_id_returns_the_first_job(self):
        graph = yirage.load_graph(os.path.join(SOURCE_DIR, "examples", "graphs", "softmax.json"))
        with yirage.Client(SERVER.address) as c:
            before = len(c.list_jobs())
            first = c.submit(graph, budget_candidates=1, request_id="sdk-retry-1")
            again = c.submit(graph, budget_candidates=1, request_id="sdk-retry-1")
            self.assertEqual(again, first)
            self.assertEqual(len(c.list_jobs()), before + 1, "one job, not two")
            other = c.submit(graph, budget_candidates=1)  # a fresh random request id
            self.assertNotEqual(other, first)
            with self.assertRaises(yirage.InvalidArgument):
                c.submit(graph, request_id="x" * 129)

    def test_workers_and_chips(self):
        with yirage.Client(SERVER.address) as c:
            deadline = time.monotonic() + 30
            workers = c.workers()
            while not workers and time.monotonic() < deadline:
                time.sleep(0.2)
                workers = c.workers()
            self.assertTrue(any(w.backend == "cpu" for w in workers), workers)
            chips = c.list_chips(vendor="nvidia")
            self.assertTrue(chips)
            self.assertTrue(all(ch.vendor == "nvidia" for ch in chips))
            chip = c.get_chip(chips[0].chip_id)
            self.assertEqual(chip.chip_id, chips[0].chip_id)
            self.assertEqual(c.search_space(chip.chip_id).chip_id, chip.chip_id)
            exported = json.loads(c.export_chips(vendor="nvidia"))
            self.assertEqual(len(exported), len(chips))
            with self.assertRaises(yirage.NotFound):
                c.get_chip("no_such_chip")


def png_size(path):
    """(width, height) of a PNG file; AssertionError when it is not one."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR", "%s: not a PNG" % path
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def has_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


class Roofline(unittest.TestCase):
    """The roofline plot: Candidate.work from the server, the SDK's
    job.roofline() and `yirage-client roofline` on a small CPU job."""

    @classmethod
    def setUpClass(cls):
        g = yirage.new_kernel_graph("roofline_rms_norm_linear")
        X = g.new_input(dims=(16, 256), dtype=yirage.float32, name="X")
        G = g.new_input(dims=(256,), dtype=yirage.float32, name="G")
        W = g.new_input(dims=(256, 256), dtype=yirage.float32, name="W")
        g.mark_output(g.matmul(g.rms_norm(X, G, eps=1e-6), W, name="Y"))
        with yirage.Client(SERVER.address) as c:
            cls.job_id = c.submit(g, budget_candidates=6)
            cls.job = c.wait(cls.job_id, timeout=300)
        log("roofline job %s: %r" % (cls.job_id, cls.job))

    def setUp(self):
        self.assertEqual(self.job.state, "SUCCEEDED", self.job.message)

    def check_png(self, path):
        self.assertTrue(os.path.exists(path), path)
        width, height = png_size(path)
        size = os.path.getsize(path)
        self.assertGreaterEqual(width, 800)
        self.assertGreaterEqual(height, 500)
        self.assertTrue(20000 < size < 5000000, "%s: %d bytes" % (path, size))

    def check_points(self, points, best_id):
        self.assertTrue(points)
        for p in points:
            for key in ("intensity", "tflops", "flops", "bytes", "time_us"):
                self.assertTrue(p[key] > 0 and math.isfinite(p[key]), (key, p))
            self.assertAlmostEqual(p["intensity"], p["flops"] / p["bytes"],
                                   delta=1e-9 * p["intensity"])
            self.assertAlmostEqual(p["tflops"], p["flops"] / p["time_us"] / 1e6,
                                   delta=1e-9 * p["tflops"])
        self.assertEqual([p["candidate_id"] for p in points if p["best"]], [best_id])
        self.assertEqual(sum(1 for p in points if p["baseline"]), 1)

    def test_trial_tree(self):
        with yirage.Client(SERVER.address) as c:
            cands = [x for x in c.candidates(self.job_id) if not x.confirms]
            tree = c.trial_tree(self.job_id)
            job = c.get_job(self.job_id)
            self.assertEqual(str(job.tree()), str(tree))
            with self.assertRaises(yirage.NotFound):
                c.trial_tree("job-doesnotexist")
        by_id = {x.candidate_id: x for x in cands}
        leaves = tree.candidates()
        self.assertEqual(sorted(n.candidate_id for n in leaves), sorted(by_id))
        self.assertEqual(tree.root.parent_id, -1)
        self.assertEqual(tree.root.candidates, len(cands))
        kinds = yirage.v1.job_pb2.TrialNode
        for n in tree.nodes:
            self.assertLess(n.parent_id, n.node_id)
        for leaf in leaves:
            plan = by_id[leaf.candidate_id].plan
            path = tree.path(leaf)
            # original graph, one level a rewrite, the partition, the leaf
            self.assertEqual(len(path), len(plan.rewrites) + 3, str(tree))
            self.assertEqual([p.label for p in path[1:-2]], list(plan.rewrites))
            self.assertEqual(path[-2].kind, kinds.PARTITION)
            self.assertEqual(path[-2].label.count("["), len(plan.kernels))
            self.assertEqual(leaf.best, leaf.candidate_id == job.best.candidate_id)
        self.assertIn("rewrite ", str(tree))  # the rms_norm is expanded in some candidates
        rc, out = cli("tree", self.job_id)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.strip("\n").split("\n"), str(tree).split("\n"))
        rc, out = cli("--json", "tree", self.job_id)
        self.assertEqual(rc, 0, out)
        listed = json.loads(out)
        self.assertEqual([n["node_id"] for n in listed["nodes"]], list(range(len(tree.nodes))))
        listed_leaves = [n for n in listed["nodes"] if n["kind"] == "CANDIDATE"]
        self.assertEqual([n["candidate_id"] for n in listed_leaves],
                         [n.candidate_id for n in leaves])

    def test_candidates_carry_their_work(self):
        with yirage.Client(SERVER.address) as c:
            cands = c.candidates(self.job_id)
        verified = [x for x in cands if yirage.v1.job_pb2.CandidateStatus.Name(x.status)
                    == "VERIFIED" and not x.confirms]
        self.assertTrue(verified)
        base = [x for x in cands if x.plan.baseline][0]
        matmul = 2.0 * 16 * 256 * 256
        for x in verified:
            self.assertTrue(x.HasField("work"), x.candidate_id)
            self.assertGreaterEqual(x.work.flops, matmul)
            # At least the graph's inputs and output once; at most the baseline's traffic.
            self.assertGreaterEqual(x.work.bytes, 4.0 * (16 * 256 + 256 + 256 * 256 + 16 * 256))
            if not x.plan.HasField("graph"):
                self.assertLessEqual(x.work.bytes, base.work.bytes)
                self.assertEqual(x.work.flops, base.work.flops)
            self.assertEqual(yirage.v1.graph_pb2.DType.Name(x.work.dtype), "FLOAT32")
        rc, out = cli("--json", "candidates", self.job_id)
        self.assertEqual(rc, 0, out)
        listed = json.loads(out)
        rows = listed["candidates"] if isinstance(listed, dict) else listed
        self.assertTrue(any(r["work"] and r["work"]["flops"] >= matmul for r in rows))

    @unittest.skipUnless(has_matplotlib(), "needs matplotlib (python3-matplotlib)")
    def test_sdk_roofline(self):
        path = os.path.join(WORK, "sdk-roofline.png")
        with yirage.Client(SERVER.address) as c:
            job = c.get_job(self.job_id)
            data = c.roofline_data(self.job_id)
        self.assertEqual(data.job_id, self.job_id)
        self.assertEqual(data.graph_name, "roofline_rms_norm_linear")
        self.assertEqual(data.dtype, "float32")
        self.assertEqual(data.chip_id, job.chip_id)
        self.check_points([p.to_dict() for p in data.points], job.best.candidate_id)
        # The client is closed: the job opens another with its settings.
        fig = job.roofline(path, peak_tflops=0.5, bandwidth_gbps=20)
        self.check_png(path)
        ax = fig.axes[0]
        self.assertEqual((ax.get_xscale(), ax.get_yscale()), ("log", "log"))
        self.assertIn("FLOP", ax.get_xlabel())
        self.assertIn("TFLOP/s", ax.get_ylabel())
        texts = " ".join(t.get_text() for t in fig.texts)
        self.assertIn(self.job_id, texts)
        self.assertIn("roofline_rms_norm_linear", texts)
        labels = " ".join(t.get_text() for t in ax.get_legend().get_texts())
        self.assertIn("memory roof: 20 GB/s", labels)
        self.assertIn("0.5 TFLOP/s", labels)
        # On a 2-core machine the baseline can win the timing: its mark says so.
        self.assertRegex(labels, r"best( = baseline)? #%d\b" % job.best.candidate_id)

        # Roofs from the registry: a chip registered with its figures.
        chip = {"chip_id": "roofline_test_cpu", "chip_name": "Roofline test CPU",
                "vendor": "other", "category": "cpu", "backend": "cpu",
                "memory": {"capacity_gb": 16, "bandwidth_gbps": 25.6, "memory_type": "DDR5"},
                "compute": {"num_compute_units": 2, "peak_tflops_fp32": 0.2}}
        with yirage.Client(SERVER.address) as c:
            c.register_chip(json.dumps(chip), overwrite=True)
            data = c.roofline_data(self.job_id, chip="roofline_test_cpu")
            fig = c.roofline(self.job_id, chip="roofline_test_cpu")
        self.assertEqual((data.bandwidth_gbps, data.peak_tflops), (25.6, 0.2))
        self.assertAlmostEqual(data.ridge, 0.2 * 1e3 / 25.6)
        self.assertFalse([n for n in data.notes if "not drawn" in n], data.notes)
        self.assertEqual(fig.axes[0].get_xscale(), "log")

        # A dtype's peak missing from the registry: said, and not drawn.
        with yirage.Client(SERVER.address) as c:
            c.register_chip(json.dumps(dict(chip, compute={"num_compute_units": 2})),
                            overwrite=True)
            data = c.roofline_data(self.job_id, chip="roofline_test_cpu")
            c.delete_chip("roofline_test_cpu")
        self.assertIsNone(data.peak_tflops)
        self.assertTrue([n for n in data.notes if "fp32 peak" in n and "not drawn" in n],
                        data.notes)

    def test_sdk_without_matplotlib_says_what_to_install(self):
        saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "matplotlib"}
        try:
            for k in saved:
                del sys.modules[k]
            sys.modules["matplotlib"] = None  # import matplotlib raises ImportError
            with yirage.Client(SERVER.address) as c:
                with self.assertRaises(ImportError) as cm:
                    c.roofline(self.job_id)
            self.assertIn("python3-matplotlib", str(cm.exception))
        finally:
            del sys.modules["matplotlib"]
            sys.modules.update(saved)

    @unittest.skipUnless(has_matplotlib(), "needs matplotlib (python3-matplotlib)")
    def test_cli_roofline(self):
        path = os.path.join(WORK, "cli-roofline.png")
        rc, out = cli("roofline", self.job_id, "--out", path, timeout=120)
        self.assertEqual(rc, 0, out)
        self.assertIn("wrote %s" % path, out)
        self.assertIn("best", out)
        self.check_png(path)
        sys.stderr.write(out)
        os.remove(path)
        rc, out = cli("--json", "roofline", self.job_id, "--out", path, "--peak-tflops", "0.5",
                      "--bandwidth-gbps", "20", timeout=120)
        self.assertEqual(rc, 0, out)
        self.check_png(path)
        data = json.loads(out)
        self.assertEqual(data["job_id"], self.job_id)
        self.assertEqual((data["peak_tflops"], data["bandwidth_gbps"]), (0.5, 20))
        self.check_points(data["points"], self.job.best.candidate_id)
        with yirage.Client(SERVER.address) as c:
            sdk = c.roofline_data(self.job_id)
        self.assertEqual(sorted(p["candidate_id"] for p in data["points"]),
                         sorted(p.candidate_id for p in sdk.points))

    def test_cli_roofline_errors(self):
        png = os.path.join(WORK, "never.png")
        for args in (("roofline", self.job_id), ("roofline", "--out", png),
                     ("roofline", self.job_id, "--out", png, "--peak-tflops", "-1")):
            rc, out = cli(*args)
            self.assertEqual(rc, 2, (args, out))
        rc, out = cli("roofline", "job-doesnotexist", "--out", png)
        self.assertEqual(rc, 1, out)
        self.assertIn("job-doesnotexist", out)
        # No interpreter: says so and what to install.
        rc, out = cli_env({"YIRAGE_PYTHON": "/nonexistent/python3"}, "roofline", self.job_id,
                          "--out", png)
        self.assertEqual(rc, 1, out)
        self.assertIn("cannot run /nonexistent/python3", out)
        self.assertIn("python3-matplotlib", out)
        # An interpreter without matplotlib (a stand-in package that fails to import).
        fake = os.path.join(WORK, "no-matplotlib")
        os.makedirs(os.path.join(fake, "matplotlib"), exist_ok=True)
        with open(os.path.join(fake, "matplotlib", "__init__.py"), "w") as f:
            f.write("raise ImportError(\"No module named 'matplotlib'\")\n")
        rc, out = cli_env({"PYTHONPATH": fake, "YIRAGE_PYTHON": "/usr/bin/python3"}, "roofline",
                          self.job_id, "--out", png)
        self.assertEqual(rc, 1, out)
        self.assertIn("python3-matplotlib", out)
        self.assertFalse(os.path.exists(png))


class Tokens(unittest.TestCase):
    def test_bearer_token(self):
        work = tempfile.mkdtemp(prefix="yirage-sdk-auth-")
        tokens = os.path.join(work, "tokens")
        with open(tokens, "w") as f:
            f.write("client-secret-0123456789 client alice\n"
                    "worker-secret-0123456789 worker w1\n")
        server = Server(work, extra=["--auth-tokens", tokens], local_workers="none")
        try:
            with yirage.Client(server.address) as c:
                with self.assertRaises(yirage.Unauthenticated):
                    c.list_jobs()
            with yirage.Client(server.address, token="wrong") as c:
                with self.assertRaises(yirage.Unauthenticated):
                    c.list_jobs()
            with yirage.Client(server.address, token="worker-secret-0123456789") as c:
                with self.assertRaises(yirage.PermissionDenied):
                    c.list_jobs()
            token_file = os.path.join(work, "token")
            with open(token_file, "w") as f:
                f.write("client-secret-0123456789\n")
            with yirage.Client(server.address, token_file=token_file) as c:
                job_id = c.submit(yirage.load_graph(os.path.join(
                    SOURCE_DIR, "examples", "graphs", "softmax.json")))
                self.assertEqual(c.get_job(job_id).owner, "alice")
            with self.assertRaises(ValueError):
                yirage.Client(server.address, token="client-secret-0123456789 client alice")
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
