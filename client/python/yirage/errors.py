"""Exceptions of the SDK: one class per gRPC status code the server returns."""

import grpc


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
    code = grpc.StatusCode.CANCELLED


class Unknown(YirageError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgument(YirageError, ValueError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceeded(YirageError, TimeoutError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFound(YirageError, LookupError):
    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(YirageError):
    code = grpc.StatusCode.ALREADY_EXISTS


class PermissionDenied(YirageError, PermissionError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhausted(YirageError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(YirageError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class Aborted(YirageError):
    code = grpc.StatusCode.ABORTED


class OutOfRange(YirageError):
    code = grpc.StatusCode.OUT_OF_RANGE


class Unimplemented(YirageError, NotImplementedError):
    code = grpc.StatusCode.UNIMPLEMENTED


class Internal(YirageError):
    code = grpc.StatusCode.INTERNAL


class Unavailable(YirageError, ConnectionError):
    code = grpc.StatusCode.UNAVAILABLE


class DataLoss(YirageError):
    code = grpc.StatusCode.DATA_LOSS


class Unauthenticated(YirageError, PermissionError):
    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE = {cls.code: cls for cls in (
    Cancelled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists,
    PermissionDenied, ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented,
    Internal, Unavailable, DataLoss, Unauthenticated)}


def from_rpc_error(err, rpc=None):
    """The typed exception for a grpc.RpcError (grpc.Call)."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
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
