"""Exceptions of the SDK: one class per gRPC status code the server returns."""

try:
    import grpc
    _StatusCode = grpc.StatusCode
except ImportError:
    # Without grpcio the package still builds graphs, converts their JSON and
    # draws roofline plots of saved data (yirage.roofline); only the RPCs need it.
    import enum
    _StatusCode = enum.Enum("StatusCode", [
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED"])


class YirageError(Exception):
    """Base class of every error an RPC returns. `code` is the grpc.StatusCode,
    `details` the server's message (e.g. the graph error of docs/graph-format.md)."""

    code = None

    def __init__(self, details, code=None, rpc=None):
        super().__init__(details)
        self.details = details
        if code is not None:
            self.code = code
        self.rpc = rpc

    def __str__(self):
        where = "%s: " % self.rpc if self.rpc else ""
        name = self.code.name if self.code is not None else "ERROR"
        return "%s%s: %s" % (where, name, self.details)


class Cancelled(YirageError):
    code = _StatusCode.CANCELLED


class Unknown(YirageError):
    code = _StatusCode.UNKNOWN


class InvalidArgument(YirageError, ValueError):
    code = _StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(YirageError, TimeoutError):
    code = _StatusCode.DEADLINE_EXCEEDED


class NotFound(YirageError, LookupError):
    code = _StatusCode.NOT_FOUND


class AlreadyExists(YirageError):
    code = _StatusCode.ALREADY_EXISTS


class PermissionDenied(YirageError, PermissionError):
    code = _StatusCode.PERMISSION_DENIED


class ResourceExhausted(YirageError):
    code = _StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(YirageError):
    code = _StatusCode.FAILED_PRECONDITION


class Aborted(YirageError):
    code = _StatusCode.ABORTED


class OutOfRange(YirageError):
    code = _StatusCode.OUT_OF_RANGE


class Unimplemented(YirageError, NotImplementedError):
    code = _StatusCode.UNIMPLEMENTED


class Internal(YirageError):
    code = _StatusCode.INTERNAL


class Unavailable(YirageError, ConnectionError):
    code = _StatusCode.UNAVAILABLE


class DataLoss(YirageError):
    code = _StatusCode.DATA_LOSS


class Unauthenticated(YirageError, PermissionError):
    code = _StatusCode.UNAUTHENTICATED


_BY_CODE = {cls.code: cls for cls in (
    Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
    PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented,
    Internal, Unavailable, DataLoss, Unauthenticated)}


def from_rpc_error(err, rpc=None):
    """The typed exception for a grpc.RpcError (grpc.Call)."""
    code = err.code() if hasattr(err, "code") else _StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    cls = _BY_CODE.get(code, YirageError)
    return cls(details or "", code=code, rpc=rpc)


class GraphFormatError(ValueError):
    """A graph (JSON or builder call) that does not follow docs/graph-format.md,
    found on the client before anything is sent."""


class JobFailed(Exception):
    """A job that ended FAILED or CANCELLED; `job` is the final Job."""

    def __init__(self, job):
        self.job = job
        super().__init__("job %s ended %s%s" % (job.job_id, job.state,
                                                ": " + job.message if job.message else ""))
