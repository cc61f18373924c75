"""The Client: one gRPC channel to a Tributary node (or coordinator) and the
calls of the tributary.v1 API on it.

Concurrency: a Client is safe for concurrent use by many threads; the
channel multiplexes their calls. A QueryStream belongs to the thread that
iterates it. Close the client (or use it as a context manager) to release
the connection; calls after close() raise ClientClosed.
"""

from __future__ import annotations

import datetime as _dt
import numbers
import os
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional, Sequence, TypeVar, Union

import grpc

from ._gen import tributary_pb2 as pb
from ._gen import tributary_pb2_grpc as pb_grpc
from .batching import WriteInput, requests_from, result_from
from .errors import RETRYABLE_CODES, ClientClosed, InvalidArgument, TributaryError, from_rpc_error
from .model import Series, Status, Timestamp, WriteResult, to_ms
from .retry import RetryPolicy
from .selector import MatcherSpec, check_utf8, to_matchers

__all__ = ["Client", "QueryStream", "VERSION"]

#: The SDK version, sent in the user agent.
VERSION = "0.1.0"

_AGGREGATES = {
    "avg": pb.AGGREGATE_AVG,
    "sum": pb.AGGREGATE_SUM,
    "min": pb.AGGREGATE_MIN,
    "max": pb.AGGREGATE_MAX,
    "count": pb.AGGREGATE_COUNT,
    "first": pb.AGGREGATE_FIRST,
    "last": pb.AGGREGATE_LAST,
}

_PEMSource = Union[bytes, str, "os.PathLike[str]", None]
_T = TypeVar("_T")

def _retryable(e: grpc.RpcError) -> bool:
    if e.code() not in RETRYABLE_CODES:
        return False
    # gRPC reports a message over the size limit as RESOURCE_EXHAUSTED too;
    # that one fails the same way every time.
    details = e.details() or ""
    return "message larger than max" not in details


def _aggregate(name: Optional[str], what: str) -> int:
    if name is None:
        return pb.AGGREGATE_UNSPECIFIED
    if not isinstance(name, str) or name.lower() not in _AGGREGATES:
        raise InvalidArgument("%s: want one of %s, got %r" % (what, ", ".join(_AGGREGATES), name))
    return _AGGREGATES[name.lower()]


def _duration_ms(d: object, what: str) -> int:
    if isinstance(d, _dt.timedelta):
        ms = d // _dt.timedelta(milliseconds=1)
    elif isinstance(d, numbers.Integral) and not isinstance(d, bool):
        ms = int(d)
    else:
        raise InvalidArgument("%s: want int milliseconds or a timedelta, got %s" % (what, type(d).__name__))
    if not 0 < ms < 1 << 63:
        raise InvalidArgument("%s: must be positive (and within int64), got %d ms" % (what, ms))
    return ms


def _read_pem(src: _PEMSource, what: str) -> Optional[bytes]:
    """PEM bytes from bytes, PEM text, or a file path."""
    if src is None:
        return None
    if isinstance(src, bytes):
        return src
    if isinstance(src, str) and src.lstrip().startswith("-----BEGIN"):
        return src.encode()
    if isinstance(src, (str, os.PathLike)):
        try:
            with open(src, "rb") as f:
                return f.read()
        except OSError as e:
            raise InvalidArgument("%s: cannot read %s: %s" % (what, os.fspath(src), e.strerror)) from None
    raise InvalidArgument("%s: want PEM bytes or a file path, got %s" % (what, type(src).__name__))


