"""Exceptions raised by the Tributary client.

Every exception the SDK raises on purpose is a :class:`TributaryError`.
Errors that come from the server keep the gRPC status code, the method and
the address; errors found on the client (bad input) say what was wrong and
where, before anything is sent.

The classes are plain data holders and safe to share between threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import grpc

if TYPE_CHECKING:  # pragma: no cover
    from .model import Point, WriteResult

__all__ = [
    "TributaryError",
    "InvalidArgument",
    "SelectorError",
    "Unavailable",
    "ResourceExhausted",
    "DeadlineExceeded",
    "Unauthenticated",
    "PermissionDenied",
    "Cancelled",
    "ClientClosed",
    "BufferFull",
    "BatchWriterError",
    "RejectedPoints",
    "RETRYABLE_CODES",
]

# The status codes that mean "nothing was done, try again later": the node
# answers UNAVAILABLE while shutting down or after a disk error, and
# RESOURCE_EXHAUSTED while flushing is behind. Writes are idempotent
# (a duplicate timestamp is last-write-wins), so resending them is safe.
RETRYABLE_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


class TributaryError(Exception):
    """Base class of every error raised by the SDK.

    Attributes:
        code: the gRPC status code, or None for errors found on the client.
        details: the server's (or the client's) explanation.
        method: the RPC, e.g. ``"WriteService/Write"``, or "" on the client.
        address: the server address, or "".
        attempts: how many times the call was tried (0 if never sent).
        result: for write calls, what was acknowledged before the failure
            (a :class:`~tributary.WriteResult`), else None.
    """

    def __init__(
        self,
        details: str,
        *,
        code: Optional[grpc.StatusCode] = None,
        method: str = "",
        address: str = "",
        attempts: int = 0,
    ) -> None:
        self.details = details
        self.code = code
        self.method = method
        self.address = address
        self.attempts = attempts
        self.result: Optional["WriteResult"] = None
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.method:
            where = self.method
            if self.address:
                where += " on " + self.address
            parts.append(where)
        if self.code is not None:
            parts.append(self.code.name)
        parts.append(self.details)
        msg = ": ".join(parts)
        if self.attempts > 1:
            msg += " (gave up after %d attempts)" % self.attempts
        return msg

    @property
    def retryable(self) -> bool:
        """True when the server asked to try again later."""
        return self.code in RETRYABLE_CODES


class InvalidArgument(TributaryError, ValueError):
    """The request is malformed: bad input found by the client (``code`` is
    None, nothing was sent), or INVALID_ARGUMENT from the server (bad
    matcher, bad query). Also a ValueError."""


class SelectorError(InvalidArgument):
    """A selector string could not be parsed.

    Attributes:
        selector: the text that was parsed.
        offset: the character offset (0-based) where parsing failed.
        reason: what was wrong there, without the position.
    """

    def __init__(self, selector: str, offset: int, reason: str) -> None:
        self.selector = selector
        self.offset = offset
        self.reason = reason
        shown = selector if len(selector) <= 200 else selector[:200] + "..."
        caret = ""
        if offset <= len(shown) and "\n" not in shown and "\t" not in shown:
            caret = "\n  %s\n  %s^" % (shown, " " * offset)
        super().__init__("bad selector %r at offset %d: %s%s" % (shown, offset, reason, caret))


class Unavailable(TributaryError):
    """UNAVAILABLE: the server is unreachable, shutting down, or could not
    make the write durable (disk error). Nothing was acknowledged."""


class ResourceExhausted(TributaryError):
    """RESOURCE_EXHAUSTED: the node is overloaded (flushing is behind).
    Nothing was acknowledged; retry later."""


class DeadlineExceeded(TributaryError):
    """DEADLINE_EXCEEDED: the call took longer than its timeout. For a
    write, the points may or may not have been stored; resending is safe."""


class Unauthenticated(TributaryError):
    """UNAUTHENTICATED: the server wants a (different) bearer token."""


class PermissionDenied(TributaryError):
    """PERMISSION_DENIED: the token is not allowed to do this."""


class Cancelled(TributaryError):
    """CANCELLED: the call was cancelled (for example a query stream that
    was closed before it ended)."""


class ClientClosed(TributaryError):
    """The client (or batch writer) was used after close()."""


class BufferFull(TributaryError):
    """BatchWriter.write could not buffer the points within block_timeout
    because the buffer stayed full (the server is slower than the writer)."""


class BatchWriterError(TributaryError):
    """A background flush of a :class:`~tributary.BatchWriter` failed.

    The writer stops sending after the first failure; every point it did not
    get acknowledged is in ``unsent`` (oldest first), so nothing is lost
    silently: resend them with a new writer or store them elsewhere.

    Attributes:
        cause: the error of the failed flush.
        unsent: the points that were not acknowledged.
    """

    def __init__(self, cause: TributaryError, unsent: "list[Point]") -> None:
        self.cause = cause
        self.unsent = unsent
        super().__init__(
            "batch writer stopped, %d points not sent: %s" % (len(unsent), cause),
            code=cause.code,
        )


class RejectedPoints(TributaryError, ValueError):
    """Raised by :meth:`WriteResult.check` when the server rejected points.

    Attributes:
        result: the :class:`~tributary.WriteResult` with the details.
    """

    def __init__(self, result: "WriteResult") -> None:
        first = result.rejections[0] if result.rejections else None
        msg = "%d of %d points rejected" % (result.rejected, result.accepted + result.rejected)
        if first is not None:
            msg += "; first: %s" % first
        super().__init__(msg)
        self.result = result


def brief(v: object, limit: int = 64) -> str:
    """repr(v), shortened for error messages: hostile input must not turn
    into megabyte-long exceptions."""
    r = repr(v)
    if len(r) <= limit:
        return r
    return "%s...(%d characters)" % (r[: limit - 16], len(r))


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.CANCELLED: Cancelled,
}


def from_rpc_error(err: grpc.RpcError, method: str, address: str, attempts: int) -> TributaryError:
    """Convert a grpc.RpcError into the matching TributaryError."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = err.details() if hasattr(err, "details") else str(err)
    if code is None:
        code = grpc.StatusCode.UNKNOWN
    cls = _BY_CODE.get(code, TributaryError)
    return cls(details or "(no details)", code=code, method=method, address=address, attempts=attempts)
