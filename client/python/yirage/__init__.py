"""YiRage Python SDK: build kernel graphs, superoptimize them on a
yirage-server, and call the result.

    import yirage
    g = yirage.new_kernel_graph()
    X = g.new_input(dims=(8, 4096), dtype=yirage.float16)
    W = g.new_input(dims=(4096, 6144), dtype=yirage.float16)
    g.mark_output(g.matmul(g.rms_norm(X), W))
    k = g.superoptimize(backend="cpu", server="127.0.0.1:50051", budget_seconds=60)
    print(k.best_time_us, k.speedup)
    y, = k(x, w)

yirage.Client is the whole client API (jobs, candidates, kernels, workers,
chips); errors are typed (yirage.InvalidArgument, yirage.NotFound, ...).
See docs/python-sdk.md.
"""

from .errors import (Aborted, AlreadyExists, Cancelled, DataLoss, DeadlineExceeded,
                     FailedPrecondition, GraphFormatError, Internal, InvalidArgument, JobFailed,
                     NotFound, OutOfRange, PermissionDenied, ResourceExhausted, Unauthenticated,
                     Unavailable, Unimplemented, Unknown, YirageError)
from .graph import (DType, KernelGraph, Tensor, bfloat16, float16, float32, from_dict, from_json,
                    from_proto, load_graph, new_kernel_graph)

__version__ = "0.1.0"
__all__ = ["Aborted", "AlreadyExists", "Cancelled", "Client", "DType", "DataLoss",
           "DeadlineExceeded", "FailedPrecondition", "GraphFormatError", "Internal",
           "InvalidArgument", "Job", "JobFailed", "Kernel", "KernelFiles", "KernelGraph",
           "NotFound", "OutOfRange", "PermissionDenied", "ResourceExhausted", "TERMINAL_STATES",
           "Tensor", "TrialTree", "Unauthenticated", "Unavailable", "Unimplemented", "Unknown", "YirageError",
           "bfloat16", "float16", "float32", "from_dict", "from_json", "from_proto", "load_graph",
           "new_kernel_graph", "superoptimize"]


def __getattr__(name):
    # The gRPC parts load on first use, so building and converting graphs
    # works without grpcio.
    if name in ("Client", "Job", "KernelFiles", "TERMINAL_STATES", "TrialTree"):
        from . import client
        return getattr(client, name)
    if name in ("Kernel", "superoptimize"):
        from . import kernel
        return getattr(kernel, name)
    raise AttributeError("module 'yirage' has no attribute %r" % name)
