"""Python client for Tributary, the edge-to-cloud time-series database.

Quick start::

    import time
    from datetime import timedelta
    import tributary

    with tributary.Client("127.0.0.1:7070") as client:
        now_ms = time.time_ns() // 1_000_000
        result = client.write([tributary.Point("temp", {"room": "a"}, now_ms, 21.5)])
        for series in client.query('temp{room="a"}', start=timedelta(hours=1)):
            print(series.labels, list(series))

The client speaks the gRPC API tributary.v1 (proto/tributary/v1 in the
Tributary repository) and depends only on grpcio and protobuf. See
docs/sdk-python.md for the guide; every public name is re-exported here.

A Client is safe to share between threads; see each class for its own
contract.
"""

from .client import VERSION, Client, QueryStream
from .errors import (
    RETRYABLE_CODES,
    BatchWriterError,
    BufferFull,
    Cancelled,
    ClientClosed,
    DeadlineExceeded,
    InvalidArgument,
    PermissionDenied,
    RejectedPoints,
    ResourceExhausted,
    SelectorError,
    TributaryError,
    Unauthenticated,
    Unavailable,
)
from .model import Point, Rejection, Series, SeriesBatch, Status, WriteResult, from_ms, to_ms
from .retry import NO_RETRY, RetryPolicy
from .selector import METRIC_NAME, Matcher, format_selector, format_series, parse_selector
from .writer import BatchWriter

__version__ = VERSION

__all__ = [
    "Client",
    "QueryStream",
    "BatchWriter",
    "Point",
    "SeriesBatch",
    "Series",
    "WriteResult",
    "Rejection",
    "Status",
    "Matcher",
    "parse_selector",
    "format_selector",
    "format_series",
    "METRIC_NAME",
    "RetryPolicy",
    "NO_RETRY",
    "to_ms",
    "from_ms",
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
    "__version__",
]
