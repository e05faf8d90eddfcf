"""yirage.Client: the whole client API of yirage-server (JobService and
RegistryService, proto/yirage/v1/job.proto and registry.proto) over gRPC.

Every call has a deadline (the client's `timeout`, or the call's own
`timeout=`), every error is a typed exception (yirage.errors: InvalidArgument,
NotFound, PermissionDenied, Unauthenticated, Unavailable, DeadlineExceeded,
...), and a token is sent as `authorization: Bearer TOKEN` metadata, as
yirage-client does (common/rpc_util.cc), on plaintext and TLS channels alike.
"""

import os
import time
import uuid

import grpc

from . import errors
from .graph import as_graph
from .v1 import job_pb2, job_pb2_grpc, registry_pb2, registry_pb2_grpc

TERMINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")
_MAX_MESSAGE = 256 << 20  # as the C++ client (common/rpc_util.cc)


def _check_token(token, where):
    for i, c in enumerate(token):
        if not 0x21 <= ord(c) <= 0x7E:
            raise ValueError(
                "%s: the token holds %s at offset %d (a token is one word of printable ASCII: "
                "give the token alone, not a line of the server's --auth-tokens file)"
                % (where, "a space" if c == " " else "a control or non-ASCII character", i))
    return token


def resolve_token(token=None, token_file=None):
    """The token: `token`, else the first line of `token_file`, else the
    environment variable YIRAGE_TOKEN, else None (as yirage-client)."""
    if token:
        return _check_token(token.strip(), "token")
    if token_file:
        with open(token_file) as f:
            first = f.read().split("\n", 1)[0].strip()
        if not first:
            raise ValueError("token_file %s: the first line holds no token" % token_file)
        return _check_token(first, "token_file " + token_file)
    env = os.environ.get("YIRAGE_TOKEN", "").strip()
    return _check_token(env, "YIRAGE_TOKEN") if env else None


def _read(path):
    with open(path, "rb") as f:
        return f.read()


class Job:
    """A snapshot of a job (the yirage.v1.Job message, `proto`), with its
    state as a string ("QUEUED", "RUNNING", "SUCCEEDED", ...). `client`: the
    Client that read it (job.roofline() asks it for the candidates)."""

    def __init__(self, proto, client=None):
        self.proto = proto
        self._client = client

    @property
    def job_id(self):
        return self.proto.job_id

    id = job_id

    @property
    def state(self):
        return job_pb2.JobState.Name(self.proto.state)

    @property
    def done(self):
        return self.state in TERMINAL_STATES

    @property
    def message(self):
        return self.proto.message

    @property
    def best(self):
        """The best verified candidate (BestResult) or None."""
        return self.proto.best if self.proto.HasField("best") else None

    def roofline(self, path=None, client=None, chip=None, peak_tflops=None,
                 bandwidth_gbps=None, dpi=150):
        """The job's candidates on its chip's roofline, drawn with matplotlib
        (Agg): each verified candidate at its arithmetic intensity against
        its achieved TFLOP/s, the best and the baseline marked, under the
        memory and compute roofs of the registry's entry for the job's chip
        (or `chip`); `peak_tflops` / `bandwidth_gbps` supply or override
        them. Writes the image to `path` (PNG) where given and returns the
        matplotlib Figure. `client`: the Client to ask (default: the one
        that read this job; opened again with the same settings if closed).
        See yirage.roofline and docs/python-sdk.md."""
        return self.roofline_data(client, chip, peak_tflops, bandwidth_gbps).plot(path, dpi=dpi)

    def roofline_data(self, client=None, chip=None, peak_tflops=None, bandwidth_gbps=None):
        """The numbers behind roofline(): a yirage.roofline.Roofline (points
        with intensity and tflops, roofs, what was left out)."""
        from . import roofline
        client = client or self._client
        if client is None:
            raise ValueError("job %s: roofline() needs a client (this Job was not read through "
                             "one): pass client=yirage.Client(...)" % self.job_id)
        if client.closed:
            with client.reopened() as fresh:
                return roofline.fetch(fresh, self.job_id, chip, peak_tflops, bandwidth_gbps)
        return roofline.fetch(client, self.job_id, chip, peak_tflops, bandwidth_gbps)

    def tree(self, client=None):
        """The job's trial tree (a yirage.TrialTree): its graphs by rewrite,
        their partitions, each candidate's schedule and result. `client` as
        for roofline()."""
        client = client or self._client
        if client is None:
            raise ValueError("job %s: tree() needs a client (this Job was not read through "
                             "one): pass client=yirage.Client(...)" % self.job_id)
        if client.closed:
            with client.reopened() as fresh:
                return fresh.trial_tree(self.job_id)
        return client.trial_tree(self.job_id)

    def __getattr__(self, name):
        # Every field of the message: candidates_generated, backend, chip_id...
        if name in ("proto", "_client"):
            raise AttributeError(name)
        return getattr(self.proto, name)

    def __repr__(self):
        best = self.best
        tail = (" best %.4g us (%.2fx)" % (best.time_us, best.speedup)) if best else ""
        return "Job(%s %s %d/%d candidates%s)" % (
            self.job_id, self.state, self.proto.candidates_evaluated,
            self.proto.candidates_generated, tail)


