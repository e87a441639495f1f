"""Errors raised by the specverify client."""

import grpc


class VerifierError(Exception):
    """A call failed: the server's status (code and message), or the
    transport's. ``code`` is a ``grpc.StatusCode``; ``details`` the server's
    message, which names the offending field, sequence and limit for
    INVALID_ARGUMENT."""

    def __init__(self, code, details, method=""):
        self.code = code
        self.details = details
        self.method = method
        name = code.name if isinstance(code, grpc.StatusCode) else str(code)
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{name}: {details}")


class CudaError(RuntimeError):
    """A CUDA driver call made by the client (exporting a CUDA region) failed."""


_CODES_BY_VALUE = {status.value[0]: status for status in grpc.StatusCode}


def status_code_from_int(value):
    """The grpc.StatusCode with numeric value ``value`` (RequestError.code),
    or UNKNOWN."""
    return _CODES_BY_VALUE.get(int(value), grpc.StatusCode.UNKNOWN)


def from_rpc_error(error, method=""):
    """grpc.RpcError (a failed call) -> VerifierError."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    return VerifierError(code, details or "", method)