class Client:
    """A connection to one Tributary server.

    Args:
        address: the gRPC target, ``host:port`` (also ``dns:///host:port``,
            ``unix:/path``).
        token: a bearer token, sent as ``authorization: Bearer <token>`` on
            every call. Without TLS it crosses the network in clear text.
        tls: use TLS. The server certificate is checked against
            ``root_certificates``, or the system's roots when that is None.
        root_certificates: CA bundle, as PEM bytes or a file path.
        timeout: seconds each attempt of a call may take (for a query: the
            whole stream); None means no deadline.
        retries: retries on UNAVAILABLE and RESOURCE_EXHAUSTED, as a count
            (with default backoff), a RetryPolicy, or None/0 for none.
        client_certificate, client_key: for servers that demand client
            certificates (mTLS): PEM bytes or file paths.
        tls_server_name: the name to check the server certificate against,
            when it differs from the host in address.
        max_points_per_request: a write is cut into requests of at most
            this many points.
        max_request_bytes: ... and of about this many bytes.
        max_rejection_details: a WriteResult keeps at most this many
            Rejection details (the counts are always exact).
        max_receive_bytes: the largest response message accepted.

    Raises InvalidArgument for bad arguments. Creating a client does not
    connect; the first call does.
    """

    def __init__(
        self,
        address: str,
        token: Optional[str] = None,
        tls: bool = False,
        root_certificates: _PEMSource = None,
        timeout: Optional[float] = 30.0,
        retries: Union[int, RetryPolicy, None] = 5,
        *,
        client_certificate: _PEMSource = None,
        client_key: _PEMSource = None,
        tls_server_name: Optional[str] = None,
        max_points_per_request: int = 10_000,
        max_request_bytes: int = 1 << 20,
        max_rejection_details: int = 100,
        max_receive_bytes: int = 64 << 20,
    ) -> None:
        if not isinstance(address, str) or not address.strip():
            raise InvalidArgument("address must be a non-empty 'host:port' string, got %r" % (address,))
        scheme = address.split("://", 1)[0] if "://" in address else ""
        if scheme and scheme not in ("dns", "unix", "ipv4", "ipv6", "unix-abstract"):
            raise InvalidArgument("address %r: want a gRPC target such as 'host:7070', not a URL" % address)
        if token is not None:
            if not isinstance(token, str) or not token or any(not (0x20 <= ord(c) < 0x7F) for c in token):
                raise InvalidArgument("token must be a non-empty string of printable ASCII characters")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0):
            raise InvalidArgument("timeout must be a positive number of seconds or None, got %r" % (timeout,))
        for name, v in (
            ("max_points_per_request", max_points_per_request),
            ("max_request_bytes", max_request_bytes),
            ("max_rejection_details", max_rejection_details),
            ("max_receive_bytes", max_receive_bytes),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "max_rejection_details" else 1):
                raise InvalidArgument("%s must be a positive int, got %r" % (name, v))
        if max_request_bytes < 1024:
            raise InvalidArgument("max_request_bytes must be at least 1024, got %d" % max_request_bytes)
        certs = (root_certificates, client_certificate, client_key)
        if not tls and any(c is not None for c in certs):
            raise InvalidArgument("certificates were given but tls=False; pass tls=True")
        if (client_certificate is None) != (client_key is None):
            raise InvalidArgument("client_certificate and client_key go together")
        if tls_server_name is not None and not tls:
            raise InvalidArgument("tls_server_name needs tls=True")

        self.address = address
        self.timeout = timeout
        self.retry_policy = RetryPolicy.of(retries)
        self.max_points_per_request = max_points_per_request
        self.max_request_bytes = max_request_bytes
        self.max_rejection_details = max_rejection_details
        self._metadata = (("authorization", "Bearer " + token),) if token else ()
        self._closed = threading.Event()
        # Waits before a retry; returns True when the client was closed
        # meanwhile. Tests replace it to observe retries without waiting.
        self._sleep: Callable[[float], bool] = self._closed.wait

        options = [
            ("grpc.max_receive_message_length", max_receive_bytes),
            ("grpc.primary_user_agent", "tributary-python/" + VERSION),
            # Reconnect quickly after an outage: the default backoff grows to
            # two minutes, during which every call fails at once and
            # the retries above would be spent in vain.
            ("grpc.initial_reconnect_backoff_ms", 250),
            ("grpc.max_reconnect_backoff_ms", 5000),
        ]
        if tls:
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            creds = grpc.ssl_channel_credentials(
                root_certificates=_read_pem(root_certificates, "root_certificates"),
                private_key=_read_pem(client_key, "client_key"),
                certificate_chain=_read_pem(client_certificate, "client_certificate"),
            )
            self._channel = grpc.secure_channel(address, creds, options)
        else:
            self._channel = grpc.insecure_channel(address, options)
        self._write = pb_grpc.WriteServiceStub(self._channel)
        self._query = pb_grpc.QueryServiceStub(self._channel)

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Close the connection. Idempotent; in-flight calls are cancelled
        and waiting retries stop."""
        if not self._closed.is_set():
            self._closed.set()
            self._channel.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "Client(%r%s)" % (self.address, ", closed" if self.closed else "")

    # -- call plumbing -----------------------------------------------------

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        """The deadline of one attempt: timeout, or the client's default."""
        if timeout is None:
            return self.timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidArgument("timeout must be a positive number of seconds, got %r" % (timeout,))
        return float(timeout)

    def _retrying(self, method: str, attempt: Callable[[], _T]) -> _T:
        """Run attempt() until it succeeds, fails for good, or retries run out."""
        policy = self.retry_policy
        n = 0
        while True:
            if self.closed:
                raise self._closed_error("client is closed", method, n)
            n += 1
            try:
                return attempt()
            except grpc.RpcError as e:
                if self.closed:
                    raise self._closed_error("client was closed during the call", method, n) from None
                if _retryable(e) and n <= policy.max_retries:
                    if self._sleep(policy.backoff(n)):  # True: closed while waiting
                        raise self._closed_error("client was closed while waiting to retry", method, n) from None
                    continue
                raise from_rpc_error(e, method, self.address, n) from None
            except ValueError:
                # grpc raises ValueError when the channel is closed under it.
                if self.closed:
                    raise self._closed_error("client is closed", method, n) from None
                raise

    def _closed_error(self, what: str, method: str, attempts: int) -> ClientClosed:
        return ClientClosed(what, method=method, address=self.address, attempts=attempts)

    def _unary(self, method: str, fn: Callable, request: object, timeout: Optional[float]) -> object:
        deadline = self._deadline(timeout)
        return self._retrying(method, lambda: fn(request, timeout=deadline, metadata=self._metadata))

    # -- writing -----------------------------------------------------------

    def write(self, data: WriteInput, *, timeout: Optional[float] = None) -> WriteResult:
        """Store points and report what was accepted and rejected.

        ``data`` is any of:

        - an iterable of :class:`Point` (and/or :class:`SeriesBatch`), or one;
        - a dict of columns keyed by series:
          ``{'cpu{host="a"}': ([t0, t1], [v0, v1])}``.

        The input is consumed lazily and sent in requests of at most
        ``max_points_per_request`` points, each retried on UNAVAILABLE and
        RESOURCE_EXHAUSTED. Rejected points (too old, too far in the future,
        invalid series, ...) do not raise: they are counted in the result,
        with details naming their position in the input. Call
        ``result.check()`` to turn rejections into an exception.

        Raises:
            InvalidArgument: bad input (nothing of the offending request
                was sent).
            TributaryError: the server failed a request for good.
            In both cases ``err.result`` is what earlier requests of this
            call stored.
        """
        total = WriteResult()
        try:
            for req in requests_from(data, self.max_points_per_request, self.max_request_bytes):
                resp = self._unary("WriteService/Write", self._write.Write, req.to_proto(), timeout)
                total._merge(result_from(req, resp, self.max_rejection_details), self.max_rejection_details)
        except TributaryError as e:
            e.result = total
            raise
        return total

    def batch_writer(
        self,
        batch_size: int = 5000,
        flush_interval: float = 1.0,
        max_buffered_points: int = 100_000,
        block_timeout: Optional[float] = None,
    ) -> "BatchWriter":
        """Return a BatchWriter that buffers points and sends them in the
        background; see :class:`tributary.BatchWriter`."""
        from .writer import BatchWriter

        return BatchWriter(
            self,
            batch_size=batch_size,
            flush_interval=flush_interval,
            max_buffered_points=max_buffered_points,
            block_timeout=block_timeout,
        )

    # -- querying ----------------------------------------------------------

    def query(
        self,
        selector: MatcherSpec,
        start: Union[Timestamp, _dt.timedelta, None] = None,
        end: Optional[Timestamp] = None,
        step: Union[int, _dt.timedelta, None] = None,
        fn: Optional[str] = None,
        last: bool = False,
        group_by: Union[str, Sequence[str], None] = None,
        agg: Optional[str] = None,
        *,
        limit_series: int = 0,
        max_staleness: Union[int, _dt.timedelta, None] = None,
        timeout: Optional[float] = None,
    ) -> "QueryStream":
        """Query samples; returns a stream of :class:`Series`.

        Args:
            selector: which series: a selector string such as
                ``'cpu{host="a",region=~"eu.*"}'``, a dict of label values,
                or a list of Matcher / (name, op, value).
            start: inclusive, int ms or an aware datetime; a timedelta means
                that long before ``end``. Required unless ``last``.
            end: inclusive, int ms or an aware datetime; default now.
            step: downsample into buckets of this many ms (or a timedelta),
                aligned to multiples of the step since the epoch.
            fn: downsample function: avg (default), sum, min, max, count,
                first, last. Needs ``step``.
            last: return only the newest point of each series at or before
                ``end`` (``start`` then bounds how far back; default: no
                bound).
            group_by: label name(s) to group by; needs ``agg``.
            agg: combine series per timestamp with this function (avg, sum,
                min, max, count, first, last), per group.
            limit_series: refuse the query if more series match (0: server
                default).
            max_staleness: through a coordinator, how far behind ``end`` the
                answer may be (int ms or a timedelta): edges whose data the
                coordinators hold within it are not asked, and the stream's
                ``fresh_through_ms`` says how fresh the answer is. None: the
                coordinator's default; 0: the freshest answer. A node
                ignores it.
            timeout: seconds for the whole stream (default: the client's).

        The stream is opened before this returns, so a bad request raises
        here. Opening is retried on UNAVAILABLE/RESOURCE_EXHAUSTED; a stream
        that fails after data started arriving raises while iterating.
        """
        ms = to_matchers(selector)
        end_ms = to_ms(end, "end") if end is not None else int(time.time() * 1000)
        if isinstance(start, _dt.timedelta):
            start_ms = end_ms - start // _dt.timedelta(milliseconds=1)
        elif start is not None:
            start_ms = to_ms(start, "start")
        elif last:
            start_ms = 0
        else:
            raise InvalidArgument("query: start is required (for the last hour: start=timedelta(hours=1))")
        req = pb.QueryRequest(start_ms=start_ms, end_ms=end_ms, matchers=[m.to_proto() for m in ms])
        if last:
            if step is not None or fn is not None:
                raise InvalidArgument("query: last=True takes no step or fn")
            req.mode = pb.QUERY_MODE_LAST_POINT
        elif step is not None:
            req.mode = pb.QUERY_MODE_DOWNSAMPLE
            req.step_ms = _duration_ms(step, "step")
            req.downsample = _aggregate(fn or "avg", "fn")
        else:
            if fn is not None:
                raise InvalidArgument("query: fn=%r needs a step" % (fn,))
            req.mode = pb.QUERY_MODE_RAW
        if agg is not None:
            req.aggregate = _aggregate(agg, "agg")
        if group_by is not None:
            if agg is None:
                raise InvalidArgument("query: group_by needs agg (the function that combines each group)")
            names = [group_by] if isinstance(group_by, str) else list(group_by)
            for i, g in enumerate(names):
                if not isinstance(g, str) or not g:
                    raise InvalidArgument("query: group_by[%d] must be a non-empty label name, got %r" % (i, g))
                check_utf8(g, "query: group_by[%d]" % i)
            req.group_by.extend(names)
        if isinstance(limit_series, bool) or not isinstance(limit_series, int) or limit_series < 0:
            raise InvalidArgument("query: limit_series must be an int >= 0, got %r" % (limit_series,))
        req.limit_series = limit_series
        if max_staleness is not None:
            if isinstance(max_staleness, _dt.timedelta):
                # Rounded up to whole milliseconds.
                ms = -(-max_staleness // _dt.timedelta(microseconds=1) // 1000)
            elif isinstance(max_staleness, numbers.Integral) and not isinstance(max_staleness, bool):
                ms = int(max_staleness)
            else:
                raise InvalidArgument("query: max_staleness: want int milliseconds or a timedelta, got %s" % type(max_staleness).__name__)
            if not 0 <= ms < 1 << 63:
                raise InvalidArgument("query: max_staleness must not be negative (and within int64), got %d ms" % ms)
            req.max_staleness_ms = ms
        return QueryStream(self, req, self._deadline(timeout))

    def series(
        self,
        selector: MatcherSpec,
        start: Optional[Timestamp] = None,
        end: Optional[Timestamp] = None,
        limit: int = 0,
        *,
        timeout: Optional[float] = None,
    ) -> List[Dict[str, str]]:
        """List the series matching selector, as label dicts (with
        ``__name__``). ``limit`` caps the answer (0: server default); start
        and end are passed on to servers that bound the listing by time."""
        ms = to_matchers(selector)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidArgument("series: limit must be an int >= 0, got %r" % (limit,))
        req = pb.SeriesRequest(
            matchers=[m.to_proto() for m in ms],
            start_ms=to_ms(start, "start") if start is not None else 0,
            end_ms=to_ms(end, "end") if end is not None else 0,
            limit=limit,
        )
        resp = self._unary("QueryService/Series", self._query.Series, req, timeout)
        return [{lb.name: lb.value for lb in s.labels} for s in resp.series]  # type: ignore[attr-defined]

    def label_names(self, selector: Optional[MatcherSpec] = None, *, timeout: Optional[float] = None) -> List[str]:
        """List label names, of all series or of those matching selector."""
        req = pb.LabelNamesRequest()
        if selector is not None:
            req.matchers.extend(m.to_proto() for m in to_matchers(selector))
        resp = self._unary("QueryService/LabelNames", self._query.LabelNames, req, timeout)
        return list(resp.names)  # type: ignore[attr-defined]

    def label_values(self, name: str, selector: Optional[MatcherSpec] = None, *, timeout: Optional[float] = None) -> List[str]:
        """List the values of label ``name`` (``"__name__"`` for metric
        names), of all series or of those matching selector."""
        if not isinstance(name, str) or not name:
            raise InvalidArgument("label_values: name must be a non-empty str, got %r" % (name,))
        check_utf8(name, "label_values: name")
        req = pb.LabelValuesRequest(name=name)
        if selector is not None:
            req.matchers.extend(m.to_proto() for m in to_matchers(selector))
        resp = self._unary("QueryService/LabelValues", self._query.LabelValues, req, timeout)
        return list(resp.values)  # type: ignore[attr-defined]

    def status(self, *, timeout: Optional[float] = None) -> Status:
        """Return the server's identity and counters."""
        r = self._unary("QueryService/Status", self._query.Status, pb.StatusRequest(), timeout)
        return Status(**{f: getattr(r, f) for f in Status.__dataclass_fields__})


class QueryStream(Iterator[Series]):
    """The answer of Client.query: an iterator of :class:`Series`.

    A series that the server sends in several messages is joined; only one
    series is held in memory at a time. ``source`` says where the answer
    came from (``"raw"``, ``"rollup_1h"``, ``"rollup_1d"``, ``"last"``),
    ``warnings`` lists what the server says is missing, once read, and
    ``fresh_through_ms`` (once read) is the time through which a
    coordinator's answer given with ``max_staleness`` holds every edge's
    data (0: as fresh as its sources).

    Close it (or use it as a context manager, or exhaust it) to free the
    call; breaking out of a for loop early without closing leaves the call
    open until the stream is garbage-collected. Not safe for concurrent use.
    """

    def __init__(self, client: Client, request: pb.QueryRequest, timeout: Optional[float]) -> None:
        self.source = ""
        self.warnings: List[str] = []
        self.fresh_through_ms = 0
        self._client = client
        self._done = False
        self._current: Optional[Series] = None
        self._current_index = -1
        self._call = None

        def open_stream():
            call = client._query.Query(request, timeout=timeout, metadata=client._metadata)
            try:
                first = next(call, None)
            except grpc.RpcError:
                call.cancel()
                raise
            return call, first

        self._call, first = client._retrying("QueryService/Query", open_stream)
        self._buffered = first
        if first is None:
            self._done = True
        else:
            # Known as soon as the stream is open.
            self.source = first.source

    def _read(self):
        if self._buffered is not None:
            m, self._buffered = self._buffered, None
            return m
        if self._done:
            return None
        try:
            return next(self._call, None)
        except grpc.RpcError as e:
            self._done = True
            if self._client.closed:
                raise self._client._closed_error("client was closed during the query", "QueryService/Query", 1) from None
            raise from_rpc_error(e, "QueryService/Query", self._client.address, 1) from None

    def __iter__(self) -> "QueryStream":
        return self

    def __next__(self) -> Series:
        while True:
            msg = self._read()
            if msg is None:
                self._done = True
                cur, self._current = self._current, None
                if cur is None:
                    raise StopIteration
                return cur
            if msg.source and not self.source:
                self.source = msg.source
            self.warnings.extend(msg.warnings)
            if msg.fresh_through_ms:
                self.fresh_through_ms = msg.fresh_through_ms
            if msg.series_index < 0:
                continue
            if self._current is not None and msg.series_index == self._current_index:
                self._current.timestamps.extend(msg.timestamps_ms)
                self._current.values.extend(msg.values)
                continue
            prev = self._current
            self._current = Series(
                labels={lb.name: lb.value for lb in msg.series.labels},
                timestamps=list(msg.timestamps_ms),
                values=list(msg.values),
            )
            self._current_index = msg.series_index
            if prev is not None:
                return prev

    def close(self) -> None:
        """Cancel the call if it is still running. Idempotent."""
        self._done = True
        self._buffered = None
        self._current = None
        if self._call is not None:
            self._call.cancel()

    def __enter__(self) -> "QueryStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