class TrialTree:
    """A job's trial tree (GetTrialTree): `nodes` are yirage.v1.TrialNode
    messages, parents before children and each subtree right after its node;
    the root (nodes[0]) is the job's graph, a GRAPH node the graph one more
    rewrite made, a PARTITION node its kernels, a CANDIDATE node (a leaf) one
    schedule with its result. str() draws it as `yirage-client tree` does."""

    def __init__(self, proto):
        self.proto = proto
        self.nodes = list(proto.nodes)

    @property
    def job_id(self):
        return self.proto.job_id

    @property
    def root(self):
        return self.nodes[0]

    def children(self, node):
        return [n for n in self.nodes if n.parent_id == node.node_id]

    def candidates(self):
        """The leaves: one a candidate, in the tree's order."""
        return [n for n in self.nodes if n.kind == job_pb2.TrialNode.CANDIDATE]

    def path(self, node):
        """The nodes from the root down to `node`."""
        out = [node]
        while out[-1].parent_id >= 0:
            out.append(self.nodes[out[-1].parent_id])
        return out[::-1]

    def __str__(self):
        # Drawn by the server (TrialTree.text), as `yirage-client tree` prints it.
        return self.proto.text.rstrip("\n")

    def __repr__(self):
        return "TrialTree(%s: %d nodes, %d candidates)" % (self.job_id, len(self.nodes),
                                                           len(self.candidates()))


class KernelFiles:
    """The exported kernel of a job (GetKernel): `files` maps each path to
    its bytes (CPU: kernel.cpp, yirage_<job>.h, manifest.json, build.sh,
    call_example.cpp, yirage_kernel.py;
    CUDA: kernel.cu, manifest.json, yirage_kernel.py, README.txt)."""

    def __init__(self, proto):
        self.candidate_id = proto.candidate_id
        self.files = {f.path: f.content for f in proto.files}

    def write(self, out_dir):
        """Writes the files under out_dir; returns their paths."""
        paths = []
        root = os.path.realpath(out_dir)
        for rel, content in self.files.items():
            path = os.path.realpath(os.path.join(root, rel))
            if os.path.commonpath([root, path]) != root:
                raise ValueError("kernel file path '%s' leaves the output folder" % rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(content)
            if rel.endswith(".sh"):
                os.chmod(path, 0o755)
            paths.append(path)
        return paths


class Client:
    """A connection to yirage-server's client port.

        c = yirage.Client("127.0.0.1:50051", token=None, tls_ca=None)
        job_id = c.submit(graph, backend="cpu", budget_candidates=8)
        for job in c.watch(job_id): print(job)

    token / token_file (else $YIRAGE_TOKEN): sent as `authorization: Bearer
    TOKEN`. tls_ca (a PEM file): TLS with those roots; tls_cert and tls_key
    (PEM files): a client certificate for mTLS. timeout: the deadline of each
    call, in seconds (a call's `timeout=` overrides it).
    """

    def __init__(self, server=None, token=None, tls_ca=None, tls_cert=None,
                 tls_key=None, token_file=None, timeout=30.0, channel_options=None):
        self._settings = dict(server=server, token=token, tls_ca=tls_ca, tls_cert=tls_cert,
                              tls_key=tls_key, token_file=token_file, timeout=timeout,
                              channel_options=channel_options)
        self.closed = False
        # As yirage-client: the address given, else $YIRAGE_SERVER, else local.
        self.server = server or os.environ.get("YIRAGE_SERVER") or "127.0.0.1:50051"
        server = self.server
        self.timeout = timeout
        token = resolve_token(token, token_file)
        self._metadata = (("authorization", "Bearer " + token),) if token else ()
        options = [("grpc.max_receive_message_length", _MAX_MESSAGE),
                   ("grpc.max_send_message_length", _MAX_MESSAGE)] + list(channel_options or [])
        if (tls_cert is None) != (tls_key is None):
            raise ValueError("tls_cert and tls_key: give both or neither")
        if tls_ca is None:
            if tls_cert is not None:
                raise ValueError("tls_cert: needs tls_ca (the server's roots)")
            self._channel = grpc.insecure_channel(server, options=options)
        else:
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read(tls_ca),
                private_key=_read(tls_key) if tls_key else None,
                certificate_chain=_read(tls_cert) if tls_cert else None)
            self._channel = grpc.secure_channel(server, creds, options=options)
        self._jobs = job_pb2_grpc.JobServiceStub(self._channel)
        self._registry = registry_pb2_grpc.RegistryServiceStub(self._channel)

    def close(self):
        self.closed = True
        self._channel.close()

    def reopened(self):
        """A new Client with this one's settings (server, token, TLS, timeout)."""
        return Client(**self._settings)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, method, request, timeout=None, name=None):
        try:
            return method(request, timeout=self.timeout if timeout is None else timeout,
                          metadata=self._metadata)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, rpc=name) from None

    # ---- jobs ----

    def submit(self, graph, backend="cpu", budget_candidates=None, budget_seconds=None, rtol=None,
               atol=None, chip=None, timeout=None, request_id=None, retries=2, any_chip=False,
               no_cache=False):
        """Queues a job for `graph` (a KernelGraph, a graph dict, JSON text or
        a yirage.v1.Graph); returns its id. A bad graph raises
        yirage.InvalidArgument with the server's message.

        `request_id` (default: a random one) names this submission: a submit
        that times out or finds the server unreachable is sent again, up to
        `retries` times, with the same id, and the server returns the job
        the first one made rather than a second.

        `chip` (a registry id or alias) binds the job to workers of that chip;
        `any_chip=True` lets any worker of the backend run it. A finished job
        with the same graph, backend, chip and tolerance answers at once (its
        winner verified again: Job.cached_from) unless `no_cache=True`."""
        req = job_pb2.SubmitJobRequest(graph=as_graph(graph).to_proto(), backend=backend or "")
        if budget_candidates:
            req.budget_candidates = int(budget_candidates)
        if budget_seconds:
            req.budget_seconds = float(budget_seconds)
        if rtol is not None or atol is not None:
            req.tolerance.rtol = float(rtol or 0.0)
            req.tolerance.atol = float(atol or 0.0)
        if chip:
            req.chip_id = chip
            req.any_chip = bool(any_chip)
        req.no_cache = bool(no_cache)
        req.request_id = request_id or "py-" + uuid.uuid4().hex
        for attempt in range(retries + 1):
            try:
                return self._call(self._jobs.SubmitJob, req, timeout, "SubmitJob").job_id
            except (errors.Unavailable, errors.DeadlineExceeded):
                if attempt == retries:
                    raise
                time.sleep(2 ** attempt)

    def get_job(self, job_id, timeout=None):
        return Job(self._call(self._jobs.GetJob, job_pb2.GetJobRequest(job_id=job_id), timeout,
                              "GetJob"), self)

    def list_jobs(self, limit=0, timeout=None):
        """Jobs, newest first (limit 0: the server's default)."""
        resp = self._call(self._jobs.ListJobs, job_pb2.ListJobsRequest(limit=limit), timeout,
                          "ListJobs")
        return [Job(j, self) for j in resp.jobs]

    def cancel_job(self, job_id, timeout=None):
        return Job(self._call(self._jobs.CancelJob, job_pb2.CancelJobRequest(job_id=job_id),
                              timeout, "CancelJob"), self)

    def trial_tree(self, job_id, timeout=None):
        """The job's trial tree (a TrialTree)."""
        return TrialTree(self._call(self._jobs.GetTrialTree,
                                    job_pb2.GetTrialTreeRequest(job_id=job_id), timeout,
                                    "GetTrialTree"))

    def candidates(self, job_id, timeout=None):
        """Every candidate of the job (yirage.v1.Candidate messages)."""
        resp = self._call(self._jobs.ListCandidates,
                          job_pb2.ListCandidatesRequest(job_id=job_id), timeout, "ListCandidates")
        return list(resp.candidates)

    def roofline(self, job_id, path=None, chip=None, peak_tflops=None, bandwidth_gbps=None,
                 dpi=150):
        """Job `job_id`'s candidates on its chip's roofline (Job.roofline):
        writes the image to `path` where given; returns the matplotlib Figure."""
        return self.roofline_data(job_id, chip, peak_tflops, bandwidth_gbps).plot(path, dpi=dpi)

    def roofline_data(self, job_id, chip=None, peak_tflops=None, bandwidth_gbps=None):
        """The numbers behind roofline(): a yirage.roofline.Roofline."""
        from . import roofline
        return roofline.fetch(self, job_id, chip, peak_tflops, bandwidth_gbps)

    def get_kernel(self, job_id, candidate=None, march=None, timeout=None):
        """A job's kernel as exported by the server (KernelFiles): the best,
        or `candidate` (any verified candidate id). march: the CPU build's
        compiler target (e.g. "x86-64-v3" for a portable build; default
        native, the machine that builds it)."""
        request = job_pb2.GetKernelRequest(job_id=job_id, candidate_id=candidate or 0,
                                           march=march or "")
        return KernelFiles(self._call(self._jobs.GetKernel, request, timeout, "GetKernel"))

    export_kernel = get_kernel

    def workers(self, timeout=None):
        """Connected and recently seen workers (yirage.v1.WorkerInfo)."""
        return list(self._call(self._jobs.ListWorkers, job_pb2.ListWorkersRequest(), timeout,
                               "ListWorkers").workers)

    def watch(self, job_id, poll_interval=0.5, timeout=None):
        """Yields the job each time it changes (state, a candidate finishing,
        the best), first its current state, and stops after it ends
        (SUCCEEDED, FAILED or CANCELLED). Follows the server's WatchJob
        stream (opened again every 10 minutes, and after the server was
        unreachable); a server without it is polled every poll_interval
        seconds. timeout: give up (DeadlineExceeded) after this many seconds;
        None waits as long as the job runs."""
        deadline = None if timeout is None else time.monotonic() + timeout

        def left():
            return None if deadline is None else deadline - time.monotonic()

        def expired(job):
            return errors.DeadlineExceeded(
                "job %s still %s after %.0f s" % (job_id, job.state if job else "unknown",
                                                  timeout), rpc="watch")

        last, job, streaming = None, None, True
        while True:
            if deadline is not None and left() <= 0:
                raise expired(job)
            if streaming:
                span = 600.0 if deadline is None else max(0.001, min(600.0, left()))
                stream = self._jobs.WatchJob(job_pb2.WatchJobRequest(job_id=job_id),
                                             timeout=span, metadata=self._metadata)
                try:
                    for event in stream:
                        job = Job(event.job, self)
                        key = event.job.SerializeToString(deterministic=True)
                        if key != last:
                            last = key
                            yield job
                        if job.done:
                            stream.cancel()
                            return
                    continue  # the server closed the stream early: watch again
                except grpc.RpcError as e:
                    code = e.code()
                    if code == grpc.StatusCode.UNIMPLEMENTED:
                        streaming = False  # an older server
                        continue
                    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                        continue  # the span ended (or the caller's timeout: checked above)
                    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                        # The server may be restarting (a stream it ends as
                        # it stops reads as CANCELLED); the job is kept.
                        time.sleep(1.0)
                        continue
                    raise errors.from_rpc_error(e, rpc="WatchJob") from None
            job = self.get_job(job_id)
            key = job.proto.SerializeToString(deterministic=True)
            if key != last:
                last = key
                yield job
            if job.done:
                return
            time.sleep(poll_interval)

    def wait(self, job_id, poll_interval=0.5, timeout=None):
        """The job once it has ended."""
        job = None
        for job in self.watch(job_id, poll_interval=poll_interval, timeout=timeout):
            pass
        return job

    # ---- the chip registry (docs/chip-registry.md) ----

    def list_chips(self, vendor="", backend="", category="", timeout=None):
        req = registry_pb2.ListChipsRequest(vendor=vendor, backend=backend, category=category)
        return list(self._call(self._registry.ListChips, req, timeout, "ListChips").chips)

    def get_chip(self, chip_id, timeout=None):
        return self._call(self._registry.GetChip, registry_pb2.GetChipRequest(chip_id=chip_id),
                          timeout, "GetChip")

    def register_chip(self, chip, overwrite=False, timeout=None):
        """Registers a chip: a yirage.v1.Chip message or one chip object as
        JSON text (docs/chip-registry.md). Returns (chip, created)."""
        req = registry_pb2.RegisterChipRequest(overwrite=overwrite)
        if isinstance(chip, (str, bytes)):
            req.json = chip.decode() if isinstance(chip, bytes) else chip
        else:
            req.chip.CopyFrom(chip)
        resp = self._call(self._registry.RegisterChip, req, timeout, "RegisterChip")
        return resp.chip, resp.created

    def delete_chip(self, chip_id, timeout=None):
        self._call(self._registry.DeleteChip, registry_pb2.DeleteChipRequest(chip_id=chip_id),
                   timeout, "DeleteChip")

    def import_chips(self, json_text, overwrite=False, timeout=None):
        """Imports a JSON list of chips (all or nothing); returns (added,
        updated, unchanged)."""
        resp = self._call(self._registry.ImportChips,
                          registry_pb2.ImportChipsRequest(json=json_text, overwrite=overwrite),
                          timeout, "ImportChips")
        return resp.added, resp.updated, resp.unchanged

    def export_chips(self, vendor="", backend="", category="", timeout=None):
        """The chips as a JSON list (text)."""
        req = registry_pb2.ExportChipsRequest(vendor=vendor, backend=backend, category=category)
        return self._call(self._registry.ExportChips, req, timeout, "ExportChips").json

    def search_space(self, chip_id, timeout=None):
        return self._call(self._registry.GetSearchSpace,
                          registry_pb2.GetChipRequest(chip_id=chip_id), timeout, "GetSearchSpace")

    def watch_chips(self, timeout=None):
        """Yields ChipEvent messages (first WATCHING) as the registry changes;
        timeout: the stream's deadline (None: until the caller stops)."""
        try:
            for event in self._registry.WatchChips(registry_pb2.WatchChipsRequest(),
                                                   timeout=timeout, metadata=self._metadata):
                yield event
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e, rpc="WatchChips") from None
